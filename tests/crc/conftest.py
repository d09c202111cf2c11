"""The ``crc`` fixture: every CRC test runs against both twins (C engine and pure Python).

The C parameter is skipped only when the extension is not built AND IBWIRE_NO_EXTENSIONS=1;
a missing extension without that variable is an error, so a broken build cannot pass unseen.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest

from ibwire.crc import _python

NO_EXTENSIONS = os.environ.get("IBWIRE_NO_EXTENSIONS") == "1"

try:
    from ibwire.crc import _engine
except ImportError:
    _engine = None


def built_or_skip(module: ModuleType | None, name: str) -> ModuleType:
    """A compiled engine; skipped when IBWIRE_NO_EXTENSIONS=1 left it unbuilt, else a
    missing one fails (a broken build must not pass unseen)."""
    if module is None:
        if NO_EXTENSIONS:
            pytest.skip(f"{name} not built (IBWIRE_NO_EXTENSIONS=1)")
        pytest.fail(f"{name} is not built: run `python setup.py build_ext --inplace`")
    return module


def engine_or_skip() -> ModuleType:
    return built_or_skip(_engine, "ibwire.crc._engine")


@pytest.fixture(scope="session", params=["python", "c"])
def crc(request: pytest.FixtureRequest) -> ModuleType:
    """One twin: ``ibwire.crc._python`` or ``ibwire.crc._engine``."""
    return _python if request.param == "python" else engine_or_skip()


@pytest.fixture(scope="session")
def engine() -> ModuleType:
    """The C engine alone (for C-only checks: backends, the site table)."""
    return engine_or_skip()


def _backends() -> list[str]:
    names = ["slice-by-8", "pclmulqdq", "vpclmulqdq"]
    if _engine is None:
        return names[:1]
    current = _engine.crc32_backend()
    available = [n for n in names if _engine.set_crc32_backend(n)]
    _engine.set_crc32_backend(current)
    return available


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest, engine: ModuleType) -> Iterator[str]:
    """Runs a C test once per CRC-32 code path this CPU has, then restores the best one."""
    best = engine.crc32_backend()
    assert engine.set_crc32_backend(request.param)
    yield request.param
    engine.set_crc32_backend(best)
