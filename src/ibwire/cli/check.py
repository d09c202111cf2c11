"""``ibwire check FILE...``: verify ICRC, VCRC and structure of every InfiniBand/RoCE packet.

Exit status: 0 when everything verified, 1 when a packet (or a capture record) failed, 2 when
a file could not be read at all. Frames of other protocols are counted, not failed; a record
the capture is unsure of (caplen over the snaplen or its original length) is printed as a
warning and verified like any other.

The work is one batch scan per window of the file (``ibwire.scan``): headers, lengths and
both CRCs in C, no Python per packet. Only failing packets are looked at again, to say why.
With ``--where`` each packet is dissected instead, so that any field can be tested.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator

import numpy as np

from ibwire.cli.common import Progress, add_input_arguments, inspections
from ibwire.errors import IbwireError

COUNTS = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, many=True)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the summary")


def _reason(batch: object, row: int) -> str:
    """Why a failing row failed: the dissector's error where it has one (the most precise),
    else the scanner's, else the CRC values."""
    from ibwire import crc
    from ibwire.dissect import parse
    from ibwire.scan import ScanBatch

    assert isinstance(batch, ScanBatch)
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
        return str(cut.at_record(number))
    verdict = crc.verify(bytes(batch.frame(row)), batch.link(row))
    bad = []
    if verdict.icrc_ok is False:
        bad.append(f"ICRC mismatch (wire 0x{verdict.icrc_wire:08x}, computed "
                   f"0x{verdict.icrc_computed:08x})")
    if verdict.vcrc_ok is False:
        bad.append(f"VCRC mismatch (wire 0x{verdict.vcrc_wire:04x}, computed "
                   f"0x{verdict.vcrc_computed:04x})")
    return ", ".join(bad)


def _warning(warning: IbwireError, number: int) -> str:
    """A capture warning: printed with its record, not counted as a failure."""
    return f"warning: {warning.at_record(number)}"


def _scanned(path: str, args: argparse.Namespace) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, batch by batch, from the scanner."""
    from ibwire.scan import scan_capture

    size = os.path.getsize(path) if path != "-" and os.path.isfile(path) else None
    progress = Progress(path, size, not args.no_progress)
    left = args.count
    try:
        for batch in scan_capture(path, fields=()):  # verdicts only: no header columns
            rows = len(batch) if left is None else min(len(batch), left)
            c = {name: col[:rows] for name, col in batch.columns.items()}
            error, failed = c["error"], batch.failed()[:rows]
            counts: Counter[str] = Counter(
                records=rows, ib=int(batch.is_ib()[:rows].sum()),
                other=int(np.count_nonzero(error == 1)), failed=int(failed.sum()),
                icrc_bad=int(np.count_nonzero(c["icrc_ok"] == 0)),
                vcrc_bad=int(np.count_nonzero(c["vcrc_ok"] == 0)),
                errors=int(np.count_nonzero(error > 1)))
            notes = {int(r): _reason(batch, int(r)) for r in np.flatnonzero(failed)}
            for r, warning in batch.warnings.items():
                if r < rows and r not in notes:  # usable records the capture is unsure of
                    notes[r] = _warning(warning, int(c["record"][r]) + 1)
            lines = [f"{path}: record {int(c['record'][r]) + 1}: {notes[r]}"
                     for r in sorted(notes)]
            yield counts, lines
            if rows:
                progress.update(int(c["frame.offset"][rows - 1]), rows)
            if left is not None:
                left -= rows
                if left <= 0:
                    break
    finally:
        progress.close()


def _inspected(path: str, args: argparse.Namespace) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, packet by packet, from the dissector (for ``--where``)."""
    for found in inspections(path, args):
        counts: Counter[str] = Counter(records=1)
        if found.is_ib or (found.packet is not None and found.packet.encapsulation == "ib_raw"):
            counts["ib"] += 1
        elif found.error is None:
            counts["other"] += 1
        lines = []
        if found.record.warning is not None and not found.failed:
            lines.append(f"{path}: record {found.record.index + 1}: "
                         f"{_warning(found.record.warning, found.record.index + 1)}")
        if found.failed:
            counts["failed"] += 1
            counts["icrc_bad"] += found.icrc_ok is False
            counts["vcrc_bad"] += found.vcrc_ok is False
            counts["errors"] += found.error is not None
            lines.append(f"{path}: record {found.record.index + 1}: {found.reason}")
        yield counts, lines


def check_file(path: str, args: argparse.Namespace) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    failures: list[str] = []
    parts = _inspected(path, args) if args.where else _scanned(path, args)
    for found, lines in parts:
        counts.update(found)
        failures += lines
    return counts, failures


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            counts, failures = check_file(path, args)
        except (IbwireError, OSError) as exc:
            reason = exc if isinstance(exc, IbwireError) else exc.strerror or exc
            print(f"ibwire check: {reason}", file=sys.stderr)
            status = 2
            continue
        if not args.quiet:
            for line in failures:
                print(line)
        if args.json:
            print(json.dumps({"file": path, **{k: counts[k] for k in COUNTS}}))
        else:
            verdict = "OK" if not counts["failed"] else "FAILED"
            print(f"{path}: {verdict}: {counts['records']} records, {counts['ib']} InfiniBand/"
                  f"RoCE packets, "
                  f"{counts['other']} other; {counts['failed']} failed (ICRC "
                  f"{counts['icrc_bad']}, VCRC {counts['vcrc_bad']}, errors {counts['errors']})")
        if counts["failed"]:
            status = max(status, 1) if status != 2 else 2
    sys.stdout.flush()
    return status
