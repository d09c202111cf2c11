"""The build fast paths give exactly what scapy's generic code gives.

The opt-in fast paths for scapy's own layers (:func:`ibwire.scapy.fast_paths`) are turned on
for every test of this module (and off again after it); ibwire's own layers have theirs always.

* headers packed at once (:mod:`ibwire.scapy.packing`) == ``Packet.self_build``, for arbitrary
  field values, out-of-range, wrong-type and explicit-length ones included (or both raise);
* instances, copies, clones and iteration (:mod:`ibwire.scapy.cloning`) == ``Packet``'s, slot
  by slot, payload chain included; so are those of scapy's layers above ours
  (:mod:`ibwire.scapy.carriers`), and their headers packed at once; a scapy whose ``copy``
  or ``clone_with`` set other slots, or a class ``cls()`` would not make alike, gets scapy's
  own code;
* whole frames in every encapsulation, with lying lengths, explicit trailers, volatile values,
  UDP checksums: the same bytes with every fast path on as with scapy's generic code.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.compat import raw
from scapy.fields import ByteField, PacketListField
from scapy.layers.inet import IP, UDP, IPOption_NOP, IPOption_RR
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet, Raw
from scapy.volatile import RandByte, RandShort, VolatileValue

from ibwire.headers.layout import Field as LayoutField
from ibwire.scapy import BTH, GRH, LAYERS, LRH, RETH, carriers, cloning, fast_paths, slots
from ibwire.scapy import crc as glue
from ibwire.scapy.base import IBHeader
from ibwire.scapy.cloning import LeanPacket, copy_maker, snapshot_of
from ibwire.scapy.fields import scapy_name
from ibwire.scapy.packing import fields_plan, header_plan, pack, packed
from ibwire.tables import opcodes
from tests.scapy.helpers import KINDS, frame_values, scapy_packet

LAYER_IDS = sorted(LAYERS)
_LEAN_METHODS = ("__init__", "copy", "clone_with", "__iter__", "copy_fields_dict",
                 "add_underlayer")


@pytest.fixture(autouse=True, scope="module")
def scapy_fast_paths() -> Iterator[None]:
    """The opt-in fast paths for scapy's layers on, for this module's tests."""
    with fast_paths() as switched:
        assert switched.active and not switched.previous
        yield
    assert not carriers.enabled()


@contextlib.contextmanager
def generic_paths() -> Iterator[None]:
    """scapy's own code wherever a fast path is: the reference the fast paths must equal."""
    with pytest.MonkeyPatch.context() as patched, fast_paths(False):
        for name in _LEAN_METHODS:
            patched.setattr(LeanPacket, name, getattr(Packet, name))
        patched.setattr(IBHeader, "self_build", Packet.self_build)
        patched.setattr(glue, "packed", lambda layer: layer.self_build())
        assert not carriers.INSTALLED and Packet.copy is Ether.copy
        yield


def _outcome(build: Any, *args: Any) -> Any:
    """The bytes ``build`` gives, or the type of what it raises."""
    try:
        return build(*args)
    except Exception as exc:  # the generic path may raise: the fast one must raise alike
        return type(exc)


# --- headers packed at once --------------------------------------------------------------


def _number(field: LayoutField, names: list[str]) -> st.SearchStrategy[Any]:
    """Any value a number field may hold: in range, out of range, None, a bool, a name."""
    choices = [st.integers(0, field.mask), st.sampled_from([0, field.mask]),
               st.integers(-3, -1), st.integers(field.mask + 1, field.mask + 3 + 2 * field.mask),
               st.none(), st.booleans(), st.sampled_from(["", "x"])]
    if names:
        choices.append(st.sampled_from(names))
    return st.one_of(*choices)


def _address(field: LayoutField) -> st.SearchStrategy[Any]:
    size = field.bits // 8
    choices = [st.binary(min_size=size, max_size=size), st.binary(max_size=size + 2), st.none()]
    if field.fmt == "ipv6":
        choices.append(st.sampled_from(["::", "fe80::1", "2001:db8::2", "::ffff:192.0.2.1"]))
    if field.fmt == "ipv4":
        choices.append(st.sampled_from(["192.0.2.1", "0.0.0.0", "10.1"]))
    if field.fmt == "mac":
        choices.append(st.sampled_from(["02:00:00:00:00:01", "ff:ff:ff:ff:ff:ff"]))
    return st.one_of(*choices)


@pytest.mark.parametrize("name", LAYER_IDS)
@given(data=st.data())
def test_packed_header_is_scapys_field_by_field(name, data):
    """pack() gives None or Packet.self_build's bytes; self_build gives its bytes or raises alike."""
    layer_cls = LAYERS[name]
    layer = layer_cls()
    for f in layer_cls.header.fields:
        scapy_field = layer.fieldtype[scapy_name(f.name)]
        names = list(getattr(scapy_field, "s2i", None) or {})
        value = data.draw(_address(f) if f.fmt else _number(f, names), label=f.name)
        layer.fields[scapy_name(f.name)] = value  # as held, without any2i
    generic = _outcome(Packet.self_build, layer)
    fast = pack(layer, header_plan(layer_cls))
    assert fast is None or fast == generic
    assert _outcome(layer.self_build) == generic


_IPV4_TEXT = st.sampled_from(["192.0.2.1", "198.51.100.7", "0.0.0.0", "10.1", "300.1.1.1", ""])
_SCAPY_VALUES: dict[type[Packet], dict[str, st.SearchStrategy[Any]]] = {
    IP: {
        "version": st.one_of(st.integers(-1, 17), st.none()),
        "ihl": st.one_of(st.none(), st.integers(-1, 17)),
        "tos": st.one_of(st.integers(-1, 257), st.just(RandByte())),
        "len": st.one_of(st.none(), st.integers(0, 70000)),
        "id": st.one_of(st.integers(-1, 70000), st.booleans()),
        "flags": st.one_of(st.integers(-1, 9), st.sampled_from(["DF", "MF", "MF+DF", "evil"])),
        "frag": st.one_of(st.integers(-1, 9000), st.none()),
        "ttl": st.integers(-1, 257),
        "proto": st.one_of(st.integers(-1, 257), st.sampled_from(["udp", "tcp"])),
        "chksum": st.one_of(st.none(), st.integers(-1, 70000)),
        "src": st.one_of(_IPV4_TEXT, st.none()),
        "dst": _IPV4_TEXT,
        "options": st.sampled_from([[], [IPOption_NOP()], [IPOption_RR()], b"\x01\x01\x01\x01"]),
    },
    UDP: {
        "sport": st.one_of(st.integers(-1, 70000), st.none(), st.just("domain")),
        "dport": st.integers(0, 65535),
        "len": st.one_of(st.none(), st.integers(-1, 70000)),
        "chksum": st.one_of(st.none(), st.integers(0, 65535), st.just(RandShort())),
    },
    IPv6: {
        "version": st.integers(-1, 17),
        "tc": st.integers(-1, 257),
        "fl": st.integers(-1, 2 ** 20 + 1),
        "plen": st.one_of(st.none(), st.integers(-1, 70000)),
        "nh": st.one_of(st.integers(0, 255), st.just("UDP")),
        "hlim": st.integers(0, 255),
        "src": st.sampled_from(["fe80::1", "2001:db8::1", "::", "bad"]),
        "dst": st.sampled_from(["2001:db8::2", "::1"]),
    },
}


_MAC_TEXT = st.sampled_from(["02:00:00:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00"])
_VLAN_VALUES = {"prio": st.integers(-1, 8), "dei": st.integers(0, 2), "vlan": st.integers(-1, 4097),
                "type": st.one_of(st.none(), st.integers(-1, 70000))}
_SCAPY_VALUES.update({
    Ether: {"dst": _MAC_TEXT, "src": _MAC_TEXT,  # not None: that would ask the network
            "type": st.one_of(st.none(), st.integers(-1, 70000), st.just(RandShort()))},
    Dot1Q: _VLAN_VALUES,
    Dot1AD: _VLAN_VALUES,
})


@pytest.mark.parametrize("layer_cls", [IP, UDP, IPv6, Ether, Dot1Q, Dot1AD],
                         ids=lambda c: c.__name__)
@given(data=st.data())
def test_packed_scapy_header_is_its_self_build(layer_cls, data):
    """The headers the RoCEv2 ICRC covers, and the carriers' (:mod:`ibwire.scapy.carriers`):
    packed() == self_build() or both raise."""
    assert fields_plan(layer_cls) is not None
    given_values = {name: data.draw(values, label=name)
                    for name, values in _SCAPY_VALUES[layer_cls].items()}
    try:
        layer = layer_cls(**given_values)  # through any2i, as a user gives them
    except Exception:
        return
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    random.seed(seed)
    generic = _outcome(Packet.self_build, layer)
    random.seed(seed)
    assert _outcome(packed, layer) == generic


# --- instances, copies, clones -----------------------------------------------------------


def describe(layer: Packet, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every slot of ``layer`` and its payload chain; links and volatiles by type."""
    out: dict[str, Any] = {"class": type(layer), "__dict__": dict(layer.__dict__)}
    for slot in sorted(type(layer).__all_slots__):
        if slot in skip:
            continue
        if not hasattr(layer, slot):
            out[slot] = "<unset>"
            continue
        value = getattr(layer, slot)
        if slot == "payload":
            value = "NoPayload" if isinstance(value, NoPayload) else describe(value, skip)
        elif slot in ("underlayer", "parent"):
            value = None if value is None else type(value)
        elif isinstance(value, dict):  # in order
            value = [(k, type(v) if isinstance(v, VolatileValue) else v) for k, v in value.items()]
        out[slot] = value
    return out


def shared(layer: Packet, other: Packet) -> list[tuple[int, str]]:
    """The dicts and lists that ``layer`` and ``other`` (or their payloads) hold in common.

    Left out: ``default_fields``, which the fast paths leave shared when it is the class's
    own (as every instance ``Packet.__init__`` makes shares it) where scapy's copies copy it.
    """
    found, depth = [], 0
    while not isinstance(layer, NoPayload) and not isinstance(other, NoPayload):
        for slot in sorted(type(layer).__all_slots__ - {"default_fields"}):
            value = getattr(layer, slot, None)
            if isinstance(value, (dict, list)) and value is getattr(other, slot, None):
                found.append((depth, slot))
        layer, other, depth = layer.payload, other.payload, depth + 1
    return found


def _chain(opcode_values: dict[str, Any], volatile: bool, payload: bytes) -> Packet:
    bth = BTH(**opcode_values)
    if volatile:
        bth.psn = RandShort()
    return bth / RETH(va=0x1000, dmalen=len(payload)) / Raw(payload)


_BTH_VALUES = st.fixed_dictionaries({}, optional={
    "opcode": st.sampled_from([0x0A, "RC_RDMA_WRITE_ONLY", 0x06]),
    "psn": st.integers(0, 2 ** 24 - 1), "destqp": st.integers(0, 2 ** 24 - 1),
    "padcnt": st.one_of(st.none(), st.integers(0, 3)), "icrc": st.one_of(st.none(), st.integers(0, 9)),
    "p_key": st.integers(0, 65535), "pad": st.sampled_from([None, b"", b"\x01"]),
})


@given(values=_BTH_VALUES)
def test_new_instance_is_packet_init(values):
    fast = BTH(**values)
    with generic_paths():
        generic = BTH(**values)
    assert describe(fast, skip=("time",)) == describe(generic, skip=("time",))
    assert list(fast.fields) == list(generic.fields)  # the same order too


@given(values=_BTH_VALUES, volatile=st.booleans(), payload=st.binary(max_size=9),
       explicit=st.booleans())
def test_copy_clone_and_iter_are_packets(values, volatile, payload, explicit):
    packet = _chain(values, volatile, payload)
    packet.explicit = int(explicit)
    fast_copy, generic_copy = packet.copy(), Packet.copy(packet)
    assert describe(fast_copy) == describe(generic_copy)
    assert shared(fast_copy, packet) == shared(generic_copy, packet)
    assert describe(packet[Raw].copy()) == describe(Packet.copy(packet[Raw]))
    clone_values = {"psn": 5, "opcode": 0x0A}
    first = Raw(load=b"p")
    second = Packet.copy(first)  # the same time stamp
    assert describe(packet.clone_with(first, **clone_values)) == \
        describe(Packet.clone_with(packet, second, **clone_values))
    random.seed(7)
    fast = list(packet)
    with generic_paths():
        random.seed(7)
        generic = list(packet)
    assert [describe(clone) for clone in fast] == [describe(clone) for clone in generic]
    assert [shared(clone, packet) for clone in fast] == \
        [shared(clone, packet) for clone in generic]


def test_a_fresh_instance_the_snapshot_cannot_describe_is_made_by_scapy():
    class Listed(LeanPacket):  # a mutable default: every instance holds a list of its own
        fields_desc = [PacketListField("items", [], Raw)]

    snap = snapshot_of(Listed)
    assert snap is not None and not snap.new_ok  # copies and clones replace `fields` anyway
    fresh = Listed()
    with generic_paths():
        generic = Listed()
    assert describe(fresh, skip=("time",)) == describe(generic, skip=("time",))
    packet = Listed() / Raw(b"x")
    assert describe(packet.copy()) == describe(Packet.copy(packet))
    assert shared(packet.copy(), packet) == shared(Packet.copy(packet), packet)
    assert raw(packet) == b"x"


# --- scapy's layers above ours ----------------------------------------------------------


def _scapy_layer(data: st.DataObject, layer_cls: type[Packet]) -> Packet | None:
    always = {"dst", "src"} if layer_cls is Ether else set()  # None would ask the network
    values = {name: data.draw(values, label=f"{layer_cls.__name__}.{name}")
              for name, values in _SCAPY_VALUES[layer_cls].items()
              if name in always or data.draw(st.booleans(), label=f"give {name}")}
    try:
        return layer_cls(**values)  # through any2i, as a user gives them
    except Exception:
        return None


@settings(max_examples=200, deadline=None)  # no timing: the machine may be loaded
@given(data=st.data(), ours=st.booleans(), explicit=st.booleans(),
       network=st.sampled_from([IP, IPv6]), tagged=st.sampled_from([None, Dot1Q, Dot1AD]))
def test_carriers_copy_clone_iterate_and_build_as_scapy(data, ours, explicit, network, tagged):
    """Ether / [802.1Q] / IP or IPv6 / UDP with any values, above BTH (or a Raw): copies,
    build clones and headers as scapy's generic code makes them."""
    chain = [_scapy_layer(data, cls) for cls in (Ether, tagged, network, UDP) if cls]
    if any(layer is None for layer in chain):
        return
    top = BTH(opcode=4, psn=data.draw(st.integers(0, 9))) / Raw(b"p") if ours else Raw(b"p")
    packet = chain[0]
    for layer in (*chain[1:], top):
        packet = packet / layer
    assert carriers.carries_ours(packet) is ours
    packet.explicit = int(explicit)
    with generic_paths():
        generic_copy = packet.copy()
    fast_copy = packet.copy()
    assert describe(fast_copy) == describe(generic_copy)
    assert shared(fast_copy, packet) == shared(generic_copy, packet)
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    random.seed(seed)
    fast = _outcome(list, packet)
    with generic_paths():
        random.seed(seed)
        generic = _outcome(list, packet)
    if isinstance(generic, type):
        assert fast == generic
        return
    assert [describe(clone) for clone in fast] == [describe(clone) for clone in generic]
    assert [shared(clone, packet) for clone in fast] == \
        [shared(clone, packet) for clone in generic]
    layer = fast[0]
    while not isinstance(layer, NoPayload):
        random.seed(seed)
        built = _outcome(layer.self_build)
        random.seed(seed)
        assert built == _outcome(Packet.self_build, layer)
        layer = layer.payload


def test_carriers_are_installed_once_and_only_where_packet_methods_are_inherited():
    assert set(carriers.INSTALLED) == {Ether, Dot1Q, Dot1AD, CookedLinux, IP, IPv6, UDP}
    with fast_paths(True) as again:
        assert again.previous and again.active
    assert len(carriers.INSTALLED) == len(set(carriers.INSTALLED)) == len(carriers.CARRIERS)
    for cls in carriers.INSTALLED:
        assert [getattr(cls, name) for name in carriers.METHODS] == \
            [carriers.copy, carriers.iterate, carriers.self_build]


# --- when the fast paths step aside ------------------------------------------------------


def test_the_installed_scapy_copies_and_clones_the_slots_cloning_knows():
    assert slots.scapy_agrees()


@pytest.fixture
def fresh_snapshots() -> Iterator[None]:
    """Snapshots and the slot check made again in the test, and again after it."""
    def forget() -> None:
        slots.scapy_agrees.cache_clear()
        cloning._SNAPSHOTS.clear()
    forget()
    yield
    forget()


def test_a_scapy_copying_other_slots_turns_every_fast_path_off(fresh_snapshots, monkeypatch):
    scapy_copy = Packet.copy

    def copy_sent_time_too(self: Packet) -> Packet:  # as a future scapy might
        clone = scapy_copy(self)
        clone.sent_time = self.sent_time
        return clone

    monkeypatch.setattr(Packet, "copy", copy_sent_time_too)
    assert not slots.scapy_agrees()
    assert snapshot_of(BTH) is None and snapshot_of(Raw) is None
    packet = Ether() / IP() / UDP() / BTH(psn=3) / Raw(b"x")
    for layer in (packet, packet[BTH]):
        layer.sent_time = 12.5
        assert layer.copy().sent_time == 12.5
    assert list(packet)[0].sent_time is None  # clone_with is scapy's: a fresh instance's
    monkeypatch.undo()
    slots.scapy_agrees.cache_clear()
    assert slots.scapy_agrees()


class _Dispatched(LeanPacket):
    """``cls()`` gives another class (the hook picks one when no field is given)."""

    fields_desc = [ByteField("x", 0)]

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kwargs: Any) -> type[Packet]:
        return cls if kwargs or _pkt else _Other


class _Other(_Dispatched):
    pass


class _OwnSetattr(LeanPacket):
    fields_desc = [ByteField("x", 0)]

    def __setattr__(self, attr: str, val: Any) -> None:
        super().__setattr__(attr, val)


class _OwnNew(LeanPacket):
    fields_desc = [ByteField("x", 0)]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__new__(cls)


@pytest.mark.parametrize("cls", [_Dispatched, _OwnSetattr, _OwnNew], ids=lambda c: c.__name__)
def test_a_class_scapy_would_not_make_alike_is_copied_by_scapy(cls):
    assert copy_maker(cls) is None
    packet = cls(x=5) / Raw(b"x")
    with generic_paths():
        generic_copy = packet.copy()
        generic_clones = list(packet)
    assert describe(packet.copy()) == describe(generic_copy)
    assert [describe(c) for c in packet] == [describe(c) for c in generic_clones]


# --- whole frames ------------------------------------------------------------------------

_LIES = st.fixed_dictionaries({}, optional={
    (IP, "len"): st.integers(20, 200), (IP, "ihl"): st.integers(5, 15),
    (IP, "id"): st.just(RandShort()), (IP, "options"): st.just([IPOption_NOP()] * 3),
    (IPv6, "plen"): st.integers(0, 200), (UDP, "len"): st.integers(0, 200),
    (UDP, "chksum"): st.one_of(st.none(), st.just(0xBEEF)),
    (BTH, "padcnt"): st.integers(0, 3), (BTH, "pad"): st.sampled_from([b"", b"\xaa\xbb"]),
    (BTH, "icrc"): st.integers(0, 2 ** 32 - 1), (BTH, "tver"): st.integers(0, 15),
    (LRH, "pktlen"): st.integers(0, 2047), (LRH, "vcrc"): st.integers(0, 65535),
    (GRH, "paylen"): st.integers(0, 300),
})


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), opcode=st.sampled_from(sorted(opcodes())),
       seed=st.integers(0, 10 ** 6), lies=_LIES)
def test_frames_are_the_generic_frames(kind, opcode, seed, lies):
    """Fast paths on or off, the same bytes: lying lengths, explicit trailers, volatiles."""
    encapsulation, link, tags = kind
    given_values, payload = frame_values(encapsulation, link, opcode, seed=seed, tags=tags)
    packet = scapy_packet(encapsulation, given_values, payload, link)
    for (layer_cls, name), value in lies.items():
        if layer_cls in packet:
            setattr(packet[layer_cls], name, value)
    random.seed(seed)
    fast = _outcome(raw, packet)
    with generic_paths():
        random.seed(seed)
        generic = _outcome(raw, packet)
    assert fast == generic
