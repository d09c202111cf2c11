"""Frame builders with an independent ICRC/VCRC oracle, and hypothesis strategies for them.

Each builder lays a frame out as segments and knows, for every byte, which bits the ICRC masks
and which bits steer the frame walker (lengths, next-header fields, ports). The oracle computes
the ICRC straight from that layout with zlib (masks from shared/reference/crc.md), so the tests
compare the engine with a second, much simpler implementation, not with itself.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from hypothesis import strategies as st

ROCE_PORT = 4791


def crc16_reference(data: bytes) -> int:
    """Bitwise CRC-16 poly 0x100B, reflected, init/xorout 0xFFFF (the VCRC)."""
    c = 0xFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ 0xD008 if c & 1 else c >> 1
    return c ^ 0xFFFF


@dataclass
class Seg:
    """A run of bytes: covered by the ICRC or not, with per-byte masked and structural bits."""

    data: bytes
    covered: bool
    masked: dict[int, int] = field(default_factory=dict)  # index -> bits forced to one
    structural: dict[int, int] = field(default_factory=dict)  # index -> bits the walker reads


@dataclass
class Built:
    frame: bytes
    link: str
    kind: str
    icrc: int | None
    vcrc: int | None
    start: int  # first covered byte
    end: int  # ICRC offset (end of the covered region)
    masked: dict[int, int]  # absolute offset -> masked bits
    structural: dict[int, int]  # absolute offset -> bits that steer the walker
    vcrc_at: int = -1


def _assemble(segs: list[Seg], link: str, kind: str, pseudo_lrh: bool,
              vcrc: bool = False, trailer: bytes = b"") -> Built:
    frame = bytearray()
    masked: dict[int, int] = {}
    structural: dict[int, int] = {}
    covered = bytearray(b"\xff" * 8 if pseudo_lrh else b"")
    start = -1
    for seg in segs:
        base = len(frame)
        if seg.covered and start < 0:
            start = base
        for i, bits in seg.masked.items():
            masked[base + i] = bits
        for i, bits in seg.structural.items():
            structural[base + i] = bits
        if seg.covered:
            covered += bytes(b | seg.masked.get(i, 0) for i, b in enumerate(seg.data))
        frame += seg.data
    end = len(frame)
    icrc = zlib.crc32(covered)
    frame += icrc.to_bytes(4, "little")
    vcrc_value, vcrc_at = None, -1
    if vcrc:
        vcrc_at = len(frame)
        vcrc_value = crc16_reference(bytes(frame))
        frame += vcrc_value.to_bytes(2, "little")
    frame += trailer
    return Built(bytes(frame), link, kind, icrc, vcrc_value, start, end, masked, structural,
                 vcrc_at)


# ---------------------------------------------------------------- headers


def ethernet(ethertype: int, vlans: list[tuple[int, int]] = (), dst: bytes = b"\x02" * 6,
             src: bytes = b"\x04" * 6) -> Seg:
    data = bytearray(dst + src)
    structural = {}
    for tpid, tci in vlans:
        structural[len(data)] = structural[len(data) + 1] = 0xFF
        data += struct.pack("!HH", tpid, tci)
    structural[len(data)] = structural[len(data) + 1] = 0xFF
    data += struct.pack("!H", ethertype)
    return Seg(bytes(data), False, structural=structural)


def ipv4(payload_len: int, *, tos: int = 0, ident: int = 1, df: bool = True, ttl: int = 64,
         checksum: int = 0, options: bytes = b"", src: bytes = b"\x0a\x00\x00\x01",
         dst: bytes = b"\x0a\x00\x00\x02") -> Seg:
    assert len(options) % 4 == 0 and len(options) <= 40
    ihl = 5 + len(options) // 4
    data = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, ihl * 4 + payload_len, ident,
                       0x4000 if df else 0, ttl, 17, checksum, src, dst) + options
    masked = {1: 0xFF, 8: 0xFF, 10: 0xFF, 11: 0xFF}
    structural = {0: 0xFF, 2: 0xFF, 3: 0xFF, 6: 0x3F, 7: 0xFF, 9: 0xFF}
    return Seg(data, True, masked, structural)


def ipv6(payload_len: int, *, tc: int = 0, flow: int = 0, hlim: int = 64,
         src: bytes = b"\xfe\x80" + b"\x00" * 13 + b"\x01",
         dst: bytes = b"\xfe\x80" + b"\x00" * 13 + b"\x02", nh: int = 17) -> Seg:
    word = 6 << 28 | tc << 20 | flow
    data = struct.pack("!IHBB16s16s", word, payload_len, nh, hlim, src, dst)
    masked = {0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, 7: 0xFF}
    structural = {0: 0xF0, 4: 0xFF, 5: 0xFF, 6: 0xFF}
    return Seg(data, True, masked, structural)


def udp(length: int, *, sport: int = 49152, dport: int = ROCE_PORT, checksum: int = 0) -> Seg:
    data = struct.pack("!HHHH", sport, dport, length, checksum)
    return Seg(data, True, {6: 0xFF, 7: 0xFF}, {2: 0xFF, 3: 0xFF, 4: 0xFF, 5: 0xFF})


def grh(paylen: int, *, tclass: int = 0, flow: int = 0, hoplmt: int = 64, nxt: int = 0x1B,
        sgid: bytes = b"\xfe\x80" + b"\x00" * 14, dgid: bytes = b"\xfe\x80" + b"\x00" * 14) -> Seg:
    word = 6 << 28 | tclass << 20 | flow
    data = struct.pack("!IHBB16s16s", word, paylen, nxt, hoplmt, sgid, dgid)
    masked = {0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, 7: 0xFF}
    structural = {0: 0xF0, 4: 0xFF, 5: 0xFF, 6: 0xFF}
    return Seg(data, True, masked, structural)


def lrh(words: int, lnh: int, *, vl: int = 0, lver: int = 0, sl: int = 0, dlid: int = 1,
        slid: int = 2, rsv: int = 0) -> Seg:
    data = struct.pack("!BBHHH", vl << 4 | lver, sl << 4 | (rsv & 3) << 2 | lnh, dlid,
                       (rsv >> 2 & 0x1F) << 11 | words, slid)
    covered = lnh == 2
    masked = {0: 0xF0} if covered else {}
    return Seg(data, covered, masked, {1: 0x03, 4: 0x07, 5: 0xFF})


def bth(opcode: int = 0x04, *, flags: int = 0, pkey: int = 0xFFFF, byte4: int = 0,
        dqpn: int = 0x11, byte8: int = 0, psn: int = 0) -> bytes:
    return struct.pack("!BBHI I", opcode, flags, pkey, byte4 << 24 | dqpn, byte8 << 24 | psn)


def transport(body: bytes) -> Seg:
    """BTH + ETHs + payload + pad: covered, BTH byte 4 masked."""
    assert len(body) >= 12
    return Seg(body, True, {4: 0xFF})


# ---------------------------------------------------------------- frames


def rocev2(body: bytes, *, v6: bool = False, link: str = "ethernet",
           vlans: list[tuple[int, int]] = (), trailer: bytes = b"", ip: dict | None = None,
           udp_fields: dict | None = None) -> Built:
    udp_len = 8 + len(body) + 4
    if v6:
        segs = [ipv6(udp_len, **(ip or {}))]
        kind, ethertype = "rocev2_ipv6", 0x86DD
    else:
        segs = [ipv4(udp_len, **(ip or {}))]
        kind, ethertype = "rocev2_ipv4", 0x0800
    segs += [udp(udp_len, **(udp_fields or {})), transport(body)]
    if link == "ethernet":
        segs.insert(0, ethernet(ethertype, vlans))
    return _assemble(segs, link, kind, True, trailer=trailer)


def rocev1(body: bytes, *, link: str = "ethernet", vlans: list[tuple[int, int]] = (),
           trailer: bytes = b"", g: dict | None = None) -> Built:
    segs = [grh(len(body) + 4, **(g or {})), transport(body)]
    if link == "ethernet":
        segs.insert(0, ethernet(0x8915, vlans))
    return _assemble(segs, link, "rocev1", True, trailer=trailer)


def native_ib(body: bytes, *, lnh: int = 2, trailer: bytes = b"", lrh_fields: dict | None = None,
              g: dict | None = None) -> Built:
    """LNH 2 (LRH, BTH) or 3 (LRH, GRH, BTH); len(body) must be a multiple of 4."""
    assert len(body) % 4 == 0
    size = 8 + (40 if lnh == 3 else 0) + len(body) + 4
    segs = [lrh(size // 4, lnh, **(lrh_fields or {}))]
    if lnh == 3:
        segs.append(grh(len(body) + 4, **(g or {})))
    segs.append(transport(body))
    return _assemble(segs, "infiniband", "ib_grh" if lnh == 3 else "ib_lrh", lnh == 3,
                     vcrc=True, trailer=trailer)


def native_raw(payload: bytes, *, lnh: int = 0) -> bytes:
    """LNH 0/1 packet: LRH + payload + VCRC (no ICRC)."""
    assert len(payload) % 4 == 0
    frame = lrh(2 + len(payload) // 4, lnh).data + payload
    return frame + crc16_reference(frame).to_bytes(2, "little")


# ---------------------------------------------------------------- strategies

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u24 = st.integers(0, 0xFFFFFF)


@st.composite
def bth_bodies(draw: st.DrawFn, min_payload: int = 0, max_payload: int = 200,
               multiple_of: int = 1) -> bytes:
    head = bth(draw(u8), flags=draw(u8), pkey=draw(u16), byte4=draw(u8), dqpn=draw(u24),
               byte8=draw(u8), psn=draw(u24))
    n = draw(st.integers(min_payload, max_payload)) // multiple_of * multiple_of
    return head + draw(st.binary(min_size=n, max_size=n))


vlan_lists = st.lists(st.tuples(st.sampled_from([0x8100, 0x88A8, 0x9100]), u16), max_size=3)
trailers = st.binary(max_size=8)
ip4_fields = st.fixed_dictionaries({
    "tos": u8, "ident": u16, "df": st.booleans(), "ttl": u8, "checksum": u16,
    "options": st.integers(0, 10).flatmap(lambda n: st.binary(min_size=4 * n, max_size=4 * n)),
    "src": st.binary(min_size=4, max_size=4), "dst": st.binary(min_size=4, max_size=4),
})
ip6_fields = st.fixed_dictionaries({
    "tc": u8, "flow": st.integers(0, 0xFFFFF), "hlim": u8,
    "src": st.binary(min_size=16, max_size=16), "dst": st.binary(min_size=16, max_size=16),
})
udp_fields = st.fixed_dictionaries({"sport": u16, "checksum": u16})
grh_fields = st.fixed_dictionaries({
    "tclass": u8, "flow": st.integers(0, 0xFFFFF), "hoplmt": u8,
    "sgid": st.binary(min_size=16, max_size=16), "dgid": st.binary(min_size=16, max_size=16),
})
lrh_fields = st.fixed_dictionaries({
    "vl": st.integers(0, 15), "lver": st.integers(0, 15), "sl": st.integers(0, 15),
    "dlid": u16, "slid": u16, "rsv": st.integers(0, 127),
})


@st.composite
def frames(draw: st.DrawFn, kind: str, max_payload: int = 200) -> Built:
    """A valid frame of one encapsulation with every field drawn."""
    if kind in ("ib_lrh", "ib_grh"):
        body = draw(bth_bodies(max_payload=max_payload, multiple_of=4))
        return native_ib(body, lnh=3 if kind == "ib_grh" else 2, trailer=draw(trailers),
                         lrh_fields=draw(lrh_fields), g=draw(grh_fields))
    body = draw(bth_bodies(max_payload=max_payload))
    if kind in ("rocev1", "rocev1_grh"):
        link = "grh" if kind == "rocev1_grh" else "ethernet"
        return rocev1(body, link=link, vlans=draw(vlan_lists), trailer=draw(trailers),
                      g=draw(grh_fields))
    v6 = kind.startswith("rocev2_ipv6")
    link = "ip" if kind.endswith("_ip") else "ethernet"
    return rocev2(body, v6=v6, link=link, vlans=draw(vlan_lists), trailer=draw(trailers),
                  ip=draw(ip6_fields if v6 else ip4_fields), udp_fields=draw(udp_fields))


KINDS = ("ib_lrh", "ib_grh", "rocev1", "rocev1_grh", "rocev2_ipv4", "rocev2_ipv6",
         "rocev2_ipv4_ip", "rocev2_ipv6_ip")
