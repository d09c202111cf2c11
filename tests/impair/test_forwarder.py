"""``ibwire impair`` as a program and a forwarder of ordinary traffic: the refusals, a clean
stop on SIGTERM, and the TCP of two real sockets through it (checksums left to offload by
veth completed). Root, in namespaces the tests make (skipped else)."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibwire.pcap import read_capture
from tests.impair.lab import ADDRESSES, Lab, Running, drain, need_root
from tests.impair.test_faults import conversation


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    need_root()
    made = Lab()
    try:
        made.make()
        yield made
    finally:
        made.remove()


@pytest.mark.parametrize(("argv", "says"), [
    (["-i", "fa", "-i", "fa"], "-i fa given twice"),
    (["-i", "fa", "-i", "nosuch0"], "nosuch0: no such interface"),
    (["-i", "fa"], "give two interfaces"),
    (["-i", "fa", "-i", "fdown"], "fdown: interface is down"),
    (["-i", "fa", "-i", "fb", "--drop", "qp=zz"], "drop SPEC 'qp=zz'"),
    (["-i", "fa", "-i", "fb", "--rnr", "timer=40"], "RNR timer code is 5 bits"),
])
def test_refusals_are_one_line(lab: Lab, argv: list[str], says: str) -> None:
    lab.ip("f", "ip", "link", "add", "fdown", "type", "veth", "peer", "name", "fdown2")
    try:
        proc = lab.command("impair", *argv)
        out, err = proc.communicate(timeout=60)
    finally:
        lab.ip("f", "ip", "link", "del", "fdown")
    assert proc.returncode == 2
    assert err.count("\n") == 1 and says in err, err


def test_refuses_the_default_route_interface_unless_forced(lab: Lab) -> None:
    lab.ip("f", "ip", "addr", "add", "10.78.0.1/24", "dev", "fb")
    lab.ip("f", "ip", "route", "add", "default", "via", "10.78.0.2")
    try:
        proc = lab.command("impair", "-i", "fa", "-i", "fb", "--duration", "0.2",
                           "--no-progress")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and "fb carries this host's default route" in err
        proc = lab.command("impair", "-i", "fa", "-i", "fb", "--duration", "0.2",
                           "--no-progress", "--force")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        lab.ip("f", "ip", "route", "del", "default")
        lab.ip("f", "ip", "addr", "del", "10.78.0.1/24", "dev", "fb")


def test_sigterm_ends_it_with_capture_and_manifest_complete(lab: Lab, tmp_path: Path) -> None:
    capture, manifest = tmp_path / "c.pcap", tmp_path / "m.json"
    proc = lab.command("impair", "-i", "fa", "-i", "fb", "-w", str(capture), "--manifest",
                       str(manifest), "--drop", "qp=0,psn=2")
    time.sleep(2.5)  # the interpreter and numpy start
    a = lab.raw("a")
    frames = [f for side, f in conversation() if side == "a"]
    for f in frames:
        a.send(f)
        time.sleep(0.002)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    a.close()
    assert proc.returncode == 0, err
    records = list(read_capture(str(capture)))
    assert len(records) == len(frames)
    m = json.loads(manifest.read_text())
    assert m["records"] == len(frames) and [f["kind"] for f in m["faults"]] == ["drop"]
    assert f"{capture}: {len(frames)} records written" in out
    assert "1 faults applied" in err


def _in(lab: Lab, side: str, work: object) -> threading.Thread:
    def run() -> None:
        with lab.inside(side):
            work()  # type: ignore[operator]
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_tcp_through_it_with_checksums_left_to_offload(lab: Lab, tmp_path: Path) -> None:
    """veth leaves a local socket's TCP checksum to offload (CHECKSUM_PARTIAL): the
    forwarder reads TP_STATUS_CSUMNOTREADY and must fill it in, or B's stack drops every
    segment and the connection never opens."""
    echoed: list[bytes] = []
    ready = threading.Event()
    payload = bytes(range(256)) * 64

    def server() -> None:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((ADDRESSES["b"], 7777))
            s.listen()
            s.settimeout(10)
            ready.set()
            conn, _ = s.accept()
            with conn:
                got = b""
                while len(got) < len(payload):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                conn.sendall(got)

    def client() -> None:
        ready.wait(5)
        with socket.create_connection((ADDRESSES["b"], 7777), timeout=5) as c:
            c.sendall(payload)
            got = b""
            while len(got) < len(payload):
                chunk = c.recv(65536)
                if not chunk:
                    break
                got += chunk
            echoed.append(got)

    forwarder = lab.forwarder([], capture=str(tmp_path / "tcp.pcap"))
    with Running(forwarder) as running:
        threads = [_in(lab, "b", server), _in(lab, "a", client)]
        for t in threads:
            t.join(15)
    assert echoed == [payload]
    assert running.manifest["checksums_completed"] > 0


def test_count_stops_after_n_frames(lab: Lab, tmp_path: Path) -> None:
    capture = tmp_path / "c.pcap"
    proc = lab.command("impair", "-i", "fa", "-i", "fb", "-c", "5", "-w", str(capture),
                       "--no-progress")
    time.sleep(2.5)
    a = lab.raw("a")
    for _, f in conversation()[:10]:
        a.send(f)
        time.sleep(0.01)
    out, err = proc.communicate(timeout=30)
    a.close()
    assert proc.returncode == 0, err
    assert len(list(read_capture(str(capture)))) == 5


def test_ibwire_replay_through_it(lab: Lab, tmp_path: Path) -> None:
    """``ibwire gen`` writes a conversation, ``ibwire replay`` plays it on host A's veth (both
    sides' frames, from A), the forwarder drops one request; host B gets the rest in order."""
    import os
    import subprocess
    import sys

    from ibwire.dissect import parse
    from ibwire.gen import write_capture
    from tests.impair.lab import SRC
    from tests.impair.test_faults import RESPONDER_QPN, SCENARIO, START

    pcap = tmp_path / "conversation.pcap"
    write_capture(str(pcap), SCENARIO)
    b = lab.raw("b")
    forwarder = lab.forwarder([("drop", "qp=0,psn=6")], capture=str(tmp_path / "c.pcap"))
    with Running(forwarder) as running:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        done = subprocess.run(["ip", "netns", "exec", lab.ns["a"], sys.executable, "-m",
                               "ibwire.cli.main", "replay", "-i", "ha", "--pps", "500",
                               str(pcap)], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        time.sleep(0.3)
    got = [parse(f) for f in drain(b)]
    b.close()
    requests = [p.fields()["bth.psn"] for p in got if p.is_ib
                and p.fields()["bth.destqp"] == RESPONDER_QPN]
    assert requests == [START + k for k in range(16) if k != 6]
    [fault] = running.manifest["faults"]
    assert (fault["kind"], fault["psn"]) == ("drop", START + 6)


def test_frames_the_kernel_dropped_are_counted(lab: Lab) -> None:
    """A port not read while frames pour in: the kernel drops what its buffer cannot hold, and
    the count says so (the manifest's ``kernel_drops``), rather than the loss going unseen."""
    from ibwire.impair.ports import Port

    with lab.inside("f"):
        port = Port("fa", fast=lab.fast)
    a = lab.raw("a")
    frame = bytes.fromhex("020000000002" "020000000001" "88b5") + bytes(1000)
    try:
        for _ in range(20000):
            try:
                a.send(frame)
            except OSError:  # the sender's own queue full: try on
                time.sleep(0.0001)
        time.sleep(0.2)
        dropped = port.count_kernel_drops()
        assert dropped > 0
        assert port.count_kernel_drops() == dropped  # kept, though the kernel's count reset
    finally:
        a.close()
        port.close()


def test_live_fuzz_mutates_in_flight_through_the_forwarder(lab: Lab, tmp_path: Path) -> None:
    """``ibwire fuzz --target live:A,B`` (issue #34's in-flight mode) on impair's real
    Forwarder: every RoCE frame goes through the mutator; what host B receives is each frame
    as sent on, the mutated ones as the mutation log says they were sent."""
    from ibwire.livefuzz.hook import run_inflight

    out = tmp_path / "live"
    done: dict[str, object] = {}

    def run() -> None:
        with lab.inside("f"):
            done["summary"] = run_inflight("fa", "fb", out, rate=0.5, seed=3, duration=4)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.5)
    a, b = lab.raw("a"), lab.raw("b")
    sent = [f for side, f in conversation() if side == "a"]
    try:
        for frame in sent:
            a.send(frame)
            time.sleep(0.002)
        arrived = drain(b, 1.0)
    finally:
        thread.join(20)
        a.close()
        b.close()
    summary = done["summary"]
    assert isinstance(summary, dict)
    assert summary["frames"] == len(sent) and 0 < summary["mutated"] < len(sent)
    log = [json.loads(line) for line in (out / "mutations.jsonl").read_text().splitlines()]
    assert len(log) == summary["mutated"]
    changed = [f for f in arrived if f not in sent]
    mutated_sent = [bytes(r.frame) for r in read_capture(str(out / "mutations.pcap"))
                    if bytes(r.frame) not in sent]
    assert changed and set(changed) <= set(mutated_sent)
