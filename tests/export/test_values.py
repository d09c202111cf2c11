"""The exported dataset read back without ibwire (pyarrow, DuckDB, Polars): its rows are the
records ``ibwire stats`` counts, and every value is the one ``ibwire show --json`` gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.conftest import shared_captures
from tests.export.helpers import show_json, stats_json

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: Exported columns show --json does not write (they place a row), and how a JSON key differs.
EXTRA = {"capture", "record", "connection", "frame.len", "frame.orig_len"}


def _table(exported: Path, capture: Path):
    return pq.read_table(exported / "packets" / f"{capture.name}.parquet")


@pytest.mark.parametrize("capture", shared_captures(), ids=lambda p: p.name)
def test_every_value_is_shows(exported: Path, capture: Path) -> None:
    rows = _table(exported, capture).to_pylist()
    shown = show_json(capture)
    assert len(rows) == len(shown)
    columns = [c for c in rows[0] if c not in EXTRA] if rows else []
    for row, js in zip(rows, shown, strict=True):
        assert row["record"] == js["frame"]   # both from 1
        assert row["capture"] == capture.name
        for name in columns:
            if name.startswith("vlan.") and name in js:  # show lists every tag: outermost
                assert row[name] == js[name][0], (js["frame"], name)
                continue
            assert row[name] == js.get(name), (js["frame"], name, row[name], js.get(name))


@pytest.mark.parametrize("capture", shared_captures(), ids=lambda p: p.name)
def test_row_counts_are_stats(exported: Path, capture: Path) -> None:
    table = _table(exported, capture)
    totals = stats_json(capture)["totals"]
    assert table.num_rows == totals["records"]
    enc = table["encapsulation"].to_pylist()
    errors = table["error"].to_pylist()
    ib = [e for e, err in zip(enc, errors, strict=True) if e != "other" and err is None]
    assert len(ib) == totals.get("ib_packets", 0)
    assert sum(err is not None for err in errors) == totals.get("errors", 0)
    assert table.schema.metadata[b"ibwire.schema_version"] == b"3"


def test_duckdb_and_polars_read_the_same(exported: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    files = str(exported / "packets" / "*.parquet")
    by_duck = dict(duckdb.sql(
        f"SELECT capture, count(*) FROM read_parquet('{files}') GROUP BY capture").fetchall())
    frame = pl.read_parquet(files)
    by_polars = dict(frame.group_by("capture").len().iter_rows())
    expected = {p.name: stats_json(p)["totals"]["records"] for p in shared_captures()}
    assert by_duck == expected
    assert by_polars == expected
    # the same values as pyarrow, column by column, for one capture
    one = shared_captures()[0].name
    arrow = _table(exported, shared_captures()[0]).sort_by("record")
    relation = duckdb.sql(f"SELECT * FROM read_parquet('{files}') WHERE capture = '{one}' "
                          "ORDER BY record")
    # to_arrow_table from DuckDB 1.4 (fetch_arrow_table before, deprecated since)
    duck = getattr(relation, "to_arrow_table", relation.fetch_arrow_table)()
    polars_rows = frame.filter(pl.col("capture") == one).sort("record").to_dicts()
    assert duck.to_pylist() == arrow.to_pylist()
    assert polars_rows == arrow.to_pylist()


def test_docs_document_every_column() -> None:
    from ibwire.export.schema import LEADING, TRAILING
    from tests.corpus import ROOT

    readme = (ROOT / "docs" / "reference" / "export-schema.md").read_text()
    for name, _, _ in (*LEADING, *TRAILING):
        short = name.rsplit(".", 1)[-1] if name.startswith("aeth.syndrome.") else name
        assert f"`{name}`" in readme or f"`.{short}`" in readme, name


#: Generated conversations the shared captures lack: NAKs, RNR NAKs, CNPs, QinQ VLANs,
#: RoCEv2 over IPv6, native IB with a GRH, READs and atomics.
GENERATED = {
    "nak-rnr-vlan": ["--qps", "2", "--iters", "6", "--size", "2048", "--drop", "qp=1,psn=3",
                     "--rnr", "qp=0,psn=2,timer=3", "--ecn-mark", "qp=0,psn=4", "--vlan", "7:3",
                     "--vlan", "9"],
    "ipv6-read": ["--encap", "rocev2_ipv6", "--verb", "read", "--iters", "4", "--size",
                  "3000", "--lose-ack", "rate=0.2"],
    "ib-global-atomic": ["--encap", "ib_global", "--verb", "fetch_add", "--iters", "4"],
    "ib-local-ud": ["--encap", "ib_local", "--transport", "ud", "--verb", "send", "--iters",
                    "4", "--size", "256", "--corrupt", "rate=0.3"],
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_values_are_shows(tmp_path: Path, name: str) -> None:
    from tests.export.helpers import run

    capture = tmp_path / f"{name}.pcap"
    status, _, err = run("gen", "-o", str(capture), "--no-progress", *GENERATED[name])
    assert status == 0, err
    status, _, err = run("export", "--all", "-o", str(tmp_path / "ds"), str(capture))
    assert status == 0, err
    rows = _table(tmp_path / "ds", capture).to_pylist()
    shown = show_json(capture)
    assert len(rows) == len(shown) > 0
    for row, js in zip(rows, shown, strict=True):
        for column, value in row.items():
            if column in EXTRA:
                continue
            if column.startswith("vlan.") and column in js:
                assert value == js[column][0], (js["frame"], column)
            else:
                assert value == js.get(column), (js["frame"], column, value, js.get(column))
