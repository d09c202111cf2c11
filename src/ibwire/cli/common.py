"""What the verbs share: opening captures, a progress bar, formatting values."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ibwire.inspect import Inspection
    from ibwire.pcap.live import LiveCapture
    from ibwire.pcap.records import CaptureRecord
    from ibwire.pcap.source import CaptureReader, Source
    from ibwire.scan import ScanBatch


def add_input_arguments(parser: argparse.ArgumentParser, many: bool = False,
                        live: bool = False, write_help: str | None = None) -> None:
    """FILE (or FILE...), -c, --where, --no-progress; ``live``: -i IFACE instead of FILE,
    with -f, --duration and -w (``write_help``: what -w does, when the verb gives it a
    meaning for a FILE too)."""
    name, help_text = ("files" if many else "file",
                       "capture file (pcap, pcapng, ERF, gzip) or - for stdin")
    if live:
        either = parser.add_mutually_exclusive_group(required=True)
        either.add_argument(name, nargs="*" if many else "?", default=[] if many else None,
                            metavar="FILE", help=help_text)
        either.add_argument("-i", "--interface", metavar="IFACE",
                            help="capture on IFACE (dumpcap, else tcpdump) instead of reading "
                            "a FILE; Ctrl-C stops")
    else:
        parser.add_argument(name, nargs="+" if many else None, metavar="FILE", help=help_text)
    parser.add_argument("-c", "--count", type=int, default=None, metavar="N",
                        help="stop after N records")
    parser.add_argument("--where", default=None, metavar="EXPR",
                        help="keep the packets EXPR matches, in Wireshark's display-filter "
                        "syntax over show --json's fields, e.g. \"bth.destqp == 0x12 && "
                        "icrc_ok == false\", \"ip.src == 10.0.0.0/24\", \"bth.opcode in {4 "
                        "5}\" (docs: reference/filters.md)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    if live:
        parser.add_argument("-f", "--filter", dest="capture_filter", default=None,
                            metavar="FILTER", help='capture filter, pcap-filter(7) syntax (with '
                            '-i; default "udp port 4791 or ether proto 0x8915", "" for all)')
        parser.add_argument("--duration", type=float, default=None, metavar="S",
                            help="stop capturing after S seconds (with -i)")
        parser.add_argument("-w", "--write", default=None, metavar="FILE",
                            help=write_help or "keep the packets captured in FILE, a "
                            "classic pcap file (with -i)")
        parser.set_defaults(usage_error=parser.error)


@contextmanager
def live_capture(args: argparse.Namespace) -> Iterator[LiveCapture]:
    """The capture ``-i`` asks for, stopped by Ctrl-C (SIGINT), SIGTERM, SIGHUP or
    ``--duration`` (the verb then ends as at the end of a file; a second Ctrl-C interrupts),
    and stopped on every way out."""
    import signal

    from ibwire import stopping
    from ibwire.pcap.live import ROCE_FILTER, LiveCapture

    if args.duration is not None and args.duration < 0:
        args.usage_error("--duration must not be negative")
    if args.count is not None and args.count < 1:
        args.usage_error("-c must be at least 1 with -i")
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)  # each line out as it comes

    def ready(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    capture_filter = ROCE_FILTER if args.capture_filter is None else args.capture_filter
    with LiveCapture(args.interface, capture_filter, duration=args.duration, keep=args.write,
                     on_ready=ready) as live:
        stops = 0

        def stop(signum: int, _frame: object) -> None:
            nonlocal stops
            stops += 1
            if stops > 1 and signum == signal.SIGINT:
                raise KeyboardInterrupt
            live.stop()

        before = stopping.handle((signal.SIGINT, *stopping.SIGNALS), stop)
        try:
            yield live
        finally:
            try:
                live.close()  # a Ctrl-C meanwhile only asks again
            finally:
                stopping.restore(before)
    if live.dropped:
        print(f"ibwire {args.verb}: warning: {live.tool} dropped {live.dropped} packets "
              f"(not seen here)", file=sys.stderr)


def file_only_options(args: argparse.Namespace) -> None:
    """Refuse -f, --duration and -w without -i."""
    for given, option in ((args.capture_filter, "-f"), (args.duration, "--duration"),
                          (args.write, "-w")):
        if given is not None:
            args.usage_error(f"{option} needs -i IFACE (a capture filter, a duration and a "
                             f"file to keep the capture in apply to a live capture)")


class LiveStatus:
    """A status line on stderr while a live capture runs, drawn only when stderr is a
    terminal: packets seen and how many failed; redrawn when a count of failures changes,
    else at most ten times a second."""

    def __init__(self, name: str, enabled: bool) -> None:
        self.name = name
        self.enabled = enabled and sys.stderr.isatty()
        self.shown = False
        self.drawn: tuple[int, ...] = ()
        self.when = 0.0

    def update(self, counts: Mapping[str, int]) -> None:
        if not self.enabled:
            return
        import time

        bad = (counts["failed"], counts["icrc_bad"], counts["vcrc_bad"], counts["errors"])
        now = time.monotonic()
        if bad == self.drawn[1:] and now - self.when < 0.1:
            return
        self.drawn, self.when = (counts["records"], *bad), now
        sys.stderr.write(f"\r{self.name}: {counts['records']} packets, {bad[0]} failed (ICRC "
                         f"{bad[1]}, VCRC {bad[2]}, errors {bad[3]})\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        """Take the line away (before other lines are written, and at the end)."""
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False
            self.drawn = ()


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


def _size(source: Source) -> int | None:
    """The size of a capture file, for a progress bar; None for anything else."""
    if isinstance(source, str) and source != "-" and os.path.isfile(source):
        return os.path.getsize(source)
    return None


def _label(source: Source) -> str:
    return source if isinstance(source, str) else str(getattr(source, "name", source))


def inspections(source: Source, args: argparse.Namespace) -> Iterator[Inspection]:
    """Inspect the records of ``source`` (a path or a live capture), honouring ``-c`` (ending
    as soon as the last record is read) and ``--where``."""
    from ibwire.inspect import inspect
    from ibwire.where import compile_where

    where = compile_where(args.where) if getattr(args, "where", None) else None
    for record in records(source, args):
        found = inspect(record)
        if where is None or where(found.fields()):
            yield found


def records(source: Source, args: argparse.Namespace,
            opened: Callable[[CaptureReader], None] | None = None) -> Iterator[CaptureRecord]:
    """The records of ``source`` (a path or a live capture) as read, honouring ``-c``, with
    a progress bar; ``opened`` is given the reader before the first record."""
    from ibwire.pcap import open_capture

    progress = Progress(_label(source), _size(source), not getattr(args, "no_progress", False))
    count = 0
    try:
        with open_capture(source) as reader:
            if opened is not None:
                opened(reader)
            if args.count is not None and args.count <= 0:
                return
            for record in reader:
                count += 1
                _note_shrink(args, record.error)
                progress.update(record.offset)
                yield record
                if args.count is not None and count >= args.count:
                    break
    finally:
        progress.close()


def failure_reason(batch: ScanBatch, row: int) -> str:
    """Why a failing row failed, for a line that names the record first: the dissector's
    error where it has one (the most precise), else the scanner's, then what the CRCs the
    error left placed say; else the CRC values."""
    from ibwire import crc
    from ibwire.dissect import parse
    from ibwire.errors import IbwireError
    from ibwire.inspect import crc_note

    number = int(batch["record"][row]) + 1
    code = int(batch["error"][row])
    if code != 0:
        error = batch.error(row)
        if code != 5:
            try:
                error = parse(bytes(batch.frame(row)), batch.link(row)).error or error
            except IbwireError as exc:
                error = exc
        assert error is not None
        cut = error.cut_by_capture(int(batch["frame.len"][row]), int(batch["frame.orig_len"][row]))
        icrc_ok, vcrc_ok = (int(batch[name][row]) for name in ("icrc_ok", "vcrc_ok"))
        return cut.at_record(number).in_record() + crc_note(
            None if icrc_ok < 0 else icrc_ok == 1, None if vcrc_ok < 0 else vcrc_ok == 1)
    verdict = crc.verify(bytes(batch.frame(row)), batch.link(row))
    bad = []
    if verdict.icrc_ok is False:
        bad.append(f"ICRC mismatch (wire 0x{verdict.icrc_wire:08x}, computed "
                   f"0x{verdict.icrc_computed:08x})")
    if verdict.vcrc_ok is False:
        bad.append(f"VCRC mismatch (wire 0x{verdict.vcrc_wire:04x}, computed "
                   f"0x{verdict.vcrc_computed:04x})")
    return ", ".join(bad)


def scanned(source: Source, args: argparse.Namespace, fields: object
            ) -> Iterator[tuple[ScanBatch, dict[str, np.ndarray], np.ndarray]]:
    """The scanner's batches of ``source`` (a path or a live capture) honouring ``-c``, with a
    progress bar: (batch, its columns cut to the rows kept, the kept rows that failed)."""
    import numpy as np

    from ibwire.scan import scan_capture

    progress = Progress(_label(source), _size(source), not getattr(args, "no_progress", False))
    left = args.count
    try:
        for batch in scan_capture(source, fields=fields):
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
    """A value as JSON has it: bytes as hex text, tuples as lists (lists of bytes too: an SA
    table's gaps, ServiceData items)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return value


def json_line(fields: dict[str, Any]) -> str:
    """One JSON object per line; values as :func:`jsonable` has them (json itself writes
    tuples as lists and asks :func:`_hex` for bytes, so plain values cost no Python call).
    One encoder for every line: ``json.dumps(default=...)`` would make one per call."""
    return _json_encoder().encode(fields) + "\n"


@cache
def _json_encoder() -> Any:
    import json

    return json.JSONEncoder(default=_hex)


def _hex(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
