"""A fault manifest for a rig run whose faults were nftables drops on the bridge
(``asked.faults.drops`` of its scenario record): each rule drops the n-th frame (``nth``,
from 0, as ``numgen inc`` counts) from ``source`` whose BTH opcode is one of ``opcodes``.
The capture was taken on the bridge before the rules (tap ``switch``), so the dropped frames
are in it; each becomes a ``drop`` fault, a request or an answer by who sent it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ibwire.analysis import analyse
from ibwire.analysis.addresses import MAPPED, address_text
from ibwire.scan import scan_capture

ROCEV2_PORT = 4791


def manifest_from_drops(capture: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    qps = [{"requester": c["requester"], "responder": c["responder"],
            "transport": c["transport"]} for c in analyse(capture).as_dicts()]
    rules = scenario["asked"]["faults"]["drops"]
    counted = [0] * len(rules)
    faults = []
    for batch in scan_capture(capture, fields=("bth.opcode", "bth.psn", "bth.destqp",
                                               "ip.src", "udp.dstport")):
        c = batch.columns
        roce = np.flatnonzero((c["offset.bth"] >= 0) & (c["udp.dstport"] == ROCEV2_PORT))
        for i in roce.tolist():
            source = address_text(0, MAPPED | int(c["ip.src"][i]))
            opcode, qpn = int(c["bth.opcode"][i]), int(c["bth.destqp"][i])
            for k, rule in enumerate(rules):
                if rule["source"] != source or opcode not in rule["opcodes"]:
                    continue
                if counted[k] in rule["nth"]:
                    q, qp = next((q, qp) for q, qp in enumerate(qps)
                                 if (qp["requester"]["address"], qp["responder"]["qpn"])
                                 == (source, qpn) or (qp["responder"]["address"],
                                                      qp["requester"]["qpn"]) == (source, qpn))
                    request = qp["requester"]["address"] == source
                    faults.append({"kind": "drop", "qp": q, "psn": int(c["bth.psn"][i]),
                                   "record": int(c["record"][i]) + 1,
                                   "direction": "request" if request else "answer"})
                counted[k] += 1
    return {"version": 1, "tap": "switch", "qps": qps, "faults": faults}
