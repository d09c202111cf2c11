"""Benchmark: ibwire.scapy against scapy.contrib.roce, building and dissecting RoCEv2 packets.

ibwire.scapy is measured in both settings: as imported (its own layers fast, scapy's Ether,
IP and UDP classes untouched: the default) and with ``ibwire.scapy.fast_paths(True)``, the
opt-in that also gives those scapy classes faster copies and builds. One run, side by side,
on the same packets: Ether / IPv4 / UDP 4791 / BTH RC_SEND_ONLY / 64-byte payload, ICRC
computed at build, UDP checksum 0 as RoCEv2 NICs send it (scapy's UDP checksum code copies
the whole IP packet, a cost both sides would pay alike). Rows:

* build, compose + raw: each packet composed with ``/`` and turned into bytes;
* build, template + raw: one composed template, its PSN set, ``raw`` per packet;
* dissect: ``Ether(frame)``; ibwire checks the ICRC only when ``icrc_ok`` is read, so a row
  with that check follows;
* floor: the same frames with the transport as Raw bytes to another UDP port, without any
  RoCE module loaded: what scapy's Ether/IP/UDP layers cost by themselves.

Each side runs in a fresh interpreter of its own, because both modules bind UDP port 4791
(with ibwire.scapy loaded, scapy.contrib.roce's frames would dissect as ibwire's layers), and
the fast paths are process-wide. The sides alternate, ``--repeat`` times; the best time of
each figure is kept, with the garbage collector off while timing (as timeit does), and the
median over the rounds of each round's speed-up is shown too (each round runs every side
back to back, under the same load). The speed-ups are contrib.roce's time over ibwire's,
default / fast paths. Every side must build the same bytes.

Usage: PYTHONPATH=src python tools/bench_scapy.py [-n 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

SIDES = ("ibwire", "ibwire_fast", "contrib", "floor")
#: The two ibwire settings: default (fast paths off), fast paths on.
IBWIRE_SIDES = ("ibwire", "ibwire_fast")
ROWS = (
    ("build", "build: compose + raw"),
    ("template", "build: template + raw"),
    ("dissect", "dissect: Ether(frame)"),
    ("dissect_check", "dissect + ICRC check (BTH.icrc_ok)"),
)
ETHER = {"dst": "02:00:00:00:00:02", "src": "02:00:00:00:00:01"}
IPV4 = {"src": "192.0.2.1", "dst": "192.0.2.2"}
PAYLOAD = bytes(range(64))
RC_SEND_ONLY = 0x04


def _timed(n: int, work: Callable[[int], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for i in range(n):
            work(i)
        return time.perf_counter() - start
    finally:
        gc.enable()


def _side(side: str, n: int) -> dict[str, Any]:
    """Run one side's figures once, in this (fresh) interpreter."""
    from scapy.compat import raw
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    def outer(dport: int = 4791) -> Any:
        return Ether(**ETHER) / IP(**IPV4) / UDP(sport=49152, dport=dport, chksum=0)

    if side in IBWIRE_SIDES:
        from ibwire.scapy import BTH, fast_paths

        if fast_paths(side == "ibwire_fast").active is not (side == "ibwire_fast"):
            raise SystemExit("fast paths refused by this scapy (see ibwire.scapy.slots)")

        def make(psn: int) -> Any:
            return outer() / BTH(opcode=RC_SEND_ONLY, destqp=17, psn=psn) / Raw(PAYLOAD)
    elif side == "contrib":
        from scapy.contrib.roce import BTH  # type: ignore[no-redef]

        def make(psn: int) -> Any:
            return outer() / BTH(opcode=RC_SEND_ONLY, dqpn=17, psn=psn) / Raw(PAYLOAD)
    else:
        BTH = None  # type: ignore[assignment,misc]

        def make(psn: int) -> Any:
            return outer(4792) / Raw(bytes(12) + PAYLOAD + bytes(4))

    frames = [raw(make(psn)) for psn in range(n)]
    out: dict[str, Any] = {"digest": hashlib.sha256(b"".join(frames)).hexdigest()}
    out["build"] = _timed(n, lambda psn: raw(make(psn)))
    if BTH is not None:
        template = make(0)

        def from_template(psn: int) -> bytes:
            template[BTH].psn = psn
            return raw(template)
        out["template"] = _timed(n, from_template)
    out["dissect"] = _timed(n, lambda i: Ether(frames[i]))
    if side in IBWIRE_SIDES:
        from ibwire import crc

        out["icrc_ok"] = all(Ether(f)[BTH].icrc_ok for f in frames[:100])
        out["engine"] = crc.implementation
        out["dissect_check"] = _timed(n, lambda i: Ether(frames[i])[BTH].icrc_ok)
    return out


def _run_side(side: str, n: int) -> dict[str, Any]:
    result = subprocess.run([sys.executable, __file__, "--side", side, "-n", str(n)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="packets per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side (best kept)")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        print(json.dumps(_side(args.side, args.n)))
        return 0

    best: dict[str, dict[str, float]] = {side: {} for side in SIDES}
    info: dict[str, dict[str, Any]] = {}
    ratios: dict[str, dict[str, list[float]]] = {
        side: {key: [] for key, _label in ROWS} for side in IBWIRE_SIDES}
    for _ in range(args.repeat):
        for side in SIDES:
            info[side] = _run_side(side, args.n)
            for key, _label in ROWS:
                if key in info[side]:
                    best[side][key] = min(best[side].get(key, float("inf")), info[side][key])
        for side in IBWIRE_SIDES:
            for key, _label in ROWS:
                if key in info["contrib"]:
                    ratios[side][key].append(info["contrib"][key] / info[side][key])
    digests = {info[side]["digest"] for side in (*IBWIRE_SIDES, "contrib")}
    if len(digests) != 1 or not all(info[side]["icrc_ok"] for side in IBWIRE_SIDES):
        print("error: the sides build different bytes, or a bad ICRC", file=sys.stderr)
        return 1

    n = args.n

    def us(side: str, key: str) -> float | None:
        value = best[side].get(key)
        return None if value is None else value / n * 1e6

    def pair(values: list[float]) -> str:
        return " / ".join(f"{v:.2f}x" for v in values) if values else ""

    print(f"scapy RoCEv2 benchmark: {n} packets per run, best of {args.repeat} runs per side "
          f"(fresh interpreters, alternating); ibwire.crc engine: {info['ibwire']['engine']}")
    print("ibwire.scapy: default = as imported (scapy's classes untouched); "
          "fast = with ibwire.scapy.fast_paths(True)")
    print(f"{'us per packet':36} {'default':>8} {'fast':>8} {'contrib':>8} "
          f"{'speed-up def / fast':>20} {'floor':>7} {'median speed-up':>16}")
    for key, label in ROWS:
        theirs = us("contrib", key)
        mine = [us(side, key) for side in IBWIRE_SIDES]
        floor = us("floor", key)
        speedups = [theirs / m for m in mine if m] if theirs is not None else []
        medians = [statistics.median(ratios[side][key]) for side in IBWIRE_SIDES] \
            if ratios["ibwire"][key] else []
        cells = [*(f"{m:8.1f}" for m in mine),
                 f"{theirs:8.1f}" if theirs is not None else f"{'':8}",
                 f"{pair(speedups):>20}",
                 f"{floor:7.1f}" if floor is not None else f"{'':7}",
                 f"{pair(medians):>16}"]
        print(f"{label:36} {' '.join(cells)}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
