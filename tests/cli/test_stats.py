"""``ibwire stats``: several files, each with its own tables; the capture's duration and
rates, from the scanner and from the dissector (``--where``) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.pcap import read_capture

SAMPLES = Path(__file__).resolve().parents[2] / "captures"
NAMES = ["sample-ib.pcap", "sample-rocev2.pcap", "sample-corrupt.pcap"]


def _expected_time(path: Path) -> dict[str, float]:
    records = [r for r in read_capture(path) if r.error is None]
    stamps = [r.timestamp_ns for r in records]
    seconds = (max(stamps) - min(stamps)) / 1e9
    return {"duration_s": seconds, "packets_per_s": len(list(read_capture(path))) / seconds,
            "bits_per_s": 8 * sum(r.orig_len for r in read_capture(path)) / seconds}


@pytest.mark.parametrize("where", [(), ("--where", "frame > 0")])
def test_json_lines_one_per_file_with_its_time(capsys, where) -> None:
    paths = [str(SAMPLES / n) for n in NAMES]
    assert main(["stats", "--json", *where, *paths]) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["file"] for f in found] == paths
    for f, path in zip(found, paths, strict=True):
        alone = main(["stats", "--json", *where, path])
        assert alone == 0 and json.loads(capsys.readouterr().out) == f
        want = _expected_time(Path(path))
        for key, value in want.items():
            assert f["time"][key] == pytest.approx(value), key
        assert f["time"]["ib_packets_per_s"] == pytest.approx(
            f["totals"]["ib_packets"] / want["duration_s"])
        assert f["time"]["ib_bits_per_s"] == pytest.approx(
            8 * f["totals"]["ib_bytes"] / want["duration_s"])
        assert f["time"]["last_ns"] - f["time"]["first_ns"] == round(want["duration_s"] * 1e9)


def test_text_tables_under_each_name(capsys) -> None:
    paths = [str(SAMPLES / n) for n in NAMES[:2]]
    assert main(["stats", *paths]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln for ln in out if ln.startswith("==")] == [f"== {p}" for p in paths]
    assert out.count("time:") == 2
    duration = [ln.split() for ln in out if ln.strip().startswith("duration_s")]
    assert [d[1] for d in duration] == [f"{_expected_time(Path(p))['duration_s']:.9f}"
                                        for p in paths]
    assert main(["stats", paths[0]]) == 0
    assert not capsys.readouterr().out.startswith("==")  # one file: as before, no title


def test_one_record_has_no_rate(tmp_path: Path, capsys) -> None:
    one = tmp_path / "one.pcap"
    assert main(["show", "-c", "1", "-w", str(one), str(SAMPLES / "sample-ib.pcap")]) == 0
    capsys.readouterr()
    assert main(["stats", "--json", str(one)]) == 0
    time = json.loads(capsys.readouterr().out)["time"]
    assert time["duration_s"] == 0 and time["packets_per_s"] is None


def test_an_unreadable_file_is_exit_two_the_others_counted(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing.pcap"
    assert main(["stats", "--json", str(SAMPLES / NAMES[0]), str(missing),
                 str(SAMPLES / NAMES[1])]) == 2
    out, err = capsys.readouterr()
    assert [json.loads(line)["file"] for line in out.splitlines()] == [
        str(SAMPLES / NAMES[0]), str(SAMPLES / NAMES[1])]
    assert err.startswith("ibwire stats: ") and "missing.pcap" in err
