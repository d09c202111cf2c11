"""The ``scanner`` fixture: every scanner test runs against both twins (C and pure Python).

As for the CRC engine, a C engine that is not built is an error unless IBWIRE_NO_EXTENSIONS=1.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from ibwire.scan import _python
from tests.crc.conftest import built_or_skip
from tests.pcap.conftest import filemap_twin, pcap_engine  # noqa: F401 - fixtures used here

try:
    from ibwire.scan import _engine
except ImportError:
    _engine = None


def scan_engine_or_skip() -> ModuleType:
    return built_or_skip(_engine, "ibwire.scan._engine")


@pytest.fixture(scope="session", params=["python", "c"])
def scanner(request: pytest.FixtureRequest) -> ModuleType:
    """One twin: ``ibwire.scan._python`` or ``ibwire.scan._engine``."""
    return _python if request.param == "python" else scan_engine_or_skip()


@pytest.fixture(scope="session")
def scan_engine() -> ModuleType:
    return scan_engine_or_skip()
