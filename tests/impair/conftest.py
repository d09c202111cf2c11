"""The veth lab both ways: the forwarder on the compiled fast path ("c", where built) and on
the Python twin, one frame per system call ("python")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ibwire.impair import _io
from tests.impair.lab import Lab, need_root


@pytest.fixture(scope="module", params=["c", "python"])
def lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    need_root()
    if request.param == "c" and _io.fast is None:
        pytest.skip("the compiled fast path is not built")
    made = Lab(fast=request.param == "c")
    try:
        made.make()
        yield made
    finally:
        made.remove()
