"""``show``'s time column (``ibwire.cli.show_time``): relative to the capture's first record
under ``--where`` too, tshark's ``-t`` formats, nanosecond digits when the file has them; the
same from the scanner's columns, from the dissector (``--where``) and in ``-V`` trees."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.cli.show_time import Clock, capture_digits
from ibwire.pcap import read_capture
from tests.pcap.capture_synth import NS, T0, epb, idb, pcap_file, shb

SAMPLES = Path(__file__).resolve().parents[2] / "captures"
CORRUPT = SAMPLES / "sample-corrupt.pcap"  # nanosecond pcap, records 1.5 us apart


def _times(capsys, *argv: str) -> dict[int, str]:
    """Record number -> time text of each line show prints."""
    assert main(["show", *argv]) == 0
    heads = [ln.split() for ln in capsys.readouterr().out.splitlines()
             if ln.split() and ln.split()[0].isdigit()]  # a -V tree's first line
    dated = "-t" in argv and argv[argv.index("-t") + 1] in ("ad", "ud")
    return {int(h[0]): " ".join(h[1:3]) if dated else h[1] for h in heads}


def test_where_keeps_the_capture_relative_time(capsys) -> None:
    every = _times(capsys, str(CORRUPT))
    assert every[4] == "0.000004500"
    assert _times(capsys, "--where", "icrc_ok == false", str(CORRUPT)) == {4: every[4]}
    assert _times(capsys, "--where", "frame in {4 19}", "-V", str(CORRUPT)) == {
        4: every[4], 19: every[19]}


def test_nanosecond_digits_from_the_file(tmp_path: Path, capsys) -> None:
    frames = [bytes(r.record_data) for r in read_capture(CORRUPT)][:3]
    micro, nano = tmp_path / "us.pcap", tmp_path / "ns.pcap"
    micro.write_bytes(pcap_file(frames, step_ns=1_000))
    nano.write_bytes(pcap_file(frames, nanoseconds=True, step_ns=18))
    ng = tmp_path / "ns.pcapng"
    ng.write_bytes(shb() + idb(1, 0, tsresol=9) + b"".join(
        epb(0, T0 + 18 * k, f) for k, f in enumerate(frames)))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # not opened: nothing is read from a pipe before show reads it
    assert [capture_digits(str(p)) for p in (micro, nano, ng, "-", fifo)] == [6, 9, 9, 6, 6]
    assert list(_times(capsys, str(micro)).values()) == ["0.000000", "0.000001", "0.000002"]
    for path in (nano, ng):
        assert list(_times(capsys, str(path)).values()) == [
            "0.000000000", "0.000000018", "0.000000036"]
        assert list(_times(capsys, "--where", "frame > 1", str(path)).values()) == [
            "0.000000018", "0.000000036"]


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("where", [(), ("--where", "frame != 2")])
@pytest.mark.parametrize("fmt, first, third", [
    ("r", "0.000000000", "0.000003000"),
    ("d", "0.000000000", "0.000001500"),
    ("e", "1764000000.000000000", "1764000000.000003000"),
    ("a", "16:00:00.000000000", "16:00:00.000003000"),
    ("ad", "2025-11-24 16:00:00.000000000", "2025-11-24 16:00:00.000003000"),
    ("u", "16:00:00.000000000", "16:00:00.000003000"),
    ("ud", "2025-11-24 16:00:00.000000000", "2025-11-24 16:00:00.000003000"),
])
def test_formats_as_tshark_t(utc, capsys, fmt, first, third, where) -> None:
    for how in ((), ("-V",)):
        got = _times(capsys, "-t", fmt, "-c", "3", *where, *how, str(CORRUPT))
        assert got[1] == first and got[3] == third, (how, got)


def test_delta_displayed_counts_from_the_last_line_shown(capsys) -> None:
    got = _times(capsys, "-t", "dd", "--where", "frame in {1 4 5}", str(CORRUPT))
    assert got == {1: "0.000000000", 4: "0.000004500", 5: "0.000001500"}
    got = _times(capsys, "-t", "d", "--where", "frame in {1 4 5}", str(CORRUPT))
    assert got == {1: "0.000000000", 4: "0.000001500", 5: "0.000001500"}


def test_local_time_follows_the_time_zone(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving
    time.tzset()
    try:
        if time.localtime(0).tm_gmtoff != 5 * 3600 + 1800:
            pytest.skip("no tz database for Asia/Kolkata")
        assert _times(capsys, "-t", "a", "-c", "1", str(CORRUPT)) == {1: "21:30:00.000000000"}
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_clock_alone() -> None:
    clock = Clock("r", 9)
    assert clock.advance(None) == f"{'-':>11}"
    assert clock.advance(5 * NS + 7) == "0.000000000"
    assert clock.advance(4 * NS) == "-1.000000007"  # a record earlier than the first
    assert clock.advance(20 * NS + 1, shown=False) == ""
    assert Clock("r", 6).in_c and not Clock("r", 9).in_c and not Clock("a", 6).in_c
    assert Clock("e", 6).advance(1_700_000_000_123_456_000) == "1700000000.123456"
    with pytest.raises(ValueError, match="time format 'x'"):
        Clock("x")


def test_t_is_refused_unless_a_format(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["show", "-t", "q", str(CORRUPT)])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["r", "d", "dd", "e", "a", "u"])
@pytest.mark.parametrize("digits", [6, 9])
def test_a_batch_is_each_record_advanced(utc, fmt: str, digits: int) -> None:
    """The numpy texts of a batch are :meth:`Clock.advance`'s, across batches, with times
    going back and records that could not be read."""
    import numpy as np

    stamps = [T0, T0 + 18, T0 - 5 * NS - 7, T0 + 1_000_000_123, T0 + 3, T0 + 2 * NS]
    ok = [True, True, True, True, False, True]
    one, many = Clock(fmt, digits), Clock(fmt, digits)
    expected = [one.advance(ns if good else None) for ns, good in zip(stamps, ok, strict=True)]
    got = many.batch(np.array(stamps[:3], np.int64), np.array(ok[:3])) + \
        many.batch(np.array(stamps[3:], np.int64), np.array(ok[3:]))
    assert got == expected

