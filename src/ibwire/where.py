"""``--where`` filters: a small subset of Wireshark's display-filter language
(wireshark-filter(4)), over the fields ``show --json`` prints.

* comparisons ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` (and ``eq``, ``ne``, ``lt``, ``le``,
  ``gt``, ``ge``), ``contains`` (text);
* ``&&``/``and``, ``||``/``or``, ``!``/``not``, parentheses;
* values: numbers (decimal, ``0x`` hex, negative), ``true``/``false``, "quoted text", IPv4
  and IPv6 addresses and networks unquoted (``ip.src == 10.77.0.0/24``: in the network), MAC
  addresses, and a bare word (``aeth.syndrome.type == NAK``);
* sets: ``bth.opcode in {4 5 0x11}`` (commas allowed; ``a..b`` ranges), ``not in``;
* field names as ``show --json`` prints them (``bth.destqp``), Wireshark's ``infiniband.``
  prefix accepted (``infiniband.bth.destqp``), ``frame.number`` for ``frame``; a field alone
  is true when the packet has it (``reth``), the verdicts ``icrc_ok``/``vcrc_ok`` alone when
  they are true.

As in Wireshark, a comparison with a field the packet lacks is false (``icrc_ok == false``
matches the packets whose ICRC failed, not those without one), ``!=`` is "no value equals"
and a field with several values (VLAN tags) matches when one of them does. An unknown field
is an error naming the nearest known ones.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ibwire.errors import IbwireError
from ibwire.filter_fields import (
    ADDRESS,
    NUMBER,
    TEXT,
    VERDICT,
    canonical,
    is_known,
    known_fields,
    nearest,
)
from ibwire.filter_values import (
    MAC,
    Predicate,
    compare_value,
    field_test,
    fields_compare,
    in_range,
    present,
)


class FilterError(IbwireError):
    """A --where expression that is not in the supported filter language."""


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<op>==|!=|<=|>=|&&|\|\||[<>!(){},])
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<word>-?[\w:.][\w:./-]*)
    )""", re.VERBOSE)
_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
             "and": "&&", "or": "||", "not": "!"}
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "contains")
_FIELD = re.compile(r"[A-Za-z_][\w]*(\.[\w]+)*")


@dataclass(frozen=True)
class _Field:
    name: str


class _Word(str):
    """A bare word that is neither a field nor a number or address: text, beside a field."""


@dataclass(frozen=True)
class _Range:
    low: Any
    high: Any


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: "op" (operators, word operators spelled as symbols), "string"
    (without quotes, escapes resolved), "word"."""
    out, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise FilterError(f"cannot read filter {text!r} at {text[at:].lstrip()[:20]!r}")
        at = match.end()
        kind = match.lastgroup or "op"
        value = match.group(kind)
        if kind == "string":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif kind == "word" and value.lower() in (*_WORD_OPS, "in", "contains"):
            kind, value = "op", _WORD_OPS.get(value.lower(), value.lower())
        out.append((kind, value))
    return out


def _literal(word: str) -> Any:
    """A word's value when it is not a field: a number, a verdict, an address or network,
    a MAC address (lower case, colons); None if it is none of these."""
    lower = word.lower()
    if lower in ("true", "false"):
        return lower == "true"
    try:
        return int(word, 0) if not re.fullmatch(r"-?0\d+", word) else int(word, 10)
    except ValueError:
        pass
    if MAC.fullmatch(word):
        return word.replace("-", ":").lower()
    if re.fullmatch(r"[0-9a-fA-F:.]+(/\d+)?", word) and ("." in word or ":" in word):
        try:
            if "/" in word:
                return ipaddress.ip_network(word, strict=False)
            return ipaddress.ip_address(word)
        except ValueError:
            return None
    return None


class _Parser:
    """Recursive descent over the tokens: or > and > not > comparison."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def fail(self, why: str) -> FilterError:
        return FilterError(f"{why} in filter {self.text!r}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, op: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end" + (f" (expected {op!r})" if op else ""))
        if op is not None and token != ("op", op):
            raise self.fail(f"expected {op!r}, found {token[1]!r}")
        self.at += 1
        return token

    def accept(self, op: str) -> bool:
        if self.peek() == ("op", op):
            self.at += 1
            return True
        return False

    def parse(self) -> Predicate:
        if not self.tokens:
            raise self.fail("empty filter")
        predicate = self.either()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return predicate

    def either(self) -> Predicate:
        parts = [self.both()]
        while self.accept("||"):
            parts.append(self.both())
        if len(parts) == 1:
            return parts[0]
        return lambda fields: any(p(fields) for p in parts)

    def both(self) -> Predicate:
        parts = [self.negated()]
        while self.accept("&&"):
            parts.append(self.negated())
        if len(parts) == 1:
            return parts[0]
        return lambda fields: all(p(fields) for p in parts)

    def negated(self) -> Predicate:
        if self.accept("!"):
            inner = self.negated()
            return lambda fields: not inner(fields)
        return self.test()

    def test(self) -> Predicate:
        if self.accept("("):
            inner = self.either()
            self.take(")")
            return inner
        left = self.operand()
        token = self.peek()
        if token == ("op", "!") and self.at + 1 < len(self.tokens) and \
                self.tokens[self.at + 1] == ("op", "in"):
            self.at += 2
            inside = self.member(left)
            return lambda fields: not inside(fields)
        if token == ("op", "in"):
            self.at += 1
            return self.member(left)
        if token is not None and token[0] == "op" and token[1] in _COMPARISONS:
            self.at += 1
            right = self.operand()
            return self.compare(left, token[1], right)
        if isinstance(left, _Field):
            return present(left.name)
        if isinstance(left, bool):
            return lambda fields: left
        if isinstance(left, _Word):
            raise self.unknown(left)
        raise self.fail(f"{self.tokens[self.at - 1][1]!r} is not a test")

    def operand(self) -> Any:
        kind, text = self.take()
        if kind == "string":
            return text
        if kind == "op":
            raise self.fail(f"expected a field or value, found {text!r}")
        value = _literal(text)
        if value is not None:
            return value
        name = canonical(text)
        if is_known(name):
            return _Field(name)
        if "." not in name and _FIELD.fullmatch(name):
            return _Word(text)  # text (``aeth.syndrome.type == NAK``) beside a field
        raise self.unknown(text)

    def unknown(self, name: str) -> FilterError:
        near = nearest(canonical(name))
        hint = f"did you mean {', '.join(near)}?" if near else \
            "the fields are those show --json prints"
        return FilterError(f"unknown field {name!r} in filter {self.text!r}; {hint}")

    def member(self, left: Any) -> Predicate:
        if not isinstance(left, _Field):
            raise self.fail("'in' needs a field on its left")
        self.take("{")
        items: list[Any] = []
        while not self.accept("}"):
            if items and self.accept(","):
                continue
            token = self.peek()
            if token is not None and token[0] == "word" and ".." in token[1]:
                self.at += 1
                low, high = token[1].split("..", 1)
                item = _Range(self.value_of(low), self.value_of(high))
            else:
                item = self.operand()
            if isinstance(item, _Field):
                raise self.fail(f"a set holds values, not the field {item.name!r}")
            items.append(item)
        if not items:
            raise self.fail("empty set")
        for item in items:
            for value in (item.low, item.high) if isinstance(item, _Range) else (item,):
                _check_kind(left.name, value, self.fail)
        if known_fields().get(left.name) == VERDICT:
            items = [bool(i) if isinstance(i, int) else i for i in items]
        tests = [compare_value("==", item) if not isinstance(item, _Range) else
                 in_range(item.low, item.high) for item in items]
        return field_test(left.name, lambda value: any(t(value) for t in tests), False)

    def value_of(self, text: str) -> Any:
        value = _literal(text)
        if value is None:
            raise self.fail(f"cannot read {text!r} as a value")
        return value

    def compare(self, left: Any, op: str, right: Any) -> Predicate:
        if not isinstance(left, _Field):
            if not isinstance(right, _Field):
                if isinstance(left, _Word):
                    raise self.unknown(left)
                raise self.fail(f"neither side of {op!r} is a field")
            left, right, op = right, left, _MIRROR[op]
        if isinstance(right, _Field):
            return fields_compare(left.name, op, right.name)
        _check_kind(left.name, right, self.fail)
        if known_fields().get(left.name) == VERDICT and not isinstance(right, bool):
            right = bool(right)  # icrc_ok == 1
        if op == "contains" and not isinstance(right, str):
            raise self.fail("'contains' takes text")
        if isinstance(right, (ipaddress.IPv4Network, ipaddress.IPv6Network)) and \
                op not in ("==", "!="):
            raise self.fail(f"a network ({right}) takes ==, != or in, not {op!r}")
        test = compare_value(op, right)
        if op == "!=":
            equal = compare_value("==", right)
            return field_test(left.name, equal, True)
        return field_test(left.name, test, False)


_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=",
           "contains": "contains"}


def _check_kind(name: str, value: Any, fail: Callable[[str], FilterError]) -> None:
    """Refuse a value a field of ``name``'s kind can never hold (a filter that would match
    nothing without saying why)."""
    kind = known_fields().get(name)
    if kind is None:
        return
    wrong = (
        (kind == NUMBER and not isinstance(value, int))
        or (kind == VERDICT and not (isinstance(value, bool) or value in (0, 1)))
        or (kind == ADDRESS and isinstance(value, (int, bool)))
        or (kind == TEXT and not isinstance(value, str))
    )
    if wrong:
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        what = {VERDICT: "true or false", ADDRESS: "an address"}.get(kind, f"a {kind}")
        raise fail(f"{name} holds {what}, not {shown!r}")


def compile_where(text: str) -> Predicate:
    """A predicate over a ``fields()`` mapping (plus ``icrc_ok``, ``vcrc_ok``, ``error``...);
    :class:`FilterError` when ``text`` is not in the language or names an unknown field."""
    return _Parser(text).parse()

