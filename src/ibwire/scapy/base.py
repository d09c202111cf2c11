"""The base of every InfiniBand layer: fields from a declaration, fast dissection, trailers.

:class:`IBHeader` is a scapy layer whose ``fields_desc`` comes from one
:class:`ibwire.headers.Header`. :class:`LinkHeader` is the LRH and GRH side of a frame: what
the BTH asks of the layer below it (how many bytes the length fields give the transport
packet, where a CRC check starts), so that the transport module needs no link classes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scapy.packet import Packet

from ibwire.headers import Header
from ibwire.scapy.cloning import LeanPacket
from ibwire.scapy.fields import scapy_name
from ibwire.scapy.packing import Plan, header_plan, pack

#: Per layer class: (scapy name, shift, mask, address field or None, first byte, end byte) of
#: each declared field, and the names of the virtual trailer fields after them.
_Layout = tuple[tuple[tuple[str, int, int, Any, int, int], ...], tuple[str, ...]]
_LAYOUTS: dict[type[Packet], _Layout] = {}
_PLANS: dict[type[Packet], Plan] = {}


def _layout_of(cls: type[IBHeader]) -> _Layout:
    by_name = {f.name: f for f in cls.fields_desc}
    size = cls.header.size
    declared = []
    for f in cls.header.fields:
        first = size - (f.shift + f.bits) // 8
        address = None if f.fmt is None else by_name[scapy_name(f.name)]
        declared.append((scapy_name(f.name), f.shift, f.mask, address, first, first + f.bits // 8))
    virtual = tuple(f.name for f in cls.fields_desc[len(declared):])
    _LAYOUTS[cls] = (tuple(declared), virtual)
    return _LAYOUTS[cls]


class IBHeader(LeanPacket):
    """A layer whose fields come from one :class:`ibwire.headers.Header` declaration.

    Dissection reads the whole header as one integer and shifts the fields out (the layout of
    ``Header.fields``), instead of one scapy ``getfield`` call per field, and building packs
    the field values into one integer (:mod:`ibwire.scapy.packing`); tests prove both give
    what scapy's generic field-by-field code gives. Instances, copies and the clones a build
    makes are cheap (:mod:`ibwire.scapy.cloning`).
    """

    header: ClassVar[Header]
    #: Set on the instance by :func:`mark_no_trailer`.
    _ibwire_no_trailer: ClassVar[bool] = False

    def do_dissect(self, s: bytes) -> bytes:
        size = self.header.size
        if len(s) < size:
            return super().do_dissect(s)  # a cut-short header: scapy's own partial values
        declared, virtual = _LAYOUTS.get(type(self)) or _layout_of(type(self))
        word = int.from_bytes(s[:size], "big")
        fields = self.fields
        for name, shift, mask, address, first, end in declared:
            if address is None:
                fields[name] = (word >> shift) & mask
            else:
                fields[name] = address.m2i(self, s[first:end])
        for name in virtual:
            fields[name] = None
        self.raw_packet_cache_fields = {}
        self.raw_packet_cache = s[:size]
        self.explicit = 1
        return s[size:]

    def self_build(self) -> bytes:
        if self.raw_packet_cache is None:  # else scapy checks whether the cache still holds
            cls = type(self)
            header = pack(self, _PLANS.get(cls) or _PLANS.setdefault(cls, header_plan(cls)))
            if header is not None:
                return header
        return super().self_build()


def no_trailer(layer: Packet) -> bool:
    """True for a dissected layer whose frame ended before its trailer (truncated capture)."""
    return bool(getattr(layer, "_ibwire_no_trailer", False))  # no __dict__ made to read it


def mark_no_trailer(layer: Packet) -> None:
    layer.__dict__["_ibwire_no_trailer"] = True


class LinkHeader(IBHeader):
    """LRH or GRH: the layers that compute the ICRC over a whole native IB / RoCEv1 frame."""

    def transport_size(self) -> int | None:
        """Bytes from the BTH to the end of the ICRC, as this layer's length fields say."""
        raise NotImplementedError

    def crc_start(self) -> tuple[Packet, str]:
        """The layer a CRC check of the frame starts at, and its ``ibwire.crc`` link name."""
        raise NotImplementedError
