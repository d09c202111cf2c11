"""A tiny BTH parser written for the fuzz tests, with one planted bug per ``--bug``.

It finds the BTH (Ethernet with VLAN tags -> IPv4/IPv6 -> UDP 4791, RoCEv1's GRH, native IB's
LRH and GRH), and reports ``bth.opcode``, ``bth.destqp`` and ``bth.psn``; anything it is unsure
of gives ``{}`` (a claim of nothing). Without a bug it agrees with ibwire on every valid frame.

Bugs: ``crash`` (SIGSEGV on a PSN at either end of its range), ``qp16`` (DestQP cut to 16 bits for the RC and UC
RDMA WRITEs), ``hang`` (loops forever when the transport packet, BTH to
the end, is a multiple of 16 bytes long), ``ibgrh`` (native IB only: forgets the GRH when LNH says there is one),
``exit`` (exit status 3 on an RC or RD packet with an
AETH: READ responses and ACKs, saying so on stderr), ``raise`` (on PSN 0: ValueError for RC opcodes, IndexError for the others). It imports nothing of ibwire, so that it
starts fast (``python tests/fuzz/tinyparser.py --bug B FILE``, or the functions below as
``python:tests.fuzz.tinyparser:FUNCTION`` targets).
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
from collections.abc import Iterator

LINKTYPE_INFINIBAND = 247


def frames(path: str) -> Iterator[tuple[int, bytes]]:
    """(linktype, frame) of every record of a classic little-endian pcap."""
    with open(path, "rb") as f:
        data = f.read()
    linktype = struct.unpack_from("<I", data, 20)[0]
    at = 24
    while at + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, at + 8)[0]
        yield linktype, data[at + 16:at + 16 + caplen]
        at += 16 + caplen


def bth_offset(frame: bytes, linktype: int, bug: str = "") -> int | None:
    if linktype == LINKTYPE_INFINIBAND:
        if len(frame) < 8:
            return None
        lnh = frame[1] & 3
        if lnh == 2 or (lnh == 3 and bug == "ibgrh"):
            return 8
        return 48 if lnh == 3 else None
    at, etype = 12, None
    while at + 2 <= len(frame):
        etype = struct.unpack_from(">H", frame, at)[0]
        if etype not in (0x8100, 0x88A8):
            break
        at += 4
    at += 2
    if etype == 0x8915:
        return at + 40
    if etype == 0x0800 and at + 20 <= len(frame) and frame[at + 9] == 17:
        udp = at + (frame[at] & 0xF) * 4
    elif etype == 0x86DD and at + 40 <= len(frame) and frame[at + 6] == 17:
        udp = at + 40
    else:
        return None
    if udp + 8 > len(frame) or struct.unpack_from(">H", frame, udp + 2)[0] != 4791:
        return None
    return udp + 8


def dissect(frame: bytes, linktype: int = 1, bug: str = "") -> dict[str, int]:
    at = bth_offset(frame, linktype, bug)
    if bug == "hang" and at is not None and (len(frame) - at) % 16 == 0:
        while True:
            pass
    if at is None or at + 16 > len(frame):
        return {}
    bth = frame[at:at + 12]
    out = {"bth.opcode": bth[0], "bth.destqp": int.from_bytes(bth[5:8], "big"),
           "bth.psn": int.from_bytes(bth[9:12], "big")}
    if bug == "crash" and out["bth.psn"] in (0, 0xFFFFFF):
        os.kill(os.getpid(), signal.SIGSEGV)
    if bug == "qp16" and out["bth.opcode"] < 0x40 and 6 <= out["bth.opcode"] & 0x1F <= 0x0B:
        out["bth.destqp"] &= 0xFFFF
    if bug == "exit" and out["bth.opcode"] < 0x60 and 0x0D <= out["bth.opcode"] & 0x1F <= 0x12:
        print(f"tinyparser: planted exit on opcode {out['bth.opcode']:#04x}", file=sys.stderr)
        sys.exit(3)
    if bug == "raise" and out["bth.psn"] == 0:
        if out["bth.opcode"] < 0x20:
            raise ValueError("planted: PSN 0 rejected")
        raise IndexError("planted: PSN 0 out of range")
    return out


def crash_on_max_psn(frame: bytes) -> dict[str, int]:
    """A ``python:`` target: the crash bug, on Ethernet frames."""
    return dissect(frame, 1, "crash")


def raise_on_psn_zero(frame: bytes) -> dict[str, int]:
    """A ``python:`` target: the raise bug, on Ethernet frames."""
    return dissect(frame, 1, "raise")


def correct(frame: bytes) -> dict[str, int]:
    return dissect(frame, 1)


def main(argv: list[str]) -> int:
    bug = argv[argv.index("--bug") + 1] if "--bug" in argv else ""
    for linktype, frame in frames(argv[-1]):
        print(json.dumps(dissect(frame, linktype, bug)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
