"""The observer's rules on whole runs of rows at once: numpy instead of Python per packet.

:class:`ibwire.transport.observed.Observed` defines what every row means, one row at a
time. Most of a capture is the same story over and over: requests in PSN order, ACKs that
move forward, READ responses and atomic ACKs answering their requests in order, CNPs. For a
run of such rows the per-row rules reduce to sums, running maxima and searches, which this
module does with numpy. The first row that is anything else (a retransmission, a PSN jump, a
NAK, an ACK going backwards, an answer out of order) and every row until the connection is
quiet again (no retransmission round open, no PSN missing above the open message) go through
the per-row rules. ``tests/analysis`` feeds the same rows both ways and compares.
"""

from __future__ import annotations

import numpy as np

from ibwire.transport.observed import MAX_PENDING, ROW_FIELDS, Observed, Rows
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
from ibwire.transport.psn import HALF, PSN_BITS, PSN_MASK
from ibwire.transport.psn_runs import ORIGIN

#: Rows probed at once at first; doubled after every clean probe up to MAX_WINDOW.
MIN_WINDOW, MAX_WINDOW = 256, 1 << 16
#: After a short clean run, this many rows go through the per-row rules before probing again.
SCALAR_STRETCH = 32
#: Fewer rows left than this go through the per-row rules: a probe's numpy calls cost about
#: what a few tens of rows do. On tools/bench_scan.py's every-kind capture, where most
#: connections get under 30 rows a batch, 48 took the analysis from 0.88 s to 0.62 s (16:
#: 0.74 s, 96: 0.68 s).
BULK_MIN = 48


def quiet(o: Observed) -> bool:
    """Nothing open that the bulk rules do not carry: no retransmission round, no PSN missing
    above the open message (older gaps stay gaps), answers taken in order. (A NAK not yet
    answered may stay so: a run stops at a request with its PSN.)"""
    if o.round is not None:
        return False
    last = o.seen.last_hole_end()
    if last is not None and last > (o.open_start if o.open_start is not None else o.seen.high):
        return False
    for k, a in enumerate(o.answers):
        if a.extra or (k > 0 and a.done):
            return False
    return True


def feed(o: Observed, rows: Rows) -> None:
    """``o.feed(rows)``, with clean runs in bulk."""
    n = len(rows["record"])
    if n == 0:
        return
    o.learn_pmtu(rows)
    i, window = 0, o.window
    while i < n:
        if not quiet(o):
            stop = min(n, i + SCALAR_STRETCH)
            for values in zip(*(rows[k][i:stop].tolist() for k in ROW_FIELDS), strict=True):
                o.row(*values)
                i += 1
                if quiet(o):
                    break
            continue
        if n - i < BULK_MIN:  # numpy's fixed costs would outweigh the rows
            o.feed_rows(rows, i, n)
            return
        k = min(n, i + window)
        j = _bulk(o, rows, i, k)
        if j == k:
            window = o.window = min(MAX_WINDOW, window * 2)
            i = j
            continue
        window = o.window = MIN_WINDOW
        stop = min(n, j + (1 if j - i >= 16 else SCALAR_STRETCH))
        o.feed_rows(rows, j, stop)
        i = stop


def _signed(d: np.ndarray) -> np.ndarray:
    d = d & PSN_MASK
    return np.where(d >= HALF, d - (1 << PSN_BITS), d)


def _bulk(o: Observed, rows: Rows, i: int, k: int) -> int:
    """Apply rows ``i`` .. the first one the bulk rules cannot take (at most ``k``); returns
    where it stopped."""
    op = rows["opcode"][i:k]
    kind = KIND[op]
    psn = rows["psn"][i:k].astype(np.int64)
    t = np.asarray(rows["time"][i:k], np.int64)
    syn = rows["syndrome"][i:k]
    m = k - i
    idx = np.arange(m)
    has_psn = kind != CNP
    # extended PSNs, chained as the per-row rules chain them (CNP rows keep no PSN)
    every = bool(has_psn.all())
    p = psn if every else psn[has_psn]
    if len(p):
        if o.ref is None:
            ref = int(p[0]) + ORIGIN
            d = _signed(np.diff(p, prepend=p[0]))
        else:
            ref = o.ref
            d = _signed(np.diff(p, prepend=ref & PSN_MASK))
        chained = np.cumsum(d)
        chained += ref
    if every:
        ext = chained
    else:
        ext = np.zeros(m, np.int64)
        if len(p):
            ext[has_psn] = chained
    stop = m
    # requests: new, in PSN order, each right after the previous
    req = idx[kind == REQUEST]
    fam = FAMILY[op[req]]
    dmalen = rows["dmalen"][i:k][req].astype(np.int64)
    pmtu = o.pmtu
    cnt = np.where(fam == READ, np.maximum(1, -(-dmalen // pmtu)), 1)
    er = ext[req]
    ends = er + cnt
    if len(req):
        start = o.seen.high if o.seen.low is not None else int(er[0])
        prev = np.concatenate(([start], ends[:-1]))
        bad = np.flatnonzero(er != prev)
        if len(bad):
            stop = min(stop, int(req[bad[0]]))
    resend = o.resend_psn()
    if resend is not None and len(req):
        # the request that may answer the open NAK goes row by row: the one at its PSN, or
        # at the first PSN not acknowledged once answers went past it (``resend_psn``)
        covers = (((kind == ACK) & ((syn >> 5) == 0)) | (kind == READ_RESP) |
                  (kind == ATOMIC_ACK))
        due = np.maximum.accumulate(np.where(covers, ext + 1, np.int64(resend)))
        bad = np.flatnonzero(er == due[req])
        if len(bad):
            stop = min(stop, int(req[bad[0]]))
    # NAKs of any kind go row by row; ACKs must not go backwards
    acks = kind == ACK
    positive = (syn >> 5) == 0
    naks = idx[acks & ~positive]
    if len(naks):
        stop = min(stop, int(naks[0]))
    ack = idx[acks & positive]
    if len(ack):
        a = ext[ack]
        floor = o.ack_max[0] if o.ack_max is not None else np.iinfo(np.int64).min
        runmax = np.maximum.accumulate(np.concatenate(([floor], a)))[:-1]
        bad = np.flatnonzero(a < runmax)
        if len(bad):
            stop = min(stop, int(ack[bad[0]]))
    # READ responses and atomic ACKs: each the next PSN still to be answered, in order
    resp = idx[(kind == READ_RESP) | (kind == ATOMIC_ACK)]
    answer_rows = req[(fam == READ) | (fam == ATOMIC)]
    if len(resp):
        stop = min(stop, _answers_in_order(o, resp, kind, ext, answer_rows, req, cnt, fam))
    if stop == 0:
        return i
    if stop < m:
        return _bulk(o, rows, i, i + stop)
    _apply(o, rows, i, k, kind, op, ext, t, req, cnt, fam, ack, resp, answer_rows)
    return k


def _answers_in_order(o: Observed, resp: np.ndarray, kind: np.ndarray, ext: np.ndarray,
                      answer_rows: np.ndarray, req: np.ndarray, cnt: np.ndarray,
                      fam: np.ndarray) -> int:
    """The first response row that is not the next answer due (its position in the run), or
    the run's length when all are."""
    starts, counts, fams, after = [], [], [], []
    for a in o.answers:  # carried over: the first may be partly answered
        done = a.answered_to()
        starts.append(a.start + done)
        counts.append(a.count - done)
        fams.append(a.family)
        after.append(-1)
    pos = np.searchsorted(req, answer_rows)
    starts_a = np.concatenate((np.array(starts, np.int64), ext[answer_rows]))
    counts_a = np.concatenate((np.array(counts, np.int64), cnt[pos]))
    fams_a = np.concatenate((np.array(fams, np.int64), fam[pos].astype(np.int64)))
    after_a = np.concatenate((np.array(after, np.int64), answer_rows))
    n = len(resp)
    total = int(counts_a.sum())
    if total < n:
        return int(resp[total])
    # the expected answers, PSN by PSN, for as many as there are response rows
    owner = np.repeat(np.arange(len(counts_a)), np.minimum(counts_a, n))[:n]
    first = np.concatenate(([0], np.cumsum(counts_a)[:-1]))
    expect = starts_a[owner] + (np.arange(n) - first[owner])
    want_kind = np.where(fams_a[owner] == ATOMIC, ATOMIC_ACK, READ_RESP)
    ok = (ext[resp] == expect) & (kind[resp] == want_kind) & (after_a[owner] < resp)
    bad = np.flatnonzero(~ok)
    return int(resp[bad[0]]) if len(bad) else len(kind)


def _apply(o: Observed, rows: Rows, i: int, k: int, kind: np.ndarray, op: np.ndarray,
           ext: np.ndarray, t: np.ndarray, req: np.ndarray, cnt: np.ndarray, fam: np.ndarray,
           ack: np.ndarray, resp: np.ndarray, answer_rows: np.ndarray) -> None:
    """What the per-row rules would do with rows ``i`` .. ``k`` - 1, all of them clean."""
    c = o.counts
    record = rows["record"][i:k]
    payload = rows["payload"][i:k]  # sums of it come out as int64
    ce = np.asarray(rows["ce"][i:k], bool)
    bad_icrc = np.flatnonzero(rows["icrc_bad"][i:k])
    cnp = kind == CNP
    t0, t1 = int(t[0]), int(t[-1])
    # findings that do not change the story, the kind met first first (as row by row)
    back = np.flatnonzero(t[1:] < t[:-1]) + 1
    if o.last_time and t0 < o.last_time[0]:
        back = np.concatenate(([0], back))
    found = [(int(back[0]), 0) if len(back) else None,
             (int(bad_icrc[0]), 1) if len(bad_icrc) else None]
    for _, which in sorted(f for f in found if f is not None):
        if which == 0:
            o.find_many("timestamps_backwards", record[back].tolist(),
                        "packets stamped earlier than the packet before them")
        else:
            o.find_many("bad_icrc", record[bad_icrc].tolist(), "packets with a bad ICRC")
    if o.first_ns is None:
        o.first_ns = t0
    last = int(t.max())
    o.last_ns = last if o.last_ns is None else max(o.last_ns, last)
    o.last_time = (t1, int(record[-1]))
    cnps = int(cnp.sum())
    _stalls(o, t[~cnp] if cnps else t, record[~cnp] if cnps else record)
    c["cnps"] += cnps
    c["ecn_ce_packets"] += int((ce & ~cnp).sum()) if cnps else int(ce.sum())
    if not cnp[-1]:
        o.ref = int(ext[-1])
    elif cnps < len(cnp):
        o.ref = int(ext[np.flatnonzero(~cnp)[-1]])
    # requests: all first transmissions, in order
    if len(req):
        er = ext[req]
        pos = POSITION[op[req]]
        c["data_packets"] += len(req)
        req_bytes = int(payload[req].sum())
        c["data_bytes"] += req_bytes
        c["payload_bytes"] += req_bytes
        c["messages"] += int(((pos == FIRST) | (pos == ONLY)).sum())
        sw = (fam != READ) & (fam != ATOMIC)
        c["messages_completed"] += int((sw & (pos == ONLY)).sum())
        _messages(o, er[sw], pos[sw])
        for r in np.searchsorted(req, answer_rows).tolist():
            o.expect(int(er[r]), int(cnt[r]), int(fam[r]))
        o.sent.add_many(er, op[req], fam == READ, cnt, rows["va"][i:k][req],
                        rows["dmalen"][i:k][req])
        if o.seen.low is None:
            o.seen.low = int(er[0])
        o.seen.low = min(o.seen.low, int(er[0]))
        o.seen.high = int(er[-1] + cnt[-1])
        o.prev_end = o.seen.high
        o.prev_first = True
        o.remember(er, cnt, t[req], record[req])
    # answers: every response is the next one due
    n_resp = len(resp)
    if n_resp:
        is_read = kind[resp] == READ_RESP
        c["read_responses"] += int(is_read.sum())
        c["atomic_acks"] += int((~is_read).sum())
        resp_bytes = int(payload[resp][is_read].sum())
        c["data_bytes"] += resp_bytes
        c["payload_bytes"] += resp_bytes
        if is_read.any():
            top = int(ext[resp][is_read].max())
            o.resp_high = top if o.resp_high is None else max(o.resp_high, top)
        _answer(o, n_resp)
    if len(ack):
        c["acks"] += len(ack)
        a = ext[ack]
        top = int(a.max())
        if o.ack_max is None or top >= o.ack_max[0]:
            o.ack_max = (top, int(record[ack][np.flatnonzero(a == top)[-1]]))
    _round_trips(o, req, rows, i, k, ext, t, ack, resp)


def _stalls(o: Observed, t: np.ndarray, record: np.ndarray) -> None:
    """Times between packets (CNPs aside) longer than the stall threshold: each a stall that
    a clean packet ends (cause unknown: no NAK, no retransmission)."""
    if not len(t):
        return
    prev = np.concatenate(([o.moved if o.moved is not None else t[0]], t[:-1]))
    gaps = t - prev
    for j in np.flatnonzero(gaps > o.stall_after).tolist():
        o.stall(int(prev[j]), int(gaps[j]), int(record[j]), None)
    o.moved = int(t[-1])


def _messages(o: Observed, er: np.ndarray, pos: np.ndarray) -> None:
    """FIRST and LAST of SEND/WRITE messages, no PSN missing: a LAST right after a FIRST
    completes its message; the others wait for :meth:`Observed.finish`."""
    marks = (pos == FIRST) | (pos == LAST)
    e, p = er[marks], pos[marks]
    if o.open_start is not None:
        e = np.concatenate(([o.open_start], e))
        p = np.concatenate(([FIRST], p))
    if not len(p):
        return
    prev = np.concatenate(([0], p[:-1]))
    done = (p == LAST) & (prev == FIRST)
    o.counts["messages_completed"] += int(done.sum())
    o.orphan_ends.extend(e[(p == LAST) & (prev != FIRST)].tolist())
    nxt = np.concatenate((p[1:], [0]))
    o.orphan_starts.extend(e[(p == FIRST) & (nxt == FIRST)].tolist())
    o.open_start = int(e[-1]) if p[-1] == FIRST else None


def _answer(o: Observed, n: int) -> None:
    """Mark the next ``n`` answers due as seen, completing the READs and atomics they end."""
    answers = o.answers
    while n:
        a = answers[0]
        done = a.answered_to()
        take = min(n, a.count - done)
        a.done, a.extra = done + take, None
        n -= take
        if done + take == a.count:
            o.counts["messages_completed"] += 1
            answers.popleft()


def _round_trips(o: Observed, req: np.ndarray, rows: Rows, i: int, k: int, ext: np.ndarray,
                 t: np.ndarray, ack: np.ndarray, resp: np.ndarray) -> None:
    """AckReq packets against the first answer after them that covers their PSN."""
    covers = np.sort(np.concatenate((ack, resp)))
    ackreq = req[rows["ackreq"][i:k][req].astype(bool)]
    pend_e = np.array([e for e, _ in o.pending], np.int64)
    pend_t = np.array([x for _, x in o.pending], np.int64)
    pend_row = np.full(len(pend_e), -1, np.int64)
    all_e = np.concatenate((pend_e, ext[ackreq]))
    all_t = np.concatenate((pend_t, t[ackreq]))
    all_row = np.concatenate((pend_row, ackreq))
    if len(covers):
        value = np.maximum.accumulate(ext[covers] + 1)
        o.cover = max(o.cover if o.cover is not None else -1, int(value[-1]))
        at = np.maximum(np.searchsorted(covers, all_row, side="right"),
                        np.searchsorted(value, all_e, side="right"))
        hit = at < len(covers)
        rtt = t[covers[at[hit]]] - all_t[hit]
        if len(rtt):
            r = o.rtt
            r[0] += len(rtt)
            r[1] += int(rtt.sum())
            lo, hi = int(rtt.min()), int(rtt.max())
            r[2] = lo if r[2] is None else min(r[2], lo)
            r[3] = hi if r[3] is None else max(r[3], hi)
        left = ~hit
    else:
        left = np.ones(len(all_e), bool)
    o.pending[:] = zip(all_e[left].tolist(), all_t[left].tolist(), strict=True)
    del o.pending[:max(0, len(o.pending) - MAX_PENDING)]
