"""Benchmark: ``ibwire rewrite`` against ``tcprewrite``, and ``ibwire replay --topspeed``
against ``tcpreplay --topspeed``, side by side in one run.

    python tools/bench_replay.py [--packets 1000000] [--no-replay]

The capture is N small RoCEv2 packets (the sample's SEND/ACK frames repeated, 60-90 bytes);
the rewrite maps every source address (``--srcipmap 10.0.0.0/8:192.168.0.0/16``), which
changes every ICRC: ibwire recomputes them, tcprewrite leaves them wrong. The replay runs on
a veth pair inside a network namespace made for the run and removed after (root only); the
receiving end is not captured (it would be the bottleneck).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from ibwire.pcap import read_capture  # noqa: E402
from ibwire.pcap.writer import PcapWriter  # noqa: E402


def make_capture(path: Path, packets: int) -> None:
    small = [bytes(r.frame) for r in read_capture(str(ROOT / "captures" / "sample-rocev2.pcap"))
             if r.error is None and len(r.frame) < 100]
    with PcapWriter(path, 1) as writer:
        for i in range(packets):
            writer.write(small[i % len(small)], 1_700_000_000_000_000_000 + i * 1000)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    took, _, out = timed_cpu(argv, env)
    return took, out


def timed_cpu(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child: user + system, its output)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return took, _children_cpu() - cpu, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--no-replay", action="store_true")
    args = parser.parse_args()
    ibwire = [sys.executable, "-m", "ibwire.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        # ibwire runs from compiled bytecode, as an installed package does (pip compiles it):
        # a cache of its own, filled by one rewrite of the sample before anything is timed.
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
               "PYTHONPYCACHEPREFIX": f"{tmp}/pycache"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        timed([*ibwire, "rewrite", str(ROOT / "captures" / "sample-rocev2.pcap"),
               f"{tmp}/warm.pcap", "--srcipmap", "10.0.0.0/8:192.168.0.0/16"], env)
        cap = Path(tmp) / "in.pcap"
        make_capture(cap, args.packets)
        print(f"capture: {args.packets} RoCEv2 packets, {cap.stat().st_size} bytes", flush=True)
        ours, ours_cpu, _ = timed_cpu([*ibwire, "rewrite", str(cap), f"{tmp}/a.pcap",
                                       "--srcipmap", "10.0.0.0/8:192.168.0.0/16"], env)
        theirs, theirs_cpu, _ = timed_cpu(["tcprewrite", "--srcipmap=10.0.0.0/8:192.168.0.0/16",
                                           "-i", str(cap), "-o", f"{tmp}/b.pcap"])
        print(f"rewrite --srcipmap: ibwire {ours:.2f} s ({args.packets / ours:,.0f} pkt/s), "
              f"tcprewrite {theirs:.2f} s ({args.packets / theirs:,.0f} pkt/s); "
              f"ratio {theirs / ours:.2f}x (>1: ibwire faster)", flush=True)
        print(f"  CPU (user + system): ibwire {ours_cpu:.2f} s, tcprewrite {theirs_cpu:.2f} s; "
              f"ratio {theirs_cpu / ours_cpu:.2f}x", flush=True)
        for who, out in (("ibwire", "a"), ("tcprewrite", "b")):
            _, check = timed([*ibwire, "check", "-c", "10000", f"{tmp}/{out}.pcap"], env)
            print(f"  {who}'s output, first 10000: {check.strip().splitlines()[-1]}", flush=True)
        if args.no_replay or os.geteuid() != 0:
            print("replay: skipped (--no-replay, or not root)")
            return 0
        ns = f"ibwire-bench-{os.getpid()}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            run = ["ip", "netns", "exec", ns]
            for cmd in (["ip", "link", "add", "btx", "type", "veth", "peer", "name", "brx"],
                        ["ip", "link", "set", "btx", "up"], ["ip", "link", "set", "brx", "up"]):
                subprocess.run([*run, *cmd], check=True)
            ours, out = timed([*run, *ibwire, "replay", "-i", "btx", "--topspeed", str(cap)], env)
            ours_s = float(re.search(r"in ([\d.]+) seconds", out).group(1))
            theirs, out2 = timed([*run, "tcpreplay", "-i", "btx", "--topspeed", "-K", str(cap)])
            theirs_s = float(re.search(r"in ([\d.]+) seconds", out2).group(1))
            print(f"replay --topspeed: ibwire {ours_s:.2f} s sending "
                  f"({args.packets / ours_s:,.0f} pkt/s; {ours:.2f} s with loading), "
                  f"tcpreplay -K {theirs_s:.2f} s ({args.packets / theirs_s:,.0f} pkt/s; "
                  f"{theirs:.2f} s in all); ratio {theirs_s / ours_s:.2f}x (>1: ibwire faster)")
            print("  ibwire:", " | ".join(out.strip().splitlines()))
            print("  tcpreplay:", " | ".join(out2.strip().splitlines()[:3]))
        finally:
            subprocess.run(["ip", "netns", "del", ns], check=False)
    return 0


if __name__ == "__main__":
    if shutil.which("tcprewrite") is None:
        raise SystemExit("tcprewrite/tcpreplay not installed (apt-get install tcpreplay)")
    sys.exit(main())
