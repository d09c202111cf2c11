#!/usr/bin/env python3
"""Benchmark of the ICRC engine; prints one side-by-side table (not a test).

  per packet   icrc() calls/s: C engine, Python twin, scapy's BTH.compute_icrc (ratio)
  batch small  verify_batch packets/s on 1M RoCEv2 frames of ~75 bytes (C; twin on a subset)
  batch 4 KiB  verify_batch GB/s on 4 KiB RoCEv2 frames, next to zlib.crc32,
               zlib_ng.zlib_ng.crc32 and isal.isal_zlib.crc32 over the same bytes, called
               once per frame (the same job) and once over the whole buffer (raw throughput)

Usage: PYTHONPATH=src python tools/bench_crc.py [--quick]
Everything runs on one core; figures are the best of a few repeats.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import zlib
from collections.abc import Callable

import numpy as np

from ibwire.crc import _engine, _python

try:
    from zlib_ng import zlib_ng
except ImportError:  # pragma: no cover - optional
    zlib_ng = None
try:
    from isal import isal_zlib
except ImportError:  # pragma: no cover - optional
    isal_zlib = None


def best(fn: Callable[[], object], repeat: int = 5) -> float:
    """Fastest of `repeat` runs, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def roce_frames(count: int, size: int, seed: int = 1) -> list[bytes]:
    """Distinct Ethernet/IPv4/UDP/BTH frames of `size` bytes with valid ICRCs."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        payload = size - 14 - 20 - 8 - 12 - 4
        frame = bytearray(
            bytes.fromhex("02000000000202000000000108004500")
            + (size - 14).to_bytes(2, "big") + b"\x00\x01\x40\x00\x40\x11\x00\x00"
            + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + (49152 + i % 1000).to_bytes(2, "big")
            + (4791).to_bytes(2, "big") + (size - 34).to_bytes(2, "big") + b"\x00\x00"
            + bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x11]) + (i & 0xFFFFFF).to_bytes(4, "big")
            + rng.bytes(payload) + b"\0\0\0\0")
        _engine.fix(frame)
        out.append(bytes(frame))
    return out


def tile(frames: list[bytes], count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    reps = -(-count // len(frames))
    buf = np.frombuffer(b"".join(frames) * reps, np.uint8)[: sum(map(len, frames)) * reps]
    lens = np.tile(np.array([len(f) for f in frames], np.int64), reps)[:count]
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return buf, offs, lens


def per_packet(rows: list[tuple[str, str, str]], quick: bool) -> None:
    from scapy.contrib.roce import BTH
    from scapy.layers.l2 import Ether

    frame = roce_frames(1, 75)[0]
    n = 20_000 if quick else 200_000
    c_rate = n / best(lambda: [_engine.icrc(frame) for _ in range(n)])
    py_rate = (n // 10) / best(lambda: [_python.icrc(frame) for _ in range(n // 10)])
    layer = Ether(frame)[BTH]
    assert int.from_bytes(layer.compute_icrc(None), "little") == _engine.icrc(frame)
    m = 50 if quick else 300
    scapy_rate = m / best(lambda: [layer.compute_icrc(None) for _ in range(m)], 3)
    rows.append(("per-packet icrc(), 75 B", f"C {c_rate / 1e6:.2f} M/s",
                 f"{c_rate / scapy_rate:,.0f}x scapy ({scapy_rate:,.0f}/s)"))
    rows.append(("", f"Python twin {py_rate / 1e3:.0f} k/s",
                 f"{py_rate / scapy_rate:,.0f}x scapy"))


def batch_small(rows: list[tuple[str, str, str]], quick: bool) -> None:
    count = 100_000 if quick else 1_000_000
    frames = roce_frames(997, 75)
    buf, offs, lens = tile(frames, count)
    t = best(lambda: _engine.verify_batch(buf, offs, lens), 9)
    assert (_engine.verify_batch(buf, offs, lens).icrc_ok == 1).all()
    sub = 20_000 if not quick else 5_000
    t_py = best(lambda: _python.verify_batch(buf, offs[:sub], lens[:sub]), 1)
    rows.append((f"batch {count:,} x 75 B", f"C {count / t / 1e6:.1f} M pkt/s",
                 f"{(count * 75) / t / 1e9:.2f} GB/s, target >= 15 M pkt/s"))
    rows.append(("", f"Python twin {sub / t_py / 1e3:.0f} k pkt/s", f"on {sub:,} frames"))


def _libraries() -> list[tuple[str, Callable[..., int]]]:
    libs = [("zlib.crc32", zlib.crc32)]
    if zlib_ng is not None:
        libs.append(("zlib_ng.crc32", zlib_ng.crc32))
    if isal_zlib is not None:
        libs.append(("isal_zlib.crc32", isal_zlib.crc32))
    return libs


def batch_4k(rows: list[tuple[str, str, str]], count: int, quick: bool) -> None:
    frames = roce_frames(64, 4096)
    buf, offs, lens = tile(frames, count)
    total = int(lens.sum())
    reps = max(3, (1 << 29) // total // (8 if quick else 1))

    def ours() -> None:
        for _ in range(reps):
            _engine.verify_batch(buf, offs, lens)

    ours_gbs = reps * total / best(ours, 5) / 1e9
    views = [memoryview(buf)[o:o + n] for o, n in zip(offs.tolist(), lens.tolist(), strict=True)]
    whole = memoryview(buf)
    per_frame, bulk = {}, {}
    for name, fn in _libraries():
        def frame_loop(fn: Callable[..., int] = fn) -> None:
            for _ in range(reps):
                for v in views:
                    fn(v)

        def one_call(fn: Callable[..., int] = fn) -> None:
            for _ in range(reps):
                fn(whole)

        per_frame[name] = reps * total / best(frame_loop, 3) / 1e9
        bulk[name] = reps * total / best(one_call, 3) / 1e9
    top_frame = max(per_frame, key=per_frame.get)
    top_bulk = max(bulk, key=bulk.get)
    mib = total / 2**20
    rows.append((f"batch {count:,} x 4 KiB ({mib:.0f} MiB)", f"C {ours_gbs:.1f} GB/s",
                 f"{ours_gbs / per_frame[top_frame]:.2f}x {top_frame} per frame, "
                 f"{ours_gbs / bulk[top_bulk]:.2f}x {top_bulk} one call"))
    for name in per_frame:
        rows.append(("", f"  {name}", f"{per_frame[name]:.1f} GB/s per frame, "
                                      f"{bulk[name]:.1f} GB/s one call"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = parser.parse_args()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    rows: list[tuple[str, str, str]] = []
    per_packet(rows, args.quick)
    batch_small(rows, args.quick)
    batch_4k(rows, 256, args.quick)
    batch_4k(rows, 4096, args.quick)
    print(f"ibwire ICRC engine: CRC-32 path {_engine.crc32_backend()}, {cpu}, one core")
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)).rstrip())


if __name__ == "__main__":
    main()
