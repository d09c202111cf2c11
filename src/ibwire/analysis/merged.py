"""Connection analysis of several capture files as one merged capture, from per-file summaries.

A capture is often several files: one capture cut by size or time (``tcpdump -C``/``-G``,
``dumpcap`` ring buffers, ``editcap -c``), or several taps. Their *merged capture* is what
``mergecap`` writes by default: the files' records merged by timestamp, at each step the
earliest next record of any file, the last of the files on a tie (Wireshark's
``wiretap/merge.c``); records are numbered in that order, from 0. ``ibwire qp`` on the merged capture and
:func:`analyse_merged` on the files' summaries give the same connections, counters,
latencies and findings, with findings' record numbers those of the merged capture.

Two steps, so that the first runs anywhere (one task per file, ``ibwire.dask``):

1. :func:`summarise` reads one file: the timestamp and size of every record (to merge and to
   cut batches), the scanner columns of the rows that belong to a connection
   (:func:`ibwire.analysis.connections.stream_keys`) and the file's CM messages;
2. :func:`analyse_merged` merges the summaries in timestamp order, renumbers their records
   and feeds them, batch by batch, to the same :class:`Connections`, CNP check and reports
   as :func:`ibwire.analysis.analyse`: the protocol rules have one definition.

Batches: the merged rows are cut into windows of about ``WINDOW`` bytes of frames. A merged
capture under ``WINDOW`` is one batch, as ``ibwire qp`` reads it; above, a batch edge may
fall elsewhere than in qp's scan of the merged file, which can only change which connection
an answer stream joins when pairing rule 3 (PSNs seen in the same batch) decides it.
Records a file could not read (``error`` ``capture``) count as records, at their position.
Memory: a summary holds 16 bytes per record and about 50 more per connection packet (32
more with IPv6 or GRH addresses); the combining step holds all of them.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.analysis import SCAN_FIELDS, WINDOW, Analysis, batches, report
from ibwire.analysis.cm import FIELDS as CM_FIELDS
from ibwire.analysis.cm import cm_records
from ibwire.analysis.cnp_check import CnpCheck
from ibwire.analysis.connections import Connections, stream_keys
from ibwire.pcap.source import Source

#: Scanner columns a summary keeps for each connection row (what Connections.feed reads).
COLUMNS = ("record", "timestamp_ns", "headers", "error", "cut", "ecn", "payload.length", "icrc_ok",
           *(f for f in SCAN_FIELDS if f not in CM_FIELDS))
#: Bytes a record takes besides its frame (a classic pcap record header).
RECORD_HEADER = 16

CmRecord = tuple[int, tuple[int, int], tuple[int, int], int, dict[str, Any]]


@dataclass
class Summary:
    """What the merged analysis needs of one capture file (picklable: a task's result)."""

    name: str
    times: np.ndarray                  # timestamp_ns of every record, in file order
    sizes: np.ndarray                  # bytes of every record (frame + record header)
    rows: dict[str, np.ndarray]        # COLUMNS of the connection rows, file record numbers
    #                                    (a column of zeros only: empty)
    cm: list[CmRecord] = field(default_factory=list)   # CM MADs, file record numbers

    @property
    def records(self) -> int:
        return len(self.times)


def summarise(source: Source, name: str | None = None) -> Summary:
    """One file's :class:`Summary` (``source``: path or binary file object)."""
    times, sizes, parts, cm = [], [], [], []
    for batch in batches(source):
        cols = batch.columns
        times.append(cols["timestamp_ns"].astype(np.int64))
        sizes.append(cols["frame.len"].astype(np.int64) + RECORD_HEADER)
        cm.extend(cm_records(batch))
        keyed = stream_keys(cols)
        if keyed is not None:
            parts.append({k: cols[k][keyed[0]] for k in COLUMNS})
    if not parts:   # the columns' types still, from an empty selection of the last batch
        none = np.zeros(0, np.intp)
        parts = [{k: cols[k][none] for k in COLUMNS}] if times else []
    rows = {k: np.concatenate([p[k] for p in parts]) for k in COLUMNS} if parts else {}
    # a column of zeros only (an address family the file does not have) is kept empty
    rows = {k: v if k == "record" or v.any() else v[:0] for k, v in rows.items()}
    empty = np.zeros(0, np.int64)
    return Summary(str(source) if name is None else name,
                   np.concatenate(times) if times else empty,
                   np.concatenate(sizes) if sizes else empty, rows, cm)


def merged_records(times: Sequence[np.ndarray]) -> list[np.ndarray]:
    """For each file, its records' numbers in the merged capture (``mergecap``'s order:
    the earliest next record of any file first; on a tie the last of the files, as
    Wireshark's ``merge_read_packet`` takes it: its ``is_earlier`` is true for equal times)."""
    if all(len(t) < 2 or bool((t[1:] >= t[:-1]).all()) for t in times):
        # sorted files: their merge is a sort by time, then file (last first), then record
        if not times:
            return []
        t = np.concatenate(times)
        file = np.repeat(np.arange(len(times)), [len(x) for x in times])
        order = np.lexsort((np.arange(len(t)), -file, t))
    else:   # a file with timestamps going backwards: the merge of heads, as mergecap
        starts = np.cumsum([0, *map(len, times)])
        heads = [zip(t.tolist(), range(int(a), int(a) + len(t)), strict=True)
                 for t, a in zip(times, starts, strict=False)]
        # heapq.merge takes the first iterable on a tie: the files go in last first
        order = np.fromiter((i for _, i in heapq.merge(*heads[::-1], key=lambda x: x[0])),
                            np.int64, int(starts[-1]))
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    bounds = np.cumsum([0, *map(len, times)])
    return [position[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def analyse_merged(summaries: Sequence[Summary], *, pmtu: int | None = None,
                   cnp_scope: str = "qp", cnp_interval_us: float = 4.0,
                   window: int = WINDOW) -> Analysis:
    """:func:`ibwire.analysis.analyse` of the merged capture of the summarised files (their
    order in ``summaries`` breaks timestamp ties, as the order of mergecap's inputs does)."""
    numbers = merged_records([s.times for s in summaries])
    total = sum(s.records for s in summaries)
    sizes = np.zeros(total, np.int64)
    for s, new in zip(summaries, numbers, strict=True):
        sizes[new] = s.sizes
    with_rows = [(s, new) for s, new in zip(summaries, numbers, strict=True) if s.rows]
    cols: dict[str, np.ndarray] = {}
    if with_rows:
        cols = {k: np.concatenate([_column(s, k) for s, _ in with_rows]) for k in COLUMNS}
        cols["record"] = np.concatenate([new[s.rows["record"]] for s, new in with_rows])
        order = np.argsort(cols["record"], kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
    cm = sorted(((int(new[r]), *rest) for s, new in zip(summaries, numbers, strict=True)
                 for r, *rest in s.cm), key=lambda m: m[0])
    conns = Connections(pmtu)
    check = CnpCheck(cnp_scope, round(cnp_interval_us * 1000))
    ends = np.cumsum(sizes)
    start, next_cm = 0, 0
    while start < total:
        # the records of about one window of frames, at least one
        stop = max(start + 1, int(np.searchsorted(ends, ends[start] - sizes[start] + window,
                                                  side="right")))
        while next_cm < len(cm) and cm[next_cm][0] < stop:
            conns.cm.sessions.receive(*cm[next_cm][1:])
            next_cm += 1
        if cols:
            a, b = np.searchsorted(cols["record"], [start, stop])
            if b > a:
                check.feed(conns.feed({k: v[a:b] for k, v in cols.items()}))
        start = stop
    check.finish()
    conns.finish()
    return Analysis([report(c) for c in conns.list], total)


def _column(s: Summary, name: str) -> np.ndarray:
    v = s.rows[name]
    n = len(s.rows["record"])
    return v if len(v) == n else np.zeros((n, *v.shape[1:]), v.dtype)


__all__ = ["Summary", "analyse_merged", "merged_records", "summarise"]
