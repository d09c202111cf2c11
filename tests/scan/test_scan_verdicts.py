"""A packet whose headers are broken: its error AND, where the length fields still place its
CRCs, their verdict -- from ``parse().verify()``, the scanner's columns (both twins) and
``crc.verify_batch`` (both twins).

One case per kind of breakage. Each is made two ways from a frame of the independent oracle
of ``tests/crc/crc_frames.py``: broken after its CRCs were computed (corrupted: the verdict
is bad), and broken before, its CRCs computed by the oracle over the broken bytes (the sender
built it so: the verdict is good). Where the CRC's place cannot be known, no verdict
(None / -1) whichever way it was made.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from ibwire.crc._common import ERROR_NAMES, SITES
from ibwire.dissect import parse
from ibwire.errors import IbwireError, MalformedError
from ibwire.scan import program
from tests.crc.conftest import crc  # noqa: F401 - the CRC twins fixture
from tests.crc.crc_frames import Built, bth, crc16_reference, native_ib, rocev1, rocev2
from tests.scan.expect import scan_one

PAYLOAD = b"8 bytes!"
ETH, IP4, IP6, UDP = 14, 20, 40, 8
MALFORMED = ERROR_NAMES.index("malformed")


def _xor(at: int, bits: int) -> Callable[[bytearray], None]:
    def poke(frame: bytearray) -> None:
        frame[at] ^= bits
    return poke


def _set16(at: int, value: Callable[[int], int], keep: int = 0) -> Callable[[bytearray], None]:
    """Set the big-endian 16-bit field at ``at`` to value(old), keeping the ``keep`` bits."""
    def poke(frame: bytearray) -> None:
        old = struct.unpack_from("!H", frame, at)[0]
        struct.pack_into("!H", frame, at, old & keep | value(old & ~keep & 0xFFFF))
    return poke


def _both(*pokes: Callable[[bytearray], None]) -> Callable[[bytearray], None]:
    def poke(frame: bytearray) -> None:
        for p in pokes:
            p(frame)
    return poke


@dataclass(frozen=True)
class Case:
    id: str
    built: Built
    poke: Callable[[bytearray], None]
    site: tuple[str, str]
    """The scanner's error site (program.SCAN_SITES) and ibwire.parse's (header, field)."""
    parsed: tuple[str, str | None]
    icrc: bool
    """The ICRC's place is known (at the good frame's ICRC offset)."""
    vcrc_at: int | None = None
    """Where the VCRC is placed (native IB), None if nowhere."""


V4 = rocev2(bth(0x04, psn=5) + PAYLOAD)
V6 = rocev2(bth(0x04, psn=5), v6=True)  # an empty SEND ONLY: a PadCnt of 3 lies
V1 = rocev1(bth(0x04, psn=5) + PAYLOAD)
IB2 = native_ib(bth(0x04, psn=5) + PAYLOAD)
IB3 = native_ib(bth(0x04, psn=5) + PAYLOAD, lnh=3)
BTH4 = ETH + IP4 + UDP

PLACED = [
    # SEND ONLY (0x04) -> RDMA READ REQUEST (0x0C): a 16-byte RETH over 8 bytes of payload
    Case("opcode-bit-runs-reth-past-icrc", V4, _xor(BTH4, 0x08), ("RETH", "header"),
         ("reth", None), True),
    Case("padcnt-exceeds-payload", V6, _xor(ETH + IP6 + UDP + 1, 0x30), ("BTH", "padcnt"),
         ("bth", "padcnt"), True),
    Case("udp-length-disagrees-ipv4", V4, _set16(ETH + IP4 + 4, lambda v: v + 4),
         ("UDP", "length"), ("udp", "length"), True),
    Case("udp-length-disagrees-ipv6", V6, _set16(ETH + IP6 + 4, lambda v: v - 4),
         ("UDP", "length"), ("udp", "length"), True),
    Case("rocev1-grh-ipver", V1, _xor(ETH, 0x20), ("GRH", "ipver"), ("grh", "ipver"), True),
    Case("rocev1-grh-next-header", V1, _xor(ETH + 6, 0x0A), ("GRH", "next_header"),
         ("grh", "nxthdr"), True),
    Case("ib-opcode-bit-runs-reth-past-icrc", IB2, _xor(8, 0x08), ("RETH", "header"),
         ("reth", None), True, IB2.vcrc_at),
    Case("ib-grh-next-header", IB3, _xor(8 + 6, 0x40), ("GRH", "next_header"),
         ("grh", "nxthdr"), True, IB3.vcrc_at),
    Case("ib-grh-paylen-disagrees-with-pktlen", IB3, _set16(8 + 4, lambda v: v + 8),
         ("GRH", "payload_length"), ("grh", "paylen"), True, IB3.vcrc_at),
    # PktLen 4 words: no room for the BTH, but the VCRC is at byte 16
    Case("ib-pktlen-leaves-no-room-for-bth", IB2, _set16(4, lambda v: 4, keep=0xF800),
         ("LRH", "packet_length"), ("lrh", "pktlen"), False, 16),
]

NOT_PLACED = [
    ("cut-by-capture-before-icrc", V4, lambda f: f.__delitem__(slice(-3, None)), "truncated"),
    ("ipv4-length-past-frame", V4, _both(_set16(ETH + 2, lambda v: v + 8),
                                         _set16(ETH + IP4 + 4, lambda v: v + 8)), "truncated"),
    ("udp-lies-and-ipv4-length-past-frame", V4, _set16(ETH + 2, lambda v: v + 8), "malformed"),
    ("ipv4-length-leaves-no-bth", V4, _both(_set16(ETH + 2, lambda v: 36),
                                            _set16(ETH + IP4 + 4, lambda v: 16)), "malformed"),
    ("grh-broken-and-paylen-past-frame", V1, _both(_xor(ETH + 6, 0x0A),
                                                   _set16(ETH + 4, lambda v: v + 8)),
     "malformed"),
    ("ib-pktlen-past-frame", IB2, _set16(4, lambda v: v + 1, keep=0xF800), "truncated"),
    ("ib-pktlen-below-lrh", IB2, _set16(4, lambda v: 1, keep=0xF800), "malformed"),
]


def corrupted(case: Case) -> bytes:
    """Broken after the CRCs were computed."""
    frame = bytearray(case.built.frame)
    case.poke(frame)
    return bytes(frame)


def built_wrong(case: Case) -> bytes:
    """Broken, then its CRCs computed by the oracle over the broken bytes where they are
    placed (the masks of the good frame's layout: the breakages move no header)."""
    b = case.built
    frame = bytearray(corrupted(case))
    if case.icrc:
        covered = bytearray(frame[b.start:b.end])
        for at, bits in b.masked.items():
            if b.start <= at < b.end:
                covered[at - b.start] |= bits
        pseudo = b"\xff" * 8 if b.kind != "ib_lrh" else b""
        frame[b.end:b.end + 4] = zlib.crc32(pseudo + bytes(covered)).to_bytes(4, "little")
    if case.vcrc_at is not None:
        frame[case.vcrc_at:case.vcrc_at + 2] = crc16_reference(
            bytes(frame[:case.vcrc_at])).to_bytes(2, "little")
    return bytes(frame)


MADE = [pytest.param(made, good, id=name)
        for made, good, name in ((corrupted, False, "corrupted"),
                                 (built_wrong, True, "built-wrong"))]


def _expected(case: Case, good: bool) -> tuple[bool | None, bool | None]:
    return (good if case.icrc else None, good if case.vcrc_at is not None else None)


def test_the_oracle_frames_verify(crc):  # noqa: F811
    for b in (V4, V6, V1, IB2, IB3):
        verdict = crc.verify(b.frame, b.link)
        assert verdict.icrc_ok and verdict.vcrc_ok in (None, True)


@pytest.mark.parametrize(("made", "good"), MADE)
@pytest.mark.parametrize("case", PLACED, ids=lambda c: c.id)
def test_parse_gives_the_error_and_the_verdict(case: Case, made, good: bool) -> None:
    frame = made(case)
    packet = parse(frame, case.built.link)
    assert isinstance(packet.error, MalformedError), packet
    assert (packet.error.header, packet.error.field) == case.parsed
    verdict = packet.verify()
    assert (verdict.icrc_ok, verdict.vcrc_ok) == _expected(case, good)
    assert packet.icrc_offset == (case.built.end if case.icrc else None)
    assert packet.vcrc_offset == case.vcrc_at
    with pytest.raises(MalformedError):  # strict: every fault raised
        parse(frame, case.built.link, strict=True)


@pytest.mark.parametrize(("made", "good"), MADE)
@pytest.mark.parametrize("case", PLACED, ids=lambda c: c.id)
def test_the_scanner_gives_the_error_and_the_verdict(scanner, case: Case, made,
                                                      good: bool) -> None:
    frame = made(case)
    row = scan_one(scanner, frame, case.built.link)
    assert row["error"] == MALFORMED
    assert program.site_name(row["error.site"]) == case.site
    icrc_ok, vcrc_ok = _expected(case, good)
    assert (row["icrc_ok"], row["vcrc_ok"]) == tuple(-1 if v is None else int(v)
                                                     for v in (icrc_ok, vcrc_ok))
    end = case.built.end
    assert row["offset.icrc"] == (end if case.icrc else -1)
    assert row["icrc"] == (int.from_bytes(frame[end:end + 4], "little") if case.icrc else 0)
    vcrc_at = case.vcrc_at
    assert row["offset.vcrc"] == (-1 if vcrc_at is None else vcrc_at)
    assert row["vcrc"] == (0 if vcrc_at is None
                           else int.from_bytes(frame[vcrc_at:vcrc_at + 2], "little"))


@pytest.mark.parametrize(("made", "good"), MADE)
@pytest.mark.parametrize("case", PLACED, ids=lambda c: c.id)
def test_the_crc_engine_gives_the_verdict(crc, case: Case, made, good: bool) -> None:  # noqa: F811
    """The CRC engine walks to the BTH only: a fault it sees is its error (and raised
    without ``lenient``); one in the transport is not its business."""
    frame = made(case)
    link = case.built.link
    batch = crc.verify_batch(frame, [0], [len(frame)], link)
    icrc_ok, vcrc_ok = _expected(case, good)
    walker = case.site in SITES
    assert (batch.error[0], batch.icrc_ok[0], batch.vcrc_ok[0]) == (
        MALFORMED if walker else 0, -1 if icrc_ok is None else int(icrc_ok),
        -1 if vcrc_ok is None else int(vcrc_ok))
    if walker:
        with pytest.raises(MalformedError):
            crc.verify(frame, link)
    else:
        assert crc.verify(frame, link) == crc.verify(frame, link, lenient=True)
    lenient = crc.verify(frame, link, lenient=True)
    assert (lenient.icrc_ok, lenient.vcrc_ok) == (icrc_ok, vcrc_ok)
    resealed = bytearray(frame)  # fix(lenient) computes what the oracle computed
    crc.fix(resealed, link, lenient=True)
    assert bytes(resealed) == built_wrong(case)


@pytest.mark.parametrize(("name", "built", "poke", "error"), NOT_PLACED,
                         ids=[c[0] for c in NOT_PLACED])
def test_no_verdict_where_the_crc_cannot_be_placed(scanner, crc, name, built, poke,  # noqa: F811
                                                    error) -> None:
    frame = bytearray(built.frame)
    poke(frame)
    frame = bytes(frame)
    with pytest.raises(IbwireError):
        parse(frame, built.link)
    row = scan_one(scanner, frame, built.link)
    assert (ERROR_NAMES[row["error"]], row["icrc_ok"], row["vcrc_ok"]) == (error, -1, -1)
    assert (row["offset.icrc"], row["offset.vcrc"]) == (-1, -1)
    with pytest.raises(IbwireError):
        crc.verify(frame, built.link, lenient=True)
    batch = crc.verify_batch(frame, [0], [len(frame)], built.link)
    assert (batch.icrc_ok[0], batch.vcrc_ok[0]) == (-1, -1)
    assert np.asarray(batch.error)[0] == ERROR_NAMES.index(error)
