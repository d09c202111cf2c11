"""Properties of a requester and a responder joined by a wire (IBA Vol. 1 9.7: RC delivers
every message exactly once, in order, and the requester completes each one).

- Lossless: every posted message is delivered once, in posting order, with its length;
  every request completes in order; nothing stays outstanding; nothing is ever resent.
- Finite losses in either direction: the same holds when the retries suffice (go-back-N,
  timeouts, READ re-requests), whatever packets are lost.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.transport import (
    PMTUS,
    Completed,
    Delivered,
    Failed,
    Requester,
    RequesterConfig,
    Responder,
    ResponderConfig,
    Retransmitting,
    WorkRequest,
)

from .wire import drop_nth, run

VERBS = ["send", "send_imm", "send_inv", "write", "write_imm", "read", "fetch_add", "cmp_swap"]

work = st.lists(st.tuples(st.sampled_from(VERBS), st.integers(0, 5000)), min_size=1, max_size=8)
start_psns = st.one_of(st.integers(0xFFFFF0, 0xFFFFFF), st.integers(0, 0xFFFFFF))


def setup(transport, wrs, pmtu, start, ack_every=None, window=None, retry_cnt=7):
    req = Requester(RequesterConfig(transport=transport, pmtu=pmtu, start_psn=start, dest_qp=2,
                                    timeout=8, retry_cnt=retry_cnt, ack_every=ack_every,
                                    window=window))
    resp = Responder(ResponderConfig(transport=transport, pmtu=pmtu, start_psn=start, dest_qp=1))
    posted = []
    for i, (verb, length) in enumerate(wrs):
        if verb in ("fetch_add", "cmp_swap"):
            length = 8
        wr = WorkRequest(verb, length, wr_id=i, remote_va=0x1000 * i, rkey=1, swap_add=1)
        req.post(wr)
        posted.append((verb, length))
    return req, resp, posted


def check_exactly_once(out, req, posted):
    delivered = out.events(Delivered, "responder")
    assert [(e.verb, e.length) for e in delivered] == posted
    assert [e.msn for e in delivered] == list(range(1, len(posted) + 1))
    assert [e.wr_id for e in out.events(Completed)] == list(range(len(posted)))
    assert req.pending == 0 and req.unacked_psns == 0 and req.next_deadline() is None
    assert not out.events(Failed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(work, st.sampled_from(PMTUS), start_psns, st.sampled_from([None, 1, 3]),
       st.sampled_from([None, 2, 16]))
@pytest.mark.parametrize("transport", ["RC", "XRC"])
def test_lossless_rc_delivers_every_message_once_in_order(transport, wrs, pmtu, start, ack_every,
                                                          window):
    req, resp, posted = setup(transport, wrs, pmtu, start, ack_every, window)
    out = run(req, resp)
    check_exactly_once(out, req, posted)
    assert not out.events(Retransmitting)
    assert not any(s.packet.retransmission for s in out.wire)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["send", "send_imm", "write", "write_imm"]),
                          st.integers(0, 5000)), min_size=1, max_size=8),
       st.sampled_from(PMTUS), start_psns)
def test_lossless_uc_delivers_every_message_once_in_order(wrs, pmtu, start):
    req, resp, posted = setup("UC", wrs, pmtu, start)
    out = run(req, resp)
    check_exactly_once(out, req, posted)
    assert out.sent("resp") == []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(work, st.sampled_from([256, 1024]), start_psns, st.sampled_from([None, 2]),
       st.sets(st.integers(0, 40), max_size=3))
@pytest.mark.parametrize("transport", ["RC", "XRC"])
def test_rc_with_finite_losses_still_delivers_every_message_once(transport, wrs, pmtu, start,
                                                                 ack_every, lost):
    req, resp, posted = setup(transport, wrs, pmtu, start, ack_every)
    out = run(req, resp, lose=drop_nth(lost))
    check_exactly_once(out, req, posted)
    wire_lost = sum(s.lost for s in out.wire)
    assert len(out.events(Retransmitting)) <= 2 * wire_lost
    # every PSN a request took went out at least once, the first time not as a retransmission
    firsts = [s.packet for s in out.wire if s.direction == "req" and not s.packet.retransmission]
    assert len({p.psn for p in firsts}) == len(firsts)
