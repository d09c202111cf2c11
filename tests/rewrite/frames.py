"""Reading a rewritten capture back: frames, and their ICRC verdicts by ibwire and scapy."""

from __future__ import annotations

from pathlib import Path

from scapy.contrib.roce import BTH
from scapy.layers.l2 import Ether
from scapy.packet import raw

from ibwire import crc
from ibwire.errors import IbwireError
from ibwire.pcap import read_capture


def frames(path: Path | str) -> list[tuple[str, bytes]]:
    return [(r.link, bytes(r.frame)) for r in read_capture(str(path)) if r.error is None]


def icrc_verdicts(path: Path | str) -> list[bool | None]:
    """Per frame: ICRC ok (True/False), or None where the frame has no ICRC."""
    out: list[bool | None] = []
    for link, frame in frames(path):
        try:
            out.append(crc.verify(frame, link).icrc_ok)
        except IbwireError:
            out.append(None)
    return out


def scapy_icrc_ok(frame: bytes) -> bool | None:
    """scapy's contrib roce recomputes the ICRC of a RoCEv2 frame; None where it has no BTH."""
    pkt = Ether(frame)
    if BTH not in pkt:
        return None
    pkt[BTH].icrc = None
    return raw(pkt) == frame
