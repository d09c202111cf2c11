"""The ``connection`` column: numbered in the export's one pass as ``ibwire qp`` numbers its
connections, rows written again where the end of the capture renumbered them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ibwire.analysis import analyse, batches
from ibwire.export import schema as sch
from ibwire.export import write
from ibwire.export.connections import Labeller, label
from tests import corpus
from tests.analysis.conftest import A, B, frame, write_frames
from tests.export.conftest import shared_captures
from tests.export.helpers import run

pq = pytest.importorskip("pyarrow.parquet")

QP_B1, QP_B2, QP_A2 = 0x11, 0x12, 0x23   # two responder QPs at B; a requester QP at A
QP_A = 0x22


def _exported(path: Path, out: Path, *args: str) -> list[int | None]:
    status, _, err = run("export", "--all", "-o", str(out), *args, str(path))
    assert status == 0, err
    return pq.read_table(out / "packets" / f"{path.name}.parquet")["connection"].to_pylist()


def _final(path: Path) -> list[int | None]:
    """Each record's connection from the finished analysis (``Labels``: stream keys)."""
    labels = label(str(path))
    got: list[int | None] = []
    for batch in batches(str(path)):
        got.extend(None if c < 0 else c for c in labels.of(batch).tolist())
    return got


@pytest.mark.parametrize("capture", shared_captures(), ids=lambda p: p.name)
def test_one_pass_numbers_rows_as_the_finished_analysis(tmp_path: Path, capture: Path
                                                        ) -> None:
    assert _exported(capture, tmp_path / "ds") == _final(capture)


def test_a_generated_conversation_with_faults(tmp_path: Path) -> None:
    capture = tmp_path / "faulty.pcap"
    status, _, err = run("gen", "-o", str(capture), "--qps", "4", "--iters", "30",
                         "--size", "4096", "--drop", "rate=0.02", "--ecn-mark", "rate=0.05",
                         "--no-progress")
    assert status == 0, err
    got = _exported(capture, tmp_path / "ds")
    assert got == _final(capture)
    assert sorted(set(got) - {None}) == list(range(4))


def _cnp_first(tmp_path: Path) -> Path:
    """WRITEs from A to two QPs of B, a CNP to A's QP (which of the two it belongs to, the
    capture cannot tell yet: a connection of its own), other traffic to the end of the
    scanner's first batch (FIRST_ROWS records), then B's ACK of one QP's WRITEs: at the end
    of the capture the other is the only one the CNP can belong to, and it is folded in."""
    from ibwire.scan.capture import FIRST_ROWS

    def write_(psn: int, qp: int) -> bytes:
        return frame("RC_RDMA_WRITE_ONLY", psn, qp, payload=64, reth_dmalen=64)

    frames = [write_(k, QP_B1) for k in range(3)] + [write_(1000 + k, QP_B2) for k in range(3)]
    frames.append(frame("CNP", 0, QP_A, src=B, dst=A, bth_becn=1))
    other = bytes(12) + b"\x88\xb5" + bytes(46)  # an Ethernet frame that is not RoCE
    frames += [other] * (FIRST_ROWS - len(frames))
    frames.append(frame("RC_ACKNOWLEDGE", 1002, QP_A2, src=B, dst=A, syndrome=0))
    return Path(write_frames(tmp_path / "cnp-first.pcap",
                             [(1000 * (i + 1), f) for i, f in enumerate(frames)]))


def test_rows_are_written_again_when_the_end_renumbers(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    capture = _cnp_first(tmp_path)
    first, second = analyse(str(capture)).as_dicts()  # the CNP joined the first
    assert (first["cnps"], first["data_packets"], second["cnps"]) == (1, 3, 0)
    settled: list[bool] = []
    real = Labeller.finish

    def finish(self: Labeller) -> bool:
        settled.append(real(self))
        return settled[-1]

    monkeypatch.setattr(Labeller, "finish", finish)
    outcome = write.export_capture(str(capture), write.Options(str(tmp_path / "ds"),
                                                               other=True))
    assert settled == [False] and outcome.ok and outcome.rows == len(_final(capture))
    table = pq.read_table(tmp_path / "ds" / "packets" / "cnp-first.pcap.parquet")
    got = table["connection"].to_pylist()
    assert got == _final(capture)
    opcodes = table["bth.opcode"].to_pylist()
    assert [c for c, op in zip(got, opcodes, strict=True) if op is not None] == [
        0, 0, 0, 1, 1, 1, 0, 1]
    assert not list((tmp_path / "ds").rglob(".*tmp*"))  # the first attempt's files went


def test_a_partition_the_end_renumbers_away_leaves_no_directory(tmp_path: Path) -> None:
    """Partitioned by connection, the first attempt wrote the CNP's own connection; the
    rows written again have none: its directory goes with its file."""
    capture = _cnp_first(tmp_path)
    out = tmp_path / "ds"
    outcome = write.export_capture(str(capture), write.Options(str(out), partition_by="qp"))
    assert outcome.ok
    parts = out / "packets" / f"capture={capture.name}"
    assert sorted(p.name for p in parts.iterdir()) == ["connection=0", "connection=1"]
    assert all(any(p.iterdir()) for p in parts.iterdir())


@corpus.needs_shared
def test_text_columns_read_back_as_strings(tmp_path: Path) -> None:
    """Parquet gets text columns as dictionary arrays; readers see the strings and the
    schema version, without Arrow's own schema in the file."""
    capture = shared_captures()[0]
    _exported(capture, tmp_path / "ds")
    table = pq.read_table(tmp_path / "ds" / "packets" / f"{capture.name}.parquet")
    expected = sch.schema()
    assert table.schema.metadata[b"ibwire.schema_version"] == sch.SCHEMA_VERSION.encode()
    assert [(f.name, f.type) for f in table.schema] == [(f.name, f.type) for f in expected]
    assert np.count_nonzero(np.array(table["encapsulation"].to_pylist()) != "other") > 0


def test_standard_input_is_read_once(tmp_path: Path) -> None:
    """A capture on standard input is exported in its one pass; one whose connections the
    end renumbers would need a second read, and fails saying so (nothing left behind)."""
    import subprocess
    import sys

    from tests.corpus import ROOT

    def export(data: bytes, out: Path) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "ibwire.cli.main", "export", "--all",
                               "-o", str(out), "-"], input=data, capture_output=True)

    sample = ROOT / "captures" / "sample-rocev2.pcap"
    done = export(sample.read_bytes(), tmp_path / "in")
    assert done.returncode == 0, done.stderr
    assert _exported(sample, tmp_path / "file") == pq.read_table(
        tmp_path / "in" / "packets" / "stdin.parquet")["connection"].to_pylist()
    done = export(_cnp_first(tmp_path).read_bytes(), tmp_path / "cnp")
    assert done.returncode == 1 and b"takes a second read" in done.stderr, done.stderr
    assert not [p for p in (tmp_path / "cnp").rglob("*") if p.is_file()]


def _numbers(path: Path, observe: bool) -> list[int]:
    """Each record's connection as the one pass numbers it (``Labeller.of``)."""
    labeller = Labeller(observe=observe)
    got: list[int] = []
    for batch in batches(str(path)):
        got.extend(labeller.of(batch).tolist())
    labeller.finish()
    return got


@pytest.mark.parametrize("pending", [None, 64])
def test_numbers_without_observers_are_those_with(tmp_path: Path, pending: int | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``--qp`` the observers run only when the joining of streams reads them (or
    too many rows wait): the numbers are those of the full analysis, on the benchmarks'
    captures of every kind (hundreds of connections, answers joined by their PSNs), also
    when waiting rows are fed every few batches (``pending``)."""
    from tools import mixed_capture

    from ibwire.analysis import connections
    from ibwire.scan import capture

    monkeypatch.setattr(capture, "BATCH_ROWS", 512)  # many batches: rows wait across them
    if pending is not None:
        monkeypatch.setattr(connections, "PENDING_ROWS", pending)
    caught: list[int] = []
    real = connections.Connections._catch_up

    def catch_up(self: connections.Connections, c: connections.Connection) -> None:
        caught.append(len(c.pending))
        real(self, c)

    monkeypatch.setattr(connections.Connections, "_catch_up", catch_up)
    for path in (mixed_capture.write_ethernet(tmp_path / "mixed.pcap", 4000, seed=7),
                 mixed_capture.write_infiniband(tmp_path / "mixed-ib.pcap", 3000, seed=7)):
        caught.clear()
        lazy = _numbers(path, observe=False)
        assert any(caught), "no observer was ever caught up: rule 3 not exercised"
        assert lazy == _numbers(path, observe=True)
        assert len(set(lazy)) > 50
