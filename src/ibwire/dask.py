"""Captures as a Dask DataFrame, and the export as Dask tasks (the ``dask`` extra).

    from ibwire.dask import read_captures
    df = read_captures("/captures/*.pcap", fields=["bth", "icrc_ok"])
    df.groupby("capture")["icrc_ok"].sum().compute()

:func:`read_captures` builds the frame with ``dask.dataframe.from_map``: one task per
capture file, or, with ``chunk_bytes``, per chunk of a big classic pcap
(``ibwire.export.chunks``: boundaries resynchronised on record headers and verified). The
rows and columns are those of ``ibwire export`` (``ibwire.export.schema``), the same whatever
the cutting. :func:`read_connections` gives ``ibwire qp``'s table per capture, one task per
file, or, ``merged``, the table of the files' merged capture (``ibwire.analysis.merged``).
:func:`export_on` runs ``ibwire export`` on a cluster, one task per capture.

A cluster started for reading captures reads them faster with :data:`WORKER_CONFIG` set
(``dask.config.set(WORKER_CONFIG)`` before it starts): see there.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Sequence
from typing import Any

from ibwire.export import schema as sch
from ibwire.export.chunks import Chunk, ChunkFile, chunks
from ibwire.export.write import Options, Outcome, capture_name, connection_table

MISSING = "ibwire.dask needs dask: pip install 'ibwire[dask]'"

#: Dask configuration for a cluster whose workers read captures, to set (``with
#: dask.config.set(WORKER_CONFIG):``) where its workers are started: the environment its
#: nannies give the workers. Dask starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``,
#: and setting any of glibc's malloc thresholds also fixes the size above which an
#: allocation gets pages of its own at 128 KiB (glibc raises it otherwise, up to 32 MiB, as
#: such blocks are freed); Arrow's default allocator (mimalloc) gives memory back too. Each
#: partition's columns were then faulted in afresh: 75-88k page faults for four partitions
#: of 200k packets (every column) on one worker, against 6k with this, and 0.7-1.2 s
#: against 0.5-0.7 s. With this, workers allocate as a plain process does: the variable
#: unset, and Arrow on the system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``, for
#: everything Arrow does in those workers). A worker then keeps up to twice its largest
#: freed block (64 MiB at most) rather than trimming to 64 KiB. A nanny also copies the
#: variables it sets into the environment of the process that starts it, where they stay:
#: a cluster started later by that process gets Dask's from there, whatever this says.
WORKER_CONFIG: dict[str, Any] = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.nanny.pre-spawn-environ.ARROW_DEFAULT_MEMORY_POOL": "system"}


def _dask() -> Any:
    try:
        import dask.dataframe as dd
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    return dd


def _paths(paths_or_glob: str | Sequence[str]) -> list[str]:
    """The captures named: paths, and globs expanded (sorted); ValueError if there are
    none, or a glob matches nothing."""
    items = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else paths_or_glob
    out: list[str] = []
    for item in map(os.fspath, items):
        found = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not found:
            raise ValueError(f"no capture matches {item!r}")
        out.extend(found)
    if not out:
        raise ValueError("no captures given")
    return out


def _frame(table: Any) -> Any:
    import pandas as pd

    return table.to_pandas(types_mapper=pd.ArrowDtype, use_threads=False)


def _read_part(part: tuple[Chunk, tuple[str, ...], bool, Any]) -> Any:
    """One partition: the rows of a capture or of a chunk of one, in the task's thread alone
    (a worker's parallelism is its tasks: threads of our own would compete with them). A
    whole capture is analysed as it is read (``ibwire.export.connections.Labeller``); a
    chunk's connections come from the analysis of its whole file, made beforehand."""
    import io

    import pyarrow as pa

    from ibwire.export.connections import Labeller
    from ibwire.export.write import capture_tables

    chunk, columns, other, streams = part
    name = capture_name(chunk.path)
    every = columns == sch.selected_columns(None)

    def tables(labels: Any) -> list[Any]:
        source: Any = chunk.path
        if chunk.stop >= 0:
            source = io.BufferedReader(ChunkFile(chunk), 1 << 20)
        seen: list[int] = []
        # the partition's rows are held whole: with every column, its tables may as well
        # hold the batches' scanned columns themselves (views) as copies of nearly all of
        # them; with some, copies keep only what was asked for
        got = [t for t, *_ in capture_tables(source, name, columns, labels, other,
                                             chunk.first_record, seen, threads=1,
                                             views=every)]
        if chunk.stop >= 0:
            source.close()
            _verify_chunk(chunk, seen)
        return got

    if streams is not None:
        found = tables(streams)
    else:
        labeller = Labeller(observe=False)  # the numbers, not ibwire qp's table
        found = tables(labeller)
        if not labeller.finish():  # the end renumbered connections: again, with the final
            found = tables(labeller.labels)
    schema = sch.schema(columns)
    return _frame(pa.concat_tables(found) if found else schema.empty_table())


def _verify_chunk(chunk: Chunk, seen: list[int]) -> None:
    """A chunk must hold the records its boundaries promise, every one readable."""
    from ibwire.errors import CaptureError

    records, failed = sum(n for n in seen if n > 0), -sum(n for n in seen if n < 0)
    if failed or (chunk.records >= 0 and records != chunk.records):
        raise CaptureError(f"{chunk.path}: chunk {chunk.start}..{chunk.stop} read "
                           f"{records} records ({failed} unreadable), expected "
                           f"{chunk.records}", offset=chunk.start)


def read_captures(paths_or_glob: str | Sequence[str], fields: Sequence[str] | None = None,
                  *, other: bool = False, chunk_bytes: int | None = None) -> Any:
    """A Dask DataFrame of the captures' rows (``ibwire export``'s columns; ``fields`` as
    ``--fields``, ``other`` as ``--all``). With ``chunk_bytes``, a classic pcap bigger than
    that is read as chunks of about that size, each a task: its connections then come from
    one analysis of the whole file (``ibwire.export.connections``), made here first."""
    dd = _dask()
    columns = sch.selected_columns(fields)
    parts: list[tuple[Chunk, tuple[str, ...], bool, Any]] = []
    for path in _paths(paths_or_glob):
        pieces = chunks(path, chunk_bytes) if chunk_bytes else [Chunk(path, 0, -1)]
        labels = None
        if len(pieces) > 1:
            from ibwire.export.connections import label

            labels = label(path, observe=False)
        parts.extend((piece, columns, other, labels) for piece in pieces)
    meta = _frame(sch.schema(columns).empty_table())
    import dask

    # The partitions' text columns are Arrow strings already: without this, Dask adds a
    # string-conversion task per partition, which the scheduler may place on another worker
    # than the partition (moving every row there for nothing).
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_map(_read_part, parts, meta=meta, enforce_metadata=False)


def _connections_frame(table: Any) -> Any:
    """A connections table as pandas, its list columns as Arrow-backed lists (as objects,
    Dask's string conversion would take them for text)."""
    import pandas as pd
    import pyarrow as pa

    def nested(kind: Any) -> Any:
        return pd.ArrowDtype(kind) if pa.types.is_list(kind) else None

    return table.to_pandas(types_mapper=nested)


def _connections_part(path: str, options: dict[str, Any]) -> Any:
    from ibwire.analysis import analyse

    return _connections_frame(connection_table(capture_name(path), analyse(path, **options)))


def _summary_part(path: str) -> Any:
    from ibwire.analysis.merged import summarise

    return summarise(path, capture_name(path))


def _merged_part(summaries: list[Any], name: str, options: dict[str, Any]) -> Any:
    from ibwire.analysis.merged import analyse_merged

    return _connections_frame(connection_table(name, analyse_merged(summaries, **options)))


def read_connections(paths_or_glob: str | Sequence[str], *, merged: bool = False,
                     name: str = "merged", pmtu: int | None = None, cnp_scope: str = "qp",
                     cnp_interval_us: float = 4.0) -> Any:
    """``ibwire qp``'s table (``ibwire export --qp``'s columns), as a Dask DataFrame.

    Without ``merged``: each capture's own table, one task per file. With ``merged``: the
    table of the files' merged capture (records in timestamp order, as ``mergecap`` merges
    them: one capture cut into files by ``tcpdump -C``/``-G`` or a ring buffer, or several
    taps), one partition whose ``capture`` is ``name``: a task per file summarises it
    (``ibwire.analysis.merged.summarise``) and one task analyses the summaries together,
    with findings' record numbers those of the merged capture. ``pmtu``, ``cnp_scope`` and
    ``cnp_interval_us`` are ``ibwire qp``'s options."""
    dd = _dask()
    paths = _paths(paths_or_glob)
    options = {"pmtu": pmtu, "cnp_scope": cnp_scope, "cnp_interval_us": cnp_interval_us}
    if merged:
        from dask import delayed

        from ibwire.analysis import Analysis

        # not pure: a file may change between two computations
        summaries = [delayed(_summary_part)(p) for p in paths]
        table = delayed(_merged_part)(summaries, name, options)
        meta = _connections_frame(connection_table(name, Analysis([]))).iloc[:0]
        return dd.from_delayed([table], meta=meta, verify_meta=False)
    meta = _connections_part(paths[0], options).iloc[:0]
    return dd.from_map(_connections_part, paths, args=(options,), meta=meta,
                       enforce_metadata=False)


def _allocators() -> tuple[str | None, str]:
    """What WORKER_CONFIG sets, as a worker has it: its malloc trim setting, Arrow's
    allocator."""
    import pyarrow as pa

    return os.environ.get("MALLOC_TRIM_THRESHOLD_"), pa.default_memory_pool().backend_name


def allocator_note(client: Any) -> str | None:
    """A line saying which of ``client``'s workers allocate otherwise than WORKER_CONFIG has
    them (None when all do as it says)."""
    found = client.run(_allocators)
    trimming = sorted({trim for trim, _ in found.values() if trim is not None})
    pools = sorted({pool for _, pool in found.values() if pool != "system"})
    if not trimming and not pools:
        return None
    how = [f"MALLOC_TRIM_THRESHOLD_={', '.join(trimming)}"] if trimming else []
    how += [f"Arrow's {', '.join(pools)} allocator"] if pools else []
    workers = f"{len(found)} worker" + ("s" if len(found) != 1 else "")
    return (f"{workers}, {' and '.join(how)}: they fault their memory in afresh for "
            "every capture they read; ibwire.dask.WORKER_CONFIG, set where the cluster "
            "starts, has them keep it (docs/api/dask.md)")


def export_on(scheduler: str | Any, paths: Sequence[str], opts: Options,
              note: Callable[[str], object] | None = None) -> list[Outcome]:
    """``ibwire export`` of ``paths`` as tasks on a Dask cluster (a scheduler address or a
    ``distributed.Client``), one per capture; outcomes in ``paths`` order. ``note`` is
    given :func:`allocator_note`'s line, if any."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    from ibwire.export.write import check_layout, check_names, export_capture

    check_names(paths, opts.name)
    check_layout(paths, opts)
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        if note is not None and (line := allocator_note(client)) is not None:
            note(line)
        futures = client.map(export_capture, list(paths), opts=opts, pure=False)
        return list(client.gather(futures))
    finally:
        if client is not scheduler:
            client.close()
