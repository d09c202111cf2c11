"""The root queueing discipline of an interface, asked of the kernel over rtnetlink
(``RTM_GETQDISC`` dump, rtnetlink(7), tc(8): what ``tc qdisc show dev IFACE`` prints first).

The forwarder's ports send past the qdisc layer (``PACKET_QDISC_BYPASS``, packet(7)) only
where it has nothing to skip: a device whose root qdisc is ``noqueue`` (a veth, a VLAN, a
macvlan) sends a frame straight to its driver anyway. A tap's ``pfifo_fast``, a NIC's ``mq``
or a ``tc netem`` someone put on the port are kept.
"""

from __future__ import annotations

import socket
import struct

NETLINK_ROUTE = 0
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
TCA_KIND = 1
TC_H_ROOT = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_TCMSG = struct.Struct("=BxxxiIII")  # family, ifindex, handle, parent, info
_RTA = struct.Struct("=HH")  # length, type


def _align(n: int) -> int:
    return (n + 3) & ~3


def root_qdisc(name: str) -> str | None:
    """The kind of ``name``'s root qdisc (``noqueue``, ``pfifo_fast``, ``mq``, ``netem``...),
    or None where the kernel reports none (a device that is down) or cannot be asked."""
    try:
        index = socket.if_nametoindex(name)
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE) as s:
            s.settimeout(2.0)
            body = _TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
            s.send(_NLMSG.pack(_NLMSG.size + len(body), RTM_GETQDISC,
                               NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body)
            found = None
            while True:
                data = s.recv(65536)
                at = 0
                while at + _NLMSG.size <= len(data):
                    length, kind, _, _, _ = _NLMSG.unpack_from(data, at)
                    if length < _NLMSG.size:
                        return found
                    if kind in (NLMSG_DONE, NLMSG_ERROR):
                        return found
                    if kind == RTM_NEWQDISC:
                        found = _kind_of(data[at + _NLMSG.size:at + length], index) or found
                    at += _align(length)
    except OSError:
        return None


def _kind_of(message: bytes, index: int) -> str | None:
    """TCA_KIND of one RTM_NEWQDISC message when it is ``index``'s root qdisc."""
    if len(message) < _TCMSG.size:
        return None
    _, ifindex, _, parent, _ = _TCMSG.unpack_from(message)
    if ifindex != index or parent != TC_H_ROOT:
        return None
    at = _TCMSG.size
    while at + _RTA.size <= len(message):
        length, kind = _RTA.unpack_from(message, at)
        if length < _RTA.size:
            break
        if kind == TCA_KIND:
            return message[at + _RTA.size:at + length].split(b"\0", 1)[0].decode("ascii",
                                                                               "replace")
        at += _align(length)
    return None
