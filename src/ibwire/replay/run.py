"""A replay: the capture loaded, its packets timed, sent in bursts (or written with -w).

The capture is loaded through the scanner (``ibwire.scan.scan_capture``): its frames copied
into memory once, as offsets and lengths into one buffer, which sendmmsg(2) sends from.
Time comes from ``time.monotonic_ns``. Packets due within the same burst window (1 ms, at
most 1024) go out together in one sendmmsg(2) call; between bursts the sender sleeps (no busy
loop). ``--topspeed`` sends bursts back to back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from functools import cached_property

import numpy as np

from ibwire.pcap.records import LINK_CODES, LINK_NAMES
from ibwire.pcap.source import Source
from ibwire.pcap.writer import PcapWriter
from ibwire.replay import mmsg
from ibwire.replay.mmsg import FrameBlock
from ibwire.replay.schedule import Timing, loop_length, offsets
from ibwire.replay.send import PacketSocket, ReplayError
from ibwire.replay.unique import unique_frame

BURST_S = 0.001
BURST_MAX = 1024
TOPSPEED_BURST = 1 << 16
"""Frames per turn of the send loop with ``--topspeed`` (sendmmsg(2) takes at most 1024 per
call, UIO_MAXIOV: ``FrameBlock.send`` calls it again until the turn's frames are out)."""


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
    """The frames of a capture, preloaded: ``data`` holds the capture file's bytes (one copy
    in memory, as tcpreplay's --preload-pcap), frame ``i`` is ``lengths[i]`` bytes from
    ``offsets[i]``; ``link_codes`` are ``LINK_CODES`` (ethernet 0, ip 2)."""

    data: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    link_codes: np.ndarray
    linktype: int
    timestamps_ns: np.ndarray
    padded: int = 0
    """Frames a snap length had cut, zero-filled to their length on the wire (``pad``)."""

    @cached_property
    def frames(self) -> list[bytes]:
        """Each frame as bytes (for the paths that edit or write frames one by one)."""
        data = self.data
        return [data[o:o + n].tobytes() for o, n in
                zip(self.offsets.tolist(), self.lengths.tolist(), strict=True)]

    @property
    def links(self) -> list[str]:
        return [LINK_NAMES[code] for code in self.link_codes.tolist()]

    def block(self, count: int) -> FrameBlock:
        """The first ``count`` frames for sendmmsg, pointing into ``data``."""
        return FrameBlock(self.data, self.offsets[:count], self.lengths[:count])


def load(source: Source, *, window: int = 16 << 20, pad: bool = False) -> Loaded:
    """Every readable frame of ``source`` as sent on the wire (Ethernet or raw IP), from the
    scanner's columns window by window (``ibwire.scan.scan_capture``: no Python per packet):
    the frames of each window are copied once, into one buffer. The link type of the output
    (``-w``) is that of the last frame. A frame a snap length cut (a headers-only capture)
    raises :class:`ReplayError`, unless ``pad``: it is then zero-filled to its length on the
    wire (its ICRC and checksums then wrong; ``Loaded.padded`` counts them)."""
    from ibwire.scan import scan_capture

    chunks: list[np.ndarray] = []
    offsets, lengths, codes, stamps, wires = [], [], [], [], []
    size = 0
    for batch in scan_capture(source, fields=(), window=window):
        c = batch.columns
        keep = np.flatnonzero((c["link"] == LINK_CODES["ethernet"]) |
                              (c["link"] == LINK_CODES["ip"]))
        if not len(keep):
            continue
        offs = c["frame.offset"][keep].astype(np.int64)
        lens = c["frame.len"][keep].astype(np.int64)
        lo, hi = int(offs.min()), int((offs + lens).max())
        chunks.append(np.frombuffer(batch.buffer, np.uint8, count=hi - lo, offset=lo).copy())
        offsets.append(offs - lo + size)
        size += hi - lo
        lengths.append(lens)
        wires.append(np.maximum(c["frame.orig_len"][keep].astype(np.int64), lens))
        codes.append(c["link"][keep])
        stamps.append(c["timestamp_ns"][keep])
    if not chunks:
        empty = np.zeros(0, np.int64)
        return Loaded(np.zeros(1, np.uint8), empty, empty, np.zeros(0, np.uint8), 1, empty)
    kept = np.concatenate(codes)
    linktype = 101 if kept[-1] == LINK_CODES["ip"] else 1
    data = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    loaded = Loaded(data, np.concatenate(offsets), np.concatenate(lengths), kept, linktype,
                    np.concatenate(stamps).astype(np.int64))
    wire = np.concatenate(wires)
    cut = np.flatnonzero(wire > loaded.lengths)
    if not len(cut):
        return loaded
    if not pad:
        raise ReplayError(f"{len(cut)} frames were cut by the capture (a snap length: the "
                          f"first, frame {int(cut[0]) + 1}, has {int(loaded.lengths[cut[0]])} "
                          f"of {int(wire[cut[0]])} bytes): they cannot be sent as they were; "
                          f"--pad sends them zero-filled to their length (their ICRC wrong)")
    return _padded(loaded, wire, len(cut))


def _padded(loaded: Loaded, wire: np.ndarray, cut: int) -> Loaded:
    """``loaded`` with every frame zero-filled to its length on the wire, in a new buffer."""
    offsets = np.concatenate(([0], np.cumsum(wire)[:-1])).astype(np.int64)
    data = np.zeros(max(1, int(wire.sum())), np.uint8)
    for at, old, n in zip(offsets.tolist(), loaded.offsets.tolist(), loaded.lengths.tolist(),
                          strict=True):
        data[at:at + n] = loaded.data[old:old + n]
    return replace(loaded, data=data, offsets=offsets, lengths=wire.astype(np.int64),
                   padded=cut)


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


def send_plan(plan: Plan, data: Loaded, interface: str,
              progress: Callable[[ReplayStats], None] | None = None,
              every: float | None = None) -> ReplayStats:
    """Sends on ``interface`` in bursts (one sendmmsg each), sleeping until each is due.
    ``progress`` gets the totals so far every ``every`` seconds (tcpreplay's ``--stats``),
    checked after each burst."""
    sock = PacketSocket(interface)
    stats = ReplayStats()
    due = offsets(plan.timing, data.timestamps_ns, data.lengths)
    span = loop_length(plan.timing, due, data.lengths) + plan.loopdelay_ms / 1000
    left = plan.limit
    plain = data.block(len(data.lengths)) if mmsg.AVAILABLE else None
    burst = TOPSPEED_BURST if plan.timing.topspeed else BURST_MAX
    step = int(every * 1e9) if progress is not None and every else 0
    if step:
        burst = min(burst, BURST_MAX)  # report on time at --topspeed too
    start = time.monotonic_ns()
    report_at = start + step
    try:
        for k in range(plan.loops):
            unique = plan.unique_ip and k > 0
            frames = _loop_frames(plan, data, k) if unique or plain is None else None
            total = len(data.lengths)
            base = k * span
            n = total if left is None else min(total, left)
            if plan.duration is not None:
                n = min(n, int(np.searchsorted(due, plan.duration - base, "right")))
            if n <= 0:
                break
            block = FrameBlock.from_frames(frames[:n]) if unique and frames is not None \
                and plain is not None else plain
            i = 0
            while i < n:
                end = min(n, i + burst,
                          int(np.searchsorted(due, due[i] + BURST_S, "right")))
                wait = base + float(due[i]) - (time.monotonic_ns() - start) / 1e9
                if wait > 0:
                    time.sleep(wait)
                if block is not None:
                    sent, nbytes, failed = block.send(sock.fileno(), i, end - i)
                else:
                    assert frames is not None
                    before = sock.failed
                    nbytes = sock.send_burst(frames[i:end])
                    failed = sock.failed - before
                    sent = end - i - failed
                stats.packets += sent
                stats.bytes += nbytes
                stats.failed += failed
                i = end
                if step and progress is not None and time.monotonic_ns() >= report_at:
                    now = time.monotonic_ns()
                    progress(replace(stats, seconds=(now - start) / 1e9))
                    report_at = now + step
            if left is not None:
                left -= n
            if n < total:
                break
        stats.seconds = (time.monotonic_ns() - start) / 1e9
    finally:
        sock.close()
    return stats
