"""Headers-only captures: a snap length cuts the payload, not the analysis.

A frame the capture cut (caplen < orig_len) after its last header is a packet whose CRCs
cannot be verified; cut inside a header of an InfiniBand/RoCE packet, it is a packet whose
error names that header, with every header before it. Neither is a failure of ``check``
(``--strict`` makes them one). Every column the scanner fills from a header the capture kept
equals the full capture's, ``payload.length`` comes from the length fields, and ``qp``
gives the same tables. Checked on the shipped samples and on the shared real captures, each
cut at several snap lengths, against both scanner twins and the dissector.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ibwire.pcap import open_capture
from ibwire.pcap.snap import snap_capture as snap  # as tcpdump -s / editcap -s cut
from tests.cli.test_malformed import (
    check_summary,
    cli,
    cut,
    ib_cut,
    ib_global,
    names_one_of,
    record_numbers,
    roce_write,
    show_reason,
)
from tests.corpus import CAPTURES, ROOT, skip_missing

SAMPLES = ROOT / "captures"
SNAPLENS = (64, 128, 256, 400)


# ----------------------------------------------------------------- a header cut by the capture

HEADER_CUTS = [
    pytest.param(cut(roce_write(3), 48), ("bth",), id="rocev2-inside-bth"),
    pytest.param(cut(roce_write(3), 60), ("reth",), id="rocev2-inside-reth"),
    pytest.param(ib_cut(ib_global(3), 20), ("grh",), id="ib-inside-grh"),
    pytest.param(ib_cut(ib_global(3), 52), ("bth",), id="ib-inside-bth"),
]
CHECK_PATHS = [(), ("-c", "1000000"), ("--where", "frame > 0")]


@pytest.mark.parametrize("how", CHECK_PATHS, ids=["tally", "scanner", "dissector"])
@pytest.mark.parametrize(("data", "words"), HEADER_CUTS)
def test_a_header_cut_by_the_capture_is_counted_not_failed(tmp_path: Path, data: bytes,
                                                           words: tuple[str, ...],
                                                           how: tuple[str, ...]) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(data)
    result = cli("check", *how, path)
    assert result.status == 0, result
    assert "1 of them cut by the capture" in result.out, result.out
    summary = check_summary(cli("check", "--json", *how, path))
    assert (summary["records"], summary["failed"], summary["errors"], summary["cut"]) == \
        (5, 0, 0, 1), summary
    assert summary["ib"] == 5 and summary["verified"] == 4, summary
    strict = cli("check", "--strict", *how, path)
    assert strict.status == 1 and "FAILED" in strict.out, strict


@pytest.mark.parametrize("where", [None, "frame > 0"], ids=["columns", "dissector"])
@pytest.mark.parametrize(("data", "words"), HEADER_CUTS)
def test_show_names_the_header_the_capture_cut_after_the_headers_before(
        tmp_path: Path, data: bytes, words: tuple[str, ...], where: str | None) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(data)
    result = cli("show", *(("--where", where) if where else ()), path)
    assert result.status == 0, result
    line = result.lines[2]
    reason = show_reason(line)
    assert names_one_of(reason, words) and "cut by the capture" in reason, line
    assert "? → ?" not in line, line  # the addresses before the cut are shown
    if words == ("reth",):  # the BTH was kept: its QP and PSN are on the line
        assert "QP=0x000012 PSN=3" in line, line
    rows = [json.loads(x) for x in cli("show", "--json", path).lines]
    assert rows[2]["cut"] is True and rows[2]["icrc_ok"] is None, rows[2]
    assert record_numbers(rows[2]["error"]) == {3}


# ----------------------------------------------------------------- cut after the headers

def _columns(engine: ModuleType, path: Path) -> dict[str, np.ndarray]:
    """The scanner twin's columns of every record of a classic pcap (with orig lengths)."""
    with open_capture(path) as capture:
        records = list(capture)
    buf = b"".join(bytes(r.frame) for r in records)
    offsets = np.cumsum([0] + [len(r.frame) for r in records[:-1]])
    lengths = [len(r.frame) for r in records]
    links = [{"ethernet": 0, "infiniband": 1}[r.link] for r in records]
    return engine.scan_frames(buf, offsets, lengths, links, None,
                               [max(r.orig_len, len(r.frame)) for r in records])


def ib_longer(path: Path, snaplen: int) -> int:
    """InfiniBand/RoCE packets of ``path`` longer than ``snaplen``: those it would cut."""
    from ibwire import scan

    cols = _columns(scan, path)
    ib = (cols["encapsulation"] != 0) & (cols["error"] != 1)
    return int(np.count_nonzero(ib & (cols["frame.len"] > snaplen)))


def _header_columns(cols: dict[str, np.ndarray], row: int, kept: int) -> dict[str, Any]:
    """The header-field columns of a row whose headers lie in the first ``kept`` bytes."""
    from ibwire.scan import program

    out = {}
    for c in program.columns():
        if c.name in cols and int(cols["headers"][row]) >> c.slot & 1:
            out[c.name] = np.asarray(cols[c.name][row]).tolist()
    return out


@pytest.mark.parametrize("snaplen", SNAPLENS)
@pytest.mark.parametrize("sample", ["sample-rocev2.pcap", "sample-ib.pcap",
                                    "sample-corrupt.pcap"])
def test_the_scanner_reads_every_header_a_snap_length_kept(tmp_path: Path, scanner: ModuleType,
                                                           sample: str, snaplen: int) -> None:
    full_path, cut_path = SAMPLES / sample, tmp_path / "cut.pcap"
    cut_count = snap(full_path, cut_path, snaplen)
    full, short = _columns(scanner, full_path), _columns(scanner, cut_path)
    seen_cut = 0
    for row in range(len(full["error"])):
        cut_here = int(short["cut"][row]) != 0
        seen_cut += cut_here
        if full["error"][row] != 0:  # other traffic, or broken on the wire: not compared
            continue
        if short["error"][row] != 0:  # a header the capture cut: the ones before it
            assert short["error"][row] == 2 and short["cut"][row] & 4, row
            kept = _header_columns(short, row, snaplen)
            whole = _header_columns(full, row, snaplen)
            assert kept.items() <= whole.items(), row
            continue
        kept, whole = _header_columns(short, row, snaplen), _header_columns(full, row, snaplen)
        assert kept.items() <= whole.items(), row  # the same values, where there are values
        views = {k for k in whole if k.startswith("cm.")}  # a MAD body view may be past them
        assert set(kept) | views >= set(whole), (row, set(whole) - set(kept))
        for name in ("encapsulation", "payload.length", "offset.payload", "offset.icrc",
                     "ecn", "error"):
            assert short[name][row] == full[name][row], (row, name)
        if cut_here:
            assert short["icrc_ok"][row] == -1 and short["vcrc_ok"][row] == -1, row
        else:
            assert short["icrc_ok"][row] == full["icrc_ok"][row], row
    assert seen_cut == ib_longer(full_path, snaplen), (seen_cut, cut_count)


@pytest.mark.parametrize("snaplen", SNAPLENS)
def test_check_show_and_stats_of_a_headers_only_sample(tmp_path: Path, snaplen: int) -> None:
    full_path, cut_path = SAMPLES / "sample-rocev2.pcap", tmp_path / "cut.pcap"
    snap(full_path, cut_path, snaplen)
    full = check_summary(cli("check", "--json", full_path))
    for how in CHECK_PATHS:
        short = check_summary(cli("check", "--json", *how, cut_path))
        assert (short["records"], short["ib"], short["other"], short["failed"]) == \
            (full["records"], full["ib"], full["other"], 0), (how, short)
        lines = cli("show", cut_path).lines
        assert short["cut"] == sum("cut (" in x or "cut by the capture" in x for x in lines)
    # show: every line as the full capture's but for the verdict
    whole = cli("show", full_path).lines
    for a, b in zip(whole, cli("show", cut_path).lines, strict=True):
        if "ICRC cut (" in b:
            assert b.split(" ICRC ")[0] == a.split(" ICRC ")[0], (a, b)
            assert b.endswith(f"({snaplen} of {a and _orig(full_path, int(a.split()[0]))} "
                              "bytes kept)"), b
        elif "[" not in b:
            assert a == b
    # JSON: the same keys and values but for the CRCs, and what was kept
    for a, b in zip(cli("show", "--json", full_path).lines,
                    cli("show", "--json", cut_path).lines, strict=True):
        x, y = json.loads(a), json.loads(b)
        if y.get("cut") and y["error"] is None:
            assert y["payload.length"] == x["payload.length"], y
            assert y["payload.captured"] < y["payload.length"] or y["payload.length"] == 0
            assert (y["frame.len"], y["frame.orig_len"]) == (snaplen, _orig(full_path,
                                                                             x["frame"]))
            gone = {"icrc", "vcrc", "icrc_ok", "vcrc_ok"}
            assert {k: v for k, v in x.items() if k not in gone} == \
                {k: v for k, v in y.items() if k not in gone | {"payload.captured", "cut",
                                                                "frame.len", "frame.orig_len"}}
        elif not y.get("cut"):
            assert x == y
    # stats: the same tables, bytes from the length fields
    stats = [cli("stats", "--json", p) for p in (full_path, cut_path)]
    a, b = (json.loads(s.out) for s in stats)
    a["totals"].pop("cut", None)
    a.pop("file"), b.pop("file")
    cut_total = b["totals"].pop("cut")
    assert cut_total == check_summary(cli("check", "--json", cut_path))["cut"]
    if snaplen < 74:  # an IPv6 RoCEv2 BTH ends at byte 74: that packet has no opcode or QP
        a = {k: a[k] for k in ("totals", "encapsulation")}
        b = {k: b[k] for k in ("totals", "encapsulation")}
    assert a == b


def _orig(path: Path, number: int) -> int:
    with open_capture(path) as capture:
        return next(r.orig_len for r in capture if r.index + 1 == number)


def _qp(path: Path) -> tuple[list[dict[str, Any]], int]:
    """``qp --json`` rows without their count of cut packets, and those counts summed."""
    result = cli("qp", "--json", path)
    assert result.status in (0, 1), result
    rows = [json.loads(line) for line in result.lines]
    cut_total = sum(r.pop("cut_packets") for r in rows)
    return rows, cut_total


REAL = ["rdma_write_bw", "rdma_read_bw", "rdma_send_bw", "rdma_atomic_bw", "pingpong_rc",
        "pingpong_uc", "pingpong_ud", "rdma_write_lat", "rdma_read_lat", "rdma_cm", "rping"]


def _limits(name: str, snaplen: int) -> str | None:
    """Why a capture cut at ``snaplen`` cannot give the full capture's tables, if it can't."""
    if snaplen < 70 and name == "rdma_read_bw":
        return "a READ request's RETH ends at byte 70: its length is cut, its responses unknown"
    if snaplen < 200 and name in ("rdma_cm", "rping"):
        return "the CM REQ's QPN and starting PSN lie past the bytes kept: no CM pairing"
    return None


@pytest.mark.parametrize("snaplen", SNAPLENS)
@pytest.mark.parametrize("name", REAL)
def test_qp_of_a_real_capture_cut_by_a_snap_length_is_the_full_ones(
        tmp_path: Path, name: str, snaplen: int) -> None:
    full_path = CAPTURES / f"linlinw5-rdma_ib_tutorial_{name}.pcap"
    if not full_path.exists():
        skip_missing()
    cut_path = tmp_path / "cut.pcap"
    snap(full_path, cut_path, snaplen)
    cut_count = ib_longer(full_path, snaplen)
    check = check_summary(cli("check", "--json", cut_path))
    assert check["failed"] == 0 and check["cut"] == cut_count, check
    full, none_cut = _qp(full_path)
    short, cut_total = _qp(cut_path)
    assert none_cut == 0
    reason = _limits(name, snaplen)
    if reason is None:
        assert short == full
    else:  # the limit is real: the tables differ, and only where the reason says
        assert short != full, f"expected a difference: {reason}"
    assert cut_total <= cut_count  # CM MADs and UD to QP1 are no connection's


def test_cut_frames_are_reported_per_connection(tmp_path: Path) -> None:
    cut_path = tmp_path / "cut.pcap"
    snap(SAMPLES / "sample-rocev2.pcap", cut_path, 80)
    rows, total = _qp(cut_path)
    assert total > 0
    text = cli("qp", cut_path).out
    assert "cut" in text.lower(), text


@pytest.mark.parametrize("form", ["pcapng", "erf", "gzip"])
def test_pcapng_erf_and_gzip_headers_only_captures_read_the_same(tmp_path: Path,
                                                                 form: str) -> None:
    """pcapng (EPB original length, interface snaplen), ERF records (wlen above rlen) and a
    gzip'd pcap cut by a snap length: the counts of the cut classic pcap."""
    import gzip

    from ibwire.pcap import infiniband_to_erf
    from ibwire.pcap.snap import snap_capture

    sample = SAMPLES / ("sample-ib.pcap" if form == "erf" else "sample-rocev2.pcap")
    cut_pcap = tmp_path / "cut.pcap"
    snap(sample, cut_pcap, 64)
    expected = check_summary(cli("check", "--json", cut_pcap))
    assert expected["cut"] > 0
    if form == "pcapng":
        ng = tmp_path / "whole.pcapng"
        assert cli("convert", sample, ng, "--to", "pcapng").status == 0
        other = tmp_path / "cut.pcapng"
        snap_capture(ng, other, 64)
    elif form == "erf":
        other = tmp_path / "cut-erf.pcap"
        infiniband_to_erf(cut_pcap, other)  # wlen: the record's original length
    else:
        other = tmp_path / "cut.pcap.gz"
        other.write_bytes(gzip.compress(cut_pcap.read_bytes()))
    found = check_summary(cli("check", "--json", other))
    same = ("records", "ib", "other", "failed", "cut", "cut_kept")
    assert {k: found[k] for k in same} == {k: expected[k] for k in same}, (found, expected)
    assert _qp(other) == _qp(cut_pcap)


def test_export_counts_cut_packets_whole(tmp_path: Path) -> None:
    """An exported headers-only capture: payload lengths from the length fields, CRC verdicts
    null where the capture cut them, frame.len below frame.orig_len."""
    pq = pytest.importorskip("pyarrow.parquet")
    cut_path = tmp_path / "cut.pcap"
    snap(SAMPLES / "sample-rocev2.pcap", cut_path, 64)
    for path, out in ((SAMPLES / "sample-rocev2.pcap", "full"), (cut_path, "cut")):
        assert cli("export", path, "-o", tmp_path / out).status == 0
    full, short = (pq.read_table(tmp_path / name).to_pydict() for name in ("full", "cut"))
    rows = range(len(full["record"]))
    cut = [r for r in rows if short["frame.len"][r] < short["frame.orig_len"][r]
           and short["error"][r] is None and full["encapsulation"][r] != "other"]
    assert cut
    for r in cut:
        assert short["payload.length"][r] == full["payload.length"][r]
        assert short["bth.psn"][r] == full["bth.psn"][r]
        assert short["icrc_ok"][r] is None and full["icrc_ok"][r] is True


def test_where_picks_the_packets_a_snap_length_cut(tmp_path: Path) -> None:
    """``--where 'cut == true'`` keeps exactly the packets check counts as cut, and ``-w``
    writes them (headers only, their original lengths kept)."""
    cut_path, kept = tmp_path / "cut.pcap", tmp_path / "kept.pcap"
    snap(SAMPLES / "sample-rocev2.pcap", cut_path, 80)
    result = cli("show", "--where", "cut == true && frame.len < frame.orig_len", cut_path)
    assert result.status == 0, result
    count = check_summary(cli("check", "--json", cut_path))["cut"]
    assert len(result.lines) == count > 0
    assert all("ICRC cut (80 of" in x or "header cut by the capture (80 of" in x
               for x in result.lines), result.out
    assert cli("show", "--where", "cut == true", "-w", kept, cut_path).status == 0
    summary = check_summary(cli("check", "--json", kept))
    assert (summary["records"], summary["cut"], summary["failed"]) == (count, count, 0)
