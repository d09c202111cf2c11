"""Headers-only captures of real traffic: every run of the rig cut at 64, 128, 256 and 400
bytes (as ``tcpdump -s`` would have captured it) reads as the whole capture of the same run:
``check`` verifies every packet it can and counts the cut ones apart, ``qp`` gives the same
tables, and so the same figures against rxe's counters (test_counters.py on ``full.pcap``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ibwire.pcap.snap import snap_capture
from tests.cli.test_headers_only import _qp, ib_longer
from tests.cli.test_malformed import check_summary, cli

SNAPLENS = (64, 128, 256, 400)


def _hidden(path: Path, snaplen: int) -> str | None:
    """What a snap length hides from ``qp`` in this capture, if anything: an IPv6 RoCEv2
    packet's BTH ends at byte 74; a RoCEv2 READ request's RETH at byte 70; a CM REQ's QPN and
    starting PSN are about 200 bytes in."""
    from ibwire.scan import scan_capture

    reads = cm = ipv6 = False
    for batch in scan_capture(path, fields=("bth.opcode", "mad.mgmtclass")):
        c = batch.columns
        reads |= bool(np.isin(c["bth.opcode"], (0x0C, 0xAC)).any())
        cm |= bool((c["mad.mgmtclass"] == 0x07).any())
        ipv6 |= bool((c["encapsulation"] == 7).any())  # rocev2_ipv6 (KIND_NAMES)
    if snaplen < 74 and ipv6:
        return "IPv6 RoCEv2 BTH cut"
    if snaplen < 70 and reads:
        return "READ requests' RETH cut"
    if snaplen < 200 and cm:
        return "CM REQ's QPN and starting PSN cut"
    return None


@pytest.mark.parametrize("snaplen", SNAPLENS)
def test_real_runs_cut_by_a_snap_length_read_as_the_whole_ones(rig_runs, tmp_path: Path,
                                                                snaplen: int) -> None:
    compared = 0
    for name, outcome in rig_runs.outcomes.items():
        if not outcome.ok or not outcome.full.exists():
            continue
        cut = tmp_path / f"{name}-{snaplen}.pcap"
        snap_capture(outcome.full, cut, snaplen)
        summary = check_summary(cli("check", "--json", cut))
        assert summary["failed"] == 0, (name, summary)
        assert summary["cut"] == ib_longer(outcome.full, snaplen), (name, summary)
        full, _ = _qp(outcome.full)
        short, cut_total = _qp(cut)
        if _hidden(outcome.full, snaplen) is None:
            assert short == full, name
            compared += 1
        assert cut_total <= summary["cut"]
    assert compared > 0
