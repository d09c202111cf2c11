"""The edits of ``ibwire.rewrite.edit`` as numpy operations over many frames of one buffer.

:func:`edit_frames` takes a writable uint8 buffer holding frames (offsets, lengths, link
codes) with the CRC engine's verdicts of them as they were read, and applies the options to
every frame at once: MACs, IPv4 TOS/TTL or IPv6 class/flow label/hop limit, address maps,
port maps, BTH P_Key/PSN/QPN and DETH source QP; then the ICRCs through ``crc.fix_batch``
where a covered field changed (or the ICRC was bad), the TCP/UDP checksums, the IPv4 header
checksums. The result is byte for byte what ``edit_frame`` makes of each frame, in the same
order of edits (tests/rewrite/test_rewrite_batch.py compares them). :func:`record_headers`
rewrites the pcap record headers as the writer would. This module is the pure-Python twin of
the C kernel ``ibwire.rewrite._kernel`` (same names, same results).

Frames this path does not handle are only marked ``fallback`` (the caller runs
``edit_frame`` on them): native InfiniBand, RoCEv1 under ``--dscp``/``--ecn``, a CM REQ/REP on
QP1 under ``--qpmap`` or ``--psn-offset``, IPv6 with extension headers, a RoCE frame whose UDP
ports a ``--portmap`` changes, an IP packet longer than ``--mtu-trunc``, one whose CRC walk
failed after the edits, a scanner fault the CRC engine does not share. Options that change
lengths or need state across packets (``--enet-vlan``, ``--psn-offset QPN:N``) are refused up
front by :func:`batchable`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ibwire import crc
from ibwire.rewrite.blocks import (
    U64,
    Block,
    class_byte,
    finish,
    load,
    map_addresses,
    map_numbers,
    ones_sums,
    store,
    ttl,
)
from ibwire.rewrite.edit import CNP_OPCODE, SOURCE_QP_AT, UD_TRANSPORT
from ibwire.rewrite.ipv6 import FRAGMENT, WALKED
from ibwire.rewrite.options import RewriteOptions

FIELDS = ("eth.dst", "eth.src", "ip.tos", "ip.ttl", "ipv6.tclass_flow", "ipv6.hlim", "ip.src",
          "ip.dst", "l4.sport", "l4.dport", "bth.p_key", "bth.psn", "bth.destqp", "deth.srcqp")
"""What ``FrameEdit.changed`` names, in the order ``edit_frame`` appends them (a frame is
IPv4 or IPv6, so the two families' names interleave harmlessly)."""
BIT = {name: np.uint32(1 << i) for i, name in enumerate(FIELDS)}
PORT_BITS = BIT["l4.sport"] | BIT["l4.dport"]
L4_BITS = BIT["ip.src"] | BIT["ip.dst"] | PORT_BITS
LABELS = ("none", "kept", "recomputed", "bad-fixed", "bad-kept")
"""``FrameEdit.icrc`` values of the batch path, by code."""
NONE, KEPT, RECOMPUTED, BAD_FIXED, BAD_KEPT = range(5)
EXTENSIONS = np.array([*WALKED, FRAGMENT], np.uint8)
PAD = 8
"""Bytes the buffer must hold past its last frame (word loads of the checksum sums)."""


def batchable(o: RewriteOptions) -> bool:
    """Whether the batch path can apply these options at all."""
    return o.enet_vlan is None and not o.psn_offset_qp


@dataclass
class FrameResults:
    """Per frame: ``changed`` bits (FIELDS), ``icrc`` (LABELS codes), ``edited`` (a byte
    differs from the frame read), ``fallback`` (to be redone by ``edit_frame``)."""

    changed: np.ndarray
    icrc: np.ndarray
    edited: np.ndarray
    fallback: np.ndarray


class _Frames:
    """The frames being edited and what happened to them so far."""

    def __init__(self, buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> None:
        self.buf, self.off, self.len = buf, offsets, lengths
        self.changed = np.zeros(len(offsets), np.uint32)
        self.touched = np.zeros(len(offsets), bool)
        """Bytes written other than the ``changed`` fields' (CRCs, checksums) differ."""

    def block(self, rows: np.ndarray, at: np.ndarray, size: int) -> Block:
        """``size`` bytes at frame offset ``at`` of the frames ``rows``."""
        return Block(self.buf, rows, self.off[rows] + at, size, self.changed)


def _mac(f: _Frames, rows: np.ndarray, at: int, new: bytes, name: str) -> None:
    macs = f.block(rows, np.full(len(rows), at), 6)
    value = np.frombuffer(new, np.uint8)
    differs = (macs.raw != value).any(axis=1)
    moved = macs.part(differs)
    moved.raw[:], moved.dirty = value, True
    moved.store()  # (all of macs, or a copy of the rows that differ)
    f.changed[rows[differs]] |= BIT[name]


class _Layer:
    """The IP layer of every frame, as ``edit._ip`` finds it: l3 offset, version (0: not
    IP), protocol (-1: a fragment, or not IP), l4 offset and length; the IPv4 headers."""

    def __init__(self, l3: np.ndarray) -> None:
        n = len(l3)
        self.l3 = l3
        self.version = np.zeros(n, np.int64)
        self.proto = np.full(n, -1, np.int64)
        self.l4 = np.zeros(n, np.int64)
        self.l4_len = np.zeros(n, np.int64)
        self.ihl = np.zeros(n, np.int64)
        self.v4: Block | None = None
        self.extended = np.zeros(n, bool)
        """IPv6 with extension headers (``ipv6.upper_layer``): left to ``edit_frame``."""


def _link(f: _Frames, links: np.ndarray, o: RewriteOptions) -> np.ndarray:
    """Ethernet edits; the l3 offset of every frame (-1: not IP), as ``edit._link``."""
    l3 = np.full(len(links), -1, np.int64)
    rows = np.flatnonzero((links == 0) & (f.len >= 14))
    if o.enet_dmac is not None:
        _mac(f, rows, 0, o.enet_dmac, "eth.dst")
    if o.enet_smac is not None:
        _mac(f, rows, 6, o.enet_smac, "eth.src")
    at = np.full(len(rows), 12, np.int64)
    etype = load(f.buf, f.off[rows] + 12, 2)
    while True:  # to the innermost EtherType
        tagged = np.flatnonzero(((etype == 0x8100) | (etype == 0x88A8)) & (f.len[rows] >= at + 6))
        if not len(tagged):
            break
        at[tagged] += 4
        etype[tagged] = load(f.buf, f.off[rows[tagged]] + at[tagged], 2)
    ip = (etype == 0x0800) | (etype == 0x86DD)
    l3[rows[ip]] = at[ip] + 2
    l3[links == 2] = 0
    return l3


def _addresses(block: Block, at: int, size: int, o: RewriteOptions) -> None:
    """Source then destination address of the headers in ``block`` (source at ``at``)."""
    for where, maps, name in ((at, o.srcipmap, "ip.src"), (at + size, o.dstipmap, "ip.dst")):
        if not (maps or o.pnat) or not len(block.rows):
            continue
        halves = [block.num(where, 4)] if size == 4 else \
            [block.num(where, 8), block.num(where + 8, 8)]
        done = np.zeros(len(block.rows), bool)
        new = [h.copy() for h in halves]
        if maps:
            new = map_addresses(halves, maps, size * 8, done)
        if o.pnat:
            pnat = map_addresses(halves, o.pnat, size * 8, done.copy())
            for n, p in zip(new, pnat, strict=True):
                n[~done] = p[~done]
        width = 4 if size == 4 else 8
        for i, (h, n) in enumerate(zip(halves, new, strict=True)):
            block.put(where + i * 8, width, h, n, np.uint32(0))
        differs = np.zeros(len(block.rows), bool)
        for h, n in zip(halves, new, strict=True):
            differs |= h != n
        block.changed[block.rows[differs]] |= BIT[name]


def _ip(f: _Frames, l3: np.ndarray, o: RewriteOptions) -> _Layer:
    layer = _Layer(l3)
    cand = np.flatnonzero((l3 >= 0) & (l3 + 20 <= f.len))
    head = f.block(cand, l3[cand], 20)
    version = head.raw[:, 0] >> 4
    ihl = (head.raw[:, 0] & 0x0F).astype(np.int64) * 4
    total = head.num(2, 2).astype(np.int64)
    ok4 = (version == 4) & (ihl >= 20) & (l3[cand] + ihl <= f.len[cand]) & (total >= ihl)
    v4 = head.part(ok4)
    r4, ihl4, total4 = v4.rows, ihl[ok4], total[ok4]
    if o.tos is not None or o.dscp is not None or o.ecn is not None:
        old = v4.num(1, 1)
        v4.put(1, 1, old, class_byte(old, o, o.tos), BIT["ip.tos"])
    if o.ttl is not None:
        old = v4.num(8, 1)
        v4.put(8, 1, old, ttl(old, o), BIT["ip.ttl"])
    _addresses(v4, 12, 4, o)
    v4.store()
    fragment = v4.num(6, 2) & U64(0x1FFF)
    layer.version[r4], layer.ihl[r4] = 4, ihl4
    layer.proto[r4] = np.where(fragment == 0, v4.raw[:, 9], -1)
    layer.l4[r4], layer.l4_len[r4] = l3[r4] + ihl4, total4 - ihl4
    layer.v4 = v4
    r6 = cand[(version == 6) & (l3[cand] + 40 <= f.len[cand])]
    if not len(r6):
        return layer
    v6 = f.block(r6, l3[r6], 40)
    if o.tclass is not None or o.flowlabel is not None or o.dscp is not None or o.ecn is not None:
        first = v6.num(0, 4)
        tclass = class_byte((first >> U64(20)) & U64(0xFF), o, o.tclass)
        label = first & U64(0xFFFFF) if o.flowlabel is None else np.full_like(first, o.flowlabel)
        v6.put(0, 4, first, U64(6 << 28) | tclass << U64(20) | label, BIT["ipv6.tclass_flow"])
    if o.ttl is not None:
        old = v6.num(7, 1)
        v6.put(7, 1, old, ttl(old, o), BIT["ipv6.hlim"])
    _addresses(v6, 8, 16, o)
    v6.store()
    layer.version[r6] = 6
    layer.proto[r6] = v6.raw[:, 6]
    layer.extended[r6] = np.isin(v6.raw[:, 6], EXTENSIONS)
    layer.l4[r6], layer.l4_len[r6] = l3[r6] + 40, v6.num(4, 2).astype(np.int64)
    return layer


def _ports(f: _Frames, layer: _Layer, o: RewriteOptions) -> None:
    if not o.portmap:
        return
    rows = np.flatnonzero(((layer.proto == 6) | (layer.proto == 17)) & (layer.l4 + 4 <= f.len))
    ports = f.block(rows, layer.l4[rows], 4)
    for at, name in ((0, "l4.sport"), (2, "l4.dport")):
        old = ports.num(at, 2)
        ports.put(at, 2, old, map_numbers(old, o.portmap), BIT[name])
    ports.store()


def _bth(f: _Frames, rows: np.ndarray, bth: np.ndarray, o: RewriteOptions) -> np.ndarray:
    """BTH and DETH edits of RoCE frames (``bth``: their BTH offsets); returns the rows that
    need ``edit._cm`` (a UD packet to QP1 whose CM REQ/REP may hold a QPN or a PSN)."""
    if o.pkey is None and not o.psn_offset and not o.qpmap:
        return rows[:0]
    head = f.block(rows, bth, 12)
    opcode = head.num(0, 1)
    if o.pkey is not None:
        old = head.num(2, 2)
        head.put(2, 2, old, np.full_like(old, o.pkey), BIT["bth.p_key"])
    dest_qp = head.num(5, 3)
    if o.psn_offset:
        old = head.num(9, 3)
        offset = np.where(opcode != CNP_OPCODE, U64(o.psn_offset), U64(0))
        head.put(9, 3, old, (old + offset) & U64(0xFFFFFF), BIT["bth.psn"])
    if o.qpmap:
        head.put(5, 3, dest_qp, map_numbers(dest_qp, o.qpmap), BIT["bth.destqp"])
    head.store()
    at = SOURCE_QP_AT[opcode].astype(np.int64)    # UD and RD: DETH's source QP
    deth = (at > 0) & (bth + at + 3 <= f.len[rows])
    if o.qpmap:
        sqpn = f.block(rows[deth], bth[deth] + at[deth], 3)
        old = sqpn.num(0, 3)
        sqpn.put(0, 3, old, map_numbers(old, o.qpmap), BIT["deth.srcqp"])
        sqpn.store()
    ud = deth & ((opcode & U64(0xE0)) == UD_TRANSPORT)
    if o.qpmap or o.psn_offset:
        return rows[ud & (dest_qp == 1)]
    return rows[:0]


def edit_frames(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                links: np.ndarray, before_error: np.ndarray, before_icrc: np.ndarray,
                bth: np.ndarray, icrc_at: np.ndarray, o: RewriteOptions) -> FrameResults:
    """Edits the frames of ``buf`` in place. ``before_error``/``before_icrc`` are the CRC
    engine's error code and ICRC verdict of each frame as read (``crc.verify_batch``),
    ``bth`` its BTH offset where the error is 0, ``icrc_at`` its ICRC offset (used by the C
    twin only: it updates a right ICRC by CRC linearity; here every ICRC is recomputed).
    Frames marked ``fallback`` are left in an unspecified state: the caller replaces them."""
    n = len(offsets)
    f = _Frames(buf, offsets.astype(np.int64), lengths.astype(np.int64))
    fallback = links == 1
    label = np.zeros(n, np.uint8)
    layer = _ip(f, _link(f, links, o), o)
    fallback |= layer.extended
    _ports(f, layer, o)
    if o.mtu_trunc is not None:
        fallback |= (layer.version != 0) & (f.len - layer.l3 > o.mtu_trunc)
    base = o.fixcsum or o.edits
    fix_ip = base | (f.changed != 0)
    fix_l4 = base | ((f.changed & L4_BITS) != 0)
    roce = (before_error == 0) & ~fallback & ((links == 0) | (links == 2) | (links == 3))
    fallback |= roce & ((f.changed & PORT_BITS) != 0)  # may no longer be RoCE
    if o.dscp is not None or o.ecn is not None:
        fallback |= roce & (layer.version == 0)  # RoCEv1: its GRH's class (edit._grh_class)
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
    f.touched[w[was_right == 0]] = True
    label[w] = np.where(before_icrc[w] == 0, BAD_FIXED,
                        np.where(was_right == 1, KEPT, RECOMPUTED))
    k = np.flatnonzero(keep)
    if len(k):
        after = crc.verify_batch(buf, f.off[k], f.len[k], links[k])
        fallback[k[after.error != 0]] = True
        label[k] = np.where(after.icrc_ok == 1, BAD_FIXED, BAD_KEPT)
    fix_l4 |= (label == RECOMPUTED) | (label == BAD_FIXED)
    _transport(f, layer, fix_l4 & ~fallback)
    _ipv4(f, layer, (fix_ip | fix_l4) & ~fallback)
    label[fallback] = NONE
    return FrameResults(f.changed, label, f.touched | (f.changed != 0), fallback)


def _transport(f: _Frames, layer: _Layer, fix: np.ndarray) -> None:
    """TCP/UDP checksums where ``fix`` says so (``checksum.transport``)."""
    proto = layer.proto
    tcp = proto == 6
    where = layer.l4 + np.where(tcp, 16, 6)
    rows = np.flatnonzero(fix & (tcp | (proto == 17)) & (where + 2 <= f.len) &
                          (layer.l4 + layer.l4_len <= f.len))
    old = load(f.buf, f.off[rows] + where[rows], 2)
    some = (old != 0) | tcp[rows]  # a zero UDP checksum means none
    rows, old = rows[some], old[some]
    if not len(rows):
        return
    at = f.off[rows] + where[rows]
    store(f.buf, at, 2, np.zeros(len(rows), U64))
    off, l3, l4, size = f.off[rows], layer.l3[rows], layer.l4[rows], layer.l4_len[rows]
    v4 = layer.version[rows] == 4
    total = ones_sums(f.buf, off + l4, off + l4 + size)
    total += ones_sums(f.buf, off + l3 + np.where(v4, 12, 8), off + l3 + np.where(v4, 20, 40))
    total += (proto[rows] + (size & 0xFFFF) + np.where(v4, 0, size >> 16)).astype(U64)
    value = finish(total)
    value[(value == 0) & ~tcp[rows]] = 0xFFFF
    store(f.buf, at, 2, value)
    f.touched[rows[value != old]] = True


def _ipv4(f: _Frames, layer: _Layer, fix: np.ndarray) -> None:
    """IPv4 header checksums where ``fix`` says so (``checksum.ipv4_header``): from the
    gathered headers where they have no options, from the buffer where they have."""
    v4 = layer.v4
    if v4 is None or not len(v4.rows):
        return
    want = fix[v4.rows]
    plain = want & (layer.ihl[v4.rows] == 20)
    every = bool(plain.all())
    head = v4.raw if every else v4.raw[plain]
    old = v4.num(10, 2) if every else v4.num(10, 2)[plain]
    words = head.view(">u2").sum(axis=1, dtype=U64) - old
    value = finish(words)
    rows = v4.rows if every else v4.rows[plain]
    store(f.buf, f.off[rows] + layer.l3[rows] + 10, 2, value)
    f.touched[rows[value != old]] = True
    rows = v4.rows[want & ~plain]
    if len(rows):
        at = f.off[rows] + layer.l3[rows]
        old = load(f.buf, at + 10, 2)
        store(f.buf, at + 10, 2, np.zeros(len(rows), U64))
        value = finish(ones_sums(f.buf, at, at + layer.ihl[rows]))
        store(f.buf, at + 10, 2, value)
        f.touched[rows[value != old]] = True


_NS = 1_000_000_000


def record_headers(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                   timestamps: np.ndarray, orig_len: np.ndarray, nanoseconds: bool,
                   big_endian: bool) -> None:
    """The pcap record header before each frame of ``buf`` (16 bytes before its offset) as
    ``PcapWriter.write`` writes it: the timestamp in the file's resolution, caplen, and an
    original length of at least caplen. Only the headers that differ from the file's are
    written (a fraction beyond its unit, a short orig_len)."""
    dtype = np.dtype((">" if big_endian else "<") + "u4")
    unit = _NS if nanoseconds else 1_000_000
    at = offsets - 16
    raw = buf[(at + 4)[:, None] + np.arange(4)]
    fraction = raw.view(dtype).ravel()
    rows = np.flatnonzero((fraction >= unit) | (orig_len < lengths))
    if not len(rows):
        return
    ts = timestamps[rows]
    head = np.empty((len(rows), 4), dtype)
    head[:, 0] = (ts // _NS) & 0xFFFFFFFF
    head[:, 1] = ts % _NS if nanoseconds else ts % _NS // 1000
    head[:, 2] = lengths[rows]
    head[:, 3] = np.maximum(orig_len[rows], lengths[rows])
    buf[at[rows, None] + np.arange(16)] = head.view(np.uint8).reshape(-1, 16)
