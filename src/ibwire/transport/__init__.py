"""A sans-IO model of the IBA transport: RC/UC/UD/XRC requester and responder state machines.

Packets in, packets and events out, no clock and no I/O (h11's ``Connection`` is the model):
callers pass ``now_ns`` with every call that can start or fire a timer, ask
``next_deadline()`` and call ``timeout(now_ns)`` when it comes. The generator drives it
forward and the QP analysis reads captures against the same rules.

    req = Requester(RequesterConfig(transport="RC", pmtu=1024, start_psn=0xFFFFFE, dest_qp=0x12))
    resp = Responder(ResponderConfig(transport="RC", pmtu=1024, start_psn=0xFFFFFE))
    req.post(WorkRequest("write", length=3000, remote_va=0x1000, rkey=7))
    while (p := req.next_packet(now_ns)) is not None:
        events = resp.receive(p, now_ns)
    while (a := resp.next_packet()) is not None:
        events = req.receive(a, now_ns)      # Completed(...)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ibwire._lazy import lazy_exports

if TYPE_CHECKING:
    from ibwire.transport.cnp import CNP_DSCP, CNP_OPCODE, SCOPES, CnpPacer, cnp_packet, scope_key
    from ibwire.transport.events import (
        Completed,
        Delivered,
        Discarded,
        Duplicate,
        Event,
        Failed,
        OutOfSequence,
        Retransmitting,
        RnrNakSent,
        RnrWaiting,
    )
    from ibwire.transport.packets import Aeth, AtomicEth, Deth, Packet, Reth
    from ibwire.transport.psn import PSN_MASK, msn_add, psn_add, psn_diff, psn_in_range, psn_lt
    from ibwire.transport.requester import Requester, RequesterConfig
    from ibwire.transport.responder import Responder, ResponderConfig
    from ibwire.transport.segment import Segmenter, packets_for
    from ibwire.transport.timers import local_ack_timeout_ns, rnr_timer_ns
    from ibwire.transport.verbs import PMTUS, VERBS, TransportError, WorkRequest, verb_opcodes

_MODULES = {
    "CNP_DSCP": "ibwire.transport.cnp",
    "CNP_OPCODE": "ibwire.transport.cnp",
    "SCOPES": "ibwire.transport.cnp",
    "CnpPacer": "ibwire.transport.cnp",
    "cnp_packet": "ibwire.transport.cnp",
    "scope_key": "ibwire.transport.cnp",
    "Completed": "ibwire.transport.events",
    "Delivered": "ibwire.transport.events",
    "Discarded": "ibwire.transport.events",
    "Duplicate": "ibwire.transport.events",
    "Event": "ibwire.transport.events",
    "Failed": "ibwire.transport.events",
    "OutOfSequence": "ibwire.transport.events",
    "Retransmitting": "ibwire.transport.events",
    "RnrNakSent": "ibwire.transport.events",
    "RnrWaiting": "ibwire.transport.events",
    "Aeth": "ibwire.transport.packets",
    "AtomicEth": "ibwire.transport.packets",
    "Deth": "ibwire.transport.packets",
    "Packet": "ibwire.transport.packets",
    "Reth": "ibwire.transport.packets",
    "PSN_MASK": "ibwire.transport.psn",
    "msn_add": "ibwire.transport.psn",
    "psn_add": "ibwire.transport.psn",
    "psn_diff": "ibwire.transport.psn",
    "psn_in_range": "ibwire.transport.psn",
    "psn_lt": "ibwire.transport.psn",
    "Requester": "ibwire.transport.requester",
    "RequesterConfig": "ibwire.transport.requester",
    "Responder": "ibwire.transport.responder",
    "ResponderConfig": "ibwire.transport.responder",
    "Segmenter": "ibwire.transport.segment",
    "packets_for": "ibwire.transport.segment",
    "local_ack_timeout_ns": "ibwire.transport.timers",
    "rnr_timer_ns": "ibwire.transport.timers",
    "PMTUS": "ibwire.transport.verbs",
    "VERBS": "ibwire.transport.verbs",
    "TransportError": "ibwire.transport.verbs",
    "WorkRequest": "ibwire.transport.verbs",
    "verb_opcodes": "ibwire.transport.verbs",
}

__all__ = [
    "CNP_DSCP", "CNP_OPCODE", "PMTUS", "PSN_MASK", "SCOPES", "VERBS",
    "Aeth", "AtomicEth", "CnpPacer", "Completed", "Delivered", "Deth", "Discarded", "Duplicate",
    "Event", "Failed", "OutOfSequence", "Packet", "Requester", "RequesterConfig", "Responder",
    "ResponderConfig", "Retransmitting", "Reth", "RnrNakSent", "RnrWaiting", "Segmenter",
    "TransportError", "WorkRequest", "cnp_packet", "local_ack_timeout_ns", "msn_add",
    "packets_for", "psn_add", "psn_diff", "psn_in_range", "psn_lt", "rnr_timer_ns", "scope_key",
    "verb_opcodes",
]

__getattr__ = lazy_exports(__name__, globals(), _MODULES)
