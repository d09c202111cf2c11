"""scapy fields derived from the Construct declarations of :mod:`ibwire.headers`.

:func:`fields_of` turns a header's flat bit layout (``Header.fields``: name, bits, shift, fmt)
into a ``fields_desc``: byte-aligned numbers of 8/16/24/32/64 bits become scapy's fixed-size
fields (faster than ``BitField``), the others ``BitField``; address fields become ``MACField``,
``IPField`` or ``IP6Field`` and opaque bytes ``StrFixedLenField``. Nothing here repeats a
layout: a property test (tests/scapy/test_fields.py) proves that every layer builds the same
bytes as ``Header.build`` and dissects to the same values as ``Header.parse``.

The trailers that follow the payload (the BTH's pad and ICRC, the LRH's VCRC) are *virtual*
fields: they hold a value and show it, but write no bytes where they are declared; the layer's
``post_build`` appends them after its payload, and ``post_dissect`` fills them from the end.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteField,
    EnumField,
    Field,
    IntField,
    IP6Field,
    IPField,
    LongField,
    MACField,
    ShortField,
    StrFixedLenField,
    ThreeBytesField,
    X3BytesField,
    XBitField,
    XByteEnumField,
    XByteField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.packet import Packet

from ibwire.headers import Header
from ibwire.headers.fields import Field as LayoutField

#: Byte-aligned widths with a fixed-size scapy field: (decimal, hex, struct format).
_ALIGNED: dict[int, tuple[type[Field[Any, Any]], type[Field[Any, Any]], str | None]] = {
    8: (ByteField, XByteField, "B"),
    16: (ShortField, XShortField, "H"),
    24: (ThreeBytesField, X3BytesField, None),
    32: (IntField, XIntField, "I"),
    64: (LongField, XLongField, "Q"),
}
_ADDRESS_DEFAULTS = {"mac": "00:00:00:00:00:00", "ipv4": "0.0.0.0", "ipv6": "::"}


def scapy_name(name: str) -> str:
    """The scapy field name of a Construct field: dots (``dsfield.ecn``) become underscores."""
    return name.replace(".", "_")


def _start_bit(header: Header, field: LayoutField) -> int:
    return 8 * header.size - field.shift - field.bits


def _number(field: LayoutField, aligned: bool, name: str, default: Any,
            enum: Mapping[int, str] | None, hexa: bool) -> Field[Any, Any]:
    if aligned and field.bits in _ALIGNED:
        plain, xfield, fmt = _ALIGNED[field.bits]
        if enum is None:
            return (xfield if hexa else plain)(name, default)
        if field.bits == 8 and hexa:
            return XByteEnumField(name, default, dict(enum))
        if fmt is not None:
            return EnumField(name, default, dict(enum), "!" + fmt)
    if enum is not None:
        return BitEnumField(name, default, field.bits, dict(enum))
    return (XBitField if hexa else BitField)(name, default, field.bits)


def _octets(header: Header, field: LayoutField, name: str, default: Any) -> Field[Any, Any]:
    if _start_bit(header, field) % 8:
        raise TypeError(f"{header.title}.{field.name}: a bytes field must be byte-aligned")
    if field.fmt == "mac" and field.bits == 48:
        return MACField(name, default if default is not None else _ADDRESS_DEFAULTS["mac"])
    if field.fmt == "ipv4" and field.bits == 32:
        return IPField(name, default if default is not None else _ADDRESS_DEFAULTS["ipv4"])
    if field.fmt == "ipv6" and field.bits == 128:
        return IP6Field(name, default if default is not None else _ADDRESS_DEFAULTS["ipv6"])
    size = field.bits // 8
    return StrFixedLenField(name, default if default is not None else bytes(size), size)


def fields_of(header: Header, *, defaults: Mapping[str, Any] | None = None,
              enums: Mapping[str, Mapping[int, str]] | None = None,
              hexa: Collection[str] = ()) -> list[Field[Any, Any]]:
    """The scapy ``fields_desc`` of ``header``, in wire order.

    ``defaults`` overrides the default 0 of a field (``None`` = computed at build), ``enums``
    gives value names, ``hexa`` the fields shown in hex. Keys are Construct field names.
    """
    defaults = defaults or {}
    enums = enums or {}
    unknown = (set(defaults) | set(enums) | set(hexa)) - header.by_name.keys()
    if unknown:
        raise KeyError(f"{header.title} has no field {sorted(unknown)[0]!r}")
    out: list[Field[Any, Any]] = []
    for field in header.fields:
        name = scapy_name(field.name)
        if field.fmt is None:
            aligned = _start_bit(header, field) % 8 == 0
            out.append(_number(field, aligned, name, defaults.get(field.name, 0),
                               enums.get(field.name), field.name in hexa))
        else:
            out.append(_octets(header, field, name, defaults.get(field.name)))
    return out


class VirtualField(Field[Any, Any]):
    """A value kept with a layer that writes no bytes where it is declared (a trailer)."""

    __slots__: list[str] = []

    def __init__(self, name: str, default: Any = None, fmt: str = "B") -> None:
        super().__init__(name, default, fmt)

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:
        return s, None


class CrcField(VirtualField):
    """A CRC trailer value (the CRC value; on the wire least-significant byte first).

    ``repr``/``show()`` add the verdict that ``check(pkt)`` returns: True, False or None.
    """

    __slots__ = ["width", "check"]

    def __init__(self, name: str, width: int, check: Callable[[Packet], bool | None]) -> None:
        super().__init__(name, None, "<I" if width == 4 else "<H")
        self.width = width
        self.check = check

    def wire(self, value: int) -> bytes:
        """The trailer bytes of a CRC value."""
        return (value & ((1 << 8 * self.width) - 1)).to_bytes(self.width, "little")

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        if x is None:
            return "None (computed at build)"
        text = f"0x{x:0{2 * self.width}x}"
        if pkt is None:
            return text
        try:
            verdict = self.check(pkt)
        except Exception:  # a repr must not fail on a packet that cannot be built
            verdict = None
        return text + {True: " [ok]", False: " [BAD]", None: " [not checked]"}[verdict]


class PadField(VirtualField):
    """The pad bytes before the ICRC (None: PadCnt zero bytes)."""

    __slots__: list[str] = []

    def __init__(self, name: str) -> None:
        super().__init__(name, None, "0s")

    def any2i(self, pkt: Packet | None, x: Any) -> Any:
        return None if x is None else bytes(x)

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        return "None (PadCnt zero bytes)" if x is None else repr(x)


def patch(buf: bytearray, header: Header, name: str, value: int, offset: int = 0) -> None:
    """Write ``value`` into field ``name`` of ``header`` found at ``offset`` of ``buf``."""
    field = header.by_name[name]
    end = offset + header.size - field.shift // 8  # only the bytes the field is in
    shift = field.shift % 8
    start = end - (shift + field.bits + 7) // 8
    mask = field.mask
    word = int.from_bytes(buf[start:end], "big")
    word = (word & ~(mask << shift)) | ((value & mask) << shift)
    buf[start:end] = word.to_bytes(end - start, "big")
