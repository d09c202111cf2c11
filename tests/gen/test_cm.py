"""The CM exchange of generated RC/UC/XRC connections: REQ, REP, RTU on QP1 before the data with
the QPNs and starting PSNs the data then uses, DREQ/DREP after it, decoded by ibwire and by
tshark; timestamps in order; --no-cm; determinism; the fast path equal to the simulation."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from dataclasses import replace

import pytest

import ibwire
from ibwire.cli.main import main
from ibwire.gen import Fault, Generation, QpSpec, Scenario, generate, write_pcap
from ibwire.transport.cm import MTU_CODES, SERVICE_TYPES
from tests.gen.test_gen import ENCAPS, RELIABLE, mixed, parsed

REQ, REP, RTU, DREQ, DREP = 0x10, 0x13, 0x14, 0x15, 0x16
CONNECTED = ("RC", "UC", "XRC")


def exchange(records, encapsulation):
    """(index, time, fields) of the CM MADs, and of the other packets, in capture order."""
    cm, data = [], []
    for i, (t, p) in enumerate(parsed(records, encapsulation)):
        f = p.fields()
        (cm if f.get("mad.mgmtclass") == 7 else data).append((i, t, f))
    return cm, data


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_each_connection_is_set_up_before_its_data_and_torn_down_after(encapsulation, tap,
                                                                       reliable):
    scenario = mixed(encapsulation, tap, cm=True, reliable=reliable)
    records, manifest = generate(scenario)
    cm, data = exchange(records, encapsulation)
    times = [t for t, _ in records]
    assert times == sorted(times)
    connected = [k for k, q in enumerate(scenario.qps) if q.transport in CONNECTED]
    assert len(cm) == 5 * len(connected) == sum(q["cm_packets"] for q in manifest["qps"])
    by_qp = defaultdict(list)
    for i, t, f in cm:
        assert (f["bth.opcode"], f["bth.destqp"], f["deth.srcqp"], f["deth.q_key"],
                f["bth.p_key"], f["mad.method"]) == (0x64, 1, 1, 0x80010000, 0xFFFF, 3)
        attribute = f["mad.attributeid"]
        key = {REQ: "cm.req", REP: "cm.rep.remotecommid", RTU: "cm.rtu.localcommid",
               DREQ: "cm.dreq.localcommid", DREP: "cm.drsp.remotecommid"}[attribute]
        by_qp[f[key]].append((i, t, attribute, f))      # by the requester's comm ID
    assert len(by_qp) == len(connected)
    for (comm_id, msgs), k in zip(by_qp.items(), connected, strict=True):
        entry, spec = manifest["qps"][k], scenario.qps[k]
        assert [m[2] for m in msgs] == [REQ, REP, RTU, DREQ, DREP]
        req, rep, rtu, dreq, drep = (m[3] for m in msgs)
        assert req["cm.req.localqpn"] == entry["requester"]["qpn"]
        assert rep["cm.rep.startpsn"] == entry["start_psn"]
        assert req["cm.req.pppmtu"] == MTU_CODES[spec.mtu]
        assert req["cm.req.transpsvctype"] == SERVICE_TYPES[spec.transport]
        xrc = spec.transport == "XRC"
        # XRC (Linux cm.c): Transport Service Type 3, Extended Transport Type 1, no responder
        # resources or retry counts in the REQ; the TGT QPN in the REP's Local EE Context
        # Number (Local QPN 0) with SRQ 1
        assert req["cm.req.ext_transport"] == int(xrc)
        assert (req["cm.req.responderres"], req["cm.req.retrcount"],
                req["cm.req.rnrretrcount"]) == ((0, 0, 0) if xrc else (16, 7, 7))
        assert (rep["cm.rep.localqpn"], rep["cm.rep.localeecn"], rep["cm.rep.srq"]) == (
            (0, entry["responder"]["qpn"], 1) if xrc else (entry["responder"]["qpn"], 0, 0))
        assert req["cm.req.serviceid.dport"] == 18515 and req["cm.req.serviceid.protocol"] == 6
        assert (req["cm.req.ip_cm.ipv"] == 6) == (encapsulation == "rocev2_ipv6")
        ends = (("cm.req.ip_cm.sip6", "cm.req.ip_cm.dip6") if encapsulation == "rocev2_ipv6"
                else ("cm.req.ip_cm.sip4", "cm.req.ip_cm.dip4"))
        addresses = ((scenario.requester.ip6, scenario.responder.ip6)
                     if encapsulation == "rocev2_ipv6"
                     else (scenario.requester.ip, scenario.responder.ip))
        assert (req[ends[0]], req[ends[1]]) == addresses
        assert rep["cm.rep.remotecommid"] == rtu["cm.rtu.localcommid"] == comm_id
        assert rep["cm.rep"] == rtu["cm.rtu.remotecommid"] == dreq["cm.dreq.remotecommid"]
        assert dreq["cm.req.remoteqpneecn"] == entry["responder"]["qpn"]
        assert drep["cm.drsp.localcommid"] == rep["cm.rep"]
        assert entry["cm"] == {"service_id": req["cm.req.serviceid"], "local_comm_id": comm_id,
                               "remote_comm_id": rep["cm.rep"], "state": "disconnected"}
        requests = [(i, t, f) for i, t, f in data
                    if f["bth.destqp"] == entry["responder"]["qpn"]]
        mine = [(i, t) for i, t, f in data if entry["responder"]["qpn"] == f["bth.destqp"]
                or entry["requester"]["qpn"] == f["bth.destqp"]]
        # the first request carries the REP's starting PSN (at the responder's tap it may be
        # dropped before: then its retransmission does); the exchange brackets the data
        assert rep["cm.rep.startpsn"] in {f["bth.psn"] for _, _, f in requests}
        if tap != "responder":
            assert requests[0][2]["bth.psn"] == rep["cm.rep.startpsn"]
        assert msgs[2][0] < mine[0][0] and msgs[2][1] < mine[0][1]
        assert msgs[3][0] > mine[-1][0] and msgs[3][1] >= mine[-1][1]
        assert msgs[0][1] < msgs[1][1] < msgs[2][1]
    for k, q in enumerate(scenario.qps):
        if q.transport not in CONNECTED:
            assert manifest["qps"][k]["cm_packets"] == 0 and manifest["qps"][k]["cm"] is None


@RELIABLE
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_check_fails_only_the_corrupted_frames_with_cm(tmp_path, capsys, encapsulation, reliable):
    path = tmp_path / "cm.pcap"
    manifest = write_pcap(str(path), mixed(encapsulation, cm=True, reliable=reliable))
    corrupted = {f["record"] for f in manifest["faults"] if f["kind"] == "corrupt"}
    assert len(corrupted) == 1 and None not in corrupted
    capsys.readouterr()
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    failed = {int(line.split()[2].rstrip(":")) for line in out.splitlines()
              if line.split()[1:2] == ["record"]}
    assert failed == corrupted       # check and the manifest both count records from 1
    assert f"{manifest['records']} records" in out


@RELIABLE
def test_faults_and_data_are_those_of_a_run_without_cm(reliable):
    """The CM does not draw from the faults' generator: the same faults hit the same PSNs,
    and every data frame is the same, only later, and with IPv4 IDs after those the CM's
    packets took (REQ and RTU from the requester's host, REP from the responder's)."""
    scenario = mixed(faults=(Fault("drop", rate=0.1), Fault("ecn", rate=0.2)),
                     reliable=reliable)
    plain, m0 = generate(scenario)
    with_cm, m1 = generate(replace(scenario, cm=True))
    connections = sum(1 for q in scenario.qps if q.transport in CONNECTED)
    setup = connections * 3
    assert [(f["kind"], f["qp"], f["psn"]) for f in m0["faults"]] == \
        [(f["kind"], f["qp"], f["psn"]) for f in m1["faults"]]
    moved = {"192.0.2.1": 2 * connections, "192.0.2.2": connections}
    for (_, a), (_, b) in zip(plain, with_cm[setup:setup + len(plain)], strict=True):
        fa, fb = ibwire.parse(a).fields(), ibwire.parse(b).fields()
        assert (fb["ip.id"] - fa["ip.id"]) & 0xFFFF == moved[fa["ip.src"]]
        assert {k: v for k, v in fa.items() if k not in ("ip.id", "ip.checksum", "icrc")} \
            == {k: v for k, v in fb.items() if k not in ("ip.id", "ip.checksum", "icrc")}
    shift = with_cm[setup][0] - plain[0][0]
    assert shift > 0 and all(b[0] - a[0] == shift
                             for a, b in zip(plain, with_cm[setup:], strict=False))


def test_same_seed_same_bytes_other_seed_other_ids():
    scenario = Scenario(qps=(QpSpec(iters=3, size=3000, start_psn=0x123),), cm=True, seed=5)
    a, b = generate(scenario)[0], generate(scenario)[0]
    c = generate(replace(scenario, seed=6))[0]
    assert a == b
    assert a[0] != c[0]                           # comm IDs differ
    # the data does not, but for the IPv4 IDs each host counts from (drawn from the seed)
    unseeded = ("ip.id", "ip.checksum", "icrc")
    for (_, x), (_, y) in zip(a[3:-2], c[3:-2], strict=True):
        fx, fy = ibwire.parse(x).fields(), ibwire.parse(y).fields()
        assert fx["ip.id"] != fy["ip.id"]
        assert {k: v for k, v in fx.items() if k not in unseeded} == \
            {k: v for k, v in fy.items() if k not in unseeded}
    # the starting PSN, when not given, is drawn from the seed too (and the REQ says it)
    unset = replace(scenario, qps=(QpSpec(iters=3, size=3000),))
    d, e = generate(unset)[0], generate(replace(unset, seed=6))[0]
    assert d[3:-2] != e[3:-2]


@RELIABLE
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_the_fast_path_equals_the_simulation_with_cm(tap, reliable):
    scenario = Scenario(qps=(QpSpec(iters=20, size=3000, transport=reliable),
                             QpSpec("send", 500, iters=5, transport="UC")),
                        cm=True, tap=tap)
    fast, slow = Generation(scenario), Generation(scenario, fast=False)
    assert fast.plan() is not None
    assert list(fast) == list(slow)
    assert fast.manifest == slow.manifest
    assert [q["cm_packets"] for q in fast.manifest["qps"]] == [5, 5]


def test_cli_sets_up_by_cm_unless_no_cm(tmp_path, capsys):
    runs = {}
    for extra in ((), ("--no-cm",)):
        out, m = tmp_path / f"o{len(extra)}.pcap", tmp_path / f"m{len(extra)}.json"
        assert main(["gen", "-o", str(out), "--manifest", str(m), "--iters", "2",
                     "--no-progress", *extra]) == 0
        runs[extra] = json.loads(m.read_text())
    assert runs[()]["records"] == runs[("--no-cm",)]["records"] + 5
    assert runs[()]["qps"][0]["cm_packets"] == 5 and runs[()]["qps"][0]["cm"]["state"]
    assert runs[("--no-cm",)]["qps"][0]["cm_packets"] == 0
    assert runs[("--no-cm",)]["qps"][0]["cm"] is None


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@RELIABLE
@pytest.mark.parametrize("encapsulation", ["rocev2_ipv4", "rocev2_ipv6", "rocev1"])
def test_tshark_decodes_the_cm_mads_with_the_qpns_and_psns_of_the_data(tmp_path,
                                                                       encapsulation, reliable):
    """(tshark 4.0 cannot open link type 247: native IB is checked by ibwire above.)"""
    path = tmp_path / "cm.pcap"
    scenario = Scenario(qps=(QpSpec(iters=2, size=3000, start_psn=0xFFFFFF, transport=reliable),
                             QpSpec("read", 2000, iters=2, mtu=512, transport=reliable)),
                        encapsulation=encapsulation, cm=True)
    manifest = write_pcap(str(path), scenario)
    names = ["frame.protocols", "infiniband.mad.attributeid", "infiniband.cm.req.localqpn",
             "infiniband.cm.req.pppmtu", "infiniband.cm.rep.localqpn",
             "infiniband.cm.rep.startpsn", "infiniband.cm.req.serviceid.dport",
             "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.opcode",
             "infiniband.cm.req.transpsvctype", "infiniband.cm.req.ext_transport",
             "infiniband.cm.rep.localeecn", "infiniband.cm.rep.srq"]
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields",
                          *(x for n in names for x in ("-e", n))],
                         capture_output=True, text=True, check=True)
    rows = [dict(zip(names, line.split("\t"), strict=True)) for line in out.stdout.splitlines()]
    assert len(rows) == manifest["records"]
    assert all("infiniband" in r["frame.protocols"] for r in rows)
    attrs = [int(r["infiniband.mad.attributeid"], 16) for r in rows
             if r["infiniband.mad.attributeid"]]
    assert attrs == [REQ, REP, RTU] * 2 + [DREQ, DREP] * 2
    reqs = [r for r in rows if r["infiniband.cm.req.localqpn"]]
    reps = [r for r in rows if r["infiniband.cm.rep.localqpn"]]
    for q, req, rep in zip(manifest["qps"], reqs, reps, strict=True):
        assert int(req["infiniband.cm.req.localqpn"], 16) == q["requester"]["qpn"]
        assert int(req["infiniband.cm.req.pppmtu"], 16) == MTU_CODES[q["mtu"]]
        assert int(req["infiniband.cm.req.serviceid.dport"], 16) == 18515
        xrc = reliable == "XRC"
        assert int(req["infiniband.cm.req.transpsvctype"], 16) == (3 if xrc else 0)
        assert int(req["infiniband.cm.req.ext_transport"], 16) == int(xrc)
        assert int(rep["infiniband.cm.rep.srq"], 16) == int(xrc)
        responder = int(rep["infiniband.cm.rep.localeecn" if xrc else "infiniband.cm.rep.localqpn"],
                        16)
        assert responder == q["responder"]["qpn"]
        assert q["transport"] == reliable
        first = next(r for r in rows if r["infiniband.bth.destqp"]
                     and int(r["infiniband.bth.destqp"], 16) == responder)
        assert int(first["infiniband.bth.psn"]) == int(rep["infiniband.cm.rep.startpsn"], 16)


@pytest.mark.parametrize("offset, acked", [(0, False), (1, False), (2, True), (5, True)])
def test_lose_ack_is_refused_only_where_coalescing_leaves_no_ack(offset, acked):
    """3 packets a message: only the last has AckReq; with a drop on the QP a NAK may name
    any PSN, so nothing is refused then."""
    from ibwire.gen import ScenarioError

    base = Scenario(qps=(QpSpec(iters=2, size=3000),), faults=(Fault("lose_ack", 0, offset),),
                    tap="switch")
    if acked:
        records, manifest = generate(base)
        (hit,) = manifest["faults"]
        assert hit["record"] is not None           # the switch saw the ACK before its loss
    else:
        with pytest.raises(ScenarioError, match=f"offset {offset} of QP 0"):
            generate(base)
    generate(replace(base, faults=(*base.faults, Fault("drop", 0, 0))))
