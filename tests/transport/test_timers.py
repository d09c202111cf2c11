"""The RNR NAK timer codes of IBA Table 45 (each Linux ``IB_RNR_TIMER_<ms>`` name says its
time): written here from the names, independently of specs/rnr_timers.tsv."""

from __future__ import annotations

import pytest

from ibwire.transport import rnr_timer_ns

# code -> milliseconds as spelled by include/rdma/ib_verbs.h enum ib_rnr_timeout
TABLE_45_MS = ["655.36", "0.01", "0.02", "0.03", "0.04", "0.06", "0.08", "0.12", "0.16", "0.24",
               "0.32", "0.48", "0.64", "0.96", "1.28", "1.92", "2.56", "3.84", "5.12", "7.68",
               "10.24", "15.36", "20.48", "30.72", "40.96", "61.44", "81.92", "122.88",
               "163.84", "245.76", "327.68", "491.52"]


@pytest.mark.parametrize("code", range(32))
def test_rnr_timer_code(code):
    whole, frac = TABLE_45_MS[code].split(".")
    assert rnr_timer_ns(code) == (int(whole) * 100 + int(frac)) * 10_000


def test_codes_1_to_31_grow_and_0_is_the_longest():
    waits = [rnr_timer_ns(c) for c in range(32)]
    assert waits[1:] == sorted(waits[1:]) and waits[0] == max(waits)


@pytest.mark.parametrize("bad", [-1, 32])
def test_rnr_code_outside_5_bits_is_refused(bad):
    with pytest.raises(ValueError):
        rnr_timer_ns(bad)
