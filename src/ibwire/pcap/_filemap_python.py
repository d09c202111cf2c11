"""Pure-Python twin of ``ibwire.pcap._filemap``: the same names, but a window is read into
memory (``os.preadv``) instead of mapped, so a file that shrinks shows as a short read (a
shorter window), never as SIGBUS. Imports nothing of ibwire."""

from __future__ import annotations

import os

__all__ = ["CaptureMap", "faults"]


class CaptureMap(bytearray):
    """``length`` bytes of file descriptor ``fileno`` from ``offset``, or fewer if the file
    ends first; ``faulted`` is always False (a shrink is a short read); ``name``: the file's,
    for messages."""

    faulted = False

    def __init__(self, fileno: int, offset: int, length: int, name: str = "") -> None:
        self.name = name
        if length < 0 or offset < 0:
            raise ValueError(f"bad window {offset}+{length}")
        super().__init__(length)
        got = 0
        with memoryview(self) as view:
            while got < length:
                count = os.preadv(fileno, [view[got:]], offset + got)
                if count == 0:
                    break
                got += count
        del self[got:]

    def close(self) -> None:
        """Nothing to unmap: the bytes go with the object."""

    def release(self) -> None:
        """Nothing to let go: the bytes were read, not mapped."""


def faults() -> int:
    """Faults caught in maps: none, nothing is mapped."""
    return 0
