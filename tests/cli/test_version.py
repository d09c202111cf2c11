"""``ibwire --version``: the version and which engines are compiled, as they would load
(C, or the pure-Python twin with IBWIRE_NO_EXTENSIONS=1 or a missing extension), without
loading numpy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENGINES = {"c": "0", "python": "1"}


@pytest.mark.parametrize("engine", ENGINES)
def test_version_says_which_engines_run(engine):
    env = {**os.environ, "IBWIRE_NO_EXTENSIONS": ENGINES[engine]}
    code = ("import sys; from ibwire.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    code = e.code\n"
            "print(code, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    import ibwire

    line, status = done.stdout.splitlines()
    assert line == (f"ibwire {ibwire.__version__} (crc {engine}, scan {engine}, pcap {engine}, "
                    f"filemap {engine}, text {engine}, streams {engine}, observer {engine}, "
                    f"impair {engine})")
    assert status == "0 False"


def test_version_says_python_for_an_engine_that_is_not_there(tmp_path):
    """A copy of the package without the scanner's extension: ``scan python``."""
    import shutil

    import ibwire

    copy = tmp_path / "ibwire"
    shutil.copytree(Path(ibwire.__file__).parent, copy)
    gone = [p for p in (copy / "scan").iterdir() if p.name.startswith("_engine.") and
            p.suffix in (".so", ".pyd")]
    for found in gone:
        found.unlink()
    env = {**os.environ, "IBWIRE_NO_EXTENSIONS": "0", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "ibwire.cli.main", "--version"],
                          capture_output=True, text=True, env=env, check=True)
    assert "scan python" in done.stdout
    assert ("crc c" in done.stdout) == bool(gone)  # the others as built
