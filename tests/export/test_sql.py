"""``ibwire sql``: the docs' example queries (docs/verbs/sql.md) give ``ibwire stats``'s and ``ibwire qp``'s
numbers, on a generated conversation with retransmissions, bad ICRCs and CNPs and on every
shared capture."""

from __future__ import annotations

import csv
import io
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests import corpus
from tests.corpus import ROOT
from tests.export.conftest import shared_captures
from tests.export.helpers import qp_json, run, stats_json

pytest.importorskip("duckdb")

#: docs/verbs/sql.md's example queries (the test checks the page holds each verbatim).
PER_ENCAPSULATION = ("SELECT encapsulation, count(*) AS packets FROM packets "
                     "WHERE encapsulation <> 'other' AND error IS NULL GROUP BY 1")
PER_OPCODE = ('SELECT "bth.opcode.name" AS opcode, count(*) AS packets FROM packets '
              "WHERE error IS NULL GROUP BY 1")
RETRANSMISSIONS = ('SELECT capture, connection, count(*) - count(DISTINCT "bth.psn") AS '
                   'retransmitted FROM packets WHERE "bth.opcode" < 128 AND '
                   '"bth.opcode" & 31 NOT BETWEEN 13 AND 18 AND connection IS NOT NULL '
                   'GROUP BY ALL ORDER BY ALL')
CNPS_PER_SECOND = ('SELECT timestamp_ns // 1000000000 AS second, count(*) AS cnps '
                   'FROM packets WHERE "bth.opcode" = 129 GROUP BY 1 ORDER BY 1')
BAD_ICRC_PER_HOST = ('SELECT coalesce("ip.src", "ipv6.src", "grh.sgid", '
                     'CAST("lrh.slid" AS VARCHAR)) AS host, count(*) AS bad_icrc '
                     "FROM packets WHERE NOT icrc_ok GROUP BY 1 ORDER BY 2 DESC")
QUERIES = (PER_ENCAPSULATION, PER_OPCODE, RETRANSMISSIONS, CNPS_PER_SECOND, BAD_ICRC_PER_HOST)


def sql(directory: Path, query: str) -> list[dict[str, str]]:
    status, out, err = run("sql", "--csv", str(directory), query)
    assert status == 0, err
    return list(csv.DictReader(io.StringIO(out)))


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(capture, its export): three QPs with drops, corruption and ECN marks."""
    where = tmp_path_factory.mktemp("faulty")
    capture = where / "faulty.pcap"
    status, _, err = run("gen", "-o", str(capture), "--qps", "3", "--iters", "20",
                         "--size", "4096", "--drop", "rate=0.02", "--corrupt", "rate=0.02",
                         "--ecn-mark", "rate=0.05", "--no-progress")
    assert status == 0, err
    status, _, err = run("export", "--qp", "-o", str(where / "ds"), str(capture))
    assert status == 0, err
    return capture, where / "ds"


def test_docs_hold_the_queries() -> None:
    page = (ROOT / "docs" / "verbs" / "sql.md").read_text()
    for query in QUERIES:
        assert query in page


def test_retransmissions_are_qps(faulty: tuple[Path, Path]) -> None:
    capture, ds = faulty
    got = {int(r["connection"]): int(r["retransmitted"]) for r in sql(ds, RETRANSMISSIONS)}
    expected = {i: d["retransmitted_packets"] for i, d in enumerate(qp_json(capture))}
    assert sum(expected.values()) > 0  # the faults made some
    assert got == expected
    table = {int(r["connection"]): int(r["retransmitted_packets"])
             for r in sql(ds, "SELECT connection, retransmitted_packets FROM connections")}
    assert table == expected


@pytest.mark.parametrize("verb", ["fetch_add", "cmp_swap", "send_inv"])
def test_retransmissions_of_atomics_and_invalidates_are_qps(tmp_path: Path, verb: str) -> None:
    capture = tmp_path / f"{verb}.pcap"
    status, _, err = run("gen", "-o", str(capture), "--verb", verb, "--iters", "60",
                         "--size", "3000", "--drop", "rate=0.05", "--start-time", "0",
                         "--no-progress")
    assert status == 0, err
    assert run("export", "--qp", "-o", str(tmp_path / "ds"), str(capture))[0] == 0
    got = {int(r["connection"]): int(r["retransmitted"])
           for r in sql(tmp_path / "ds", RETRANSMISSIONS)}
    expected = {i: d["retransmitted_packets"] for i, d in enumerate(qp_json(capture))}
    assert sum(expected.values()) > 0
    assert got == expected


def test_an_unquoted_dotted_column_gets_a_hint(faulty: tuple[Path, Path]) -> None:
    status, out, err = run("sql", str(faulty[1]),
                           'SELECT count(*) FROM packets WHERE "ip.src" <> \'\' '
                           "AND bth.opcode.name = 'RC_ACKNOWLEDGE'")
    assert status == 2 and out == ""
    assert 'Referenced table "bth.opcode" not found' in err
    assert 'quote them, "bth.opcode.name"' in err


def test_cnps_and_bad_icrcs_are_stats_and_qps(faulty: tuple[Path, Path]) -> None:
    capture, ds = faulty
    cnps = sum(int(r["cnps"]) for r in sql(ds, CNPS_PER_SECOND))
    assert cnps == sum(d["cnps"] for d in qp_json(capture)) > 0
    assert cnps == stats_json(capture)["opcode"]["CNP"]
    bad = {r["host"]: int(r["bad_icrc"]) for r in sql(ds, BAD_ICRC_PER_HOST)}
    assert sum(bad.values()) == stats_json(capture)["totals"]["icrc_bad"] > 0
    assert set(bad) == {"192.0.2.1"}  # only the requester's packets were corrupted


@corpus.needs_shared
def test_counts_are_stats_on_every_shared_capture(tmp_path: Path) -> None:
    captures = shared_captures()
    status, _, err = run("export", "--partition-by", "capture", "-o", str(tmp_path / "ds"),
                         *map(str, captures))
    assert status == 0, err
    encapsulation: Counter[str] = Counter()
    opcode: Counter[str] = Counter()
    for p in captures:
        tables = stats_json(p)
        encapsulation.update(tables.get("encapsulation", {}))
        opcode.update(tables.get("opcode", {}))
    got = {r["encapsulation"]: int(r["packets"]) for r in sql(tmp_path / "ds", PER_ENCAPSULATION)}
    assert got == dict(encapsulation)
    got = {r["opcode"]: int(r["packets"]) for r in sql(tmp_path / "ds", PER_OPCODE)}
    assert got == dict(opcode)


def test_missing_duckdb_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    status, out, err = run("sql", str(tmp_path), "SELECT 1")
    assert status == 2 and out == ""
    assert err.strip() == "ibwire sql needs duckdb: pip install 'ibwire[sql]'"


def test_a_dataset_of_two_formats_is_refused(faulty: tuple[Path, Path],
                                             tmp_path: Path) -> None:
    capture, dataset = faulty
    assert run("export", "--format", "csv", "-o", str(tmp_path / "csv"), str(capture))[0] == 0
    mixed = tmp_path / "mixed"
    shutil.copytree(dataset, mixed)
    (mixed / "packets" / "more.csv").write_bytes(
        (tmp_path / "csv" / "packets" / f"{capture.name}.csv").read_bytes())
    status, out, err = run("sql", str(mixed), "SELECT count(*) FROM packets")
    assert status == 2 and out == ""  # not the Parquet rows alone, silently
    assert "holds .parquet and .csv files" in err
    assert sql(dataset, "SELECT count(*) AS n FROM packets") == sql(
        tmp_path / "csv", "SELECT count(*) AS n FROM packets")


def test_every_value_prints_as_its_format_wants(faulty: tuple[Path, Path]) -> None:
    """JSON lines strict parsers read (no NaN: null), BLOBs as hex in every output,
    numbers, lists and structs as themselves."""
    import json

    query = ("SELECT 'nan'::DOUBLE AS n, 'inf'::DOUBLE AS i, 1.5::DOUBLE AS f, "
             "'\\x00\\xff'::BLOB AS b, [1, 2] AS l, {'a': 3} AS s, 7 AS k, NULL AS z, "
             "1.25::DECIMAL(5, 2) AS d")
    status, out, err = run("sql", "--json", str(faulty[1]), query)
    assert status == 0, err
    row = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert row == {"n": None, "i": None, "f": 1.5, "b": "00ff", "l": [1, 2], "s": {"a": 3},
                   "k": 7, "z": None, "d": "1.25"}
    assert sql(faulty[1], query)[0]["b"] == "00ff"
    status, out, _ = run("sql", str(faulty[1]), query)
    assert status == 0 and "00ff" in out.splitlines()[1]


def test_bad_query_and_not_a_dataset(faulty: tuple[Path, Path], tmp_path: Path) -> None:
    status, _, err = run("sql", str(faulty[1]), "SELECT * FROM nowhere")
    assert status == 2 and err.startswith("ibwire sql: ") and len(err.splitlines()) == 1
    status, _, err = run("sql", str(tmp_path), "SELECT 1")
    assert status == 2 and "not an ibwire export directory" in err
