"""Connections paired from the CM exchange: generated conversations with CM equal their
manifest (cm_packets and cm included), the shared RDMA CM captures against hand counts,
QPs the traffic alone cannot tell apart, a rejected setup."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ibwire
from ibwire.analysis import analyse
from ibwire.gen import QpSpec, Scenario, generate
from tests.analysis.conftest import write_frames
from tests.analysis.test_generated import COMPARED, by_responder
from tests.corpus import capture, captures, needs_shared
from tests.gen.test_gen import ENCAPS, RELIABLE, mixed

L = "linlinw5-rdma_ib_tutorial_"
A, B = "10.1.16.61", "10.1.16.62"
SID = 0x0000000001064853          # RDMA CM, port space TCP (0x06), port 18515


def check_with_cm(path, manifest):
    results = by_responder(analyse(path).as_dicts())
    assert len(results) == len(manifest["qps"])
    for q in manifest["qps"]:
        r = results[q["responder"]["qpn"]]
        assert r["responder"] == q["responder"]
        # with the CM exchange captured, every RC/UC requester QPN is known (UC answers
        # nothing: without CM it would be None)
        assert r["requester"] == q["requester"]
        assert {k: r[k] for k in COMPARED} == {k: q[k] for k in COMPARED}, q["transport"]
    return results


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_counts_with_cm_equal_the_manifest(generated, encapsulation, tap, reliable):
    path, manifest = generated(mixed(encapsulation, tap, cm=True, reliable=reliable))
    results = check_with_cm(path, manifest)
    counts = sorted(r["cm_packets"] for r in results.values())
    assert counts == [0, 5, 5, 5, 5]                       # UD has none
    assert all(r["cm"]["state"] == "disconnected" for r in results.values() if r["cm"])
    # first_ns/last_ns are the data's: the CM MADs come before and after them
    assert all(r["first_ns"] > 0 for r in results.values())


@RELIABLE
@pytest.mark.parametrize("encapsulation", ["rocev1", "ib_local"])
def test_the_cm_tells_apart_qps_the_traffic_cannot(generated, encapsulation, reliable):
    """Three WRITE QPs on one address pair with the same starting PSNs and no UDP: their
    ACKs echo the same PSNs, so the traffic alone cannot say which requester each goes to.
    (XRC: the REP names the TGT QPN in its Local EE Context Number.)"""
    scenario = Scenario(qps=(QpSpec(iters=3, size=3000, start_psn=0xFFFFFE,
                                    transport=reliable),) * 3,
                        encapsulation=encapsulation)
    path, manifest = generated(replace(scenario, cm=True))
    check_with_cm(path, manifest)
    plain_path, _ = generated(scenario)
    plain = analyse(plain_path).as_dicts()
    assert len(plain) == 6                  # without the CM the ACKs stand alone


def test_the_udp_source_port_tells_apart_write_qps_without_cm(generated):
    """RoCEv2: both ends of a connection use one UDP source port (as Linux does), so the
    ACKs of three WRITE QPs with the same PSNs find their requests without the CM."""
    scenario = Scenario(qps=(QpSpec(iters=3, size=3000, start_psn=0xFFFFFE),) * 3)
    path, manifest = generated(scenario)
    results = by_responder(analyse(path).as_dicts())
    assert len(results) == 3
    for q in manifest["qps"]:
        r = results[q["responder"]["qpn"]]
        assert r["requester"] == q["requester"]
        assert {k: r[k] for k in COMPARED} == {k: q[k] for k in COMPARED}


@needs_shared
@pytest.mark.parametrize("name, hand", [
    # REQ (1: local QPN 0x3d, comm ID 0x64c0c56d), REP (2: 0x3b, 0x8988f456), RTU (3);
    # REQ (24: 0x3e, 0x65c0c56d), REP (25: 0x3c, 0x8b88f456), RTU (30). Data: SEND ONLY
    # ping-pong on the first (16 each way, each ACKed), WRITE FIRST/MIDDLE/LAST x5 on the
    # second (15 packets, 5 ACKs). Teardown: DREQ from both sides (91, 92), DREP from
    # both (93, 94) for the second; DREQ (95), DREP (96) for the first.
    ("rdma_cm.pcap", {
        (B, 0x3D, 0x3B): (16, 16, 5, 0x64C0C56D, 0x8988F456, 4),
        (A, 0x3B, 0x3D): (16, 16, 5, 0x8988F456, 0x64C0C56D, 6),
        (B, 0x3E, 0x3C): (15, 5, 7, 0x65C0C56D, 0x8B88F456, 43)}),
    # rping: REQ (1: 0x2c), REP (2: 0x2b), RTU (3), DREQ (64), DREP (65); .62 -> .61: 10
    # SEND ONLY (10 ACKs); .61 -> .62: 10 SEND ONLY, 5 WRITE ONLY, 5 READ requests (15
    # ACKs, 5 READ RESPONSE ONLY).
    ("rping.pcap", {
        (B, 0x2C, 0x2B): (10, 10, 5, None, None, None),
        (A, 0x2B, 0x2C): (20, 15, 5, None, None, None)}),
])
def test_shared_rdma_cm_captures_pair_as_counted_by_hand(name, hand):
    path = capture(L + name)
    results = analyse(str(path)).as_dicts()
    got = {(r["requester"]["address"], r["requester"]["qpn"], r["responder"]["qpn"]): r
           for r in results}
    assert set(got) == set(hand)
    for key, (data, acks, cm_packets, local, remote, _) in hand.items():
        r = got[key]
        assert (r["data_packets"], r["acks"], r["cm_packets"]) == (data, acks, cm_packets)
        assert r["cm"]["state"] == "disconnected"
        if local is not None:
            assert r["cm"] == {"service_id": SID, "local_comm_id": local,
                               "remote_comm_id": remote, "state": "disconnected"}
    if name == "rdma_cm.pcap":
        times = _times(path)
        for key, (*_, first_record) in hand.items():
            assert got[key]["first_ns"] == times[first_record - 1]   # not the REQ's time


def _times(path) -> list[int]:
    from ibwire.pcap import open_capture

    with open_capture(str(path)) as capture:
        return [r.timestamp_ns for r in capture]


def _mad(keys: dict, src: str, dst: str) -> bytes:
    return ibwire.build("rocev2_ipv4", {
        "eth.src": "02:00:00:00:00:01", "eth.dst": "02:00:00:00:00:02", "ip.src": src,
        "ip.dst": dst, "udp.srcport": 0xC000, **keys})


def test_a_rejected_setup_is_a_connection_with_its_reason(tmp_path):
    a, b = "192.0.2.1", "192.0.2.2"
    frames = [
        (1000, _mad({"cm.req": 0x11, "cm.req.localqpn": 0x20, "cm.req.startpsn": 5,
                     "cm.req.serviceid": SID, "cm.req.ip_cm.sip4": a,
                     "cm.req.ip_cm.dip4": b}, a, b)),
        (3000, _mad({"cm.rej.localcommid": 0x99, "cm.rej.remotecommid": 0x11,
                     "cm.rej.reason": 28}, b, a)),
    ]
    (r,) = analyse(write_frames(tmp_path / "rej.pcap", frames)).as_dicts()
    assert r["requester"] == {"address": a, "qpn": 0x20}
    assert r["responder"] == {"address": b, "qpn": None}
    assert r["cm"] == {"service_id": SID, "local_comm_id": 0x11, "remote_comm_id": 0x99,
                       "state": "rejected", "reason": "CONSUMER_DEFINED"}
    assert r["cm_packets"] == 2 and r["data_packets"] == 0 and r["first_ns"] is None


def test_cm_mads_are_not_packets_of_the_connection(tmp_path):
    """Only the data counts; the CM exchange is counted apart (cm_packets)."""
    records, manifest = generate(Scenario(qps=(QpSpec(iters=2, size=2000),), cm=True))
    path = write_frames(tmp_path / "cm.pcap", records)
    (r,) = analyse(path).as_dicts()
    data = records[3:-2]
    assert (r["first_ns"], r["last_ns"]) == (data[0][0], data[-1][0])
    assert r["cm_packets"] == 5 == len(records) - len(data)


def _by_parse(batch) -> list[tuple[int, int, dict]]:
    """What cm_records must give, from the dissector: each CM connection message whose
    local ID parse gives, with the keys the sessions read."""
    from ibwire.analysis.cm import _VIEW_KEYS
    from ibwire.transport.cm import COMM_IDS

    wanted = {k for keys in _VIEW_KEYS.values() for k in keys} | {"cm.rej.reason"}
    out = []
    for row in range(len(batch)):
        try:
            fields = ibwire.parse(bytes(batch.frame(row)), batch.link(row)).fields()
        except ibwire.IbwireError:
            continue
        names = COMM_IDS.get(fields.get("mad.attributeid")) \
            if fields.get("mad.mgmtclass") == 7 else None
        if names is None or names[1] not in fields:
            continue
        keep = wanted | {names[1], names[2]}
        if fields["mad.attributeid"] == 0x13 and fields.get("cm.rep.localqpn") == 0:
            keep.add("cm.rep.localeecn")   # an XRC TGT's QPN: dissected by cm_records too
        out.append((int(batch.columns["record"][row]), fields["mad.attributeid"],
                    {k: v for k, v in fields.items() if k in keep}))
    return out


def test_cm_records_from_the_view_columns_equal_the_dissector(tmp_path):
    """The CM reading of the analysis takes the scanner's view columns (and dissects only
    a REJ and an XRC REP): the same messages and values as ``parse`` on every CM MAD of the shared
    captures, of generated setups in every encapsulation, and of a rejected setup."""
    from ibwire.analysis import batches
    from ibwire.analysis.cm import cm_records

    paths = captures()  # when there
    for encapsulation in ENCAPS:
        for transport in ("RC", "XRC"):
            records, _ = generate(Scenario(qps=(QpSpec(iters=2, size=100, transport=transport),),
                                           cm=True, encapsulation=encapsulation))
            paths.append(write_frames(tmp_path / f"{encapsulation}-{transport}.pcap", records))
    a, b = "192.0.2.1", "192.0.2.2"
    paths.append(write_frames(tmp_path / "rej.pcap", [
        (1000, _mad({"cm.req": 0x11, "cm.req.localqpn": 0x20, "cm.req.serviceid": SID}, a, b)),
        (2000, _mad({"cm.rej.localcommid": 0x99, "cm.rej.remotecommid": 0x11,
                     "cm.rej.reason": 28}, b, a))]))
    seen = set()
    for path in paths:
        for batch in batches(path):
            got = [(rec, attr, fields) for rec, _s, _d, attr, fields in cm_records(batch)]
            assert got == _by_parse(batch), path
            seen.update(attr for _, attr, _ in got)
    assert {0x10, 0x12, 0x13, 0x14, 0x15, 0x16} <= seen
