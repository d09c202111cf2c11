"""``ibwire show -i`` and ``ibwire check -i``: live capture on a veth pair between two network
namespaces that each test creates and deletes (root and iproute2's ``ip`` needed; CI runs as
root). Frames are sent only on that veth pair, from inside its namespace; frames built with
``ibwire.build`` (some with a flipped byte, so their ICRC is wrong) go through dumpcap (or
tcpdump) into ibwire, and what ibwire says is compared with the frames sent and with what it
says of the same frames in a pcap file.

The tests at the end need neither root nor a namespace: usage errors, and a stand-in capture
program that proves the child never outlives ibwire, however ibwire ends.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ibwire
from ibwire.builder import build
from ibwire.cli.main import main
from ibwire.pcap import PcapWriter, read_capture

SRC = Path(ibwire.__file__).resolve().parents[1]
IP = shutil.which("ip") or (shutil.which("ip", path="/usr/sbin:/sbin"))
DUMPCAP = shutil.which("dumpcap")
TCPDUMP = shutil.which("tcpdump")
HANG = 60  # seconds after which a run that should have ended is a hang (not a speed limit)

needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or IP is None,
    reason="needs root and iproute2's ip, to create a network namespace and a veth pair")
needs_dumpcap = pytest.mark.skipif(DUMPCAP is None,
                                   reason="dumpcap (Wireshark, tshark) is not installed")

SENDER = """
import socket, sys
from ibwire.pcap import read_capture
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
sock.bind((sys.argv[2], 0))
for record in read_capture(sys.argv[1]):
    sock.send(bytes(record.frame))
"""


def environment(path: str | None = None) -> dict[str, str]:
    """This process's environment, with the ibwire under test first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    if path is not None:
        env["PATH"] = path
    return env


@dataclass
class Veth:
    """A veth pair between two namespaces: frames sent on ``sender`` in ``sender_ns`` arrive
    on ``capture`` in ``capture_ns``."""
    sender_ns: str
    capture_ns: str
    sender: str
    capture: str


def ip(*argv: str) -> None:
    assert IP is not None
    subprocess.run([IP, *argv], check=True, capture_output=True, timeout=HANG)


@pytest.fixture
def veth() -> Iterator[Veth]:
    tag = secrets.token_hex(3)
    pair = Veth(f"ibw-{tag}-s", f"ibw-{tag}-c", f"ibws{tag}", f"ibwc{tag}")
    made: list[str] = []
    try:
        for ns in (pair.sender_ns, pair.capture_ns):
            ip("netns", "add", ns)
            made.append(ns)
        # made inside the namespaces: the pair never exists in this one
        ip("-n", pair.sender_ns, "link", "add", pair.sender, "type", "veth", "peer", "name",
           pair.capture, "netns", pair.capture_ns)
        for ns, name in ((pair.sender_ns, pair.sender), (pair.capture_ns, pair.capture)):
            ip("-n", ns, "link", "set", name, "addrgenmode", "none")  # no IPv6 chatter
            ip("-n", ns, "link", "set", name, "up")
        yield pair
    finally:
        for ns in made:
            subprocess.run([IP, "netns", "delete", ns], capture_output=True, timeout=HANG)  # type: ignore[list-item]


def send(pair: Veth, capture: Path) -> None:
    """Send the frames of ``capture`` on the sender end of the pair, from its namespace."""
    assert IP is not None
    subprocess.run([IP, "netns", "exec", pair.sender_ns, sys.executable, "-c", SENDER,
                    str(capture), pair.sender], env=environment(), check=True, timeout=HANG,
                   capture_output=True)


class Running:
    """``ibwire ARGV`` running in the capture namespace, its output read as it comes."""

    def __init__(self, pair: Veth, *argv: str, path: str | None = None,
                 stdout: int = subprocess.PIPE, stderr: int = subprocess.PIPE,
                 tmpdir: Path | None = None) -> None:
        assert IP is not None
        env = environment(path)
        if tmpdir is not None:
            env["TMPDIR"] = str(tmpdir)
        self.proc = subprocess.Popen(
            [IP, "netns", "exec", pair.capture_ns, sys.executable, "-m", "ibwire.cli.main",
             *argv], stdout=stdout, stderr=stderr, env=env)
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.out_lines: list[str] = []
        self.err_lines: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.out),
                                               (self.proc.stderr, self.err))
                         if stream is not None]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: queue.Queue[str]) -> None:
        for line in iter(stream.readline, b""):
            lines.put(line.decode())

    def wait_line(self, which: str, text: str) -> str:
        """The first line of stdout or stderr (``which``) holding ``text``."""
        lines, kept = (self.out, self.out_lines) if which == "out" else (self.err,
                                                                         self.err_lines)
        deadline = time.monotonic() + HANG
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no line with {text!r} on std{which}; so far {kept}")
            kept.append(line)
            if text in line:
                return line

    def capturing(self) -> None:
        self.wait_line("err", "Capturing on")

    def child(self) -> int:
        """The process id of the capture program ibwire runs."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        pids = [int(pid) for pid in children.split()]
        assert len(pids) == 1, pids
        return pids[0]

    def finish(self) -> tuple[int, str, str]:
        status = self.proc.wait(HANG)
        for reader in self._readers:
            reader.join(HANG)
        for lines, kept in ((self.out, self.out_lines), (self.err, self.err_lines)):
            while not lines.empty():
                kept.append(lines.get())
        return status, "".join(self.out_lines), "".join(self.err_lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    """Runs started by a test, killed if the test fails before they end."""
    started: list[Running] = []
    yield started
    for run in started:
        run.kill()


def gone(pid: int, wait: float = HANG) -> bool:
    """Whether process ``pid`` has exited (a zombie has), waiting up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def roce_frames() -> list[bytes]:
    """A mix of RoCE frames, each encapsulation the default filter names."""
    return [
        build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": 1}, b"a" * 32,
              opcode="RC_SEND_ONLY"),
        build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": 2, "reth.va": 0x1000,
                              "reth.r_key": 0x77, "reth.dmalen": 64}, b"b" * 64,
              opcode="RC_RDMA_WRITE_ONLY"),
        build("rocev2_ipv6", {"bth.destqp": 0x34, "bth.psn": 3, "deth.srcqp": 5,
                              "deth.q_key": 0x11}, b"c" * 24, opcode="UD_SEND_ONLY"),
        build("rocev1", {"bth.destqp": 0x12, "bth.psn": 4, "aeth.syndrome": 0x1f,
                         "aeth.msn": 3}, opcode="RC_ACKNOWLEDGE"),
        build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": 5, "immdt": 0xdead}, b"d" * 8,
              opcode="RC_SEND_ONLY_WITH_IMMEDIATE"),
        build("rocev2_ipv4", {"bth.destqp": 0x56, "bth.psn": 6}, b"e" * 40,
              opcode="RC_SEND_ONLY"),
        build("rocev1", {"bth.destqp": 0x56, "bth.psn": 7}, b"f" * 16, opcode="RC_SEND_ONLY"),
        build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": 8}, b"g" * 4,
              opcode="RC_SEND_ONLY"),
    ]


def corrupt(frames: list[bytes], bad: dict[int, int]) -> list[bytes]:
    """The frames with byte ``bad[i]`` of frame ``i`` flipped (so its ICRC is wrong)."""
    out = [bytearray(f) for f in frames]
    for i, at in bad.items():
        out[i][at] ^= 0x5A
    return [bytes(f) for f in out]


def not_roce(frame: bytes) -> bytes:
    """A RoCEv2/IPv4 frame sent to UDP port 53 instead: no default filter lets it in."""
    other = bytearray(frame)
    other[36:38] = (53).to_bytes(2, "big")
    return bytes(other)


def write_pcap(path: Path, frames: list[bytes]) -> Path:
    with PcapWriter(path, 1) as writer:  # LINKTYPE_ETHERNET
        for i, frame in enumerate(frames):
            writer.write(frame, i * 1_000_000)
    return path


#: Frames 3 and 6 (records 3 and 6) fail: one with a flipped ICRC byte, one with a flipped
#: payload byte.
BAD = {2: -1, 5: 60}


def file_output(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


@needs_netns
@needs_dumpcap
def test_check_i_reports_exactly_the_frames_with_bad_icrcs(veth, running, tmp_path, capsys):
    frames = corrupt(roce_frames(), BAD)
    sent = write_pcap(tmp_path / "sent.pcap", [*frames[:4], not_roce(frames[0]), *frames[4:]])
    run = Running(veth, "check", "-i", veth.capture, "-c", str(len(frames)))
    running.append(run)
    run.capturing()
    send(veth, sent)
    status, out, err = run.finish()
    assert status == 1, err
    failing = [line for line in out.splitlines() if ": record " in line]
    assert [line.split(": ")[1] for line in failing] == ["record 3", "record 6"]
    assert all("ICRC mismatch" in line for line in failing)
    assert out.splitlines()[-1] == (f"{veth.capture}: FAILED: 8 records, 8 InfiniBand/RoCE "
                                    f"packets, 0 other; 2 failed (ICRC 2, VCRC 0, errors 0)")
    # the same words as check of the same frames in a file, but for the name
    _, expected = file_output(capsys, "check", str(write_pcap(tmp_path / "roce.pcap", frames)))
    assert out == expected.replace(str(tmp_path / "roce.pcap"), veth.capture)
    assert "Traceback" not in err and "\r" not in err  # no status line off a terminal


def _without_time(line: str) -> list[str]:
    number, _when, rest = line.split(maxsplit=2)
    return [number, rest]


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("how", [(), ("--json",), ("-V",)], ids=["lines", "json", "tree"])
def test_show_i_prints_what_show_prints_of_the_same_frames(veth, running, tmp_path, capsys,
                                                            how):
    frames = corrupt(roce_frames(), BAD)
    run = Running(veth, "show", *how, "-i", veth.capture, "-c", str(len(frames)))
    running.append(run)
    run.capturing()
    send(veth, write_pcap(tmp_path / "sent.pcap", frames))
    status, out, err = run.finish()
    assert status == 0, err
    _, expected = file_output(capsys, "show", *how, str(tmp_path / "sent.pcap"))
    if how == ("--json",):
        def fields(text: str) -> list[dict[str, object]]:
            found = [json.loads(line) for line in text.splitlines()]
            for item in found:
                item.pop("timestamp_ns")
            return found
        assert fields(out) == fields(expected)
    elif how == ("-V",):  # the times (of the capture, of the file) aside
        def trees(text: str) -> list[list[object]]:
            return [[_without_time(tree.split("\n", 1)[0]), *tree.split("\n")[1:]]
                    for tree in text.split("\n\n") if tree]
        assert trees(out) == trees(expected)
    else:
        assert len(out.splitlines()) == len(frames)
        assert [_without_time(line) for line in out.splitlines()] == \
            [_without_time(line) for line in expected.splitlines()]


@needs_netns
@needs_dumpcap
def test_packets_are_printed_as_they_arrive(veth, running, tmp_path):
    """Each line comes out while the capture still runs: the first packet's line is read
    before the second packet is even sent."""
    frames = roce_frames()
    run = Running(veth, "show", "-i", veth.capture)
    running.append(run)
    run.capturing()
    for i, frame in enumerate(frames[:3]):
        send(veth, write_pcap(tmp_path / f"{i}.pcap", [frame]))
        assert run.wait_line("out", f"PSN={i + 1} ").split()[0] == str(i + 1)
    run.proc.send_signal(signal.SIGINT)
    status, out, err = run.finish()
    assert status == 0 and len(out.splitlines()) == 3, err


#: Frames sent in a burst while ibwire's output is not read: far more than the kernel's
#: capture buffer and the pipes on the way hold, so a capture that is read only as fast as
#: ibwire writes loses most of them.
BURST = 50_000


def numbered(frame: bytes, count: int) -> list[bytes]:
    """``count`` copies of a RoCEv2/IPv4 frame, the BTH PSN of copy i set to i (the ICRC is
    left as it was: wrong, but the frames stay apart)."""
    psn = 14 + 20 + 8 + 9  # Ethernet, IPv4, UDP, then the PSN's place in the BTH
    return [frame[:psn] + i.to_bytes(3, "big") + frame[psn + 3:] for i in range(count)]


@needs_netns
@needs_dumpcap
def test_show_i_loses_no_packet_when_its_output_is_not_read(veth, running, tmp_path):
    """Nobody reads what show writes until every frame has been sent: show stops reading on
    a full pipe, but the capture goes on into the spool, and all the frames come out, in
    order, once its output is read."""
    frames = numbered(roce_frames()[0], BURST)
    sent = write_pcap(tmp_path / "burst.pcap", frames)
    spools = tmp_path / "spools"
    spools.mkdir()
    read_end, write_end = os.pipe()
    try:
        run = Running(veth, "show", "-i", veth.capture, "-c", str(BURST), "--duration",
                      str(HANG), stdout=write_end,  # a capture that lost packets ends too
                      tmpdir=spools)
        running.append(run)
        os.close(write_end)
        write_end = -1
        run.capturing()
        send(veth, sent)  # while show's output waits in a full pipe
        with os.fdopen(read_end, "rb") as reader:
            read_end = -1
            out = reader.read().decode()
        status, _, err = run.finish()
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == BURST
    assert [int(line.split("PSN=")[1].split()[0]) for line in lines] == list(range(BURST))
    assert "dropped" not in err
    assert list(spools.iterdir()) == []  # the spool is gone


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("ending", ["count", "SIGINT"])
def test_w_keeps_the_capture_in_a_pcap_file(veth, running, tmp_path, capsys, ending):
    frames = corrupt(roce_frames(), BAD)
    kept = tmp_path / "kept.pcap"
    spools = tmp_path / "spools"
    spools.mkdir()
    argv = ("-c", str(len(frames))) if ending == "count" else ()
    run = Running(veth, "check", "-i", veth.capture, "-w", str(kept), *argv, tmpdir=spools)
    running.append(run)
    run.capturing()
    send(veth, write_pcap(tmp_path / "sent.pcap", frames))
    if ending == "SIGINT":
        run.wait_line("out", f"record {max(BAD) + 1}: ")
        run.proc.send_signal(signal.SIGINT)
    status, out, err = run.finish()
    assert status == 1, err
    assert [bytes(r.frame) for r in read_capture(kept)] == frames
    assert list(spools.iterdir()) == []  # the spool is kept beside FILE, then renamed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    # what check said live, check says of the file kept
    _, again = file_output(capsys, "check", str(kept))
    assert out == again.replace(str(kept), veth.capture)


@needs_netns
@needs_dumpcap
def test_a_capture_filter_replaces_the_roce_default(veth, running, tmp_path, capsys):
    frames = roce_frames()
    other = not_roce(frames[0])
    run = Running(veth, "show", "-i", veth.capture, "-f", "udp port 53", "-c", "1")
    running.append(run)
    assert "filter 'udp port 53'" in run.wait_line("err", "Capturing on")
    send(veth, write_pcap(tmp_path / "sent.pcap", [*frames[:3], other]))
    status, out, err = run.finish()
    assert status == 0, err
    _, expected = file_output(capsys, "show", str(write_pcap(tmp_path / "other.pcap", [other])))
    assert [_without_time(line) for line in out.splitlines()] == \
        [_without_time(line) for line in expected.splitlines()]
    assert "RoCE" not in out


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("how", [(), ("--json",), ("--where", "bth.destqp == 0x12")],
                         ids=["tables", "json", "where"])
def test_stats_i_counts_what_stats_counts_of_the_same_frames(veth, running, tmp_path, capsys,
                                                             how):
    frames = corrupt(roce_frames(), BAD)
    sent = write_pcap(tmp_path / "sent.pcap", [*frames[:4], not_roce(frames[0]), *frames[4:]])
    run = Running(veth, "stats", *how, "-i", veth.capture, "-c", str(len(frames)))
    running.append(run)
    run.capturing()
    send(veth, sent)
    status, out, err = run.finish()
    assert status == 0, err
    _, expected = file_output(capsys, "stats", *how, str(write_pcap(tmp_path / "roce.pcap",
                                                                      frames)))
    assert _untimed(out) == _untimed(expected)
    if how == ("--json",):
        found = json.loads(out)
        assert found["totals"]["records"] == len(frames)
        assert found["totals"]["icrc_bad"] == len(BAD)
        assert [line.split(":")[0] for line in found["failures"]] == ["record 3", "record 6"]


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_stats_with_its_tables(veth, running, tmp_path, capsys, how):
    frames = corrupt(roce_frames(), BAD)
    kept = tmp_path / "kept" / "capture.pcap"   # -w: the spool keeps its name while it grows
    kept.parent.mkdir()
    run = Running(veth, "stats", "--json", "-i", veth.capture, "-w", str(kept))
    running.append(run)
    run.capturing()
    child = run.child()
    send(veth, write_pcap(tmp_path / "sent.pcap", frames))
    whole = 24 + sum(16 + len(frame) for frame in frames)  # pcap header, records
    deadline = time.monotonic() + HANG  # the spool holds every frame before the signal
    while sum(path.stat().st_size for path in kept.parent.glob(".ibwire-live-*/*")) < whole:
        assert time.monotonic() < deadline, "the spool never held every frame sent"
        time.sleep(0.05)
    run.proc.send_signal(how)
    status, out, err = run.finish()
    assert status == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    _, expected = file_output(capsys, "stats", "--json", str(write_pcap(tmp_path / "roce.pcap",
                                                                          frames)))
    assert _untimed(out) == _untimed(expected)
    assert gone(child)
    from ibwire.pcap.atomic import umask

    assert kept.stat().st_mode & 0o7777 == 0o666 & ~umask()  # not the spool's 0600


def _untimed(stats: str) -> object:
    """``stats``'s tables without the capture's times and name (a live capture's differ
    from those of a file of the same frames)."""
    if stats.startswith("{"):
        found = json.loads(stats)
        del found["time"], found["file"]
        return found
    lines = stats.splitlines()
    start = lines.index("time:")
    end = next((k for k in range(start + 1, len(lines)) if not lines[k].startswith(" ")),
               len(lines))
    return lines[:start] + lines[end:]


@needs_netns
@needs_dumpcap
def test_duration_stops_a_capture_that_sees_nothing(veth, running):
    run = Running(veth, "check", "-i", veth.capture, "--duration", "0.5")
    running.append(run)
    status, out, err = run.finish()
    assert status == 0, err
    assert out == (f"{veth.capture}: OK: 0 records, 0 InfiniBand/RoCE packets, 0 other; "
                   f"0 failed (ICRC 0, VCRC 0, errors 0)\n")


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_check_with_its_summary_and_status(veth, running, tmp_path, how):
    frames = corrupt(roce_frames(), {len(roce_frames()) - 1: -2})  # the last one is bad
    run = Running(veth, "check", "-i", veth.capture)
    running.append(run)
    run.capturing()
    child = run.child()
    send(veth, write_pcap(tmp_path / "sent.pcap", frames))
    run.wait_line("out", f"record {len(frames)}: ICRC mismatch")  # everything was read
    run.proc.send_signal(how)
    status, out, err = run.finish()
    assert status == 1, err
    assert out.splitlines()[-1].startswith(f"{veth.capture}: FAILED: 8 records, 8 InfiniBand")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert gone(child)


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("ending", ["count", "duration", "kill", "closed stdout"])
def test_the_capture_program_never_outlives_ibwire(veth, running, tmp_path, ending):
    argv = {"count": ("-c", "1"), "duration": ("--duration", "1")}.get(ending, ())
    read_end, write_end = os.pipe()
    try:
        run = Running(veth, "show", "-i", veth.capture, *argv, stdout=write_end)
        running.append(run)
        os.close(write_end)
        write_end = -1
        run.capturing()
        child = run.child()
        assert not gone(child, 0)
        if ending == "kill":
            run.proc.kill()
        elif ending == "count":
            send(veth, write_pcap(tmp_path / "one.pcap", roce_frames()[:1]))
        elif ending == "closed stdout":
            send(veth, write_pcap(tmp_path / "one.pcap", roce_frames()[:1]))
            assert b"PSN=1 " in os.read(read_end, 4096)
            os.close(read_end)  # the next line cannot be written
            read_end = -1
            send(veth, write_pcap(tmp_path / "more.pcap", roce_frames()[1:]))
        status = run.proc.wait(HANG)
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    assert status == (-signal.SIGKILL if ending == "kill" else 0)
    assert gone(child)


@needs_netns
@pytest.mark.skipif(TCPDUMP is None, reason="tcpdump is not installed")
def test_tcpdump_captures_when_dumpcap_is_missing(veth, running, tmp_path):
    assert TCPDUMP is not None
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "tcpdump").symlink_to(TCPDUMP)
    python_bin = Path(sys.executable).parent
    if (python_bin / "dumpcap").exists():
        pytest.skip("dumpcap is beside python: it cannot be hidden")
    frames = corrupt(roce_frames(), BAD)
    run = Running(veth, "check", "-i", veth.capture, "-c", str(len(frames)),
                  path=f"{python_bin}{os.pathsep}{tools}")
    running.append(run)
    assert "with tcpdump" in run.wait_line("err", "Capturing on")
    send(veth, write_pcap(tmp_path / "sent.pcap", frames))
    status, out, err = run.finish()
    assert status == 1, err
    assert [line.split(": ")[1] for line in out.splitlines() if ": record " in line] == \
        ["record 3", "record 6"]


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("problem", ["interface", "filter"])
def test_a_capture_that_cannot_start_is_one_line_and_status_two(veth, running, problem):
    argv = ("-i", "ibw-nosuch") if problem == "interface" else \
        ("-i", veth.capture, "-f", "udp port nosuchport")
    run = Running(veth, "check", *argv)
    running.append(run)
    status, out, err = run.finish()
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("ibwire check: ")
    assert ("ibw-nosuch" if problem == "interface" else "nosuchport") in err
    assert "dumpcap: " in err


@needs_netns
@needs_dumpcap
@pytest.mark.parametrize("verb", ["check", "stats"])
def test_running_count_of_failures_on_a_terminal(veth, running, tmp_path, verb):
    import pty

    leader, follower = pty.openpty()
    frames = corrupt(roce_frames(), BAD)
    try:
        run = Running(veth, verb, "-i", veth.capture, "-c", str(len(frames)),
                      stderr=follower)
        running.append(run)
        os.close(follower)
        follower = -1
        seen = b""
        deadline = time.monotonic() + HANG
        while b"Capturing on" not in seen and time.monotonic() < deadline:
            seen += os.read(leader, 4096)
        send(veth, write_pcap(tmp_path / "sent.pcap", frames))
        status, out, _ = run.finish()
        while True:
            try:
                more = os.read(leader, 4096)
            except OSError:  # the terminal's other end has closed
                break
            if not more:
                break
            seen += more
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert status == (1 if verb == "check" else 0)
    assert "record 3" in out and "record 6" in out
    text = seen.decode()
    draws = re.findall(r"\r(\S+): (\d+) packets, (\d+) failed \(ICRC (\d+), VCRC 0, "
                       r"errors 0\)\x1b\[K", text)
    assert draws, text
    for name, packets, failed, icrc in draws:  # each count true when it was drawn
        bad_so_far = sum(1 for i in BAD if i < int(packets))
        assert (name, failed, icrc) == (veth.capture, str(bad_so_far), str(bad_so_far))
    assert {failed for _, _, failed, _ in draws} >= {"2"}  # the change to 2 was drawn
    assert text.endswith("\r\x1b[K")  # taken away at the end


# Neither root nor a namespace needed below.

def test_i_and_a_file_together_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["check", "-i", "eth0", "some.pcap"])
    assert ended.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["show", "-f", "udp", "x.pcap"],
                                  ["check", "--duration", "1", "x.pcap"],
                                  ["check"], ["show", "-i", "eth0", "-c", "0"],
                                  ["check", "-i", "eth0", "--duration", "-1"],
                                  ["check", "-w", "kept.pcap", "x.pcap"]])
def test_live_options_are_checked_before_anything_runs(capsys, argv):
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ibwire ") and "error: " in err


def test_no_capture_program_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["show", "-i", "eth0"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and "dumpcap or tcpdump" in err


STAND_IN = """#!{python}
# A stand-in dumpcap: says it captures, writes a pcap header to its -w file, then waits
# (until killed, or forever with {ignore}).
import signal, struct, sys, time
if {ignore}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
spool = sys.argv[sys.argv.index("-w") + 1]
with open(spool, "wb") as out:
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
print("File: " + spool, file=sys.stderr, flush=True)
while True:
    time.sleep(1)
"""


@pytest.mark.parametrize("ending", ["SIGINT", "SIGINT, deaf to SIGTERM", "SIGKILL",
                                    "SIGKILL, deaf to SIGTERM"])
def test_a_stand_in_capture_program_dies_with_ibwire(tmp_path, ending):
    """With a program standing in for dumpcap (no root needed): ibwire stops it on Ctrl-C
    (and kills it after a grace period when it does not stop), and Linux kills it when
    ibwire is killed outright."""
    tools = tmp_path / "bin"
    tools.mkdir()
    stand_in = tools / "dumpcap"
    stand_in.write_text(STAND_IN.format(python=sys.executable, ignore="deaf" in ending))
    stand_in.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "ibwire.cli.main", "check", "-i", "x"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=environment(f"{tools}{os.pathsep}{os.environ['PATH']}"))
    child = None
    try:
        assert proc.stderr is not None
        assert "Capturing on 'x' with dumpcap" in proc.stderr.readline().decode()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1
        child = int(children[0])
        proc.send_signal(signal.SIGINT if ending.startswith("SIGINT") else signal.SIGKILL)
        out, err = proc.communicate(timeout=HANG)
        if ending.startswith("SIGINT"):
            assert proc.returncode == 0, err
            assert out.decode().endswith("x: OK: 0 records, 0 InfiniBand/RoCE packets, 0 other; "
                                         "0 failed (ICRC 0, VCRC 0, errors 0)\n")
        assert gone(child)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if child is not None and not gone(child, 0):  # the test failed: clean up after it
            os.kill(child, signal.SIGKILL)

