"""The C pump (``pump.c``): frames no rule or state need stay in C, the frames that do reach
Python in their place, the capture and the manifest stay complete (root; skipped else).

Host A sends a stream of RoCEv2 RDMA WRITE MIDDLE frames (PSNs counting up) as fast as
send(2) goes; host B reads them. The forwarder's Python side is watched by wrapping its
``_batch`` (every frame Python handles passes there) and ``_frame`` (every frame a rule may
hit).
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ibwire import build
from ibwire.dissect import parse
from ibwire.impair import _io, coarse, forge
from ibwire.impair.plan import Plan
from ibwire.impair.state import LiveState
from ibwire.pcap import read_capture
from tests.impair.lab import Lab, Running, drain

FRAMES = 1200
START_PSN = 0x100
QPN = 0x11
OTHER_QPN = 0x22


def has_pump() -> bool:
    return _io.fast is not None and hasattr(_io.fast, "Pump")


def stream(n: int = FRAMES, qpn: int = QPN, every: int = 0) -> list[bytes]:
    """``n`` WRITE MIDDLE frames to ``qpn``, PSNs from START_PSN; with ``every``, each
    ``every``-th goes to OTHER_QPN instead (a second connection, its own PSNs)."""
    out = []
    psn = {qpn: START_PSN, OTHER_QPN: 0x9000}
    for i in range(n):
        q = OTHER_QPN if every and i % every == every - 1 else qpn
        out.append(build("rocev2_ipv4", {"bth.psn": psn[q], "bth.destqp": q},
                         struct.pack("!I", i) + bytes(60), opcode="RC_RDMA_WRITE_MIDDLE"))
        psn[q] += 1
    return out


class Watch:
    """Counts what the forwarder's Python side handled; ``slow`` s spent on each frame a
    rule may hit (Python busy while later frames keep arriving)."""

    def __init__(self, forwarder: Any, slow: float = 0.0) -> None:
        self.batched = 0
        self.touched: list[int] = []
        batch, frame = forwarder._batch, forwarder._frame

        def counted_batch(d: int, b: Any, *args: Any, **kw: Any) -> None:
            self.batched += len(b)
            batch(d, b, *args, **kw)

        def slow_frame(d: int, i: int, f: bytearray, *args: Any) -> None:
            self.touched.append(parse(bytes(f)).fields()["bth.psn"])
            time.sleep(slow)
            frame(d, i, f, *args)

        forwarder._batch, forwarder._frame = counted_batch, slow_frame


def through(lab: Lab, tmp: Path, plan: list[tuple[str, str]], frames: list[bytes],
            slow: float = 0.0) -> tuple[list[bytes], dict[str, Any], list[Any], Watch]:
    """``frames`` sent A->B back to back through a forwarder with ``plan``: what B got, the
    manifest, the capture's records and the Watch."""
    a, b = lab.raw("a"), lab.raw("b")
    b.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE: B keeps up
    capture = tmp / "crossed.pcap"
    forwarder = lab.forwarder(plan, capture=str(capture), manifest=str(tmp / "m.json"))
    watch = Watch(forwarder, slow)
    with Running(forwarder) as running:
        for f in frames:
            a.send(f)
        got = drain(b, 1.0)
    a.close()
    b.close()
    return got, running.manifest, list(read_capture(str(capture))), watch


def psn_of(frame: bytes) -> int:
    return parse(frame).fields()["bth.psn"]


def test_frames_no_rule_selects_never_reach_python(lab: Lab, tmp_path: Path) -> None:
    """With a rule that selects none of them, the frames of known connections are forwarded,
    recorded and learnt in C: Python sees the first of each connection (and the rest of its
    batch), not the stream."""
    if not lab.fast:
        pytest.skip("the Python twin handles every frame")
    frames = stream(every=10)
    got, manifest, records, watch = through(lab, tmp_path, [("drop", "qp=0,psn=1000000")],
                                            frames)
    assert got == frames
    assert watch.touched == []
    assert watch.batched < 2 * 256, "the stream went through Python"
    assert manifest["arrived"] == {"a2b": FRAMES, "b2a": 0}
    assert manifest["forwarded"] == {"a2b": FRAMES, "b2a": 0}
    assert manifest["records"] == FRAMES and [bytes(r.frame) for r in records] == frames
    # the state learnt every frame, those forwarded in C included
    qps = {q["responder"]["qpn"]: q for q in manifest["qps"]}
    assert qps[QPN]["requests"] == FRAMES - FRAMES // 10
    assert qps[QPN]["next_psn"] == START_PSN + FRAMES - FRAMES // 10
    assert qps[OTHER_QPN]["requests"] == FRAMES // 10
    assert manifest["unapplied"][0]["reason"] == "no frame matched"


def test_drop_hits_exactly_its_frame_among_frames_forwarded_in_c(lab: Lab,
                                                                 tmp_path: Path) -> None:
    frames = stream()
    got, manifest, records, watch = through(lab, tmp_path, [("drop", "qp=0,psn=700")],
                                            frames)
    assert got == frames[:700] + frames[701:]
    assert watch.touched == [START_PSN + 700]
    [fault] = manifest["faults"]
    assert fault["kind"] == "drop" and fault["psn"] == START_PSN + 700
    assert bytes(records[fault["record"] - 1].frame) == frames[700]
    assert manifest["arrived"]["a2b"] == FRAMES and manifest["forwarded"]["a2b"] == FRAMES - 1
    assert manifest["dropped"] == 1
    # -w: every frame that crossed, the dropped one as it arrived, stamped on arrival
    assert [bytes(r.frame) for r in records] == frames
    stamps = np.array([r.timestamp_ns for r in records])
    assert np.all(np.diff(stamps) >= 0) and stamps[0] > 0


def test_order_kept_while_python_holds_a_handed_back_frame(lab: Lab, tmp_path: Path) -> None:
    """Python spends 50 ms on the frame a rule selects while the rest of the stream keeps
    arriving: none of the later frames overtakes it."""
    frames = stream()
    got, manifest, records, watch = through(
        lab, tmp_path, [("corrupt", "qp=0,psn=300"), ("ecn", "qp=0,psn=301")], frames,
        slow=0.05)
    assert watch.touched == [START_PSN + 300, START_PSN + 301]
    assert [psn_of(f) for f in got] == [psn_of(f) for f in frames]
    changed = [i for i, (g, f) in enumerate(zip(got, frames, strict=True)) if g != f]
    assert changed == [300, 301]
    assert [bytes(r.frame) for r in records] == got
    assert sorted(f["kind"] for f in manifest["faults"]) == ["corrupt", "ecn"]


def test_reordered_frame_follows_the_next_one_inside_a_batch(lab: Lab, tmp_path: Path) -> None:
    """A frame held to follow the next one goes right after it, also when the next one
    arrives in a batch with many more (back-to-back stream)."""
    frames = stream()
    got, manifest, _, _ = through(lab, tmp_path, [("reorder", "qp=0,psn=500")], frames)
    assert [psn_of(f) for f in got] == [psn_of(f) for f in
                                        frames[:500] + [frames[501], frames[500]] + frames[502:]]
    [fault] = manifest["faults"]
    assert fault["kind"] == "reorder" and fault["psn"] == START_PSN + 500


def test_stop_ends_a_busy_pump_quickly(lab: Lab, tmp_path: Path) -> None:
    """stop() (what the CLI's SIGINT/SIGTERM handler calls) ends run() at once, also while
    the pump is waiting on idle ports."""
    forwarder = lab.forwarder([])
    running = Running(forwarder)
    with running:
        time.sleep(0.3)
        began = time.monotonic()
        forwarder.stop()
        running.thread.join(2)
        took = time.monotonic() - began
    assert not running.thread.is_alive() and took < 0.5


@pytest.mark.parametrize("build_frame", [
    lambda: build("rocev2_ipv4", {"bth.psn": 1}, b"x" * 8, opcode="RC_SEND_ONLY"),
    lambda: bytes(12) + b"\x08\x00" + bytes.fromhex("4500002d000100004006") + bytes(2)
    + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + bytes.fromhex("04d2005000000001000000005018")
    + bytes.fromhex("0400beef0000") + b"hello",
    lambda: bytes(12) + b"\x81\x00\x00\x05\x86\xdd" + bytes.fromhex("600000000010")
    + bytes([17, 64]) + bytes(range(32)) + bytes.fromhex("1234abcd00101111") + b"datadata",
])
def test_c_checksum_completion_agrees_with_its_twin(build_frame: Any) -> None:
    if not has_pump():
        pytest.skip("the compiled pump is not built")
    frame = bytearray(build_frame())
    twin = bytearray(frame)
    expected = forge.complete_checksum(twin)
    mine = np.frombuffer(bytearray(frame), np.uint8).copy()
    assert _io.fast.complete_checksum(mine) == expected
    assert bytes(mine) == bytes(twin)


def test_coarse_rows_name_the_connection_and_psn() -> None:
    state = LiveState()
    frames = stream(4)
    from ibwire.impair.classify import classify

    lengths = np.array([len(f) for f in frames], np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    data = b"".join(frames)
    state.feed(0, classify(data, offsets, lengths, False), frames, np.arange(4))
    plan = Plan.of([("drop", "qp=0,psn=5"), ("drop", "qp=3,psn=1"), ("lose_ack", "dir=b2a"),
                    ("corrupt", "psn-abs=7,opcode=RC_SEND_ONLY"), ("drop", "psn=2")])
    rows = coarse.rule_rows(plan.rules, state, [], hook=False).tolist()
    assert rows == [[0, coarse.REQUESTS, -1, QPN, START_PSN + 5],
                    [1, coarse.ANSWER_CLASS, -1, -1, -1],
                    [-1, coarse.OPCODE, 0x04, -1, 7],
                    [0, coarse.REQUESTS, -1, QPN, START_PSN + 2]]
    requests, answers = coarse.known_keys(state, {1 << 24 | 5})
    assert requests.tolist() == [QPN] and answers.tolist() == [1 << 24 | 5]
    assert coarse.rule_rows([], state, [0], hook=True).tolist() == [
        [-1, coarse.ANY_IB, -1, -1, -1], [0, coarse.REQUESTS, -1, QPN, -1]]


def test_ring_reads_frames_longer_than_its_slots_whole_and_in_order(lab: Lab) -> None:
    """A receive ring of 1 KiB slots: the frames that do not fit come whole through the
    socket (TP_STATUS_COPY), in their place among the others."""
    if not lab.fast:
        pytest.skip("the receive ring is the compiled path's")
    with lab.inside("f"):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.setsockopt(263, 23, 1)
        ring = _io.fast.Ring(s.fileno(), 1024, 64)
        s.bind(("fa", 3))
    a = lab.raw("a")
    frames = [build("rocev2_ipv4", {"bth.psn": i}, bytes(n), opcode="RC_SEND_ONLY")
              for i, n in enumerate((64, 1400, 200, 1440, 1300, 8))]
    for f in frames:
        a.send(f)
    time.sleep(0.1)
    slot = 65536
    buffer = np.zeros(8 * slot, np.uint8)
    offsets, lengths, stamps = (np.zeros(8, np.int64) for _ in range(3))
    csum = np.zeros(8, np.uint8)
    n = _io.fast.receive_ring(ring, buffer, slot, 8, offsets, lengths, stamps, csum)
    got = [bytes(buffer[o:o + k]) for o, k in zip(offsets[:n], lengths[:n], strict=True)]
    ring.close()
    s.close()
    a.close()
    assert got == frames and ring.cut == 0
    assert np.all(stamps[:n] > 0)
