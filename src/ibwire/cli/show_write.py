"""``ibwire show FILE [--where EXPR] -w OUT``: the records shown written to OUT instead of
printed, as ``tshark -r FILE -Y EXPR -w OUT`` does.

OUT is in the input's format (``ibwire.pcap.convert.writer_like``): a pcap keeps its link
type, byte order and timestamp resolution, a pcapng its records' link types and snaplens
(with nanosecond timestamps), a native ERF file becomes a pcap of its ERF records; a gzip
input is written uncompressed. Each record is written as stored (link-layer and ERF headers
included). OUT appears only when complete (written beside and renamed); the input is never
modified, nor taken as OUT. Records that could not be read are left out and counted.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ibwire.cli.common import records, shrink_status

if TYPE_CHECKING:
    from ibwire.pcap.source import CaptureReader, Source
    from ibwire.pcap.writer import PcapngWriter, PcapWriter


def write_records(source: Source, output: str, args: argparse.Namespace) -> int:
    """Write the records of ``source`` that ``--where`` keeps (all without it; the first
    ``-c`` records read) to ``output``; one line on stderr says how many."""
    from ibwire.inspect import inspect
    from ibwire.pcap.convert import _refuse_same_file, writer_like
    from ibwire.where import compile_where

    keep = compile_where(args.where) if args.where else None
    _refuse_same_file(source, output)
    writer: PcapWriter | PcapngWriter | None = None

    def opened(reader: CaptureReader) -> None:
        nonlocal writer
        writer = writer_like(reader, output)

    read = written = unreadable = 0
    try:
        for record in records(source, args, opened):
            read += 1
            if record.error is not None:
                unreadable += 1
            elif keep is None or keep(inspect(record).fields()):
                assert writer is not None
                writer.write_record(record)
                written += 1
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    assert writer is not None
    writer.close()
    skipped = f", {unreadable} unreadable left out" if unreadable else ""
    print(f"ibwire show: {output}: {written} of {read} records written{skipped}",
          file=sys.stderr)
    return shrink_status(args, "show", args.file)
