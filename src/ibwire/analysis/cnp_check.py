"""CNP pacing as a capture shows it, against a pacing scope and a minimum interval.

A notification point sends a CNP for a CE-marked packet unless it sent one for the same
scope key within the interval (``ibwire.transport.cnp``: keys per QP, IP pair, destination
IP or port, as Lumina's ``cnp_check.py`` computes expected CNPs). Two findings, on the
connection of the CNP or of the marked packet:

- ``cnp_too_soon``: a CNP less than the interval after the previous CNP of its key;
- ``cnp_missing``: a CE-marked request for which a CNP was due (none of its key in the
  interval before it) and none of its key came within the interval after it.

Requests' marks draw CNPs from the responder to the requester's QP; READ responses' marks
draw CNPs from the requester to the responder's QP (the connection's rows say which CNPs go
that way: ``to_responder``), keyed the other way round. Marks on ACKs are not checked (their
CNP to the responder cannot be told from one for a READ response). A tap before the marking
point sees no marks, so there only ``cnp_too_soon`` can fire.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ibwire.analysis.connections import Connection
from ibwire.transport.cnp import scope_key
from ibwire.transport.opkinds import CNP, KIND, READ_RESP, REQUEST


class CnpCheck:
    def __init__(self, scope: str, interval_ns: int) -> None:
        scope_key(scope, None, None, 0)  # refuses an unknown scope
        self.scope = scope
        self.interval_ns = interval_ns
        self.last: dict[Hashable, tuple[int, int, Connection]] = {}   # key -> last CNP
        self.due: dict[Hashable, tuple[int, int, Connection]] = {}    # key -> mark awaiting
        self.end_ns: int | None = None

    def key(self, c: Connection, to_responder: bool = False) -> Hashable:
        """The scope key of a mark the responder notifies (or, ``to_responder``, the
        requester: a READ response's)."""
        if to_responder:
            if self.scope == "port":
                return ("port", c.requester)
            return scope_key(self.scope, c.responder, c.requester, c.requester_qpn or -1)
        if self.scope == "port":   # one port per notification point (the responder)
            return ("port", c.responder)
        return scope_key(self.scope, c.requester, c.responder, c.responder_qpn or -1)

    def feed(self, parts: list[tuple[Connection, dict[str, np.ndarray]]]) -> None:
        """Marks and CNPs of one batch: (connection, its rows) pairs."""
        events = []
        for c, rows in parts:
            last = int(rows["time"].max())
            self.end_ns = last if self.end_ns is None else max(self.end_ns, last)
            kind = KIND[rows["opcode"]]
            marked = rows["ce"].astype(bool)
            pick = np.flatnonzero((kind == CNP) | (((kind == REQUEST) | (kind == READ_RESP))
                                                   & marked))
            if len(pick):
                back = rows.get("to_responder")
                reverse = ((kind[pick] == READ_RESP) if back is None else
                           np.where(kind[pick] == CNP, back[pick], kind[pick] == READ_RESP))
                events.extend(zip(rows["record"][pick].tolist(), rows["time"][pick].tolist(),
                                  (kind[pick] == CNP).tolist(), [c] * len(pick),
                                  reverse.tolist(), strict=True))
        events.sort(key=lambda e: e[0])
        for record, t, is_cnp, c, reverse in events:
            self._event(record, t, is_cnp, c, reverse)

    def _event(self, record: int, t: int, is_cnp: bool, c: Connection,
               to_responder: bool = False) -> None:
        key = self.key(c, to_responder)
        self._expire(key, t)
        if is_cnp:
            last = self.last.get(key)
            if last is not None and t - last[0] < self.interval_ns:
                c.observed.find("cnp_too_soon", [last[1], record],
                                f"CNP {t - last[0]} ns after the previous one of its "
                                f"{self.scope} scope (interval {self.interval_ns} ns)")
            self.last[key] = (t, record, c)
            self.due.pop(key, None)
            return
        last = self.last.get(key)
        if key not in self.due and (last is None or t - last[0] >= self.interval_ns):
            self.due[key] = (t, record, c)

    def _expire(self, key: Hashable, t: int) -> None:
        due = self.due.get(key)
        if due is not None and t - due[0] >= self.interval_ns:
            self._missing(due)
            del self.due[key]

    def _missing(self, due: tuple[int, int, Connection]) -> None:
        t, record, c = due
        c.observed.find("cnp_missing", [record],
                        f"CE-marked packet drew no CNP within {self.interval_ns} ns "
                        f"({self.scope} scope)")

    def finish(self) -> None:
        """Marks still waiting when the capture ends, if it ran past their interval."""
        for due in self.due.values():
            if self.end_ns is not None and self.end_ns - due[0] >= self.interval_ns:
                self._missing(due)
        self.due.clear()
