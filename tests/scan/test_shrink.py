"""A capture that shrinks while it is read (log rotation, another process truncating it):
never SIGBUS, never a silent end. Found shorter before reading on, the data ends with a
ShrunkError row at the record cut; bytes that vanished under a window being read raise
CaptureError naming the file and the record. Both twins of ``ibwire.pcap.filemap`` (maps
guarded in C, reads in Python): the ``filemap_twin`` fixture."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ibwire.pcap.index
import ibwire.scan.feed
from ibwire.errors import CaptureError, ShrunkError
from ibwire.pcap import index_capture, open_capture
from ibwire.scan import scan_capture, scan_index
from ibwire.scan.tally import open_tally
from tests.pcap.capture_synth import ethernet_frame, pcap_file

FRAME = ethernet_frame(b"\x45" + bytes(985))  # IPv4, not RoCE: "other", 1000 bytes
RECORD = 16 + len(FRAME)
COUNT = 3000
CUT_RECORD = 2500
CUT = 24 + CUT_RECORD * RECORD + RECORD // 2  # inside record 2500 (from 0)


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    path = tmp_path / "rotating.pcap"
    path.write_bytes(pcap_file([FRAME] * COUNT))
    return path


def truncate_on_map(monkeypatch, module, path: Path, nth: int, *, after: bool) -> list[int]:
    """Truncate ``path`` at the ``nth`` window the reader maps: before it is made (to CUT),
    or right after (to the middle of that window, under the map). Returns [the cut]."""
    made, cut = [0], []
    real = module.map_window

    def mapping(fileno: int, offset: int, length: int, name: str):
        made[0] += 1
        if made[0] == nth and not after:
            os.truncate(path, CUT)
            cut.append(CUT)
        window = real(fileno, offset, length, name)
        if made[0] == nth and after:
            cut.append(offset + min(length, os.path.getsize(path) - offset) // 2)
            os.truncate(path, cut[0])
        return window

    monkeypatch.setattr(module, "map_window", mapping)
    return cut


def named(error, capture):
    """A ShrunkError names its file, as every capture error does; its text for a line that
    names the file and the record already (``in_record``) does not."""
    assert error.name == str(capture)
    assert str(error).startswith(f"{capture}: the file shrank from ")
    assert not error.in_record().startswith(str(capture))


@pytest.mark.parametrize("threads", [1, 2])
def test_scan_finds_the_file_shorter_and_ends_it_cut(filemap_twin, capture, threads):
    batches = scan_capture(capture, window=1 << 18, threads=threads)
    rows = [next(batches)["error"].tolist()]
    os.truncate(capture, CUT)  # while windows are mapped, beyond what was read
    shrunk = []
    for batch in batches:
        rows.append(batch["error"].tolist())
        shrunk += list(batch.errors.values())
    errors = [code for part in rows for code in part]
    assert len(errors) == CUT_RECORD + 1
    assert set(errors[:-1]) == {1}  # every whole record: other traffic
    assert len(shrunk) == 1 and isinstance(shrunk[0], ShrunkError)
    assert shrunk[0].record == CUT_RECORD
    assert f"from {COUNT * RECORD + 24} to {CUT} bytes" in str(shrunk[0])
    named(shrunk[0], capture)


def test_scan_raises_when_bytes_vanish_under_a_window(filemap_twin, capture, monkeypatch):
    cut = truncate_on_map(monkeypatch, ibwire.scan.feed, capture, 4, after=True)
    seen = []
    with pytest.raises(CaptureError, match="shrank") as found:
        for batch in scan_capture(capture, window=1 << 18, threads=2):
            seen += batch["error"].tolist()
    assert str(capture) in str(found.value) and "record" in str(found.value)
    assert set(seen) == {1}  # no row read from zeros came out
    assert len(seen) < (cut[0] - 24) // RECORD
    assert len(seen) <= found.value.record < COUNT


def test_tally_finds_the_file_shorter(filemap_twin, capture):
    tally = open_tally(capture, threads=2, window=1 << 20)
    assert tally is not None
    with tally:
        windows = tally.windows()
        counted = next(windows).counts[0]
        os.truncate(capture, CUT)
        rest = list(windows)
    counted += sum(w.counts[0] for w in rest)
    assert counted == CUT_RECORD
    assert isinstance(rest[-1].error, ShrunkError)
    assert rest[-1].error_record == CUT_RECORD
    named(rest[-1].error, capture)


def test_tally_raises_when_bytes_vanish_under_both_threads(filemap_twin, capture,
                                                           monkeypatch):
    truncate_on_map(monkeypatch, ibwire.scan.feed, capture, 3, after=True)
    tally = open_tally(capture, threads=2, window=1 << 20)
    assert tally is not None
    counted = 0
    with tally, pytest.raises(CaptureError, match=f"{capture}.*shrank.*record"):
        for window in tally.windows():
            counted += window.counts[0]
            assert window.error is None
    assert counted < COUNT


def test_reader_ends_or_raises(filemap_twin, capture):
    """Mapped (C): the bytes past the new end vanish under the map: CaptureError. Read in
    chunks (Python): the data ends early: a last ShrunkError record."""
    records = []
    with open_capture(capture, chunk_size=1 << 16) as reader:
        iterator = iter(reader)
        records.append(next(iterator))
        os.truncate(capture, CUT)
        if filemap_twin == "c":
            with pytest.raises(CaptureError, match="shrank.*record 2501"):
                records += iterator
            return
        records += iterator
    assert len(records) == CUT_RECORD + 1
    assert all(r.error is None for r in records[:-1])
    assert isinstance(records[-1].error, ShrunkError)
    named(records[-1].error, capture)


def test_index_of_a_file_that_shrinks(filemap_twin, capture, monkeypatch):
    truncate_on_map(monkeypatch, ibwire.pcap.index, capture, 1, after=False)
    if filemap_twin == "c":  # mapped at the old size: the walk meets vanished pages
        with pytest.raises(CaptureError, match="shrank.*record 2501"):
            index_capture(capture)
        return
    index = index_capture(capture)  # read: a short read
    assert len(index.offsets) == CUT_RECORD + 1
    assert [e.record for e in index.errors] == [CUT_RECORD]
    assert isinstance(index.errors[0], ShrunkError)
    named(index.errors[0], capture)


def test_scan_of_an_index_whose_file_shrank(filemap_twin, capture):
    index = index_capture(capture)
    os.truncate(capture, CUT)
    if filemap_twin == "c":
        with pytest.raises(CaptureError, match="shrank"):
            scan_index(index)
    else:  # read into memory before the shrink: nothing lost
        assert scan_index(index)["error"].tolist() == [1] * COUNT
