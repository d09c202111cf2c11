"""Each fault kind of ``ibwire impair`` on a scripted RoCE conversation through veth pairs:
what arrives at the far side, the -w capture and the manifest agree (root; skipped else).

The conversation is ``ibwire gen``'s (CM exchange, then 4 RDMA WRITEs of 4 KiB at a PMTU of
1024, each ACKed): requester frames are sent from host A, responder frames from host B,
one every 2 ms, in gen's order.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ibwire.dissect import parse
from ibwire.gen import QpSpec, Scenario, generate
from ibwire.impair import _io
from ibwire.pcap import read_capture
from ibwire.rewrite.checksum import ones_sum
from tests.impair.lab import Lab, Running, drain

SCENARIO = Scenario(qps=(QpSpec(verb="write", size=4096, iters=4),), cm=True).check()
START = SCENARIO.start_psn(0)
REQUESTER_QPN, RESPONDER_QPN = SCENARIO.qpns(0)
REQUESTER_MAC = bytes.fromhex("020000000001")
ACK_SYNDROME_PSN_SEQ_ERR = 0x60


def test_fast_path_loaded() -> None:
    if os.environ.get("IBWIRE_NO_EXTENSIONS") == "1":
        assert _io.implementation == "python"
    else:
        assert _io.implementation == "c", "ibwire.impair._fast did not load"


def conversation(scenario: Scenario = SCENARIO) -> list[tuple[str, bytes]]:
    """gen's frames by side, each ACK moved to just after the request it answers (gen's link
    delivers them later), so that a fault in message 3 sees messages 1 and 2 ACKed."""
    frames, _ = generate(scenario)
    ordered = [("a" if f[6:12] == REQUESTER_MAC else "b", f) for _, f in frames]
    for ack in [x for x in ordered if parse(x[1]).is_ib
                and parse(x[1]).fields()["bth.opcode"] == 0x11]:
        ordered.remove(ack)
        psn = parse(ack[1]).fields()["bth.psn"]
        at = next(i for i, (s, f) in enumerate(ordered) if s == "a" and parse(f).is_ib
                  and parse(f).fields()["bth.psn"] == psn)
        ordered.insert(at + 1, ack)
    return ordered


class Run:
    def __init__(self, at_a: list[bytes], at_b: list[bytes], manifest: dict[str, Any],
                 records: list[bytes], sent: list[tuple[str, bytes]]) -> None:
        self.at_a, self.at_b, self.manifest, self.records, self.sent = (
            at_a, at_b, manifest, records, sent)

    def faults(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.manifest["faults"] if f["kind"] == kind]

    def record(self, n: int) -> bytes:
        return self.records[n - 1]


def exchange(lab: Lab, tmp: Path, plan: list[tuple[str, str]], hook: Any = None,
             frames: list[tuple[str, bytes]] | None = None, gap: float = 0.002,
             settle: int = 0) -> Run:
    """``frames`` (gen's conversation by default) sent from their sides ``gap`` s apart
    (after the first ``settle`` frames, sent 50 ms apart), through a forwarder with
    ``plan``; what arrived at each side, the manifest and the capture."""
    frames = conversation() if frames is None else frames
    sockets = {"a": lab.raw("a"), "b": lab.raw("b")}
    capture = tmp / "crossed.pcap"
    forwarder = lab.forwarder(plan, hook=hook, capture=str(capture),
                              manifest=str(tmp / "m.json"))
    with Running(forwarder) as running:
        for k, (side, frame) in enumerate(frames):
            sockets[side].send(frame)
            time.sleep(0.05 if k < settle else gap)
        time.sleep(0.2)
    at_a, at_b = drain(sockets["a"]), drain(sockets["b"])
    for s in sockets.values():
        s.close()
    records = [bytes(r.frame) for r in read_capture(str(capture))]
    return Run(at_a, at_b, running.manifest, records, frames)


def psns(frames: list[bytes], opcode_kind: str = "request") -> list[int]:
    out = []
    for f in frames:
        p = parse(f)
        if not p.is_ib:
            continue
        is_ack = p.fields()["bth.opcode"] == 0x11
        if (opcode_kind == "request") != is_ack and p.fields()["bth.destqp"] != 1:
            out.append(p.fields()["bth.psn"])
    return out


def requests_from(frames: list[tuple[str, bytes]]) -> list[bytes]:
    return [f for side, f in frames if side == "a"]


def test_no_faults_every_frame_crosses_unchanged(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [])
    assert run.at_b == [f for s, f in run.sent if s == "a"]
    assert run.at_a == [f for s, f in run.sent if s == "b"]
    assert sorted(run.records) == sorted(f for _, f in run.sent)
    assert run.manifest["records"] == len(run.sent)
    assert run.manifest["faults"] == []
    [qp] = run.manifest["qps"]
    assert qp["requester"]["qpn"] == REQUESTER_QPN and qp["responder"]["qpn"] == RESPONDER_QPN
    assert qp["start_psn"] == START and qp["cm"]


def test_drop_removes_exactly_the_named_request(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("drop", "qp=0,psn=5")])
    [fault] = run.faults("drop")
    assert fault["psn"] == START + 5 and fault["qp"] == 0
    assert parse(run.record(fault["record"])).fields()["bth.psn"] == START + 5
    expected = [p for p in psns(requests_from(run.sent)) if p != START + 5]
    assert psns(run.at_b) == expected
    assert run.manifest["dropped"] == 1


def test_corrupt_sends_a_wrong_icrc_and_records_it(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("corrupt", "qp=0,psn=3")])
    [fault] = run.faults("corrupt")
    bad = [f for f in run.at_b if parse(f).is_ib and not parse(f).verify().icrc_ok]
    assert len(bad) == 1 and parse(bad[0]).fields()["bth.psn"] == START + 3
    assert run.record(fault["record"]) == bad[0]


def test_lose_ack_drops_the_answer(lab: Lab, tmp_path: Path) -> None:
    acks = psns([f for s, f in conversation() if s == "b"], "ack")
    run = exchange(lab, tmp_path, [("lose_ack", f"qp=0,psn={acks[1] - START}")])
    [fault] = run.faults("lose_ack")
    assert fault["psn"] == acks[1]
    assert psns(run.at_a, "ack") == [p for p in acks if p != acks[1]]


def test_ecn_mark_sets_ce_and_keeps_crcs(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("ecn", "qp=0,psn=2")])
    marked = [f for f in run.at_b if parse(f).is_ib and parse(f).fields()["ip.dsfield.ecn"] == 3]
    assert len(marked) == 1 and parse(marked[0]).fields()["bth.psn"] == START + 2
    assert parse(marked[0]).verify().icrc_ok
    assert ones_sum(marked[0][14:34]) == 0xFFFF  # the IPv4 header checksum redone
    assert run.record(run.faults("ecn")[0]["record"]) == marked[0]


def test_dup_sends_the_frame_twice_and_records_both(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("dup", "qp=0,psn=4")])
    [fault] = run.faults("dup")
    got = psns(run.at_b)
    assert got.count(START + 4) == 2
    assert len(fault["records"]) == 2
    assert run.record(fault["records"][0]) == run.record(fault["records"][1])


def test_reorder_swaps_with_the_next(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("reorder", "qp=0,psn=6")])
    got = psns(run.at_b)
    i = got.index(START + 7)
    assert got[i + 1] == START + 6
    assert run.faults("reorder")[0]["sent_ns"] > run.faults("reorder")[0]["time_ns"]


def test_delay_holds_the_frame(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("delay", "us=20000,qp=0,psn=1")])
    got = psns(run.at_b)
    assert got.index(START + 1) > got.index(START + 3)
    [fault] = run.faults("delay")
    assert fault["sent_ns"] - fault["time_ns"] >= 20_000_000


@pytest.mark.parametrize(("kind", "spec", "syndrome"), [
    ("nak", "psn-seq-err,qp=0,psn=9", ACK_SYNDROME_PSN_SEQ_ERR),
    ("rnr", "timer=5,qp=0,psn=9", 0x20 | 5)])
def test_forged_nak_is_a_valid_packet_on_the_live_state(lab: Lab, tmp_path: Path, kind: str,
                                                       spec: str, syndrome: int) -> None:
    run = exchange(lab, tmp_path, [(kind, spec)])
    [fault] = run.faults(kind)
    forged = run.record(fault["record"])
    assert forged in run.at_a
    p = parse(forged)
    f = p.fields()
    assert p.verify().icrc_ok
    assert (f["bth.opcode"], f["bth.psn"], f["bth.destqp"], f["aeth.syndrome"]) == (
        0x11, START + 9, REQUESTER_QPN, syndrome)
    assert f["aeth.msn"] == fault["msn"] == 2  # two messages ACKed before PSN offset 9
    assert (f["ip.src"], f["ip.dst"]) == ("192.0.2.2", "192.0.2.1")
    assert fault["trigger"] < fault["record"]
    delivered = START + 9 in psns(run.at_b)
    assert delivered == (kind == "nak")  # an RNR NAK stands for a request not taken
    if kind == "rnr":  # and the requests after it are discarded until it is sent again
        assert [psn for psn in psns(run.at_b) if psn > START + 9] == []
        assert [parse(run.record(r)).fields()["bth.psn"] for r in fault["discarded"]] == [
            START + k for k in range(10, 16)]


def test_rnr_discards_the_rest_of_its_batch(lab: Lab, tmp_path: Path) -> None:
    """The requests after the refused one, arriving back to back (one batch with the fast
    path), are discarded too: none reaches the responder."""
    frames = [(s, f) for s, f in conversation() if s == "a" or parse(f).fields()[
        "bth.destqp"] == 1]
    run = exchange(lab, tmp_path, [("rnr", "timer=5,qp=0,psn=3")], frames=frames, gap=0,
                   settle=3)
    [fault] = run.faults("rnr")
    assert [p for p in psns(run.at_b) if START + 3 <= p < START + 16] == []
    assert len(fault["discarded"]) == 12


@pytest.mark.parametrize("encapsulation", ["rocev2_ipv6", "rocev1"])
def test_other_encapsulations(lab: Lab, tmp_path: Path, encapsulation: str) -> None:
    """RoCEv2 over IPv6 and RoCEv1 (GRH, EtherType 0x8915): a drop and a forged NAK whose
    addresses are the GRH/IPv6 ones turned around, its ICRC right; CE marks on IPv6 only."""
    scenario = replace(SCENARIO, encapsulation=encapsulation).check()
    run = exchange(lab, tmp_path, [("drop", "qp=0,psn=5"), ("nak", "qp=0,psn=9"),
                                   ("ecn", "qp=0,psn=10")], frames=conversation(scenario))
    assert START + 5 not in psns(run.at_b) and START + 9 in psns(run.at_b)
    [nak] = run.faults("nak")
    p = parse(run.record(nak["record"]))
    assert p.verify().icrc_ok and p.encapsulation == encapsulation
    assert p.fields()["aeth.syndrome"] == 0x60 and p.fields()["bth.destqp"] == REQUESTER_QPN
    assert run.record(nak["record"]) in run.at_a
    if encapsulation == "rocev1":
        assert run.faults("ecn") == [] and "ECN marks are RoCEv2's" in \
            run.manifest["unapplied"][0]["reason"]
    else:
        [ecn] = run.faults("ecn")
        marked = parse(run.record(ecn["record"]))
        assert marked.fields()["ipv6.tclass"] & 3 == 3 and marked.verify().icrc_ok


def test_forged_cnp(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("cnp", "qp=0,psn=12")])
    [fault] = run.faults("cnp")
    p = parse(run.record(fault["record"]))
    assert p.verify().icrc_ok and p.fields()["bth.opcode"] == 0x81
    assert p.fields()["bth.destqp"] == REQUESTER_QPN and p.fields()["bth.becn"] == 1
    assert run.record(fault["record"]) in run.at_a


def test_nth_transmission_selects_the_retransmission(lab: Lab, tmp_path: Path) -> None:
    frames = conversation()
    # PSN offset 2 sent again right after its first transmission (a go-back-N resend)
    i = next(k for k, (s, f) in enumerate(frames)
             if s == "a" and parse(f).is_ib and parse(f).fields()["bth.psn"]
             == START + 2 and parse(f).fields()["bth.destqp"] == RESPONDER_QPN)
    frames.insert(i + 1, frames[i])
    run = exchange(lab, tmp_path, [("drop", "qp=0,psn=2,tx=2")], frames=frames)
    assert psns(run.at_b).count(START + 2) == 1
    [fault] = run.faults("drop")
    assert fault["tx"] == 2 and fault["record"] == i + 2


def test_selectors_direction_opcode_nth_rate(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("drop", "opcode=RC_RDMA_WRITE_MIDDLE,dir=a2b,nth=3"),
                                   ("lose_ack", "dir=a2b,rate=1")])
    [fault] = run.faults("drop")
    assert fault["opcode"] == "RC_RDMA_WRITE_MIDDLE"
    middles = [p for f in requests_from(run.sent) if (p := parse(f)).is_ib
               and p.fields()["bth.opcode"] == 0x07]
    assert fault["psn"] == middles[2].fields()["bth.psn"]
    assert run.faults("lose_ack") == []  # answers go b2a only


def test_non_roce_frames_pass_untouched(lab: Lab, tmp_path: Path) -> None:
    arp = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(range(28)) + bytes(18)
    other = bytearray(conversation()[5][1])
    other[36:38] = (9).to_bytes(2, "big")  # UDP destination port 4791 -> 9: not RoCE
    frames = [("a", arp), ("a", bytes(other))]
    run = exchange(lab, tmp_path, [("drop", "rate=1"), ("corrupt", "rate=1")], frames=frames)
    assert run.at_b == [arp, bytes(other)]
    assert run.manifest["faults"] == []


def test_unseen_qp_is_reported(lab: Lab, tmp_path: Path) -> None:
    run = exchange(lab, tmp_path, [("drop", "qp=3,psn=0"), ("drop", "qpn=0x999")])
    reasons = [u["reason"] for u in run.manifest["unapplied"]]
    assert reasons[0].startswith("qp=3: only 1 connection(s) appeared")
    assert reasons[1].startswith("qpn=0x999: no request to that QP appeared")


def test_hook_sees_every_ib_frame_and_can_drop_or_replace(lab: Lab, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []

    def hook(frame: bytes, direction: int, state: Any) -> list[bytes] | None:
        f = parse(frame).fields()
        seen.append((direction, f["bth.psn"]))
        if f["bth.psn"] == START + 1 and f["bth.destqp"] == RESPONDER_QPN:
            return []
        if f["bth.psn"] == START + 2 and f["bth.destqp"] == RESPONDER_QPN:
            [c] = list(state)
            assert c.peer_qpn == REQUESTER_QPN and c.next_psn == START + 3
            return [frame, frame]
        return None

    run = exchange(lab, tmp_path, [], hook=hook)
    ib = [f for _, f in run.sent if parse(f).is_ib]
    assert len(seen) == len(ib)
    got = psns(run.at_b)
    assert START + 1 not in got and got.count(START + 2) == 2
    assert len(run.faults("hook")) == 2


def test_inject_sends_on_the_side_asked(lab: Lab, tmp_path: Path) -> None:
    frame = conversation()[5][1]
    sockets = {"a": lab.raw("a"), "b": lab.raw("b")}
    forwarder = lab.forwarder([], capture=str(tmp_path / "c.pcap"))
    with Running(forwarder) as running:
        forwarder.inject(frame, 0)
        forwarder.inject(frame, 1)
        time.sleep(0.2)
    assert drain(sockets["b"]) == [frame] and drain(sockets["a"]) == [frame]
    assert [f["kind"] for f in running.manifest["faults"]] == ["inject", "inject"]
    for s in sockets.values():
        s.close()
