"""Shared by the scapy tests: layer names, values, and scapy packets from ibwire's flat keys."""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet, Raw

import ibwire
from ibwire.builder import DERIVED_KEYS
from ibwire.headers import ALL, Header
from ibwire.mads import DECODED
from ibwire.scapy import BTH, ERF, LAYERS, LRH
from ibwire.scapy.fields import scapy_name
from ibwire.tables import mad_classes, opcodes

#: scapy layer -> the key prefix ibwire.parse gives the same header.
HEADER_NAMES: dict[type[Packet], str] = {
    Ether: "eth", Dot1Q: "vlan", Dot1AD: "vlan", IP: "ip", IPv6: "ipv6", UDP: "udp",
    **{layer: name for name, layer in LAYERS.items()},
}
#: Frame kinds built by the tests: encapsulation, link, VLAN tags in front.
KINDS = (
    ("rocev2_ipv4", "ethernet", 0), ("rocev2_ipv4", "ip", 0), ("rocev2_ipv4", "ethernet", 1),
    ("rocev2_ipv6", "ethernet", 0), ("rocev2_ipv6", "ethernet", 2), ("rocev1", "ethernet", 0),
    ("rocev1", "ethernet", 1), ("ib_local", "infiniband", 0), ("ib_global", "infiniband", 0),
)
_PINNED = {"bth.tver": 0, "lrh.lver": 0}


def start_layer(packet: Packet) -> tuple[Packet, str]:
    """The layer a frame starts at for ibwire.parse, and the link name (behind an ERF record)."""
    if isinstance(packet, ERF):
        packet = packet.payload
    if isinstance(packet, LRH):
        return packet, "infiniband"
    if isinstance(packet, (IP, IPv6)):
        return packet, "ip"
    return packet, "ethernet"


def header_chain(start: Packet) -> list[tuple[str, Packet]]:
    """(ibwire header name, layer) from ``start`` on, Raw and Padding left out."""
    chain, layer = [], start
    while not isinstance(layer, NoPayload):
        if type(layer) in HEADER_NAMES:
            chain.append((HEADER_NAMES[type(layer)], layer))
        layer = layer.payload
    return chain


def header_names(start: Packet) -> list[str]:
    return [name for name, _ in header_chain(start)]


def assert_like_parse(start: Packet, reference: ibwire.Packet) -> None:
    """Same headers as ibwire.parse, and the same values in every ibwire layer. The scapy
    layers stop at the MAD (and RMPP) header: a MAD body ibwire decodes (ibwire.mads) is
    scapy's payload."""
    chain = header_chain(start)
    headers = [h for h in reference.headers if not h.full_keys]
    assert [name for name, _ in chain] == [h.name for h in headers]
    for (name, layer), found in zip(chain, headers, strict=True):
        if name in LAYERS:
            assert layer_values(layer) == canonical_values(layer.header, dict(found.values))


def canonical(value: Any, fmt: str | None) -> Any:
    """A field value in one spelling: IPv6 text differs between inet_ntop and ipaddress."""
    if fmt == "ipv6":
        return ipaddress.IPv6Address(value).packed
    if fmt == "ipv4":
        return ipaddress.IPv4Address(value).packed
    if fmt == "mac":
        return value.lower()
    return value


def canonical_values(header: Header, values: dict[str, Any]) -> dict[str, Any]:
    """Values keyed by Construct field names (from Header.parse) in canonical spelling."""
    return {f.name: canonical(values[f.name], f.fmt) for f in header.fields}


def layer_values(layer: Packet) -> dict[str, Any]:
    """The values of an ibwire layer under Construct field names, in canonical spelling."""
    header: Header = layer.header
    return {f.name: canonical(layer.getfieldval(scapy_name(f.name)), f.fmt)
            for f in header.fields}


# --- values and packets for every opcode --------------------------------------------------


def _header_values(header: Header, rng: random.Random, given: dict[str, Any]) -> None:
    word = rng.getrandbits(8 * header.size).to_bytes(header.size, "big")
    for name, value in header.parse(word).items():
        key = header.key(name)
        if key not in DERIVED_KEYS:
            given[key] = _PINNED.get(key, value)


def frame_values(encapsulation: str, link: str, opcode: int, seed: int,
                 tags: int = 0) -> tuple[dict[str, Any], bytes]:
    """Random values (flat ibwire keys) and a payload for one frame of ``opcode``."""
    rng = random.Random(seed)
    op = opcodes()[opcode]
    names = {"rocev2_ipv4": ("ip", "udp"), "rocev2_ipv6": ("ipv6", "udp"), "rocev1": ("grh",),
             "ib_local": ("lrh",), "ib_global": ("lrh", "grh")}[encapsulation]
    given: dict[str, Any] = {}
    for name in (*(("eth",) if link == "ethernet" else ()), *names, "bth"):
        _header_values(ALL[name], rng, given)
    for title in op.headers:
        _header_values(next(h for h in ALL.values() if h.title == title), rng, given)
    for key in ("ip.flags.mf", "ip.frag_offset", "ip.flags.rb"):
        given.pop(key, None)
    given["bth.opcode"] = opcode
    if op.transport == "UD" and rng.random() < 0.5:
        given["bth.destqp"] = rng.choice((0, 1))
        _header_values(ALL["mad"], rng, given)
        # the scapy layers stop at the MAD (and RMPP) header: a class whose body ibwire
        # decodes (ibwire.mads) would need a whole 256-byte MAD of a known attribute
        if rng.random() < 0.5 or given["mad.mgmtclass"] in DECODED:
            given["mad.mgmtclass"] = rng.choice(sorted(set(mad_classes()) - DECODED))
        if mad_classes().get(given["mad.mgmtclass"], ("", False))[1]:
            _header_values(ALL["rmpp"], rng, given)
    if tags:
        for name in ("priority", "dei", "id"):
            given[f"vlan.{name}"] = tuple(rng.getrandbits(ALL["vlan"].by_name[name].bits)
                                          for _ in range(tags))
    size = 8 if op.name.endswith("ATOMIC_WRITE") else rng.randrange(0, 70)
    payload = rng.randbytes(size) if op.payload else b""
    return given, payload


def _of(prefix: str, given: dict[str, Any]) -> dict[str, Any]:
    header = ALL[prefix]
    out = {}
    for f in header.fields:
        if header.key(f.name) in given:
            out[scapy_name(f.name)] = given[header.key(f.name)]
    return out


def scapy_packet(encapsulation: str, given: dict[str, Any], payload: bytes,
                 link: str) -> Packet:
    """The scapy packet of ``given`` flat keys, built with ibwire's layers over scapy's."""
    op = opcodes()[given["bth.opcode"]]
    transport: Packet = BTH(**_of("bth", given))
    for title in op.headers:
        layer = LAYERS[next(h.name for h in ALL.values() if h.title == title)]
        transport = transport / layer(**_of(layer.header.name, given))
    if "mad.mgmtclass" in given:
        transport = transport / LAYERS["mad"](**_of("mad", given))
    if "rmpp.rmpptype" in given:
        transport = transport / LAYERS["rmpp"](**_of("rmpp", given))
    if payload:
        transport = transport / Raw(payload)
    if encapsulation.startswith("ib_"):
        lrh = LRH(**_of("lrh", given))
        if encapsulation == "ib_global":
            return lrh / LAYERS["grh"](**_of("grh", given)) / transport
        return lrh / transport
    if encapsulation == "rocev1":
        inner = LAYERS["grh"](**_of("grh", given)) / transport
    else:
        inner = _ip(encapsulation, given) / UDP(sport=given["udp.srcport"],
                                                 chksum=given["udp.checksum"]) / transport
    if link == "ip":
        return inner
    return _ethernet(given) / inner


def _ip(encapsulation: str, g: dict[str, Any]) -> Packet:
    if encapsulation == "rocev2_ipv6":
        return IPv6(tc=g["ipv6.tclass"], fl=g["ipv6.flow"], hlim=g["ipv6.hlim"],
                    src=g["ipv6.src"], dst=g["ipv6.dst"])
    return IP(tos=g["ip.dsfield.dscp"] << 2 | g["ip.dsfield.ecn"], id=g["ip.id"],
              flags=g.get("ip.flags.df", 0) << 1, ttl=g["ip.ttl"], src=g["ip.src"],
              dst=g["ip.dst"])


def _ethernet(g: dict[str, Any]) -> Packet:
    frame: Packet = Ether(dst=g["eth.dst"], src=g["eth.src"])
    tags = g.get("vlan.id", ())
    for i in range(len(tags)):
        tag = Dot1AD if len(tags) > 1 and i == 0 else Dot1Q
        frame = frame / tag(prio=g["vlan.priority"][i], dei=g["vlan.dei"][i], vlan=tags[i])
    return frame
