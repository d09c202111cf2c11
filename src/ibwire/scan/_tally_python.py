"""Pure-Python twin of the counting scan (``ibwire.scan._tally``): the same names, the same
results, built on the scanner twin (``ibwire.scan._python``)."""

from __future__ import annotations

import struct

import numpy as np

from ibwire.crc._common import NOT_IB, Buffer
from ibwire.scan._python import pcap_records, scan_frames
from ibwire.scan.batch import ScanBatch

TALLY = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors")
_PLAUSIBLE_ORIG_LEN = 1 << 24


def check_pcap(buffer: Buffer, pos: int, end: int, swapped: bool, max_caplen: int,
               snaplen: int, link: int, cap_flagged: int
               ) -> tuple[tuple[int, ...], list[tuple[int, int]], int, int]:
    """See the C twin."""
    offs, caplen, orig, _ts, stop, status = pcap_records(buffer, pos, end, swapped, 0,
                                                         max_caplen)
    c = scan_frames(buffer, offs, caplen, np.full(len(offs), link, np.uint8), ())
    batch = ScanBatch(c, {}, buffer)  # its rules of what failed and what is InfiniBand
    error, failed = c["error"], batch.failed()
    warned = (caplen > orig) | ((caplen > snaplen) if snaplen > 0 else False)
    flagged = np.flatnonzero(failed | warned)
    rows = len(offs)
    if len(flagged) >= max(1, cap_flagged):  # the walk stops after the last one listed
        last = int(flagged[max(1, cap_flagged) - 1])
        rows, flagged = last + 1, flagged[:max(1, cap_flagged)]
        stop = int(offs[last] + caplen[last])
        status = 2 if 0 < end - stop < 16 else 0  # a partial record header, as the walk says
    counts = (rows, int(np.count_nonzero(batch.is_ib()[:rows])),
              int(np.count_nonzero(error[:rows] == NOT_IB)), int(np.count_nonzero(failed[:rows])),
              int(np.count_nonzero(c["icrc_ok"][:rows] == 0)),
              int(np.count_nonzero(c["vcrc_ok"][:rows] == 0)),
              int(np.count_nonzero(error[:rows] > NOT_IB)))
    return counts, [(int(r), int(offs[r])) for r in flagged], stop, status


def _plausible(data: Buffer, pos: int, end: int, order: str, max_caplen: int,
               fraction_limit: int, previous: int) -> tuple[int, int]:
    """(record length or -1, its seconds); see the C twin."""
    if end - pos < 16:
        return -1, previous
    seconds, fraction, caplen, orig = struct.unpack_from(order + "IIII", data, pos)
    if not 8 <= caplen <= min(max_caplen, orig) or orig >= _PLAUSIBLE_ORIG_LEN \
            or fraction >= fraction_limit \
            or caplen > end - pos - 16 or (previous >= 0 and abs(seconds - previous) > 86400):
        return -1, previous
    return 16 + caplen, seconds


def pcap_sync(buffer: Buffer, start: int, end: int, swapped: bool, max_caplen: int,
              fraction_limit: int, depth: int, search: int) -> int:
    """See the C twin."""
    data = memoryview(buffer).cast("B")
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"records window {start}..{end} outside the {len(data)}-byte buffer")
    order = ("<" if np.little_endian else ">") if not swapped else (">" if np.little_endian
                                                                     else "<")
    for at in range(start, min(start + search, end)):
        pos, k, seconds = at, 0, -1
        while k < depth and pos < end:
            size, seconds = _plausible(data, pos, end, order, max_caplen, fraction_limit,
                                       seconds)
            if size < 0:
                break
            pos, k = pos + size, k + 1
        if k == depth or (k > 0 and pos == end):
            return at
    return -1
