"""The four properties of every header codec, and agreement with its Construct declaration."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire import BuildError, TruncatedError
from ibwire.headers import ALL, Header
from ibwire.headers.layout import _unshow
from ibwire.strategies import header_values

HEADERS = sorted(ALL.values(), key=lambda h: h.name)
ids = [h.name for h in HEADERS]


def _construct_values(header: Header, values: dict) -> dict:
    """Values as Construct's own declaration takes them (ints and raw bytes)."""
    return {f.name: (_unshow(values[f.name], f, header.name).to_bytes(f.bits // 8, "big")
                     if f.fmt else values[f.name]) for f in header.fields}


@pytest.mark.parametrize("header", HEADERS, ids=ids)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_valid_values_build_the_same_bytes_as_the_declaration(header, data):
    values = data.draw(header_values(header))
    built = header.build(values)
    assert len(built) == header.size
    assert built == header.declaration.build(_construct_values(header, values))
    assert header.parse(built) == values  # build -> parse round-trips


@pytest.mark.parametrize("header", HEADERS, ids=ids)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_parsing_arbitrary_bytes_agrees_with_the_declaration(header, data):
    raw = data.draw(st.binary(min_size=0, max_size=header.size + 4))
    if len(raw) < header.size:
        with pytest.raises(TruncatedError) as info:
            header.parse(raw)
        assert info.value.header == header.name
        return
    ours = header.parse(raw)
    theirs = header.declaration.parse(raw)
    assert _construct_values(header, ours) == {f.name: theirs[f.name] for f in header.fields}


@pytest.mark.parametrize("header", HEADERS, ids=ids)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_invalid_arguments_raise_build_error(header, data):
    field = data.draw(st.sampled_from(header.fields))
    bad = data.draw(st.sampled_from([
        -1, field.mask + 1, 1 << 200, "x" if field.fmt is None else b"\x00" * (field.bits // 8 + 1),
        1.5, None,
    ]))
    with pytest.raises(BuildError) as info:
        header.build({field.name: bad})
    assert info.value.header == header.name
    with pytest.raises(BuildError):
        header.build({"no_such_field": 0})


def test_wireshark_style_keys():
    assert ALL["bth"].key("destqp") == "bth.destqp"
    assert ALL["immdt"].key("immdt") == "immdt"
    assert ALL["ip"].key("dsfield.ecn") == "ip.dsfield.ecn"


def test_atomiceth_swap_comes_before_compare():
    raw = bytes(range(28))
    values = ALL["atomiceth"].parse(raw)
    assert values["swapdt"] == int.from_bytes(raw[12:20], "big")
    assert values["cmpdt"] == int.from_bytes(raw[20:28], "big")


def test_bth_byte4_fields():
    values = ALL["bth"].parse(bytes.fromhex("0a00ffff" "c1000012" "800000ab"))
    assert (values["fecn"], values["becn"], values["resv6a"], values["destqp"]) == (1, 1, 1, 0x12)
    assert (values["a"], values["psn"]) == (1, 0xAB)


def _every_declaration() -> list[Header]:
    from ibwire.mads import FRAMES, RECORDS

    return [*HEADERS, *sorted((*RECORDS.values(), *FRAMES), key=lambda h: h.name)]


@pytest.mark.parametrize("header", _every_declaration(), ids=lambda h: h.name)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_compiled_parse_is_the_field_layout_read_one_by_one(header, data):
    """Header.parse runs a function compiled from the fields: it must give what reading the
    layout field by field gives (headers and every MAD attribute, addresses included)."""
    from ibwire.headers.layout import display

    raw = data.draw(st.binary(min_size=header.size, max_size=header.size))
    word = int.from_bytes(raw, "big")
    want = {f.name: display((word >> f.shift) & f.mask, f) for f in header.fields}
    got = header.parse(raw)
    assert got == want
    assert list(got) == list(want)
