"""scapy's own RoCE test frames and the ERF InfiniBand frames of vectors.json."""

from __future__ import annotations

import pytest
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

import ibwire
from ibwire.scapy import BTH, GRH, LRH
from tests.corpus import load_vectors, vector_link
from tests.scapy.helpers import assert_like_parse, start_layer

VECTORS = load_vectors()
SCAPY_UTS = [v for v in VECTORS if v["id"].startswith("scapy_uts_")]
#: Fields scapy or ibwire compute at build: deleted before rebuilding.
COMPUTED = {BTH: ("icrc", "padcnt"), IP: ("len", "ihl", "chksum"), IPv6: ("plen",),
            UDP: ("len",), GRH: ("paylen",), LRH: ("pktlen", "vcrc")}


def _dissect(vector):
    frame = bytes.fromhex(vector["packet_hex"])
    packet = Ether(frame) if vector_link(vector) == "ethernet" else LRH(frame)
    return frame, packet


def test_scapy_uts_vectors_are_there():
    ids = {v["id"] for v in SCAPY_UTS}
    assert "scapy_uts_rocev2_ipv4_cnp_connectx4lx" in ids
    assert sum(v["encapsulation"] == "rocev1" for v in SCAPY_UTS) == 2


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vector_dissects_like_ibwire_parse(vector):
    frame, packet = _dissect(vector)
    reference = ibwire.parse(frame, vector_link(vector))
    assert_like_parse(start_layer(packet)[0], reference)
    assert raw(packet) == frame
    assert packet[BTH].icrc == int.from_bytes(reference.icrc, "little")
    assert packet[BTH].icrc_ok is (not vector["known_bad"])
    if vector["expected_vcrc"] is not None:
        assert packet[LRH].vcrc == int(vector["expected_vcrc"], 16)
        assert packet[LRH].vcrc_ok is True


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vector_rebuilds_with_crcs_and_lengths_recomputed(vector):
    frame, packet = _dissect(vector)
    for layer, names in COMPUTED.items():
        if layer in packet:
            for name in names:
                delattr(packet[layer], name)
    assert packet[BTH].icrc is None
    rebuilt = raw(packet)
    if vector["known_bad"]:
        assert rebuilt[:-4] == frame[:-4]
        assert int.from_bytes(rebuilt[-4:], "little") == 0xEF1BFCDA  # crc.md, disputed vector
    else:
        assert rebuilt == frame
