"""Scanning keeps resident memory near one window, whatever the capture size: a 64 MB capture
scanned through 1 MiB windows must not raise the peak RSS by more than a fraction of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ibwire import build
from ibwire.pcap import PcapWriter
from tests.pcap.capture_synth import T0

FILE_BYTES = 64 * 1024 * 1024

PROBE = """
import resource, sys
from ibwire.scan import scan_capture
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = ok = 0
for batch in scan_capture(sys.argv[1], window=1 << 20, fields=sys.argv[2].split(",") if sys.argv[2] else None):
    rows += len(batch)
    ok += int((batch["icrc_ok"] == 1).sum())
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(rows, ok, (after - before) * 1024)
"""


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    frame = build("rocev2_ipv4", {"reth.dmalen": 4000}, bytes(4000), opcode=0x0A)
    path = tmp_path_factory.mktemp("scan-big") / "big.pcap"
    count = FILE_BYTES // (16 + len(frame))
    with PcapWriter(path, 1, nanoseconds=True) as writer:
        for k in range(count):
            writer.write(frame, T0 + k)
    return path, count


@pytest.mark.parametrize("fields", ["", "bth,reth"])
@pytest.mark.parametrize("through", ["file", "gzip-less stdin"])
def test_peak_rss_stays_near_one_window(big_capture, fields, through):
    path, count = big_capture
    if through == "file":
        out = subprocess.run([sys.executable, "-c", PROBE, str(path), fields],
                             capture_output=True, text=True, check=True)
    else:
        with open(path, "rb") as stdin:
            out = subprocess.run([sys.executable, "-c", PROBE.replace("sys.argv[1]", "'-'", 1),
                                  "-", fields], stdin=stdin, capture_output=True, text=True,
                                 check=True)
    rows, ok, grown = (int(x) for x in out.stdout.split())
    assert (rows, ok) == (count, count)
    assert grown < 16 * 1024 * 1024, f"peak RSS grew by {grown >> 20} MB on a 64 MB capture"
