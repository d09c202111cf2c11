"""``ibwire replay`` on a veth pair in a network namespace the test makes and removes
(skipped when not root; CI is root): what arrives, at what rate, and with which ICRCs.
tcpreplay's own ``--unique-ip`` is run the same way, to show that it breaks every looped ICRC.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ibwire.pcap import read_capture
from tests.corpus import ROOT
from tests.replay.netns import Veth, need_root, veth_namespace
from tests.rewrite.frames import icrc_verdicts

SAMPLE = ROOT / "captures" / "sample-rocev2.pcap"


@pytest.fixture(scope="module")
def veth() -> Iterator[Veth]:
    need_root()
    with veth_namespace() as made:
        yield made


def received(path: Path) -> tuple[np.ndarray, list[bytes]]:
    records = [r for r in read_capture(str(path)) if r.error is None]
    return (np.array([r.timestamp_ns for r in records], dtype=np.int64),
            [bytes(r.frame) for r in records])


def sent(path: Path = SAMPLE) -> list[bytes]:
    return [bytes(r.frame) for r in read_capture(str(path)) if r.error is None]


def test_every_packet_arrives_byte_for_byte(veth: Veth, tmp_path: Path) -> None:
    cap = tmp_path / "rx.pcap"
    with veth.capture(cap):
        done = veth.replay("--topspeed", "--json", str(SAMPLE))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    _, frames = received(cap)
    assert frames == sent()
    assert stats["packets"] == 22 and stats["failed"] == 0


@pytest.mark.parametrize("option, value", [("--pps", 2000.0), ("--mbps", 4.0)])
def test_rate_within_five_percent(veth: Veth, tmp_path: Path, option: str,
                                  value: float) -> None:
    cap = tmp_path / "rx.pcap"
    with veth.capture(cap):
        done = veth.replay(option, str(value), "--loop", "20", str(SAMPLE))
    assert done.returncode == 0, done.stderr
    stamps, frames = received(cap)
    assert len(frames) == 440
    seconds = (stamps[-1] - stamps[0]) / 1e9
    achieved = (len(frames) - 1) / seconds if option == "--pps" else \
        sum(len(f) for f in frames[:-1]) * 8 / seconds / 1e6
    assert abs(achieved - value) / value < 0.05, f"{option} {value}: achieved {achieved:.1f}"


def test_unique_ip_icrcs_verify_where_tcpreplays_break(veth: Veth, tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.pcap", tmp_path / "theirs.pcap"
    with veth.capture(ours):
        done = veth.replay("--topspeed", "--loop", "3", "--unique-ip", str(SAMPLE))
    assert done.returncode == 0, done.stderr
    verdicts = icrc_verdicts(ours)
    assert len(verdicts) == 66 and verdicts.count(True) == 60 and False not in verdicts
    _, frames = received(ours)
    assert len({frames[0][26:34], frames[22][26:34], frames[44][26:34]}) == 3
    if shutil.which("tcpreplay") is None:
        pytest.skip("tcpreplay not installed: its --unique-ip is not shown breaking ICRCs")
    with veth.capture(theirs):
        done = veth.run("tcpreplay", "-i", veth.tx, "--topspeed", "--loop", "3",
                        "--unique-ip", str(SAMPLE), timeout=60)
    assert done.returncode == 0, done.stderr
    theirs_verdicts = icrc_verdicts(theirs)
    # tcpreplay 4.4 fails to write 2 of the 66 ("Failed write attempts: 2") on a veth
    assert len(theirs_verdicts) >= 60
    assert theirs_verdicts[:22].count(True) == 20  # the first loop is sent as captured
    assert True not in theirs_verdicts[22:]  # every looped RoCE packet has a broken ICRC
    assert theirs_verdicts[22:].count(False) >= 38


def test_stats_prints_the_totals_while_sending(veth: Veth) -> None:
    done = veth.replay("--pps", "2000", "--loop", "20", "--stats", "0.05", str(SAMPLE))
    assert done.returncode == 0, done.stderr
    counts = [int(line.split()[1]) for line in done.stderr.splitlines()
              if line.startswith("Actual:")]
    assert len(counts) >= 3, done.stderr  # 440 packets at 2000 pps: 0.22 s
    assert counts == sorted(counts) and counts[-1] < 440
    assert done.stdout.startswith("Actual: 440 packets")
