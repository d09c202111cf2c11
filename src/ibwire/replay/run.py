"""A replay: the capture loaded, its packets timed, sent in bursts (or written with -w).

Time comes from ``time.monotonic_ns``. Packets due within the same burst window (1 ms) go
out together; between bursts the sender sleeps (no busy loop). ``--topspeed`` sends bursts
back to back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np

from ibwire.pcap.source import Source, open_capture
from ibwire.pcap.writer import PcapWriter
from ibwire.replay.schedule import Timing, loop_length, offsets
from ibwire.replay.send import PacketSocket
from ibwire.replay.unique import unique_frame

BURST_S = 0.001
BURST_MAX = 1024


@dataclass
class ReplayStats:
    packets: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failed: int = 0

    @property
    def pps(self) -> float:
        return self.packets / self.seconds if self.seconds > 0 else 0.0

    @property
    def mbps(self) -> float:
        return self.bytes * 8 / self.seconds / 1e6 if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "pps": round(self.pps, 1), "mbps": round(self.mbps, 3)}

    def lines(self) -> str:
        return (f"Actual: {self.packets} packets ({self.bytes} bytes) sent in "
                f"{self.seconds:.6f} seconds\n"
                f"Rated: {self.bytes / max(self.seconds, 1e-9):.1f} Bps, {self.mbps:.3f} Mbps, "
                f"{self.pps:.1f} pps\nFailed packets: {self.failed}")


@dataclass
class Loaded:
    frames: list[bytes]
    links: list[str]
    linktype: int
    timestamps_ns: np.ndarray
    lengths: np.ndarray


def load(source: Source) -> Loaded:
    """Every readable frame of ``source`` as sent on the wire (Ethernet or raw IP)."""
    frames, links, stamps = [], [], []
    linktype = 1
    with open_capture(source) as reader:
        for record in reader:
            if record.error is not None or record.link not in ("ethernet", "ip"):
                continue
            frames.append(bytes(record.frame))
            links.append(record.link)
            stamps.append(record.timestamp_ns)
            linktype = 1 if record.link == "ethernet" else 101
    return Loaded(frames, links, linktype, np.array(stamps, dtype=np.int64),
                  np.array([len(f) for f in frames], dtype=np.int64))


@dataclass
class Plan:
    timing: Timing
    loops: int = 1
    loopdelay_ms: float = 0.0
    limit: int | None = None
    duration: float | None = None
    unique_ip: bool = False


def _packets(plan: Plan, data: Loaded) -> Iterator[tuple[float, bytes]]:
    due = offsets(plan.timing, data.timestamps_ns, data.lengths)
    span = loop_length(plan.timing, due, data.lengths) + plan.loopdelay_ms / 1000
    count = 0
    for k in range(plan.loops):
        frames = data.frames if not (plan.unique_ip and k) else \
            [unique_frame(f, link, k) for f, link in zip(data.frames, data.links, strict=True)]
        base = k * span
        for i, frame in enumerate(frames):
            if plan.limit is not None and count >= plan.limit:
                return
            when = base + float(due[i])
            if plan.duration is not None and when > plan.duration:
                return
            yield when, frame
            count += 1


def write_plan(plan: Plan, data: Loaded, output: str | os.PathLike[str]) -> ReplayStats:
    """``-w``: what would be sent, each packet stamped with the time it is due."""
    stats = ReplayStats()
    start = int(data.timestamps_ns[0]) if len(data.timestamps_ns) else 0
    with PcapWriter(output, data.linktype, nanoseconds=True) as writer:
        for when, frame in _packets(plan, data):
            writer.write(frame, start + round(when * 1e9))
            stats.packets += 1
            stats.bytes += len(frame)
            stats.seconds = when
    return stats


def send_plan(plan: Plan, data: Loaded, interface: str) -> ReplayStats:
    """Sends on ``interface`` in bursts, sleeping until each burst is due."""
    sock = PacketSocket(interface)
    stats = ReplayStats()
    burst: list[bytes] = []
    burst_due = 0.0
    start = time.monotonic_ns()
    try:
        for when, frame in _packets(plan, data):
            if burst and (when - burst_due > BURST_S or len(burst) >= BURST_MAX):
                stats.bytes += _flush(sock, burst, burst_due, start, stats)
                burst = []
            if not burst:
                burst_due = when
            burst.append(frame)
        if burst:
            stats.bytes += _flush(sock, burst, burst_due, start, stats)
        stats.seconds = (time.monotonic_ns() - start) / 1e9
        stats.failed = sock.failed
        stats.packets -= sock.failed
    finally:
        sock.close()
    return stats


def _flush(sock: PacketSocket, burst: list[bytes], due: float, start: int,
           stats: ReplayStats) -> int:
    wait = due - (time.monotonic_ns() - start) / 1e9
    if wait > 0:
        time.sleep(wait)
    stats.packets += len(burst)
    return sock.send_burst(burst)
