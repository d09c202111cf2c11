"""Opt-in fast paths for scapy's own layers carrying ours: :func:`fast_paths`.

Composing ``Ether() / IP() / UDP() / BTH() / Raw()`` copies the whole chain above the right
operand at every ``/`` (scapy's ``Packet.__div__``), and building clones every layer once
more (``Packet.__iter__``); for Ethernet, 802.1Q/802.1ad, Linux cooked capture, IPv4, IPv6
and UDP, the layers :mod:`ibwire.scapy.bindings` binds ours to, that is scapy's generic code:
a full ``Packet.__init__`` per copy, a generator per field, and ``self_build`` asking each
field for its bytes. ibwire's own layers copy, clone and build themselves cheaply whatever
the setting (:mod:`ibwire.scapy.cloning`, :mod:`ibwire.scapy.packing`); scapy's are left
alone unless the user asks, because those are classes ibwire does not own:

* ``ibwire.scapy.fast_paths(True)`` (or ``fast_paths()``) gives these classes a ``copy``, an
  ``__iter__`` and a ``self_build`` that, for a layer with one of ibwire's layers somewhere
  in its payload chain, make the copy or the clones as :mod:`ibwire.scapy.cloning` makes ours
  (slot by slot, the same values as scapy's) and pack the header at once where
  :mod:`ibwire.scapy.packing` can, and otherwise call scapy's own ``Packet`` methods: a
  packet without an InfiniBand layer is made exactly as before. A class that has its own
  version of one of these methods (or inherits one from a class other than ``Packet``) is
  left alone. When the installed scapy's ``copy``/``clone_with`` set other slots than
  :mod:`ibwire.scapy.slots` knows, nothing is installed (a warning says so).
* ``fast_paths(False)`` takes them off again: the classes' ``__dict__`` is as before (their
  methods are ``Packet``'s again); a method someone else has put there since is left alone.
* ``with fast_paths(): ...`` (or ``with fast_paths(False)``) switches for the block and puts
  the previous setting back on leaving it, exception or not.

The setting is process-wide (it changes classes), off on import. The bytes built are the same
either way; tests/scapy/test_fast_paths.py checks copies, clones and built frames with the
fast paths on against scapy's code.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

from scapy.error import warning
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet

from ibwire.scapy.cloning import LeanPacket, copy_maker, count_as_generic, lean_iter, new_copy
from ibwire.scapy.packing import packed_header
from ibwire.scapy.slots import scapy_agrees

#: The scapy layers that carry InfiniBand layers (see :mod:`ibwire.scapy.bindings`).
CARRIERS: tuple[type[Packet], ...] = (Ether, Dot1Q, Dot1AD, CookedLinux, IP, IPv6, UDP)
#: The classes the fast paths are installed in now (empty while they are off).
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
#: The methods the fast paths give the carriers.
METHODS = tuple(_FUNCTIONS)
for _name, _function in _FUNCTIONS.items():
    count_as_generic(_name, _function)


def _install() -> None:
    for cls in CARRIERS:
        if cls in INSTALLED or any(name in cls.__dict__ for name in METHODS):
            continue
        if any(getattr(cls, name) not in (getattr(Packet, name), function)
               for name, function in _FUNCTIONS.items()):
            continue  # inherited from a class other than Packet (or a carrier): left alone
        for name, function in _FUNCTIONS.items():
            setattr(cls, name, function)
        INSTALLED.append(cls)


def _uninstall() -> None:
    while INSTALLED:
        cls = INSTALLED.pop()
        for name, function in _FUNCTIONS.items():
            if cls.__dict__.get(name) is function:  # not replaced by someone else since
                delattr(cls, name)  # Packet's, inherited, as before _install


def enabled() -> bool:
    """True while the fast paths are installed."""
    return bool(INSTALLED)


def _switch(on: bool) -> None:
    if not on:
        _uninstall()
    elif scapy_agrees():
        _install()
    else:
        warning("ibwire: fast paths not turned on: this scapy's Packet.copy/clone_with set "
                "other slots than ibwire.scapy.slots knows; scapy's own code is used")


class FastPaths:
    """What :func:`fast_paths` returns: a context manager putting the previous setting back."""

    def __init__(self, previous: bool) -> None:
        #: whether the fast paths were on before the call
        self.previous = previous
        #: whether they are on after it (False if asked for but refused)
        self.active = enabled()

    def __enter__(self) -> FastPaths:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        _switch(self.previous)

    def __repr__(self) -> str:
        return f"<ibwire.scapy fast paths {'on' if self.active else 'off'}>"


def fast_paths(on: bool = True) -> FastPaths:
    """Turn the fast paths for scapy's Ethernet, 802.1Q/802.1ad, SLL, IP, IPv6 and UDP
    classes on (default) or off, now; in a ``with`` statement, for the block only."""
    previous = enabled()
    _switch(on)
    return FastPaths(previous)
