"""The project's tests run from the project alone: a copy of its files placed where no
``../shared`` exists (as a fresh clone is) collects every test with no error, a test that
needs the shared captures is skipped with a line naming ``IBWIRE_SHARED``, and with
``IBWIRE_REQUIRE_SHARED=1`` (as ``.ci/run`` sets) their absence fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus import REQUIRE_ENV, ROOT, SHARED_ENV


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's files (tracked and new, not ignored) copied into an empty folder."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git work tree: no file list to copy")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    target = tmp_path_factory.mktemp("fresh") / "ibwire"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target.parent / "shared").exists()
    return target


def _pytest(clone: Path, *args: str, require: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ENV}
    env[SHARED_ENV] = str(clone.parent / "shared")  # absent
    if require:
        env[REQUIRE_ENV] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)


def test_a_clone_without_shared_collects_with_no_error(clone: Path) -> None:
    done = _pytest(clone, "--collect-only")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "error" not in last and " collected" in last, last


def test_a_test_of_the_shared_captures_skips_naming_ibwire_shared(clone: Path) -> None:
    done = _pytest(clone, "-rs", "tests/scapy/test_captures.py")
    assert done.returncode == 0, done.stdout[-3000:]
    skipped = [ln for ln in done.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert skipped and all(SHARED_ENV in ln for ln in skipped), done.stdout[-3000:]


def test_required_shared_captures_fail_the_run_when_absent(clone: Path) -> None:
    done = _pytest(clone, "--collect-only", "tests/scapy/test_captures.py", require=True)
    assert done.returncode != 0
    assert SHARED_ENV in done.stderr and REQUIRE_ENV in done.stderr, done.stderr
