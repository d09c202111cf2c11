"""How ``--where`` compares a packet's values with a filter's (``ibwire.where``), as
Wireshark does: a field the packet lacks (or None) makes any comparison false, ``!=`` means
that no value equals, and a field with several values (VLAN tags) passes when one does.
Addresses shown as text compare as addresses (an IPv4 or IPv6 network holds them), MAC
addresses whatever their case, bytes as their hex text.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from ibwire.filter_fields import VERDICT, known_fields

Predicate = Callable[[Mapping[str, Any]], bool]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAC = re.compile(r"[0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(\1[0-9a-fA-F]{2}){4}")
"""A MAC address, colons or dashes."""


def values_of(value: Any) -> tuple[Any, ...]:
    """A field's values: one, or each of a stacked field's (VLAN tags)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def field_test(name: str, test: Callable[[Any], bool], negate: bool) -> Predicate:
    """True when a value of field ``name`` passes ``test`` (with ``negate``: when the field
    is there and none does); a field the packet lacks (or None) is false either way."""
    def keep(fields: Mapping[str, Any]) -> bool:
        value = fields.get(name)
        if value is None:
            return False
        found = any(test(v) for v in values_of(value) if v is not None)
        return not found if negate else found
    return keep


def present(name: str) -> Predicate:
    """A field alone: the packet has it (a header name: any of its fields); a verdict
    (``icrc_ok``): it is true."""
    if known_fields().get(name) == VERDICT:
        return lambda fields: fields.get(name) is True
    prefix = name + "."
    return lambda fields: fields.get(name) is not None or any(k.startswith(prefix)
                                                              for k in fields)


@lru_cache(maxsize=4096)
def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _comparable(value: Any, like: Any) -> Any:
    """``value`` (a packet's) in the type of ``like`` (the filter's), or None."""
    if isinstance(like, bool):
        return value if isinstance(value, bool) else None
    if isinstance(like, int):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(like, (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network,
                         ipaddress.IPv6Network)):
        return _address(value) if isinstance(value, str) else None
    if isinstance(like, str):
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).hex()
        return value.lower() if isinstance(value, str) and MAC.fullmatch(like) else \
            value if isinstance(value, str) else None
    return None


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "contains": lambda a, b: b in a,
}


def compare_value(op: str, literal: Any) -> Callable[[Any], bool]:
    """A test of one packet value against ``literal`` with ``op``."""
    if isinstance(literal, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        network = literal

        def inside(value: Any) -> bool:
            address = _comparable(value, network)
            return address is not None and address.version == network.version and \
                address in network
        return inside
    fn = _OPS[op]

    def test(value: Any) -> bool:
        mine = _comparable(value, literal)
        if mine is None:
            return False
        try:
            return bool(fn(mine, literal))
        except TypeError:  # IPv4 against IPv6
            return False
    return test


def in_range(low_value: Any, high_value: Any) -> Callable[[Any], bool]:
    """A test of one packet value: within ``low_value``..``high_value``, both included."""
    low, high = compare_value(">=", low_value), compare_value("<=", high_value)
    return lambda value: low(value) and high(value)


def fields_compare(left: str, op: str, right: str) -> Predicate:
    fn = _OPS["==" if op == "!=" else op]

    def keep(fields: Mapping[str, Any]) -> bool:
        a, b = fields.get(left), fields.get(right)
        if a is None or b is None:
            return False
        try:
            found = any(fn(x, y) for x in values_of(a) for y in values_of(b))
        except TypeError:
            return False
        return not found if op == "!=" else found
    return keep
