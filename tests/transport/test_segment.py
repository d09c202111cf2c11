"""Segmentation of every verb at every path MTU (IBA Vol. 1 9.7.5.1.6, Table 35, 9.2.3), written
from the rules, checked on what a requester puts on the wire."""

from __future__ import annotations

import math

import pytest

import ibwire
from ibwire.transport import (
    PMTUS,
    Requester,
    RequesterConfig,
    Responder,
    ResponderConfig,
    TransportError,
    WorkRequest,
)

START = 0xFFFFFD  # every multi-packet message below crosses the PSN wrap


def sent(transport: str, wr: WorkRequest, pmtu: int, start: int = START, **cfg) -> list:
    req = Requester(RequesterConfig(transport=transport, pmtu=pmtu, start_psn=start,
                                    dest_qp=0x12, src_qp=0x34, q_key=0x1111, **cfg))
    req.post(wr)
    out = []
    while (p := req.next_packet(0)) is not None:
        out.append(p)
    return out


def lengths(pmtu: int) -> list[int]:
    return [0, 1, 3, pmtu - 1, pmtu, pmtu + 1, 3 * pmtu, 3 * pmtu + 2, 7 * pmtu - 5]


SEGMENTED = {  # verb -> (FIRST, MIDDLE, LAST, ONLY) without the transport prefix
    "send": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_ONLY"),
    "send_imm": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST_WITH_IMMEDIATE",
                 "SEND_ONLY_WITH_IMMEDIATE"),
    "send_inv": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST_WITH_INVALIDATE",
                 "SEND_ONLY_WITH_INVALIDATE"),
    "write": ("RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST", "RDMA_WRITE_ONLY"),
    "write_imm": ("RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST_WITH_IMMEDIATE",
                  "RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
}
CASES = [(t, v) for t in ("RC", "UC", "XRC") for v in SEGMENTED
         if not (t == "UC" and v == "send_inv")]


@pytest.mark.parametrize("pmtu", PMTUS)
@pytest.mark.parametrize("transport,verb", CASES)
def test_send_and_write_segmentation(transport, verb, pmtu):
    for length in lengths(pmtu):
        wr = WorkRequest(verb, length, remote_va=0xA000, rkey=0x77, imm=0xDEAD,
                         invalidate_rkey=0x99, solicited=True)
        packets = sent(transport, wr, pmtu, xrc_srq=0xABCDE)
        n = max(1, math.ceil(length / pmtu))
        assert len(packets) == n
        assert [p.psn for p in packets] == [(START + i) % (1 << 24) for i in range(n)]
        sizes = [p.payload_len for p in packets]
        assert sum(sizes) == length
        assert all(s == pmtu for s in sizes[:-1]) and 0 <= sizes[-1] <= pmtu
        assert [p.padcnt for p in packets] == [(4 - s % 4) % 4 for s in sizes]
        first, middle, last, only = (f"{transport}_{name}" for name in SEGMENTED[verb])
        expected = [only] if n == 1 else [first] + [middle] * (n - 2) + [last]
        assert [p.name for p in packets] == expected
        for i, p in enumerate(packets):
            starts, ends = i == 0, i == n - 1
            has_reth = verb.startswith("write") and starts
            assert (p.reth is not None) == has_reth
            if has_reth:
                assert (p.reth.va, p.reth.r_key, p.reth.dmalen) == (0xA000, 0x77, length)
            assert p.immdt == (0xDEAD if verb.endswith("_imm") and ends else None)
            assert p.ieth == (0x99 if verb == "send_inv" and ends else None)
            assert p.se == ends                            # solicited: on the last packet only
            # UC is never acknowledged; XRC is as RC
            assert p.ackreq == (transport in ("RC", "XRC") and ends)
            assert p.deth is None and p.aeth is None and p.atomic is None
            # every XRC request names the destination SRQ in its XRCETH (IBA Annex A14)
            assert p.xrc_srq == (0xABCDE if transport == "XRC" else None)
            if transport == "XRC":
                assert p.fields()["xrceth.xrcsrq"] == 0xABCDE
            assert p.offset == i * pmtu and p.dest_qp == 0x12


RELIABLE = pytest.mark.parametrize("transport", ["RC", "XRC"])


@RELIABLE
@pytest.mark.parametrize("pmtu", PMTUS)
def test_read_request_reserves_one_psn_per_response(pmtu, transport):
    for length in lengths(pmtu):
        req = Requester(RequesterConfig(transport, pmtu=pmtu, start_psn=START, dest_qp=1))
        first = req.post(WorkRequest("read", length, remote_va=0x5000, rkey=3))
        after = req.post(WorkRequest("send", 1))
        n = max(1, math.ceil(length / pmtu))
        assert (after - first) % (1 << 24) == n
        read, send = req.next_packet(0), req.next_packet(0)
        assert read.name == f"{transport}_RDMA_READ_REQUEST" and read.payload_len == 0
        assert read.reth == (0x5000, 3, length) and read.psn == first
        assert send.psn == after


@RELIABLE
@pytest.mark.parametrize("pmtu", PMTUS)
def test_read_responses(pmtu, transport):
    """XRC's READ responses are its own opcodes (0xAD-0xB0), without an XRCETH (Table 38)."""
    for length in lengths(pmtu):
        resp = Responder(ResponderConfig(transport, pmtu=pmtu, start_psn=START, dest_qp=0x21))
        (request,) = sent(transport, WorkRequest("read", length, remote_va=0x5000, rkey=3),
                          pmtu)
        resp.receive(request)
        out = []
        while (p := resp.next_packet()) is not None:
            out.append(p)
        n = max(1, math.ceil(length / pmtu))
        names = (["ONLY"] if n == 1 else ["FIRST"] + ["MIDDLE"] * (n - 2) + ["LAST"])
        assert [p.name for p in out] == [f"{transport}_RDMA_READ_RESPONSE_{n}" for n in names]
        assert all(p.xrc_srq is None and "XRCETH" not in p.op.headers for p in out)
        assert [p.psn for p in out] == [(START + i) % (1 << 24) for i in range(n)]
        assert sum(p.payload_len for p in out) == length
        assert all(p.payload_len == pmtu for p in out[:-1])
        # AETH on FIRST, LAST and ONLY, never on MIDDLE; the READ counted in the MSN already
        assert [p.aeth is not None for p in out] == [not p.name.endswith("MIDDLE") for p in out]
        assert all(p.aeth.msn == 1 and p.aeth.syndrome >> 5 == 0 for p in out if p.aeth)
        assert all(p.dest_qp == 0x21 for p in out)


@RELIABLE
@pytest.mark.parametrize("verb,name,operands,expected", [
    ("fetch_add", "FETCH_ADD", dict(swap_add=5), [(5, 0), (5, 0)]),
    ("cmp_swap", "COMPARE_SWAP", dict(swap_add=9, compare=0), [(9, 0), (9, 0)]),
])
def test_atomics_are_one_packet_and_get_the_original_value(verb, name, operands, expected,
                                                          transport):
    resp = Responder(ResponderConfig(transport, start_psn=START, dest_qp=0x21))
    originals = []
    for i, start in enumerate((START, (START + 1) % (1 << 24))):
        wr = WorkRequest(verb, 8, remote_va=0x8000, rkey=4, **operands)
        (packet,) = sent(transport, wr, 1024, start=start, xrc_srq=7)
        assert packet.name == f"{transport}_{name}" and packet.payload_len == 0 and packet.ackreq
        assert packet.atomic == (0x8000, 4, *expected[i])
        assert packet.xrc_srq == (7 if transport == "XRC" else None)
        resp.receive(packet)
        ack = resp.next_packet()
        assert ack.name == f"{transport}_ATOMIC_ACKNOWLEDGE" and ack.psn == start
        assert ack.aeth.msn == i + 1
        originals.append(ack.atomic_ack)
    # fetch-and-add returns 0 then 5; compare-and-swap(0 -> 9) returns 0, then finds 9 and keeps it
    assert originals == ([0, 5] if verb == "fetch_add" else [0, 9])
    assert resp.memory[0x8000] == (10 if verb == "fetch_add" else 9)


@pytest.mark.parametrize("pmtu", PMTUS)
def test_ud_sends_one_packet_with_deth(pmtu):
    for verb, name in (("send", "UD_SEND_ONLY"), ("send_imm", "UD_SEND_ONLY_WITH_IMMEDIATE")):
        (p,) = sent("UD", WorkRequest(verb, pmtu, imm=7, dest_qp=0x99, q_key=0x2222), pmtu)
        assert p.name == name and p.payload_len == pmtu and not p.ackreq
        assert p.deth == (0x2222, 0x34) and p.dest_qp == 0x99
        (q,) = sent("UD", WorkRequest(verb, 5), pmtu)
        assert q.deth == (0x1111, 0x34) and q.dest_qp == 0x12   # the QP's own Q_Key and peer


@pytest.mark.parametrize("every", [1, 2, 3, 5])
def test_ack_every_n_psns_and_on_the_last(every):
    packets = sent("RC", WorkRequest("write", 10 * 256), 256, ack_every=every)
    assert [p.ackreq for p in packets] == [(i + 1) % every == 0 or i == 9 for i in range(10)]


@pytest.mark.parametrize("transport,wr,pmtu,why", [
    ("UD", WorkRequest("read", 8), 1024, "no READ"),
    ("UD", WorkRequest("write", 8), 1024, "no WRITE"),
    ("UD", WorkRequest("send", 1025), 1024, "must fit one packet"),
    ("UC", WorkRequest("read", 8), 1024, "no READ"),
    ("UC", WorkRequest("fetch_add", 8), 1024, "no FETCH_ADD"),
    ("UC", WorkRequest("send_inv", 8), 1024, "no SEND_INV"),
    ("RC", WorkRequest("fetch_add", 4), 1024, "8 bytes"),
    ("RC", WorkRequest("bogus", 4), 1024, "not one of"),
    ("RC", WorkRequest("send", 1 << 32), 1024, "outside"),
])
def test_what_a_transport_cannot_carry_is_refused(transport, wr, pmtu, why):
    req = Requester(RequesterConfig(transport=transport, pmtu=pmtu))
    with pytest.raises(TransportError, match=why):
        req.post(wr)


@pytest.mark.parametrize("bad", [dict(pmtu=3000), dict(transport="RD"), dict(start_psn=1 << 24),
                                 dict(retry_cnt=8), dict(timeout=32), dict(window=0),
                                 dict(transport="XRC", xrc_srq=1 << 24)])
def test_impossible_qp_settings_are_refused(bad):
    with pytest.raises((TransportError, ValueError)):
        Requester(RequesterConfig(**bad))


@RELIABLE
@pytest.mark.parametrize("verb", ["send_imm", "send_inv", "write_imm", "read", "fetch_add",
                                  "cmp_swap"])
def test_packet_fields_build_a_frame_that_parses_back(verb, transport):
    """Packet.fields() speaks ibwire.build's keys: the frame carries the values."""
    wr = WorkRequest(verb, 8 if verb in ("fetch_add", "cmp_swap") else 700, remote_va=0x1234,
                     rkey=0x55, imm=0x66, invalidate_rkey=0x77, swap_add=3, compare=4)
    resp = Responder(ResponderConfig(transport, pmtu=256, start_psn=START, dest_qp=0x21))
    for p in sent(transport, wr, 256, xrc_srq=0x4321):
        resp.receive(p)
        frames = [p]
        while (a := resp.next_packet()) is not None:
            frames.append(a)
        for q in frames:
            frame = ibwire.build("rocev2_ipv4", q.fields(), bytes(q.payload_len))
            parsed = ibwire.parse(frame)
            fields = parsed.fields()
            assert parsed.verify().icrc_ok
            for key, value in q.fields().items():
                assert fields[key] == value, key
            assert fields["bth.padcnt"] == q.padcnt and len(parsed.payload) == q.payload_len
