"""The scanner's MAD views (ibwire.scan.views): the CM fields that pair connections, on both
twins, agree with ``ibwire.parse(...).fields()`` on every frame of the shared captures, on
generated CM MADs and on broken ones (cut, lying lengths: no crash, the view absent)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ibwire
from ibwire.errors import IbwireError
from ibwire.pcap import index_capture
from ibwire.pcap.records import LINK_CODES, LINK_NAMES
from ibwire.scan import program
from ibwire.strategies import (
    DEFAULT_LINK,
    ENCAPSULATIONS,
    GeneratedPacket,
    bad_mads,
    mad_fields,
    mutated,
)
from ibwire.tables import mad_attributes
from tests.corpus import RDMA_CM, captures, needs_shared
from tests.scan.expect import scan_one

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: The view columns and the view (slot) each belongs to.
VIEW_COLUMNS = {"cm.localcommid": "cm.local", "cm.remotecommid": "cm.remote",
                "cm.req.serviceid": "cm.req", "cm.req.localqpn": "cm.req",
                "cm.req.startpsn": "cm.req", "cm.req.pppmtu": "cm.req",
                "cm.req.transpsvctype": "cm.req", "cm.rep.localqpn": "cm.rep",
                "cm.rep.startpsn": "cm.rep", "cm.req.remoteqpneecn": "cm.dreq"}


def expected(fields: dict[str, Any]) -> dict[str, int]:
    """The view columns a parsed packet's keys give, by Wireshark's names: the local
    communication ID is ``cm.req`` / ``cm.rep`` / ``cm.<message>.localcommid`` (not SIDR's
    request ID), the remote one ``cm.<message>.remotecommid``."""
    out = {k: fields[k] for k in VIEW_COLUMNS if k in fields}
    for key, value in fields.items():
        if key in ("cm.req", "cm.rep") or key.startswith("cm.") and key.endswith(".localcommid"):
            out["cm.localcommid"] = value
        elif key.startswith("cm.") and key.endswith(".remotecommid"):
            out["cm.remotecommid"] = value
    return out


def mismatches(row: dict[str, Any], fields: dict[str, Any]) -> list[str]:
    """Where the row's view columns and headers bits disagree with parse's keys."""
    want = expected(fields)
    bad = []
    for key, view in VIEW_COLUMNS.items():
        present = bool(row["headers"] >> program.SLOT[view] & 1)
        if key in want:
            if not present or row[key] != want[key]:
                bad.append(f"{key}: scanner {row[key]} (view {present}) parse {want[key]}")
        elif present or row[key] != 0:
            bad.append(f"{key}: scanner {row[key]} (view {present}), parse has none")
    views = {v for v in VIEW_COLUMNS.values()}
    if any(row["headers"] >> program.SLOT[v] & 1 for v in views) and not want:
        bad.append("a view without a CM message")
    return bad


def parsed_fields(frame: bytes, link: str) -> dict[str, Any]:
    try:
        return ibwire.parse(frame, link).fields()
    except IbwireError:
        return {}


def check(scanner: Any, frame: bytes, link: str) -> list[str]:
    return mismatches(scan_one(scanner, frame, link), parsed_fields(frame, link))


# ---------------------------------------------------------------- real captures


@needs_shared
def test_views_agree_with_parse_on_every_shared_capture_frame(scanner):
    cm_rows = 0
    for path in captures():
        index = index_capture(path)
        cols = scanner.scan_frames(index.buffer, index.offsets, index.lengths, index.link_codes)
        data = bytes(memoryview(index.buffer))
        for i, (off, n, code) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist(),
                                               index.link_codes.tolist(), strict=True)):
            row = {k: cols[k][i].item() for k in ("headers", *VIEW_COLUMNS)}
            fields = parsed_fields(data[off:off + n], LINK_NAMES[code]) if code in LINK_NAMES \
                else {}
            assert mismatches(row, fields) == [], (path.name, i)
            cm_rows += bool(expected(fields))
    assert cm_rows >= 10  # rdma_cm.pcap and rping.pcap hold CM exchanges


@needs_shared
def test_the_rdma_cm_capture_pairs_its_connections(scanner):
    """Each REQ's local communication ID comes back as a REP's remote one, and the REP's
    local ID in the RTU: what ``ibwire qp`` pairs connections with."""
    index = index_capture(RDMA_CM)
    cols = scanner.scan_frames(index.buffer, index.offsets, index.lengths, index.link_codes)

    def rows(view: str) -> np.ndarray:
        return np.flatnonzero(cols["headers"] & (1 << program.SLOT[view]))

    reqs, reps = rows("cm.req"), rows("cm.rep")
    assert len(reqs) == len(reps) >= 1
    for req in reqs:
        local = cols["cm.localcommid"][req]
        rep = [r for r in reps if cols["cm.remotecommid"][r] == local]
        assert len(rep) == 1
        assert cols["cm.req.localqpn"][req] != cols["cm.rep.localqpn"][rep[0]]
        rtu = [r for r in np.flatnonzero(cols["mad.attributeid"] == 0x14)
               if cols["cm.remotecommid"][r] == cols["cm.localcommid"][rep[0]]]
        assert rtu


# ---------------------------------------------------------------- generated MADs

CM_ATTRIBUTES = [row for (klass, _), row in sorted(mad_attributes().items()) if klass == 7]


@st.composite
def cm_packets(draw: st.DrawFn) -> GeneratedPacket:
    """A UD SEND to (or from) QP1 carrying a CM MAD of any declared attribute, random fields."""
    enc = draw(st.sampled_from(ENCAPSULATIONS))
    fields = draw(mad_fields(draw(st.sampled_from(CM_ATTRIBUTES))))
    to_qp1 = draw(st.booleans())
    fields.update({"bth.opcode": 0x64, "bth.destqp": 1 if to_qp1 else draw(st.integers(2, 99)),
                   "deth.srcqp": draw(st.integers(0, 0xFFFFFF)) if to_qp1 else 1})
    link = DEFAULT_LINK[enc]
    return GeneratedPacket(ibwire.build(enc, fields, link=link), link, enc, 0x64, fields, b"")


@SETTINGS
@given(cm_packets())
def test_views_agree_with_parse_on_generated_cm_mads(scanner, packet):
    assert "mad.attributeid" in parsed_fields(packet.frame, packet.link)
    assert check(scanner, packet.frame, packet.link) == []


@SETTINGS
@given(mutated(cm_packets()))
def test_views_agree_with_parse_on_broken_cm_mads(scanner, broken):
    assert check(scanner, broken.frame, broken.link) == []


@SETTINGS
@given(bad_mads())
def test_views_agree_with_parse_on_lying_mads(scanner, bad):
    """MADs of every class that lie (cut attribute, unknown attribute, RMPP, hops ...): no
    crash, and a view only where parse has its keys."""
    assert check(scanner, bad.frame, bad.link) == []


def _req(body: int | None = None, **fields: int) -> bytes:
    """A CM REQ on QP1 in RoCEv2; ``body``: its MAD ends that many bytes after the common
    header (the IP and UDP lengths say so: the ICRC follows)."""
    keys = {"bth.opcode": 0x64, "bth.destqp": 1, "deth.srcqp": 1, "mad.mgmtclass": 7,
            "mad.attributeid": 0x10, **fields}
    if body is None:
        return ibwire.build("rocev2_ipv4", {**keys, "cm.req": 7, "cm.req.localqpn": 0x11})
    return ibwire.build("rocev2_ipv4", keys, bytes(body))


@pytest.mark.parametrize("body", [0, 4, 8, 100, 231, 232, 240])
def test_a_req_cut_short_by_its_lengths_has_no_view(scanner, body):
    """The lengths end the MAD before the REQ does: parse reports the attribute cut, the
    scanner leaves the views out (a REQ of 232 bytes or more has them; the builder pads the
    body to a multiple of 4 and the pad is before the ICRC: 231 has them too, and a PadCnt
    error, as parse says)."""
    frame = _req(body)
    row = scan_one(scanner, frame, "ethernet")
    assert row["headers"] >> program.SLOT["mad"] & 1
    fits = -(-body // 4) * 4 >= 232
    assert bool(row["headers"] >> program.SLOT["cm.req"] & 1) == fits
    assert bool(row["headers"] >> program.SLOT["cm.local"] & 1) == fits
    assert check(scanner, frame, "ethernet") == []


@pytest.mark.parametrize("cut", [1, 2, 4, 100, 240, 300])
def test_a_req_cut_by_the_capture_has_no_view(scanner, cut):
    frame = _req()[:-cut]
    row = scan_one(scanner, frame, "ethernet")
    assert row["error"] != 0
    assert not row["headers"] >> program.SLOT["cm.req"] & 1
    assert row["cm.req.localqpn"] == row["cm.localcommid"] == 0
    assert check(scanner, frame, "ethernet") == []


@SETTINGS
@given(st.integers(0, 0xFFFFFF), st.integers(0, 0xFFFFFF), st.integers(0, 0xFFFFFFFF),
       st.integers(0, 15), st.integers(0, (1 << 64) - 1))
@example(0xFFFFFF, 0xFFFFFF, 0xFFFFFFFF, 15, (1 << 64) - 1)
def test_req_values_reach_their_columns(scanner, qpn, psn, commid, mtu, sid):
    frame = ibwire.build("rocev2_ipv4", {"cm.req": commid, "cm.req.localqpn": qpn,
                                         "cm.req.startpsn": psn, "cm.req.pppmtu": mtu,
                                         "cm.req.serviceid": sid})
    row = scan_one(scanner, frame, "ethernet")
    assert (row["cm.localcommid"], row["cm.req.localqpn"], row["cm.req.startpsn"],
            row["cm.req.pppmtu"], row["cm.req.serviceid"]) == (commid, qpn, psn, mtu, sid)
    assert not row["headers"] >> program.SLOT["cm.remote"] & 1


def _not_on_qp1(frame: bytes) -> bytes:
    """The MAD of ``frame`` as the payload of a UD SEND between QPs 5 and 6: no MAD."""
    at = ibwire.parse(frame).header("mad").offset
    return ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": 5,
                                        "deth.srcqp": 6}, frame[at:at + 256])


def test_other_mads_and_rc_packets_have_no_view(scanner):
    frames = [ibwire.build("rocev2_ipv4", {"cm.sidr_req.requestid": 5}),
              ibwire.build("rocev2_ipv4", {"pathrecord.slid": 3}),
              _req(body=232, **{"mad.mgmtclass": 7, "mad.attributeid": 0x30}),  # unknown
              _not_on_qp1(_req()),
              ibwire.build("rocev2_ipv4", {"bth.opcode": 4, "bth.destqp": 1}, bytes(256))]
    for frame in frames:
        row = scan_one(scanner, frame, "ethernet")
        assert not any(row["headers"] >> program.SLOT[v] & 1 for v in set(VIEW_COLUMNS.values()))
        assert check(scanner, frame, "ethernet") == []


def test_views_select_by_key_or_view_name(scanner):
    frame = _req()
    cols = scanner.scan_frames(frame, [0], [len(frame)], [LINK_CODES["ethernet"]],
                               fields=["cm.req", "cm.localcommid"])
    assert {"cm.req.localqpn", "cm.req.startpsn", "cm.req.serviceid", "cm.req.pppmtu",
            "cm.localcommid"} <= set(cols)
    assert "cm.rep.localqpn" not in cols and "cm.remotecommid" not in cols
    assert (cols["cm.localcommid"][0], cols["cm.req.localqpn"][0]) == (7, 0x11)
