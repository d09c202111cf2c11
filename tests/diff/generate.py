"""Generated packets for the differential test: every opcode in every encapsulation.

Values are drawn from a seeded ``random.Random`` (no hypothesis: the same frames every run),
different in every packet and over each field's whole width, except where a value must be
fixed for the frame to be what it claims to be (see ``PINNED``). Frames are written one file
per link type: Ethernet (RoCEv2 over IPv4/IPv6 and RoCEv1, untagged, 802.1Q and 802.1ad+802.1Q),
raw IP (RoCEv2 without Ethernet), and native InfiniBand, which is written as LINKTYPE_INFINIBAND
(247) and turned into ERF type 21 by ibwire's own converter, because tshark rejects 247.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ibwire.builder import DERIVED_KEYS
from ibwire.builder import build as build_frame
from ibwire.headers import ALL, Header
from ibwire.headers.mad import TRAP_DETAILS
from ibwire.mads import RECORDS, TABLE_METHODS, plan
from ibwire.pcap import PcapWriter, infiniband_to_erf
from ibwire.tables import MadAttribute, mad_attributes, mad_classes, opcodes, opcodes_by_name

SEED = 0x1B_2024
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_INFINIBAND = 247

#: Values every generated frame holds fixed, and why.
PINNED: dict[str, Any] = {
    "bth.tver": 0,          # transport version 0 is the only one defined
    "lrh.lver": 0,          # link version 0 is the only one defined
    "ip.flags.rb": 0,       # the reserved (evil) bit
    "ip.flags.mf": 0,       # no fragments: a fragment is not a RoCEv2 packet
    "ip.frag_offset": 0,
}
#: Headers each encapsulation starts with (before the BTH).
OUTER = {
    "rocev2_ipv4": ("eth", "ip", "udp"),
    "rocev2_ipv6": ("eth", "ipv6", "udp"),
    "rocev1": ("eth", "grh"),
    "ib_local": ("lrh",),
    "ib_global": ("lrh", "grh"),
}
_BY_TITLE = {h.title: h.name for h in ALL.values()}


@dataclass(frozen=True)
class Variant:
    """One way of carrying a transport packet: an encapsulation, a link, VLAN tags."""

    name: str
    encapsulation: str
    link: str
    tags: int = 0

    @property
    def linktype(self) -> int:
        return {"ethernet": LINKTYPE_ETHERNET, "ip": LINKTYPE_RAW,
                "infiniband": LINKTYPE_INFINIBAND}[self.link]


VARIANTS = tuple(
    [Variant(f"{enc}{suffix}", enc, "ethernet", tags)
     for enc in ("rocev2_ipv4", "rocev2_ipv6", "rocev1")
     for tags, suffix in ((0, ""), (1, "+802.1q"), (2, "+802.1ad"))]
    + [Variant("rocev2_ipv4@ip", "rocev2_ipv4", "ip"),
       Variant("rocev2_ipv6@ip", "rocev2_ipv6", "ip"),
       Variant("ib_local", "ib_local", "infiniband"),
       Variant("ib_global", "ib_global", "infiniband")])


@dataclass(frozen=True)
class Generated:
    """A generated frame and how it was made."""

    frame: bytes
    link: str
    variant: str
    opcode: int
    note: str = ""

    @property
    def label(self) -> str:
        name = opcodes()[self.opcode].name if self.opcode in opcodes() else f"0x{self.opcode:02x}"
        return f"{self.variant} {name}" + (f" ({self.note})" if self.note else "")


class Values:
    """Field values from a seeded generator."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)

    def header(self, header: Header) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in header.fields:
            key = header.key(f.name)
            if key in DERIVED_KEYS or header.name == "vlan":
                continue
            value = PINNED.get(key, self.rng.getrandbits(f.bits))
            out[key] = value.to_bytes(f.bits // 8, "big") if f.fmt else value
        if header.name == "eth":  # a unicast source: tshark flags a group source address
            out["eth.src"] = bytes([out["eth.src"][0] & 0xFE]) + out["eth.src"][1:]
        if header.name == "udp":  # RoCEv2 source ports are dynamic (>= 0xC000, like rxe's);
            out["udp.srcport"] |= 0xC000  # a well-known one would win tshark's port lookup
        return out

    def tags(self, n: int) -> dict[str, tuple[int, ...]]:
        draws = [(self.rng.getrandbits(3), self.rng.getrandbits(1), self.rng.getrandbits(12))
                 for _ in range(n)]
        if not n:
            return {}
        return {"vlan.priority": tuple(d[0] for d in draws),
                "vlan.dei": tuple(d[1] for d in draws), "vlan.id": tuple(d[2] for d in draws)}

    def payload(self, size: int) -> bytes:
        """Random bytes that none of tshark's payload heuristics takes (see test_tshark.fate):
        bytes 2-3 not both zero (EtherType encapsulation), first byte not 0xC0-0xCF (EoIB),
        bytes 12-15 not an RPC-over-RDMA message type 0-4."""
        data = bytearray(self.rng.randbytes(size))
        if size > 3 and data[2:4] == b"\0\0":
            data[3] = 1
        if size and data[0] & 0xF0 == 0xC0:
            data[0] ^= 0x80
        if size > 15 and int.from_bytes(data[12:16], "big") < 5:
            data[12] = 0x80
        return bytes(data)

    def fields(self, variant: Variant, opcode: int, extra: Iterable[str] = ()) -> dict[str, Any]:
        op = opcodes().get(opcode)
        names = [*OUTER[variant.encapsulation], "bth", *extra]
        if op is not None:
            names += [_BY_TITLE[h] for h in op.headers]
        out: dict[str, Any] = {}
        for name in names:
            out.update(self.header(ALL[name]))
        if variant.link == "ip":
            out = {k: v for k, v in out.items() if not k.startswith("eth.")}
        out.update(self.tags(variant.tags))
        out["bth.opcode"] = opcode
        if op is not None and op.transport == "UD" and out["bth.destqp"] in (0, 1):
            out["bth.destqp"] |= 2  # a MAD only where a test asks for one
        if "deth.srcqp" in out and out["deth.srcqp"] in (0, 1):
            out["deth.srcqp"] |= 2
        return out


def _payload_size(rng: random.Random, opcode: int) -> int:
    op = opcodes()[opcode]
    if op.name.endswith("ATOMIC_WRITE"):
        return 8  # the 8-byte value
    if not op.payload:
        return 0
    return 16 + rng.randrange(0, 48)  # >= 16: shorter SENDs are a listed tshark divergence


def build(variant: Variant, fields: Mapping[str, Any], payload: bytes) -> bytes:
    return build_frame(variant.encapsulation, fields, payload, link=variant.link)


def every_opcode(values: Values) -> list[Generated]:
    """Every opcode of the specs table in every variant."""
    out = []
    for variant in VARIANTS:
        for opcode in sorted(opcodes()):
            fields = values.fields(variant, opcode)
            payload = values.payload(_payload_size(values.rng, opcode))
            out.append(Generated(build(variant, fields, payload), variant.link, variant.name,
                                 opcode))
    return out


def short_payloads(values: Values) -> list[Generated]:
    """Every opcode that carries a payload, with 1 to 15 payload bytes (RoCEv2/IPv4); not RD,
    whose headers tshark reads 8 bytes late, into a short payload's pad (not modelled)."""
    variant = VARIANTS[0]
    out = []
    for i, opcode in enumerate(op for op in sorted(opcodes()) if opcodes()[op].payload
                               and opcodes()[op].transport != "RD"
                               and not opcodes()[op].name.endswith("ATOMIC_WRITE")):
        size = 1 + i % 15
        fields = values.fields(variant, opcode)
        out.append(Generated(build(variant, fields, values.payload(size)), variant.link,
                             variant.name, opcode, f"{size}-byte payload"))
    return out


def special(values: Values) -> list[Generated]:
    """Frames for single conditions: each PadCnt, empty payloads, AETH syndromes, IPv4
    options, reserved and manufacturer opcodes, MADs (every class ibwire knows, vendor and
    reserved ones, every RMPP type, one from QP1 to another QP), the payloads tshark's
    heuristics take, an RC SEND message in three packets, a raw (LNH=0) IB packet."""
    out = []
    v4, ib_local, ib_global = VARIANTS[0], VARIANTS[-2], VARIANTS[-1]

    def add(variant: Variant, opcode: int | str, payload: bytes = b"", note: str = "",
            extra: Iterable[str] = (), **given: Any) -> None:
        value = opcode if isinstance(opcode, int) else opcodes_by_name()[opcode].value
        fields = {**values.fields(variant, value, extra), **given}
        frame = build_frame(variant.encapsulation, fields, payload, link=variant.link)
        out.append(Generated(frame, variant.link, variant.name, value, note))

    for pad in range(4):
        add(v4, "RC_RDMA_WRITE_MIDDLE", values.payload(32 + pad), f"PadCnt {(-pad) % 4}")
        add(ib_local, "UC_SEND_MIDDLE", values.payload(40 + pad), f"PadCnt {(-pad) % 4}")
    add(v4, "RC_RDMA_WRITE_MIDDLE", b"", "empty payload")
    add(v4, "RC_RDMA_READ_RESPONSE_ONLY", b"", "empty payload")
    for syndrome in (0x1F, 0x00, 0x2E, 0x20, 0x60, 0x61, 0x62, 0x63, 0x64, 0x45, 0x9F):
        add(v4, "RC_ACKNOWLEDGE", note=f"syndrome 0x{syndrome:02x}",
            **{"aeth.syndrome": syndrome})
    add(v4, "RC_RDMA_WRITE_ONLY", values.payload(20), "IPv4 options",
        **{"ip.options": b"\x01\x01\x01\x00" * 2})
    for opcode in (0x15, 0x3F, 0x66, 0xC0, 0xE0, 0xFF):  # reserved and manufacturer opcodes
        add(v4, opcode, values.payload(24), "unknown opcode")
        add(ib_global, opcode, values.payload(24), "unknown opcode")
    for variant in (v4, ib_local):  # MADs to QP0 or QP1, from QP1
        for klass in (*sorted(mad_classes()), 0x09, 0x30, 0x02, 0x50):
            rmpp = mad_classes().get(klass, ("", False))[1]
            extra = ("mad", "rmpp") if rmpp else ("mad",)
            given: dict[str, Any] = {"bth.destqp": klass & 1, "deth.srcqp": 1,
                                     "mad.mgmtclass": klass, "mad.baseversion": 1}
            if klass == 0x81:  # a hop count within the 64-entry path (ibwire.mads)
                given["mad.classspecific"] = values.rng.randrange(64)
            if rmpp:  # the RMPP types IBA defines (0 none, DATA, ACK, STOP, ABORT)
                given["rmpp.rmpptype"] = (klass + variant.tags + len(out)) % 5
            size = 256 - 24 - (12 if rmpp else 0)
            add(variant, "UD_SEND_ONLY", values.payload(size), f"MAD class 0x{klass:02x}",
                extra, **given)
        for rmpptype in range(5):
            add(variant, "UD_SEND_ONLY", values.payload(220), f"SA MAD, RMPP type {rmpptype}",
                ("mad", "rmpp"), **{"bth.destqp": 1, "deth.srcqp": 1, "mad.mgmtclass": 3,
                                    "mad.baseversion": 1, "rmpp.rmpptype": rmpptype})
    add(v4, "UD_SEND_ONLY", values.payload(232), "MAD from QP1 to another QP", ("mad",),
        **{"deth.srcqp": 1, "mad.mgmtclass": 0x04, "mad.baseversion": 1,
           "mad.classversion": 1, "mad.method": 0x81})
    # payloads that tshark's heuristics take (divergences of test_tshark)
    for op in ("RC_SEND_ONLY", "RC_SEND_LAST", "RC_SEND_ONLY_WITH_INVALIDATE",
               "RC_SEND_LAST_WITH_INVALIDATE"):
        for size in (0, 1, 5, 12, 13):
            add(v4, op, values.payload(size), f"{size}-byte payload")
    for msg_type in (1, 3, 4):
        header = values.payload(4) + bytes(4) + values.payload(4) + msg_type.to_bytes(4, "big")
        add(v4, "RC_SEND_ONLY", header + values.payload(20), f"RPC-over-RDMA type {msg_type}")
    add(v4, "RC_SEND_ONLY", bytes(56), "RPC-over-RDMA look-alike, all zero")
    add(ib_global, "UD_SEND_ONLY", b"", "empty UD payload")
    add(v4, "UD_SEND_ONLY_WITH_IMMEDIATE", b"", "empty UD payload")
    add(v4, "UD_SEND_ONLY", b"\xc4" + values.payload(40)[1:], "EoIB look-alike")
    arp = bytes.fromhex("08060000") + bytes.fromhex("00200800140400010000") + values.payload(48)
    add(ib_global, "UD_SEND_ONLY", arp, "IPoIB ARP")
    add(v4, "RC_SEND_ONLY", arp, "IPoIB ARP, connected mode")
    # an RC SEND message in three packets, one flow
    flow = values.fields(v4, 0)
    psn = flow["bth.psn"]
    for i, op in enumerate(("RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST")):
        fields = {**flow, "bth.opcode": opcodes_by_name()[op].value,
                  "bth.psn": (psn + i) % (1 << 24)}
        frame = build_frame("rocev2_ipv4", fields, values.payload(64 if i < 2 else 21))
        out.append(Generated(frame, "ethernet", v4.name, fields["bth.opcode"], "one message"))
    # a raw packet: after the LRH, an RWH (reserved, EtherType 0x88B5 local experimental,
    # which tshark has no dissector for) and data; built as an ACK whose BTH/AETH are the bytes
    raw = build_frame("ib_local", {**values.fields(ib_local, 0x11), "lrh.lnh": 0,
                                    "bth.p_key": 0x88B5}, b"", opcode="RC_ACKNOWLEDGE")
    out.append(Generated(raw, "infiniband", "ib_raw", 0x11, "LNH=0 (raw)"))
    return out


def mad_body(values: Values, row: MadAttribute, method: int | None = None
             ) -> dict[str, Any]:
    """Random values for every field of a MAD of attribute ``row``: its common header (a
    method that may carry it), RMPP header (inactive, or one active DATA segment), class
    header and the attribute's parts as ibwire.mads.plan lays them out."""
    rng = values.rng
    out = {**values.header(ALL["mad"]), "mad.baseversion": 1, "mad.mgmtclass": row.mgmtclass,
           "mad.attributeid": row.attribute}
    out["mad.method"] = method if method is not None else rng.choice((0x01, 0x02, 0x03, 0x81))
    out["mad.classversion"] = rng.choice((1, 2))
    rmpp = None
    if mad_classes()[row.mgmtclass][1]:
        active = rng.getrandbits(1)
        out.update(values.header(ALL["rmpp"]))
        out.update({"rmpp.rmppflags": 0x7 if active else 0, "rmpp.rmpptype": 1 if active else 0,
                    "rmpp.data1": 1 if active else out["rmpp.data1"]})
        if active:
            out["rmpp.data2"] = rng.randrange(20, 221)
        rmpp = {k.split(".")[1]: out[k] for k in ("rmpp.rmppflags", "rmpp.rmpptype",
                                                  "rmpp.data1", "rmpp.data2")}
    if row.mgmtclass == 0x81:
        hops = rng.randrange(64)
        out["mad.classspecific"] = rng.randrange(hops + 2) << 8 | hops
    seen: dict[str, Any] = {}
    if out["mad.method"] in TABLE_METHODS:
        seen["sa.attributeoffset"] = -(-RECORDS[row.record].size // 8) + rng.randrange(3)
    if row.record == "multipathrecord":
        seen["multipathrecord.sgidcount"] = rng.randrange(6)
        seen["multipathrecord.dgidcount"] = rng.randrange(6)
    mad = {k.split(".")[1]: v for k, v in out.items() if k.startswith("mad.")}
    for part in plan(mad, rmpp, seen):
        draws = [values.header(part.header) for _ in range(part.entries or 1)]
        drawn = draws[0] if not part.entries else {k: [d[k] for d in draws] for k in draws[0]}
        if not part.entries:
            drawn.update({k: v for k, v in seen.items() if k in part.header.by_name})
        seen.update(drawn)
        out.update(drawn)
    return out


def mads(values: Values) -> list[Generated]:
    """A MAD of every declared attribute (``specs/mad_attributes.tsv``) in two encapsulations
    with random field values; SA attributes also as a GetTableResp (records as a list), CM
    REQs also with an RDMA-CM IP service ID and IPv4/IPv6 private data."""
    out = []
    v4, ib_local = VARIANTS[0], VARIANTS[-2]
    for row in mad_attributes().values():
        methods: tuple[int | None, ...] = (None, 0x92) if row.mgmtclass == 3 else (None,)
        for variant in (v4, ib_local):
            for method in methods:
                body = mad_body(values, row, method)
                qp = 0 if row.mgmtclass in (0x01, 0x81) else 1
                fields = {**values.fields(variant, 0x64, ()), **body, "bth.destqp": qp,
                          "deth.srcqp": qp}
                frame = build_frame(variant.encapsulation, fields, link=variant.link)
                out.append(Generated(frame, variant.link, variant.name, 0x64,
                                     f"MAD 0x{row.mgmtclass:02x} {row.name}"))
    for ipv in (4, 6, 5):
        row = mad_attributes()[0x07, 0x10]
        body = mad_body(values, row)
        body["cm.req.serviceid"] = 0x0000000001060000 | values.rng.getrandbits(16)
        private = bytearray(body["cm.req.private"])
        private[1] = ipv << 4 | private[1] & 0xF
        body["cm.req.private"] = bytes(private)
        fields = {**values.fields(v4, 0x64, ()), **body, "bth.destqp": 1, "deth.srcqp": 1}
        out.append(Generated(build_frame(v4.encapsulation, fields, link=v4.link), v4.link,
                             v4.name, 0x64, f"MAD CM REQ, RDMA-CM IP version {ipv}"))
    # a Notice of trap 259, whose details tshark cannot decode (divergence 'Notice trap 259
    # details'); random values make it once in 65536
    row = mad_attributes()[0x01, 0x02]
    body = {**mad_body(values, row), "notice.trapnumberdeviceid": 259}
    fields = {**values.fields(v4, 0x64, ()), **body, "bth.destqp": 0, "deth.srcqp": 0}
    out.append(Generated(build_frame(v4.encapsulation, fields, link=v4.link), v4.link,
                         v4.name, 0x64, "MAD 0x01 Notice, trap 259"))
    # a generic Notice of every trap whose details ibwire lays out (but 259, above), and a
    # vendor notice whose DeviceID is a trap number (divergence 'vendor Notice decoded as a
    # trap'): random values seldom make them
    for trap, generic in ((t, 1) for t in sorted(TRAP_DETAILS) if t != 259):
        body = {**mad_body(values, row), "notice.trapnumberdeviceid": trap,
                "notice.isgeneric": generic}
        fields = {**values.fields(v4, 0x64, ()), **body, "bth.destqp": 0, "deth.srcqp": 0}
        out.append(Generated(build_frame(v4.encapsulation, fields, link=v4.link), v4.link,
                             v4.name, 0x64, f"MAD 0x01 Notice, trap {trap}"))
    body = {**mad_body(values, row), "notice.trapnumberdeviceid": 129, "notice.isgeneric": 0}
    fields = {**values.fields(v4, 0x64, ()), **body, "bth.destqp": 0, "deth.srcqp": 0}
    out.append(Generated(build_frame(v4.encapsulation, fields, link=v4.link), v4.link,
                         v4.name, 0x64, "MAD 0x01 vendor Notice, DeviceID 129"))
    # a NodeDescription in UTF-8 past ASCII, which tshark reads as ASCII (divergence 'MAD
    # string read as ASCII'); random bytes are seldom UTF-8
    row = mad_attributes()[0x01, 0x10]
    body = {**mad_body(values, row), "nodedescription.nodestring": "nœud-7 ✓ mlx5_0"}
    fields = {**values.fields(v4, 0x64, ()), **body, "bth.destqp": 0, "deth.srcqp": 0}
    out.append(Generated(build_frame(v4.encapsulation, fields, link=v4.link), v4.link,
                         v4.name, 0x64, "MAD 0x01 NodeDescription, UTF-8 text"))
    return out


@cache
def all_packets(seed: int = SEED) -> tuple[Generated, ...]:
    """Every generated frame, in the order the capture files hold them (per link type)."""
    values = Values(seed)
    return (*every_opcode(values), *short_payloads(values), *special(values), *mads(values))


def write_captures(packets: Iterable[Generated], directory: Path) -> dict[int, Path]:
    """One pcap per link type; native IB also as ERF. Returns linktype -> path (247 and 197)."""
    by_type: dict[int, list[Generated]] = {}
    for p in packets:
        linktype = {"ethernet": LINKTYPE_ETHERNET, "ip": LINKTYPE_RAW,
                    "infiniband": LINKTYPE_INFINIBAND}[p.link]
        by_type.setdefault(linktype, []).append(p)
    paths = {}
    for linktype, group in by_type.items():
        path = directory / f"generated-{linktype}.pcap"
        with PcapWriter(path, linktype, nanoseconds=True) as writer:
            for i, p in enumerate(group):
                writer.write(p.frame, 1_700_000_000_000_000_000 + i * 1000)
        paths[linktype] = path
    if LINKTYPE_INFINIBAND in paths:
        erf = directory / "generated-erf.pcap"
        infiniband_to_erf(paths[LINKTYPE_INFINIBAND], erf, strict=True)
        paths[197] = erf
    return paths
