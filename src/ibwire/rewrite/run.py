"""A capture through ``ibwire rewrite``: read, edit every frame, write atomically.

The output has the input's container: pcap (same link type, byte order and timestamp
precision), pcapng (same link types), and a native ERF file becomes a pcap of ERF records
(LINKTYPE_ERF), whose frames are re-wrapped with their ERF type. The input is never written;
an output naming the input is refused.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import IO

from ibwire.errors import IbwireError
from ibwire.pcap.convert import _refuse_same_file, writer_like
from ibwire.pcap.erf import LINKTYPE_ERF, build_erf_record
from ibwire.pcap.records import CaptureRecord
from ibwire.pcap.source import Source, open_capture
from ibwire.pcap.writer import PcapngWriter, PcapWriter
from ibwire.rewrite.batch import EDITABLE_LINKS, BatchRewriter, can_batch
from ibwire.rewrite.edit import FrameEdit, PsnPairs, edit_frame
from ibwire.rewrite.options import RewriteOptions


@dataclass
class RewriteSummary:
    """What a rewrite did, counted."""

    records: int = 0
    edited: int = 0
    batched: int = 0
    """Packets the batch path edited itself (the rest went through ``edit_frame``)."""
    icrc: Counter[str] = field(default_factory=Counter)
    errors: list[IbwireError] = field(default_factory=list)

    def line(self) -> str:
        crcs = ", ".join(f"{n} {k}" for k, n in sorted(self.icrc.items()) if k != "none")
        return (f"{self.records} packets, {self.edited} edited; ICRC: {crcs or 'none'}; "
                f"{len(self.errors)} unreadable records skipped")


def _record_bytes(record: CaptureRecord, frame: bytearray) -> bytes:
    """The record as stored, holding the edited ``frame``."""
    if record.linktype == LINKTYPE_ERF or record.erf_type is not None:
        wire = max(record.orig_len, record.caplen) + len(frame) - record.caplen
        return build_erf_record(frame, record.timestamp_ns, record.erf_type or 0,
                                wire_len=wire)
    data = bytes(record.record_data)
    prefix = data[:len(data) - record.caplen]
    return prefix + bytes(frame)


def _write(writer: PcapWriter | PcapngWriter, record: CaptureRecord, data: bytes,
           grown: int) -> None:
    orig = max(record.record_orig_len, len(record.record_data)) + grown
    orig = max(orig, len(data))
    if isinstance(writer, PcapngWriter):
        writer.write(data, record.timestamp_ns, record.linktype, orig, record.snaplen)
    else:
        writer.write(data, record.timestamp_ns, orig)


def rewrite_capture(source: Source, output: str | os.PathLike[str], options: RewriteOptions,
                    report: IO[str] | None = None, *, batch: bool = True) -> RewriteSummary:
    """Rewrites every frame of ``source`` into ``output``; ``report`` gets one JSON line per
    packet (record index, fields changed, ICRC fate). A pcap file goes through the batch
    path (``ibwire.rewrite.batch``, the same bytes) unless ``batch`` is False."""
    _refuse_same_file(source, output)
    summary = RewriteSummary()
    psn = PsnPairs(options)
    with open_capture(source) as reader, writer_like(reader, output) as writer:
        if batch and isinstance(writer, PcapWriter) and can_batch(source, reader, options):
            BatchRewriter(writer, options, report, summary).run(source)
            return summary
        for record in reader:
            if record.error is not None:
                summary.errors.append(record.error)
                continue
            summary.records += 1
            frame = bytearray(record.frame)
            edit = edit_frame(frame, record.link, options, psn,
                              max(record.orig_len, len(frame))) \
                if record.link in EDITABLE_LINKS else FrameEdit()
            summary.icrc[edit.icrc] += 1
            if bytes(frame) != bytes(record.frame):
                summary.edited += 1
                data = _record_bytes(record, frame)
            else:
                data = bytes(record.record_data)
            _write(writer, record, data, len(data) - len(record.record_data))
            if report is not None:
                report.write(json.dumps({"record": record.index + 1, "changed": edit.changed,
                                         "icrc": edit.icrc}) + "\n")
    return summary
