"""The shared real captures (``tests/corpus.py``): every one reads, with the right record
count."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ibwire.pcap import LINK_CODES, index_capture, open_capture, read_capture
from tests.corpus import ERF_CAPTURE, needs_shared
from tests.pcap.capture_synth import record_key

SRC = Path(__file__).resolve().parents[2] / "src"


def test_record_count_matches_provenance(shared_capture: tuple[Path, dict[str, str]]) -> None:
    path, row = shared_capture
    with open_capture(path) as reader:
        records = list(reader)
        assert reader.format == ("pcapng" if path.suffix == ".pcapng" else "pcap")
    assert len(records) == int(row["packets_total"])
    assert [r.index for r in records] == list(range(len(records)))
    assert all(r.error is None and r.warning is None for r in records)
    assert all(r.caplen == len(r.frame) <= r.orig_len for r in records)


def _scapy_records(path: Path) -> list[tuple[bytes, int]]:
    """(stored bytes, header timestamp ns) of each record, read by scapy (independent)."""
    utils = pytest.importorskip("scapy.utils")
    records = []
    if path.suffix == ".pcapng":
        with utils.RawPcapNgReader(str(path)) as reader:
            for data, meta in reader:
                units = (meta.tshigh << 32) | meta.tslow
                records.append((data, units * 10**9 // meta.tsresol))
    else:
        with utils.RawPcapReader(str(path)) as reader:
            for data, meta in reader:
                records.append((data, meta.sec * 10**9 + meta.usec * 1000))
    return records


def test_agrees_with_scapy(shared_capture: tuple[Path, dict[str, str]]) -> None:
    path, _row = shared_capture
    ours = list(read_capture(path))
    theirs = _scapy_records(path)
    assert [bytes(r.record_data) for r in ours] == [data for data, _ in theirs]
    for record, (_data, header_ns) in zip(ours, theirs, strict=True):
        if record.linktype == 197:  # ERF: the ERF header's finer clock, same microsecond
            assert abs(record.timestamp_ns - header_ns) < 1000
        else:
            assert record.timestamp_ns == header_ns


def test_timestamps_monotonic_where_source_is(shared_capture: tuple[Path, dict[str, str]]
                                              ) -> None:
    path, _row = shared_capture
    source = [ns for _data, ns in _scapy_records(path)]
    stamps = [r.timestamp_ns for r in read_capture(path)]
    assert all(1_100_000_000 * 10**9 < t < 1_900_000_000 * 10**9 for t in stamps)
    backwards = [k for k in range(1, len(source)) if source[k] < source[k - 1]]
    assert [k for k in range(1, len(stamps)) if stamps[k] < stamps[k - 1]] == backwards


def test_link_types_of_real_captures(shared_capture: tuple[Path, dict[str, str]]) -> None:
    path, row = shared_capture
    records = list(read_capture(path))
    if "(197)" in row["link_type"]:
        assert {(r.linktype, r.link, r.erf_type) for r in records} == {(197, "infiniband", 21)}
    else:
        assert {(r.linktype, r.link) for r in records} == {(1, "ethernet")}
        assert all(r.frame is r.record_data or bytes(r.frame) == bytes(r.record_data)
                   for r in records)


@needs_shared
def test_erf_capture_frames_start_at_lrh() -> None:
    records = list(read_capture(ERF_CAPTURE))
    assert len(records) == 43
    for record in records:
        frame = bytes(record.frame)
        assert record.link == "infiniband" and record.linktype == 197
        assert frame[0] & 0x0F == 0, "LRH LVer is 0"
        assert frame[1] & 0x03 in (2, 3), "LNH: IBA local or global"
        pkt_len = int.from_bytes(frame[4:6], "big") & 0x7FF
        assert len(frame) == pkt_len * 4 + 2 == record.orig_len == record.caplen
        assert record.erf_flags is not None and record.erf_flags & 0x04
    assert bytes(records[0].frame[:1]) == b"\xf0"  # a VL15 SMP first
    # ERF timestamps are finer than the pcap header's microseconds
    assert any(r.timestamp_ns % 1000 for r in records)


def test_index_agrees_with_reader(shared_capture: tuple[Path, dict[str, str]]) -> None:
    path, _row = shared_capture
    records = list(read_capture(path))
    index = index_capture(path)
    assert not index.errors
    assert len(index.offsets) == len(records)
    buffer = memoryview(index.buffer)
    for row, record in enumerate(records):
        start, length = int(index.offsets[row]), int(index.lengths[row])
        assert bytes(buffer[start:start + length]) == bytes(record.frame)
        assert index.timestamps_ns[row] == record.timestamp_ns
        assert index.link_codes[row] == LINK_CODES[record.link]
        assert index.linktypes[row] == record.linktype
        assert index.orig_lengths[row] == record.orig_len
    assert index.offsets.dtype == np.int64 and index.link_codes.dtype == np.uint8
    del buffer


def test_gzip_of_real_capture(shared_capture: tuple[Path, dict[str, str]], tmp_path: Path
                              ) -> None:
    path, row = shared_capture
    packed = tmp_path / (path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes()))
    with open_capture(packed) as reader:
        assert reader.compressed
        unpacked = [record_key(r) for r in reader]
    assert unpacked == [record_key(r) for r in read_capture(path)]
    assert len(unpacked) == int(row["packets_total"])
    index = index_capture(packed)
    assert len(index.offsets) == len(unpacked) and not index.errors


@needs_shared
def test_stdin_subprocess() -> None:
    code = ("import sys; from ibwire.pcap import read_capture\n"
            "rs = list(read_capture('-'))\n"
            "print(len(rs), sum(r.link == 'infiniband' for r in rs), sum(len(r.frame) for r in rs))")
    expected = list(read_capture(ERF_CAPTURE))
    for data in (ERF_CAPTURE.read_bytes(), gzip.compress(ERF_CAPTURE.read_bytes())):
        done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                              env={"PYTHONPATH": str(SRC)}, check=True, timeout=60)
        count, ib, total = map(int, done.stdout.split())
        assert (count, ib, total) == (43, 43, sum(r.caplen for r in expected))
