"""``ibwire rewrite`` on IPv6 with extension headers (RFC 8200 §4, RFC 4302): TCP/UDP found
behind hop-by-hop, routing, destination options and AH headers for ``--portmap`` and the
checksums, nothing edited behind a Fragment header, and RoCEv2 behind an extension header
left as the CRC engine leaves it (not verifiable: its ICRC and BTH untouched). Both CRC
twins, the per-packet and the batch path. (tests/rewrite/test_rewrite_tcprewrite.py compares
the same frames with tcprewrite.)"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.ipsec import AH
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw
from scapy.utils import wrpcap

from ibwire import crc
from ibwire.errors import IbwireError
from ibwire.rewrite import ipv6, rewrite_capture
from ibwire.rewrite.options import RewriteOptions, cidr_map, port_map
from tests.rewrite.frames import frames
from tests.rewrite.test_rewrite_tcprewrite import extension_frames, wrong_checksum_frames


def _transport(frame: bytes) -> tuple[int, int] | None:
    """(protocol, offset) of TCP/UDP in an Ethernet/IPv6 frame, found independently of
    ``ipv6.upper_layer``: scapy's dissection."""
    pkt = Ether(frame)
    for layer in (UDP, TCP):
        if layer in pkt:
            return (17 if layer is UDP else 6), len(frame) - len(raw(pkt[layer]))
    if AH in pkt and pkt[AH].nh in (6, 17):  # (scapy leaves what follows an AH raw)
        return pkt[AH].nh, len(frame) - len(raw(pkt[AH].payload))
    return None


def _checksum_right(frame: bytes) -> bool:
    """The TCP/UDP checksum over the RFC 8200 §8.1 pseudo-header (a zero UDP one: none)."""
    proto, at = _transport(frame)  # type: ignore[misc]
    layer = (UDP if proto == 17 else TCP)(frame[at:])
    if proto == 17 and layer.chksum == 0:
        return True
    wire = layer.chksum
    layer.chksum = None
    pseudo = IPv6(src=IPv6(frame[14:]).src, dst=IPv6(frame[14:]).dst, nh=proto)
    return (pseudo / layer).__class__(raw(pseudo / layer))[type(layer)].chksum == wire


@pytest.mark.parametrize("batch", [False, True])
def test_ports_and_checksums_behind_extension_headers(twin: ModuleType, batch: bool,
                                                      tmp_path: Path) -> None:
    originals = extension_frames() + wrong_checksum_frames()
    src, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    wrpcap(str(src), [Ether(f) for f in originals])
    opts = RewriteOptions(portmap=port_map("80:8080,8000-8999:99,1-7:9"))
    rewrite_capture(str(src), out, opts, batch=batch)
    mapped = 0
    for orig, (_, new) in zip(originals, frames(out), strict=True):
        fragment = IPv6ExtHdrFragment in Ether(orig)
        where = _transport(orig)
        if fragment or where is None:
            assert new == orig  # a fragment's "transport header" is left alone
            continue
        proto, at = where
        assert ipv6.upper_layer(orig, 14) == (proto, at)
        sport, dport = int.from_bytes(new[at:at + 2], "big"), int.from_bytes(new[at + 2:at + 4],
                                                                              "big")
        old = int.from_bytes(orig[at:at + 2], "big"), int.from_bytes(orig[at + 2:at + 4], "big")
        want = [8080 if p == 80 else 99 if 8000 <= p <= 8999 else 9 if 1 <= p <= 7 else p
                for p in old]
        assert [sport, dport] == want
        assert _checksum_right(new)
        mapped += new != orig
    assert mapped >= 9


def test_upper_layer_rules() -> None:
    """The length rules: 8n+8 bytes for hop-by-hop, routing and destination options, 4n+8
    for AH; a Fragment header, ESP, or headers past the payload length end with none."""
    base = bytes(14) + bytes([0x60, 0, 0, 0, 0, 48, 0, 64]) + bytes(32)
    hbh16 = bytes([51, 1]) + bytes(14)         # 16 bytes, then AH
    ah24 = bytes([17, 4]) + bytes(22)          # 24 bytes, then UDP
    frame = bytearray(base + hbh16 + ah24 + bytes(8))
    assert ipv6.upper_layer(frame, 14) == (17, 14 + 40 + 16 + 24)
    frame[19] = 39                             # payload length short of the UDP header
    assert ipv6.upper_layer(frame, 14)[0] == ipv6.NO_L4
    frame[19], frame[54] = 48, 44              # HBH then a Fragment header
    assert ipv6.upper_layer(frame, 14)[0] == ipv6.NO_L4
    frame[54] = 50                             # ESP: nothing readable follows
    assert ipv6.upper_layer(frame, 14) == (50, 70)


@pytest.mark.parametrize("batch", [False, True])
def test_rocev2_behind_an_extension_header(twin: ModuleType, batch: bool,
                                           tmp_path: Path) -> None:
    """RoCEv2 behind a hop-by-hop header: the CRC engine calls it unsupported (no ICRC place
    is defined for it), so rewrite edits it as UDP only: addresses, the UDP checksum; its BTH
    and ICRC bytes stay as they were, whatever --qpmap/--psn-offset say."""
    bth = bytes.fromhex("04000000000000220000000a") + b"p" * 16 + bytes.fromhex("01020304")
    e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    frame = raw(e / IPv6(src="fd00::5", dst="fd00::7") / IPv6ExtHdrHopByHop() /
                UDP(sport=49152, dport=4791) / Raw(bth))
    with pytest.raises(IbwireError):
        crc.verify(frame, "ethernet")
    src, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    wrpcap(str(src), [Ether(frame)])
    opts = RewriteOptions(qpmap={0x22: 0x33}, psn_offset=5,
                          srcipmap=cidr_map("[fd00::/16]:[fd99::/16]", "--srcipmap"))
    summary = rewrite_capture(str(src), out, opts, batch=batch)
    (_, new), = frames(out)
    assert new[-len(bth):] == bth
    assert new[22:24] == b"\xfd\x99" and _checksum_right(new)
    assert summary.icrc["none"] == 1
