"""``qp --plot`` figures read back: axis units and labels, which series exist, retransmissions
a series of their own, marks thinned, detail panels on the longest stalls of captures whose
stalls are known (generated with faults; hand-made with known gaps), windows."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ibwire.analysis import analyse
from ibwire.gen import Fault, QpSpec, Scenario
from tests.analysis.conftest import frame, write_frames
from tests.corpus import capture, needs_shared

pytest.importorskip("matplotlib")

from ibwire.analysis.plot import figure as figure_module
from ibwire.analysis.plot import series_of
from ibwire.analysis.plot.figure import connection_figure

#: 12 WRITEs of 8 KiB (96 packets): PSN offset 20 dropped (NAK), an RNR NAK at 40 (timer code
#: 3: 30 µs), the last packet dropped (nothing after it to NAK: the requester's timer, code
#: 4: 4.096 µs * 2^4 = 65.536 µs, IBA 9.7.6.1.2).
THREE = Scenario(qps=(QpSpec("write", 8192, iters=12, timeout=4),),
                 faults=(Fault("drop", 0, 20), Fault("rnr", 0, 40, timer=3),
                         Fault("drop", 0, 95)))
TIMEOUT_NS = 4096 * 2 ** 4


def axes_of(fig):
    return {ax.get_gid(): ax for ax in fig.axes}


def lines_of(ax):
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}


@pytest.fixture
def three(generated):
    path, manifest = generated(THREE)
    result = analyse(path, trace=True)
    return result, series_of(result, 0), manifest["qps"][0]


def test_time_axis_unit_label_and_start(three):
    result, s, _ = three
    fig = connection_figure(result.connections[0], s)
    fig.canvas.draw()
    ax = axes_of(fig)
    # 112 µs of traffic: µs, from the first packet, no offset or multiplier
    assert ax["latency"].get_xlabel() == "time from the connection's first packet (µs)"
    lo, hi = ax["psn"].get_xlim()      # the span and a 1 % margin
    assert lo == pytest.approx(-s.span / 1e5) and hi == pytest.approx(s.span * 1.01 / 1000)
    for a in fig.axes:
        assert a.xaxis.get_offset_text().get_text() == ""
        assert a.yaxis.get_offset_text().get_text() == ""
    assert "first packet 1970-01-01T00:00:00.000000000Z" in fig._suptitle.get_text()


def test_psn_series_retransmissions_apart(three):
    result, s, q = three
    fig = connection_figure(result.connections[0], s)
    lines = lines_of(axes_of(fig)["psn"])
    assert {"first transmission", "retransmission", "acknowledged PSN"} <= set(lines)
    first, again = lines["first transmission"], lines["retransmission"]
    assert len(again.get_ydata()) == q["retransmitted_packets"] == 57
    assert len(first.get_ydata()) == q["data_packets"]
    assert again.get_zorder() > first.get_zorder()          # drawn over them
    assert again.get_color() != first.get_color()
    # the resent PSNs are PSNs sent before; the dropped ones among them
    start = q["start_psn"]
    assert set(again.get_ydata()) <= set(first.get_ydata())
    assert {start + 20, start + 40, start + 95} <= set(again.get_ydata())
    # the acknowledged PSN never goes down and ends at the last PSN
    ack = lines["acknowledged PSN"].get_ydata()
    assert (np.diff(ack) >= 0).all() and ack[-1] == start + 95


def test_rounds_classed_as_the_analysis_counts(three):
    result, s, q = three
    by = {}
    for r in s.rounds:
        by[r.cause] = by.get(r.cause, 0) + r.packets
    assert by == {"nak": q["nak_retransmissions"], "rnr": q["rnr_retransmissions"],
                  "timeout": q["timeout_retransmissions"]}


def test_detail_panels_on_the_longest_stalls(three):
    result, s, q = three
    fig = connection_figure(result.connections[0], s)
    ax = axes_of(fig)
    titles = [ax[f"detail-{n}"].get_title() for n in (1, 2, 3)]
    assert "detail-4" not in ax
    # longest first: the timeout's 65.5 µs wait, the RNR wait (30 µs), the NAK's resend
    assert titles[0].startswith("1: timeout recovery: ")
    assert titles[1].startswith("2: RNR recovery: ")
    assert titles[2].startswith("3: NAK recovery: ")
    timeout, rnr = s.worst()[:2]
    assert TIMEOUT_NS <= timeout.duration < TIMEOUT_NS * 1.1
    assert q["rnr_wait_ns"] == [30000] and 30000 <= rnr.duration < 33000
    for n, e in enumerate(s.worst(), 1):
        lo, hi = ax[f"detail-{n}"].get_xlim()
        size = {"ns": 1, "µs": 1000, "ms": 1e6}[ax[f"detail-{n}"].get_xlabel().split("(")[1][:-1]]
        assert lo * size <= e.start and e.end <= hi * size
        assert f"{e.packets} resent" in titles[n - 1]


def test_known_gaps_picked_longest_first(tmp_path):
    """A hand-made WRITE stream, 1 µs apart, with gaps of 50, 200, 120 and 30 µs: the
    detail panels are the 200, 120 and 50 µs gaps, in that order, as idle gaps."""
    gaps = {300: 50_000, 600: 200_000, 900: 120_000, 1100: 30_000}
    frames, t = [], 1_700_000_000_000_000_000
    for i in range(1200):
        t += gaps.get(i, 1_000)
        frames.append((t, frame("RC_RDMA_WRITE_ONLY", i, 0x11, payload=64, reth_va=0,
                                reth_r_key=1, reth_dmalen=64)))
    result = analyse(write_frames(tmp_path / "gaps.pcap", frames), trace=True)
    s = series_of(result, 0)
    assert [e.duration for e in s.worst()] == [200_000, 120_000, 50_000]
    fig = connection_figure(result.connections[0], s)
    fig.canvas.draw()
    ax = axes_of(fig)
    assert [ax[f"detail-{n}"].get_title() for n in (1, 2, 3)] == [
        "1: idle gap: 200 µs", "2: idle gap: 120 µs", "3: idle gap: 50 µs"]
    assert "retransmission" not in lines_of(ax["psn"])
    # 1.6 ms: milliseconds; the detail of the 200 µs gap (at 0.9 ms) in µs
    assert ax["rate"].get_xlabel().endswith("(ms)")
    assert ax["detail-1"].get_xlabel() == "time from first packet (µs)"
    assert "2023-11-14T22:13:20.000001000Z" in fig._suptitle.get_text()


def test_short_clean_connection_details(tmp_path):
    """60 SENDs 1 µs apart with one 500 µs pause: short and clean, no recovery to show; but
    mostly idle, so the panels zoom on its two bursts. Without the pause: no panels."""
    def sends(pause):
        return [(1_000 * i + (pause if i >= 30 else 0),
                 frame("RC_SEND_ONLY", i, 0x11, payload=8)) for i in range(60)]

    result = analyse(write_frames(tmp_path / "short.pcap", sends(500_000)), trace=True)
    s = series_of(result, 0)
    assert len(s.stalls) == 1 and not s.rounds
    ax = axes_of(connection_figure(result.connections[0], s))
    assert [ax[f"detail-{n}"].get_title() for n in (1, 2)] == [
        "1: activity: 30 packets in 29 µs", "2: activity: 30 packets in 29 µs"]
    assert "detail-3" not in ax
    result = analyse(write_frames(tmp_path / "even.pcap", sends(0)), trace=True)
    ax = axes_of(connection_figure(result.connections[0], series_of(result, 0)))
    assert not any(g.startswith("detail") for g in ax)


def test_marks_thinned_and_counted(three, monkeypatch):
    result, s, q = three
    monkeypatch.setattr(figure_module, "MAX_MARKS", 1)
    fig = connection_figure(result.connections[0], s)
    ax = axes_of(fig)["marks"]
    lines = lines_of(ax)
    assert set(lines) == {"NAK", "RNR NAK"}
    labels = [t.get_text() for t in ax.get_yticklabels()]
    naks = q["naks_psn_seq_error"]
    assert labels == ["NAK (1)" if naks == 1 else f"NAK ({naks:,}, 1 drawn)", "RNR NAK (1)"]
    assert all(len(line.get_xdata()) <= 1 for line in lines.values())


def test_psn_wrap_unwrapped(generated):
    path, manifest = generated(Scenario(qps=(QpSpec("write", 8192, iters=4,
                                                    start_psn=0xFFFFF0),)))
    result = analyse(path, trace=True)
    fig = connection_figure(result.connections[0], series_of(result, 0))
    y = lines_of(axes_of(fig)["psn"])["first transmission"].get_ydata()
    assert (np.diff(y) == 1).all() and y[0] == 0xFFFFF0 and y[-1] == 0xFFFFF0 + 31


def test_throughput_and_goodput(three):
    result, s, q = three
    fig = connection_figure(result.connections[0], s)
    rate = axes_of(fig)["rate"]
    lines = lines_of(rate)
    assert set(lines) == {"throughput", "goodput"}
    unit = rate.get_ylabel().split("\n")[0]
    per = {"b/s": 1, "kb/s": 1e3, "Mb/s": 1e6, "Gb/s": 1e9}[unit]
    width_text = rate.get_ylabel().split("bins of ")[1].rstrip(")")
    width = float(width_text.split()[0]) * {"ns": 1, "µs": 1e3, "ms": 1e6}[width_text.split()[1]]
    total = {k: lines[k].get_ydata().sum() * per * width / 8e9 for k in lines}
    assert total["goodput"] == pytest.approx(q["data_bytes"], rel=1e-6)
    assert total["throughput"] == pytest.approx(q["data_bytes"] + 57 * 1024, rel=1e-6)


def test_latency_panel(three):
    result, s, q = three
    ax = axes_of(connection_figure(result.connections[0], s))["latency"]
    lines = lines_of(ax)
    assert set(lines) == {"ACK round trip", "NAK response", "RNR wait"}
    assert ax.get_ylabel().startswith("latency (")
    scale = {"ns": 1, "µs": 1e3}[ax.get_ylabel()[9:-1]]
    assert lines["RNR wait"].get_ydata()[0] * scale >= q["rnr_wait_ns"][0]
    assert lines["NAK response"].get_ydata()[0] * scale == pytest.approx(
        q["nak_response_ns"][0], abs=1)
    # 40 ns NAK responses and a 30 µs RNR wait: a log scale, its decades plain numbers
    assert ax.get_yscale() == "log"
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "10" in labels and all(re.fullmatch(r"[0-9.]+", t) for t in labels)


def test_window_draws_that_span_only(three):
    result, s, _ = three
    fig = connection_figure(result.connections[0], s, window=(40_000, 60_000))
    ax = axes_of(fig)
    assert ax["psn"].get_xlim() == (40.0, 60.0)
    assert not any(g.startswith("detail") for g in ax)
    x = lines_of(ax["psn"])["first transmission"].get_xdata()
    assert len(x) and x.min() >= 40 and x.max() <= 60


@needs_shared
def test_real_capture(tmp_path):
    path = str(capture("linlinw5-rdma_ib_tutorial_rdma_write_bw.pcap"))
    result = analyse(path, trace=True)
    fig = connection_figure(result.connections[0], series_of(result, 0))
    fig.canvas.draw()
    ax = axes_of(fig)
    assert ax["rate"].get_xlabel() == "time from the connection's first packet (µs)" or \
        ax["latency"].get_xlabel() == "time from the connection's first packet (µs)"
    assert "first packet 2026-06-16T14:56:01.226451000Z" in fig._suptitle.get_text()
    assert all(a.xaxis.get_offset_text().get_text() == "" for a in fig.axes)


def test_cnp_and_ecn_marks_counted(generated):
    """ECN marks seen at the responder's side: CE packets and the CNPs they cause, each a
    row of the strip with the manifest's count."""
    path, manifest = generated(Scenario(qps=(QpSpec("write", 8192, iters=6),),
                                        faults=(Fault("ecn", rate=0.3),), tap="responder"))
    q = manifest["qps"][0]
    assert q["ecn_ce_packets"] and q["cnps"]
    result = analyse(path, trace=True)
    ax = axes_of(connection_figure(result.connections[0], series_of(result, 0)))["marks"]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"CNP ({q['cnps']})", f"ECN-CE ({q['ecn_ce_packets']})"]
    assert len(lines_of(ax)["ECN-CE"].get_xdata()) == q["ecn_ce_packets"]


def test_read_responses_move_the_acknowledged_psn(generated):
    path, manifest = generated(Scenario(qps=(QpSpec("read", 4096, iters=3),)))
    q = manifest["qps"][0]
    result = analyse(path, trace=True)
    lines = lines_of(axes_of(connection_figure(result.connections[0],
                                               series_of(result, 0)))["psn"])
    # three READs of 4 PSNs each: requests at start, start+4, start+8; answered to start+11
    assert lines["first transmission"].get_ydata().tolist() == [
        q["start_psn"], q["start_psn"] + 4, q["start_psn"] + 8]
    assert lines["acknowledged PSN"].get_ydata().max() == q["start_psn"] + 11


def test_detail_nak_marks_only_when_few(three, monkeypatch):
    result, s, _ = three
    ax = axes_of(connection_figure(result.connections[0], s))
    nak = lines_of(ax["detail-3"])["NAK"]            # the NAK recovery: its NAK at its PSN
    resent = lines_of(ax["detail-3"])["retransmission"].get_ydata()
    assert nak.get_ydata().tolist() == [resent.min()]
    monkeypatch.setattr(figure_module, "DETAIL_MARKS", 0)
    ax = axes_of(connection_figure(result.connections[0], s))
    assert "NAK" not in lines_of(ax["detail-3"])
