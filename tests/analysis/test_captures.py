"""Real captures against counts made by hand, and captures cut to miss packets.

The hand counts were taken with tshark 4.0 while writing this test, e.g.
``tshark -r F -Y infiniband -T fields -E separator=, -e infiniband.bth.opcode -e frame.len
-e infiniband.reth.dmalen | sort | uniq -c``; payload = frame.len - 58 (Ethernet 14, IPv4
20, UDP 8, BTH 12, ICRC 4) - the ETHs (RETH 16, AETH 4, DETH 8).
"""

from __future__ import annotations

import pytest

from ibwire.analysis import analyse
from ibwire.gen import Fault, QpSpec, Scenario, generate
from ibwire.transport.observed import COUNTERS
from tests.analysis.conftest import write_frames
from tests.corpus import capture, needs_shared

L = "linlinw5-rdma_ib_tutorial_"
A, B = "10.1.16.61", "10.1.16.62"

# capture -> {(requester, responder qpn): counts}; keys not named are 0 (payload_bytes:
# data_bytes)
HAND = {
    # SEND ONLY 1082 bytes (1024 payload) x5 each way, ACK x5 each way (syndrome 31)
    "pingpong_rc.pcap": {(B, 0x20): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120, acks=5),
                         (A, 0x21): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120, acks=5)},
    # UC SEND ONLY (36) x5 each way, 1024 bytes, no answers
    "pingpong_uc.pcap": {(B, 0x21): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120),
                         (A, 0x22): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120)},
    # UD SEND ONLY (100) 1090 bytes (DETH: 1024 payload) x5 each way
    "pingpong_ud.pcap": {(B, 0x22): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120),
                         (A, 0x23): dict(data_packets=5, messages=5, messages_completed=5,
                                         data_bytes=5120)},
    # WRITE FIRST 1098 (RETH, dmalen 3000) + MIDDLE 1082 + LAST 1010: 1024+1024+952 x5
    "rdma_write_bw.pcap": {(B, 0x1B): dict(data_packets=15, messages=5, messages_completed=5,
                                           data_bytes=15000, acks=5)},
    # SEND FIRST/MIDDLE/LAST 1082/1082/1010 x5
    "rdma_send_bw.pcap": {(B, 0x23): dict(data_packets=15, messages=5, messages_completed=5,
                                          data_bytes=15000, acks=5)},
    # READ request (dmalen 3000: 3 PSNs at PMTU 1024) x5; responses FIRST 1086, MIDDLE 1082,
    # LAST 1014 (1024 + 1024 + 952) x5
    "rdma_read_bw.pcap": {(B, 0x1C): dict(data_packets=5, messages=5, messages_completed=5,
                                          data_bytes=15000, read_responses=15)},
    # READ request (dmalen 64) x5, READ response ONLY 126 bytes (64) x5
    "rdma_read_lat.pcap": {(B, 0x27): dict(data_packets=5, messages=5, messages_completed=5,
                                           data_bytes=320, read_responses=5)},
    # FETCH_ADD (18) x5, ATOMIC ACKNOWLEDGE (20) x5
    "rdma_atomic_bw.pcap": {(B, 0x28): dict(data_packets=5, messages=5, messages_completed=5,
                                            atomic_acks=5)},
}


@needs_shared
@pytest.mark.parametrize("name", sorted(HAND))
def test_real_captures_match_hand_counts(name):
    path = capture(L + name)
    results = analyse(str(path)).as_dicts()
    got = {(r["requester"]["address"], r["responder"]["qpn"]): r for r in results}
    assert set(got) == set(HAND[name])
    for key, counts in HAND[name].items():
        r = got[key]
        # nothing resent: every byte sent is a first transmission's
        counts = {**counts, "payload_bytes": counts.get("data_bytes", 0)}
        assert {k: r[k] for k in COUNTERS} == {k: counts.get(k, 0) for k in COUNTERS}, key
        assert r["findings"] == []
        other = A if key[0] == B else B
        assert r["responder"]["address"] == other
        assert r["requester"]["qpn"] is not None     # answers or the other way tell it


@needs_shared
def test_real_round_trips_are_the_ack_times():
    """pingpong_rc: each SEND ONLY has AckReq; its ACK is the next packet the other way."""
    import shutil
    import subprocess
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    path = capture(L + "pingpong_rc.pcap")
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "infiniband", "-T", "fields",
                          "-e", "frame.time_epoch", "-e", "ip.src", "-e", "infiniband.bth.opcode",
                          "-e", "infiniband.bth.psn"], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    rows = [line.split("\t") for line in out if line]
    sent = {}
    rtts: dict[str, list[int]] = {A: [], B: []}
    for t, src, op, psn in rows:
        ns = round(float(t) * 1e6) * 1000   # the capture has microseconds
        if op == "4":
            sent[psn] = (src, ns)
        else:
            requester, when = sent[psn]
            rtts[requester].append(ns - when)
    for r in analyse(str(path)).as_dicts():
        mine = rtts[r["requester"]["address"]]
        assert r["ack_rtt_ns"] == {"min": min(mine), "avg": sum(mine) / len(mine),
                                   "max": max(mine)}


def cut(tmp_path, records, keep):
    return write_frames(tmp_path / "cut.pcap", [records[i] for i in keep])


def test_a_capture_that_starts_mid_conversation(tmp_path):
    scenario = Scenario(qps=(QpSpec("write", 4096, iters=6, mtu=1024, start_psn=0xFFFFFC),),
                        tap="switch")
    records, manifest = generate(scenario)
    # from the middle of the 3rd message (its FIRST and MIDDLE gone): 6 records per message
    # (4 requests, ACK), first records are the first message's requests
    start = 11
    (r,) = analyse(cut(tmp_path, records, range(start, len(records)))).as_dicts()
    requests = [i for i in range(start, len(records))
                if records[i][1][14 + 20 + 8] != 0x11]
    assert r["data_packets"] == len(requests)
    assert r["psn_gaps"] == 0 and r["retransmitted_packets"] == 0 and r["findings"] == []
    assert r["messages"] == r["messages_completed"] == len(
        [i for i in requests if records[i][1][14 + 20 + 8] == 0x06])   # WRITE FIRSTs
    assert r["messages"] < 6
    assert r["requester"]["qpn"] == manifest["qps"][0]["requester"]["qpn"]


def test_a_tap_that_misses_packets(tmp_path):
    """Take records out of a clean conversation: each run taken out is one PSN gap, and the
    messages it touched are not complete."""
    records, manifest = generate(Scenario(qps=(QpSpec("send", 3 * 1024, iters=5, mtu=1024),),
                                          tap="requester"))
    ops = [f[14 + 20 + 8] for _, f in records]
    requests = [i for i, op in enumerate(ops) if op != 0x11]
    missing = {requests[1], requests[7], requests[8]}      # message 1, and message 3 twice
    (r,) = analyse(cut(tmp_path, records, [i for i in range(len(records))
                                           if i not in missing])).as_dicts()
    assert r["psn_gaps"] == 2
    assert r["data_packets"] == 15 - 3
    assert r["messages"] == 5 and r["messages_completed"] == 3
    assert r["retransmitted_packets"] == 0 and r["out_of_order"] == 0


def test_lost_acks_make_duplicates_and_timeouts(tmp_path):
    scenario = Scenario(qps=(QpSpec("write", 2048, iters=3, mtu=1024, timeout=6),),
                        faults=(Fault("lose_ack", 0, 5),), tap="responder")
    records, manifest = generate(scenario)
    (r,) = analyse(write_frames(tmp_path / "x.pcap", records)).as_dicts()
    # the last ACK (PSN 5) was lost after the responder's tap: the requester times out and
    # sends message 3 again, which the responder had ACKed: both packets are duplicates
    assert r["retransmitted_packets"] == r["duplicates"] == r["timeout_retransmissions"] == 2
    bth = 14 + 20 + 8
    psn4 = (manifest["qps"][0]["start_psn"] + 4) & 0xFFFFFF
    times = [t for t, f in records
             if f[bth] != 0x11 and int.from_bytes(f[bth + 9:bth + 12], "big") == psn4]
    assert len(times) == 2 and r["retransmission_ns"] == [times[1] - times[0]]
    # one ACK per message, and one per duplicate packet (C9-105, rxe_resp.c), AckReq or not
    assert r["acks"] == 3 + 2 and r["findings"] == []
    assert {k: r[k] for k in COUNTERS} == {k: manifest["qps"][0][k] for k in COUNTERS}
