"""Loading a capture for replay from the scanner's columns, and sending it with sendmmsg(2)
from offsets into one buffer, a chunk of message headers at a time."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
from tools import mixed_capture

from ibwire.pcap import read_capture
from ibwire.replay import load, mmsg
from tests import corpus
from tests.corpus import ROOT
from tests.rewrite.test_rewrite_roce import CAPTURE_FILES

LINKS = {"ethernet": 0, "ip": 2}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_capture.write_ethernet(tmp_path_factory.mktemp("mixed") / "mixed.pcap", 1500)


def expected(path: Path) -> list[tuple[bytes, int, int]]:
    """(frame, link code, timestamp) of every record the per-record reader can send."""
    return [(bytes(r.frame), LINKS[r.link], r.timestamp_ns) for r in read_capture(str(path))
            if r.error is None and r.link in LINKS]


@pytest.mark.parametrize("window", [1 << 24, 4096])
def test_load_equals_the_record_reader(window: int, mixed: Path) -> None:
    captures = [p for p in CAPTURE_FILES if p.exists()] + [mixed]
    checked = 0
    for path in captures:
        want = expected(path)
        got = load(str(path), window=window)
        frames = got.frames
        assert frames == [w[0] for w in want], path.name
        assert got.link_codes.tolist() == [w[1] for w in want], path.name
        assert got.timestamps_ns.tolist() == [w[2] for w in want], path.name
        assert got.lengths.tolist() == [len(w[0]) for w in want]
        checked += bool(want)
    assert checked >= (3 if corpus.PRESENT else 2)  # without them: rocev2 sample, mixed


def test_load_of_a_capture_without_ethernet_or_ip(tmp_path: Path) -> None:
    got = load(str(ROOT / "captures" / "sample-ib.pcap"))
    assert got.frames == [] and got.linktype == 1 and len(got.timestamps_ns) == 0


@pytest.mark.skipif(not mmsg.AVAILABLE, reason="libc has no sendmmsg")
def test_frame_block_sends_every_frame_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    frames = [rng.randbytes(rng.randrange(1, 200)) for _ in range(300)]
    data = np.frombuffer(b"\xee" * 5 + b"".join(frames), np.uint8).copy()
    starts = 5 + np.concatenate(([0], np.cumsum([len(f) for f in frames])[:-1]))
    monkeypatch.setattr(mmsg, "CHUNK", 7)
    block = mmsg.FrameBlock(data, starts, np.array([len(f) for f in frames]))
    assert len(block.iov) == 7
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(rx.recv(4096) for _ in range(330)))
    reader.start()
    try:
        results = [block.send(tx.fileno(), first, count)
                   for first, count in ((0, 50), (50, 3), (53, 200), (253, 47), (10, 30))]
    finally:
        reader.join(timeout=20)
        tx.close()
        rx.close()
    assert got == frames + frames[10:40]
    assert [r[0] for r in results] == [50, 3, 200, 47, 30]
    assert results[0][1] == sum(len(f) for f in frames[:50])
    assert all(r[2] == 0 for r in results)
