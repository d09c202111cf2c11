"""``ibwire stats FILE...`` or ``ibwire stats -i IFACE``: counts by encapsulation,
transport, opcode and QP; bytes; the time the capture spans and its rates (packets and bits
per second, of every record and of the InfiniBand/RoCE packets); failures (the first
``--top`` failing records are listed with their reasons). Each file has its own tables
(JSON: one object a line, with its ``file``); an unreadable one is exit status 2.

The counts come from the batch scanner (only the BTH opcode and destination QP columns are
extracted); with ``--where`` each packet is dissected instead, so that any field can be
tested. With ``-i`` the packets dumpcap (else tcpdump) captures are counted as they arrive
(``ibwire.pcap.live``), with a running count on a terminal's stderr; -c, --duration, Ctrl-C
or SIGTERM stop the capture, and the tables follow as for a file.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING

from ibwire.cli.common import (
    LiveStatus,
    add_input_arguments,
    failure_reason,
    file_only_options,
    inspections,
    live_capture,
    scanned,
    shrink_status,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np

    from ibwire.pcap.source import Source

TABLES = ("encapsulation", "transport", "opcode", "destqp", "totals", "time")
"""The tables; "time" holds the earliest and latest timestamps read (``first_ns``,
``last_ns``), from which :func:`rates` derives the duration and rates."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, many=True, live=True)
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    parser.add_argument("--top", type=int, default=20, help="rows per table (default 20)")


def _count(table: Counter[str], keys: np.ndarray, name: object) -> None:
    import numpy as np

    values, counts = np.unique(keys, return_counts=True)
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        table[name(value)] += count  # type: ignore[operator]


def _scanned(source: Source, args: argparse.Namespace, tables: dict[str, Counter[str]],
             failures: list[str]) -> Iterator[None]:
    """Count the packets of ``source`` into ``tables``, yielding after each batch."""
    import numpy as np

    from ibwire.scan.program import PACKET_ENCAPSULATIONS, SCAN_KIND_NAMES, slot_bit
    from ibwire.tables import opcodes

    ops = opcodes()
    totals = tables["totals"]
    from ibwire.scan.program import CAPTURE_ERROR

    for batch, c, failed in scanned(source, args, fields=("bth.opcode", "bth.destqp")):
        error = c["error"]
        stamps = c["timestamp_ns"][error != CAPTURE_ERROR]
        if len(stamps):
            _span(tables["time"], int(stamps.min()), int(stamps.max()))
        cut_header = batch.cut_header()[:len(error)]  # a packet all the same, its CRCs cut
        ib = batch.is_ib()[:len(error)] & ((error == 0) | cut_header)
        totals["records"] += len(error)
        totals["bytes"] += int(c["frame.orig_len"].sum())
        totals["errors"] += int(np.count_nonzero((error > 1) & ~cut_header))
        totals["cut"] += int(np.count_nonzero(batch.cut()[:len(error)]))
        totals["other"] += int(np.count_nonzero(error == 1))
        totals["failed"] += len(failed)
        for row in failed[:max(0, args.top - len(failures))].tolist():
            failures.append(f"record {int(c['record'][row]) + 1}: {failure_reason(batch, row)}")
        totals["ib_packets"] += int(ib.sum())
        totals["ib_bytes"] += int(c["frame.orig_len"][ib].sum())
        totals["payload_bytes"] += int(np.maximum(c["payload.length"][ib], 0).sum())
        totals["icrc_bad"] += int(np.count_nonzero(c["icrc_ok"] == 0))
        totals["vcrc_bad"] += int(np.count_nonzero(c["vcrc_ok"] == 0))
        _count(tables["encapsulation"], c["encapsulation"][ib],
               lambda k: PACKET_ENCAPSULATIONS[SCAN_KIND_NAMES[k]])
        bth = ib & (c["headers"] & slot_bit("bth") != 0)
        opcode = c["bth.opcode"][bth]
        _count(tables["opcode"], opcode, lambda v: ops[v].name if v in ops else f"0x{v:02x}")
        _count(tables["transport"], opcode,
               lambda v: ops[v].transport if v in ops else "unknown")
        _count(tables["destqp"], c["bth.destqp"][bth], lambda v: f"{v:#08x}")
        yield


def _inspected(source: Source, args: argparse.Namespace, tables: dict[str, Counter[str]],
               failures: list[str]) -> Iterator[None]:
    """Count the packets of ``source`` into ``tables``, yielding after each."""
    for found in inspections(source, args):
        yield
        if found.record.error is None:
            _span(tables["time"], found.record.timestamp_ns, found.record.timestamp_ns)
        totals = tables["totals"]
        totals["records"] += 1
        totals["bytes"] += found.record.orig_len
        if found.failed:
            totals["failed"] += 1
            if len(failures) < args.top:
                failures.append(f"record {found.record.index + 1}: {found.reason}")
        totals["cut"] += found.cut and not found.failed
        if found.error is not None and not found.cut:  # the verdicts of the CRCs it placed
            totals["errors"] += 1
            totals["icrc_bad"] += found.icrc_ok is False
            totals["vcrc_bad"] += found.vcrc_ok is False
            continue
        packet = found.packet
        if packet is None or (not packet.is_ib and packet.encapsulation != "ib_raw"):
            totals["other"] += 1
            continue
        totals["ib_packets"] += 1
        totals["ib_bytes"] += found.record.orig_len
        totals["payload_bytes"] += packet.payload_length
        totals["icrc_bad"] += found.icrc_ok is False
        totals["vcrc_bad"] += found.vcrc_ok is False
        tables["encapsulation"][packet.encapsulation] += 1
        if not packet.is_ib or "bth" not in packet:  # raw, or a BTH the capture cut
            continue
        name = packet.opcode.name if packet.opcode else f"0x{packet.fields()['bth.opcode']:02x}"
        tables["opcode"][name] += 1
        tables["transport"][packet.opcode.transport if packet.opcode else "unknown"] += 1
        tables["destqp"][f"{packet.fields()['bth.destqp']:#08x}"] += 1


def _span(time: Counter[str], first: int, last: int) -> None:
    """Widen the span of ``time`` (``first_ns``, ``last_ns``) to hold ``first``..``last``."""
    if "first_ns" not in time:
        time["first_ns"], time["last_ns"] = first, last
    else:
        time["first_ns"] = min(time["first_ns"], first)
        time["last_ns"] = max(time["last_ns"], last)


def rates(tables: dict[str, Counter[str]]) -> dict[str, float | None]:
    """The capture's duration (latest minus earliest timestamp) in seconds, and per second
    of it: records and bits (of every record as on the wire), InfiniBand/RoCE packets and
    their bits; None where no time passed (or none was read)."""
    time, totals = tables["time"], tables["totals"]
    seconds = (time["last_ns"] - time["first_ns"]) / 1e9 if "first_ns" in time else None
    out: dict[str, float | None] = {"duration_s": seconds}
    for key, value in (("packets_per_s", totals["records"]), ("bits_per_s", 8 * totals["bytes"]),
                       ("ib_packets_per_s", totals["ib_packets"]),
                       ("ib_bits_per_s", 8 * totals["ib_bytes"])):
        out[key] = value / seconds if seconds else None
    return out


def collect(args: argparse.Namespace, source: Source | None = None,
            status: LiveStatus | None = None) -> tuple[dict[str, Counter[str]], list[str]]:
    """The count tables of ``source`` (default: the FILE argument), and the first ``--top``
    failing records with their reasons; ``status`` is kept up to date as they are counted."""
    tables: dict[str, Counter[str]] = {name: Counter() for name in TABLES}
    failures: list[str] = []
    counting = (_inspected if args.where else _scanned)(
        args.file if source is None else source, args, tables, failures)
    for _ in counting:
        if status is not None:
            status.update(tables["totals"])
    if status is not None:
        status.update(tables["totals"])
    return tables, failures


def run(args: argparse.Namespace) -> int:
    from ibwire.errors import IbwireError

    if args.interface is not None:
        with live_capture(args) as live:
            status = LiveStatus(live.name, not args.no_progress)
            try:
                tables, failures = collect(args, live, status)
            finally:
                status.clear()
        _print(live.name, tables, failures, args, titled=False)
        return shrink_status(args, "stats", live.name)
    file_only_options(args)
    status = 0
    for path in args.files:
        args.file, args.shrunk = path, None  # what collect() reads, what it found
        try:
            tables, failures = collect(args)
        except (IbwireError, OSError) as exc:
            reason = exc if isinstance(exc, IbwireError) else exc.strerror or exc
            print(f"ibwire stats: {reason}", file=sys.stderr)
            status = 2
            continue
        _print(path, tables, failures, args, titled=len(args.files) > 1)
        status = max(status, shrink_status(args, "stats", path))
    return status


def _print(name: str, tables: dict[str, Counter[str]], failures: list[str],
           args: argparse.Namespace, titled: bool) -> None:
    """The tables of capture ``name``: as JSON (with the file's name), or as text, under the
    name when ``titled`` (several files)."""
    import json  # only when run: the start of every verb stays light

    if args.json:
        print(json.dumps({"file": name, **{k: dict(table) for k, table in tables.items()
                                           if k != "time"},
                          "time": {**tables["time"], **rates(tables)}, "failures": failures}))
        sys.stdout.flush()
        return
    if titled:
        print(f"== {name}")
    for title, table in tables.items():
        if title == "time":
            continue
        print(f"{title}:")
        rows = table.items() if title == "totals" else table.most_common(args.top)
        for key, count in rows:
            print(f"  {key:<40} {count:>12}")
        if title != "totals" and len(table) > args.top:
            print(f"  ... {len(table) - args.top} more")
    print("time:")
    for key, value in rates(tables).items():
        shown = "-" if value is None else f"{value:.9f}" if key == "duration_s" else \
            f"{value:.1f}"
        print(f"  {key:<40} {shown:>12}")
    if failures:
        print("failures:")
        for line in failures:
            print(f"  {line}")
        if tables["totals"]["failed"] > len(failures):
            print(f"  ... {tables['totals']['failed'] - len(failures)} more")
    sys.stdout.flush()
