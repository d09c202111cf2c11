"""Each check fires on a packet list made to break it, and stays quiet on its clean twin."""

from __future__ import annotations

import pytest

from ibwire.analysis import analyse
from ibwire.gen import Fault, Link, QpSpec, Scenario, generate
from tests.analysis.conftest import A, B, analyse_on, frame, write_frames

QP_B, QP_A = 0x11, 0x22   # the responder's QP (requests go to it), the requester's
ACK, NAK, RNR = 0x1F, 0x60, 0x21


def w(psn, **kw):
    return frame("RC_RDMA_WRITE_ONLY", psn, QP_B, payload=64, reth_dmalen=64, **kw)


def answer(psn, syndrome):
    return frame("RC_ACKNOWLEDGE", psn, QP_A, src=B, dst=A, syndrome=syndrome)


def run(tmp_path, packets, twin=None, **kw):
    frames = [(1000 * (i + 1) if not isinstance(p, tuple) else p[0],
               p if not isinstance(p, tuple) else p[1]) for i, p in enumerate(packets)]
    path = write_frames(tmp_path / "c.pcap", frames)
    (r,) = (analyse(path, **kw) if twin is None else analyse_on(twin, path, **kw)).as_dicts()
    return r


def kinds(r):
    """(kind, the findings' packets as indices in the list written: records are from 1)"""
    return [(f["kind"], [n - 1 for n in f["records"]]) for f in r["findings"]]


START = 0xFFFFFE   # across the wrap


def p(k):
    return (START + k) & 0xFFFFFF


def test_go_back_n_done_right_is_quiet(tmp_path):
    r = run(tmp_path, [w(p(0)), w(p(1)), w(p(3)), answer(p(2), NAK), w(p(2)), w(p(3)),
                       answer(p(3), ACK)])
    assert kinds(r) == []
    assert r["nak_retransmissions"] == r["retransmitted_packets"] == 1   # PSN 3 again
    assert r["out_of_order"] == 1 and r["psn_gaps"] == 0 and r["data_packets"] == 4
    assert r["nak_generation_ns"] == [1000]   # first past the gap (PSN 3) -> NAK
    assert r["nak_response_ns"] == [1000]


def test_two_naks_outstanding(tmp_path):
    r = run(tmp_path, [w(p(0)), w(p(2)), answer(p(1), NAK), w(p(3)), answer(p(1), NAK),
                       w(p(1))])
    assert kinds(r) == [("naks_outstanding", [2, 4])]


def test_ack_psn_going_backwards(tmp_path):
    r = run(tmp_path, [w(p(0)), w(p(1)), w(p(2)), answer(p(2), ACK), answer(p(1), ACK)])
    assert kinds(r) == [("ack_psn_backwards", [3, 4])]
    # an ACK of a resent (duplicate) request may name its own, earlier PSN
    r = run(tmp_path, [w(p(0)), w(p(1)), w(p(2)), answer(p(2), ACK), w(p(1)),
                       answer(p(1), ACK)])
    assert kinds(r) == [] and r["duplicates"] == 1


def test_retransmission_not_at_the_naked_psn(tmp_path):
    r = run(tmp_path, [w(p(0)), w(p(1)), w(p(3)), answer(p(2), NAK), w(p(1)), w(p(2))])
    assert kinds(r) == [("retransmission_not_at_nak", [3, 4])]
    assert r["timeout_retransmissions"] == 1


def test_a_nak_stays_open_while_packets_sent_before_it_arrive(tmp_path):
    """Tap at the responder: what the requester sent before a NAK reached it comes after the
    NAK. The first NAK's answer (a jump back to its PSN, 5 us on) times that turnaround; the
    second NAK is followed within it by an earlier timeout round, which is no answer to it:
    the NAK stays open until its PSN is resent."""
    r = run(tmp_path, [(1000, w(p(0))), (2000, w(p(1))), (3000, w(p(3))),
                       (3100, answer(p(2), NAK)), (4000, w(p(4))),         # already sent
                       (8100, w(p(2))), (9000, w(p(3))), (10000, w(p(4))),  # the answer
                       (11000, w(p(5))), (12000, w(p(7))), (12100, answer(p(6), NAK)),
                       (13000, w(p(5))), (14000, w(p(6))),   # a timeout round on its way
                       (18100, w(p(6))), (19000, w(p(7)))])   # the answer
    assert kinds(r) == []
    assert r["timeout_retransmissions"] == 1        # PSN 5
    assert r["nak_retransmissions"] == 4            # 3, 4; 6, 7
    assert r["nak_response_ns"] == [5000, 6000]


def test_timestamps_going_backwards_and_bad_icrcs(tmp_path):
    bad = bytearray(w(p(1)))
    bad[-1] ^= 0xFF
    r = run(tmp_path, [(5000, w(p(0))), (4000, bytes(bad)), (6000, w(p(2)))])
    assert kinds(r) == [("timestamps_backwards", [1]), ("bad_icrc", [1])]
    assert r["data_packets"] == 3   # a bad ICRC still counts as seen
    r = run(tmp_path, [(4000, w(p(0))), (5000, w(p(1))), (6000, w(p(2)))])
    assert kinds(r) == []


def cnp(t):
    return (t, frame("CNP", 0, QP_A, src=B, dst=A, bth_becn=1))


def test_cnp_pacing(tmp_path):
    marked = [(t, w(p(k), ecn=3)) for k, t in enumerate((0, 1000, 2000, 5000, 9000))]
    # CNPs at 0 and 5000: 4 us apart at least, one per mark that found none within 4 us
    good = sorted([*marked, cnp(100), cnp(5100)], key=lambda x: x[0])
    r = run(tmp_path, good, cnp_interval_us=4)
    assert kinds(r) == [] and r["cnps"] == 2 and r["ecn_ce_packets"] == 5
    # a third CNP 2 us after the second is too soon; with a 6 us interval the second is too
    r = run(tmp_path, sorted([*good, cnp(7100)], key=lambda x: x[0]), cnp_interval_us=4)
    assert kinds(r) == [("cnp_too_soon", [5, 6])]
    r = run(tmp_path, good, cnp_interval_us=6)
    assert kinds(r) == [("cnp_too_soon", [1, 5])]
    # at 1 us the marks at 2000 and 9000 were owed a CNP too (the capture goes on past the
    # interval after the last one)
    r = run(tmp_path, [*good, (12000, w(p(5)))], cnp_interval_us=1)
    assert kinds(r) == [("cnp_missing", [3]), ("cnp_missing", [6])]
    r = run(tmp_path, good, cnp_interval_us=1)
    assert kinds(r) == [("cnp_missing", [3])]


@pytest.mark.parametrize("scope", ["qp", "port"])
def test_cnp_scope_of_a_generated_conversation(generated, scope):
    """Two QPs paced per QP: right for scope qp; per port, CNPs of both QPs come too close."""
    path, manifest = generated(Scenario(
        qps=(QpSpec("write", 40 * 1024), QpSpec("write", 40 * 1024)),
        faults=(Fault("ecn", rate=1.0),), tap="responder", cnp_scope="qp",
        cnp_interval_us=4, link=Link(gbps=25)))
    results = analyse(path, cnp_scope=scope, cnp_interval_us=4).as_dicts()
    found = [f["kind"] for r in results for f in r["findings"]]
    if scope == "qp":
        assert found == []
    else:
        assert "cnp_too_soon" in found
    assert sum(r["cnps"] for r in results) == sum(q["cnps"] for q in manifest["qps"]) > 4


def read(psn, va, length):
    return frame("RC_RDMA_READ_REQUEST", psn, QP_B, reth_va=va, reth_dmalen=length)


def response(name, psn, payload=1024):
    syndrome = None if name.endswith("MIDDLE") else ACK
    return frame(f"RC_RDMA_READ_RESPONSE_{name}", psn, QP_A, src=B, dst=A, syndrome=syndrome,
                 payload=payload)


def test_another_request_at_a_psn_a_read_used_is_no_resend(tmp_path):
    """A soft-RoCE requester's PSN bug: a SEND at a PSN its READ reserved for a response.
    The responder takes it for a duplicate; it is no timeout resend of the READ but a
    message of its own, with a finding."""
    va = 0x7F0000001000
    answered = [read(p(0), va, 3072), response("FIRST", p(0)), response("MIDDLE", p(1)),
                response("LAST", p(2))]
    packets = [*answered, frame("RC_SEND_ONLY", p(2), QP_B, payload=100), answer(p(2), ACK)]
    r = run(tmp_path, packets, pmtu=1024)
    assert r == run(tmp_path, packets, pmtu=1024, twin="python")
    assert kinds(r) == [("psn_reused", [4])]
    assert r["retransmitted_packets"] == r["timeout_retransmissions"] == 0
    assert r["retransmission_ns"] == []
    assert r["messages"] == r["messages_completed"] == r["data_packets"] == 2
    assert r["data_bytes"] == 3072 + 100
    # a READ at its own PSN with another address or length is another READ too
    r = run(tmp_path, [*answered, read(p(0), va + 4096, 3072)], pmtu=1024)
    assert kinds(r) == [("psn_reused", [4])] and r["messages"] == 2
    # the READ again, whole, or the rest of it from a later PSN after a lost response,
    # is a resend
    for again in (read(p(0), va, 3072), read(p(1), va + 1024, 2048)):
        r = run(tmp_path, [read(p(0), va, 3072), response("FIRST", p(0)),
                           response("LAST", p(2)), again], pmtu=1024)
        assert kinds(r) == [] and r["retransmitted_packets"] == 1 and r["messages"] == 1
    # a WRITE resent as itself is a resend; a SEND at its PSN is not
    r = run(tmp_path, [w(p(0)), w(p(1)), w(p(1))])
    assert kinds(r) == [] and r["retransmitted_packets"] == 1
    r = run(tmp_path, [w(p(0)), w(p(1)), frame("RC_SEND_ONLY", p(1), QP_B, payload=8)])
    assert kinds(r) == [("psn_reused", [2])] and r["messages"] == 3


@pytest.mark.parametrize(("verb", "mark"), [("write", "ecn"), ("read", "ecn_resp")])
def test_cnps_come_a_round_trip_after_their_marks(tmp_path, verb, mark):
    """With the tap half way, a CNP reaches the tap a round trip after the marked packet
    passed it: more than a pacing interval of 0.5 us. ibwire's own output passes; with a
    CNP taken out, the mark it answered is owed one."""
    records, manifest = generate(Scenario(
        qps=(QpSpec(verb, 8192, iters=30),), faults=(Fault(mark, rate=0.3),), tap="switch",
        cnp_interval_us=0.5, seed=1))
    (r,) = analyse(write_frames(tmp_path / "all.pcap", records),
                   cnp_interval_us=0.5).as_dicts()
    assert r["findings"] == [] and r["cnps"] == manifest["qps"][0]["cnps"] > 5
    # the first CNP, which the first mark is owed (RoCEv2/IPv4: the BTH opcode at byte 42)
    gone = next(i for i, (_, f) in enumerate(records) if f[42] == 0x81)
    (r,) = analyse(write_frames(tmp_path / "less.pcap", records[:gone] + records[gone + 1:]),
                   cnp_interval_us=0.5).as_dicts()
    assert [f["kind"] for f in r["findings"]] == ["cnp_missing"]
