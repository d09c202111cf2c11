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
from ibwire.scapy.fields import scapy_name

_IMMUTABLE = frozenset({int, str, bytes, bool, type(None)})


#: Per layer class: (scapy name, shift, mask, address field or None, first byte, end byte) of
#: each declared field, and the names of the virtual trailer fields after them.
_Layout = tuple[tuple[tuple[str, int, int, Any, int, int], ...], tuple[str, ...]]
_LAYOUTS: dict[type[Packet], _Layout] = {}


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


class IBHeader(Packet):
    """A layer whose fields come from one :class:`ibwire.headers.Header` declaration.

    Dissection reads the whole header as one integer and shifts the fields out (the layout of
    ``Header.fields``), instead of one scapy ``getfield`` call per field; a test proves that
    it gives the same values as scapy's generic field-by-field dissection.
    """

    header: ClassVar[Header]

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

    def copy_fields_dict(self, fields: dict[str, Any] | None) -> dict[str, Any] | None:
        """As scapy's, without a ``do_copy`` call for values that cannot change in place."""
        if fields is None:
            return None
        fieldtype = self.fieldtype
        return {name: value if type(value) in _IMMUTABLE else fieldtype[name].do_copy(value)
                for name, value in fields.items()}


def no_trailer(layer: Packet) -> bool:
    """True for a dissected layer whose frame ended before its trailer (truncated capture)."""
    return layer.__dict__.get("_ibwire_no_trailer", False)


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
