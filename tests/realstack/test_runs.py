"""Every scenario ran, every capture is whole, and ibwire verifies every packet of it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.realstack.conftest import LIVE_SCENARIO, SCENARIOS, Runs
from tests.realstack.wire import ROCE, by_source, ibwire, packets

NAMES = list(SCENARIOS)
#: Scenarios this kernel's rxe cannot run, with the reason the tool gives.
UNSUPPORTED = {name: s.unsupported for name, s in SCENARIOS.items() if s.unsupported}


def ran(rig_runs: Runs, name: str) -> None:
    """Skip the test of a scenario rxe cannot do (its own test says why); fail on others."""
    outcome = rig_runs[name]
    if outcome.record["unsupported"]:
        pytest.skip(f"{name}: unsupported by this kernel's rxe ({SCENARIOS[name].unsupported})")
    assert outcome.ok, f"{name} failed: {outcome.record['attempts']}"


@pytest.mark.parametrize("name", NAMES)
def test_scenario_ran(rig_runs: Runs, name: str):
    outcome = rig_runs[name]
    if name in UNSUPPORTED:
        # Linux 6.1's rxe has no XRC (no IB_DEVICE_XRC; ibv_open_xrcd: EOPNOTSUPP): a kernel
        # that gains it fails here, and the scenario then becomes a normal one
        assert outcome.record["unsupported"], outcome.record
        return
    assert outcome.ok, f"{name}: {outcome.record['attempts']}"
    assert outcome.record["status"] == {"server": 0, "client": 0}


def _records(path: Path) -> list[tuple[int, int]]:
    """(captured length, original length) of each record of a classic pcap file."""
    data = path.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, offset = [], 24
    while offset < len(data):
        incl, orig = struct.unpack_from(order + "II", data, offset + 8)
        out.append((incl, orig))
        offset += 16 + incl
    return out


@pytest.mark.parametrize("name", NAMES)
def test_captures_are_whole_and_headers_only_copy_is_cut(rig_runs: Runs, name: str):
    ran(rig_runs, name)
    outcome = rig_runs[name]
    capture = outcome.record["capture"]
    assert capture["kernel_dropped"] == 0
    assert capture["received"] == capture["captured"]  # none left unread in the ring
    assert all(d["kernel_dropped"] == 0 for d in capture["delivered"].values())
    full, cut = _records(outcome.full), _records(outcome.headers)
    assert len(full) == len(cut) == capture["captured"] > 0
    assert all(i == o for i, o in full)
    snap = capture["snaplen"]
    assert [(min(i, snap), o) for i, o in full] == cut
    assert capture["frames_cut"] == sum(i > snap for i, _ in full)


@pytest.mark.parametrize("name", NAMES)
def test_every_packet_verifies(rig_runs: Runs, name: str):
    """ibwire check: every RoCE packet's ICRC and structure, on the bridge and as
    delivered to each guest."""
    ran(rig_runs, name)
    directory = rig_runs[name].directory
    for path in (directory / "full.pcap", directory / "to-guest1.pcap",
                 directory / "to-guest2.pcap"):
        done = ibwire("check", str(path), check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert " 0 failed" in done.stdout
    assert packets(directory / "full.pcap"), "no RoCE packet captured"


def test_live_show_and_check_on_the_bridge(rig_runs: Runs):
    """`ibwire show -i br0` and `ibwire check -i br0` ran in the namespace during the live
    scenario: check passed and saw every RoCE packet of the scenario, show printed a line
    for each."""
    ran(rig_runs, LIVE_SCENARIO)
    outcome = rig_runs[LIVE_SCENARIO]
    live = rig_runs.live
    if live is None:
        pytest.skip("a kept run is being tested again (IBWIRE_RIG_REUSE): no live capture")
    assert outcome.record["attempt"] == 1, "the live capture spans both attempts"
    expected = len(packets(outcome.full))
    assert live.check.returncode == 0, live.check.stdout + live.check.stderr
    assert f"{expected} InfiniBand/RoCE packets" in live.check.stdout, live.check.stdout
    assert " 0 failed" in live.check.stdout
    assert live.show.returncode in (0, 130, -2), live.show.stderr
    lines = [ln for ln in live.show.stdout.splitlines() if "RoCEv2" in ln]
    assert len(lines) == expected
    # one CM line per CM MAD captured (REQ, REP, RTU, then a DREQ/DREP or two: timing's)
    cms = sum(p.get("mad.mgmtclass") == 0x07 for p in packets(outcome.full))
    assert sum(" CM " in ln for ln in lines) == cms >= 5


def test_guests_kept_apart(rig_runs: Runs):
    """Only the two guests' addresses speak RoCE on the bridge."""
    seen = set()
    for name in NAMES:
        if rig_runs[name].ok:
            seen |= set(by_source(packets(rig_runs[name].full)))
    assert seen == {"10.77.0.1", "10.77.0.2", "fd77::1", "fd77::2"}
    assert set(ROCE) == {"rocev2_ipv4", "rocev2_ipv6"}
