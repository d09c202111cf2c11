"""Hypothesis properties over whole packets: every opcode in every encapsulation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ibwire
from ibwire.headers import EXTENDED
from ibwire.strategies import ENCAPSULATIONS, mutated, packets, placed_mutations
from ibwire.tables import opcodes
from tests.core.roundtrip import roundtrip

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("encapsulation", ENCAPSULATIONS)
@SETTINGS
@given(data=st.data())
def test_build_then_parse_round_trips(encapsulation, data):
    generated = data.draw(packets(encapsulation))
    packet = roundtrip(generated.frame, generated.link, prefixes=False)
    fields = packet.fields()
    for key, value in generated.fields.items():
        assert fields[key] == value, key
    assert packet.payload == generated.payload
    assert packet.opcode is not None and packet.opcode.value == generated.opcode
    assert packet.verify().icrc_ok


@pytest.mark.parametrize("opcode", sorted(opcodes()), ids=[opcodes()[o].name for o in
                                                           sorted(opcodes())])
def test_every_opcode_in_every_encapsulation(opcode):
    op = opcodes()[opcode]
    chain = ["bth", *(EXTENDED[h].name for h in op.headers)]
    for encapsulation in ENCAPSULATIONS:
        frame, link = _frame_and_link(encapsulation, opcode)
        packet = roundtrip(frame, link, prefixes=False)
        names = [h.name for h in packet.headers]
        assert names[names.index("bth"):][:len(chain)] == chain
        assert packet.fields()["bth.psn"] == 99
        assert packet.verify().icrc_ok


def _frame_and_link(encapsulation: str, opcode: int) -> tuple[bytes, str]:
    payload = b"12345678" if opcodes()[opcode].payload else b""
    frame = ibwire.build(encapsulation, {"bth.psn": 99}, payload, opcode=opcode)
    return frame, "infiniband" if encapsulation.startswith("ib") else "ethernet"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_frames_raise_only_our_errors(mutation):
    try:
        packet = ibwire.parse(mutation.frame, mutation.link)
    except ibwire.IbwireError as exc:
        assert exc.reason
        return
    if mutation.kind == "crc":
        verdict = packet.verify()
        assert verdict.icrc_ok is False or verdict.vcrc_ok is False or \
            mutation.frame == mutation.original.frame


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_broken_packet_with_placed_crcs_tells_built_wrong_from_corrupted(data):
    """Headers broken where the CRCs stay placed: a packet resealed after the break (built
    wrong) verifies; one broken after its CRCs were computed does not. A change of at most 32
    bits inside the ICRC's region is always caught by CRC-32 (a burst error), so the verdict
    of a corrupted packet is certain where the break did not move the ICRC (PktLen does)."""
    mutation = data.draw(placed_mutations(data.draw(packets())))
    try:
        packet = ibwire.parse(mutation.frame, mutation.link)
    except ibwire.IbwireError as exc:  # the break left no CRC placed
        with pytest.raises(type(exc)):
            ibwire.crc.verify(mutation.frame, mutation.link, lenient=True)
        return
    verdict = packet.verify()
    placed = [ok for ok in (verdict.icrc_ok, verdict.vcrc_ok) if ok is not None]
    assert placed, packet
    if mutation.resealed:
        assert all(placed), (mutation, packet.error)
    elif mutation.where != "lrh.pktlen" and mutation.frame != mutation.original.frame:
        assert verdict.icrc_ok is False, (mutation, packet.error)


@pytest.mark.parametrize("link", ["ethernet", "infiniband", "ip", "grh"])
@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_return_a_packet_or_raise_our_error(link, raw):
    try:
        packet = ibwire.parse(raw, link)
    except ibwire.IbwireError:
        return
    assert isinstance(packet, ibwire.Packet)


@SETTINGS
@given(packets(max_payload=16))
def test_every_prefix_is_truncated(generated):
    roundtrip(generated.frame, generated.link, prefixes=True)
