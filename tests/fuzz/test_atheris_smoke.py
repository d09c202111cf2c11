"""The coverage-guided campaign's smoke (``tools/fuzz_atheris.py``, issue #31 item 17): each
entry point fuzzed for a few seconds must end clean, and the harness must report a fault
planted in a test double (a non-ibwire exception, a SIGSEGV) with the input that caused it.

About 40-60 s in all: each run starts a process that instruments ibwire's modules first.
Without atheris (``pip install '.[test]'`` brings it) these tests skip, unless
``IBWIRE_REQUIRE_ATHERIS=1`` (as ``.ci/run`` sets), where its absence is a failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tools" / "fuzz_atheris.py"
TARGETS = ("parse", "scan", "rewrite", "show", "check")
SECONDS = 2


def _atheris() -> None:
    try:
        import atheris  # noqa: F401
    except ImportError:
        if os.environ.get("IBWIRE_REQUIRE_ATHERIS", "") not in ("", "0"):
            pytest.fail("atheris is not installed (IBWIRE_REQUIRE_ATHERIS is set)")
        pytest.skip("atheris is not installed (pip install '.[atheris]')")


def _fuzz(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    _atheris()
    env = {**os.environ, "FUZZ_WORK": str(tmp)}
    return subprocess.run([sys.executable, str(HARNESS), *args, f"-artifact_prefix={tmp}/",
                           "-print_final_stats=1"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("target", TARGETS)
def test_each_entry_point_runs_clean(target, tmp_path):
    done = _fuzz(tmp_path, target, f"-max_total_time={SECONDS}")
    assert done.returncode == 0, done.stderr[-4000:]
    runs = re.search(r"stat::number_of_executed_units: (\d+)", done.stderr)
    coverage = re.findall(r"cov: (\d+) ft: (\d+)", done.stderr)
    assert runs and int(runs.group(1)) >= 12, done.stderr[-2000:]  # the seeds, then fuzzing
    assert coverage and int(coverage[-1][0]) > 100  # ibwire's code was instrumented
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))


@pytest.mark.parametrize(("plant", "report"), [("exception", "RuntimeError: planted"),
                                                ("segv", "deadly signal")])
def test_a_planted_fault_is_reported_with_its_input(plant, report, tmp_path):
    """The test double: the parse target with a fault planted on one input in 64."""
    done = _fuzz(tmp_path, "parse", f"--plant={plant}", "-runs=20000")
    said = done.stdout + done.stderr  # (atheris prints the Python traceback on stdout)
    assert done.returncode != 0
    assert report in said, said[-4000:]
    crashes = list(tmp_path.glob("crash-*"))
    assert len(crashes) == 1

    assert zlib.crc32(crashes[0].read_bytes()) % 64 == 0  # the input that has the fault
    assert f"Test unit written to {crashes[0]}" in said
