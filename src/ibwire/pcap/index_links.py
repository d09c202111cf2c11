"""Vectorised frame location for the index fast path of pcap files: the ERF, Linux SLL and
SLL2 headers of a block of records are read at once with numpy. Records numpy does not settle
(shorter than the header, ERF extension headers, an rlen shorter than its headers) are left
to the per-record locators of :mod:`ibwire.pcap.linktypes`, so both give the same answers.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ibwire.pcap.erf import ERF_HEADER_LEN, erf_type_links
from ibwire.pcap.linktypes import sll_link_codes
from ibwire.pcap.locators import LINK_HEADER_LEN
from ibwire.pcap.records import LINK_OTHER


@cache
def erf_tables() -> tuple[np.ndarray, np.ndarray]:
    """uint8[128] link code and int64[128] pad bytes, by ERF type."""
    codes = np.full(128, LINK_OTHER, np.uint8)
    pads = np.zeros(128, np.int64)
    for erf_type, (code, pad) in erf_type_links().items():
        if 0 <= erf_type < 128:
            codes[erf_type], pads[erf_type] = code, pad
    return codes, pads


@cache
def _sll_table() -> tuple[np.ndarray, np.ndarray]:
    """Sorted (ARPHRD << 16 | protocol) keys with a link code, and those codes."""
    pairs = {(arphrd << 16) | protocol: code
             for (arphrd, protocol), code in sll_link_codes().items()}
    keys = np.array(sorted(pairs), np.uint32)
    return keys, np.array([pairs[int(k)] for k in keys], np.uint8)


def _u16(head: np.ndarray, at: int) -> np.ndarray:
    value: np.ndarray = (head[:, at].astype(np.uint32) << 8) | head[:, at + 1]
    return value


def locate_block(kind: str, octets: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 timestamps: np.ndarray, codes: np.ndarray, wire: np.ndarray,
                 tables: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Move one block of rows (views, rewritten in place) from the record to its frame;
    return the positions of the rows left for the per-record locator. ``tables``: ERF's
    (link code, pad) by type, default :func:`erf_tables`."""
    width = LINK_HEADER_LEN[kind]
    rows = np.flatnonzero(lengths >= width)
    head = octets[offsets[rows, None] + np.arange(width)]
    held = lengths[rows].astype(np.int64)
    if kind == "erf":
        table_codes, pads = tables or erf_tables()
        settled = _erf(head, held, pads)
        rows, head, held = rows[settled], head[settled], held[settled]
        erf_type = head[:, 8] & 0x7F
        header_len = ERF_HEADER_LEN + pads[erf_type]
        rlen, wlen = _u16(head, 10).astype(np.int64), _u16(head, 14).astype(np.int64)
        frame_len = np.minimum(np.minimum(held, rlen) - header_len, wlen)
        stamp = np.ascontiguousarray(head[:, :8]).view("<u8")[:, 0]
        fraction = ((stamp & np.uint64(0xFFFFFFFF)) * np.uint64(1_000_000_000)
                    + np.uint64(1 << 31)) >> np.uint64(32)
        timestamps[rows] = (stamp >> np.uint64(32)).astype(np.int64) * 1_000_000_000 + \
            fraction.astype(np.int64)
        codes[rows] = table_codes[erf_type]
        wire[rows] = wlen
    else:
        header_len = np.int64(width)
        frame_len = held - width
        arphrd, protocol = (_u16(head, 2), _u16(head, 14)) if kind == "sll" else \
            (_u16(head, 8), _u16(head, 0))
        keys, key_codes = _sll_table()
        key = (arphrd << 16) | protocol
        at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        codes[rows] = np.where(keys[at] == key, key_codes[at], LINK_OTHER)
        wire[rows] = np.maximum(wire[rows].astype(np.int64) - width, 0)
    offsets[rows] += header_len
    lengths[rows] = frame_len
    left = np.ones(len(lengths), bool)
    left[rows] = False
    return np.flatnonzero(left)


def _erf(head: np.ndarray, held: np.ndarray, pads: np.ndarray) -> np.ndarray:
    """Which ERF records numpy settles: no extension header, headers inside rlen and held, and
    the frame not cut by the capture record (that one gets a warning, from the locator)."""
    header_len = ERF_HEADER_LEN + pads[head[:, 8] & 0x7F]
    rlen = _u16(head, 10).astype(np.int64)
    declared = np.minimum(rlen - header_len, _u16(head, 14).astype(np.int64))
    settled: np.ndarray = ((head[:, 8] & 0x80) == 0) & (rlen >= header_len) & \
        (held >= header_len) & (held - header_len >= declared)
    return settled
