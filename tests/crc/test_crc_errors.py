"""Bad input: truncated frames, lying lengths, other traffic, unsupported encapsulations, noise.

Every fault is an ibwire error that names header, field and byte offset, and both twins report
the same one. Nothing else may escape (the C engine additionally runs under ASan/UBSan in
tools/asan.sh).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.crc import _python
from ibwire.errors import (
    IbwireError,
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnsupportedError,
)
from tests.crc.crc_frames import KINDS, frames, native_ib, native_raw, rocev1, rocev2

SETTINGS = {"deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.too_slow]}
BODY = struct.pack("!BBHII", 0x04, 0, 0xFFFF, 0x11, 7) + b"payload!"
ETH = 14


def _patch(frame: bytes, at: int, fmt: str, *values: int) -> bytes:
    out = bytearray(frame)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


def _ipv6_ext(nh_chain: list[tuple[int, bytes]], last: int, tail: bytes) -> bytes:
    """Ethernet + IPv6 whose next headers are nh_chain (type, body) then `last` + tail."""
    exts = b""
    types = [t for t, _ in nh_chain] + [last]
    for (_, body), nxt in zip(nh_chain, types[1:], strict=True):
        exts += bytes([nxt]) + body
    base = rocev2(BODY, v6=True).frame
    ip = bytearray(base[ETH:ETH + 40])
    ip[6] = types[0]
    ip[4:6] = struct.pack("!H", len(exts) + len(tail))
    return base[:ETH] + bytes(ip) + exts + tail


V4 = rocev2(BODY).frame
V6 = rocev2(BODY, v6=True).frame
V1 = rocev1(BODY).frame
IB2 = native_ib(BODY).frame
IB3 = native_ib(BODY, lnh=3).frame
UDP4 = ETH + 20
UDP6 = ETH + 40
UDP_4791 = struct.pack("!HHHH", 1, 4791, 8 + len(BODY) + 4, 0) + BODY + b"\0\0\0\0"
UDP_OTHER = struct.pack("!HHHH", 1, 53, 12, 0) + b"dns!"

# (name, frame, link, error class, header, field, offset)
CASES = [
    ("empty ethernet", b"", "ethernet", TruncatedError, "Ethernet", "ethertype", 12),
    ("short ethernet", V4[:13], "ethernet", TruncatedError, "Ethernet", "ethertype", 12),
    ("arp", _patch(V4, 12, "!H", 0x0806), "ethernet", NotInfinibandError, "Ethernet",
     "ethertype", 12),
    ("arp after a tag", rocev2(BODY, vlans=[(0x8100, 1)]).frame[:16] + b"\x08\x06" + V4[14:],
     "ethernet", NotInfinibandError, "Ethernet", "ethertype", 16),
    ("cut vlan tag", rocev2(BODY, vlans=[(0x88A8, 1)]).frame[:17], "ethernet", TruncatedError,
     "VLAN", "ethertype", 16),
    ("ipv4 header cut", V4[:ETH + 19], "ethernet", TruncatedError, "IPv4", "header", ETH),
    ("ipv4 version", _patch(V4, ETH, "!B", 0x65), "ethernet", MalformedError, "IPv4",
     "version", ETH),
    ("ipv4 tcp", _patch(V4, ETH + 9, "!B", 6), "ethernet", NotInfinibandError, "IPv4",
     "protocol", ETH + 9),
    ("ipv4 ihl 4", _patch(V4, ETH, "!B", 0x44), "ethernet", MalformedError, "IPv4", "ihl", ETH),
    ("ipv4 more fragments", _patch(V4, ETH + 6, "!H", 0x2000), "ethernet", UnsupportedError,
     "IPv4", "fragment", ETH + 6),
    # a later fragment carries no UDP header: nothing says it is RoCE, so it is other traffic
    ("ipv4 fragment offset", _patch(V4, ETH + 6, "!H", 0x4001), "ethernet", NotInfinibandError,
     "IPv4", "fragment", ETH + 6),
    ("ipv4 first fragment, other port", _patch(_patch(V4, ETH + 6, "!H", 0x2000), ETH + 22,
                                               "!H", 53), "ethernet", NotInfinibandError,
     "UDP", "dst_port", ETH + 22),
    ("ipv4 options cut", _patch(V4, ETH, "!B", 0x4F)[:ETH + 40], "ethernet", TruncatedError,
     "IPv4", "ihl", ETH),
    ("udp header cut", V4[:UDP4 + 7], "ethernet", TruncatedError, "UDP", "header", UDP4),
    ("udp other port", _patch(V4, UDP4 + 2, "!H", 4790), "ethernet", NotInfinibandError, "UDP",
     "dst_port", UDP4 + 2),
    ("source port 4791 only", _patch(_patch(V4, UDP4, "!H", 4791), UDP4 + 2, "!H", 80),
     "ethernet", NotInfinibandError, "UDP", "dst_port", UDP4 + 2),
    ("ipv4 total length < headers", _patch(V4, ETH + 2, "!H", 20 + 8 + 15), "ethernet",
     MalformedError, "IPv4", "total_length", ETH + 2),
    ("udp length lies", _patch(V4, UDP4 + 4, "!H", 8 + len(BODY) + 3), "ethernet",
     MalformedError, "UDP", "length", UDP4 + 4),
    ("ipv4 total length beyond frame", V4[:-1], "ethernet", TruncatedError, "IPv4",
     "total_length", ETH + 2),
    ("ip link empty", b"", "ip", TruncatedError, "IP", "version", 0),
    ("ip link version 5", b"\x50" + V4[ETH + 1:], "ip", NotInfinibandError, "IP", "version", 0),
    ("ipv6 header cut", V6[:ETH + 39], "ethernet", TruncatedError, "IPv6", "header", ETH),
    ("ipv6 version", _patch(V6, ETH, "!B", 0x40), "ethernet", MalformedError, "IPv6", "version",
     ETH),
    ("ipv6 payload length < headers", _patch(V6, ETH + 4, "!H", 23), "ethernet", MalformedError,
     "IPv6", "payload_length", ETH + 4),
    ("ipv6 payload beyond frame", V6[:-2], "ethernet", TruncatedError, "IPv6",
     "payload_length", ETH + 4),
    ("ipv6 udp length lies", _patch(V6, UDP6 + 4, "!H", 9), "ethernet", MalformedError, "UDP",
     "length", UDP6 + 4),
    ("ipv6 icmp", _patch(V6, ETH + 6, "!B", 58), "ethernet", NotInfinibandError, "IPv6",
     "next_header", ETH + 6),
    ("ipv6 hop-by-hop then roce", _ipv6_ext([(0, b"\0" + b"\1\0\0\0\0\0")], 17, UDP_4791),
     "ethernet", UnsupportedError, "IPv6", "next_header", ETH + 6),
    ("ipv6 routing+dest opts then roce",
     _ipv6_ext([(43, b"\0" + bytes(6)), (60, b"\1" + bytes(14))], 17, UDP_4791), "ethernet",
     UnsupportedError, "IPv6", "next_header", ETH + 6),
    ("ipv6 AH then roce", _ipv6_ext([(51, b"\1" + bytes(10))], 17, UDP_4791), "ethernet",
     UnsupportedError, "IPv6", "next_header", ETH + 6),
    ("ipv6 hop-by-hop then dns", _ipv6_ext([(0, b"\0" + bytes(6))], 17, UDP_OTHER), "ethernet",
     NotInfinibandError, "UDP", "dst_port", UDP6 + 8 + 2),
    ("ipv6 hop-by-hop then icmp (MLD)", _ipv6_ext([(0, b"\0" + bytes(6))], 58, bytes(24)),
     "ethernet", NotInfinibandError, "IPv6", "next_header", ETH + 6),
    ("ipv6 udp fragment", _ipv6_ext([(44, b"\0\0\x01" + bytes(4))], 17, UDP_4791), "ethernet",
     UnsupportedError, "IPv6", "extension_header", UDP6),
    ("ipv6 tcp fragment", _ipv6_ext([(44, b"\0\0\x01" + bytes(4))], 6, bytes(20)), "ethernet",
     NotInfinibandError, "IPv6", "next_header", ETH + 6),
    # an extension header cut short hides what follows: nothing says RoCE (as ibwire.parse)
    ("ipv6 extension cut", _ipv6_ext([(0, b"\0" + bytes(6))], 17, UDP_4791)[:UDP6 + 1],
     "ethernet", NotInfinibandError, "IPv6", "extension_header", UDP6),
    ("ipv6 extension longer than frame", _ipv6_ext([(0, b"\x09" + bytes(6))], 17, UDP_4791),
     "ethernet", TruncatedError, "UDP", "header", UDP6 + 80),
    ("ipv6 ext then udp cut", _ipv6_ext([(0, b"\0" + bytes(6))], 17, UDP_4791)[:UDP6 + 12],
     "ethernet", TruncatedError, "UDP", "header", UDP6 + 8),
    ("grh cut", V1[:ETH + 39], "ethernet", TruncatedError, "GRH", "header", ETH),
    ("grh ipver", _patch(V1, ETH, "!B", 0x40), "ethernet", MalformedError, "GRH", "ipver", ETH),
    ("grh next header", _patch(V1, ETH + 6, "!B", 0x11), "ethernet", MalformedError, "GRH",
     "next_header", ETH + 6),
    ("grh paylen < bth", _patch(V1, ETH + 4, "!H", 15), "ethernet", MalformedError, "GRH",
     "payload_length", ETH + 4),
    ("grh paylen beyond frame", V1[:-3], "ethernet", TruncatedError, "GRH", "payload_length",
     ETH + 4),
    ("grh link", rocev1(BODY, link="grh").frame[:-1], "grh", TruncatedError, "GRH",
     "payload_length", 4),
    ("lrh cut", IB2[:7], "infiniband", TruncatedError, "LRH", "header", 0),
    ("lrh pktlen < lrh+bth+icrc", _patch(IB2, 4, "!H", 5), "infiniband", MalformedError, "LRH",
     "packet_length", 4),
    ("lrh pktlen beyond frame", IB2[:-1], "infiniband", TruncatedError, "LRH", "packet_length",
     4),
    ("lnh3 pktlen < lrh+grh+bth+icrc", _patch(IB3, 4, "!H", 15), "infiniband", MalformedError,
     "LRH", "packet_length", 4),
    ("lnh3 grh ipver", _patch(IB3, 8, "!B", 0x50), "infiniband", MalformedError, "GRH", "ipver",
     8),
    ("lnh3 grh next header", _patch(IB3, 14, "!B", 0), "infiniband", MalformedError, "GRH",
     "next_header", 14),
    ("lnh3 grh paylen disagrees with pktlen", _patch(IB3, 12, "!H", len(BODY)), "infiniband",
     MalformedError, "GRH", "payload_length", 12),
    ("raw packet has no icrc", native_raw(b"abcdefgh"), "infiniband", NotInfinibandError, "LRH",
     "lnh", 1),
    ("ipoib packet has no icrc", native_raw(b"abcdefgh", lnh=1), "infiniband",
     NotInfinibandError, "LRH", "lnh", 1),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fault_is_named(crc, case):
    _, frame, link, cls, header, field, offset = case
    with pytest.raises(cls) as info:
        crc.icrc(frame, link)
    err = info.value
    assert (err.header, err.field, err.offset) == (header, field, offset)
    assert header in str(err) and f"byte {offset}" in str(err)
    if cls is not NotInfinibandError or field != "lnh":
        with pytest.raises(cls):
            crc.verify(frame, link)
        with pytest.raises(cls):
            crc.locate(frame, link)
    if not isinstance(frame, bytes) or not frame:
        return
    buf = bytearray(frame)
    if field != "lnh":
        with pytest.raises(cls):
            crc.fix(buf, link)
        assert bytes(buf) == frame  # a failed fix writes nothing


#: CASES whose fault still leaves CRCs placed by the length fields: (ICRC placed, VCRC placed).
PLACED = {
    "udp length lies": (True, False),  # the IP length places the ICRC
    "ipv6 udp length lies": (True, False),
    "grh ipver": (True, False),  # PayLen places it
    "grh next header": (True, False),
    "lrh pktlen < lrh+bth+icrc": (False, True),  # no room for a BTH: the VCRC only
    "lnh3 pktlen < lrh+grh+bth+icrc": (False, True),
    "lnh3 grh ipver": (True, True),  # PktLen places both
    "lnh3 grh next header": (True, True),
    "lnh3 grh paylen disagrees with pktlen": (True, True),
}


def test_placed_cases_exist():
    assert set(PLACED) <= {c[0] for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_fault_that_leaves_the_crcs_placed_gets_verdicts(crc, case):
    """lenient=True: the verdicts of the CRCs the length fields place despite the fault; bad
    when the fault came after the CRCs were computed (corrupted), good once they are computed
    over the broken bytes (the sender built it so). The fault itself is still raised without
    lenient; a fault that places nothing raises either way and fixes nothing."""
    name, frame, link, cls, header, field, offset = case
    buf = bytearray(frame)
    if field == "lnh":  # no ICRC, but no fault for verify: a VCRC only
        return
    if name not in PLACED:
        with pytest.raises(cls):
            crc.verify(frame, link, lenient=True)
        if frame:
            with pytest.raises(cls):
                crc.fix(buf, link, lenient=True)
            assert bytes(buf) == frame
        return
    icrc_placed, vcrc_placed = PLACED[name]
    corrupted = crc.verify(frame, link, lenient=True)
    assert (corrupted.icrc_ok, corrupted.vcrc_ok) == (False if icrc_placed else None,
                                                      False if vcrc_placed else None)
    crc.fix(buf, link, lenient=True)
    built_wrong = bytes(buf)
    with pytest.raises(cls) as info:
        crc.verify(built_wrong, link)
    assert (info.value.header, info.value.field, info.value.offset) == (header, field, offset)
    sealed = crc.verify(built_wrong, link, lenient=True)
    assert (sealed.icrc_ok, sealed.vcrc_ok) == (True if icrc_placed else None,
                                                True if vcrc_placed else None)
    assert sealed.icrc_wire == (corrupted.icrc_computed if icrc_placed else None)


def test_raw_and_ip_packets_have_a_vcrc_only(crc):
    for lnh, kind in ((0, "ib_raw"), (1, "ib_ip")):
        frame = native_raw(b"abcdefgh" * 3, lnh=lnh)
        span = crc.locate(frame, "infiniband")
        assert (span.kind, span.icrc, span.bth, span.masks, span.vcrc) == (kind, -1, -1, (), 32)
        verdict = crc.verify(frame, "infiniband")
        assert verdict.icrc_ok is None and verdict.icrc_computed is None
        assert verdict.vcrc_ok is True
        broken = bytearray(frame)
        broken[20] ^= 1
        assert crc.verify(bytes(broken), "infiniband").vcrc_ok is False
        crc.fix(broken, "infiniband")
        assert bytes(broken[:20]) == frame[:20] and crc.verify(bytes(broken), "infiniband").vcrc_ok


def test_no_vcrc_on_roce(crc):
    with pytest.raises(NotInfinibandError) as info:
        crc.vcrc(V4, "ethernet")
    assert (info.value.header, info.value.field) == ("VCRC", "vcrc")


def test_every_prefix_is_truncated(crc):
    for frame, link in ((V4, "ethernet"), (V6, "ethernet"), (V1, "ethernet"), (IB2, "infiniband"),
                        (IB3, "infiniband"), (V4[ETH:], "ip"), (V1[ETH:], "grh"),
                        (rocev2(BODY, vlans=[(0x8100, 1), (0x9100, 2)]).frame, "ethernet")):
        for n in range(len(frame)):
            with pytest.raises(TruncatedError):
                crc.icrc(frame[:n], link)
        assert crc.verify(frame + b"\xaa" * 5, link).icrc_ok is True  # trailer ignored


def test_bad_arguments(crc):
    with pytest.raises(ValueError):
        crc.icrc(V4, "token-ring")
    with pytest.raises(ValueError):
        crc.verify(V4, None)
    with pytest.raises(TypeError):
        crc.fix(V4)  # bytes are read-only
    with pytest.raises(TypeError):
        crc.icrc("not bytes")


def _outcome(mod, fn: str, frame: bytes, link: str):
    try:
        return getattr(mod, fn)(frame, link)
    except IbwireError as exc:
        return (type(exc), exc.header, exc.field, exc.offset)


def _lenient(mod, frame: bytes, link: str):
    """verify(lenient=True), and the frame after fix(lenient=True)."""
    buf = bytearray(frame)
    try:
        mod.fix(buf, link, lenient=True)
    except IbwireError as exc:
        fixed = (type(exc), exc.header, exc.field, exc.offset)
    else:
        fixed = bytes(buf)
    try:
        return mod.verify(frame, link, lenient=True), fixed
    except IbwireError as exc:
        return (type(exc), exc.header, exc.field, exc.offset), fixed


def _same_everywhere(engine, frame: bytes) -> None:
    for link in ("ethernet", "infiniband", "ip", "grh"):
        for fn in ("locate", "icrc", "vcrc", "verify"):
            assert _outcome(engine, fn, frame, link) == _outcome(_python, fn, frame, link), (
                fn, link)
        assert _lenient(engine, frame, link) == _lenient(_python, frame, link), link


@settings(max_examples=1500, **SETTINGS)
@given(frame=st.binary(max_size=200))
def test_random_bytes_twins_agree(engine, frame):
    _same_everywhere(engine, frame)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    b = draw(frames(draw(st.sampled_from(KINDS)), max_payload=300))
    frame = bytearray(b.frame)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(frame) - 1))
        frame[i] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(frame)))
    return bytes(frame[:cut]) if draw(st.booleans()) else bytes(frame)


@settings(max_examples=1500, **SETTINGS)
@given(frame=mutated())
def test_mutated_frames_twins_agree(engine, frame):
    _same_everywhere(engine, frame)
