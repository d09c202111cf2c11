"""What every differential test against tshark needs: tshark itself."""

from __future__ import annotations

import os

import pytest

from ibwire.fuzz.wireshark.dissection import tshark_path


@pytest.fixture(scope="module", autouse=True)
def tshark() -> str:
    """tshark's path; the module is skipped without it, or fails where CI requires it."""
    path = tshark_path()
    if path is None:
        if os.environ.get("IBWIRE_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark is not installed and IBWIRE_REQUIRE_TSHARK=1")
        pytest.skip("tshark is not installed (set IBWIRE_REQUIRE_TSHARK=1 to fail instead)")
    return path
