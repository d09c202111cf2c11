"""A big classic pcap cut into chunks that can be scanned apart (the Dask path).

A chunk boundary is put near each multiple of the chunk size and moved forward to the next
record header: the first position whose 16 bytes read as a record header (caplen no more
than the snaplen, wire length no less than caplen, a fraction below one second) and from
which ``CHAIN`` more headers follow one another the same way, or the file ends exactly. The
boundaries are then verified by :func:`records_before`, which walks every record header
from the start (the C walk of ``ibwire.scan``) and counts the records before each boundary:
a boundary that is not where a record starts raises ``CaptureError``.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ibwire.errors import CaptureError
from ibwire.pcap.pcap import (
    GLOBAL_HEADER_LEN,
    RECORD_HEADER_LEN,
    PcapHeader,
    parse_pcap_header,
    pcap_magic,
)
from ibwire.pcap.records import MAX_CAPLEN

CHAIN = 8
"""Record headers that must follow a candidate boundary for it to be taken."""
_LOOK = 1 << 20
"""Bytes read past a candidate boundary to check the chain of headers after it."""


@dataclass(frozen=True)
class Chunk:
    """Bytes ``start``..``stop`` of ``path`` (records only), whose first record is number
    ``first_record`` of the file."""

    path: str
    start: int
    stop: int
    first_record: int = 0
    records: int = -1
    """How many records the chunk holds (-1: not counted)."""


def classic_header(path: str) -> PcapHeader | None:
    """The global header if ``path`` is a plain (not compressed) classic pcap, else None."""
    with open(path, "rb") as f:
        head = f.read(GLOBAL_HEADER_LEN)
    if pcap_magic(head) is None or len(head) < GLOBAL_HEADER_LEN:
        return None
    return parse_pcap_header(head, path)


def _fits(data: bytes, at: int, header: PcapHeader, end_of_file: bool) -> bool:
    """A chain of CHAIN record headers starts at ``at`` of ``data``."""
    fraction_limit = 1_000_000_000 if header.nanoseconds else 1_000_000
    snaplen = header.snaplen or MAX_CAPLEN
    for _ in range(CHAIN):
        if at == len(data) and end_of_file:
            return True
        if at + RECORD_HEADER_LEN > len(data):
            return not end_of_file and at > 0
        _sec, fraction, caplen, orig = struct.unpack_from(header.byte_order + "4I", data, at)
        if fraction >= fraction_limit or caplen > min(snaplen, MAX_CAPLEN) or orig < caplen:
            return False
        at += RECORD_HEADER_LEN + caplen
    return at <= len(data) or not end_of_file


def resync(f: io.BufferedReader, offset: int, size: int, header: PcapHeader) -> int:
    """The first record boundary at or after ``offset`` (``size`` if none before the end)."""
    pos = offset
    while pos < size:
        f.seek(pos)
        data = f.read(_LOOK + MAX_CAPLEN // 4)
        end_of_file = pos + len(data) >= size
        for i in range(min(len(data), _LOOK)):
            if _fits(data, i, header, end_of_file):
                return pos + i
        pos += _LOOK
    return size


def boundaries(path: str, chunk_bytes: int) -> list[int] | None:
    """Chunk starts of a classic pcap (the first at its first record, the last being its
    size), None if ``path`` is not one or needs no cutting."""
    header = classic_header(path)
    size = os.path.getsize(path)
    if header is None or size <= chunk_bytes + GLOBAL_HEADER_LEN:
        return None
    cuts = [GLOBAL_HEADER_LEN]
    with open(path, "rb") as f:
        for offset in range(GLOBAL_HEADER_LEN + chunk_bytes, size, chunk_bytes):
            at = resync(f, max(offset, cuts[-1] + 1), size, header)  # type: ignore[arg-type]
            if at < size and at > cuts[-1]:
                cuts.append(at)
    return [*cuts, size]


def records_before(path: str, cuts: Sequence[int]) -> list[int]:
    """How many records precede each boundary of ``cuts`` (walking every record header), the
    end of the file included (all the records the walk could read); CaptureError if a boundary is not where a record starts."""
    from ibwire.scan import pcap_records

    header = classic_header(path)
    if header is None:
        raise CaptureError(f"{path}: not a classic pcap file", offset=0)
    swapped = header.byte_order != ("<" if np.little_endian else ">")
    fraction_ns = 1 if header.nanoseconds else 1000
    wanted = np.array(cuts[1:-1], np.int64)
    counts = np.zeros(len(wanted), np.int64)
    found = np.zeros(len(wanted), bool)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            pos, seen = GLOBAL_HEADER_LEN, 0
            while pos < len(mm):
                offs, *_rest, stop, status = pcap_records(view, pos, len(mm), swapped,
                                                          fraction_ns, MAX_CAPLEN, 1 << 20)
                starts = offs - RECORD_HEADER_LEN
                at = np.searchsorted(starts, wanted)
                hit = at < len(starts)
                hit[hit] = starts[at[hit]] == wanted[hit]
                counts[hit & ~found] = seen + at[hit & ~found]
                found |= hit
                seen += len(offs)
                if stop == pos or status != 0:
                    break
                pos = stop
        finally:
            view.release()
    missing = np.flatnonzero(~found)
    if len(missing):
        raise CaptureError(f"{path}: chunk boundary at byte {int(wanted[missing[0]])} is not "
                           "where a record starts", offset=int(wanted[missing[0]]))
    return [0, *counts.tolist(), seen]


def chunks(path: str, chunk_bytes: int) -> list[Chunk]:
    """``path`` cut into verified chunks (one chunk for a file not worth or able to cut)."""
    cuts = boundaries(path, chunk_bytes)
    if cuts is None:
        return [Chunk(path, 0, -1)]
    firsts = records_before(path, cuts)
    return [Chunk(path, a, b, n, m - n)
            for a, b, n, m in zip(cuts, cuts[1:], firsts, firsts[1:], strict=False)]


class ChunkFile(io.RawIOBase):
    """A chunk read as a capture of its own: the file's global header, then its bytes."""

    def __init__(self, chunk: Chunk) -> None:
        self.f = open(chunk.path, "rb")
        self.head = self.f.read(GLOBAL_HEADER_LEN)
        self.chunk = chunk
        self.pos = 0
        self.size = GLOBAL_HEADER_LEN + chunk.stop - chunk.start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        out = memoryview(buffer).cast("B")
        n = 0
        while n < len(out) and self.pos < self.size:
            if self.pos < GLOBAL_HEADER_LEN:
                part = self.head[self.pos:self.pos + len(out) - n]
            else:
                self.f.seek(self.chunk.start + self.pos - GLOBAL_HEADER_LEN)
                part = self.f.read(min(len(out) - n, self.size - self.pos))
                if not part:
                    break
            out[n:n + len(part)] = part
            n += len(part)
            self.pos += len(part)
        return n

    def close(self) -> None:
        self.f.close()
        super().close()
