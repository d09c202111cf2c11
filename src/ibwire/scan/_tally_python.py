"""Pure-Python twin of the counting scan (``ibwire.scan._tally``): the same names, the same
results, built on the scanner twin (``ibwire.scan._python``) and the reader's cooked-header
locators (``ibwire.pcap.locators``)."""

from __future__ import annotations

import struct

import numpy as np

from ibwire.crc._common import NOT_IB, Buffer
from ibwire.pcap.locators import locate_sll2_frame, locate_sll_frame
from ibwire.pcap.records import LINK_OTHER
from ibwire.scan._python import pcap_records, scan_frames
from ibwire.scan.batch import ScanBatch, cut_counts

TALLY = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors", "cut",
         "cut_kept")
HEADERS = (None, "sll", "sll2")
_LOCATORS = {1: locate_sll_frame, 2: locate_sll2_frame}
_PLAUSIBLE_ORIG_LEN = 1 << 24
_EPB = 6


def _order(swapped: bool) -> str:
    return "<" if bool(np.little_endian) != swapped else ">"


def _window(buffer: Buffer, pos: int, end: int) -> memoryview:
    data = memoryview(buffer).cast("B")
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"records window {pos}..{end} outside the {len(data)}-byte buffer")
    return data


def _count(buffer: Buffer, offs: np.ndarray, lens: np.ndarray, orig: np.ndarray,
           links: np.ndarray, headers: np.ndarray, warned: np.ndarray, cap_flagged: int
           ) -> tuple[tuple[int, ...], list[int]]:
    """Counts and the rows to look at again of records whose data is ``buffer[offs:][:lens]``
    (frames at ``links``, or behind the cooked header ``HEADERS[headers]``), the counts
    stopping after the ``cap_flagged``-th row listed (``warned``: rows listed anyway);
    ``orig``: the records' lengths on the wire (``lens`` their captured bytes)."""
    data = memoryview(buffer).cast("B")
    missing = np.maximum(orig.astype(np.int64) - lens, 0)  # what a snap length cut
    offs, lens, links = offs.copy(), lens.copy(), links.copy()
    cut = np.zeros(len(offs), bool)  # too short for its cooked header: the reader's error
    for row in np.flatnonzero(headers > 0).tolist():
        start = int(offs[row])
        code, first, last, *_rest, error = _LOCATORS[int(headers[row])](
            data, start, start + int(lens[row]), 0, 0)
        if error is not None:
            cut[row], links[row], lens[row] = True, LINK_OTHER, 0
        else:
            offs[row], lens[row], links[row] = first, last - first, code
    c = scan_frames(buffer, offs, lens, links, (), lens + missing)
    batch = ScanBatch(c, {}, buffer)  # its rules of what failed and what is InfiniBand
    error, failed = c["error"], batch.failed() | cut
    flagged = np.flatnonzero(failed | warned)[:max(1, cap_flagged)]
    rows = len(offs) if len(flagged) < max(1, cap_flagged) else int(flagged[-1]) + 1
    counts = (rows, int(np.count_nonzero(batch.is_ib()[:rows])),
              int(np.count_nonzero((error == NOT_IB)[:rows] & ~cut[:rows])),
              int(np.count_nonzero(failed[:rows])),
              int(np.count_nonzero(c["icrc_ok"][:rows] == 0)),
              int(np.count_nonzero(c["vcrc_ok"][:rows] == 0)),
              int(np.count_nonzero(((error > NOT_IB) & ~batch.cut_header() | cut)[:rows])),
              *cut_counts(batch, c["frame.len"][:rows]))
    return counts, flagged.tolist()


def check_pcap(buffer: Buffer, pos: int, end: int, swapped: bool, max_caplen: int,
               snaplen: int, link: int, header: int, cap_flagged: int
               ) -> tuple[tuple[int, ...], list[tuple[int, int]], int, int]:
    """See the C twin."""
    if not 0 <= header < len(HEADERS):
        raise ValueError(f"no record header {header}")
    offs, caplen, orig, _ts, stop, status = pcap_records(buffer, pos, end, swapped, 0,
                                                         max_caplen)
    warned = (caplen > orig) | ((caplen > snaplen) if snaplen > 0 else False)
    counts, flagged = _count(buffer, offs, caplen, orig, np.full(len(offs), link, np.uint8),
                             np.full(len(offs), header), warned, cap_flagged)
    if len(flagged) >= max(1, cap_flagged):  # the walk stops after the last one listed
        last = counts[0] - 1
        stop = int(offs[last] + caplen[last])
        status = 2 if 0 < end - stop < 16 else 0  # a partial record header, as the walk says
    return counts, [(r, int(offs[r])) for r in flagged], stop, status


def _epb_length(data: memoryview, pos: int, end: int, order: str, max_len: int
                ) -> tuple[int, int]:
    """(length of the EPB at pos whose lengths hold together, else 0; status); see scan.c."""
    if end - pos < 32:
        return 0, 2 if end > pos else 0
    kind, length = struct.unpack_from(order + "II", data, pos)
    if length > end - pos:
        return 0, 2
    if kind != _EPB or length < 32 or length & 3 or length > max_len \
            or struct.unpack_from(order + "I", data, pos + length - 4)[0] != length \
            or struct.unpack_from(order + "I", data, pos + 20)[0] > length - 32:
        return 0, 0
    return length, 0


def check_pcapng(buffer: Buffer, pos: int, end: int, swapped: bool, max_len: int,
                 interfaces: list[tuple[int, int, int]], cap_flagged: int
                 ) -> tuple[tuple[int, ...], list[tuple[int, int]], int, int]:
    """See the C twin."""
    for _snaplen, _link, header in interfaces:
        if not -1 <= header < len(HEADERS):
            raise ValueError(f"no record header {header}")
    data = _window(buffer, pos, end)
    order = _order(swapped)
    blocks: list[tuple[int, int, int, int, int, int]] = []  # block, data, caplen, link, header, orig
    status = 0
    while pos < end:
        length, status = _epb_length(data, pos, end, order, max_len)
        if not length:
            break
        face, _high, _low, caplen, orig = struct.unpack_from(order + "IIIII", data, pos + 8)
        if face >= len(interfaces):
            break
        snaplen, link, header = interfaces[face]
        if header < 0 or caplen > orig or (snaplen and caplen > snaplen):
            break
        blocks.append((pos, pos + 28, caplen, link, header, orig))
        pos += length
    columns = list(zip(*blocks, strict=True)) or [(), (), (), (), (), ()]
    counts, flagged = _count(buffer, np.array(columns[1], np.int64),
                             np.array(columns[2], np.int64), np.array(columns[5], np.int64),
                             np.array(columns[3], np.uint8),
                             np.array(columns[4], np.int64), np.zeros(len(blocks), bool),
                             cap_flagged)
    if len(flagged) >= max(1, cap_flagged):  # paused after the last one listed
        last = blocks[counts[0] - 1][0]
        pos = last + struct.unpack_from(order + "I", data, last + 4)[0]
        status = 1 if pos < end else 0
    return counts, [(r, blocks[r][0]) for r in flagged], pos, status


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
    data = _window(buffer, start, end)
    order = _order(swapped)
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


def pcapng_sync(buffer: Buffer, start: int, end: int, swapped: bool, max_len: int, depth: int,
                search: int) -> int:
    """See the C twin."""
    data = _window(buffer, start, end)
    order = _order(swapped)
    for at in range(start, min(start + search, end), 4):
        pos, k = at, 0
        while k < depth and pos < end:
            length, _status = _epb_length(data, pos, end, order, max_len)
            if not length or struct.unpack_from(order + "I", data, pos + 20)[0] > \
                    struct.unpack_from(order + "I", data, pos + 24)[0]:
                break
            pos, k = pos + length, k + 1
        if k == depth or (k > 0 and pos == end):
            return at
    return -1
