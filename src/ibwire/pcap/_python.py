"""Pure-Python twin of the pcap layer's C walk (``ibwire.pcap._engine``): the same names."""

from __future__ import annotations

import numpy as np

from ibwire.pcap.pcapng import check_clock, clock
from ibwire.pcap.records import INT64_MAX, INT64_MIN, Buffer

__all__ = ["erf_block", "pcapng_epbs"]


def pcapng_epbs(buffer: Buffer, pos: int, end: int, swapped: bool, max_len: int,
                interfaces: list[tuple[int, int, int, int, int]], cap: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The run of common-case pcapng EPBs at ``buffer[pos:end]`` (see the C twin)."""
    for kind, param, *_rest in interfaces:
        check_clock(kind, param)
    data = memoryview(buffer)
    if data.format != "B" or data.ndim != 1:
        data = data.cast("B")
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"EPB window {pos}..{end} outside the {len(data)}-byte buffer")
    order = "<" if bool(np.little_endian) != swapped else ">"
    u32 = np.dtype(order + "u4")
    rows: list[tuple[int, int, int, int, int]] = []
    while len(rows) < cap and end - pos >= 32:
        kind_, length, iface, high, low, caplen, orig = np.frombuffer(
            data[pos:pos + 28], u32).tolist()
        if (kind_ != 6 or length < 32 or length & 3 or length > max_len or length > end - pos
                or np.frombuffer(data[pos + length - 4:pos + length], u32)[0] != length):
            break
        if iface >= len(interfaces):
            break
        kind, param, offset_s, snaplen, direct = interfaces[iface]
        if not direct or caplen > length - 32 or caplen > orig or (snaplen and caplen > snaplen):
            break
        ns = clock(kind, param)(high << 32 | low) + offset_s * 1_000_000_000
        rows.append((pos + 28, caplen, orig, min(max(ns, INT64_MIN), INT64_MAX), iface))
        pos += length
    cols = list(zip(*rows, strict=True)) or [(), (), (), (), ()]
    return (np.array(cols[0], np.int64), np.array(cols[1], np.int64),
            np.array(cols[2], np.uint32), np.array(cols[3], np.int64),
            np.array(cols[4], np.uint32), pos)


def erf_block(octets: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
              timestamps: np.ndarray, codes: np.ndarray, wire: np.ndarray,
              type_codes: np.ndarray, pads: np.ndarray) -> np.ndarray:
    """The ERF records of a block of rows (views of the index's columns: int64 offsets,
    uint32 lengths, int64 timestamps, uint8 link codes, uint32 wire lengths), moved in place
    from the record to its frame: link code (``type_codes`` by ERF type), ERF timestamp and
    wire length, the header (and ``pads`` by type) skipped. Records without extension
    headers whose frame the record holds whole; returns the positions of the others, which
    the per-record locator settles (in numpy here: ``ibwire.pcap.index_links``)."""
    from ibwire.pcap.index_links import locate_block

    return locate_block("erf", octets, offsets, lengths, timestamps, codes, wire,
                        (type_codes, pads))
