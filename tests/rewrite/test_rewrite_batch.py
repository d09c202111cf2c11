"""The batch path of ``ibwire rewrite`` (``ibwire.rewrite.batch``) against the per-packet one:
the same output bytes, the same report and the same summary, for every option set of the
golden and tcprewrite tests and a few more, on the sample and shared captures, on
tools/mixed_capture.py output, and on frames made to hit the edge cases (IPv4 options and
fragments, short and cut frames, UDP checksums zero and wrong, IPv6 extension headers, record
headers the writer normalises). Both CRC twins."""

from __future__ import annotations

import argparse
import gzip
import io
import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw, raw
from tools import mixed_capture

from ibwire import crc
from ibwire._twins import load_twin
from ibwire.cli import rewrite as cli
from ibwire.crc import _python
from ibwire.rewrite import batch, edit, rewrite_capture, vector
from ibwire.rewrite.options import RewriteOptions
from ibwire.scan import scan_capture
from tests import corpus
from tests.corpus import ROOT
from tests.crc.conftest import NO_EXTENSIONS, built_or_skip, engine_or_skip
from tests.rewrite.test_rewrite_roce import CAPTURE_FILES, OPTION_SETS
from tests.rewrite.test_rewrite_tcprewrite import OPTIONS, OURS, _split

ALL_OPTIONS: dict[str, list[str]] = {
    **OPTION_SETS,
    **{f"tcprewrite-{k}": OURS.get(k) or _split(v) for k, v in OPTIONS.items()},
    "none": [],
    "keep-bad-icrc": ["--keep-bad-icrc"],
    "keep-bad-icrc-qpmap": ["--keep-bad-icrc", "--qpmap", "0x22:0x23,0x11:0x12"],
    "ttl-up-dscp": ["--ttl", "+250", "--dscp", "46"],
    "ecn-only": ["--ecn", "3"],
    "tos-v6-map": ["--tclass", "0", "--pnat", "[::/0]:[fd00::/8]"],
    "everything": ["--srcipmap", "10.0.0.0/8:192.168.0.0/16", "--dstipmap", "0.0.0.0/0:1.2.3.0/24",
                   "--pnat", "[::/0]:[fd00::/8]", "--ttl", "5", "--dscp", "10", "--ecn", "1",
                   "--portmap", "1-4000:7,5000-65535:9", "--pkey", "0xffff",
                   "--psn-offset", "0x800000", "--qpmap", "1:2,2:3,0x11:0x99",
                   "--enet-smac", "02:00:00:00:00:aa", "--flowlabel", "7"],
    "mtu-trunc-small": ["--mtu-trunc", "60"],
    "cm-qpmap": ["--qpmap", "0x22:0x33", "--psn-offset", "3"],
}


try:
    from ibwire.rewrite import _kernel
except ImportError:
    _kernel = None


@pytest.fixture(autouse=True, params=["numpy", "c"])
def window_twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with both window editors: the C kernel (``rewrite._kernel``) and
    its numpy twin (``rewrite.vector``)."""
    module = vector if request.param == "numpy" else \
        built_or_skip(_kernel, "ibwire.rewrite._kernel")
    monkeypatch.setattr(batch, "_kernel", module)
    return str(request.param)


def test_the_kernel_is_the_default() -> None:
    """The C kernel is what ``ibwire rewrite`` uses unless IBWIRE_NO_EXTENSIONS=1."""
    assert batch.implementation == ("python" if NO_EXTENSIONS else "c")
    module, _ = load_twin("ibwire.rewrite._kernel", vector)
    assert module is (vector if NO_EXTENSIONS else _kernel)


def options(argv: list[str]) -> RewriteOptions:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return cli.options_from(parser.parse_args(["in", "out", *argv]))  # type: ignore[return-value]


def both(src: Path, tmp: Path, argv: list[str]) -> tuple[tuple[bytes, str, str], ...]:
    """(output bytes, report, summary line) from the per-packet and the batch path; the batch
    path must have handled some packets itself."""
    out = []
    for batched in (False, True):
        target, report = tmp / f"out-{batched}{src.suffix}", io.StringIO()
        summary = rewrite_capture(str(src), target, options(argv), report, batch=batched)
        out.append((target.read_bytes(), report.getvalue(), summary.line(), summary.batched))
    assert out[0][3] == 0
    return tuple(r[:3] for r in out)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_capture.write_ethernet(tmp_path_factory.mktemp("mixed") / "mixed.pcap", 2500)


def _edge_frames() -> list[bytes]:
    e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    ip = {"src": "10.1.2.3", "dst": "10.9.8.7"}
    roce = [bytes(f) for link, f in _sample_roce() if link == "ethernet"]
    frames = [
        raw(e / IP(**ip, options=b"\x01\x01\x01\x00") / UDP(sport=80, dport=99) / Raw(b"o" * 5)),
        raw(e / IP(**ip, flags="MF", frag=0) / UDP(sport=80, dport=99) / Raw(b"f" * 16)),
        raw(e / IP(**ip, frag=3) / Raw(b"g" * 16)),
        raw(e / IP(**ip) / UDP(sport=80, dport=99, chksum=0x1111) / Raw(b"w" * 3)),
        raw(e / IP(**ip) / TCP(sport=8080, dport=80) / Raw(b"t" * 33)),
        raw(e / IPv6(src="2001:db8::1", dst="fd00::2") / IPv6ExtHdrDestOpt() /
            UDP(sport=80, dport=9) / Raw(b"x")),
        raw(e / Dot1Q(vlan=3) / Dot1Q(vlan=4) / IP(**ip) / UDP(sport=80, dport=99)),
        raw(e / IP(**ip) / UDP(sport=80, dport=99) / Raw(b"u" * 40))[:40],  # cut by the capture
        raw(e)[:13], b"", raw(e / IP(**ip))[:30], bytes(14) + b"\x45" + bytes(5),
    ]
    bad = bytearray(roce[0])
    bad[-1] ^= 0xFF  # a bad ICRC
    return frames + roce[:6] + [bytes(bad)]


def _sample_roce() -> list[tuple[str, bytes]]:
    from tests.rewrite.frames import frames
    return frames(ROOT / "captures" / "sample-rocev2.pcap")


def _pcap(path: Path, frames: list[bytes], *, big: bool = False, ns: bool = False) -> Path:
    """A pcap whose record headers the writer changes: a microsecond fraction of a whole
    second or more, an orig_len below caplen, besides normal ones."""
    order = ">" if big else "<"
    magic = 0xA1B23C4D if ns else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)]
    for i, frame in enumerate(frames):
        fraction = (1_000_000 if ns else 1000) * (i % 3) + (1_500_000_000 if ns else 1_500_000) \
            * (i % 7 == 5)
        orig = len(frame) - (i % 5 == 4) * min(len(frame), 3)
        out.append(struct.pack(order + "IIII", 1_700_000_000 + i, fraction, len(frame), orig))
        out.append(frame)
    path.write_bytes(b"".join(out))
    return path


@pytest.mark.parametrize("name", sorted(ALL_OPTIONS))
def test_batch_equals_per_packet_on_captures(name: str, tmp_path: Path, mixed: Path) -> None:
    captures = [p for p in CAPTURE_FILES if p.suffix == ".pcap" and p.exists()]
    assert len(captures) >= (5 if corpus.PRESENT else 2)  # the samples, the shared ones
    for capture in [*captures, mixed]:
        per_packet, batched = both(capture, tmp_path, ALL_OPTIONS[name])
        assert batched[2] == per_packet[2], capture.name
        assert batched[1] == per_packet[1], capture.name
        assert batched[0] == per_packet[0], capture.name


@pytest.mark.parametrize("layout", ["le-us", "be-ns"])
@pytest.mark.parametrize("name", sorted(ALL_OPTIONS))
def test_batch_equals_per_packet_on_edge_frames(name: str, layout: str, tmp_path: Path) -> None:
    src = _pcap(tmp_path / "edge.pcap", _edge_frames() * 3, big=layout == "be-ns",
                ns=layout == "be-ns")
    per_packet, batched = both(src, tmp_path, ALL_OPTIONS[name])
    assert batched == per_packet


@pytest.mark.parametrize("name", ["srcipmap", "everything", "keep-bad-icrc-qpmap"])
def test_batch_equals_per_packet_across_many_windows(name: str, tmp_path: Path, mixed: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Small scanner windows: many batches, each edited by the second thread while the next
    is scanned, written in order."""
    monkeypatch.setattr(batch.BatchRewriter, "window", 4096)
    per_packet, batched = both(mixed, tmp_path, ALL_OPTIONS[name])
    assert batched == per_packet
    windows = sum(1 for _ in scan_capture(str(mixed), fields=(), window=4096))
    assert windows > 20


@pytest.mark.parametrize("twin", ["python", "c"])
def test_batch_with_either_crc_twin(twin: str, tmp_path: Path, mixed: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    module = _python if twin == "python" else engine_or_skip()
    monkeypatch.setattr(vector, "crc", module)
    monkeypatch.setattr(edit, "crc", module)
    per_packet, batched = both(mixed, tmp_path, ALL_OPTIONS["everything"])
    assert batched == per_packet
    assert crc.verify  # the package's own engine is untouched


def test_batch_path_repairs_icrcs_itself(tmp_path: Path) -> None:
    """The batch path does the work (not the per-packet fallback), and what it writes
    verifies: every RoCE ICRC of the output is right after an IP map."""
    src = ROOT / "captures" / "sample-rocev2.pcap"
    target = tmp_path / "out.pcap"
    summary = rewrite_capture(str(src), target, options(["--srcipmap", "10.0.0.0/8:1.0.0.0/8"]))
    assert summary.batched == summary.records > 0
    assert summary.icrc["recomputed"] > 0
    from tests.rewrite.frames import icrc_verdicts
    verdicts = [v for v in icrc_verdicts(target) if v is not None]
    assert verdicts and all(verdicts)


@pytest.mark.parametrize("name", ["srcipmap", "everything", "none"])
def test_batch_equals_per_packet_on_cut_empty_and_gzip_files(name: str, tmp_path: Path,
                                                             mixed: Path) -> None:
    data = mixed.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:len(data) // 3])  # ends inside a record: an unreadable last record
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(data[:24])
    packed = tmp_path / "mixed.pcap.gz"
    packed.write_bytes(gzip.compress(data))
    for src in (cut, empty, packed):
        per_packet, batched = both(src, tmp_path, ALL_OPTIONS[name])
        assert batched == per_packet, src.name
    assert "1 unreadable" in both(cut, tmp_path, [])[1][2]
