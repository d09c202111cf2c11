"""Every RoCE/IB frame of the shared captures, read with scapy's rdpcap, dissects with the
header chain and values of ibwire.parse, and its CRCs verify."""

from __future__ import annotations

import pytest
from scapy.utils import rdpcap as scapy_rdpcap

import ibwire
from ibwire.scapy import BTH, ERF, LRH, rdpcap
from tests import corpus
from tests.corpus import ERF_CAPTURE, needs_shared
from tests.scapy.helpers import assert_like_parse, start_layer

FILES = corpus.captures()


def _check(packets) -> int:
    checked = 0
    for packet in packets:
        start, link = start_layer(packet)
        reference = ibwire.parse(bytes(start), link)
        if not reference.is_ib:
            assert BTH not in packet
            continue
        assert_like_parse(start, reference)
        assert packet[BTH].icrc_ok is True
        if reference.vcrc is not None:
            assert packet[LRH].vcrc_ok is True
        assert bytes(packet) == bytes(packet.original)
        checked += 1
    return checked


@needs_shared
def test_captures_are_there():
    assert len(FILES) >= 20 and ERF_CAPTURE in FILES


@pytest.mark.parametrize("path", corpus.params(FILES), ids=lambda p: p.name if p else "none")
def test_capture_dissects_with_scapy_rdpcap(path):
    assert _check(scapy_rdpcap(str(path))) > 0


@needs_shared
def test_erf_capture_goes_through_erf_and_lrh():
    packets = rdpcap(ERF_CAPTURE)
    assert len(packets) == 43
    assert all(isinstance(p, ERF) and isinstance(p.payload, LRH) for p in packets)
    assert _check(packets) == 43
