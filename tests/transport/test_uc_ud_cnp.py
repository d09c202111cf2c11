"""UC loses whole messages and never answers; UD is one packet per message with DETH and no
PSN check (IBA Vol. 1 9.7.5.2, 10.2.5); CNP pacing per scope (RoCEv2 Annex A17, DCQCN)."""

from __future__ import annotations

import pytest

from ibwire.transport import (
    CNP_OPCODE,
    CnpPacer,
    Completed,
    Delivered,
    Discarded,
    Requester,
    RequesterConfig,
    Responder,
    ResponderConfig,
    WorkRequest,
    cnp_packet,
    psn_add,
)

from .wire import drop_psns, run

S = 0xFFFFFE


def uc_pair():
    req = Requester(RequesterConfig(transport="UC", pmtu=256, start_psn=S, dest_qp=2))
    resp = Responder(ResponderConfig(transport="UC", pmtu=256, start_psn=S, dest_qp=1))
    return req, resp


def test_uc_loss_drops_the_rest_of_the_message_and_nothing_is_resent():
    req, resp = uc_pair()
    for i in range(3):
        req.post(WorkRequest("write", 3 * 256, wr_id=i))   # PSNs S..S+2, S+3..S+5, S+6..S+8
    out = run(req, resp, lose=drop_psns({psn_add(S, 4): 1}))
    assert out.sent("resp") == []                        # UC never answers
    assert len(out.sent("req")) == 9                     # and never resends
    delivered = out.events(Delivered, "responder")
    assert [(e.first_psn, e.length) for e in delivered] == [(S, 768), (psn_add(S, 6), 768)]
    assert [e.msn for e in delivered] == [1, 2]
    (dropped,) = out.events(Discarded, "responder")
    assert (dropped.psn, dropped.reason) == (psn_add(S, 5), "uc_sequence")
    assert [e.wr_id for e in out.events(Completed)] == [0, 1, 2]   # complete when sent
    assert req.next_deadline() is None


def test_uc_first_packet_lost_drops_middle_and_last():
    req, resp = uc_pair()
    req.post(WorkRequest("send", 3 * 256))
    req.post(WorkRequest("send", 10))
    out = run(req, resp, lose=drop_psns({S: 1}))
    assert [e.reason for e in out.events(Discarded, "responder")] == ["uc_sequence"] * 2
    assert [(e.first_psn, e.length) for e in out.events(Delivered, "responder")] == [
        (psn_add(S, 3), 10)]


def test_ud_every_packet_is_a_message_and_the_q_key_must_match():
    req = Requester(RequesterConfig(transport="UD", pmtu=1024, start_psn=S, dest_qp=9,
                                    src_qp=0x55, q_key=0x1234))
    resp = Responder(ResponderConfig(transport="UD", pmtu=1024, start_psn=0, q_key=0x1234))
    req.post(WorkRequest("send", 1024, wr_id=1))
    req.post(WorkRequest("send_imm", 0, wr_id=2, imm=0xAB))
    req.post(WorkRequest("send", 5, wr_id=3, q_key=0x9999))
    out = run(req, resp)
    assert out.sent("resp") == []
    assert [p.deth for p in out.sent("req")] == [(0x1234, 0x55), (0x1234, 0x55), (0x9999, 0x55)]
    # the PSN is not checked: the responder started at 0, the requester near the wrap
    delivered = out.events(Delivered, "responder")
    assert [(e.verb, e.length, e.imm) for e in delivered] == [("send", 1024, None),
                                                              ("send_imm", 0, 0xAB)]
    assert [e.reason for e in out.events(Discarded, "responder")] == ["q_key"]
    assert [e.wr_id for e in out.events(Completed)] == [1, 2, 3]


def test_a_responder_takes_only_its_own_transport():
    resp = Responder(ResponderConfig(transport="RC"))
    req = Requester(RequesterConfig(transport="UC"))
    req.post(WorkRequest("send", 1))
    (e,) = resp.receive(req.next_packet(0))
    assert isinstance(e, Discarded) and e.reason == "unexpected"


US = 1_000


def test_cnp_at_most_one_per_interval_per_qp():
    pacer = CnpPacer(4 * US, "qp")
    times = [0, 1 * US, 3999, 4 * US, 5 * US, 8 * US - 1, 8 * US, 20 * US]
    sent = [t for t in times if pacer.on_marked("a", "b", 7, t)]
    assert sent == [0, 4 * US, 8 * US, 20 * US]


@pytest.mark.parametrize("scope,expected", [
    # marked packets at the same instant: (src, dst, dest QPN)
    ("qp", [True, True, True, True, False]),
    ("ip-pair", [True, False, True, True, False]),
    ("dest-ip", [True, False, False, True, False]),
    ("port", [True, False, False, False, False]),
])
def test_cnp_scope(scope, expected):
    pacer = CnpPacer(10 * US, scope)
    marked = [("10.0.0.1", "10.0.0.2", 1), ("10.0.0.1", "10.0.0.2", 2),
              ("10.0.0.1", "10.0.0.3", 3), ("10.0.0.9", "10.0.0.2", 4),
              ("10.0.0.1", "10.0.0.2", 1)]
    assert [pacer.on_marked(s, d, q, 100) is not None for s, d, q in marked] == expected


def test_cnp_waits_an_interval_after_the_last_one_of_its_key_left():
    """A CNP decided on time but sent late (its port busy) holds back the next one of its
    key until an interval after it left; other keys are not held."""
    pacer = CnpPacer(3 * US, "qp")
    first = pacer.on_marked("a", "b", 7, 0)
    assert first is not None and pacer.send_at(first) == 0
    pacer.sent(first, 1300)                      # behind a 4 KiB frame at 25 Gb/s
    second = pacer.on_marked("a", "b", 7, 3 * US)
    assert second == first and pacer.send_at(second) == 1300 + 3 * US
    other = pacer.on_marked("a", "b", 8, 3 * US)
    assert other is not None and pacer.send_at(other) == 0


def test_cnp_interval_0_answers_every_mark_and_bad_settings_are_refused():
    pacer = CnpPacer(0, "port")
    assert all(pacer.on_marked("a", "b", 1, 5) for _ in range(3))
    with pytest.raises(ValueError):
        CnpPacer(1, "switch")
    with pytest.raises(ValueError):
        CnpPacer(-1, "qp")


def test_cnp_packet():
    p = cnp_packet(0x33)
    assert p.opcode == CNP_OPCODE == 0x81 and p.name == "CNP" and p.becn and p.dest_qp == 0x33
    assert p.fields()["bth.becn"] == 1
