"""The roundtrip() helper: parse, rebuild, feed with trailing bytes and cut short."""

from __future__ import annotations

import pytest

import ibwire
from ibwire import Packet, TruncatedError


def roundtrip(frame: bytes, link: str, *, prefixes: bool = True) -> Packet:
    """Assert what must hold for any valid frame, and return its Packet.

    * parse, then build from the parsed values, gives the same bytes;
    * the frame with trailing bytes (Ethernet padding, FCS) parses to the same values, the extra
      bytes landing in ``trailer``;
    * every strict prefix raises TruncatedError (h11's byte-at-a-time feed, for a frame parser).
    """
    packet = ibwire.parse(frame, link)
    assert packet.frame == frame
    if packet.encapsulation != "other" and packet.encapsulation != "ib_raw":
        rebuilt = ibwire.build(packet.encapsulation, packet.fields(), packet.payload,
                               pad=packet.pad, link=link, trailer=packet.trailer)
        assert rebuilt == frame
    padded = ibwire.parse(frame + b"\x00\xde\xad\xbe\xef", link)
    if packet.encapsulation != "other":
        assert padded.fields() == packet.fields()
        assert padded.payload == packet.payload
        assert padded.trailer == packet.trailer + b"\x00\xde\xad\xbe\xef"
    if prefixes and packet.encapsulation != "other":
        for cut in range(len(frame) - len(packet.trailer)):
            with pytest.raises(TruncatedError):
                ibwire.parse(frame[:cut], link)
    return packet
