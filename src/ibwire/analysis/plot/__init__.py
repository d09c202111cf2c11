"""Plots of each connection (the ``plot`` extra): ``ibwire qp --plot DIR``.

One figure per connection, named after its ends, and ``index.html`` listing the
connections by their trouble (retransmissions, then stall time) with links to them.
What a figure shows is gathered by :mod:`.series` (numpy only), drawn by :mod:`.figure`
(matplotlib: PNG, SVG) or :mod:`.html` (plotly: an interactive page), and listed by
:mod:`.index`. Time is in a unit that fits the span, from the connection's first packet
(:mod:`.units`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ibwire.analysis.plot.series import Series, build
from ibwire.errors import IbwireError

#: The formats ``--plot-format`` takes.
FORMATS = ("png", "svg", "html")


class PlotError(IbwireError):
    """Plots cannot be drawn (matplotlib or plotly missing, no rows kept)."""


def write_atomically(path: str, write: Callable[[str], None]) -> None:
    """``write(temporary)`` a file beside ``path``, then rename it to ``path``."""
    from ibwire.pcap.atomic import replace_into, temporary_beside

    fd, tmp = temporary_beside(path, os.path.splitext(path)[1])
    os.close(fd)
    try:
        write(tmp)
        replace_into(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotError("plots need matplotlib: pip install 'ibwire[plot]'") from exc
    return Figure, FigureCanvasAgg


def require(formats: tuple[str, ...] | list[str]) -> None:
    """PlotError naming the extra when a library ``formats`` need is missing."""
    if "png" in formats or "svg" in formats:
        _matplotlib()
    if "html" in formats:
        from ibwire.analysis.plot.html import plotly

        plotly()


def file_name(report: Any, index: int) -> str:
    """The base name of a connection's figures."""
    text = f"qp{index:03d}-{report.requester['address']}-{report.requester['qpn']}-to-" \
           f"{report.responder['address']}-{report.responder['qpn']}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def series_of(analysis: Any, index: int) -> Series | None:
    """The plot series of connection ``index`` of ``analysis`` (None: no rows kept)."""
    chunks = analysis.traces.get(index)
    if not chunks or not sum(len(c["time"]) for c in chunks):
        return None
    return build(chunks, analysis.connections[index].pmtu)


def plot_analysis(analysis: Any, directory: str, formats: tuple[str, ...] | list[str] = ("png",),
                  window: tuple[int | None, int | None] | None = None) -> list[str]:
    """Figures of every connection of ``analysis`` (analysed with ``trace=True``) in each of
    ``formats`` into ``directory``, and ``index.html``; ``window`` (start, end) ns from each
    connection's first packet draws that span only. Returns the paths written."""
    from ibwire.analysis.plot.index import write_index

    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise PlotError(f"no plot format {', '.join(sorted(unknown))}; the formats are "
                        f"{', '.join(FORMATS)}")
    require(formats)
    os.makedirs(directory, exist_ok=True)
    written = []
    listed = []
    for index, report in enumerate(analysis.connections):
        s = series_of(analysis, index)
        if s is None:
            continue
        base = os.path.join(directory, file_name(report, index))
        files = []
        fig = None
        for fmt in formats:
            path = f"{base}.{fmt}"
            if fmt == "html":
                from ibwire.analysis.plot.html import connection_html, write_html

                write_html(connection_html(report, s, window), path)
            else:
                from ibwire.analysis.plot.figure import connection_figure, save

                fig = fig or connection_figure(report, s, window)
                save(fig, path)
            files.append(path)
        written += files
        listed.append((index, report, s, [os.path.basename(f) for f in files]))
    if listed:
        written.append(write_index(os.path.join(directory, "index.html"), listed))
    return written


__all__ = ["FORMATS", "PlotError", "file_name", "plot_analysis", "require", "series_of"]
