"""The immutable result of dissecting one frame."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ibwire.errors import IbwireError
from ibwire.headers import ALL
from ibwire.tables import Opcode

#: Encapsulations, by the name a Packet reports.
ENCAPSULATIONS = ("ib_local", "ib_global", "ib_raw", "rocev1", "rocev2_ipv4", "rocev2_ipv6")
OTHER = "other"
#: Headers that may occur several times in one frame; their fields() values are tuples.
STACKED = frozenset({"vlan"})


@dataclass(frozen=True)
class HeaderValue:
    """One header found in a frame: its key prefix, byte offset, length and field values."""

    name: str
    offset: int
    length: int
    values: Mapping[str, Any]
    full_keys: bool = False
    """True when the value names are already flat keys (MAD bodies: ``cm.req.localqpn``)."""

    def __getitem__(self, field: str) -> Any:
        return self.values[field]


@dataclass(frozen=True)
class Packet:
    """A dissected frame.

    ``headers`` are in wire order. ``payload`` excludes the pad; ``icrc``/``vcrc`` are the wire
    bytes (``None`` where the encapsulation has none); ``trailer`` is what follows the last
    InfiniBand byte (Ethernet padding, FCS). ``unknown`` gives the reason when the opcode is
    reserved or manufacturer-specific: the bytes after the BTH then stay in ``payload``.

    ``error`` is the fault of a frame whose headers are broken where the length fields still
    place its ICRC (or its VCRC): ``headers`` stop at the fault, the bytes from there to the
    CRC are ``payload``, and :meth:`verify` gives the verdict that tells a corrupted packet
    (CRC bad) from one the sender built wrong (CRC good). None for a sound packet.

    ``wire_length`` is set when the capture kept fewer bytes than the frame had on the wire
    (a snap length) and cut this packet: its length on the wire. The length fields still
    place everything: ``payload`` holds the bytes kept, ``payload_length`` counts them all,
    ``icrc``/``vcrc`` are None where the capture cut them (``icrc_offset`` says where they
    were), and a header the capture cut is ``error``, a :class:`TruncatedError` (the headers
    before it are all there).
    """

    frame: bytes
    link: str
    encapsulation: str
    headers: tuple[HeaderValue, ...]
    payload: bytes = b""
    payload_offset: int = 0
    pad: bytes = b""
    icrc: bytes | None = None
    icrc_offset: int | None = None
    vcrc: bytes | None = None
    vcrc_offset: int | None = None
    trailer: bytes = b""
    opcode: Opcode | None = None
    unknown: str | None = None
    warnings: tuple[str, ...] = ()
    derived: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    error: IbwireError | None = None
    wire_length: int | None = None
    wire_payload_length: int | None = None

    @property
    def is_ib(self) -> bool:
        """True when the frame carries an InfiniBand transport packet (BTH and ICRC; the ICRC
        may be one the capture cut)."""
        return self.icrc is not None or (self.cut and self.encapsulation not in (OTHER,
                                                                                 "ib_raw"))

    @property
    def cut(self) -> bool:
        """The capture cut this packet (a snap length): see the class."""
        return self.wire_length is not None

    @property
    def payload_length(self) -> int:
        """Bytes the transport carries after the opcode's headers and any MAD/RMPP header, pad
        excluded: a decoded MAD body counts, as the scanner's ``payload.length`` counts it. On
        a packet the capture cut, as many as the length fields say (``payload`` holds
        ``captured_payload_length`` of them)."""
        if self.wire_payload_length is not None:
            return self.wire_payload_length
        return self.captured_payload_length

    @property
    def captured_payload_length(self) -> int:
        """The bytes of the payload the capture kept (all of them unless it cut the packet)."""
        return len(self.payload) + sum(h.length for h in self.headers if h.full_keys)

    def header(self, name: str) -> HeaderValue | None:
        """The first header called ``name`` (``"bth"``, ``"reth"``...), or None."""
        for h in self.headers:
            if h.name == name:
                return h
        return None

    def __contains__(self, name: str) -> bool:
        return self.header(name) is not None

    def __iter__(self) -> Iterator[HeaderValue]:
        return iter(self.headers)

    def fields(self) -> dict[str, Any]:
        """Flat ``{"bth.psn": 5, ...}`` with Wireshark-style keys.

        A header that can be stacked (VLAN tags) gives a tuple per key, outermost tag first;
        a MAD field that repeats (SA GetTableResp records, P_Key table entries ...) a list in
        wire order. ``icrc``/``vcrc`` are the CRC values (wire bytes read little-endian).
        """
        out: dict[str, Any] = {}
        for h in self.headers:
            if h.full_keys and h.name not in STACKED:  # a MAD body part: keys as they are
                out.update(h.values)
                continue
            spec = None if h.full_keys else ALL.get(h.name)
            if spec is not None and h.name not in STACKED:
                keys = spec.keys
                out.update({keys[name]: value for name, value in h.values.items()})
                continue
            for name, value in h.values.items():
                key = name if h.full_keys else spec.key(name) if spec else f"{h.name}.{name}"
                if h.name in STACKED:
                    out[key] = (*out.get(key, ()), value)
                else:
                    out[key] = value
        out.update(self.derived)
        if self.icrc is not None:
            out["icrc"] = int.from_bytes(self.icrc, "little")
        if self.vcrc is not None:
            out["vcrc"] = int.from_bytes(self.vcrc, "little")
        return out

    def verify(self) -> Any:
        """The ICRC/VCRC verdict of this frame (see :func:`ibwire.crc.verify`), also when
        ``error`` broke its headers but left its CRCs placed. A CRC the capture cut has
        verdict None (not verifiable)."""
        from ibwire import crc

        if self.cut:
            return crc.CrcVerdict(None, None, None, None, None, None)
        return crc.verify(self.frame, self.link, lenient=self.error is not None)
