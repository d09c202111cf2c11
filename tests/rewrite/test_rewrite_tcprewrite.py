"""Differential test: ``ibwire rewrite`` and tcprewrite 4.4 give identical bytes on frames that
are not RoCE, for the same options.

tcprewrite's known mistakes are expected divergences, each with its reason (KNOWN). Set
IBWIRE_REQUIRE_TCPREWRITE=1 (as .ci/run does) to make a missing tcprewrite a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    PadN,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import LLC, STP, Dot1Q, Dot3, Ether
from scapy.packet import Padding, Raw, raw
from scapy.utils import wrpcap

from ibwire.cli.main import main
from ibwire.rewrite import ipv6
from tests.rewrite.frames import frames

REQUIRED = os.environ.get("IBWIRE_REQUIRE_TCPREWRITE") == "1"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
OPTIONS: dict[str, list[str]] = {
    "srcipmap": ["--srcipmap=10.0.0.0/8:192.168.0.0/16"],
    "dstipmap": ["--dstipmap=10.9.8.7/32:1.2.3.4,239.0.0.0/8:239.1.0.0/16"],
    "pnat": ["--pnat=10.0.0.0/8:172.16.0.0/12"],
    "pnat-v6": ["--pnat=[2001:db8::/32]:[2001:db9::/48]"],
    "dstipmap-v6": ["--dstipmap=[2001:db8:1::/48]:[2001:db8:2::/48]"],
    "portmap": ["--portmap=80:8080,8000-8999:99"],
    "ttl-set": ["--ttl=7"],
    "ttl-up": ["--ttl=+250"],
    "ttl-down": ["--ttl=-5"],
    "tos": ["--tos=0x2e"],
    "tclass": ["--tclass=0x2e"],
    "flowlabel": ["--flowlabel=0x54321"],
    "macs": ["--enet-smac=02:11:22:33:44:55", "--enet-dmac=02:66:77:88:99:aa"],
    "vlan-add": ["--enet-vlan=add", "--enet-vlan-tag=42", "--enet-vlan-pri=5",
                 "--enet-vlan-cfi=0"],
    "vlan-del": ["--enet-vlan=del"],
    "fixcsum": ["--fixcsum"],
    "mtu-trunc": ["--mtu=1000", "--mtu-trunc"],
}
OURS = {"mtu-trunc": ["--mtu-trunc", "1000"]}
"""Where ibwire spells an option differently: tcprewrite's --mtu-trunc is a flag that reads
--mtu; ibwire's takes the MTU itself."""


def _split(args: list[str]) -> list[str]:
    return [part for arg in args for part in arg.split("=", 1)]


def sample_frames() -> list[bytes]:
    """Frames that are not RoCE: IPv4 UDP/TCP (zero and wrong UDP checksums, an Ethernet
    trailer), IPv4 multicast, 802.1Q, IPv6 UDP/TCP."""
    e = Ether(**MACS)
    ip = {"src": "10.1.2.3", "dst": "10.9.8.7", "ttl": 64, "tos": 0x12}
    pkts = [
        e / IP(**ip) / UDP(sport=80, dport=8500) / Raw(b"x" * 20),
        e / IP(**ip) / UDP(sport=80, dport=8500, chksum=0) / Raw(b"x" * 20),
        e / IP(**ip) / UDP(sport=53, dport=53, chksum=0x1234) / Raw(b"bad"),
        e / IP(src="10.9.8.7", dst="10.1.2.3", ttl=3) / TCP(sport=8001, dport=80) / Raw(b"y"),
        e / IP(**ip) / TCP(sport=8001, dport=80, flags="A") / Padding(b"\0" * 6),
        Ether(src=MACS["src"], dst="01:00:5e:01:02:03") /
        IP(src="10.1.2.3", dst="239.1.2.3", ttl=1) / UDP(sport=5000, dport=5000) / Raw(b"m"),
        e / Dot1Q(vlan=7, prio=2) / IP(**ip) / UDP(sport=80, dport=81) / Raw(b"v" * 9),
        e / IPv6(src="2001:db8::5", dst="2001:db8:1::7", hlim=9, tc=3, fl=0x12345) /
        UDP(sport=80, dport=9) / Raw(b"z" * 7),
        e / IPv6(src="2001:db8:1::7", dst="2001:db8::5") / TCP(sport=8080, dport=8001),
        e / IP(**ip) / UDP(sport=1, dport=2) / Raw(b"q" * 1400),
        e / IPv6(src="2001:db8::1", dst="2001:db8::2") / TCP(sport=1, dport=2) / Raw(b"q" * 1400),
    ]
    return [raw(p) for p in pkts] + extension_frames()


def extension_frames() -> list[bytes]:
    """IPv6 with extension headers (RFC 8200 §4, RFC 4302): TCP/UDP behind hop-by-hop,
    routing, destination options and AH headers, fragments; right checksums (tcprewrite 4.4
    updates them incrementally when an address moves, and recomputes an IPv6 packet's only
    under --fixcsum: see test_fixcsum_behind_extension_headers)."""
    e = Ether(**MACS)
    ok = {"src": "2001:db8::5", "dst": "2001:db8:1::7", "hlim": 9}
    pkts = [
        e / IPv6(**ok) / IPv6ExtHdrHopByHop() / UDP(sport=80, dport=8500) / Raw(b"a" * 11),
        e / IPv6(**ok) / IPv6ExtHdrDestOpt() / TCP(sport=8001, dport=80) / Raw(b"b" * 5),
        e / IPv6(**ok) / IPv6ExtHdrRouting() / UDP(sport=8080, dport=80) / Raw(b"c" * 3),
        e / IPv6(**ok) / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / UDP(sport=80, dport=1) /
        Raw(b"d" * 9),
        e / IPv6(**ok) / IPv6ExtHdrHopByHop(options=[PadN(optdata=b"\0" * 10)]) /
        UDP(sport=80, dport=2) / Raw(b"e" * 9),
        e / IPv6(**ok) / AH(nh=17, payloadlen=4, spi=1, seq=2, icv=b"\0" * 12) /
        UDP(sport=80, dport=3) / Raw(b"f" * 9),
        e / IPv6(**ok) / IPv6ExtHdrFragment(offset=0, m=1, id=5) / UDP(sport=80, dport=4) /
        Raw(b"g" * 16),
        e / IPv6(**ok, nh=44) / IPv6ExtHdrFragment(offset=3, id=5, nh=17) / Raw(b"h" * 22),
        e / IPv6(**ok) / IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment(offset=0, m=1, id=6) /
        UDP(sport=80, dport=5, chksum=7) / Raw(b"i" * 16),
        e / IPv6(**ok) / IPv6ExtHdrHopByHop() / UDP(sport=80, dport=8500, chksum=0) /
        Raw(b"k" * 11),
    ]
    return [raw(p) for p in pkts]


def wrong_checksum_frames() -> list[bytes]:
    """TCP/UDP behind IPv6 extension headers with wrong checksums, for --fixcsum."""
    e = Ether(**MACS)
    bad = {"src": "fd00::5", "dst": "fd00:1::7", "hlim": 9}
    pkts = [
        e / IPv6(**bad) / IPv6ExtHdrHopByHop() / UDP(sport=80, dport=8500, chksum=0x1234) /
        Raw(b"j" * 11),
        e / IPv6(**bad) / IPv6ExtHdrDestOpt() / TCP(sport=8001, dport=80, chksum=0x4321),
        e / IPv6(**bad) / IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt() /
        UDP(sport=1, dport=2, chksum=0x1111) / Raw(b"l" * 3),
        e / IPv6(**bad) / AH(nh=6, payloadlen=4, spi=1, seq=2, icv=b"\0" * 12) /
        TCP(sport=1, dport=2, chksum=0x2222),
        e / IPv6(**bad) / IPv6ExtHdrFragment(offset=0, m=1, id=5) /
        UDP(sport=80, dport=4, chksum=0x3333) / Raw(b"m" * 16),
    ]
    return [raw(p) for p in pkts]


def _extensions(frame: bytes) -> list[tuple[int, int]]:
    """(Next Header value, its length byte) of each IPv6 extension header of ``frame``."""
    chain: list[tuple[int, int]] = []
    nh, at = frame[20], 54
    while nh in ipv6.WALKED or nh == ipv6.FRAGMENT:
        chain.append((nh, frame[at + 1]))
        if nh == ipv6.FRAGMENT:
            break
        unit = ipv6.WALKED[nh]
        nh, at = frame[at], at + (frame[at + 1] + (2 if unit == 4 else 1)) * unit
    return chain


def known_divergence(name: str, original: bytes, ours: bytes, theirs: bytes) -> str | None:
    """Why tcprewrite's output is wrong here, or None (then the bytes must agree)."""
    etype = original[12:14]
    is_ipv6 = etype == b"\x86\xdd"
    multicast4 = etype == b"\x08\x00" and 224 <= original[30] <= 239
    chain = _extensions(original) if is_ipv6 else []
    if chain and theirs[14:] == original[14:]:
        if chain[0][0] == ipv6.FRAGMENT:
            return ("tcprewrite 4.4 makes no IP edit to an IPv6 packet whose first extension "
                    "header is a Fragment header (get_layer4_v6 finds no layer 4: a soft error)")
        if name == "portmap":
            return ("tcprewrite 4.4 maps ports only where the IPv6 Next Header is TCP or UDP "
                    "itself (rewrite_ipv6_ports), never behind extension headers")
    if any(nh in (0, 43, 60) and size for nh, size in chain) and ours[14:54] == theirs[14:54]:
        return ("tcprewrite 4.4 sizes every extension header by the AH rule, 4n+8 bytes "
                "(IPV6_EXTLEN_TO_BYTES), not RFC 8200's 8n+8: it looks for the transport header "
                "in the wrong place")
    if ipv6.FRAGMENT in [nh for nh, _ in chain[1:]] and len(ours) == len(theirs):
        data = 14 + 40 + sum(8 if nh == ipv6.FRAGMENT else (size + 1) * 8 for nh, size in chain)
        if ours[12:data] == theirs[12:data]:
            return ("tcprewrite 4.4 takes a fragment behind another extension header for a "
                    "whole datagram and edits its transport checksum; ibwire leaves a "
                    "fragment's transport header alone (a first fragment's checksum covers "
                    "data it does not hold)")
    if (is_ipv6 or multicast4) and ours[12:] == theirs[12:] and ours[:12] != theirs[:12]:
        return ("tcprewrite 4.4 rewrites the MACs of IPv6 and IPv4-multicast frames on any "
                "edit (appneta/tcpreplay #793/#794)")
    if etype == b"\x08\x00" and len(original) > 14 + int.from_bytes(original[16:18], "big"):
        l3 = 18 if ours[12:14] == b"\x81\x00" else 14
        if len(ours) == len(theirs) and ours[l3 + 2:l3 + 4] != theirs[l3 + 2:l3 + 4]:
            return ("tcprewrite 4.4 stretches an edited IPv4 packet's total length over the "
                    "Ethernet trailer")
    return None


@pytest.fixture(scope="module")
def tcprewrite() -> str:
    found = shutil.which("tcprewrite")
    if found is None:
        if REQUIRED:
            pytest.fail("tcprewrite not installed but IBWIRE_REQUIRE_TCPREWRITE=1")
        pytest.skip("tcprewrite not installed (apt-get install tcpreplay)")
    return found


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_same_bytes_as_tcprewrite(name: str, tcprewrite: str, tmp_path: Path) -> None:
    src = tmp_path / "in.pcap"
    originals = sample_frames()
    wrpcap(str(src), [Ether(f) for f in originals])
    theirs_path, ours_path = tmp_path / "theirs.pcap", tmp_path / "ours.pcap"
    subprocess.run([tcprewrite, *OPTIONS[name], "-i", str(src), "-o", str(theirs_path)],
                   check=True, capture_output=True)
    ours_argv = OURS.get(name) or _split(OPTIONS[name])
    assert main(["rewrite", str(src), str(ours_path), *ours_argv]) == 0
    theirs = [f for _, f in frames(theirs_path)]
    ours = [f for _, f in frames(ours_path)]
    assert len(ours) == len(theirs) == len(originals)
    edited = 0
    for i, (orig, a, b) in enumerate(zip(originals, ours, theirs, strict=True)):
        edited += a != orig
        if a != b:
            reason = known_divergence(name, orig, a, b)
            assert reason is not None, f"{name}, frame {i}:\n ours   {a.hex()}\n theirs {b.hex()}"
    assert edited, f"{name} changed nothing: the comparison would prove nothing"


def test_fixcsum_behind_extension_headers(tcprewrite: str, tmp_path: Path) -> None:
    """--fixcsum finds TCP/UDP behind hop-by-hop, routing, destination options and AH headers
    as tcprewrite does, and leaves a fragment alone as it does."""
    src, theirs_path, ours_path = tmp_path / "in.pcap", tmp_path / "t.pcap", tmp_path / "o.pcap"
    originals = wrong_checksum_frames()
    wrpcap(str(src), [Ether(f) for f in originals])
    subprocess.run([tcprewrite, "--fixcsum", "-i", str(src), "-o", str(theirs_path)],
                   check=True, capture_output=True)
    assert main(["rewrite", str(src), str(ours_path), "--fixcsum"]) == 0
    ours = [f for _, f in frames(ours_path)]
    theirs = [f for _, f in frames(theirs_path)]
    assert [a[12:] for a in ours] == [b[12:] for b in theirs]  # (MACs: #793, as above)
    fixed = [a != orig for a, orig in zip(ours, originals, strict=True)]
    assert fixed == [True, True, True, True, False]


def _version(tcprewrite: str) -> tuple[int, ...]:
    out = subprocess.run([tcprewrite, "-V"], capture_output=True, text=True, check=False)
    words = (out.stdout + out.stderr).split()
    text = words[words.index("version:") + 1] if "version:" in words else "0"
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def _l4_checksum_right(frame: bytes) -> bool:
    pkt = Ether(frame)
    layer = pkt[UDP] if UDP in pkt else pkt[TCP]
    wire = layer.chksum
    del layer.chksum
    return Ether(raw(pkt))[type(layer)].chksum == wire


#: Edits of every kind: an IPv6 field outside the checksum, one inside it, ports, MACs.
DIFFERENCES = ["ttl-set", "tclass", "srcipmap-v6", "portmap", "macs"]


@pytest.mark.parametrize("name", DIFFERENCES)
def test_documented_differences(name: str, tcprewrite: str, tmp_path: Path) -> None:
    """Where README says ibwire and tcprewrite 4.4 part ways on purpose:

    - a TCP/UDP checksum behind IPv6 that was wrong: ibwire fixes every TCP/UDP checksum
      whenever any edit is asked for (IPv4 and IPv6 alike); tcprewrite 4.4 fixes IPv4's, but
      over IPv6 only updates the checksum for the bytes it edits, so a wrong one stays wrong
      (only --fixcsum recomputes it);
    - an IEEE 802.3 frame (an STP BPDU: a length, not an EtherType, then LLC): ibwire leaves
      it alone; tcprewrite before 4.5.0 edits it as if IPv4 (appneta/tcpreplay #835)."""
    e = Ether(**MACS)
    v6 = {"src": "2001:db8::5", "dst": "2001:db8:1::7", "hlim": 9}
    originals = [raw(e / IPv6(**v6) / UDP(sport=80, dport=9, chksum=0x1234) / Raw(b"z" * 7)),
                 raw(e / IPv6(**v6) / TCP(sport=80, dport=9, chksum=0x1234)),
                 raw(Dot3(src=MACS["src"], dst="01:80:c2:00:00:00") / LLC() / STP())]
    src, theirs_path, ours_path = tmp_path / "in.pcap", tmp_path / "t.pcap", tmp_path / "o.pcap"
    wrpcap(str(src), [Ether(f) for f in originals])
    argv = {**OPTIONS, "srcipmap-v6": ["--srcipmap=[2001:db8::/32]:[2001:db9::/32]"]}[name]
    subprocess.run([tcprewrite, *argv, "-i", str(src), "-o", str(theirs_path)], check=True,
                   capture_output=True)
    assert main(["rewrite", str(src), str(ours_path), *_split(argv)]) == 0
    ours = [f for _, f in frames(ours_path)]
    theirs = [f for _, f in frames(theirs_path)]
    assert len(ours) == len(theirs) == 3
    for orig, a, b in zip(originals[:2], ours[:2], theirs[:2], strict=True):
        assert a != orig and _l4_checksum_right(a)
        assert not _l4_checksum_right(b)
    stp, a, b = originals[2], ours[2], theirs[2]
    assert a[12:] == stp[12:] and (a == stp) == (name != "macs")
    if _version(tcprewrite) < (4, 5, 0):
        assert b[12:] != stp[12:]     # its "IPv4 header" rewritten over the LLC and BPDU
