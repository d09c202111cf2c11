"""Extended PSNs and sets of them, for reading a capture: a PSN unwrapped against the latest
one seen (24-bit arithmetic, IBA 9.4.1.1) becomes an unbounded integer, and the PSNs seen are
a range less its holes."""

from __future__ import annotations

from ibwire.transport.psn import HALF, PSN_BITS, PSN_MASK

#: The PSN of the first row of a connection, as an extended PSN: far from 0 so that earlier
#: PSNs stay positive, and a multiple of 2^24 so that ``ext & PSN_MASK`` is the PSN.
ORIGIN = 1 << 40


def unwrap(psn: int, ref: int) -> int:
    """The extended PSN of ``psn`` nearest ``ref`` (within half the PSN space)."""
    d = (psn - ref) & PSN_MASK
    return ref + (d - (1 << PSN_BITS) if d >= HALF else d)


class Runs:
    """A set of extended PSNs: everything in [low, high) but the ``holes`` (sorted, disjoint
    [a, b) runs). Memory grows with the holes, not with the PSNs."""

    __slots__ = ("low", "high", "holes")

    def __init__(self) -> None:
        self.low: int | None = None
        self.high = 0
        self.holes: list[list[int]] = []

    def __contains__(self, e: int) -> bool:
        if self.low is None or not self.low <= e < self.high:
            return False
        return not any(a <= e < b for a, b in self.holes)

    def hole_in(self, a: int, b: int) -> bool:
        """Some PSN of [a, b) is missing."""
        if self.low is None or a < self.low or b > self.high:
            return True
        return any(x < b and a < y for x, y in self.holes)

    def add(self, e: int, count: int) -> None:
        end = e + count
        if self.low is None:
            self.low, self.high = e, end
            return
        if end < self.low:
            self.holes.insert(0, [end, self.low])
        if e > self.high:
            self.holes.append([self.high, e])
        self.low, self.high = min(self.low, e), max(self.high, end)
        if self.holes:
            kept: list[list[int]] = []
            for a, b in self.holes:
                if b <= e or a >= end:
                    kept.append([a, b])
                    continue
                if a < e:
                    kept.append([a, e])
                if b > end:
                    kept.append([end, b])
            self.holes = kept
