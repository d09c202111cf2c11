"""Plots of each connection: PSN against time, and throughput over time (the ``plot`` extra).

PSNs are unwrapped across 2^24 so that a wrap draws a straight line. Request packets whose
PSN is not past the highest one before them (retransmissions, late fills) are marked with a
red cross, NAKs and RNR NAKs with a triangle at the PSN they name, CNPs with a tick under
the axis. Throughput is payload bytes of requests and READ responses per time bin.
matplotlib is used through its object API (no pyplot, no backend switch): importing this
module changes nothing in matplotlib.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from ibwire.errors import IbwireError
from ibwire.pcap.atomic import replace_into, temporary_beside
from ibwire.transport.opkinds import ACK, CNP, KIND, READ_RESP, REQUEST
from ibwire.transport.psn import HALF, PSN_BITS, PSN_MASK

BINS = 100


class PlotError(IbwireError):
    """Plots cannot be drawn (matplotlib missing, no rows kept)."""


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotError("plots need matplotlib: pip install 'ibwire[plot]'") from exc
    return Figure, FigureCanvasAgg


def _unwrap(psn: np.ndarray) -> np.ndarray:
    d = np.diff(psn.astype(np.int64), prepend=int(psn[0])) & PSN_MASK
    d = np.where(d >= HALF, d - (1 << PSN_BITS), d)
    return int(psn[0]) + np.cumsum(d)


def _name(report: Any, index: int) -> str:
    text = f"qp{index:03d}-{report.requester['address']}-{report.requester['qpn']}-to-" \
           f"{report.responder['address']}-{report.responder['qpn']}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def plot_connection(report: Any, chunks: list[dict[str, np.ndarray]], path: str) -> None:
    """Draw one connection to ``path`` (PNG or SVG by its suffix), written atomically."""
    Figure, Canvas = _matplotlib()
    rows = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    kind = KIND[rows["opcode"]]
    t = rows["time"].astype(np.int64)
    t0 = int(t.min())
    us = (t - t0) / 1000.0
    fig = Figure(figsize=(10, 6.5), dpi=100)
    Canvas(fig)
    ax, tp = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    has_psn = kind != CNP
    ext = np.zeros(len(t), np.int64)
    if has_psn.any():
        ext[has_psn] = _unwrap(rows["psn"][has_psn])
    req = kind == REQUEST
    if req.any():
        e = ext[req]
        before = np.maximum.accumulate(np.concatenate(([e[0] - 1], e[:-1])))
        again = e <= before
        ax.plot(us[req][~again], e[~again], ".", ms=3, color="tab:blue", label="request")
        if again.any():
            ax.plot(us[req][again], e[again], "x", ms=5, color="tab:red",
                    label="retransmission")
    answers = (kind == ACK) & (rows["syndrome"] >> 5 == 0) | (kind == READ_RESP)
    if answers.any():
        ax.plot(us[answers], ext[answers], ".", ms=2.5, color="tab:green", alpha=0.6,
                label="ACK / response")
    naks = (kind == ACK) & (rows["syndrome"] >> 5 != 0)
    if naks.any():
        ax.plot(us[naks], ext[naks], "v", ms=7, color="tab:orange", label="NAK")
    cnp = kind == CNP
    if cnp.any():
        ax.plot(us[cnp], np.zeros(int(cnp.sum())), "|", ms=12, color="tab:purple",
                transform=ax.get_xaxis_transform(), label="CNP", clip_on=False)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax.set_ylabel("PSN (unwrapped)")
    ax.legend(loc="upper left", fontsize="small")
    ax.set_title(f"{report.requester['address']} QP {report.requester['qpn']} -> "
                 f"{report.responder['address']} QP {report.responder['qpn']} "
                 f"({report.transport})", fontsize="medium")
    carried = req | (kind == READ_RESP)
    span = max(float(us.max()), 1e-3)
    edges = np.linspace(0.0, span, BINS + 1)
    sums, _ = np.histogram(us[carried], edges, weights=rows["payload"][carried].astype(float))
    width_s = (edges[1] - edges[0]) * 1e-6
    tp.step(edges[:-1], sums * 8 / width_s / 1e9, where="post", color="tab:blue")
    tp.set_ylabel("Gb/s")
    tp.set_xlabel(f"time (us) from {t0} ns")
    fig.tight_layout()
    fd, tmp = temporary_beside(path, os.path.splitext(path)[1])
    os.close(fd)
    try:
        fig.savefig(tmp)
        replace_into(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def plot_analysis(analysis: Any, directory: str, svg: bool = False) -> list[str]:
    """One PNG (and SVG with ``svg``) per connection of ``analysis`` (analysed with
    ``trace=True``) into ``directory``; returns the paths written."""
    _matplotlib()
    os.makedirs(directory, exist_ok=True)
    written = []
    for index, report in enumerate(analysis.connections):
        chunks = analysis.traces.get(index)
        if not chunks:
            continue
        base = os.path.join(directory, _name(report, index))
        for suffix in (".png", ".svg") if svg else (".png",):
            plot_connection(report, chunks, base + suffix)
            written.append(base + suffix)
    return written
