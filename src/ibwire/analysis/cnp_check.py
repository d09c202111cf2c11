"""CNP pacing as a capture shows it, against a pacing scope and a minimum interval.

A notification point sends a CNP for a CE-marked packet unless it sent one for the same
scope key within the interval (``ibwire.transport.cnp``: keys per QP, IP pair, destination
IP or port, as Lumina's ``cnp_check.py`` computes expected CNPs). Two findings, on the
connection of the CNP or of the marked packet:

- ``cnp_too_soon``: a CNP less than the interval after the previous CNP of its key;
- ``cnp_missing``: a CE-marked request (or READ response) owed a CNP, by the pacing as
  below, that no CNP of its key answered in time.

Both are reckoned at the notification point, which gets the marked packet some time after
the tap, and whose CNP reaches the tap some time after it is sent: the round trip from the
tap to the notification point and back, as the connection shows it. For marked requests
that is the round trip of its ACKs (``ack_rtt_ns``: from a request with AckReq to the ACK
or response that covers it; about 0 with the tap at the responder); for marked READ
responses the turnaround of its NAKs (``ibwire.transport.observed``), when a NAK was
answered, else between 0 (the tap at the requester) and the shortest round trip of its ACKs
(a tap that sees marks sits on the path between the two). The notification point's pacing is
followed mark by mark, as it saw them (the marks reach it in the order, and at the spacing,
the tap saw them): a mark is owed a CNP when the interval has passed since the latest mark
owed one, or since a CNP no owed mark was waiting for (its time back to the tap, the
shortest round trip, taken off); each CNP answers the oldest mark owed one; that CNP must
reach the tap within the interval after the longest round trip.

Requests' marks draw CNPs from the responder to the requester's QP; READ responses' marks
draw CNPs from the requester to the responder's QP (the connection's rows say which CNPs go
that way: ``to_responder``), keyed the other way round. Marks on ACKs are not checked (their
CNP to the responder cannot be told from one for a READ response). A tap before the marking
point sees no marks, so there only ``cnp_too_soon`` can fire.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

import numpy as np

from ibwire.analysis.connections import Connection
from ibwire.transport.cnp import scope_key
from ibwire.transport.opkinds import CNP, KIND, READ_RESP, REQUEST


def round_trip(c: Connection, to_responder: bool) -> tuple[int, int]:
    """(shortest, longest) time seen from the tap to the notification point of marks on
    ``c``'s requests (``to_responder`` False: the responder) or READ responses (the
    requester) and back; (0, 0) when the connection does not show it."""
    back = c.observed.turnaround if to_responder else None
    if back is not None:
        return back, back
    _, _, low, high = c.observed.rtt
    if to_responder:   # (the longest ACK round trip of READs holds their data's transfer)
        return 0, low or 0
    return low or 0, high or 0


Mark = tuple[int, int, Connection, bool]   # time, record, connection, marked READ response


class CnpCheck:
    def __init__(self, scope: str, interval_ns: int) -> None:
        scope_key(scope, None, None, 0)  # refuses an unknown scope
        self.scope = scope
        self.interval_ns = interval_ns
        self.last: dict[Hashable, tuple[int, int, Connection]] = {}   # key -> last CNP
        #: key -> when the notification point last sent a CNP, as the time of the mark it
        #: answered reached the tap (a CNP no mark explains: its time back to the tap off)
        self.sent: dict[Hashable, int] = {}
        #: key -> marks owed a CNP that none answered yet, oldest first
        self.due: dict[Hashable, deque[Mark]] = {}
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
        due = self.due.setdefault(key, deque())
        sent = self.sent.get(key)
        if is_cnp:
            last = self.last.get(key)
            if last is not None and t - last[0] < self.interval_ns:
                c.observed.find("cnp_too_soon", [last[1], record],
                                f"CNP {t - last[0]} ns after the previous one of its "
                                f"{self.scope} scope (interval {self.interval_ns} ns)")
            self.last[key] = (t, record, c)
            at = t - round_trip(c, to_responder)[0]
            if due:   # the answer to the oldest mark owed one
                at = max(at, due.popleft()[0])
            self.sent[key] = at if sent is None else max(sent, at)
        elif sent is None or t - sent >= self.interval_ns:
            due.append((t, record, c, to_responder))
            self.sent[key] = t

    def _late(self, mark: Mark, t: int) -> bool:
        """Whether at time ``t`` the CNP ``mark`` is owed should have reached the tap."""
        return t - mark[0] - round_trip(mark[2], mark[3])[1] >= self.interval_ns

    def _expire(self, key: Hashable, t: int) -> None:
        due = self.due.get(key)
        while due and self._late(due[0], t):
            self._missing(due.popleft())

    def _missing(self, mark: Mark) -> None:
        _, record, c, reverse = mark
        back = round_trip(c, reverse)[1]
        c.observed.find("cnp_missing", [record],
                        f"CE-marked packet drew no CNP within {self.interval_ns} ns "
                        f"({self.scope} scope)" + (f" and the round trip of {back} ns"
                                                   if back else ""))

    def finish(self) -> None:
        """Marks still waiting when the capture ends, if it ran past their interval."""
        if self.end_ns is not None:
            for key in self.due:
                self._expire(key, self.end_ns)
        self.due.clear()
