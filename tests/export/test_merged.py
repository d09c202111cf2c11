"""Connection analysis across files: a capture cut into files by time, or seen by two taps,
summarised per file and analysed together, is ``ibwire qp`` of the merged capture, key for
key (counters, latencies, CM, findings with the merged capture's record numbers)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ibwire.analysis import analyse
from ibwire.analysis.merged import analyse_merged, merged_records, summarise
from ibwire.cli.common import json_line
from ibwire.pcap import open_capture
from ibwire.pcap.writer import PcapWriter
from tests import corpus
from tests.export.conftest import shared_captures
from tests.export.helpers import qp_json, run

distributed = pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")
pa = pytest.importorskip("pyarrow")

from ibwire.dask import read_connections  # noqa: E402
from ibwire.export.write import connection_table  # noqa: E402


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated capture with CM, drops, corruption (bad ICRCs), an RNR NAK, ECN marks and
    CNPs (tapped at the switch, after the marking point)."""
    path = tmp_path_factory.mktemp("faulty") / "faulty.pcap"
    status, _, err = run("gen", "-o", str(path), "--qps", "3", "--iters", "30", "--size",
                         "4096", "--drop", "rate=0.03", "--corrupt", "rate=0.01", "--rnr",
                         "qp=1,psn=50,timer=5", "--ecn-mark", "rate=0.05", "--tap", "switch",
                         "--no-progress")
    assert status == 0, err
    return path


def split(path: Path, out: Path, pieces: int, which: Callable[[int, object], int]
          ) -> list[Path]:
    """``path``'s records into ``pieces`` classic pcaps (ns), record -> file ``which``."""
    out.mkdir(exist_ok=True)
    names = [out / f"{path.stem}_{i}.pcap" for i in range(pieces)]
    with open_capture(str(path)) as capture:
        records = list(capture)
    writers = [PcapWriter(str(n), records[0].linktype, nanoseconds=True) for n in names]
    for r in records:
        assert r.error is None and r.linktype == records[0].linktype
        data = bytes(r.record_data)   # the record as stored: link headers (SLL) and all
        writers[which(r.index, r)].write(data, r.timestamp_ns,
                                         r.orig_len + len(data) - r.caplen)
    for w in writers:
        w.close()
    return names


def by_time(path: Path, pieces: int) -> Callable[[int, object], int]:
    """Cut into ``pieces`` consecutive runs of records, as tcpdump -C/-G or a ring buffer."""
    total = len(qp_json_records(path))
    return lambda i, _: min(pieces - 1, i * pieces // total)


def qp_json_records(path: Path) -> list[int]:
    with open_capture(str(path)) as capture:
        return [r.index for r in capture]


def as_json(dicts: list[dict]) -> list[dict]:
    return [json.loads(json_line(d)) for d in dicts]


def findings_records(dicts: list[dict]) -> list[int]:
    return [r for d in dicts for f in d["findings"] for r in f["records"]]


def test_files_cut_by_time_are_qp_of_the_capture(faulty: Path, tmp_path: Path) -> None:
    parts = split(faulty, tmp_path, 3, by_time(faulty, 3))
    expected = qp_json(faulty)
    got = as_json(analyse_merged([summarise(p) for p in parts]).as_dicts())
    assert got == expected
    # the case is not trivial: findings in the later files, numbered as in the whole capture
    third = len(qp_json_records(faulty)) // 3
    assert any(r > third for r in findings_records(expected))
    assert {k for d in expected for k, v in d.items() if v} >= {
        "retransmitted_packets", "rnr_naks", "cnps", "ecn_ce_packets", "cm", "findings",
        "ack_rtt_ns"}
    # each file alone is not the capture: the merge is what makes them equal
    alone = [d for p in parts for d in as_json(analyse(p).as_dicts())]
    assert alone != expected


def test_two_taps_are_qp_of_mergecap(faulty: Path, tmp_path: Path) -> None:
    """One tap sees requests and CM from the requester's side, the other the rest; the
    reference is ``ibwire qp`` of ``mergecap``'s merge of the two files."""
    mergecap = shutil.which("mergecap")
    if mergecap is None:
        pytest.skip("mergecap not installed")
    first = {}

    def tap(i: int, r: object) -> int:
        key = bytes(r.frame[26:30])   # IPv4 source address (Ethernet, no VLAN)
        return first.setdefault(key, len(first)) % 2

    taps = split(faulty, tmp_path, 2, tap)
    merged = tmp_path / "merged.pcap"
    subprocess.run([mergecap, "-F", "nsecpcap", "-w", str(merged), *map(str, taps)], check=True)
    expected = qp_json(merged)
    assert as_json(analyse_merged([summarise(p) for p in taps]).as_dicts()) == expected
    assert findings_records(expected)


@corpus.needs_shared
def test_shared_captures_cut_in_three(tmp_path: Path) -> None:
    for path in shared_captures():
        parts = split(path, tmp_path / path.stem, 3, by_time(path, 3))
        got = as_json(analyse_merged([summarise(p) for p in parts]).as_dicts())
        assert got == qp_json(path), path.name


def test_merge_order_is_mergecaps() -> None:
    """The earliest next record of any file first, the last file on a tie (Wireshark's
    merge_read_packet); a file whose timestamps go backwards is merged by its heads."""
    sorted_files = [np.array([1, 2, 2, 5]), np.array([2, 3])]
    assert [x.tolist() for x in merged_records(sorted_files)] == [[0, 2, 3, 5], [1, 4]]
    unsorted = [np.array([1, 3, 2]), np.array([2, 2])]
    assert [x.tolist() for x in merged_records(unsorted)] == [[0, 3, 4], [1, 2]]
    ties = [np.array([5, 5]), np.array([5]), np.array([4, 5])]
    assert [x.tolist() for x in merged_records(ties)] == [[3, 4], [2], [0, 1]]


@corpus.needs_shared
def test_shared_taps_are_qp_of_mergecap(tmp_path: Path) -> None:
    """Three hosts' captures of one NCCL job (equal timestamps across files, timestamps going
    backwards within them): the analysis of their summaries is ``ibwire qp`` of mergecap's
    merge."""
    mergecap = shutil.which("mergecap")
    if mergecap is None:
        pytest.skip("mergecap not installed")
    taps = [p for p in shared_captures() if "nccl_node" in p.name]
    assert len(taps) == 3
    merged = tmp_path / "merged.pcap"
    subprocess.run([mergecap, "-F", "nsecpcap", "-w", str(merged), *map(str, taps)],
                   check=True)
    expected = qp_json(merged)
    assert as_json(analyse_merged([summarise(p) for p in taps]).as_dicts()) == expected


def test_dask_merged_table_is_qps(client, faulty: Path, tmp_path: Path) -> None:
    parts = split(faulty, tmp_path, 3, by_time(faulty, 3))
    frame = read_connections([str(p) for p in parts], merged=True, name="faulty")
    assert frame.npartitions == 1
    got = pa.Table.from_pandas(frame.compute(), preserve_index=False)
    expected = connection_table("faulty", analyse(str(faulty)))
    assert got.column_names == expected.column_names
    assert got.num_rows == expected.num_rows > 0
    assert [n for n in expected.column_names
            if not got[n].cast(expected[n].type).equals(expected[n])] == []
    per_file = read_connections([str(p) for p in parts]).compute()
    assert set(per_file["capture"]) == {p.name for p in parts}


def test_export_qp_merged_writes_qps_table(faulty: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    parts = split(faulty, tmp_path / "parts", 3, by_time(faulty, 3))
    out = tmp_path / "ds"
    status, _, err = run("export", "--qp", "--qp-merged", "whole", "-o", str(out),
                         *map(str, parts))
    assert status == 0, err
    got = pq.read_table(out / "connections" / "whole.parquet")
    expected = connection_table("whole", analyse(str(faulty)))
    assert got.num_rows == expected.num_rows > 0
    assert [n for n in expected.column_names
            if not got[n].cast(expected[n].type).equals(expected[n])] == []
    assert sorted(p.name for p in (out / "connections").iterdir()) == sorted(
        [*(f"{p.name}.parquet" for p in parts), "whole.parquet"])
    status, _, err = run("export", "--qp-merged", parts[0].name, "-o", str(out),
                         *map(str, parts))
    assert status == 1 and "a capture's name" in err


def test_many_batches_and_pickled_summaries(faulty: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows far smaller than the capture (many batches on both sides), summaries that went
    through pickle (as between a cluster's processes)."""
    import pickle

    import ibwire.analysis

    parts = split(faulty, tmp_path, 3, by_time(faulty, 3))
    summaries = [pickle.loads(pickle.dumps(summarise(p))) for p in parts]
    window = 1 << 14
    monkeypatch.setattr(ibwire.analysis, "WINDOW", window)
    assert sum(1 for _ in ibwire.analysis.batches(str(faulty))) > 10
    expected = as_json(analyse(str(faulty)).as_dicts())
    assert as_json(analyse_merged(summaries, window=window).as_dicts()) == expected
