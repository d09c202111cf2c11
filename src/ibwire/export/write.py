"""Writing a capture's rows as dataset files: streaming, atomic per file, resumable.

Layout of an export directory ``DIR``::

    DIR/packets/NAME.parquet                        (no --partition-by)
    DIR/packets/capture=NAME/part-0.parquet         (--partition-by capture)
    DIR/packets/date=YYYY-MM-DD/NAME.parquet        (--partition-by date, UTC)
    DIR/packets/capture=NAME/connection=N/part-0.parquet   (--partition-by qp)
    DIR/connections/NAME.parquet                    (--qp: ``ibwire qp``'s table)
    DIR/_ibwire/NAME.json                           (what was written for NAME: resume)

Hive partitions (``key=value`` directories) as pyarrow, DuckDB, Polars and Spark read them; a
partition column is in the path, not the files. Each file is written under a temporary name
beside its place and renamed when complete; the ``_ibwire`` note is written last, so a capture
whose note exists was exported whole and is skipped unless ``force``. Row groups hold
at most ``ROW_GROUP`` rows, at least half that (but the last): a file's rows are written once
half a row group is pending, so memory holds about two batches per open file (one being
written, one coming), whatever the capture's size. Partitioned by date or connection, a
file's rows may come a few at a time: then, while the rows pending in the files hold more
than ``HELD_BATCHES`` batches, the files holding the oldest are written early (smaller row
groups), and a Parquet file is closed between its row groups, so that neither memory nor
open files grow with the partitions.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ibwire.errors import IbwireError, UnsupportedError
from ibwire.export import schema as sch

ROW_GROUP = 1 << 16
#: Batches whose rows a partitioned export holds at most, pending in its files
#: (``_Partitions._bound``).
HELD_BATCHES = 6
#: Columns whose row-group statistics are written (what queries filter on).
STATISTICS = ("capture", "record", "timestamp_ns", "connection", "encapsulation",
              "bth.opcode", "bth.destqp", "bth.psn", "icrc_ok", "ip.src", "ip.dst")
#: Columns that only grow, written as differences (Parquet's DELTA_BINARY_PACKED: a third of
#: the bytes of plain and zstd).
DELTAS = ("record", "timestamp_ns")
FORMATS = {"parquet": ".parquet", "arrow": ".arrow", "csv": ".csv"}
PARTITIONS = ("capture", "date", "qp")
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NOTES = "_ibwire"


@dataclass
class Options:
    """What to export and how (the ``ibwire export`` options)."""

    out: str
    fmt: str = "parquet"
    fields: Sequence[str] | None = None
    partition_by: str | None = None
    other: bool = False
    qp: bool = False
    force: bool = False
    #: The name of the one capture exported (default: ``capture_name``).
    name: str | None = None


@dataclass
class Outcome:
    """What exporting one capture did."""

    capture: str
    rows: int = 0
    error_rows: int = 0
    files: list[str] = field(default_factory=list)
    skipped: bool = False
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.error_rows == 0


STDIN_NAME = "stdin"


def capture_name(path: str) -> str:
    """A capture's name in the dataset: its file name, ``stdin`` for standard input ('-');
    ``Options.name`` (``--name``) names a run's one capture otherwise."""
    return STDIN_NAME if path == "-" else os.path.basename(path)


def names_of(paths: Sequence[str], opts: Options) -> list[str]:
    """The names the captures of ``paths`` get in the dataset."""
    return [opts.name] if opts.name is not None and len(paths) == 1 \
        else [capture_name(p) for p in paths]


#: ASCII characters Hive (and Spark) escape in a partition's value, as %XX; pyarrow, DuckDB
#: and Polars decode them. Control characters are escaped too.
_ESCAPED = frozenset('"#%\'*/:=?\\{[]^\x7f')


def path_part(name: str) -> str:
    """A capture's name as a file name or a partition's value: Hive's characters escaped
    (``a=b.pcap`` would read back as another key, ``p%41.pcap`` as ``pA.pcap``), and a
    leading ``.`` or ``_`` too (readers skip such files as hidden or metadata)."""
    out = "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in name)
    return f"%{ord(out[0]):02X}{out[1:]}" if out[:1] in (".", "_") else out


def note_path(out: str, name: str) -> Path:
    return Path(out) / NOTES / f"{name}.json"


class _Writer:
    """One thread that encodes and writes row groups (pyarrow, without the GIL) while the
    caller makes the next ones; one write at a time in flight, so memory stays bounded.
    A write's error is raised by the next ``submit`` or ``wait``."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1, thread_name_prefix="ibwire-export-write")
        self.last: Any = None

    def submit(self, work: Any) -> None:
        self.wait()
        self.last = self.pool.submit(work)

    def wait(self) -> None:
        last, self.last = self.last, None
        if last is not None:
            last.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.pool.shutdown(wait=True)


def _no_rows(schema: Any) -> Any:
    """A table of ``schema`` without rows (``schema.empty_table()`` imports pandas)."""
    import pyarrow as pa

    return pa.Table.from_batches([], schema=schema)


class _CsvWriter:
    """A CSV file written a table at a time, the file open only while one is (a partition
    per connection must not hold a descriptor each): the header, then the rows."""

    def __init__(self, path: Path, schema: Any) -> None:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        self.path, self.csv, self.pa = str(path), pacsv, pa
        # Arrow's own files, not Python's: written without the GIL
        with pa.OSFile(self.path, mode="w") as f:
            pacsv.write_csv(_no_rows(schema), f)  # the header alone

    def write_table(self, table: Any) -> None:
        with self.pa.OSFile(self.path, mode="a") as f:
            self.csv.write_csv(table, f, write_options=self.csv.WriteOptions(
                include_header=False))

    def close(self) -> None:
        """Nothing is open between tables."""


@dataclass
class _Rows:
    """Rows ``start`` to ``start + num_rows`` of a table held for several files (a table's
    slice costs a few hundred bytes a column: thousands of partitions each holding slices
    of every batch held gigabytes)."""

    table: Any
    start: int
    num_rows: int

    def rows(self) -> Any:
        return self.table.slice(self.start, self.num_rows)


class _File:
    """One output file being written under a temporary name, a row group at a time (in
    ``thread``'s thread where one is given)."""

    def __init__(self, path: Path, fmt: str, schema: Any, thread: _Writer | None = None
                 ) -> None:
        self.path, self.fmt, self.schema, self.thread = path, fmt, schema, thread
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self.pending: list[Any] = []
        self.count = 0
        self.writer: Any = None
        #: The batches whose rows are pending here (their tables are held until written).
        self.batches: set[int] = set()
        #: Close the file between row groups (a Parquet writer reopens it to append): many
        #: partitions written a little at a time do not each hold a descriptor.
        self.park = False

    def add(self, table: Any, batch: int = 0) -> None:
        self.pending.append(table)
        self.batches.add(batch)
        self.count += table.num_rows
        if self.count >= ROW_GROUP // 2:
            self.flush()

    def _open(self) -> Any:
        if self.fmt == "parquet":
            import ibwire
            from ibwire.export.parquet import ParquetWriter

            names = set(self.schema.names)
            return ParquetWriter(self.tmp, self.schema,
                                 statistics=[n for n in STATISTICS if n in names],
                                 deltas=[n for n in DELTAS if n in names],
                                 # "APP version V": the form parquet-mr parses (it
                                 # ignores the text columns' statistics of a file
                                 # whose writer it cannot name)
                                 created_by=f"ibwire version {ibwire.__version__}")
        if self.fmt == "arrow":
            import pyarrow as pa

            return pa.ipc.new_file(str(self.tmp), self.schema)
        return _CsvWriter(self.tmp, self.schema)

    def flush(self) -> None:
        pending, self.pending, self.count = self.pending, [], 0
        self.batches = set()
        if self.thread is None:
            self._write(pending)
        else:
            self.thread.submit(lambda: self._write(pending))

    def _write(self, pending: list[Any]) -> None:
        import pyarrow as pa

        if self.writer is None:
            self.writer = self._open()
        if pending:
            table = pa.concat_tables([p.rows() if isinstance(p, _Rows) else p
                                      for p in pending])
            if self.fmt == "parquet":  # a row group a call, of at most ROW_GROUP rows
                for start in range(0, table.num_rows, ROW_GROUP):
                    self.writer.write_table(table.slice(start, ROW_GROUP))
                if self.park:
                    self.writer.park()
            else:
                self.writer.write_table(table)

    def close(self) -> None:
        self.flush()
        if self.thread is not None:
            self.thread.wait()
        self.writer.close()
        os.replace(self.tmp, self.path)

    def abandon(self, root: Path | None = None) -> None:
        """Remove the file being written; with ``root`` (the dataset), the partition
        directories it leaves empty too."""
        if self.writer is not None:
            self.writer.close()
        self.tmp.unlink(missing_ok=True)
        if root is not None:
            prune(self.path, root)


def _groups(keys: np.ndarray, table: Any) -> Iterator[tuple[int, _Rows]]:
    """The rows of ``table`` by key (``keys``, one per row), in row order within each: one
    take of the whole table in key order, then a range of it per key (a take per key costs
    a call per column and key: minutes for thousands of connections)."""
    if not len(keys):
        return
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).tolist()
    table = table.take(order)
    for start, end in zip(starts, [*starts[1:], len(keys)], strict=True):
        yield int(ordered[start]), _Rows(table, start, end - start)


def _date(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc).strftime("%Y-%m-%d")


class _Partitions:
    """The open files of one capture's rows, by partition."""

    def __init__(self, opts: Options, name: str, columns: tuple[str, ...]) -> None:
        self.opts, self.name = opts, name
        self.part = path_part(name)  # the capture's name in a path
        self.root = Path(opts.out) / "packets"
        self.ext = FORMATS[opts.fmt]
        dropped = {"capture": ("capture",), "qp": ("capture", "connection")}
        self.columns = tuple(c for c in columns
                             if c not in dropped.get(opts.partition_by or "", ()))
        #: Parquet takes text columns as dictionary arrays (``schema.to_table``)
        self.dictionaries = opts.fmt == "parquet"
        self._schema: Any = None
        self.files: dict[str, _File] = {}
        self.thread = _Writer()
        self.batch = 0  # the number of the batch being added

    @property
    def schema(self) -> Any:
        self.prepare()
        return self._schema

    def prepare(self) -> None:
        """What writing needs, made before the first rows come (pyarrow imported: a tenth of
        an export of 1M packets, spent while the scan starts; ``scan_capture``'s
        ``meanwhile``)."""
        if self._schema is None:
            self._schema = sch.schema(self.columns, dictionaries=self.dictionaries)

    def _file(self, where: str) -> _File:
        f = self.files.get(where)
        if f is None:
            f = self.files[where] = _File(self.root / where, self.opts.fmt, self.schema,
                                          self.thread)
            f.park = self.opts.partition_by in ("date", "qp")
        return f

    def add(self, table: Any, connection: np.ndarray, timestamps: np.ndarray) -> None:
        by = self.opts.partition_by
        table = table.select(list(self.columns))
        self.batch += 1
        if by is None:
            self._file(f"{self.part}{self.ext}").add(table)
        elif by == "capture":
            self._file(f"capture={self.part}/part-0{self.ext}").add(table)
        elif by == "date":
            for day, rows in _groups(timestamps // (86400 * 10**9), table):
                where = f"date={_date(day * 86400 * 10**9)}/{self.part}{self.ext}"
                self._file(where).add(rows, self.batch)
        else:
            for conn, rows in _groups(connection, table):
                key = NULL_PARTITION if conn < 0 else str(conn)
                self._file(f"capture={self.part}/connection={key}/part-0{self.ext}").add(
                    rows, self.batch)
        self._bound()

    def _bound(self) -> None:
        """Write early the rows that hold the oldest batch's table, while more than
        HELD_BATCHES batches are held by rows pending in the files (partitions whose rows
        come a few at a time would otherwise hold every batch to the end)."""
        while True:
            held = {b for f in self.files.values() for b in f.batches}
            if len(held) <= HELD_BATCHES:
                return
            oldest = min(held)
            for f in self.files.values():
                if oldest in f.batches:
                    f.flush()

    def close(self) -> list[str]:
        if not self.files:  # no rows: still one (empty) file, so readers see the schema
            self.add(_no_rows(self.schema), np.zeros(0, np.int64), np.zeros(0, np.int64))
            if not self.files:
                self._file(f"{self.part}{self.ext}" if self.opts.partition_by in (None, "date")
                           else f"capture={self.part}/part-0{self.ext}")
        try:
            for f in self.files.values():
                f.close()
        finally:
            self.thread.close()
        return [str(f.path.relative_to(self.opts.out)) for f in self.files.values()]

    def abandon(self) -> None:
        try:
            with contextlib.suppress(Exception):  # the export failed already; its files go
                self.thread.close()
        finally:
            for f in self.files.values():
                f.abandon(Path(self.opts.out))


def _remove_previous(opts: Options, name: str) -> None:
    """Remove what an earlier export of capture ``name`` wrote: its files, the partition
    directories they leave empty, its note."""
    note = note_path(opts.out, name)
    if note.exists():
        root = Path(opts.out)
        for rel in json.loads(note.read_text()).get("files", []):
            (root / rel).unlink(missing_ok=True)
            prune(root / rel, root)
        note.unlink()


def prune(path: Path, root: Path) -> None:
    """Remove the partition directories above ``path`` (a file of the dataset ``root``
    that is gone) that are left empty; ``packets/`` and ``connections/`` stay."""
    for parent in path.parents:
        if parent == root or parent.parent == root or root not in parent.parents:
            break
        try:
            parent.rmdir()
        except OSError:  # not empty: another capture's or partition's files too
            break


def _write_note(opts: Options, outcome: Outcome) -> None:
    note = note_path(opts.out, outcome.capture)
    note.parent.mkdir(parents=True, exist_ok=True)
    tmp = note.with_name(f".{note.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({**asdict(outcome), "schema_version": sch.SCHEMA_VERSION,
                               "options": {"format": opts.fmt,
                                           "partition_by": opts.partition_by,
                                           "fields": _fields(opts.fields)}}) + "\n")
    os.replace(tmp, note)


def export_capture(path: str, opts: Options) -> Outcome:
    """Export one capture (see the module); problems with the file itself are the
    outcome's ``failure``, records that could not be read are error rows."""
    name = opts.name or capture_name(path)
    outcome = Outcome(name)
    if note_path(opts.out, name).exists() and not opts.force:
        outcome.skipped = True
        return outcome
    _remove_previous(opts, name)
    try:
        analysis = _write_rows(path, opts, outcome)
    except (IbwireError, OSError) as exc:
        outcome.failure = str(exc)
        return outcome
    if opts.qp:
        outcome.files.append(_write_connections(opts, name, analysis))
    _write_note(opts, outcome)
    return outcome


def _write_rows(path: str, opts: Options, outcome: Outcome) -> Any:
    """Write the rows, analysing the capture as they are read (one scan); returns its
    ``ibwire qp`` analysis (with ``--qp``; else None: only the connections' numbers are
    made). Where the end of the capture renumbers connections
    (``Labeller.finish``), the rows are written again with the final numbers."""
    from ibwire.export.connections import Labeller

    labeller = Labeller(observe=opts.qp)  # without --qp, the numbers only
    if not _write_files(path, opts, outcome, labeller):
        if not os.path.isfile(path):  # standard input: what was read is gone
            raise UnsupportedError(
                f"{path}: the end of the capture renumbered its connections (CNPs seen "
                "before the one connection they belong to), which takes a second read; "
                "export it from a file")
        assert labeller.labels is not None
        outcome.rows = outcome.error_rows = 0
        _write_files(path, opts, outcome, labeller.labels)
    assert labeller.labels is not None
    return labeller.labels.analysis


def _write_files(path: str, opts: Options, outcome: Outcome, labels: Any) -> bool:
    """Write the capture's files with connections from ``labels`` (a ``Labels``, or a
    ``Labeller`` that analyses as it goes); False, and nothing written, where a
    ``Labeller``'s numbers did not stand."""
    from ibwire.export.connections import Labeller

    columns = sch.selected_columns(opts.fields)
    parts = _Partitions(opts, outcome.capture, columns)
    try:
        # ibwire qp's table shows the verdicts too (its bad_icrc findings). With --fields
        # the tables hold the scanned columns themselves (views: no copy, 5 % of the
        # export's CPU); a table then keeps its batch's whole column block until written,
        # which with every column (the block's offsets and the scanner's own columns
        # too) is 20 MB more at the peak
        for table, conn, stamps, errors in capture_tables(
                path, outcome.capture, columns, labels, opts.other,
                dictionaries=parts.dictionaries, views=bool(opts.fields),
                verdicts=True if opts.qp else None, meanwhile=parts.prepare):
            parts.add(table, conn, stamps)
            outcome.rows += table.num_rows
            outcome.error_rows += errors
        if isinstance(labels, Labeller) and not labels.finish():
            parts.abandon()
            return False
        outcome.files = parts.close()  # the last row groups' writes end here
    except BaseException:
        parts.abandon()
        raise
    return True


Rows = tuple[Any, np.ndarray, np.ndarray, int]
"""A batch's table, each row's connection and timestamp, and its number of error rows."""


def capture_tables(source: Any, name: str, columns: tuple[str, ...], labels: Any,
                   other: bool, first_record: int = 0, seen: list[int] | None = None,
                   threads: int = 2, dictionaries: bool = False, views: bool = False,
                   verdicts: bool | None = None,
                   meanwhile: Callable[[], object] | None = None) -> Iterator[Rows]:
    """The rows of a capture (path or binary file) as tables, batch by batch: (table, each
    row's connection, its timestamp, how many rows have errors). ``labels`` numbers the
    connections (``ibwire.export.connections``); ``first_record`` is added to the record
    numbers (a chunk of a bigger capture); ``seen`` gets each batch's number of records and
    of capture-level errors; ``threads`` as for ``scan_capture``, batches cut by
    ``labels.window``;
    ``dictionaries`` and ``views`` as for ``schema.to_table``; ``verdicts``: whether the
    scan checks the CRCs (default: where ``columns`` hold the verdicts); ``meanwhile`` as for
    ``scan_capture``."""
    from ibwire.scan import scan_capture
    from ibwire.scan.capture import WINDOW

    wanted = tuple(dict.fromkeys((*sch.scan_fields(columns), *labels.fields)))
    if other:  # what show's classification of other traffic reads (``_payload``)
        from ibwire.cli.shapes import CLASSIFY_KEYS

        wanted = tuple(dict.fromkeys((*wanted, *CLASSIFY_KEYS)))
    if verdicts is None:
        verdicts = bool({"icrc_ok", "vcrc_ok"} & set(columns))
    batches = scan_capture(source, fields=wanted, threads=threads,
                           window=labels.window or WINDOW,
                           release=True,  # frames are read only for a few rows
                           verdicts=verdicts, meanwhile=meanwhile)
    while (batch := next(batches, None)) is not None:
        cols = batch.columns
        if seen is not None:
            seen.append(len(batch))
            seen.append(-len(batch.errors))
        if first_record:
            cols["record"] += first_record
        conn = labels.of(batch)  # every batch: a Labeller analyses them all
        keep = np.arange(len(batch)) if other else np.flatnonzero(cols["error"] != sch.NOT_IB)
        if not len(keep):
            continue
        payload = _payload(batch) if other else None
        table = sch.to_table(batch, keep, name, conn, columns, payload, dictionaries, views)
        errors = int(np.count_nonzero((cols["error"][keep] != 0)  # not a snap length's cut
                                      & (cols["error"][keep] != sch.NOT_IB)
                                      & ~batch.cut_header()[keep]))
        stamps = cols["timestamp_ns"][keep]
        # nothing of the batch but what the table holds (its columns, with ``views``) is
        # held while the caller writes (which may wait for the writer thread): its window
        # goes now, not when the next one comes
        del batch, cols
        yield table, conn[keep], stamps, errors


def _payload(batch: Any) -> np.ndarray:
    """``payload.length`` as ``show --json`` gives it for every row, other traffic too (the
    few rows show dissects, other traffic whose headers the columns cannot tell, dissected
    here the same way). An InfiniBand row's is the scanner's; only the other rows are
    classified (``classify`` works row by row)."""
    from ibwire.cli.shapes import classify
    from ibwire.cli.show import _record
    from ibwire.inspect import inspect

    cols = batch.columns
    payload = cols["payload.length"].copy()
    other = np.flatnonzero(cols["error"] == sch.NOT_IB)
    if not len(other):
        return payload
    key, extra = classify({k: v[other] for k, v in cols.items()}, "json")
    payload[other] = extra["json.payload"]
    for i in np.flatnonzero(key == 0).tolist():
        r = int(other[i])
        payload[r] = inspect(_record(batch, r)).fields().get("payload.length", -1)
    return payload


def connection_columns() -> list[str]:
    """The columns of ``ibwire qp --csv``, in its order."""
    from ibwire.cli.qp import csv_columns

    return csv_columns()


def nested_types() -> dict[str, Any]:
    """The connections table's list columns and their Arrow types (``ibwire qp --json``'s
    lists): latencies as lists of integers, ``longest_stalls`` and ``findings`` as lists of
    structs. A CSV file holds ``ibwire qp --csv``'s text of them instead."""
    import pyarrow as pa

    from ibwire.transport.observed import LATENCIES

    def list_of(kind: Any) -> Any:  # items named as Parquet's LIST names them
        return pa.list_(pa.field("element", kind))

    ints = list_of(pa.int64())
    stall = pa.struct([("start_ns", pa.int64()), ("duration_ns", pa.int64()),
                       ("record", pa.int64()), ("cause", pa.string())])
    finding = pa.struct([("kind", pa.string()), ("records", ints), ("detail", pa.string()),
                         ("count", pa.int64())])
    return {**dict.fromkeys((*LATENCIES, "rnr_wait_ns"), ints),
            "longest_stalls": list_of(stall), "findings": list_of(finding)}


def connection_table(name: str, analysis: Any, *, nested: bool = True) -> Any:
    """``ibwire qp``'s rows of one capture as a table: ``capture``, ``connection`` (its row
    number), then the columns of ``ibwire qp --csv`` (null where it writes nothing). The
    columns of :func:`nested_types` are lists (and structs); without ``nested``, the text
    ``ibwire qp --csv`` writes of them (for a CSV file)."""
    import pyarrow as pa

    from ibwire.cli.qp import _flat
    from ibwire.transport.observed import RATES

    names = connection_columns()
    lists = nested_types()
    rows = []
    for i, d in enumerate(analysis.as_dicts()):
        flat = _flat(d)
        for side in ("requester", "responder"):
            flat[f"{side}.address"] = str(flat[f"{side}.address"])
        if nested:
            flat.update({k: d[k] for k in lists if k in d})
        rows.append({"capture": name, "connection": i, **{k: flat.get(k) for k in names}})
    empty = not rows
    if empty:  # the schema still: one row of nothing, typed below, then dropped
        rows = [{"capture": name, "connection": 0, **dict.fromkeys(names)}]
    table = pa.Table.from_pylist(rows)
    table = table.set_column(1, "connection", table["connection"].cast(pa.int32()))
    # a column with no value in this capture gets the type it has where it has values, so
    # that every capture's file has one schema
    texts = {"cm.state", "cm.reason", "transport", "requester.address", "responder.address",
             *lists}
    for i, f in enumerate(table.schema):
        if nested and f.name in lists:
            table = table.set_column(i, f.name, pa.array(table[f.name].to_pylist(),
                                                         lists[f.name]))
        elif pa.types.is_null(f.type):
            kind = pa.string() if f.name in texts else pa.float64() \
                if f.name in ("ack_rtt_ns.avg", *RATES) else pa.int64()
            table = table.set_column(i, f.name, table[f.name].cast(kind))
    return table.slice(0, 0) if empty else table


def _write_connections(opts: Options, name: str, analysis: Any) -> str:
    """The connections table of one capture as connections/NAME. Parquet goes through
    ``pyarrow.parquet``, not :mod:`ibwire.export.parquet`: that writer has no LIST or
    STRUCT columns (repetition levels), and the table is small (a row per connection)."""
    table = connection_table(name, analysis, nested=opts.fmt != "csv")
    table = table.replace_schema_metadata({"ibwire.schema_version": sch.SCHEMA_VERSION})
    path = Path(opts.out) / "connections" / f"{path_part(name)}{FORMATS[opts.fmt]}"
    if opts.fmt == "parquet":
        import pyarrow.parquet as pq

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            pq.write_table(table, str(tmp), compression="zstd")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return str(path.relative_to(opts.out))
    f = _File(path, opts.fmt, table.schema)
    f.add(table)
    f.close()
    return str(f.path.relative_to(opts.out))


def export_merged_connections(paths: Sequence[str], opts: Options, name: str) -> str:
    """Write ``ibwire qp``'s table of the merged capture of ``paths`` (records in timestamp
    order, as ``mergecap`` merges them: ``ibwire.analysis.merged``) as connections/NAME;
    returns the file written, relative to the dataset."""
    from ibwire.analysis.merged import analyse_merged, summarise

    summaries = [summarise(p, n) for p, n in zip(paths, names_of(paths, opts), strict=True)]
    return _write_connections(opts, name, analyse_merged(summaries))


def check_names(paths: Sequence[str], name: str | None = None) -> None:
    """ValueError if two captures have the same file name (their name in the dataset), or
    ``name`` (``Options.name``) is given for other than one capture, or is no file name."""
    if name is not None:
        if len(paths) != 1:
            raise ValueError(f"--name names one capture, not {len(paths)}")
        if name in ("", ".", "..") or "/" in name or name.startswith("."):
            raise ValueError(f"--name {name!r}: not a file name (it names the capture's "
                             "files)")
        return
    names = [capture_name(p) for p in paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two captures named {twice[0]!r}: captures are named by their "
                         "file name in the dataset")


def _layout(fmt: object, by: object) -> str:
    return f"as {fmt}, " + (f"partitioned by {by}" if by else "not partitioned")


def _fields(fields: Sequence[str] | None) -> list[str] | None:
    return list(fields) if fields else None


def _columns(fields: Sequence[str] | None) -> set[str] | None:
    """The columns ``--fields`` keeps (None: not ibwire's fields)."""
    try:
        return set(sch.selected_columns(fields))
    except ValueError:
        return None


def check_layout(paths: Sequence[str], opts: Options) -> None:
    """ValueError if ``opts.out`` holds captures exported in another format or partition
    layout than ``opts`` asks for: a dataset of mixed layouts cannot be read as one (Hive
    readers refuse files whose partition keys differ, ``ibwire sql`` reads one format), nor
    one of other columns (``--fields``: pyarrow's dataset takes the first file's schema
    and leaves the others' other columns out). Captures this run exports again (``force``,
    the same name) do not count: their files go. A note that is not ibwire's is named."""
    notes = Path(opts.out) / NOTES
    if not notes.is_dir():
        return
    again = set(names_of(paths, opts)) if opts.force else set()
    for note in sorted(notes.glob("*.json")):
        name = note.name[:-len(".json")]
        try:
            data = json.loads(note.read_text())
            saved, files = data["options"], data["files"]
            had = (saved["format"], saved["partition_by"])
            if not isinstance(files, list):  # what --force removes
                raise TypeError("its files are not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{note}: not an export note of ibwire ({exc}); remove it, "
                             f"with the files of {name}, or export elsewhere") from exc
        if name in again:
            continue
        if had != (opts.fmt, opts.partition_by):
            raise ValueError(
                f"{opts.out} holds {name} exported {_layout(*had)}; this export is "
                f"{_layout(opts.fmt, opts.partition_by)}: a dataset has one format and "
                "layout (use the same options, or another directory)")
        # notes of ibwire before --fields was recorded have no "fields": not compared
        if "fields" in saved and _columns(saved["fields"]) != _columns(opts.fields):
            def shown(fields: object) -> str:
                return f"--fields {','.join(fields)}" if fields else "every column"

            raise ValueError(
                f"{opts.out} holds {name} exported with {shown(saved['fields'])}; this "
                f"export has {shown(_fields(opts.fields))}: a dataset has one set of "
                "columns (use the same --fields, or another directory)")


def export_many(paths: Sequence[str], opts: Options, jobs: int = 1) -> list[Outcome]:
    """Export captures, ``jobs`` processes at a time; outcomes in ``paths`` order. Raises
    ValueError, before anything is written, for two captures of one name or a dataset
    exported otherwise (``check_layout``)."""
    check_names(paths, opts.name)
    check_layout(paths, opts)
    if jobs <= 1 or len(paths) <= 1:
        return [export_capture(p, opts) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    from ibwire.stopping import stop_on_terminate

    # workers stop on SIGTERM as on Ctrl-C (their unfinished files removed): a scheduler
    # or ``timeout`` signals the whole process group
    with ProcessPoolExecutor(min(jobs, len(paths)), initializer=stop_on_terminate) as pool:
        try:
            return list(pool.map(export_capture, paths, [opts] * len(paths)))
        except BaseException:  # the captures not started yet are not
            pool.shutdown(wait=True, cancel_futures=True)
            raise
