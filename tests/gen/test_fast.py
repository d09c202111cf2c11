"""The fast path (closed form, templates patched in numpy, CRCs by linearity) gives the very
bytes, timestamps and manifest the simulation gives, wherever it is taken; and it is not
taken where the simulation could do something it does not model."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ibwire.gen.fast as fast
from ibwire.gen import Fault, Generation, Link, QpSpec, Scenario, write_capture

ENCAPS = ["rocev2_ipv4", "rocev2_ipv6", "rocev1", "ib_local", "ib_global"]


def lossless(encapsulation: str = "rocev2_ipv4", tap: str = "requester", **kw) -> Scenario:
    qps = (QpSpec("write", 5000, iters=7, start_psn=0xFFFFF0),        # wraps
           QpSpec("send_imm", 300, iters=9, mtu=256),
           QpSpec("write_imm", 2048, iters=5, ack_every=3, mtu=512),
           QpSpec("send", 200, iters=4, transport="UD"),
           QpSpec("send_inv", 3000, iters=3),
           QpSpec("write", 3001, iters=3, transport="UC", mtu=1024),
           QpSpec("write_imm", 4000, iters=4, transport="XRC", ack_every=2),   # XRC: fast too
           QpSpec("send", 700, iters=5, transport="XRC", mtu=256, xrc_srq=0xABCDE))
    vlans = ((5, 1), (300, 0)) if not encapsulation.startswith("ib_") else ()
    return Scenario(qps=qps, encapsulation=encapsulation, tap=tap, vlans=vlans, **kw)


def both(scenario: Scenario) -> tuple[tuple[list, dict], tuple[list, dict]]:
    slow = Generation(scenario, fast=False)
    quick = Generation(scenario)
    assert quick.plan() is not None
    return (list(slow), slow.manifest), (list(quick), quick.manifest)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_fast_frames_are_the_simulated_ones(encapsulation, tap):
    (slow, slow_manifest), (quick, quick_manifest) = both(lossless(encapsulation, tap))
    assert len(slow) > 100
    assert {q["transport"] for q in quick_manifest["qps"]} == {"RC", "UC", "UD", "XRC"}
    assert quick == slow
    assert quick_manifest == slow_manifest


def test_batches_carry_frames_seen_later_across_their_boundary(monkeypatch):
    monkeypatch.setattr(fast, "BATCH", 7)
    scenario = Scenario(qps=(QpSpec("write", 1024, iters=300), QpSpec("send", 100, iters=200)),
                        link=Link(delay_ns=20_000))   # many ACKs in flight past each batch
    (slow, sm), (quick, qm) = both(scenario)
    assert quick == slow and qm == sm


@pytest.mark.parametrize("mapped", ["yes", "no mmap", "no posix_fallocate"])
def test_written_capture_is_the_same_file(tmp_path, monkeypatch, mapped):
    """The fast path lays its batches out in the file's mapped pages (at offsets that are not
    page-aligned, batch after batch), or, where the file cannot be mapped or its blocks
    reserved (macOS has no posix_fallocate), writes them."""
    import mmap as mmap_module
    import os

    calls = []
    real = mmap_module.mmap

    def counted(*args, **kw):
        calls.append(kw.get("offset", 0))
        if mapped == "no mmap":
            raise OSError(19, "no mmap here")
        return real(*args, **kw)

    monkeypatch.setattr(mmap_module, "mmap", counted)
    if mapped == "no posix_fallocate":
        monkeypatch.delattr(os, "posix_fallocate")
    monkeypatch.setattr(fast, "BATCH", 16)
    scenario = lossless("rocev2_ipv4", "switch")
    a, b = tmp_path / "fast.pcap", tmp_path / "slow.pcap"
    assert write_capture(str(a), scenario) == write_capture(str(b), scenario, fast=False)
    assert a.read_bytes() == b.read_bytes()
    if mapped == "no posix_fallocate":
        assert not calls
    else:
        assert len(calls) > 5 and len(set(calls)) > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast.pcap", "slow.pcap"]


@pytest.mark.parametrize("scenario", [
    Scenario(qps=(QpSpec("write", 1024, iters=3),), faults=(Fault("drop", 0, 1),)),
    Scenario(qps=(QpSpec("read", 1024, iters=3),)),
    Scenario(qps=(QpSpec("fetch_add", iters=3),)),
    Scenario(qps=(QpSpec("read", 1024, iters=3, transport="XRC"),)),
    Scenario(qps=(QpSpec("send", 100, iters=3, transport="XRC"),), faults=(Fault("rnr", 0, 1),)),
    Scenario(qps=(QpSpec("send", 0, iters=3),), link=Link(gbps=1)),   # shorter than an ACK
    Scenario(qps=(QpSpec("write", 1 << 20, iters=2, timeout=1),)),    # the timer would fire
    Scenario(qps=(QpSpec("write", 1024, iters=3, window=2),)),
])
def test_not_taken_where_the_simulation_does_more(scenario):
    assert Generation(scenario).plan() is None


def test_manifest_does_not_depend_on_the_observer_batches(monkeypatch):
    """The simulation feeds its rows to the observer a batch at a time (flat memory)."""
    import ibwire.gen.run as run
    from tests.gen.test_gen import mixed

    scenario = mixed(tap="switch")
    whole = Generation(scenario)
    list(whole)
    monkeypatch.setattr(run, "OBSERVED_BATCH", 3)
    pieces = Generation(scenario)
    list(pieces)
    assert pieces.manifest == whole.manifest
    assert sum(q["retransmitted_packets"] for q in whole.manifest["qps"]) > 0


def test_times_past_two_seconds(monkeypatch):
    """Sort keys are relative to each batch: a run longer than 2^31 ns stays in order."""
    monkeypatch.setattr(fast, "BATCH", 7)
    scenario = Scenario(qps=(QpSpec("write", 1024, iters=300),), link=Link(gbps=0.001))
    (slow, sm), (quick, qm) = both(scenario)
    assert slow[-1][0] > 1 << 31
    assert quick == slow and qm == sm


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_templated_frames_are_the_built_ones_with_faults(encapsulation, tap):
    """Simulated (faulted) conversations: frames patched from templates (``fast``) are the
    frames built field by field (``fast=False``), bad ICRCs, CE marks, NAKs, RNR NAKs, CNPs,
    READ responses and atomics included."""
    from tests.gen.test_gen import mixed

    scenario = mixed(encapsulation, tap)
    slow, quick = Generation(scenario, fast=False), Generation(scenario)
    assert quick.plan() is None
    slow_records, quick_records = list(slow), list(quick)
    assert len(slow_records) > 50
    assert quick_records == slow_records
    assert quick.manifest == slow.manifest
    assert quick.framer._kinds and not slow.framer._kinds   # the templates were used


def targeted(encapsulation: str = "rocev2_ipv4", tap: str = "requester", **kw) -> Scenario:
    """:func:`lossless` with one fault of each targeted kind, early on."""
    faults = (Fault("drop", 0, 3), Fault("corrupt", 4, 2), Fault("lose_ack", 1, 3),
              Fault("rnr", 2, 4, timer=2), Fault("drop", 7, 1), Fault("drop", 5, 1))
    if encapsulation.startswith("rocev2"):
        faults += (Fault("ecn", 0, 6),)
    base = lossless(encapsulation, tap, **kw)
    qps = tuple(replace(q, iters=q.iters * 8) for q in base.qps)
    return replace(base, qps=qps, faults=faults)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ENCAPS)
def test_fast_plan_takes_over_once_the_faults_are_over(encapsulation, tap):
    """A faulted conversation is simulated until its faults are over and the traffic is
    steady again, then the fast plan goes on from there (the records still on their way
    merged in): the very records and manifest of simulating it all."""
    scenario = targeted(encapsulation, tap)
    slow, quick = Generation(scenario, fast=False), Generation(scenario)
    slow_records, quick_records = list(slow), list(quick)
    assert quick.handed_over is not None and slow.handed_over is None
    assert 20 < quick.handed_over < len(quick_records) - 50
    assert quick_records == slow_records
    assert quick.manifest == slow.manifest
    if tap == "switch":   # it sees every fault, some in the records still on their way
        assert all(f["record"] is not None for f in quick.manifest["faults"])


@pytest.mark.parametrize("delay", [0, 300, 20_000])
def test_take_over_with_records_on_their_way_across_batches(monkeypatch, delay):
    monkeypatch.setattr(fast, "BATCH", 5)
    scenario = Scenario(qps=(QpSpec("write", 3000, iters=150), QpSpec("send", 100, iters=300),
                             QpSpec("write_imm", 1024, iters=100, transport="UC")),
                        faults=(Fault("drop", 0, 7), Fault("lose_ack", 1, 20),
                                Fault("corrupt", 1, 30)),
                        link=Link(delay_ns=delay), tap="switch")
    slow, quick = Generation(scenario, fast=False), Generation(scenario)
    assert list(quick) == list(slow)
    assert quick.manifest == slow.manifest and quick.handed_over is not None


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_take_over_waits_for_the_cnp_of_a_mark_on_its_way(tap):
    """A CE-marked request still on its way draws a CNP, which goes before the ACKs on the
    responder's port: the plan takes over only after it."""
    scenario = Scenario(qps=(QpSpec("write", 1024, iters=200), QpSpec("send", 64, iters=300)),
                        faults=(Fault("ecn", 0, 10), Fault("ecn", 1, 12)), tap=tap,
                        link=Link(delay_ns=5_000))
    slow, quick = Generation(scenario, fast=False), Generation(scenario)
    assert list(quick) == list(slow)
    assert quick.manifest == slow.manifest and quick.handed_over is not None


def test_no_take_over_while_faults_may_come():
    """Rate faults may strike any packet: the simulation plays to the end."""
    scenario = Scenario(qps=(QpSpec("write", 1024, iters=120),),
                        faults=(Fault("drop", rate=0.05),), seed=1)
    quick = Generation(scenario)
    records = list(quick)
    assert quick.handed_over is None
    assert records == list(Generation(scenario, fast=False))


def test_written_capture_with_a_take_over_is_the_same_file(tmp_path, monkeypatch):
    """Simulated records, then the plan's batches laid out in the file, then the CM's."""
    monkeypatch.setattr(fast, "BATCH", 16)
    scenario = replace(targeted("rocev2_ipv4", "switch"), cm=True)
    a, b = tmp_path / "fast.pcap", tmp_path / "slow.pcap"
    progress: list[int] = []
    assert write_capture(str(a), scenario, on_progress=progress.append) == write_capture(
        str(b), scenario, fast=False)
    assert a.read_bytes() == b.read_bytes()
