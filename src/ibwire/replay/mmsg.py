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


class FrameBlock:
    """The frames of one loop, laid out for sendmmsg."""

    def __init__(self, frames: list[bytes]) -> None:
        lengths = np.fromiter((len(f) for f in frames), dtype=np.uint64, count=len(frames))
        self.data = np.frombuffer(b"".join(frames) or b"\0", dtype=np.uint8).copy()
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.uint64)
        self.iov = np.empty((len(frames), 2), dtype=np.uint64)
        self.iov[:, 0] = self.data.ctypes.data + starts
        self.iov[:, 1] = lengths
        self.msgs = np.zeros((len(frames), 8), dtype=np.uint64)
        self.msgs[:, 2] = self.iov.ctypes.data + 16 * np.arange(len(frames), dtype=np.uint64)
        self.msgs[:, 3] = 1
        self.lengths = lengths

    def send(self, fd: int, first: int, count: int) -> tuple[int, int, int]:
        """Sends frames [first, first + count); returns (sent, bytes, failed)."""
        base = self.msgs.ctypes.data
        i, end, failed, lost = first, first + count, 0, 0
        while i < end:
            done = _SENDMMSG(fd, base + 64 * i, end - i, 0)
            if done > 0:
                i += done
                continue
            err = ctypes.get_errno()
            if err in (errno.ENOBUFS, errno.EAGAIN, errno.EINTR):
                os.sched_yield()
                done = _SENDMMSG(fd, base + 64 * i, end - i, 0)
                if done > 0:
                    i += done
                    continue
            failed += 1  # the kernel refuses this frame: count it, go on with the next
            lost += int(self.lengths[i])
            i += 1
        return count - failed, int(self.lengths[first:end].sum()) - lost, failed
