"""Cheap instances of scapy layers: construction, ``copy``, ``clone_with`` and ``__iter__``.

Composing with ``/`` copies both sides, and building clones every layer once more (scapy's
``Packet.__iter__``, which fixes volatile values); each copy or clone starts from ``cls()``, a
full ``Packet.__init__``, then sets a dozen attributes through ``Packet.__setattr__``. Here a
new instance gets each slot set once, straight through its descriptor: the values a fresh
``Packet.__init__`` instance holds come from a :class:`Snapshot` of one (shared values
shared, empty per-instance dicts and lists made anew), the others as ``Packet.copy`` and
``Packet.clone_with`` set them. One difference: a ``default_fields`` that is the class's own
dict (the one every ``Packet.__init__`` instance shares, which scapy only reads) stays shared
where scapy's copies copy it. A layer whose values cannot make several packets nor change
between builds (:func:`is_plain`) is iterated to its one clone without scapy's per-field
generators.

:class:`LeanPacket` is the base of ibwire's layers. They copy and iterate their payload chain
the same way when its classes use scapy's generic ``copy``/``clone_with``/``__iter__`` (a
``Raw`` payload, for instance): :func:`copy_of`, :func:`clones`. Anything else goes to the
class's own code or scapy's: ``cls(...)`` with bytes to dissect or with other than field
names, a class with its own ``__init__``, ``__new__``, ``__setattr__`` or metaclass call, a
class whose fresh instance the snapshot cannot describe (a per-instance value that is neither
an empty dict/list nor immutable, in a slot that copies and clones do not set anyway), a class
whose ``dispatch_hook`` would not make ``cls()`` an instance of ``cls``, a scapy whose
``copy``/``clone_with`` set other slots than :mod:`ibwire.scapy.slots` knows (then nothing is
made here), and, for iteration, a field value that could make several packets (anything but
:data:`PLAIN`, or a list in a list field; a volatile such as ``RandShort()``, a range tuple, a
``Net``). tests/scapy/test_fast_paths.py checks that these instances, copies and clones equal
scapy's, slot by slot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import MemberDescriptorType
from typing import Any

from scapy.base_classes import Packet_metaclass
from scapy.fields import Field, FlagValue
from scapy.packet import NoPayload, Packet, Raw, RawVal
from scapy.volatile import VolatileValue

from ibwire.scapy.slots import CLONED, COPIED, scapy_agrees
from scapy import base_classes
from scapy import fields as scapy_fields

_ScopedIP = getattr(base_classes, "_ScopedIP", None)

#: Value types that cannot change in place, nor make several packets in ``__iter__``.
PLAIN = frozenset({int, str, bytes, bool, float, type(None)})
#: Value types ``Packet.__iter__`` takes as one value (its ``SetGen`` yields them as they are):
#: the plain ones, flags, and the str of an IP address field (scapy >= 2.6).
ONE_VALUE = PLAIN | {FlagValue, *([_ScopedIP] if _ScopedIP is not None else [])}
#: Slots a copy and a clone both take from the original: what a fresh instance holds there
#: does not matter to them (IP's ``fields``, for instance, holds a fresh ``options`` list).
REPLACED = frozenset(COPIED) & frozenset(CLONED)

Setter = Callable[[Any, Any], None]


def _setter(cls: type, slot: str) -> Setter:
    """A function setting ``slot`` of an instance of ``cls``, by-passing ``__setattr__``."""
    for klass in cls.__mro__:
        descriptor = klass.__dict__.get(slot)
        if descriptor is not None:
            if isinstance(descriptor, MemberDescriptorType):
                return descriptor.__set__
            break
    return lambda obj, value: object.__setattr__(obj, slot, value)


def _keeps_ints(field: Any) -> bool:
    """True if ``field.any2i`` returns any ``int`` unchanged (scapy's numbers and enums)."""
    if not isinstance(field, Field):
        return False  # a container (Emph, ConditionalField...): any2i is its field's
    kind = type(field)
    if kind.any2i is Field.any2i:
        return kind.h2i is Field.h2i
    enum = getattr(scapy_fields, "_EnumField", None)
    return enum is not None and kind.any2i is enum.any2i and kind.any2i_one is enum.any2i_one


class Snapshot:
    """How ``Packet.__init__`` leaves a fresh instance of one class, without field values."""

    __slots__ = ("new", "copy", "clone", "fresh", "fresh_copy", "fresh_clone", "copied",
                 "cloned", "set", "order", "as_is", "plain_defaults", "fixed_defaults",
                 "new_ok", "hooked")

    def __init__(self, cls: type[Packet], shared: dict[str, Any], fresh: dict[str, type],
                 replaced: frozenset[str] = frozenset()) -> None:
        self.set = {slot: _setter(cls, slot) for slot in (*shared, *fresh, *replaced)}
        #: False if a fresh instance holds per-instance values the snapshot does not describe
        #: (in slots copies and clones replace): new instances are then made by scapy
        self.new_ok = not replaced
        #: True if ``cls()`` goes through the class's ``dispatch_hook`` first
        self.hooked = "dispatch_hook" in cls.__dict__
        #: (setter, value) of the slots set alike in every new instance, copy, clone
        self.new = tuple((self.set[slot], value) for slot, value in shared.items())
        self.copy = tuple((self.set[s], v) for s, v in shared.items() if s not in COPIED)
        self.clone = tuple((self.set[s], v) for s, v in shared.items() if s not in CLONED)
        #: (setter, type) of the slots each new instance (copy, clone) gets an empty
        #: dict or list of its own in
        self.fresh = tuple((self.set[slot], factory) for slot, factory in fresh.items())
        self.fresh_copy = tuple((self.set[s], f) for s, f in fresh.items() if s not in COPIED)
        self.fresh_clone = tuple((self.set[s], f) for s, f in fresh.items() if s not in CLONED)
        #: setters of the slots a copy (a clone) takes from the original, in COPIED (CLONED)
        #: order
        self.copied = tuple(self.set[slot] for slot in COPIED)
        self.cloned = tuple(self.set[slot] for slot in CLONED)
        #: field name -> index in fields_desc
        self.order = {f.name: i for i, f in enumerate(cls.fields_desc)}
        #: fields whose ``any2i`` gives an ``int`` back as it is
        self.as_is = frozenset(f.name for f in cls.fields_desc if _keeps_ints(f))
        defaults = shared.get("default_fields", {})
        #: the class's default_fields, shared by fresh instances, when every value is plain
        self.plain_defaults = defaults if all(type(v) in PLAIN for v in defaults.values()) \
            else None
        #: the class's default_fields, when no value is volatile (iteration leaves them be)
        self.fixed_defaults = defaults if not any(
            isinstance(v, VolatileValue) for v in defaults.values()) else None


_SNAPSHOTS: dict[type[Packet], Snapshot | None] = {}
_set_underlayer = _setter(Packet, "underlayer")


def _made_as_packet(cls: type[Packet]) -> bool:
    """True if ``cls()`` is ``Packet.__init__``'s instance of ``cls`` (Raw's ``__init__`` only
    converts a _pkt that is not bytes), set up without ``__setattr__`` mattering."""
    return (cls.__init__ in (Packet.__init__, LeanPacket.__init__, Raw.__init__)
            and cls.__new__ is object.__new__ and cls.__setattr__ is Packet.__setattr__
            and type(cls).__call__ is Packet_metaclass.__call__)


def _snapshot(cls: type[Packet]) -> Snapshot | None:
    if not scapy_agrees() or not _made_as_packet(cls):
        return None
    made = []
    for _ in range(2):
        obj = object.__new__(cls)
        Packet.__init__(obj, _internal=1)
        made.append(obj)
    first, second = made
    shared: dict[str, Any] = {}
    fresh: dict[str, type] = {}
    replaced = set()
    for slot in sorted(getattr(cls, "__all_slots__", ())):
        if not hasattr(first, slot):
            continue  # left unset by Packet.__init__: left unset here too
        value = getattr(first, slot)
        if value is getattr(second, slot) or type(value) in PLAIN:
            shared[slot] = value
        elif type(value) in (dict, list) and not value:
            fresh[slot] = type(value)
        elif slot in REPLACED:
            replaced.add(slot)
        else:
            return None
    if first.__dict__ or not set(COPIED) | set(CLONED) <= \
            shared.keys() | fresh.keys() | replaced:
        return None
    return Snapshot(cls, shared, fresh, frozenset(replaced))


def snapshot_of(cls: type[Packet]) -> Snapshot | None:
    """The snapshot of ``cls`` (None: its instances are made by scapy's code)."""
    try:
        return _SNAPSHOTS[cls]
    except KeyError:
        _SNAPSHOTS[cls] = found = _snapshot(cls)
        return found


def copy_maker(cls: type[Packet]) -> Snapshot | None:
    """The snapshot that copies and clones of ``cls`` are made from, if ``cls()`` (what
    scapy's ``copy`` and ``clone_with`` start from) gives an instance of ``cls`` now."""
    snap = snapshot_of(cls)
    if snap is not None and snap.hooked:
        try:
            if cls.dispatch_hook() is not cls:  # type: ignore[attr-defined]
                return None
        except Exception:  # scapy's call would make a Raw layer: leave it to scapy
            return None
    return snap


def is_plain(layer: Packet) -> bool:
    """True if ``Packet.__iter__`` makes one clone of ``layer`` per payload variant, taking
    its field values as they are: no value it iterates over can make several packets."""
    fieldtype = layer.fieldtype
    for name, value in layer.fields.items():
        if type(value) not in ONE_VALUE and not (type(value) is list and name in fieldtype
                                                 and fieldtype[name].islist):
            return False  # a list in a list field is one value (scapy's SetGen([elt]))
    for value in layer.overloaded_fields.values():
        if isinstance(value, VolatileValue):
            return False
    defaults = layer.default_fields
    snap = _SNAPSHOTS.get(type(layer))
    return (snap is not None and defaults is snap.fixed_defaults) or \
        not any(isinstance(v, VolatileValue) for v in defaults.values())


def new_copy(layer: Packet, snap: Snapshot) -> Any:
    """What ``Packet.copy`` gives for ``layer``, whose class has the snapshot ``snap``."""
    clone = object.__new__(type(layer))
    for setter, value in snap.copy:
        setter(clone, value)
    for setter, factory in snap.fresh_copy:
        setter(clone, factory())
    copy_fields = _fields_copier(layer)
    payload = layer.payload
    if type(payload) is not NoPayload:  # NoPayload.copy() is itself
        payload = copy_of(payload)
    for setter, value in zip(snap.copied, (  # COPIED, in order
            copy_fields(layer.fields), copy_fields(layer.default_fields),
            layer.overloaded_fields.copy(), layer.underlayer, layer.parent, layer.explicit,
            layer.raw_packet_cache, copy_fields(layer.raw_packet_cache_fields), layer.wirelen,
            layer.post_transforms[:], payload, layer.time, layer.comments, layer.direction,
            layer.sniffed_on), strict=True):
        setter(clone, value)
    payload.add_underlayer(clone)
    return clone


def new_clone(layer: Packet, snap: Snapshot, payload: Any, fields: dict[str, Any]) -> Any:
    """What ``Packet.clone_with(payload, **fields)`` gives for ``layer`` (snapshot ``snap``)."""
    clone = object.__new__(type(layer))
    for setter, value in snap.clone:
        setter(clone, value)
    for setter, factory in snap.fresh_clone:
        setter(clone, factory())
    copy_fields = _fields_copier(layer)
    for setter, value in zip(snap.cloned, (  # CLONED, in order
            1, fields, copy_fields(layer.default_fields), layer.overloaded_fields.copy(),
            layer.time, layer.underlayer, layer.parent, layer.post_transforms,
            layer.raw_packet_cache, copy_fields(layer.raw_packet_cache_fields), layer.wirelen,
            layer.comments, layer.sniffed_on, layer.direction), strict=True):
        setter(clone, value)
    if payload is not None:
        clone.add_payload(payload)
    return clone


def _fields_copier(layer: Packet) -> Callable[[Any], Any]:
    """``layer.copy_fields_dict``, or :func:`copy_fields` where that is scapy's own."""
    if type(layer).copy_fields_dict is Packet.copy_fields_dict:
        return lambda fields: copy_fields(layer, fields)
    return layer.copy_fields_dict


def copy_fields(layer: Packet, fields: dict[str, Any] | None) -> dict[str, Any] | None:
    """``Packet.copy_fields_dict``, without a ``do_copy`` call for values that cannot change
    in place, and keeping the class's all-plain defaults shared."""
    if fields is None:
        return None
    snap = _SNAPSHOTS.get(type(layer))
    if snap is not None and fields is snap.plain_defaults:
        return fields  # the class's defaults, shared as by every fresh instance
    fieldtype = layer.fieldtype
    return {name: value if type(value) in PLAIN else fieldtype[name].do_copy(value)
            for name, value in fields.items()}


#: Per method name: the functions that do what scapy's generic ``Packet`` method does
#: (scapy's own, LeanPacket's, :mod:`ibwire.scapy.carriers`'); see :func:`count_as_generic`.
_GENERIC: dict[str, set[Any]] = {}
_LEAN: dict[tuple[type[Packet], str], bool] = {}


def count_as_generic(method: str, function: Any) -> None:
    """Declare that ``function``, as method ``method``, does what ``Packet``'s does."""
    _GENERIC.setdefault(method, set()).add(function)
    _LEAN.clear()


def has_generic(cls: type[Packet], method: str) -> bool:
    """True if ``cls`` has scapy's generic ``method`` (or one declared alike)."""
    try:
        return _LEAN[cls, method]
    except KeyError:
        found = getattr(cls, method)
        lean = found is getattr(Packet, method) or found is getattr(LeanPacket, method) \
            or found in _GENERIC.get(method, ())
        _LEAN[cls, method] = lean
        return lean


def copy_of(layer: Packet) -> Any:
    """``layer.copy()``, made here when its class copies as scapy's ``Packet.copy`` does."""
    cls = type(layer)
    snap = copy_maker(cls) if has_generic(cls, "copy") else None
    return layer.copy() if snap is None else new_copy(layer, snap)


def clones(layer: Packet) -> Iterator[Packet]:
    """``iter(layer)``; made here (:func:`lean_iter`) when its class iterates as ``Packet``."""
    return lean_iter(layer) if has_generic(type(layer), "__iter__") else iter(layer)


def lean_iter(layer: Packet) -> Iterator[Packet]:
    """What ``Packet.__iter__`` gives: made here when the class clones as scapy's ``Packet``
    does and every value is plain, else by ``Packet.__iter__`` itself."""
    snap = copy_maker(type(layer)) if has_generic(type(layer), "clone_with") else None
    if snap is None or not is_plain(layer):
        return Packet.__iter__(layer)
    return _plain_clones(layer, snap)


def _plain_clones(layer: Packet, snap: Snapshot) -> Iterator[Packet]:
    """What ``Packet.__iter__`` yields when every value is plain: one clone per payload."""
    fields = layer.fields
    in_order = layer.explicit or layer.raw_packet_cache is not None
    payload = layer.payload
    for variant in (None,) if isinstance(payload, NoPayload) else clones(payload):
        # Packet.__iter__ sets them in reverse order unless explicit
        done = dict(fields) if in_order else {name: fields[name] for name in reversed(fields)}
        yield new_clone(layer, snap, variant, done)


class LeanPacket(Packet):
    """A scapy layer whose instances, copies and build clones skip scapy's generic walks."""

    def __init__(self, _pkt: bytes = b"", **kwargs: Any) -> None:
        snap = snapshot_of(type(self))
        if _pkt or snap is None or not snap.new_ok or not kwargs.keys() <= snap.order.keys():
            super().__init__(_pkt, **kwargs)
            return
        for setter, value in snap.new:
            setter(self, value)
        for setter, factory in snap.fresh:
            setter(self, factory())
        snap.set["time"](self, time.time())
        if not kwargs:
            return
        fields = self.fields
        fieldtype = self.fieldtype
        as_is = snap.as_is
        names = sorted(kwargs, key=snap.order.__getitem__) if len(kwargs) > 1 else kwargs
        for name in names:  # in declaration order, as Packet.__init__
            value = kwargs[name]
            if type(value) is int and name in as_is:
                fields[name] = value
            else:
                fields[name] = value if isinstance(value, RawVal) else \
                    fieldtype[name].any2i(self, value)

    def copy_fields_dict(self, fields: dict[str, Any] | None) -> dict[str, Any] | None:
        """As scapy's, without a ``do_copy`` call for values that cannot change in place."""
        return copy_fields(self, fields)

    def copy(self) -> Any:
        """``Packet.copy``: a deep copy, payload included."""
        snap = copy_maker(type(self))
        return super().copy() if snap is None else new_copy(self, snap)

    def clone_with(self, payload: Any = None, **kargs: Any) -> Any:
        """``Packet.clone_with``: an explicit clone holding ``kargs`` as its field values."""
        snap = copy_maker(type(self))
        if snap is None:
            return super().clone_with(payload, **kargs)
        return new_clone(self, snap, payload, kargs)

    def add_underlayer(self, underlayer: Packet) -> None:
        _set_underlayer(self, underlayer)  # as Packet's, without Packet.__setattr__

    def __iter__(self) -> Iterator[Packet]:
        return lean_iter(self)
