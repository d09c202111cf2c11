"""Numpy building blocks of the rewrite batch path (``ibwire.rewrite.vector``).

* :class:`Block`: the same bytes of many frames (an IPv4 header, a BTH) gathered into one
  ``(frames, size)`` array, read and edited there as columns, and scattered back at once;
* the value maps of ``ibwire.rewrite.options`` over arrays: address pairs, QPN and port maps,
  the TTL and traffic class rules;
* RFC 1071 sums over many segments of one buffer.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ibwire.rewrite.options import IpNet, RewriteOptions

U64 = np.uint64


def _width(size: int) -> int:
    return 1 if size == 1 else 2 if size == 2 else 4 if size <= 4 else 8


def windows(buf: np.ndarray, size: int) -> np.ndarray:
    """``buf`` as overlapping rows of ``size`` bytes, one per start (a writable view): taking
    rows of it copies ``size`` bytes per start at once, without a per-byte index."""
    return sliding_window_view(buf, size, writeable=True)


def gather(buf: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """``(len(starts), size)`` uint8: the bytes ``buf[start:start + size]`` of each start."""
    return windows(buf, size)[starts]


def numbers(raw: np.ndarray) -> np.ndarray:
    """The big-endian numbers held by the rows of a ``(n, size <= 8)`` uint8 array, as uint64."""
    size = raw.shape[1]
    width = _width(size)
    if size == width:
        wide = np.ascontiguousarray(raw)
    else:
        wide = np.zeros((len(raw), width), np.uint8)
        wide[:, width - size:] = raw
    return wide.view(f">u{width}").ravel().astype(U64)


def to_bytes(values: np.ndarray, size: int) -> np.ndarray:
    """``(n, size)`` uint8: each value big-endian in ``size`` bytes."""
    width = _width(size)
    return values.astype(f">u{width}").view(np.uint8).reshape(-1, width)[:, width - size:]


def load(buf: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    return numbers(gather(buf, starts, size))


def store(buf: np.ndarray, starts: np.ndarray, size: int, values: np.ndarray) -> None:
    """Writes each value big-endian in ``size`` bytes at its start (starts do not overlap)."""
    windows(buf, size)[starts] = to_bytes(values, size)


class Block:
    """``size`` bytes from ``starts`` of the frames ``rows``, gathered; edited in ``raw``;
    written back by :meth:`store`. ``changed`` (per frame in the batch) collects the bits
    of the fields :meth:`put` changed."""

    def __init__(self, buf: np.ndarray, rows: np.ndarray, starts: np.ndarray, size: int,
                 changed: np.ndarray) -> None:
        self.buf, self.rows, self.starts, self.size = buf, rows, starts, size
        self.raw = gather(buf, starts, size)
        self.changed = changed
        self.dirty = False

    def part(self, keep: np.ndarray) -> Block:
        """The rows where ``keep`` holds (this block itself when it holds everywhere)."""
        if keep.all():
            return self
        out = Block.__new__(Block)
        out.buf, out.rows, out.starts, out.size = self.buf, self.rows[keep], \
            self.starts[keep], self.size
        out.raw, out.changed, out.dirty = self.raw[keep], self.changed, False
        return out

    def num(self, at: int, size: int) -> np.ndarray:
        return numbers(self.raw[:, at:at + size])

    def put(self, at: int, size: int, old: np.ndarray, new: np.ndarray, bit: np.uint32) -> None:
        """Sets the field at byte ``at`` where ``new`` differs from ``old``."""
        differs = old != new
        if differs.any():
            self.raw[differs, at:at + size] = to_bytes(new[differs], size)
            self.changed[self.rows[differs]] |= bit
            self.dirty = True

    def store(self) -> None:
        if self.dirty:
            windows(self.buf, self.size)[self.starts] = self.raw
            self.dirty = False


def class_byte(old: np.ndarray, o: RewriteOptions, whole: int | None) -> np.ndarray:
    """``edit._class_byte``: the whole byte (``--tos``/``--tclass``), then DSCP and ECN."""
    new = old.copy() if whole is None else np.full_like(old, whole)
    if o.dscp is not None:
        new = (new & U64(0x03)) | U64(o.dscp << 2)
    if o.ecn is not None:
        new = (new & U64(0xFC)) | U64(o.ecn)
    return new


def ttl(old: np.ndarray, o: RewriteOptions) -> np.ndarray:
    """``edit._ttl``: set, or add up to 255, or subtract down to 1."""
    if o.ttl is None:
        return old
    sign, value = o.ttl
    signed = old.astype(np.int64)
    if sign == "+":
        return np.minimum(255, signed + value).astype(U64)
    if sign == "-":
        return np.maximum(1, signed - value).astype(U64)
    return np.full_like(old, value)


def _halves(values: tuple[int, ...], count: int) -> list[tuple[np.uint64, ...]]:
    if count == 1:
        return [tuple(U64(v) for v in values)]
    return [tuple(U64(v >> 64) for v in values), tuple(U64(v & (1 << 64) - 1) for v in values)]


def map_addresses(halves: list[np.ndarray], pairs: list[tuple[IpNet, IpNet]], bits: int,
                  done: np.ndarray) -> list[np.ndarray]:
    """``options.map_address`` over addresses held as 64-bit halves (one for IPv4): the first
    matching pair moves an address; ``done`` marks (and is updated with) the moved rows."""
    out = [h.copy() for h in halves]
    for old, new in pairs:
        if old.max_prefixlen != bits:
            continue
        parts = _halves((int(old.netmask), int(old.network_address),
                         int(new.network_address), int(new.hostmask)), len(halves))
        match = ~done
        for h, (mask, net, _, _) in zip(halves, parts, strict=True):
            match &= (h & mask) == net
        for i, (_, _, net, host) in enumerate(parts):
            out[i][match] = net | (halves[i][match] & host)
        done |= match
    return out


def map_numbers(old: np.ndarray, table: dict[int, int] | list[tuple[int, int, int]]
                ) -> np.ndarray:
    """A QPN/LID map (dict) or port ranges ((low, high, new), the first that holds wins)."""
    new = old.copy()
    if isinstance(table, dict):
        for key, value in table.items():
            new[old == key] = value
        return new
    done = np.zeros(len(old), bool)
    for low, high, value in table:
        hit = ~done & (old >= low) & (old <= high)
        new[hit] = value
        done |= hit
    return new


def ones_sums(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sums of the big-endian 16-bit words of ``buf[start:end]`` (an odd last byte padded
    with zero, RFC 1071), unfolded, as uint64; ``buf`` holds 8 bytes past any end.
    Segments of a few distinct lengths are gathered, others summed in place."""
    total = np.zeros(len(starts), U64)
    length = ends - starts
    words = length // 2
    distinct = np.unique(words)
    if len(distinct) <= 8:
        for w in distinct.tolist():
            sel = np.flatnonzero(words == w)
            if w:
                raw = gather(buf, starts[sel], 2 * w)
                total[sel] = raw.view(">u2").sum(axis=1, dtype=U64)
    else:
        for parity in (0, 1):
            sel = np.flatnonzero((starts % 2 == parity) & (words > 0))
            if not len(sel):
                continue
            count = (len(buf) - parity) // 2
            view = buf[parity:parity + 2 * count].view(">u2")
            first = (starts[sel] - parity) // 2
            bounds = np.empty(2 * len(sel), np.int64)
            bounds[0::2], bounds[1::2] = first, first + words[sel]
            total[sel] = np.add.reduceat(view, bounds, dtype=U64)[0::2]
    odd = np.flatnonzero(length % 2 == 1)
    total[odd] += buf[ends[odd] - 1].astype(U64) << U64(8)
    return total


def finish(total: np.ndarray) -> np.ndarray:
    """``checksum.finish(ones_sum(...))`` of unfolded sums: fold, complement."""
    for _ in range(4):
        total = (total & U64(0xFFFF)) + (total >> U64(16))
    return ~total & U64(0xFFFF)
