"""The Dask path on a two-worker LocalCluster gives the single-process export's rows, whether
a capture is one task or cut into chunks, and ``ibwire qp``'s connections."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import corpus
from tests.export.conftest import shared_captures
from tests.export.helpers import qp_json, run, stats_json

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ibwire.dask import read_captures, read_connections  # noqa: E402
from ibwire.errors import CaptureError  # noqa: E402
from ibwire.export.chunks import boundaries, chunks, records_before  # noqa: E402

KEY = [("capture", "ascending"), ("record", "ascending")]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated classic pcap of a few hundred kB (retransmissions, CNPs, bad ICRCs)."""
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    status, _, err = run("gen", "-o", str(path), "--qps", "4", "--iters", "40", "--size",
                         "4096", "--drop", "rate=0.02", "--corrupt", "rate=0.01",
                         "--ecn-mark", "rate=0.05", "--vlan", "5", "--no-progress")
    assert status == 0, err
    return path


def _table(frame):
    return pa.Table.from_pandas(frame, preserve_index=False).sort_by(KEY)


def assert_same(got, expected) -> None:
    """Equal tables, column by column (names the columns that differ)."""
    assert got.column_names == expected.column_names
    assert got.num_rows == expected.num_rows
    differ = [n for n in expected.column_names
              if not got[n].cast(expected[n].type).equals(expected[n])]
    assert differ == []


def test_files_as_tasks_are_the_export(client, exported: Path) -> None:
    frame = read_captures([str(p) for p in shared_captures()], other=True)
    assert frame.npartitions == len(shared_captures())
    expected = pq.read_table(exported / "packets").sort_by(KEY)
    assert_same(_table(frame.compute()), expected)


def test_chunks_are_the_whole_file(client, big: Path, tmp_path: Path) -> None:
    pieces = chunks(str(big), 40_000)
    assert len(pieces) > 5
    assert sum(c.records for c in pieces) == stats_json(big)["totals"]["records"]
    assert all(a.stop == b.start and a.first_record + a.records == b.first_record
               for a, b in zip(pieces, pieces[1:], strict=False))
    frame = read_captures(str(big), other=True, chunk_bytes=40_000)
    assert frame.npartitions == len(pieces)
    assert run("export", "--all", "-o", str(tmp_path / "ds"), str(big))[0] == 0
    expected = pq.read_table(tmp_path / "ds" / "packets").sort_by(KEY)
    assert_same(_table(frame.compute()), expected)
    assert expected["record"].to_pylist() == list(range(1, expected.num_rows + 1))


def test_boundaries_land_on_records_and_a_bad_one_is_refused(big: Path) -> None:
    cuts = boundaries(str(big), 30_000)
    assert cuts is not None
    counts = records_before(str(big), cuts)
    assert counts == sorted(counts) and counts[0] == 0
    with pytest.raises(CaptureError, match="not where a record starts"):
        records_before(str(big), [cuts[0], cuts[1] + 1, cuts[-1]])


@corpus.needs_shared
def test_connections_per_file_are_qps(client, big: Path) -> None:
    captures = [str(shared_captures()[0]), str(big)]
    table = read_connections(captures).compute()
    for path in captures:
        mine = table[table["capture"] == Path(path).name].sort_values("connection")
        expected = qp_json(Path(path))
        assert len(mine) == len(expected)
        for (_, row), d in zip(mine.iterrows(), expected, strict=True):
            assert row["requester.address"] == str(d["requester"]["address"])
            assert row["retransmitted_packets"] == d["retransmitted_packets"]
            assert row["cnps"] == d["cnps"]
            assert row["data_packets"] == d["data_packets"]


@corpus.needs_shared
def test_export_on_a_scheduler_writes_the_same_files(client, big: Path,
                                                    tmp_path: Path) -> None:
    captures = [str(big), str(shared_captures()[0])]
    status, _, err = run("export", "--qp", "--scheduler", client.scheduler.address, "-o",
                         str(tmp_path / "dask"), *captures)
    assert status == 0, err
    assert run("export", "--qp", "-o", str(tmp_path / "one"), *captures)[0] == 0
    for sub in ("packets", "connections"):
        a = pq.read_table(tmp_path / "dask" / sub)
        b = pq.read_table(tmp_path / "one" / sub)
        key = KEY if sub == "packets" else [("capture", "ascending"),
                                            ("connection", "ascending")]
        assert_same(a.sort_by(key), b.sort_by(key))


def test_one_task_per_capture_and_no_string_conversion_tasks(big: Path) -> None:
    """The partitions' text columns are Arrow strings already: the graph holds the reading
    tasks alone (a string-conversion task per partition could be run on another worker
    than its partition, moving every row there)."""
    frame = read_captures([big, big])
    keys = [str(k) for k in dict(frame.__dask_graph__())]
    assert len(keys) == 2 and all("_read_part" in k for k in keys), keys


def test_globs_that_match_nothing_are_named(big: Path) -> None:
    for read in (read_captures, read_connections):
        with pytest.raises(ValueError, match=r"no capture matches '.*nothing\*\.pcap'"):
            read([big, str(big.parent / "nothing*.pcap")])
        with pytest.raises(ValueError, match="no captures given"):
            read([])
    assert read_captures(str(big.parent / "b*.pcap")).npartitions == 1  # big.pcap alone


@pytest.mark.parametrize("config", ["dask's", "ibwire's"])
def test_worker_config_leaves_malloc_trimming_unset(config: str, big: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started under WORKER_CONFIG have no MALLOC_TRIM_THRESHOLD_ (glibc's own
    thresholds) and Arrow on the system allocator, where Dask's default gives them a trim
    threshold (and Arrow its own allocator); what a worker reads is the same."""
    import dask

    from ibwire.dask import WORKER_CONFIG, _allocators, allocator_note

    # a nanny copies what it sets into its starter's environment: none from an earlier
    # cluster here, and none left behind by this one
    for name in ("MALLOC_TRIM_THRESHOLD_", "ARROW_DEFAULT_MEMORY_POOL"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with dask.config.set(WORKER_CONFIG if config == "ibwire's" else {}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        found = set(c.run(_allocators).values())
        note = allocator_note(c)
        got = _table(read_captures([big]).compute(scheduler=c.get))
    if config == "ibwire's":
        assert found == {(None, "system")}
        assert note is None
    else:
        assert {trim for trim, _ in found} == {"65536"}
        assert {pool for _, pool in found} != {"system"}
        assert note is not None and note.startswith("1 worker, MALLOC_TRIM_THRESHOLD_=65536")
    assert_same(got, _table(read_captures([big]).compute(scheduler="sync")))


def test_export_on_a_scheduler_notes_workers_that_give_memory_back(
        client, big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--scheduler`` says so when the cluster's workers are not as WORKER_CONFIG has them
    (here threads of this process, which gets a trim setting), and exports all the same."""
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    status, _, err = run("export", "--scheduler", client.scheduler.address, "-o",
                         str(tmp_path / "d"), str(big))
    assert status == 0, err
    assert "ibwire export: note: 2 workers, MALLOC_TRIM_THRESHOLD_=65536" in err
    assert "WORKER_CONFIG" in err
