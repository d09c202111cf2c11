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
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Padding, Raw, raw
from scapy.utils import wrpcap

from ibwire.cli.main import main
from tests.rewrite.frames import frames

REQUIRED = os.environ.get("IBWIRE_REQUIRE_TCPREWRITE") == "1"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
OPTIONS: dict[str, list[str]] = {
    "srcipmap": ["--srcipmap=10.0.0.0/8:192.168.0.0/16"],
    "dstipmap": ["--dstipmap=10.9.8.7/32:1.2.3.4,239.0.0.0/8:239.1.0.0/16"],
    "pnat": ["--pnat=10.0.0.0/8:172.16.0.0/12"],
    "pnat-v6": ["--pnat=[2001:db8::/32]:[2001:db9::/48]"],
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
    return [raw(p) for p in pkts]


def known_divergence(name: str, original: bytes, ours: bytes, theirs: bytes) -> str | None:
    """Why tcprewrite's output is wrong here, or None (then the bytes must agree)."""
    etype = original[12:14]
    ipv6 = etype == b"\x86\xdd"
    multicast4 = etype == b"\x08\x00" and 224 <= original[30] <= 239
    if (ipv6 or multicast4) and ours[12:] == theirs[12:] and ours[:12] != theirs[:12]:
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
