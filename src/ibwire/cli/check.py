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
import sys
from collections import Counter
from collections.abc import Iterator

import numpy as np

from ibwire.cli.common import add_input_arguments, failure_reason, inspections, scanned
from ibwire.errors import IbwireError

COUNTS = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, many=True)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the summary")


def _warning(warning: IbwireError, number: int) -> str:
    """A capture warning: printed with its record, not counted as a failure."""
    return f"warning: {warning.at_record(number)}"


def _scanned(path: str, args: argparse.Namespace) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, batch by batch, from the scanner."""
    for batch, c, failed in scanned(path, args, fields=()):  # verdicts only
        error = c["error"]
        counts: Counter[str] = Counter(
            records=len(error), ib=int(batch.is_ib()[:len(error)].sum()),
            other=int(np.count_nonzero(error == 1)), failed=len(failed),
            icrc_bad=int(np.count_nonzero(c["icrc_ok"] == 0)),
            vcrc_bad=int(np.count_nonzero(c["vcrc_ok"] == 0)),
            errors=int(np.count_nonzero(error > 1)))
        notes = {int(r): failure_reason(batch, int(r)) for r in failed}
        for r, warning in batch.warnings.items():
            if r < len(error) and r not in notes:  # usable records the capture is unsure of
                notes[r] = _warning(warning, int(c["record"][r]) + 1)
        yield counts, [f"{path}: record {int(c['record'][r]) + 1}: {notes[r]}"
                       for r in sorted(notes)]


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
