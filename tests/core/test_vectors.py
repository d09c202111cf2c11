"""Every reference vector parses; for a dozen of them every interesting field is checked by value."""

from __future__ import annotations

import pytest

import ibwire
from tests.core.roundtrip import roundtrip
from tests.corpus import load_vectors, skip_missing, vector_link

VECTORS = load_vectors()
GOOD = [v for v in VECTORS if not v["known_bad"]]


def _frame(vector_id: str) -> tuple[bytes, str]:
    vector = next((v for v in VECTORS if v["id"] == vector_id), None)
    if vector is None:  # a hardware-captured frame: not shipped (its capture has no licence)
        skip_missing()
    return bytes.fromhex(vector["packet_hex"]), vector_link(vector)


@pytest.mark.parametrize("vector", GOOD, ids=[v["id"] for v in GOOD])
def test_every_vector_parses_and_round_trips(vector):
    frame, link = bytes.fromhex(vector["packet_hex"]), vector_link(vector)
    packet = roundtrip(frame, link, prefixes=len(frame) < 120)
    assert packet.is_ib
    assert packet.icrc.hex() == vector["expected_icrc_wire_bytes"]
    if vector["expected_vcrc_wire_bytes"]:
        assert packet.vcrc.hex() == vector["expected_vcrc_wire_bytes"]
    else:
        assert packet.vcrc is None
    assert packet.encapsulation == {
        "rocev2_ipv4": "rocev2_ipv4", "rocev2_ipv6": "rocev2_ipv6", "rocev1": "rocev1",
        "ib_lrh": "ib_local", "ib_grh": "ib_global"}[vector["encapsulation"]]


# (vector, expected subset of fields(), header names). Values read off the hex dumps by hand.
EXPECTED = [
    ("scapy_uts_rocev2_ipv4_uc_send_only",
     {"ip.src": "192.168.0.7", "ip.dst": "192.168.0.7", "ip.dsfield.ecn": 1, "ip.ttl": 64,
      "udp.srcport": 0xC000, "udp.dstport": 4791, "udp.length": 0x2C, "bth.opcode": 0x24,
      "bth.se": 0, "bth.m": 1, "bth.padcnt": 2, "bth.p_key": 0xFFFF, "bth.destqp": 0xD3,
      "bth.psn": 0xCF1710, "icrc": 0xF353F378},
     ["eth", "ip", "udp", "bth"]),
    ("scapy_uts_rocev2_ipv6_uc_send_only",
     {"ipv6.plen": 0x2C, "ipv6.nxt": 17, "udp.dstport": 4791, "bth.opcode": 0x24,
      "bth.destqp": 0xD3},
     ["eth", "ipv6", "udp", "bth"]),
    ("scapy_uts_rocev2_ipv4_cnp_connectx4lx",
     {"ip.dsfield.dscp": 0x30, "ip.dsfield.ecn": 2, "bth.opcode": 0x81, "bth.becn": 1,
      "bth.fecn": 0, "udp.checksum": 0, "cnppad.reserved": bytes(16), "icrc": 0x2A00FD82},
     ["eth", "ip", "udp", "bth", "cnppad"]),
    ("scapy_uts_roce_v1_rc_rdma_write_only",
     {"eth.type": 0x8915, "grh.ipver": 6, "grh.nxthdr": 0x1B, "bth.opcode": 0x0A},
     ["eth", "grh", "bth", "reth"]),
    ("scapy_uts_roce_v1_rc_acknowledge",
     {"bth.opcode": 0x11, "aeth.syndrome.type": "ACK", "aeth.syndrome.opcode": 0},
     ["eth", "grh", "bth", "aeth"]),
    ("ib_erf_frame01_lrh_op64",
     {"lrh.vl": 15, "lrh.lver": 0, "lrh.sl": 0, "lrh.lnh": 2, "lrh.dlid": 0xFFFF,
      "lrh.pktlen": 0x48, "lrh.slid": 0xFFFF, "bth.opcode": 0x64, "bth.p_key": 0xFFFF,
      "bth.destqp": 0, "deth.q_key": 0, "deth.srcqp": 0, "mad.baseversion": 1,
      "mad.mgmtclass": 0x81, "mad.classversion": 1, "mad.method": 1,
      "mad.attributeid": 0x20, "smpdirected.hopcount": 2, "smpdirected.hoppointer": 1,
      "smpdirected.drslid": 0xFFFF, "sminfo.guid": 0},
     ["lrh", "bth", "deth", "mad", "smpdirected", "sminfo", "sminfo.padding",
      "smpdirected.paths"]),
    ("ib_erf_frame11_lrh_op11",
     {"lrh.lnh": 2, "lrh.pktlen": 7, "bth.opcode": 0x11, "aeth.syndrome.type": "ACK"},
     ["lrh", "bth", "aeth"]),
    ("ib_erf_frame03_grh_op64",
     {"lrh.lnh": 3, "grh.ipver": 6, "grh.nxthdr": 0x1B, "bth.opcode": 0x64},
     ["lrh", "grh", "bth", "deth"]),
    ("ib_erf_frame10_lrh_op04",
     {"lrh.lnh": 2, "bth.opcode": 0x04, "bth.tver": 0},
     ["lrh", "bth"]),
    ("ib_erf_frame32_lrh_op64",
     {"bth.opcode": 0x64, "bth.destqp": 1, "deth.q_key": 0x80010000, "mad.mgmtclass": 0x03,
      "mad.attributeid": 0x35, "sa.componentmask": 0x340C,
      "pathrecord.dgid": "fe80::2:c903:0:1895"},
     ["lrh", "bth", "deth", "mad", "rmpp", "sa", "pathrecord", "pathrecord.padding"]),
    ("ib_erf_frame05_grh_op64",
     {"lrh.lnh": 3, "grh.paylen": 134 - 8 - 40 - 2},
     ["lrh", "grh", "bth", "deth"]),
]


@pytest.mark.parametrize("vector_id,expected,chain", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_fields_by_value(vector_id, expected, chain):
    frame, link = _frame(vector_id)
    packet = ibwire.parse(frame, link)
    fields = packet.fields()
    assert {k: fields.get(k) for k in expected} == expected
    assert [h.name for h in packet.headers] == chain


def test_byte_offsets_of_a_rocev2_frame():
    frame, link = _frame("scapy_uts_rocev2_ipv4_uc_send_only")
    packet = ibwire.parse(frame, link)
    assert [(h.name, h.offset, h.length) for h in packet.headers] == [
        ("eth", 0, 14), ("ip", 14, 20), ("udp", 34, 8), ("bth", 42, 12)]
    assert packet.payload_offset == 54
    assert packet.icrc_offset == len(frame) - 4
    assert len(packet.payload) + len(packet.pad) == len(frame) - 54 - 4
    assert len(packet.pad) == 2
