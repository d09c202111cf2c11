#!/usr/bin/env python3
"""Benchmark of headers-only captures: ``check``, ``show``, ``qp`` and ``export`` on a capture
cut by a snap length against the same on the whole capture (the same packets), side by side
with tshark reading each. Headers-only should cost no more per packet than the whole capture
(less: fewer bytes to map and no CRC to compute).

The capture: ``ibwire gen`` of RC WRITEs of 64 KiB at a 1024-byte MTU, about --packets
packets (lossless: a generation with faults is slow, a known issue), then
``ibwire.pcap.snap`` cuts it to --snaplen bytes (tcpdump -s).

  check     ``ibwire check F``
  show      ``ibwire show F`` (to /dev/null)
  qp        ``ibwire qp --json F``
  export    ``ibwire export F -o DIR --fields bth,icrc_ok --force``
  tshark    ``tshark -r F -T fields -e infiniband.bth.psn`` (for scale)

Each figure is the best of --repeat runs (the file warmed first): wall time, and CPU time
(user + system, which swings less with what else the machine runs), per packet too.

Usage: python tools/bench_cut.py [--dir /tmp/ibwire-bench-cut] [--packets 1000000]
       [--snaplen 128] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import timed


def capture(work: Path, packets: int, snaplen: int) -> tuple[Path, Path]:
    whole, cut = work / "whole.pcap", work / f"cut-{snaplen}.pcap"
    if not whole.exists():
        iters = max(1, packets // 66)  # 64 requests and an ACK or so a message, and resends
        subprocess.run([sys.executable, "-m", "ibwire.cli.main", "gen", "-o", str(whole),
                        "--verb", "write", "--size", "65536", "--iters", str(iters),
                        "--seed", "1", "--no-cm", "--no-progress"],
                       check=True, stdout=subprocess.DEVNULL)
    if not cut.exists():
        from ibwire.pcap.snap import snap_capture

        snap_capture(whole, cut, snaplen)
    return whole, cut


def count(path: Path) -> int:
    from ibwire.scan import scan_capture

    return sum(len(batch) for batch in scan_capture(path, fields=()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/ibwire-bench-cut")
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--snaplen", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    whole, cut = capture(work, args.packets, args.snaplen)
    ibwire = [sys.executable, "-m", "ibwire.cli.main"]
    jobs = {
        "check": lambda f: [*ibwire, "check", "-q", str(f)],
        "show": lambda f: [*ibwire, "show", str(f)],
        "qp": lambda f: [*ibwire, "qp", "--json", str(f)],
        "export": lambda f: [*ibwire, "export", str(f), "-o", str(work / f"out-{f.stem}"),
                             "--fields", "bth,icrc_ok", "--force"],
    }
    if shutil.which("tshark"):
        jobs["tshark"] = lambda f: ["tshark", "-r", str(f), "-T", "fields",
                                    "-e", "infiniband.bth.psn"]
    n_whole, n_cut = count(whole), count(cut)
    print(f"whole: {whole} {n_whole} packets, {whole.stat().st_size / 1e6:.0f} MB; "
          f"cut at {args.snaplen}: {cut.stat().st_size / 1e6:.0f} MB")
    print(f"{'job':8} {'whole s':>8} {'cut s':>8} {'whole cpu':>10} {'cut cpu':>8} "
          f"{'whole ns/pkt':>13} {'cut ns/pkt':>11} {'cut/whole cpu':>14}")
    for name, argv in jobs.items():
        repeat = 1 if name == "tshark" else args.repeat  # tshark: seconds a run already
        w_whole, c_whole = timed(argv(whole), repeat, whole)
        w_cut, c_cut = timed(argv(cut), repeat, cut)
        print(f"{name:8} {w_whole:8.2f} {w_cut:8.2f} {c_whole:10.2f} {c_cut:8.2f} "
              f"{c_whole / n_whole * 1e9:13.0f} {c_cut / n_cut * 1e9:11.0f} "
              f"{c_cut / c_whole:14.2f}")


if __name__ == "__main__":
    main()
