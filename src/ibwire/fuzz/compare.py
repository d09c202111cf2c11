"""ibwire's dissection as the reference: what a target claims against what ibwire says.

A target's claims are a dict of ibwire field keys (``bth.opcode``, ``reth.dmalen``,
``ip.src`` ...: :meth:`ibwire.Packet.fields`, Wireshark's names without ``infiniband.``).
Every key it gives is compared with ibwire's value; a key it leaves out is not (``{}`` claims
nothing). A key ibwire does not have is a difference when ibwire dissected the frame cleanly
(the target invents a field), not when ibwire rejected the frame (then only ibwire's keys are
compared). Values compare after plain conversions: bytes as hex text, tuples as lists, an
integer given as text (``"0x1f"``), addresses in any letter case.

Known differences are an allow-list (:class:`Allowed`, read by :func:`read_allow`): a JSON
object per line with ``field`` (an fnmatch pattern, default ``*``), ``when`` (ibwire keys, or
``mode``/``encapsulation``/``link``, to a value or a list of values), ``kind`` (default
``diff``) and ``reason``; ``{"divergence": NAME}`` names one of Wireshark's modelled
mistakes (:mod:`ibwire.fuzz.wireshark.divergences`). Blank lines and ``#`` lines are skipped.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as default
from typing import Any

from ibwire.dissect import parse
from ibwire.errors import IbwireError, MalformedError
from ibwire.fuzz.generate import Example

ABSENT = None
"""ibwire has no such field (shown as ``null`` in findings)."""


@dataclass(frozen=True)
class Reference:
    """ibwire's view of one frame."""

    fields: Mapping[str, Any]
    clean: bool
    """Dissected as an IB/RoCE packet without error."""
    error: str | None = None


def reference(example: Example) -> Reference:
    try:
        packet = parse(example.frame, example.link)
    except IbwireError as exc:
        return Reference({}, False, str(exc))
    clean = packet.error is None and packet.encapsulation != "other"
    return Reference(packet.fields(), clean, None if packet.error is None else str(packet.error))


@dataclass(frozen=True)
class Diff:
    """One field on which a target disagrees with ibwire."""

    field: str
    expected: Any
    got: Any


@dataclass(frozen=True)
class Allowed:
    """A known difference to ignore (or a Wireshark mistake to model: ``divergence``)."""

    reason: str
    field: str = "*"
    kind: str = "diff"
    when: Mapping[str, Any] = default(default_factory=dict)
    divergence: str | None = None

    def matches(self, kind: str, name: str, example: Example, ref: Reference) -> bool:
        if self.divergence is not None or kind != self.kind:
            return False
        if not fnmatch.fnmatchcase(name, self.field):
            return False
        facts = {"mode": example.mode, "encapsulation": example.encapsulation,
                 "link": example.link}
        for key, want in self.when.items():
            have = facts[key] if key in facts else ref.fields.get(key)
            wanted = want if isinstance(want, list) else [want]
            if not any(same(have, w) for w in wanted):
                return False
        return True


def read_allow(path: str | os.PathLike[str]) -> list[Allowed]:
    """The entries of an allow-list file (an empty file: none)."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                raw = json.loads(line)
                if not isinstance(raw, dict):
                    raise ValueError("not a JSON object")
                entries.append(Allowed(
                    reason=str(raw.get("reason", "")), field=str(raw.get("field", "*")),
                    kind=str(raw.get("kind", "diff")), when=dict(raw.get("when", {})),
                    divergence=raw.get("divergence")))
            except (ValueError, TypeError, AttributeError) as exc:
                raise MalformedError(f"{os.fspath(path)} line {number}: {exc}") from exc
    return entries


def allowed(entries: Sequence[Allowed], kind: str, name: str, example: Example,
            ref: Reference) -> Allowed | None:
    return next((a for a in entries if a.matches(kind, name, example, ref)), None)


def plain(value: Any) -> Any:
    """A value as JSON shows it (bytes as hex, tuples as lists)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _text(value: str) -> str:
    text = value.strip().lower()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text.replace(":", "") if all(c in "0123456789abcdef:" for c in text) else text


def same(expected: Any, got: Any) -> bool:
    """Equal after the plain conversions of the module docstring."""
    expected, got = plain(expected), plain(got)
    if isinstance(expected, list) or isinstance(got, list):
        return isinstance(expected, list) and isinstance(got, list) and \
            len(expected) == len(got) and all(same(e, g) for e, g in zip(expected, got, strict=True))
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected == got
    if isinstance(expected, int) and isinstance(got, str):
        try:
            return int(got, 0) == expected
        except ValueError:
            return False
    if isinstance(expected, str) and isinstance(got, str):
        return _text(expected) == _text(got)
    return expected == got


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def difference(expected: Any, got: Any) -> str:
    """The kind of a difference, the same for one mistake whatever the packet: ``invented``
    (ibwire has no such field), ``null`` (the target gave null), ``low N bits`` (an integer
    cut to its low N bits, N a multiple of 8), ``byte order`` (its bytes reversed, 2 to 8 of
    them), ``off by +D`` (|D| <= 8), else ``other value``."""
    if expected is ABSENT:
        return "invented"
    if got is None:
        return "null"
    want, have = _integer(expected), _integer(got)
    if want is None or have is None or want < 0 or have < 0:
        return "other value"
    for bits in range(56, 0, -8):
        if want >> bits and have == want & ((1 << bits) - 1):
            return f"low {bits} bits"
    for size in range(2, 9):
        if want < 1 << 8 * size and have == int.from_bytes(want.to_bytes(size, "big"), "little"):
            return "byte order"
    if abs(have - want) <= 8:
        return f"off by {have - want:+d}"
    return "other value"


def diffs(ref: Reference, claims: Mapping[str, Any]) -> list[Diff]:
    """Where ``claims`` disagree with ibwire."""
    out = []
    for key, got in claims.items():
        if key in ref.fields:
            if not same(ref.fields[key], got):
                out.append(Diff(key, plain(ref.fields[key]), plain(got)))
        elif ref.clean and got is not None:
            out.append(Diff(key, ABSENT, plain(got)))
    return out
