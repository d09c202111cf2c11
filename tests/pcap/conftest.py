"""Fixtures of the capture reader/writer tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ibwire.pcap import _filemap_python, filemap
from tests import corpus
from tests.crc.conftest import built_or_skip

try:
    from ibwire.pcap import _engine
except ImportError:
    _engine = None

try:
    from ibwire.pcap import _filemap
except ImportError:
    _filemap = None


def pcap_engine_or_skip() -> ModuleType:
    """The pcap layer's C walk (``ibwire.pcap._engine``), as ``built_or_skip`` has it."""
    return built_or_skip(_engine, "ibwire.pcap._engine")


@pytest.fixture(scope="session")
def pcap_engine() -> ModuleType:
    return pcap_engine_or_skip()


@pytest.fixture(params=["python", "c"])
def filemap_twin(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every reader in the test takes its file windows from one twin of
    ``ibwire.pcap.filemap``: maps guarded in C, or reads in Python."""
    engine = _filemap_python if request.param == "python" else built_or_skip(
        _filemap, "ibwire.pcap._filemap")
    saved = filemap._engine, filemap.implementation
    filemap._engine, filemap.implementation = engine, request.param
    try:
        yield request.param
    finally:
        filemap._engine, filemap.implementation = saved


SHARED_ROWS = list(corpus.provenance_rows())


@pytest.fixture(params=SHARED_ROWS or [None], ids=lambda row: row["local_name"] if row else "none")
def shared_capture(request: pytest.FixtureRequest) -> tuple[Path, dict[str, str]]:
    """(path, PROVENANCE.tsv row) of each shared real capture (``tests/corpus.py``)."""
    if request.param is None:
        corpus.skip_missing()
    return corpus.capture(request.param["local_name"]), request.param


@pytest.fixture
def write_capture(tmp_path: Path):
    """Write bytes to a file in tmp_path and return its path."""
    counter = iter(range(1_000_000))

    def write(data: bytes, suffix: str = ".pcap") -> Path:
        path = tmp_path / f"capture{next(counter)}{suffix}"
        path.write_bytes(data)
        return path

    return write
