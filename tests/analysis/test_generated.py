"""The analysis of generated conversations: every count equals the manifest, every latency
equals what the frames' timestamps say, and the numpy path equals the per-row rules."""

from __future__ import annotations

import tempfile

import pytest

import ibwire
from ibwire.analysis import KEYS, analyse
from ibwire.gen import Fault, Link, QpSpec, Scenario, generate, write_pcap
from ibwire.transport.observed import COUNTERS
from tests.analysis.conftest import analyse_on, write_frames
from tests.gen.test_gen import ENCAPS, RELIABLE, mixed

RATES = (Fault("drop", rate=0.05), Fault("lose_ack", rate=0.1), Fault("corrupt", rate=0.03))
#: (cut_packets counts what a capture kept, not what the conversation did: a manifest
#: describes the whole conversation; tests/cli/test_headers_only.py checks it)
COMPARED = [k for k in KEYS if k not in ("requester", "responder", "pmtu", "cut_packets")]


def by_responder(results):
    return {r["responder"]["qpn"]: r for r in results}


def check_against_manifest(path, manifest, **kw):
    results = by_responder(analyse(path, **kw).as_dicts())
    assert len(results) == len(manifest["qps"])
    for q in manifest["qps"]:
        r = results[q["responder"]["qpn"]]
        assert r["responder"] == q["responder"]
        assert r["requester"]["address"] == q["requester"]["address"]
        # UC answers nothing: its requester QPN is on the wire only as the QP of CNPs
        unknown = q["transport"] == "UC" and not q["cnps"]
        assert r["requester"]["qpn"] == (None if unknown else q["requester"]["qpn"])
        assert {k: r[k] for k in COMPARED} == {k: q[k] for k in COMPARED}, q["transport"]
    return results


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_counts_equal_the_manifest(generated, encapsulation, tap, reliable):
    path, manifest = generated(mixed(encapsulation, tap, reliable=reliable))
    results = check_against_manifest(path, manifest)
    assert [results[q["responder"]["qpn"]]["transport"] for q in manifest["qps"]] == [
        reliable] * 3 + ["UC", "UD"]
    write = results[manifest["qps"][0]["responder"]["qpn"]]
    assert write["retransmitted_packets"] > 0 and write["naks_psn_seq_error"] == 1
    assert results[manifest["qps"][1]["responder"]["qpn"]]["rnr_naks"] == 1


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("seed", [1, 2])
def test_counts_equal_the_manifest_with_random_faults(generated, tap, seed, reliable):
    faults = (*RATES, Fault("ecn", rate=0.2), Fault("rnr", 1, 5, timer=3))  # 2nd READ
    path, manifest = generated(Scenario(**{**mixed(tap=tap, reliable=reliable).__dict__,
                                           "faults": faults, "seed": seed}))
    check_against_manifest(path, manifest)
    assert sum(q["retransmitted_packets"] for q in manifest["qps"]) > 0


@RELIABLE
@pytest.mark.parametrize("scope", ["qp", "ip-pair", "dest-ip", "port"])
def test_congestion_counts_and_cnp_pacing_agree(generated, scope, reliable):
    scenario = Scenario(qps=(QpSpec("write", 40 * 1024, transport=reliable),
                             QpSpec("send", 30 * 1024, mtu=4096, transport=reliable)),
                        faults=(Fault("ecn", rate=0.7),), tap="responder", cnp_scope=scope,
                        cnp_interval_us=3, link=Link(gbps=25), seed=4)
    path, manifest = generated(scenario)
    results = check_against_manifest(path, manifest, cnp_scope=scope, cnp_interval_us=3)
    assert all(not r["findings"] for r in results.values())
    assert sum(q["cnps"] for q in manifest["qps"]) > 3


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "switch"])
def test_marked_read_responses_and_their_cnps_agree(generated, tap, reliable):
    """CE-marked READ responses: the requester is the notification point, its CNPs go to
    the responder's QP."""
    scenario = Scenario(qps=(QpSpec("read", 20 * 1024, iters=4, mtu=2048, transport=reliable),),
                        faults=(Fault("ecn_resp", rate=0.5), Fault("lose_ack", 0, 3)),
                        tap=tap, cnp_interval_us=2, seed=5)
    path, manifest = generated(scenario)
    check_against_manifest(path, manifest, cnp_interval_us=2)
    (q,) = manifest["qps"]
    assert q["ecn_ce_packets"] > 5 and q["cnps"] > 1 and q["retransmitted_packets"] >= 1


@RELIABLE
@pytest.mark.parametrize("faults", [RATES, (Fault("ecn", rate=0.3), *RATES)])
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_the_compiled_rules_equal_the_python_twin(generated, tap, faults, reliable):
    qps = (QpSpec("write", 5000, iters=30, mtu=1024, start_psn=0xFFFF00, timeout=6,
                  transport=reliable),
           QpSpec("read", 9000, iters=12, mtu=2048, timeout=6, transport=reliable),
           QpSpec("cmp_swap", iters=20, timeout=6, transport=reliable),
           QpSpec("send", 3000, iters=20, mtu=512, transport="UC"))
    path, _ = generated(Scenario(qps=qps, faults=faults, tap=tap, seed=9))
    fast = analyse(path).as_dicts()
    slow = analyse_on("python", path).as_dicts()
    assert fast == slow
    assert sum(r["data_packets"] for r in fast) > 250
    # READ responses sent again and first transmissions against everything sent: counted the
    # same by both twins
    assert sum(r["read_responses_resent"] for r in fast) > 0
    assert all(r["payload_bytes"] >= r["data_bytes"] for r in fast)


def parsed(records):
    return [(t, ibwire.parse(f).fields()) for t, f in records]


def test_latencies_are_what_the_timestamps_say():
    """One drop at the requester's tap: NAK generation is the NAK minus the packet after the
    dropped one; NAK response the resend minus the NAK; retransmission the resend minus the
    original."""
    scenario = Scenario(qps=(QpSpec("write", 6 * 1024, mtu=1024),), faults=(Fault("drop", 0, 2),))
    records, manifest = generate(scenario)
    rows = parsed(records)
    start = manifest["qps"][0]["start_psn"]
    lost = (start + 2) & 0xFFFFFF
    (nak,) = [i for i, (_, f) in enumerate(rows)
              if f["bth.opcode"] == 17 and f["aeth.syndrome"] == 0x60]
    nak_t = rows[nak][0]
    sends = [(i, t, f["bth.psn"]) for i, (t, f) in enumerate(rows) if f["bth.opcode"] != 17]
    original = next(t for _, t, p in sends if p == lost)
    after = next(t for _, t, p in sends if t > original and p == (lost + 1) & 0xFFFFFF)
    resend = next(t for i, t, p in sends if i > nak and p == lost)
    with tempfile.TemporaryDirectory() as d:
        write_pcap(f"{d}/x.pcap", scenario)
        (r,) = analyse(f"{d}/x.pcap").as_dicts()
    assert r["nak_generation_ns"] == [nak_t - after]
    assert r["nak_response_ns"] == [resend - nak_t]
    assert r["retransmission_ns"] == [resend - original]
    assert r["nak_retransmissions"] == r["retransmitted_packets"] == 4  # PSNs 2..5 again
    assert r["timeout_retransmissions"] == r["rnr_retransmissions"] == 0
    # the only AckReq packet was sent again: its ACK times no round trip (Karn)
    assert r["ack_rtt_ns"] == {"min": None, "avg": None, "max": None}


def test_ack_round_trips_are_what_the_timestamps_say(generated):
    scenario = Scenario(qps=(QpSpec("write", 2048, iters=5, mtu=1024, ack_every=1),),
                        tap="switch")
    path, _ = generated(scenario)
    records, _ = generate(scenario)
    rows = parsed(records)
    sent = {f["bth.psn"]: t for t, f in rows if f["bth.opcode"] != 17 and f["bth.a"]}
    rtts = [t - sent[f["bth.psn"]] for t, f in rows if f["bth.opcode"] == 17]
    assert len(rtts) == 10
    (r,) = analyse(path).as_dicts()
    assert r["ack_rtt_ns"] == {"min": min(rtts), "avg": sum(rtts) / len(rtts),
                               "max": max(rtts)}


@RELIABLE
@pytest.mark.parametrize("t", [5, 8])
def test_timeout_and_rnr_latencies(generated, t, reliable):
    path, _ = generated(Scenario(qps=(QpSpec("send", 100, iters=1, timeout=t,
                                             transport=reliable),),
                                 faults=(Fault("corrupt", 0, 0),)))
    (r,) = analyse(path).as_dicts()
    assert r["retransmission_ns"] == [4096 * 2 ** t]
    assert r["timeout_retransmissions"] == 1 and r["nak_retransmissions"] == 0
    assert r["findings"] == [{"kind": "bad_icrc", "records": [1],
                              "detail": "1 packets with a bad ICRC", "count": 1}]
    path, _ = generated(Scenario(qps=(QpSpec("send", 100, iters=3, transport=reliable),),
                                 faults=(Fault("rnr", 0, 1, timer=t),)))
    (r,) = analyse(path).as_dicts()
    wait = {5: 60_000, 8: 160_000}[t]   # IBA Table 45: code 5 0.06 ms, code 8 0.16 ms
    assert r["rnr_wait_ns"] == [wait] and r["rnr_naks"] == 1
    # an RNR NAK's wait is not a NAK response (AETH syndrome 001 RNR vs 011 NAK, IBA
    # 9.7.5.2): the resend comes when the timer ends, and counts in rnr_wait_ns only
    assert r["nak_response_ns"] == [] and r["retransmission_ns"][0] > wait
    assert r["rnr_retransmissions"] == r["retransmitted_packets"] >= 1


@RELIABLE
def test_psn_wrap_reads_and_atomics(generated, reliable):
    qps = (QpSpec("read", 5 * 512, iters=4, mtu=512, start_psn=0xFFFFFA, transport=reliable),
           QpSpec("fetch_add", iters=5, start_psn=0xFFFFFE, transport=reliable))
    path, manifest = generated(Scenario(qps=qps, faults=(Fault("lose_ack", 0, 6),
                                                         Fault("drop", 1, 3))))
    results = check_against_manifest(path, manifest)
    read = results[manifest["qps"][0]["responder"]["qpn"]]
    assert read["data_packets"] == read["messages"] == read["messages_completed"] == 4
    assert read["psn_gaps"] == 0 and read["data_bytes"] == 4 * 5 * 512
    assert read["read_responses"] > 20        # one was lost after the tap: asked again
    atomic = results[manifest["qps"][1]["responder"]["qpn"]]
    assert atomic["messages_completed"] == 5 and atomic["nak_retransmissions"] >= 1
    assert set(COUNTERS) <= set(read)


def test_gaps_the_tap_never_fills(tmp_path):
    """A tap that misses packets leaves gaps for good: each counted once, the packets around
    them counted as both twins count them."""
    records, _ = generate(Scenario(qps=(QpSpec("write", 4096, iters=150, mtu=1024),
                                        QpSpec("send", 1024, iters=300, mtu=1024)),
                                   tap="switch"))
    kept = [r for i, r in enumerate(records) if i % 97 != 50]   # a packet in 97 missed
    path = write_frames(tmp_path / "lossy.pcap", kept)
    fast = analyse(path).as_dicts()
    slow = analyse_on("python", path).as_dicts()
    assert fast == slow
    missed = [f for i, (_, f) in enumerate(records) if i % 97 == 50]
    missed_requests = sum(f[14 + 20 + 8] != 0x11 for f in missed)   # not ACKs
    assert sum(r["psn_gaps"] for r in fast) == missed_requests > 5
    assert sum(r["data_packets"] for r in fast) == 150 * 4 + 300 - missed_requests


@RELIABLE
def test_answers_without_their_requests_keep_their_transport(tmp_path, reliable):
    """A tap that missed every request of a QP still tells RC answers from XRC ones (the
    opcode's transport bits, IBA Table 38)."""
    from tests.analysis.conftest import write_frames

    records, manifest = generate(Scenario(qps=(QpSpec("write", 2048, iters=3,
                                                      transport=reliable),)))
    answers = [(t, f) for t, f in records
               if ibwire.parse(f).fields()["bth.destqp"] == manifest["qps"][0]["requester"]["qpn"]]
    assert len(answers) == 3
    (r,) = analyse(write_frames(tmp_path / "answers.pcap", answers)).as_dicts()
    assert r["transport"] == reliable and r["acks"] == 3 and r["data_packets"] == 0


@RELIABLE
@pytest.mark.parametrize("fault", [Fault("drop", 0, 1), Fault("corrupt", 0, 1)])
def test_retry_exhaustion_ends_the_qp_and_the_counts_still_agree(generated, fault, reliable):
    """retry_cnt 0: the first NAK (a drop) or local ACK timeout (a corrupted packet) is one
    retry too many (IBA 9.7.5.2.6): the QP fails with retry_exceeded, nothing is resent."""
    scenario = Scenario(qps=(QpSpec("send", 100, iters=4, retry_cnt=0, timeout=6,
                                    transport=reliable),), faults=(fault,))
    path, manifest = generated(scenario)
    (q,) = manifest["qps"]
    assert q["error"] == "retry_exceeded" and q["completed"] < q["posted"] == 4
    assert q["retransmitted_packets"] == 0
    check_against_manifest(path, manifest)


def test_cnps_behind_read_responses_keep_their_interval_on_the_wire(tmp_path):
    """At the responder's tap a CNP can wait for its port behind a READ response; the next
    one of its QP, decided an interval after it, must still leave an interval after it (it
    left 2998 ns after it once): qp finds no pacing violation, as the manifest says."""
    s = Scenario(qps=(QpSpec("write", 40 * 1024), QpSpec("send", 30 * 1024, mtu=4096),
                      QpSpec("read", 20 * 1024, mtu=2048)),
                 faults=(Fault("ecn", rate=0.7), Fault("ecn_resp", rate=0.5)),
                 tap="responder", cnp_scope="qp", cnp_interval_us=3, link=Link(gbps=25),
                 seed=4)
    path = tmp_path / "cnp.pcap"
    manifest = write_pcap(path, s)
    found = analyse(path, cnp_scope="qp", cnp_interval_us=3).as_dicts()
    assert sum(q["cnps"] for q in manifest["qps"]) > 3
    assert [q["findings"] for q in found] == [q["findings"] for q in manifest["qps"]]
    assert not any(q["findings"] for q in found)


class _Truth:
    """Retransmitted packets by the cause the requester model went back for (its
    ``Retransmitting`` events: "read" re-requests are timeout rounds to a tap)."""

    def __init__(self, monkeypatch):
        from ibwire.gen import run
        from ibwire.transport.events import Retransmitting

        self.counts = {"nak": 0, "timeout": 0, "rnr": 0}
        truth = self

        class Requester(run.Requester):
            cause = "timeout"

            def _seen(self, events):
                for e in events:
                    if isinstance(e, Retransmitting):
                        self.cause = "timeout" if e.cause == "read" else e.cause
                return events

            def receive(self, *a, **kw):
                return self._seen(super().receive(*a, **kw))

            def timeout(self, *a, **kw):
                return self._seen(super().timeout(*a, **kw))

            def next_packet(self, now_ns):
                packet = super().next_packet(now_ns)
                if packet is not None and packet.retransmission:
                    truth.counts[self.cause] += 1
                return packet

        monkeypatch.setattr(run, "Requester", Requester)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_rounds_by_cause_are_the_requesters(generated, monkeypatch, tap):
    """NAKs and RNR NAKs that reach a tap away from the requester while a go-back-N round is
    still coming: the packets already on their way answer neither, and every round is
    classed by what the requester went back for, in the capture and in the manifest."""
    truth = _Truth(monkeypatch)
    at = lambda kind, psn: Fault(kind, 0, psn)   # noqa: E731
    path, manifest = generated(Scenario(
        qps=(QpSpec("send", 1000, iters=200),),
        faults=(at("rnr", 5), at("corrupt", 60), at("rnr", 62), at("corrupt", 120),
                at("corrupt", 199)), tap=tap))
    assert all(truth.counts.values())       # NAK, RNR and timeout rounds, all three
    (q,) = manifest["qps"]
    assert {k: q[f"{k}_retransmissions"] for k in truth.counts} == truth.counts
    model = dict(q["model"]["resent_packets"])      # the manifest's own ground truth
    model["timeout"] += model.pop("read")
    assert model == truth.counts
    assert [f["kind"] for f in q["findings"]] == ["bad_icrc"]
    (r,) = check_against_manifest(path, manifest).values()
    assert r == analyse_on("python", path).as_dicts()[0]


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_resent_read_responses_are_counted(generated, tap):
    """A lost ACK of a READ (its last response) makes the requester read again and the
    responder send responses it sent before: counted apart from the first ones, with their
    bytes; goodput counts each response once, throughput every one."""
    scenario = Scenario(qps=(QpSpec("read", 20 * 1024, iters=4, mtu=2048),),
                        faults=(Fault("lose_ack", 0, 3),), tap=tap, seed=5)
    path, manifest = generated(scenario)
    (r,) = check_against_manifest(path, manifest).values()
    first = 4 * 10  # 4 READs of 20 KiB, 2 KiB a response
    assert r["data_bytes"] == 4 * 20 * 1024
    assert r["read_responses_resent"] == r["read_responses"] - first > 0
    assert r["read_response_bytes_resent"] == 2048 * r["read_responses_resent"]
    assert r["payload_bytes"] == r["data_bytes"] + r["read_response_bytes_resent"]
    span = r["last_ns"] - r["first_ns"]
    assert r["goodput_bps"] == pytest.approx(r["data_bytes"] * 8e9 / span)
    assert r["throughput_bps"] == pytest.approx(r["payload_bytes"] * 8e9 / span)
    assert r == analyse_on("python", path).as_dicts()[0]


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_stalls_and_their_causes(generated, tap):
    """A lost last packet (the requester's timer, 4.096 us * 2^14 = 67 ms, sends it again)
    and, on another QP, an RNR NAK asking for 20.48 ms (IBA Table 45, code 22): a stall each,
    ended by the round that answers it; the same in the manifest."""
    write = QpSpec("write", 4096, iters=3, mtu=1024, timeout=14)
    scenario = Scenario(qps=(write, write),
                        faults=(Fault("drop", 0, 11), Fault("rnr", 1, 5, timer=22)), tap=tap)
    path, manifest = generated(scenario)
    results = check_against_manifest(path, manifest)
    timeout, rnr = (results[q["responder"]["qpn"]] for q in manifest["qps"])
    for r, cause, least in ((timeout, "timeout_retransmission", 67_108_864),
                            (rnr, "rnr_retransmission", 20_480_000)):
        assert r["stalls"] == 1
        (stall,) = r["longest_stalls"]
        assert stall["cause"] == cause
        assert least <= stall["duration_ns"] == r["stall_ns"] < least + 100_000
        assert r["first_ns"] < stall["start_ns"] < r["last_ns"]
    assert analyse(path).as_dicts() == analyse_on("python", path).as_dicts()
    longer = by_responder(analyse(path, stall_ms=30).as_dicts())
    assert longer[timeout["responder"]["qpn"]]["stalls"] == 1
    assert longer[rnr["responder"]["qpn"]]["stalls"] == 0


def test_stalls_in_clean_runs(tmp_path):
    """Pauses in lossless traffic: every pause longer than the threshold is a stall of
    unknown cause, counted alike by both twins."""
    records, _ = generate(Scenario(qps=(QpSpec("write", 1024, iters=400, mtu=1024),)))
    shifted, pause = [], 0
    for i, (t, f) in enumerate(records):
        if i and i % 97 == 0:
            pause += 11_000_000 + i  # 11 ms and a little more each time
        shifted.append((t + pause, f))
    path = write_frames(tmp_path / "pauses.pcap", shifted)
    fast = analyse(path).as_dicts()
    assert fast == analyse_on("python", path).as_dicts()
    (r,) = fast
    pauses = [11_000_000 + i for i in range(97, len(records), 97)]
    assert r["stalls"] == len(pauses)
    gaps = [b - a for (a, _), (b, _) in zip(shifted, shifted[1:], strict=False)]
    assert r["stall_ns"] == sum(g for g in gaps if g > 10_000_000)
    assert [s["duration_ns"] for s in r["longest_stalls"]] == sorted(
        (g for g in gaps if g > 10_000_000), reverse=True)[:5]
    assert all(s["cause"] is None for s in r["longest_stalls"])
    assert r["longest_stalls"][0]["record"] == max(range(97, len(records), 97)) + 1


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_lossy_writes_with_lost_naks_and_duplicates(generated, tap):
    """The rig's lossy WRITE run in gen (64 KiB messages, requests and answers lost):
    NAK rounds, timeout rounds after lost NAKs and tails, duplicates ACKed with the latest
    PSN. ``ibwire qp`` agrees with the manifest, and the manifest's model truth (what the
    requester resent and why, the duplicates the responder took and ACKed) adds up with
    what the capture shows."""
    path, manifest = generated(Scenario(
        qps=(QpSpec("write", 64 * 1024, iters=40),),
        faults=(Fault("drop", rate=0.02), Fault("lose_ack", rate=0.05)), tap=tap, seed=3))
    (r,) = check_against_manifest(path, manifest).values()
    (q,) = manifest["qps"]
    model = q["model"]
    assert model["resent_packets"]["nak"] > 0 and model["resent_packets"]["timeout"] > 0
    assert model["duplicate_requests"] > 0 and model["duplicate_acks"] > 0
    if tap != "responder":   # (lost requests never reach the responder's port)
        assert sum(model["resent_packets"].values()) == r["retransmitted_packets"]
    if tap == "requester":   # every resend is seen where it is sent, as what it is
        assert model["resent_packets"]["nak"] == r["nak_retransmissions"]
        assert model["resent_packets"]["timeout"] == r["timeout_retransmissions"]
    if tap == "responder":   # every answer is seen where it is sent, lost ones included
        assert r["acks"] == q["messages_completed"] + model["duplicate_acks"]
