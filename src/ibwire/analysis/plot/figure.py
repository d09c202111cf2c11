"""One connection as a matplotlib Figure: a tcptrace-style PSN graph over time, a strip of
NAK/RNR NAK/CNP/ECN-CE ticks, throughput and goodput, latencies, and detail panels zoomed on
the worst recoveries.

:func:`connection_figure` returns the Figure (tests read its axes back; ``save`` writes it).
Every axes has a gid: "psn", "marks", "rate", "latency", "detail-1" .. "detail-3". The PSN
graph draws first transmissions, then retransmissions over them in red, and the
acknowledged PSN as a green staircase (Wireshark's TCP stream graph / tcptrace convention).
Series of more points than the figure has pixel columns are cut to each column's lowest and
highest point (:func:`series.decimate`), so a million packets draw in well under a second
and look the same. Marks are ticks on their own strip (they never cover data), at most
MAX_MARKS of each kind drawn, their count in the strip's label. matplotlib is used through
its object API (no pyplot, no backend switch): importing this changes nothing in matplotlib.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ibwire.analysis.plot.series import Event, Series, decimate, thin
from ibwire.analysis.plot.units import (
    duration_text,
    nice_width,
    rate_unit,
    time_unit,
    utc_text,
)

#: Pixel columns a series is decimated to (each keeps its lowest and highest point).
COLUMNS = 1500
#: Series of up to this many points in view are drawn whole.
WHOLE = 6000
#: Marks of one kind drawn at most (the rest counted in the label).
MAX_MARKS = 1000
#: A detail panel shows at least this much (ns) on either side of its event.
MIN_DETAIL_PAD = 1_000
#: Latencies spanning more than this ratio are drawn on a log scale.
LOG_RANGE = 100
#: NAKs drawn at their PSN in a detail panel only when there are no more than this many.
DETAIL_MARKS = 20
#: Colours: first transmissions, retransmissions, acknowledged PSN, marks.
COLOURS = {"first transmission": "tab:blue", "retransmission": "tab:red",
           "acknowledged PSN": "tab:green", "NAK": "tab:orange", "RNR NAK": "tab:purple",
           "CNP": "tab:brown", "ECN-CE": "tab:olive", "throughput": "tab:blue",
           "goodput": "tab:green", "ACK round trip": "tab:green", "NAK response": "tab:orange",
           "RNR wait": "tab:purple"}
CAUSE_COLOURS = {"nak": "tab:orange", "rnr": "tab:purple", "timeout": "tab:red",
                 "idle": "tab:gray"}


def title_of(report: Any) -> str:
    def end(side: dict[str, Any]) -> str:
        qpn = side["qpn"]
        return f"{side['address']} QP {'?' if qpn is None else f'0x{qpn:x}'}"

    return f"{end(report.requester)} -> {end(report.responder)} ({report.transport})"


def _plain(ax: Any) -> None:
    """Tick labels as plain numbers: no offset, no ``1e7`` multiplier."""
    from matplotlib.ticker import FuncFormatter, NullFormatter, ScalarFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":   # decades as 0.1, 10, 1000
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
            continue
        f = ScalarFormatter(useOffset=False)
        f.set_scientific(False)
        axis.set_major_formatter(f)


def _span(s: Series, window: tuple[int | None, int | None] | None) -> tuple[int, int]:
    lo, hi = window or (None, None)
    lo = 0 if lo is None else lo
    hi = max(s.span, 1) if hi is None else hi
    return lo, max(hi, lo + 1)


def psn_panel(ax: Any, s: Series, lo: int, hi: int, unit: tuple[str, int],
              marks_here: bool = False) -> None:
    """The PSN graph of ``lo`` .. ``hi`` ns on ``ax``."""
    from matplotlib.ticker import MaxNLocator

    size = unit[1]
    for name, mask, style in (("first transmission", s.first, dict(ms=2.5, zorder=2)),
                              ("retransmission", s.retx, dict(ms=3.5, zorder=4))):
        x, y = decimate(s.t[mask], s.psn[mask], lo, hi, COLUMNS, WHOLE)
        total = int(mask.sum())
        if name == "retransmission" and len(x) > COLUMNS // 4:
            # resends in most pixel columns: lighter, so the first transmissions under
            # them still show (where there are none, the blue is pure)
            style = dict(ms=2, alpha=0.35, zorder=4)
        if total:
            ax.plot(x / size, y, ".", color=COLOURS[name], label=f"{name} ({total:,})",
                    gid=name, **style)
    if len(s.ack_t):
        # the staircase from the last step before the view to its end
        a = max(int(np.searchsorted(s.ack_t, lo, "right")) - 1, 0)
        b = int(np.searchsorted(s.ack_t, hi, "right"))
        x = np.append(s.ack_t[a:b], min(hi, s.span))
        y = np.append(s.ack_psn[a:b], s.ack_psn[b - 1] if b else s.ack_psn[0])
        if len(x) > 2 * WHOLE:
            keep = thin(len(x), 2 * WHOLE)
            x, y = x[keep], y[keep]
        ax.step(x / size, y, where="post", color=COLOURS["acknowledged PSN"], lw=1.2,
                zorder=3, label="acknowledged PSN", gid="acknowledged PSN")
    if marks_here:
        for name, symbol in (("NAK", "v"), ("RNR NAK", "s")):
            rows = s.marks[name]
            rows = rows[(s.t[rows] >= lo) & (s.t[rows] <= hi)]
            if 0 < len(rows) <= DETAIL_MARKS:   # more would hide the resends: strip only
                ax.plot(s.t[rows] / size, s.psn[rows], symbol, ms=5, mfc="none",
                        color=COLOURS[name], zorder=5, label=name, gid=name)
    ax.set_xlim(lo / size, hi / size)
    ax.set_ylabel("PSN (unwrapped)")
    _plain(ax)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def marks_panel(ax: Any, s: Series, lo: int, hi: int, unit: tuple[str, int]) -> None:
    """One row of ticks per kind of mark, at most MAX_MARKS each; labels say how many."""
    names = [n for n in s.marks if len(s.marks[n])]
    labels = []
    for y, name in enumerate(names):
        rows = s.marks[name]
        rows = rows[(s.t[rows] >= lo) & (s.t[rows] <= hi)]
        shown = rows[thin(len(rows), MAX_MARKS)]
        ax.plot(s.t[shown] / unit[1], np.full(len(shown), y), "|", ms=7, mew=0.8,
                color=COLOURS[name], gid=name, label=name)
        more = f", {len(shown):,} drawn" if len(shown) < len(rows) else ""
        labels.append(f"{name} ({len(rows):,}{more})")
    ax.set_yticks(range(len(names)), labels, fontsize="x-small")
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlim(lo / unit[1], hi / unit[1])
    ax.grid(axis="x", alpha=0.3)


def rate_panel(ax: Any, s: Series, lo: int, hi: int, unit: tuple[str, int]) -> None:
    """Throughput (all payload) and goodput (retransmitted bytes left out) per bin; the bin
    width adapts to the span and the packets in it (about 20 packets a bin, 20 to 200 bins)."""
    a, b = np.searchsorted(s.t, lo, "left"), np.searchsorted(s.t, hi, "right")
    width = nice_width(hi - lo, int(np.clip((b - a) / 20, 20, 200)))
    edges = np.arange(lo, hi + width, width, dtype=np.float64)
    t = s.t[a:b]
    series = {name: np.histogram(t, edges, weights=w[a:b].astype(np.float64))[0] * 8e9 / width
              for name, w in (("throughput", s.carried), ("goodput", s.good))}
    name, per = rate_unit(max(float(series["throughput"].max(initial=0)), 1.0))
    for label, v in series.items():
        ax.step(edges[:-1] / unit[1], v / per, where="post", color=COLOURS[label],
                lw=1.6 if label == "throughput" else 1.0, label=label, gid=label)
    ax.set_ylabel(f"{name}\n(bins of {duration_text(width)})", fontsize="small")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize="x-small")
    _plain(ax)


def latency_panel(ax: Any, s: Series, lo: int, hi: int, unit: tuple[str, int]) -> None:
    """Latency samples in view, each kind its colour; a log scale when they span more than
    LOG_RANGE, in the unit of their middle."""
    shown = {}
    for label, (t, v) in s.latency.items():
        keep = (t >= lo) & (t <= hi)
        if keep.any():
            shown[label] = (t[keep], v[keep])
    if not shown:
        ax.text(0.5, 0.5, "no latency sample in view", transform=ax.transAxes, ha="center",
                va="center", fontsize="small", color="gray")
        ax.set_yticks([])
        return
    top = max(float(v.max()) for _, v in shown.values())
    low = min(float(v[v > 0].min(initial=top)) for _, v in shown.values())
    log = top > LOG_RANGE * max(low, 1)      # latencies of several magnitudes
    name, per = time_unit(float(np.sqrt(max(low, 1) * max(top, 1))) if log else top)
    if log:
        ax.set_yscale("log")
    for label, (t, v) in shown.items():
        pick = thin(len(t), WHOLE)
        ax.plot(t[pick] / unit[1], v[pick] / per, ".", ms=3, color=COLOURS[label],
                label=f"{label} ({len(t):,})", gid=label)
    ax.set_ylabel(f"latency ({name})", fontsize="small")
    if not log:
        ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize="x-small")
    _plain(ax)


def _detail_window(s: Series, e: Event) -> tuple[int, int]:
    pad = max(e.duration * 0.3, s.median_gap * 10, MIN_DETAIL_PAD)
    return max(0, int(e.start - pad)), int(e.end + pad)


def _time_label(unit: tuple[str, int]) -> str:
    return f"time from the connection's first packet ({unit[0]})"


def connection_figure(report: Any, s: Series,
                      window: tuple[int | None, int | None] | None = None,
                      details: list[Event] | None = None) -> Any:
    """The Figure of one connection: the whole of it (or ``window``, ns from its first
    packet), and under it one zoomed PSN graph per event of ``details`` (default
    ``Series.details()``: the worst recoveries, or the busiest stretches of a mostly idle
    connection; none with a window)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    lo, hi = _span(s, window)
    unit = time_unit(hi - lo, hi)
    if details is None:
        details = s.details() if window is None else []
    marks = any(len(v) for v in s.marks.values())
    rows = [("psn", 3.0)] + ([("marks", 0.25 + 0.22 * sum(len(v) > 0 for v in s.marks.values()))]
                             if marks else [])
    rows += [("rate", 1.3)] + ([("latency", 1.2)] if s.latency else [])
    rows += [("gap", 0.2), ("details", 2.4)] if details else []
    fig = Figure(figsize=(12, 1.1 + sum(h for _, h in rows) * 1.35), dpi=100)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(len(rows), 3, height_ratios=[h for _, h in rows], hspace=0.3)
    top = None
    axes = {}
    for i, (name, _) in enumerate(rows):
        if name in ("gap", "details"):
            continue
        ax = fig.add_subplot(grid[i, :], sharex=top, gid=name)
        top = top or ax
        axes[name] = ax
    psn_panel(axes["psn"], s, lo, hi, unit)
    if marks:
        marks_panel(axes["marks"], s, lo, hi, unit)
    rate_panel(axes["rate"], s, lo, hi, unit)
    if s.latency:
        latency_panel(axes["latency"], s, lo, hi, unit)
    for name, ax in axes.items():
        if name != list(axes)[-1]:
            ax.tick_params(labelbottom=False)
    list(axes.values())[-1].set_xlabel(_time_label(unit))
    if window is None:   # a margin, so the first and last packets are not on the frame
        margin = (hi - lo) * 0.01
        axes["psn"].set_xlim((lo - margin) / unit[1], (hi + margin) / unit[1])
    axes["psn"].legend(loc="upper left", fontsize="x-small", markerscale=2)
    for n, e in enumerate(details, 1):
        for ax in axes.values():
            ax.axvspan(e.start / unit[1], e.end / unit[1], color=CAUSE_COLOURS[e.cause],
                       alpha=0.15, lw=0)
        axes["psn"].annotate(str(n), (e.start / unit[1], 1.0), xycoords=("data", "axes fraction"),
                             fontsize="small", color=CAUSE_COLOURS[e.cause], va="bottom")
        ax = fig.add_subplot(grid[len(rows) - 1, n - 1], gid=f"detail-{n}")
        d_lo, d_hi = _detail_window(s, e)
        d_unit = time_unit(d_hi - d_lo, d_hi)
        psn_panel(ax, s, d_lo, d_hi, d_unit, marks_here=True)
        ax.axvspan(e.start / d_unit[1], e.end / d_unit[1], color=CAUSE_COLOURS[e.cause],
                   alpha=0.15, lw=0)
        ax.set_title(f"{n}: {e.label()}", fontsize="small", color=CAUSE_COLOURS[e.cause])
        ax.set_xlabel(f"time from first packet ({d_unit[0]})", fontsize="small")
        ax.tick_params(labelsize="x-small")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set_ylabel("PSN" if n == 1 else "", fontsize="small")
    where = "" if window is None else f", window {duration_text(lo)} to {duration_text(hi)}"
    counts = (f"{int(s.first.sum()):,} first transmissions, {int(s.retx.sum()):,} "
              f"retransmissions, {len(s.stalls)} stalls ({duration_text(s.stall_time())})")
    fig.suptitle(f"{title_of(report)}\nfirst packet {utc_text(s.t0)}{where}; {counts}",
                 fontsize="medium")
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - 0.75 / fig.get_figheight(),
                        bottom=0.5 / fig.get_figheight())
    return fig


def save(fig: Any, path: str) -> None:
    """Write ``fig`` to ``path`` (PNG or SVG by its suffix) atomically."""
    from ibwire.analysis.plot import write_atomically

    write_atomically(path, lambda tmp: fig.savefig(tmp, format=path.rsplit(".", 1)[1]))
