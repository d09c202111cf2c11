"""The plots' units (time unit of a span, window syntax, bin widths), tick labels without
offsets, and the decimation that keeps a million points drawable."""

from __future__ import annotations

import numpy as np
import pytest

from ibwire.analysis.plot.series import decimate, thin, unwrap
from ibwire.analysis.plot.units import (
    duration_text,
    nice_width,
    parse_window,
    rate_unit,
    time_unit,
    utc_text,
)


@pytest.mark.parametrize(("span", "end", "unit"), [
    (850, None, "ns"), (850_000, None, "µs"), (12_500_000_000, None, "s"),
    (3_000_000, None, "ms"), (0, None, "ns"),
    # a 4 µs window at 560 µs: µs; at 12.3 s: milliseconds (ticks of at most 5 digits)
    (4_000, 560_000, "µs"), (200_000, 12_300_000_000, "ms"), (5, 10**12, "s")])
def test_time_unit(span, end, unit):
    assert time_unit(span, end)[0] == unit


def test_texts():
    assert duration_text(1_280_000) == "1.28 ms"
    assert duration_text(65_536) == "65.5 µs"
    assert utc_text(1796415649925011123) == "2026-12-04T20:20:49.925011123Z"
    assert nice_width(1_000_000, 100) == 10_000
    assert nice_width(1_300_000, 100) == 20_000
    assert rate_unit(93e9) == ("Gb/s", 1e9) and rate_unit(5e5) == ("kb/s", 1e3)


@pytest.mark.parametrize(("text", "window"), [
    ("10ms:20ms", (10_000_000, 20_000_000)), ("0.5:1.5", (500_000_000, 1_500_000_000)),
    ("300us:", (300_000, None)), (":2µs", (None, 2_000)), ("100ns:1e3ns", (100, 1000))])
def test_parse_window(text, window):
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["10ms", "a:b", "5ms:1ms", "1:2:3", "1h:2h"])
def test_parse_window_refuses(text):
    with pytest.raises(ValueError):
        parse_window(text)


def test_unwrap():
    psn = np.array([0xFFFFFE, 0xFFFFFF, 0, 1, 0xFFFFFF, 2])
    assert unwrap(psn).tolist() == [0xFFFFFE, 0xFFFFFF, 0x1000000, 0x1000001, 0xFFFFFF,
                                    0x1000002]


def test_decimate_keeps_each_columns_extremes():
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 1000, 1_000_000))
    y = rng.normal(size=len(x))
    dx, dy = decimate(x, y, 0, 1000, 500, 10_000)
    assert len(dx) <= 1000 and (np.diff(dx) >= 0).all()
    col = (x * 0.5).astype(int)
    for c in (0, 137, 499):
        assert dy[(dx * 0.5).astype(int) == c].max() == y[col == c].max()
        assert dy[(dx * 0.5).astype(int) == c].min() == y[col == c].min()
    # few points in view: all of them
    assert len(decimate(x, y, 10, 10.5, 500, 10_000)[0]) == ((x >= 10) & (x <= 10.5)).sum()


def test_thin():
    assert thin(5, 10).tolist() == [0, 1, 2, 3, 4]
    assert thin(1000, 3).tolist() == [0, 499, 999]


def test_no_offset_on_the_ticks():
    """Tick values around 1e7 apart by 1: matplotlib would write "+1e7" beside them."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from ibwire.analysis.plot.figure import _plain

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([1e7, 1e7 + 5], [3e6, 3e6 + 2])
    _plain(ax)
    fig.canvas.draw()
    assert ax.xaxis.get_offset_text().get_text() == ""
    assert ax.yaxis.get_offset_text().get_text() == ""
    assert ax.get_xticklabels()[1].get_text().startswith("10000")
