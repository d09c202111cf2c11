"""The edits of ``ibwire.rewrite.edit`` as numpy operations over many frames of one buffer.

:func:`edit_frames` takes a writable uint8 buffer holding frames (offsets, lengths, link
codes) with the CRC engine's verdicts of them as they were read, and applies the options to
every frame at once: MACs, IPv4 TOS/TTL or IPv6 class/flow label/hop limit, address maps,
port maps, BTH P_Key/PSN/QPN and DETH source QP; then the ICRCs through ``crc.fix_batch``
where a covered field changed (or the ICRC was bad), the TCP/UDP checksums, the IPv4 header
checksums. The result is byte for byte what ``edit_frame`` makes of each frame, in the same
order of edits (tests/rewrite/test_rewrite_batch.py compares them).

Frames this path does not handle are only marked ``fallback`` (the caller runs
``edit_frame`` on them): native InfiniBand, a CM REQ/REP on QP1 under ``--qpmap`` or
``--psn-offset``, a RoCE frame whose UDP ports a ``--portmap`` changes, an IP packet longer
than ``--mtu-trunc``, one whose CRC walk failed after the edits, a scanner fault the CRC
engine does not share. Options that change lengths or need state across packets
(``--enet-vlan``, ``--psn-offset QPN:N``) are refused up front by :func:`batchable`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ibwire import crc
from ibwire.rewrite.edit import CNP_OPCODE, UD_TRANSPORT
from ibwire.rewrite.options import IpNet, RewriteOptions

FIELDS = ("eth.dst", "eth.src", "ip.tos", "ip.ttl", "ipv6.tclass_flow", "ipv6.hlim", "ip.src",
          "ip.dst", "l4.sport", "l4.dport", "bth.pkey", "bth.psn", "bth.dqpn", "deth.sqpn")
"""What ``FrameEdit.changed`` names, in the order ``edit_frame`` appends them (a frame is
IPv4 or IPv6, so the two families' names interleave harmlessly)."""
BIT = {name: np.uint32(1 << i) for i, name in enumerate(FIELDS)}
BTH_BITS = int(BIT["bth.pkey"])  # this bit and those above: the transport's
LABELS = ("none", "kept", "recomputed", "bad-fixed", "bad-kept")
"""``FrameEdit.icrc`` values of the batch path, by code."""
NONE, KEPT, RECOMPUTED, BAD_FIXED, BAD_KEPT = range(5)
PAD = 8
"""Bytes the buffer must hold past its last frame (word loads of the checksum sums)."""


def batchable(o: RewriteOptions) -> bool:
    """Whether the batch path can apply these options at all."""
    return o.enet_vlan is None and not o.psn_offset_qp


@dataclass
class FrameResults:
    """Per frame: ``changed`` bits (FIELDS), ``icrc`` (LABELS codes), ``fallback``."""

    changed: np.ndarray
    icrc: np.ndarray
    fallback: np.ndarray


def _get(buf: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """Big-endian numbers of ``size`` (<= 8) bytes at ``at``, as uint64."""
    if size == 1:
        return buf[at].astype(np.uint64)
    width = 2 if size == 2 else 4 if size <= 4 else 8
    raw = np.zeros((len(at), width), np.uint8)
    raw[:, width - size:] = buf[at[:, None] + np.arange(size)]
    return raw.view(f">u{width}").ravel().astype(np.uint64)


def _set(buf: np.ndarray, at: np.ndarray, size: int, value: np.ndarray) -> None:
    if size == 1:
        buf[at] = value
        return
    width = 2 if size == 2 else 4 if size <= 4 else 8
    raw = value.astype(f">u{width}").view(np.uint8).reshape(-1, width)
    buf[at[:, None] + np.arange(size)] = raw[:, width - size:]


class _Frames:
    """The frames being edited and the running per-frame results."""

    def __init__(self, buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> None:
        self.buf, self.off, self.len = buf, offsets, lengths
        self.changed = np.zeros(len(offsets), np.uint32)

    def put(self, rows: np.ndarray, at: np.ndarray, size: int, old: np.ndarray,
            new: np.ndarray, name: str) -> None:
        """Writes ``new`` where it differs from ``old`` (field at frame offset ``at``)."""
        differs = old != new
        if differs.any():
            _set(self.buf, self.off[rows[differs]] + at[differs], size, new[differs])
            self.changed[rows[differs]] |= BIT[name]

    def field(self, rows: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
        return _get(self.buf, self.off[rows] + at, size)


def _bytes_field(f: _Frames, rows: np.ndarray, at: int, new: bytes, name: str) -> None:
    """A fixed value (a MAC) at byte ``at`` of every frame in ``rows``."""
    if not len(rows):
        return
    idx = f.off[rows, None] + at + np.arange(len(new))
    value = np.frombuffer(new, np.uint8)
    differs = (f.buf[idx] != value).any(axis=1)
    f.buf[idx[differs]] = value
    f.changed[rows[differs]] |= BIT[name]


def _class_byte(old: np.ndarray, o: RewriteOptions, whole: int | None) -> np.ndarray:
    new = old.copy() if whole is None else np.full_like(old, whole)
    if o.dscp is not None:
        new = (new & np.uint64(0x03)) | np.uint64(o.dscp << 2)
    if o.ecn is not None:
        new = (new & np.uint64(0xFC)) | np.uint64(o.ecn)
    return new


def _ttl(old: np.ndarray, o: RewriteOptions) -> np.ndarray:
    if o.ttl is None:
        return old
    sign, value = o.ttl
    signed = old.astype(np.int64)
    if sign == "+":
        return np.minimum(255, signed + value).astype(np.uint64)
    if sign == "-":
        return np.maximum(1, signed - value).astype(np.uint64)
    return np.full_like(old, value)


def _map_addresses(halves: list[np.ndarray], pairs: list[tuple[IpNet, IpNet]], bits: int,
                   done: np.ndarray) -> list[np.ndarray]:
    """``map_address`` over addresses held as 64-bit halves (one half for IPv4): the first
    matching pair moves the address; ``done`` marks (and is updated with) moved rows."""
    out = [h.copy() for h in halves]
    for old, new in pairs:
        if old.max_prefixlen != bits:
            continue
        parts = _halves(int(old.netmask), int(old.network_address), int(new.network_address),
                        int(new.hostmask), len(halves))
        match = ~done
        for h, (mask, net, _, _) in zip(halves, parts, strict=True):
            match &= (h & mask) == net
        for i, (_, _, net, host) in enumerate(parts):
            out[i][match] = net | (halves[i][match] & host)
        done |= match
    return out


def _halves(*values_and_count: int) -> list[tuple[np.uint64, ...]]:
    *values, count = values_and_count
    if count == 1:
        return [tuple(np.uint64(v) for v in values)]
    return [tuple(np.uint64(v >> 64) for v in values),
            tuple(np.uint64(v & (1 << 64) - 1) for v in values)]


def _addresses(f: _Frames, rows: np.ndarray, at: np.ndarray, size: int,
               o: RewriteOptions) -> None:
    """Source then destination address (``at``: the source's frame offset)."""
    for shift, maps, name in ((0, o.srcipmap, "ip.src"), (size, o.dstipmap, "ip.dst")):
        if not (maps or o.pnat) or not len(rows):
            continue
        where = at + shift
        if size == 4:
            halves = [f.field(rows, where, 4)]
        else:
            halves = [f.field(rows, where, 8), f.field(rows, where + 8, 8)]
        done = np.zeros(len(rows), bool)
        new = [h.copy() for h in halves]
        if maps:
            new = _map_addresses(halves, maps, size * 8, done)
        if o.pnat:
            pnat = _map_addresses(halves, o.pnat, size * 8, done.copy())
            for n, p in zip(new, pnat, strict=True):
                n[~done] = p[~done]
        differs = np.zeros(len(rows), bool)
        for h, n in zip(halves, new, strict=True):
            differs |= h != n
        for i, n in enumerate(new):
            width = 4 if size == 4 else 8
            _set(f.buf, f.off[rows[differs]] + where[differs] + i * 8, width, n[differs])
        f.changed[rows[differs]] |= BIT[name]


def _map_numbers(old: np.ndarray, table: dict[int, int] | list[tuple[int, int, int]]
                 ) -> np.ndarray:
    new = old.copy()
    if isinstance(table, dict):
        for key, value in table.items():
            new[old == key] = value
        return new
    done = np.zeros(len(old), bool)
    for low, high, value in table:  # port ranges: the first that holds the port
        hit = ~done & (old >= low) & (old <= high)
        new[hit] = value
        done |= hit
    return new


def ones_sums(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sums of the big-endian 16-bit words of ``buf[start:end]`` (an odd last byte padded
    with zero, RFC 1071), unfolded, as uint64; ``buf`` holds ``PAD`` bytes past any end.
    Segments of a few distinct lengths (IP headers) are gathered, others summed in place."""
    total = np.zeros(len(starts), np.uint64)
    length = ends - starts
    words = length // 2
    distinct = np.unique(words)
    if len(distinct) <= 8:
        for w in distinct.tolist():
            sel = np.flatnonzero(words == w)
            if w:
                raw = buf[starts[sel, None] + np.arange(2 * w)]
                total[sel] = raw.view(">u2").sum(axis=1, dtype=np.uint64)
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
            total[sel] = np.add.reduceat(view, bounds, dtype=np.uint64)[0::2]
    odd = np.flatnonzero(length % 2 == 1)
    total[odd] += buf[ends[odd] - 1].astype(np.uint64) << np.uint64(8)
    return total


def _finish(total: np.ndarray) -> np.ndarray:
    """~fold(total) & 0xFFFF (``checksum.finish`` of ``checksum.ones_sum``)."""
    for _ in range(4):
        total = (total & np.uint64(0xFFFF)) + (total >> np.uint64(16))
    return ~total & np.uint64(0xFFFF)


def _zero(f: _Frames, rows: np.ndarray, at: np.ndarray) -> None:
    f.buf[f.off[rows] + at] = 0
    f.buf[f.off[rows] + at + 1] = 0


class _Layer:
    """The IP layer of every frame: l3 offset, version (0: none), protocol (-1: a fragment
    or none), l4 offset and length, as ``edit._ip`` finds them."""

    def __init__(self, n: int) -> None:
        self.l3 = np.zeros(n, np.int64)
        self.version = np.zeros(n, np.int64)
        self.proto = np.full(n, -1, np.int64)
        self.l4 = np.zeros(n, np.int64)
        self.l4_len = np.zeros(n, np.int64)
        self.ihl = np.zeros(n, np.int64)


def _link(f: _Frames, links: np.ndarray, o: RewriteOptions) -> tuple[np.ndarray, np.ndarray]:
    """Ethernet edits; (EtherType, l3 offset) of every frame, as ``edit._link``."""
    n = len(links)
    etype = np.zeros(n, np.int64)
    l3 = f.len.astype(np.int64).copy()
    rows = np.flatnonzero((links == 0) & (f.len >= 14))
    if o.enet_dmac is not None:
        _bytes_field(f, rows, 0, o.enet_dmac, "eth.dst")
    if o.enet_smac is not None:
        _bytes_field(f, rows, 6, o.enet_smac, "eth.src")
    at = np.full(len(rows), 12, np.int64)
    et = f.field(rows, at, 2).astype(np.int64)
    while True:  # to the innermost EtherType
        tagged = np.flatnonzero(((et == 0x8100) | (et == 0x88A8)) & (f.len[rows] >= at + 6))
        if not len(tagged):
            break
        at[tagged] += 4
        et[tagged] = f.field(rows[tagged], at[tagged], 2).astype(np.int64)
    etype[rows], l3[rows] = et, at + 2
    ip = np.flatnonzero(links == 2)
    first = f.buf[f.off[ip]] if len(ip) else np.zeros(0, np.uint8)
    four = (f.len[ip] >= 1) & (first >> 4 == 4)
    etype[ip] = np.where(four, 0x0800, 0x86DD)
    l3[ip] = 0
    grh = links == 3
    etype[grh], l3[grh] = 0x8915, 0
    return etype, l3


def _ip(f: _Frames, etype: np.ndarray, l3: np.ndarray, o: RewriteOptions) -> _Layer:
    layer = _Layer(len(etype))
    layer.l3 = l3
    cand = np.flatnonzero(((etype == 0x0800) | (etype == 0x86DD)) & (l3 + 20 <= f.len))
    b0 = f.buf[f.off[cand] + l3[cand]].astype(np.int64)
    version = b0 >> 4
    ihl = (b0 & 0x0F) * 4
    total = f.field(cand, l3[cand] + 2, 2).astype(np.int64)
    ok4 = (version == 4) & (ihl >= 20) & (l3[cand] + ihl <= f.len[cand]) & (total >= ihl)
    r4, at4, ihl4, total4 = cand[ok4], l3[cand][ok4], ihl[ok4], total[ok4]
    r6 = cand[(version == 6) & (l3[cand] + 40 <= f.len[cand])]
    at6 = l3[r6]
    if o.tos is not None or o.dscp is not None or o.ecn is not None:
        old = f.field(r4, at4 + 1, 1)
        f.put(r4, at4 + 1, 1, old, _class_byte(old, o, o.tos), "ip.tos")
    if o.ttl is not None:
        old = f.field(r4, at4 + 8, 1)
        f.put(r4, at4 + 8, 1, old, _ttl(old, o), "ip.ttl")
    _addresses(f, r4, at4 + 12, 4, o)
    fragment = f.field(r4, at4 + 6, 2) & np.uint64(0x1FFF)
    proto = f.field(r4, at4 + 9, 1).astype(np.int64)
    layer.version[r4], layer.ihl[r4] = 4, ihl4
    layer.proto[r4] = np.where(fragment == 0, proto, -1)
    layer.l4[r4], layer.l4_len[r4] = at4 + ihl4, total4 - ihl4
    if o.tclass is not None or o.flowlabel is not None or o.dscp is not None or o.ecn is not None:
        first = f.field(r6, at6, 4)
        tclass = _class_byte((first >> np.uint64(20)) & np.uint64(0xFF), o, o.tclass)
        label = first & np.uint64(0xFFFFF) if o.flowlabel is None else \
            np.full_like(first, o.flowlabel)
        new = np.uint64(6 << 28) | tclass << np.uint64(20) | label
        f.put(r6, at6, 4, first, new, "ipv6.tclass_flow")
    if o.ttl is not None:
        old = f.field(r6, at6 + 7, 1)
        f.put(r6, at6 + 7, 1, old, _ttl(old, o), "ipv6.hlim")
    _addresses(f, r6, at6 + 8, 16, o)
    layer.version[r6] = 6
    layer.proto[r6] = f.field(r6, at6 + 6, 1).astype(np.int64)
    layer.l4[r6], layer.l4_len[r6] = at6 + 40, f.field(r6, at6 + 4, 2).astype(np.int64)
    return layer


def _ports(f: _Frames, layer: _Layer, o: RewriteOptions) -> None:
    if not o.portmap:
        return
    rows = np.flatnonzero(((layer.proto == 6) | (layer.proto == 17)) &
                          (layer.l4 + 4 <= f.len))
    for shift, name in ((0, "l4.sport"), (2, "l4.dport")):
        at = layer.l4[rows] + shift
        old = f.field(rows, at, 2)
        f.put(rows, at, 2, old, _map_numbers(old, o.portmap), name)


def _bth(f: _Frames, rows: np.ndarray, bth: np.ndarray, o: RewriteOptions) -> np.ndarray:
    """BTH and DETH edits of RoCE frames (``bth``: their BTH offsets); returns the rows that
    need ``edit._cm`` (a UD packet to QP1 whose CM REQ/REP may hold a QPN or a PSN)."""
    opcode = f.field(rows, bth, 1)
    if o.pkey is not None:
        old = f.field(rows, bth + 2, 2)
        f.put(rows, bth + 2, 2, old, np.full_like(old, o.pkey), "bth.pkey")
    dest_qp = f.field(rows, bth + 5, 3)
    if o.psn_offset:
        old = f.field(rows, bth + 9, 3)
        offset = np.where(opcode != CNP_OPCODE, np.uint64(o.psn_offset), np.uint64(0))
        f.put(rows, bth + 9, 3, old, (old + offset) & np.uint64(0xFFFFFF), "bth.psn")
    if o.qpmap:
        f.put(rows, bth + 5, 3, dest_qp, _map_numbers(dest_qp, o.qpmap), "bth.dqpn")
    ud = ((opcode & np.uint64(0xE0)) == UD_TRANSPORT) & (bth + 20 <= f.len[rows])
    if o.qpmap:
        old = f.field(rows[ud], bth[ud] + 17, 3)
        f.put(rows[ud], bth[ud] + 17, 3, old, _map_numbers(old, o.qpmap), "deth.sqpn")
    if o.qpmap or o.psn_offset:
        return rows[ud & (dest_qp == 1)]
    return rows[:0]


PORT_BITS = BIT["l4.sport"] | BIT["l4.dport"]
L4_BITS = BIT["ip.src"] | BIT["ip.dst"] | PORT_BITS


def edit_frames(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                links: np.ndarray, before_error: np.ndarray, before_icrc: np.ndarray,
                bth: np.ndarray, o: RewriteOptions) -> FrameResults:
    """Edits the frames of ``buf`` in place. ``before_error``/``before_icrc`` are the CRC
    engine's error code and ICRC verdict of each frame as read (``crc.verify_batch``),
    ``bth`` its BTH offset where the error is 0. Frames marked ``fallback`` are left in an
    unspecified state: the caller replaces them."""
    n = len(offsets)
    f = _Frames(buf, offsets.astype(np.int64), lengths.astype(np.int64))
    fallback = links == 1
    label = np.zeros(n, np.uint8)
    etype, l3 = _link(f, links, o)
    layer = _ip(f, etype, l3, o)
    _ports(f, layer, o)
    if o.mtu_trunc is not None:
        fallback |= (layer.version != 0) & (f.len - layer.l3 > o.mtu_trunc)
    base = o.fixcsum or o.edits
    fix_ip = base | (f.changed != 0)
    fix_l4 = base | ((f.changed & L4_BITS) != 0)
    roce = (before_error == 0) & ~fallback & np.isin(links, (0, 2, 3))
    fallback |= roce & ((f.changed & PORT_BITS) != 0)  # may no longer be RoCE
    roce &= ~fallback
    rows = np.flatnonzero(roce)
    fallback[_bth(f, rows, bth[rows].astype(np.int64), o)] = True
    roce &= ~fallback
    label[roce] = KEPT
    need = roce & ((f.changed != 0) | (before_icrc == 0))
    keep = need & (before_icrc == 0) & o.keep_bad_icrc
    w = np.flatnonzero(need & ~keep)
    was_right = crc.fix_batch(buf, f.off[w], f.len[w], links[w])
    fallback[w[was_right < 0]] = True
    label[w] = np.where(before_icrc[w] == 0, BAD_FIXED,
                        np.where(was_right == 1, KEPT, RECOMPUTED))
    k = np.flatnonzero(keep)
    if len(k):
        after = crc.verify_batch(buf, f.off[k], f.len[k], links[k])
        fallback[k[after.error != 0]] = True
        label[k] = np.where(after.icrc_ok == 1, BAD_FIXED, BAD_KEPT)
    fix_l4 |= (label == RECOMPUTED) | (label == BAD_FIXED)
    _checksums(f, layer, fix_ip & ~fallback, fix_l4 & ~fallback)
    label[fallback] = NONE
    return FrameResults(f.changed, label, fallback)


def _checksums(f: _Frames, layer: _Layer, fix_ip: np.ndarray, fix_l4: np.ndarray) -> None:
    """TCP/UDP checksums, then IPv4 header checksums (``checksum.transport``,
    ``checksum.ipv4_header``), where ``edit_frame`` recomputes them."""
    proto = layer.proto
    tcp = proto == 6
    where = layer.l4 + np.where(tcp, 16, 6)
    rows = np.flatnonzero(fix_l4 & (tcp | (proto == 17)) & (where + 2 <= f.len) &
                          (layer.l4 + layer.l4_len <= f.len))
    at = where[rows]
    old = f.field(rows, at, 2)
    rows, at = rows[(old != 0) | tcp[rows]], at[(old != 0) | tcp[rows]]  # UDP 0: none
    if len(rows):
        _zero(f, rows, at)
        off, l3, l4, size = f.off[rows], layer.l3[rows], layer.l4[rows], layer.l4_len[rows]
        v4 = layer.version[rows] == 4
        total = ones_sums(f.buf, off + l4, off + l4 + size)
        total += ones_sums(f.buf, off + l3 + np.where(v4, 12, 8), off + l3 + np.where(v4, 20, 40))
        total += (proto[rows] + (size & 0xFFFF) + np.where(v4, 0, size >> 16)).astype(np.uint64)
        value = _finish(total)
        value[(value == 0) & ~tcp[rows]] = 0xFFFF
        _set(f.buf, off + at, 2, value)
    rows = np.flatnonzero((layer.version == 4) & (fix_ip | fix_l4))
    if len(rows):
        l3 = layer.l3[rows]
        _zero(f, rows, l3 + 10)
        off = f.off[rows]
        _set(f.buf, off + l3 + 10, 2, _finish(ones_sums(f.buf, off + l3, off + l3 + layer.ihl[rows])))
