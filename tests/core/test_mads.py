"""MAD bodies: every declared attribute builds and parses back, CM MADs build from their keys,
lying MADs give an error naming the field, names beside numbers come from the tables."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ibwire
from ibwire import MalformedError, UnknownAttributeError
from ibwire.cli.main import main
from ibwire.mad_numbers import MAD_SIZE
from ibwire.mads import RECORDS, plan
from ibwire.names import describe, mad_summary, syndrome
from ibwire.pcap import PcapWriter
from ibwire.strategies import mad_fields
from ibwire.tables import mad_attributes, mad_classes
from tests.core.roundtrip import roundtrip

ROWS = list(mad_attributes().values())
ROW_IDS = [f"0x{r.mgmtclass:02x}-{r.name}" for r in ROWS]


def _frame(fields: dict[str, Any], encapsulation: str = "rocev2_ipv4") -> bytes:
    qp = 0 if fields.get("mad.mgmtclass") in (0x01, 0x81) else 1
    return ibwire.build(encapsulation, {"bth.opcode": 0x64, "bth.destqp": qp,
                                        "deth.srcqp": qp, **fields})


def test_every_row_names_a_declaration_that_fits_its_area():
    for row in ROWS:
        record = RECORDS[row.record]
        assert row.source and row.entries >= 1
        mad = {"mgmtclass": row.mgmtclass, "attributeid": row.attribute, "method": 1}
        rmpp = {"rmppflags": 0, "rmpptype": 0, "data1": 0, "data2": 0} \
            if mad_classes()[row.mgmtclass][1] else None
        parts = list(plan(mad, rmpp, {}))
        assert record in [p.header for p in parts], row.name
        assert 24 + (12 if rmpp else 0) + sum(p.size for p in parts) == MAD_SIZE, row.name


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_attribute_builds_and_parses_back(row, data):
    fields = data.draw(mad_fields(row))
    encapsulation = data.draw(st.sampled_from(("rocev2_ipv4", "ib_local")))
    frame = _frame(fields, encapsulation)
    link = "infiniband" if encapsulation == "ib_local" else "ethernet"
    packet = roundtrip(frame, link, prefixes=False)
    got = packet.fields()
    assert {k: got.get(k) for k in fields} == fields
    mad = packet.header("mad")
    assert packet.payload == b"" and packet.icrc_offset == mad.offset + MAD_SIZE
    assert packet.verify().icrc_ok


def test_a_cm_req_builds_on_qp1_from_its_keys_alone():
    frame = ibwire.build("rocev2_ipv4", {
        "cm.req": 0x1234, "cm.req.localqpn": 0x11, "cm.req.startpsn": 0xABCDE,
        "cm.req.serviceid": 0x0000000001064853, "cm.req.pppmtu": 5,
        "cm.req.ip_cm.sip4": "192.0.2.1", "cm.req.ip_cm.dip4": "192.0.2.2",
        "cm.req.ip_cm.sport": 40000})
    packet = ibwire.parse(frame)
    f = packet.fields()
    assert (f["bth.opcode"], f["bth.destqp"], f["deth.srcqp"], f["deth.q_key"]) == \
        (0x64, 1, 1, 0x80010000)
    assert (f["mad.mgmtclass"], f["mad.attributeid"], f["mad.method"],
            f["mad.classversion"]) == (7, 0x10, 3, 2)
    assert (f["cm.req.localqpn"], f["cm.req.startpsn"], f["cm.req.pppmtu"]) == \
        (0x11, 0xABCDE, 5)
    assert (f["cm.req.ip_cm.ipv"], f["cm.req.ip_cm.sip4"], f["cm.req.ip_cm.dip4"],
            f["cm.req.ip_cm.sport"]) == (4, "192.0.2.1", "192.0.2.2", 40000)
    assert f["cm.req.serviceid.dport"] == 0x4853
    assert f["cm.req.private"][16:20] == bytes([192, 0, 2, 1])  # cma_hdr ip4.addr
    assert packet.icrc_offset - packet.header("mad").offset == MAD_SIZE
    assert packet.verify().icrc_ok
    assert mad_summary(f) == "CM ConnectRequest QP=0x000011 PSN=703710"  # as BTH's


def test_cm_keys_of_another_message_are_refused():
    with pytest.raises(ibwire.BuildError, match="cm.rep.localqpn"):
        ibwire.build("rocev2_ipv4", {"mad.mgmtclass": 7, "mad.attributeid": 0x10,
                                     "bth.opcode": 0x64, "bth.destqp": 1, "deth.srcqp": 1,
                                     "cm.req.localqpn": 1, "cm.rep.localqpn": 2})


def test_a_layout_the_values_contradict_is_a_build_error():
    with pytest.raises(ibwire.BuildError) as info:
        _frame({"mad.mgmtclass": 3, "mad.method": 0x92, "mad.attributeid": 0x35,
                "sa.attributeoffset": 7})
    assert (info.value.header, info.value.field) == ("sa", "attributeoffset")


# -- bad MADs --------------------------------------------------------------------------------

def _short_req(body: int) -> bytes:
    """A CM REQ whose MAD ends ``body`` bytes after its common header."""
    return ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": 1, "deth.srcqp": 1,
                                        "mad.mgmtclass": 7, "mad.attributeid": 0x10},
                        bytes(body))


def _poked(frame: bytes, mad_offset: int, data: bytes) -> bytes:
    """``frame`` with ``data`` written ``mad_offset`` bytes into its MAD (the ICRC then lies
    too, which the dissector does not look at)."""
    start = ibwire.parse(frame).header("mad").offset + mad_offset
    return frame[:start] + data + frame[start + len(data):]


BAD = {
    "truncated attribute": (_short_req(100), "cm.req", "alt_localgid"),
    "RMPP segment 0": (_frame({"mad.mgmtclass": 3, "mad.attributeid": 0x35, "rmpp.rmppflags": 1,
                               "rmpp.rmpptype": 1, "rmpp.data1": 0}), "rmpp", "segmentnumber"),
    "RMPP first flag on segment 2": (_frame({"mad.mgmtclass": 3, "mad.attributeid": 0x35,
                                             "rmpp.rmppflags": 3, "rmpp.rmpptype": 1,
                                             "rmpp.data1": 2}), "rmpp", "rmppflags"),
    "RMPP single segment too long": (_frame({"mad.mgmtclass": 3, "mad.attributeid": 0x35,
                                             "rmpp.rmppflags": 7, "rmpp.rmpptype": 1,
                                             "rmpp.data1": 1, "rmpp.data2": 221}),
                                     "rmpp", "payloadlength"),
    "SA records shorter than their offset": (_poked(_frame({
        "mad.mgmtclass": 3, "mad.method": 0x92, "mad.attributeid": 0x35,
        "sa.attributeoffset": 8}), 36 + 8, b"\x00\x07"), "sa", "attributeoffset"),
    "hop count past the path": (_frame({"mad.mgmtclass": 0x81, "mad.attributeid": 0x11,
                                        "mad.classspecific": 64}), "smpdirected", "hopcount"),
    "hop pointer past the hops": (_frame({"mad.mgmtclass": 0x81, "mad.attributeid": 0x11,
                                          "mad.classspecific": 0x0502}),
                                  "smpdirected", "hoppointer"),
}


POKED = {"SA records shorter than their offset"}
"""BAD frames broken after their ICRC was computed."""


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_lying_mad_is_an_error_naming_the_field(name):
    """The packet comes back with the error and its ICRC verdict (placed all the same): good
    where the builder made the MAD so, bad where ``_poked`` broke it after; strict=True
    raises it."""
    frame, header, field = BAD[name]
    packet = ibwire.parse(frame)
    assert isinstance(packet.error, MalformedError)
    assert (packet.error.header, packet.error.field) == (header, field)
    assert f"{header}.{field}" in str(packet.error)
    assert packet.verify().icrc_ok is (name not in POKED)
    with pytest.raises(MalformedError) as info:
        ibwire.parse(frame, strict=True)
    assert (info.value.header, info.value.field) == (header, field)


def test_an_unknown_attribute_keeps_its_bytes_with_a_reason():
    frame = ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": 1, "deth.srcqp": 1,
                                         "mad.mgmtclass": 7, "mad.attributeid": 0x99},
                         bytes(range(232)))
    packet = ibwire.parse(frame)
    assert packet.payload == bytes(range(232))
    assert packet.warnings == ("unknown attribute 0x0099 of MAD class 0x07: its bytes are "
                               "kept as payload",)
    with pytest.raises(UnknownAttributeError) as info:
        ibwire.parse(frame, strict=True)
    assert (info.value.header, info.value.field) == ("mad", "attributeid")


def show_lines(frames: list[bytes], path: Path) -> list[str]:
    """``ibwire show``'s lines for ``frames``, written as an Ethernet pcap at ``path``."""
    with PcapWriter(path, 1) as writer:
        for i, frame in enumerate(frames):
            writer.write(frame, i * 1000)
    out = io.StringIO()
    with redirect_stdout(out):
        main(["show", str(path)])
    return out.getvalue().splitlines()


def test_show_reads_past_bad_mads(tmp_path: Path):
    """Each bad MAD is one line naming its field; the good frames around them are shown."""
    good = _frame({"cm.rtu.localcommid": 5})
    frames = [good]
    for name in sorted(BAD):
        frames += [BAD[name][0], good]
    lines = show_lines(frames, tmp_path / "bad-mads.pcap")
    assert len(lines) == len(frames)
    assert all("CM ReadyToUse" in line for line in lines[::2])
    for line, name in zip(lines[1::2], sorted(BAD), strict=True):
        _, header, field = BAD[name]
        assert f"{header}.{field}" in line, line


# -- names -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value,text", [
    (0x1F, "ACK, unlimited credits"), (0x03, "ACK, 3 credits"), (0x09, "ACK, 24 credits"),
    (0x1E, "ACK, 32768 credits"),
    (0x2C, "RNR NAK: 0.64 ms"), (0x20, "RNR NAK: 655.36 ms"), (0x2E, "RNR NAK: 1.28 ms"),
    (0x60, "NAK: PSN sequence error"), (0x61, "NAK: invalid request"),
    (0x65, "NAK: reserved code 5"), (0x40, "reserved type, value 0")])
def test_aeth_syndromes_are_named(value, text):
    assert syndrome(value) == text


def test_names_beside_mad_numbers():
    fields = {"mad.mgmtclass": 3}
    assert describe("mad.mgmtclass", 3, fields) == "SUBN_ADM"
    assert describe("mad.method", 0x92, fields) == "GET_TABLE_RESP"
    assert describe("mad.method", 0x83, fields) == "SEND_RESP"
    assert describe("mad.attributeid", 0x35, fields) == "PathRecord"
    assert describe("mad.status", 0x0301, fields) == "BUSY, SUCCESS, ERR_NO_RECORDS"
    assert describe("cm.rej.reason", 28, fields) == "CONSUMER_DEFINED"
    assert describe("bth.opcode", 0x64, fields) == "UD_SEND_ONLY"
    assert describe("bth.psn", 5, fields) is None
    rej = ibwire.parse(_frame({"cm.rej.reason": 8})).fields()
    assert mad_summary(rej) == "CM ConnectReject reason=INVALID_SERVICE_ID"
