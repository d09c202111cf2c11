"""What crossed the forwarder, as one pcap (ns timestamps, Ethernet), and its record numbers.

Records are numbered from 1 in file order, as every ibwire output numbers them (tshark's
``frame.number``); the manifest names them. Every frame that arrived is one record, stamped
when it arrived, holding the bytes sent on (a fault's edits included) or, for a frame the plan
dropped, the bytes that arrived; a copy (``dup``), a forged packet or an injected one is a
record of its own, stamped when sent. The file is written under a temporary name and renamed
into place when the run ends (:class:`ibwire.pcap.writer.PcapWriter`), so a reader never
meets half a capture; without a path the records are only counted.
"""

from __future__ import annotations

import sys
from typing import Any

from ibwire.pcap.writer import PcapWriter

LINKTYPE_ETHERNET = 1


class CaptureLog:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self.writer = PcapWriter(path, LINKTYPE_ETHERNET, nanoseconds=True) if path else None
        self.records = 0

    def add(self, frame: Any, stamp: int) -> int:
        """Appends one record; returns its number (from 1)."""
        self.records += 1
        if self.writer is not None:
            self.writer.write(frame, stamp)
        return self.records

    def add_batch(self, data: Any, offsets: Any, lengths: Any, stamps: Any) -> int:
        """Appends the frames of a batch in order; returns the first one's number."""
        first = self.records + 1
        if self.writer is None:
            self.records += len(lengths)
            return first
        from ibwire.impair import _io

        if _io.pack_records is not None and sys.byteorder == "little":
            block, longest = _io.pack_records(data, offsets, lengths, stamps)
            self.writer.write_prepared(block, len(lengths), longest)
            self.records += len(lengths)
            return first
        view = memoryview(data)
        for o, n, t in zip(offsets.tolist(), lengths.tolist(), stamps.tolist(), strict=True):
            self.add(view[o:o + n], t)
        return first

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
