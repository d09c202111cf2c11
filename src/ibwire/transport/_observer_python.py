"""The observer's per-packet rules, in plain Python: the twin of the compiled
``ibwire.transport._observer`` (same names, same results; IBWIRE_NO_EXTENSIONS=1 picks this
one). :class:`ibwire.transport.observed.Observed` is built on whichever is loaded; it adds
the findings, the stalls and the end of the capture, which the rules call back into
(``find``, ``find_many``, ``stall``).

A connection's rows come in capture order. PSNs are unwrapped into an unbounded "extended"
PSN (24-bit arithmetic against the latest PSN seen, IBA 9.4.1.1), so everything below works
across the wrap.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from ibwire.transport.observer_limits import (
    COUNTERS,
    HISTORY,
    LATENCIES,
    MAX_ANSWERS,
    MAX_PENDING,
    ROW_FIELDS,
)
from ibwire.transport.opkinds import (
    ACK,
    ATOMIC,
    ATOMIC_ACK,
    CNP,
    FAMILY,
    FIRST,
    KIND,
    LAST,
    ONLY,
    POSITION,
    READ,
    READ_RESP,
    REQUEST,
)
from ibwire.transport.psn import PSN_MASK
from ibwire.transport.psn_runs import ORIGIN, Runs, unwrap
from ibwire.transport.sent import SentRequests
from ibwire.transport.timers import rnr_timer_ns
from ibwire.transport.waiting import Waiting


def _start(answer: Waiting) -> int:
    return answer.start


class Rules:
    """The state of one connection and the rules that move it, row by row."""

    def __init__(self, pmtu: int | None = None, stall_ns: int = 0) -> None:
        self.counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.latencies: dict[str, list[int]] = {k: [] for k in LATENCIES}
        self.rnr_wait_ns: list[int] = []
        self.fixed_pmtu = pmtu
        self.pmtu_seen = 0
        self.ref: int | None = None
        self.seen = Runs()
        self.cover: int | None = None        # PSNs below it were covered by an answer
        self.ack_max: tuple[int, int] | None = None  # (ext, record) of the highest ACK
        self.prev_end: int | None = None     # one past the previous request's PSNs
        self.prev_first = False              # previous request was a first transmission
        self.round: str | None = None        # class of the current retransmission round
        self.round_span: tuple[int, int] | None = None
        #: the NAK or RNR NAK not yet answered: (ext PSN, time, record, kind)
        self.nak: tuple[int, int, int, str] | None = None
        #: the shortest time from a sequence-error NAK to the requester's answer seen so far
        #: (None: none yet): the round trip from the tap to the requester and back
        self.turnaround: int | None = None
        #: the latest request rows, (ext PSN, PSNs, time, record)
        self.history: deque[tuple[int, int, int, int]] = deque(maxlen=HISTORY)
        self.answers: deque[Waiting] = deque()
        #: Every entry of ``answers`` ends before the next starts (``expect`` says): the one
        #: that can hold a PSN is then found by bisection, not by a walk of up to
        #: MAX_ANSWERS entries at every READ response.
        self.answers_ordered = True
        self.resp_high: int | None = None
        self.pending: list[tuple[int, int]] = []  # (ext, time) of AckReq packets, sorted
        self.rtt: list[Any] = [0, 0, None, None]  # count, sum, min, max
        self.open_start: int | None = None
        self.orphan_starts: list[int] = []
        self.orphan_ends: list[int] = []
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.last_time: int | None = None    # time of the latest row
        self.stall_after = stall_ns
        self.moved: int | None = None        # time of the latest packet other than a CNP
        self.sent = SentRequests()

    # --- what the rest of the observer reads ----------------------------------------------

    def bump(self, counter: str, n: int) -> None:
        """Add ``n`` to a counter."""
        self.counts[counter] += n

    def hole_count(self) -> int:
        """PSN ranges missing among the requests seen."""
        return self.seen.hole_count()

    def hole_in(self, a: int, b: int) -> bool:
        """Some request PSN of [a, b) was never seen."""
        return self.seen.hole_in(a, b)

    def seen_range(self) -> tuple[int, int] | None:
        """(lowest, one past the highest) extended request PSN seen; None: none yet."""
        return None if self.seen.low is None else (self.seen.low, self.seen.high)

    @property
    def pmtu(self) -> int:
        return self.fixed_pmtu or self.pmtu_seen or 4096

    def psn_count(self, family: int, dmalen: int) -> int:
        """PSNs a request reserves: a READ one per response packet (IBA 9.7.4.1.4)."""
        if family != READ:
            return 1
        return max(1, -(-dmalen // self.pmtu))

    # --- feeding --------------------------------------------------------------------------

    def feed_rows(self, rows: Mapping[str, np.ndarray], start: int, stop: int) -> None:
        """The rules over rows ``start`` .. ``stop`` - 1 (``ROW_FIELDS`` columns)."""
        row = self.row
        for values in zip(*(rows[k][start:stop].tolist() for k in ROW_FIELDS), strict=True):
            row(*values)

    def row(self, record: int, t: int, opcode: int, psn: int, ackreq: int, syndrome: int,
            dmalen: int, va: int, payload: int, ce: int, icrc_bad: int) -> None:
        """One packet of the connection."""
        kind = int(KIND[opcode])
        if self.first_ns is None:
            self.first_ns = t
        self.last_ns = t if self.last_ns is None else max(self.last_ns, t)
        if self.last_time is not None and t < self.last_time:
            self.find_many("timestamps_backwards", [record],
                           "packets stamped earlier than the packet before them")
        self.last_time = t
        if icrc_bad:
            self.find_many("bad_icrc", [record], "packets with a bad ICRC")
        if kind == CNP:
            self.counts["cnps"] += 1
            return
        moved = self.moved
        self.moved = t
        if ce:
            self.counts["ecn_ce_packets"] += 1
        e = psn + ORIGIN if self.ref is None else unwrap(psn, self.ref)
        self.ref = e
        stalled = moved is not None and t - moved > self.stall_after
        resent = self.counts["retransmitted_packets"]
        if kind == REQUEST:
            self._request(record, t, e, opcode, bool(ackreq), dmalen, va, payload)
        elif kind == ACK:
            self._ack(record, t, e, syndrome)
        elif kind == READ_RESP:
            self._response(record, t, e, payload)
        elif kind == ATOMIC_ACK:
            self.counts["atomic_acks"] += 1
            self._answered(e)
            self._covered(e + 1, t)
        if stalled:
            assert moved is not None
            resent = self.counts["retransmitted_packets"] > resent
            self.stall(moved, t - moved, record, self._ends_stall(kind, syndrome, resent))

    # the callbacks of :class:`ibwire.transport.observed.Observed`
    def find(self, kind: str, records: list[int], detail: str) -> None:
        raise NotImplementedError

    def find_many(self, kind: str, records: list[int], what: str) -> None:
        raise NotImplementedError

    def stall(self, start: int, duration: int, record: int, cause: str | None) -> None:
        raise NotImplementedError

    def _ends_stall(self, kind: int, syndrome: int, resent: bool) -> str | None:
        """What the packet after a stall says ended it (None: nothing known): a NAK, an RNR
        NAK, or a retransmission, by the class of its round (``nak_retransmission``,
        ``rnr_retransmission``, ``timeout_retransmission``: the requester's timer)."""
        if resent:
            return f"{self.round or 'timeout'}_retransmission"
        if kind == ACK:
            group = syndrome >> 5
            return "rnr_nak" if group == 1 else "nak" if group == 3 else None
        return None

    def _rtt(self, t: int) -> None:
        c = self.rtt
        c[0] += 1
        c[1] += t
        c[2] = t if c[2] is None else min(c[2], t)
        c[3] = t if c[3] is None else max(c[3], t)

    def _covered(self, upto: int, t: int) -> None:
        """Answers cover the PSNs below ``upto``: AckReq packets there have their ACK."""
        self.cover = upto if self.cover is None else max(self.cover, upto)
        cut = bisect_left(self.pending, (upto,))
        for _, sent in self.pending[:cut]:
            self._rtt(t - sent)
        del self.pending[:cut]

    def _request(self, record: int, t: int, e: int, opcode: int, ackreq: bool, dmalen: int,
                 va: int, payload: int) -> None:
        c = self.counts
        c["payload_bytes"] += payload
        position, family = int(POSITION[opcode]), int(FAMILY[opcode])
        count = self.psn_count(family, dmalen)
        seen = self.seen
        new = e not in seen
        fill = new and seen.low is not None and e < seen.high
        jump = self.prev_end is not None and e != self.prev_end
        if not new and not self.sent.repeats(e, opcode, family == READ, va, dmalen):
            # another request at a PSN already used: not a resend, a message of its own
            self.find_many("psn_reused", [record], "requests at a PSN already used by another "
                           "request (not a resend of it)")
            new = True
        if new:
            self.sent.add(e, opcode, family == READ, count, va, dmalen)
            c["data_packets"] += 1
            c["data_bytes"] += payload
            if fill:
                c["out_of_order"] += 1
            self._message(e, position, family, count, fill)
        else:
            c["retransmitted_packets"] += 1
            if self.cover is not None and e < self.cover:
                c["duplicates"] += 1
            # an AckReq packet sent again: its ACK no longer tells a round trip (Karn)
            del self.pending[bisect_left(self.pending, (e,)):]
        # a request with the NAKed PSN answers the NAK unless it only goes on, in PSN order,
        # with what the requester sent before the NAK could reach it
        answers = e == self.resend_psn() and (jump or not self.in_flight(t))
        if (not new or fill) and (self.prev_first or jump or answers or self.round is None):
            self._round_start(record, t, e, new, answers, jump)
        elif new and not fill:
            self.round = None
        if not new:
            self.counts[f"{self.round or 'timeout'}_retransmissions"] += 1
            lo, hi = self.round_span or (e, e)
            self.round_span = (min(lo, e), max(hi, e))
        if answers and self.nak is not None:
            self._answer_nak(t, False)
        if ackreq and new:
            insort(self.pending, (e, t))
            del self.pending[:max(0, len(self.pending) - MAX_PENDING)]
        seen.add(e, count)
        self.history.append((e, count, t, record))
        self.prev_end = e + count
        self.prev_first = new and not fill

    def resend_psn(self) -> int | None:
        """The PSN the requester answers the open NAK at: the NAKed one, or the first not yet
        acknowledged if ACKs went past it meanwhile (None: no NAK open)."""
        if self.nak is None:
            return None
        return max(self.nak[0], self.cover) if self.cover is not None else self.nak[0]

    def in_flight(self, t: int) -> bool:
        """Whether a request at time ``t`` was sent before the open NAK could reach the
        requester: less than the turnaround after it (with the tap away from the requester,
        packets already on their way come after the NAK). Unknown before a NAK was answered:
        as with the tap at the requester, every request after the NAK is sent after it."""
        return (self.nak is not None and self.turnaround is not None
                and t - self.nak[1] < self.turnaround)

    def _round_start(self, record: int, t: int, e: int, new: bool, answers: bool,
                     jump: bool) -> None:
        nak = self.nak
        if answers:
            assert nak is not None
            self.round = "nak" if nak[3] == "nak" else "rnr"
            self._answer_nak(t, jump)
        else:
            self.round = "timeout"
            if nak is not None and not self.in_flight(t):
                self.find("retransmission_not_at_nak", [nak[2], record],
                          f"NAK named PSN {nak[0] & PSN_MASK}, the resend started at "
                          f"PSN {e & PSN_MASK} {(t - nak[1]) / 1e6:.3f} ms later, as after "
                          "a timeout (the NAK lost past the capture point, or not acted on)")
                self.nak = None
        self.round_span = (e, e)
        if not new:
            before = self._previous(e)
            if before is not None:
                self.latencies["retransmission_ns"].append(t - before)

    def _answer_nak(self, t: int, jump: bool) -> None:
        """The NAK's PSN is sent again. Only a sequence-error NAK (AETH syndrome 011 00000,
        IBA 9.7.5.2) times the requester's response: after an RNR NAK (001) the requester
        waits out the timer the NAK named (``rnr_wait_ns``), which stacks keep only roughly
        (Linux rxe counts it in jiffies). A resend that ``jump``s to the PSN of such a NAK
        (it does not go on from the previous request) is surely its answer: it times the
        turnaround."""
        assert self.nak is not None
        _, sent, _, kind = self.nak
        if kind == "nak":
            self.latencies["nak_response_ns"].append(t - sent)
            if jump:
                took = t - sent
                self.turnaround = took if self.turnaround is None else min(self.turnaround,
                                                                           took)
        self.nak = None

    def _previous(self, e: int) -> int | None:
        """Time of the latest transmission of PSN ``e`` among the remembered requests."""
        for h, count, t, _ in reversed(self.history):
            if h <= e < h + count:
                return t
        return None

    def _message(self, e: int, position: int, family: int, count: int, fill: bool) -> None:
        c = self.counts
        if position in (FIRST, ONLY):
            c["messages"] += 1
        if family in (READ, ATOMIC):
            self.expect(e, count, family)
        elif position == ONLY:
            c["messages_completed"] += 1
        elif position == FIRST:
            if fill:
                self.orphan_starts.append(e)
            else:
                if self.open_start is not None:
                    self.orphan_starts.append(self.open_start)
                self.open_start = e
        elif position == LAST:
            s = self.open_start
            if s is not None and not fill and not self.seen.hole_in(s, e):
                c["messages_completed"] += 1
            else:
                if s is not None and not fill:
                    self.orphan_starts.append(s)
                self.orphan_ends.append(e)
            if not fill:
                self.open_start = None

    def expect(self, start: int, count: int, family: int) -> None:
        """A READ or atomic of PSNs ``start`` .. ``start + count - 1`` waits for its answers
        (the oldest waiting are forgotten beyond MAX_ANSWERS)."""
        answers = self.answers
        if not answers:
            self.answers_ordered = True
        elif start < answers[-1].start + answers[-1].count:
            self.answers_ordered = False
        answers.append(Waiting(start, count, family))
        if len(answers) > MAX_ANSWERS:
            answers.popleft()

    def _answered(self, e: int) -> bool:
        """Mark response PSN ``e`` of a READ or atomic; True when seen for the first time.
        The answer it belongs to is the first waiting whose PSNs hold it."""
        answers = self.answers
        if self.answers_ordered:  # at most one holds it: the last that starts at or before
            i = bisect_right(answers, e, key=_start) - 1
            if i >= 0 and e < answers[i].start + answers[i].count:
                return self._mark(i, e)
        else:
            for i, a in enumerate(answers):
                if a.start <= e < a.start + a.count:
                    return self._mark(i, e)
        return self.resp_high is None or e > self.resp_high

    def _mark(self, i: int, e: int) -> bool:
        """Mark PSN ``e`` of waiting answer ``i``; True when seen for the first time."""
        a = self.answers[i]
        if not a.mark(e - a.start):
            return False
        if a.done == a.count:
            self.counts["messages_completed"] += 1
            del self.answers[i]
        return True

    def _response(self, record: int, t: int, e: int, payload: int) -> None:
        c = self.counts
        c["read_responses"] += 1
        c["payload_bytes"] += payload
        if self._answered(e):
            c["data_bytes"] += payload
        else:  # sent again: the READ was re-requested (a response or its ACK lost)
            c["read_responses_resent"] += 1
            c["read_response_bytes_resent"] += payload
        self.resp_high = e if self.resp_high is None else max(self.resp_high, e)
        self._covered(e + 1, t)

    def _ack(self, record: int, t: int, e: int, syndrome: int) -> None:
        c = self.counts
        group = syndrome >> 5
        if group == 0:
            c["acks"] += 1
            if self.ack_max is not None and e < self.ack_max[0]:
                span = self.round_span
                if span is None or not span[0] <= e <= span[1]:
                    self.find("ack_psn_backwards", [self.ack_max[1], record],
                              f"ACK of PSN {e & PSN_MASK} after ACK of PSN "
                              f"{self.ack_max[0] & PSN_MASK}")
            if self.ack_max is None or e >= self.ack_max[0]:
                self.ack_max = (e, record)
            self._covered(e + 1, t)
            return
        if group == 1:
            c["rnr_naks"] += 1
            self.rnr_wait_ns.append(rnr_timer_ns(syndrome & 0x1F))
            kind = "rnr"
        elif syndrome == 0x60:
            c["naks_psn_seq_error"] += 1
            kind = "nak"
        else:
            c["naks_other"] += 1
            self._covered(e, t)
            return
        if self.nak is not None:
            self.find("naks_outstanding", [self.nak[2], record],
                      f"NAK of PSN {e & PSN_MASK} while the NAK of PSN "
                      f"{self.nak[0] & PSN_MASK} was not answered")
        if kind == "nak":
            gen = self._nak_trigger(e)
            if gen is not None:
                self.latencies["nak_generation_ns"].append(t - gen)
        self.nak = (e, t, record, kind)
        self._covered(e, t)

    def _nak_trigger(self, e: int) -> int | None:
        """Time of the first request past PSN ``e`` after the latest one at or before it."""
        found = None
        for h, _, t, _ in reversed(self.history):
            if h <= e:
                break
            found = t
        return found
