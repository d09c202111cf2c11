"""What the verdict's rules ask of one queue pair's frames: retransmissions, coverage by
answers, NAKs, timings; and the :class:`Check` each rule returns.

A request is a *retransmission* when its PSN is not past every request PSN before it (IBA
9.7.1's PSN order, 24-bit, 9.7.5.1.1's halves). An answer *covers* PSN p when it
acknowledges it, explicitly or implicitly (coalesced, IBA 9.7.5.2): an ACK, READ response
or atomic ACK at p or after it, or a NAK (any kind) of a later PSN, which acknowledges the
PSNs before the one it names.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.analysis.verdict_frames import PSN_HALF, QpFrames, Rows, psn_delta
from ibwire.analysis.verdict_manifest import Fault, Manifest, Qp
from ibwire.transport.opkinds import ATOMIC, FAMILY, KIND, LAST, ONLY, POSITION, READ, READ_RESP

#: Outcomes, worst first: a fault's outcome is the worst of its checks'.
OUTCOMES = ("fail", "not-seen", "not-implemented", "pass", "not-applicable")
#: AETH syndromes (IBA 9.7.5.2.2, Table 44): the top three bits, and a PSN sequence error.
SYN_ACK, SYN_RNR, SYN_NAK = 0, 1, 3
NAK_PSN_SEQUENCE = 0x60
#: What became of a request at the responder (:meth:`Story._walk`).
ACCEPTED, AHEAD, BEHIND, LOST = range(4)


@dataclass
class Check:
    """One rule applied to one fault: its outcome, what was seen, the records that show it."""

    rule: str
    outcome: str
    detail: str
    records: list[int] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)


def worst(checks: list[Check]) -> str:
    return min((c.outcome for c in checks), key=OUTCOMES.index, default="not-applicable")


def us(ns: int | float) -> str:
    """A duration for people: in microseconds, or milliseconds from 10 ms on."""
    return f"{ns / 1e6:.1f} ms" if abs(ns) >= 10_000_000 else f"{ns / 1000:.1f} us"


class Story:
    """One queue pair's frames with what the rules ask of them."""

    def __init__(self, qp: Qp, frames: QpFrames, manifest: Manifest, records: int) -> None:
        self.qp = qp
        self.req: Rows = frames.requests
        self.ans: Rows = frames.answers
        self.frames = frames
        self.manifest = manifest
        self.records = records
        self.reliable = qp.transport in ("RC", "XRC")
        faults = [f for f in manifest.faults if f.qp == qp.index]
        #: Records of requests that never reached the responder (dropped, bad ICRC).
        self.lost = {f.record for f in faults if f.record is not None
                     and f.direction == "request" and f.kind in ("drop", "corrupt")}
        # a lost request the capture does not hold: its first sighting is a resend
        unseen = {f.psn for f in faults if f.record is None and f.direction == "request"
                  and f.kind in ("drop", "corrupt") and f.transmission == 1}
        psn = self.req["psn"]
        retx = np.zeros(len(psn), bool)
        top = None
        for i, x in enumerate(psn.tolist()):    # the running PSN maximum, in 24-bit order
            d = 1 if top is None else ((x - top + PSN_HALF) & 0xFFFFFF) - PSN_HALF
            if x in unseen:
                unseen.discard(x)
                retx[i] = True
            elif d <= 0:
                retx[i] = True
            if d > 0:
                top = x
        self.retx = retx
        #: A retransmission that starts a round: the requester going back (go-back-N), not
        #: the next packet of a round under way.
        back = np.ones(len(psn), bool)
        if len(psn) > 1:
            back[1:] = psn_delta(psn[1:], psn[:-1]) <= 0
        self.round = retx & (back | ~np.concatenate(([False], retx[:-1])))
        self.families = FAMILY[self.req["opcode"]]
        #: Requests by PSN: ``by_psn[k]`` are the row indexes, in capture order, of the
        #: requests with PSN ``sorted_psns[k]``.
        order = np.argsort(psn, kind="stable")
        self._psn_order, self._psn_sorted = order, psn[order]
        self._walk(faults)
        syn = self.ans["syndrome"] >> 5
        nak_opcode = KIND[self.ans["opcode"]] != READ_RESP
        self.ans_nak = nak_opcode & (syn == SYN_NAK)
        self.ans_rnr = nak_opcode & (syn == SYN_RNR)
        self.ans_seq = self.ans_nak & (self.ans["syndrome"] == NAK_PSN_SEQUENCE)

    # --- the responder's expected PSN ---------------------------------------------------

    def _span(self, i: int) -> int:
        """PSNs request ``i`` takes: a READ one per response packet (IBA 9.7.4.1.4)."""
        if self.families[i] != READ:
            return 1
        dmalen = int(self.req["dmalen"][i])
        if self.qp.mtu:
            return max(1, -(-dmalen // self.qp.mtu))
        p = int(self.req["psn"][i])
        later = psn_delta(self.req["psn"], p)
        ahead = later[(later > 0) & ~self.retx]
        if len(ahead):
            return int(ahead.min())
        resp = psn_delta(self.ans["psn"][KIND[self.ans["opcode"]] == READ_RESP], p)
        resp = resp[(resp >= 0) & (resp < 1 << 16)]
        return int(resp.max()) + 1 if len(resp) else 1

    def _walk(self, faults: list[Fault]) -> None:
        """Replay the requests in the order they reached the responder (the capture's, but
        for the reordered and delayed ones) through its PSN check (IBA 9.7.5.1.1; Linux
        rxe_resp.c check_psn()): ``arrival_key`` orders them, ``status`` is each one's
        fate (:data:`ACCEPTED`, :data:`AHEAD` of the expected PSN, :data:`BEHIND` it: a
        duplicate, :data:`LOST`), ``expected`` the PSN expected when it came."""
        n = len(self.req)
        key = self.req["record"].astype(float)
        for f in faults:
            if f.direction != "request" or f.kind not in ("reorder", "delay") or f.record is None:
                continue
            i = self.req.at(f.record)
            if i is None:
                continue
            if f.kind == "reorder" and f.swapped_with is not None:
                key[i] = max(float(f.swapped_with), key[i]) + 0.5
            elif f.kind == "reorder" and f.held_by is not None:    # after the next ones
                key[i] = float(self.req["record"][min(i + f.held_by, n - 1)]) + 0.5
            elif f.kind == "delay" and f.delay_ns is not None:
                t = self.req["t"][i] + f.delay_ns
                before = np.flatnonzero(self.req["t"] < t)
                key[i] = float(self.req["record"][before[-1]]) + 0.5
        self.arrival_key = key
        self.status = np.full(n, ACCEPTED, np.int8)
        self.expected = np.zeros(n, np.int64)
        #: For each PSN the responder expected when a request came ahead of it: the
        #: (arrival key, row) of those requests, in arrival order.
        self.ahead: dict[int, list[tuple[float, int]]] = {}
        expected = self.qp.start_psn
        if expected is None and n:
            expected = int(self.req["psn"][0])
            for f in faults:     # a lost first request the capture does not hold
                if f.record is None and f.direction == "request" and psn_delta(
                        f.psn, expected) < 0 and f.kind in ("drop", "corrupt"):
                    expected = f.psn
        psns, records = self.req["psn"].tolist(), self.req["record"].tolist()
        icrc, keys = self.req["icrc_ok"].tolist(), key.tolist()
        for i in np.argsort(key, kind="stable").tolist():
            if records[i] in self.lost or icrc[i] == 0:
                self.status[i] = LOST
                continue
            self.expected[i] = expected
            d = ((psns[i] - expected + PSN_HALF) & 0xFFFFFF) - PSN_HALF
            if d > 0:
                self.status[i] = AHEAD
                self.ahead.setdefault(expected, []).append((keys[i], i))
            elif d < 0:
                self.status[i] = BEHIND
            else:
                expected = (expected + self._span(i)) & 0xFFFFFF

    def gap_found(self, p: int, after: float) -> int | None:
        """The first request (arriving after ``after``) that found PSN ``p`` missing: ahead
        of the responder's expected PSN while it expected ``p``."""
        found = self.ahead.get(p, [])
        k = bisect.bisect_right(found, (after, len(self.req)))
        return found[k][1] if k < len(found) else None

    def sent(self, p: int, after: int = 0) -> np.ndarray:
        """Rows of the requests with PSN ``p`` captured after record ``after``, in order."""
        lo, hi = np.searchsorted(self._psn_sorted, [p, p + 1])
        rows = np.sort(self._psn_order[lo:hi])
        return rows[self.req["record"][rows] > after]

    def resent(self, p: int, after: int) -> int | None:
        """The first retransmission of PSN ``p`` after record ``after``."""
        rows = self.sent(p, after)
        rows = rows[self.retx[rows]]
        return int(rows[0]) if len(rows) else None

    # --- requests -----------------------------------------------------------------------

    def family(self, i: int) -> int:
        return int(self.families[i])

    def request_at(self, psn: int) -> int | None:
        """The first request with PSN ``psn``, or None."""
        rows = self.sent(psn)
        return int(rows[0]) if len(rows) else None

    def first_retx(self, after: int) -> int | None:
        """The first request after record ``after`` that starts a round of
        retransmissions."""
        i = self.req.after(after)
        hit = np.flatnonzero(self.round[i:])
        return i + int(hit[0]) if len(hit) else None

    def message_end_psns(self) -> np.ndarray:
        """PSNs of the requests that end a message (LAST, ONLY, READ, atomic), once each."""
        op = self.req["opcode"]
        ends = np.isin(POSITION[op], (LAST, ONLY)) | np.isin(FAMILY[op], (READ, ATOMIC))
        return np.unique(self.req["psn"][ends])

    # --- answers ------------------------------------------------------------------------

    def covering(self, psn: int) -> np.ndarray:
        """Mask of the answers that cover PSN ``psn``."""
        d = psn_delta(self.ans["psn"], psn)
        naks = self.ans_nak | self.ans_rnr
        return np.where(naks, d > 0, d >= 0)

    def first_covering(self, psn: int, after: int) -> int | None:
        i = self.ans.after(after)
        hit = np.flatnonzero(self.covering(psn)[i:])
        return i + int(hit[0]) if len(hit) else None

    def ans_rows(self, mask: np.ndarray, after: int, until: int | None = None) -> list[int]:
        """Rows of the answers in ``mask`` after record ``after`` (and before ``until``)."""
        i = self.ans.after(after)
        rows = [i + int(k) for k in np.flatnonzero(mask[i:])]
        if until is not None:
            rows = [j for j in rows if self.ans["record"][j] < until]
        return rows

    def answers_of(self, p: int, lost: set[int]) -> np.ndarray:
        """Rows of the answers (not NAKs) with PSN ``p`` that were not lost on the way."""
        return np.flatnonzero((self.ans["psn"] == p) & ~self.ans_nak & ~self.ans_rnr
                              & ~np.isin(self.ans["record"], list(lost)))

    # --- positions ----------------------------------------------------------------------

    def place(self, fault: Fault) -> int:
        """The record the fault happened at: its own, or (not captured) for a request the
        record before the first frame its PSN is missing from, for an answer the record of
        the request it answers."""
        if fault.record is not None:
            return fault.record
        if fault.direction == "request" and fault.transmission > 1:
            # the n-th sending lost: the frame after it is the (n-1)-th sighting of its PSN
            sightings = self.sent(fault.psn)
            if len(sightings) >= fault.transmission:
                return int(self.req["record"][sightings[fault.transmission - 1]]) - 1
            return self.records
        if fault.direction == "request":
            rows = self.req
            d = psn_delta(rows["psn"], fault.psn)
            later = np.flatnonzero(((d > 0) & ~self.retx) | (d == 0))
        else:   # an answer is sent after the request it answers: place it there
            d = psn_delta(self.req["psn"], fault.psn)
            asked = np.flatnonzero((d <= 0) & (d > -(1 << 16)) & ~self.retx)
            if len(asked):
                return int(self.req["record"][asked[np.argmax(d[asked])]])
            rows = self.ans
            later = np.flatnonzero(psn_delta(rows["psn"], fault.psn) >= 0)
        if len(later):
            return int(rows["record"][int(later[0])]) - 1
        return self.records

    def last_frame_before(self, record: int) -> int | None:
        """The time of the QP's last request or answer before ``record``."""
        times = [int(rows["t"][rows.after(record - 1) - 1]) for rows in (self.req, self.ans)
                 if rows.after(record - 1) > 0]
        return max(times) if times else None
