"""``check``, ``show`` and ``show --json`` on packets whose headers are broken: the error and,
where the length fields still place the CRCs, what they say -- the same on every path.

The frames are the cases of ``tests/scan/test_scan_verdicts.py``: each breakage corrupted
(CRCs bad) and built wrong (CRCs good), and breakages that leave no CRC placed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ibwire.cli.check import _inspected, _scanned, _tallied
from ibwire.scan import tally
from ibwire.scan.tally import open_tally
from tests.cli.test_cli import _json_both_ways, _show_both_ways, _trees_both_ways, run
from tests.pcap.capture_synth import pcap_file
from tests.scan.test_scan_verdicts import NOT_PLACED, PLACED, V4, built_wrong, corrupted

LINKTYPES = {"ethernet": 1, "infiniband": 247}


def _not_placed(built, poke) -> bytes:
    frame = bytearray(built.frame)
    poke(frame)
    return bytes(frame)


def captures(tmp_path: Path) -> dict[str, tuple[Path, list[str]]]:
    """One capture per link type: a good packet, then every case of that link as corrupted,
    built wrong, or not placed; with what each record's CRC verdict must be."""
    out = {}
    for link, linktype in LINKTYPES.items():
        frames, expect = [], []
        if link == "ethernet":
            frames.append(V4.frame)
            expect.append("good")
        for case in PLACED:
            if case.built.link == link:
                frames += [corrupted(case), built_wrong(case)]
                expect += ["corrupted", "built-wrong"]
        for _name, built, poke, _error in NOT_PLACED:
            if built.link == link:
                frames.append(_not_placed(built, poke))
                expect.append("not-placed")
        path = tmp_path / f"{link}.pcap"
        path.write_bytes(pcap_file(frames, linktype))
        out[link] = (path, expect)
    return out


def _walk(walk, path: Path) -> tuple[Counter[str], list[str]]:
    args = argparse.Namespace(count=None, where=None, no_progress=True)
    counts: Counter[str] = Counter()
    lines: list[str] = []
    for found, failed in walk(str(path), args):
        counts.update(found)
        lines += failed
    return +counts, lines


@pytest.fixture(params=["python", "c"])
def tally_twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The counting scan of ``check`` on this twin."""
    from ibwire.scan import _tally_python

    if request.param == "c":
        from tests.scan.conftest import tally_c_engine

        chosen = tally_c_engine()
    else:
        chosen = _tally_python
    monkeypatch.setattr(tally, "engine", lambda: (chosen, request.param))
    return request.param


@pytest.mark.parametrize("link", sorted(LINKTYPES))
def test_check_says_the_error_and_the_verdict_on_every_path(tmp_path, tally_twin, link):
    path, expect = captures(tmp_path)[link]
    counting = open_tally(path)
    assert counting is not None
    (scanned, scanned_lines), (inspected, inspected_lines), (tallied, tallied_lines) = (
        _walk(walk, path) for walk in (_scanned, _inspected,
                                       lambda p, a: _tallied(p, counting, a)))
    assert scanned_lines == tallied_lines == inspected_lines  # word for word
    assert scanned == tallied
    assert inspected["ib"] <= scanned["ib"]
    del scanned["ib"], inspected["ib"]
    assert scanned == inspected
    by_record = {int(re.search(r"record (\d+):", line).group(1)): line
                 for line in scanned_lines}
    assert sorted(by_record) == [n for n, e in enumerate(expect, 1) if e != "good"]
    for number, kind in enumerate(expect, 1):
        line = by_record.get(number, "")
        if kind == "corrupted":
            assert re.search(r"; (ICRC|VCRC) bad.*: corrupted after the sender built it$", line)
            assert "ok" not in line.split("; ")[-1], line
        elif kind == "built-wrong":
            assert re.search(r"; [IV]CRC ok(, VCRC ok)?: the sender built it wrong$", line), line
        elif kind == "not-placed":
            assert "; ICRC" not in line and "; VCRC" not in line, line
    placed_icrc = [c for c in PLACED if c.built.link == link and c.icrc]
    placed_vcrc = [c for c in PLACED if c.built.link == link and c.vcrc_at is not None]
    assert (tallied["icrc_bad"], tallied.get("vcrc_bad", 0)) == (len(placed_icrc),
                                                                 len(placed_vcrc))
    assert tallied["errors"] == tallied["failed"] == expect.count("corrupted") + \
        expect.count("built-wrong") + expect.count("not-placed")


@pytest.mark.parametrize("link", sorted(LINKTYPES))
def test_show_and_show_json_give_the_verdict_both_ways(tmp_path, link):
    path, expect = captures(tmp_path)[link]
    lines, dissected = _show_both_ways(path)
    assert lines == dissected
    objects, dissected_objects = _json_both_ways(path)
    assert objects == dissected_objects
    trees, dissected_trees = _trees_both_ways(path)
    assert trees == dissected_trees
    for line, tree, fields, kind in zip(lines, trees, (json.loads(o) for o in objects), expect,
                                        strict=True):
        head = tree.splitlines()[0]  # -V: the summary line first (its time from the record)
        assert head.split(None, 2)[2] == line.split(None, 2)[2]
        verdicts = (fields["icrc_ok"], fields["vcrc_ok"])
        if kind == "good":
            assert fields["error"] is None and verdicts == (True, None)
            continue
        assert fields["error"] and "[" in line, line
        if kind == "not-placed":
            assert verdicts == (None, None)
            assert not re.search(r"\b[IV]CRC (ok|BAD)\b", line), line
            continue
        good = kind == "built-wrong"
        assert good in verdicts and (not good) not in verdicts, (kind, fields)
        shown = re.findall(r"\b([IV]CRC) (ok|BAD)\b", line)
        assert shown and all((word == "ok") == good for _, word in shown), line
        assert [name for name, _ in shown] == [name for name, ok in
                                               zip(("ICRC", "VCRC"), verdicts, strict=True)
                                               if ok is not None]


def test_the_ibwire_command(capsys, tmp_path):
    path, expect = captures(tmp_path)["ethernet"]
    status, out, _ = run(capsys, "check", "--json", str(path))
    assert status == 1
    summary = json.loads(out.splitlines()[-1])
    assert summary["failed"] == len(expect) - 1
    status, out, _ = run(capsys, "show", "--json", str(path))
    assert status == 0
    verdicts = [json.loads(line)["icrc_ok"] for line in out.splitlines()]
    assert verdicts == [{"good": True, "corrupted": False, "built-wrong": True}.get(kind)
                        for kind in expect]
