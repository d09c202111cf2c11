"""The forwarder's two ports: an AF_PACKET socket on each interface (packet(7)).

With the compiled fast path each socket has a receive ring (``PACKET_RX_RING``, TPACKET_V2:
``ring.c``; recvmmsg(2) where the kernel refuses one): the kernel copies a frame into it in
the context that delivered it, not in the forwarder's. The C pump sends its batches with
sendmmsg(2); with ``tx_ring`` an Ethernet port has a second socket, bound to it for sending
only, with a send ring (``PACKET_TX_RING``): the batches are copied into its slots and sent
with one send(2) each (``ring.c``; sendmmsg(2) on the first socket where the kernel refuses a
ring, and for the frames no slot takes). Not the default: the ring's skbs point into its
pages, which a veth or a tap copies into new pages before passing a frame on
(skb_orphan_frags), so on those it saved no CPU time (docs/verbs/impair.md, Speed); a NIC
whose driver sends from the pages is where it can.

Each socket receives every frame that arrives on its interface (``ETH_P_ALL``; not those
the host sends on it: ``PACKET_IGNORE_OUTGOING``, or the ``PACKET_OUTGOING`` packet type
where the kernel lacks that option), stamped by the kernel on arrival (``SO_TIMESTAMPNS``),
with ``PACKET_AUXDATA``: ``TP_STATUS_CSUMNOTREADY`` says the TCP/UDP checksum was left to
offload (a tap fed by virtio-net, a veth fed by a local socket), and a VLAN tag the driver
took off the frame (``TP_STATUS_VLAN_VALID``) is put back before it is sent on.

The checks before anything is opened, each refusing in one line: two distinct interfaces
that exist and are up (``ibwire.replay.send.check_interface``), root or ``CAP_NET_RAW``,
and neither carrying the host's default route (``/proc/net/route``, ``/proc/net/ipv6_route``)
unless forced.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
from typing import Any

import numpy as np

from ibwire.errors import IbwireError

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
PACKET_STATISTICS = 6  # struct tpacket_stats: tp_packets, tp_drops (linux/if_packet.h)
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
SIOCGIFMTU = 0x8921
ARPHRD_ETHER = 1
ETH_HLEN = 14
TP_STATUS_CSUMNOTREADY = 0x8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
#: Room for one frame: a GSO/GRO super-frame of a tap can be 64 KiB.
SLOT = 65536
BUFFER_BYTES = 8 << 20
_AUX = struct.Struct("=IIIHHHH")


class ImpairError(IbwireError):
    """A forwarder that cannot start (the interfaces, the privileges, the plan)."""


def default_route_interfaces() -> set[str]:
    """Interfaces that carry a default route of the host (IPv4 or IPv6)."""
    out: set[str] = set()
    try:
        with open("/proc/net/route") as f:
            for line in f.read().splitlines()[1:]:
                parts = line.split()
                if len(parts) > 7 and parts[1] == "00000000" and parts[7] == "00000000":
                    out.add(parts[0])
    except OSError:
        pass
    try:
        with open("/proc/net/ipv6_route") as f:
            for line in f.read().splitlines():
                parts = line.split()
                if len(parts) == 10 and parts[0] == "0" * 32 and parts[1] == "00" \
                        and parts[9] != "lo":
                    out.add(parts[9])
    except OSError:
        pass
    return out


def check_ports(a: str, b: str, force: bool = False) -> None:
    """ImpairError, in one line, unless ``a`` and ``b`` are two distinct interfaces that exist
    and are up, neither carrying the default route (unless ``force``)."""
    from ibwire.replay.send import ReplayError, check_interface

    if a == b:
        raise ImpairError(f"-i {a} given twice: a forwarder joins two distinct interfaces")
    for name in (a, b):
        try:
            check_interface(name)
        except ReplayError as exc:
            raise ImpairError(str(exc)) from None
    routed = sorted(default_route_interfaces() & {a, b})
    if routed and not force:
        raise ImpairError(f"{routed[0]} carries this host's default route: forwarding on it "
                          "would cut the host off (--force to do it anyway)")


class Batch:
    """Frames laid end to end in ``data``: frame ``i`` is ``lengths[i]`` bytes from
    ``offsets[i]``, arrived at ``stamps[i]`` (ns since the epoch); ``csum[i]``: its TCP/UDP
    checksum was left to offload."""

    __slots__ = ("csum", "data", "lengths", "offsets", "stamps")

    def __init__(self, data: bytearray, offsets: np.ndarray, lengths: np.ndarray,
                 stamps: np.ndarray, csum: np.ndarray) -> None:
        self.data, self.offsets, self.lengths = data, offsets, lengths
        self.stamps, self.csum = stamps, csum

    @classmethod
    def of(cls, frames: list[bytearray], stamps: np.ndarray, csum: np.ndarray) -> Batch:
        lengths = np.fromiter((len(f) for f in frames), np.int64, len(frames))
        offsets = np.zeros(len(frames), np.int64)
        if len(frames) > 1:
            np.cumsum(lengths[:-1], out=offsets[1:])
        return cls(bytearray(b"".join(frames)), offsets, lengths, stamps, csum)

    def __len__(self) -> int:
        return len(self.lengths)

    def frame(self, i: int) -> memoryview:
        """Frame ``i``, in place (edits change the batch)."""
        o = int(self.offsets[i])
        return memoryview(self.data)[o:o + int(self.lengths[i])]


class Port:
    """One interface's AF_PACKET socket: frames in with their arrival time and status,
    frames out. ``receive`` reads what has arrived (up to ``most`` frames) without waiting.
    ``tx_ring``: send the fast path's batches through a send ring where the kernel gives one.
    """

    def __init__(self, name: str, most: int = 64, fast: bool = True, ring: bool = True,
                 tx_ring: bool = False) -> None:
        self.name = name
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except PermissionError:
            raise ImpairError(f"{name}: a forwarder needs root or CAP_NET_RAW (setcap "
                              "cap_net_raw+ep on the Python binary)") from None
        self.sock = sock
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _buffer(sock, SO_RCVBUFFORCE, socket.SO_RCVBUF)
        _buffer(sock, SO_SNDBUFFORCE, socket.SO_SNDBUF)
        sock.bind((name, ETH_P_ALL))
        sock.setblocking(False)
        self.fd = sock.fileno()
        self._buffer = bytearray(SLOT)
        self.failed = 0
        self.oversize = 0
        self.kernel_drops = 0
        self._cut = 0
        self.most = most
        from ibwire.impair import _io

        self.fast = _io.fast if fast else None
        self.tx: Any = None
        self._tx_sock: socket.socket | None = None
        if self.fast is not None:
            self.most = min(most, self.fast.MOST)
            self._slots = np.empty(self.most * SLOT, np.uint8)
            self._slots[::4096] = 0  # fault its pages in now, not in the first batches
            self.ring: Any = None
            if ring:
                try:
                    self.ring = self.fast.Ring(self.fd)
                except OSError:
                    self.ring = None  # recvmmsg(2) then
            self._columns = (np.empty(self.most, np.int64), np.empty(self.most, np.int64),
                             np.empty(self.most, np.int64), np.empty(self.most, np.uint8))
            if tx_ring:
                self._open_tx_ring()

    def _open_tx_ring(self) -> None:
        """The send ring, on a socket of its own (one with a send ring sends nothing else),
        none on a non-Ethernet port or where refused."""
        if self.sock.getsockname()[3] != ARPHRD_ETHER:
            return
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            ifreq = fcntl.ioctl(s, SIOCGIFMTU, struct.pack("16si", self.name.encode(), 0))
            mtu = struct.unpack_from("i", ifreq, 16)[0]
            _buffer(s, SO_SNDBUFFORCE, socket.SO_SNDBUF)
            self.tx = self.fast.TxRing(s.fileno(), mtu + ETH_HLEN)  # type: ignore[union-attr]
            s.bind((self.name, 0))  # protocol 0: it receives nothing
        except OSError:
            s.close()
            self.tx = None
            return
        self._tx_sock = s

    def receive(self, most: int) -> Batch:
        """What has arrived (up to ``most`` frames), oldest first. With the fast path the
        batch's frames live in this port's buffer until the next ``receive``."""
        if self.fast is not None:
            most = min(most, self.most)
            offsets, lengths, stamps, csum = self._columns
            if self.ring is not None:
                n = self.fast.receive_ring(self.ring, self._slots, SLOT, most, offsets,
                                           lengths, stamps, csum)
            else:
                n = self.fast.receive(self.fd, self._slots, SLOT, most, offsets, lengths,
                                      stamps, csum)
            return Batch(self._slots, offsets[:n], lengths[:n], stamps[:n],
                         csum[:n].view(bool))
        frames: list[bytearray] = []
        stamps: list[int] = []
        csum: list[bool] = []
        view = memoryview(self._buffer)
        cmsg = socket.CMSG_SPACE(_AUX.size) + socket.CMSG_SPACE(16)
        while len(frames) < most:
            try:
                n, ancillary, _flags, address = self.sock.recvmsg_into([view], cmsg)
            except (BlockingIOError, InterruptedError):
                break
            if address[2] == PACKET_OUTGOING:
                continue
            frame, stamp, status = bytearray(view[:n]), 0, 0
            for level, kind, data in ancillary:
                if level == SOL_PACKET and kind == PACKET_AUXDATA:
                    status, _, _, _, _, tci, tpid = _AUX.unpack(data[:_AUX.size])
                    if status & TP_STATUS_VLAN_VALID:
                        tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                        frame[12:12] = struct.pack("!HH", tpid, tci)
                elif level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("=qq", data[:16])
                    stamp = sec * 1_000_000_000 + nsec
            frames.append(frame)
            stamps.append(stamp)
            csum.append(bool(status & TP_STATUS_CSUMNOTREADY))
        return Batch.of(frames, np.array(stamps, np.int64), np.array(csum, bool))

    def pump_arrays(self) -> tuple[Any, ...]:
        """(socket, receive ring or None, send ring or None, receive buffer, offsets,
        lengths, stamps, checksum flags): what the C pump (:class:`ibwire.impair._fast.Pump`)
        reads a batch into, as :meth:`receive`, and sends it through."""
        return (self.fd, self.ring, self.tx, self._slots, *self._columns)

    def handed_back(self, first: int, count: int) -> Batch:
        """Frames ``first`` to ``count`` of the batch the pump read last on this port."""
        offsets, lengths, stamps, csum = self._columns
        return Batch(self._slots, offsets[first:count], lengths[first:count],
                     stamps[first:count], csum[first:count].view(bool))

    def send_batch(self, batch: Batch) -> int:
        """Sends every frame of ``batch`` in order."""
        if self.fast is not None:
            return int(self.fast.send_batch(self.fd, batch.data, batch.offsets,
                                             batch.lengths, self.tx))
        data = memoryview(batch.data)
        return self.send([data[o:o + n] for o, n in zip(batch.offsets.tolist(),
                                                        batch.lengths.tolist(), strict=True)])

    def send(self, frames: list[Any]) -> int:
        """Sends ``frames`` in order; returns how many went (the kernel's refusals counted in
        ``failed``; a frame longer than the interface takes in ``oversize``). What waits in
        the send ring goes first."""
        if self.tx is not None:
            self.tx.flush()
        sent = 0
        for frame in frames:
            for attempt in (0, 1):
                try:
                    self.sock.send(frame)
                    sent += 1
                    break
                except (BlockingIOError, InterruptedError):
                    if attempt:
                        self.failed += 1
                    else:
                        os.sched_yield()
                except OSError as exc:
                    if exc.errno == 90:  # EMSGSIZE
                        self.oversize += 1
                        break
                    if attempt or exc.errno != 105:  # ENOBUFS: the queue is full, once more
                        self.failed += 1
                        break
                    os.sched_yield()
        return sent

    def count_kernel_drops(self) -> int:
        """Frames the kernel dropped since the socket was made because its receive buffer was
        full (the forwarder was not scheduled in time): they never reached the forwarder, so
        no rule saw them and they were not forwarded. PACKET_STATISTICS resets on each read,
        so the count is kept here."""
        if self.sock.fileno() >= 0:
            _packets, drops = struct.unpack("=II", self.sock.getsockopt(SOL_PACKET,
                                                                       PACKET_STATISTICS, 8))
            self.kernel_drops += drops
        ring = getattr(self, "ring", None)
        if ring is not None:
            self.kernel_drops += ring.cut - self._cut
            self._cut = ring.cut
        return self.kernel_drops

    @property
    def ring_full(self) -> int:
        """Frames the send ring could not take (the kernel held every slot): they went with
        sendmmsg(2) instead, after the ring's."""
        return 0 if self.tx is None else int(self.tx.full)

    def close(self) -> None:
        self.count_kernel_drops()
        if getattr(self, "ring", None) is not None:
            self.ring.close()
        if self.tx is not None:
            self.tx.close()
        if self._tx_sock is not None:
            self._tx_sock.close()
        self.sock.close()


def _buffer(sock: socket.socket, force: int, plain: int) -> None:
    """A socket buffer of BUFFER_BYTES (past the sysctl limit where privileged)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, BUFFER_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, plain, BUFFER_BYTES)
