"""Row grouping (``group_rows``), the C twin and the pure-Python one: each row in exactly one
group, groups in the order they first appear, a group's rows in order and equal in every key
column, rows of different groups different in some column."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire.analysis import _streams_python
from ibwire.analysis.connections import implementation, streams_of
from tests.crc.conftest import built_or_skip

try:
    from ibwire.analysis import _streams
except ImportError:
    _streams = None


@pytest.fixture(scope="module", params=["python", "c"])
def twin(request: pytest.FixtureRequest) -> ModuleType:
    if request.param == "python":
        return _streams_python
    return built_or_skip(_streams, "ibwire.analysis._streams")


def expected(columns: tuple[np.ndarray, ...]) -> tuple[list[int], list[list[int]]]:
    """The grouping, row by row with a dict."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, key in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        groups.setdefault(key, []).append(row)
    return [rows[0] for rows in groups.values()], list(groups.values())


def check(twin: ModuleType, columns: tuple[np.ndarray, ...]) -> None:
    first, order, starts = twin.group_rows(columns)
    want_first, want_groups = expected(columns)
    assert first.tolist() == want_first
    bounds = starts.tolist()
    assert bounds[0] == 0 and bounds[-1] == len(columns[0])
    assert [order[a:b].tolist() for a, b in zip(bounds, bounds[1:], strict=False)] == \
        want_groups


keys = st.integers(1, 5).flatmap(lambda k: st.integers(0, 300).flatmap(lambda n: st.tuples(
    *(st.lists(st.sampled_from([0, 1, 7, 2**63, 2**64 - 1]), min_size=n, max_size=n)
      for _ in range(k)))))


@settings(max_examples=200, deadline=None)
@given(keys)
def test_groups_as_a_dict_groups_them(twin, lists):
    check(twin, tuple(np.array(v, np.uint64) for v in lists))


def test_many_groups_grow_the_table(twin):
    rng = np.random.default_rng(5)
    a = rng.integers(0, 3000, 20000).astype(np.uint64)
    b = (a * np.uint64(7)) % np.uint64(5)
    check(twin, (a, b, np.zeros(len(a), np.uint64)))


def test_hash_collisions_are_told_apart(monkeypatch):
    """Every row hashes alike in the pure-Python twin: the exact check must split them."""
    monkeypatch.setattr(_streams_python, "_MIX", (0,) * 7)
    rng = np.random.default_rng(1)
    cols = tuple(rng.integers(0, 3, 500).astype(np.uint64) for _ in range(3))
    check(_streams_python, cols)


def test_bad_columns_raise(twin):
    with pytest.raises(ValueError):
        twin.group_rows(())
    with pytest.raises(ValueError):
        twin.group_rows((np.zeros(3, np.uint64), np.zeros(4, np.uint64)))


def test_streams_of_uses_the_built_twin():
    assert implementation == ("c" if _streams is not None and
                              __import__("os").environ.get("IBWIRE_NO_EXTENSIONS") != "1"
                              else "python")
    first, members = streams_of((np.array([3, 1, 3, 2], np.uint64),))
    assert first.tolist() == [0, 1, 3]
    assert [m.tolist() for m in members] == [[0, 2], [1], [3]]
