"""A sans-IO model of the IBA transport: RC/UC/UD requester and responder state machines.

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

__all__ = [
    "CNP_DSCP", "CNP_OPCODE", "PMTUS", "PSN_MASK", "SCOPES", "VERBS",
    "Aeth", "AtomicEth", "CnpPacer", "Completed", "Delivered", "Deth", "Discarded", "Duplicate",
    "Event", "Failed", "OutOfSequence", "Packet", "Requester", "RequesterConfig", "Responder",
    "ResponderConfig", "Retransmitting", "Reth", "RnrNakSent", "RnrWaiting", "Segmenter",
    "TransportError", "WorkRequest", "cnp_packet", "local_ack_timeout_ns", "msn_add",
    "packets_for", "psn_add", "psn_diff", "psn_in_range", "psn_lt", "rnr_timer_ns", "scope_key",
    "verb_opcodes",
]
