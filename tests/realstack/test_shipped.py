"""The rig's captures shipped in captures/rxe hold what their records say (no rig needed)."""

from __future__ import annotations

import json
import struct

from tests.corpus import ROOT
from tests.realstack.wire import by_source, connections, ibwire, packets

SHIPPED = ROOT / "captures" / "rxe"


def test_rping_capture_verifies_and_matches_rxes_counters():
    path = SHIPPED / "rxe-rping-cm.pcap"
    assert ibwire("check", str(path), check=False).returncode == 0
    counters = json.loads((SHIPPED / "rxe-rping-cm.counters.json").read_text())
    sent = by_source(packets(path))
    assert sent["10.77.0.1"] == counters["guest1"]["delta"]["sent_pkts"]
    assert sent["10.77.0.2"] == counters["guest2"]["delta"]["sent_pkts"]
    paired = [c for c in connections(path) if c["cm"] is not None]
    assert len(paired) == 2
    assert paired[0]["cm"]["local_comm_id"] == paired[1]["cm"]["remote_comm_id"]


def test_headers_only_capture_is_cut_at_its_snap_length():
    data = (SHIPPED / "rxe-write-drops-headers.pcap").read_bytes()
    record = json.loads((SHIPPED / "rxe-write-drops-headers.scenario.json").read_text())
    snaplen = record["capture"]["snaplen"]
    assert struct.unpack_from("<I", data, 16)[0] == snaplen
    offset, frames, cut = 24, 0, 0
    while offset < len(data):
        incl, orig = struct.unpack_from("<II", data, offset + 8)
        assert incl == min(orig, snaplen)
        frames, cut, offset = frames + 1, cut + (orig > snaplen), offset + 16 + incl
    assert frames == record["capture"]["captured"]
    assert cut == record["capture"]["frames_cut"] > 0
    assert sum(record["nft_dropped"]) == 2
