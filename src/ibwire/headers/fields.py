"""A header's bit layout and the codec derived from it, without Construct.

:class:`Layout` parses and builds a fixed-size header from its fields' bit positions with
``int.from_bytes`` and shifts. :class:`ibwire.headers.layout.Header` derives a layout from
a header's Construct declaration; the scanner's slots (``ibwire.scan.program``) are layouts
written out from those declarations, so that a scan starts without loading Construct.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from ibwire.errors import BuildError, TruncatedError

#: How a bytes field is shown: as a MAC, an IPv4 or IPv6 address (GIDs too), as text (a
#: NUL-padded UTF-8 string, see :func:`text_of`), or as raw bytes.
FORMATS = ("mac", "ipv4", "ipv6", "text", "bytes")


@dataclass(frozen=True)
class Field:
    """One field of a header: ``bits`` wide, starting ``shift`` bits above the header's LSB."""

    name: str
    bits: int
    shift: int
    fmt: str | None  # None for numbers, else one of FORMATS

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1


def display(value: int, field: Field) -> Any:
    """A field's value as ``Packet.fields()`` gives it: a number, or MAC and IP addresses as
    text, strings as text (:func:`text_of`), other byte fields as bytes."""
    if field.fmt is None:
        return value
    if field.fmt == "bytes":
        return value.to_bytes(field.bits // 8, "big")
    if field.fmt == "text":
        return text_of(value.to_bytes(field.bits // 8, "big"))
    return _address(value, field.fmt, field.bits // 8)


def text_of(raw: bytes) -> str | bytes:
    """A NUL-padded UTF-8 string field (IBA 14.2.5.15 NodeString) as text: the bytes before
    the first NUL, when they are UTF-8 and only NULs follow; else the bytes themselves, so that
    no byte is lost (a string built from the value gives the same bytes back)."""
    end = raw.find(b"\0")
    if end >= 0 and any(raw[end:]):
        return raw
    try:
        return raw[:end if end >= 0 else len(raw)].decode("utf-8")
    except UnicodeDecodeError:
        return raw


@lru_cache(maxsize=4096)
def _address(value: int, fmt: str, size: int) -> str:
    """An address field's text (as :func:`display`), cached: addresses repeat in a capture."""
    raw = value.to_bytes(size, "big")
    if fmt == "mac":
        return ":".join(f"{b:02x}" for b in raw)
    if fmt == "ipv4":
        return str(ipaddress.IPv4Address(raw))
    return str(ipaddress.IPv6Address(raw))


def compile_parse(fields: tuple[Field, ...]) -> Callable[[int], dict[str, Any]]:
    """A function of a header's bytes read as one big-endian integer to its values, as
    ``{f.name: display((word >> f.shift) & f.mask, f)}`` gives them: one dict display with
    the shifts and masks inlined (five times faster than the loop; a property test checks
    it against the declarations' own parser)."""
    items = []
    for f in fields:
        expr = f"(w >> {f.shift}) & {f.mask:#x}" if f.shift else f"w & {f.mask:#x}"
        if f.fmt == "bytes":
            expr = f"({expr}).to_bytes({f.bits // 8}, 'big')"
        elif f.fmt == "text":
            expr = f"_text(({expr}).to_bytes({f.bits // 8}, 'big'))"
        elif f.fmt is not None:
            expr = f"_address({expr}, {f.fmt!r}, {f.bits // 8})"
        items.append(f"{f.name!r}: {expr}")
    namespace: dict[str, Any] = {"_address": _address, "_text": text_of}
    exec("def parse(w):\n    return {" + ", ".join(items) + "}\n", namespace)
    return namespace["parse"]  # type: ignore[no-any-return]


def _unshow(value: Any, field: Field, header: str, key: str | None = None,
            where: Mapping[str, Any] | None = None) -> int:
    """The integer of a field value given as a number, bytes or address text; ``key`` and
    ``where`` (header and field) name it in errors (default: ``header.field``)."""
    key = key or f"{header}.{field.name}"
    where = where if where is not None else {"header": header, "field": field.name}
    if field.fmt is not None:
        if isinstance(value, str) and field.fmt == "text":
            value = value.encode("utf-8")
            if len(value) * 8 > field.bits:
                raise BuildError(f"{key}: text of {len(value)} UTF-8 bytes does not fit in "
                                 f"{field.bits // 8}", **where)
            value = value.ljust(field.bits // 8, b"\0")
        if isinstance(value, str):
            try:
                if field.fmt == "mac":
                    value = bytes.fromhex(value.replace(":", "").replace("-", ""))
                elif field.fmt == "ipv4":
                    value = ipaddress.IPv4Address(value).packed
                else:
                    value = ipaddress.IPv6Address(value).packed
            except ValueError as exc:
                raise BuildError(f"{key}: bad {field.fmt} text {value!r}",
                                 **where) from exc
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) * 8 != field.bits:
                raise BuildError(f"{key} needs {field.bits // 8} bytes, got {len(value)}",
                                 **where)
            return int.from_bytes(value, "big")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuildError(f"{key} must be an integer, got {type(value).__name__}",
                         **where)
    if not 0 <= value <= field.mask:
        raise BuildError(f"{key}={value} does not fit in {field.bits} bits",
                         **where)
    return value


class Layout:
    """A fixed-size header as ``size`` bytes of ``fields``, and its codec.

    ``name`` is the lower-case key prefix of its fields (``bth`` gives ``bth.psn``), the same
    as Wireshark's display-filter names where Wireshark has the field. With ``full_keys``,
    field names are already full keys (``cm.req.localqpn``): MAD attributes, where
    Wireshark's field names do not all share one prefix.
    """

    full_keys: bool = False

    def __init__(self, name: str, title: str, size: int, fields: tuple[Field, ...],
                 full_keys: bool | None = None) -> None:
        self.name = name
        self.title = title
        self.size = size
        self.fields = fields
        self.by_name = {f.name: f for f in fields}
        if full_keys is not None:
            self.full_keys = full_keys

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.title} ({self.size} bytes)>"

    def key(self, field: str) -> str:
        """The flat key of a field: ``bth.psn``; a header's lone namesake field is just
        ``immdt``; with full keys, the field's own name."""
        if self.full_keys:
            return field
        return self.name if field == self.name else f"{self.name}.{field}"

    @cached_property
    def keys(self) -> dict[str, str]:
        """Each field's flat key (:meth:`key`), by field name."""
        return {f.name: self.key(f.name) for f in self.fields}

    def where(self, field: str) -> dict[str, str | None]:
        """The ``header`` and ``field`` an error about ``field`` carries; a full key is named
        once (``cm.req.localqpn``, not ``cm.req.cm.req.localqpn``)."""
        if not self.full_keys:
            return {"header": self.name, "field": field}
        if field == self.name:
            return {"header": field, "field": None}
        if field.startswith(self.name + "."):
            return {"header": self.name, "field": field[len(self.name) + 1:]}
        head, _, tail = field.rpartition(".")
        return {"header": head, "field": tail}

    def parse(self, data: bytes | memoryview, offset: int = 0) -> dict[str, Any]:
        """Field values of the header at ``offset`` (numbers as int, addresses as text)."""
        end = offset + self.size
        if end > len(data):
            raise TruncatedError(
                f"{self.title} needs {self.size} bytes, {max(len(data) - offset, 0)} left",
                header=self.name, offset=offset)
        return self._parse_word(int.from_bytes(data[offset:end], "big"))

    @cached_property
    def _parse_word(self) -> Callable[[int], dict[str, Any]]:
        return compile_parse(self.fields)

    def build(self, values: Mapping[str, Any]) -> bytes:
        """Bytes of the header; missing fields are 0, unknown names raise :class:`BuildError`."""
        unknown = set(values) - self.by_name.keys()
        if unknown:
            raise BuildError(f"{self.title} has no field {sorted(unknown)[0]!r}", header=self.name)
        word = 0
        for f in self.fields:
            if f.name in values:
                word |= _unshow(values[f.name], f, self.name, self.key(f.name),
                                self.where(f.name)) << f.shift
        return word.to_bytes(self.size, "big")
