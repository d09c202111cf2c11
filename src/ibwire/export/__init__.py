"""Captures as columnar datasets: Parquet, Arrow IPC or CSV files of the scanner's columns.

    from ibwire.export import Options, export_many
    export_many(["a.pcap", "b.pcapng"], Options("out", partition_by="capture", qp=True))

The schema (one for every capture, ``ibwire.schema_version`` in the Arrow metadata) is in
:mod:`ibwire.export.schema` and docs/reference/export-schema.md; the files and their layout in
:mod:`ibwire.export.write`; ``ibwire sql`` (DuckDB) in :mod:`ibwire.export.sql`; the Dask
front end in :mod:`ibwire.dask`. Needs the ``export`` extra (pyarrow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ibwire._lazy import lazy_exports

if TYPE_CHECKING:
    from ibwire.export.schema import SCHEMA_VERSION
    from ibwire.export.write import Options, Outcome, export_capture, export_many

__all__ = ["SCHEMA_VERSION", "Options", "Outcome", "export_capture", "export_many"]

_exports = lazy_exports(__name__, globals(), {
    "SCHEMA_VERSION": "ibwire.export.schema",
    "Options": "ibwire.export.write", "Outcome": "ibwire.export.write",
    "export_capture": "ibwire.export.write", "export_many": "ibwire.export.write"})


def __getattr__(name: str) -> Any:
    return _exports(name)
