"""Mixed captures for the benchmarks: every kind of packet ``ibwire show`` meets, in one file.

``write_ethernet(path, n)``: Ethernet (LINKTYPE_ETHERNET), about 80 % InfiniBand transport
packets of every opcode of specs/opcodes.tsv in RoCEv2 over IPv4 and IPv6 and RoCEv1, each
untagged, 802.1Q-tagged and 802.1ad+802.1Q (QinQ); the rest MADs of every management class
(UD to QP0/QP1, RMPP where the class has it), CNPs, reserved and vendor opcodes, IPv4 with
options, and other traffic (TCP, DNS, ARP, ICMPv6); about 1 % with a bad ICRC.

``write_infiniband(path, n)``: native InfiniBand as ERF type 21 records (tshark reads no
LINKTYPE_INFINIBAND, 247): every opcode with and without a GRH, SMP/SA MADs to QP0/QP1, raw
(LNH 0) packets, reserved opcodes; about 1 % with a bad ICRC or VCRC.

Packets are built once per kind with random field values (``ibwire.build``), then repeated
with a fresh PSN and their CRCs fixed (``ibwire.crc.fix``). Deterministic for a seed.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ibwire import build, crc, parse
from ibwire.builder import DERIVED_KEYS
from ibwire.headers import ALL, Header
from ibwire.pcap import PcapWriter, infiniband_to_erf
from ibwire.tables import mad_classes, opcodes

SEED = 17
RESERVED = (0x15, 0x3F, 0x66, 0xC0, 0xE0, 0xFF)
_BY_TITLE = {h.title: h.name for h in ALL.values()}
_OUTER = {"rocev2_ipv4": ("eth", "ip", "udp"), "rocev2_ipv6": ("eth", "ipv6", "udp"),
          "rocev1": ("eth", "grh"), "ib_local": ("lrh",), "ib_global": ("lrh", "grh")}
_PINNED = {"bth.tver": 0, "lrh.lver": 0, "ip.flags.rb": 0, "ip.flags.mf": 0,
           "ip.frag_offset": 0}
Kind = tuple[bytes, str, int]
"""A template frame, its link, and where its PSN is (-1: none to vary)."""


class _Values:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.hosts = [rng.randbytes(16) for _ in range(8)]  # a few hosts, as on a fabric

    def header(self, header: Header) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in header.fields:
            key = header.key(f.name)
            if key in DERIVED_KEYS or header.name == "vlan":
                continue
            if f.fmt in ("ipv4", "ipv6", "mac"):
                value: Any = self.rng.choice(self.hosts)[:f.bits // 8]
            else:
                value = _PINNED.get(key, self.rng.getrandbits(f.bits))
                if f.fmt:
                    value = value.to_bytes(f.bits // 8, "big")
            out[key] = value
        if header.name == "eth":
            out["eth.src"] = bytes([out["eth.src"][0] & 0xFE]) + out["eth.src"][1:]
        if header.name == "udp":
            out["udp.srcport"] |= 0xC000
        return out

    def fields(self, encapsulation: str, opcode: int, tags: int, extra: tuple[str, ...] = ()
               ) -> dict[str, Any]:
        op = opcodes().get(opcode)
        names = [*_OUTER[encapsulation], "bth", *extra]
        if op is not None:
            names += [_BY_TITLE[h] for h in op.headers]
        out: dict[str, Any] = {}
        for name in names:
            out.update(self.header(ALL[name]))
        if tags:
            out["vlan.id"] = tuple(self.rng.getrandbits(12) for _ in range(tags))
            out["vlan.priority"] = tuple(self.rng.getrandbits(3) for _ in range(tags))
        out["bth.opcode"] = opcode
        if op is not None and op.transport == "UD":
            out["bth.destqp"] |= 2  # a MAD only where asked for
            out["deth.srcqp"] |= 2
        return out

    def payload(self, opcode: int) -> bytes:
        op = opcodes().get(opcode)
        if op is not None and op.name.endswith("ATOMIC_WRITE"):
            return self.rng.randbytes(8)
        if op is not None and not op.payload:
            return b""
        return self.rng.randbytes(self.rng.choice((0, 16, 40, 64, 128, 256)))


def _psn_at(frame: bytes, link: str) -> int:
    packet = parse(frame, link)
    bth = packet.header("bth")
    return -1 if bth is None else bth.offset + 9


def _roce(v: _Values, encapsulation: str, opcode: int, tags: int = 0, link: str = "ethernet",
          extra: tuple[str, ...] = (), payload: bytes | None = None, **given: Any) -> Kind:
    fields = {**v.fields(encapsulation, opcode, tags, extra), **given}
    frame = build(encapsulation, fields, v.payload(opcode) if payload is None else payload,
                  link=link)
    return frame, link, _psn_at(frame, link)


def _mads(v: _Values, encapsulation: str, link: str) -> list[Kind]:
    out = []
    for klass in (*sorted(mad_classes()), 0x09, 0x30):
        rmpp = mad_classes().get(klass, ("", False))[1]
        extra = ("mad", "rmpp") if rmpp else ("mad",)
        given = {"bth.destqp": klass & 1, "deth.srcqp": 1, "mad.mgmtclass": klass,
                 "mad.baseversion": 1}
        if rmpp:
            given["rmpp.rmpptype"] = v.rng.randrange(5)
        if klass == 0x81:  # directed route: a hop count and pointer within the 64-hop path
            hops = v.rng.randrange(64)
            given["mad.classspecific"] = v.rng.randrange(hops + 2) << 8 | hops
        payload = v.rng.randbytes(256 - 24 - (12 if rmpp else 0))
        out.append(_roce(v, encapsulation, 0x64, 0, link, extra, payload, **given))
    return out


def _other(v: _Values) -> list[Kind]:
    """Ethernet frames that carry no InfiniBand: TCP, DNS over UDP, ARP, ICMPv6."""
    mac = v.rng.choice(v.hosts)[:6] + v.rng.choice(v.hosts)[:6]
    ipv4 = bytes.fromhex("4500") + struct.pack(">H", 20 + 20 + 64) + bytes(4) + b"\x40\x06" \
        + bytes(2) + v.rng.choice(v.hosts)[:4] + v.rng.choice(v.hosts)[:4]
    tcp = struct.pack(">HHIIBBHHH", 22, 51000, 1, 2, 0x50, 0x18, 512, 0, 0) + v.rng.randbytes(64)
    udp_ip = bytearray(ipv4)
    udp_ip[2:4] = struct.pack(">H", 20 + 8 + 40)
    udp_ip[9] = 17
    dns = struct.pack(">HHHH", 53000, 53, 48, 0) + v.rng.randbytes(40)
    arp = bytes.fromhex("0001080006040001") + mac[:6] + bytes(4) + bytes(6) + bytes(4)
    icmp6 = bytes.fromhex("6000000000203aff") + v.rng.choice(v.hosts) + v.rng.choice(v.hosts) \
        + b"\x80\x00" + v.rng.randbytes(30)
    return [(mac + b"\x08\x00" + ipv4 + tcp, "ethernet", -1),
            (mac + b"\x08\x00" + bytes(udp_ip) + dns, "ethernet", -1),
            (mac + b"\x08\x06" + arp + bytes(18), "ethernet", -1),
            (mac + b"\x86\xdd" + icmp6, "ethernet", -1)]


def ethernet_kinds(rng: random.Random) -> list[tuple[float, list[Kind]]]:
    """(share of the packets, the kinds drawn from uniformly) for the Ethernet capture."""
    v = _Values(rng)
    known = sorted(opcodes())
    transport = [_roce(v, enc, op, tags) for enc in ("rocev2_ipv4", "rocev2_ipv6", "rocev1")
                 for tags in (0, 1, 2) for op in known for _ in range(2)]
    reserved = [_roce(v, enc, op) for enc in ("rocev2_ipv4", "rocev2_ipv6") for op in RESERVED]
    mads = _mads(v, "rocev2_ipv4", "ethernet") + _mads(v, "rocev2_ipv6", "ethernet")
    cnps = [_roce(v, "rocev2_ipv4", 0x81, tags) for tags in (0, 1) for _ in range(4)]
    options = [_roce(v, "rocev2_ipv4", op, 0, "ethernet", (), None,
                     **{"ip.options": b"\x01\x01\x01\x00" * rng.randrange(1, 4)})
               for op in (0x0A, 0x11, 0x04, 0x0C, 0x10)]
    others = [k for _ in range(8) for k in _other(v)]
    return [(0.80, transport), (0.03, reserved), (0.05, mads), (0.02, cnps), (0.02, options),
            (0.08, others)]


def infiniband_kinds(rng: random.Random) -> list[tuple[float, list[Kind]]]:
    """(share, kinds) for the native InfiniBand capture."""
    v = _Values(rng)
    known = sorted(opcodes())
    transport = [_roce(v, enc, op, 0, "infiniband") for enc in ("ib_local", "ib_global")
                 for op in known if opcodes()[op].transport != "CNP" for _ in range(2)]
    reserved = [_roce(v, enc, op, 0, "infiniband") for enc in ("ib_local", "ib_global")
                for op in RESERVED]
    mads = _mads(v, "ib_local", "infiniband") + _mads(v, "ib_global", "infiniband")
    raw = []
    for _ in range(4):
        frame = build("ib_local", {**v.fields("ib_local", 0x11, 0), "lrh.lnh": 0,
                                   "bth.p_key": 0x88B5}, b"", opcode="RC_ACKNOWLEDGE")
        raw.append((frame, "infiniband", -1))
    return [(0.85, transport), (0.03, reserved), (0.10, mads), (0.02, raw)]


def _write(path: Path, count: int, linktype: int, kinds: list[tuple[float, list[Kind]]],
           rng: random.Random) -> None:
    weights = [share for share, _ in kinds]
    with PcapWriter(path, linktype, nanoseconds=True) as writer:
        for i in range(count):
            group = rng.choices(kinds, weights)[0][1]
            template, link, psn_at = rng.choice(group)
            frame = bytearray(template)
            if psn_at >= 0:
                frame[psn_at:psn_at + 3] = (i & 0xFFFFFF).to_bytes(3, "big")
            if psn_at >= 0 or link == "infiniband":  # raw IB packets have a VCRC too
                crc.fix(frame, link)
                if rng.random() < 0.01:  # a bad ICRC (or VCRC on native IB)
                    frame[-1 if link == "ethernet" else -3] ^= 0x5A
            writer.write(bytes(frame), 1_700_000_000_000_000_000 + i * 1_000)


def write_ethernet(path: Path, count: int, seed: int = SEED) -> Path:
    rng = random.Random(seed)
    _write(path, count, 1, ethernet_kinds(rng), rng)
    return path


def write_infiniband(path: Path, count: int, seed: int = SEED) -> Path:
    """Native IB as ERF (through a LINKTYPE_INFINIBAND pcap next to it, then removed)."""
    rng = random.Random(seed)
    raw = path.with_suffix(".247.pcap")
    _write(raw, count, 247, infiniband_kinds(rng), rng)
    infiniband_to_erf(raw, path, strict=True)
    raw.unlink()
    return path


WRITERS: dict[str, Callable[[Path, int], Path]] = {"ethernet": write_ethernet,
                                                    "infiniband": write_infiniband}
