"""``ibwire qp``: table, --json, --csv, --plot images, exit status; the Arrow table."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from ibwire.analysis import KEYS, analyse
from ibwire.cli.main import main
from ibwire.gen import Fault, QpSpec, Scenario
from tests.corpus import capture, needs_shared

READ_BW = capture("linlinw5-rdma_ib_tutorial_rdma_read_bw.pcap")


@pytest.fixture
def lossy(generated):
    path, manifest = generated(Scenario(
        qps=(QpSpec("write", 8192, iters=10, start_psn=0xFFFFF0, timeout=6),
             QpSpec("read", 4096, iters=4)),
        faults=(Fault("drop", 0, 5), Fault("ecn", rate=0.3)), tap="switch"))
    return path, manifest


def test_json_is_one_object_per_connection(lossy, capsys):
    path, manifest = lossy
    status = main(["qp", "--json", path])
    lines = capsys.readouterr().out.splitlines()
    got = [json.loads(line) for line in lines]
    assert got == json.loads(json.dumps(analyse(path).as_dicts()))
    assert [list(d) for d in got] == [list(KEYS)] * 2
    assert got[0]["retransmitted_packets"] == manifest["qps"][0]["retransmitted_packets"] > 0
    assert status == (1 if any(d["findings"] for d in got) else 0)


def test_csv_and_table(lossy, capsys, monkeypatch):
    path, _ = lossy
    main(["qp", "--csv", path])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 2 and int(rows[0]["data_packets"]) == analyse(
        path).connections[0].data_packets
    for width in (60, 80, 200):
        monkeypatch.setenv("COLUMNS", str(width))
        main(["qp", path])
        out = capsys.readouterr().out.splitlines()
        table = out[:3]
        assert all(len(line) <= width for line in table)
        assert table[0].split()[:3] == ["#", "requester", "responder"]
        assert "192.0.2.1/0x100" in table[1]
    assert "nak/to/rnr" in table[0]   # the widest shows every column
    assert out[-1] == f"2 connections in {analyse(path).records} records"


def test_arrow_table_has_a_row_per_connection(lossy):
    pa = pytest.importorskip("pyarrow")
    path, manifest = lossy
    table = analyse(path).to_arrow()
    assert isinstance(table, pa.Table) and table.num_rows == 2
    assert table.column_names == list(KEYS)
    assert table.column("data_packets").to_pylist() == [q["data_packets"] for q in
                                                        manifest["qps"]]


def _not_blank(path):
    from matplotlib.image import imread

    image = imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 600
    pixels = image[..., :3].reshape(-1, 3)
    assert (pixels.std(axis=0) > 0.05).any()           # not one colour
    assert len(np.unique((pixels * 255).astype(np.uint8), axis=0)) > 10


@pytest.mark.parametrize("which", ["generated", pytest.param("real", marks=needs_shared)])
def test_plots_are_drawn(lossy, tmp_path, capsys, which):
    pytest.importorskip("matplotlib")
    if which == "real":
        path = str(READ_BW)
    else:
        path = lossy[0]
    out = tmp_path / "plots"
    main(["qp", "--plot", str(out), "--svg", path])
    pngs = sorted(out.glob("*.png"))
    svgs = sorted(out.glob("*.svg"))
    assert len(pngs) == len(svgs) == len(analyse(path).connections) >= 1
    for png in pngs:
        assert png.stat().st_size > 10_000
        _not_blank(str(png))
    assert svgs[0].read_text().lstrip().startswith("<?xml")


def test_plot_without_matplotlib_names_the_extra(lossy, monkeypatch, capsys):
    import builtins

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    assert main(["qp", "--plot", "/nonexistent", lossy[0]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ibwire qp: plots need matplotlib: pip install 'ibwire[plot]'"]


def test_findings_are_summarised_by_kind(tmp_path, capsys):
    """Many findings of a kind (CE marks whose CNPs the capture lost, bad ICRCs): one line per
    connection and kind with how many and the first records (from 1), every one in --json."""
    import ibwire
    from ibwire.gen import generate
    from tests.analysis.conftest import write_frames

    records, _ = generate(Scenario(qps=(QpSpec("write", 1024, iters=300, mtu=1024),),
                                   faults=(Fault("ecn", rate=0.5), Fault("corrupt", rate=0.02)),
                                   tap="responder", cnp_interval_us=0.5, seed=3))
    cnp = 0x81
    path = write_frames(tmp_path / "no-cnps.pcap", [
        (t, f) for t, f in records if ibwire.parse(f).fields()["bth.opcode"] != cnp])
    args = ["qp", "--cnp-interval-us", "0.5", path]
    assert main(["qp", "--json", *args[1:]]) == 1
    (d,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    missing = [f for f in d["findings"] if f["kind"] == "cnp_missing"]
    bad = [f for f in d["findings"] if f["kind"] == "bad_icrc"]
    assert len(missing) > 8 and len(bad) == 1 and bad[0]["count"] > 1
    assert main(args) == 1
    out = capsys.readouterr().out.splitlines()
    first = ", ".join(str(f["records"][0]) for f in missing[:8])
    assert f"#0 cnp_missing: {len(missing)} (records {first} ...)" in out
    icrc = ", ".join(map(str, bad[0]["records"]))
    assert f"#0 bad_icrc: {bad[0]['detail']} (records {icrc})" in out
    assert len([line for line in out if line.startswith("#0 ")]) == 2
    assert "(qp --json lists every finding)" in out
