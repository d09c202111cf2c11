# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The observer's per-packet rules, compiled: the twin of ``ibwire.transport._observer_python``
(same names, same results; IBWIRE_NO_EXTENSIONS=1 picks that one). The state of a
connection is held in C (the PSNs seen and their holes, the requests remembered by PSN, the
AckReq packets waiting for their ACK, the latest requests), and :meth:`Rules.feed_rows` takes
a connection's rows in one loop over the scanner's columns, in order or not: a retransmission
costs about what a first transmission does. What is rare (a finding, a stall) calls back into
:class:`ibwire.transport.observed.Observed` (``find``, ``find_many``, ``stall``).

Read ``_observer_python`` for the rules in words; this file follows it function by function.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memmove, memset

import numpy as np

from ibwire.transport import opkinds
from ibwire.transport.observer_limits import (
    COUNTERS,
    HISTORY,
    LATENCIES,
    MAX_ANSWERS,
    MAX_PENDING,
    ROW_FIELDS,
)
from ibwire.transport.psn_runs import ORIGIN as _ORIGIN
from ibwire.transport.psn_runs import Runs
from ibwire.transport.sent import MAX_READS as _MAX_READS
from ibwire.transport.sent import RING as _RING
from ibwire.transport.timers import rnr_timer_ns

# --- the opcode tables and constants, as C values ------------------------------------------

cdef uint8_t C_KIND[256]
cdef uint8_t C_POSITION[256]
cdef uint8_t C_FAMILY[256]
for _i in range(256):
    C_KIND[_i] = opkinds.KIND[_i]
    C_POSITION[_i] = opkinds.POSITION[_i]
    C_FAMILY[_i] = opkinds.FAMILY[_i]

cdef int K_REQUEST = opkinds.REQUEST, K_ACK = opkinds.ACK, K_READ_RESP = opkinds.READ_RESP
cdef int K_ATOMIC_ACK = opkinds.ATOMIC_ACK, K_CNP = opkinds.CNP
cdef int P_FIRST = opkinds.FIRST, P_LAST = opkinds.LAST, P_ONLY = opkinds.ONLY
cdef int F_READ = opkinds.READ, F_ATOMIC = opkinds.ATOMIC
cdef int64_t ORIGIN = _ORIGIN
cdef int64_t PSN_MASK = 0xFFFFFF, PSN_SPAN = 1 << 24, PSN_HALF = 1 << 23
cdef Py_ssize_t C_HISTORY = HISTORY, C_MAX_PENDING = MAX_PENDING, C_MAX_ANSWERS = MAX_ANSWERS
cdef Py_ssize_t RING = _RING, MAX_READS = _MAX_READS

# counters, by their place in COUNTERS
cdef enum:
    DATA_PACKETS = 0
    RETRANSMITTED = 1
    NAK_RETX = 2
    TIMEOUT_RETX = 3
    RNR_RETX = 4
    DUPLICATES = 5
    OUT_OF_ORDER = 6
    PSN_GAPS = 7
    MESSAGES = 8
    MESSAGES_COMPLETED = 9
    DATA_BYTES = 10
    ACKS = 11
    NAKS_SEQ = 12
    RNR_NAKS = 13
    NAKS_OTHER = 14
    READ_RESPONSES = 15
    READ_RESPONSES_RESENT = 16
    READ_RESPONSE_BYTES_RESENT = 17
    PAYLOAD_BYTES = 18
    ATOMIC_ACKS = 19
    CNPS = 20
    ECN_CE = 21
    N_COUNTERS = 22
assert len(COUNTERS) == N_COUNTERS and COUNTERS[ECN_CE] == "ecn_ce_packets" \
    and COUNTERS[NAK_RETX] == "nak_retransmissions"
_COUNTER_AT = {name: i for i, name in enumerate(COUNTERS)}

# the class of a retransmission round (None, or the kind of what started it)
cdef enum:
    ROUND_NONE = 0
    ROUND_NAK = 1
    ROUND_RNR = 2
    ROUND_TIMEOUT = 3
_ROUND_NAMES = (None, "nak", "rnr", "timeout")
# a retransmission of each round class counts as (ROUND_NONE: a timeout's)
cdef int ROUND_COUNTER[4]
ROUND_COUNTER[:] = [TIMEOUT_RETX, NAK_RETX, RNR_RETX, TIMEOUT_RETX]


cdef inline int64_t unwrap(int64_t psn, int64_t ref):
    cdef int64_t d = (psn - ref) & PSN_MASK
    return ref + (d - PSN_SPAN if d >= PSN_HALF else d)


# --- growable arrays ------------------------------------------------------------------------

cdef struct Vec:          # int64 values
    int64_t *d
    Py_ssize_t n
    Py_ssize_t cap


cdef int vec_reserve(Vec *v, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap
    cdef int64_t *d
    if need <= v.cap:
        return 0
    cap = max(16, v.cap * 2, need)
    d = <int64_t *> realloc(v.d, cap * sizeof(int64_t))
    if d == NULL:
        raise MemoryError()
    v.d, v.cap = d, cap
    return 0


cdef int vec_replace(Vec *v, Py_ssize_t i, Py_ssize_t j, int64_t *values, Py_ssize_t k
                     ) except -1:
    """v[i:j] = values[:k]"""
    cdef Py_ssize_t m
    vec_reserve(v, v.n - (j - i) + k)
    if k != j - i:
        memmove(v.d + i + k, v.d + j, (v.n - j) * sizeof(int64_t))
        v.n += k - (j - i)
    for m in range(k):
        v.d[i + m] = values[m]
    return 0


cdef inline Py_ssize_t bisect_right(int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int64_t x):
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline Py_ssize_t bisect_left(int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int64_t x):
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --- READ requests remembered (``ibwire.transport.sent``), AckReq packets pending ------------

cdef struct Read:
    int64_t start
    int64_t count
    uint64_t va
    int64_t dmalen


cdef inline bint read_less(Read *a, Read *b):
    """Tuple order of (start, count, va, dmalen), as Python's insort compares them."""
    if a.start != b.start:
        return a.start < b.start
    if a.count != b.count:
        return a.count < b.count
    if a.va != b.va:
        return a.va < b.va
    return a.dmalen < b.dmalen


cdef struct Pend:         # an AckReq packet waiting for its ACK
    int64_t e
    int64_t t


cdef struct Hist:         # a request remembered
    int64_t e
    int64_t count
    int64_t t
    int64_t record


cdef class Waiting:
    """A READ or atomic waiting for its answers (``ibwire.transport.waiting.Waiting``)."""

    cdef public int64_t start, count, done
    cdef public int family
    cdef public object extra

    def __init__(self, int64_t start, int64_t count, int family):
        self.start, self.count, self.family = start, count, family
        self.done = 0
        self.extra = None

    cpdef int64_t answered_to(self):
        return max(self.extra) + 1 if self.extra else self.done

    cpdef bint mark(self, int64_t offset):
        cdef set extra
        if offset < self.done or (self.extra is not None and offset in self.extra):
            return False
        if offset != self.done:
            if not self.extra:
                self.extra = set()
            self.extra.add(offset)
            return True
        self.done += 1
        if self.extra:
            extra = self.extra
            while extra and self.done in extra:
                extra.remove(self.done)
                self.done += 1
        return True


cdef class Rules:
    """The state of one connection and the rules that move it, row by row."""

    cdef public object fixed_pmtu
    cdef public int64_t pmtu_seen
    cdef int64_t pmtu_fixed
    cdef int64_t cnt[N_COUNTERS]
    cdef public dict latencies
    cdef list lat_generation, lat_response, lat_retransmission
    cdef public list rnr_wait_ns
    cdef public list orphan_starts, orphan_ends
    cdef public list answers
    cdef public bint answers_ordered
    cdef int64_t stall_after
    # nullable values: a flag each
    cdef bint has_ref, has_cover, has_ack_max, has_prev_end, has_span, has_nak, has_turn
    cdef bint has_resp_high, has_open, has_first, has_last_time, has_moved
    cdef int64_t ref, cover, ack_max_e, ack_max_record, prev_end, span_lo, span_hi
    cdef int64_t nak_e, nak_t, nak_record, turnaround_, resp_high, open_start_
    cdef int64_t first_ns_, last_ns_, last_time, moved
    cdef int nak_kind                       # ROUND_NAK or ROUND_RNR
    cdef bint prev_first
    cdef int round_
    # the PSNs seen: [low, high) less the holes [starts[i], ends[i])
    cdef bint has_low
    cdef int64_t low, high
    cdef Vec starts, ends
    # the requests remembered by PSN: a ring of opcodes, READ requests sorted
    cdef Py_ssize_t ring_size, ring_added
    cdef int64_t *ring_e
    cdef uint8_t *ring_op
    cdef Read *reads
    cdef Py_ssize_t reads_at, reads_n, reads_cap
    # AckReq packets waiting for their ACK, sorted by (e, t): pend[pend_at:pend_at + pend_n]
    cdef Pend *pend
    cdef Py_ssize_t pend_at, pend_n, pend_cap
    # round trips: count, sum, min, max
    cdef int64_t rtt_n, rtt_sum, rtt_lo, rtt_hi
    # the latest requests, a ring of HISTORY
    cdef Hist *hist
    cdef Py_ssize_t hist_next, hist_n, hist_cap

    def __cinit__(self, *args, **kwargs):
        memset(self.cnt, 0, sizeof(self.cnt))

    def __dealloc__(self):
        free(self.hist)
        free(self.ring_e)
        free(self.ring_op)
        free(self.reads)
        free(self.pend)
        free(self.starts.d)
        free(self.ends.d)

    def __init__(self, pmtu=None, int64_t stall_ns=0):
        self.fixed_pmtu = pmtu
        self.pmtu_fixed = pmtu or 0
        self.latencies = {k: [] for k in LATENCIES}
        self.lat_generation = self.latencies["nak_generation_ns"]
        self.lat_response = self.latencies["nak_response_ns"]
        self.lat_retransmission = self.latencies["retransmission_ns"]
        self.rnr_wait_ns = []
        self.orphan_starts = []
        self.orphan_ends = []
        self.answers = []
        self.answers_ordered = True
        self.stall_after = stall_ns

    # --- what the rest of the observer reads ----------------------------------------------

    @property
    def counts(self):
        """The counters, by name (a copy: :meth:`bump` changes them)."""
        return {name: self.cnt[i] for i, name in enumerate(COUNTERS)}

    def bump(self, str counter, int64_t n):
        """Add ``n`` to a counter."""
        self.cnt[_COUNTER_AT[counter]] += n

    def hole_count(self):
        """PSN ranges missing among the requests seen."""
        return self.starts.n

    def hole_in(self, int64_t a, int64_t b):
        """Some request PSN of [a, b) was never seen."""
        return self._hole_in(a, b)

    def seen_range(self):
        """(lowest, one past the highest) extended request PSN seen; None: none yet."""
        return (self.low, self.high) if self.has_low else None

    @property
    def seen(self):
        """The request PSNs seen, as ``ibwire.transport.psn_runs.Runs`` (a copy)."""
        runs = Runs()
        if self.has_low:
            runs.low, runs.high = self.low, self.high
            runs.starts = [self.starts.d[i] for i in range(self.starts.n)]
            runs.ends = [self.ends.d[i] for i in range(self.ends.n)]
        return runs

    @property
    def pmtu(self):
        return self.pmtu_fixed or self.pmtu_seen or 4096

    @property
    def round(self):
        return _ROUND_NAMES[self.round_]

    @property
    def turnaround(self):
        return self.turnaround_ if self.has_turn else None

    @property
    def open_start(self):
        return self.open_start_ if self.has_open else None

    @property
    def rtt(self):
        return [self.rtt_n, self.rtt_sum, self.rtt_lo if self.rtt_n else None,
                self.rtt_hi if self.rtt_n else None]

    @property
    def first_ns(self):
        return self.first_ns_ if self.has_first else None

    @first_ns.setter
    def first_ns(self, value):
        self.has_first = value is not None
        self.first_ns_ = value if value is not None else 0

    @property
    def last_ns(self):
        return self.last_ns_ if self.has_first else None

    @last_ns.setter
    def last_ns(self, value):
        self.last_ns_ = value if value is not None else 0

    # --- feeding --------------------------------------------------------------------------

    def feed_rows(self, rows, Py_ssize_t start, Py_ssize_t stop):
        """The rules over rows ``start`` .. ``stop`` - 1 (``ROW_FIELDS`` columns)."""
        if stop <= start:
            return
        cols = [np.ascontiguousarray(rows[k][start:stop],
                                     np.uint64 if k == "va" else np.int64)
                for k in ROW_FIELDS]
        cdef const int64_t[::1] record = cols[0], t = cols[1], opcode = cols[2]
        cdef const int64_t[::1] psn = cols[3], ackreq = cols[4], syndrome = cols[5]
        cdef const int64_t[::1] dmalen = cols[6], payload = cols[8], ce = cols[9]
        cdef const int64_t[::1] icrc_bad = cols[10]
        cdef const uint64_t[::1] va = cols[7]
        cdef Py_ssize_t i
        for i in range(stop - start):
            self._row(record[i], t[i], <int> (opcode[i] & 0xFF), psn[i], ackreq[i] != 0,
                      <int> syndrome[i], dmalen[i], va[i], payload[i], ce[i] != 0,
                      icrc_bad[i] != 0)

    def row(self, int64_t record, int64_t t, int opcode, int64_t psn, ackreq, int syndrome,
            int64_t dmalen, uint64_t va, int64_t payload, ce, icrc_bad):
        """One packet of the connection."""
        self._row(record, t, opcode & 0xFF, psn, bool(ackreq), syndrome, dmalen, va, payload,
                  bool(ce), bool(icrc_bad))

    cdef int _row(self, int64_t record, int64_t t, int opcode, int64_t psn, bint ackreq,
                  int syndrome, int64_t dmalen, uint64_t va, int64_t payload, bint ce,
                  bint icrc_bad) except -1:
        cdef int kind = C_KIND[opcode]
        cdef int64_t moved, e, resent
        cdef bint had_moved, stalled
        if not self.has_first:
            self.has_first = True
            self.first_ns_ = self.last_ns_ = t
        elif t > self.last_ns_:
            self.last_ns_ = t
        if self.has_last_time and t < self.last_time:
            self.find_many("timestamps_backwards", [record],
                           "packets stamped earlier than the packet before them")
        self.last_time, self.has_last_time = t, True
        if icrc_bad:
            self.find_many("bad_icrc", [record], "packets with a bad ICRC")
        if kind == K_CNP:
            self.cnt[CNPS] += 1
            return 0
        moved, had_moved = self.moved, self.has_moved
        self.moved, self.has_moved = t, True
        if ce:
            self.cnt[ECN_CE] += 1
        e = psn + ORIGIN if not self.has_ref else unwrap(psn, self.ref)
        self.ref, self.has_ref = e, True
        stalled = had_moved and t - moved > self.stall_after
        resent = self.cnt[RETRANSMITTED]
        if kind == K_REQUEST:
            self._request(record, t, e, opcode, ackreq, dmalen, va, payload)
        elif kind == K_ACK:
            self._ack(record, t, e, syndrome)
        elif kind == K_READ_RESP:
            self._response(t, e, payload)
        elif kind == K_ATOMIC_ACK:
            self.cnt[ATOMIC_ACKS] += 1
            self._answered(e)
            self._covered(e + 1, t)
        if stalled:
            self.stall(moved, t - moved, record,
                       self._ends_stall(kind, syndrome, self.cnt[RETRANSMITTED] > resent))
        return 0

    cdef object _ends_stall(self, int kind, int syndrome, bint resent):
        cdef int group
        if resent:
            return f"{_ROUND_NAMES[self.round_] or 'timeout'}_retransmission"
        if kind == K_ACK:
            group = syndrome >> 5
            return "rnr_nak" if group == 1 else "nak" if group == 3 else None
        return None

    cdef inline int64_t _psn_count(self, int family, int64_t dmalen):
        cdef int64_t pmtu, n
        if family != F_READ:
            return 1
        pmtu = self.pmtu_fixed or self.pmtu_seen or 4096
        n = dmalen // pmtu + (1 if dmalen % pmtu else 0)  # dmalen >= 0: a 32-bit field
        return n if n > 1 else 1

    # --- the PSNs seen (``ibwire.transport.psn_runs.Runs``) ----------------------------------

    cdef inline bint _seen(self, int64_t e):
        cdef Py_ssize_t i
        if not self.has_low or not (self.low <= e < self.high):
            return False
        i = bisect_right(self.starts.d, 0, self.starts.n, e) - 1
        return i < 0 or not e < self.ends.d[i]

    cdef bint _hole_in(self, int64_t a, int64_t b):
        cdef Py_ssize_t i
        if not self.has_low or a < self.low or b > self.high:
            return True
        i = bisect_right(self.ends.d, 0, self.ends.n, a)
        return i < self.starts.n and self.starts.d[i] < b

    cdef int _see(self, int64_t e, int64_t count) except -1:
        cdef int64_t end = e + count
        cdef int64_t kept_s[2]
        cdef int64_t kept_e[2]
        cdef int64_t one
        cdef Py_ssize_t i, j, k = 0
        if not self.has_low:
            self.has_low, self.low, self.high = True, e, end
            return 0
        if end < self.low:
            one = end
            vec_replace(&self.starts, 0, 0, &one, 1)
            one = self.low
            vec_replace(&self.ends, 0, 0, &one, 1)
        if e > self.high:
            one = self.high
            vec_replace(&self.starts, self.starts.n, self.starts.n, &one, 1)
            vec_replace(&self.ends, self.ends.n, self.ends.n, &e, 1)
        self.low = min(self.low, e)
        self.high = max(self.high, end)
        i = bisect_right(self.ends.d, 0, self.ends.n, e)
        j = bisect_left(self.starts.d, i, self.starts.n, end)
        if i == j:
            return 0
        if self.starts.d[i] < e:
            kept_s[k], kept_e[k] = self.starts.d[i], e
            k += 1
        if self.ends.d[j - 1] > end:
            kept_s[k], kept_e[k] = end, self.ends.d[j - 1]
            k += 1
        vec_replace(&self.starts, i, j, kept_s, k)
        vec_replace(&self.ends, i, j, kept_e, k)
        return 0

    # --- the requests by PSN (``ibwire.transport.sent.SentRequests``) ----------------------

    cdef int _sent_add(self, int64_t e, int opcode, bint is_read, int64_t count, uint64_t va,
                       int64_t dmalen) except -1:
        cdef Py_ssize_t wanted, size, new, k, at
        cdef int64_t *new_e
        cdef uint8_t *new_op
        self.ring_added = wanted = min(RING, self.ring_added + 1)
        size = self.ring_size
        if wanted > size:  # grow, placing the known entries as a numpy assignment would
            new = max(64, size)
            while new < wanted and new < RING:
                new *= 2
            new_e = <int64_t *> malloc(new * sizeof(int64_t))
            new_op = <uint8_t *> malloc(new)
            if new_e == NULL or new_op == NULL:
                free(new_e)
                free(new_op)
                raise MemoryError()
            for k in range(new):
                new_e[k], new_op[k] = -1, 0
            for k in range(size):
                if self.ring_e[k] >= 0:
                    at = self.ring_e[k] & (new - 1)
                    new_e[at], new_op[at] = self.ring_e[k], self.ring_op[k]
            free(self.ring_e)
            free(self.ring_op)
            self.ring_e, self.ring_op, self.ring_size = new_e, new_op, new
        at = e & (self.ring_size - 1)
        self.ring_e[at], self.ring_op[at] = e, opcode
        if is_read:
            self._read(e, count, va, dmalen)
        return 0

    cdef int _read(self, int64_t e, int64_t count, uint64_t va, int64_t dmalen) except -1:
        cdef Read r
        cdef Read *rs
        cdef Py_ssize_t lo, hi, mid
        r.start, r.count, r.va, r.dmalen = e, count, va, dmalen
        if self.reads_at + self.reads_n >= self.reads_cap:  # room at the end
            if self.reads_at:
                memmove(self.reads, self.reads + self.reads_at, self.reads_n * sizeof(Read))
                self.reads_at = 0
            if self.reads_n >= self.reads_cap:
                self.reads_cap = max(16, 2 * self.reads_cap)
                rs = <Read *> realloc(self.reads, self.reads_cap * sizeof(Read))
                if rs == NULL:
                    raise MemoryError()
                self.reads = rs
        rs = self.reads + self.reads_at
        if self.reads_n == 0 or e > rs[self.reads_n - 1].start:
            rs[self.reads_n] = r
        else:  # insort: after every entry not greater
            lo, hi = 0, self.reads_n
            while lo < hi:
                mid = (lo + hi) >> 1
                if read_less(&r, &rs[mid]):
                    hi = mid
                else:
                    lo = mid + 1
            memmove(rs + lo + 1, rs + lo, (self.reads_n - lo) * sizeof(Read))
            rs[lo] = r
        self.reads_n += 1
        if self.reads_n > MAX_READS:
            self.reads_at += 1
            self.reads_n -= 1
        return 0

    cdef bint _repeats(self, int64_t e, int opcode, bint is_read, uint64_t va, int64_t dmalen):
        cdef Read *rs = self.reads + self.reads_at
        cdef Py_ssize_t lo = 0, hi = self.reads_n, mid, at
        while lo < hi:
            mid = (lo + hi) >> 1
            if e < rs[mid].start:
                hi = mid
            else:
                lo = mid + 1
        lo -= 1
        if lo >= 0 and e < rs[lo].start + rs[lo].count:
            if not is_read:
                return False
            if e == rs[lo].start:
                return va == rs[lo].va and dmalen == rs[lo].dmalen
            # moved on by as many bytes as the length went down
            return va > rs[lo].va and rs[lo].dmalen > dmalen and \
                va - rs[lo].va == <uint64_t> (rs[lo].dmalen - dmalen)
        if self.ring_size:
            at = e & (self.ring_size - 1)
            if self.ring_e[at] == e:
                return self.ring_op[at] == opcode
        return True

    # --- AckReq packets waiting for their ACK --------------------------------------------

    cdef inline Py_ssize_t _pend_from(self, int64_t e):
        """The first pending (offset from pend_at) at a PSN >= e."""
        cdef Pend *p = self.pend + self.pend_at
        cdef Py_ssize_t lo = 0, hi = self.pend_n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if p[mid].e < e:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef int _pend_add(self, int64_t e, int64_t t) except -1:
        cdef Pend *p
        cdef Py_ssize_t lo, hi, mid
        if self.pend_at + self.pend_n >= self.pend_cap:
            if self.pend_at:
                memmove(self.pend, self.pend + self.pend_at, self.pend_n * sizeof(Pend))
                self.pend_at = 0
            if self.pend_n >= self.pend_cap:
                self.pend_cap = max(16, 2 * self.pend_cap)
                p = <Pend *> realloc(self.pend, self.pend_cap * sizeof(Pend))
                if p == NULL:
                    raise MemoryError()
                self.pend = p
        p = self.pend + self.pend_at
        lo, hi = 0, self.pend_n   # insort of (e, t): after every entry not greater
        while lo < hi:
            mid = (lo + hi) >> 1
            if e < p[mid].e or (e == p[mid].e and t < p[mid].t):
                hi = mid
            else:
                lo = mid + 1
        memmove(p + lo + 1, p + lo, (self.pend_n - lo) * sizeof(Pend))
        p[lo].e, p[lo].t = e, t
        self.pend_n += 1
        if self.pend_n > C_MAX_PENDING:
            self.pend_at += self.pend_n - C_MAX_PENDING
            self.pend_n = C_MAX_PENDING
        return 0

    cdef void _covered(self, int64_t upto, int64_t t):
        """Answers cover the PSNs below ``upto``: AckReq packets there have their ACK."""
        cdef Py_ssize_t cut, k
        cdef int64_t d
        cdef Pend *p
        if not self.has_cover or upto > self.cover:
            self.cover, self.has_cover = upto, True
        cut = self._pend_from(upto)
        p = self.pend + self.pend_at
        for k in range(cut):
            d = t - p[k].t
            if self.rtt_n == 0:
                self.rtt_lo = self.rtt_hi = d
            else:
                self.rtt_lo = min(self.rtt_lo, d)
                self.rtt_hi = max(self.rtt_hi, d)
            self.rtt_n += 1
            self.rtt_sum += d
        self.pend_at += cut
        self.pend_n -= cut
        if self.pend_n == 0:
            self.pend_at = 0

    # --- requests -------------------------------------------------------------------------

    cdef int _request(self, int64_t record, int64_t t, int64_t e, int opcode, bint ackreq,
                      int64_t dmalen, uint64_t va, int64_t payload) except -1:
        cdef int position = C_POSITION[opcode], family = C_FAMILY[opcode]
        cdef int64_t count = self._psn_count(family, dmalen)
        cdef bint new = not self._seen(e)
        cdef bint fill = new and self.has_low and e < self.high
        cdef bint jump = self.has_prev_end and e != self.prev_end
        cdef bint answers
        cdef Hist *h
        self.cnt[PAYLOAD_BYTES] += payload
        if not new and not self._repeats(e, opcode, family == F_READ, va, dmalen):
            self.find_many("psn_reused", [record], "requests at a PSN already used by another "
                           "request (not a resend of it)")
            new = True
        if new:
            self._sent_add(e, opcode, family == F_READ, count, va, dmalen)
            self.cnt[DATA_PACKETS] += 1
            self.cnt[DATA_BYTES] += payload
            if fill:
                self.cnt[OUT_OF_ORDER] += 1
            self._message(e, position, family, count, fill)
        else:
            self.cnt[RETRANSMITTED] += 1
            if self.has_cover and e < self.cover:
                self.cnt[DUPLICATES] += 1
            self.pend_n = self._pend_from(e)   # Karn: its ACK tells no round trip
        answers = self.has_nak and e == self._resend_psn() and (jump or not self._in_flight(t))
        if (not new or fill) and (self.prev_first or jump or answers
                                  or self.round_ == ROUND_NONE):
            self._round_start(record, t, e, new, answers, jump)
        elif new and not fill:
            self.round_ = ROUND_NONE
        if not new:
            self.cnt[ROUND_COUNTER[self.round_]] += 1
            if not self.has_span:
                self.span_lo = self.span_hi = e
                self.has_span = True
            else:
                self.span_lo = min(self.span_lo, e)
                self.span_hi = max(self.span_hi, e)
        if answers and self.has_nak:
            self._answer_nak(t, False)
        if ackreq and new:
            self._pend_add(e, t)
        self._see(e, count)
        self._remember(e, count, t, record)
        self.prev_end, self.has_prev_end = e + count, True
        self.prev_first = new and not fill
        return 0

    cdef int _remember(self, int64_t e, int64_t count, int64_t t, int64_t record) except -1:
        """The latest HISTORY requests, a ring grown as requests come (it wraps once full)."""
        cdef Hist *h
        cdef Py_ssize_t cap
        if self.hist_n == self.hist_cap and self.hist_cap < C_HISTORY:
            cap = min(C_HISTORY, max(64, 2 * self.hist_cap))
            h = <Hist *> realloc(self.hist, cap * sizeof(Hist))
            if h == NULL:
                raise MemoryError()
            self.hist, self.hist_cap = h, cap
        h = &self.hist[self.hist_next]
        h.e, h.count, h.t, h.record = e, count, t, record
        self.hist_next += 1
        if self.hist_next == C_HISTORY:
            self.hist_next = 0
        if self.hist_n < C_HISTORY:
            self.hist_n += 1
        return 0

    cdef inline int64_t _resend_psn(self):
        """(With a NAK open.) The NAKed PSN, or the first not yet acknowledged past it."""
        return max(self.nak_e, self.cover) if self.has_cover else self.nak_e

    cdef inline bint _in_flight(self, int64_t t):
        return self.has_nak and self.has_turn and t - self.nak_t < self.turnaround_

    cdef int _round_start(self, int64_t record, int64_t t, int64_t e, bint new, bint answers,
                          bint jump) except -1:
        cdef Py_ssize_t k, at
        cdef Hist *h
        if answers:
            self.round_ = ROUND_NAK if self.nak_kind == ROUND_NAK else ROUND_RNR
            self._answer_nak(t, jump)
        else:
            self.round_ = ROUND_TIMEOUT
            if self.has_nak and not self._in_flight(t):
                self.find("retransmission_not_at_nak", [self.nak_record, record],
                          f"NAK named PSN {self.nak_e & PSN_MASK}, the resend started at "
                          f"PSN {e & PSN_MASK} {(t - self.nak_t) / 1e6:.3f} ms later, as "
                          "after a timeout (the NAK lost past the capture point, or not "
                          "acted on)")
                self.has_nak = False
        self.span_lo = self.span_hi = e
        self.has_span = True
        if not new:  # the latest transmission of PSN e among the remembered requests
            for k in range(self.hist_n):
                at = self.hist_next - 1 - k
                if at < 0:
                    at += C_HISTORY
                h = &self.hist[at]
                if h.e <= e < h.e + h.count:
                    self.lat_retransmission.append(t - h.t)
                    break
        return 0

    cdef int _answer_nak(self, int64_t t, bint jump) except -1:
        cdef int64_t took
        if self.nak_kind == ROUND_NAK:
            took = t - self.nak_t
            self.lat_response.append(took)
            if jump:
                if not self.has_turn or took < self.turnaround_:
                    self.turnaround_ = took
                self.has_turn = True
        self.has_nak = False
        return 0

    cdef int _message(self, int64_t e, int position, int family, int64_t count, bint fill
                      ) except -1:
        if position == P_FIRST or position == P_ONLY:
            self.cnt[MESSAGES] += 1
        if family == F_READ or family == F_ATOMIC:
            self.expect(e, count, family)
        elif position == P_ONLY:
            self.cnt[MESSAGES_COMPLETED] += 1
        elif position == P_FIRST:
            if fill:
                self.orphan_starts.append(e)
            else:
                if self.has_open:
                    self.orphan_starts.append(self.open_start_)
                self.open_start_, self.has_open = e, True
        elif position == P_LAST:
            if self.has_open and not fill and not self._hole_in(self.open_start_, e):
                self.cnt[MESSAGES_COMPLETED] += 1
            else:
                if self.has_open and not fill:
                    self.orphan_starts.append(self.open_start_)
                self.orphan_ends.append(e)
            if not fill:
                self.has_open = False
        return 0

    # --- answers to READs and atomics ----------------------------------------------------

    cpdef expect(self, int64_t start, int64_t count, int family):
        """A READ or atomic of PSNs ``start`` .. ``start + count - 1`` waits for its answers
        (the oldest waiting are forgotten beyond MAX_ANSWERS)."""
        cdef list answers = self.answers
        cdef Waiting last
        if not answers:
            self.answers_ordered = True
        else:
            last = <Waiting> answers[len(answers) - 1]
            if start < last.start + last.count:
                self.answers_ordered = False
        answers.append(Waiting(start, count, family))
        if len(answers) > C_MAX_ANSWERS:
            del answers[0]

    cpdef bint _answered(self, int64_t e) except -1:
        """Mark response PSN ``e`` of a READ or atomic; True when seen for the first time."""
        cdef list answers = self.answers
        cdef Py_ssize_t lo = 0, hi = len(answers), mid, i
        cdef Waiting a
        if self.answers_ordered:
            while lo < hi:
                mid = (lo + hi) >> 1
                if e < (<Waiting> answers[mid]).start:
                    hi = mid
                else:
                    lo = mid + 1
            i = lo - 1
            if i >= 0:
                a = <Waiting> answers[i]
                if e < a.start + a.count:
                    return self._mark(i, a, e)
        else:
            for i in range(len(answers)):
                a = <Waiting> answers[i]
                if a.start <= e < a.start + a.count:
                    return self._mark(i, a, e)
        return not self.has_resp_high or e > self.resp_high

    cdef bint _mark(self, Py_ssize_t i, Waiting a, int64_t e) except -1:
        if not a.mark(e - a.start):
            return False
        if a.done == a.count:
            self.cnt[MESSAGES_COMPLETED] += 1
            del self.answers[i]
        return True

    cdef int _response(self, int64_t t, int64_t e, int64_t payload) except -1:
        self.cnt[READ_RESPONSES] += 1
        self.cnt[PAYLOAD_BYTES] += payload
        if self._answered(e):
            self.cnt[DATA_BYTES] += payload
        else:
            self.cnt[READ_RESPONSES_RESENT] += 1
            self.cnt[READ_RESPONSE_BYTES_RESENT] += payload
        if not self.has_resp_high or e > self.resp_high:
            self.resp_high, self.has_resp_high = e, True
        self._covered(e + 1, t)
        return 0

    # --- ACKs and NAKs --------------------------------------------------------------------

    cdef int _ack(self, int64_t record, int64_t t, int64_t e, int syndrome) except -1:
        cdef int group = syndrome >> 5, kind
        cdef Py_ssize_t k, at
        cdef Hist *h
        cdef bint found
        cdef int64_t gen
        if group == 0:
            self.cnt[ACKS] += 1
            if self.has_ack_max and e < self.ack_max_e:
                if not self.has_span or not (self.span_lo <= e <= self.span_hi):
                    self.find("ack_psn_backwards", [self.ack_max_record, record],
                              f"ACK of PSN {e & PSN_MASK} after ACK of PSN "
                              f"{self.ack_max_e & PSN_MASK}")
            if not self.has_ack_max or e >= self.ack_max_e:
                self.ack_max_e, self.ack_max_record, self.has_ack_max = e, record, True
            self._covered(e + 1, t)
            return 0
        if group == 1:
            self.cnt[RNR_NAKS] += 1
            self.rnr_wait_ns.append(rnr_timer_ns(syndrome & 0x1F))
            kind = ROUND_RNR
        elif syndrome == 0x60:
            self.cnt[NAKS_SEQ] += 1
            kind = ROUND_NAK
        else:
            self.cnt[NAKS_OTHER] += 1
            self._covered(e, t)
            return 0
        if self.has_nak:
            self.find("naks_outstanding", [self.nak_record, record],
                      f"NAK of PSN {e & PSN_MASK} while the NAK of PSN "
                      f"{self.nak_e & PSN_MASK} was not answered")
        if kind == ROUND_NAK:
            # the first request past PSN e after the latest one at or before it
            found = False
            for k in range(self.hist_n):
                at = self.hist_next - 1 - k
                if at < 0:
                    at += C_HISTORY
                h = &self.hist[at]
                if h.e <= e:
                    break
                gen, found = h.t, True
            if found:
                self.lat_generation.append(t - gen)
        self.nak_e, self.nak_t, self.nak_record, self.nak_kind = e, t, record, kind
        self.has_nak = True
        self._covered(e, t)
        return 0
