"""``Runs``, the PSN sets of the capture observer, against a plain Python set; and its cost
with as many holes as PSNs (a tap that misses every other packet)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire.transport.psn_runs import Runs

adds = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 6)), max_size=40)


@settings(max_examples=400, deadline=None)
@given(adds, st.lists(st.tuples(st.integers(-2, 70), st.integers(0, 8)), max_size=20))
def test_runs_hold_what_a_set_holds(added: list[tuple[int, int]],
                                    probes: list[tuple[int, int]]) -> None:
    runs, plain = Runs(), set()
    for e, count in added:
        runs.add(e, count)
        plain.update(range(e, e + count))
        if runs.low is not None:
            assert runs.holes == sorted(runs.holes)
            assert all(a < b for a, b in runs.holes)
            assert all(h[1] <= k[0] for h, k in zip(runs.holes, runs.holes[1:], strict=False))
    covered = {e for e in range(-2, 80) if e in runs}
    assert covered == plain
    for a, n in probes:
        b = a + n
        if n:
            assert runs.hole_in(a, b) == (not set(range(a, b)) <= plain)


def test_a_hole_between_every_two_psns_stays_cheap() -> None:
    """200k PSNs, every other one missing: 100k holes; quadratic work would take minutes."""
    runs = Runs()
    for e in range(0, 200_000, 2):
        runs.add(e, 1)
    assert len(runs.holes) == 99_999
    assert 10 in runs and 11 not in runs and runs.hole_in(10, 12) and not runs.hole_in(10, 11)
    runs.add(11, 1)
    assert len(runs.holes) == 99_998 and not runs.hole_in(10, 13)
