"""From a failing batch to the smallest packet that still shows the same finding.

1. :func:`bisect` -- halve the batch until one packet fails alone (the packet after the last
   one the target answered is tried first: a crash usually sits there).
2. :func:`shrink` -- hypothesis's shrinker: :func:`hypothesis.find` on the same mode's
   strategy, narrowed to the finding's encapsulation and opcode, with "the same finding (kind,
   field or signal, opcode) reproduces on this packet alone" as the condition; hypothesis
   shrinks the choices behind the packet (field values towards zero, shorter payloads,
   fewer edits). Of the packets that reproduce, the shortest (then lowest) is kept, so the
   result is never larger than the packet found.
3. For ``bytes`` mode, :func:`delta_debug` then removes chunks of bytes (halves, quarters ...,
   single bytes; CRCs computed again after each cut unless ``--break-icrc``) while the
   finding reproduces.

Every step counts its tries (each a target run, or a packet hypothesis drew that is not
smaller than the finding's) against one ``budget`` and stops at the ``deadline``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from random import Random
from typing import TypeVar

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import HypothesisException

from ibwire.fuzz.generate import Example, Shape, reseal, strategy

T = TypeVar("T")


def bisect(items: Sequence[T], fails: Callable[[Sequence[T]], bool],
           first_guess: int | None = None) -> T | None:
    """The item of ``items`` (which fail together) that fails alone, or None when the
    failure needs items from both halves."""
    if first_guess is not None and 0 <= first_guess < len(items) and len(items) > 1 \
            and fails(items[first_guess:first_guess + 1]):
        return items[first_guess]
    items = list(items)
    while len(items) > 1:
        half = len(items) // 2
        if fails(items[:half]):
            items = items[:half]
        elif fails(items[half:]):
            items = items[half:]
        else:
            return None
    return items[0] if items else None


class _Stop(Exception):
    """The budget or the deadline is spent: end hypothesis's search."""


@dataclass
class Budget:
    runs: int
    deadline: float

    def spend(self) -> None:
        if self.runs <= 0 or time.monotonic() >= self.deadline:
            raise _Stop
        self.runs -= 1


def _key(example: Example) -> tuple[int, bytes]:
    return len(example.frame), example.frame


def shrink(example: Example, reproduces: Callable[[Example], bool], shape: Shape,
           budget: Budget, seed: int = 0) -> Example:
    """The smallest example found that ``reproduces`` (``example`` itself at worst)."""
    best = example
    narrowed = strategy(example.mode, replace(shape, encapsulation=example.encapsulation,
                                              opcode=example.opcode))

    seen: dict[bytes, bool] = {}

    def condition(candidate: Example) -> bool:  # the same answer for the same packet
        nonlocal best
        budget.spend()  # every call: hypothesis may try many packets that need no run
        if _key(candidate) >= _key(example):
            return False  # not smaller: not worth a run
        if candidate.frame not in seen:
            seen[candidate.frame] = reproduces(candidate)
            if seen[candidate.frame] and _key(candidate) < _key(best):
                best = candidate
        return seen[candidate.frame]

    try:
        find(narrowed, condition, random=Random(seed),
             settings=settings(database=None, max_examples=max(budget.runs, 1), deadline=None,
                               phases=[Phase.generate, Phase.shrink],
                               suppress_health_check=list(HealthCheck)))
    except (_Stop, HypothesisException):
        pass  # out of budget, nothing found, or a target that answers differently: keep best
    if best.mode == "bytes":
        best = delta_debug(best, reproduces, shape.break_icrc, budget)
    return best


def delta_debug(example: Example, reproduces: Callable[[Example], bool], break_icrc: bool,
                budget: Budget) -> Example:
    """``example`` with as many bytes removed as keep the finding (ddmin over chunks)."""
    data = example.frame
    parts = 2
    try:
        while len(data) >= 2:
            chunk = -(-len(data) // parts)
            for start in range(0, len(data), chunk):
                cut = data[:start] + data[start + chunk:]
                candidate = replace(example, frame=cut if break_icrc else
                                    reseal(cut, example.link))
                budget.spend()
                if reproduces(candidate):
                    data, example = cut, candidate
                    parts = max(parts - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                parts = min(parts * 2, len(data))
    except _Stop:
        pass
    return example
