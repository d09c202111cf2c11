"""Mutations made in flight, kept as shots, so that a finding's in-flight packets are
bisected, shrunk and replayed into a fresh guest pair like the packets injected.

The in-flight mutator (:mod:`ibwire.livefuzz.hook`) changes frames of a connection that
exists only for the run: its QPNs, PSNs, addresses and MACs are gone after the next boot. A
mutation becomes a :class:`~ibwire.livefuzz.shots.Shot` whose template is the frame as it
came, whose PSN is said relative to the receiving end (a request: to the PSN it expected
next; a response: to the requester's first unanswered PSN) and whose edits are the bytes the
mutation changed. Rendered against the connection it was taken from, the shot gives back the
frame that was sent, byte for byte (:func:`shot_of_mutation` checks it); against a fresh
connection, the same lie aimed at the same place in its PSN space.

:class:`InFlightShots` is the forwarder hook that does it live: it feeds a
:class:`~ibwire.livefuzz.state.LiveState` with every frame (what the campaign aims its
injections with) and turns each mutation into a shot against the connection as it stood
just before the mutated frame.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ibwire.fuzz.generate import reseal
from ibwire.livefuzz.hook import InFlightMutator, Mutated
from ibwire.livefuzz.shots import (
    IP,
    Connection,
    Ref,
    Shot,
    render,
    retargeted,
    templated,
)
from ibwire.livefuzz.state import PSN_MOD, RC_RESPONSES, LiveState
from ibwire.tables import mad_attributes

CM_CLASS = 0x07


def _bth(frame: bytes) -> int:
    return IP + (frame[IP] & 0x0F) * 4 + 8


def aim(state: LiveState, frame: bytes) -> tuple[Connection, int] | None:
    """The live connection ``frame`` goes to, as ``state`` knows it now, and which of its
    ends (0 or 1, ordered by address) receives it; None when ``state`` knows none."""
    if not templated(frame):
        return None
    bth = _bth(frame)
    destination = ".".join(str(b) for b in frame[IP + 16:IP + 20])
    qpn = int.from_bytes(frame[bth + 5:bth + 8], "big")
    for a, b in state.connections():
        conn = (a, b) if a.address <= b.address else (b, a)
        for to, end in enumerate(conn):
            if end.address == destination and (qpn == 1 or end.qpn == qpn):
                return conn, to
    return None


def shot_of_mutation(m: Mutated, conn: Connection, to: int, source_mac: str) -> Shot | None:
    """``m`` as a shot against ``conn`` (as it stood before ``m.original``) into end ``to``;
    None when the frame cannot be a template or the shot would not give back what was
    sent."""
    if len(m.sent) != 1 or not templated(m.original):
        return None
    original, sent = m.original, m.sent[0]
    bth = _bth(original)
    opcode = original[bth]
    psn = int.from_bytes(original[bth + 9:bth + 12], "big")
    end = conn[to]
    fields: dict[str, Any] = {"bth.opcode": opcode}
    if int.from_bytes(original[bth + 5:bth + 8], "big") == 1:
        role = "cm"
        mad = bth + 12 + 8  # BTH, DETH
        attribute = mad_attributes().get(
            (original[mad + 1], int.from_bytes(original[mad + 16:mad + 18], "big"))
            if len(original) >= mad + 18 else (0, 0))
        kind = f"cm.{attribute.name if attribute else '?'} in-flight {m.kind}"
    else:
        role = "response" if opcode in RC_RESPONSES else "request"
        base = end.acked_psn if role == "response" else end.recv_psn
        fields["bth.psn"] = Ref("acked_psn" if role == "response" else "recv_psn",
                                (psn - (psn if base is None else base)) % PSN_MOD)
        kind = f"in-flight {m.kind}"
    shot = Shot(role, to, kind, fields, template=bytes(original))
    rendered = retargeted(shot, conn, source_mac)
    shot = replace(shot, edits=tuple((i, rendered[i] ^ sent[i])
                                     for i in range(min(len(rendered), len(sent)))
                                     if rendered[i] != sent[i]),
                   cut=len(sent) if len(sent) < len(rendered) else None,
                   tail=bytes(sent[len(rendered):]),
                   reseal=reseal(sent, "ethernet") == sent)
    return shot if render(shot, conn, source_mac) == sent else None


@dataclass
class InFlightShots:
    """A forwarder hook: feeds :attr:`state` every frame, mutates through :attr:`mutator`,
    and keeps each mutation as a shot (:attr:`shots`; None where one could not be made)."""

    mutator: InFlightMutator
    source_mac: str
    state: LiveState = field(default_factory=LiveState)
    lock: threading.Lock = field(default_factory=threading.Lock)
    shots: list[Shot | None] = field(default_factory=list)
    sides: dict[bytes, int] = field(default_factory=dict)
    """Source MAC -> the direction its frames travel (0: it sits behind port A)."""

    def __call__(self, frame: bytes, direction: int, state: Any = None
                 ) -> Sequence[bytes] | None:
        frame = bytes(frame)
        with self.lock:
            self.sides[frame[6:12]] = direction
            aimed = aim(self.state, frame)
            self.state.feed(frame)
        before = len(self.mutator.log)
        out = self.mutator(frame, direction, state)
        if len(self.mutator.log) > before:
            shot = None if aimed is None else shot_of_mutation(
                self.mutator.log[-1], aimed[0], aimed[1], self.source_mac)
            with self.lock:
                self.shots.append(shot)
        return out

    def since(self, mark: int, end: int | None = None) -> list[tuple[Shot, bytes]]:
        """The mutations after the first ``mark`` (a previous ``len(shots)``), up to
        ``end``, that were kept as shots: each shot and the frame it sent."""
        with self.lock:
            shots = self.shots[mark:end]
        # the mutator logs before the shot is kept: its log is as long or one longer
        log = self.mutator.log[mark:mark + len(shots)]
        return [(s, m.sent[0]) for s, m in zip(shots, log, strict=True) if s is not None]

    def direction_to(self, frame: bytes) -> int:
        """The direction that delivers ``frame`` to its destination MAC (0: out on B)."""
        with self.lock:
            behind = self.sides.get(bytes(frame[0:6]))
        return 0 if behind is None else 1 - behind
