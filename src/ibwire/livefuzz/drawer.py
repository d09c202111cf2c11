"""Drawing from hypothesis strategies one value at a time, on demand, from a seed.

A live fuzzer decides what to draw from only as the wire goes on (the connection it learnt
a moment ago, the frame the forwarder holds now), so it cannot hand hypothesis one strategy
up front as ``@given`` wants, and a ``@given`` loop fed a different strategy per example is
soon stopped by hypothesis as a flaky strategy (it remembers earlier examples' choices).
:class:`Drawer` draws each value on a fresh ``ConjectureData`` of its own, with hypothesis's
own generation (its provider: boundary values, small sizes, nasty constants) from one seeded
random stream: the same seed and the same calls give the same values. A draw that overruns
or whose ``assume``/``filter`` fails is drawn again (up to :data:`RETRIES` times).

This uses hypothesis's internal ``ConjectureData`` and ``BuildContext`` (the way its own
``find`` does); both the keyword form of recent releases and the older ``max_length``/
``prefix`` form are handled.
"""

from __future__ import annotations

import random
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.control import BuildContext
from hypothesis.errors import HypothesisException, UnsatisfiedAssumption
from hypothesis.internal.conjecture.data import ConjectureData

T = TypeVar("T")
RETRIES = 50
_OLD_BUFFER = 8 * 1024


class DrawError(RuntimeError):
    """A strategy gave no value in :data:`RETRIES` tries."""


def _data(rnd: random.Random) -> ConjectureData:
    try:
        return ConjectureData(random=rnd)
    except TypeError:  # hypothesis before the choice-sequence refactor
        return ConjectureData(_OLD_BUFFER, b"", random=rnd)  # type: ignore[call-arg,arg-type]


def _stopped(exc: BaseException) -> bool:
    """The draw ran out of room or was abandoned (hypothesis's StopTest/Overrun)."""
    return type(exc).__name__ in ("StopTest", "Overrun", "Frozen")


class Drawer:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.random = random.Random(seed)
        self.draws = 0
        self.retries = 0

    def draw(self, strategy: st.SearchStrategy[T]) -> T:
        """A value of ``strategy``."""
        last: BaseException | None = None
        for _ in range(RETRIES):
            data = _data(self.random)
            try:
                with BuildContext(data, is_final=False, wrapped_test=None):  # type: ignore[arg-type]
                    value = data.draw(strategy)
            except (UnsatisfiedAssumption, HypothesisException) as exc:
                last = exc
            except BaseException as exc:
                if not _stopped(exc):
                    raise
                last = exc
            else:
                self.draws += 1
                return value
            self.retries += 1
        raise DrawError(f"no value of {strategy!r} in {RETRIES} tries ({last!r})")

    def close(self) -> None:
        """Nothing to release (kept for the callers that use it as a context manager)."""

    def __enter__(self) -> Drawer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
