"""Packets to inject into a live connection, described against it rather than as bytes.

A :class:`Shot` says what to send relative to the connection it aims at: into which end
(``to``: 0 or 1, the ends ordered by address), as what (``role``: a ``request`` into the
end's responder, a ``response`` into its requester, a ``cm`` MAD into its QP1), the header
values (``fields``, with :class:`Ref` values such as "the PSN this QP expects next, plus
2**23"), the payload, and the byte edits a mutation made afterwards (XOR masks, a cut). So a
shot renders (:func:`render`) into a frame for *any* live connection of the same scenario:
the one it was drawn against, or the one a freshly booted guest pair sets up when a finding
is replayed (QPNs, PSNs and CM communication IDs differ from boot to boot).

The strategies (:func:`shots`) are hypothesis strategies built on :mod:`ibwire.strategies`:
header values anywhere in their widths, field-aware lies (PSNs at the window's edges,
opcodes out of sequence, RETH/AtomicETH values, lengths, P_Key/Q_Key, CM REQ/REP/RTU/DREQ
... attribute fields from :func:`~ibwire.strategies.mad_fields`, with the live
communication IDs or others) and, on top, :func:`~ibwire.strategies.mutated` (bit flips,
truncation, lying lengths, placed header breaks). CRCs are computed again where the length
fields place them (:func:`ibwire.crc.fix`), so the receiver parses on.
"""

from __future__ import annotations

import base64
import json
import socket
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from ibwire.builder import build, ipv4_checksum
from ibwire.errors import IbwireError
from ibwire.fuzz.generate import reseal
from ibwire.headers import ALL
from ibwire.livefuzz.state import PSN_MOD, QpState
from ibwire.strategies import GeneratedPacket, header_values, mad_fields, mutated
from ibwire.tables import mad_attributes, opcodes
from ibwire.transport.cm import COMM_IDS, REQ

ROLES = ("request", "response", "cm")
#: Ethernet, IPv4, UDP and BTH: a frame cut shorter never reaches the transport.
MIN_FRAME = 14 + 20 + 8 + 12
ROCE_PORT = 4791
UD_SEND_ONLY = 0x64
GSI_QKEY = 0x80010000
#: CM class version and MAD base version Linux's CM speaks (cm.c IB_CM_CLASS_VERSION,
#: ib_mad.h IB_MGMT_BASE_VERSION); method Send (0x03).
CM_BASE, CM_CLASS_VERSION, CM_SEND = 1, 2, 0x03
RC_REQUESTS = tuple(v for v, o in sorted(opcodes().items())
                    if o.transport == "RC" and not 0x0D <= v <= 0x12)
RC_RESPONSES = tuple(range(0x0D, 0x13))
CM_ATTRIBUTES = tuple(a for a in mad_attributes().values() if a.mgmtclass == 0x07)
#: PSN offsets at the edges of the 24-bit window (IBA 9.7.2: valid is up to 2**23 ahead).
PSN_EDGES = (0, 0, 0, 1, -1, 2, 2**23 - 1, 2**23, 2**23 + 1, -(2**23), PSN_MOD - 1)
U32_EDGES = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
LENGTH_EDGES = (0, 1, 1023, 1024, 1025, 4096, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
U64_EDGES = (0, 1, 0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFF000)


@dataclass(frozen=True)
class Ref:
    """A value of the live connection: ``name`` of the receiving end (``qpn``, ``recv_psn``,
    ``send_psn``, ``acked_psn``, ``msn``, ``comm_id``, ``service_id``) or of the sender (``peer_qpn``,
    ``peer_comm_id``), plus ``add`` (24-bit wrap for PSNs and MSNs)."""

    name: str
    add: int = 0

    def resolve(self, to: QpState, frm: QpState) -> int:
        if self.name.startswith("peer_"):
            value = getattr(frm, self.name[5:])
        else:
            value = getattr(to, self.name)
        value = int(value or 0) + self.add
        if self.name in ("recv_psn", "send_psn", "acked_psn", "msn"):
            value %= PSN_MOD
        return value


@dataclass(frozen=True)
class Shot:
    role: str
    to: int
    kind: str
    """What was made wrong, for the figures: ``psn``, ``opcode``, ``reth``, ``cm.REQ`` ...,
    and a ``mutated()`` kind (``bitflip bth``) after a ``+``."""
    fields: dict[str, Any]
    payload: bytes = b""
    edits: tuple[tuple[int, int], ...] = ()
    """(byte offset, XOR mask) applied to the rendered frame."""
    cut: int | None = None
    tail: bytes = b""
    reseal: bool = True
    template: bytes = b""
    """A frame seen in flight (:mod:`ibwire.livefuzz.retarget`): rendered by putting the
    connection's addresses, QPN and PSN into these bytes instead of building from
    ``fields`` (which then only hold ``bth.psn`` as a :class:`Ref` and what the figures
    count)."""

    def as_json(self) -> dict[str, Any]:
        def value(v: Any) -> Any:
            if isinstance(v, Ref):
                return {"ref": v.name, "add": v.add}
            if isinstance(v, bytes):
                return {"b64": base64.b64encode(v).decode()}
            if isinstance(v, tuple):
                return {"tuple": [value(x) for x in v]}
            return v
        return {"role": self.role, "to": self.to, "kind": self.kind,
                "fields": {k: value(v) for k, v in self.fields.items()},
                "payload": self.payload.hex(), "edits": [list(e) for e in self.edits],
                "cut": self.cut, "tail": self.tail.hex(), "reseal": self.reseal,
                "template": self.template.hex()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Shot:
        def value(v: Any) -> Any:
            if isinstance(v, dict) and "ref" in v:
                return Ref(v["ref"], v["add"])
            if isinstance(v, dict) and "b64" in v:
                return base64.b64decode(v["b64"])
            if isinstance(v, dict) and "tuple" in v:
                return tuple(value(x) for x in v["tuple"])
            return v
        return cls(data["role"], data["to"], data["kind"],
                   {k: value(v) for k, v in data["fields"].items()},
                   bytes.fromhex(data["payload"]), tuple(tuple(e) for e in data["edits"]),
                   data["cut"], bytes.fromhex(data.get("tail", "")), data["reseal"],
                   bytes.fromhex(data.get("template", "")))

    def dumps(self) -> str:
        return json.dumps(self.as_json(), sort_keys=True)


Connection = tuple[QpState, QpState]


def base_fields(shot_role: str, to: QpState, frm: QpState, source_mac: str) -> dict[str, Any]:
    """Addresses, ports and QPs of a packet from ``frm`` to ``to`` (before the shot's own)."""
    fields: dict[str, Any] = {
        "eth.src": source_mac, "eth.dst": to.mac or "ff:ff:ff:ff:ff:ff",
        "ip.src": frm.address, "ip.dst": to.address, "ip.ttl": 64,
        "udp.srcport": frm.udp_sport or 49152, "bth.p_key": to.pkey,
    }
    if shot_role == "cm":
        fields.update({"bth.opcode": UD_SEND_ONLY, "bth.destqp": 1, "deth.srcqp": 1,
                       "deth.q_key": GSI_QKEY, "bth.psn": 0})
    else:
        fields["bth.destqp"] = to.qpn
    return fields


def resolved(shot: Shot, conn: Connection, source_mac: str) -> dict[str, Any]:
    to, frm = conn[shot.to], conn[1 - shot.to]
    fields = base_fields(shot.role, to, frm, source_mac)
    for key, v in shot.fields.items():
        fields[key] = v.resolve(to, frm) if isinstance(v, Ref) else v
    return fields


#: Where a template's addresses, QPN and PSN sit: RoCEv2 over IPv4, no VLAN tag (the rig's).
ETH_DST, ETH_SRC, IP, IP_SRC, IP_DST = 0, 6, 14, 26, 30


def templated(frame: bytes) -> bool:
    """Whether ``frame`` can be a shot's template: RoCEv2 over untagged IPv4 with its BTH."""
    if len(frame) < MIN_FRAME or frame[12:14] != b"\x08\x00" or frame[IP] >> 4 != 4:
        return False
    udp = IP + (frame[IP] & 0x0F) * 4
    return frame[IP + 9] == 17 and len(frame) >= udp + 8 + 12 and \
        int.from_bytes(frame[udp + 2:udp + 4], "big") == ROCE_PORT


def retargeted(shot: Shot, conn: Connection, source_mac: str) -> bytearray:
    """``shot.template`` with ``conn``'s MACs, addresses, QPN (but for CM: QP1) and the PSN
    its ``bth.psn`` Ref resolves to; the IPv4 header checksum computed again."""
    to, frm = conn[shot.to], conn[1 - shot.to]
    frame = bytearray(shot.template)
    frame[ETH_DST:ETH_DST + 6] = bytes.fromhex((to.mac or "ff:" * 5 + "ff").replace(":", ""))
    frame[ETH_SRC:ETH_SRC + 6] = bytes.fromhex((frm.mac or source_mac).replace(":", ""))
    frame[IP_SRC:IP_SRC + 4] = socket.inet_aton(frm.address)
    frame[IP_DST:IP_DST + 4] = socket.inet_aton(to.address)
    ihl = (frame[IP] & 0x0F) * 4
    frame[IP + 10:IP + 12] = b"\0\0"
    frame[IP + 10:IP + 12] = ipv4_checksum(bytes(frame[IP:IP + ihl])).to_bytes(2, "big")
    bth = IP + ihl + 8
    if shot.role != "cm":
        frame[bth + 5:bth + 8] = int(to.qpn).to_bytes(3, "big")
    psn = shot.fields.get("bth.psn")
    if isinstance(psn, Ref):
        frame[bth + 9:bth + 12] = psn.resolve(to, frm).to_bytes(3, "big")
    return frame


def render(shot: Shot, conn: Connection, source_mac: str) -> bytes:
    """The frame ``shot`` makes against ``conn`` (ICRC computed again after the edits)."""
    if shot.template:
        frame = retargeted(shot, conn, source_mac)
    else:
        frame = bytearray(build("rocev2_ipv4", resolved(shot, conn, source_mac),
                                shot.payload))
    for offset, mask in shot.edits:
        if offset < len(frame):
            frame[offset] ^= mask
    if shot.cut is not None:
        del frame[shot.cut:]
    frame += shot.tail
    return reseal(frame, "ethernet") if shot.reseal else bytes(frame)


# -- strategies ---------------------------------------------------------------------------


def _keyed(name: str) -> st.SearchStrategy[dict[str, Any]]:
    header = ALL[name]
    return header_values(header).map(lambda v: {header.key(k): x for k, x in v.items()})


def _edge_or_any(edges: tuple[int, ...], bits: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(edges), st.integers(0, (1 << bits) - 1))


_PAYLOAD = st.one_of(st.binary(max_size=64), st.binary(max_size=64),
                     st.integers(1000, 1100).map(lambda n: bytes(n)), st.binary(max_size=300))


@st.composite
def request_shots(draw: st.DrawFn, to: int) -> Shot:
    """An RC request into end ``to``'s responder: opcode in or out of sequence, PSN at the
    window's edges, RETH/AtomicETH values at their edges, payload around the path MTU."""
    opcode = draw(st.sampled_from(RC_REQUESTS))
    op = opcodes()[opcode]
    lies = ["opcode"]
    fields: dict[str, Any] = {"bth.opcode": opcode}
    fields["bth.psn"] = Ref("recv_psn", draw(st.one_of(st.sampled_from(PSN_EDGES),
                                                       st.integers(0, PSN_MOD - 1))))
    if fields["bth.psn"].add:
        lies.append("psn")
    for title in op.headers:
        name = next(h.name for h in ALL.values() if h.title == title)
        fields.update(draw(_keyed(name)))
        lies.append(name)
    if "reth.dmalen" in fields:
        fields["reth.dmalen"] = draw(_edge_or_any(LENGTH_EDGES, 32))
        fields["reth.va"] = draw(_edge_or_any(U64_EDGES, 64))
        fields["reth.r_key"] = draw(_edge_or_any(U32_EDGES, 32))
    if "atomiceth.va" in fields:
        fields["atomiceth.va"] = draw(_edge_or_any(U64_EDGES + (7, 4), 64))
    for key in ("bth.se", "bth.m", "bth.a"):
        fields[key] = draw(st.integers(0, 1))
    if draw(st.integers(0, 7)) == 0:
        fields["bth.p_key"] = draw(_edge_or_any((0, 0x7FFF, 0x8000, 0xFFFE), 16))
        lies.append("pkey")
    if draw(st.integers(0, 7)) == 0:
        fields["bth.padcnt"] = draw(st.integers(0, 3))
        lies.append("padcnt")
    payload = draw(_PAYLOAD) if op.payload else b""
    return Shot("request", to, " ".join(lies), fields, payload)


@st.composite
def response_shots(draw: st.DrawFn, to: int) -> Shot:
    """An RC response into end ``to``'s requester: ACK/NAK/RNR syndromes, MSNs, PSNs at the
    edges of what it has outstanding, READ response data, atomic results."""
    opcode = draw(st.sampled_from(RC_RESPONSES))
    op = opcodes()[opcode]
    fields: dict[str, Any] = {"bth.opcode": opcode,
                              "bth.psn": Ref("send_psn", -1 + draw(st.sampled_from(
                                  PSN_EDGES) | st.integers(0, PSN_MOD - 1)))}
    lies = ["response"]
    if "AETH" in op.headers:
        fields["aeth.syndrome"] = draw(st.sampled_from(
            (0x1F, 0x00, 0x20, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x9F)) | st.integers(0, 255))
        fields["aeth.msn"] = draw(st.just(Ref("msn", 1)) | st.integers(0, PSN_MOD - 1))
        lies.append("aeth")
    if "AtomicAckETH" in op.headers:
        fields.update(draw(_keyed("atomicacketh")))
    payload = draw(_PAYLOAD) if op.payload else b""
    return Shot("response", to, " ".join(lies), fields, payload)


@st.composite
def cm_shots(draw: st.DrawFn, to: int) -> Shot:
    """A CM MAD into end ``to``'s QP1: any CM attribute with any field values
    (:func:`~ibwire.strategies.mad_fields`), mostly naming the live connection (its
    communication IDs, QPNs, service ID), now and then with a lying Q_Key, source QP, MAD
    base or class version or method."""
    attribute = draw(st.sampled_from(CM_ATTRIBUTES))
    name = attribute.name
    fields = dict(draw(mad_fields(attribute)))
    fields.update({"mad.baseversion": CM_BASE, "mad.classversion": CM_CLASS_VERSION,
                   "mad.method": CM_SEND, "mad.status": 0})
    lies = [f"cm.{name}"]
    if attribute.attribute in COMM_IDS and draw(st.integers(0, 3)):
        _, local, remote = COMM_IDS[attribute.attribute]
        fields[local] = Ref("peer_comm_id")
        if remote:
            fields[remote] = Ref("comm_id")
        lies.append("live-ids")
    if attribute.attribute == REQ and draw(st.booleans()):
        fields["cm.req.serviceid"] = Ref("service_id")
        fields["cm.req.localqpn"] = Ref("peer_qpn", draw(st.sampled_from((0, 1, 2))))
    if draw(st.integers(0, 7)) == 0:
        key = draw(st.sampled_from(("deth.q_key", "deth.srcqp", "mad.baseversion",
                                    "mad.classversion", "mad.method", "mad.status")))
        bits = {"deth.q_key": 32, "deth.srcqp": 24, "mad.status": 16}.get(key, 8)
        fields[key] = draw(st.integers(0, (1 << bits) - 1))
        lies.append(key)
    return Shot("cm", to, " ".join(lies), fields)


def _mutate(draw: st.DrawFn, shot: Shot, conn: Connection, source_mac: str) -> Shot:
    """``shot`` with one of :func:`~ibwire.strategies.mutated`'s breaks on top (as XOR edits
    and a cut, so that it renders against another connection too)."""
    fields = resolved(shot, conn, source_mac)
    try:
        frame = build("rocev2_ipv4", fields, shot.payload)
    except IbwireError:
        return shot
    good = GeneratedPacket(frame, "ethernet", "rocev2_ipv4", int(fields["bth.opcode"]),
                           fields, shot.payload)
    # a CRC break is undone by the reseal; a flipped Ethernet bit only misroutes the frame
    # (nor does a cut before the BTH reach the transport)
    m = draw(mutated(st.just(good)).filter(
        lambda m: m.kind != "crc" and not (m.kind == "bitflip" and m.where == "eth")
        and len(m.frame) >= MIN_FRAME))
    edits = tuple((i, a ^ b) for i, (a, b) in enumerate(zip(frame, m.frame, strict=False))
                  if a != b)
    cut = len(m.frame) if len(m.frame) < len(frame) else None
    tail = m.frame[len(frame):]
    return Shot(shot.role, shot.to, f"{shot.kind} + {m.kind} {m.where}", shot.fields,
                shot.payload, edits, cut, tail)


@st.composite
def shots(draw: st.DrawFn, conn: Connection, source_mac: str,
          roles: tuple[str, ...] = ROLES) -> Shot:
    """Any shot at ``conn``: a request, a response or a CM MAD into either end, a quarter of
    them broken further by :func:`~ibwire.strategies.mutated`."""
    role = draw(st.sampled_from(roles))
    to = draw(st.integers(0, 1))
    make = {"request": request_shots, "response": response_shots, "cm": cm_shots}[role]
    shot = draw(make(to))
    if draw(st.integers(0, 3)) == 0:
        shot = _mutate(draw, shot, conn, source_mac)
    return shot


@dataclass
class Coverage:
    """What the shots sent covered: opcodes, CM attributes, kinds of lie."""

    packets: int = 0
    opcodes: dict[int, int] = field(default_factory=dict)
    attributes: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)

    def add(self, shot: Shot) -> None:
        self.packets += 1
        op = int(shot.fields.get("bth.opcode", UD_SEND_ONLY))
        self.opcodes[op] = self.opcodes.get(op, 0) + 1
        if shot.role == "cm":
            attr = shot.kind.split()[0]
            self.attributes[attr] = self.attributes.get(attr, 0) + 1
        if shot.template:  # a mutation in flight: "[cm.REQ ]in-flight KIND"
            word = shot.kind.split("in-flight ", 1)[-1]
            word = " ".join(word.split()[:2]) if word.startswith("mutated") else \
                word.split()[0]
            self.kinds[f"in-flight {word}"] = self.kinds.get(f"in-flight {word}", 0) + 1
            return
        lies, _, broken = shot.kind.partition(" + ")
        words = [w for w in lies.split() if w != "live-ids" and not w.startswith("cm.")]
        if broken:
            how, _, where = broken.partition(" ")
            words.append(f"mutated {how}" + ("" if how == "truncate" else f" {where}"))
        for word in words:
            self.kinds[word] = self.kinds.get(word, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {"packets": self.packets,
                "opcodes": {f"{k:#04x} {opcodes()[k].name if k in opcodes() else '?'}": v
                            for k, v in sorted(self.opcodes.items())},
                "cm_attributes": dict(sorted(self.attributes.items())),
                "kinds": dict(sorted(self.kinds.items(), key=lambda kv: -kv[1]))}
