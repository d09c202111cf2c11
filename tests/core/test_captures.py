"""Every InfiniBand/RoCE frame of the shared real captures parses, with the expected counts.

Frames are read with scapy's pcap reader here, independently of ibwire's own readers (which
have their own tests): ERF records (link type 197) lose their 16-byte ERF header by hand.
"""

from __future__ import annotations

import pytest

import ibwire
from tests import corpus

scapy_utils = pytest.importorskip("scapy.utils")

ROWS = list(corpus.provenance_rows())


def _frames(path):
    with scapy_utils.PcapReader(str(path)) as reader:  # reads pcap and pcapng
        linktype = getattr(reader, "linktype", 1)
        for packet in reader:
            raw = bytes(packet)
            if linktype == 197:  # ERF: 16-byte record header, type 21 = InfiniBand
                assert raw[8] & 0x7F == 21
                yield raw[16:16 + int.from_bytes(raw[14:16], "big")], "infiniband"
            else:
                yield raw, "ethernet"


@pytest.mark.parametrize("row", corpus.params(ROWS), ids=lambda r: r["local_name"] if r else "none")
def test_every_ib_frame_of_a_real_capture_parses(row):
    ib = other = 0
    opcodes: dict[str, int] = {}
    for frame, link in _frames(corpus.capture(row["local_name"])):
        packet = ibwire.parse(frame, link, strict=True)
        if packet.is_ib:
            ib += 1
            opcodes[packet.opcode.name] = opcodes.get(packet.opcode.name, 0) + 1
            assert not packet.warnings
        else:
            other += 1
    assert ib == int(row["ib_roce_packets"])
    assert ib + other == int(row["packets_total"])
