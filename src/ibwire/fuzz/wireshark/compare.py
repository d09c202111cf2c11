"""The comparison machinery: what ibwire says tshark must show, against what tshark shows.

For every frame the test builds an *expected view* from ibwire's :class:`~ibwire.Packet`:
one entry per tshark field of the mapping table (``FIELDS`` in test_tshark.py), as the
list of values tshark must print (empty: tshark must not show the field). Declared
divergences then rewrite that view into what tshark 4.0.17 really shows where it is wrong
(a model of the mistake, so that a fixed tshark fails the test and says which entry to drop).
The view is compared with tshark's output in both directions: a value that differs, a field
tshark shows that is neither mapped nor listed as not compared, a field tshark fails to show,
an unexpected expert item or payload dissector -- each is a :class:`Mismatch`.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ibwire import Packet
from ibwire.fuzz.wireshark.dissection import Dissection
from ibwire.tables import opcodes

#: Pseudo-fields of the expected view (not tshark field names).
MALFORMED = "tshark:malformed"
DISSECTED_BY = "tshark:payload-dissectors"

Expected = dict[str, list[Any]]


class NotModelled(AssertionError):
    """The model cannot say what tshark shows for this frame: the frame is not compared
    (counted in :attr:`Tally.skipped` with this reason), never a mismatch."""


def read_value(kind: str, text: str) -> Any:
    """A tshark JSON value as a comparable Python value."""
    if kind == "int":
        return int(text, 0)
    if kind == "bytes":
        return bytes.fromhex(text.replace(":", ""))
    if kind == "mac":
        return text.lower()
    if kind == "ipv4":
        return str(ipaddress.IPv4Address(text))
    if kind == "ipv6":
        return str(ipaddress.IPv6Address(text))
    if kind == "text":
        return text
    raise ValueError(f"unknown kind {kind!r}")


def show(value: Any) -> str:
    if isinstance(value, bytes):
        return value.hex() if len(value) <= 24 else f"{value[:20].hex()}...({len(value)} B)"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value} (0x{value:x})"
    return repr(value)


class View:
    """ibwire's side of one frame: the Packet, its flat fields, and the IB packets before it
    in the same file (``history``, for tshark state that spans frames)."""

    def __init__(self, packet: Packet, history: Sequence[View] = ()) -> None:
        self.packet = packet
        self.fields = packet.fields()
        self.history = history
        self.memo: dict[str, Any] = {}

    def __contains__(self, header: str) -> bool:
        return self.packet.header(header) is not None

    @property
    def opcode(self) -> int | None:
        return self.fields.get("bth.opcode")

    def bytes_of(self, header: str) -> bytes | None:
        h = self.packet.header(header)
        return None if h is None else self.packet.frame[h.offset:h.offset + h.length]

    @property
    def transport_start(self) -> int:
        return self.packet.header("bth").offset

    @property
    def transport_end(self) -> int:
        """The end of the ICRC (of the VCRC on native IB): where tshark's tvb ends."""
        p = self.packet
        if p.vcrc_offset is not None:
            return p.vcrc_offset + 2
        assert p.icrc_offset is not None
        return p.icrc_offset + 4


@dataclass(frozen=True)
class Field:
    """How ibwire gives the value of one tshark field."""

    ibwire: str
    """The ibwire key, or the expression in ibwire terms (for the report)."""
    kind: str
    """How tshark's text is read: int, bytes, mac, ipv4, ipv6, text."""
    get: Callable[[View], list[Any]]


def key(name: str, kind: str = "int") -> Field:
    """ibwire's ``fields()[name]``; a tuple (VLAN) gives one value per tag."""
    def get(view: View) -> list[Any]:
        if name not in view.fields:
            return []
        value = view.fields[name]
        return list(value) if isinstance(value, tuple) else [value]
    return Field(name, kind, get)


def computed(text: str, kind: str, fn: Callable[[View], Any]) -> Field:
    """A value computed from ibwire's (``None``: absent)."""
    def get(view: View) -> list[Any]:
        value = fn(view)
        return [] if value is None else [value]
    return Field(text, kind, get)


def header_bytes(name: str) -> Field:
    """The bytes of one of ibwire's headers, as tshark's header item (FT_BYTES) shows them."""
    return computed(f"bytes of ibwire's {name} header", "bytes", lambda v: v.bytes_of(name))


def byte_of(text: str, name: str, *fields_: tuple[str, int]) -> Field:
    """One byte assembled from bit fields ``(key, shift)`` of header ``name``."""
    def fn(view: View) -> bytes | None:
        if name not in view:
            return None
        return bytes([sum(view.fields[k] << shift for k, shift in fields_)])
    return computed(text, "bytes", fn)


def tags(name: str, outer: bool) -> Field:
    """VLAN tag values: tshark shows an 802.1ad (TPID 0x88a8) tag as ``ieee8021ad`` and an
    802.1Q (0x8100) tag as ``vlan``."""
    def get(view: View) -> list[Any]:
        values = view.fields.get(name, ())
        tpids = (view.fields.get("eth.type"), *view.fields.get("vlan.etype", ()))
        return [v for v, tpid in zip(values, tpids, strict=False) if (tpid == 0x88A8) == outer]
    return Field(f"{name} (tags with TPID {'0x88a8' if outer else '0x8100'})", "int", get)


def swapped(name: str, size: int) -> Field:
    """A CRC: tshark reads the wire bytes big-endian, ibwire's value is the little-endian
    reading (IBA 7.8), so tshark's number is ibwire's byte-swapped."""
    def fn(view: View) -> int | None:
        value = view.fields.get(name)
        return None if value is None else int.from_bytes(value.to_bytes(size, "little"), "big")
    return computed(f"{name}, byte-swapped", "int", fn)


@dataclass(frozen=True)
class Divergence:
    """A known tshark mistake: when it applies, and what tshark shows instead."""

    name: str
    reason: str
    applies: Callable[[View], bool]
    model: Callable[[View, Expected], None]
    """Rewrites the expected view into tshark's wrong output."""
    check: Callable[[View, Dissection], str | None] | None = None
    """Further proof on tshark's output that the mistake happens (None: proven); for what the
    expected view cannot hold, such as the bytes of a reassembly."""


@dataclass(frozen=True)
class Mismatch:
    where: str
    key: str
    expected: list[Any]
    actual: list[Any]
    note: str = ""

    def __str__(self) -> str:
        exp = ", ".join(show(v) for v in self.expected) or "(absent)"
        act = ", ".join(show(v) for v in self.actual) or "(absent)"
        note = f"  [{self.note}]" if self.note else ""
        return f"{self.where}: {self.key}: ibwire/model {exp} != tshark {act}{note}"


@dataclass
class Tally:
    """Counts over all compared frames."""

    packets: int = 0
    values: int = 0
    per_field: Counter[str] = field(default_factory=Counter)
    not_compared: Counter[str] = field(default_factory=Counter)
    divergences: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    """Reason -> frames not compared because the model cannot say what tshark shows."""
    mismatches: list[Mismatch] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.packets += other.packets
        self.values += other.values
        self.per_field.update(other.per_field)
        self.not_compared.update(other.not_compared)
        self.divergences.update(other.divergences)
        self.skipped.update(other.skipped)
        self.mismatches.extend(other.mismatches)


@dataclass(frozen=True)
class Tables:
    fields: Mapping[str, Field]
    not_compared: Mapping[str, str]
    """fnmatch pattern on the qualified key -> why tshark's field is not compared."""
    experts: Mapping[str, str]
    """tshark expert item -> why it may appear (malformation is a pseudo-field instead)."""
    payload_dissectors: Mapping[str, str]
    """Protocol tshark may hand the IB payload to -> why that is not a divergence."""
    divergences: Sequence[Divergence]
    payload_dissector: Callable[[View], str | None]
    """The protocol tshark hands this frame's payload to (None: its raw-data dissector)."""
    conditional_experts: Mapping[str, tuple[str, Callable[[View], bool], bool]] = \
        field(default_factory=dict)
    """Expert pattern -> (why, when it is right, whether tshark must then show it)."""

    def not_compared_reason(self, qkey: str) -> str | None:
        for pattern, reason in self.not_compared.items():
            if fnmatch.fnmatchcase(qkey, pattern):
                return reason
        return None


def expected_view(view: View, tables: Tables, applied: list[str] | None = None) -> Expected:
    expected: Expected = {k: f.get(view) for k, f in tables.fields.items()}
    expected[MALFORMED] = []
    first = tables.payload_dissector(view)
    expected[DISSECTED_BY] = [] if first is None else [first]
    for divergence in tables.divergences:
        if divergence.applies(view):
            before = {k: list(v) for k, v in expected.items()}
            divergence.model(view, expected)
            if expected == before:
                raise AssertionError(f"divergence {divergence.name!r} applies to "
                                     f"{view.packet.frame.hex()} but changes nothing")
            if applied is not None:
                applied.append(divergence.name)
    return expected


#: What follows the point where ibwire reports a frame as broken (bytes after the headers of
#: an opcode that carries no payload, a MAD cut short): not compared on such a frame.
AFTER_BREAK = ("data/*", "infiniband/infiniband.payload", "infiniband.payload/*",
               "infiniband/infiniband.invariant.crc", "infiniband/infiniband.variant.crc",
               "infiniband/infiniband.vendor", "infiniband.vendor/*", "infiniband/infiniband.mad",
               "infiniband.mad/*", "infiniband.rmpp/*", MALFORMED, DISSECTED_BY)
_BREAKS = ("carries no payload", "too short for")


def broken_at(view: View) -> str | None:
    """ibwire's reason when the frame is broken after its headers (None: it is not)."""
    return next((w for w in view.packet.warnings if any(b in w for b in _BREAKS)), None)


def _check_modelled(view: View) -> None:
    """Raise NotModelled for frames whose tshark output the model cannot give."""
    op = opcodes().get(view.opcode) if view.opcode is not None else None
    if op is not None and op.transport != "UD" and view.fields.get("bth.destqp") in (0, 1):
        # QP0/QP1 are UD only (IBA 13.5.1): tshark takes its management path for them
        raise NotModelled(f"a {op.transport} packet to QP{view.fields['bth.destqp']}: "
                          "not modelled")
    if view.packet.encapsulation == "rocev1" and view.packet.trailer:
        # ibwire ends the packet where the GRH's PayLen says (IBA 8.3.1); tshark at the frame
        raise NotModelled("RoCEv1 with bytes after the GRH's PayLen: tshark takes them as "
                          "the packet's (payload, ICRC): not modelled")


def compare(view: View | None, dissection: Dissection, tables: Tables, where: str,
            error: str | None = None) -> Tally:
    """Compare one frame; ``view`` is None when ibwire saw no IB packet (``error`` why)."""
    tally = Tally(packets=1)
    if view is None:
        tally.mismatches.append(Mismatch(where, "ibwire", [error or "no IB packet"],
                                         ["infiniband"]))
        return tally
    applied: list[str] = []
    try:
        _check_modelled(view)
        expected = expected_view(view, tables, applied)
    except NotModelled as exc:
        tally.skipped[str(exc)] += 1
        return tally
    except AssertionError as exc:
        tally.mismatches.append(Mismatch(where, "divergence", [str(exc)], []))
        return tally
    tally.divergences.update(applied)
    actual_text = dissection.fields
    after_ib = dissection.layers[dissection.layers.index("infiniband") + 1:]
    inner_layers = [n for n in after_ib if not n.startswith("_ws.")]
    if inner_layers[:1] == ["data"] and "data/data.data" in actual_text:
        inner_layers = inner_layers[1:]  # the raw-data layer right after the IB layer
    note = ", ".join(applied)
    broken = broken_at(view)
    if broken is not None:
        tally.skipped[f"broken after its headers ({broken.split(',')[0]}): payload, MAD and "
                      "CRCs not compared"] += 1
    for qkey in sorted(set(expected) | set(actual_text)):
        if qkey in (MALFORMED, DISSECTED_BY):
            continue
        if broken is not None and any(fnmatch.fnmatchcase(qkey, p) for p in AFTER_BREAK):
            continue
        spec = tables.fields.get(qkey)
        if spec is None:
            reason = tables.not_compared_reason(qkey)
            if reason is None:
                tally.mismatches.append(Mismatch(where, qkey, ["(no mapping)"],
                                                 actual_text[qkey], "unmapped tshark field"))
            else:
                tally.not_compared[qkey] += len(actual_text[qkey])
            continue
        want = expected.get(qkey, [])
        try:
            got = [read_value(spec.kind, t) for t in actual_text.get(qkey, [])]
        except ValueError as exc:
            tally.mismatches.append(Mismatch(where, qkey, want, actual_text[qkey], str(exc)))
            continue
        if want != got:
            tally.mismatches.append(Mismatch(where, f"{qkey} <- {spec.ibwire}", want, got, note))
        else:
            tally.values += len(got)
            tally.per_field[qkey] += len(got)
    malformed = ["malformed"] if dissection.malformed else []
    if malformed != expected[MALFORMED] and broken is None:
        tally.mismatches.append(Mismatch(where, MALFORMED, expected[MALFORMED], malformed, note))
    right = {pattern: required for pattern, (_why, when, required)
             in tables.conditional_experts.items() if when(view)}
    for pattern, required in right.items():
        if required and not fnmatch.filter(dissection.experts, pattern):
            tally.mismatches.append(Mismatch(where, "expert", [pattern], dissection.experts,
                                             tables.conditional_experts[pattern][0]))
    for expert in dissection.experts:
        if expert.startswith("_ws.malformed"):
            continue
        if expert not in tables.experts and \
                not any(fnmatch.fnmatchcase(expert, p) for p in right):
            tally.mismatches.append(Mismatch(where, "expert", [], [expert],
                                             "unlisted tshark expert item"))
    want = expected[DISSECTED_BY]
    if broken is not None:
        inner_layers = want = []
    if inner_layers[:1] != want[:1]:
        tally.mismatches.append(Mismatch(where, DISSECTED_BY, want, inner_layers, note))
    for name in inner_layers:
        if name not in tables.payload_dissectors:
            tally.mismatches.append(Mismatch(where, DISSECTED_BY, [], [name],
                                             "unlisted payload dissector"))
    for divergence in tables.divergences:
        if divergence.name in applied and divergence.check is not None:
            problem = divergence.check(view, dissection)
            if problem is not None:
                tally.mismatches.append(Mismatch(where, f"divergence {divergence.name!r}",
                                                 [], [problem], "its check failed"))
    return tally

