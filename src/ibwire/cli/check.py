"""``ibwire check FILE...`` or ``ibwire check -i IFACE``: verify ICRC, VCRC and structure of
every InfiniBand/RoCE packet, in capture files or as they are captured.

Exit status: 0 when everything verified, 1 when a packet (or a capture record) failed, 2 when
a file could not be read at all. A packet the capture cut (a snap length: headers-only
captures) cannot be verified and is not a failure: the summary counts such packets and says
the snap length; ``--strict`` makes them failures. Frames of other protocols are counted, not failed; a record
the capture is unsure of (caplen over the snaplen or its original length) is printed as a
warning and verified like any other. A packet whose headers are broken where the length fields
still place its CRCs is printed with its error and what the CRCs say: good, the sender built
it wrong; bad, it was corrupted after (``ibwire.inspect.crc_note``); a bad CRC there counts in
both the ICRC (or VCRC) and the errors column, the packet once in ``failed``.

The work is one batch scan per window of the file (``ibwire.scan``): headers, lengths and
both CRCs in C, no Python per packet. A classic pcap or pcapng file (without ``-c``) is only
counted, two threads at once (``ibwire.scan.tally``), with neither numpy nor the header
declarations loaded unless a packet fails. Only failing packets are looked at again, to say why. With
``--where`` each packet is dissected instead, so that any field can be tested.

With ``-i`` the packets dumpcap (else tcpdump) captures are scanned as they arrive
(``ibwire.pcap.live``) and each failure is printed when found; -c, --duration, Ctrl-C or
SIGTERM stop the capture, and the summary and exit status follow as for a file (2 when the
capture could not run).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ibwire.cli.common import (
    LiveStatus,
    Progress,
    add_input_arguments,
    failure_reason,
    file_only_options,
    inspections,
    live_capture,
    scanned,
)
from ibwire.errors import IbwireError

if TYPE_CHECKING:
    import numpy as np

    from ibwire.pcap.source import Source
    from ibwire.scan import ScanBatch
    from ibwire.scan.tally import Flagged, Tally
    from ibwire.scan.tally_pcapng import PcapngTally

COUNTS = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors", "cut",
          "cut_kept")
#: Counts that are a maximum over the parts, not a sum.
_MAXIMA = ("cut_kept",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, many=True, live=True)
    parser.add_argument("--json", action="store_true",
                        help="one JSON document: the totals, then each file's counts, "
                             "failures and warnings")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the summary")
    parser.add_argument("--strict", action="store_true",
                        help="a packet the capture cut (snap length), whose CRCs cannot be "
                             "verified, is a failure (exit 1)")


def _warning(warning: IbwireError, number: int) -> str:
    """A capture warning: printed with its record, not counted as a failure."""
    return f"warning: {warning.at_record(number).in_record()}"


def _report(path: str, batch: ScanBatch, c: dict[str, np.ndarray], failed: np.ndarray
            ) -> tuple[Counter[str], list[str]]:
    """Counts and failure lines of scanned rows ``c`` of ``batch`` (``failed``: its failing
    rows)."""
    import numpy as np

    from ibwire.scan.batch import cut_counts

    error = c["error"]
    counts: Counter[str] = Counter(
        records=len(error), ib=int(batch.is_ib()[:len(error)].sum()),
        other=int(np.count_nonzero(error == 1)), failed=len(failed),
        icrc_bad=int(np.count_nonzero(c["icrc_ok"] == 0)),
        vcrc_bad=int(np.count_nonzero(c["vcrc_ok"] == 0)),
        errors=int(np.count_nonzero((error > 1) & ~batch.cut_header()[:len(error)])))
    counts["cut"], counts["cut_kept"] = cut_counts(batch, c["frame.len"])
    notes = {int(r): failure_reason(batch, int(r)) for r in failed}
    for r, warning in batch.warnings.items():
        if r < len(error) and r not in notes:  # usable records the capture is unsure of
            notes[r] = _warning(warning, int(c["record"][r]) + 1)
    return counts, [f"{path}: record {int(c['record'][r]) + 1}: {notes[r]}"
                    for r in sorted(notes)]


def _scanned(path: str, args: argparse.Namespace, source: Source | None = None
             ) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, batch by batch, from the scanner (of ``source``, default
    ``path``; ``path`` names it)."""
    for batch, c, failed in scanned(path if source is None else source, args,
                                    fields=()):  # verdicts only
        yield _report(path, batch, c, failed)


def _flagged(path: str, found: Flagged) -> list[str]:
    """The lines of a record the counting scan flagged: a failure or a capture warning; it
    is scanned again as the full path scans it."""
    import numpy as np

    from ibwire.pcap.index import error_index, frame_index
    from ibwire.scan import scan_index

    index = error_index(found.error) if found.error is not None else frame_index(
        found.frame, found.link, found.linktype, found.timestamp_ns, found.orig_len,
        found.warning)
    batch = scan_index(index, found.record, ())
    return _report(path, batch, batch.columns, np.flatnonzero(batch.failed()))[1]


def _ending(path: str, error: IbwireError, record: int) -> tuple[Counter[str], list[str]]:
    """The counts and line of the error that ends a capture's record walk."""
    import numpy as np

    from ibwire.pcap.index import error_index
    from ibwire.scan import scan_index

    batch = scan_index(error_index(error), record, ())
    return _report(path, batch, batch.columns, np.flatnonzero(batch.failed()))


def _tallied(path: str, tally: Tally | PcapngTally, args: argparse.Namespace
             ) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, window by window, from the counting scan."""
    progress = Progress(path, os.path.getsize(path), not args.no_progress)
    try:
        with tally:
            for window in tally.windows():
                counts = Counter(dict(zip(tally.names, window.counts, strict=True)))
                lines = [line for found in window.flagged for line in _flagged(path, found)]
                if window.error is not None:  # the record walk ends on it
                    more, end = _ending(path, window.error, window.error_record)
                    counts.update(more)
                    lines += end
                progress.update(window.position, window.counts[0])
                yield counts, lines
    finally:
        progress.close()


def _inspected(path: str, args: argparse.Namespace, source: Source | None = None
               ) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines, packet by packet, from the dissector (for ``--where``)."""
    for found in inspections(path if source is None else source, args):
        counts: Counter[str] = Counter(records=1)
        if found.is_ib or (found.packet is not None and found.packet.encapsulation == "ib_raw"):
            counts["ib"] += 1
        elif found.error is None:
            counts["other"] += 1
        lines = []
        if found.record.warning is not None and not found.failed:
            lines.append(f"{path}: record {found.record.index + 1}: "
                         f"{_warning(found.record.warning, found.record.index + 1)}")
        if found.cut and not found.failed:
            counts["cut"] += 1
            counts["cut_kept"] = len(found.record.frame)
        if found.failed:
            counts["failed"] += 1
            counts["icrc_bad"] += found.icrc_ok is False
            counts["vcrc_bad"] += found.vcrc_ok is False
            counts["errors"] += found.error is not None
            lines.append(f"{path}: record {found.record.index + 1}: {found.reason}")
        yield counts, lines


def _parts(path: str, args: argparse.Namespace, source: Source | None = None
           ) -> Iterator[tuple[Counter[str], list[str]]]:
    """Counts and failure lines of ``path`` (or of ``source``, named ``path``), part by
    part, from the fastest path that can give them."""
    if args.where:
        return _inspected(path, args, source)
    if source is not None:
        return _scanned(path, args, source)
    from ibwire.scan.tally import open_tally

    tally = open_tally(path) if args.count is None else None
    return _scanned(path, args) if tally is None else _tallied(path, tally, args)


def add(counts: Counter[str], more: Counter[str]) -> None:
    """``counts`` += ``more``, the maxima (``_MAXIMA``) kept as maxima."""
    kept = {name: max(counts[name], more[name]) for name in _MAXIMA}
    counts.update(more)
    counts.update({name: value - counts[name] for name, value in kept.items()})


def check_file(path: str, args: argparse.Namespace) -> tuple[Counter[str], list[str]]:
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for found, lines in _parts(path, args):
        add(counts, found)
        failures += lines
    return counts, failures


def failed(counts: Counter[str], args: argparse.Namespace) -> int:
    """The packets that count as failed: with ``--strict``, the cut ones too."""
    return counts["failed"] + (counts["cut"] if args.strict else 0)


def _file_json(path: str, counts: Counter[str], lines: list[str]) -> dict[str, object]:
    """One file's part of ``check --json``: its counts, and its failures and warnings as
    objects (the lines ``check`` prints, ``PATH: record N: reason``, taken apart)."""
    found: dict[str, list[dict[str, object]]] = {"failures": [], "warnings": []}
    for line in lines:
        number, _, reason = line[len(path) + len(": record "):].partition(": ")
        kind, key = ("warnings", "warning") if reason.startswith("warning: ") else \
            ("failures", "reason")
        found[kind].append({"record": int(number),
                            key: reason.removeprefix("warning: ")})
    return {"file": path, **{k: counts[k] for k in COUNTS},
            "verified": counts["ib"] - counts["failed"] - counts["cut"], **found}


def _json_document(files: list[dict[str, object]]) -> str:
    """``check --json``'s one JSON document: the totals of every file, then each file's
    counts, failures and warnings (a file that could not be read: its ``error``)."""
    import json  # here: the start of a plain check stays light

    read = [f for f in files if "error" not in f]
    totals = {k: (max if k == "cut_kept" else sum)(int(f[k]) for f in read)  # type: ignore[call-overload]
              if read else 0 for k in (*COUNTS, "verified")}
    return json.dumps({**totals, "files": files})


def _summary(path: str, counts: Counter[str], args: argparse.Namespace) -> str:
    verdict = "OK" if not failed(counts, args) else "FAILED"
    return (f"{path}: {verdict}: {counts['records']} records, {counts['ib']} InfiniBand/"
            f"RoCE packets, "
            f"{counts['other']} other; {counts['failed']} failed (ICRC "
            f"{counts['icrc_bad']}, VCRC {counts['vcrc_bad']}, errors {counts['errors']})"
            f"{_cut_note(counts, args)}")


def _cut_note(counts: Counter[str], args: argparse.Namespace) -> str:
    """What the summary says of the packets the capture cut, if any."""
    cut = counts["cut"]
    if not cut:
        return ""
    every = "every one of them" if cut == counts["ib"] else f"{cut} of them"
    strict = " (--strict: failures)" if args.strict else ""
    return (f"; {every} cut by the capture after {counts['cut_kept']} bytes (snap length): "
            f"CRCs not verifiable{strict}")  # (bytes of the frame: a cooked header not counted)


def check_live(args: argparse.Namespace) -> int:
    """``check -i IFACE``: each failure printed as it is found, a running count on a
    terminal's stderr, the summary when the capture stops (-c, --duration, Ctrl-C)."""
    counts: Counter[str] = Counter()
    with live_capture(args) as live:
        status = LiveStatus(live.name, not args.no_progress)
        kept: list[str] = []
        try:
            for found, lines in _parts(live.name, args, live):
                add(counts, found)
                if args.json:
                    kept += lines
                elif lines and not args.quiet:
                    status.clear()
                    print("\n".join(lines))
                status.update(counts)
        finally:
            status.clear()
        print(_json_document([_file_json(live.name, counts, kept)]) if args.json else
              _summary(live.name, counts, args))
    return 1 if failed(counts, args) else 0


def run(args: argparse.Namespace) -> int:
    if args.interface is not None:
        return check_live(args)
    file_only_options(args)
    status = 0
    files: list[dict[str, object]] = []
    for path in args.files:
        try:
            counts, failures = check_file(path, args)
        except (IbwireError, OSError) as exc:
            reason = exc if isinstance(exc, IbwireError) else exc.strerror or exc
            print(f"ibwire check: {reason}", file=sys.stderr)
            files.append({"file": path, "error": str(reason)})
            status = 2
            continue
        if args.json:
            files.append(_file_json(path, counts, failures))
        else:
            if not args.quiet:
                for line in failures:
                    print(line)
            print(_summary(path, counts, args))
        if failed(counts, args):
            status = max(status, 1) if status != 2 else 2
    if args.json and any("error" not in f for f in files):  # none read: stderr said why
        print(_json_document(files))
    sys.stdout.flush()
    return status
