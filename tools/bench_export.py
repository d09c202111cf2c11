#!/usr/bin/env python3
"""Benchmark of ``ibwire export`` against today's practice, ``tshark -T fields -E
separator=,`` to CSV, side by side in one run; the peak RSS of an export of a 2 GB capture;
the Dask path's speed-up from one worker to two.

The captures are ``tools/bench_qp.py``'s (classic pcap, RoCEv2 over IPv4, 8 RC connections,
WRITEs of 4 KiB in 1 KiB packets and their ACKs), written under --dir if missing; the 2 GB one
is the first 2 GB (cut at a record) of a bigger one.

  export parquet     ``ibwire export -o D F``: every column (about 150) to Parquet
  export --fields    the same with ``--fields`` naming tshark's fields below
  export csv         the same fields to CSV (``--format csv``)
  tshark             ``tshark -r F -T fields -E separator=, -E header=y -e ...`` > CSV with
                     the fields: time, MACs, IP addresses, DSCP, ECN, IP length, id, TTL,
                     protocol, UDP ports and length, every BTH field, RETH, AETH, ICRC
  peak RSS           of ``ibwire export`` of the --big-gb capture to Parquet
  Dask               ``read_captures`` of --dask-files captures (of each of the
                     --dask-packets sizes), every partition turned into rows, on a
                     LocalCluster of 1 then 2 worker processes (1 thread each), both
                     clusters up at once and taking turns, the best of --dask-repeat runs
                     on each (this VM's speed drifts for seconds at a time: one cluster
                     timed after the other saw different spells of it), each worker warmed
                     first (imports, Dask's DataFrame modules too, tables made on first
                     use, and the memory of two partitions held at once) by reading one
                     capture twice, the client by building one frame; for each size
                     twice: the workers as Dask starts them, and with
                     ``ibwire.dask.WORKER_CONFIG`` (glibc's malloc thresholds left alone and
                     Arrow on the system allocator: without, every partition's columns are
                     faulted in afresh, and two workers faulting at once slow each other)

Wall and CPU time (user + system of the child processes) are printed, each command's (tshark's
too) the best of --repeat runs: on a shared machine the wall times swing with the load (this
VM's speed drifts by a third for seconds at a time, and a capture's first read may come from
the disk), CPU times much less. For Dask, the CPU time of the
busiest worker is printed too: one worker's total against the busier of two is the speed-up
the work's split allows when the two cores are free.

Usage: python tools/bench_export.py [--dir /tmp/ibwire-bench] [--packets 1000000]
       [--big-gb 2] [--dask-files 4] [--dask-repeat 5] [--dask-packets 200000 1000000] [--repeat 3]
       [--no-tshark]
       [--also CAPTURE ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_qp import ensure
from bench_scan import CHILD_ENV, peak_rss_of

TSHARK_FIELDS = (
    "frame.time_epoch", "eth.src", "eth.dst", "ip.src", "ip.dst", "ip.dsfield.dscp",
    "ip.dsfield.ecn", "ip.len", "ip.id", "ip.ttl", "ip.proto", "udp.srcport", "udp.dstport",
    "udp.length", "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
    "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn", "infiniband.reth.va",
    "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
    "infiniband.aeth.msn", "infiniband.invariant.crc")
#: The same fields as ``ibwire export --fields`` names them: tshark's names without
#: ``infiniband.``, the ICRC as ``icrc``; the time is ``timestamp_ns``, which an export always
#: writes, with the other placing columns (capture, record, connection) and ``error``.
EXPORT_FIELDS = ",".join(
    "icrc" if f == "infiniband.invariant.crc" else f.removeprefix("infiniband.")
    for f in TSHARK_FIELDS if f != "frame.time_epoch")
IBWIRE = [sys.executable, "-m", "ibwire.cli.main"]


def timed(argv: list[str], stdout: object = subprocess.DEVNULL) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one command, run as installed (``CHILD_ENV``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE,  # type: ignore[arg-type]
                          env=CHILD_ENV)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[:4]} failed: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(argv_of: object, repeat: int, stdout_of: object = None) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as out:
            argv = argv_of(out)  # type: ignore[operator]
            if stdout_of is None:
                runs.append(timed(argv))
            else:
                with open(Path(out) / "out.csv", "wb") as f:
                    runs.append(timed(argv, f))
    return min(runs)


def first_gb(source: Path, target: Path, gb: float) -> Path:
    """The first ``gb`` GB of ``source``, cut where a record starts."""
    if target.exists():
        return target
    from ibwire.export.chunks import classic_header, resync

    header = classic_header(str(source))
    assert header is not None
    size = os.path.getsize(source)
    with open(source, "rb") as f:
        cut = resync(f, min(size, int(gb * 1e9)), size, header)  # type: ignore[arg-type]
    tmp = target.with_name(target.name + ".tmp")
    with open(source, "rb") as src, open(tmp, "wb") as dst:
        left = cut
        while left:
            block = src.read(min(left, 1 << 24))
            dst.write(block)
            left -= len(block)
    os.replace(tmp, target)
    return target


DASK_JOB = """
import resource, sys, time
from distributed import Client, LocalCluster
from ibwire.dask import read_captures


def warm(path):
    # the modules a worker loads to run a Dask DataFrame's tasks (about 150: dask.dataframe,
    # dask.array, fsspec, pyarrow.dataset ...), imported otherwise in the worker's event loop
    # thread during its second task, which then waits ~0.5 s for the GIL
    import dask.dataframe  # noqa: F401

    from ibwire.dask import _read_part
    from ibwire.export.chunks import Chunk
    from ibwire.export.schema import selected_columns

    # and the memory a worker runs in: it holds a partition while it builds the next (Dask
    # starts a worker's next task before the last result is counted). On this VM the first
    # touch of memory a process never had costs 10-15 us a page (the kernel zeroes it and
    # the host backs it): once per worker, 0.2-0.3 s of system time at its first two
    # partitions, which would be a third of a two-worker run of four
    part = (Chunk(path, 0, -1), selected_columns(None), True, None)
    held = [_read_part(part) for _ in range(2)]
    return len(held[0])


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def once(client):
    before = client.run(cpu)
    t = time.perf_counter()
    frame = read_captures(files, other=True).map_partitions(len)
    rows = int(client.compute(frame).result().sum())
    wall = time.perf_counter() - t
    after = client.run(cpu)
    return wall, rows, max(after[w] - before[w] for w in after)


repeat, config, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
options = dict(threads_per_worker=1, processes=True, dashboard_address=None)
if config == "ibwire":
    import dask
    from ibwire.dask import WORKER_CONFIG

    dask.config.set(WORKER_CONFIG)
with LocalCluster(n_workers=1, **options) as one, Client(one, set_as_default=False) as a, \
        LocalCluster(n_workers=2, **options) as two, Client(two, set_as_default=False) as b:
    for client in (a, b):  # every worker: imports and first-use tables out of the timing
        client.run(warm, files[0])
    read_captures(files[:1], other=True)  # and the client (pandas, the schema's tables)
    runs = {a: [], b: []}
    # the clusters take turns, so that a slower spell of the machine falls on both; the
    # best run of each: the machine's other work and its memory's swings out
    for _ in range(repeat):
        for client in (a, b):
            runs[client].append(once(client))
    for client in (a, b):
        print(*min(runs[client]))
"""


def dask_seconds(files: list[Path], repeat: int, config: str = "dask"
                 ) -> list[tuple[float, int, float]]:
    """For one worker, then two: (wall seconds, rows, CPU seconds of the busiest worker) of
    the best of ``repeat`` runs of the Dask job, the two clusters taking turns; ``config``
    "dask" (Dask's worker settings) or "ibwire" (``ibwire.dask.WORKER_CONFIG``). The job's
    process starts without MALLOC_TRIM_THRESHOLD_ (a nanny of an earlier cluster may have
    left it in this one's environment)."""
    env = {k: v for k, v in CHILD_ENV.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    out = subprocess.run([sys.executable, "-c", DASK_JOB, str(repeat), config,
                          *map(str, files)], capture_output=True, text=True, check=True,
                         env=env)
    found = []
    for line in out.stdout.splitlines():
        secs, rows, busiest = line.split()
        found.append((float(secs), int(rows), float(busiest)))
    return found


def records_of(path: Path) -> int:
    from ibwire.scan import scan_capture

    return sum(len(batch) for batch in scan_capture(str(path), fields=()))


def compare(f: str, packets: int, repeat: int, no_tshark: bool, extra: list[str]) -> None:
    """The export rows of the table, and tshark's, for capture ``f``."""
    rows = [
        ("export parquet", best(lambda out: [*IBWIRE, "export", *extra, "-o", out, f],
                                repeat)),
        ("export --fields", best(lambda out: [*IBWIRE, "export", *extra, "--fields",
                                              EXPORT_FIELDS, "-o", out, f], repeat)),
        ("export csv", best(lambda out: [*IBWIRE, "export", *extra, "--format", "csv",
                                         "--fields", EXPORT_FIELDS, "-o", out, f], repeat)),
    ]
    if not no_tshark and shutil.which("tshark"):
        argv = ["tshark", "-r", f, "-T", "fields", "-E", "separator=,", "-E", "header=y"]
        for name in TSHARK_FIELDS:
            argv += ["-e", name]
        rows.append(("tshark -T fields", best(lambda out: argv, repeat, stdout_of=True)))
    tshark = rows[-1][1] if rows[-1][0].startswith("tshark") else None
    print(f"{'what':<18} {'packets':>9} {'wall s':>8} {'packets/s':>11} {'vs tshark':>9} "
          f"{'CPU s':>8} {'vs tshark':>9}")
    for name, (secs, cpu) in rows:
        ratio = f"{tshark[0] / secs:>8.1f}x" if tshark else f"{'-':>9}"
        cpu_ratio = f"{tshark[1] / cpu:>8.1f}x" if tshark else f"{'-':>9}"
        print(f"{name:<18} {packets:>9} {secs:>8.2f} {packets / secs:>11,.0f} "
              f"{ratio} {cpu:>8.2f} {cpu_ratio}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/ibwire-bench", type=Path)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--big-gb", type=float, default=2.0)
    ap.add_argument("--dask-files", type=int, default=4)
    ap.add_argument("--dask-repeat", type=int, default=5)
    ap.add_argument("--dask-packets", type=int, nargs="+", default=[200_000, 1_000_000],
                    help="packets of each capture (one Dask run per size)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--also", type=Path, nargs="*", default=[],
                    help="more captures to compare on (every record: --all), e.g. "
                         "tools/bench_scan.py's every-kind and native IB ERF ones")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    capture = ensure(args.dir / f"qp-{args.packets}-8.pcap", args.packets, 8)
    compare(str(capture), args.packets, args.repeat, args.no_tshark, [])
    for other in args.also:  # every record exported (--all), as tshark writes a line for each
        print(f"\n{other.name}")
        compare(str(other), records_of(other), args.repeat, args.no_tshark, ["--all"])
    print()
    big_source = ensure(args.dir / "qp-4000000-8.pcap", 4_000_000, 8)
    big = first_gb(big_source, args.dir / f"qp-first-{args.big_gb:g}gb.pcap", args.big_gb)
    with tempfile.TemporaryDirectory() as out:
        rss = peak_rss_of([*IBWIRE, "export", "-o", out, str(big)])
    print(f"{'capture':<28} {'GB':>6} {'peak RSS MiB':>13}")
    print(f"{big.name:<28} {big.stat().st_size / 1e9:>6.2f} {rss / 1024:>13.0f}")
    print()
    print(f"{'Dask read_captures':<20} {'files':>5} {'rows':>8} {'1 worker s':>10} "
          f"{'2 workers s':>11} {'speed-up':>8} {'busiest CPU s 1/2':>18} {'CPU speed-up':>12}")
    for packets in args.dask_packets:
        small = ensure(args.dir / f"qp-{packets}-8.pcap", packets, 8)
        with tempfile.TemporaryDirectory() as where:
            files = []
            for i in range(args.dask_files):
                link = Path(where) / f"part-{i}.pcap"
                os.symlink(small, link)
                files.append(link)
            for config in ("dask", "ibwire"):
                (one, n, one_cpu), (two, _, two_cpu) = dask_seconds(files, args.dask_repeat,
                                                                    config)
                name = "Dask's workers" if config == "dask" else "WORKER_CONFIG"
                print(f"{name:<20} {len(files):>5} {n:>8} {one:>10.2f} {two:>11.2f} "
                      f"{one / two:>7.2f}x {one_cpu:>8.2f} /{two_cpu:>8.2f} "
                      f"{one_cpu / two_cpu:>11.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
