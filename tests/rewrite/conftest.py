"""Fixtures of the rewrite tests: both CRC twins, and running ``ibwire rewrite``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ibwire.crc import _python
from ibwire.rewrite import edit
from tests.crc.conftest import engine_or_skip


@pytest.fixture(params=["python", "c"])
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[ModuleType]:
    """Runs the rewrite with one CRC twin (``ibwire.crc._python`` or ``_engine``)."""
    module = _python if request.param == "python" else engine_or_skip()
    monkeypatch.setattr(edit, "crc", module)
    yield module


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out.pcap"
