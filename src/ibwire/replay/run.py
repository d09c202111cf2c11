"""A replay: the capture loaded, its packets timed, sent in bursts (or written with -w).

Time comes from ``time.monotonic_ns``. Packets due within the same burst window (1 ms, at
most 1024) go out together in one sendmmsg(2) call over the preloaded frames; between bursts
the sender sleeps (no busy loop). ``--topspeed`` sends bursts back to back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np

from ibwire.pcap.source import Source, open_capture
from ibwire.pcap.writer import PcapWriter
from ibwire.replay import mmsg
from ibwire.replay.mmsg import FrameBlock
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


def _loop_frames(plan: Plan, data: Loaded, k: int) -> list[bytes]:
    if not (plan.unique_ip and k):
        return data.frames
    return [unique_frame(f, link, k) for f, link in zip(data.frames, data.links, strict=True)]


def send_plan(plan: Plan, data: Loaded, interface: str) -> ReplayStats:
    """Sends on ``interface`` in bursts (one sendmmsg each), sleeping until each is due."""
    sock = PacketSocket(interface)
    stats = ReplayStats()
    due = offsets(plan.timing, data.timestamps_ns, data.lengths)
    span = loop_length(plan.timing, due, data.lengths) + plan.loopdelay_ms / 1000
    left = plan.limit
    block: FrameBlock | None = None
    start = time.monotonic_ns()
    try:
        for k in range(plan.loops):
            frames = _loop_frames(plan, data, k)
            base = k * span
            n = len(frames) if left is None else min(len(frames), left)
            if plan.duration is not None:
                n = min(n, int(np.searchsorted(due, plan.duration - base, "right")))
            if n <= 0:
                break
            if mmsg.AVAILABLE and (block is None or frames is not data.frames or
                                   len(block.lengths) != n):
                block = FrameBlock(frames[:n])
            i = 0
            while i < n:
                end = min(n, i + BURST_MAX,
                          int(np.searchsorted(due, due[i] + BURST_S, "right")))
                wait = base + float(due[i]) - (time.monotonic_ns() - start) / 1e9
                if wait > 0:
                    time.sleep(wait)
                if block is not None:
                    sent, nbytes, failed = block.send(sock.fileno(), i, end - i)
                else:
                    before = sock.failed
                    nbytes = sock.send_burst(frames[i:end])
                    failed = sock.failed - before
                    sent = end - i - failed
                stats.packets += sent
                stats.bytes += nbytes
                stats.failed += failed
                i = end
            if left is not None:
                left -= n
            if n < len(frames):
                break
        stats.seconds = (time.monotonic_ns() - start) / 1e9
    finally:
        sock.close()
    return stats
