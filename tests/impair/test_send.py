"""A port's send ring (``PACKET_TX_RING``, ``ports.py``, ``ring.c``) on the compiled fast
path: every frame arriving whole and in order, also when the ring is full (root; skipped
else)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import numpy as np
import pytest

from ibwire.impair import _io
from ibwire.impair.ports import Batch, Port
from tests.impair.lab import Lab, Running, drain
from tests.impair.test_pump import psn_of, stream

TX_FRAMES = 1024  # the send ring's slots (_fast.TX_FRAMES)
SRC, DST = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def frames(n: int, size: int = 1000) -> list[bytes]:
    """``n`` frames to host B, each numbered, their lengths varying around ``size``."""
    return [DST + SRC + b"\x88\xb5" + struct.pack("!I", i) * ((size - 14 - i % 7) // 4)
            for i in range(n)]


def ring_port(lab: Lab) -> Port:
    if not lab.fast:
        pytest.skip("the send ring is the compiled path's")
    with lab.inside("f"):
        assert Port("fb").tx is None  # the ring is asked for
        port = Port("fb", tx_ring=True)
    assert port.tx is not None
    return port


def test_send_ring_frames_arrive_byte_identical_and_in_order(lab: Lab) -> None:
    """Batches through the send ring, many times round it: host B reads, after the last, every
    frame as it was, in order; the ones no slot takes (a VLAN-tagged frame 4 bytes over the
    MTU, a frame too long for the device) go by sendmmsg in their place or are refused and
    counted."""
    port = ring_port(lab)
    b = lab.raw("b")
    b.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: B reads at the end
    sent = frames(3 * TX_FRAMES, 300)
    sent[1000] = DST + SRC + b"\x81\x00\x00\x05\x88\xb5" + bytes(1500 - 2)
    long = DST + SRC + b"\x88\xb5" + bytes(1600)
    want = list(sent)
    want[1000] = DST + SRC + b"\x88\xb5" + bytes(1500 - 2)  # B's veth takes the tag off
    sent.insert(2000, long)
    try:
        went = sum(port.send_batch(Batch.of([bytearray(f) for f in sent[at:at + 200]],
                                            np.zeros(200, np.int64), np.zeros(200, bool)))
                   for at in range(0, len(sent), 200))
        got = drain(b, 0.5)
        assert got == want
        assert went == len(want)
        assert port.tx.flushes >= len(sent) // 200 and port.ring_full == 0
    finally:
        port.close()
        b.close()


def test_a_full_send_ring_loses_and_reorders_nothing(lab: Lab) -> None:
    """A token bucket on the port holds the frames sent (their skbs, so their slots): a ring
    of 8 slots fills, the rest of the batch goes by sendmmsg behind what the ring queued, and
    host B gets every frame, in order; the frames no slot took are counted."""
    if not lab.fast:
        pytest.skip("the send ring is the compiled path's")
    lab.ip("f", "tc", "qdisc", "add", "dev", "fb", "root", "tbf", "rate", "8mbit", "burst",
           "2000", "limit", "1000000")
    try:
        with lab.inside("f"):
            port = Port("fb")
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            port.tx = _io.fast.TxRing(s.fileno(), 1514, 2048, 8)
            s.bind(("fb", 0))
        b = lab.raw("b")
        sent = frames(40)
        try:
            went = port.send_batch(Batch.of([bytearray(f) for f in sent],
                                            np.zeros(40, np.int64), np.zeros(40, bool)))
            got = drain(b, 0.5)
            assert went == 40 and got == sent
            assert 0 < port.ring_full < 40
        finally:
            port.close()
            s.close()
            b.close()
    finally:
        lab.ip("f", "tc", "qdisc", "del", "dev", "fb", "root")


def test_the_pump_sends_through_the_ring_and_keeps_the_order(lab: Lab, tmp_path: Path) -> None:
    """The C pump's batches go through B's port's send ring, Python's frames (a reordered
    one, a corrupted one) in their places among them."""
    if not lab.fast:
        pytest.skip("the send ring is the compiled path's")
    frames = stream()
    a, b = lab.raw("a"), lab.raw("b")
    b.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)
    forwarder = lab.forwarder([("reorder", "qp=0,psn=500"), ("corrupt", "qp=0,psn=900")],
                              tx_ring=True)
    try:
        with Running(forwarder):
            for f in frames:
                a.send(f)
            got = drain(b, 1.0)
    finally:
        a.close()
        b.close()
    tx = forwarder.ports[1].tx
    assert tx is not None and tx.queued >= len(frames) - forwarder.handed > 0
    order = frames[:500] + [frames[501], frames[500]] + frames[502:]
    assert [psn_of(f) for f in got] == [psn_of(f) for f in order]
    assert [i for i, (g, f) in enumerate(zip(got, order, strict=True)) if g != f] == [900]
