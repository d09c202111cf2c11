"""Which bits the ICRC and the VCRC cover, proven bit by bit on generated frames.

For every encapsulation (native IB LNH 2 and 3, RoCEv1 with and without Ethernet, RoCEv2 over
IPv4 with options and over IPv6, VLAN-tagged, and starting at the IP header) every bit of a
generated frame is flipped in turn:
  * a masked bit (crc.md's table) leaves the ICRC unchanged;
  * any other bit of the covered region changes it (CRC-32 catches every single-bit error);
  * a bit outside the region (Ethernet, VLAN tags, trailer, the LRH of LNH 3) leaves it alone;
  * a covered bit the walker reads (a length, a next header, a port, a version) gives a
    different ICRC or an ibwire error, never the old value.
The VCRC covers every bit of LRH .. ICRC, masks included.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.errors import IbwireError
from tests.crc.crc_frames import KINDS, Built, crc16_reference, frames, native_ib, rocev2

SETTINGS = {"deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
KIND_NAME = {"rocev1_grh": "rocev1", "rocev2_ipv4_ip": "rocev2_ipv4",
             "rocev2_ipv6_ip": "rocev2_ipv6"}


def _outcome(crc, frame: bytes, link: str, fn: str = "icrc") -> int | type:
    try:
        return getattr(crc, fn)(frame, link)
    except IbwireError as exc:
        return type(exc)


def _flips(frame: bytes):
    for i in range(len(frame)):
        for bit in range(8):
            flipped = bytearray(frame)
            flipped[i] ^= 1 << bit
            yield i, 1 << bit, bytes(flipped)


def _check_agrees_with_oracle(crc, b: Built, kind: str) -> None:
    assert crc.icrc(b.frame, b.link) == b.icrc
    span = crc.locate(b.frame, b.link)
    assert span.kind == KIND_NAME.get(kind, kind)
    assert (span.start, span.icrc) == (b.start, b.end)
    assert dict(span.masks) == b.masked
    assert span.pseudo_lrh == (kind != "ib_lrh")
    verdict = crc.verify(b.frame, b.link)
    assert verdict.icrc_ok is True
    if b.vcrc is None:
        assert verdict.vcrc_ok is None and span.vcrc == -1
    else:
        assert verdict.vcrc_ok is True and verdict.vcrc_computed == b.vcrc
        assert span.vcrc == b.vcrc_at


def _check_icrc_coverage(crc, b: Built) -> None:
    icrc_bytes = range(b.end, b.end + 4)
    vcrc_bytes = range(b.vcrc_at, b.vcrc_at + 2) if b.vcrc_at >= 0 else range(0)
    for i, bit, flipped in _flips(b.frame):
        if i in icrc_bytes or i in vcrc_bytes:
            continue
        got = _outcome(crc, flipped, b.link)
        where = (i, hex(bit), got)
        if b.masked.get(i, 0) & bit:
            assert got == b.icrc, where
        elif b.structural.get(i, 0) & bit:
            if b.start <= i < b.end:  # covered: a changed region or a changed byte
                assert got != b.icrc, where
            # else an EtherType/TPID/LRH field: 0x8100 -> 0x9100 is still a VLAN tag, so any
            # value or ibwire error will do (_outcome lets nothing else through)
        elif b.start <= i < b.end:
            assert isinstance(got, int) and got != b.icrc, where
        else:
            assert got == b.icrc, where


def _check_vcrc_coverage(crc, b: Built) -> None:
    for i, bit, flipped in _flips(b.frame):
        got = _outcome(crc, flipped, "infiniband", "vcrc")
        if i < b.vcrc_at:
            assert got != b.vcrc, (i, bit, got)
            if not b.structural.get(i, 0) & bit:
                assert got == crc16_reference(flipped[:b.vcrc_at]), (i, bit)
        elif i >= b.vcrc_at + 2:
            assert got == b.vcrc, (i, bit, got)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=12, **SETTINGS)
@given(data=st.data())
def test_masked_bits_masked_and_every_other_bit_covered(crc, kind, data):
    b = data.draw(frames(kind, max_payload=48))
    _check_agrees_with_oracle(crc, b, kind)
    _check_icrc_coverage(crc, b)
    if b.vcrc is not None:
        _check_vcrc_coverage(crc, b)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_oracle_agreement_on_larger_frames(crc, kind, data):
    b = data.draw(frames(kind, max_payload=2000))
    _check_agrees_with_oracle(crc, b, kind)
    fixed = bytearray(b.frame)
    fixed[b.end:b.end + 4] = b"\0\0\0\0"
    crc.fix(fixed, b.link)
    assert bytes(fixed) == b.frame


def test_masks_on_a_known_frame(crc):
    """The mask table of crc.md, spelled out for one RoCEv2/IPv4 frame with 8 bytes of options."""
    b = rocev2(bytes(range(12)) + b"payload!", vlans=[(0x8100, 7)],
               ip={"options": b"\x01\x01\x01\x00\x94\x04\x00\x00"})
    ip = 18  # Ethernet + one tag
    udp = ip + 28
    span = crc.locate(b.frame)
    assert span.masks == ((ip + 1, 0xFF), (ip + 8, 0xFF), (ip + 10, 0xFF), (ip + 11, 0xFF),
                          (udp + 6, 0xFF), (udp + 7, 0xFF), (udp + 8 + 4, 0xFF))
    assert (span.start, span.bth, span.icrc, span.vcrc) == (ip, udp + 8, len(b.frame) - 4, -1)
    masked = bytearray(b.frame[ip:-4])
    for off, bits in span.masks:
        masked[off - ip] |= bits
    assert crc.icrc(b.frame) == zlib.crc32(b"\xff" * 8 + masked)


def test_native_lnh2_masks_only_vl(crc):
    b = native_ib(bytes(12) + bytes(8), lrh_fields={"vl": 5, "sl": 3})
    span = crc.locate(b.frame, "infiniband")
    assert span.masks == ((0, 0xF0), (12, 0xFF)) and not span.pseudo_lrh
    assert (span.start, span.bth, span.icrc, span.vcrc) == (0, 8, 28, 32)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_oracle_agreement_every_backend(engine, kind, data):
    """The C engine's three CRC-32 code paths (tables, PCLMULQDQ, VPCLMULQDQ) on the same frames,
    including the bit sweep of the masked prefix."""
    b = data.draw(frames(kind, max_payload=data.draw(st.sampled_from([40, 300, 3000]))))
    best = engine.crc32_backend()
    try:
        for name in ("slice-by-8", "pclmulqdq", "vpclmulqdq"):
            if not engine.set_crc32_backend(name):
                continue
            _check_agrees_with_oracle(engine, b, kind)
            for i in range(b.start, min(b.end, b.start + 80)):
                flipped = bytearray(b.frame)
                flipped[i] ^= 0xFF
                got = _outcome(engine, bytes(flipped), b.link)
                if b.masked.get(i) == 0xFF:
                    assert got == b.icrc, (name, i)
                else:
                    assert got != b.icrc, (name, i)
    finally:
        engine.set_crc32_backend(best)


def test_every_region_length_every_backend(engine):
    """Region lengths 16 .. 1100 with options of every size: every lead (0..63 zero bytes in
    front) and every block count of the vector paths, against the zlib oracle."""
    best = engine.crc32_backend()
    try:
        data = bytes((i * 7 + 1) & 0xFF for i in range(1060))
        for size in range(0, 1060):
            opts = bytes(4 * (size % 11))
            frames_ = [rocev2(bytes(range(12)) + data[:size], ip={"options": opts}),
                       native_ib(bytes(12) + data[:size // 4 * 4], lnh=2 + size % 2)]
            for name in ("slice-by-8", "pclmulqdq", "vpclmulqdq"):
                if engine.set_crc32_backend(name):
                    for b in frames_:
                        assert engine.icrc(b.frame, b.link) == b.icrc, (name, size)
    finally:
        engine.set_crc32_backend(best)
