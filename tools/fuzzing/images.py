"""Fuzzer bytes -> inputs: one frame and its link, or a whole pcap/pcapng file image.

An input's first byte chooses how the rest is read: even, the rest is used as it is (the frame,
or the capture file, so libFuzzer's own mutations reach every byte of the container); odd, the
rest drives hypothesis strategies (``ibwire.strategies``, ``ibwire.mad_strategies``) through
``fuzz_one_input``, and the frames drawn are packed into a capture image with the faults
readers meet: a lying caplen or block length, a cut file, garbage between records, a
byte-swapped header, SLL/SLL2 headers in front of the frames.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.mad_strategies import bad_mads, mad_packets
from ibwire.strategies import cut_packets, mutated, packets

T = TypeVar("T")
LINKS = ("ethernet", "infiniband", "ip", "grh")
#: LINKTYPE_ numbers (tcpdump.org link-layer header types) for each link, and the SLL ones.
LINKTYPES = {"ethernet": 1, "infiniband": 247, "ip": 101, "sll": 113, "sll2": 276}


def drawer(strategy: st.SearchStrategy[T]) -> Callable[[bytes], T | None]:
    """A function giving the value ``strategy`` draws from a byte string (None when the bytes
    run out first), through hypothesis's public fuzzing entry (``fuzz_one_input``)."""
    box: list[T] = []

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def keep(value: T) -> None:
        box.append(value)

    def draw(data: bytes) -> T | None:
        box.clear()
        keep.hypothesis.fuzz_one_input(data)  # type: ignore[attr-defined]
        return box[0] if box else None

    return draw


def _linked(value: Any) -> tuple[bytes, str]:
    return bytes(value.frame), value.link


def frames() -> st.SearchStrategy[tuple[bytes, str]]:
    """One frame and its link: valid, broken, cut by a snap length, a MAD (good or bad), or
    random bytes on any link."""
    return st.one_of(
        packets().map(_linked), mutated().map(_linked), cut_packets().map(_linked),
        mad_packets().map(_linked), bad_mads().map(_linked),
        st.tuples(st.binary(max_size=200), st.sampled_from(LINKS)))


@st.composite
def faults(draw: st.DrawFn) -> dict[str, Any]:
    """How a capture image is broken (most images are left whole)."""
    return {
        "lie": draw(st.sampled_from([0] * 6 + [1, -1, 4, -4, 1 << 16, 1 << 31])),
        "lie_at": draw(st.integers(0, 15)),
        "cut": draw(st.one_of(st.none(), st.integers(0, 1 << 16))),
        "garbage": draw(st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
        "garbage_at": draw(st.integers(0, 15)),
    }


@st.composite
def captures(draw: st.DrawFn) -> bytes:
    """A pcap or pcapng file image of drawn frames, maybe broken (:func:`faults`)."""
    items = [_carried(frame, link) for frame, link in
             draw(st.lists(frames(), min_size=1, max_size=8))]
    wrap = draw(st.sampled_from(["", "", "", "sll", "sll2"]))
    link = items[0][1] if not wrap else "sll"
    records = [(_wrapped(frame, wrap), frame_link) for frame, frame_link in items]
    big = draw(st.booleans())
    fault = draw(faults())
    if draw(st.booleans()):
        image = _pcap(records, LINKTYPES[wrap or link], big, draw(st.booleans()), fault)
    else:
        image = _pcapng(records, wrap, big, draw(st.sampled_from([None, 0, 3, 9, 0x86])), fault)
    if fault["cut"] is not None:
        image = image[: fault["cut"]]
    return image


def _carried(frame: bytes, link: str) -> tuple[bytes, str]:
    """A frame that starts at a GRH (RoCEv1 without its link header) behind Ethernet, as
    captures have it (EtherType 0x8915); other links as they are."""
    if link == "grh":
        return bytes(12) + b"\x89\x15" + frame, "ethernet"
    return frame, link


def _wrapped(frame: bytes, wrap: str) -> bytes:
    """``frame`` behind a Linux cooked header (SLL: 16 bytes, SLL2: 20) naming it IPv4."""
    if wrap == "sll":
        return struct.pack(">HHH8sH", 0, 1, 6, b"\0" * 8, 0x0800) + frame
    if wrap == "sll2":
        return struct.pack(">HHIHBB8s", 0x0800, 0, 1, 1, 0, 6, b"\0" * 8) + frame
    return frame


def _lying(n: int, index: int, fault: dict[str, Any]) -> int:
    if index != fault["lie_at"]:
        return n
    return max(0, min(n + fault["lie"], 0xFFFFFFFF))


def _pcap(records: list[tuple[bytes, str]], linktype: int, big: bool, nanoseconds: bool,
          fault: dict[str, Any]) -> bytes:
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = bytearray(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype))
    for i, (frame, _link) in enumerate(records):
        if i == fault["garbage_at"] and fault["garbage"]:
            out += fault["garbage"]
        out += struct.pack(e + "IIII", 1_700_000_000 + i, i, _lying(len(frame), i, fault),
                           len(frame)) + frame
    return bytes(out)


def _option(code: int, value: bytes, e: str) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def _block(kind: int, body: bytes, e: str, length: int | None = None) -> bytes:
    body += bytes(-len(body) % 4)
    size = 12 + len(body) if length is None else length
    return struct.pack(e + "II", kind, size) + body + struct.pack(e + "I", size)


def _pcapng(records: list[tuple[bytes, str]], wrap: str, big: bool, tsresol: int | None,
            fault: dict[str, Any]) -> bytes:
    """A section of one interface per link used (if_tsresol ``tsresol``), one EPB a frame."""
    e = ">" if big else "<"
    out = bytearray(_block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1), e))
    faces: dict[str, int] = {}
    for i, (frame, link) in enumerate(records):
        key = wrap or link
        if key not in faces:
            faces[key] = len(faces)
            options = b"" if tsresol is None else _option(9, bytes([tsresol]), e)
            options += _option(0, b"", e) if options else b""
            out += _block(1, struct.pack(e + "HHI", LINKTYPES[key], 0, 0) + options, e)
        if i == fault["garbage_at"] and fault["garbage"]:
            out += fault["garbage"]
        body = struct.pack(e + "IIIII", faces[key], 0, i, _lying(len(frame), i, fault),
                           len(frame)) + frame
        lie = 12 + len(body) + (-len(body) % 4) + fault["lie"] if i == fault["lie_at"] else None
        out += _block(6, body, e, None if lie is None else max(0, min(lie, 0xFFFFFFFF)))
    return bytes(out)


_frame = drawer(frames())
_capture = drawer(captures())


def frame_input(data: bytes) -> tuple[bytes, str] | None:
    """One frame and its link name from fuzzer bytes (see the module's docstring)."""
    if not data:
        return None
    if data[0] % 2 == 0:
        return data[2:], LINKS[data[1] % 4] if len(data) > 1 else "ethernet"
    return _frame(data[1:])


def capture_input(data: bytes) -> bytes | None:
    """A capture file image from fuzzer bytes (see the module's docstring)."""
    if not data:
        return None
    if data[0] % 2 == 0:
        return data[1:]
    return _capture(data[1:])
