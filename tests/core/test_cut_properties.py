"""Properties of packets a snap length cut (``ibwire.strategies.cut_packets``): the
dissector reads every header the bytes kept hold, as in the whole packet, never calls the
packet broken, and both scanner twins say the same of it."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings

from ibwire.crc import LINK_CODES
from ibwire.dissect import parse
from ibwire.errors import IbwireError, TruncatedError
from ibwire.scan import _python
from ibwire.strategies import CutPacket, cut_packets, packets

try:
    from ibwire.scan import _engine
except ImportError:  # the twin alone (IBWIRE_NO_EXTENSIONS=1 builds): compared with itself
    _engine = _python

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cut_packets())
@example(CutPacket(b"", "ethernet", 0, 0, None))  # type: ignore[arg-type]
def test_a_cut_packet_keeps_every_header_it_has(cut: CutPacket) -> None:
    if cut.original is None:  # the explicit empty frame: an ibwire error, nothing more
        try:
            parse(b"", "ethernet", wire=60)
        except IbwireError:
            return
        raise AssertionError("an empty frame parsed")
    whole = parse(cut.original.frame, cut.link)
    try:
        packet = parse(cut.frame, cut.link, wire=cut.wire_length)
    except TruncatedError:  # cut before the frame says it is InfiniBand: as any cut frame
        assert cut.snaplen < _identified(whole), (cut.snaplen, _identified(whole))
        return
    assert packet.cut and packet.wire_length == cut.wire_length
    kept = [h for h in whole.headers if h.offset + h.length <= cut.snaplen]
    assert [(h.name, h.offset) for h in packet.headers[:len(kept)]] == \
        [(h.name, h.offset) for h in kept]
    for mine, theirs in zip(packet.headers, kept, strict=False):
        if not mine.full_keys:
            assert dict(mine.values) == dict(theirs.values), mine.name
    if packet.is_ib and packet.error is None:
        assert packet.payload_length == whole.payload_length
        assert packet.icrc is None or len(cut.frame) >= packet.icrc_offset + 4
    if packet.error is not None:  # the header the capture cut is the error
        assert isinstance(packet.error, TruncatedError)
        assert "cut by the capture" in str(packet.error)
    verdict = packet.verify()
    assert verdict.icrc_ok is None and verdict.vcrc_ok is None


@SETTINGS
@given(cut_packets(packets(max_payload=600)))
def test_the_scanner_twins_agree_on_cut_packets(cut: CutPacket) -> None:
    code = LINK_CODES[cut.link]
    args = (cut.frame + b"\xa5" * 8, [0], [len(cut.frame)], [code], None, [cut.wire_length])
    a, b = _python.scan_frames(*args), _engine.scan_frames(*args)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    whole = _engine.scan_frames(cut.original.frame, [0], [len(cut.original.frame)], [code])
    if a["error"][0] == 0:  # cut after its headers: the columns of the whole packet
        for name in ("encapsulation", "payload.length", "offset.payload", "offset.icrc",
                     "bth.opcode", "bth.psn", "bth.destqp"):
            assert a[name][0] == whole[name][0], name
        assert a["cut"][0] != 0 and a["icrc_ok"][0] == -1


def _identified(packet: object) -> int:
    """How many bytes tell that a frame is InfiniBand: to the end of its UDP header
    (RoCEv2), of the Ethernet and VLAN headers before the GRH (RoCEv1), of the LRH."""
    by_name = {h.name: h for h in packet.headers}  # type: ignore[attr-defined]
    if "udp" in by_name:
        return by_name["udp"].offset + by_name["udp"].length
    if "lrh" in by_name:
        return by_name["lrh"].length
    return by_name["grh"].offset
