#!/usr/bin/env python3
"""Benchmark of ``ibwire qp`` against the first step of any script: tshark extracting the same
fields. Prints one side-by-side table, and the peak RSS of ``ibwire qp`` at two capture sizes.

The captures (classic pcap, Ethernet, RoCEv2 over IPv4, valid ICRCs): --qps RC connections
between two hosts, round robin; each message a WRITE FIRST, two MIDDLEs and a LAST of 1 KiB
(AckReq on the LAST), answered by an ACK; PSNs increase and cross 2^24.

  ibwire qp    whole-process wall time of ``ibwire qp F`` (best of --repeat)
  tshark       ``tshark -r F -T fields`` with the fields the analysis reads: time, IP
               addresses, ECN, BTH opcode, destination QP, PSN, AckReq, AETH syndrome, RETH DMA
               length, DETH source QP (best of --repeat)
  RSS          peak resident memory of ``ibwire qp`` on the --packets and --big captures

Wall time and CPU time (user + system of the process and its threads) are both printed: on a
shared machine the wall times of one run swing with the load, the CPU times much less.

With --irregular P,P,...: instead, the observer on captures where P % of the messages are
sent again at the PSNs of the message before (a go-back-N resend: every packet of it is a
retransmission, its ACK a duplicate; 100: every QP repeats its PSNs over and over), in CPU
microseconds a packet against the clean capture (P = 0):

  ibwire qp               the whole process
  export --fields bth     ``ibwire export F --fields bth`` (connection numbers, observers
                          read only where an answer stream must be joined by its PSNs)
  analyse() c / python    the analysis in this process, the observer on each twin
                          (``ibwire.transport.observed.observer_on``)

Usage: python tools/bench_qp.py [--dir /tmp/ibwire-bench] [--packets 1000000]
       [--big 4000000] [--qps 8] [--repeat 2] [--irregular 0,10,100]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

from ibwire import build, crc
from ibwire.pcap.writer import AtomicFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import peak_rss_of, timed, wall

PSN_AT = 14 + 20 + 8 + 9          # the PSN's 3 bytes in an untagged IPv4 frame
OPS = (0x06, 0x07, 0x07, 0x08)    # RC RDMA WRITE FIRST, MIDDLE, MIDDLE, LAST
ACK = 0x11
A, B = "192.0.2.1", "192.0.2.2"
TSHARK_FIELDS = ("frame.time_epoch", "ip.src", "ip.dst", "ip.dsfield.ecn",
                 "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
                 "infiniband.bth.a", "infiniband.aeth.syndrome", "infiniband.reth.dmalen",
                 "infiniband.deth.srcqp")


def templates(q: int) -> list[bytes]:
    """Frames of one message of QP ``q``: four requests, then the ACK."""
    out = []
    for k, op in enumerate(OPS):
        fields = {"ip.src": A, "ip.dst": B, "bth.destqp": 0x200 + 2 * q, "bth.a": int(k == 3)}
        if op == 0x06:
            fields.update({"reth.dmalen": 4096, "reth.va": 1 << 32, "reth.r_key": 7})
        out.append(build("rocev2_ipv4", fields, bytes(range(256)) * 4, opcode=op))
    out.append(build("rocev2_ipv4", {"ip.src": B, "ip.dst": A, "bth.destqp": 0x201 + 2 * q,
                                     "aeth.syndrome": 0x1F, "aeth.msn": 1}, b"", opcode=ACK))
    return out


def resent(message: int, percent: int) -> bool:
    """Whether message ``message`` of a QP repeats the PSNs of the one before: ``percent``
    of them, evenly spread."""
    return (message + 1) * percent // 100 > message * percent // 100


def write_capture(path: Path, count: int, qps: int, irregular: int = 0) -> None:
    frames = [templates(q) for q in range(qps)]
    sent = [0] * qps
    psn = [(0xFFF000 + 0x10000 * q) & 0xFFFFFF for q in range(qps)]
    atomic = AtomicFile(path)
    try:
        write = atomic.file.write
        write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        chunk = bytearray()
        i = 0
        while i < count:
            q = (i // 5) % qps
            for k, template in enumerate(frames[q]):
                if i >= count:
                    break
                frame = bytearray(template)
                p = (psn[q] + (3 if k == 4 else k)) & 0xFFFFFF
                frame[PSN_AT:PSN_AT + 3] = p.to_bytes(3, "big")
                crc.fix(frame, "ethernet")
                chunk += struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000,
                                     len(frame), len(frame))
                chunk += frame
                i += 1
            sent[q] += 1
            if not resent(sent[q], irregular):
                psn[q] = (psn[q] + 4) & 0xFFFFFF
            if len(chunk) > 1 << 24:
                write(chunk)
                chunk.clear()
        write(chunk)
        atomic.commit()
    finally:
        atomic.abort()


def ensure(path: Path, count: int, qps: int, irregular: int = 0) -> Path:
    if not path.exists():
        t = time.perf_counter()
        write_capture(path, count, qps, irregular)
        print(f"# wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {count} packets) in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    return path


def cpu_of(argv: list[str], repeat: int, capture: Path) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of that run) of a command."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        secs, _ = wall(argv, 1, capture)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, (secs, cpu))
    return best


def analysis_cpu(path: Path, twin: str | None, repeat: int) -> float:
    """Best CPU seconds of ``ibwire.analysis.analyse`` in this process, the observer on
    ``twin`` (None: as loaded; the only choice before the observer had twins)."""
    from unittest import mock

    from ibwire.analysis import analyse, connections

    best = float("inf")
    for _ in range(repeat):
        patch = mock.patch.object(connections, "Observed", _observer_on(twin)) if twin \
            else mock.patch.object(connections, "Connections", connections.Connections)
        with patch:
            t = time.process_time()
            analyse(path)
            best = min(best, time.process_time() - t)
    return best


def _observer_on(twin: str) -> type:
    from ibwire.transport.observed import observer_on  # type: ignore[attr-defined]

    return observer_on(twin)


def observer_table(args: argparse.Namespace) -> int:
    """µs a packet, clean against irregular, per command and per twin."""
    try:
        _observer_on("python")
        twins: list[str | None] = ["c", "python"]
    except ImportError:  # before the observer had twins: the one path there was
        twins = [None]
    levels = [int(p) for p in args.irregular.split(",")]
    n = args.packets
    results: dict[tuple[str, int], float] = {}
    out = Path(tempfile.mkdtemp(prefix="ibwire-bench-export-"))
    try:
        for p in levels:
            path = ensure(args.dir / f"qp-{n}-{args.qps}-irregular{p}.pcap", n, args.qps, p)
            cli = [sys.executable, "-m", "ibwire.cli.main"]
            results["ibwire qp", p] = timed([*cli, "qp", str(path)], args.repeat, path)[1]
            results["export --fields bth", p] = timed(
                [*cli, "export", str(path), "--fields", "bth", "-o", str(out / "x"),
                 "--force"], args.repeat, path)[1]
            for twin in twins:
                name = f"analyse() {twin or 'as loaded'}"
                results[name, p] = analysis_cpu(path, twin, args.repeat)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"# {n} packets, {args.qps} QPs; CPU microseconds a packet (x: against "
          f"{levels[0]} % irregular)")
    print(f"{'what':<22}" + "".join(f" {f'{p} % irregular':>22}" for p in levels))
    for name in dict.fromkeys(k for k, _ in results):
        base = results[name, levels[0]]
        cells = "".join(f" {results[name, p] * 1e6 / n:>14.3f} ({results[name, p] / base:>4.1f}x)"
                        for p in levels)
        print(f"{name:<22}{cells}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/ibwire-bench", type=Path)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=4_000_000)
    ap.add_argument("--qps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--irregular", default=None, metavar="P,P,...",
                    help="the observer's table instead, on captures with P %% of their "
                    "messages resent (e.g. 0,10,100)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.irregular:
        return observer_table(args)
    small = ensure(args.dir / f"qp-{args.packets}-{args.qps}.pcap", args.packets, args.qps)
    ibwire_qp = [sys.executable, "-m", "ibwire.cli.main", "qp"]
    rows = [("ibwire qp", args.packets, *cpu_of([*ibwire_qp, str(small)], args.repeat, small))]
    if shutil.which("tshark"):
        argv = ["tshark", "-r", str(small), "-T", "fields"]
        for f in TSHARK_FIELDS:
            argv += ["-e", f]
        rows.append(("tshark -T fields", args.packets, *cpu_of(argv, args.repeat, small)))
    print(f"{'what':<18} {'packets':>9} {'wall s':>8} {'packets/s':>11} {'vs tshark':>9} "
          f"{'CPU s':>8} {'vs tshark':>9}")
    for name, n, secs, cpu in rows:
        ratio = rows[-1][2] / secs if len(rows) > 1 else float("nan")
        cpu_ratio = rows[-1][3] / cpu if len(rows) > 1 else float("nan")
        print(f"{name:<18} {n:>9} {secs:>8.2f} {n / secs:>11,.0f} {ratio:>8.1f}x "
              f"{cpu:>8.2f} {cpu_ratio:>8.1f}x")
    print()
    print(f"{'capture':<28} {'packets':>10} {'peak RSS MiB':>13}")
    for count in (args.packets, args.big):
        path = ensure(args.dir / f"qp-{count}-{args.qps}.pcap", count, args.qps)
        rss = peak_rss_of([*ibwire_qp, str(path)])
        print(f"{path.name:<28} {count:>10} {rss / 1024:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
