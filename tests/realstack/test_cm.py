"""Connection management on a real stack: rdma_cm's MADs (rping, ``ib_write_bw -R``)
decoded, and the two directions of each connection paired by ``ibwire qp``.

``ib_write_bw -R`` makes two connections (one for perftest's own exchange, one for the
test), rping one; each is REQ, REP, RTU, and DREQ/DREP at the end (a DREQ from each end
when both disconnect at once).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.realstack.conftest import Runs
from tests.realstack.test_runs import ran
from tests.realstack.wire import connections, destination, is_rc_request, packets, source

#: CM attribute IDs (IBA 1.4 §12.6): REQ, REP, RTU, DREQ, DREP.
CM_ATTRIBUTES = {0x10: "REQ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ", 0x16: "DREP"}
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
    # both ends may start the disconnect at once: their DREQs cross, and Linux's CM answers
    # one of them with a DREP (seen with ib_write_bw -R: 3 DREQ, 2 DREP for 2 connections)
    dreqs = kinds.pop("DREQ", 0)
    assert kinds == dict.fromkeys(("REQ", "REP", "RTU", "DREP"), n), kinds
    assert n <= dreqs <= 2 * n
    reqs = [p for p in mads if p["mad.attributeid"] == 0x10]
    reps = {p["cm.rep.remotecommid"]: p for p in mads if p["mad.attributeid"] == 0x13}
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
