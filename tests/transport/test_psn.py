"""PSN and MSN arithmetic modulo 2^24, and the two timers, from IBA Vol. 1 9.4.1.1/9.7.5 and
Table 45 (not from the code)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ibwire.transport import local_ack_timeout_ns, msn_add, psn_add, psn_diff, psn_in_range, psn_lt
from ibwire.transport.psn import check_psn, psn_le, psn_range, psn_span

psns = st.integers(0, 0xFFFFFF)
distances = st.integers(-(1 << 23), (1 << 23) - 1)


@pytest.mark.parametrize("psn,n,expected", [
    (0xFFFFFF, 1, 0), (0xFFFFFE, 3, 1), (0, -1, 0xFFFFFF), (5, 0x1000000, 5), (0x800000, 0x800000, 0),
])
def test_add_wraps_at_24_bits(psn, n, expected):
    assert psn_add(psn, n) == expected


@pytest.mark.parametrize("a,b,expected", [
    (0, 0xFFFFFF, 1), (0xFFFFFF, 0, -1), (2, 0xFFFFFE, 4), (0x7FFFFF, 0, 0x7FFFFF),
    (0x800000, 0, -0x800000),   # exactly half way counts as behind
    (10, 10, 0),
])
def test_diff_is_the_signed_distance_across_the_wrap(a, b, expected):
    assert psn_diff(a, b) == expected


def test_order_across_the_wrap():
    assert psn_lt(0xFFFFFF, 0) and not psn_lt(0, 0xFFFFFF)
    assert psn_le(3, 3) and psn_le(0xFFFFF0, 0x10)
    assert psn_in_range(1, 0xFFFFFE, 4) and psn_in_range(0xFFFFFE, 0xFFFFFE, 1)
    assert not psn_in_range(2, 0xFFFFFE, 4) and not psn_in_range(0xFFFFFD, 0xFFFFFE, 4)
    assert list(psn_range(0xFFFFFE, 4)) == [0xFFFFFE, 0xFFFFFF, 0, 1]
    assert psn_span(0xFFFFFE, 1) == 4


@given(psns, distances)
def test_diff_inverts_add(a, n):
    assert psn_diff(psn_add(a, n), a) == n


@given(psns, psns)
def test_add_inverts_diff(a, b):
    assert psn_add(a, psn_diff(b, a)) == b
    assert psn_lt(a, b) == (psn_diff(a, b) < 0)


def test_msn_wraps():
    assert msn_add(0xFFFFFF) == 0 and msn_add(0xFFFFFE, 3) == 1


@pytest.mark.parametrize("bad", [-1, 0x1000000, 1.0, None])
def test_a_psn_that_does_not_fit_24_bits_is_refused(bad):
    with pytest.raises(ValueError, match="24-bit"):
        check_psn(bad)


@pytest.mark.parametrize("t,ns", [(1, 8_192), (10, 4_194_304), (14, 67_108_864),
                                  (31, 4_096 * 2 ** 31)])
def test_local_ack_timeout_is_4096ns_times_2_to_the_t(t, ns):
    assert local_ack_timeout_ns(t) == ns


def test_local_ack_timeout_0_means_no_timer_and_5_bits_only():
    assert local_ack_timeout_ns(0) is None
    with pytest.raises(ValueError):
        local_ack_timeout_ns(32)
