#!/usr/bin/env python3
"""Benchmark of ``ibwire check`` and the batch scanner; prints one side-by-side table.

Generated captures (classic pcap, Ethernet, RoCEv2 over IPv4, valid ICRCs): ACKs (62 bytes)
and RDMA WRITE ONLY packets with 1-4 KiB payloads, alternating; PSNs increase.

  check      whole-process wall time of ``ibwire check F`` (best of --repeat)
  tshark     ``tshark -r F -T fields -e infiniband.bth.psn`` (checks no CRC), wall time
  formats    the same packets as pcapng (as dumpcap writes them), and with Linux SLL and SLL2
             link headers instead of Ethernet (as ``tcpdump -i any`` writes them), in classic
             pcap and pcapng: ``ibwire check`` against the classic pcap row, and tshark
  show       100k packets, the three outputs of ``ibwire show`` against tshark's: summary
             lines (``show F`` / ``tshark -r F``), header trees (``show -V F`` / ``tshark -r F
             -V``), JSON (``show --json F`` / ``tshark -r F -T json``), on the ACK/WRITE capture
             and on two mixed ones (tools/mixed_capture.py): Ethernet with every opcode in
             RoCEv2/IPv4, IPv6 and RoCEv1, untagged, 802.1Q and QinQ, MADs, CNPs, reserved
             opcodes, IPv4 options, other traffic and bad ICRCs; native InfiniBand as ERF
             (--captures picks some); wall and CPU times (user + system: less swayed by the
             machine's load), each the best of --repeat
  scapy      ``rdpcap(F)`` + ``BTH.compute_icrc`` per packet (scapy.contrib.roce), wall time
  scanner    in-process ``scan_capture`` packets/s on 1M ACKs (small packets), one thread,
             with no header columns and with every column; and the counting scan that
             ``ibwire check`` runs on classic pcap (``ibwire.scan.tally``), one and two threads
  RSS        peak resident memory of ``ibwire check`` on a capture of --big-gb gigabytes

Usage: python tools/bench_scan.py [--dir /tmp/ibwire-bench] [--packets 1000000,100000]
       [--scapy-max 100000] [--big-gb 2.1] [--repeat 3] [--rows check,show,scanner,rss]
       [--captures ack-write,ethernet,erf]
scapy reads a whole capture into memory (about 2 KB per packet in objects), so it runs on
captures of at most --scapy-max packets; its time is given as measured, never extrapolated.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ibwire import build, crc
from ibwire.pcap.writer import AtomicFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mixed_capture import write_ethernet, write_infiniband

ACK, WRITE_ONLY = 0x11, 0x0A
SIZES = tuple(range(1024, 4097, 96))  # WRITE payload lengths used
PSN_AT = 14 + 20 + 8 + 9  # the PSN's 3 bytes in an untagged IPv4 frame


def templates() -> tuple[bytes, list[bytes]]:
    ack = build("rocev2_ipv4", {"bth.destqp": 0x11, "aeth.msn": 1}, b"", opcode=ACK)
    writes = [build("rocev2_ipv4", {"bth.destqp": 0x12, "reth.dmalen": n, "reth.va": 1 << 32,
                                    "reth.r_key": 0x1234}, bytes(range(256)) * (n // 256),
                    opcode=WRITE_ONLY) for n in SIZES]
    return ack, writes


def write_capture(path: Path, count: int, *, acks_only: bool = False,
                  writes_only: bool = False) -> None:
    """``count`` packets: ACK and WRITE alternating (or one kind), ICRCs fixed per packet."""
    ack, writes = templates()
    rng = np.random.default_rng(1)
    sizes = rng.integers(0, len(writes), count).tolist()
    atomic = AtomicFile(path)
    try:
        write = atomic.file.write
        write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        chunk = bytearray()
        for i in range(count):
            is_ack = acks_only or (not writes_only and i % 2 == 0)
            frame = bytearray(ack if is_ack else writes[sizes[i]])
            frame[PSN_AT:PSN_AT + 3] = (i & 0xFFFFFF).to_bytes(3, "big")
            crc.fix(frame, "ethernet")
            chunk += struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000,
                                 len(frame), len(frame))
            chunk += frame
            if len(chunk) > 1 << 24:
                write(chunk)
                chunk.clear()
        write(chunk)
        atomic.commit()
    finally:
        atomic.abort()


LINUX_SLL, LINUX_SLL2 = 113, 276
ARPHRD_ETHER = 1


def cooked(frame: bytes, linktype: int) -> bytes:
    """An Ethernet frame as ``tcpdump -i any`` stores it: the Ethernet header replaced by a
    Linux cooked header (SLL or SLL2: protocol, ARPHRD_ETHER, the source MAC)."""
    address = frame[6:12] + bytes(2)
    protocol = int.from_bytes(frame[12:14], "big")
    if linktype == LINUX_SLL:
        head = struct.pack(">HHH8sH", 0, ARPHRD_ETHER, 6, address, protocol)
    else:
        head = struct.pack(">HHIHBB8s", protocol, 0, 2, ARPHRD_ETHER, 0, 6, address)
    return head + frame[14:]


def ensure_variant(path: Path, source: Path, pcapng: bool, linktype: int) -> Path:
    """``source`` (classic pcap, Ethernet) with each frame's link header as ``linktype`` says
    (1: unchanged), in classic pcap or in pcapng (one EPB per record, as dumpcap writes)."""
    if not path.exists():
        from ibwire.pcap import open_capture
        from ibwire.pcap.writer import PcapngWriter, PcapWriter

        t = time.perf_counter()
        ng = PcapngWriter(path) if pcapng else None
        classic = None if pcapng else PcapWriter(path, linktype, snaplen=65535)
        with open_capture(source) as reader, (ng or classic):  # type: ignore[union-attr]
            for record in reader:
                data = bytes(record.record_data) if linktype == 1 else \
                    cooked(bytes(record.record_data), linktype)
                if ng is not None:
                    ng.write(data, record.timestamp_ns, linktype)
                else:
                    classic.write(data, record.timestamp_ns)  # type: ignore[union-attr]
        print(f"# wrote {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


VARIANTS = (("as pcapng", True, 1), ("pcap, Linux SLL", False, LINUX_SLL),
            ("pcap, Linux SLL2", False, LINUX_SLL2), ("pcapng, Linux SLL", True, LINUX_SLL),
            ("pcapng, Linux SLL2", True, LINUX_SLL2))
"""The same packets in the other forms users' captures come in: (label, pcapng, link type)."""


def ensure(path: Path, count: int, **kind: bool) -> Path:
    if not path.exists():
        t = time.perf_counter()
        write_capture(path, count, **kind)
        print(f"# wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {count} packets) in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    return path


#: The commands run as installed: Python may write its bytecode (pip compiles it at install;
#: a shell with PYTHONDONTWRITEBYTECODE=1 would have every run compile ibwire's sources).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def warm(path: Path) -> None:
    """Read a whole file, so that the run after finds it in the page cache (the kernel may
    have evicted it since the last run: timings are of the page-cache-warm case)."""
    buf = bytearray(16 << 20)
    with path.open("rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def wall(argv: list[str], repeat: int, capture: Path | None = None) -> tuple[float, int]:
    """Best wall time of a command (the ``capture`` it reads warmed before each run) and the
    peak RSS (KiB) of its children so far."""
    best = float("inf")
    for _ in range(repeat):
        if capture is not None:
            warm(capture)
        t = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=CHILD_ENV)
        elapsed = time.perf_counter() - t
        if done.returncode not in (0, 1):
            raise SystemExit(f"{argv[0]} failed: {done.stderr.decode()[-500:]}")
        best = min(best, elapsed)
    return best, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def timed(argv: list[str], repeat: int, capture: Path) -> tuple[float, float]:
    """Best wall time and best CPU time (user + system, the command and its children) of a
    command, ``capture`` warmed before each run: CPU time swings less with the machine's
    load than wall time."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        warm(capture)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=CHILD_ENV)
        elapsed = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{argv[0]} failed: {done.stderr.decode()[-500:]}")
        best_wall = min(best_wall, elapsed)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime
                       + after.ru_stime - before.ru_stime)
    return best_wall, best_cpu


def peak_rss_of(argv: list[str]) -> int:
    """Peak RSS (KiB) of one command, in a fresh process of its own."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], "
             "stdout=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


SCAPY_JOB = """
import sys, time
t = time.perf_counter()
from scapy.all import rdpcap
from scapy.contrib.roce import BTH
bad = 0
for p in rdpcap(sys.argv[1]):
    bth = p.getlayer(BTH)
    if bth is not None and bth.compute_icrc(None) != bth.icrc:
        bad += 1
print(time.perf_counter() - t, bad)
"""


def scanner_rate(path: Path, repeat: int, fields: object) -> float:
    """Packets/s of scan_capture in this process (one thread: threads=1)."""
    from ibwire.scan import scan_capture

    best = float("inf")
    rows = 0
    for _ in range(repeat):
        warm(path)
        t = time.perf_counter()
        rows = sum(int((b["icrc_ok"] == 1).sum()) for b in scan_capture(path, fields=fields,
                                                                          threads=1))
        best = min(best, time.perf_counter() - t)
    return rows / best


def tally_rate(path: Path, repeat: int, threads: int) -> float:
    """Packets/s of the counting scan of ``ibwire check`` in this process."""
    from ibwire.scan.tally import open_tally

    best = float("inf")
    rows = 0
    for _ in range(repeat):
        warm(path)
        t = time.perf_counter()
        found = open_tally(path, threads=threads)
        assert found is not None
        with found:
            rows = sum(w.counts[1] for w in found.windows())
        best = min(best, time.perf_counter() - t)
    return rows / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ibwire-bench"))
    parser.add_argument("--packets", default="1000000,100000")
    parser.add_argument("--scapy-max", type=int, default=100_000)
    parser.add_argument("--big-gb", type=float, default=2.2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", default="check,show,scanner,rss",
                        help="which parts of the table to run")
    parser.add_argument("--captures", default=",".join(SHOW_CAPTURES),
                        help="the show rows' captures: " + ", ".join(SHOW_CAPTURES))
    args = parser.parse_args()
    rows = set(args.rows.split(","))
    args.dir.mkdir(parents=True, exist_ok=True)
    ibwire_cmd = shutil.which("ibwire") or sys.exit("ibwire is not installed (pip install .)")
    tshark = shutil.which("tshark")
    from ibwire import scan

    print(f"# ibwire scanner: {scan.implementation}, CRC engine: {crc.implementation}; "
          f"{os.cpu_count()} cores; one process each, page cache warm (best of {args.repeat})")
    if "check" in rows:
        print(f"{'capture':>22} {'packets':>9} {'GB':>5} | {'ibwire check':>12} {'/ pcap':>6} | "
              f"{'tshark fields':>13} {'ratio':>7} | {'scapy':>9} {'ratio':>7}")

    def check_row(label: str, count: int, path: Path, pcap_time: float | None = None
                  ) -> tuple[str, float]:
        """The table's row of ``ibwire check`` (and its time over ``pcap_time``, the classic
        pcap row's) against the tshark command, and our time."""
        ours, _ = wall([ibwire_cmd, "check", "-q", str(path)], args.repeat, path)
        ratio = f"{ours / pcap_time:>5.2f}x" if pcap_time else f"{'':>6}"
        row = f"{label:>22} {count:>9} {path.stat().st_size / 1e9:>5.2f} | {ours:>10.3f} s " \
            f"{ratio} | "
        if tshark:
            theirs, _ = wall([tshark, "-r", str(path), "-T", "fields", "-e",
                              "infiniband.bth.psn"], args.repeat, path)
            return row + f"{theirs:>11.2f} s {theirs / ours:>6.0f}x | ", ours
        return row + f"{'(no tshark)':>13} {'':>7} | ", ours

    for count in (int(x) for x in args.packets.split(",")) if "check" in rows else ():
        path = ensure(args.dir / f"mixed-{count}.pcap", count)
        row, pcap_time = check_row("ACK + 1-4 KiB WRITE", count, path)
        if count <= args.scapy_max:
            out = subprocess.run([sys.executable, "-c", SCAPY_JOB, str(path)],
                                 capture_output=True, text=True, check=True).stdout.split()
            row += f"{float(out[0]):>7.2f} s {float(out[0]) / pcap_time:>6.0f}x"
        else:
            row += f"{'(> scapy-max)':>17}"
        print(row, flush=True)
        for label, pcapng, linktype in VARIANTS:  # the same packets, as users capture them
            name = f"mixed-{count}{'' if linktype == 1 else f'-{linktype}'}" \
                f".{'pcapng' if pcapng else 'pcap'}"
            variant = ensure_variant(args.dir / name, path, pcapng, linktype)
            print(check_row(label, count, variant, pcap_time)[0], flush=True)
    if tshark and "show" in rows:
        show_rows(args.dir, ibwire_cmd, tshark, args.repeat, args.captures.split(","))
    if "scanner" in rows:
        scanner_rows(args.dir, args.repeat)
    if "rss" not in rows:
        return
    big_count = int(args.big_gb * 1e9 / 1350)  # bytes per mixed packet
    big = ensure(args.dir / f"big-{big_count}.pcap", big_count)
    rss = peak_rss_of([ibwire_cmd, "check", "-q", str(big)])
    print(f"peak RSS of ibwire check on {big.stat().st_size / 1e9:.2f} GB "
          f"({big_count} packets): {rss / 1024:.0f} MB")


#: ``ibwire show`` against tshark: (what, our flags, tshark's flags, target ratio).
SHOW_ROWS = (("summary lines", [], [], 3.0), ("header trees", ["-V"], ["-V"], 2.0),
             ("JSON", ["--json"], ["-T", "json"], 5.0))


def scanner_rows(directory: Path, repeat: int) -> None:
    small = ensure(directory / "acks-1000000.pcap", 1_000_000, acks_only=True)
    for fields, what in (((), "verdicts only, as ibwire check"), (None, "every column")):
        rate = scanner_rate(small, repeat, fields)
        print(f"scanner, in process, one thread, 1M ACKs (62 B), {what}: {rate / 1e6:.1f} M "
              f"packets/s (read, walk, ICRC, columns)")
    for threads in (1, 2):
        rate = tally_rate(small, repeat, threads)
        print(f"counting scan of ibwire check, in process, {threads} thread(s), 1M ACKs: "
              f"{rate / 1e6:.1f} M packets/s")


#: The show rows' captures, by the name --captures gives them.
SHOW_CAPTURES = ("ack-write", "ethernet", "erf")


def show_rows(directory: Path, ibwire_cmd: str, tshark: str, repeat: int,
              which: list[str]) -> None:
    """The three outputs of ``ibwire show`` and tshark's, on 100k packets of three captures
    (``which`` of :data:`SHOW_CAPTURES`): wall and CPU times, and their ratios."""
    unknown = set(which) - set(SHOW_CAPTURES)
    if unknown:
        raise SystemExit(f"--captures: no {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(SHOW_CAPTURES)})")
    makers = {
        "ack-write": ("ACK + 1-4 KiB WRITE",
                      lambda: ensure(directory / "mixed-100000.pcap", 100_000)),
        "ethernet": ("mixed Ethernet",
                     lambda: _mixed(directory / "every-kind-100000.pcap", write_ethernet)),
        "erf": ("mixed native IB, ERF",
                lambda: _mixed(directory / "every-kind-ib-100000.erf.pcap", write_infiniband))}
    print(f"{'100k packets of':>22} {'output':>14} | {'ibwire show':>11} {'(CPU)':>7} | "
          f"{'tshark':>8} {'(CPU)':>7} | {'ratio':>6} {'(CPU)':>6} {'target':>7}")
    for name in (n for n in SHOW_CAPTURES if n in which):
        label, make = makers[name]
        path = make()
        for what, ours_flags, theirs_flags, target in SHOW_ROWS:
            ours, our_cpu = timed([ibwire_cmd, "show", *ours_flags, str(path)], repeat, path)
            theirs, their_cpu = timed([tshark, "-r", str(path), *theirs_flags], repeat, path)
            ratio = theirs / ours
            print(f"{label:>22} {what:>14} | {ours:>9.2f} s {our_cpu:>5.2f} s | "
                  f"{theirs:>6.2f} s {their_cpu:>5.2f} s | {ratio:>5.1f}x "
                  f"{their_cpu / our_cpu:>5.1f}x {'>=':>3}{target:.0f}x"
                  f"{'' if ratio >= target else ' MISSED'}", flush=True)


def _mixed(path: Path, write: object) -> Path:
    if not path.exists():
        write(path, 100_000)  # type: ignore[operator]
    return path


if __name__ == "__main__":
    main()
