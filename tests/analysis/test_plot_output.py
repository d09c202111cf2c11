"""``qp --plot`` output: the interactive page's series (plotly JSON read back), the index
ranked by trouble, the CLI's --plot-format / --svg / --plot-window, and missing extras."""

from __future__ import annotations

import builtins
import re

import pytest

from ibwire.analysis import analyse
from ibwire.analysis.plot import series_of
from ibwire.cli.main import main
from ibwire.gen import Fault, QpSpec, Scenario

pytest.importorskip("matplotlib")

#: Two WRITE QPs; the second loses PSN offset 5 (a NAK round), the first is clean.
TWO = Scenario(qps=(QpSpec("write", 4096, iters=6), QpSpec("write", 4096, iters=6)),
               faults=(Fault("drop", 1, 5), Fault("rnr", 1, 12, timer=2)))


@pytest.fixture
def two(generated):
    return generated(TWO)


def test_html_series(two):
    pytest.importorskip("plotly")
    from ibwire.analysis.plot.html import connection_html

    path, manifest = two
    result = analyse(path, trace=True)
    s = series_of(result, 1)
    fig = connection_html(result.connections[1], s)
    by_name = {}
    for trace in fig.data:
        by_name.setdefault(trace.name, []).append(trace)
    assert {"first transmission", "retransmission", "acknowledged PSN", "NAK", "RNR NAK",
            "throughput", "goodput", "ACK round trip"} <= set(by_name)
    q = manifest["qps"][1]
    assert len(by_name["retransmission"][0].y) == q["retransmitted_packets"] > 0
    assert by_name["retransmission"][0].type == "scattergl"
    assert set(by_name["retransmission"][0].y) <= set(by_name["first transmission"][0].y)
    layout = fig.to_plotly_json()["layout"]
    titles = [v["title"]["text"] for k, v in layout.items()
              if k.startswith("xaxis") and "title" in v]
    assert titles == ["time from the connection's first packet (µs)"]
    assert f"first packet 1970-01-01T00:00:00.{q['first_ns']:09d}Z" in layout["title"]["text"]
    notes = [a["text"] for a in layout["annotations"]]
    assert any(re.match(r"1: RNR recovery: [0-9.]+ µs, \d+ resent", n) for n in notes)


def test_index_ranks_by_trouble(two, tmp_path):
    out = tmp_path / "plots"
    assert main(["qp", "--plot", str(out), "--plot-format", "png,svg", two[0]]) in (0, 1)
    index = (out / "index.html").read_text()
    rows = re.findall(r"<tr[^>]*><td class=''>(\d+)</td>", index)
    assert rows == ["1", "0"]                      # the lossy one first
    links = re.findall(r"href='([^']+)'", index)
    assert len(links) == 4 and all((out / link).is_file() for link in links)
    assert {p.suffix for p in out.iterdir()} == {".png", ".svg", ".html"}


def test_html_format_and_window(two, tmp_path, capsys):
    pytest.importorskip("plotly")
    out = tmp_path / "plots"
    main(["qp", "--plot", str(out), "--plot-format", "html", "--plot-window", "2us:9us",
          two[0]])
    pages = sorted(out.glob("qp*.html"))
    assert len(pages) == 2 and (out / "plotly.min.js").is_file()
    assert 'src="plotly.min.js"' in pages[0].read_text()
    assert not list(out.glob("*.png"))


def test_svg_alias(two, tmp_path):
    out = tmp_path / "plots"
    main(["qp", "--plot", str(out), "--svg", two[0]])
    assert len(list(out.glob("*.png"))) == len(list(out.glob("*.svg"))) == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--plot", "D", "--plot-format", "gif"], "--plot-format: no format gif; the formats "
                                             "are png, svg, html"),
    (["--plot", "D", "--plot-window", "5ms:1ms"], "--plot-window: window '5ms:1ms' ends "
                                                  "before it starts"),
    (["--plot-window", "1:2"], "--plot-window goes with --plot DIR"),
    (["--plot-format", "png"], "--plot-format goes with --plot DIR")])
def test_bad_options(two, tmp_path, capsys, argv, message):
    argv = [str(tmp_path / a) if a == "D" else a for a in argv]
    assert main(["qp", *argv, two[0]]) == 2
    assert capsys.readouterr().err.strip() == f"ibwire qp: {message}"


def test_html_without_plotly_names_the_extra(two, monkeypatch, capsys, tmp_path):
    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.startswith("plotly"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    assert main(["qp", "--plot", str(tmp_path / "p"), "--plot-format", "html", two[0]]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "ibwire qp: HTML plots need plotly: pip install 'ibwire[plot]'"]
    assert not (tmp_path / "p").exists()
