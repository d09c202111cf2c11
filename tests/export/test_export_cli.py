"""``ibwire export``'s options: formats, partitions, fields, resuming, a capture broken half
way, and files that are not captures."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.corpus import CAPTURES, needs_shared
from tests.export.helpers import qp_json, run, show_json, stats_json

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ds = pytest.importorskip("pyarrow.dataset")

WRITE_BW = CAPTURES / "linlinw5-rdma_ib_tutorial_rdma_write_bw.pcap"
RPING = CAPTURES / "linlinw5-rdma_ib_tutorial_rping.pcap"


def _records(data: bytes) -> list[int]:
    """Where each record of a little-endian classic pcap starts."""
    at, out = 24, []
    while at + 16 <= len(data):
        out.append(at)
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
    return out


def broken_half_way(tmp_path: Path) -> tuple[Path, int]:
    """rping.pcap with the record half way through claiming 4 GB: (path, that record)."""
    data = bytearray(RPING.read_bytes())
    assert data[:4] == b"\xd4\xc3\xb2\xa1"
    starts = _records(bytes(data))
    half = len(starts) // 2
    struct.pack_into("<I", data, starts[half] + 8, 0xFFFFFFF0)
    path = tmp_path / "broken.pcap"
    path.write_bytes(bytes(data))
    return path, half


@needs_shared
def test_broken_capture_keeps_its_good_rows(tmp_path: Path) -> None:
    path, half = broken_half_way(tmp_path)
    status, _, err = run("export", "--all", "-o", str(tmp_path / "ds"), str(path))
    assert status == 1, err
    table = pq.read_table(tmp_path / "ds" / "packets" / "broken.pcap.parquet")
    records = table["record"].to_pylist()
    errors = table["error"].to_pylist()
    assert records[:half] == list(range(1, half + 1))
    assert all(e is None for e in errors[:half])
    assert any(e is not None for e in errors[half:])
    assert table.num_rows == stats_json(path)["totals"]["records"]
    good = json.loads(json.dumps(show_json(RPING)[:half]))
    assert [r["ip.id"] for r in table.slice(0, half).to_pylist()] == [g.get("ip.id")
                                                                      for g in good]


@needs_shared
def test_not_a_capture_fails_the_run(tmp_path: Path) -> None:
    bad = tmp_path / "notes.pcap"
    bad.write_bytes(b"this is not a capture file at all" * 4)
    status, _, err = run("export", "-o", str(tmp_path / "ds"), str(bad), str(WRITE_BW))
    assert status == 1
    assert "notes.pcap" in err
    assert (tmp_path / "ds" / "packets" / f"{WRITE_BW.name}.parquet").exists()
    assert not (tmp_path / "ds" / "packets" / "notes.pcap.parquet").exists()
    assert not list((tmp_path / "ds").rglob(".*tmp-*"))


@needs_shared
def test_resume_skips_what_is_done_and_force_redoes_it(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    assert run("export", "-o", str(out), str(WRITE_BW))[0] == 0
    written = out / "packets" / f"{WRITE_BW.name}.parquet"
    written.write_bytes(b"marker")  # a skipped capture is not touched
    status, _, err = run("export", "-o", str(out), str(WRITE_BW), str(RPING))
    assert status == 0 and "already exported" in err
    assert written.read_bytes() == b"marker"
    assert pq.read_table(out / "packets" / f"{RPING.name}.parquet").num_rows > 0
    assert run("export", "--force", "-o", str(out), str(WRITE_BW))[0] == 0
    assert pq.read_table(written).num_rows == stats_json(WRITE_BW)["totals"]["ib_packets"]


@needs_shared
@pytest.mark.parametrize("by", ["capture", "date", "qp"])
def test_partitions_hold_the_same_rows(tmp_path: Path, by: str) -> None:
    flat, parted = tmp_path / "flat", tmp_path / by
    assert run("export", "-o", str(flat), str(WRITE_BW), str(RPING))[0] == 0
    assert run("export", "--partition-by", by, "-o", str(parted), str(WRITE_BW),
               str(RPING))[0] == 0
    expected = ds.dataset(flat / "packets", format="parquet").to_table()
    got = ds.dataset(parted / "packets", format="parquet", partitioning="hive").to_table()
    key = [("capture", "ascending"), ("record", "ascending")]
    if by == "date":
        got = got.drop_columns(["date"])
        dates = {p.name for p in (parted / "packets").iterdir()}
        assert dates and all(d.startswith("date=20") for d in dates)
    if by in ("capture", "qp"):
        got = got.set_column(got.schema.get_field_index("capture"), "capture",
                             got["capture"].cast(pa.string()))
    if by == "qp":
        got = got.set_column(got.schema.get_field_index("connection"), "connection",
                             got["connection"].cast(pa.int32()))
    got = got.select(expected.column_names).sort_by(key)
    assert got.to_pylist() == expected.sort_by(key).to_pylist()


@needs_shared
@pytest.mark.parametrize("fmt", ["arrow", "csv"])
def test_other_formats_hold_the_parquet_rows(tmp_path: Path, fmt: str) -> None:
    assert run("export", "-o", str(tmp_path / "pq"), str(RPING))[0] == 0
    assert run("export", "--format", fmt, "-o", str(tmp_path / fmt), str(RPING))[0] == 0
    expected = pq.read_table(tmp_path / "pq" / "packets" / f"{RPING.name}.parquet")
    path = tmp_path / fmt / "packets" / f"{RPING.name}.{fmt}"
    if fmt == "arrow":
        got = pa.ipc.open_file(path).read_all()
    else:
        import pyarrow.csv as pacsv

        got = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types=expected.schema, strings_can_be_null=True))
    assert got.to_pylist() == expected.to_pylist()


@needs_shared
def test_fields_keep_what_is_asked(tmp_path: Path) -> None:
    status, _, _ = run("export", "--fields", "bth,icrc_ok,ip.src", "-o", str(tmp_path / "ds"),
                       str(WRITE_BW))
    assert status == 0
    table = pq.read_table(tmp_path / "ds" / "packets" / f"{WRITE_BW.name}.parquet")
    assert set(table.column_names) == {
        "capture", "record", "timestamp_ns", "connection", "error", "icrc_ok", "ip.src",
        *(k for k in next(js for js in show_json(WRITE_BW) if "bth.psn" in js)
          if k.startswith("bth."))}
    status, _, err = run("export", "--fields", "bth.nope", "-o", str(tmp_path / "x"),
                         str(WRITE_BW))
    assert status == 2 and "bth.nope" in err


@needs_shared
def test_scheduler_without_dask_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    status, out, err = run("export", "--scheduler", "tcp://127.0.0.1:1", "-o",
                           str(tmp_path / "ds"), str(RPING))
    assert status == 2 and out == ""
    assert err.strip() == "ibwire export: ibwire.dask needs dask: pip install 'ibwire[dask]'"


@needs_shared
def test_a_dataset_keeps_one_format_and_layout(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    assert run("export", "--partition-by", "capture", "-o", str(out), str(RPING))[0] == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    for other, said in (
            (["--partition-by", "date"], "exported as parquet, partitioned by capture"),
            ([], "exported as parquet, partitioned by capture"),
            (["--partition-by", "capture", "--format", "csv"], "exported as parquet"),
            (["--partition-by", "capture", "--fields", "bth"], "exported with every column")):
        status, _, err = run("export", *other, "-o", str(out), str(WRITE_BW))
        assert status == 2, other
        assert f"holds {RPING.name} {said}" in err
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing written
    # the same columns asked for otherwise are the same columns
    fielded = tmp_path / "fielded"
    assert run("export", "--fields", "bth,icrc_ok", "-o", str(fielded), str(RPING))[0] == 0
    assert run("export", "--fields", "icrc_ok,bth", "-o", str(fielded), str(WRITE_BW))[0] == 0
    status, _, err = run("export", "--fields", "bth", "-o", str(fielded), str(CAPTURES /
                         "linlinw5-rdma_ib_tutorial_rdma_cm.pcap"))
    assert status == 2  # the first note by name: WRITE_BW's
    assert f"holds {WRITE_BW.name} exported with --fields icrc_ok,bth; this export has " \
        "--fields bth: a dataset has one set of columns" in err
    # the same options add to it; --force re-exports its only capture in a new layout
    assert run("export", "--partition-by", "capture", "-o", str(out), str(WRITE_BW))[0] == 0
    status, _, err = run("export", "--force", "-o", str(out), str(RPING))
    assert status == 2 and f"holds {WRITE_BW.name} exported" in err
    (out / "_ibwire" / f"{WRITE_BW.name}.json").write_text("{}")
    for again in (RPING, WRITE_BW):  # also the note of the capture --force redoes
        status, _, err = run("export", "--force", "--partition-by", "capture", "-o",
                             str(out), str(again))
        assert status == 2 and "not an export note of ibwire" in err
    (out / "_ibwire" / f"{WRITE_BW.name}.json").unlink()
    for f in (out / "packets" / f"capture={WRITE_BW.name}").iterdir():
        f.unlink()
    (out / "packets" / f"capture={WRITE_BW.name}").rmdir()
    assert run("export", "--force", "-o", str(out), str(RPING))[0] == 0
    # the old layout's files and the partition directories they were in are gone
    assert [p.name for p in (out / "packets").iterdir()] == [f"{RPING.name}.parquet"]
    assert ds.dataset(out / "packets", partitioning="hive").count_rows() == \
        stats_json(RPING)["totals"]["ib_packets"]


@needs_shared
def test_standard_input_and_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io
    import sys

    out = tmp_path / "ds"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(RPING.read_bytes())))
    assert run("export", "-o", str(out), "-")[0] == 0
    stdin = pq.read_table(out / "packets" / "stdin.parquet")
    assert json.loads((out / "_ibwire" / "stdin.json").read_text())["capture"] == "stdin"
    assert run("export", "--name", "rping-run-2", "--qp", "-o", str(out), str(RPING))[0] == 0
    named = pq.read_table(out / "packets" / "rping-run-2.parquet")
    assert set(named["capture"].to_pylist()) == {"rping-run-2"}
    assert named.drop_columns(["capture"]).to_pylist() == \
        stdin.drop_columns(["capture"]).to_pylist()
    assert (out / "connections" / "rping-run-2.parquet").exists()
    for bad in (["--name", "x", str(RPING), str(WRITE_BW)], ["--name", "a/b", str(RPING)],
                ["--name", ".hidden", str(RPING)]):
        status, _, err = run("export", "-o", str(tmp_path / "other"), *bad)
        assert status == 2 and "--name" in err, bad
    assert not (tmp_path / "other").exists()


ODD_NAMES = ("a=b.pcap", "p%41.pcap", "_under.pcap", ".dot.pcap", "x#y?z:w*.pcap",
             "quo\"te's {[^]}\\.pcap", "tab\tand space+ü.pcap")


@needs_shared
@pytest.mark.parametrize("by", [None, "capture", "qp"])
def test_any_file_name_reads_back_as_its_capture(tmp_path: Path, by: str | None) -> None:
    """Names with Hive's special characters, or that readers would skip as hidden or
    metadata (a leading . or _), read back whole and as they are through pyarrow, DuckDB
    and Polars, in every layout."""
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    (tmp_path / "in").mkdir()
    paths = []
    for name in ODD_NAMES:
        paths.append(tmp_path / "in" / name)
        paths[-1].write_bytes(RPING.read_bytes())
    out = tmp_path / "ds"
    layout = ["--partition-by", by] if by else []
    status, _, err = run("export", "--qp", *layout, "-o", str(out), *map(str, paths))
    assert status == 0, err
    rows = stats_json(RPING)["totals"]["ib_packets"]
    expected = {name: rows for name in ODD_NAMES}

    def counted(names: list[str]) -> dict[str, int]:
        return {n: names.count(n) for n in set(names)}

    pattern = str(out / "packets" / "**" / "*.parquet")
    assert counted(ds.dataset(out / "packets", partitioning="hive").to_table()[
        "capture"].to_pylist()) == expected
    assert counted([r[0] for r in duckdb.sql(
        f"SELECT capture FROM read_parquet('{pattern}', hive_partitioning = true)"
    ).fetchall()]) == expected
    assert counted(pl.scan_parquet(pattern, hive_partitioning=True).collect()[
        "capture"].to_list()) == expected
    assert sorted(ds.dataset(out / "connections").to_table()["capture"].to_pylist()) == \
        sorted(n for n in ODD_NAMES for _ in range(len(qp_json(RPING))))


@needs_shared
@pytest.mark.parametrize(("jobs", "start"), [(1, "fork"), (2, "fork")])
def test_sigterm_leaves_no_temporary_files(tmp_path: Path, jobs: int, start: str) -> None:
    """A run ended by SIGTERM (``timeout`` and schedulers signal the process group) stops
    as for Ctrl-C, its worker processes too: the files not finished are removed, nothing
    is marked exported, exit status 143."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "ds"
    (tmp_path / "b").mkdir()
    other = tmp_path / "b" / "other.pcap"
    other.write_bytes(RPING.read_bytes())
    # a write that waits a second once done, in every process (preloaded by a forkserver)
    (tmp_path / "slowwrite.py").write_text(
        "import os, time\n"
        "import ibwire.export.write as W\n"
        "first = W._File._write\n"
        "def slow(self, pending):\n"
        "    first(self, pending)\n"
        "    os.write(1, b'written\\n')  # one write: whole lines from two workers\n"
        "    time.sleep(1)\n"
        "W._File._write = slow\n"
        "W.ROW_GROUP = 64\n")
    code = (
        "import multiprocessing, sys\n"
        f"multiprocessing.set_start_method({start!r})\n"
        "multiprocessing.set_forkserver_preload(['slowwrite'])\n"
        "import slowwrite\n"
        "from ibwire.cli.main import command\n"
        f"sys.argv = ['ibwire', 'export', '-j', '{jobs}', '-o', {str(out)!r}, "
        f"{str(RPING)!r}, {str(other)!r}]\n"
        "command()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True,
                          env=env) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "written"
        assert list(out.rglob(".*.tmp-*"))  # a file half written
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert [p for p in out.rglob("*") if p.is_file()] == []


@needs_shared
def test_two_captures_of_one_name_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    copy = tmp_path / "a" / RPING.name
    copy.write_bytes(RPING.read_bytes())
    status, _, err = run("export", "-o", str(tmp_path / "ds"), str(RPING), str(copy))
    assert status == 2 and "two captures named" in err
    assert not (tmp_path / "ds").exists()


@needs_shared
@pytest.mark.parametrize("capture", [CAPTURES / "linlinw5-rdma_ib_tutorial_rdma_cm.pcap",
                                     WRITE_BW, CAPTURES / "softroce-demo_infiniband.pcap"],
                         ids=lambda p: p.name)
def test_connections_table_is_qp_csv(tmp_path: Path, capture: Path) -> None:
    import csv
    import io

    assert run("export", "--qp", "-o", str(tmp_path / "ds"), str(capture))[0] == 0
    table = pq.read_table(tmp_path / "ds" / "connections" / f"{capture.name}.parquet")
    _, out, _ = run("qp", "--csv", str(capture))
    expected = list(csv.DictReader(io.StringIO(out)))
    assert len(expected) > 0
    rows = table.to_pylist()
    assert [r["connection"] for r in rows] == list(range(len(expected)))
    assert {r["capture"] for r in rows} == {capture.name}
    from ibwire.export.write import nested_types

    lists = nested_types()
    assert {n: table.schema.field(n).type for n in lists} == lists
    for row, want, whole in zip(rows, expected, qp_json(capture), strict=True):
        got = {k: "" if v is None else str(v) for k, v in row.items()
               if k not in ("capture", "connection", *lists)}
        assert got == {k: v for k, v in want.items() if k not in lists}
        # the lists as qp --json has them, not qp --csv's text
        assert {k: row[k] for k in lists} == {
            k: [{f: item.get(f) for f in lists[k].value_type.names} for item in whole[k]]
            if pa.types.is_struct(lists[k].value_type) else whole[k] for k in lists}


def test_connections_lists_are_list_columns(tmp_path: Path) -> None:
    """Retransmission latencies, stalls and findings are lists (of structs) in Parquet and
    Arrow files, the text of qp --csv in a CSV file; DuckDB reads them as lists."""
    capture = tmp_path / "drop.pcap"
    assert run("gen", "-o", str(capture), "--iters", "6", "--qps", "2", "--drop",
               "qp=0,psn=5", "--corrupt", "qp=1,psn=2", "--start-time", "0",
               "--no-progress")[0] == 0
    wholes = qp_json(capture)
    assert wholes[0]["retransmission_ns"] and wholes[0]["longest_stalls"]
    assert wholes[1]["findings"]
    for fmt in ("parquet", "arrow", "csv"):
        assert run("export", "--qp", "--format", fmt, "-o", str(tmp_path / fmt),
                   str(capture))[0] == 0
    table = pq.read_table(tmp_path / "parquet" / "connections" / "drop.pcap.parquet")
    assert table.schema.metadata[b"ibwire.schema_version"] == b"3"
    arrow = pa.ipc.open_file(tmp_path / "arrow" / "connections" / "drop.pcap.arrow").read_all()
    for got in (table, arrow):
        for row, whole in zip(got.to_pylist(), wholes, strict=True):
            for key in ("retransmission_ns", "nak_response_ns", "longest_stalls",
                        "findings"):
                assert row[key] == whole[key]
    text = (tmp_path / "csv" / "connections" / "drop.pcap.csv").read_text()
    assert f"{wholes[1]['findings'][0]['kind']}:" in text
    pytest.importorskip("duckdb")
    status, out, err = run("sql", "--json", str(tmp_path / "parquet"),
                           "SELECT retransmission_ns, longest_stalls[1].cause AS cause "
                           "FROM connections WHERE connection = 0")
    assert status == 0, err
    assert json.loads(out) == {"retransmission_ns": wholes[0]["retransmission_ns"],
                               "cause": wholes[0]["longest_stalls"][0]["cause"]}


def test_connection_tables_of_every_capture_share_a_schema(exported: Path) -> None:
    from ibwire.analysis import Analysis
    from ibwire.export.write import connection_table

    files = list((exported / "connections").glob("*.parquet"))
    schemas = {pq.read_schema(p).remove_metadata() for p in files}
    assert len(schemas) == 1
    assert connection_table("none.pcap", Analysis([], 0)).schema in schemas  # none: typed too
    table = ds.dataset(exported / "connections", format="parquet").to_table()
    assert table.num_rows == sum(
        len(list(filter(None, run("qp", "--csv", str(p))[1].splitlines()[1:])))
        for p in sorted(CAPTURES.glob("*.pcap*")))


@needs_shared
def test_export_does_not_import_pandas(tmp_path: Path) -> None:
    """Parquet and CSV exports build their Arrow arrays from numpy buffers: pandas (which
    ``pyarrow.array`` would import to probe its argument) stays out of the process; a
    Parquet export does not load Arrow's compute functions either (a tenth of a second)."""
    import subprocess
    import sys

    code = ("import sys; from ibwire.cli.main import main\n"
            "compute = []\n"
            "for fmt in ('parquet', 'csv'):\n"
            f"    try: main(['export', '-o', {str(tmp_path) + '/'!r} + fmt, '--format', fmt, "
            f"{str(RPING)!r}])\n"
            "    except SystemExit: pass\n"
            "    compute.append('pyarrow.compute' in sys.modules)\n"
            "print(compute[0], 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split()[-2:] == ["False", "False"], done.stdout
    assert list((tmp_path / "parquet" / "packets").glob("*.parquet"))


@needs_shared
@pytest.mark.parametrize("failing_write", [1, 2])
def test_a_failed_write_fails_the_capture_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_write: int) -> None:
    """Row groups are written in a thread of their own: a write that fails there (a full
    disk), during the rows or at the end, is the capture's failure; no file, temporary file,
    note or thread is left."""
    import threading

    from ibwire.export import write

    monkeypatch.setattr(write, "ROW_GROUP", 16)  # several row groups
    real = write._File._write
    calls = []

    def fail(self: write._File, pending: list) -> None:
        calls.append(len(pending))
        if len(calls) == failing_write:
            raise OSError(28, "No space left on device")
        real(self, pending)

    monkeypatch.setattr(write._File, "_write", fail)
    out = tmp_path / "ds"
    outcome = write.export_capture(str(RPING), write.Options(str(out)))
    assert outcome.failure == "[Errno 28] No space left on device"
    assert len(calls) >= failing_write and outcome.files == []
    assert [p for p in out.rglob("*") if p.is_file()] == []
    assert not any(t.name.startswith("ibwire-export-write") for t in threading.enumerate())


@needs_shared
def test_row_groups_hold_between_half_and_one_row_group(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are written once half a row group is pending: every row group but the last
    holds ROW_GROUP / 2 to ROW_GROUP rows, and all the rows are there in order."""
    from ibwire.export import write
    from ibwire.scan import capture

    monkeypatch.setattr(write, "ROW_GROUP", 64)
    monkeypatch.setattr(capture, "FIRST_ROWS", 8)   # batches of 8, 16, 32, 64, 100 rows
    monkeypatch.setattr(capture, "BATCH_ROWS", 100)
    nccl = CAPTURES / "linlinw5-rdma_ib_tutorial_nccl_nccl_node0.pcap"
    outcome = write.export_capture(str(nccl), write.Options(str(tmp_path), other=True))
    assert outcome.ok and outcome.rows > 400
    f = pq.ParquetFile(tmp_path / "packets" / f"{nccl.name}.parquet")
    sizes = [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)]
    assert sum(sizes) == outcome.rows and len(sizes) > 4
    assert all(32 <= n <= 64 for n in sizes[:-1]) and 0 < sizes[-1] <= 64, sizes
    assert f.read(columns=["record"])["record"].to_pylist() == list(range(1, outcome.rows + 1))


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_many_partitions_hold_few_batches_and_files(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    fmt: str) -> None:
    """With a partition per connection and rows of each coming a few at a time, memory
    holds at most HELD_BATCHES batches (rows are written early), and Parquet and CSV files
    are closed between their writes; the rows are the flat export's."""
    import contextlib
    import os

    from ibwire.export import write
    from ibwire.scan import capture

    many = tmp_path / "many.pcap"
    status, _, err = run("gen", "-o", str(many), "--qps", "40", "--iters", "6", "--size",
                         "2048", "--no-progress")
    assert status == 0, err
    monkeypatch.setattr(write, "HELD_BATCHES", 2)
    monkeypatch.setattr(capture, "FIRST_ROWS", 64)
    monkeypatch.setattr(capture, "BATCH_ROWS", 64)
    held, open_files = [], []
    bound = write._Partitions._bound

    def watched(self: write._Partitions) -> None:
        bound(self)
        held.append(len({b for f in self.files.values() for b in f.batches}))
        self.thread.wait()  # the write in flight is done: what is open now stays open
        targets = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        open_files.append(sum(".tmp-" in target for target in targets))

    monkeypatch.setattr(write._Partitions, "_bound", watched)
    out = tmp_path / "ds"
    status, _, err = run("export", "--format", fmt, "--partition-by", "qp", "-o", str(out),
                         str(many))
    assert status == 0, err
    files = list((out / "packets").rglob(f"*.{fmt}"))
    assert len(files) >= 40 and len(held) > 10
    assert max(held) <= 2
    assert max(open_files) == 0  # closed between their writes
    if fmt == "parquet":
        got = ds.dataset(out / "packets", partitioning="hive").to_table()
        assert sorted(got["record"].to_pylist()) == list(range(1, stats_json(many)["totals"][
            "records"] + 1))
        sizes = [pq.ParquetFile(f).metadata.num_row_groups for f in files]
        assert max(sizes) > 1  # rows written early, a row group at a time


@needs_shared
def test_fields_without_verdicts_are_the_full_exports(tmp_path: Path) -> None:
    """Without icrc_ok/vcrc_ok (and --qp) the scan reads the CRCs without checking them:
    every column asked for is the full export's, connections included."""
    from tests.corpus import ROOT

    for path in (WRITE_BW, ROOT / "captures" / "sample-corrupt.pcap"):
        fields = "bth,icrc,vcrc,ip.src,lrh"
        assert run("export", "--all", "--fields", fields, "-o", str(tmp_path / "some"),
                   str(path))[0] in (0, 1)
        assert run("export", "--all", "-o", str(tmp_path / "all"), str(path))[0] in (0, 1)
        some = pq.read_table(tmp_path / "some" / "packets" / f"{path.name}.parquet")
        full = pq.read_table(tmp_path / "all" / "packets" / f"{path.name}.parquet")
        assert some.num_rows == full.num_rows > 0
        assert some.equals(full.select(some.column_names)), path
