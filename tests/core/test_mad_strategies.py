"""ibwire.strategies' MADs: the valid ones parse back to their values, each lie gives the
per-packet error naming its field (or, for an unknown attribute, a warning and, strictly,
UnknownAttributeError), and ``ibwire show`` reads past them."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ibwire
from ibwire import MalformedError, UnknownAttributeError
from ibwire.mad_numbers import MAD_SIZE
from ibwire.mad_strategies import _body, _frame
from ibwire.strategies import BAD_KINDS, bad_mads, mad_packets
from ibwire.tables import mad_attributes
from tests.core.test_mads import show_lines

ROWS = list(mad_attributes().values())
ROW_IDS = [f"0x{r.mgmtclass:02x}-{r.name}" for r in ROWS]


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_mads_of_every_attribute_parse_back(row, data):
    good = data.draw(mad_packets(row))
    packet = ibwire.parse(good.frame, good.link, strict=True)
    got = packet.fields()
    assert {k: got.get(k) for k in good.fields} == good.fields
    assert packet.icrc_offset == packet.header("mad").offset + MAD_SIZE
    assert packet.verify().icrc_ok


def test_a_cut_between_sa_table_records_names_the_gap():
    """Found by bad_mads: a MAD cut in the gap after a table record (PathRecords 72 bytes
    apart) raised StopIteration out of ibwire.parse."""
    heads = {"mad.mgmtclass": 3, "mad.attributeid": 0x35, "mad.method": 0x92,
             "rmpp.rmppflags": 0}
    body = _body(heads, {"sa.attributeoffset": 9})
    packet = ibwire.parse(_frame("rocev2_ipv4", heads, body[:20 + 72 + 64]))
    assert isinstance(packet.error, MalformedError)
    assert (packet.error.header, packet.error.field) == ("pathrecord", "gap")


@pytest.mark.parametrize("kind", BAD_KINDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_lie_gives_the_error_naming_its_field(kind, data):
    bad = data.draw(bad_mads(kind))
    assert bad.kind == kind
    packet = ibwire.parse(bad.frame, bad.link)
    assert packet.verify().icrc_ok  # built so: only the MAD lies
    if bad.warning:
        assert packet.error is None
        assert any(f"attribute 0x{bad.fields['mad.attributeid']:04x}" in w
                   for w in packet.warnings)
        with pytest.raises(UnknownAttributeError) as info:
            ibwire.parse(bad.frame, bad.link, strict=True)
        assert (info.value.header, info.value.field) == (bad.header, bad.field)
        return
    assert isinstance(packet.error, MalformedError), (kind, packet.fields())
    assert (packet.error.header, packet.error.field) == (bad.header, bad.field)
    name = bad.header if bad.field is None else f"{bad.header}.{bad.field}"
    assert name in str(packet.error)
    with pytest.raises(MalformedError) as info:
        ibwire.parse(bad.frame, bad.link, strict=True)
    assert (info.value.header, info.value.field) == (bad.header, bad.field)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad=st.lists(bad_mads(encapsulation="rocev2_ipv4"), min_size=1, max_size=6),
       good=mad_packets(encapsulation="rocev2_ipv4"))
def test_show_reads_past_every_lie(bad, good):
    """One line per frame; each lie's line names its field, the good frames' do not fail."""
    frames = [good.frame]
    for b in bad:
        frames += [b.frame, good.frame]
    with tempfile.TemporaryDirectory() as tmp:
        lines = show_lines(frames, Path(tmp) / "lies.pcap")
    assert len(lines) == len(frames)
    for line, b in zip(lines[1::2], bad, strict=True):
        if not b.warning:
            name = b.header if b.field is None else f"{b.header}.{b.field}"
            assert name in line, line
    shown = {line.split(None, 2)[2] for line in lines[::2]}  # without number and time
    assert len(shown) == 1 and "[" not in shown.pop()
