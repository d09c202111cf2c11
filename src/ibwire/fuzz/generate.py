"""What ``ibwire fuzz`` sends: hypothesis strategies of whole frames, per mode.

* ``valid`` -- :func:`ibwire.strategies.packets`: every encapsulation of the link type, every
  opcode, MADs, field values anywhere in their bit widths (hypothesis favours the boundaries);
* ``invalid`` -- :func:`ibwire.strategies.mutated`: one thing made wrong (a header bit, a
  truncation, a lying length or PadCnt, an opcode bit);
* ``bytes`` -- a valid frame with a few bytes set, inserted or deleted;
* ``all`` -- any of the three.

After a mutation the ICRC and VCRC are computed again where the (possibly lying) length
fields place them (:func:`ibwire.crc.fix`, lenient), so that a target does not stop at its CRC
check; ``break_icrc`` leaves them as the mutation left them (and lets ``invalid`` corrupt
them on purpose). Everything is drawn through hypothesis, so a finding can be shrunk by
drawing again (:mod:`ibwire.fuzz.minimise`), and a seed gives the same frames
(:func:`draw_examples`).

To fuzz with another strategy, add a function to :data:`MODES` that takes a
:class:`Shape` and returns a strategy of :class:`Example`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ibwire import crc
from ibwire.errors import IbwireError
from ibwire.strategies import GeneratedPacket, Mutation, mutated, packets

LINKTYPE_ETHERNET = 1
LINKTYPE_INFINIBAND = 247
#: pcap link type -> (ibwire link, encapsulations generated for it).
LINKTYPES: dict[int, tuple[str, tuple[str, ...]]] = {
    LINKTYPE_ETHERNET: ("ethernet", ("rocev2_ipv4", "rocev2_ipv6", "rocev1")),
    LINKTYPE_INFINIBAND: ("infiniband", ("ib_local", "ib_global")),
}


@dataclass(frozen=True)
class Example:
    """One generated frame, how it was made, and what it was made from."""

    frame: bytes
    link: str
    mode: str
    encapsulation: str
    opcode: int
    what: str
    """How it was broken ("" for a valid frame)."""

    def describe(self) -> str:
        return f"{self.mode} {self.encapsulation} opcode 0x{self.opcode:02x}" + \
            (f" ({self.what})" if self.what else "")


@dataclass(frozen=True)
class Shape:
    """What the strategies may draw: the link type, and optionally one encapsulation and
    opcode (a finding's, when it is shrunk)."""

    linktype: int = LINKTYPE_ETHERNET
    break_icrc: bool = False
    encapsulation: str | None = None
    opcode: int | None = None

    @property
    def link(self) -> str:
        return LINKTYPES[self.linktype][0]

    def base(self) -> st.SearchStrategy[GeneratedPacket]:
        """Valid packets of this shape, on the link type's link only."""
        encs = (self.encapsulation,) if self.encapsulation else LINKTYPES[self.linktype][1]
        link = self.link
        return st.sampled_from(encs).flatmap(
            lambda enc: packets(enc, self.opcode)).filter(lambda g: g.link == link)


def reseal(frame: bytes | bytearray, link: str) -> bytes:
    """``frame`` with its CRCs computed again where its length fields place them (unchanged
    when they place none)."""
    buf = bytearray(frame)
    try:
        crc.fix(buf, link, lenient=True)
    except IbwireError:
        pass
    return bytes(buf)


def _valid(shape: Shape) -> st.SearchStrategy[Example]:
    return shape.base().map(lambda g: Example(g.frame, g.link, "valid", g.encapsulation,
                                              g.opcode, ""))


def _from_mutation(m: Mutation, shape: Shape) -> Example:
    frame = m.frame if shape.break_icrc else reseal(m.frame, m.link)
    g = m.original
    return Example(frame, m.link, "invalid", g.encapsulation, g.opcode, f"{m.kind} {m.where}")


def _invalid(shape: Shape) -> st.SearchStrategy[Example]:
    found = mutated(shape.base())
    if not shape.break_icrc:  # a CRC mutation is undone by the reseal
        found = found.filter(lambda m: m.kind != "crc")
    return found.map(lambda m: _from_mutation(m, shape))


#: One byte edit: (kind, position as a fraction of the frame in 1/65536, value).
_EDIT = st.tuples(st.sampled_from(("set", "insert", "delete")), st.integers(0, 0xFFFF),
                  st.integers(0, 255))


def apply_edits(frame: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    """``frame`` with the byte ``edits`` applied in order."""
    buf = bytearray(frame)
    for kind, where, value in edits:
        at = where * (len(buf) + (kind == "insert")) >> 16
        if kind == "insert":
            buf[at:at] = bytes([value])
        elif buf and kind == "delete":
            del buf[min(at, len(buf) - 1)]
        elif buf:
            buf[min(at, len(buf) - 1)] = value
    return bytes(buf)


def _bytes(shape: Shape) -> st.SearchStrategy[Example]:
    def make(g: GeneratedPacket, edits: list[tuple[str, int, int]]) -> Example:
        frame = apply_edits(g.frame, edits)
        if not shape.break_icrc:
            frame = reseal(frame, g.link)
        what = ", ".join(f"{k} {w * len(g.frame) >> 16}={v:#04x}" for k, w, v in edits)
        return Example(frame, g.link, "bytes", g.encapsulation, g.opcode, what)
    return st.builds(make, shape.base(), st.lists(_EDIT, min_size=1, max_size=4))


MODES: dict[str, Callable[[Shape], st.SearchStrategy[Example]]] = {
    "valid": _valid,
    "invalid": _invalid,
    "bytes": _bytes,
}
"""Mode name -> strategy of examples; ``all`` draws from every entry."""


def strategy(mode: str, shape: Shape) -> st.SearchStrategy[Example]:
    """The examples of ``mode`` ("all": any mode) for ``shape``."""
    if mode == "all":
        return st.one_of(*(make(shape) for make in MODES.values()))
    return MODES[mode](shape)


def draw_examples(found: st.SearchStrategy[Any], count: int, seed: int) -> list[Any]:
    """``count`` examples of ``found``, the same for the same ``seed``: hypothesis's own
    generation (small and boundary values first), without its database or shrinking."""
    out: list[Any] = []

    @settings(database=None, max_examples=count, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(found)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out[:count]
