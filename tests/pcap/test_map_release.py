"""``CaptureMap.release`` and ``scan_capture(release=True)``: a window's pages leave the
process (the C twin's map), and whatever is read after comes back the same."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ibwire.pcap import PcapWriter, filemap
from ibwire.scan import scan_capture
from tests.pcap.capture_synth import T0, ethernet_frame

FRAME = ethernet_frame(bytes(range(256)) * 4)


def _resident_kib(address: int) -> int:
    """Rss of the mapping of this process that holds ``address`` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Rss:":
            return int(line.split()[1])
    raise AssertionError(f"no mapping holds {address:#x}")


def test_released_pages_leave_and_read_the_same(tmp_path: Path, filemap_twin: str) -> None:
    path = tmp_path / "data"
    data = np.random.default_rng(1).integers(0, 256, 4 << 20, np.uint8).tobytes()
    path.write_bytes(data)
    with open(path, "rb") as f:
        window = filemap.engine().CaptureMap(f.fileno(), 0, len(data), str(path))
        view = np.frombuffer(window, np.uint8)
        assert hashlib.sha256(view).digest() == hashlib.sha256(data).digest()
        if filemap_twin == "c":
            assert _resident_kib(view.ctypes.data) >= 4096  # every page read once
        window.release()
        if filemap_twin == "c":
            assert _resident_kib(view.ctypes.data) == 0
        assert hashlib.sha256(view).digest() == hashlib.sha256(data).digest()
        del view
        window.close()


def test_a_releasing_scan_gives_the_same_batches_and_frames(tmp_path: Path,
                                                            filemap_twin: str) -> None:
    """Frames of a batch are read after the next window was mapped (the scan-ahead thread),
    so after their pages were let go: they come back from the page cache."""
    path = tmp_path / "c.pcap"
    with PcapWriter(path, 1, nanoseconds=True) as writer:
        for k in range(6000):
            writer.write(FRAME[:-4] + k.to_bytes(4, "big"), T0 + k)

    def scanned(release: bool) -> list[tuple[dict[str, bytes], list[bytes]]]:
        out = []
        for batch in scan_capture(path, window=1 << 20, fields=("ip.src",), release=release):
            frames = [bytes(batch.frame(r)) for r in range(len(batch))]
            out.append(({k: v.tobytes() for k, v in batch.columns.items()}, frames))
        return out

    released = scanned(True)
    assert len(released) > 3
    assert released == scanned(False)
    assert [f[-4:] for _, frames in released for f in frames] == [
        k.to_bytes(4, "big") for k in range(6000)]


def test_a_releasing_walk_lets_go_of_the_pages_it_passed(tmp_path: Path,
                                                         filemap_twin: str) -> None:
    """A window bigger than ``LET_GO_EVERY``: once it is walked, at most the last stretch of
    it is still in the process (C maps), and its frames read the same as without release;
    windows read into memory (the Python twin) are never let go of (that would zero them)."""
    from ibwire.scan import feed

    path = tmp_path / "big.pcap"
    count = 4 * feed.LET_GO_EVERY // len(FRAME)
    with PcapWriter(path, 1, nanoseconds=True) as writer:
        for k in range(count):
            writer.write(FRAME[:-4] + k.to_bytes(4, "big"), T0 + k)
    window = 4 * feed.LET_GO_EVERY

    def frames(release: bool) -> list[bytes]:
        out: list[bytes] = []
        for batch in scan_capture(path, window=window, fields=("ip.src",), threads=1,
                                  release=release):
            if release and filemap_twin == "c" and len(batch) > count // 2:
                rss = _resident_kib(np.frombuffer(batch.buffer, np.uint8).ctypes.data)
                assert rss * 1024 <= feed.LET_GO_EVERY + (64 << 10)  # (the lines asked ahead)
            out.extend(bytes(batch.frame(r)) for r in range(len(batch)))
        return out

    released = frames(True)
    assert [f[-4:] for f in released] == [k.to_bytes(4, "big") for k in range(count)]
    assert released == frames(False)
