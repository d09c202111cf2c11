"""Rate faults (``--drop rate=R`` ...): whatever path ``Generation`` takes for them (``fast``,
the default: the closed-form recovery rounds of :mod:`ibwire.gen.recovery` where they apply),
its records and manifest are those of the per-packet transport model with frames built field
by field (``fast=False``), over a grid of seeds, verbs, sizes, fault kinds and rates. A fast
path that diverges from the model fails here."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from ibwire.gen import Fault, Generation, Link, QpSpec, Scenario, write_capture
from ibwire.gen.recovery import RATE_KINDS, RatePlan, draws

VERBS = ("send", "write", "read", "fetch_add", "cmp_swap")
#: (rate kind, the verbs whose packets it can strike): ecn_resp marks READ responses only.
KINDS = {"drop": VERBS, "corrupt": VERBS, "lose_ack": VERBS, "ecn": VERBS, "ecn_resp": ("read",)}
RATES = (0.02, 0.2)
#: Message sizes: one packet, several (a READ of several responses), PMTU 1024.
SIZES = (700, 3000)
GRID = [(kind, verb, rate, size, seed)
        for (kind, verbs), rate, size, seed in itertools.product(KINDS.items(), RATES, SIZES,
                                                                 (1, 7))
        for verb in verbs]


def scenario(kind: str, verb: str, rate: float, size: int, seed: int, **kw) -> Scenario:
    iters = 120 if size < 1024 or verb in ("fetch_add", "cmp_swap") else 50
    return Scenario(qps=(QpSpec(verb, size, iters=iters, mtu=1024, timeout=8),),
                    faults=(Fault(kind, rate=rate),), seed=seed, **kw)


def compare(s: Scenario) -> dict:
    model, quick = Generation(s, fast=False), Generation(s)
    assert list(quick) == list(model)
    assert quick.manifest == model.manifest
    return model.manifest


def closed_form(s: Scenario) -> bool:
    """Whether ``s`` takes the recovery rounds (not the simulation)."""
    return isinstance(Generation(s).plan(), RatePlan)


@pytest.mark.parametrize(("kind", "verb", "rate", "size", "seed"), GRID)
def test_rate_faults_are_the_models(kind, verb, rate, size, seed):
    s = scenario(kind, verb, rate, size, seed)
    manifest = compare(s)
    if rate >= 0.2:    # the grid's high rates strike (the comparison is not vacuous)
        assert manifest["faults"] and all(f["kind"] == kind for f in manifest["faults"])
    if kind in RATE_KINDS and verb in ("send", "write"):
        assert closed_form(s)


@pytest.mark.parametrize("seed", [0, 1, 2**40 + 3, -5])
def test_victims_are_drawn_as_the_simulation_draws_them(seed):
    expected = random.Random(seed)
    assert np.array_equal(draws(seed, 2000), [expected.random() for _ in range(2000)])


@pytest.mark.parametrize(("size", "iters", "faults", "seed", "delay"), [
    (1024, 300, (Fault("drop", rate=0.3),), 16, 1_000),
    (5000, 60, (Fault("corrupt", rate=0.3), Fault("drop", rate=0.15)), 2, 0),
    (5000, 80, (Fault("drop", rate=0.3),), 7, 1_000)])
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_the_last_victims_are_resent_on_the_local_ack_timeout(size, iters, faults, seed, delay,
                                                              tap):
    """Nothing after the last victims draws a NAK: the local ACK timer fires, the requester
    sends again from its first unacknowledged PSN, the responder ACKs what it already had
    (duplicates) and, where such an ACK comes back before the duplicates are all sent
    (no delay), the requester skips to the victim."""
    s = Scenario(qps=(QpSpec("write", size, iters=iters, timeout=8),),
                 faults=faults, seed=seed, tap=tap, link=Link(delay_ns=delay))
    p = Generation(s).plan()
    assert isinstance(p, RatePlan) and p.runs[-1, 6] >= 1     # it ends on the timer
    manifest = compare(s)
    assert manifest["qps"][0]["model"]["resent_packets"]["timeout"] > 0
    if size > 2000:
        assert manifest["qps"][0]["model"]["duplicate_requests"] > 0


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("seed", [4, 6])
def test_lost_last_acks_are_resent_on_the_timer_until_an_ack_comes_back(seed, tap):
    """The last ACKs lost: timeout after timeout, the requester sends again from its first
    PSN not acknowledged; every resend is a duplicate whose ACK may be lost too."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=40, timeout=8),),
                 faults=(Fault("lose_ack", rate=0.9),), seed=seed, tap=tap)
    p = Generation(s).plan()
    assert isinstance(p, RatePlan) and (p.runs[:, 6] == 1).sum() > 3
    model = compare(s)["qps"][0]["model"]
    assert model["resent_packets"]["timeout"] == model["duplicate_acks"] > 3


@pytest.mark.parametrize("seed", [0, 5])
def test_retries_run_out_in_the_simulation(seed):
    """More timeouts in a row than retry_cnt allows: the QP fails, which the model plays."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=40, timeout=8, retry_cnt=1),),
                 faults=(Fault("lose_ack", rate=0.97),), seed=seed)
    assert not closed_form(s)
    assert compare(s)["qps"][0]["error"] == "retry_exceeded"


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize(("size", "interval"), [(64, 0.0), (64, 0.05), (300, 0.0),
                                                (1024, 4.0), (4096, 0.5)])
@pytest.mark.parametrize("encapsulation", ["rocev2_ipv4", "rocev2_ipv6"])
def test_ce_marks_draw_cnps_ahead_of_the_acks(encapsulation, size, interval, tap):
    """CE-marked requests: the responder's CNPs (paced) go on its port before the ACKs
    waiting there, which leave later; small requests make the ACKs queue behind them."""
    s = Scenario(qps=(QpSpec("send", size, iters=150, timeout=8),),
                 faults=(Fault("ecn", rate=0.5),), seed=3, tap=tap,
                 encapsulation=encapsulation, cnp_interval_us=interval,
                 link=Link(delay_ns=500))
    p = Generation(s).plan()
    if isinstance(p, RatePlan):
        assert len(p.cnp_sent)
    else:   # an ACK held back past the next CNP: simulated
        assert size == 64 and interval == 0.0
    compare(s)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("seed", [1, 4, 6])
def test_lost_corrupted_and_marked_requests_together(seed, tap):
    """drop, corrupt and ecn drawn for each request packet in that order; a marked packet
    lost or corrupted draws no CNP; a NAK a CNP holds back is left to the simulation."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=300, timeout=8),), seed=seed, tap=tap,
                 faults=(Fault("drop", rate=0.05), Fault("corrupt", rate=0.05),
                         Fault("ecn", rate=0.2)))
    manifest = compare(s)
    assert {f["kind"] for f in manifest["faults"]} == {"drop", "corrupt", "ecn"}
    assert closed_form(s) == (seed != 1)


def test_lost_acks_with_lost_requests_are_simulated():
    """A lost NAK (lose_ack beside drop or corrupt) is not played in closed form."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=100, timeout=8),),
                 faults=(Fault("lose_ack", rate=0.1), Fault("drop", rate=0.1)), seed=1)
    assert not closed_form(s)
    compare(s)


def test_timers_shorter_than_a_round_are_simulated():
    """A local ACK timeout shorter than the time a NAK takes to come back: the model's
    timer fires amid the rounds, which the closed form does not play."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=200, timeout=1),),
                 faults=(Fault("drop", rate=0.1),), seed=1, link=Link(delay_ns=20_000))
    assert not closed_form(s)
    compare(s)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("encapsulation", ["rocev2_ipv4", "rocev2_ipv6", "ib_local"])
def test_every_rate_kind_at_once_on_several_qps(encapsulation, tap):
    """Draws of several kinds interleave (each request packet's, then each answer's, in the
    order the ports send them) across QPs and transports."""
    kinds = ["drop", "corrupt", "lose_ack"]
    if encapsulation.startswith("rocev2"):
        kinds += ["ecn", "ecn_resp"]
    qps = (QpSpec("write", 2500, iters=40, timeout=8), QpSpec("read", 3000, iters=20, timeout=8),
           QpSpec("send", 500, iters=60, transport="UC"),
           QpSpec("fetch_add", iters=30, timeout=8), QpSpec("send", 300, iters=50,
                                                            transport="XRC", timeout=8))
    s = Scenario(qps=qps, faults=tuple(Fault(k, rate=0.08) for k in kinds), seed=11,
                 encapsulation=encapsulation, tap=tap, link=Link(delay_ns=2_000))
    manifest = compare(s)
    assert {f["kind"] for f in manifest["faults"]} == set(kinds)


def test_rate_faults_next_to_targeted_ones():
    s = Scenario(qps=(QpSpec("write", 1024, iters=200, timeout=8),),
                 faults=(Fault("drop", rate=0.05), Fault("rnr", 0, 30, timer=1),
                         Fault("lose_ack", 0, 199)), seed=3, tap="switch")
    manifest = compare(s)
    assert {f["kind"] for f in manifest["faults"]} == {"drop", "rnr", "lose_ack"}


@pytest.mark.parametrize("kind", ["drop", "corrupt", "lose_ack", "ecn"])
@pytest.mark.parametrize("transport", ["RC", "XRC"])
def test_closed_form_across_the_psn_wrap_with_vlans(kind, transport):
    s = Scenario(qps=(QpSpec("write_imm", 2000, iters=80, start_psn=0xFFFFC0, ack_every=3,
                             transport=transport, timeout=8),),
                 faults=(Fault(kind, rate=0.2),), seed=9, vlans=((5, 1), (300, 0)),
                 tap="switch")
    assert closed_form(s)
    compare(s)


@pytest.mark.parametrize("kinds", [("corrupt", "drop"), ("lose_ack",), ("ecn",)])
def test_written_capture_is_the_models_file(tmp_path, kinds):
    """Into a pcap (the batches laid out in the file's pages, frames scattered between the
    faults' included), with the CM exchange around: the model's file, byte for byte."""
    s = Scenario(qps=(QpSpec("write", 1024, iters=3000, timeout=8),), cm=True, seed=2,
                 faults=tuple(Fault(k, rate=0.1) for k in kinds), tap="switch")
    assert closed_form(s)
    a, b = tmp_path / "fast.pcap", tmp_path / "model.pcap"
    assert write_capture(str(a), s) == write_capture(str(b), s, fast=False)
    assert a.read_bytes() == b.read_bytes()
