"""From the packets sent since the last healthy probe to the fewest that still show a finding.

Every trial is a replay into a freshly booted guest pair (tens of seconds under emulation),
so both steps count their trials against one bound:

1. :func:`bisect_batch` -- halving the batch (the last packet sent tried alone first: a
   kernel usually complains about the packet it was handling), keeping the smallest part
   that showed the finding when the trials run out;
2. :func:`shrink_shot` -- the one packet made smaller along the dimensions its strategy drew
   it in, the way hypothesis shrinks a draw: the ``mutated()`` break dropped, the payload
   emptied or cut by a half or a quarter at either end, the drawn field values dropped (the builder's defaults, zero for a MAD
   field) by halves, a PSN or MSN offset brought back to the live value, one byte edit
   dropped at a time; a candidate is kept when it still reproduces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from ibwire.livefuzz.shots import Ref, Shot

#: Fields a shot keeps while shrinking: they say what the packet is.
STRUCTURAL = frozenset({"bth.opcode", "mad.mgmtclass", "mad.attributeid", "mad.baseversion",
                        "mad.classversion", "mad.method"})


class OutOfTrials(Exception):
    """The trial bound is spent."""


@dataclass
class Trials:
    """At most ``left`` replays; ``used`` counts them."""

    left: int
    used: int = 0

    def spend(self) -> None:
        if self.left <= 0:
            raise OutOfTrials
        self.left -= 1
        self.used += 1


def bisect_batch(batch: Sequence[Shot], reproduces: Callable[[Sequence[Shot]], bool],
                 trials: Trials) -> list[Shot] | None:
    """The smallest part of ``batch`` found that shows the finding: one shot when the
    halving gets there (the last shot sent tried alone first: a kernel usually complains
    about the packet it was handling), else the part the halving had reached when the
    trials ran out or neither half showed it alone; None when no trial showed it at all."""
    items = list(batch)
    seen = False
    try:
        if len(items) > 1:
            trials.spend()
            if reproduces(items[-1:]):
                return items[-1:]
        while len(items) > 1:
            half = len(items) // 2
            trials.spend()
            if reproduces(items[:half]):
                items, seen = items[:half], True
                continue
            trials.spend()
            if reproduces(items[half:]):
                items, seen = items[half:], True
                continue
            break  # it needs shots of both halves
    except OutOfTrials:
        pass
    return items if seen else None


def candidates(shot: Shot) -> Iterator[Shot]:
    """Smaller versions of ``shot``, the boldest first."""
    if shot.edits or shot.cut is not None or shot.tail:
        yield replace(shot, edits=(), cut=None, tail=b"", kind=shot.kind.split(" + ")[0])
    if shot.payload:
        yield replace(shot, payload=b"")
        n = len(shot.payload)
        for part in (n // 2, n // 4):  # a half, a quarter off either end
            if part:
                yield replace(shot, payload=shot.payload[:n - part])
                yield replace(shot, payload=shot.payload[part:])
    drawn = [k for k in shot.fields if k not in STRUCTURAL]
    groups = [drawn] if drawn else []
    size = len(drawn) // 2
    while size >= 1:
        groups += [drawn[i:i + size] for i in range(0, len(drawn), size)]
        size //= 2
    for group in groups:
        yield replace(shot, fields={k: v for k, v in shot.fields.items() if k not in group})
    offsets = {k: Ref(v.name) for k, v in shot.fields.items() if isinstance(v, Ref) and v.add}
    if offsets:
        yield replace(shot, fields={**shot.fields, **offsets})
    if len(shot.edits) > 1:
        for i in range(len(shot.edits)):
            yield replace(shot, edits=shot.edits[:i] + shot.edits[i + 1:])


def size_of(shot: Shot) -> tuple[int, int, int]:
    return (len(shot.edits) + (shot.cut is not None), len(shot.fields), len(shot.payload))


def shrink_shot(shot: Shot, reproduces: Callable[[Sequence[Shot]], bool],
                trials: Trials) -> Shot:
    """The smallest version of ``shot`` found that still reproduces (``shot`` at worst)."""
    best = shot
    tried: set[str] = set()
    try:
        progress = True
        while progress:
            progress = False
            for candidate in candidates(best):
                key = candidate.dumps()
                if key in tried or size_of(candidate) >= size_of(best):
                    continue
                tried.add(key)
                trials.spend()
                if reproduces([candidate]):
                    best, progress = candidate, True
                    break
    except OutOfTrials:
        pass
    return best
