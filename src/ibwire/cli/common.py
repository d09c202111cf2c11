"""What the verbs share: opening captures, a progress bar, formatting values."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ibwire.inspect import Inspection
    from ibwire.scan import ScanBatch


def add_input_arguments(parser: argparse.ArgumentParser, many: bool = False) -> None:
    parser.add_argument("files" if many else "file", nargs="+" if many else None,
                        metavar="FILE", help="capture file (pcap, pcapng, ERF, gzip) or - for stdin")
    parser.add_argument("-c", "--count", type=int, default=None, metavar="N",
                        help="stop after N records")
    parser.add_argument("--where", default=None, metavar="EXPR",
                        help='keep packets matching e.g. "bth.destqp == 0x12 and bth.opcode == 17"')
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, name: str, total: int | None, enabled: bool) -> None:
        self.name = name
        self.total = total
        self.enabled = enabled and sys.stderr.isatty() and bool(total)
        self.count = 0

    def update(self, position: int, records: int = 1) -> None:
        before = self.count
        self.count += records
        if self.enabled and before // 4096 != self.count // 4096 and self.total:
            share = min(position / self.total, 1.0)
            bar = "#" * int(share * 30)
            sys.stderr.write(f"\r{self.name[-30:]:>30} [{bar:<30}] {share:4.0%} "
                             f"{self.count} records")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()


def inspections(path: str, args: argparse.Namespace) -> Iterator[Inspection]:
    """Inspect the records of ``path``, honouring ``-c`` and ``--where``."""
    from ibwire.inspect import inspect
    from ibwire.pcap import open_capture
    from ibwire.where import compile_where

    keep = compile_where(args.where) if getattr(args, "where", None) else None
    size = os.path.getsize(path) if path != "-" and os.path.isfile(path) else None
    progress = Progress(path, size, not getattr(args, "no_progress", False))
    seen = 0
    try:
        with open_capture(path) as reader:
            for record in reader:
                if args.count is not None and seen >= args.count:
                    break
                seen += 1
                _note_shrink(args, record.error)
                progress.update(record.offset)
                found = inspect(record)
                if keep is not None and not keep(found.fields()):
                    continue
                yield found
    finally:
        progress.close()


def failure_reason(batch: ScanBatch, row: int) -> str:
    """Why a failing row failed, for a line that names the record first: the dissector's
    error where it has one (the most precise), else the scanner's, else the CRC values."""
    from ibwire import crc
    from ibwire.dissect import parse
    from ibwire.errors import IbwireError

    number = int(batch["record"][row]) + 1
    code = int(batch["error"][row])
    if code != 0:
        error = batch.error(row)
        if code != 5:
            try:
                parse(bytes(batch.frame(row)), batch.link(row))
            except IbwireError as exc:
                error = exc
        assert error is not None
        cut = error.cut_by_capture(int(batch["frame.len"][row]), int(batch["frame.orig_len"][row]))
        return cut.at_record(number).in_record()
    verdict = crc.verify(bytes(batch.frame(row)), batch.link(row))
    bad = []
    if verdict.icrc_ok is False:
        bad.append(f"ICRC mismatch (wire 0x{verdict.icrc_wire:08x}, computed "
                   f"0x{verdict.icrc_computed:08x})")
    if verdict.vcrc_ok is False:
        bad.append(f"VCRC mismatch (wire 0x{verdict.vcrc_wire:04x}, computed "
                   f"0x{verdict.vcrc_computed:04x})")
    return ", ".join(bad)


def scanned(path: str, args: argparse.Namespace, fields: object
            ) -> Iterator[tuple[ScanBatch, dict[str, np.ndarray], np.ndarray]]:
    """The scanner's batches of ``path`` honouring ``-c``, with a progress bar: (batch, its
    columns cut to the rows kept, the kept rows that failed)."""
    import numpy as np

    from ibwire.scan import scan_capture

    size = os.path.getsize(path) if path != "-" and os.path.isfile(path) else None
    progress = Progress(path, size, not getattr(args, "no_progress", False))
    left = args.count
    try:
        for batch in scan_capture(path, fields=fields):
            rows = len(batch) if left is None else min(len(batch), left)
            for error in batch.errors.values():
                _note_shrink(args, error)
            columns = {name: col[:rows] for name, col in batch.columns.items()}
            yield batch, columns, np.flatnonzero(batch.failed()[:rows])
            if rows:
                progress.update(int(columns["frame.offset"][rows - 1]), rows)
            if left is not None:
                left -= rows
                if left <= 0:
                    break
    finally:
        progress.close()


def _note_shrink(args: argparse.Namespace, error: object) -> None:
    """Remember the error that ended a capture whose file shrank while it was read."""
    from ibwire.errors import ShrunkError

    if isinstance(error, ShrunkError):  # its record (from 0) now: printing may change it
        args.shrunk = ("" if error.record is None else f"record {error.record + 1}: ") \
            + error.in_record()


def shrink_status(args: argparse.Namespace, verb: str, path: str) -> int:
    """1, with a line on stderr, if the capture's file shrank while it was read (its records
    up to there were shown): never 0 as if nothing happened; else 0."""
    line = getattr(args, "shrunk", None)
    if line is None:
        return 0
    print(f"ibwire {verb}: {path}: {line}", file=sys.stderr)
    return 1


def jsonable(value: Any) -> Any:
    """A value as JSON has it: bytes as hex text, tuples as lists."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value


def json_line(fields: dict[str, Any]) -> str:
    """One JSON object per line; values as :func:`jsonable` has them (json itself writes
    tuples as lists and asks :func:`_hex` for bytes, so plain values cost no Python call)."""
    import json

    return json.dumps(fields, default=_hex) + "\n"


def _hex(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
