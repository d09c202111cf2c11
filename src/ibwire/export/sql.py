"""DuckDB over an exported dataset (the ``sql`` extra): views ``packets`` and ``connections``.

``packets`` is every file under ``DIR/packets`` (Hive partitions read back as columns),
``connections`` every file under ``DIR/connections`` (``ibwire export --qp``), whichever
format they were written in. Column names hold dots: quote them (``"bth.opcode"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ibwire.errors import IbwireError
from ibwire.export.write import FORMATS

MISSING = "ibwire sql needs duckdb: pip install 'ibwire[sql]'"
VIEWS = ("packets", "connections")


class DatasetError(IbwireError):
    """An export directory without the files a query needs."""


def duckdb_module() -> Any:
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    return duckdb


def _source(con: Any, root: Path, view: str) -> str | None:
    """The SQL that reads the files of ``view`` (None: there are none); DatasetError if
    they are of more than one format (a view reads one: the others would be left out)."""
    where = root / view
    found = [ext for ext in FORMATS.values() if any(where.rglob(f"*{ext}"))]
    if len(found) > 1:
        raise DatasetError(f"{where}: holds {' and '.join(found)} files: a dataset has one "
                           "format (export each format to its own directory)")
    for ext, reader in ((".parquet", "read_parquet"), (".csv", "read_csv")):
        if ext in found:
            pattern = str(where / "**" / f"*{ext}").replace("'", "''")
            extra = ", header = true" if ext == ".csv" else ""
            return (f"SELECT * FROM {reader}('{pattern}', hive_partitioning = true, "
                    f"union_by_name = true{extra})")
    if found == [".arrow"]:
        import pyarrow.dataset as ds

        name = f"_ibwire_{view}"
        con.register(name, ds.dataset(str(where), format="arrow", partitioning="hive"))
        return f"SELECT * FROM {name}"
    return None


def connect(directory: str) -> Any:
    """A DuckDB connection with the dataset's views."""
    duckdb = duckdb_module()
    root = Path(directory)
    if not (root / "packets").is_dir():
        raise DatasetError(f"{directory}: no packets/ here: not an ibwire export directory")
    con = duckdb.connect()
    for view in VIEWS:
        sql = _source(con, root, view)
        if sql is not None:
            con.execute(f"CREATE VIEW {view} AS {sql}")
    return con


def query(directory: str, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of ``sql`` over the dataset in ``directory``."""
    con = connect(directory)
    try:
        result = con.execute(sql)
        names = [d[0] for d in result.description] if result.description else []
        return names, result.fetchall()
    finally:
        con.close()
