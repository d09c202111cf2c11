"""parse(): encapsulations, errors with their place, unknown opcodes, other traffic."""

from __future__ import annotations

import pytest

import ibwire
from ibwire import (
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnknownOpcodeError,
    UnsupportedError,
)
from tests.core.roundtrip import roundtrip

WRITE = {"bth.destqp": 0x12, "bth.psn": 7, "reth.va": 0x1000, "reth.r_key": 0x55,
         "reth.dmalen": 5}


@pytest.mark.parametrize("encapsulation", ["rocev2_ipv4", "rocev2_ipv6", "rocev1", "ib_local",
                                           "ib_global"])
def test_each_encapsulation_round_trips(encapsulation):
    frame = ibwire.build(encapsulation, WRITE, b"hello", opcode="RC_RDMA_WRITE_ONLY")
    link = "infiniband" if encapsulation.startswith("ib") else "ethernet"
    packet = roundtrip(frame, link)
    assert packet.encapsulation == encapsulation
    assert packet.payload == b"hello" and packet.pad == bytes(3)
    assert packet.fields()["bth.padcnt"] == 3
    assert packet.verify().icrc_ok


def test_vlan_and_qinq_tags_and_raw_ip_link():
    frame = ibwire.build("rocev2_ipv4", {**WRITE, "vlan.id": (100, 200)}, b"x",
                         opcode="RC_RDMA_WRITE_ONLY")
    packet = roundtrip(frame, "ethernet")
    fields = packet.fields()
    assert fields["eth.type"] == 0x88A8 and fields["vlan.etype"] == (0x8100, 0x0800)
    assert fields["vlan.id"] == (100, 200)
    ip_only = ibwire.build("rocev2_ipv4", WRITE, b"x", opcode="RC_RDMA_WRITE_ONLY", link="ip")
    assert roundtrip(ip_only, "ip").fields()["reth.va"] == 0x1000
    assert ip_only == frame[22:]  # the same packet without Ethernet and tags


def test_ipv4_options_are_covered_and_kept():
    frame = ibwire.build("rocev2_ipv4", {**WRITE, "ip.options": b"\x01\x01\x01\x00"}, b"",
                         opcode="RC_RDMA_WRITE_ONLY")
    packet = roundtrip(frame, "ethernet")
    assert packet.fields()["ip.hdr_len"] == 6
    assert packet.fields()["ip.options"] == b"\x01\x01\x01\x00"
    assert packet.header("udp").offset == 14 + 24


def test_ethernet_padding_is_not_payload():
    ack = ibwire.build("rocev2_ipv4", {"aeth.syndrome": 0x1F}, opcode="RC_ACKNOWLEDGE")
    padded = ack + bytes(64 - len(ack)) + b"FCS!"
    packet = ibwire.parse(padded)
    assert packet.payload == b"" and packet.icrc == ack[-4:]
    assert packet.trailer == bytes(64 - len(ack)) + b"FCS!"
    assert packet.verify().icrc_ok


def test_aeth_syndrome_decoded():
    for syndrome, expected in [
        (0x1F, {"aeth.syndrome.type": "ACK", "aeth.syndrome.credit_count": 31}),
        (0x2E, {"aeth.syndrome.type": "RNR_NAK", "aeth.syndrome.timer": 14}),
        (0x60, {"aeth.syndrome.type": "NAK", "aeth.syndrome.error_code": 0,
                "aeth.syndrome.nak": "PSN_SEQUENCE_ERROR"}),
        (0x63, {"aeth.syndrome.type": "NAK", "aeth.syndrome.nak": "REMOTE_OPERATIONAL_ERROR"}),
    ]:
        fields = ibwire.parse(ibwire.build("rocev2_ipv4", {"aeth.syndrome": syndrome},
                                           opcode="RC_ACKNOWLEDGE")).fields()
        assert {k: fields[k] for k in expected} == expected
    built = ibwire.build("rocev2_ipv4", {"aeth.syndrome.type": "RNR_NAK",
                                         "aeth.syndrome.timer": 3}, opcode="RC_ACKNOWLEDGE")
    assert ibwire.parse(built).fields()["aeth.syndrome"] == 0x23


def test_unknown_opcodes_keep_their_bytes_and_a_reason():
    for value, word in [(0x15, "reserved"), (0xE3, "manufacturer")]:
        frame = ibwire.build("rocev2_ipv4", {"bth.opcode": value}, b"\x01\x02\x03\x04vendor")
        packet = ibwire.parse(frame)
        assert packet.opcode is None and word in packet.unknown
        assert packet.payload == b"\x01\x02\x03\x04vendor"
        assert packet.verify().icrc_ok
        with pytest.raises(UnknownOpcodeError) as info:
            ibwire.parse(frame, strict=True)
        assert (info.value.header, info.value.field, info.value.offset) == ("bth", "opcode", 42)


def test_other_traffic_is_not_an_error():
    arp = bytes(12) + b"\x08\x06" + bytes(28)
    assert ibwire.parse(arp).encapsulation == "other"
    dns = ibwire.build("rocev2_ipv4", {"udp.dstport": 53}, b"", opcode="RC_ACKNOWLEDGE")
    packet = ibwire.parse(dns)
    assert packet.encapsulation == "other" and not packet.is_ib
    assert [h.name for h in packet.headers] == ["eth", "ip", "udp"]


def _mutate(frame: bytes, offset: int, value: bytes) -> bytes:
    return frame[:offset] + value + frame[offset + len(value):]


def test_lying_lengths_are_malformed_with_their_place():
    frame = ibwire.build("rocev2_ipv4", WRITE, b"hello", opcode="RC_RDMA_WRITE_ONLY")
    cases = [
        (_mutate(frame, 16, (20).to_bytes(2, "big")), "ip", "len"),   # IP total length 20
        (_mutate(frame, 14, b"\x44"), "ip", "hdr_len"),                   # IHL 4
    ]
    for bad, header, field in cases:
        with pytest.raises(MalformedError) as info:
            ibwire.parse(bad)
        assert (info.value.header, info.value.field) == (header, field), bad.hex()
        assert info.value.offset is not None
    # a UDP length that lies leaves the ICRC placed by the IP length: a packet with its error
    udp_lies = _mutate(frame, 38, (9).to_bytes(2, "big"))
    packet = ibwire.parse(udp_lies)
    assert (packet.error.header, packet.error.field, packet.error.offset) == ("udp", "length", 34)
    assert packet.icrc_offset == len(frame) - 4 and packet.verify().icrc_ok is False
    with pytest.raises(MalformedError):
        ibwire.parse(udp_lies, strict=True)


def _fault(packet: ibwire.Packet) -> tuple[object, ...]:
    assert isinstance(packet.error, MalformedError)
    return packet.error.header, packet.error.field, packet.error.offset


def test_padcnt_exceeding_payload_is_malformed():
    frame = ibwire.build("rocev2_ipv4", {"bth.padcnt": 3}, b"", opcode="RC_SEND_ONLY")
    packet = ibwire.parse(frame)  # the ICRC is placed all the same
    assert _fault(packet) == ("bth", "padcnt", 43)
    assert [h.name for h in packet.headers] == ["eth", "ip", "udp", "bth"]
    assert packet.icrc == frame[-4:] and packet.payload == b""
    with pytest.raises(MalformedError) as info:
        ibwire.parse(frame, strict=True)
    assert (info.value.header, info.value.field, info.value.offset) == ("bth", "padcnt", 43)


def test_grh_next_header_must_be_iba():
    frame = ibwire.build("rocev1", {"grh.nxthdr": 0x11}, b"", opcode="RC_ACKNOWLEDGE")
    packet = ibwire.parse(frame)  # PayLen places the ICRC: the headers stop at the GRH
    assert _fault(packet) == ("grh", "nxthdr", 14)
    assert [h.name for h in packet.headers] == ["eth", "grh"]
    assert (packet.payload_offset, packet.payload) == (54, frame[54:-4])
    with pytest.raises(MalformedError) as info:
        ibwire.parse(frame, strict=True)
    assert (info.value.header, info.value.field, info.value.offset) == ("grh", "nxthdr", 14)


def test_lver_and_tver_are_checked_in_strict_mode():
    frame = ibwire.build("ib_local", {"lrh.lver": 1, "bth.tver": 2}, b"", opcode="RC_ACKNOWLEDGE")
    assert ibwire.parse(frame, "infiniband").fields()["lrh.lver"] == 1
    with pytest.raises(MalformedError, match="LVer"):
        ibwire.parse(frame, "infiniband", strict=True)
    frame = ibwire.build("ib_local", {"bth.tver": 2}, b"", opcode="RC_ACKNOWLEDGE")
    with pytest.raises(MalformedError, match="TVer"):
        ibwire.parse(frame, "infiniband", strict=True)


def test_pktlen_shorter_than_headers_and_frame_cut_short():
    frame = ibwire.build("ib_local", {"lrh.pktlen": 4}, b"", opcode="RC_ACKNOWLEDGE")
    packet = ibwire.parse(frame, "infiniband")  # no room for the BTH, the VCRC is placed
    assert _fault(packet) == ("lrh", "pktlen", 0)
    assert (packet.icrc, packet.vcrc_offset, packet.vcrc) == (None, 16, frame[16:18])
    with pytest.raises(MalformedError) as info:
        ibwire.parse(frame, "infiniband", strict=True)
    assert (info.value.header, info.value.field) == ("lrh", "pktlen")
    good = ibwire.build("ib_local", {}, b"abcd", opcode="RC_SEND_ONLY")
    with pytest.raises(TruncatedError) as cut:
        ibwire.parse(good[:-3], "infiniband")
    assert (cut.value.header, cut.value.field) == ("lrh", "pktlen")


def test_ipv6_extension_header_before_rocev2_is_refused():
    frame = ibwire.build("rocev2_ipv6", {}, b"", opcode="RC_ACKNOWLEDGE")
    hop_by_hop = bytes([17, 0]) + bytes(6)  # next header UDP, 8 bytes long
    plen = int.from_bytes(frame[18:20], "big") + 8
    with_ext = (frame[:18] + plen.to_bytes(2, "big") + b"\x00" + frame[21:54] + hop_by_hop
                + frame[54:])
    with pytest.raises(UnsupportedError) as info:
        ibwire.parse(with_ext)
    assert (info.value.header, info.value.field) == ("ipv6", "nxt")
    mld = with_ext[:54] + bytes([58]) + with_ext[55:]  # ICMPv6 behind hop-by-hop: other traffic
    assert ibwire.parse(mld).encapsulation == "other"


def test_raw_lrh_packet_has_vcrc_but_no_transport():
    frame = ibwire.build("ib_local", {"lrh.lnh": 0}, b"", opcode="RC_ACKNOWLEDGE")
    packet = ibwire.parse(frame, "infiniband")
    assert packet.encapsulation == "ib_raw" and packet.vcrc is not None and not packet.is_ib


def test_build_errors_name_the_field():
    with pytest.raises(ibwire.BuildError, match="bth.psn"):
        ibwire.build("rocev2_ipv4", {"bth.psn": 1 << 24}, opcode=0x11)
    with pytest.raises(ibwire.BuildError, match="nope"):
        ibwire.build("rocev2_ipv4", {"bth.nope": 1}, opcode=0x11)
    with pytest.raises(ibwire.BuildError, match="reth.va"):
        ibwire.build("rocev2_ipv4", {"reth.va": 1}, opcode="RC_ACKNOWLEDGE")
    with pytest.raises(ibwire.BuildError, match="no payload"):
        ibwire.build("rocev2_ipv4", {}, b"data", opcode="RC_ACKNOWLEDGE")
    with pytest.raises(ibwire.BuildError, match="opcode"):
        ibwire.build("rocev2_ipv4", {})
    with pytest.raises(ValueError):
        ibwire.parse(b"", link="token-ring")


def test_errors_share_one_root():
    for cls in (MalformedError, TruncatedError, UnknownOpcodeError, UnsupportedError,
                NotInfinibandError, ibwire.BuildError, ibwire.CaptureError):
        assert issubclass(cls, ibwire.IbwireError)
    assert issubclass(UnknownOpcodeError, MalformedError)
    assert not issubclass(TruncatedError, MalformedError)
