"""The rig's network: a namespace of its own holding a bridge and one tap per guest (or,
``bridged=False``, taps left apart for ``ibwire impair`` to join: :meth:`Rig.impairing`).

Nothing the guests send leaves the namespace: the bridge has no uplink and no address (IPv6
is off inside the namespace, so the bridge itself sends nothing). Faults on the wire are an
nftables table of the bridge family in the namespace (:mod:`faults`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

PREFIX = "ibrig"
BRIDGE = "br0"


class NetnsError(RuntimeError):
    """A namespace, bridge or tap could not be made (not root, no ``ip``, no tun device)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise NetnsError("ip (iproute2) is not installed") from exc
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def remove_stale() -> list[str]:
    """Remove namespaces of earlier rigs whose process is gone (killed without cleanup)."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX) or not name[len(PREFIX):].isdigit():
            continue
        pid = int(name[len(PREFIX):])
        try:
            os.kill(pid, 0)
            continue  # its rig still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


class Namespace:
    """``ibrig<pid>`` with ``br0`` and ``tap0..tapN-1``, made by :meth:`create`, gone after
    :meth:`remove` (deleting the namespace deletes its bridge and taps)."""

    def __init__(self, taps: int, mtu: int = 9000, bridged: bool = True) -> None:
        self.name = f"{PREFIX}{os.getpid()}"
        self.taps = [f"tap{i}" for i in range(taps)]
        self.mtu = mtu
        self.bridged = bridged
        self.created = False

    def create(self) -> None:
        remove_stale()
        _ip("netns", "add", self.name)
        self.created = True
        for key in ("all", "default"):
            self.sysctl(f"net.ipv6.conf.{key}.disable_ipv6", "1")
        _ip("-n", self.name, "link", "set", "lo", "up")
        _ip("-n", self.name, "link", "add", BRIDGE, "mtu", str(self.mtu), "type", "bridge",
            "stp_state", "0", "forward_delay", "0", "mcast_snooping", "0")
        for tap in self.taps:
            _ip("-n", self.name, "tuntap", "add", "dev", tap, "mode", "tap")
            # not bridged: the taps stay apart until ``ibwire impair`` joins them
            master = ("master", BRIDGE) if self.bridged else ()
            _ip("-n", self.name, "link", "set", tap, "mtu", str(self.mtu), *master, "up")
        _ip("-n", self.name, "link", "set", BRIDGE, "up")

    def sysctl(self, key: str, value: str) -> None:
        path = "/proc/sys/" + key.replace(".", "/")
        self.run(["sh", "-c", f"echo {value} > {path}"])

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, args: Sequence[str], stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(self.command(args), input=stdin, capture_output=True, text=True)
        if check and done.returncode != 0:
            raise NetnsError(f"{' '.join(args)} in {self.name}: {done.stderr.strip()}")
        return done

    def remove(self) -> None:
        if self.created:
            _ip("netns", "del", self.name, check=False)
            self.created = False
