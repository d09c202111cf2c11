"""``ibwire export FILE... -o DIR``: captures as a dataset of Parquet (Arrow IPC, CSV) files,
one row per InfiniBand/RoCE packet (``--all``: per record) with the columns of
``ibwire.export.schema``; ``--qp`` adds ``ibwire qp``'s table per capture, ``--qp-merged
NAME`` that of the captures merged in timestamp order (``ibwire.analysis.merged``, read in
this process). Captures already exported into DIR are skipped unless ``--force``; ``-j N``
exports N captures at a time, ``--scheduler ADDRESS`` on a Dask cluster (the ``dask``
extra).

Exit status 1 when a capture could not be read, or has records or packets that could not be
(they are rows with an ``error``); 0 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.util
import sys
from typing import TYPE_CHECKING

from ibwire.export.write import FORMATS, PARTITIONS

if TYPE_CHECKING:
    from ibwire.export.write import Options, Outcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="capture files (pcap, pcapng, ERF, gzip); globs are expanded; "
                        "'-' standard input (named stdin in the dataset)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="dataset directory (created; packets/, connections/)")
    parser.add_argument("--format", choices=tuple(FORMATS), default="parquet",
                        help="file format (default parquet)")
    parser.add_argument("--fields", default=None, metavar="LIST",
                        help="comma-separated columns or headers to keep (bth,reth,icrc_ok); "
                        "capture, record, timestamp_ns, connection and error are always kept")
    parser.add_argument("--partition-by", choices=PARTITIONS, default=None,
                        help="Hive partitions: capture=NAME/, date=YYYY-MM-DD/ (UTC), or "
                        "capture=NAME/connection=N/ (qp)")
    parser.add_argument("--all", action="store_true",
                        help="every record, other traffic too (default: InfiniBand/RoCE "
                        "packets and records that could not be read)")
    parser.add_argument("--qp", action="store_true",
                        help="also ibwire qp's per-connection table (connections/)")
    parser.add_argument("--qp-merged", default=None, metavar="NAME",
                        help="also ibwire qp's table of the files merged in timestamp order "
                        "(one capture cut into files, or several taps), as mergecap merges "
                        "them: connections/NAME")
    parser.add_argument("--force", action="store_true",
                        help="export captures already exported into DIR again")
    parser.add_argument("--name", default=None, metavar="NAME",
                        help="the capture's name in the dataset (one FILE; default its file "
                        "name)")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                        help="captures exported at a time, one process each (default 1)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run the export as tasks on this Dask scheduler (the 'dask' "
                        "extra); DIR must be reachable from its workers")


def _paths(patterns: list[str]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        out.extend(found or [pattern])
    return out


def run(args: argparse.Namespace) -> int:
    from ibwire.export.schema import selected_columns
    from ibwire.export.write import Options, export_many

    # found, not imported: the import is made while the scan starts (``_Partitions.prepare``)
    if importlib.util.find_spec("pyarrow") is None:
        print("ibwire export: needs pyarrow: pip install 'ibwire[export]'", file=sys.stderr)
        return 2
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    try:
        selected_columns(fields)
    except ValueError as exc:
        print(f"ibwire export: {exc}", file=sys.stderr)
        return 2
    opts = Options(args.output, args.format, fields, args.partition_by, args.all, args.qp,
                   args.force, args.name)
    paths = _paths(args.files)
    if args.format == "arrow" and args.partition_by in ("date", "qp"):
        _more_files()
    try:
        if args.scheduler:
            from ibwire.dask import export_on

            outcomes = export_on(args.scheduler, paths, opts,
                                 note=lambda line: print(f"ibwire export: note: {line}",
                                                         file=sys.stderr))
        else:
            outcomes = export_many(paths, opts, max(1, args.jobs))
    except ValueError as exc:
        print(f"ibwire export: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # --scheduler without the dask extra
        print(f"ibwire export: {exc}", file=sys.stderr)
        return 2
    status = 0
    if args.qp_merged is not None:
        status = _merged(paths, opts, args.qp_merged, outcomes)
    for o in outcomes:
        if o.skipped:
            print(f"{o.capture}: already exported (--force to redo)", file=sys.stderr)
        elif o.failure is not None:
            print(f"ibwire export: {o.capture}: {o.failure}", file=sys.stderr)
            status = 1
        else:
            note = f", {o.error_rows} with errors" if o.error_rows else ""
            print(f"{o.capture}: {o.rows} rows{note}", file=sys.stderr)
            status = status or (1 if o.error_rows else 0)
    return status


def _more_files() -> None:
    """Let this process hold as many files open as the system lets it (the soft limit
    raised to the hard one): an Arrow IPC file stays open until it is complete, one per
    partition (Parquet and CSV files are closed between their writes)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _merged(paths: list[str], opts: Options, name: str, outcomes: list[Outcome]) -> int:
    """``--qp-merged``: the merged capture's connections, when every capture was read."""
    from ibwire.errors import IbwireError
    from ibwire.export.write import export_merged_connections, names_of

    if name in names_of(paths, opts) or not name or "/" in name:
        print(f"ibwire export: --qp-merged {name!r}: a capture's name or not a file name",
              file=sys.stderr)
        return 1
    if any(o.failure is not None for o in outcomes):
        print("ibwire export: --qp-merged: not written, a capture failed", file=sys.stderr)
        return 1
    try:
        written = export_merged_connections(paths, opts, name)
    except (IbwireError, OSError) as exc:
        print(f"ibwire export: --qp-merged: {exc}", file=sys.stderr)
        return 1
    print(f"{written}: connections of the merged captures", file=sys.stderr)
    return 0
