"""``ibwire replay -w``: the schedule and the packets, without a network (no privileges)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ibwire.cli.main import main
from ibwire.pcap import read_capture
from tests.corpus import ROOT
from tests.rewrite.frames import icrc_verdicts, scapy_icrc_ok

SAMPLE = ROOT / "captures" / "sample-rocev2.pcap"


def stamps_and_frames(path: Path) -> tuple[np.ndarray, list[bytes]]:
    records = [r for r in read_capture(str(path)) if r.error is None]
    return (np.array([r.timestamp_ns for r in records], dtype=np.int64),
            [bytes(r.frame) for r in records])


def replay_w(tmp_path: Path, *argv: str) -> tuple[np.ndarray, list[bytes]]:
    out = tmp_path / "w.pcap"
    assert main(["replay", "-w", str(out), *argv, str(SAMPLE)]) == 0
    return stamps_and_frames(out)


def test_pps_spacing(tmp_path: Path) -> None:
    stamps, frames = replay_w(tmp_path, "--pps", "250")
    assert len(frames) == 22
    assert set(np.diff(stamps).tolist()) == {4_000_000}


def test_mbps_spacing(tmp_path: Path) -> None:
    stamps, frames = replay_w(tmp_path, "--mbps", "8")
    gaps = np.diff(stamps)
    expected = [len(f) * 8 / 8e6 * 1e9 for f in frames[:-1]]
    assert np.allclose(gaps, expected, atol=1)


def test_multiplier_keeps_capture_gaps_scaled(tmp_path: Path) -> None:
    original, _ = stamps_and_frames(SAMPLE)
    stamps, _ = replay_w(tmp_path, "--multiplier", "0.5")
    assert np.allclose(np.diff(stamps), np.diff(original) * 2, atol=1)


def test_loop_limit_duration(tmp_path: Path) -> None:
    _, frames = replay_w(tmp_path, "--topspeed", "--loop", "3")
    assert len(frames) == 66
    _, frames = replay_w(tmp_path, "--topspeed", "--loop", "3", "--limit", "30")
    assert len(frames) == 30
    stamps, frames = replay_w(tmp_path, "--pps", "100", "--loop", "3", "--duration", "0.1")
    assert len(frames) == 11  # due at 0, 10, ..., 100 ms


def test_unique_ip_changes_addresses_and_keeps_every_icrc(tmp_path: Path) -> None:
    out = tmp_path / "w.pcap"
    assert main(["replay", "-w", str(out), "--topspeed", "--loop", "3", "--unique-ip",
                 str(SAMPLE)]) == 0
    _, frames = stamps_and_frames(out)
    verdicts = icrc_verdicts(out)
    assert verdicts.count(True) == 60 and False not in verdicts
    assert all(scapy_icrc_ok(f) is not False for f in frames)
    first, second, third = frames[0], frames[22], frames[44]
    assert first[26:30] != second[26:30] != third[26:30]  # IPv4 source differs per loop
    assert int.from_bytes(second[30:34], "big") == int.from_bytes(first[30:34], "big") + 1


@pytest.mark.parametrize("argv, reason", [
    ([], "give -i IFACE"),
    (["-i", "ibwire-none0"], "no such interface"),
    (["-w", "x.pcap", "--pps", "1", "--topspeed"], "exclude each other"),
    (["-w", "x.pcap", "--unique-ip"], "requires --loop"),
])
def test_refusals_are_one_line(argv: list[str], reason: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", *argv, str(SAMPLE)]) == 2
    err = capsys.readouterr().err
    assert reason in err and err.count("\n") == 1
