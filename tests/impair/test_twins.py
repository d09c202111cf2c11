"""The forwarder's compiled per-frame code against its Python twin, on the frames the
protocol strategies make and break: which frames carry an IB transport packet and where
its words are (``relay_classify`` / :func:`ibwire.impair.classify.classify` on the
scanner), and the TCP/UDP checksum completion (``relay_complete_checksum`` /
:func:`ibwire.impair.forge.complete_checksum`). Where the two read a frame differently, the
compiled path and ``--no-fast`` would apply a fault plan to different frames."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire import build
from ibwire.impair import _io, forge
from ibwire.impair.classify import COLUMNS, classify
from ibwire.strategies import mutated, packets

pytestmark = pytest.mark.skipif(_io.fast is None, reason="the compiled fast path is not built")

ROCE = ("rocev1", "rocev2_ipv4", "rocev2_ipv6")
#: the AETH words are read whatever the opcode in C; the scanner reads them where one is
COMPARED = tuple(c for c in COLUMNS if not c.startswith("aeth."))


def _both(frame: bytes) -> tuple[dict[str, int], dict[str, int]]:
    data = np.frombuffer(frame, np.uint8).copy()
    offsets, lengths = np.zeros(1, np.int64), np.array([len(frame)], np.int64)
    out = []
    for fast in (True, False):
        cols = classify(data, offsets, lengths, fast=fast)
        row = {"ib": int(cols["ib"][0])}
        if row["ib"]:
            row.update({c: int(cols[c][0]) for c in COMPARED})
        out.append(row)
    return out[0], out[1]


def _roce_frames() -> st.SearchStrategy[bytes]:
    good = st.sampled_from(ROCE).flatmap(lambda enc: packets(encapsulation=enc))
    return st.one_of(good, mutated(good)).filter(lambda p: p.link == "ethernet").map(
        lambda p: p.frame)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_roce_frames())
def test_classifier_twins_agree_on_made_and_broken_packets(frame: bytes) -> None:
    c, python = _both(frame)
    assert c == python


def _tagged(tpids: tuple[int, ...], ethertype: int, network: bytes) -> bytes:
    tags = b"".join(struct.pack("!HH", t, 7) for t in tpids)
    return bytes(6) + bytes.fromhex("020000000001") + tags + struct.pack("!H", ethertype) + \
        network


def _write(enc: str = "rocev2_ipv4", **fields: object) -> bytes:
    return build(enc, dict(fields), bytes(16), opcode="RC_RDMA_WRITE_MIDDLE")


def _retag(frame: bytes, tpids: tuple[int, ...]) -> bytes:
    return _tagged(tpids, int.from_bytes(frame[12:14], "big"), frame[14:])


def _poke(frame: bytes, at: int, value: int) -> bytes:
    out = bytearray(frame)
    out[at] = value
    return bytes(out)


# frames each twin once read apart (found by the test above): kept as named cases
@pytest.mark.parametrize(("frame", "ib"), [
    pytest.param(_retag(_write(), (0x88A8, 0x8100, 0x8100)), 1, id="three-vlan-tags"),
    pytest.param(_retag(_write(), (0x9100,)), 1, id="tpid-0x9100"),
    pytest.param(_poke(_write(), 14, 0x44), 0, id="ipv4-ihl-4"),
    pytest.param(_poke(_write(), 14 + 20 + 5, 0x99), 0, id="udp-length-lies-ipv4"),
    pytest.param(_poke(_write("rocev2_ipv6"), 14 + 40 + 5, 0x99), 0, id="udp-length-lies-ipv6"),
    pytest.param(_poke(_write("rocev2_ipv6"), 14, 0x40), 0, id="ipv6-version-4"),
    pytest.param(_poke(_write("rocev1"), 14, 0x40), 0, id="grh-ipver-4"),
    pytest.param(_poke(_write(), 14 + 20 + 8, 0x1F), 1, id="reserved-opcode"),
])
def test_classifier_twins_agree_where_they_once_did_not(frame: bytes, ib: int) -> None:
    c, python = _both(frame)
    assert c == python
    assert c["ib"] == ib


def _segment(draw: st.DrawFn) -> bytes:
    """An Ethernet frame of TCP or UDP over IPv4 or IPv6 behind 0-3 VLAN tags."""
    proto = draw(st.sampled_from((6, 17)))
    body = draw(st.binary(max_size=40))
    l4 = (struct.pack("!HHIIBBHHH", 1, 2, 3, 4, 0x50, 0x10, 512, 0, 0) if proto == 6
          else struct.pack("!HHHH", 1, 2, 8 + len(body), 0)) + body
    if draw(st.booleans()):
        net = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0,
                          bytes(4), bytes([10, 0, 0, 2])) + l4
        ethertype = 0x0800
    else:
        net = struct.pack("!IHBB16s16s", 0x60000000, len(l4), proto, 64, bytes(16),
                          bytes(15) + b"\x02") + l4
        ethertype = 0x86DD
    tpids = tuple(draw(st.lists(st.sampled_from((0x8100, 0x88A8, 0x9100)), max_size=3)))
    return _tagged(tpids, ethertype, net)


@st.composite
def _segments(draw: st.DrawFn) -> bytes:
    frame = bytearray(_segment(draw))
    for _ in range(draw(st.integers(0, 3))):  # a header byte or a length lies
        at = draw(st.integers(0, min(len(frame), 80) - 1))
        frame[at] = draw(st.integers(0, 255))
    return bytes(frame[:draw(st.integers(0, len(frame)))] if draw(st.booleans()) else frame)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_segments())
def test_checksum_completion_twins_agree(frame: bytes) -> None:
    twin = bytearray(frame)
    expected = forge.complete_checksum(twin)
    mine = np.frombuffer(bytearray(frame), np.uint8).copy()
    assert bool(_io.fast.complete_checksum(mine)) == expected
    assert bytes(mine) == bytes(twin)
