"""The ``scanner`` and ``engine`` fixtures: every scanner and counting-scan test runs against both
twins (C and pure Python).

As for the CRC engine, a C engine that is not built is an error unless IBWIRE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from ibwire.scan import _python, tally
from ibwire.scan import _tally_python as tally_twin
from tests.crc.conftest import built_or_skip
from tests.pcap.conftest import filemap_twin, pcap_engine  # noqa: F401 - fixtures used here

try:
    from ibwire.scan import _engine
except ImportError:
    _engine = None
try:
    from ibwire.scan import _tally
except ImportError:
    _tally = None


def scan_engine_or_skip() -> ModuleType:
    return built_or_skip(_engine, "ibwire.scan._engine")


@pytest.fixture(scope="session", params=["python", "c"])
def scanner(request: pytest.FixtureRequest) -> ModuleType:
    """One twin: ``ibwire.scan._python`` or ``ibwire.scan._engine``."""
    return _python if request.param == "python" else scan_engine_or_skip()


@pytest.fixture(scope="session")
def scan_engine() -> ModuleType:
    return scan_engine_or_skip()


def tally_c_engine() -> ModuleType:
    return built_or_skip(_tally, "ibwire.scan._tally")


@pytest.fixture(params=["python", "c"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The counting scans (``ibwire.scan.tally``) run on this twin."""
    chosen = tally_twin if request.param == "python" else tally_c_engine()
    monkeypatch.setattr(tally, "engine", lambda: (chosen, request.param))
    return chosen
