"""A READ or atomic waiting for its answers, as the observer's pure-Python twin holds it
(``ibwire.transport._observer_python``; the compiled twin has the same class)."""

from __future__ import annotations


class Waiting:
    """A READ or atomic waiting for its answers: PSNs ``start`` .. ``start + count - 1``, of
    which the first ``done`` are answered, and the offsets in ``extra`` (answered out of
    order, past ``done``). Not a bit mask: a READ of a GiB at a PMTU of 256 is four million
    PSNs, and a mask that long, remade at every response, made the analysis quadratic."""

    __slots__ = ("count", "done", "extra", "family", "start")

    def __init__(self, start: int, count: int, family: int) -> None:
        self.start, self.count, self.family = start, count, family
        self.done = 0
        self.extra: set[int] | None = None

    def answered_to(self) -> int:
        """One past the highest offset answered (0: none)."""
        return max(self.extra) + 1 if self.extra else self.done

    def mark(self, offset: int) -> bool:
        """Mark PSN ``start + offset``; True when it was not answered before."""
        if offset < self.done or (self.extra is not None and offset in self.extra):
            return False
        if offset != self.done:
            self.extra = self.extra or set()
            self.extra.add(offset)
            return True
        self.done += 1
        extra = self.extra
        while extra and self.done in extra:
            extra.remove(self.done)
            self.done += 1
        return True
