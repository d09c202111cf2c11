"""MAD bodies: every declared attribute builds and parses back, CM MADs build from their keys,
lying MADs give an error naming the field, names beside numbers come from the tables."""

from __future__ import annotations

import io
import ipaddress
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


def test_an_ipv4_mapped_req_gid_is_also_given_as_ipv4():
    """rdma_cm's REQ over RoCE/IPv4 carries IPv4-mapped GIDs (::ffff:a.b.c.d): Wireshark's
    cm.req.prim_*gid_ipv4 keys; a GID that is not mapped has none (its last 4 bytes are no
    address), and the whole GID stays."""
    f = ibwire.parse(_frame({"cm.req.prim_localgid": "::ffff:192.0.2.1",
                             "cm.req.prim_remotegid": "fe80::1"})).fields()
    assert f["cm.req.prim_localgid_ipv4"] == "192.0.2.1"
    assert f["cm.req.prim_localgid"] == "::ffff:c000:201"
    assert "cm.req.prim_remotegid_ipv4" not in f and f["cm.req.prim_remotegid"] == "fe80::1"


@pytest.mark.parametrize(("rmpptype", "names"), [
    (1, ("rmpp.segmentnumber", "rmpp.payloadlength")),
    (2, ("rmpp.segmentnumber", "rmpp.newwindowlast")),
    (3, ()), (0, ())])
def test_rmpp_data_words_are_named_by_rmpp_type(rmpptype, names):
    """IBA 13.6.2.1: DATA's words are SegmentNumber and PayloadLength, ACK's SegmentNumber and
    NewWindowLast (Wireshark's infiniband.rmpp.* names); STOP/ABORT's are reserved."""
    fields = {"mad.mgmtclass": 3, "mad.method": 0x92, "mad.attributeid": 0x35,
              "rmpp.rmpptype": rmpptype, "rmpp.rmppflags": 7 if rmpptype == 1 else 1,
              "rmpp.data1": 1, "rmpp.data2": 76 if rmpptype == 1 else 9}
    if rmpptype == 1:  # a DATA segment carries the SA header, the others none (13.6.2.1)
        fields["sa.attributeoffset"] = 8
    f = roundtrip(_frame(fields), "ethernet", prefixes=False).fields()
    assert {k: f[k] for k in names} == dict(zip(names, (1, fields["rmpp.data2"]),
                                                  strict=False))
    named = {k for k in f if k.startswith("rmpp.")} - {f"rmpp.{n}" for n in (
        "rmppversion", "rmpptype", "rresptime", "rmppflags", "rmppstatus", "data1", "data2")}
    assert named == set(names)


@pytest.mark.parametrize(("klass", "attribute", "extra"), [
    (0x01, 0x10, {}), (0x81, 0x10, {}), (0x03, 0x11, {"mad.method": 0x01})])
def test_a_node_description_is_text(klass, attribute, extra):
    """IBA 14.2.5.15: NodeString is 64 bytes of UTF-8, NUL padded (Wireshark shows text);
    bytes that are not such a string stay bytes, so none is lost."""
    base = {"mad.mgmtclass": klass, "mad.attributeid": attribute, **extra}
    for value, shown in (("ib-host-7 mlx5_0", "ib-host-7 mlx5_0"), ("héllo ✓", "héllo ✓"),
                         ("", ""), ("x" * 64, "x" * 64),
                         (b"abc\0xyz".ljust(64, b"\0"), b"abc\0xyz".ljust(64, b"\0")),
                         (b"\xff\xfe".ljust(64, b"\0"), b"\xff\xfe".ljust(64, b"\0"))):
        frame = _frame({**base, "nodedescription.nodestring": value})
        packet = roundtrip(frame, "ethernet", prefixes=False)
        assert packet.fields()["nodedescription.nodestring"] == shown
    raw = b"ib-host-7".ljust(64, b"\0")
    assert raw in _frame({**base, "nodedescription.nodestring": "ib-host-7"})
    with pytest.raises(ibwire.BuildError, match="does not fit"):
        _frame({**base, "nodedescription.nodestring": "é" * 33})


@pytest.mark.parametrize(("klass", "attribute", "extra"), [
    (0x01, 0x15, {}), (0x81, 0x15, {}), (0x03, 0x12, {"mad.method": 0x01})])
def test_port_info_capability_mask_bits_are_named(klass, attribute, extra):
    """IBA 14.2.5.6 table 146, as specs/port_capability_mask.tsv names the bits (Wireshark's
    portinfo.capabilitymask.* keys): IsSM is bit 1, IsCM bit 16, IsClientReregistration 25."""
    mask = 1 << 1 | 1 << 16 | 1 << 25 | 1 << 14  # bit 14: no Wireshark name
    f = ibwire.parse(_frame({"mad.mgmtclass": klass, "mad.attributeid": attribute, **extra,
                             "portinfo.capabilitymask": mask})).fields()
    bits = {k.rsplit(".", 1)[1]: v for k, v in f.items()
            if k.startswith("portinfo.capabilitymask.")}
    assert len(bits) == 24
    assert {k for k, v in bits.items() if v} == {
        "issm", "communicationmanagementsupported", "clientregistrationsupported"}


def test_port_info_record_table_gives_bits_per_record():
    f = ibwire.parse(_frame({"mad.mgmtclass": 3, "mad.method": 0x92, "mad.attributeid": 0x12,
                             "sa.attributeoffset": 9,
                             "portinfo.capabilitymask": [2, 0x10000]})).fields()
    assert f["portinfo.capabilitymask.issm"] == [1, 0]
    assert f["portinfo.capabilitymask.communicationmanagementsupported"] == [0, 1]


def test_service_data_is_four_16_byte_items():
    """IBA 15.2.5.14: ServiceData is 16 8-bit, 8 16-bit, 4 32-bit and 2 64-bit values, 16
    bytes each (Wireshark shows four linkrecord.servicedata items)."""
    items = [bytes([i]) * 16 for i in range(1, 5)]
    base = {"mad.mgmtclass": 3, "mad.method": 0x01, "mad.attributeid": 0x31}
    frame = _frame({**base, "linkrecord.servicedata": items})
    assert b"".join(items) in frame
    assert roundtrip(frame, "ethernet", prefixes=False).fields()[
        "linkrecord.servicedata"] == items
    assert _frame({**base, "linkrecord.servicedata": b"".join(items)}) == frame
    table = ibwire.parse(_frame({**base, "mad.method": 0x92, "sa.attributeoffset": 22,
                                 "linkrecord.servicedata": [items]})).fields()
    assert table["linkrecord.servicedata"] == [items]
    with pytest.raises(ibwire.BuildError, match="16 bytes each"):
        _frame({**base, "linkrecord.servicedata": [b"x" * 16] * 3 + [b"y"]})


def test_multi_path_record_table_decodes_its_gids():
    """15.2.5.20: SGIDCount + DGIDCount GIDs follow each MultiPathRecord, within its
    AttributeOffset: in a table as in a one-record response (they were a gap's bytes)."""
    fields = {"mad.mgmtclass": 3, "mad.method": 0x92, "mad.attributeid": 0x3A,
              "sa.attributeoffset": 7, "multipathrecord.sgidcount": [1, 2, 0],
              "multipathrecord.dgidcount": [1, 0, 9],
              "multipathrecord.sdgid": [["fe80::1", "fe80::2"], ["fe80::3", "::4"],
                                        ["::5", "::6"]]}
    frame = _frame(fields)
    f = roundtrip(frame, "ethernet", prefixes=False).fields()
    assert f["multipathrecord.sdgid"] == fields["multipathrecord.sdgid"]
    assert f["multipathrecord.gap"] == [b"", b"", b""]
    assert ipaddress.IPv6Address("fe80::3").packed in frame
    one = ibwire.parse(_frame({**fields, "mad.method": 0x01, "sa.attributeoffset": 0,
                               "multipathrecord.sgidcount": 1, "multipathrecord.dgidcount": 1,
                               "multipathrecord.sdgid": ["fe80::1", "fe80::2"]})).fields()
    assert one["multipathrecord.sdgid"] == ["fe80::1", "fe80::2"]


def _notice(trap: int, details: bytes, generic: int = 1, klass: int = 0x01) -> dict[str, Any]:
    f = ibwire.parse(_frame({"mad.mgmtclass": klass, "mad.attributeid": 2,
                             "mad.method": 0x05, "notice.isgeneric": generic,
                             "notice.trapnumberdeviceid": trap,
                             "notice.datadetails": details})).fields()
    return {k: v for k, v in f.items() if k.startswith("trap.")}


DETAILS = bytes(range(0x10, 0x10 + 54))


@pytest.mark.parametrize("klass", [0x01, 0x81, 0x03])
def test_notice_trap_details_are_decoded(klass):
    """IBA 14.2.5.1 table 155 as Linux's struct ib_mad_notice_attr lays the details out
    (ntc_129_131, ntc_144, ntc_145, ntc_256, ntc_257_258), on bytes 0x10, 0x11, ..."""
    assert _notice(65, DETAILS, klass=klass) == {
        "trap.gidaddr": str(ipaddress.IPv6Address(DETAILS[6:22]))}
    assert _notice(128, DETAILS, klass=klass) == {"trap.lidaddr": 0x1011}
    assert _notice(130, DETAILS, klass=klass) == {"trap.lidaddr": 0x1213, "trap.portno": 0x14}
    assert _notice(144, DETAILS, klass=klass) == {
        "trap.lidaddr": 0x1213, "trap.otherlocalchanges": 1, "trap.capabilitymask": 0x16171819,
        "trap.linkspeecenabledchange": 0, "trap.linkwidthenabledchange": 1,
        "trap.nodedescriptionchange": 1}  # change_flags 0x1b
    assert _notice(145, DETAILS, klass=klass)["trap.systemimageguid"] == 0x161718191A1B1C1D
    bad_mkey = _notice(256, DETAILS, klass=klass)
    assert (bad_mkey["trap.drslid"], bad_mkey["trap.method"], bad_mkey["trap.attributeid"],
            bad_mkey["trap.mkey"], bad_mkey["trap.drhopcount"]) == (
        0x1415, 0x16, 0x1819, 0x1E1F202122232425, 0x27)
    assert bad_mkey["trap.drnoticereturnpath"] == DETAILS[24:54]
    bad_key = _notice(257, DETAILS, klass=klass)
    assert (bad_key["trap.lidaddr1"], bad_key["trap.lidaddr2"], bad_key["trap.key"],
            bad_key["trap.sl"], bad_key["trap.qp1"], bad_key["trap.qp2"]) == (
        0x1213, 0x1415, 0x16171819, 1, 0x1B1C1D, 0x1F2021)
    assert bad_key["trap.gidaddr2"] == str(ipaddress.IPv6Address(DETAILS[34:50]))
    assert _notice(259, DETAILS, klass=klass)["trap.swlidaddr"] == 0x4041  # byte 48


def test_vendor_notices_and_unknown_traps_keep_raw_details():
    assert _notice(65, DETAILS, generic=0) == {}  # 65 is a DeviceID there
    assert _notice(1, DETAILS) == {}


def test_notice_details_build_from_trap_keys():
    frame = _frame({"mad.mgmtclass": 1, "mad.attributeid": 2, "notice.isgeneric": 1,
                    "notice.trapnumberdeviceid": 129, "trap.lidaddr": 0x42, "trap.portno": 7})
    f = roundtrip(frame, "ethernet", prefixes=False).fields()
    assert f["notice.datadetails"][:5] == b"\0\0\0\x42\x07"
    assert (f["trap.lidaddr"], f["trap.portno"]) == (0x42, 7)
    with pytest.raises(ibwire.BuildError, match="trapnumberdeviceid"):
        _frame({"mad.mgmtclass": 1, "mad.attributeid": 2, "notice.trapnumberdeviceid": 7,
                "trap.lidaddr": 1})
