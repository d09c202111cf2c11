"""Headers as Construct declarations, and the fast field codec derived from them.

Every header is declared once, as a Construct ``BitStruct`` of ``BitsInteger`` fields (numbers)
and ``Bytewise(Bytes(n))`` fields (addresses, opaque blobs). That declaration is the definition.
:class:`Header` reads it once and derives a flat bit layout (:class:`ibwire.headers.fields.Layout`),
from which it parses and builds with ``int.from_bytes`` and shifts: about ten times faster than
Construct's own parser, which a property test checks byte for byte against the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping

import construct as cs

from ibwire.headers.fields import (
    FORMATS,
    Field,
    Layout,
    _address,
    _unshow,
    compile_parse,
    display,
)


def _fields_of(declaration: cs.Construct, formats: Mapping[str, str]) -> tuple[Field, ...]:
    struct = declaration.subcon  # BitStruct(...) is Transformed(Struct(...))
    if not isinstance(struct, cs.Struct):
        raise TypeError("a header must be declared as a construct BitStruct")
    widths: list[tuple[str, int, str | None]] = []
    for sub in struct.subcons:
        inner = sub.subcon
        if isinstance(inner, cs.BitsInteger):
            if inner.signed or inner.swapped:
                raise TypeError(f"{sub.name}: only unsigned big-endian bit fields")
            widths.append((sub.name, inner.length, None))
        elif isinstance(inner, cs.Transformed) and isinstance(inner.subcon, cs.Bytes):
            widths.append((sub.name, 8 * inner.subcon.length, formats.get(sub.name, "bytes")))
        else:
            raise TypeError(f"{sub.name}: unsupported construct {type(inner).__name__}")
    total = sum(bits for _, bits, _ in widths)
    fields, used = [], 0
    for name, bits, fmt in widths:
        used += bits
        fields.append(Field(name, bits, total - used, fmt))
    return tuple(fields)


class Header(Layout):
    """A fixed-size header: its Construct declaration and the codec derived from it."""

    def __init__(self, name: str, title: str, declaration: cs.Construct,
                 formats: Mapping[str, str] | None = None) -> None:
        super().__init__(name, title, declaration.sizeof(),
                         _fields_of(declaration, formats or {}))
        self.declaration = declaration

    def __repr__(self) -> str:
        return f"<Header {self.title} ({self.size} bytes)>"


class Record(Header):
    """A header whose field names are already full keys (``cm.req.localqpn``): MAD attributes,
    where Wireshark's field names do not all share one prefix (a DREQ's remote QPN is
    ``cm.req.remoteqpneecn``, a REQ's local communication ID is ``cm.req`` itself)."""

    full_keys = True


def bits(n: int) -> cs.BitsInteger:
    """An unsigned big-endian field of ``n`` bits (inside a BitStruct)."""
    return cs.BitsInteger(n)


def octets(n: int) -> cs.Construct:
    """A field of ``n`` whole bytes (inside a BitStruct)."""
    return cs.Bytewise(cs.Bytes(n))


__all__ = ["FORMATS", "Field", "Header", "Layout", "Record", "_address", "_unshow", "bits",
           "compile_parse", "display", "octets"]
