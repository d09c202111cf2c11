"""The forwarder's send path alone, on a veth pair in network namespaces this script makes and
removes: batches of 256 frames of 1 KiB (``bench_impair``'s RDMA WRITE MIDDLE stream) sent
out of the forwarder's port ``fb`` as the C pump sends them, and the sending thread's CPU time
per frame (``time.thread_time``), for each way of sending:

- ``sendmmsg``: the default (``relay_send``);
- ``sendmmsg, qdisc bypass``: the same socket with ``PACKET_QDISC_BYPASS`` (packet(7));
- ``send ring``: ``ibwire impair --tx-ring``'s ``PACKET_TX_RING`` (``ring.c``);
- ``send ring, qdisc bypass``.

Host B has no reader: its IP stack drops each frame (not addressed to it), in the sending
thread's context, as a veth peer does (see ``bench_impair``'s per CPU-s), so the figures hold
that too; no receive, no Python per frame, no probes: the rounds alternate the ways, and the
spread between rounds is what the machine's other jobs did.

Run as root from the repository: ``python tools/bench_impair_send.py [--rounds N]
[--batches N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.impair.lab import Lab

from bench_impair import frames, unable
from ibwire.impair.ports import SOL_PACKET, Batch, Port

PACKET_QDISC_BYPASS = 20
BATCH = 256


def ports(lab: Lab) -> dict[str, Port]:
    with lab.inside("f"):
        out = {"sendmmsg": Port("fb"), "sendmmsg, qdisc bypass": Port("fb"),
               "send ring": Port("fb", tx_ring=True),
               "send ring, qdisc bypass": Port("fb", tx_ring=True)}
    for name, port in out.items():
        if "send ring" in name and port.tx is None:
            raise SystemExit("bench_impair_send: the kernel refused a send ring")
        if "bypass" in name:
            for s in (port.sock, port._tx_sock):
                if s is not None:
                    s.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=400, help="batches a way a round")
    args = parser.parse_args()
    why = unable("bench_impair_send")
    if why:
        print(why, file=sys.stderr)
        return 2
    batch = Batch.of([bytearray(f) for f in frames(BATCH)], np.zeros(BATCH, np.int64),
                     np.zeros(BATCH, bool))
    lab = Lab()
    lab.make()
    try:
        ways = ports(lab)
        rates: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, port in ways.items():
                start, sent = time.thread_time_ns(), 0
                for _ in range(args.batches):
                    sent += port.send_batch(batch)
                rates[name].append(sent / ((time.thread_time_ns() - start) / 1e9))
        for port in ways.values():
            port.close()
    finally:
        lab.remove()
    print(f"{args.rounds} rounds of {args.batches} batches of {BATCH} frames of 1024 bytes "
          f"a way; load average {os.getloadavg()[0]:.1f}")
    print(f"{'way':26} {'median':>8}  frames per CPU-s, each round")
    for name, values in rates.items():
        print(f"{name:26} {np.median(values):8.0f}  "
              + " ".join(f"{v:.0f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
