"""The observer's rules, compiled (``ibwire.transport._observer``) and in plain Python
(``_observer_python``), fed the same rows: the same story, in order or not, whatever the rows
(opcodes of every kind and none, PSNs that step back, jump and wrap, NAKs of every syndrome,
READs whose answers come twice or out of order, timestamps that go back, stalls), fed at
once or in pieces; and past every bound of what they remember (requests by PSN, latest
requests, READs, AckReq packets waiting)."""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire.transport import observed
from ibwire.transport.observed import ROW_FIELDS, observer_on
from ibwire.transport.opkinds import READ
from tests.crc.conftest import built_or_skip

try:
    from ibwire.transport import _observer
except ImportError:
    _observer = None

#: RC SEND, WRITE, READ request and responses, ACK, atomics and their ACK, UC SEND, a CNP,
#: and opcodes the observer ignores.
OPCODES = (0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11,
           0x12, 0x13, 0x14, 0x20, 0x24, 0x81, 0x64, 0x1F)
SYNDROMES = (0x1F, 0x00, 0x60, 0x61, 0x62, 0x63, 0x20, 0x36, 0x3F)
DMALENS = (0, 1, 1024, 3000, 5000, 1 << 20, (1 << 32) - 1)
VAS = (0, 4096, 4096 + 1024, 4096 + 2048, 1 << 63, (1 << 64) - 1)


def compiled() -> ModuleType:
    """The compiled rules; skipped when IBWIRE_NO_EXTENSIONS=1 left them unbuilt, else a
    missing build fails."""
    return built_or_skip(_observer, "ibwire.transport._observer")


def test_the_compiled_twin_is_the_one_loaded():
    if os.environ.get("IBWIRE_NO_EXTENSIONS") == "1":
        assert observed.implementation == "python"
    else:
        assert observed.implementation == "c", "ibwire.transport._observer did not load"


def story(twin: str, rows: dict[str, np.ndarray], cuts: list[int], pmtu: int | None,
          stall_ns: int) -> tuple[object, ...]:
    o = observer_on(twin)(pmtu, stall_ns)
    middle = []
    for a, b in zip([0, *cuts], [*cuts, len(rows["record"])], strict=True):
        o.feed({k: v[a:b] for k, v in rows.items()})
        middle.append((dict(o.counts), o.round, o.turnaround, list(o.rtt), o.seen_range(),
                       o.open_start, o.hole_count(), o.first_ns, o.last_ns))
    o.finish()
    return o.result(), middle


def same(rows: dict[str, np.ndarray], cuts: list[int], pmtu: int | None = None,
         stall_ns: int = 5000) -> dict:
    compiled()
    c = story("c", rows, cuts, pmtu, stall_ns)
    assert c == story("python", rows, cuts, pmtu, stall_ns)
    return c[0]


def columns(values: list[tuple[int, ...]]) -> dict[str, np.ndarray]:
    return {k: np.array([v[i] for v in values], np.uint64 if k == "va" else np.int64)
            for i, k in enumerate(ROW_FIELDS)}


_row = st.tuples(
    st.sampled_from(OPCODES), st.integers(-4, 6) | st.integers(-(1 << 24), 1 << 24),
    st.booleans(), st.sampled_from(SYNDROMES), st.sampled_from(DMALENS), st.sampled_from(VAS),
    st.integers(0, 4096), st.booleans(), st.integers(0, 20).map(lambda x: x == 0),
    st.integers(-50, 200) | st.integers(4000, 9000))


@settings(max_examples=300, deadline=None)
@given(st.lists(_row, max_size=120), st.integers(0, (1 << 24) - 1),
       st.lists(st.integers(0, 120), max_size=4), st.sampled_from([None, 1024]))
def test_the_twins_tell_the_same_story(steps, psn, cuts, pmtu):
    t, values = 1_000_000, []
    for k, (op, step, ackreq, syndrome, dmalen, va, payload, ce, bad, dt) in enumerate(steps):
        psn = (psn + step) & 0xFFFFFF
        t += dt
        values.append((k, t, op, psn, ackreq, syndrome, dmalen, va, payload, ce, bad))
    if not values:
        return
    same(columns(values), sorted(c for c in cuts if c <= len(values)), pmtu)


def test_past_every_bound_of_memory():
    """Enough requests, READs and AckReq packets to wrap the ring of opcodes (8192 PSNs),
    the latest requests (8192), the READs (4096) and the answers waiting (4096), with
    resends of old PSNs and NAKs."""
    rng = np.random.default_rng(31)
    n = 60_000
    op = rng.choice(np.array([0x04, 0x0C, 0x14, 0x0A, 0x11, 0x10, 0x12]), n,
                    p=[0.35, 0.2, 0.05, 0.1, 0.15, 0.1, 0.05])
    step = np.where(rng.random(n) < 0.9, 1, rng.integers(-9000, 50, n))
    rows = {"record": np.arange(n), "time": np.cumsum(rng.integers(1, 900, n)),
            "opcode": op, "psn": (np.cumsum(step) + 0xFFF000) & 0xFFFFFF,
            "ackreq": rng.random(n) < 0.5,
            "syndrome": rng.choice(np.array([0x1F, 0x1F, 0x1F, 0x60, 0x21]), n),
            "dmalen": rng.choice(np.array([1024, 4096, 2048]), n),
            "va": rng.choice(np.array([1 << 32, (1 << 32) + 1024], np.uint64), n),
            "payload": rng.integers(0, 1025, n), "ce": rng.random(n) < 0.01,
            "icrc_bad": rng.random(n) < 0.001}
    r = same(rows, [7, 30_000], pmtu=1024)
    assert r["retransmitted_packets"] > 1000 and r["data_packets"] > 20_000
    assert r["read_responses_resent"] > 0 and r["naks_psn_seq_error"] > 0


def test_waiting_answers_alike():
    """The compiled twin's waiting READs: marked as the Python ones are."""
    twin = compiled()
    from ibwire.transport.waiting import Waiting

    rng = np.random.default_rng(3)
    for _ in range(200):
        count = int(rng.integers(1, 30))
        a, b = Waiting(100, count, READ), twin.Waiting(100, count, READ)
        for off in rng.integers(0, count, 40).tolist():
            assert a.mark(off) == b.mark(off)
            assert (a.done, a.extra, a.answered_to()) == (b.done, b.extra, b.answered_to())


@pytest.mark.parametrize("twin", ["python", "c"])
def test_an_observer_of_each_twin_is_an_observed(twin):
    if twin == "c":
        compiled()
    o = observer_on(twin)(None)
    assert isinstance(o, observed.Story) and o.counts == dict.fromkeys(observed.COUNTERS, 0)
