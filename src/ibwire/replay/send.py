"""Putting frames on a wire: an AF_PACKET socket bound to one interface (packet(7)).

The checks come first, each with a one-line reason: the interface exists, it is up
(``IFF_UP`` in ``/sys/class/net/IFACE/flags``), and the process may open a raw socket
(``CAP_NET_RAW``).
"""

from __future__ import annotations

import os
import socket

from ibwire.errors import IbwireError

IFF_UP = 0x1
ETH_P_ALL = 0x0003


class ReplayError(IbwireError):
    """A replay that cannot start."""


def check_interface(name: str) -> None:
    """Raises ReplayError unless ``name`` exists and is up."""
    try:
        socket.if_nametoindex(name)
    except OSError:
        raise ReplayError(f"{name}: no such interface") from None
    try:
        with open(f"/sys/class/net/{name}/flags") as f:
            flags = int(f.read().strip(), 0)
    except (OSError, ValueError):
        return
    if not flags & IFF_UP:
        raise ReplayError(f"{name}: interface is down (ip link set {name} up)")


class PacketSocket:
    """An AF_PACKET raw socket that sends whole frames on one interface."""

    def __init__(self, interface: str) -> None:
        check_interface(interface)
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError:
            raise ReplayError(f"{interface}: sending raw frames needs root or CAP_NET_RAW "
                              "(setcap cap_net_raw+ep on the Python binary)") from None
        self.sock.bind((interface, 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.failed = 0

    def send_burst(self, frames: list[bytes]) -> int:
        """Sends ``frames`` in order; returns the bytes sent. A frame the kernel refuses
        (ENOBUFS when the queue is full is retried once) is counted as failed."""
        send = self.sock.send
        sent = 0
        for frame in frames:
            try:
                sent += send(frame)
            except BlockingIOError:
                self.failed += 1
            except OSError as exc:
                if exc.errno == 105:  # ENOBUFS: the device queue is full; give it a moment
                    os.sched_yield()
                    try:
                        sent += send(frame)
                        continue
                    except OSError:
                        pass
                self.failed += 1
        return sent

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()
