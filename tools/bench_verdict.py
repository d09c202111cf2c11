#!/usr/bin/env python3
"""Benchmark of ``qp --manifest``'s verdict (not a test): a generated RDMA WRITE
conversation with seeded drops and lost ACKs, judged whole; prints records, faults, the
scan and the judging time, and records/s.

Usage: PYTHONPATH=src python tools/bench_verdict.py [--iters N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from ibwire.analysis.verdict import judge
from ibwire.analysis.verdict_frames import read_frames
from ibwire.analysis.verdict_manifest import parse_manifest
from ibwire.gen import Fault, QpSpec, Scenario
from ibwire.gen.write import write_capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=3000, help="64 KiB messages per QP")
    parser.add_argument("--quick", action="store_true", help="300 messages per QP")
    args = parser.parse_args()
    iters = 300 if args.quick else args.iters
    scenario = Scenario(qps=(QpSpec("write", 65536, iters=iters),) * 2, tap="switch",
                        faults=(Fault("drop", rate=0.002), Fault("lose_ack", rate=0.01)))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bench.pcap")
        manifest = write_capture(path, scenario)
        start = time.perf_counter()
        frames = read_frames(path, parse_manifest(manifest))
        scanned = time.perf_counter() - start
        start = time.perf_counter()
        verdict = judge(path, manifest)
        whole = time.perf_counter() - start
    print(f"{frames.records} records, {len(verdict.judgements)} faults "
          f"({', '.join(f'{n} {o}' for o, n in verdict.counts().items() if n)})")
    print(f"scan {scanned:.2f} s; whole verdict {whole:.2f} s "
          f"({frames.records / whole / 1e3:.0f}k records/s)")


if __name__ == "__main__":
    main()
