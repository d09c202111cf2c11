"""The answers a READ or atomic waits for (``ibwire.transport.waiting.Waiting``) against the
bit mask they once were (every PSN answered a bit of one integer), and the observer's lookup
of the answer a response belongs to (bisection while the waiting ranges are in order)
against a walk of all of them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ibwire.transport.observed import Observed
from ibwire.transport.opkinds import READ
from ibwire.transport.waiting import Waiting


@given(st.integers(1, 40), st.lists(st.integers(0, 39), max_size=80))
def test_waiting_marks_as_a_bit_mask_would(count: int, offsets: list[int]) -> None:
    w, mask = Waiting(1000, count, READ), 0
    for off in (o % count for o in offsets):
        bit = 1 << off
        assert w.mark(off) == (not mask & bit)
        mask |= bit
        assert w.answered_to() == mask.bit_length()
        assert (w.done == count) == (mask == (1 << count) - 1)
        prefix = (mask + 1) & ~mask  # the lowest unanswered offset's bit
        assert w.done == prefix.bit_length() - 1
        assert bool(w.extra) == bool(mask & (mask + 1))


def _walk(o: Observed, e: int) -> int | None:
    """The first waiting answer whose PSNs hold ``e`` (what the lookup must find)."""
    return next((i for i, a in enumerate(o.answers) if a.start <= e < a.start + a.count),
                None)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 6)), min_size=1, max_size=30),
       st.lists(st.integers(0, 200), max_size=60))
def test_a_response_finds_its_read_in_order_or_not(reads: list[tuple[int, int]],
                                                   responses: list[int]) -> None:
    """READs placed one after another (gaps >= 0: in order) or anywhere (steps backwards
    make them overlap: the walk): each response marks what the walk says it should."""
    for ordered in (True, False):
        o, ref = Observed(), Observed()
        start = 0
        for gap, count in reads:
            start = start + gap if ordered else gap * 5
            o.expect(start, count, READ)
            ref.expect(start, count, READ)
            start += count
        if not ordered:
            ref.answers_ordered = False  # the reference walks, whatever the order
        for e in responses:
            i = _walk(ref, e)
            expected = None if i is None else (ref.answers[i].start, ref.answers[i].count)
            got = _walk(o, e)
            assert (None if got is None else (o.answers[got].start, o.answers[got].count)) \
                == expected
            assert o._answered(e) == ref._answered(e)
            assert [(a.start, a.count, a.done, a.extra) for a in o.answers] == \
                [(a.start, a.count, a.done, a.extra) for a in ref.answers]
            assert o.counts == ref.counts
