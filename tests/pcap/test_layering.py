"""Readers sit below the scanner: nothing in ``ibwire.pcap`` imports ``ibwire.scan`` or any
other floor above the readers (DESIGN.md: lower floors never import higher ones).

Two checks, each able to fail on its own: the source of every module of the package (Python
and Cython, imports inside functions included), and a fresh interpreter that imports every
module and runs the lazy paths (the EPB walk through the index and the scanner-free readers),
then lists what got loaded."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ibwire.pcap

PCAP_DIR = Path(ibwire.pcap.__file__).parent
SRC = PCAP_DIR.parent.parent
BELOW = {"ibwire", "ibwire.errors", "ibwire._lazy", "ibwire._twins", "ibwire.tables"}
"""What the reader layer may take from outside its own package."""


def allowed(module: str) -> bool:
    return module in BELOW or module == "ibwire.pcap" or module.startswith("ibwire.pcap.")


def imported_names(path: Path) -> list[str]:
    """Every module a source file imports (``from ibwire import x`` counts as ibwire.x)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":  # Cython: the Python-level imports, by their lines
        found = re.findall(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+([\w, ]+)|c?import\s+([\w.]+))",
                           text, re.M)
        names = []
        for source, what, plain in found:
            names.append(plain or source)
            names += [f"{source}.{n.strip()}" for n in what.split(",") if source == "ibwire"]
        return names
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            if node.module == "ibwire":
                names += [f"ibwire.{alias.name}" for alias in node.names]
    return names


def test_no_pcap_source_imports_a_higher_floor():
    sources = sorted([*PCAP_DIR.glob("*.py"), *PCAP_DIR.glob("*.pyx")])
    assert len(sources) > 10
    wrong = [f"{path.name}: {name}" for path in sources for name in imported_names(path)
             if name.startswith("ibwire") and not allowed(name)]
    assert wrong == []


def test_the_source_check_sees_a_lazy_import_of_the_scanner(tmp_path):
    """The check above finds an import inside a function (as the EPB walk once was)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from ibwire.scan import scan_frames\n    return scan_frames\n")
    assert [n for n in imported_names(bad) if not allowed(n)] == ["ibwire.scan"]


LOADED = """
import importlib, pkgutil, sys, tempfile, os
import ibwire.pcap as pcap
for info in pkgutil.iter_modules(pcap.__path__):
    try:
        importlib.import_module("ibwire.pcap." + info.name)
    except ImportError:
        if not info.name.startswith("_"):  # a C engine may be missing, nothing else
            raise
print(pcap.implementation)
from ibwire.pcap.writer import PcapngWriter
path = os.path.join(tempfile.mkdtemp(), "t.pcapng")
with PcapngWriter(path) as writer:
    for k in range(5):
        writer.write(bytes(60), 1000 + k, 1)
index = pcap.index_capture(path)
assert len(index.offsets) == 5, index
assert len(list(pcap.read_capture(path))) == 5
print(" ".join(sorted(m for m in sys.modules if m == "ibwire" or m.startswith("ibwire."))))
"""


@pytest.mark.parametrize("no_extensions", ["0", "1"])
def test_reading_loads_nothing_above_the_readers(no_extensions):
    env = {**os.environ, "IBWIRE_NO_EXTENSIONS": no_extensions,
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True,
                          env=env, check=False)
    assert done.returncode == 0, done.stderr
    engine, loaded = done.stdout.splitlines()
    assert engine == ("python" if no_extensions == "1" else "c")
    assert "ibwire.pcap.index" in loaded.split()
    assert [m for m in loaded.split() if not allowed(m)] == []
