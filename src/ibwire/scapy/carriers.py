"""scapy's own layers carrying ours: copied and cloned for a build as cheaply as ours.

Composing ``Ether() / IP() / UDP() / BTH() / Raw()`` copies the whole chain above the right
operand at every ``/`` (scapy's ``Packet.__div__``), and building clones every layer once
more (``Packet.__iter__``); for Ethernet, 802.1Q/802.1ad, Linux cooked capture, IPv4, IPv6
and UDP, the layers :mod:`ibwire.scapy.bindings` binds ours to, that is scapy's generic code:
a full ``Packet.__init__`` per copy, a generator per field, and ``self_build`` asking each
field for its bytes. :func:`install` gives these classes a ``copy``, an ``__iter__`` and a
``self_build`` that, for a layer with one of ibwire's layers somewhere in its payload chain,
make the copy or the clones as :mod:`ibwire.scapy.cloning` makes ours (slot by slot, the same
values as scapy's) and pack the header at once where :mod:`ibwire.scapy.packing` can, and
otherwise call scapy's own ``Packet`` methods: a packet without an InfiniBand layer is made
exactly as before. A class that has its own version of one of these methods is left alone.
tests/scapy/test_fast_paths.py checks copies, clones and built frames against scapy's code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet

from ibwire.scapy.cloning import LeanPacket, copy_maker, count_as_generic, lean_iter, new_copy
from ibwire.scapy.packing import packed_header

#: The scapy layers that carry InfiniBand layers (see :mod:`ibwire.scapy.bindings`).
CARRIERS: tuple[type[Packet], ...] = (Ether, Dot1Q, Dot1AD, CookedLinux, IP, IPv6, UDP)
#: The classes :func:`install` gave them to.
INSTALLED: list[type[Packet]] = []


def carries_ours(layer: Packet) -> bool:
    """True if one of ibwire's layers is in the payload chain of ``layer``."""
    layer = layer.payload
    while not isinstance(layer, NoPayload):
        if isinstance(layer, LeanPacket):
            return True
        layer = layer.payload
    return False


def copy(self: Packet) -> Any:
    """``Packet.copy``; made by :func:`ibwire.scapy.cloning.new_copy` above our layers."""
    snap = copy_maker(type(self)) if carries_ours(self) else None
    return Packet.copy(self) if snap is None else new_copy(self, snap)


def iterate(self: Packet) -> Iterator[Packet]:
    """``Packet.__iter__``; made by :func:`ibwire.scapy.cloning.lean_iter` above our layers."""
    return lean_iter(self) if carries_ours(self) else Packet.__iter__(self)


def self_build(self: Packet) -> bytes:
    """``Packet.self_build``; packed at once (:mod:`ibwire.scapy.packing`) above our layers."""
    header = packed_header(self) if self.raw_packet_cache is None and carries_ours(self) \
        else None  # a dissected layer: scapy's checks its cache, as before
    return Packet.self_build(self) if header is None else header


_FUNCTIONS = {"copy": copy, "__iter__": iterate, "self_build": self_build}
#: The methods :func:`install` gives the carriers.
METHODS = tuple(_FUNCTIONS)
for _name, _function in _FUNCTIONS.items():
    count_as_generic(_name, _function)


def install() -> None:
    """Give the carriers :func:`copy`, :func:`iterate` and :func:`self_build` (idempotent;
    done by :func:`ibwire.scapy.bindings.install`)."""
    for cls in CARRIERS:
        if cls in INSTALLED or any(name in cls.__dict__ for name in METHODS):
            continue
        if any(getattr(cls, name) not in (getattr(Packet, name), function)
               for name, function in _FUNCTIONS.items()):
            continue  # inherited from a class other than Packet (or a carrier): left alone
        for name, function in _FUNCTIONS.items():
            setattr(cls, name, function)
        INSTALLED.append(cls)
