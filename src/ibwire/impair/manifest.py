"""The manifest of a forwarder's run: what it did to which frame of its capture.

The format of ``ibwire gen --manifest`` (:mod:`ibwire.gen.run`), so that ``ibwire qp
CAPTURE --manifest`` reads both: ``version``, ``seed``, ``encapsulation``, ``tap`` (here
``switch``: the capture is taken half way, each frame as it arrived), ``linktype``,
``records``, ``faults`` (sorted by record) and ``qps``. A fault is ``kind``, ``qp`` (the
connection's index in ``qps``, null when the frame belongs to none), ``psn`` (as on the
wire) and ``record`` (numbered from 1: the frame the fault touched; for a forged packet, the
forged packet, and ``trigger`` the frame that drew it), as in gen, with more keys: gen's
``timer`` (RNR NAKs), ``direction`` (a2b, b2a), ``opcode``, ``qpn`` (the frame's DestQP),
``tx`` (the transmission of its PSN), ``rule`` (the SPEC), ``time_ns`` (arrival), ``records``
(dup: the frame and its copies), ``sent_ns`` (delay, reorder: when the held frame went),
``code`` (NAK), ``peer_qpn`` and ``msn`` (forged packets), ``discarded`` (RNR NAK: the
requests that followed the one refused, discarded until the requester sent it again). Beside gen's keys: the
``interfaces``, frames ``arrived`` and ``forwarded`` each way, ``dropped``,
``checksums_completed``, ``send_failures``, ``oversize`` (longer than the egress MTU),
``send_ring_full`` (frames sent with sendmmsg because the port's send ring had no free slot),
``kernel_drops`` per direction (frames the kernel dropped before the forwarder read them:
lost outside the plan, named in no fault),
``started_ns``, ``cpu_seconds`` (the forwarding thread's CPU time) and ``batches`` (reads
of a port that brought frames). A ``qps`` entry is gen's
``requester``/``responder`` (``address``, ``qpn``), ``transport``, ``start_psn``, and what the
forwarder counted. Rules that never fired are listed in ``unapplied`` with the reason.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from ibwire.gen.run import MANIFEST_VERSION
from ibwire.impair.capture import LINKTYPE_ETHERNET
from ibwire.impair.plan import FAULT_OPTIONS

if TYPE_CHECKING:
    from ibwire.impair.forwarder import Forwarder


class Manifest:
    def __init__(self, forwarder: Forwarder) -> None:
        self.f = forwarder

    def build(self) -> dict[str, Any]:
        f = self.f
        assert f.log is not None
        qps = [self._qp(c) for c in f.state]
        encaps = Counter(q.pop("_encapsulation") for q in qps)
        return {
            "version": MANIFEST_VERSION, "seed": f.plan.seed,
            "encapsulation": encaps.most_common(1)[0][0] if encaps else None,
            "tap": "switch", "linktype": LINKTYPE_ETHERNET, "records": f.log.records,
            "faults": sorted(f.faults, key=lambda e: (e["record"] is None, e["record"] or 0)),
            "qps": qps,
            "interfaces": list(f.interfaces),
            "arrived": {"a2b": f.arrived[0], "b2a": f.arrived[1]},
            "forwarded": {"a2b": f.forwarded[0], "b2a": f.forwarded[1]},
            "dropped": f.dropped,
            "checksums_completed": f.checksums_completed,
            "send_failures": sum(p.failed for p in f.ports),
            "oversize": sum(p.oversize for p in f.ports),
            "send_ring_full": sum(p.ring_full for p in f.ports),
            "kernel_drops": {"a2b": f.ports[0].count_kernel_drops(),
                             "b2a": f.ports[1].count_kernel_drops()},
            "started_ns": f.started_ns,
            "cpu_seconds": round(f.cpu_seconds, 6),
            "batches": f.batches,
            "unapplied": self.unapplied(),
        }

    def _qp(self, c: Any) -> dict[str, Any]:
        from ibwire.dissect import parse

        request = parse(c.request_frame)
        fields = request.fields()
        src, dst = _address(fields)
        transport = _transport(fields.get("bth.opcode", 0))
        return {
            "requester": {"address": src, "qpn": c.peer_qpn},
            "responder": {"address": dst, "qpn": c.qpn},
            "transport": transport, "start_psn": c.start_psn, "next_psn": c.next_psn,
            "direction": ("a2b", "b2a")[c.direction], "requests": c.requests,
            "answers": c.answers, "msn": c.msn, "cm": c.cm, "first_ns": c.first_ns,
            "last_ns": c.last_ns, "_encapsulation": request.encapsulation,
        }

    def unapplied(self) -> list[dict[str, str]]:
        """The rules that never fired, each with why (a QP never seen, nothing matched ...)."""
        f = self.f
        option = dict(FAULT_OPTIONS)
        out = []
        for rule in f.plan.rules:
            if rule.fired:
                continue
            if rule.qp is not None and rule.qp >= len(f.state.connections):
                why = (f"qp={rule.qp}: only {len(f.state.connections)} connection(s) "
                       f"appeared")
            elif rule.qpn is not None and all(c.qpn != rule.qpn for c in f.state):
                why = f"qpn={rule.qpn:#x}: no request to that QP appeared"
            elif rule.matched:
                why = (f"{rule.matched} frame(s) matched, none drawn"
                       if rule.rate is not None or rule.nth is not None else
                       f"{rule.matched} frame(s) matched but it could not apply")
            else:
                why = "no frame matched"
            notes = [n for n in f.notes if n.startswith(f"{rule.kind} {rule.text!r}")]
            if notes:
                why += "; " + notes[0].split(": ", 1)[1]
            out.append({"kind": rule.kind, "rule": f"--{option[rule.kind]} {rule.text}".strip(),
                        "reason": why})
        return out

    def write(self, path: str, manifest: dict[str, Any]) -> None:
        from ibwire.pcap.atomic import write_atomically

        write_atomically(path, json.dumps(manifest, indent=1).encode() + b"\n")


def _address(fields: dict[str, Any]) -> tuple[Any, Any]:
    """(source, destination) as the QP analysis reports them: IP or GID text, else a LID."""
    for s, d in (("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"), ("grh.sgid", "grh.dgid"),
                 ("lrh.slid", "lrh.dlid")):
        if s in fields:
            return fields[s], fields[d]
    return None, None


def _transport(opcode: int) -> str:
    from ibwire.tables import opcodes

    op = opcodes().get(opcode)
    return op.transport if op is not None else "?"
