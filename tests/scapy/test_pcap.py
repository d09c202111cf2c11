"""ERF records (pcap link type 197 and bare ERF files) and ibwire.scapy.rdpcap."""

from __future__ import annotations

import gzip

import pytest
from scapy.compat import raw
from scapy.error import Scapy_Exception
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import RawPcapReader

from ibwire.scapy import BTH, ERF, LRH, rdpcap, read_erf
from tests.corpus import ERF_CAPTURE, needs_shared


def _records() -> list[bytes]:
    return [data for data, _ in RawPcapReader(str(ERF_CAPTURE))]


@needs_shared
def test_erf_layer_rebuilds_each_record():
    for record in _records():
        packet = ERF(record)
        assert packet.type == 21 and isinstance(packet.payload, LRH)
        assert raw(packet) == record
        assert packet[BTH].icrc_ok is True and packet[LRH].vcrc_ok is True


@needs_shared
def test_bare_erf_file(tmp_path):
    records = _records()
    path = tmp_path / "capture.erf"
    # the pcap holds 16 + wlen bytes of each record; a bare ERF file holds all rlen bytes
    padded = b"".join(r + bytes(int.from_bytes(r[10:12], "big") - len(r)) for r in records)
    path.write_bytes(padded)
    packets = rdpcap(path)
    assert len(packets) == len(records)
    assert all(p[BTH].icrc_ok and p[LRH].vcrc_ok for p in packets)
    assert packets[0].time == packets[0].erf_time > 1e9
    gz = tmp_path / "capture.erf.gz"
    gz.write_bytes(gzip.compress(padded))
    assert len(rdpcap(gz, count=5)) == 5


def test_erf_ethernet_record_and_extension_headers():
    frame = raw(Ether() / IP() / UDP() / BTH(opcode="RC_SEND_ONLY") / Raw(b"abcd"))
    record = raw(ERF(type=0x82, extensions=bytes.fromhex("8100000000000000" "0200000000000000"))
                 / Ether(frame))
    packet = read_erf(record)[0]
    assert len(packet.extensions) == 16 and packet.eth_pad == 0
    assert packet.wlen == len(frame) and packet.rlen == len(record)
    assert packet[BTH].icrc_ok is True


@needs_shared
def test_gzip_pcap_and_junk(tmp_path):
    gz = tmp_path / "capture.pcap.gz"
    gz.write_bytes(gzip.compress(ERF_CAPTURE.read_bytes()))
    assert isinstance(rdpcap(gz)[0], ERF)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"this is not a capture file at all")
    with pytest.raises(Scapy_Exception, match="not a pcap, pcapng or ERF file"):
        rdpcap(junk)
