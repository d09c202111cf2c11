"""One connection as an interactive page (``--plot-format html``): plotly.

plotly rather than bokeh: a plotly figure is a plain JSON document (``fig.to_dict()``), so
tests read its series back as they do matplotlib's; its WebGL scatter (``Scattergl``) keeps
zoom and pan smooth with hundreds of thousands of points, where bokeh's canvas renderer
needs its own WebGL switch and a server-free page takes more assembly; and the page works
offline with ``plotly.min.js`` written once beside the pages (``include_plotlyjs=
"directory"``), not once per connection. The panels are those of the PNG
(:mod:`.figure`): PSN graph, marks, throughput/goodput, latencies, with the worst recoveries
shaded and named on the PSN graph instead of drawn apart (zooming reaches them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ibwire.analysis.plot.figure import CAUSE_COLOURS, COLOURS, title_of
from ibwire.analysis.plot.series import Series, decimate, thin
from ibwire.analysis.plot.units import duration_text, nice_width, rate_unit, time_unit, utc_text

#: Points of a series drawn whole up to this many; past it, the lowest and highest of each
#: of COLUMNS time columns (zooming in does not bring the others back: a page of millions of
#: points would not load).
WHOLE = 200_000
COLUMNS = 20_000
#: Marks of one kind drawn at most.
MAX_MARKS = 20_000
_MPL_TO_CSS = {"tab:blue": "#1f77b4", "tab:orange": "#ff7f0e", "tab:green": "#2ca02c",
               "tab:red": "#d62728", "tab:purple": "#9467bd", "tab:brown": "#8c564b",
               "tab:gray": "#7f7f7f", "tab:olive": "#bcbd22"}


def plotly() -> Any:
    """The plotly module, or PlotError naming the extra."""
    try:
        import plotly as module
        import plotly.graph_objects
        import plotly.subplots
    except ImportError as exc:
        from ibwire.analysis.plot import PlotError

        raise PlotError("HTML plots need plotly: pip install 'ibwire[plot]'") from exc
    return module


def _colour(name: str) -> str:
    return _MPL_TO_CSS[COLOURS[name]]


def connection_html(report: Any, s: Series,
                    window: tuple[int | None, int | None] | None = None) -> Any:
    """The plotly Figure of one connection (``window``: ns from its first packet)."""
    module = plotly()
    go, subplots = module.graph_objects, module.subplots
    lo = 0 if window is None or window[0] is None else window[0]
    hi = max(s.span, 1) if window is None or window[1] is None else window[1]
    unit = time_unit(hi - lo, hi)
    names = [n for n in s.marks if len(s.marks[n])]
    panels = ["psn"] + (["marks"] if names else []) + ["rate"] + (["latency"] if s.latency
                                                                   else [])
    heights = {"psn": 0.55, "marks": 0.03 + 0.03 * len(names), "rate": 0.2, "latency": 0.17}
    fig = subplots.make_subplots(rows=len(panels), cols=1, shared_xaxes=True,
                                 vertical_spacing=0.03,
                                 row_heights=[heights[p] for p in panels])
    row = {p: i + 1 for i, p in enumerate(panels)}

    def x_of(t: Any) -> Any:
        return t / unit[1]

    for name, mask, size in (("first transmission", s.first, 3),
                             ("retransmission", s.retx, 4)):
        x, y = decimate(s.t[mask], s.psn[mask], lo, hi, COLUMNS, WHOLE)
        if len(x):
            fig.add_trace(go.Scattergl(x=x_of(x), y=y, mode="markers", name=name,
                                       marker=dict(size=size, color=_colour(name))),
                          row=1, col=1)
    if len(s.ack_t):
        keep = thin(len(s.ack_t), WHOLE)
        fig.add_trace(go.Scattergl(x=x_of(s.ack_t[keep]), y=s.ack_psn[keep], mode="lines",
                                   line=dict(shape="hv", color=_colour("acknowledged PSN")),
                                   name="acknowledged PSN"), row=1, col=1)
    for name in names:
        rows = s.marks[name]
        rows = rows[(s.t[rows] >= lo) & (s.t[rows] <= hi)]
        rows = rows[thin(len(rows), MAX_MARKS)]
        fig.add_trace(go.Scattergl(
            x=x_of(s.t[rows]), y=np.full(len(rows), name), mode="markers", name=name,
            customdata=s.psn[rows], hovertemplate="%{x} PSN %{customdata}",
            marker=dict(symbol="line-ns-open", size=10, color=_colour(name))),
            row=row["marks"], col=1)
    a, b = np.searchsorted(s.t, lo, "left"), np.searchsorted(s.t, hi, "right")
    width = nice_width(hi - lo, int(np.clip((b - a) / 20, 20, 1000)))
    edges = np.arange(lo, hi + width, width, dtype=np.float64)
    rates = {name: np.histogram(s.t[a:b], edges, weights=w[a:b].astype(np.float64))[0]
             * 8e9 / width for name, w in (("throughput", s.carried), ("goodput", s.good))}
    rate_name, per = rate_unit(max(float(rates["throughput"].max(initial=0)), 1.0))
    for name, v in rates.items():
        fig.add_trace(go.Scattergl(x=x_of(edges[:-1]), y=v / per, mode="lines", name=name,
                                   line=dict(shape="hv", color=_colour(name))),
                      row=row["rate"], col=1)
    if s.latency:
        lat_name, lat_per = time_unit(max(float(v.max()) for _, v in s.latency.values()))
        for name, (t, v) in s.latency.items():
            keep = thin(len(t), WHOLE)
            fig.add_trace(go.Scattergl(x=x_of(t[keep]), y=v[keep] / lat_per, mode="markers",
                                       name=name, marker=dict(size=4, color=_colour(name))),
                          row=row["latency"], col=1)
        fig.update_yaxes(title_text=f"latency ({lat_name})", row=row["latency"], col=1)
    worst = s.details() if window is None else []
    for n, e in enumerate(worst, 1):
        fig.add_vrect(x0=x_of(e.start), x1=x_of(e.end), row=1, col=1, line_width=0,
                      fillcolor=_MPL_TO_CSS[CAUSE_COLOURS[e.cause]], opacity=0.2,
                      annotation_text=f"{n}: {e.label()}", annotation_position="top left")
    fig.update_yaxes(title_text="PSN (unwrapped)", tickformat="d", row=1, col=1)
    fig.update_yaxes(title_text=f"{rate_name} (bins of {duration_text(width)})",
                     row=row["rate"], col=1)
    fig.update_xaxes(title_text=f"time from the connection's first packet ({unit[0]})",
                     range=[x_of(lo), x_of(hi)], row=len(panels), col=1)
    fig.update_layout(title=f"{title_of(report)}<br><sup>first packet {utc_text(s.t0)}; "
                      f"{int(s.first.sum()):,} first transmissions, {int(s.retx.sum()):,} "
                      f"retransmissions, {len(s.stalls)} stalls "
                      f"({duration_text(s.stall_time())})</sup>",
                      height=300 + 160 * len(panels), template="plotly_white",
                      legend=dict(orientation="h"))
    return fig


def write_html(fig: Any, path: str) -> None:
    """Write the page atomically; plotly writes ``plotly.min.js`` beside it when it is not
    there yet (the page loads it from there: it works offline)."""
    from ibwire.analysis.plot import write_atomically

    write_atomically(path, lambda tmp: fig.write_html(tmp, include_plotlyjs="directory",
                                                      full_html=True))
