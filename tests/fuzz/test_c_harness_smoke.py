"""The smoke of the libFuzzer harnesses straight on the C (``tools/fuzz_c.sh``, issue #31 item
17): each harness, built with ASan + UBSan, fuzzed for a second from its seeds, ends clean
with inputs run and coverage; and built with a planted bug (``-DIBW_FUZZ_PLANTED_BUG``: every
harness reads one byte past its exact-size copy of the input) each one stops on an ASan
heap-buffer-overflow report in the planted read, with the input saved.

About 40-60 s in all, most of it compiling the harnesses twice. Needs clang-14.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tools" / "fuzz_c.sh"
HARNESSES = ("crc", "scan", "records", "pcapng", "filemap", "relay")

pytestmark = pytest.mark.skipif(shutil.which("clang-14") is None,
                                reason="clang-14 not found: the C fuzz harnesses need it")


def _campaign(folder: Path, budget: str, **env: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(["bash", str(DRIVER), str(folder), budget, *HARNESSES],
                          env={**os.environ, "CLANG": shutil.which("clang-14") or "",
                               "PYTHON": sys.executable, **env},
                          capture_output=True, text=True, timeout=600)
    summary = folder / "summary.json"
    assert summary.exists(), done.stdout + done.stderr[-4000:]
    return done.returncode, json.loads(summary.read_text())["entry_points"]


def test_every_harness_runs_clean(tmp_path):
    rc, points = _campaign(tmp_path, "1")
    assert rc == 0, points
    assert set(points) == set(HARNESSES)
    for name, point in points.items():
        assert point["findings"] == [], name
        assert point["inputs"] > 10, (name, point)  # the seeds at least
        assert point["cov"] > 20, (name, point)  # the C under test was instrumented


def test_a_planted_overread_is_reported_by_asan(tmp_path):
    rc, points = _campaign(tmp_path, "runs=50", FUZZ_C_CFLAGS="-DIBW_FUZZ_PLANTED_BUG")
    assert rc == 1
    assert set(points) == set(HARNESSES)
    for name, point in points.items():
        (finding,) = point["findings"]
        assert "AddressSanitizer: heap-buffer-overflow" in finding["report"], (name, finding)
        assert "planted_bug" in Path(finding["log"]).read_text(), name
        assert finding["artifact"] and Path(finding["artifact"]).exists(), name
