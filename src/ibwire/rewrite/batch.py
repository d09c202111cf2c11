"""``ibwire rewrite`` of a pcap file in batches: no Python per packet on the common path.

The file is scanned window by window (``ibwire.scan.scan_capture``: frame offsets, link
codes, CRC verdicts and BTH offsets as columns). The records of a window lie back to back in
the file (16-byte header, then the frame, for the link types whose record is the frame), so
the window's bytes are copied once, the frames are edited in the copy by a few calls of the
window editor (the C kernel ``ibwire.rewrite._kernel`` or its numpy twin
``ibwire.rewrite.vector``), each record header is rewritten as ``PcapWriter.write`` would
write it, and the copy goes to the writer in one piece. Frames the window editor does not
handle are edited by ``edit_frame`` and written one by one, in their place; so is a window
whose records are not back to back (a record the reader could not read).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import IO, TYPE_CHECKING

import numpy as np

from ibwire._twins import load_twin
from ibwire.pcap.linktypes import direct_link_codes
from ibwire.pcap.source import CaptureReader, Source
from ibwire.pcap.writer import PcapWriter
from ibwire.rewrite import vector
from ibwire.rewrite.edit import FrameEdit, PsnPairs, edit_frame
from ibwire.rewrite.options import RewriteOptions
from ibwire.rewrite.vector import FIELDS, LABELS, PAD, batchable

if TYPE_CHECKING:
    from ibwire.rewrite.run import RewriteSummary
    from ibwire.scan.batch import ScanBatch

_kernel, implementation = load_twin("ibwire.rewrite._kernel", vector)
"""The window editor (``edit_frames``, ``record_headers``): the C kernel
(``ibwire.rewrite._kernel``), or its numpy twin (``ibwire.rewrite.vector``) where it is not
built or IBWIRE_NO_EXTENSIONS=1."""
EDITABLE_LINKS = ("ethernet", "ip", "infiniband", "grh")
HEADER = 16
_LAST_SECOND = (0xFFFFFFFF + 1) * 1_000_000_000
"""Timestamps from here on do not fit a pcap record header: the writer refuses them."""


def can_batch(source: Source, reader: CaptureReader, options: RewriteOptions) -> bool:
    """A pcap file (named by a path) whose records are the frames, and options the vector
    path applies."""
    return (isinstance(source, (str, os.PathLike)) and source != "-" and
            reader.format == "pcap" and reader.header is not None and
            reader.header.linktype in direct_link_codes() and batchable(options))


class BatchRewriter:
    """Rewrites scanned batches into a pcap writer; counts into ``summary``."""

    window: int | None = None
    """Bytes the scanner reads at a time (None: its default)."""

    def __init__(self, writer: PcapWriter, options: RewriteOptions,
                 report: IO[str] | None, summary: RewriteSummary) -> None:
        self.writer, self.options, self.report = writer, options, report
        self.summary = summary
        self.psn = PsnPairs(options)
        self._spares: list[tuple[np.ndarray, np.ndarray] | None] = [None, None]
        self._turn = 0

    def run(self, source: Source) -> None:
        """Scans window after window; each window is copied out of the scan's buffer and
        edited and written by a second thread while the next one is scanned (both C loops
        run without the GIL), in order."""
        from concurrent.futures import Future, ThreadPoolExecutor

        from ibwire.scan import scan_capture
        from ibwire.scan.program import CAPTURE_ERROR

        pending: Future[None] | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="ibwire-rewrite") as pool:
            windows = {} if self.window is None else {"window": self.window}
            for batch in scan_capture(source, fields=(), **windows):
                c = batch.columns
                if not len(c["record"]):
                    continue
                offs = c["frame.offset"].astype(np.int64)
                lens = c["frame.len"].astype(np.int64)
                regular = not (c["error"] == CAPTURE_ERROR).any() and offs[0] >= HEADER and \
                    np.array_equal(offs[1:], offs[:-1] + lens[:-1] + HEADER)
                held = self._held(batch, offs, lens) if regular else None
                if pending is not None:
                    pending.result()  # the windows are written in order
                    pending = None
                if held is None:
                    for row in range(len(offs)):
                        self._one(batch, row)
                else:
                    pending = pool.submit(self._window, *held)
            if pending is not None:
                pending.result()

    def _held(self, batch: ScanBatch, offs: np.ndarray, lens: np.ndarray
              ) -> tuple[ScanBatch, np.ndarray, np.ndarray, np.ndarray]:
        """The window's records out of the scan's buffer (valid only until the next batch):
        the batch over a copy of them (for ``_one``), and a second copy to edit (with PAD
        bytes after it); the frame offsets in both, and the lengths. The copies take turns
        in two pairs of buffers kept from window to window (one is being edited by the
        other thread): fresh pages would cost the kernel a fault and a clearing each."""
        lo, hi = int(offs[0]) - HEADER, int(offs[-1] + lens[-1])
        size = hi - lo
        self._turn ^= 1
        spare = self._spares[self._turn]
        if spare is None or len(spare[0]) < size:
            spare = self._spares[self._turn] = (np.empty(size, np.uint8),
                                                np.empty(size + PAD, np.uint8))
        original, buf = spare[0][:size], spare[1][:size + PAD]
        original[:] = np.frombuffer(batch.buffer, np.uint8, count=size, offset=lo)
        buf[:size] = original
        buf[size:] = 0
        fo = offs - lo
        return replace(batch, columns={**batch.columns, "frame.offset": fo},
                       buffer=original), buf, fo, lens

    def _one(self, batch: ScanBatch, row: int) -> None:
        """One record through ``edit_frame``, as ``rewrite_capture`` does it."""
        c = batch.columns
        s = self.summary
        error = batch.errors.get(row)
        if error is not None:
            s.errors.append(error)
            return
        s.records += 1
        original = bytes(batch.frame(row))
        frame = bytearray(original)
        link = batch.link(row)
        edit = edit_frame(frame, link, self.options, self.psn,
                          max(int(c["frame.orig_len"][row]), len(original))) \
            if link in EDITABLE_LINKS else FrameEdit()
        s.icrc[edit.icrc] += 1
        data = bytes(frame)
        if data != original:
            s.edited += 1
        orig = max(int(c["frame.orig_len"][row]), len(original)) + len(data) - len(original)
        self.writer.write(data, int(c["timestamp_ns"][row]), max(orig, len(data)))
        if self.report is not None:
            self.report.write(json.dumps({"record": int(c["record"][row]) + 1,
                                          "changed": edit.changed, "icrc": edit.icrc}) + "\n")

    def _window(self, batch: ScanBatch, buf: np.ndarray, fo: np.ndarray,
                lens: np.ndarray) -> None:
        c = batch.columns
        links = c["link"]
        result = _kernel.edit_frames(buf, fo, lens, links, c["error"], c["icrc_ok"],
                                     c["offset.bth"], c["offset.icrc"], self.options)
        ts = c["timestamp_ns"]
        fallback = result.fallback | (c["error"] > 1) | (c["cut"] != 0) | (ts < 0) | \
            (ts >= _LAST_SECOND)  # (a frame a snap length cut: edit_frame says so)
        _kernel.record_headers(buf, fo, lens, ts, c["frame.orig_len"],
                               self.writer.nanoseconds, self.writer.order == ">")
        edited = result.edited
        self._count(result.icrc, edited, fallback)
        lines = self._lines(c["record"] + 1, result.changed, result.icrc) \
            if self.report is not None else None
        start = 0
        for row in [*np.flatnonzero(fallback).tolist(), len(fo)]:
            if row > start:
                self.writer.write_prepared(memoryview(buf[fo[start] - HEADER:fo[row - 1] +
                                                          lens[row - 1]]),
                                           row - start, int(lens[start:row].max()))
                if lines is not None and self.report is not None:
                    self.report.write("".join(lines[start:row]))
            if row < len(fo):
                self._one(batch, row)
            start = row + 1

    def _count(self, labels: np.ndarray, edited: np.ndarray, fallback: np.ndarray) -> None:
        s = self.summary
        keep = ~fallback
        s.records += int(keep.sum())
        s.batched += int(keep.sum())
        s.edited += int((edited & keep).sum())
        for code, count in enumerate(np.bincount(labels[keep], minlength=len(LABELS))):
            if count:
                s.icrc[LABELS[code]] += int(count)

    @staticmethod
    def _lines(records: np.ndarray, changed: np.ndarray, labels: np.ndarray) -> list[str]:
        """The report's JSON lines, one per row (fallback rows' are replaced); ``records``
        numbered from 1, as tshark's frame.number."""
        key = changed.astype(np.int64) << 3 | labels
        distinct, inverse = np.unique(key, return_inverse=True)
        tails = []
        for k in distinct.tolist():
            names = [name for i, name in enumerate(FIELDS) if k >> 3 & 1 << i]
            tails.append(f', "changed": {json.dumps(names)}, "icrc": "{LABELS[k & 7]}"}}\n')
        return [f'{{"record": {r}{tails[t]}' for r, t in
                zip(records.tolist(), inverse.tolist(), strict=True)]
