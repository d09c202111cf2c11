"""What a tap sees of one connection, sorted by the QP analysis definitions.

The one place where request packets, first transmissions, retransmission rounds, messages
and the latencies are defined: the scenario runner (:mod:`ibwire.gen`) counts its manifest
with it and the capture analysis (:mod:`ibwire.analysis`) reads captures with it, so the
two agree by construction (tests also check both against hand counts).

A connection is one requester -> responder direction of a queue pair: its request packets
and, the other way, its ACKs, NAKs, READ responses, atomic ACKs and CNPs. Rows are fed in
capture order as columns (:class:`Rows`). The per-packet rules are one state machine with two
twins: compiled (``ibwire.transport._observer``, Cython) and in plain Python
(``ibwire.transport._observer_python``), chosen at import as the other engines are
(``implementation`` says which; IBWIRE_NO_EXTENSIONS=1 forces the twin). Both take every
row, in order or not, in one loop over the columns; this module adds what is not per
packet: the findings, the stalls, and what only the end of the capture settles.
"""

from __future__ import annotations

import heapq
import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from ibwire._twins import load_twin
from ibwire.transport.observer_limits import (
    COUNTERS,
    HISTORY,
    LATENCIES,
    MAX_ANSWERS,
    MAX_PENDING,
    ROW_FIELDS,
    STALL_NS,
)
from ibwire.transport.opkinds import FIRST, KIND, MIDDLE, POSITION, READ_RESP, REQUEST

_rules, implementation = load_twin("ibwire.transport._observer",
                                   "ibwire.transport._observer_python")
"""The rules' twin: "c" (``ibwire.transport._observer``) or "python"."""

__all__ = ["COUNTERS", "HISTORY", "LATENCIES", "MAX_ANSWERS", "MAX_PENDING", "MAX_RECORDS",
           "RATES", "ROW_FIELDS", "STALLS", "STALL_NS", "Finding", "Observed", "Rows",
           "Story", "implementation", "observer_on"]

#: Rates over the connection's time (``first_ns`` to ``last_ns``; null when that is 0): of
#: ``data_bytes`` (first transmissions) and of ``payload_bytes`` (everything sent).
RATES = ("goodput_bps", "throughput_bps")
#: Stall keys: how many times and how long in all the connection stood still (no packet
#: but CNPs for longer than the stall threshold), and the longest stalls.
STALLS = ("stalls", "stall_ns", "longest_stalls")
#: Stalls listed in ``longest_stalls``, at most.
LONGEST_STALLS = 5
Rows = Mapping[str, np.ndarray]
#: Findings keep at most this many records each.
MAX_RECORDS = 100


#: Opcodes whose packets fill a whole PMTU: FIRST and MIDDLE requests and READ responses.
_FULL = ((POSITION == FIRST) | (POSITION == MIDDLE)) & ((KIND == REQUEST) | (KIND == READ_RESP))


class Finding(dict):
    """One check that failed: ``kind``, ``records`` (capture records, from 0 here, from 1
    in :meth:`Observed.result`, as tshark's frame.number), ``detail``,
    ``count`` (the packets or events it stands for: 1, or all those a finding of
    :meth:`Observed.find_many` counts)."""


class Story:
    """What :class:`Observed` adds to the rules of either twin: findings, stalls, the end."""

    def __init__(self, pmtu: int | None = None, stall_ns: int = STALL_NS) -> None:
        super().__init__(pmtu, stall_ns)
        self.findings: list[Finding] = []
        self._aggregate: dict[str, Finding] = {}
        self._totals: dict[str, int] = {}
        self.stall_count = 0
        self.stall_total = 0
        #: the longest stalls: (duration, -start, -record, cause), a min-heap
        self.longest: list[tuple[int, int, int, str | None]] = []

    def find(self, kind: str, records: list[int], detail: str) -> None:
        self.findings.append(Finding(kind=kind, records=records, detail=detail, count=1))

    def find_many(self, kind: str, records: list[int], what: str) -> None:
        """Add ``records`` to the one finding of ``kind`` that counts them."""
        f = self._aggregate.get(kind)
        if f is None:
            f = self._aggregate[kind] = Finding(kind=kind, records=[], detail="", count=0)
            self.findings.append(f)
        total = f["count"] = self._totals[kind] = self._totals.get(kind, 0) + len(records)
        room = MAX_RECORDS - len(f["records"])
        if room > 0:
            f["records"].extend(records[:room])
        f["detail"] = f"{total} {what}" + (f" (the first {MAX_RECORDS} listed)"
                                           if total > MAX_RECORDS else "")

    def stall(self, start: int, duration: int, record: int, cause: str | None) -> None:
        """No packet from ``start`` for ``duration`` ns, until ``record`` (of ``cause``)."""
        self.stall_count += 1
        self.stall_total += duration
        entry = (duration, -start, -record, cause)
        if len(self.longest) < LONGEST_STALLS:
            heapq.heappush(self.longest, entry)
        elif entry[:3] > self.longest[0][:3]:
            heapq.heapreplace(self.longest, entry)

    def learn_pmtu(self, rows: Rows) -> None:
        """Take the path MTU from the payload of FIRST/MIDDLE requests and READ responses."""
        if self.fixed_pmtu is not None:
            return
        full = _FULL[rows["opcode"]]
        if full.any():
            self.pmtu_seen = max(self.pmtu_seen, int(rows["payload"][full].max()))

    def feed(self, rows: Rows) -> None:
        """Take rows of this connection, in capture order."""
        n = len(rows["record"])
        if n == 0:
            return
        self.learn_pmtu(rows)
        self.feed_rows(rows, 0, n)

    def merge_cnps(self, other: Story) -> None:
        """Take the CNPs (counts, findings, time span) of ``other``, an observer of CNPs
        only."""
        self.bump("cnps", other.counts["cnps"])
        self.findings.extend(other.findings)
        self.first_ns = min(x for x in (self.first_ns, other.first_ns) if x is not None)
        self.last_ns = max(x for x in (self.last_ns, other.last_ns) if x is not None)

    # --- the end --------------------------------------------------------------------------

    def finish(self) -> None:
        """Settle what only the whole capture tells: gaps never filled, messages whose PSNs
        came out of order."""
        self.bump("psn_gaps", self.hole_count() - self.counts["psn_gaps"])
        starts = sorted(set(self.orphan_starts) | (
            {self.open_start} if self.open_start is not None else set()))
        ends = sorted(set(self.orphan_ends))
        completed = 0
        used: set[int] = set()
        for e in ends:
            below = [s for s in starts if s <= e and s not in used]
            earlier = [x for x in ends if x < e]
            if below and (not earlier or below[-1] > earlier[-1]):
                s = below[-1]
                if not self.hole_in(s, e + 1):
                    completed += 1
                    used.add(s)
        self.bump("messages_completed", completed)
        self.orphan_starts, self.orphan_ends = [], []

    def result(self) -> dict[str, Any]:
        """Counts, latencies and findings, by the JSON keys (call :meth:`finish` first).
        Records are numbered from 1 here, as tshark's frame.number (the rows' from 0)."""
        n, total, lo, hi = self.rtt
        span = (self.last_ns - self.first_ns) if self.first_ns is not None else 0
        c = self.counts
        rates = dict.fromkeys(RATES) if not span else {
            "goodput_bps": c["data_bytes"] * 8e9 / span,
            "throughput_bps": c["payload_bytes"] * 8e9 / span}
        return {**c, "first_ns": self.first_ns, "last_ns": self.last_ns, **rates,
                "ack_rtt_ns": {"min": lo, "avg": total / n if n else None, "max": hi},
                **{k: list(v) for k, v in self.latencies.items()},
                "rnr_wait_ns": list(self.rnr_wait_ns),
                "stalls": self.stall_count, "stall_ns": self.stall_total,
                "longest_stalls": [
                    {"start_ns": -start, "duration_ns": duration, "record": 1 - record,
                     "cause": cause}
                    for duration, start, record, cause in sorted(self.longest, reverse=True)],
                "findings": [{**f, "records": [r + 1 for r in f["records"]]}
                             for f in self.findings]}


class Observed(Story, _rules.Rules):
    """The story of one connection as a tap saw it. Feed rows with :meth:`feed`; read
    :meth:`result` at the end. ``pmtu`` None infers the path MTU from the payload of FIRST
    and MIDDLE packets (it sizes the PSN ranges READ requests reserve). A time of more than
    ``stall_ns`` between two packets of the connection (CNPs aside) is a stall."""


@cache
def observer_on(twin: str) -> type[Observed]:
    """:class:`Observed` on the rules of ``twin`` ("c" or "python", whichever is loaded),
    for comparing the twins."""
    if twin == implementation:
        return Observed
    module = importlib.import_module({"c": "ibwire.transport._observer",
                                      "python": "ibwire.transport._observer_python"}[twin])
    return type("Observed", (Story, module.Rules), {"__doc__": Observed.__doc__})
