"""Streaming: iterating a ~50 MB capture keeps Python allocations small (not proportional to
the file): mapped files hand out views, streams keep one chunk plus one record."""

from __future__ import annotations

import gc
import gzip
import tracemalloc
import zlib
from pathlib import Path

import pytest

from ibwire.pcap import PcapWriter, filemap, index_capture, read_capture
from tests.pcap.capture_synth import T0, ethernet_frame

FILE_BYTES = 50 * 1024 * 1024
FRAME = ethernet_frame(bytes(range(256)) * 2)


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    count = FILE_BYTES // (16 + len(FRAME))
    with PcapWriter(path, 1, nanoseconds=True) as writer:
        for k in range(count):
            writer.write(FRAME, T0 + k)
    return path, count


def _peak_while_iterating(path: Path) -> tuple[int, int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        count = total = 0
        for record in read_capture(path):
            count += 1
            total += record.caplen
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, total, peak


def test_mapped_iteration_memory_is_flat(big_capture: tuple[Path, int]) -> None:
    path, count = big_capture
    assert path.stat().st_size > 45 * 1024 * 1024
    seen, total, peak = _peak_while_iterating(path)
    assert (seen, total) == (count, count * len(FRAME))
    # mapped (C): views; read in chunks (the twin, IBWIRE_NO_EXTENSIONS=1): one chunk and a record
    limit = 1024 * 1024 if filemap.maps() else 8 * 1024 * 1024
    assert peak < limit, f"peak {peak} bytes"


def test_gzip_iteration_memory_is_flat(big_capture: tuple[Path, int], tmp_path: Path) -> None:
    path, count = big_capture
    packed = tmp_path / "big.pcap.gz"
    with open(path, "rb") as source, gzip.open(packed, "wb", compresslevel=1) as target:
        while chunk := source.read(1 << 20):
            target.write(chunk)
    seen, total, peak = _peak_while_iterating(packed)
    assert (seen, total) == (count, count * len(FRAME))
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes"
    assert zlib  # gzip data is inflated piecewise: one chunk plus one record in memory


def test_index_holds_columns_not_frames(big_capture: tuple[Path, int]) -> None:
    path, count = big_capture
    gc.collect()
    tracemalloc.start()
    try:
        index = index_capture(path)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(index.offsets) == count and not index.errors
    # seven columns of 1 to 8 bytes (34 bytes a record) and a few fixed-size work areas; the
    # twin (IBWIRE_NO_EXTENSIONS=1) reads the file into memory instead of mapping it
    held = 0 if filemap.maps() else path.stat().st_size
    per_record = (peak - held - 2 * 1024 * 1024) / count
    assert per_record < 48, f"{per_record:.1f} bytes per record at peak"
    assert int(index.timestamps_ns[-1]) == T0 + count - 1
