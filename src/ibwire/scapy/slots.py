"""Which ``Packet`` slots scapy's ``copy`` and ``clone_with`` set, checked against the scapy
that is installed.

:mod:`ibwire.scapy.cloning` makes copies and clones slot by slot instead of calling scapy's
``Packet.copy`` / ``Packet.clone_with``: the slots of :data:`COPIED` (:data:`CLONED`) taken
from the original, the others as a fresh ``Packet.__init__`` instance has them. That is
scapy 2.5-2.8's code. :func:`scapy_agrees` runs scapy's own ``copy`` and ``clone_with`` on a
probe packet holding a distinct marker in every slot ``Packet.__init__`` sets, and says
whether exactly these slots came across (and ``clone_with`` set ``explicit`` and ``fields``
as expected); when scapy does otherwise, cloning turns its fast paths off and every copy and
clone is scapy's.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from scapy.fields import ByteField
from scapy.packet import NoPayload, Packet

#: The slots ``Packet.copy`` sets from the original (the others are as in a fresh instance).
COPIED = ("fields", "default_fields", "overloaded_fields", "underlayer", "parent", "explicit",
          "raw_packet_cache", "raw_packet_cache_fields", "wirelen", "post_transforms",
          "payload", "time", "comments", "direction", "sniffed_on")
#: The slots ``Packet.clone_with`` sets (the payload is then added with ``add_payload``).
CLONED = ("explicit", "fields", "default_fields", "overloaded_fields", "time", "underlayer",
          "parent", "post_transforms", "raw_packet_cache", "raw_packet_cache_fields", "wirelen",
          "comments", "sniffed_on", "direction")
#: Slots whose markers must stay usable by ``copy`` (the field types it copies with).
_KEPT = frozenset({"fieldtype"})


class _Probe(Packet):  # a leading underscore: not registered in conf.layers
    fields_desc = [ByteField("x", 0)]


def _marked(probe: Packet) -> dict[str, Any]:
    """Put a distinct marker in every slot of ``probe`` that ``Packet.__init__`` set."""
    markers: dict[str, Any] = {}
    for number, slot in enumerate(sorted(type(probe).__all_slots__ - _KEPT), start=1):
        if not hasattr(probe, slot):
            continue
        value = getattr(probe, slot)
        if slot == "payload":
            marker: Any = _Probe(x=number)
        elif isinstance(value, dict) or slot == "raw_packet_cache_fields":
            marker = {"x": number}
        elif isinstance(value, list):
            marker = [number]
        else:
            marker = f"marker {number}"
        object.__setattr__(probe, slot, marker)
        markers[slot] = marker
    return markers


def _came_across(made: Packet, markers: dict[str, Any]) -> set[str]:
    found = set()
    for slot, marker in markers.items():
        value = getattr(made, slot, None)
        if slot == "payload":
            if not isinstance(value, NoPayload) and value.fields == marker.fields:
                found.add(slot)
        elif value == marker:
            found.add(slot)
    return found


@cache
def scapy_agrees() -> bool:
    """True if the installed scapy's ``copy`` and ``clone_with`` set exactly
    :data:`COPIED` and :data:`CLONED` (checked once, on a probe packet)."""
    try:
        probe = _Probe()
        markers = _marked(probe)
        copied = _came_across(Packet.copy(probe), markers)
        probe = _Probe()
        markers = _marked(probe)
        clone = Packet.clone_with(probe, None, x=7)
        cloned = _came_across(clone, markers) | {"fields", "explicit"}
        clone_ok = clone.fields == {"x": 7} and clone.explicit == 1
    except Exception:  # a scapy whose copy cannot take the probe: not the one we know
        return False
    return copied == set(COPIED) and cloned == set(CLONED) and clone_ok
