"""Pure-Python scanner twin: the same names and columns as the C engine (``_engine``).

It walks each frame with the CRC twin's walker and reads each header with the bit layout of
its declaration (``Header.fields``), so a test comparing the twins also checks the C
engine's load/shift/mask instructions against the declarations.
"""

from __future__ import annotations

import numpy as np

from ibwire.crc._common import (
    CUT_HEADER,
    KIND_NAMES,
    MALFORMED,
    NOT_IB,
    TRUNCATED,
    Buffer,
    IcrcSpan,
)
from ibwire.crc._python import _Fault, _verdict, _view, _walk, cut_of, fault_cut
from ibwire.headers.fields import Layout
from ibwire.headers.mad import carries_mad
from ibwire.pcap.records import MAX_CAPLEN
from ibwire.scan import program
from ibwire.scan._frames import frame_arrays, wire_arrays

__all__ = ["pcap_records", "scan_frames", "scan_pcap"]

_SLOTS = program.SLOTS
_S = program.SLOT
_CHAIN, _CHAIN_LEN, _FLAGS = program.opcode_chains()
_RMPP = program.rmpp_classes()
_VIEWS = program.mad_views()
_TPIDS = (0x8100, 0x88A8, 0x9100)
_KINDS = {name: i for i, name in enumerate(KIND_NAMES)}


class _Row:
    """Writes one row of the columns."""

    def __init__(self, cols: dict[str, np.ndarray], by_slot: dict[int, list[program.Column]],
                 row: int, frame: memoryview) -> None:
        self.cols, self.by_slot, self.row = cols, by_slot, row
        self.frame, self.n = frame, len(frame)

    def __setitem__(self, name: str, value: int) -> None:
        self.cols[name][self.row] = value

    def put(self, slot: int, offset: int, kept: int | None = None) -> None:
        """Header ``slot`` at ``offset``; ``kept``: the bytes of it there are (a view the
        capture cut after its fields: the rest read as zeros)."""
        header: Layout = _SLOTS[slot]
        size = header.size if kept is None else kept
        word = int.from_bytes(bytes(self.frame[offset:offset + size])
                              + bytes(header.size - size), "big")
        self.cols["headers"][self.row] |= 1 << slot
        for column in self.by_slot.get(slot, ()):
            f = header.by_name[column.field]
            value = (word >> f.shift) & f.mask
            if column.width == 16:
                self.cols[column.name][self.row] = np.frombuffer(value.to_bytes(16, "big"),
                                                                 np.uint8)
            else:
                self.cols[column.name][self.row] = value

    def fits(self, offset: int, size: int) -> bool:
        return 0 <= offset and size <= self.n - offset

    def fault(self, code: int, site: int, where: int) -> None:
        self["error"], self["error.site"], self["error.offset"] = code, site, where

    def cut(self, site: int, where: int) -> None:
        """The header at ``where`` (a scanner site), which the length fields allow, runs
        past the bytes the capture kept (as scan.c's cut())."""
        self.fault(TRUNCATED, site, where)
        self["offset.payload"] = where
        self.cols["cut"][self.row] |= CUT_HEADER


def _tclass_ecn(b: memoryview, at: int) -> int:
    return (b[at + 1] >> 4) & 3


def _network(r: _Row, link: int) -> None:
    """The headers before the transport, wherever they fit (as scan.c's network())."""
    b, n = r.frame, r.n
    ethertype = 0
    if link == 0:
        if n < 14:
            return
        r.put(_S["eth"], 0)
        ethertype, o, tags = b[12] << 8 | b[13], 14, 0
        while ethertype in _TPIDS:
            if not r.fits(o, 4):
                break
            if tags == 0:
                r.put(_S["vlan"], o)
            tags += 1
            ethertype = b[o + 2] << 8 | b[o + 3]
            o += 4
        r["vlan.count"] = min(tags, 255)
        if ethertype not in (0x0800, 0x86DD, 0x8915):
            return
        net = o
        if ethertype == 0x8915:
            r["offset.network"] = net
            if r.fits(net, 40):
                r.put(_S["grh"], net)
                r["ecn"] = _tclass_ecn(b, net)
            return
    elif link == 2:
        net = 0
    elif link == 3:
        r["offset.network"] = 0
        if n >= 40:
            r.put(_S["grh"], 0)
            r["ecn"] = _tclass_ecn(b, 0)
        return
    elif link == 1:
        r["offset.network"] = 0
        if n >= 8:
            r.put(_S["lrh"], 0)
            if b[1] & 3 == 3 and n >= 48:
                r.put(_S["grh"], 8)
                r["ecn"] = _tclass_ecn(b, 8)
        return
    else:
        return
    if net >= n:
        return
    r["offset.network"] = net
    version, udp = b[net] >> 4, -1
    if version == 4 and (link == 2 or ethertype == 0x0800):
        if not r.fits(net, 20):
            return
        r.put(_S["ip"], net)
        r["ecn"] = b[net + 1] & 3
        ihl = (b[net] & 0x0F) * 4
        if b[net + 9] == 17 and ihl >= 20 and (b[net + 6] << 8 | b[net + 7]) & 0x1FFF == 0:
            udp = net + ihl
    elif version == 6 and (link == 2 or ethertype == 0x86DD):
        if not r.fits(net, 40):
            return
        r.put(_S["ipv6"], net)
        r["ecn"] = _tclass_ecn(b, net)
        if b[net + 6] == 17:
            udp = net + 40
    if udp >= 0 and r.fits(udp, 8):
        r.put(_S["udp"], udp)


def _views(r: _Row, key: int, body: int, icrc: int, kept: int) -> None:
    """The views of the MAD body at ``body`` for its class and attribute ``key`` (as scan.c's
    views()): each is the whole attribute, put only where it ends by the ICRC and the capture
    kept the bytes of its fields."""
    extents = program.view_extents()
    for view_key, slot in _VIEWS:
        if view_key == key and _SLOTS[slot].size <= icrc - body \
                and extents.get(slot, _SLOTS[slot].size) <= kept - body:
            r.put(slot, body, min(kept - body, _SLOTS[slot].size))


def _cut_payload(r: _Row, bth: int, end: int, icrc: int) -> None:
    """As scan.c's cut_payload(): the payload of a packet whose header the capture cut."""
    pad = (r.frame[bth + 1] >> 4) & 3
    if end + pad <= icrc:
        r["offset.payload"], r["payload.length"] = end, icrc - end - pad


def _transport(r: _Row, bth: int, icrc: int) -> None:
    """As scan.c's transport(): the length fields (``icrc``) bound the headers; one they allow
    but the capture cut is a truncation at that header."""
    b = r.frame
    kept = min(icrc, r.n)  # the bytes of the transport the capture kept
    if 12 > kept - bth:
        r.cut(program.SITE_SLOT_BASE + _S["bth"], bth)
        return
    r.put(_S["bth"], bth)
    r["offset.bth"] = bth
    op = b[bth]
    cursor = bth + 12
    if _CHAIN_LEN[op] == program.NO_OPCODE:
        r["offset.payload"], r["payload.length"] = cursor, icrc - cursor
        return
    srcqp = None
    chain = _CHAIN[op, :_CHAIN_LEN[op]].tolist()
    for slot in chain:
        size = _SLOTS[slot].size
        if size > icrc - cursor:
            r.fault(MALFORMED, program.SITE_SLOT_BASE + slot, cursor)
            return
        if size > kept - cursor:  # the payload is still where the opcode's headers end
            r.cut(program.SITE_SLOT_BASE + slot, cursor)
            _cut_payload(r, bth, cursor + sum(_SLOTS[s].size for s in chain[chain.index(slot):]),
                         icrc)
            return
        r.put(slot, cursor)
        if slot == _S["deth"]:
            srcqp = int.from_bytes(b[cursor + 5:cursor + 8], "big")
        cursor += size
    destqp = int.from_bytes(b[bth + 5:bth + 8], "big")
    ud = "UD" if _FLAGS[op] & 1 else ""
    if carries_mad(ud, destqp, srcqp) and icrc - cursor >= 24:
        if kept - cursor < 24:  # a payload from here, as far as is known
            r.cut(program.SITE_SLOT_BASE + _S["mad"], cursor)
            _cut_payload(r, bth, cursor, icrc)
            return
        r.put(_S["mad"], cursor)
        mgmt = b[cursor + 1]
        key = mgmt << 16 | b[cursor + 16] << 8 | b[cursor + 17]  # class, AttributeID
        cursor += 24
        body = True  # the body starts after the RMPP header, if its class has one
        if _RMPP[mgmt]:
            body = icrc - cursor >= 12
            if body and kept - cursor < 12:
                r.cut(program.SITE_SLOT_BASE + _S["rmpp"], cursor)
                _cut_payload(r, bth, cursor, icrc)
                return
            if body:
                r.put(_S["rmpp"], cursor)
                cursor += 12
        if body:
            _views(r, key, cursor, icrc, kept)
    pad = (b[bth + 1] >> 4) & 3
    r["offset.payload"] = cursor
    if pad > icrc - cursor:
        r.fault(MALFORMED, program.SITE_PADCNT, bth + 1)
        return
    r["payload.length"] = icrc - cursor - pad


def _verdicts(r: _Row, span: IcrcSpan, compute: bool) -> None:
    """The CRC columns of a row; without ``compute``, the CRCs as on the wire only."""
    v = _verdict(r.frame, span, compute)
    for name, ok, wire in (("icrc", v.icrc_ok, v.icrc_wire), ("vcrc", v.vcrc_ok, v.vcrc_wire)):
        if wire is not None:
            r[name] = wire
        if ok is not None:
            r[name + "_ok"] = ok
    r["offset.icrc"], r["offset.vcrc"] = span.icrc, span.vcrc


def scan_frames(buffer: Buffer, offsets: object, lengths: object, links: object,
                fields: object = None, wires: object = None) -> dict[str, np.ndarray]:
    """Columns for the frames ``buffer[offsets[i]:][:lengths[i]]`` (see the C twin)."""
    data = _view(buffer)
    offs, lens, codes = frame_arrays(offsets, lengths, links)
    wire_lens = wire_arrays(wires, lens).tolist()
    count = offs.size
    selected = program.select(fields)
    compute = program.verdicts(fields)
    cols = program.empty_columns(count, selected)
    by_slot: dict[int, list[program.Column]] = {}
    for i in selected:
        column = program.columns()[i]
        by_slot.setdefault(column.slot, []).append(column)
    for name in ("ecn", "offset.network", "offset.bth", "offset.payload", "payload.length",
                 "offset.icrc", "offset.vcrc", "icrc_ok", "vcrc_ok"):
        cols[name][:] = -1
    for i, (off, n, link) in enumerate(zip(offs.tolist(), lens.tolist(), codes.tolist(),
                                           strict=True)):
        if link >= 4:
            cols["error"][i] = NOT_IB
            continue
        if off < 0 or n < 0 or off > len(data) or n > len(data) - off:
            cols["error"][i] = TRUNCATED
            continue
        r = _Row(cols, by_slot, i, data[off:off + n])
        _network(r, link)
        try:
            span = _walk(r.frame, link, wire_lens[i])
        except _Fault as f:
            r["encapsulation"] = f.kind
            r.fault(f.code, f.site, f.offset)
            r["cut"] = fault_cut(f, n, wire_lens[i])
            if f.span is not None:  # the fault leaves the CRCs placed: their verdicts
                _verdicts(r, f.span, compute)
            continue
        r["encapsulation"] = _KINDS[span.kind]
        r["cut"] = cut_of(span, n)
        _verdicts(r, span, compute)
        if span.bth >= 0:
            _transport(r, span.bth, span.icrc)
        else:
            r["offset.payload"], r["payload.length"] = 8, span.vcrc - 8
    cols["frame.offset"][:] = offs
    cols["frame.len"][:] = lens
    cols["link"][:] = codes
    return cols


def pcap_records(buffer: Buffer, pos: int, end: int, swapped: bool, fraction_ns: int,
                 max_caplen: int = MAX_CAPLEN, cap: int = 1 << 62
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Classic pcap records in ``buffer[pos:end]`` (see the C twin)."""
    data = _view(buffer)
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"records window {pos}..{end} outside the {len(data)}-byte buffer")
    native_little = bool(np.little_endian)
    order = "<" if native_little != swapped else ">"
    fields = np.dtype(order + "u4")
    rows: list[tuple[int, int, int, int]] = []
    status = 0
    while len(rows) < cap and end - pos >= 16:
        seconds, fraction, caplen, orig = np.frombuffer(data[pos:pos + 16], fields).tolist()
        if caplen > max_caplen:
            status = 1
            break
        if caplen > end - pos - 16:
            status = 2
            break
        rows.append((pos + 16, caplen, orig, seconds * 1_000_000_000 + fraction * fraction_ns))
        pos += 16 + caplen
    if status == 0 and 0 < end - pos < 16:
        status = 2
    cols = list(zip(*rows, strict=True)) or [(), (), (), ()]
    return (np.array(cols[0], np.int64), np.array(cols[1], np.int64),
            np.array(cols[2], np.uint32), np.array(cols[3], np.int64), pos, status)


def scan_pcap(buffer: Buffer, pos: int, end: int, swapped: bool, fraction_ns: int,
              max_caplen: int, cap: int, link: int, fields: object = None,
              release_every: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                               np.ndarray, int, int, dict[str, np.ndarray]]:
    """``pcap_records`` and ``scan_frames`` in one pass over the records (see the C twin;
    ``release_every``, which only bounds the C walk's memory, is not needed here)."""
    offs, caplen, orig, ts, stop, status = pcap_records(buffer, pos, end, swapped,
                                                        fraction_ns, max_caplen, cap)
    cols = scan_frames(buffer, offs, caplen, np.full(len(offs), link, np.uint8), fields,
                       np.maximum(caplen, orig.astype(np.int64)))
    return offs, caplen, orig, ts, stop, status, cols
