"""Three network namespaces the tests make and remove: host A (veth ``ha``), host B (``hb``)
and the forwarder's (``fa`` and ``fb``, the other ends). Nothing is sent anywhere else.

A thread enters a namespace with setns(2) (``Lab.inside``); a socket made there stays in it,
so one test process plays both endpoints (AF_PACKET sockets on ``ha`` and ``hb``) and runs
the :class:`ibwire.impair.Forwarder` (made inside the forwarder's namespace) in a thread.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)
ADDRESSES = {"a": "10.77.0.1", "b": "10.77.0.2"}


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a forwarder needs root (network namespaces with veth pairs)")
    if shutil.which("ip") is None:
        pytest.skip("ip (iproute2) not installed")


def _setns(fd: int) -> None:
    if _LIBC.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


class Lab:
    def __init__(self, fast: bool = True) -> None:
        self.fast = fast
        tag = os.getpid()
        self.ns = {"a": f"ibwimp-a-{tag}", "b": f"ibwimp-b-{tag}", "f": f"ibwimp-f-{tag}"}

    def ip(self, where: str, *argv: str) -> None:
        done = subprocess.run(["ip", "netns", "exec", self.ns[where], *argv], text=True,
                              capture_output=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def make(self) -> None:
        for name in self.ns.values():
            subprocess.run(["ip", "netns", "add", name], check=True)
        ipv6_off = ("for k in ('all', 'default'): "
                    "open(f'/proc/sys/net/ipv6/conf/{k}/disable_ipv6', 'w').write('1')")
        for where in self.ns:
            self.ip(where, sys.executable, "-c", ipv6_off)
        f = self.ns["f"]
        for side in ("a", "b"):
            subprocess.run(["ip", "link", "add", f"h{side}", "netns", self.ns[side], "type",
                            "veth", "peer", "name", f"f{side}", "netns", f], check=True)
            self.ip(side, "ip", "link", "set", f"h{side}", "address",
                    f"02:00:00:00:00:0{1 if side == 'a' else 2}")
            self.ip(side, "ip", "addr", "add", f"{ADDRESSES[side]}/24", "dev", f"h{side}")
            self.ip(side, "ip", "link", "set", f"h{side}", "up")
            self.ip(side, "ip", "link", "set", "lo", "up")
            self.ip("f", "ip", "link", "set", f"f{side}", "up")

    def remove(self) -> None:
        for name in self.ns.values():
            subprocess.run(["ip", "netns", "del", name], check=False)

    @contextmanager
    def inside(self, where: str) -> Iterator[None]:
        """The calling thread in namespace ``where`` for the block."""
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        there = os.open(f"/var/run/netns/{self.ns[where]}", os.O_RDONLY)
        try:
            _setns(there)
            try:
                yield
            finally:
                _setns(home)
        finally:
            os.close(home)
            os.close(there)

    def raw(self, side: str) -> socket.socket:
        """An AF_PACKET socket on host ``side``'s veth: sends frames, reads what arrives."""
        with self.inside(side):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
            s.bind((f"h{side}", 3))
        s.settimeout(0.05)
        return s

    def forwarder(self, *args: Any, **kw: Any) -> Any:
        from ibwire.impair import Forwarder

        with self.inside("f"):
            return Forwarder("fa", "fb", *args, fast=self.fast, **kw)

    def command(self, *argv: str, **kw: Any) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        return subprocess.Popen(["ip", "netns", "exec", self.ns["f"], sys.executable, "-m",
                                 "ibwire.cli.main", *argv], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def drain(s: socket.socket, wait: float = 0.3) -> list[bytes]:
    out: list[bytes] = []
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            out.append(s.recv(65536))
            end = max(end, time.monotonic() + 0.1)
        except (TimeoutError, BlockingIOError):
            continue
    return out


class Running:
    """A forwarder running in a thread for the block; ``manifest`` once it ended."""

    def __init__(self, forwarder: Any) -> None:
        self.forwarder = forwarder
        self.manifest: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.manifest = self.forwarder.run()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> Running:
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.forwarder.stop()
        self.thread.join(10)
        self.forwarder.close()
        if self.error is not None:
            raise self.error
