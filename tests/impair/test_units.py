"""The parts of ``ibwire impair`` that need no interface: the fault SPECs, the capture's
record order, the frame edits and forged packets, the connection state (no root needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ibwire import build
from ibwire.dissect import parse
from ibwire.errors import IbwireError
from ibwire.gen import Fault, QpSpec, Scenario, generate
from ibwire.impair import forge
from ibwire.impair.capture import CaptureLog
from ibwire.impair.classify import classify
from ibwire.impair.forwarder import _renumber
from ibwire.impair.plan import Plan, parse_rule
from ibwire.impair.ports import Batch
from ibwire.impair.state import LiveState
from ibwire.pcap import read_capture
from ibwire.rewrite.checksum import ones_sum


def test_specs_as_gen_spells_them_plus_selectors() -> None:
    rule = parse_rule("drop", "qp=0,psn=5")
    assert (rule.qp, rule.psn, rule.count, rule.transmission()) == (0, 5, 1, 1)
    rule = parse_rule("lose_ack", "opcode=RC_ACKNOWLEDGE,dir=b2a,rate=0.5")
    assert (rule.opcode, rule.direction, rule.rate, rule.count) == (0x11, 1, 0.5, None)
    assert parse_rule("nak", "psn-seq-err,qp=1,psn=2").code == "psn-seq-err"
    assert parse_rule("rnr", "14,qp=0,psn=3").timer == 14
    assert parse_rule("delay", "ms=2").us == 2000
    assert parse_rule("drop", "psn-abs=0x10,tx=2").transmission() == 2
    assert parse_rule("reorder", "by=3,nth=4").by == 3


@pytest.mark.parametrize(("kind", "spec", "says"), [
    ("drop", "qp=x", "qp='x' is not valid"),
    ("drop", "colour=red", "expected KEY=VALUE"),
    ("drop", "rate=2", "rate must be 0..1"),
    ("rnr", "timer=32", "5 bits"),
    ("drop", "psn=1,psn-abs=2", "not both"),
    ("nak", "bogus", "code='bogus' is not valid"),
    ("dup", "copies=0", "count from 1"),
    ("shuffle", "", "not one of"),
])
def test_bad_specs_are_ibwire_errors(kind: str, spec: str, says: str) -> None:
    with pytest.raises(IbwireError, match=says.replace("(", r"\(")):
        parse_rule(kind, spec)


def test_gen_still_parses_its_own_specs() -> None:
    from ibwire.cli.gen import parse_spec

    assert parse_spec("rnr", "qp=1,psn=0x10,timer=3") == {"qp": 1, "psn": 16, "timer": 3}
    with pytest.raises(IbwireError, match="expected rate=R or qp=K,psn=P"):
        parse_spec("drop", "opcode=7")


def test_capture_put_in_arrival_order_and_records_renumbered(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    log = CaptureLog(str(path))
    for stamp, byte in ((10, 1), (30, 2), (20, 3), (31, 4)):
        log.add(bytes([byte]) * 60, stamp)
    renumbered = log.close()
    assert [r.frame[0] for r in read_capture(str(path))] == [1, 3, 2, 4]
    assert renumbered is not None and renumbered[1:].tolist() == [1, 3, 2, 4]
    faults = [{"record": 3, "trigger": 2, "records": [2, 3], "discarded": [4]}]
    _renumber(faults, renumbered)
    assert faults == [{"record": 2, "trigger": 3, "records": [3, 2], "discarded": [4]}]
    assert not Path(f"{path}.unsorted").exists()


def test_capture_in_order_is_kept_as_written(tmp_path: Path) -> None:
    log = CaptureLog(str(tmp_path / "c.pcap"))
    data = bytearray(b"".join(bytes([i]) * 60 for i in range(3)))
    log.add_batch(data, np.array([0, 60, 120]), np.array([60, 60, 60]), np.array([1, 2, 3]))
    assert log.close() is None
    assert [r.timestamp_ns for r in read_capture(str(tmp_path / "c.pcap"))] == [1, 2, 3]


def _request(psn: int, qpn: int = 0x22) -> bytes:
    return build("rocev2_ipv4", {"bth.psn": psn, "bth.destqp": qpn, "ip.dsfield.ecn": 2},
                 bytes(64), opcode="RC_RDMA_WRITE_MIDDLE")


def _ack(psn: int, msn: int, qpn: int = 0x11) -> bytes:
    return build("rocev2_ipv4", {"bth.psn": psn, "bth.destqp": qpn, "aeth.msn": msn,
                                 "ip.src": "192.0.2.2", "ip.dst": "192.0.2.1",
                                 "eth.src": "02:00:00:00:00:02", "eth.dst": "02:00:00:00:00:01"},
                 opcode="RC_ACKNOWLEDGE")


def _feed(state: LiveState, direction: int, frames: list[bytes]) -> np.ndarray:
    batch = Batch.of([bytearray(f) for f in frames], np.arange(len(frames), dtype=np.int64),
                     np.zeros(len(frames), bool))
    cols = classify(batch.data, batch.offsets, batch.lengths)
    return state.feed(direction, cols, [bytes(batch.frame(i)) for i in range(len(frames))],
                      batch.stamps)


@pytest.mark.parametrize("fast", [True, False])
def test_classifier_twins_agree(fast: bool) -> None:
    frames = [_request(5), _ack(5, 1), b"\xff" * 60]
    batch = Batch.of([bytearray(f) for f in frames], np.zeros(3, np.int64), np.zeros(3, bool))
    cols = classify(batch.data, batch.offsets, batch.lengths, fast=fast)
    assert cols["ib"].tolist() == [True, True, False]
    assert cols["bth.psn"][:2].tolist() == [5, 5]
    assert cols["bth.destqp"][:2].tolist() == [0x22, 0x11]
    assert int(cols["aeth.msn"][1]) == 1
    assert cols["offset.icrc"][:2].tolist() == [len(frames[0]) - 4, len(frames[1]) - 4]


def test_state_learns_psns_transmissions_and_the_requester() -> None:
    state = LiveState()
    tx = _feed(state, 0, [_request(0xFFFFFE), _request(0xFFFFFF), _request(0)])
    [c] = state.connections
    assert tx.tolist() == [1, 1, 1] and c.next_psn == 1 and c.start_psn == 0xFFFFFE
    assert _feed(state, 0, [_request(0xFFFFFF), _request(1)]).tolist() == [2, 1]
    _feed(state, 1, [_ack(0, 1)])
    assert c.peer_qpn == 0x11 and c.msn == 1 and c.answer_psn == 0
    assert state.connection_of(1, 2, 0x11) is c  # an ACK to the requester: its connection


def test_forged_nak_and_cnp_are_built_on_the_state() -> None:
    state = LiveState()
    _feed(state, 0, [_request(7)])
    _feed(state, 1, [_ack(7, 3)])
    [c] = state.connections
    nak = parse(forge.forged_nak(c, 8, 0))
    f = nak.fields()
    assert nak.verify().icrc_ok
    assert (f["bth.psn"], f["bth.destqp"], f["aeth.syndrome"], f["aeth.msn"]) == (8, 0x11,
                                                                                 0x60, 3)
    assert (f["ip.src"], f["eth.dst"]) == ("192.0.2.2", "02:00:00:00:00:01")
    rnr = parse(forge.forged_nak(c, 8, 14, rnr=True)).fields()
    assert rnr["aeth.syndrome"] == 0x20 | 14
    cnp = parse(forge.forged_cnp(c))
    assert cnp.verify().icrc_ok and cnp.fields()["bth.opcode"] == 0x81
    assert cnp.fields()["bth.becn"] == 1 and cnp.fields()["bth.destqp"] == 0x11


def test_forged_nak_before_any_answer_turns_the_request_around() -> None:
    state = LiveState()
    _feed(state, 0, [_request(7)])
    c = state.connections[0]
    c.peer_qpn = 0x33
    f = parse(forge.forged_nak(c, 7, 0)).fields()
    assert (f["ip.src"], f["ip.dst"], f["bth.destqp"]) == ("192.0.2.2", "192.0.2.1", 0x33)


def test_frame_edits() -> None:
    frame = bytearray(_request(3))
    forge.corrupt(frame, len(frame) - 4)
    assert not parse(bytes(frame)).verify().icrc_ok
    frame = bytearray(_request(3))
    assert forge.mark_ce(frame, 14)
    p = parse(bytes(frame))
    assert p.fields()["ip.dsfield.ecn"] == 3 and p.verify().icrc_ok
    assert ones_sum(frame[14:34]) == 0xFFFF


def test_checksum_left_to_offload_is_completed() -> None:
    import struct

    from ibwire.rewrite import checksum

    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 20 + 5, 1, 0, 64, 6, 0,
                               bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    checksum.ipv4_header(ip, 0)
    tcp = bytearray(struct.pack("!HHIIBBHHH", 1234, 80, 1, 0, 0x50, 0x18, 1024, 0xBEEF, 0))
    frame = bytearray(bytes(12) + b"\x08\x00") + ip + tcp + b"hello"
    assert forge.complete_checksum(frame)
    pseudo = bytes(frame[26:34]) + struct.pack("!BBH", 0, 6, 25)
    assert ones_sum(frame[34:], ones_sum(pseudo)) == 0xFFFF
    assert not forge.complete_checksum(bytearray(bytes(12) + b"\x08\x06" + bytes(28)))


def test_plan_of_pairs() -> None:
    plan = Plan.of([("drop", "qp=0,psn=1"), ("cnp", "")], seed=3)
    assert [r.kind for r in plan.rules] == ["drop", "cnp"] and plan.seed == 3 and plan


def test_no_raw_socket_privilege_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root or CAP_NET_RAW, socket(AF_PACKET) fails with EPERM: said in one line."""
    from ibwire.impair import ports

    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(ports.socket, "socket", refuse)
    with pytest.raises(ports.ImpairError, match="^lo: a forwarder needs root or CAP_NET_RAW"):
        ports.Port("lo")


def test_default_route_interfaces_read_from_proc() -> None:
    from ibwire.impair.ports import default_route_interfaces

    routed = default_route_interfaces()
    assert isinstance(routed, set) and "lo" not in routed


def test_rules_select_their_class_and_candidates_agree() -> None:
    """Each kind's default class (requests; answers for lose_ack; READ responses for
    ecn_resp), opcode=, dir=, and the batch narrowing: a row ``selects`` takes is always a
    candidate."""
    from ibwire.impair.rules import candidates, selects
    from ibwire.transport.opkinds import KIND

    read_resp = build("rocev2_ipv4", {"bth.psn": 9, "bth.destqp": 0x11, "aeth.msn": 1,
                                      "ip.src": "192.0.2.2", "ip.dst": "192.0.2.1"},
                      bytes(16), opcode="RC_RDMA_READ_RESPONSE_ONLY")
    state = LiveState()
    frames = [_request(9), _ack(9, 1), read_resp]
    _feed(state, 0, frames[:1])
    rules = [parse_rule("drop", "qp=0,psn=0"), parse_rule("lose_ack", ""),
             parse_rule("ecn_resp", "dir=b2a"), parse_rule("dup", "opcode=RC_ACKNOWLEDGE")]
    expected = {  # rule -> rows it hits: (direction, row)
        0: {(0, 0)}, 1: {(1, 1), (1, 2)}, 2: {(1, 2)}, 3: {(1, 1)}}
    for d, batch_rows in ((0, [0]), (1, [1, 2])):
        batch = Batch.of([bytearray(frames[r]) for r in batch_rows],
                         np.zeros(len(batch_rows), np.int64), np.zeros(len(batch_rows), bool))
        cols = classify(batch.data, batch.offsets, batch.lengths)
        kinds = KIND[cols["bth.opcode"]]
        tx = np.ones(len(batch_rows), np.int64)
        for k, rule in enumerate(rules):
            mask = candidates([rule], state, [], d, cols, kinds, tx)
            for j, row in enumerate(batch_rows):
                conn = state.connection_of(d, int(kinds[j]), int(cols["bth.destqp"][j]))
                hit = selects(rule, d, int(kinds[j]), int(cols["bth.opcode"][j]),
                              int(cols["bth.destqp"][j]), int(cols["bth.psn"][j]), 1, conn)
                assert hit == ((d, row) in expected[k]), (rule.kind, d, row)
                assert not hit or mask[j]


@pytest.mark.parametrize("cm", [True, False], ids=["cm", "no-cm"])
@pytest.mark.parametrize(("qps", "faults"), [
    ((QpSpec("write", 5000, 3),), ()),
    ((QpSpec("read", 5000, 3),), ()),
    ((QpSpec("read", 8, 2), QpSpec("read", 4096, 3)), ()),
    ((QpSpec("send_imm", 3000, 2), QpSpec("fetch_add", 8, 3), QpSpec("cmp_swap", 8, 2)), ()),
    ((QpSpec("read", 4096, 4),), (Fault("drop", qp=0, psn=4),)),
    ((QpSpec("write", 4096, 4),), (Fault("lose_ack", qp=0, psn=7),)),
], ids=["write", "read", "two-reads", "send-atomics", "read-request-dropped", "ack-lost"])
def test_state_agrees_with_the_live_fuzzers(qps: tuple[QpSpec, ...], faults: tuple[Fault, ...],
                                           cm: bool) -> None:
    """impair's columnar state and the live fuzzer's per-frame one (ibwire.livefuzz.state)
    learn the same connections from gen's conversations: both QPNs, the PSN the next request
    takes (past a READ's responses too) and the last MSN."""
    from ibwire.livefuzz.state import LiveState as PerFrame

    scenario = Scenario(qps=qps, faults=faults, cm=cm).check()
    frames = [f for _, f in generate(scenario)[0]]
    columnar, per_frame = LiveState(), PerFrame(pmtu=1024)
    for f in frames:
        per_frame.feed(f)
        _feed(columnar, 0 if f[6:12] == frames[0][6:12] else 1, [f])
    assert len(columnar.connections) == len(qps)
    for c in columnar.connections:
        [responder] = [q for q in per_frame.qps.values() if q.qpn == c.qpn]
        assert responder.peer is not None
        assert (c.peer_qpn, c.next_psn, c.msn) == \
            (responder.peer[1], responder.recv_psn, responder.msn), c
