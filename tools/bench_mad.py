"""``ibwire show --json`` against ``tshark -T json`` on the same capture of MADs.

Run: python tools/bench_mad.py [--packets 100000] [--dir /tmp/ibwire-bench]  (not a test)

The capture holds a connection's CM exchange over and over (REQ with RDMA-CM IP private data,
REP, RTU, DREQ, DREP, each a 256-byte MAD on QP1 in RoCEv2), written once and reused. Both
tools dissect every MAD field by field and write one JSON document per packet to /dev/null;
each is run ``--repeat`` times on a warm file and the best wall time is kept.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import ibwire
from ibwire.pcap import PcapWriter


def templates() -> list[bytes]:
    """One CM connection setup and teardown, built from CM keys (ibwire.mads infers the rest)."""
    ip_cm = {"cm.req.serviceid": 0x0000000001064853, "cm.req.ip_cm.sip4": "192.0.2.1",
             "cm.req.ip_cm.dip4": "192.0.2.2", "cm.req.ip_cm.sport": 40000}
    return [
        ibwire.build("rocev2_ipv4", {"cm.req": 7, "cm.req.localqpn": 0x11,
                                     "cm.req.startpsn": 0x1234, "cm.req.pppmtu": 3, **ip_cm}),
        ibwire.build("rocev2_ipv4", {"cm.rep": 9, "cm.rep.remotecommid": 7,
                                     "cm.rep.localqpn": 0x12, "cm.rep.startpsn": 0x5678}),
        ibwire.build("rocev2_ipv4", {"cm.rtu.localcommid": 7, "cm.rtu.remotecommid": 9}),
        ibwire.build("rocev2_ipv4", {"cm.dreq.localcommid": 7, "cm.dreq.remotecommid": 9,
                                     "cm.req.remoteqpneecn": 0x12}),
        ibwire.build("rocev2_ipv4", {"cm.drsp.localcommid": 9, "cm.drsp.remotecommid": 7}),
    ]


def ensure(path: Path, count: int) -> Path:
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    frames = templates()
    tmp = path.with_suffix(".tmp")
    with PcapWriter(tmp, 1) as writer:
        for i in range(count):
            writer.write(frames[i % len(frames)], 1_700_000_000_000_000_000 + i * 1000)
    tmp.replace(path)
    return path


def wall(argv: list[str], repeat: int) -> tuple[float, float]:
    """The best wall time of ``repeat`` runs, and the best CPU time (user + system) of the
    process: on a shared machine the wall time also counts the waits for a core."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime
                       + after.ru_stime - before.ru_stime)
    return best, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ibwire-bench"))
    parser.add_argument("--packets", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = ensure(args.dir / f"mads-{args.packets}.pcap", args.packets)
    path.read_bytes()  # warm
    ours, ours_cpu = wall([sys.executable, "-m", "ibwire.cli.main", "show", "--json",
                           str(path)], args.repeat)
    print(f"{'MADs':<40}{args.packets:>12,}")
    print(f"{'ibwire show --json (s wall, s CPU)':<40}{ours:>12.2f}{ours_cpu:>10.2f}  "
          f"{args.packets / ours:>10,.0f} pkt/s")
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark not installed: no comparison")
        return
    theirs, theirs_cpu = wall([tshark, "-r", str(path), "-n", "-T", "json"], args.repeat)
    print(f"{'tshark -T json (s wall, s CPU)':<40}{theirs:>12.2f}{theirs_cpu:>10.2f}  "
          f"{args.packets / theirs:>10,.0f} pkt/s")
    print(f"{'ratio tshark time / ibwire time':<40}{theirs / ours:>12.2f}x"
          f"{theirs_cpu / ours_cpu:>9.2f}x CPU")

if __name__ == "__main__":
    main()
