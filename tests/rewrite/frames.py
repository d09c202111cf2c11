"""Reading a rewritten capture back: frames, and their ICRC verdicts by ibwire and scapy."""

from __future__ import annotations

from pathlib import Path

from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
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
    """scapy's contrib roce recomputes the ICRC of a RoCEv2 frame; None where it has no BTH.

    The UDP payload is read as contrib's BTH explicitly: with ibwire.scapy imported too (as
    other tests in the same process do), port 4791 dissects as ibwire's layer."""
    pkt = Ether(frame)
    if UDP not in pkt or pkt[UDP].dport != 4791:
        return None
    payload = bytes(pkt[UDP].payload)
    pkt[UDP].remove_payload()
    pkt = pkt / BTH(payload)
    pkt[BTH].icrc = None
    return raw(pkt) == frame
