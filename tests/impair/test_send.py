"""How a port sends (``ports.py``, ``ring.c``): past the qdisc layer where the interface has
none to skip, and through a send ring (``PACKET_TX_RING``) on the compiled fast path, every
frame arriving whole and in order (root; skipped else)."""

from __future__ import annotations

import socket
import struct

from ibwire.impair.ports import Port
from ibwire.impair.qdisc import root_qdisc
from tests.impair.lab import Lab, drain

SRC, DST = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def frames(n: int, size: int = 1000) -> list[bytes]:
    """``n`` frames to host B, each numbered, their lengths varying around ``size``."""
    return [DST + SRC + b"\x88\xb5" + struct.pack("!I", i) * ((size - 14 - i % 7) // 4)
            for i in range(n)]


def tap(lab: Lab, iface: str) -> socket.socket:
    """A packet socket on the forwarder's own interface, as ``tcpdump -i`` opens one."""
    with lab.inside("f"):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((iface, 3))
    s.settimeout(0.05)
    return s


def test_qdisc_bypassed_only_where_the_root_qdisc_is_noqueue(lab: Lab) -> None:
    """A veth (``noqueue``) is sent to past the qdisc layer: its frames reach the peer, but
    a packet tap on the veth itself no longer sees them (dev_queue_xmit_nit is skipped, as
    packet_mmap.rst warns); with a real qdisc (here a pfifo) the port keeps it."""
    frame = frames(1)[0]
    for qdisc in ("noqueue", "pfifo"):
        if qdisc != "noqueue":
            lab.ip("f", "tc", "qdisc", "add", "dev", "fb", "root", "pfifo")
        try:
            with lab.inside("f"):
                assert root_qdisc("fb") == qdisc
                port = Port("fb", fast=lab.fast)
            watch, b = tap(lab, "fb"), lab.raw("b")
            try:
                assert port.bypass == (qdisc == "noqueue")
                assert port.send([frame]) == 1
                assert drain(b) == [frame]
                assert len(drain(watch)) == (0 if port.bypass else 1)
            finally:
                port.close()
                watch.close()
                b.close()
        finally:
            if qdisc != "noqueue":
                lab.ip("f", "tc", "qdisc", "del", "dev", "fb", "root")
