"""What a connection's plot shows, as numpy arrays (no drawing here): the PSN story, the
recoveries worth a closer look, throughput and latencies.

From the rows the analysis kept (``analyse(..., trace=True)``), in capture order:

- PSNs unwrapped across 2^24 (each against the one before, IBA 9.4.1.1), so a wrap draws
  a straight line;
- a request whose PSN was already sent is a *retransmission*, the first packet at a PSN its
  *first transmission* (tcptrace's distinction between new data and resent data);
- the *acknowledged PSN*: the highest PSN an ACK (AETH syndrome 000xxxxx, IBA 9.7.5.1) or a
  READ response has answered so far, a staircase;
- *marks*: NAKs (sequence error and other), RNR NAKs, CNPs and ECN-CE packets;
- *rounds*: runs of consecutive retransmissions, each classed "nak", "rnr" or "timeout" by
  :class:`ibwire.transport.observed.Observed` itself (replayed over the rows up to the
  round's first packet), so the plots name the cause the analysis counts;
- *stalls*: the longest gaps between consecutive packets of the connection, with the cause
  of the round that ends them ("idle" when none does);
- latency samples: ACK round trip (the ACK of a first transmission, Karn's rule: never of a
  resent PSN), NAK response (sequence-error NAK to the resend of its PSN) and RNR wait (RNR
  NAK to the resend).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.transport.opkinds import ACK, CNP, KIND, READ_RESP, REQUEST
from ibwire.transport.psn import HALF, PSN_BITS, PSN_MASK

#: A gap between packets counts as a stall when it is this many times the median gap
#: (of the gaps over 0 ns)
STALL_FACTOR = 20
#: ... and at least this long (ns): shorter pauses are the traffic's own rhythm.
MIN_STALL = 10_000
#: At most this many detail panels (the worst recoveries).
MAX_DETAILS = 3
#: A connection of this many packets is long: its stalls get detail panels even without loss.
LONG = 1000
#: AETH syndrome of a PSN sequence error NAK (IBA 9.7.5.2.2, table 44).
SEQ_ERROR = 0x60


@dataclass
class Event:
    """A stall or a retransmission round: ``start`` .. ``end`` ns from the first packet."""

    what: str            # "stall", "round" or "burst" (packets between stalls)
    cause: str           # "nak", "rnr", "timeout" or "idle"
    start: int
    end: int
    packets: int = 0     # retransmitted packets of a round, packets of a burst

    @property
    def duration(self) -> int:
        return self.end - self.start

    def label(self) -> str:
        from ibwire.analysis.plot.units import duration_text

        if self.what == "burst":
            return f"activity: {self.packets} packets in {duration_text(self.duration)}"
        what = ("idle gap" if self.cause == "idle" else
                f"{self.cause.upper() if self.cause != 'timeout' else 'timeout'} recovery")
        more = f", {self.packets} resent" if self.packets else ""
        return f"{what}: {duration_text(self.duration)}{more}"


@dataclass
class Series:
    """One connection's rows, sorted into what its plot draws (times in ns from ``t0``)."""

    t0: int
    t: np.ndarray                     # every row, ns from t0
    psn: np.ndarray                   # unwrapped PSN (0 for CNPs)
    first: np.ndarray                 # row masks
    retx: np.ndarray
    ack_t: np.ndarray                 # the acknowledged PSN: staircase points
    ack_psn: np.ndarray
    carried: np.ndarray               # payload bytes each row carries (requests, READ data)
    good: np.ndarray                  # ... of first transmissions/new READ data only
    marks: dict[str, np.ndarray]      # name -> row indices
    rounds: list[Event] = field(default_factory=list)
    stalls: list[Event] = field(default_factory=list)
    latency: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    median_gap: float = 0.0

    @property
    def span(self) -> int:
        return int(self.t[-1]) if len(self.t) else 0

    def stall_time(self) -> int:
        """Total time in stalls (gaps over STALL_FACTOR times the median gap and MIN_STALL)."""
        return sum(s.duration for s in self.stalls)

    def worth_details(self) -> bool:
        """A connection worth detail panels: lossy (retransmission rounds), or long (at
        least LONG packets) with stalls."""
        return bool(self.rounds) or (len(self.t) >= LONG and bool(self.stalls))

    def sparse(self) -> bool:
        """Mostly idle: its stalls take more than half its span, so the overview shows its
        packets as a few vertical lines."""
        return self.stall_time() * 2 > self.span

    def bursts(self, count: int = MAX_DETAILS) -> list[Event]:
        """The ``count`` busiest stretches of packets between stalls, in time order."""
        cuts = sorted(int(np.searchsorted(self.t, e.end)) for e in self.stalls)
        bounds = [0, *cuts, len(self.t)]
        spans = [(b - a, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        busiest = sorted(sorted(spans, key=lambda x: -x[0])[:count], key=lambda x: x[1])
        return [Event("burst", "idle", int(self.t[a]), int(self.t[b - 1]), n)
                for n, a, b in busiest]

    def details(self) -> list[Event]:
        """What the detail panels zoom on: the worst recoveries of a lossy or long
        connection, else the busiest stretches of a mostly idle one, else nothing."""
        if self.worth_details():
            return self.worst()
        return self.bursts() if self.sparse() and len(self.stalls) else []

    def worst(self, count: int = MAX_DETAILS) -> list[Event]:
        """The longest recoveries, longest first, none overlapping another: rounds (their
        stall before them included) and stalls no round ends."""
        picked: list[Event] = []
        for e in sorted(self.rounds + [s for s in self.stalls if s.cause == "idle"],
                        key=lambda e: -e.duration):
            if len(picked) == count:
                break
            if all(e.end <= p.start or e.start >= p.end for p in picked):
                picked.append(e)
        return picked


def unwrap(psn: np.ndarray) -> np.ndarray:
    """24-bit PSNs as an unbounded sequence, each against the one before."""
    if not len(psn):
        return psn.astype(np.int64)
    d = np.diff(psn.astype(np.int64), prepend=int(psn[0])) & PSN_MASK
    d = np.where(d >= HALF, d - (1 << PSN_BITS), d)
    return int(psn[0]) + np.cumsum(d)


def build(chunks: list[dict[str, np.ndarray]], pmtu: int | None = None) -> Series:
    """The series of one connection from its trace chunks."""
    rows = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    kind = KIND[rows["opcode"]]
    t_abs = rows["time"].astype(np.int64)
    t0 = int(t_abs[0]) if len(t_abs) else 0
    t = t_abs - t0
    psn = np.zeros(len(t), np.int64)
    has_psn = kind != CNP
    psn[has_psn] = unwrap(rows["psn"][has_psn])
    req = np.flatnonzero(kind == REQUEST)
    first = np.zeros(len(t), bool)
    retx = np.zeros(len(t), bool)
    if len(req):
        order = np.argsort(psn[req], kind="stable")
        ordered = psn[req][order]
        again = np.zeros(len(req), bool)
        again[order[1:]] = ordered[1:] == ordered[:-1]     # not the first at its PSN
        retx[req[again]] = True
        first[req[~again]] = True
    syndrome = rows["syndrome"].astype(np.int64)
    is_ack = (kind == ACK) & (syndrome >> 5 == 0)
    resp = kind == READ_RESP
    answered = np.flatnonzero(is_ack | resp)
    ack_t, ack_psn = _staircase(t[answered], psn[answered])
    payload = rows["payload"].astype(np.int64)
    carried = np.where((kind == REQUEST) | resp, payload, 0)
    new_resp = resp.copy()
    if resp.any():
        r = np.flatnonzero(resp)
        before = np.maximum.accumulate(np.concatenate(([psn[r[0]] - 1], psn[r][:-1])))
        new_resp[r[psn[r] <= before]] = False
    good = np.where(first | new_resp, payload, 0)
    # AETH syndrome 011xxxxx: NAK, 001xxxxx: RNR NAK (IBA 9.7.5.2.2)
    marks = {"NAK": np.flatnonzero((kind == ACK) & (syndrome >> 5 == 3)),
             "RNR NAK": np.flatnonzero((kind == ACK) & (syndrome >> 5 == 1)),
             "CNP": np.flatnonzero(kind == CNP), "ECN-CE": np.flatnonzero(rows["ce"] != 0)}
    s = Series(t0, t, psn, first, retx, ack_t, ack_psn, carried, good, marks)
    gaps = np.diff(t)
    positive = gaps[gaps > 0]   # (packets stamped alike: a coarse clock, not no gap)
    s.median_gap = float(np.median(positive)) if len(positive) else 0.0
    s.rounds = _rounds(rows, s, req, pmtu)
    s.stalls = _stalls(s, gaps)
    s.latency = _latency(s, kind, syndrome, is_ack, req)
    return s


def _staircase(t: np.ndarray, psn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points where the highest answered PSN goes up."""
    if not len(t):
        return t, psn
    high = np.maximum.accumulate(psn)
    up = np.concatenate(([True], high[1:] > high[:-1]))
    return t[up], high[up]


def _rounds(rows: dict[str, np.ndarray], s: Series, req: np.ndarray, pmtu: int | None
            ) -> list[Event]:
    """Runs of consecutive retransmitted requests, classed by the analysis's observer."""
    if not s.retx.any():
        return []
    from ibwire.transport.observed import ROW_FIELDS, Observed

    again = s.retx[req]
    starts = np.flatnonzero(again & ~np.concatenate(([False], again[:-1])))
    ends = np.flatnonzero(again & ~np.concatenate((again[1:], [False])))
    observed = Observed(pmtu)
    fields = {k: rows[k] for k in ROW_FIELDS}
    at = 0
    rounds = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        row = int(req[a])
        observed.feed({k: v[at:row + 1] for k, v in fields.items()})
        at = row + 1
        before = s.t[row - 1] if row else s.t[row]
        rounds.append(Event("round", observed.round or "timeout", int(before),
                            int(s.t[req[b]]), b - a + 1))
    return rounds


def _stalls(s: Series, gaps: np.ndarray) -> list[Event]:
    """The gaps over STALL_FACTOR times the median, longest first, each with the cause of
    the round its next packet starts ("idle": none)."""
    if not len(gaps):
        return []
    limit = max(s.median_gap * STALL_FACTOR, MIN_STALL)
    long = np.flatnonzero(gaps > limit)
    long = long[np.argsort(-gaps[long], kind="stable")]
    starts = [r.start for r in s.rounds]
    stalls = []
    for i in long.tolist():
        cause = "idle"
        if s.retx[i + 1]:       # the round its next packet belongs to
            k = bisect_right(starts, int(s.t[i])) - 1
            if k >= 0 and s.rounds[k].end >= s.t[i + 1]:
                cause = s.rounds[k].cause
        stalls.append(Event("stall", cause, int(s.t[i]), int(s.t[i + 1])))
    return stalls


def _resend_after(s: Series, rows: np.ndarray, req: np.ndarray) -> np.ndarray:
    """For each answer row in ``rows``: ns from it to the next request at its PSN (-1: none)."""
    out = np.full(len(rows), -1, np.int64)
    if not len(rows) or not len(req):
        return out
    order = np.lexsort((s.t[req], s.psn[req]))
    keys, times = s.psn[req][order], s.t[req][order]
    for n, r in enumerate(rows.tolist()):
        lo, hi = np.searchsorted(keys, s.psn[r], "left"), np.searchsorted(keys, s.psn[r], "right")
        k = lo + np.searchsorted(times[lo:hi], s.t[r], "right")
        if k < hi:
            out[n] = times[k] - s.t[r]
    return out


def _latency(s: Series, kind: np.ndarray, syndrome: np.ndarray, is_ack: np.ndarray,
             req: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    acks = np.flatnonzero(is_ack)
    firsts = np.flatnonzero(s.first)
    if len(acks) and len(firsts):
        # first transmissions sorted by PSN; PSNs resent never time a round trip (Karn)
        order = np.argsort(s.psn[firsts], kind="stable")
        keys, rows = s.psn[firsts][order], firsts[order]
        at = np.minimum(np.searchsorted(keys, s.psn[acks]), len(keys) - 1)
        resent = np.isin(s.psn[acks], s.psn[s.retx])
        ok = (keys[at] == s.psn[acks]) & ~resent & (s.t[rows[at]] <= s.t[acks])
        high = np.maximum.accumulate(s.psn[acks])
        ok &= np.concatenate(([True], s.psn[acks][1:] > high[:-1]))  # the first ACK of it
        if ok.any():
            out["ACK round trip"] = (s.t[acks[ok]], s.t[acks[ok]] - s.t[rows[at[ok]]])
    for name, mask in (("NAK response", (kind == ACK) & (syndrome == SEQ_ERROR)),
                       ("RNR wait", (kind == ACK) & (syndrome >> 5 == 1))):
        rows_ = np.flatnonzero(mask)
        took = _resend_after(s, rows_, req)
        if (took >= 0).any():
            out[name] = (s.t[rows_[took >= 0]], took[took >= 0])
    return out


def thin(count: int, cap: int) -> np.ndarray:
    """Indices of at most ``cap`` of ``count`` items, evenly spread."""
    if count <= cap:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, cap).astype(np.int64))


def decimate(x: np.ndarray, y: np.ndarray, lo: float, hi: float, columns: int,
             limit: int) -> tuple[np.ndarray, np.ndarray]:
    """At most about ``2 * columns`` of the points (x sorted) in [lo, hi]: the lowest and
    highest of each of ``columns`` time columns, so the drawing keeps its envelope; all of
    them when there are no more than ``limit``."""
    a, b = np.searchsorted(x, lo, "left"), np.searchsorted(x, hi, "right")
    x, y = x[a:b], y[a:b]
    if len(x) <= limit:
        return x, y
    col = ((x - lo) * (columns / max(hi - lo, 1e-9))).astype(np.int64)
    order = np.lexsort((y, col))
    col_sorted = col[order]
    edge = np.flatnonzero(np.diff(col_sorted)) + 1
    low = np.concatenate(([0], edge))
    high = np.concatenate((edge - 1, [len(order) - 1]))
    keep = np.sort(np.concatenate((order[low], order[high])))
    return x[keep], y[keep]


def describe(s: Series) -> dict[str, Any]:
    """Numbers for the index: packets, retransmissions, stall time, longest stall."""
    longest = max((e.duration for e in s.stalls), default=0)
    return {"packets": len(s.t), "retransmissions": int(s.retx.sum()),
            "stall_ns": s.stall_time(), "longest_stall_ns": longest, "span_ns": s.span}
