"""Capturing on the bridge inside the namespace, and the headers-only copy.

The bridge sees every frame as it enters (before the forward chain's drops); a tap's
outgoing direction (``tcpdump -Q out``) sees what was delivered to its guest, in the order
the guest received it.

tcpdump (else dumpcap) on the bridge, full frames (``-s 0``) with a large kernel buffer; the
number of frames the kernel dropped is read from its closing report, so a test can tell a
lossless capture from one that is not. The headers-only copy is the same capture cut at a
snap length, as a capture taken with ``-s N`` would be (each record keeps its original
length).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from ibwire.pcap.snap import snap_capture

from .netns import BRIDGE, Namespace

SNAPLEN = 128


class CaptureError(RuntimeError):
    """The capture tool is missing or did not start."""


class Capture:
    def __init__(self, namespace: Namespace, path: Path, interface: str = BRIDGE,
                 outgoing_only: bool = False) -> None:
        self.namespace = namespace
        self.path = path
        self.interface = interface
        self.outgoing_only = outgoing_only
        self.process: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 15.0) -> None:
        self.begin()
        self.wait_ready(timeout)

    def begin(self) -> None:
        if shutil.which("tcpdump"):
            # immediate mode: frames still in an unfinished ring block when the capture is
            # interrupted would be lost (libpcap's TPACKET_V3 hands blocks over on a timer)
            args = ["tcpdump", "-n", "--immediate-mode", "-i", self.interface, "-s", "0",
                    "-B", "65536", "-w", str(self.path)]
            if self.outgoing_only:
                args[1:1] = ["-Q", "out"]
        elif self.outgoing_only:
            raise CaptureError("capturing one direction needs tcpdump (-Q out)")
        elif shutil.which("dumpcap"):
            args = ["dumpcap", "-n", "-i", self.interface, "-s", "0", "-B", "64", "-P",
                    "-w", str(self.path)]
        else:
            raise CaptureError("neither tcpdump nor dumpcap is installed")
        self.process = subprocess.Popen(self.namespace.command(args), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def wait_ready(self, timeout: float = 15.0) -> None:
        if not self._ready.wait(timeout) or self.process is None or \
                self.process.poll() is not None:
            self.stop()
            raise CaptureError(f"capture on {self.interface} did not start: "
                               f"{' '.join(self.lines)[-300:]}")

    def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.strip())
            if "listening on" in line or "Capturing on" in line:
                self._ready.set()
        self._ready.set()

    def stop(self, settle: float = 0.3) -> dict[str, int]:
        """Stop; the tool's own figures (``captured``, ``kernel_dropped``)."""
        time.sleep(settle)  # the last frames on their way through the bridge
        self.interrupt()
        return self.finish()

    def interrupt(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)

    def finish(self) -> dict[str, int]:
        if self.process is None:
            return {}
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self._reader is not None:
            self._reader.join(5)
        self.process = None
        text = "\n".join(self.lines)
        figures = {}
        for key, pattern in (("captured", r"(\d+) packets? captured"),
                             ("received", r"(\d+) packets? received by filter"),
                             ("kernel_dropped", r"(\d+) packets? dropped by kernel"),
                             ("kernel_dropped", r"Packets received/dropped on interface "
                                                r"'[^']*': \d+/(\d+)")):
            match = re.search(pattern, text)
            if match:
                figures[key] = int(match.group(1))
        return figures


def start_all(captures: list[Capture]) -> None:
    """Start several captures at once (each tool takes a while to open its interface)."""
    try:
        for one in captures:
            one.begin()
        for one in captures:
            one.wait_ready()
    except BaseException:
        stop_all(captures, 0.0)
        raise


def stop_all(captures: list[Capture], settle: float = 0.3) -> list[dict[str, int]]:
    time.sleep(settle)
    for one in captures:
        one.interrupt()
    return [one.finish() for one in captures]


def cut(source: Path, target: Path, snaplen: int = SNAPLEN) -> int:
    """Write ``source`` cut at ``snaplen`` bytes per frame, as ``-s snaplen`` would have
    captured it (``ibwire.pcap.snap``); the number of frames cut."""
    return snap_capture(source, target, snaplen)
