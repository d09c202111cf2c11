"""gen's defaults where Linux soft-RoCE (rxe) shows what a real stack does: each QP's first
PSN random, its UDP source port from the two QPNs. Checked against the rig's capture shipped
in captures/rxe/ (see its README), not against numbers copied from it."""

from __future__ import annotations

from pathlib import Path

import ibwire
from ibwire.gen import QpSpec, Scenario, generate
from ibwire.pcap import open_capture

RXE_WRITE = Path(__file__).parents[2] / "captures" / "rxe" / "rxe-write-drops-headers.pcap"


def roce_headers(path: Path) -> list[dict]:
    """The fields of every RoCEv2 packet of a capture (headers only is enough)."""
    out = []
    with open_capture(str(path)) as capture:
        for record in capture:
            if record.error is not None:
                continue
            fields = ibwire.parse(record.frame, link=record.link, wire=record.orig_len).fields()
            if fields.get("udp.dstport") == 4791:
                out.append(fields)
    return out


def test_udp_source_port_is_rxes_for_the_same_qpns():
    """rxe sets a connected QP's UDP source port from the flow label of its two QPNs
    (``rdma_get_udp_sport``): give gen the QPNs of the rig's connection and it picks the
    ports the rig's packets carry, both ways."""
    packets = roce_headers(RXE_WRITE)
    by_dest = {}
    for f in packets:
        by_dest.setdefault(f["bth.destqp"], set()).add(f["udp.srcport"])
    assert 1 <= len(by_dest) <= 2     # the two QPs' numbers (rxe gave both the same)
    ports = set().union(*by_dest.values())
    assert len(ports) == 1
    qpns = sorted(by_dest)
    requester, responder = qpns[0], qpns[-1]
    scenario = Scenario(qps=(QpSpec(requester_qpn=requester, responder_qpn=responder),))
    assert {scenario.udp_sport(0)} == ports
    records, _ = generate(scenario)
    seen = {ibwire.parse(f).fields()["udp.srcport"] for _, f in records}
    assert seen == ports


def test_udp_source_ports_differ_by_qp_and_stay_in_the_dynamic_range():
    scenario = Scenario(qps=(QpSpec(),) * 16)
    ports = [scenario.udp_sport(k) for k in range(16)]
    assert len(set(ports)) == 16
    assert all(0xC000 <= p <= 0xFFFF for p in ports)


def test_start_psns_are_random_per_qp_from_the_seed():
    """24 random bits per QP (perftest, rdma_cm), drawn from the seed: the same seed gives
    the same PSNs, another seed others; ``start_psn`` still sets one."""
    a = Scenario(qps=(QpSpec(),) * 8, seed=1)
    psns = [a.start_psn(k) for k in range(8)]
    assert len(set(psns)) == 8 and all(0 <= p <= 0xFFFFFF for p in psns)
    assert max(psns) > 0x100000          # spread over the 24 bits, not small offsets
    assert psns == [Scenario(qps=a.qps, seed=1).start_psn(k) for k in range(8)]
    assert psns != [Scenario(qps=a.qps, seed=2).start_psn(k) for k in range(8)]
    assert Scenario(qps=(QpSpec(start_psn=0x42),)).start_psn(0) == 0x42
    records, manifest = generate(a)
    first = {f["bth.destqp"]: f["bth.psn"] for f in (ibwire.parse(fr).fields()
                                                      for _, fr in reversed(records))
             if f["bth.opcode"] != 0x11}
    assert sorted(first.values()) == sorted(psns)
    assert [q["start_psn"] for q in manifest["qps"]] == psns


KEYS = ("data_packets", "retransmitted_packets", "nak_retransmissions",
        "timeout_retransmissions", "rnr_retransmissions", "duplicates", "messages_completed",
        "acks", "naks_psn_seq_error")


def _rig_run(tmp_path: Path) -> tuple[dict, dict, dict]:
    """The rig's run behind the shipped capture, in gen: its WRITEs, its dropped WRITE
    packet, its dropped answer (the n-th ACKNOWLEDGE of the responder, whichever PSN that
    turns out to name), seen on the bridge (``switch``). Returns qp on gen's capture, on
    rxe's, and gen's manifest entry."""
    import json
    import shlex

    from ibwire.analysis import analyse
    from ibwire.gen import Fault, write_pcap

    asked = json.loads(RXE_WRITE.with_suffix(".scenario.json").read_text())["asked"]
    args = shlex.split(asked["client"])
    size, iters = int(args[args.index("-s") + 1]), int(args[args.index("-n") + 1])
    data, answer = asked["faults"]["drops"]
    assert answer["opcodes"] == [0x11]        # RC ACKNOWLEDGE
    base = Scenario(qps=(QpSpec("write", size, iters=iters, mtu=1024),), tap="switch",
                    faults=(Fault("drop", 0, data["nth"][0]),))
    records, manifest = generate(base)
    start = manifest["qps"][0]["start_psn"]
    answers = [f for f in (ibwire.parse(fr).fields() for _, fr in records)
               if f["bth.opcode"] == 0x11]
    lost = (answers[answer["nth"][0]]["bth.psn"] - start) & 0xFFFFFF
    path = tmp_path / "gen.pcap"
    manifest = write_pcap(str(path), Scenario(**{**base.__dict__, "faults": base.faults + (
        Fault("lose_ack", 0, lost),)}))
    return (analyse(str(path)).as_dicts()[0], analyse(str(RXE_WRITE)).as_dicts()[0],
            manifest["qps"][0])


def test_lossy_write_run_has_rxes_shape(tmp_path):
    """The rig's lossy WRITE run (a WRITE packet and then the NAK for it lost): rxe's
    requester kept sending until the end of its queue, waited out its transport timer and
    went back to the first unacknowledged PSN; the responder ACKed every duplicate. gen,
    given the same run, now shows the same counts in ``ibwire qp``: timeout rounds only, the
    duplicates, one ACK per message and per duplicate, the one NAK."""
    ours, rxes, truth = _rig_run(tmp_path)
    assert rxes["timeout_retransmissions"] > 0 and rxes["duplicates"] > 0   # what rxe did
    assert {k: ours[k] for k in KEYS} == {k: rxes[k] for k in KEYS}
    model = truth["model"]
    assert model["resent_packets"]["timeout"] == ours["timeout_retransmissions"]
    assert model["duplicate_acks"] == ours["acks"] - ours["messages_completed"]
    assert model["duplicate_requests"] >= ours["duplicates"]


def test_ipv4_ids_count_up_per_host_as_rxes(tmp_path):
    """Linux gives each packet to a destination the next IPv4 ID of a counter it shares
    with other traffic hashed alike (``__ip_select_ident``): on the rig's bridge each host's
    RoCE packets count up, mostly by one. gen's hosts count up by one, from a start drawn
    from the seed, the CM's packets and lost ones counted."""
    def steps(packets: list[dict], source: str) -> list[int]:
        ids = [f["ip.id"] for f in packets if f["ip.src"] == source]
        return [(b - a) & 0xFFFF for a, b in zip(ids, ids[1:], strict=False)]

    rig = roce_headers(RXE_WRITE)
    for host in {f["ip.src"] for f in rig}:
        seen = steps(rig, host)
        assert all(0 < step < 64 for step in seen) and seen.count(1) > len(seen) / 2
    from ibwire.gen import Fault, write_pcap

    path = tmp_path / "ids.pcap"
    write_pcap(str(path), Scenario(qps=(QpSpec("write", 3000, iters=30),), tap="switch",
                                   cm=True, faults=(Fault("drop", rate=0.1),), seed=4))
    ours = roce_headers(path)
    assert set(steps(ours, "192.0.2.1")) == set(steps(ours, "192.0.2.2")) == {1}
    first = {s: next(f["ip.id"] for f in ours if f["ip.src"] == s)
             for s in ("192.0.2.1", "192.0.2.2")}
    assert first == {"192.0.2.1": Scenario(seed=4).ip_id_start("fwd"),
                     "192.0.2.2": Scenario(seed=4).ip_id_start("rev")}
