"""Importing ibwire.scapy changes no scapy class; its fast paths for them are an exact opt-in.

* In a fresh interpreter, every class of every scapy module loaded has the same ``__dict__``
  (each entry the same object, each list and dict the same contents) after
  ``import ibwire.scapy`` as before, except the ``payload_guess`` lists ``bind_layers``
  edits, which may only gain entries for ibwire's layers; ``conf.l2types`` only gains link
  types scapy had no layer for. Then ``fast_paths(True)`` changes exactly ``copy``,
  ``__iter__`` and ``self_build`` of the seven carriers, and ``fast_paths(False)`` and a
  ``with fast_paths()`` block left by an exception give every ``__dict__`` back as it was.
* In this process: the switch, the context manager and its nesting, the refusal when scapy's
  slots differ, the UDP port 4791 entry ahead of layers bound later, and the same bytes built
  with and without the fast paths.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.compat import raw
from scapy.error import log_runtime
from scapy.layers.dns import DNS
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers, split_bottom_up

from ibwire.scapy import AETH, BTH, bindings, carriers, cloning, fast_paths, slots
from ibwire.tables import opcodes
from tests.scapy.helpers import KINDS, frame_values, scapy_packet

SNAPSHOT = textwrap.dedent('''
    import importlib, json, sys
    preload, taken = sys.argv[1], sys.argv[2]
    for name in filter(None, preload.split(",")):
        importlib.import_module(name)
    from scapy.config import conf
    from scapy.packet import Raw
    if taken:
        conf.l2types.register(int(taken), Raw)  # a layer scapy (or a user) has for it already
    MISSING = object()

    def scapy_modules():
        return {n: m for n, m in list(sys.modules.items())
                if m is not None and (n == "scapy" or n.startswith("scapy."))}

    def scapy_classes():
        found = {}
        for module in scapy_modules().values():
            for value in list(vars(module).values()):
                if isinstance(value, type) and str(value.__module__).startswith("scapy"):
                    found[value] = f"{value.__module__}.{value.__qualname__}"
        return found

    def contents(value):
        if type(value) in (list, tuple):
            return list(value)
        if isinstance(value, dict):
            return dict(value)
        return None

    def snapshot():
        return {cls: {k: (v, contents(v)) for k, v in vars(cls).items()}
                for cls in scapy_classes()}

    def ours(value):
        return str(getattr(value, "__module__", "")).startswith("ibwire.")

    def same(old, new):
        if type(old) is list:
            return len(old) == len(new) and all(a is b for a, b in zip(old, new))
        return old.keys() == new.keys() and all(old[k] is new[k] for k in old)

    def differences(before):
        found = []
        for cls, entries in before.items():
            now = dict(vars(cls))
            for key in entries.keys() | now.keys():
                old, kept = entries.get(key, (MISSING, None))
                new = now.get(key, MISSING)
                where = f"{cls.__module__}.{cls.__qualname__}.{key}"
                if key == "payload_guess" and old is not MISSING and new is not MISSING:
                    if not same(old, [e for e in new if not ours(e[1])]):
                        found.append(where)
                elif old is not new:
                    found.append(where)
                elif kept is not None and not same(kept, contents(new)):
                    added = contents(new).keys() - kept.keys() if isinstance(kept, dict) \\
                        else None  # scapy's caches keyed by class: only ours may be added
                    if not (added and all(map(ours, added))
                            and same(kept, {k: new[k] for k in kept})):
                        found.append(where)
        return sorted(found)

    before = snapshot()
    modules = set(scapy_modules())
    l2 = (dict(conf.l2types.num2layer), dict(conf.l2types.layer2num))
    import ibwire.scapy as ibwire_scapy
    report = {"new_modules": sorted(set(scapy_modules()) - modules),
              "classes": len(before), "import": differences(before)}
    report["l2types_kept"] = all(conf.l2types.num2layer.get(k) is v for k, v in l2[0].items()) \\
        and all(conf.l2types.layer2num.get(k) == v for k, v in l2[1].items())
    report["l2types_added"] = {k: f"{v.__module__}.{v.__name__}"
                               for k, v in conf.l2types.num2layer.items() if k not in l2[0]}
    report["on"] = differences(before) if ibwire_scapy.fast_paths(True).active else None
    ibwire_scapy.fast_paths(False)
    report["off"] = differences(before)
    try:
        with ibwire_scapy.fast_paths():
            report["in_block"] = len(differences(before))
            raise KeyError("inside the block")
    except KeyError:
        report["after_exception"] = differences(before)
    print(json.dumps(report))
''')
ETHER = {"dst": "02:00:00:00:00:02", "src": "02:00:00:00:00:01"}
CARRIER_METHODS = sorted(f"{cls.__module__}.{cls.__qualname__}.{name}"
                         for cls in carriers.CARRIERS for name in carriers.METHODS)


def _run(preload: str, taken: str = "") -> dict:
    result = subprocess.run([sys.executable, "-c", SNAPSHOT, preload, taken],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _modules_ibwire_scapy_loads() -> str:
    code = ("import sys; import ibwire.scapy; print(','.join(n for n in sys.modules "
            "if n == 'scapy' or n.startswith('scapy.')))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


@pytest.mark.parametrize("preload", ["scapy.all", "needed", "scapy.all,scapy.contrib.roce"])
def test_import_changes_no_scapy_class(preload):
    report = _run(_modules_ibwire_scapy_loads() if preload == "needed" else preload)
    assert report["new_modules"] == []  # every scapy class was in the snapshot
    assert report["classes"] > 100
    assert report["import"] == []
    assert report["l2types_kept"]
    assert report["l2types_added"] == {"247": "ibwire.scapy.link.LRH",
                                       "197": "ibwire.scapy.pcap.ERF"}
    assert report["on"] == CARRIER_METHODS
    assert report["off"] == []
    assert report["in_block"] == len(CARRIER_METHODS)
    assert report["after_exception"] == []


@pytest.mark.parametrize("taken", [247, 197])
def test_a_link_type_scapy_has_is_not_taken_over(taken):
    report = _run("scapy.all", str(taken))
    assert report["import"] == [] and report["l2types_kept"]
    assert taken not in map(int, report["l2types_added"]) and len(report["l2types_added"]) == 1


# --- in this process ------------------------------------------------------------------------


def _methods(cls: type[Packet]) -> list[object]:
    return [cls.__dict__.get(name) for name in carriers.METHODS]


def test_off_by_default_and_udp_keeps_scapys_guess():
    assert not carriers.enabled() and carriers.INSTALLED == []
    for cls in carriers.CARRIERS:
        assert _methods(cls) == [None] * len(carriers.METHODS)
    assert "guess_payload_class" not in UDP.__dict__
    assert UDP.guess_payload_class is Packet.guess_payload_class
    assert UDP.payload_guess[0] == ({"dport": 4791}, BTH)


def test_on_replaces_the_methods_and_off_restores_scapys():
    originals = {cls: [getattr(cls, name) for name in carriers.METHODS]
                 for cls in carriers.CARRIERS}
    dicts = {cls: dict(cls.__dict__) for cls in carriers.CARRIERS}
    switched = fast_paths(True)
    try:
        assert switched.active and not switched.previous and carriers.enabled()
        for cls in carriers.CARRIERS:
            assert _methods(cls) == [carriers.copy, carriers.iterate, carriers.self_build]
    finally:
        fast_paths(False)
    assert not carriers.enabled()
    for cls in carriers.CARRIERS:
        assert [getattr(cls, name) for name in carriers.METHODS] == originals[cls]
        assert all(a is b for a, b in zip(
            [getattr(cls, name) for name in carriers.METHODS],
            [getattr(Packet, name) for name in carriers.METHODS], strict=True))
        assert dict(cls.__dict__) == dicts[cls]


def test_the_context_manager_restores_the_previous_setting_on_exception():
    with pytest.raises(KeyError), fast_paths() as block:
        assert block.active and Ether.__dict__["copy"] is carriers.copy
        raise KeyError
    assert not carriers.enabled() and "copy" not in Ether.__dict__
    with fast_paths():
        with fast_paths(False) as inner:
            assert inner.previous and not inner.active and "copy" not in UDP.__dict__
        assert UDP.__dict__["self_build"] is carriers.self_build  # on again after the block
    assert not carriers.enabled()


def test_a_method_someone_else_put_there_is_left_alone():
    def theirs(self: Packet) -> bytes:
        return Packet.self_build(self)

    try:
        with fast_paths():
            IP.self_build = theirs  # on top of ours
        assert IP.__dict__["self_build"] is theirs and "copy" not in IP.__dict__
        with fast_paths():  # a class with its own method gets none of ours
            assert IP not in carriers.INSTALLED and "copy" not in IP.__dict__
            assert UDP in carriers.INSTALLED
        assert IP.__dict__["self_build"] is theirs
    finally:
        del IP.self_build
    assert _methods(IP) == [None] * 3 and not carriers.enabled()


@pytest.fixture
def scapy_copying_other_slots(monkeypatch) -> Iterator[None]:
    """A scapy whose Packet.copy sets one slot more than ibwire.scapy.slots knows."""
    scapy_copy = Packet.copy

    def copy_sent_time_too(self: Packet) -> Packet:
        clone = scapy_copy(self)
        clone.sent_time = self.sent_time
        return clone

    slots.scapy_agrees.cache_clear()
    cloning._SNAPSHOTS.clear()
    monkeypatch.setattr(Packet, "copy", copy_sent_time_too)
    yield
    monkeypatch.undo()
    slots.scapy_agrees.cache_clear()
    cloning._SNAPSHOTS.clear()


def test_refused_when_scapy_copies_other_slots(scapy_copying_other_slots):
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    log_runtime.addHandler(handler)
    try:
        switched = fast_paths(True)
    finally:
        log_runtime.removeHandler(handler)
    assert not switched.active and not carriers.enabled()
    assert all(_methods(cls) == [None] * 3 for cls in carriers.CARRIERS)
    assert any("fast paths not turned on" in message for message in seen)


# --- UDP port 4791 ----------------------------------------------------------------------------


def _ack_from(sport: int) -> bytes:
    return raw(Ether(**ETHER) / IP() / UDP(sport=sport, dport=4791) / BTH(opcode="RC_ACKNOWLEDGE")
               / AETH(syndrome="ACK_UNLIMITED"))


def test_port_53_ack_is_bth_by_default():
    assert not carriers.enabled()
    packet = Ether(_ack_from(53))
    assert type(packet[UDP].payload) is BTH and DNS not in packet
    assert packet[BTH].icrc_ok is True and packet[AETH].syndrome == 0x1F


def test_a_layer_bound_later_does_not_take_port_4791(monkeypatch):
    monkeypatch.setattr(UDP, "payload_guess", list(UDP.payload_guess))  # put back after

    class Later(Packet):
        name = "Later"

    bind_layers(UDP, Later, dport=4791)  # appended, as scapy binds
    bind_layers(UDP, Later, sport=53)
    assert type(Ether(_ack_from(53))[UDP].payload) is BTH
    # one that puts itself first wins; installing again puts ours first again
    UDP.payload_guess = [({"dport": 4791}, Later), *UDP.payload_guess]
    assert type(Ether(_ack_from(53))[UDP].payload) is Later
    bindings.install()
    assert type(Ether(_ack_from(53))[UDP].payload) is BTH
    assert [cls for fval, cls in UDP.payload_guess if cls is BTH] == [BTH]  # not twice
    split_bottom_up(UDP, Later)
    split_bottom_up(UDP, BTH, dport=4791)  # the user's choice: scapy's order decides
    udp = Ether(_ack_from(53))[UDP]
    # DNS (sport 53), unless a module bound dport 4791 before it (contrib.roce, loaded by
    # other tests of this process)
    first = next(cls for fval, cls in UDP.payload_guess
                 if all(udp.getfieldval(k) == v for k, v in fval.items()))
    assert first is not BTH and type(udp.payload) is first
    assert first in (DNS, *(cls for fval, cls in UDP.payload_guess if fval == {"dport": 4791}))


# --- the same bytes either way --------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(KINDS), opcode=st.sampled_from(sorted(opcodes())),
       seed=st.integers(0, 10 ** 6))
def test_bytes_are_the_same_with_and_without_fast_paths(kind, opcode, seed):
    encapsulation, link, tags = kind
    given_values, payload = frame_values(encapsulation, link, opcode, seed=seed, tags=tags)
    default = raw(scapy_packet(encapsulation, given_values, payload, link))
    with fast_paths():
        fast = raw(scapy_packet(encapsulation, given_values, payload, link))
    assert fast == default
    if link == "ethernet":  # dissected and built again
        with fast_paths():
            again = raw(Ether(fast) / Raw(b"x"))
        assert again == raw(Ether(default) / Raw(b"x"))
