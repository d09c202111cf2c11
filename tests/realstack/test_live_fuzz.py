"""Live fuzzing on the rig (tools/fuzz_live.py): the plumbing, end to end, on a planted fault.

A guest-side trap (a packet-socket reader in guest 1 that writes a kernel-style WARNING to
/dev/kmsg when a frame carrying ``IBWIRE-TRAP`` arrives) stands in for a kernel bug; one
packet carrying the mark is hidden in the first batch. The campaign must see the warning on
the console, write the finding, bisect the batch down to that one packet and shrink it by
replays into freshly booted guest pairs, replay it alone, and the command it writes must
show the finding again in yet another fresh pair.

Each fresh pair is a boot under TCG (tens of seconds): the plumbing test takes a few
minutes, and runs where the rig can (skipped in one line elsewhere; ``IBWIRE_REQUIRE_RIG=1``
makes that a failure, as for the rest of tests/realstack). The two-minute smoke of a real
campaign (mutating in flight as well as injecting) runs only with ``IBWIRE_REQUIRE_RIG=1`` (CI).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fuzz_live
from ibwire import parse
from ibwire.livefuzz.findings import read_shots
from ibwire.livefuzz.shots import render
from ibwire.pcap import read_capture
from rxe_rig.live import TRAP_MARK
from rxe_rig.rig import qemu_present

PLANTED = "warning|ibwire/planted_trap.c:1"


@pytest.fixture
def rig_possible() -> None:
    why = qemu_present()
    if why is not None:
        if os.environ.get("IBWIRE_REQUIRE_RIG") == "1":
            pytest.fail(f"the rxe rig cannot run ({why}) and IBWIRE_REQUIRE_RIG=1")
        pytest.skip(f"the rxe rig cannot run: {why} (IBWIRE_REQUIRE_RIG=1 makes this fail)")


def _frames(path: Path) -> list[bytes]:
    return [bytes(r.frame) for r in read_capture(str(path))]


def test_planted_fault_is_found_shrunk_to_one_packet_and_replayed_alone(
        rig_possible: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "live"
    status = fuzz_live.main(["run", "--plant", "--batch", "1", "--max-batches", "1",
                             "--trials", "2", "--minutes", "20", "--seed", "1",
                             "--shrink-match", "planted_trap", "-o", str(out)])
    assert status == 1  # findings
    summary = json.loads((out / "summary.json").read_text())
    assert summary["packets"] == 2 and summary["batches"] == 1
    planted = next(f for f in summary["findings"] if f["signature"] == PLANTED)
    assert planted["batch_packets"] == 2
    assert planted["repro_packets"] == 1 and planted["replayed_alone"] is True
    where = out / planted["id"]
    finding = json.loads((where / "finding.json").read_text())
    # 2 to bisect (the last packet alone, then the first half: the mark alone); that trial
    # replayed it alone, so none is spent again on that
    assert finding["reproduced"] is True and finding["trials"] == 2
    assert "Debian" in finding["kernel"] and finding["guest"] == "guest1"
    assert "planted_trap" in (where / "console.txt").read_text()
    scenario, conn, repro = read_shots(where / "repro.json")
    assert scenario == "rping-live" and len(repro) == 1 and TRAP_MARK in repro[0].payload
    (frame,) = _frames(where / "repro.pcap")
    assert TRAP_MARK in frame and frame == render(repro[0], conn, parse(frame).fields()["eth.src"])
    assert len(_frames(where / "batch.pcap")) == 2
    # the command written replays it into a fresh pair, where it shows again
    command = planted["command"].split()
    assert command[:4] == ["sudo", "python", "tools/fuzz_live.py", "replay"]
    capsys.readouterr()
    assert fuzz_live.main([*command[3:], "--keep", str(tmp_path / "replay")]) == 1
    said = capsys.readouterr().out
    assert PLANTED in said and "sent 1 packets" in said


@pytest.mark.skipif(os.environ.get("IBWIRE_REQUIRE_RIG") != "1",
                    reason="the two-minute campaign smoke runs with IBWIRE_REQUIRE_RIG=1 (CI)")
def test_two_minute_campaign_ends_healthy_or_with_findings_written(rig_possible: None,
                                                                   tmp_path: Path):
    out = tmp_path / "smoke"
    status = fuzz_live.main(["run", "--minutes", "2", "--trials", "0", "--inflight", "0.02",
                             "-o", str(out)])
    assert status in (0, 1)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["packets"] > 0 and summary["batches"] > 0
    # the guests were joined by the forwarder, which carried their RoCE frames
    assert summary["inflight"]["rate"] == 0.02 and summary["inflight"]["frames"] > 0
    assert sum(summary["opcodes"].values()) == summary["packets"]
    assert (status == 1) == bool(summary["findings"])
    for f in summary["findings"]:
        where = out / f["id"]
        finding = json.loads((where / "finding.json").read_text())
        assert finding["kind"] in ("console", "probe", "tool", "counter")
        assert finding["signature"] == f["signature"] and finding["kernel"]
        scenario, conn, batch = read_shots(where / "batch.json")
        frames = _frames(where / "batch.pcap")
        assert len(batch) == len(frames) == finding["batch_packets"] > 0
        assert (where / "console.txt").read_text()
