"""A network namespace holding a veth pair, made and removed by the tests that send.

Nothing is ever sent outside it: the sender runs inside the namespace (``ip netns exec``) on
one end, and tcpdump captures on the other.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("sending needs root (a network namespace with a veth pair); CI runs as root")
    for tool in ("ip", "tcpdump"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")


class Veth:
    def __init__(self, name: str) -> None:
        self.ns, self.tx, self.rx = name, "ibwtx", "ibwrx"

    def run(self, *argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.ns, *argv], text=True,
                              capture_output=True, **kw)  # type: ignore[call-overload]

    def replay(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        return self.run(sys.executable, "-m", "ibwire.cli.main", "replay", "-i", self.tx,
                        *argv, env=env, timeout=120)

    @contextmanager
    def capture(self, path: Path) -> Iterator[None]:
        """tcpdump on the receiving end for the duration of the block."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "tcpdump", "-i", self.rx,
                                 "-Q", "in", "-U", "--immediate-mode", "-B", "16384",
                                 "-w", str(path)], stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stderr.readline() if proc.stderr else ""
            assert "listening" in line, line
            yield
            time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)


@contextmanager
def veth_namespace() -> Iterator[Veth]:
    veth = Veth(f"ibwire-test-{os.getpid()}")
    subprocess.run(["ip", "netns", "add", veth.ns], check=True)
    try:
        # /proc/sys written directly: sysctl lives in /sbin, which a PATH may leave out
        ipv6_off = ("for k in ('all', 'default'): "
                    "open(f'/proc/sys/net/ipv6/conf/{k}/disable_ipv6', 'w').write('1')")
        for cmd in ([sys.executable, "-c", ipv6_off],
                    ["ip", "link", "add", veth.tx, "type", "veth", "peer", "name", veth.rx],
                    ["ip", "link", "set", veth.tx, "up"], ["ip", "link", "set", veth.rx, "up"]):
            done = veth.run(*cmd)
            if done.returncode:
                raise RuntimeError(f"in {veth.ns}: {' '.join(cmd)}: exit {done.returncode}: "
                                   f"{done.stderr.strip() or done.stdout.strip()}")
        yield veth
    finally:
        subprocess.run(["ip", "netns", "del", veth.ns], check=False)
