"""Connection management on a real stack: rdma_cm's MADs (rping, ``ib_write_bw -R``)
decoded, and the two directions of each connection paired by ``ibwire qp``."""

from __future__ import annotations

import pytest

from tests.realstack.conftest import Runs
from tests.realstack.test_runs import ran
from tests.realstack.wire import connections, packets, source

#: CM attribute IDs (IBA 1.4 §12.6): REQ, REP, RTU, DREQ, DREP.
CM_ATTRIBUTES = {0x10: "REQ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ", 0x16: "DREP"}
CM_CLASS = 0x07


@pytest.mark.parametrize("name", ["rping", "rping_ipv6", "write_cm"])
def test_cm_exchange_decoded_and_paired(rig_runs: Runs, name: str):
    ran(rig_runs, name)
    full = rig_runs[name].full
    mads = [p for p in packets(full) if p.get("mad.mgmtclass") == CM_CLASS]
    kinds = [CM_ATTRIBUTES.get(p["mad.attributeid"], hex(p["mad.attributeid"])) for p in mads]
    assert sorted(kinds) == sorted(CM_ATTRIBUTES.values()), kinds
    req = next(p for p in mads if p["mad.attributeid"] == 0x10)
    rep = next(p for p in mads if p["mad.attributeid"] == 0x13)
    paired = [c for c in connections(full) if c["cm"] is not None]
    assert len(paired) == 2, paired
    a, b = paired
    assert a["cm"]["local_comm_id"] == b["cm"]["remote_comm_id"]
    assert b["cm"]["local_comm_id"] == a["cm"]["remote_comm_id"]
    assert a["cm"]["service_id"] == b["cm"]["service_id"] == req["cm.req.serviceid"]
    assert {a["cm"]["state"], b["cm"]["state"]} == {"disconnected"}
    # the QPs the REQ and REP announced are the ones that carried the data
    qpns = {c["requester"]["qpn"] for c in paired} | {c["responder"]["qpn"] for c in paired}
    assert {req["cm.req.localqpn"], rep["cm.rep.localqpn"]} <= qpns
    # the two Starting PSNs are the first PSNs of the two sides' requests (rping and
    # ib_write_bw -R both send from each side); which side uses which is Linux's affair
    rows = packets(full)
    firsts = {}
    for p in rows:
        if p["bth.destqp"] in qpns and p["bth.opcode"] < 0x0D:
            firsts.setdefault(source(p), p["bth.psn"])
    assert set(firsts.values()) == {req["cm.req.startpsn"], rep["cm.rep.startpsn"]}
