"""What crossed the forwarder, as one pcap (ns timestamps, Ethernet), and its record numbers.

Records are numbered from 1 in file order, as every ibwire output numbers them (tshark's
``frame.number``); the manifest names them. Every frame that arrived is one record, stamped
when it arrived, holding the bytes sent on (a fault's edits included) or, for a frame the plan
dropped, the bytes that arrived; a copy (``dup``), a forged packet or an injected one is a
record of its own, stamped when sent. The two ports' batches are handled one after the
other, so records are written in the order they were handled, which can put a frame before
one that arrived earlier on the other port; when that happened, the capture is rewritten
in arrival order at the end (stable: a copy or a forged packet stays after the frame that
drew it) and :meth:`CaptureLog.close` returns how the numbers moved, for the manifest. The
file is written under a temporary name and renamed into place when the run ends
(:class:`ibwire.pcap.writer.PcapWriter`), so a reader never meets half a capture; without a
path the records are only counted.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ibwire.pcap.writer import PcapWriter

LINKTYPE_ETHERNET = 1


class CaptureLog:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.unsorted = f"{path}.unsorted" if path else None
        self.writer = (PcapWriter(self.unsorted, LINKTYPE_ETHERNET, nanoseconds=True)
                       if self.unsorted else None)
        self.records = 0
        self.stamps: list[Any] = []

    def add(self, frame: Any, stamp: int) -> int:
        """Appends one record; returns its number (from 1)."""
        self.records += 1
        if self.writer is not None:
            self.writer.write(frame, stamp)
            self.stamps.append(stamp)
        return self.records

    def add_batch(self, data: Any, offsets: Any, lengths: Any, stamps: Any) -> int:
        """Appends the frames of a batch in order; returns the first one's number."""
        first = self.records + 1
        if self.writer is None:
            self.records += len(lengths)
            return first
        from ibwire.impair import _io

        self.stamps.append(np.asarray(stamps, np.int64).copy())
        if _io.pack_records is not None and sys.byteorder == "little":
            block, longest = _io.pack_records(data, offsets, lengths, stamps)
            self.writer.write_prepared(block, len(lengths), longest)
            self.records += len(lengths)
            return first
        view = memoryview(data)
        for o, n, t in zip(offsets.tolist(), lengths.tolist(), stamps.tolist(), strict=True):
            self.writer.write(view[o:o + n], t)
        self.records += len(lengths)
        return first

    def add_prepared(self, block: Any, count: int, longest: int, stamps: Any) -> int:
        """Appends ``count`` records the C pump laid out in ``block`` (pcap records, ns,
        this host's byte order; None without a capture: only counted); returns the first
        one's number."""
        first = self.records + 1
        self.records += count
        if self.writer is not None and count:
            self.stamps.append(np.asarray(stamps, np.int64).copy())
            self.writer.write_prepared(block, count, longest)
        return first

    def close(self) -> np.ndarray | None:
        """Writes the capture; returns None when the records kept their numbers, else the
        new number of each (index: the old number)."""
        if self.writer is None or self.path is None or self.unsorted is None:
            return None
        self.writer.close()
        stamps = (np.concatenate([np.atleast_1d(np.asarray(s, np.int64)) for s in self.stamps])
                  if self.stamps else np.zeros(0, np.int64))
        if len(stamps) < 2 or bool(np.all(stamps[1:] >= stamps[:-1])):
            os.replace(self.unsorted, self.path)
            return None
        from ibwire.pcap import read_capture

        order = np.argsort(stamps, kind="stable")
        frames = [bytes(r.frame) for r in read_capture(self.unsorted)]
        writer = PcapWriter(self.path, LINKTYPE_ETHERNET, nanoseconds=True)
        try:
            for i in order.tolist():
                writer.write(frames[i], int(stamps[i]))
        except BaseException:
            writer.abort()
            raise
        writer.close()
        os.unlink(self.unsorted)
        renumbered = np.zeros(len(stamps) + 1, np.int64)
        renumbered[order + 1] = np.arange(1, len(stamps) + 1)
        return renumbered

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
