"""``show`` from the scanner's columns (``ibwire.cli.show_columns``) against the dissector, on what
the columns must tell apart: every reason for other traffic, and the frames they cannot tell
(which go to the dissector): lines, JSON and trees byte for byte, with both engines."""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from tools import mixed_capture

from ibwire import build, crc
from ibwire.pcap import PcapWriter
from tests.cli.test_cli import BOTH_WAYS

MAC = bytes.fromhex("020000000002020000000001")


def ipv4(proto: int, body: bytes, *, ihl: int = 5, frag: int = 0, version: int = 4,
         length: int | None = None) -> bytes:
    options = bytes(4 * (ihl - 5)) if ihl > 5 else b""
    total = 4 * max(ihl, 5) + len(body) if length is None else length
    return (bytes([version << 4 | ihl, 0]) + struct.pack(">HHHBBH", total, 1, frag, 64, proto, 0)
            + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + options + body)


def ipv6(nxt: int, body: bytes) -> bytes:
    return (bytes.fromhex("60000000") + struct.pack(">HBB", len(body), nxt, 64)
            + bytes(15) + b"\x01" + bytes(15) + b"\x02" + body)


def udp(dport: int, body: bytes = b"hello") -> bytes:
    return struct.pack(">HHHH", 50000, dport, 8 + len(body), 0) + body


def eth(ethertype: int, body: bytes, tags: int = 0) -> bytes:
    tpids = [0x88A8] + [0x8100] * (tags - 1) if tags else []
    head = MAC
    for tpid in tpids:
        head += struct.pack(">H", tpid) + struct.pack(">H", 0x2005)
    return head + struct.pack(">H", ethertype) + body


TCP = struct.pack(">HHIIBBHHH", 22, 50000, 1, 2, 0x50, 0x18, 512, 0, 0) + b"data"


def ethernet_frames() -> list[bytes]:
    """Other traffic of every kind, and frames only the dissector can tell."""
    roce = build("rocev2_ipv4", {"bth.destqp": 0x12, "reth.dmalen": 16}, bytes(16),
                 opcode="RC_RDMA_WRITE_ONLY")
    # a SEND of 8 bytes made an ACK: AETH and 4 bytes the dissector warns about
    ack_with_payload = bytearray(build("rocev2_ipv4", {"bth.destqp": 0x12}, bytes(range(8)),
                                       opcode="RC_SEND_ONLY"))
    ack_with_payload[14 + 20 + 8] = 0x11
    crc.fix(ack_with_payload, "ethernet")
    # a UD SEND to QP1 with 8 bytes after the DETH: too short for a MAD header
    short_mad = bytearray(build("rocev2_ipv4", {"bth.destqp": 3, "deth.srcqp": 3}, bytes(8),
                                opcode="UD_SEND_ONLY"))
    short_mad[14 + 20 + 8 + 7] = 1
    crc.fix(short_mad, "ethernet")
    bad_icrc = bytearray(roce)
    bad_icrc[-1] ^= 0xFF
    return [
        eth(0x0806, bytes(28)),                                      # ARP
        eth(0x0806, bytes(28), tags=1),                              # ARP, one tag
        eth(0x0806, bytes(28), tags=2),                              # ARP under QinQ
        eth(0x88CC, bytes(40), tags=3),                              # LLDP under three tags
        eth(0x0800, ipv4(6, TCP)),                                   # TCP
        eth(0x0800, ipv4(6, TCP, ihl=7)),                            # TCP, IPv4 options
        eth(0x0800, ipv4(17, udp(53))),                              # DNS
        eth(0x0800, ipv4(17, udp(53), ihl=6), tags=1),               # UDP, options, tagged
        eth(0x0800, ipv4(17, udp(4791), frag=0x10)),                 # a non-first fragment
        eth(0x0800, ipv4(17, udp(4791), frag=0x2010, ihl=6)),        # ... with options
        eth(0x0800, ipv4(17, b"\x00\x01")),                          # UDP cut short
        eth(0x0800, ipv4(17, udp(4791), length=12)),                 # RoCE port, bad length
        eth(0x0800, ipv4(6, TCP, ihl=4)),                            # IHL below 5
        eth(0x0800, ipv6(17, udp(53))),                              # IPv6 under 0x0800
        eth(0x0800, ipv4(6, TCP)[:15]),                              # IPv4 header cut
        eth(0x0800, ipv4(6, b"", ihl=15)[:24]),                      # options past the frame
        eth(0x86DD, ipv6(58, bytes(16))),                            # ICMPv6
        eth(0x86DD, ipv6(17, udp(5353))),                            # mDNS over IPv6
        eth(0x86DD, ipv6(0, bytes([17, 0]) + bytes(6) + udp(4791))),  # hop-by-hop, RoCE port
        eth(0x86DD, ipv6(0, bytes([17, 0]) + bytes(6) + udp(53))),   # hop-by-hop, DNS
        eth(0x86DD, ipv6(17, b"\x00")),                              # UDP cut short
        eth(0x86DD, ipv4(6, TCP)),                                   # IPv4 under 0x86DD
        eth(0x8915, bytes(10)),                                      # RoCEv1 cut short
        MAC + b"\x81\x00\x00",                                       # a tag cut short
        MAC[:10],                                                    # not even Ethernet
        roce, bytes(bad_icrc), bytes(ack_with_payload), bytes(short_mad),
        *mad_frames(), *kept_mad_frames(),
    ]


def mad_frames() -> list[bytes]:
    """MADs of the classes ibwire.mads decodes, with attributes it does not know: six a
    summary line writes from the MAD header (SMP directed route, PerfMgt, CM, SA without
    RMPP, in an RMPP DATA segment, an RMPP ACK), seven whose body checks fail (hop count
    past 63, hop pointer past the hops, an SMP cut short, RMPP segment 0, segment 2 with
    the First flag, a length past one segment, an SA header cut short)."""
    def mad(klass: int, classspecific: int = 0, body: int = 232, qp: int = 1,
            **rmpp: int) -> bytes:
        return build("rocev2_ipv4", {"bth.destqp": qp, "deth.srcqp": qp,
                                     "deth.q_key": 0x80010000, "mad.baseversion": 1,
                                     "mad.mgmtclass": klass, "mad.classversion": 1,
                                     "mad.method": 1, "mad.classspecific": classspecific,
                                     "mad.attributeid": 0xFF00,
                                     **{f"rmpp.{k}": v for k, v in rmpp.items()}},
                     bytes(body), opcode="UD_SEND_ONLY")
    data = {"rmpptype": 1, "rmppflags": 0x7}  # RMPP DATA, active, first and last
    return [mad(0x81, 0x0102, qp=0), mad(0x04), mad(0x07),
            mad(0x03, body=220), mad(0x03, body=220, data1=1, data2=200, **data),
            mad(0x03, body=4, rmpptype=2, rmppflags=1),  # an active RMPP ACK: no SA header
            mad(0x81, 64, qp=0), mad(0x81, 0x0502, qp=0), mad(0x01, body=10, qp=0),
            mad(0x03, body=220, data1=0, **data), mad(0x03, body=220, data1=2, **data),
            mad(0x03, body=220, data1=1, data2=221, **data), mad(0x03, body=10)]


def kept_mad_frames() -> list[bytes]:
    """MADs of classes whose bodies are kept as payload, which a tree writes from the
    columns (names of class-dependent status and attribute included), but for a class with
    RMPP too short for its RMPP header (the dissector warns)."""
    def mad(klass: int, status: int, body: int) -> bytes:
        return build("rocev2_ipv4", {"bth.destqp": 1, "deth.srcqp": 1,
                                     "deth.q_key": 0x80010000, "mad.baseversion": 1,
                                     "mad.mgmtclass": klass, "mad.classversion": 1,
                                     "mad.method": 0x81, "mad.status": status,
                                     "mad.attributeid": 0x0001},
                     bytes(body), opcode="UD_SEND_ONLY")
    cut = bytearray(mad(0x05, 0, 4))  # made BIS (0x12, with RMPP): 4 bytes for 12
    cut[14 + 20 + 8 + 12 + 8 + 1] = 0x12
    crc.fix(cut, "ethernet")
    return [bytes(cut), mad(0x12, 0x1C, 220), mad(0x05, 0x0300, 232), mad(0x09, 0, 232),
            mad(0x21, 0x8000, 100)]


def raw_ip_frames() -> list[bytes]:
    return [ipv4(6, TCP), ipv4(17, udp(53)), ipv6(58, bytes(8)), b"\x50" + bytes(30), b"",
            b"\x45", build("rocev2_ipv6", {}, b"abc", opcode="RC_SEND_ONLY", link="ip")]


def _write(path: Path, linktype: int, frames: list[bytes]) -> Path:
    with PcapWriter(path, linktype, nanoseconds=True) as writer:
        for i, frame in enumerate(frames):
            writer.write(frame, 1_700_000_000_000_000_000 + i * 1_000_500)
    return path


@pytest.fixture(scope="module")
def odd_captures(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    where = tmp_path_factory.mktemp("odd")
    return [_write(where / "ethernet.pcap", 1, ethernet_frames()),
            _write(where / "raw-ip.pcap", 101, raw_ip_frames()),
            _write(where / "wifi.pcap", 105, [bytes(30), bytes(3)])]


@pytest.mark.parametrize("both_ways", BOTH_WAYS)
def test_other_traffic_and_odd_frames_both_ways(odd_captures, both_ways):
    for path in odd_captures:
        scanned, dissected = both_ways(path)
        assert scanned == dissected, path.name
        assert len(scanned) >= 2


@pytest.fixture(scope="module")
def mixed_captures(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    where = tmp_path_factory.mktemp("mixed")
    return [mixed_capture.write_ethernet(where / "mixed.pcap", 3000, seed=5),
            mixed_capture.write_infiniband(where / "mixed-ib.pcap", 1500, seed=5)]


@pytest.mark.parametrize("both_ways", BOTH_WAYS)
def test_the_benchmarks_mixed_captures_both_ways(mixed_captures, both_ways):
    """Every opcode, reserved ones, MADs, CNPs, VLAN stacks, IPv6, RoCEv1, IPv4 options,
    other traffic, bad CRCs, native IB with raw packets (the captures of tools/bench_scan)."""
    for path in mixed_captures:
        scanned, dissected = both_ways(path)
        assert scanned == dissected, path.name
        assert len(scanned) > 1000


def test_the_columns_tell_what_they_can(odd_captures, mixed_captures):
    """Which rows the columns write: all of the mixed captures, of the odd frames only those
    whose reason the columns can tell (so that the tests above test the templates)."""
    from ibwire.cli import shapes
    from ibwire.cli.common import scanned

    args = argparse.Namespace(count=None, where=None, no_progress=True)

    from ibwire.mads import DECODED
    from ibwire.scan.program import SLOT

    def dissected(path: Path, mads: list[int] | None = None,
                  kept: list[int] | None = None) -> list[int]:
        rows = []
        for _batch, cols, _failed in scanned(str(path), args, None):
            key, _extra = shapes.classify(cols, "tree")
            rows += (cols["record"][key == 0] + 1).tolist()
            if mads is not None and kept is not None:
                has_mad = ((cols["headers"] & (1 << SLOT["mad"])) != 0) & (cols["error"] == 0)
                is_decoded = np.isin(cols["mad.mgmtclass"], sorted(DECODED))
                # and RMPP DATA/ACK headers, whose words are named by type (ibwire.mads)
                is_decoded |= ((cols["headers"] & (1 << SLOT["rmpp"])) != 0) & np.isin(
                    cols["rmpp.rmpptype"], [1, 2])
                mads += (cols["record"][has_mad & is_decoded] + 1).tolist()
                kept += (cols["record"][has_mad & ~is_decoded] + 1).tolist()
        return rows

    # a tree or JSON: every row but the MADs of the classes whose bodies ibwire.mads
    # decodes or with RMPP DATA/ACK words (those of other classes, their bodies kept as
    # payload, from the columns)
    for path in mixed_captures:
        mads: list[int] = []
        kept: list[int] = []
        assert dissected(path, mads, kept) == mads and mads and kept
    # a summary line: none, MADs of the classes whose bodies ibwire.mads decodes included
    for path in mixed_captures:
        lines, decoded, other = [], [], []
        for _batch, cols, _failed in scanned(str(path), args, None):
            key, _extra = shapes.classify(cols, "line")
            lines += (cols["record"][key == 0] + 1).tolist()
            has_mad = ((cols["headers"] & (1 << SLOT["mad"])) != 0) & (cols["error"] == 0)
            is_decoded = np.isin(cols["mad.mgmtclass"], sorted(DECODED))
            decoded += (cols["record"][has_mad & is_decoded] + 1).tolist()
            other += (cols["record"][has_mad & ~is_decoded] + 1).tolist()
        assert lines == [] and decoded and other  # their attributes are unknown
    # the MADs of mad_frames(): a line dissects those whose body checks fail
    lines = []
    for _batch, cols, _failed in scanned(str(odd_captures[0]), args, None):
        key, _extra = shapes.classify(cols, "line")
        lines += (cols["record"][key == 0] + 1).tolist()
    assert [row for row in lines if row >= 30] == list(range(36, 43))
    # ARP/LLDP under 2-3 tags, UDP or IPv4 header cut, bad length, IHL, versions, IPv6
    # extension headers, RoCEv1 cut, cut tag, no Ethernet; warned-about ACK and MAD
    assert dissected(odd_captures[0]) == [3, 4, 11, 12, 13, 14, 15, 19, 20, 21, 22, 23, 24,
                                          25, 28, 29, *range(30, 44)]
    assert dissected(odd_captures[1]) == [4, 5, 6]


def test_show_writes_the_same_with_the_python_twins(mixed_captures, monkeypatch, capsys):
    """The whole command, C engines against the pure-Python twins (a fresh process each)."""
    import subprocess

    outputs = []
    for env in ({}, {"IBWIRE_NO_EXTENSIONS": "1"}):
        for flags in ([], ["-V"], ["--json"]):
            done = subprocess.run([sys.executable, "-m", "ibwire.cli.main", "show", *flags,
                                   str(mixed_captures[0])], capture_output=True, check=True,
                                  env={**__import__("os").environ, **env})
            outputs.append(done.stdout)
    assert outputs[:3] == outputs[3:]
    assert all(len(out) > 100_000 for out in outputs)
    assert np.all([out.endswith(b"\n") for out in outputs])


def test_trees_name_their_numbers_both_ways(tmp_path):
    """``show -V`` names beside numbers on every packet, not only MADs: the opcode, every
    AETH syndrome (ACK with its credits, RNR NAK with its timer, NAK with its code), ports
    and lengths in decimal; the same from the columns and from the dissector."""
    from ibwire.names import syndrome
    from ibwire.tables import opcodes
    from tests.cli.test_cli import _trees_both_ways

    acks = [build("rocev2_ipv4", {"bth.destqp": 0x12, "aeth.syndrome": s}, b"",
                  opcode="RC_ACKNOWLEDGE") for s in range(256)]
    send = build("rocev2_ipv4", {"bth.destqp": 0x12}, bytes(4), opcode="RC_SEND_ONLY")
    reserved = bytearray(send)
    reserved[14 + 20 + 8] = 0x1F  # a reserved opcode: no header after the BTH is known
    crc.fix(reserved, "ethernet")
    path = _write(tmp_path / "named.pcap", 1, [*acks, send, bytes(reserved)])
    scanned, dissected = _trees_both_ways(path)
    assert scanned == dissected and len(scanned) == 258
    for s, text in enumerate(scanned[:256]):
        assert f"\n      aeth.syndrome = {s if s <= 9 else hex(s)} ({syndrome(s)})\n" in text
        assert "\n      bth.opcode = 0x11 (RC_ACKNOWLEDGE)\n" in text
        assert "\n      udp.dstport = 4791\n" in text
        assert f"\n      ip.len = {len(acks[s]) - 14}\n" in text  # 48: decimal, not 0x30
    assert "\n      bth.opcode = 4 (RC_SEND_ONLY)\n" in scanned[256]
    assert opcodes()[4].name == "RC_SEND_ONLY"
    assert "\n      bth.opcode = 0x1f (reserved opcode)\n" in scanned[257]
    named = {syndrome(s) for s in range(256)}
    assert {"NAK: PSN sequence error", "RNR NAK: 1.28 ms", "ACK, unlimited credits",
            "ACK, 6 credits", "NAK: remote access error"} <= named


def test_summary_lines_of_mads_written_from_their_headers_load_no_mad_declaration(tmp_path):
    """MADs whose line the MAD header columns tell (classes kept as payload, decoded classes'
    unknown attributes) are sorted without ``ibwire.mads`` and its Construct declarations
    (~15 ms at start-up), and none of them is dissected; the scanner's slots come from
    ``scan/_layout.py``, so no header declaration, nor Construct, is loaded at all."""
    import subprocess

    path = _write(tmp_path / "mads.pcap", 1, mad_frames()[:6] + kept_mad_frames()[1:])
    code = ("import sys; from ibwire.cli.main import main; "
            f"status = main(['show', '--no-progress', {str(path)!r}]); "
            "print(status, sorted(m for m in ('ibwire.mads', 'ibwire.inspect', 'construct', "
            "'ibwire.headers.layout', 'ibwire.packet') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert len(out) == 11 and out[-1] == "0 []", out
    assert all(" mad=0x" in line for line in out[:-1]), out


def test_one_line_shape_serves_every_opcode_of_its_headers(tmp_path, capsys):
    """A summary line's template does not depend on the opcode (its name is a text column):
    SENDs of RC and UC, first or only, share one shape, and each line names its own."""
    from ibwire.cli import shapes
    from ibwire.cli.common import scanned
    from ibwire.cli.main import main

    names = ("RC_SEND_ONLY", "UC_SEND_ONLY", "RC_SEND_FIRST", "UC_SEND_MIDDLE")
    frames = [build("rocev2_ipv4", {"bth.destqp": 0x12}, bytes(8), opcode=name)
              for name in names]
    path = _write(tmp_path / "sends.pcap", 1, frames)
    args = argparse.Namespace(count=None, where=None, no_progress=True)
    ((_batch, cols, _failed),) = scanned(str(path), args, None)
    line_keys, _extra = shapes.classify(cols, "line")
    tree_keys, _extra = shapes.classify(cols, "tree")
    assert len(set(line_keys.tolist())) == 1 and line_keys[0] != 0
    assert len(set(tree_keys.tolist())) == len(names)
    assert main(["show", "--no-progress", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[6] for line in lines] == list(names), lines
