#!/usr/bin/env python3
"""Benchmark of ibwire fuzz's targets: packets per second, batched against one packet per run
(not a test). Prints one table.

  generation          hypothesis examples/s (valid mode), what feeds every target
  wireshark           tshark -T json on the batch + ibwire's field-by-field comparison
  command: tcpdump    tcpdump -r {pcap} -nn (a C parser; prints no JSON, so only its exit
                      status and signals are checked)
  command: python     tests/fuzz/tinyparser.py (a Python parser printing JSON lines,
                      compared key by key)

Each target runs the same packets: all of them in batches of --batch, then the first --single
one packet per run. The packets are drawn once, before timing.

Usage: PYTHONPATH=src python tools/bench_fuzz.py [--packets 400] [--batch 200] [--single 20]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from ibwire.fuzz.generate import Shape, draw_examples, strategy
from ibwire.fuzz.targets import Limits, make_target

ROOT = Path(__file__).resolve().parent.parent


def rate(target, examples, batch, allow) -> float:
    start = time.perf_counter()
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        run = target.run(chunk)
        target.diffs(chunk, run, allow)
    return len(examples) / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=400)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--single", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    examples = draw_examples(strategy("valid", Shape()), args.packets, args.seed)
    generation = len(examples) / (time.perf_counter() - start)

    targets = []
    if shutil.which("tshark"):
        from ibwire.fuzz.wireshark.target import default_allow

        targets.append(("wireshark", "wireshark", default_allow()))
    if shutil.which("tcpdump"):
        targets.append(("command: tcpdump", "tcpdump -r {pcap} -nn", []))
    targets.append(("command: python", f"{sys.executable} "
                    f"{ROOT / 'tests' / 'fuzz' / 'tinyparser.py'} {{pcap}}", []))

    print(f"{len(examples)} valid RoCE packets (seed {args.seed}); generation "
          f"{generation:.0f} examples/s")
    print(f"{'target':<20} {'batched pkt/s':>14} {'1 per run pkt/s':>16} {'ratio':>7}")
    for name, spec, allow in targets:
        target = make_target(spec, 1, Limits(120_000))
        batched = rate(target, examples, args.batch, allow)
        single = rate(target, examples[:args.single], 1, allow)
        print(f"{name:<20} {batched:>14.0f} {single:>16.1f} {batched / single:>6.0f}x")
    print(f"(batch {args.batch}; one per run over the first {args.single} packets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
