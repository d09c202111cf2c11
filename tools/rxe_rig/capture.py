"""Capturing on the bridge inside the namespace, and the headers-only copy.

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
import struct
import subprocess
import threading
import time
from pathlib import Path

from .netns import BRIDGE, Namespace

SNAPLEN = 128


class CaptureError(RuntimeError):
    """The capture tool is missing or did not start."""


class Capture:
    def __init__(self, namespace: Namespace, path: Path, interface: str = BRIDGE) -> None:
        self.namespace = namespace
        self.path = path
        self.interface = interface
        self.process: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 15.0) -> None:
        if shutil.which("tcpdump"):
            args = ["tcpdump", "-n", "-i", self.interface, "-s", "0", "-B", "65536",
                    "-w", str(self.path)]
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
        if not self._ready.wait(timeout):
            self.stop()
            raise CaptureError(f"{args[0]} did not start: {' '.join(self.lines)[-300:]}")

    def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.strip())
            if "listening on" in line or "Capturing on" in line:
                self._ready.set()
        self._ready.set()

    def stop(self) -> dict[str, int]:
        """Stop; the tool's own figures (``captured``, ``kernel_dropped``)."""
        if self.process is None:
            return {}
        time.sleep(0.3)  # the last frames on their way through the bridge
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
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
                             ("kernel_dropped", r"(\d+) packets? dropped by kernel"),
                             ("kernel_dropped", r"Packets received/dropped on interface "
                                                r"'[^']*': \d+/(\d+)")):
            match = re.search(pattern, text)
            if match:
                figures[key] = int(match.group(1))
        return figures


def cut(source: Path, target: Path, snaplen: int = SNAPLEN) -> int:
    """Write ``source`` (a classic pcap) cut at ``snaplen`` bytes per frame, as ``-s snaplen``
    would have captured it; the number of frames cut."""
    data = source.read_bytes()
    magic = data[:4]
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",
             b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if order is None:
        raise CaptureError(f"{source}: not a classic pcap file")
    header = bytearray(data[:24])
    struct.pack_into(order + "I", header, 16, snaplen)
    out = [bytes(header)]
    offset, cuts = 24, 0
    record = struct.Struct(order + "IIII")
    while offset + 16 <= len(data):
        sec, frac, incl, orig = record.unpack_from(data, offset)
        body = data[offset + 16:offset + 16 + incl]
        if incl > snaplen:
            cuts += 1
            body = body[:snaplen]
        out.append(record.pack(sec, frac, len(body), orig))
        out.append(body)
        offset += 16 + incl
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_bytes(b"".join(out))
    tmp.replace(target)
    return cuts
