"""Bindings: every encapsulation dissects to the InfiniBand layers, whatever else is loaded."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest
from scapy.all import DNS, TFTP  # noqa: F401  (loads the layers bound to UDP ports 53/69)
from scapy.compat import raw
from scapy.error import log_runtime
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import rdpcap as scapy_rdpcap
from scapy.utils import wrpcap

from ibwire import crc
from ibwire.scapy import (
    AETH,
    AETH_SYNDROMES,
    BTH,
    CHAINS,
    DETH,
    GRH,
    LRH,
    MAD,
    OPCODES,
    RETH,
    RMPP,
    CNPPadding,
    ImmDt,
)
from ibwire.tables import opcodes

ETHER = {"dst": "02:00:00:00:00:02", "src": "02:00:00:00:00:01"}


def _ack(sport: int) -> bytes:
    return raw(Ether(**ETHER) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=sport, dport=4791)
               / BTH(opcode="RC_ACKNOWLEDGE", destqp=17, psn=9) / AETH(syndrome="ACK_UNLIMITED"))


@pytest.mark.parametrize("sport", [53, 69, 4791, 49152])
def test_udp_4791_is_bth_whatever_the_source_port(sport):
    packet = Ether(_ack(sport))
    assert isinstance(packet[UDP].payload, BTH)
    assert packet[AETH].syndrome == 0x1F
    assert packet[BTH].icrc_ok is True


def test_dns_still_dissects_when_not_to_4791():
    packet = Ether(raw(Ether(**ETHER) / IP() / UDP(sport=4791, dport=53) / DNS()))
    assert DNS in packet and BTH not in packet


def test_top_down_defaults():
    udp = UDP() / BTH()
    assert (udp.sport, udp.dport, udp.chksum) == (49152, 4791, 0)
    assert raw(IP() / UDP(chksum=None) / BTH())[26:28] != b"\0\0"
    assert (BTH() / AETH()).opcode == OPCODES_BY_NAME["RC_ACKNOWLEDGE"]
    assert (BTH() / CNPPadding()).opcode == OPCODES_BY_NAME["CNP"]
    assert (Ether() / GRH()).type == 0x8915
    assert (LRH() / GRH()).lnh == 3 and (LRH() / BTH()).lnh == 2


OPCODES_BY_NAME = {name: value for value, name in OPCODES.items()}


def test_chains_come_from_the_specs_table():
    assert OPCODES == {v: op.name for v, op in opcodes().items()}
    for value, op in opcodes().items():
        assert [layer.header.title for layer in CHAINS[value]] == list(op.headers)


@pytest.mark.parametrize(("outer", "start", "link"), [
    (lambda: Ether(**ETHER) / GRH(), Ether, "ethernet"),
    (lambda: Ether(**ETHER) / Dot1Q(vlan=7) / GRH(), Ether, "ethernet"),
    (lambda: Ether(**ETHER) / Dot1AD(vlan=7) / Dot1Q(vlan=8) / GRH(), Ether, "ethernet"),
    (lambda: Ether(**ETHER) / Dot1Q(vlan=7) / IP() / UDP(), Ether, "ethernet"),
    (lambda: Ether(**ETHER) / Dot1AD(vlan=7) / Dot1Q(vlan=8) / IPv6() / UDP(), Ether,
     "ethernet"),
    (lambda: IPv6() / UDP(), IPv6, "ip"),
    (lambda: CookedLinux(proto=0x8915) / GRH(), CookedLinux, None),
    (lambda: LRH() / GRH(), LRH, "infiniband"),
    (lambda: LRH(), LRH, "infiniband"),
])
def test_every_encapsulation_round_trips(outer, start, link):
    packet = (outer() / BTH(opcode="RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", destqp=3, psn=4)
              / RETH(va=0x1000, r_key=7, dmalen=5) / ImmDt(immdt=9) / Raw(b"hello"))
    frame = raw(packet)
    dissected = start(frame)
    assert [type(dissected[c]) for c in (BTH, RETH, ImmDt)] == [BTH, RETH, ImmDt]
    assert dissected[BTH].padcnt == 3 and dissected[Raw].load == b"hello"
    assert dissected[BTH].icrc_ok is True
    if LRH in dissected:
        assert dissected[LRH].vcrc_ok is True
    if link is not None:
        assert crc.verify(frame, link).icrc_ok is True
    assert raw(dissected) == frame


def test_ud_to_qp1_carries_a_mad_and_rmpp_for_sa():
    packet = LRH(raw(LRH() / BTH(opcode="UD_SEND_ONLY", destqp=1) / DETH(q_key=0x80010000)
                     / MAD(mgmtclass="SUBN_ADM", method="GET_TABLE") / RMPP(rmppversion=1)
                     / Raw(bytes(200))))
    assert [type(packet[c]) for c in (DETH, MAD, RMPP)] == [DETH, MAD, RMPP]
    assert packet[MAD].sprintf("%MAD.mgmtclass%") == "SUBN_ADM"
    cm = LRH(raw(LRH() / BTH(opcode="UD_SEND_ONLY", destqp=1) / DETH() / MAD(mgmtclass="CM")
                 / Raw(bytes(232))))
    assert MAD in cm and RMPP not in cm
    not_gsi = LRH(raw(LRH() / BTH(opcode="UD_SEND_ONLY", destqp=2) / DETH(srcqp=0x22)
                      / Raw(bytes(24))))
    assert MAD not in not_gsi
    # a response from QP1 to a requester on another QP is a MAD too (as ibwire.parse says)
    reply = LRH(raw(LRH() / BTH(opcode="UD_SEND_ONLY", destqp=0x22) / DETH(srcqp=1)
                    / MAD(mgmtclass="PERF_MGMT") / Raw(bytes(232))))
    assert MAD in reply and reply[MAD].sprintf("%MAD.mgmtclass%") == "PERF_MGMT"


def test_aeth_syndrome_names():
    assert AETH(syndrome="NAK_REMOTE_ACCESS_ERROR").syndrome == 0x62
    assert AETH(syndrome="RNR_NAK_14").syndrome == 0x2E
    assert AETH_SYNDROMES[0x1F] == "ACK_UNLIMITED"
    aeth = AETH(syndrome=0x61)
    assert (aeth.syndrome_type, aeth.syndrome_value) == ("NAK", 1)
    assert "NAK_INVALID_REQUEST" in aeth.sprintf("%AETH.syndrome%")


def test_show_gives_the_verdicts():
    packet = LRH(raw(LRH() / BTH(opcode="RC_SEND_ONLY") / Raw(b"x")))
    shown = packet.show(dump=True)
    assert "icrc" in shown and "[ok]" in shown
    packet[BTH].icrc ^= 1
    assert packet[BTH].icrc_ok is False and "[BAD]" in packet.show(dump=True)
    del packet[LRH].vcrc  # recomputed over the bytes as they are: a bad ICRC, a good VCRC
    again = LRH(raw(packet))
    assert (again[BTH].icrc_ok, again[LRH].vcrc_ok) == (False, True)


def test_icrc_given_is_written_least_significant_byte_first():
    frame = raw(IP() / UDP() / BTH(opcode="RC_SEND_ONLY", icrc=0x11223344))
    assert frame[-4:] == bytes.fromhex("44332211")


def test_truncated_frame_keeps_its_bytes():
    frame = raw(Ether(**ETHER) / IP() / UDP() / BTH(opcode="RC_RDMA_WRITE_ONLY") / RETH()
                / Raw(bytes(100)))
    cut = frame[:90]
    packet = Ether(cut)
    assert packet[BTH].icrc is None and packet[BTH].icrc_ok is None
    assert raw(packet) == cut


def test_standalone_bth_gets_zero_icrc_and_a_warning():
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    log_runtime.addHandler(handler)
    try:
        assert raw(BTH(opcode="RC_SEND_ONLY"))[-4:] == bytes(4)
    finally:
        log_runtime.removeHandler(handler)
    assert any("ICRC left as zeros" in message for message in seen)


def test_linktype_infiniband_round_trips_through_pcap(tmp_path):
    path = tmp_path / "ib.pcap"
    wrpcap(str(path), [LRH() / BTH(opcode="RC_SEND_ONLY") / Raw(b"abcd")])
    assert path.read_bytes()[20:24] == (247).to_bytes(4, "little")
    (packet,) = scapy_rdpcap(str(path))
    assert isinstance(packet, LRH) and packet[BTH].icrc_ok is True


COEXIST = textwrap.dedent("""
    import json, sys
    import scapy.layers.dns  # DNS bound to UDP port 53 before either
    {first}
    {second}
    from scapy.compat import raw
    from scapy.layers.l2 import Ether
    from scapy.packet import Packet
    import ibwire.scapy as ours
    from scapy.contrib import roce as contrib
    vectors = json.load(open(sys.argv[1]))["vectors"]
    for v in vectors:
        if v["starts_with"] != "Ethernet":
            continue
        packet = Ether(bytes.fromhex(v["packet_hex"]))
        assert type(packet[ours.BTH]) is ours.BTH, v["id"]
        assert not packet.haslayer(contrib.BTH), v["id"]
        assert packet[ours.BTH].icrc_ok is (not v["known_bad"]), v["id"]
    from scapy.layers.inet import IP, UDP
    built = raw(Ether() / IP() / UDP(dport=4791) / contrib.BTH(opcode=4, dqpn=5))
    mine = Ether(built)[ours.BTH]
    assert mine.icrc_ok is True and mine.destqp == 5
    for bth in (ours.BTH(opcode=0x11), contrib.BTH(opcode=0x11)):  # RC ACK from port 53
        ack = Ether(raw(Ether() / IP() / UDP(sport=53, dport=4791) / bth / ours.AETH()))
        assert type(ack[UDP].payload) is ours.BTH and ack[ours.BTH].icrc_ok is True
    assert UDP.payload_guess[0] == ({{"dport": 4791}}, ours.BTH)
    assert UDP.guess_payload_class is Packet.guess_payload_class
    print("ok")
""")
CONTRIB = {"import": "import scapy.contrib.roce",
           "load_contrib": "from scapy.main import load_contrib; load_contrib('roce')"}


@pytest.mark.parametrize("how", sorted(CONTRIB))
@pytest.mark.parametrize("order", ["contrib-first", "ibwire-first"])
def test_coexists_with_scapy_contrib_roce(order, how):
    """Loaded before or after ibwire (its ``bind_layers(UDP, BTH, dport=4791)`` appends after
    our entry), contrib's frames dissect as ibwire's layers, an ACK from port 53 too."""
    from tests.corpus import DATA

    contrib, ours = CONTRIB[how], "import ibwire.scapy"
    first, second = (contrib, ours) if order == "contrib-first" else (ours, contrib)
    code = COEXIST.format(first=first, second=second)
    result = subprocess.run([sys.executable, "-c", code, str(DATA / "vectors.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
