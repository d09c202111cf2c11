"""One definition: every layer builds and dissects exactly as its Construct declaration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.packet import Packet

from ibwire.scapy import LAYERS
from ibwire.scapy.fields import scapy_name
from ibwire.scapy.layers import IBHeader
from tests.scapy.helpers import canonical_values, layer_values

LAYER_IDS = sorted(LAYERS)


@pytest.mark.parametrize("name", LAYER_IDS)
def test_fields_are_the_declaration(name):
    layer = LAYERS[name]
    declared = [scapy_name(f.name) for f in layer.header.fields]
    assert [f.name for f in layer.fields_desc][:len(declared)] == declared
    trailers = [f.name for f in layer.fields_desc][len(declared):]
    assert trailers == {"bth": ["pad", "icrc"], "lrh": ["vcrc"]}.get(name, [])
    assert len(layer().self_build()) == layer.header.size


@pytest.mark.parametrize("name", LAYER_IDS)
def test_no_field_hides_a_packet_attribute(name):
    names = {f.name for f in LAYERS[name].fields_desc}
    assert not names & set(dir(Packet))


@pytest.mark.parametrize("name", LAYER_IDS)
@given(data=st.data())
def test_scapy_layer_and_header_agree(name, data):
    """For arbitrary field values: same bytes both ways, same values both ways."""
    layer = LAYERS[name]
    header = layer.header
    wire = data.draw(st.binary(min_size=header.size, max_size=header.size))
    values = header.parse(wire)  # any value of every field, addresses as text
    assert header.build(values) == wire
    built = layer(**{scapy_name(k): v for k, v in values.items()})
    assert built.self_build() == wire  # scapy builds what Header.build builds
    dissected = layer(wire)
    assert layer_values(dissected) == canonical_values(header, values)
    assert canonical_values(header, header.parse(dissected.self_build())) == \
        canonical_values(header, values)


@pytest.mark.parametrize("name", LAYER_IDS)
@given(data=st.data())
def test_fast_dissection_is_scapys_field_by_field(name, data):
    """IBHeader.do_dissect (one integer, shifts) gives what scapy's getfield loop gives."""
    layer = LAYERS[name]
    wire = data.draw(st.binary(min_size=layer.header.size, max_size=layer.header.size + 8))
    fast = layer(wire)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(IBHeader, "do_dissect", Packet.do_dissect)
        slow = layer(wire)
    assert fast.fields == slow.fields
    assert fast.raw_packet_cache == slow.raw_packet_cache
    assert bytes(fast) == bytes(slow)


def test_star_import_gives_every_layer():
    import ibwire.scapy as module

    wanted = {"LRH", "GRH", "BTH", "RDETH", "DETH", "XRCETH", "RETH", "AtomicETH",
              "AtomicAckETH", "AETH", "ImmDt", "IETH", "FETH", "CNPPadding", "MAD", "RMPP",
              "ERF", "OPCODES", "AETH_SYNDROMES", "AETH_TYPES", "NAK_CODES", "rdpcap"}
    assert wanted <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
