"""RC recovery as IBA Vol. 1 9.7.5 describes it: go-back-N after a PSN sequence error NAK, one
NAK outstanding per gap, RNR waits, local ACK timeouts at 4.096 us x 2^t, retry exhaustion,
lost READ responses and atomic ACKs, duplicates. Written from the spec's rules. Every test
runs on RC and on XRC, which recovers as RC does with its own opcodes (IBA Vol. 1 Annex A14)."""

from __future__ import annotations

import sys

import pytest

from ibwire.transport import (
    Completed,
    Delivered,
    Discarded,
    Duplicate,
    Failed,
    OutOfSequence,
    Requester,
    RequesterConfig,
    Responder,
    ResponderConfig,
    Retransmitting,
    RnrNakSent,
    RnrWaiting,
    WorkRequest,
    psn_add,
)

from .wire import drop_nth, drop_psns, run

S = 0xFFFFFC  # start PSN: the messages below cross the 24-bit wrap
T = "RC"      # the transport of the test running (the fixture below sets it)


@pytest.fixture(autouse=True, params=["RC", "XRC"])
def transport(request, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "T", request.param)
    return request.param


def pair(pmtu: int = 256, timeout: int = 10, retry_cnt: int = 7, rnr_retry: int = 7, **kw):
    req = Requester(RequesterConfig(T, pmtu=pmtu, start_psn=S, dest_qp=0x20, timeout=timeout,
                                    retry_cnt=retry_cnt, rnr_retry=rnr_retry, xrc_srq=0x77,
                                    **kw))
    resp = Responder(ResponderConfig(T, pmtu=pmtu, start_psn=S, dest_qp=0x10))
    return req, resp


def drain(side, now: int = 0) -> list:
    out = []
    while (p := side.next_packet(now)) is not None:
        out.append(p)
    return out


def is_nak(p) -> bool:
    return p.name == f"{T}_ACKNOWLEDGE" and p.aeth.syndrome == 0x60


def test_go_back_n_from_the_naked_psn():
    req, resp = pair()
    req.post(WorkRequest("write", 8 * 256, wr_id=1))
    packets = drain(req)
    lost = psn_add(S, 3)
    events = []
    for p in packets:
        if p.psn != lost:
            events += resp.receive(p, 10)
    answers = drain(resp)
    # only the last packet asks for an ACK, so the one answer is the NAK, drawn by the first
    # packet past the gap, naming the missing PSN
    assert [(is_nak(a), a.psn) for a in answers] == [(True, lost)]
    oos = [e for e in events if isinstance(e, OutOfSequence)]
    assert [(e.psn, e.nak) for e in oos] == [(psn_add(S, 4), True)] + [
        (psn_add(S, i), False) for i in range(5, 8)]
    (ev,) = req.receive(answers[0], 20)
    assert ev == Retransmitting(lost, "nak", 20)
    again = drain(req, 20)
    assert [p.psn for p in again] == [psn_add(S, i) for i in range(3, 8)]
    assert all(p.retransmission for p in again)
    for p in again:
        events = resp.receive(p, 30)
    assert [type(e) for e in events] == [Delivered] and events[0].length == 8 * 256
    (ack,) = drain(resp)
    assert ack.psn == psn_add(S, 7) and ack.aeth.msn == 1
    (done,) = req.receive(ack, 40)
    assert isinstance(done, Completed) and done.wr_id == 1 and req.unacked_psns == 0


def test_one_nak_outstanding_until_the_missing_psn_arrives():
    req, resp = pair()
    for i in range(3):
        req.post(WorkRequest("send", 256, wr_id=i))   # one packet each, each with AckReq
    a, b, c = drain(req)
    resp.receive(b)
    resp.receive(c)
    assert [is_nak(p) for p in drain(resp)] == [True]  # two out-of-sequence packets, one NAK
    resp.receive(b)                                     # still the same gap: silence
    assert drain(resp) == []
    resp.receive(a)                                     # the gap closes ...
    assert [p.psn for p in drain(resp)] == [a.psn]
    req.post(WorkRequest("send", 256, wr_id=3))
    req.post(WorkRequest("send", 256, wr_id=4))
    resp.receive(b)
    d, e = drain(req)[-2:]
    resp.receive(e)                                     # ... so a new gap draws a new NAK
    (nak,) = [p for p in drain(resp) if is_nak(p)]
    assert nak.psn == c.psn


def test_rnr_nak_waits_its_timer_then_resends_from_its_psn():
    req, resp = pair()
    req.post(WorkRequest("send", 256, wr_id=1))
    req.post(WorkRequest("send", 256, wr_id=2))
    resp.inject_rnr(psn_add(S, 1), timer=14)            # 1.28 ms
    p1, p2 = drain(req, 0)
    resp.receive(p1, 100)
    assert resp.receive(p2, 200) == [RnrNakSent(p2.psn, 14, 200)]
    ack, rnr = drain(resp)
    assert rnr.aeth.syndrome == 0x20 | 14 and rnr.psn == p2.psn and rnr.aeth.msn == 1
    req.receive(ack, 300)
    events = req.receive(rnr, 400)
    assert events == [RnrWaiting(p2.psn, 14, 400 + 1_280_000)]
    assert req.next_deadline() == 400 + 1_280_000
    assert req.next_packet(500) is None
    assert req.timeout(400 + 1_279_999) == []
    assert req.timeout(400 + 1_280_000) == [Retransmitting(p2.psn, "rnr", 400 + 1_280_000)]
    again = req.next_packet(400 + 1_280_000)
    assert again.psn == p2.psn and again.retransmission
    assert [type(e) for e in resp.receive(again, 1_300_000)] == [Delivered]


@pytest.mark.parametrize("rnr_retry,naks,fails", [(0, 1, True), (2, 2, False), (2, 3, True),
                                                  (7, 12, False)])
def test_rnr_retry_count(rnr_retry, naks, fails):
    """rnr_retry RNR NAKs in a row are allowed; 7 means no limit (IBA 9.7.5.2.8)."""
    req, resp = pair(rnr_retry=rnr_retry)
    req.post(WorkRequest("send", 8, wr_id=1))
    now = 0
    failed = []
    for _ in range(naks):
        resp.inject_rnr(S, timer=1)
        p = req.next_packet(now)
        resp.receive(p, now)
        (rnr,) = drain(resp)
        events = req.receive(rnr, now)
        failed += [e for e in events if isinstance(e, Failed)]
        if failed:
            break
        now = req.next_deadline()
        req.timeout(now)
    assert bool(failed) == fails
    if fails:
        assert failed[0].reason == "rnr_retry_exceeded" and failed[0].wr_id == 1
        assert req.failed and req.next_packet(now) is None and req.next_deadline() is None
    else:
        p = req.next_packet(now)
        resp.receive(p, now)
        assert isinstance(req.receive(drain(resp)[0], now)[0], Completed)


@pytest.mark.parametrize("t", [1, 7, 14, 18])
def test_local_ack_timeout_resends_after_4096ns_times_2_to_the_t(t):
    req, _ = pair(timeout=t)
    req.post(WorkRequest("write", 300, wr_id=9))
    first = drain(req, 1_000)
    assert [p.psn for p in first] == [S, psn_add(S, 1)]
    period = 4096 * 2 ** t
    assert req.next_deadline() == 1_000 + period
    assert req.timeout(1_000 + period - 1) == []
    assert req.timeout(1_000 + period) == [Retransmitting(S, "timeout", 1_000 + period)]
    again = drain(req, 1_000 + period)
    assert [(p.psn, p.retransmission) for p in again] == [(S, True), (psn_add(S, 1), True)]
    assert req.next_deadline() == 1_000 + 2 * period


def test_no_timer_with_timeout_0():
    req, _ = pair(timeout=0)
    req.post(WorkRequest("send", 8))
    drain(req)
    assert req.next_deadline() is None


@pytest.mark.parametrize("retry_cnt", [0, 1, 3, 7])
def test_retry_exhaustion(retry_cnt):
    """retry_cnt retries in a row; the next timeout is the error (IBA 9.7.5.2.7 / C9-144)."""
    req, resp = pair(timeout=5, retry_cnt=retry_cnt)
    req.post(WorkRequest("send", 8, wr_id=4))
    out = run(req, resp, lose=lambda side, n, p: side == "req")   # nothing ever arrives
    assert len(out.events(Retransmitting)) == retry_cnt
    assert all(e.cause == "timeout" for e in out.events(Retransmitting))
    (failed,) = out.events(Failed)
    assert failed.reason == "retry_exceeded" and failed.wr_id == 4 and failed.psn == S
    assert len(out.sent("req")) == retry_cnt + 1
    times = [s.time for s in out.wire]
    period = 4096 * 2 ** 5
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == [period] * retry_cnt
    assert failed.time_ns == times[-1] + period


def test_progress_resets_the_retry_counter():
    req, resp = pair(timeout=5, retry_cnt=1, window=1)
    for i in range(3):
        req.post(WorkRequest("send", 8, wr_id=i))
    # each message's first transmission is lost once: one retry each, never two in a row
    out = run(req, resp, lose=drop_psns({S: 1, psn_add(S, 1): 1, psn_add(S, 2): 1}))
    assert not out.events(Failed)
    assert [e.cause for e in out.events(Retransmitting)] == ["timeout"] * 3
    assert [e.wr_id for e in out.events(Completed)] == [0, 1, 2]


def test_lost_ack_brings_a_duplicate_that_is_acked_again_and_delivered_once():
    req, resp = pair(timeout=8)
    req.post(WorkRequest("write", 600, wr_id=1))
    out = run(req, resp, lose=drop_nth({3}))   # packets 0-2 are the request, 3 its ACK
    assert out.wire[3].direction == "resp" and out.wire[3].lost
    assert [e.cause for e in out.events(Retransmitting)] == ["timeout"]
    assert len(out.events(Duplicate, "responder")) == 3
    assert len(out.events(Delivered, "responder")) == 1
    final_ack = out.sent("resp")[-1]
    assert final_ack.psn == psn_add(S, 2) and final_ack.aeth.msn == 1
    assert [e.wr_id for e in out.events(Completed)] == [1]


def test_lost_read_response_is_asked_for_again_from_its_psn():
    req, resp = pair(pmtu=256)
    req.post(WorkRequest("read", 5 * 256 + 10, wr_id=7, remote_va=0x10000, rkey=5))
    lost = psn_add(S, 2)
    out = run(req, resp, lose=drop_psns({lost: 1}, direction="resp"))
    (retry,) = out.events(Retransmitting)
    assert (retry.psn, retry.cause) == (lost, "read")
    requests = out.sent("req")
    assert len(requests) == 2
    again = requests[1]
    assert again.name == f"{T}_RDMA_READ_REQUEST" and again.psn == lost and again.retransmission
    assert again.reth == (0x10000 + 2 * 256, 5, 3 * 256 + 10)
    responses = out.sent("resp")[6:]
    assert [p.name[len(f"{T}_RDMA_READ_RESPONSE_"):] for p in responses] == [
        "FIRST", "MIDDLE", "MIDDLE", "LAST"]
    assert [p.psn for p in responses] == [psn_add(S, i) for i in range(2, 6)]
    assert len(out.events(Delivered, "responder")) == 1          # counted once in the MSN
    assert all(p.aeth.msn == 1 for p in out.sent("resp") if p.aeth)
    (done,) = out.events(Completed)
    assert done.wr_id == 7 and req.pending == 0


def test_lost_atomic_ack_gets_the_saved_answer_not_a_second_execution():
    req, resp = pair(timeout=6)
    req.post(WorkRequest("fetch_add", 8, wr_id=1, remote_va=0x40, swap_add=3))
    req.post(WorkRequest("fetch_add", 8, wr_id=2, remote_va=0x40, swap_add=3))
    out = run(req, resp, lose=drop_nth({2}))   # the first ATOMIC ACKNOWLEDGE
    assert out.wire[2].packet.name == f"{T}_ATOMIC_ACKNOWLEDGE"
    # the second atomic's answer shows the first was lost: go back for it at once
    assert [(e.psn, e.cause) for e in out.events(Retransmitting)] == [(S, "read")]
    assert [e.result for e in out.events(Completed)] == [0, 3]
    assert resp.memory[0x40] == 6 and len(out.events(Delivered, "responder")) == 2


def test_bad_icrc_is_dropped_silently_and_the_gap_is_naked():
    req, resp = pair()
    for i in range(2):
        req.post(WorkRequest("send", 8, wr_id=i))
    a, b = drain(req)
    assert resp.receive(a, 5, icrc_ok=False) == [Discarded(a.psn, "icrc", 5)]
    assert drain(resp) == []
    resp.receive(b, 6)
    (nak,) = drain(resp)
    assert is_nak(nak) and nak.psn == a.psn


def test_msn_counts_messages_and_wraps():
    req = Requester(RequesterConfig(T, pmtu=256, start_psn=S))
    resp = Responder(ResponderConfig(T, pmtu=256, start_psn=S, start_msn=0xFFFFFE))
    for verb, length in (("send", 600), ("write", 10), ("read", 600), ("fetch_add", 8),
                         ("send_imm", 0)):
        req.post(WorkRequest(verb, length))
    msns = []
    for p in drain(req):
        for e in resp.receive(p):
            msns.append((e.verb, e.msn))
    assert msns == [("send", 0xFFFFFF), ("write", 0), ("read", 1), ("fetch_add", 2),
                    ("send_imm", 3)]
    answers = drain(resp)
    assert {a.name.split("_", 1)[0] for a in answers} == {T}
    assert [(a.name.split("_", 1)[1], a.aeth.msn if a.aeth else None) for a in answers] == [
        ("ACKNOWLEDGE", 0xFFFFFF), ("ACKNOWLEDGE", 0), ("RDMA_READ_RESPONSE_FIRST", 1),
        ("RDMA_READ_RESPONSE_MIDDLE", None), ("RDMA_READ_RESPONSE_LAST", 1),
        ("ATOMIC_ACKNOWLEDGE", 2), ("ACKNOWLEDGE", 3)]


def test_coalesced_ack_completes_everything_before_it():
    req, resp = pair()
    for i in range(4):
        req.post(WorkRequest("send", 8, wr_id=i))
    packets = drain(req)
    assert req.unacked_psns == 4
    events = req.receive(resp.segmenter.ack(packets[2].psn, 3), 50)
    assert [e.wr_id for e in events] == [0, 1, 2] and req.unacked_psns == 1
    assert req.receive(resp.segmenter.ack(packets[1].psn, 2), 60) == []   # an old ACK
    ghost = req.receive(resp.segmenter.ack(psn_add(packets[3].psn, 5), 9), 70)
    assert [type(e) for e in ghost] == [Discarded] and req.unacked_psns == 1


def test_window_limits_psns_in_flight():
    req, resp = pair(window=3)
    req.post(WorkRequest("write", 10 * 256))
    # the packet that fills the window asks for an ACK, or the window would never open
    assert [p.ackreq for p in drain(req)] == [False, False, True]
    req.receive(resp.segmenter.ack(psn_add(S, 1), 0), 10)
    assert [p.psn for p in drain(req)] == [psn_add(S, 3), psn_add(S, 4)]


def test_other_naks_put_the_qp_in_error():
    req, resp = pair()
    req.post(WorkRequest("send", 8, wr_id=5))
    drain(req)
    (failed,) = req.receive(resp.segmenter.nak(S, 0, code=2), 10)   # remote access error
    assert failed == Failed(5, S, "remote_error", 10)


def test_each_duplicate_is_acked_with_the_latest_psn_short_of_a_later_read():
    """C9-105 (Linux rxe_resp.c duplicate_request()): every duplicate SEND/WRITE packet,
    AckReq or not, draws an ACK of the latest PSN accepted, so a requester back from a
    timeout learns at once how far the responder got; but never past a READ after the
    duplicate, which would claim the READ answered before its repeated responses come."""
    req, resp = pair()
    req.post(WorkRequest("send", 300, wr_id=1))       # S (no AckReq), S+1 (AckReq)
    req.post(WorkRequest("read", 256, wr_id=2))       # S+2
    first, last, read = drain(req)
    for p in (first, last, read):
        resp.receive(p)
    drain(resp)
    for i, dup in enumerate((first, last)):
        assert resp.receive(dup, 9 + i) == [Duplicate(dup.psn, 9 + i)]
        (ack,) = drain(resp)
        assert ack.name == f"{T}_ACKNOWLEDGE" and ack.psn == last.psn and ack.aeth.msn == 2
    req.post(WorkRequest("write", 200, wr_id=3))      # S+3
    (write,) = drain(req)
    resp.receive(write)
    drain(resp)
    resp.receive(write, 20)                           # nothing after it: the latest
    (ack,) = drain(resp)
    assert ack.psn == write.psn and ack.aeth.msn == 3
    resp.receive(first, 21)                           # the READ is still after it
    (ack,) = drain(resp)
    assert ack.psn == last.psn
