"""MAD bodies in scapy: a layer per declared attribute, the same values as ibwire.parse.

* Built with defaults, every declared attribute of every class is a whole valid MAD: the MAD
  header gets its class and attribute ID from the layers, ibwire.parse reads it without
  error or warning, and ``ibwire check`` passes a capture of them all.
* For random values (ibwire.strategies.mad_fields: SA tables, RMPP segments, directed-route
  hops), scapy dissects ibwire.build's frame to the parts and values ibwire.parse gives, and
  builds the same bytes again, from the dissection and from fresh layers holding its values.
* The CM MADs of the shared RDMA-CM capture dissect to ibwire.parse's values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import rdpcap as scapy_rdpcap

import ibwire
from ibwire.cli.main import main
from ibwire.errors import BuildError
from ibwire.mads import QP1_QKEY, plan
from ibwire.pcap import PcapWriter
from ibwire.scapy import BTH, CM_REP, CM_REQ, DETH, MAD, RMPP, P_KeyTable, PathRecord
from ibwire.scapy.attributes import ATTRIBUTE_LAYERS, LAYERS_BY_RECORD, MADPart, short_name
from ibwire.strategies import bad_mads, mad_fields
from ibwire.tables import MadAttribute, mad_attributes, mad_classes
from tests.corpus import RDMA_CM, needs_shared

ROWS = list(mad_attributes().values())
ROW_IDS = [f"0x{r.mgmtclass:02x}-{r.name}" for r in ROWS]


def _carrier(klass: int) -> Packet:
    """The packet below a MAD, every BTH and DETH value left to its default: the MAD's
    layers give opcode, QPs and Q_Key (checked by test_defaults_build_a_valid_mad)."""
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="192.0.2.1", dst="192.0.2.2") / UDP() / BTH() / DETH())


def _default_stack(row: MadAttribute) -> Packet:
    """MAD / [RMPP] / the body layers of ``row``'s plan, every value a default."""
    stack: Packet = MAD()
    rmpp = None
    if mad_classes()[row.mgmtclass][1]:
        stack = stack / RMPP()
        rmpp = {"rmppflags": 0, "rmpptype": 0, "data1": 0, "data2": 0}
    mad = {"mgmtclass": row.mgmtclass, "attributeid": row.attribute, "method": 1}
    for part in plan(mad, rmpp, {}):
        layer = LAYERS_BY_RECORD.get(part.header.name)
        if layer is not None:
            stack = stack / layer()
    return stack


def body_fields(packet: Packet) -> dict[str, Any]:
    """ibwire's keys and values of every MAD body layer of a scapy packet."""
    out: dict[str, Any] = {}
    layer = packet
    while layer:
        if isinstance(layer, MADPart):
            out.update(layer.ibwire_fields())
        layer = layer.payload
    return out


def parsed_body(packet: ibwire.Packet) -> dict[str, Any]:
    """ibwire.parse's values of the MAD body parts (derived views left out)."""
    out: dict[str, Any] = {}
    for header in packet.headers:
        if header.full_keys:
            out.update(header.values)
    return out


def body_layers(packet: Packet) -> list[str]:
    names, layer = [], packet
    while layer:
        if isinstance(layer, MADPart):
            names.append(layer.record.name)
        layer = layer.payload
    return names


def parsed_layers(packet: ibwire.Packet) -> list[str]:
    return [h.name for h in packet.headers if h.name in LAYERS_BY_RECORD]


def test_every_declaration_has_a_layer_named_by_its_keys():
    from ibwire.mads import FRAMES, RECORDS

    for record in (*RECORDS.values(), *FRAMES):
        if record.name == "multipathrecord.gids":
            continue
        layer = LAYERS_BY_RECORD[record.name]
        names = [f.name for f in layer.fields_desc]
        assert names[:len(record.fields)] == [short_name(f.name) for f in record.fields]
        assert not set(names) & set(dir(Packet))
    assert {"CM_REQ", "CM_MRA", "CM_REJ", "CM_REP", "CM_RTU", "CM_DREQ", "CM_DREP",
            "CM_SIDR_REQ", "CM_SIDR_REP", "CM_LAP", "CM_APR", "ClassPortInfo", "PathRecord",
            "PortInfo", "PortCounters", "Notice", "NoticeGS"} <= ATTRIBUTE_LAYERS.keys()


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_defaults_build_a_valid_mad(row):
    frame = raw(_carrier(row.mgmtclass) / _default_stack(row))
    packet = ibwire.parse(frame)
    assert packet.error is None and packet.warnings == ()
    f = packet.fields()
    assert (f["mad.mgmtclass"], f["mad.attributeid"]) == (row.mgmtclass, row.attribute)
    assert f["mad.classversion"] in (1, 2) and f["mad.baseversion"] == 1
    qp = 0 if row.mgmtclass in (0x01, 0x81) else 1
    assert (f["bth.opcode"], f["bth.destqp"], f["deth.srcqp"], f["deth.q_key"]) == \
        (0x64, qp, qp, 0 if qp == 0 else QP1_QKEY)
    assert packet.icrc_offset == packet.header("mad").offset + 256
    assert packet.verify().icrc_ok
    dissected = Ether(frame)
    assert body_layers(dissected) == parsed_layers(packet)
    assert body_fields(dissected) == parsed_body(packet)
    assert raw(dissected) == frame


def test_ibwire_check_passes_every_default_mad(tmp_path: Path, capsys):
    path = tmp_path / "defaults.pcap"
    with PcapWriter(path, 1) as writer:
        for i, row in enumerate(ROWS):
            writer.write(raw(_carrier(row.mgmtclass) / _default_stack(row)), i * 1000)
    assert main(["check", str(path)]) == 0
    assert f"{len(ROWS)} records" in capsys.readouterr().out


def _fresh(dissected: Packet) -> Packet:
    """The dissected packet rebuilt from fresh layers holding its field values (MAD body
    layers, MAD and RMPP included), the ICRC left to compute."""
    layers: list[Packet] = []
    layer = dissected
    while layer:
        if isinstance(layer, (MADPart, MAD, RMPP)):
            layers.append(type(layer)(**{f.name: layer.getfieldval(f.name)
                                         for f in layer.fields_desc}))
        elif isinstance(layer, Raw):
            layers.append(Raw(layer.load))
        else:
            copy = layer.copy()
            copy.remove_payload()
            if isinstance(copy, BTH):
                copy.icrc = None
            layers.append(copy)
        layer = layer.payload
    out = layers[0]
    for layer in layers[1:]:
        out = out / layer
    return out


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_values_dissect_as_ibwire_parse_and_build_back(row, data):
    fields = data.draw(mad_fields(row))
    qp = 0 if row.mgmtclass in (0x01, 0x81) else 1
    frame = ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": qp,
                                         "deth.srcqp": qp, **fields})
    packet = ibwire.parse(frame)
    assert packet.error is None
    dissected = Ether(frame)
    assert body_layers(dissected) == parsed_layers(packet)
    assert body_fields(dissected) == parsed_body(packet)
    assert raw(dissected) == frame
    assert raw(_fresh(dissected)) == frame


def test_fields_read_as_show_json_names_them():
    frame = raw(_carrier(7) / MAD() / CM_REP(rep=0x1234, localqpn=0x11, startpsn=0xABCDE))
    f = ibwire.parse(frame).fields()
    assert (f["cm.rep"], f["cm.rep.localqpn"], f["cm.rep.startpsn"]) == (0x1234, 0x11, 0xABCDE)
    assert Ether(frame)[CM_REP].localqpn == 0x11
    assert Ether(frame)[CM_REP].startpsn == 0xABCDE


def test_a_table_holds_lists_and_a_single_value_fills_every_entry():
    stack = MAD(mgmtclass=0x01) / LAYERS_BY_RECORD["smplid"]() / P_KeyTable(
        p_keybase=list(range(32)), membershiptype=1) / LAYERS_BY_RECORD["smplid.tail"]()
    frame = raw(_carrier(0x01) / stack)
    f = ibwire.parse(frame).fields()
    assert f["p_keytable.p_keybase"] == list(range(32))
    assert f["p_keytable.membershiptype"] == [1] * 32
    assert Ether(frame)[P_KeyTable].p_keybase == list(range(32))


def test_an_sa_table_is_a_list_of_records():
    stack = (MAD(method=0x92) / RMPP() / LAYERS_BY_RECORD["sa"](attributeoffset=8)
             / PathRecord(dlid=[1, 2, 3], dgid="fe80::1"))
    frame = raw(_carrier(3) / stack)
    f = ibwire.parse(frame).fields()
    assert f["pathrecord.dlid"] == [1, 2, 3] and f["pathrecord.dgid"] == ["fe80::1"] * 3
    assert f["sa.padding"] == bytes(200 - 3 * 64)
    assert Ether(frame)[PathRecord].dlid == [1, 2, 3]


def test_values_that_do_not_fit_raise_naming_the_key():
    with pytest.raises(BuildError, match="cm.req.localqpn"):
        raw(MAD() / CM_REQ(localqpn=1 << 24))
    with pytest.raises(BuildError, match="p_keytable.p_keybase needs a list of 32"):
        raw(MAD(mgmtclass=1) / LAYERS_BY_RECORD["smplid"]() / P_KeyTable(p_keybase=[1, 2]))


def test_a_cut_mad_leaves_the_rest_as_payload():
    frame = ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": 1,
                                         "deth.srcqp": 1, "mad.mgmtclass": 7,
                                         "mad.attributeid": 0x10}, bytes(100))
    dissected = Ether(frame)
    assert CM_REQ not in dissected and dissected[MAD].payload.load == bytes(100)


@needs_shared
def test_rdma_cm_capture_dissects_as_ibwire_parse():
    cm = 0
    for packet in scapy_rdpcap(str(RDMA_CM)):
        reference = ibwire.parse(bytes(packet))
        if reference.header("mad") is None:
            assert MAD not in packet
            continue
        assert body_layers(packet) == parsed_layers(reference)
        assert body_fields(packet) == parsed_body(reference)
        if CM_REQ in packet:
            fields = reference.fields()
            assert packet[CM_REQ].localqpn == fields["cm.req.localqpn"]
            assert packet[CM_REQ].startpsn == fields["cm.req.startpsn"]
        cm += reference.fields()["mad.mgmtclass"] == 7
        assert raw(packet) == bytes(packet.original)
    assert cm > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad=bad_mads(encapsulation="rocev2_ipv4"))
def test_lying_mads_dissect_without_error_and_build_back(bad):
    """What ibwire.parse reports as an error, scapy keeps: the parts that are whole as
    layers, the rest as payload, the same bytes built again."""
    dissected = Ether(bad.frame)
    assert MAD in dissected
    assert raw(dissected) == bad.frame
    assert dissected[BTH].icrc_ok is True


def test_given_carrier_values_win_over_the_mads():
    """Only defaults follow the MAD: a BTH or DETH value given stays, others still follow."""
    frame = raw(Ether() / IP() / UDP() / BTH(destqp=5) / DETH(q_key=7) / MAD() / CM_REQ())
    f = ibwire.parse(frame).fields()
    assert (f["bth.opcode"], f["bth.destqp"], f["deth.q_key"], f["deth.srcqp"]) == (0x64, 5, 7, 1)
    assert raw(BTH() / DETH())[:1] == b"\x00"   # no MAD above: scapy's defaults
