"""What keeps ``ibwire fuzz --target wireshark`` from reporting our own noise (issue #15):
valid frames are valid (no group source MAC, well-formed IPv4 options, no RC/UC/RD/XRC to
QP0/1, 256-byte MADs), a frame the model cannot judge is counted as skipped instead of being
a finding, and tshark's expert items on broken frames are expected where they are right.
No tshark needed: the dissection is written by hand."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire.builder import build
from ibwire.dissect import parse
from ibwire.fuzz.generate import reseal
from ibwire.fuzz.wireshark.compare import View, broken_at, compare
from ibwire.fuzz.wireshark.dissection import Dissection
from ibwire.fuzz.wireshark.divergences import TABLES
from ibwire.fuzz.wireshark.fields import CONDITIONAL_EXPERTS
from ibwire.mad_numbers import MAD_SIZE
from ibwire.strategies import ipv4_options, packets


@settings(max_examples=60, deadline=None)
@given(packets())
def test_valid_packets_are_valid(g):
    p = parse(g.frame, g.link)
    f = p.fields()
    view = View(p)
    if "eth.src" in f:
        assert int(f["eth.src"][:2], 16) & 1 == 0, g.frame.hex()
    if p.opcode is not None and p.opcode.transport != "UD":
        assert f["bth.destqp"] not in (0, 1), g.frame.hex()
    for pattern, (_why, when, _required) in CONDITIONAL_EXPERTS.items():
        assert pattern.startswith("_ws.string") or not when(view), g.frame.hex()
    if "mad.mgmtclass" in f:  # the MAD is the whole payload: 256 bytes, no pad
        assert p.icrc_offset - p.header("mad").offset == MAD_SIZE and not p.pad, g.frame.hex()


@settings(max_examples=40, deadline=None)
@given(ipv4_options())
def test_ipv4_options(options):
    assert len(options) % 4 == 0 and len(options) <= 40 and b"\x01" * 4 not in options


def _view(payload=b"abcd", **fields):
    frame = build("rocev2_ipv4", {"bth.opcode": 4, "bth.destqp": 5, **fields}, payload,
                  link="ethernet")
    return View(parse(frame, "ethernet"))


def _expert_mismatches(view, experts):
    dissection = Dissection(1, ("eth", "ip", "udp", "infiniband"), {}, {}, list(experts))
    return [m for m in compare(view, dissection, TABLES, "#1").mismatches if m.key == "expert"]


def test_a_frame_the_model_cannot_judge_is_skipped_not_a_finding():
    view = _view(**{"bth.destqp": 1})  # an RC SEND_ONLY to QP1
    tally = compare(view, Dissection(1, ("eth", "infiniband")), TABLES, "#1")
    assert tally.mismatches == [] and list(tally.skipped.values()) == [1]
    assert "RC packet to QP1" in next(iter(tally.skipped))
    tally = compare(_view(), Dissection(1, ("eth", "infiniband")), TABLES, "#1")
    assert tally.mismatches and not tally.skipped  # QP5: compared (and wrong here)


@given(st.sampled_from(["01", "03", "ff"]))
def test_group_source_mac_expects_tshark_expert(first):
    view = _view(**{"eth.src": f"{first}:00:00:00:00:02"})
    assert _expert_mismatches(view, ["eth.src_not_group"]) == []
    assert _expert_mismatches(view, [])  # tshark must flag it
    plain = _view(**{"eth.src": "02:00:00:00:00:02"})
    assert _expert_mismatches(plain, ["eth.src_not_group"])  # and only then


def test_broken_ipv4_options_allow_tshark_option_experts():
    broken = _view(**{"ip.options": b"\x07\x01\x00\x00"})  # a Record Route cut short
    assert _expert_mismatches(broken, ["ip.opt.len.invalid"]) == []
    assert _expert_mismatches(_view(**{"ip.options": b"\x01" * 4}), ["ip.nop"]) == []
    fine = _view(**{"ip.options": b"\x01\x94\x04\x00\x00\x00\x00\x00"})
    assert _expert_mismatches(fine, ["ip.opt.len.invalid"])
    assert _expert_mismatches(fine, ["ip.nop"])


def test_broken_frame_compares_only_what_comes_before_the_break():
    send = _view(b"abcdefgh").packet  # RC SEND_ONLY with 8 payload bytes
    bth = send.header("bth").offset
    frame = bytearray(send.frame)
    frame[bth] = 0x11  # now an ACK: AETH, then 4 bytes an ACK does not carry
    view = View(parse(reseal(bytes(frame), "ethernet"), "ethernet"))
    assert broken_at(view) is not None
    keys = [m.key.split(" <- ")[0] for m in
            compare(view, Dissection(1, ("eth", "infiniband")), TABLES, "#1").mismatches]
    assert keys and "infiniband/infiniband.aeth" in " ".join(keys)  # before the break: compared
    assert not [k for k in keys if "crc" in k or k.startswith("data/")]  # after it: not
    uc_send = _view(b"abcdefgh", **{"bth.opcode": 0x24})
    tally = compare(uc_send, Dissection(1, ("eth", "infiniband")), TABLES, "#1")
    assert any("crc" in m.key for m in tally.mismatches)  # an unbroken frame's CRC is compared
