"""Benchmark ``ibwire impair`` against the Linux bridge (and tc netem where the kernel has
it), side by side on veth pairs in network namespaces this script makes and removes.

Host A (veth ``ha``) sends, host B (``hb``) receives; between them, in a third namespace,
``fa`` and ``fb`` are joined by: ``ibwire impair`` with no fault, ``ibwire impair`` with a drop
rule (``--drop qp=0,psn=1000000``: every frame is checked against it, none is dropped), a
Linux bridge, and a bridge with a netem qdisc of no delay (only where ``sch_netem`` loads).

- frames/s: host A sends N frames of 1 KiB (a RoCEv2 RDMA WRITE MIDDLE, one connection,
  PSNs counting up) as fast as sendmmsg(2) goes; frames/s is what reached host B over the
  time between its first and last arrival (loss is counted, not hidden).
- per CPU-s: the frames the forwarder handled divided by the CPU time its forwarding
  thread used (``cpu_seconds`` of its manifest: ``time.thread_time()``, the thread's
  sum_exec_runtime): its rate on one core of its own, whatever share of the machine it got.
  On veth pairs that time is not the forwarder's work alone: a frame sent on ``fb`` is
  received by ``hb`` in the sending thread's context (veth_xmit queues it with netif_rx, and
  the softirq runs when the send re-enables bottom halves), so host B's receive (its packet
  sockets, its IP stack's look at the frame) is charged to the forwarder, while the
  forwarder's own receive (host A's frames into its ring) is charged to host A's sender.
  Whether softirq time is in a thread's runtime at all depends on the kernel: without
  CONFIG_IRQ_TIME_ACCOUNTING it is; with it (and irq time accounting left on) it is taken
  out, and the same forwarder shows a higher figure. The run says which applies. The time
  is the whole run's, the probes' included: each probe wakes the forwarder for one frame,
  which costs more than a frame of a batch;
- blast/CPU-s: the same, over the blast alone: the frames that reached the forwarder during
  it (all it handled, less the probes host B got) divided by the forwarding thread's CPU
  time over it (the first field of /proc/PID/task/PID/schedstat, the same sum_exec_runtime,
  read before and after): what one busy core carries, the probes' wake-ups left out;
- added latency: probes sent one at a time (1 kHz), each carrying its send time; B's kernel
  stamps arrival (SO_TIMESTAMPNS); the median of a direct veth pair is subtracted.

Run as root from the repository: ``python tools/bench_impair.py [--frames N] [--probes N]
[--tx-ring]`` (``--tx-ring``: the forwarder sends through its send rings).
One run; the machine is shared, so the figures are what this run measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.impair.lab import Lab

from ibwire import build
from ibwire.impair import _io
from ibwire.replay.mmsg import FrameBlock

FRAME_BYTES = 1024
SLOT = 2048


def frames(n: int) -> list[bytes]:
    header = build("rocev2_ipv4", {"bth.psn": 0, "bth.destqp": 0x11}, b"",
                   opcode="RC_RDMA_WRITE_MIDDLE")
    payload = bytes((FRAME_BYTES - len(header)) & ~3)  # whole words: no pad bytes
    first = build("rocev2_ipv4", {"bth.psn": 0, "bth.destqp": 0x11}, payload,
                  opcode="RC_RDMA_WRITE_MIDDLE")
    assert FRAME_BYTES - 4 < len(first) <= FRAME_BYTES
    out = []
    for psn in range(n):
        f = bytearray(first)
        f[42 + 9:42 + 12] = (psn & 0xFFFFFF).to_bytes(3, "big")  # ICRC left stale: no check
        out.append(bytes(f))
    return out


class Receiver:
    """Counts frames arriving on host B's veth (recvmmsg batches), with kernel stamps."""

    def __init__(self, lab: Lab) -> None:
        with lab.inside("b"):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            self.sock.setsockopt(263, 23, 1)
            self.sock.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
            self.sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
            self.sock.bind(("hb", 3))
        self.count = 0
        self.first = self.last = 0
        self.payload_stamps: list[tuple[int, int]] = []
        self.stop = False
        self.probe = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        fast = _io.fast
        most = 256
        buf = np.empty(most * SLOT, np.uint8)
        offs, lens = np.empty(most, np.int64), np.empty(most, np.int64)
        stamps, csum = np.empty(most, np.int64), np.empty(most, np.uint8)
        fd = self.sock.fileno()
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not self.stop:
            if not poller.poll(50):
                continue
            n = fast.receive(fd, buf, SLOT, most, offs, lens, stamps, csum)
            if not n:
                continue
            frames_ok = lens[:n] >= 64
            if self.probe:
                for i in np.flatnonzero(frames_ok).tolist():
                    o = int(offs[i])
                    sent = struct.unpack_from("<q", buf, o + 60)[0]
                    self.payload_stamps.append((sent, int(stamps[i])))
            if not self.first:
                self.first = int(stamps[0])
            self.last = int(stamps[n - 1])
            self.count += int(frames_ok.sum())

    def reset(self) -> None:
        self.count, self.first, self.last = 0, 0, 0
        self.payload_stamps = []

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def sender(lab: Lab) -> socket.socket:
    with lab.inside("a"):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        s.setsockopt(socket.SOL_SOCKET, 32, 16 << 20)  # SO_SNDBUFFORCE
        s.bind(("ha", 0))
    return s


def blast(lab: Lab, rx: Receiver, n: int) -> tuple[float, int]:
    """(frames/s at B, frames lost) of ``n`` frames sent back to back."""
    block = FrameBlock.from_frames(frames(n))
    s = sender(lab)
    rx.reset()
    rx.probe = False
    sent = 0
    for start in range(0, n, 256):
        count = min(256, n - start)
        sent += block.send(s.fileno(), start, count)[0]
    time.sleep(1.0)
    s.close()
    span = (rx.last - rx.first) / 1e9
    return (rx.count / span if span > 0 else 0.0), sent - rx.count


def probes(lab: Lab, rx: Receiver, n: int) -> np.ndarray:
    """One-way latencies (ns) of ``n`` probes sent 1 ms apart."""
    s = sender(lab)
    template = bytearray(frames(1)[0])
    rx.reset()
    rx.probe = True
    for _ in range(n):
        struct.pack_into("<q", template, 60, time.time_ns())
        s.send(template)
        time.sleep(0.001)
    time.sleep(0.3)
    rx.probe = False
    s.close()
    return np.array([arrived - sent for sent, arrived in rx.payload_stamps], np.int64)


def impair(lab: Lab, manifest: Path, *faults: str) -> subprocess.Popen[str]:
    proc = lab.command("impair", "-i", "fa", "-i", "fb", "--no-progress", "--manifest",
                       str(manifest), *faults)
    time.sleep(3.0)  # interpreter, numpy, the scanner
    return proc


def stop(proc: subprocess.Popen[str], manifest: Path) -> tuple[str, dict]:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return (err.strip().splitlines()[0] if err.strip() else ""), json.loads(
        manifest.read_text())


def bridge(lab: Lab, up: bool) -> None:
    if up:
        lab.ip("f", "ip", "link", "add", "br0", "type", "bridge")
        for port in ("fa", "fb"):
            lab.ip("f", "ip", "link", "set", port, "master", "br0")
        lab.ip("f", "ip", "link", "set", "br0", "up")
    else:
        lab.ip("f", "ip", "link", "del", "br0")


def netem(lab: Lab) -> bool:
    try:
        lab.ip("f", "tc", "qdisc", "add", "dev", "fb", "root", "netem", "delay", "0ms")
        return True
    except RuntimeError:
        return False


def thread_cpu_ns(pid: int) -> int | None:
    """The CPU time (ns) of process ``pid``'s main thread, the forwarding one: its
    sum_exec_runtime (/proc/PID/task/PID/schedstat, CONFIG_SCHED_INFO); None without."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def softirq_accounting() -> str:
    """Whether this kernel charges softirq time to the thread it interrupts (see per CPU-s),
    from its build configuration (/proc/config.gz or /boot/config-RELEASE)."""
    import gzip

    text = ""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        try:
            text = Path(f"/boot/config-{os.uname().release}").read_text()
        except OSError:
            return "per CPU-s: kernel configuration not found, softirq accounting unknown"
    if "CONFIG_IRQ_TIME_ACCOUNTING=y" in text:
        return ("per CPU-s: CONFIG_IRQ_TIME_ACCOUNTING=y, softirq time run in the forwarder's "
                "thread (host B's veth receive) is not in its CPU time (unless irq time "
                "accounting is off at run time)")
    return ("per CPU-s: CONFIG_IRQ_TIME_ACCOUNTING is not set, softirq time run in the "
            "forwarder's thread (host B's veth receive) is in its CPU time")


def unable(name: str) -> str | None:
    """Why the bench ``name`` cannot run here (root, the compiled fast path), or None."""
    if os.geteuid() != 0:
        return f"{name}: needs root (network namespaces)"
    if _io.fast is None:
        return f"{name}: the compiled fast path is not built"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--probes", type=int, default=2000)
    parser.add_argument("--tx-ring", action="store_true",
                        help="run ibwire impair with --tx-ring (its send rings)")
    args = parser.parse_args()
    why = unable("bench_impair")
    if why:
        print(why, file=sys.stderr)
        return 2
    lab = Lab()
    lab.make()
    rows = []
    try:
        rx = Receiver(lab)
        # the direct path: A and B's veths joined by a bridge of nothing but a veth pair is
        # not possible across namespaces, so the baseline is the bridge's own latency floor
        # measured with no forwarder: fa and fb bridged (kernel path, no user space)
        bridge(lab, True)
        base = probes(lab, rx, args.probes)
        rate, lost = blast(lab, rx, args.frames)
        rows.append(("linux bridge", rate, lost, base, None, None))
        if netem(lab):
            lat = probes(lab, rx, args.probes)
            rate, lost = blast(lab, rx, args.frames)
            rows.append(("bridge + netem delay 0", rate, lost, lat, None, None))
            lab.ip("f", "tc", "qdisc", "del", "dev", "fb", "root")
            netem_note = ""
        else:
            netem_note = "tc netem: not measured, this kernel has no sch_netem"
        bridge(lab, False)
        for name, faults in (("ibwire impair, no fault", ()),
                             ("ibwire impair, --drop qp=0,psn=1000000",
                              ("--drop", "qp=0,psn=1000000")),
                             ("ibwire impair, no fault, -w capture", ("-w", "CAPTURE"))):
            where = Path(tempfile.mkdtemp(prefix="bench-impair-"))
            manifest = where / "m.json"
            faults = tuple(str(where / "c.pcap") if f == "CAPTURE" else f for f in faults)
            proc = impair(lab, manifest, *faults, *(("--tx-ring",) if args.tx_ring else ()))
            lat = probes(lab, rx, args.probes)
            before = thread_cpu_ns(proc.pid)  # ip netns exec execs: the pid is Python's
            rate, lost = blast(lab, rx, args.frames)
            after = thread_cpu_ns(proc.pid)
            summary, m = stop(proc, manifest)
            shutil.rmtree(where, ignore_errors=True)
            arrived = m["arrived"]["a2b"] + m["arrived"]["b2a"]
            per_cpu = arrived / m["cpu_seconds"] if m["cpu_seconds"] else 0.0
            blast_cpu = ((arrived - len(lat)) / ((after - before) / 1e9)
                         if before is not None and after is not None and after > before
                         else None)
            rows.append((name, rate, lost, lat, per_cpu, blast_cpu))
            print(f"# {name}: {summary}; {arrived / max(1, m['batches']):.1f} frames per "
                  f"batch; send ring full {m.get('send_ring_full', 0)}", file=sys.stderr)
        rx.close()
    finally:
        lab.remove()
    floor = float(np.median(base))
    print(f"{args.frames} frames of {FRAME_BYTES} bytes back to back; {args.probes} probes "
          f"at 1 kHz; fast path {_io.implementation}; {os.cpu_count()} CPUs shared")
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'path':42} {'frames/s':>10} {'lost':>7} {'per CPU-s':>10} {'blast/CPU-s':>11} "
          f"{'lat med us':>11} {'lat p99 us':>11} {'added med':>10} {'added p99':>10}")
    for name, rate, lost, lat, per_cpu, blast_cpu in rows:
        med, p99 = (float(np.median(lat)), float(np.percentile(lat, 99))) if len(lat) else (0, 0)
        cpu = f"{per_cpu:10.0f}" if per_cpu is not None else f"{'-':>10}"
        busy = f"{blast_cpu:11.0f}" if blast_cpu is not None else f"{'-':>11}"
        print(f"{name:42} {rate:10.0f} {lost:7d} {cpu} {busy} {med / 1e3:11.1f} "
              f"{p99 / 1e3:11.1f} {(med - floor) / 1e3:10.1f} {(p99 - floor) / 1e3:10.1f}")
    print("frames/s: reaching host B (the sender, receiver and forwarder share the machine's "
          "CPUs); per CPU-s: frames the forwarder handled per second of its own CPU time, "
          "over the whole run (probes included); blast/CPU-s: the same over the blast alone "
          "(what one busy core would carry); added = latency minus the Linux bridge's median")
    print(softirq_accounting())
    if netem_note:
        print(netem_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
