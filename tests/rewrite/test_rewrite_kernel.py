"""The C window editor (``rewrite._kernel``) against its numpy twin (``rewrite.vector``) on
damaged frames: real RoCE and other frames with bytes flipped and tails cut, scanned as the
batch path scans them, edited by both with several option sets. Every frame the editors do
not hand back to ``edit_frame`` must come out the same, with the same report of it; none of
it may crash (the kernel reads and writes only inside each frame)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from tools import mixed_capture

from ibwire.rewrite import vector
from ibwire.scan import scan_capture
from ibwire.scan.program import CAPTURE_ERROR
from tests.corpus import ROOT
from tests.crc.conftest import built_or_skip
from tests.rewrite.frames import frames
from tests.rewrite.test_rewrite_batch import ALL_OPTIONS, _pcap, options
from tests.rewrite.test_rewrite_rd import packets

try:
    from ibwire.rewrite import _kernel
except ImportError:
    _kernel = None

NAMES = ["srcipmap", "everything", "keep-bad-icrc-qpmap", "pkey", "ttl-up-dscp",
         "tcprewrite-portmap", "tcprewrite-pnat-v6", "none"]


def _damaged(tmp: Path, seed: int) -> Path:
    rng = random.Random(seed)
    mixed = mixed_capture.write_ethernet(tmp / "mixed.pcap", 300)
    base = [f for link, f in frames(ROOT / "captures" / "sample-rocev2.pcap") + frames(mixed)
            if link == "ethernet"] + packets("rocev2_ipv4")   # and RD: DETH after RDETH
    out = []
    for _ in range(1500):
        frame = bytearray(rng.choice(base))
        for _ in range(rng.randrange(4)):
            if frame:
                frame[rng.randrange(min(len(frame), 90))] = rng.randrange(256)
        if rng.random() < 0.2:
            del frame[rng.randrange(len(frame) + 1):]
        out.append(bytes(frame))
    return _pcap(tmp / "damaged.pcap", out)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", NAMES)
def test_kernel_equals_numpy_twin_on_damaged_frames(name: str, seed: int,
                                                   tmp_path: Path) -> None:
    kernel = built_or_skip(_kernel, "ibwire.rewrite._kernel")
    o = options(ALL_OPTIONS[name])
    src = _damaged(tmp_path, seed)
    compared = 0
    for batch in scan_capture(str(src), fields=()):
        c = batch.columns
        offs = c["frame.offset"].astype(np.int64)
        lens = c["frame.len"].astype(np.int64)
        results, buffers = [], []
        for twin in (vector, kernel):
            buf = np.zeros(len(batch.buffer) + vector.PAD, np.uint8)
            buf[:len(batch.buffer)] = np.frombuffer(batch.buffer, np.uint8)
            results.append(twin.edit_frames(buf, offs, lens, c["link"], c["error"],
                                            c["icrc_ok"], c["offset.bth"], c["offset.icrc"], o))
            buffers.append(buf)
        ours, theirs = results
        assert np.array_equal(ours.fallback, theirs.fallback)
        keep = np.flatnonzero(~ours.fallback & (c["error"] != CAPTURE_ERROR))
        for field in ("changed", "icrc", "edited"):
            assert np.array_equal(getattr(ours, field)[keep], getattr(theirs, field)[keep]), field
        for row in keep.tolist():
            at, n = int(offs[row]), int(lens[row])
            assert bytes(buffers[0][at:at + n]) == bytes(buffers[1][at:at + n]), row
        compared += len(keep)
    assert compared > 300  # (--qpmap/--portmap/--mtu-trunc send many to edit_frame)
