"""``ibwire check FILE...``: verify ICRC, VCRC and structure of every InfiniBand/RoCE packet.

Exit status: 0 when everything verified, 1 when a packet (or a capture record) failed, 2 when
a file could not be read at all. Frames of other protocols are counted, not failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from ibwire.cli.common import add_input_arguments, inspections
from ibwire.errors import IbwireError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, many=True)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the summary")


def check_file(path: str, args: argparse.Namespace) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for found in inspections(path, args):
        counts["records"] += 1
        if found.is_ib or (found.packet is not None and found.packet.encapsulation == "ib_raw"):
            counts["ib"] += 1
        elif found.error is None:
            counts["other"] += 1
        if found.failed:
            counts["failed"] += 1
            if found.icrc_ok is False:
                counts["icrc_bad"] += 1
            if found.vcrc_ok is False:
                counts["vcrc_bad"] += 1
            if found.error is not None:
                counts["errors"] += 1
            failures.append(f"{path}: record {found.record.index + 1}: {found.reason}")
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
            print(json.dumps({"file": path, **{k: counts[k] for k in (
                "records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors")}}))
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
