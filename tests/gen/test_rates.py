"""Rate faults (``--drop rate=R`` ...): whatever path ``Generation`` takes for them (``fast``,
the default), its records and manifest are those of the per-packet transport model with
frames built field by field (``fast=False``), over a grid of seeds, verbs, sizes, fault
kinds and rates. A fast path that diverges from the model fails here."""

from __future__ import annotations

import itertools

import pytest

from ibwire.gen import Fault, Generation, Link, QpSpec, Scenario

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


@pytest.mark.parametrize(("kind", "verb", "rate", "size", "seed"), GRID)
def test_rate_faults_are_the_models(kind, verb, rate, size, seed):
    manifest = compare(scenario(kind, verb, rate, size, seed))
    if rate >= 0.2:    # the grid's high rates strike (the comparison is not vacuous)
        assert manifest["faults"] and all(f["kind"] == kind for f in manifest["faults"])


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
