"""Reading a file that another process is still writing, as ``tail -f`` follows a log: a live
capture's spool file (``ibwire.pcap.live``), which dumpcap or tcpdump writes while ibwire
reads behind it.

A read hands out what has been written, at least one byte, as a pipe does; while nothing
new is there it waits, polling the file, for as long as the writer runs; once the writer has
exited, the rest of the file is read and then the data ends. Nothing is lost when the reader
falls behind: the file holds what it has not read yet (where a pipe's writer would wait, and
the kernel drop packets meanwhile).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ibwire.errors import CaptureError

POLL = (0.002, 0.05)
"""Seconds between looks at a file that has nothing new: the first wait, and the longest (each
empty look doubles the wait up to it)."""


class FollowedFile:
    """The file at ``path``, read as ``writing()`` (the writer still runs) says it grows; it
    need not exist yet while the writer runs (a file never made reads as empty)."""

    def __init__(self, path: str, writing: Callable[[], bool], name: str | None = None,
                 opened: Callable[[], None] | None = None) -> None:
        self.path = path
        self.name = path if name is None else name
        self._writing = writing
        self._opened = opened
        """Called once the file is open (the spool's name can then go: see ibwire.pcap.live)."""
        self._fd: int | None = None
        self.closed = False
        self.position = 0
        """Bytes read so far."""

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all there is for -1): at least one unless the writer has
        exited and everything it wrote has been read."""
        if self.closed:
            raise ValueError("read of a closed FollowedFile")
        wait = POLL[0]
        while True:
            running = self._writing()  # asked first: what it wrote before exiting is read
            data = self._read(size)
            if data or not running:
                self.position += len(data)
                return data
            time.sleep(wait)
            wait = min(wait * 2, POLL[1])

    def _read(self, size: int) -> bytes:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return b""  # not made yet
            except OSError as exc:
                raise CaptureError(f"{self.name}: cannot open {self.path} ({exc.strerror})"
                                   ) from exc
            if self._opened is not None:
                self._opened()
        try:
            if size < 0:
                parts = []
                while part := os.read(self._fd, 1 << 20):
                    parts.append(part)
                return b"".join(parts)
            return os.read(self._fd, size)
        except OSError as exc:
            raise CaptureError(f"{self.name}: cannot read {self.path} ({exc.strerror})") from exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.closed = True
