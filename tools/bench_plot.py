#!/usr/bin/env python3
"""Benchmark of ``ibwire qp --plot``: one connection of about a million packets.

The capture: ``ibwire gen --verb write --size 65536 --iters 16000 --no-cm`` (one RC WRITE
connection, 64 KiB messages at the default MTU of 1024: 1,024,000 requests and their 16,000
ACKs), made once in --dir. With --drop R, the generator's random drops at rate R as well, so
the series carry retransmission rounds (the round classification replays the analysis's
observer over the rows).

Times (best of --repeat, seconds), each step on its own:

  analyse     ``analyse(F, trace=True)``: not the plot's, the price of keeping the rows
  series      the numpy series of the connection (``plot.series.build``)
  figure      the matplotlib Figure (``plot.figure.connection_figure``), decimated
  png, svg    writing it
  html        the plotly page (``plot.html.connection_html`` and writing it)

Measured on the 2-core development machine (best of 2): clean, 1,040,000 packets: series
0.26 s, figure 0.05 s, PNG 0.11 s (0.42 s in all), SVG 0.21 s, HTML 0.07 s; with --drop
0.0005, 1,052,532 packets, 12,050 resent in 482 rounds: series 0.71 s (the rounds' classes
replay the observer), figure 0.09 s, PNG 0.19 s (0.98 s in all), SVG 0.25 s, HTML 0.09 s.
Generating the capture with drops takes about 3 minutes (once; without drops 5 s).

Usage: python tools/bench_plot.py [--dir /tmp/ibwire-bench-plot] [--iters 16000]
       [--drop 0.0005] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def best(repeat: int, step: Callable[[], Any]) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t)
    return min(times), out


def ensure(path: Path, iters: int, drop: float) -> Path:
    if not path.exists():
        argv = [sys.executable, "-m", "ibwire.cli.main", "gen", "--verb", "write", "--size",
                "65536", "--iters", str(iters), "--no-cm", "--no-progress", "--seed", "1",
                "-o", str(path)]
        if drop:
            argv += ["--drop", f"rate={drop}"]
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        print(f"# wrote {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def main() -> int:
    from ibwire.analysis import analyse
    from ibwire.analysis.plot import series_of
    from ibwire.analysis.plot.figure import connection_figure, save
    from ibwire.analysis.plot.html import connection_html, write_html

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/ibwire-bench-plot", type=Path)
    ap.add_argument("--iters", type=int, default=16000)
    ap.add_argument("--drop", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-html", action="store_true")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    name = f"write-{args.iters}" + (f"-drop{args.drop}" if args.drop else "")
    capture = ensure(args.dir / f"{name}.pcap", args.iters, args.drop)
    secs, result = best(1, lambda: analyse(str(capture), trace=True))
    rows = [("analyse", secs)]
    index = max(range(len(result.connections)),
                key=lambda i: sum(len(c["time"]) for c in result.traces.get(i, [])))
    report = result.connections[index]
    secs, s = best(args.repeat, lambda: series_of(result, index))
    rows.append(("series", secs))
    secs, fig = best(args.repeat, lambda: connection_figure(report, s))
    rows.append(("figure", secs))
    for fmt in ("png", "svg"):
        out = str(args.dir / f"{name}.{fmt}")
        rows.append((fmt, best(args.repeat, lambda out=out: save(fig, out))[0]))
    if not args.no_html:
        out = str(args.dir / f"{name}.html")
        rows.append(("html", best(args.repeat, lambda: write_html(
            connection_html(report, s), out))[0]))
    plot = sum(t for n, t in rows if n in ("series", "figure", "png"))
    print(f"{len(s.t):,} packets, {int(s.retx.sum()):,} retransmitted, {len(s.rounds)} rounds")
    for n, t in rows:
        print(f"{n:<8} {t:7.2f} s")
    print(f"{'plot PNG':<8} {plot:7.2f} s  (series + figure + png)")
    for fmt in ("png", "svg", "html"):
        path = args.dir / f"{name}.{fmt}"
        if path.exists():
            print(f"# {path}: {os.path.getsize(path) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
