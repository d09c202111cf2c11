"""The in-flight mutator: a hook for ``ibwire.impair``'s forwarder that changes live RoCE
packets on their way between two endpoints.

``hook(frame, direction, state)`` is called for every InfiniBand/RoCE frame the forwarder
carries; it returns None (forward as is), ``[]`` (drop) or the frames to send instead.
:class:`InFlightMutator` picks frames at ``rate`` (a seeded choice, so the same seed and the
same traffic pick the same frames) and replaces each with a mutation drawn through
hypothesis (:class:`~ibwire.livefuzz.drawer.Drawer`) from :func:`mutations`:

- field-aware lies on the frame's own values: its PSN moved to the window's edges, its
  opcode changed to a neighbour in or out of sequence (FIRST <-> MIDDLE <-> LAST <-> ONLY),
  RETH/AtomicETH values at their edges, AETH syndrome and MSN, P_Key, DETH Q_Key, and for a
  CM MAD one field of its attribute (:func:`~ibwire.strategies.mad_fields`' values);
- :func:`~ibwire.strategies.mutated` on the frame: bit flips, truncation, lying lengths,
  placed header breaks;

with the CRCs computed again where the length fields place them (``reseal``), so that the
receiver parses on. Everything it changed is kept in :attr:`InFlightMutator.log` (original
and sent frames, direction, kind): the packets to shrink when an oracle complains.

The hook is pure (no I/O): the tests feed it frames from ``ibwire gen`` captures without any
forwarder; :func:`run_inflight` plugs it into ``ibwire.impair.Forwarder``.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ibwire.builder import build
from ibwire.dissect import parse
from ibwire.errors import IbwireError
from ibwire.fuzz.generate import reseal
from ibwire.livefuzz.drawer import Drawer
from ibwire.livefuzz.shots import LENGTH_EDGES, PSN_EDGES, U32_EDGES, U64_EDGES
from ibwire.livefuzz.state import PSN_MOD, ROCE_V2
from ibwire.pcap.writer import PcapWriter
from ibwire.scan.program import field_bits
from ibwire.strategies import GeneratedPacket, mad_fields, mutated
from ibwire.tables import mad_attributes, opcodes

#: Opcodes of one message's packets, by transport: a lie moves within the family (IBA 9.2
#: table 38): SEND FIRST/MIDDLE/LAST/ONLY, WRITE FIRST/MIDDLE/LAST/ONLY, READ RESPONSE ...
SEQUENCES = ((0x00, 0x01, 0x02, 0x04), (0x06, 0x07, 0x08, 0x0A), (0x0D, 0x0E, 0x0F, 0x10),
             (0x20, 0x21, 0x22, 0x24), (0x26, 0x27, 0x28, 0x2A))
#: Keys a lie may set, with their edge values (others: any value of their width).
EDGES: dict[str, tuple[int, ...]] = {
    "reth.dmalen": LENGTH_EDGES, "reth.va": U64_EDGES, "reth.r_key": U32_EDGES,
    "atomiceth.va": U64_EDGES, "atomiceth.r_key": U32_EDGES,
    "atomiceth.swapdt": U64_EDGES, "atomiceth.cmpdt": U64_EDGES,
    "aeth.syndrome": (0x00, 0x1F, 0x20, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x9F, 0xFF),
    "aeth.msn": (0, 1, PSN_MOD - 1, 1 << 23), "bth.p_key": (0, 0x7FFF, 0x8000, 0xFFFE),
    "deth.q_key": (0, 0x80010000, 0x7FFFFFFF, 0xFFFFFFFF),
}


@dataclass(frozen=True)
class Mutated:
    """One frame the mutator changed: what came in, what went out, and how."""

    direction: int
    original: bytes
    sent: tuple[bytes, ...]
    kind: str
    opcode: int


def _lie(key: str) -> st.SearchStrategy[int]:
    edges = EDGES.get(key, (0,))
    bits = field_bits(key)  # as the header declares it
    return st.one_of(st.sampled_from(edges), st.integers(0, (1 << bits) - 1))


@st.composite
def mutations(draw: st.DrawFn, frame: bytes) -> tuple[bytes, str] | None:
    """A mutation of ``frame`` (a RoCEv2 frame) and its kind; None when it is not one."""
    try:
        packet = parse(frame)
    except IbwireError:
        return None
    if packet.encapsulation not in ROCE_V2 or packet.icrc is None or packet.error:
        return None
    fields = {k: v for k, v in packet.fields().items() if k not in packet.derived}
    fields.pop("icrc", None)
    opcode = int(fields["bth.opcode"])
    choices = ["psn", "opcode", "mutated", "pkey"]
    choices += [k for k in EDGES if k in fields and k != "bth.p_key"]
    if fields.get("mad.mgmtclass") is not None and (fields["mad.mgmtclass"],
                                                    fields.get("mad.attributeid")) in \
            mad_attributes():
        choices += ["mad"] * 3
    how = draw(st.sampled_from(choices))
    if how == "mutated":
        good = GeneratedPacket(frame, "ethernet", packet.encapsulation, opcode, fields,
                               packet.payload)
        m = draw(mutated(st.just(good)).filter(
            lambda m: m.kind != "crc" and not (m.kind == "bitflip" and m.where == "eth")))
        return reseal(m.frame, "ethernet"), f"mutated {m.kind} {m.where}"
    if how == "psn":
        fields["bth.psn"] = (fields["bth.psn"] + draw(st.sampled_from(PSN_EDGES[3:])
                                                      | st.integers(0, PSN_MOD - 1))) % PSN_MOD
    elif how == "opcode":
        family = next((s for s in SEQUENCES if opcode in s), None)
        if family is None:
            return None
        fields["bth.opcode"] = draw(st.sampled_from([o for o in family if o != opcode]))
        if not _same_headers(opcode, fields["bth.opcode"]):
            # the headers differ: the bytes stay, the opcode byte lies (a placed break)
            buf = bytearray(frame)
            bth = packet.header("bth")
            assert bth is not None
            buf[bth.offset] = fields["bth.opcode"]
            return reseal(buf, "ethernet"), "opcode"
    elif how == "pkey":
        fields["bth.p_key"] = draw(_lie("bth.p_key"))
    elif how == "mad":
        attribute = mad_attributes()[(fields["mad.mgmtclass"], fields["mad.attributeid"])]
        other = draw(mad_fields(attribute))
        body = sorted(k for k in other if not k.startswith(("mad.", "rmpp.", "sa.")))
        if not body:
            return None
        key = draw(st.sampled_from(body))
        fields[key] = other[key]
        how = f"mad {key}"
    else:
        fields[how] = draw(_lie(how))
    try:
        out = build(packet.encapsulation, fields, packet.payload, pad=packet.pad)
    except IbwireError:
        return None
    return out, how


def _same_headers(a: int, b: int) -> bool:
    table = opcodes()
    return a in table and b in table and table[a].headers == table[b].headers and \
        table[a].payload == table[b].payload


@dataclass
class InFlightMutator:
    """The hook: mutate a ``rate`` share of the RoCE frames (seeded), keep a log."""

    rate: float = 0.01
    seed: int = 0
    drawer: Drawer | None = None
    log: list[Mutated] = field(default_factory=list)
    frames: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    opcodes: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate {self.rate} is not between 0 and 1")
        self._random = random.Random(self.seed)
        self._own_drawer = self.drawer is None
        if self.drawer is None:
            self.drawer = Drawer(self.seed)

    def __call__(self, frame: bytes, direction: int, state: Any = None
                 ) -> Sequence[bytes] | None:
        self.frames += 1
        if self._random.random() >= self.rate:
            return None
        assert self.drawer is not None
        found = self.drawer.draw(mutations(bytes(frame)))
        if found is None:
            return None
        out, kind = found
        if out == bytes(frame):  # the lie drew the value the frame had
            return None
        word = kind.split()[0] if not kind.startswith("mutated") else " ".join(
            kind.split()[:2])
        self.kinds[word] = self.kinds.get(word, 0) + 1
        try:
            opcode = int(parse(bytes(frame)).fields().get("bth.opcode", -1))
        except IbwireError:
            opcode = -1
        self.opcodes[opcode] = self.opcodes.get(opcode, 0) + 1
        self.log.append(Mutated(direction, bytes(frame), (out,), kind, opcode))
        return [out]

    def since(self, mark: int) -> list[Mutated]:
        """The mutations made after the first ``mark`` (a previous ``len(log)``)."""
        return self.log[mark:]

    def close(self) -> None:
        if self._own_drawer and self.drawer is not None:
            self.drawer.close()


class ImpairMissing(IbwireError):
    """``ibwire.impair`` (the forwarder the in-flight mode needs) is not installed."""


def forwarder_class() -> type:
    """``ibwire.impair.Forwarder``, or :class:`ImpairMissing` saying what is missing."""
    try:
        from ibwire.impair import Forwarder  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ImpairMissing(
            "the live target mutates frames in flight through ibwire impair's forwarder "
            f"(ibwire.impair.Forwarder), which this installation lacks ({exc}); without it, "
            "inject into a live connection with tools/fuzz_live.py") from None
    return Forwarder  # type: ignore[no-any-return]


def run_inflight(iface_a: str, iface_b: str, out: str | os.PathLike[str], rate: float,
                 seed: int = 0, duration: float | None = None, count: int | None = None
                 ) -> dict[str, Any]:
    """Forward between ``iface_a`` and ``iface_b`` through ``ibwire.impair.Forwarder`` with an
    :class:`InFlightMutator` as its hook; write ``OUT/mutations.pcap`` (each mutated frame
    as it came, then as it was sent), ``OUT/mutations.jsonl`` (direction, kind, opcode per
    mutation) and ``OUT/summary.json``; the summary."""
    forwarder_type = forwarder_class()
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    mutator = InFlightMutator(rate, seed)
    forwarder = forwarder_type(iface_a, iface_b, plan=None, hook=mutator,
                               capture=str(directory / "forwarded.pcap"))
    try:
        forwarder.run(duration=duration, count=count)
    finally:
        forwarder.stop()
    with PcapWriter(directory / "mutations.pcap", 1) as writer:
        for i, m in enumerate(mutator.log):
            for j, frame in enumerate((m.original, *m.sent)):
                writer.write(frame, 1_700_000_000_000_000_000 + i * 1_000_000 + j * 1000)
    (directory / "mutations.jsonl").write_text("".join(
        json.dumps({"direction": m.direction, "kind": m.kind, "opcode": m.opcode}) + "\n"
        for m in mutator.log))
    summary = {"frames": mutator.frames, "mutated": len(mutator.log), "rate": rate,
               "seed": seed, "kinds": mutator.kinds,
               "opcodes": {f"{k:#04x}": v for k, v in sorted(mutator.opcodes.items())}}
    (directory / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
