"""One frame through ``ibwire rewrite``: link layer, IP and UDP/TCP as tcprewrite edits
them, then the InfiniBand transport (BTH, DETH; LRH and GRH on native IB), then the CRCs.

Which CRC to touch is decided by the engine rather than by a list of fields: the ICRC is
computed over the edited frame with its variant fields masked (IBA 1.4 §7.8.1; Linux
``drivers/infiniband/sw/rxe/rxe_icrc.c``: TTL/hop limit, TOS/traffic class, flow label,
IPv4 and UDP checksums, BTH FECN/BECN), so it differs from the one on the wire exactly when
a covered field changed. The UDP checksum covers the ICRC, so it comes after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ibwire import crc
from ibwire.errors import IbwireError
from ibwire.rewrite import checksum, ipv6
from ibwire.rewrite.options import RewriteOptions, map_address, map_port
from ibwire.tables import header_sizes, opcodes

#: VLAN tag protocol IDs: 802.1Q, 802.1ad, and the pre-standard 0x9100 (as the scanner)
ETH_VLAN = (0x8100, 0x88A8, 0x9100)
ETH_IPV4, ETH_IPV6, ETH_ROCEV1 = 0x0800, 0x86DD, 0x8915
RESPONSE_OPCODES = frozenset(range(0x0D, 0x13))
"""RC/XRC opcodes (low 5 bits) of responses: RDMA READ RESPONSE FIRST..ONLY, ACKNOWLEDGE,
ATOMIC ACKNOWLEDGE (IBA 1.4 Table 38); their PSNs are the requester's."""
UD_TRANSPORT = 0x60
CNP_OPCODE = 0x81


def _source_qp_offsets() -> np.ndarray:
    """Opcode -> bytes from the start of the BTH to the DETH's source QP (0: no DETH), from
    the header chains of specs/opcodes.tsv: UD's DETH comes right after the BTH, RD's after
    its RDETH (IBA 1.4 §9.3)."""
    sizes = header_sizes()
    table = np.zeros(256, np.uint8)
    for value, op in opcodes().items():
        if "DETH" in op.headers:
            before = op.headers[:op.headers.index("DETH")]
            table[value] = sizes["BTH"] + sum(sizes[h] for h in before) + 5
    return table


SOURCE_QP_AT = _source_qp_offsets()
"""For each opcode, the byte offset of the DETH source QP from the BTH (0: none)."""


@dataclass
class FrameEdit:
    """What happened to one frame."""

    changed: list[str] = field(default_factory=list)
    icrc: str = "none"
    """none (no ICRC), kept, recomputed, bad-fixed, bad-kept, cut (--mtu-trunc)."""
    error: str | None = None


class PsnPairs:
    """Which requester QP a response's PSNs belong to (for ``--psn-offset QPN:N``).

    A response goes to the requester's QP, not to the QP named in the option; it is matched to
    the requests seen in the other direction between the same two addresses (one QP with an
    offset there: that one), and the match is remembered for the responder's later packets.
    """

    def __init__(self, opts: RewriteOptions) -> None:
        self.default, self.per_qp = opts.psn_offset, opts.psn_offset_qp
        self.requests: dict[tuple[bytes, bytes], set[int]] = {}
        self.pairs: dict[int, int] = {}

    def offset(self, src: bytes, dst: bytes, dest_qp: int, response: bool) -> int:
        if not self.per_qp:
            return self.default
        if not response:
            if dest_qp in self.per_qp:
                self.requests.setdefault((src, dst), set()).add(dest_qp)
            return self.per_qp.get(dest_qp, self.default)
        if dest_qp not in self.pairs:
            seen = self.requests.get((dst, src), set())
            if len(seen) == 1:
                self.pairs[dest_qp] = next(iter(seen))
        owner = self.pairs.get(dest_qp)
        return self.per_qp[owner] if owner is not None else self.default


def _put(frame: bytearray, at: int, new: bytes, name: str, edit: FrameEdit) -> bool:
    if frame[at:at + len(new)] != new:
        frame[at:at + len(new)] = new
        edit.changed.append(name)
        return True
    return False


def _link(frame: bytearray, o: RewriteOptions, edit: FrameEdit) -> tuple[int, int]:
    """Ethernet edits; returns (ethertype, offset of the layer above)."""
    if len(frame) < 14:
        return 0, len(frame)
    if o.enet_dmac is not None:
        _put(frame, 0, o.enet_dmac, "eth.dst", edit)
    if o.enet_smac is not None:
        _put(frame, 6, o.enet_smac, "eth.src", edit)
    if o.enet_vlan == "del" and frame[12:14] in (b"\x81\x00", b"\x88\xa8") and len(frame) >= 18:
        del frame[12:16]
        edit.changed.append("vlan.del")
    elif o.enet_vlan == "add":  # a new outer tag, over any tag already there (as tcprewrite)
        tci = (o.vlan_pri or 0) << 13 | (o.vlan_cfi or 0) << 12 | (o.vlan_tag or 0)
        frame[12:12] = b"\x81\x00" + tci.to_bytes(2, "big")
        edit.changed.append("vlan.add")
    return innermost_ethertype(frame)


def innermost_ethertype(frame: bytes | bytearray) -> tuple[int, int]:
    """The EtherType of an Ethernet frame past its VLAN tags (as many as it holds), and
    where the header it names starts."""
    at = 12
    etype = int.from_bytes(frame[at:at + 2], "big")
    while etype in ETH_VLAN and len(frame) >= at + 6:
        at += 4
        etype = int.from_bytes(frame[at:at + 2], "big")
    return etype, at + 2


def _class_byte(old: int, o: RewriteOptions, whole: int | None) -> int:
    new = old if whole is None else whole
    if o.dscp is not None:
        new = (new & 0x03) | o.dscp << 2
    if o.ecn is not None:
        new = (new & 0xFC) | o.ecn
    return new


def _ttl(old: int, o: RewriteOptions) -> int:
    if o.ttl is None:
        return old
    sign, value = o.ttl
    if sign == "+":
        return min(255, old + value)
    if sign == "-":
        return max(1, old - value)
    return value


def _addresses(frame: bytearray, at: int, size: int, o: RewriteOptions,
               edit: FrameEdit) -> None:
    for where, maps, name in ((at, o.srcipmap, "ip.src"), (at + size, o.dstipmap, "ip.dst")):
        old = bytes(frame[where:where + size])
        new = (map_address(maps, old) if maps else None) or \
            (map_address(o.pnat, old) if o.pnat else None)
        if new is not None:
            _put(frame, where, new, name, edit)


def _ip(frame: bytearray, l3: int, o: RewriteOptions, edit: FrameEdit
        ) -> tuple[int, int, int, int] | None:
    """IP edits; returns (version, protocol, l4 offset, l4 length) or None (not IP)."""
    if l3 + 20 > len(frame):
        return None
    version = frame[l3] >> 4
    if version == 4:
        ihl = (frame[l3] & 0x0F) * 4
        total = int.from_bytes(frame[l3 + 2:l3 + 4], "big")
        if ihl < 20 or l3 + ihl > len(frame) or total < ihl:
            return None
        _put(frame, l3 + 1, bytes([_class_byte(frame[l3 + 1], o, o.tos)]), "ip.tos", edit)
        _put(frame, l3 + 8, bytes([_ttl(frame[l3 + 8], o)]), "ip.ttl", edit)
        _addresses(frame, l3 + 12, 4, o, edit)
        fragment = int.from_bytes(frame[l3 + 6:l3 + 8], "big") & 0x1FFF
        proto = frame[l3 + 9] if fragment == 0 else -1
        return 4, proto, l3 + ihl, total - ihl
    if version == 6 and l3 + 40 <= len(frame):
        first = int.from_bytes(frame[l3:l3 + 4], "big")
        tclass = _class_byte((first >> 20) & 0xFF, o, o.tclass)
        label = first & 0xFFFFF if o.flowlabel is None else o.flowlabel
        new = (6 << 28 | tclass << 20 | label).to_bytes(4, "big")
        _put(frame, l3, new, "ipv6.tclass_flow", edit)
        _put(frame, l3 + 7, bytes([_ttl(frame[l3 + 7], o)]), "ipv6.hlim", edit)
        _addresses(frame, l3 + 8, 16, o, edit)
        proto, l4 = ipv6.upper_layer(frame, l3)
        return 6, proto, l4, int.from_bytes(frame[l3 + 4:l3 + 6], "big") - (l4 - l3 - 40)
    return None


def _ports(frame: bytearray, l4: int, o: RewriteOptions, edit: FrameEdit) -> None:
    if not o.portmap or l4 + 4 > len(frame):
        return
    for at, name in ((l4, "l4.sport"), (l4 + 2, "l4.dport")):
        port = int.from_bytes(frame[at:at + 2], "big")
        _put(frame, at, map_port(o.portmap, port).to_bytes(2, "big"), name, edit)


def _bth(frame: bytearray, bth: int, src: bytes, dst: bytes, o: RewriteOptions,
         psn: PsnPairs, edit: FrameEdit) -> None:
    opcode = frame[bth]
    if o.pkey is not None:
        _put(frame, bth + 2, o.pkey.to_bytes(2, "big"), "bth.p_key", edit)
    dest_qp = int.from_bytes(frame[bth + 5:bth + 8], "big")
    response = opcode & 0x1F in RESPONSE_OPCODES and opcode & 0xE0 in (0x00, 0xA0)
    offset = psn.offset(src, dst, dest_qp, response) if opcode != CNP_OPCODE else 0
    if offset:  # a CNP's PSN belongs to no sequence
        old = int.from_bytes(frame[bth + 9:bth + 12], "big")
        _put(frame, bth + 9, ((old + offset) & 0xFFFFFF).to_bytes(3, "big"), "bth.psn", edit)
    if dest_qp in o.qpmap:
        _put(frame, bth + 5, o.qpmap[dest_qp].to_bytes(3, "big"), "bth.destqp", edit)
    at = bth + int(SOURCE_QP_AT[opcode])
    if at > bth and at + 3 <= len(frame):
        src_qp = int.from_bytes(frame[at:at + 3], "big")
        if src_qp in o.qpmap:
            _put(frame, at, o.qpmap[src_qp].to_bytes(3, "big"), "deth.srcqp", edit)
        if dest_qp == 1 and opcode & 0xE0 == UD_TRANSPORT:
            _cm(frame, bth + 20, o, edit)


CM_CLASS = 0x07
CM_QPN_PSN = {0x0010: (32, 44, "cm.req"), 0x0013: (12, 20, "cm.rep")}
"""Communication Management MADs on QP1 (IBA 1.4 §12.6.5 REQ, §12.6.8 REP): attribute ID ->
byte offsets of Local QPN and Starting PSN after the 24-byte MAD header (the same as
Wireshark's infiniband.cm.req.localqpn/startpsn and infiniband.cm.rep.localqpn)."""


def _cm(frame: bytearray, mad: int, o: RewriteOptions, edit: FrameEdit) -> None:
    """The QPN (``--qpmap``) and starting PSN (``--psn-offset N``) a CM REQ or REP sets up."""
    if mad + 24 > len(frame) or frame[mad + 1] != CM_CLASS:
        return
    where = CM_QPN_PSN.get(int.from_bytes(frame[mad + 16:mad + 18], "big"))
    if where is None:
        return
    qpn_at, psn_at, name = (mad + 24 + where[0], mad + 24 + where[1], where[2])
    if psn_at + 3 > len(frame):
        return
    qpn = int.from_bytes(frame[qpn_at:qpn_at + 3], "big")
    if qpn in o.qpmap:
        _put(frame, qpn_at, o.qpmap[qpn].to_bytes(3, "big"), f"{name}.localqpn", edit)
    if o.psn_offset:
        psn = (int.from_bytes(frame[psn_at:psn_at + 3], "big") + o.psn_offset) & 0xFFFFFF
        _put(frame, psn_at, psn.to_bytes(3, "big"), f"{name}.startpsn", edit)


def _native(frame: bytearray, o: RewriteOptions, edit: FrameEdit) -> tuple[bytes, bytes]:
    """LRH LIDs and GRH GIDs of a native IB frame; returns the original (SLID, DLID)."""
    dlid, slid = bytes(frame[2:4]), bytes(frame[6:8])
    for at, old, name in ((2, dlid, "lrh.dlid"), (6, slid, "lrh.slid")):
        lid = int.from_bytes(old, "big")
        if lid in o.lidmap:
            _put(frame, at, o.lidmap[lid].to_bytes(2, "big"), name, edit)
    if frame[1] & 0x03 == 3 and len(frame) >= 48:
        for at, name in ((16, "grh.sgid"), (32, "grh.dgid")):
            new = o.gidmap.get(bytes(frame[at:at + 16]))
            if new is not None:
                _put(frame, at, new, name, edit)
        _grh_class(frame, 8, o, edit)
    return slid, dlid


def _grh_class(frame: bytearray, at: int, o: RewriteOptions, edit: FrameEdit) -> None:
    """``--dscp``/``--ecn`` on the traffic class of the GRH at ``at`` (RoCEv1, native IB with
    a GRH; IBA 1.4 §8.3.1): the ICRC masks it (§7.8.1), the VCRC covers it."""
    if (o.dscp is None and o.ecn is None) or at + 40 > len(frame):
        return
    first = int.from_bytes(frame[at:at + 4], "big")
    tclass = _class_byte((first >> 20) & 0xFF, o, None)
    _put(frame, at, ((first & 0xF00FFFFF) | tclass << 20).to_bytes(4, "big"), "grh.tclass", edit)


def _crcs(frame: bytearray, link: str, before: crc.CrcVerdict, o: RewriteOptions,
          edit: FrameEdit) -> None:
    after = crc.verify(frame, link)
    if after.icrc_ok and after.vcrc_ok is not False:
        edit.icrc = "kept" if before.icrc_ok else "bad-fixed"
        return
    span = crc.locate(frame, link)
    wire = bytes(frame[span.icrc:span.icrc + 4])
    crc.fix(frame, link)
    if before.icrc_ok:
        edit.icrc = "recomputed" if not after.icrc_ok else "kept"
    elif o.keep_bad_icrc:
        frame[span.icrc:span.icrc + 4] = wire
        if span.vcrc >= 0:
            frame[span.vcrc:span.vcrc + 2] = crc.vcrc(frame, link).to_bytes(2, "little")
        edit.icrc = "bad-kept"
    else:
        edit.icrc = "bad-fixed"


def _cut_bth(frame: bytearray, link: str, wire: int | None) -> int | None:
    """For an InfiniBand/RoCE packet a snap length cut (``wire`` longer than ``frame``): where
    its BTH is, -1 where the capture cut the BTH itself; None for any other frame."""
    if wire is None or wire <= len(frame):
        return None
    from ibwire.dissect import parse

    try:
        packet = parse(frame, link, wire=wire)
    except IbwireError:
        return None
    if not (packet.cut and packet.is_ib):
        return None
    bth = packet.header("bth")
    return -1 if bth is None else bth.offset


def edit_frame(frame: bytearray, link: str, o: RewriteOptions, psn: PsnPairs,
               wire: int | None = None) -> FrameEdit:
    """Edits ``frame`` (link "ethernet", "ip", "infiniband" or "grh") in place. ``wire``: its
    length on the wire where a snap length cut it: its headers are edited all the same, its
    CRCs, which the capture did not keep, cannot be (``icrc`` "cut"), nor a TCP/UDP checksum
    over bytes it did not keep."""
    edit = FrameEdit()
    try:
        before: crc.CrcVerdict | None = crc.verify(frame, link)
    except IbwireError:
        before = None
    bth_cut = _cut_bth(frame, link, wire) if before is None else None
    if bth_cut is not None:
        edit.icrc = "cut"
    if link == "infiniband":
        if bth_cut is not None:
            src, dst = _native(frame, o, edit)
            if bth_cut >= 0:
                _bth(frame, bth_cut, src, dst, o, psn, edit)
            return edit
        if before is None:
            return edit
        src, dst = _native(frame, o, edit)
        span = crc.locate(frame, link)
        if span.bth >= 0:
            _bth(frame, span.bth, src, dst, o, psn, edit)
        if edit.changed or not before.icrc_ok or before.vcrc_ok is False:
            _crcs(frame, link, before, o, edit)
        else:
            edit.icrc = "kept"
        return edit
    etype, l3 = (ETH_IPV4 if frame[:1] and frame[0] >> 4 == 4 else ETH_IPV6, 0) \
        if link == "ip" else _link(frame, o, edit) if link == "ethernet" else (ETH_ROCEV1, 0)
    layer = _ip(frame, l3, o, edit) if etype in (ETH_IPV4, ETH_IPV6) else None
    if etype == ETH_ROCEV1 and (before is not None or bth_cut is not None):
        _grh_class(frame, l3, o, edit)
    fix_l4 = fix_ip = o.fixcsum or o.edits
    if layer is not None:
        version, proto, l4, l4_len = layer
        if proto in (6, 17):
            _ports(frame, l4, o, edit)
        if o.mtu_trunc is not None and len(frame) - l3 > o.mtu_trunc:
            del frame[l3 + o.mtu_trunc:]
            size = o.mtu_trunc - (l4 - l3)
            field_at = l3 + 2 if version == 4 else l3 + 4
            new_len = o.mtu_trunc if version == 4 else o.mtu_trunc - 40
            frame[field_at:field_at + 2] = new_len.to_bytes(2, "big")
            l4_len = size
            edit.changed.append("mtu-trunc")
            if before is not None:
                before = None
                edit.icrc = "cut"
        fix_ip = fix_ip or bool(edit.changed)
        fix_l4 = fix_l4 or any(c.startswith(("ip.src", "ip.dst", "l4.", "mtu")) for c in
                               edit.changed)
    if before is not None or (bth_cut is not None and bth_cut >= 0):
        bth = crc.locate(frame, link).bth if before is not None else bth_cut
        assert bth is not None
        size = 16 if etype == ETH_IPV6 else 4
        at = l3 + (8 if etype == ETH_IPV6 else 12) if etype != ETH_ROCEV1 else l3 + 8
        size = 16 if etype == ETH_ROCEV1 else size
        _bth(frame, bth, bytes(frame[at:at + size]), bytes(frame[at + size:at + 2 * size]),
             o, psn, edit)
    if before is not None:
        had = len(edit.changed)
        if edit.changed or not before.icrc_ok:  # (after the BTH edits above)
            _crcs(frame, link, before, o, edit)
        else:
            edit.icrc = "kept"
        fix_l4 = fix_l4 or edit.icrc in ("recomputed", "bad-fixed") or len(edit.changed) > had
    if layer is not None:
        version, proto, l4, _ = layer
        if fix_l4 and proto in (6, 17) and bth_cut is None:  # a cut datagram: not all there
            checksum.transport(frame, l3, l4, l4_len, proto)
        if version == 4 and (fix_ip or fix_l4):
            checksum.ipv4_header(frame, l3)
    return edit
