"""The parts of the live fuzzer that need no guests: the connection state learnt from frames
(a real rxe rping capture, ibwire gen captures), shots and their rendering against a
connection, the seeded drawer, the in-flight hook (frames from gen, no forwarder), the
console scanner, bounded shrinking with a predicate standing in for fresh guest pairs, the
findings directory, and ``ibwire fuzz --target live:`` with and without ``ibwire.impair``."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from ibwire import crc, parse
from ibwire.cli.main import main
from ibwire.errors import IbwireError
from ibwire.livefuzz.console import scan
from ibwire.livefuzz.drawer import Drawer
from ibwire.livefuzz.findings import FindingsDir, LiveFinding, read_shots
from ibwire.livefuzz.hook import InFlightMutator, Mutated, forwarder_class, mutations
from ibwire.livefuzz.retarget import InFlightShots, shot_of_mutation
from ibwire.livefuzz.shots import Coverage, Ref, Shot, render, shots
from ibwire.livefuzz.shrink import Trials, bisect_batch, shrink_shot
from ibwire.livefuzz.state import LiveState, QpState
from ibwire.pcap import read_capture
from tests.corpus import ROOT

RPING = ROOT / "captures" / "rxe" / "rxe-rping-cm.pcap"
MAC = "02:00:00:00:00:aa"


def frames_of(path: Path) -> list[bytes]:
    return [bytes(r.frame) for r in read_capture(str(path))]


@pytest.fixture(scope="module")
def gen_frames(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    out = tmp_path_factory.mktemp("gen")
    frames = []
    for verb in ("write", "read", "fetch_add", "send"):
        path = out / f"{verb}.pcap"
        subprocess.run([sys.executable, "-m", "ibwire.cli.main", "gen", "-o", str(path),
                        "--verb", verb, "--size", "2048", "--iters", "2", "--no-progress"],
                       check=True, capture_output=True)
        frames += frames_of(path)
    return frames


def conn() -> tuple[QpState, QpState]:
    a = QpState("10.77.0.1", 17, "52:54:00:77:00:01", ("10.77.0.2", 18), recv_psn=100,
                send_psn=0xFFFFF0, msn=3, comm_id=5, peer_comm_id=6, service_id=0x1061C06)
    b = QpState("10.77.0.2", 18, "52:54:00:77:00:02", ("10.77.0.1", 17), recv_psn=0xFFFFF0,
                send_psn=100, msn=4, comm_id=6, peer_comm_id=5, service_id=0x1061C06)
    return a, b


# -- state ----------------------------------------------------------------------------------


def test_state_learns_rpings_connection_from_its_cm_exchange_and_follows_the_psns():
    frames = frames_of(RPING)
    rows = [parse(f).fields() for f in frames]
    dreq = next(i for i, r in enumerate(rows) if r.get("mad.attributeid") == 0x15)
    state = LiveState()
    for frame in frames[:dreq]:
        state.feed(frame)
    req = next(r for r in rows if r.get("mad.attributeid") == 0x10)
    rep = next(r for r in rows if r.get("mad.attributeid") == 0x13)
    found = state.connection(req["cm.req.serviceid"])
    assert found is not None
    ends = {q.address: q for q in found}
    active, passive = ends[req["ip.src"]], ends[rep["ip.src"]]
    assert (active.qpn, passive.qpn) == (req["cm.req.localqpn"], rep["cm.rep.localqpn"])
    assert (active.comm_id, passive.comm_id) == (req["cm.req"], rep["cm.rep"])
    assert active.peer == passive.key and passive.peer == active.key
    # the next PSN each end expects: one past the last request to it (rping's READs are
    # 64 bytes: one response packet each), counted here from the rows themselves
    for end in (active, passive):
        psns = [r["bth.psn"] for r in rows[:dreq] if r.get("ip.dst") == end.address
                and r["bth.destqp"] == end.qpn and r["bth.opcode"] not in range(0x0D, 0x13)]
        assert end.recv_psn == (psns[-1] + 1) % (1 << 24)
        assert state.qps[end.peer].send_psn == end.recv_psn
        # what its peer answered of its requests: one past the last response's PSN
        answered = [r["bth.psn"] for r in rows[:dreq] if r.get("ip.dst") == end.address
                    and r["bth.destqp"] == end.qpn and r["bth.opcode"] in (0x0F, 0x10, 0x11)]
        assert end.acked_psn == (answered[-1] + 1) % (1 << 24)
        assert end.outstanding == (end.acked_psn != end.send_psn)
    acks = [r for r in rows[:dreq] if r["bth.opcode"] == 0x11 and r["ip.src"] == passive.address]
    assert passive.msn == acks[-1]["aeth.msn"]
    assert active.mac == rows[0]["eth.src"] if rows[0]["ip.src"] == active.address else True
    for frame in frames[dreq:]:
        state.feed(frame)
    assert state.connection(req["cm.req.serviceid"]) is None  # disconnected


def test_state_pairs_queue_pairs_without_cm_by_who_answers(tmp_path: Path):
    path = tmp_path / "nocm.pcap"
    subprocess.run([sys.executable, "-m", "ibwire.cli.main", "gen", "-o", str(path), "--verb",
                    "write", "--no-cm", "--iters", "3", "--no-progress"], check=True,
                   capture_output=True)
    state = LiveState()
    for frame in frames_of(path):
        state.feed(frame)
    (a, b), = state.connections()
    assert a.peer == b.key and b.peer == a.key
    assert {a.comm_id, b.comm_id} == {None}


def test_state_ignores_what_is_not_rocev2():
    state = LiveState()
    state.feed(b"\xff" * 60)
    state.feed(b"")
    assert state.qps == {} and state.frames == 2


# -- shots ----------------------------------------------------------------------------------


def test_a_shot_renders_against_the_connection_it_names():
    a, b = conn()
    shot = Shot("request", 1, "psn", {"bth.opcode": 0x04, "bth.psn": Ref("recv_psn", 2**23)},
                b"abcd")
    frame = render(shot, (a, b), MAC)
    f = parse(frame).fields()
    assert (f["bth.destqp"], f["ip.dst"], f["ip.src"]) == (18, "10.77.0.2", "10.77.0.1")
    assert f["bth.psn"] == (0xFFFFF0 + 2**23) % 2**24  # wraps at 24 bits
    assert f["eth.src"] == MAC and f["eth.dst"] == b.mac
    assert crc.verify(frame, "ethernet").icrc_ok
    cm = Shot("cm", 0, "cm.DisconnectRequest",
              {"mad.mgmtclass": 7, "mad.attributeid": 0x15, "mad.baseversion": 1,
               "mad.classversion": 2, "mad.method": 3,
               "cm.dreq.localcommid": Ref("peer_comm_id"), "cm.dreq.remotecommid": Ref("comm_id")})
    f = parse(render(cm, (a, b), MAC)).fields()
    assert (f["bth.destqp"], f["deth.srcqp"], f["deth.q_key"]) == (1, 1, 0x80010000)
    assert (f["cm.dreq.localcommid"], f["cm.dreq.remotecommid"]) == (6, 5)


def test_drawn_shots_round_trip_render_with_good_crcs_and_repeat_with_the_seed():
    a, b = conn()
    other = (QpState("10.77.0.1", 40, a.mac, recv_psn=7, send_psn=9, comm_id=1,
                     peer_comm_id=2), QpState("10.77.0.2", 41, b.mac, recv_psn=9, send_psn=7,
                                              comm_id=2, peer_comm_id=1))
    drawn = [Drawer(5).draw(shots((a, b), MAC)) for _ in range(1)]
    drawer = Drawer(5)
    drawn = [drawer.draw(shots((a, b), MAC)) for _ in range(150)]
    again = Drawer(5)
    assert [again.draw(shots((a, b), MAC)).dumps() for _ in range(150)] == \
        [s.dumps() for s in drawn]
    coverage = Coverage()
    placed = good = 0
    for shot in drawn:
        assert Shot.from_json(json.loads(shot.dumps())) == shot
        coverage.add(shot)
        for c in ((a, b), other):
            frame = render(shot, c, MAC)
            try:
                verdict = crc.verify(frame, "ethernet", lenient=True)
            except IbwireError:
                continue  # cut before the CRC could be placed
            placed += 1
            good += bool(verdict.icrc_ok)
    assert good == placed > 200
    assert set(coverage.as_dict()) == {"packets", "opcodes", "cm_attributes", "kinds"}
    roles = Counter(s.role for s in drawn)
    assert set(roles) == {"request", "response", "cm"}
    assert any("mutated" in k for k in coverage.kinds)
    assert len(coverage.attributes) >= 5 and len(coverage.opcodes) >= 10


def test_a_mutation_moves_with_the_connection():
    """The edits of a mutated() break are XOR masks: rendered against another connection the
    frame differs from that connection's unbroken frame exactly as it did on the first."""
    a, b = conn()
    other = (QpState("10.77.0.1", 90, a.mac, recv_psn=1, send_psn=2),
             QpState("10.77.0.2", 91, b.mac, recv_psn=2, send_psn=1))
    drawer = Drawer(11)
    broken = next(s for s in (drawer.draw(shots((a, b), MAC, ("request",)))
                              for _ in range(200)) if s.edits and s.cut is None)
    plain = Shot(broken.role, broken.to, broken.kind, broken.fields, broken.payload,
                 reseal=False)
    unsealed = Shot(broken.role, broken.to, broken.kind, broken.fields, broken.payload,
                    broken.edits, reseal=False)

    def diff(c: tuple[QpState, QpState]) -> list[tuple[int, int]]:
        x, y = render(plain, c, MAC), render(unsealed, c, MAC)
        return [(i, p ^ q) for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q]

    assert diff((a, b)) == diff(other) == list(broken.edits)


# -- the in-flight hook -----------------------------------------------------------------------


def test_the_hook_mutates_at_its_rate_reseals_and_logs(gen_frames: list[bytes]):
    nothing = InFlightMutator(rate=0.0)
    assert all(nothing(f, 0, None) is None for f in gen_frames) and nothing.log == []
    every = InFlightMutator(rate=1.0, seed=2)
    sent = [every(f, i % 2, None) for i, f in enumerate(gen_frames * 4)]
    assert len(every.log) == sum(s is not None for s in sent) > 0.75 * len(sent)
    placed = good = 0
    for m in every.log:
        assert m.sent[0] != m.original
        try:
            verdict = crc.verify(m.sent[0], "ethernet", lenient=True)
        except IbwireError:
            continue
        placed += 1
        good += bool(verdict.icrc_ok)
    assert good == placed > 0.8 * len(every.log)
    assert {"psn", "opcode", "pkey"} <= set(every.kinds)
    assert any(k.startswith("mutated") for k in every.kinds) and "mad" in every.kinds
    same = InFlightMutator(rate=0.3, seed=9)
    twin = InFlightMutator(rate=0.3, seed=9)
    assert [same(f, 0) for f in gen_frames] == [twin(f, 0) for f in gen_frames]
    assert InFlightMutator(rate=1.0)(b"\x00" * 64, 0) is None  # not RoCE: left alone


def test_mutations_lie_about_the_frames_own_values(gen_frames: list[bytes]):
    drawer = Drawer(4)
    write_first = next(f for f in gen_frames if parse(f).fields().get("bth.opcode") == 0x06)
    before = parse(write_first).fields()
    seen = set()
    for _ in range(120):
        found = drawer.draw(mutations(write_first))
        assert found is not None
        frame, kind = found
        if kind in ("psn", "reth.dmalen", "opcode"):
            after = parse(frame).fields()
            key = {"psn": "bth.psn", "reth.dmalen": "reth.dmalen", "opcode": "bth.opcode"}[kind]
            seen.add(kind)
            if kind == "opcode":
                assert after[key] in (0x07, 0x08, 0x0A)
            assert {k: v for k, v in after.items() if k not in (key, "icrc")} == \
                {k: v for k, v in before.items() if k not in (key, "icrc")} or kind == "opcode"
    assert seen == {"psn", "reth.dmalen", "opcode"}


def test_live_target_without_impair_says_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path):
    monkeypatch.setitem(sys.modules, "ibwire.impair", None)
    with pytest.raises(IbwireError, match="ibwire impair"):
        forwarder_class()
    assert main(["fuzz", "--target", "live:a,b", "--out", str(tmp_path)]) == 2
    assert "ibwire.impair.Forwarder" in capsys.readouterr().err
    assert main(["fuzz", "--target", "live:a", "--out", str(tmp_path)]) == 2
    assert main(["fuzz", "--target", "live:a,b", "--rate", "2", "--out", str(tmp_path)]) == 2


def test_live_target_drives_impairs_forwarder_with_the_hook(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path, gen_frames: list[bytes]):
    """A stand-in for ibwire.impair's Forwarder, with the contract's signature, carrying the
    gen frames through the hook."""
    made = {}

    class Forwarder:
        def __init__(self, iface_a, iface_b, plan=None, hook=None, capture=None,
                     manifest=None):
            made.update(ifaces=(iface_a, iface_b), hook=hook, capture=capture)
            self.out: list[bytes] = []

        def run(self, duration=None, count=None):
            made["duration"] = duration
            for i, frame in enumerate(gen_frames):
                got = made["hook"](frame, i % 2, {})
                self.out += [frame] if got is None else list(got)

        def stop(self):
            made["stopped"] = True

        def inject(self, frame, direction):
            self.out.append(frame)

    monkeypatch.setitem(sys.modules, "ibwire.impair",
                        types.SimpleNamespace(Forwarder=Forwarder))
    out = tmp_path / "live"
    assert main(["fuzz", "--target", "live:veth0,veth1", "--rate", "0.5", "--seed", "3",
                 "--time-limit", "7", "--out", str(out)]) == 0
    assert made["ifaces"] == ("veth0", "veth1") and made["stopped"]
    assert made["duration"] == 7
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == len(gen_frames) and 0 < summary["mutated"] < len(gen_frames)
    pairs = frames_of(out / "mutations.pcap")
    assert len(pairs) == 2 * summary["mutated"]
    assert all(pairs[i] in gen_frames and pairs[i + 1] != pairs[i]
               for i in range(0, len(pairs), 2))
    assert f"{summary['mutated']} mutated" in capsys.readouterr().out


# -- console, shrinking, findings -----------------------------------------------------------

CONSOLE = """[   23.3] eth0 speed is unknown, defaulting to 1000
[   41.1] ------------[ cut here ]------------
[   41.2] WARNING: CPU: 0 PID: 0 at drivers/infiniband/sw/rxe/rxe_comp.c:756 rxe_completer+0x86c/0xd60 [rdma_rxe]
[   41.2] Modules linked in: ib_umad rdma_ucm rdma_cm
[   41.2] RIP: 0010:rxe_completer+0x86c/0xd60 [rdma_rxe]
[   41.3] ---[ end trace 0000000000000000 ]---
[   50.0] refcount_t: underflow; use-after-free.
[   50.0] WARNING: CPU: 0 PID: 12 at lib/refcount.c:28 refcount_warn_saturate+0xba/0x110
[   50.1] RIP: 0010:refcount_warn_saturate+0xba/0x110
[   60.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:33]
[   70.0] INFO: task rping:120 blocked for more than 120 seconds.
[   80.0] general protection fault, probably for non-canonical address 0xdead: 0000 [#1]
[   80.1] RIP: 0010:rxe_responder+0x1a/0x900 [rdma_rxe]
"""


def test_console_reports_become_signatures():
    found = scan(CONSOLE)
    assert found[0].signature == "warning|drivers/infiniband/sw/rxe/rxe_comp.c:756"
    assert found[1].signature == "refcount|refcount_warn_saturate"
    kinds = [s.kind for s in found]
    assert kinds == ["warning", "refcount", "bug", "hung-task", "general-protection"]
    assert "rxe_completer+0x86c" in found[0].excerpt and "end trace" in found[0].excerpt
    assert found[4].signature == "general-protection|rxe_responder"
    assert scan("[ 1.0] eth0 speed is unknown\n[ 2.0] rdma_rxe: loaded\n") == []


#: A NULL dereference in interrupt context, as Debian's 6.1.192 printed it in the rig (shortened).
CRASH = """[   16.0755] BUG: kernel NULL pointer dereference, address: 0000000000000104
[   16.0759] #PF: supervisor read access in kernel mode
[   16.0760] #PF: error_code(0x0000) - not-present page
[   16.0762] PGD 0 P4D 0
[   16.0764] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   16.0766] CPU: 0 PID: 0 Comm: swapper/0 Not tainted 6.1.0-57-amd64 #1  Debian 6.1.192-3
[   16.0768] RIP: 0010:rxe_mr_copy+0x49/0x1a0 [rdma_rxe]
[   16.0787] Call Trace:
[   16.0792]  <IRQ>
[   16.0795]  rxe_responder+0x1692/0x1cf0 [rdma_rxe]
[   16.0854] ---[ end trace 0000000000000000 ]---
[   16.0855] RIP: 0010:rxe_mr_copy+0x49/0x1a0 [rdma_rxe]
[   16.0860] Kernel panic - not syncing: Fatal exception in interrupt
[   16.0862] Kernel Offset: 0xf400000 from 0xffffffff81000000
"""


def test_an_oops_and_the_panic_it_ends_in_are_one_report():
    found = scan(CRASH)
    assert [s.signature for s in found] == ["bug|rxe_mr_copy"]
    assert "rxe_responder+0x1692" in found[0].excerpt
    # a panic of its own (no oops before it) is still a report
    alone = scan("[ 1.0] Kernel panic - not syncing: VFS: Unable to mount root fs\n")
    assert [s.kind for s in alone] == ["panic"]


def test_bisect_then_shrink_within_the_trial_bound():
    mark = b"TRAP"
    batch = [Shot("request", 0, "x", {"bth.opcode": 4, "bth.psn": Ref("recv_psn", i)},
                  bytes(20)) for i in range(7)]
    marked = Shot("request", 0, "marked",
                  {"bth.opcode": 4, "bth.psn": Ref("recv_psn", 5), "bth.se": 1,
                   "bth.p_key": 0x7FFF}, b"\x01" * 30 + mark + b"\x02" * 30,
                  edits=((60, 1),))
    batch.insert(5, marked)
    runs = []

    def reproduces(part):
        runs.append(len(part))
        return any(mark in s.payload for s in part)

    trials = Trials(8)
    (found,) = bisect_batch(batch, reproduces, trials)
    assert found == marked and trials.used == len(runs) <= 1 + 2 * 3
    # out of trials: the smallest part reached so far, the marked shot in it
    part = bisect_batch(batch, reproduces, Trials(3))
    assert part is not None and marked in part and len(part) == 4
    small = shrink_shot(found, reproduces, Trials(30))
    assert mark in small.payload and len(small.payload) < len(marked.payload)
    assert small.edits == () and set(small.fields) == {"bth.opcode"}
    bounded = Trials(2)
    assert shrink_shot(found, reproduces, bounded) != found and bounded.used == 2
    assert bisect_batch(batch, lambda part: False, Trials(30)) is None
    both = bisect_batch(batch, lambda part: batch[0] in part and batch[7] in part, Trials(30))
    assert both is None  # neither half alone shows it (the caller then tries the whole)


def test_findings_dir_writes_batch_repro_and_index(tmp_path: Path):
    a, b = conn()
    out = FindingsDir(tmp_path)
    batch = [Shot("request", 0, "x", {"bth.opcode": 4, "bth.psn": Ref("recv_psn")}, b"hi")]
    finding = LiveFinding("console", "warning|x.c:1", "WARNING: ...", "6.1.0")
    where = out.add(finding, batch, [render(batch[0], (a, b), MAC)], (a, b), "rping-live",
                    "WARNING: ... at x.c:1")
    assert "warning|x.c:1" in out
    out.set_repro(finding, batch, [render(batch[0], (a, b), MAC)], (a, b), "rping-live",
                  "python tools/fuzz_live.py replay x")
    assert {p.name for p in where.iterdir()} == {"batch.pcap", "batch.json", "console.txt",
                                                 "finding.json", "repro.pcap", "repro.json"}
    scenario, again, shots_back = read_shots(where / "repro.json")
    assert scenario == "rping-live" and again == (a, b) and shots_back == batch
    index = [json.loads(line) for line in (tmp_path / "findings.jsonl").read_text().splitlines()]
    assert index[0]["repro_packets"] == 1 and index[0]["command"].endswith("replay x")
    assert len(frames_of(where / "repro.pcap")) == 1


# -- in-flight mutations kept as shots -------------------------------------------------------


def test_an_inflight_mutation_becomes_a_shot_that_gives_back_the_frame_and_moves(
        gen_frames: list[bytes]):
    """Rendered against the connection it was taken from, the shot is the frame that was
    sent; against a fresh one, the same lie at the same place of that connection's PSN
    space, with its addresses and QPN."""
    write_first = next(f for f in gen_frames if parse(f).fields().get("bth.opcode") == 0x06)
    f = parse(write_first).fields()
    a = QpState("192.0.2.1", 300, f["eth.src"], recv_psn=5)
    b = QpState(f["ip.dst"], f["bth.destqp"], f["eth.dst"], recv_psn=(f["bth.psn"] - 2) % 2**24)
    fresh = (QpState("10.9.0.1", 7, "52:54:00:00:00:0a", recv_psn=1),
             QpState("10.9.0.2", 0x1234, "52:54:00:00:00:0b", recv_psn=0xFFFFFF))
    drawer = Drawer(8)
    kinds = set()
    for _ in range(60):
        found = drawer.draw(mutations(write_first))
        assert found is not None
        sent, kind = found
        m = Mutated(0, write_first, (sent,), kind, 0x06)
        shot = shot_of_mutation(m, (a, b), 1, MAC)
        assert shot is not None and shot.template == write_first
        assert render(shot, (a, b), MAC) == sent
        moved = render(shot, fresh, MAC)
        assert len(moved) == len(sent)
        if kind in ("reth.dmalen", "reth.va", "pkey"):  # headers intact: they read back
            g, h = parse(moved).fields(), parse(sent).fields()
            assert (g["ip.dst"], g["bth.destqp"], g["eth.dst"]) == \
                ("10.9.0.2", 0x1234, "52:54:00:00:00:0b")
            assert g["bth.psn"] == (0xFFFFFF + 2) % 2**24
            assert {k: v for k, v in g.items() if not k.startswith(("eth.", "ip.")) and
                    k not in ("bth.destqp", "bth.psn", "icrc")} == \
                {k: v for k, v in h.items() if not k.startswith(("eth.", "ip.")) and
                 k not in ("bth.destqp", "bth.psn", "icrc")}
            assert crc.verify(moved, "ethernet").icrc_ok
            kinds.add(kind)
    assert kinds


def test_the_inflight_hook_learns_the_connection_and_keeps_its_mutations_as_shots(
        gen_frames: list[bytes]):
    hook = InFlightShots(InFlightMutator(rate=1.0, seed=5), MAC)
    sides = {}
    for frame in gen_frames:
        sides.setdefault(frame[6:12], len(sides) % 2)
        hook(frame, sides[frame[6:12]])
    kept = [s for s in hook.shots if s is not None]
    assert len(hook.shots) == len(hook.mutator.log) > 0.75 * len(gen_frames)
    # only the CM exchanges before each connection is known are left out
    assert len(kept) >= len(hook.shots) - 3 * 4
    assert {s.role for s in kept} == {"request", "response", "cm"}
    assert len(hook.state.qps) >= 2  # learnt from what came, not what was sent (DREQ ends it)
    last = hook.since(len(hook.shots) - 5)
    assert [s for s, _ in last] == [s for s in hook.shots[-5:] if s is not None]
    assert all(render(s, (QpState("10.1.0.1", 5, "52:54:00:00:00:01", recv_psn=0),
                          QpState("10.1.0.2", 6, "52:54:00:00:00:02", recv_psn=0)), MAC)
               != sent for s, sent in last)  # each with the frame it sent, moved elsewhere
    assert [sent for _, sent in hook.since(0)] == [
        m.sent[0] for m, s in zip(hook.mutator.log, hook.shots, strict=True) if s is not None]
    a_mac, b_mac = list(sides)
    # to B's MAC: out on the port B's frames arrive on (direction 0 is "out on B")
    assert hook.direction_to(b_mac + a_mac + b"\x08\x00") == 1 - sides[b_mac] == 0
    coverage = Coverage()
    for shot in kept:
        coverage.add(shot)
    assert any(k.startswith("in-flight ") for k in coverage.kinds)
    assert any(v for v in coverage.attributes.values())
