"""Every opcode in every encapsulation, built with the scapy layers.

The bytes equal ibwire.build's for the same values, ibwire.parse gives every value back, the
CRCs verify, and scapy dissects its own frame to the same headers and values.
"""

from __future__ import annotations

import pytest
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import ibwire
from ibwire import crc
from ibwire.headers import ALL
from ibwire.scapy import BTH, DETH, GRH, LRH
from ibwire.tables import opcodes
from tests.scapy.helpers import (
    KINDS,
    assert_like_parse,
    canonical,
    frame_values,
    scapy_packet,
    start_layer,
)

CASES = [(kind, value) for kind in KINDS for value in sorted(opcodes())]


def _canonical_key(key: str, value):
    header = ALL[key.split(".")[0]] if key.split(".")[0] in ALL else None
    if header is None:
        return value
    name = key[len(header.name) + 1:] if key != header.name else key
    fmt = header.by_name[name].fmt if name in header.by_name else None
    if isinstance(value, tuple):
        return tuple(canonical(v, fmt) for v in value)
    return canonical(value, fmt)


@pytest.mark.parametrize(("kind", "opcode"), CASES,
                         ids=[f"{k[0]}-{k[1]}-{k[2]}tags-{o:#04x}" for k, o in CASES])
def test_opcode_in_encapsulation(kind, opcode):
    encapsulation, link, tags = kind
    given, payload = frame_values(encapsulation, link, opcode, seed=opcode * 31 + KINDS.index(kind),
                                  tags=tags)
    packet = scapy_packet(encapsulation, given, payload, link)
    frame = raw(packet)
    assert frame == ibwire.build(encapsulation, given, payload, link=link)
    parsed = ibwire.parse(frame, link)
    assert parsed.encapsulation == encapsulation
    assert parsed.payload == payload
    fields = parsed.fields()
    for key, value in given.items():
        assert _canonical_key(key, fields[key]) == _canonical_key(key, value), key
    verdict = crc.verify(frame, link)
    assert verdict.icrc_ok is True and verdict.vcrc_ok in (None, True)
    dissected = type(packet)(frame)
    assert_like_parse(start_layer(dissected)[0], parsed)
    assert dissected[BTH].icrc_ok is True
    assert raw(dissected) == frame


def test_ipv4_options_are_covered_by_the_icrc():
    packet = (Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
              / IP(src="192.0.2.1", dst="192.0.2.2", options=b"\x94\x04\x00\x00\x01\x01")
              / UDP(sport=50000, chksum=0) / BTH(opcode="RC_SEND_ONLY", destqp=5)
              / Raw(b"abcde"))
    frame = raw(packet)
    assert ibwire.parse(frame).derived["ip.options"] == b"\x94\x04\x00\x00\x01\x01\x00\x00"
    assert crc.verify(frame, "ethernet").icrc_ok is True


def test_lying_lengths_keep_the_honest_crcs():
    """As ibwire.build: a wrong PktLen or PayLen given on purpose does not change the CRCs."""
    deth = DETH(q_key=0x80010000, srcqp=1)
    honest = raw(LRH(slid=1, dlid=2) / GRH() / BTH(opcode="UD_SEND_ONLY") / deth / Raw(b"xyz"))
    liar = raw(LRH(slid=1, dlid=2, pktlen=3) / GRH(paylen=1) / BTH(opcode="UD_SEND_ONLY")
               / deth / Raw(b"xyz"))
    assert liar != honest
    assert liar[-6:] == honest[-6:]
    assert crc.verify(honest, "infiniband") == (True, True, *crc.verify(honest, "infiniband")[2:])
