"""Handing a simulated conversation over to the fast plan once its faults are over.

:meth:`ibwire.gen.Generation` simulates a faulted conversation packet by packet
(:mod:`ibwire.gen.run`). Once no fault is left to come and the traffic is steady again, the
rest is the lossless conversation :mod:`ibwire.gen.fast` computes in closed form, from each
QP's next request: :func:`steady` says when that is; the records the simulation still has
on their way then are drained (:func:`drain`) and merged into the plan's first batch.
"""

from __future__ import annotations

import heapq
from typing import Any

from ibwire.transport import psn_add
from ibwire.transport.cnp import CNP_OPCODE


def steady(conns: list[Any], arrivals: list, ready: set[int], turn: int, rev_free: int,
           t: int) -> list[int] | None:
    """Each QP's next request index when the rest of the conversation is the lossless
    one from now on (what :mod:`ibwire.gen.fast` computes), else None: no fault or RNR
    NAK left to come, nothing waiting, failed or to be resent, the responder's port free
    with nothing queued, no NAK, damaged or marked packet on its way, every request on
    its way the next one its responder expects, and the next QP to send the first of
    the round."""
    if rev_free > t:
        return None
    offsets, left = [], []
    for c in conns:
        if c.failed or c.rnr_faults or c.req.rnr_waiting or c.resp.has_output or (
                c.resp.rnr_pending):
            return None
        if c.req.resending:   # resends stay the model's: their causes are its own
            return None
        offsets.append(c.req.next_index)
        left.append(c.req.next_index < c.packets)
        if left[-1] and c.k not in ready:
            return None
    if not any(left):
        return None
    n = len(conns)
    sender = next((conns[(turn + i) % n].k for i in range(n)
                   if conns[(turn + i) % n].k in ready and left[(turn + i) % n]), None)
    if sender != left.index(True):
        return None
    on_way: dict[int, list[int]] = {}
    for _, _, direction, k, packet, icrc_ok, ce in sorted(arrivals, key=lambda a: a[1]):
        if not icrc_ok or ce:
            return None
        if packet.opcode == CNP_OPCODE:
            continue
        if direction == "rev":
            if packet.aeth is None or packet.aeth.syndrome >> 5 != 0:
                return None
        else:
            on_way.setdefault(k, []).append(packet.psn)
    for c in conns:
        if not c.req.reliable:
            continue
        expected = c.resp.expected_psn
        for psn in on_way.get(c.k, ()):
            if psn != expected:
                return None
            expected = psn_add(expected, 1)
        if expected != c.req.psn_of(offsets[c.k]):
            return None
    return offsets

def drain(taps: list) -> tuple:
    """A record the simulation still had when it handed over, for the fast plan to merge."""
    when, _, frame, hits, (c, packet, ce, bad, sent, direction) = heapq.heappop(taps)
    reth = packet.reth
    row = (c.k, packet.opcode, packet.psn, packet.ackreq,
           packet.aeth.syndrome if packet.aeth else 0, reth.dmalen if reth else 0,
           reth.va if reth else 0, packet.payload_len, ce, bad)
    return when, sent, direction, frame, row, hits
