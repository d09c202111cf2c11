"""Connection management on a real stack: rdma_cm's MADs (rping, ``ib_write_bw -R``)
decoded, and the two directions of each connection paired by ``ibwire qp``.

``ib_write_bw -R`` makes two connections (one for perftest's own exchange, one for the
test), rping one; each is REQ, REP, RTU, and DREQ/DREP at the end (as many of each as the
teardown's timing makes: see the test).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.realstack.conftest import Runs
from tests.realstack.test_runs import ran
from tests.realstack.wire import connections, destination, is_rc_request, packets, source

#: CM attribute IDs (IBA 1.4 §12.6): REQ, REP, RTU, DREQ, DREP.
CM_ATTRIBUTES = {0x10: "REQ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ", 0x16: "DREP"}
#: the teardown's records in ibwire's (Wireshark's) field names
TEARDOWN = {0x15: "cm.dreq", 0x16: "cm.drsp"}
CM_CLASS = 0x07
CONNECTIONS = {"rping": 1, "rping_ipv6": 1, "write_cm": 2}


@pytest.mark.parametrize("name", list(CONNECTIONS))
def test_cm_exchange_decoded_and_paired(rig_runs: Runs, name: str):
    ran(rig_runs, name)
    full = rig_runs[name].full
    rows = packets(full)
    mads = [p for p in rows if p.get("mad.mgmtclass") == CM_CLASS]
    kinds = Counter(CM_ATTRIBUTES.get(p["mad.attributeid"], hex(p["mad.attributeid"]))
                    for p in mads)
    n = CONNECTIONS[name]
    assert set(kinds) == set(CM_ATTRIBUTES.values()), kinds
    assert [kinds[k] for k in ("REQ", "REP", "RTU")] == [n] * 3, kinds
    reqs = [p for p in mads if p["mad.attributeid"] == 0x10]
    reps = {p["cm.rep.remotecommid"]: p for p in mads if p["mad.attributeid"] == 0x13}
    # The teardown's counts are timing's: both ends may disconnect at once (their DREQs
    # cross and each answers the other's), and a DREQ not answered in time is sent again.
    # What holds: Linux's CM answers each DREQ it receives with at most one DREP (cm.c,
    # cm_dreq_handler: from DREQ_RCVD, again from TIMEWAIT, or for an ID it no longer has),
    # so per connection and direction DREPs <= DREQs, and each connection is torn down.
    # Seen with ib_write_bw -R's 2 connections: 3 DREQ and 2 DREP, or 3 and 3.
    sent: Counter[tuple[int, int, int]] = Counter()  # (attribute, from comm ID, to comm ID)
    for p in mads:
        k = TEARDOWN.get(p["mad.attributeid"])
        if k is not None:
            sent[p["mad.attributeid"], p[f"{k}.localcommid"], p[f"{k}.remotecommid"]] += 1
    ends = {(req["cm.req"], reps[req["cm.req"]]["cm.rep"]) for req in reqs}
    assert {(a, b) for _, a, b in sent} <= ends | {(b, a) for a, b in ends}, sent
    for a, b in ends:
        for x, y in ((a, b), (b, a)):  # DREPs sent by y answer DREQs sent by x
            assert sent[0x16, y, x] <= sent[0x15, x, y], (x, y, sent)
        assert sent[0x15, a, b] + sent[0x15, b, a] >= 1, (a, b, sent)
        assert sent[0x16, a, b] + sent[0x16, b, a] >= 1, (a, b, sent)
    paired = [c for c in connections(full) if c["cm"] is not None]
    by_ids = {(c["cm"]["local_comm_id"], c["cm"]["remote_comm_id"]): c for c in paired}
    firsts: dict[tuple[str, int], int] = {}
    for p in rows:
        if is_rc_request(p) and "mad.mgmtclass" not in p:
            firsts.setdefault((destination(p), p["bth.destqp"]), p["bth.psn"])
    for req in reqs:
        rep = reps[req["cm.req"]]  # the REP answering this REQ names its comm ID
        active = by_ids.get((req["cm.req"], rep["cm.rep"]))
        passive = by_ids.get((rep["cm.rep"], req["cm.req"]))
        assert active is not None or passive is not None
        for c in (active, passive):
            if c is not None:
                assert c["cm"]["service_id"] == req["cm.req.serviceid"]
                assert c["cm"]["state"] == "disconnected"
        if active is not None:  # the active side sent requests on this connection
            assert (active["requester"]["address"], active["requester"]["qpn"]) == \
                (source(req), req["cm.req.localqpn"])
            assert active["responder"]["qpn"] == rep["cm.rep.localqpn"]
        # the requests to each side begin at the Starting PSN of the CM message that side
        # sent (REQ: the active side, REP: the passive side), with Linux's CM over rxe as
        # with ibwire gen's CM exchange
        for mad, qpn, start in ((req, req["cm.req.localqpn"], req["cm.req.startpsn"]),
                                (rep, rep["cm.rep.localqpn"], rep["cm.rep.startpsn"])):
            key = (source(mad), qpn)
            if key in firsts:
                assert firsts[key] == start, (key, firsts[key], start)
    assert len(by_ids) >= 2 * n - 1  # each connection paired (write_cm's test QP one way)
