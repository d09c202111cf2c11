"""sendmmsg(2) over a preloaded buffer: one system call sends a whole burst.

The frames of a loop are laid end to end in one buffer; an ``iovec`` and an ``mmsghdr``
(Linux x86-64/aarch64 layout: 16 and 64 bytes) are built for each frame once, with numpy, so a
burst costs one ctypes call, not one Python call per packet. Where libc has no sendmmsg the
caller falls back to ``socket.send`` in a loop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct

import numpy as np

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_SENDMMSG = getattr(_LIBC, "sendmmsg", None)
if _SENDMMSG is not None:
    _SENDMMSG.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    _SENDMMSG.restype = ctypes.c_int
AVAILABLE = _SENDMMSG is not None and struct.calcsize("P") == 8


CHUNK = 1 << 16
"""Frames whose headers are laid out at a time (the headers of one chunk are reused by the
next: 5 MiB whatever the capture's size)."""


class FrameBlock:
    """Frames to send with sendmmsg: ``lengths[i]`` bytes from ``starts[i]`` of ``data`` (a
    uint8 array that must outlive the block; nothing is copied). The ``iovec`` and
    ``mmsghdr`` arrays hold one chunk of frames and are refilled for the next."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data = data
        self.lengths = lengths.astype(np.uint64)
        self.addresses = data.ctypes.data + starts.astype(np.uint64)
        room = max(1, min(len(lengths), CHUNK))
        self.iov = np.zeros((room, 2), dtype=np.uint64)
        self.msgs = np.zeros((room, 8), dtype=np.uint64)
        self.msgs[:, 2] = self.iov.ctypes.data + 16 * np.arange(room, dtype=np.uint64)
        self.msgs[:, 3] = 1
        self.chunk = (-1, -1)  # the frames [first, end) the headers now describe

    @classmethod
    def from_frames(cls, frames: list[bytes]) -> FrameBlock:
        """The frames copied end to end into one buffer."""
        lengths = np.fromiter((len(f) for f in frames), dtype=np.int64, count=len(frames))
        data = np.frombuffer(b"".join(frames) or b"\0", dtype=np.uint8).copy()
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        return cls(data, starts, lengths)

    def _headers(self, first: int) -> int:
        """The index in ``msgs`` of frame ``first``, laying out the headers of the chunk
        that starts with it if they are not there."""
        lo, hi = self.chunk
        if lo <= first < hi:
            return first - lo
        hi = min(first + len(self.iov), len(self.lengths))
        self.iov[:hi - first, 0] = self.addresses[first:hi]
        self.iov[:hi - first, 1] = self.lengths[first:hi]
        self.chunk = (first, hi)
        return 0

    def send(self, fd: int, first: int, count: int) -> tuple[int, int, int]:
        """Sends frames [first, first + count); returns (sent, bytes, failed)."""
        base = self.msgs.ctypes.data
        i, end, failed, lost = first, first + count, 0, 0
        while i < end:
            at = self._headers(i)
            todo = min(end, self.chunk[1]) - i
            done = _SENDMMSG(fd, base + 64 * at, todo, 0)
            if done > 0:
                i += done
                continue
            err = ctypes.get_errno()
            if err in (errno.ENOBUFS, errno.EAGAIN, errno.EINTR):
                os.sched_yield()
                done = _SENDMMSG(fd, base + 64 * at, todo, 0)
                if done > 0:
                    i += done
                    continue
            failed += 1  # the kernel refuses this frame: count it, go on with the next
            lost += int(self.lengths[i])
            i += 1
        return count - failed, int(self.lengths[first:end].sum()) - lost, failed
