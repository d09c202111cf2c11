"""Extended PSNs and sets of them, for reading a capture: a PSN unwrapped against the latest
one seen (24-bit arithmetic, IBA 9.4.1.1) becomes an unbounded integer, and the PSNs seen are
a range less its holes."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from ibwire.transport.psn import HALF, PSN_BITS, PSN_MASK

#: The PSN of the first row of a connection, as an extended PSN: far from 0 so that earlier
#: PSNs stay positive, and a multiple of 2^24 so that ``ext & PSN_MASK`` is the PSN.
ORIGIN = 1 << 40


def unwrap(psn: int, ref: int) -> int:
    """The extended PSN of ``psn`` nearest ``ref`` (within half the PSN space)."""
    d = (psn - ref) & PSN_MASK
    return ref + (d - (1 << PSN_BITS) if d >= HALF else d)


def _start(hole: list[int]) -> int:
    return hole[0]


def _end(hole: list[int]) -> int:
    return hole[1]


class Runs:
    """A set of extended PSNs: everything in [low, high) but the ``holes`` (sorted, disjoint
    [a, b) runs). Memory grows with the holes, not with the PSNs; each operation finds the
    holes it concerns by bisection (a tap that misses every other packet makes as many
    holes as packets)."""

    __slots__ = ("low", "high", "holes")

    def __init__(self) -> None:
        self.low: int | None = None
        self.high = 0
        self.holes: list[list[int]] = []

    def __contains__(self, e: int) -> bool:
        if self.low is None or not self.low <= e < self.high:
            return False
        i = bisect_right(self.holes, e, key=_start) - 1
        return i < 0 or not e < self.holes[i][1]

    def hole_in(self, a: int, b: int) -> bool:
        """Some PSN of [a, b) is missing."""
        if self.low is None or a < self.low or b > self.high:
            return True
        i = bisect_right(self.holes, a, key=_end)   # the first hole ending after a
        return i < len(self.holes) and self.holes[i][0] < b

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
        holes = self.holes
        i = bisect_right(holes, e, key=_end)           # the first hole ending after e
        j = bisect_left(holes, end, lo=i, key=_start)  # the first starting at or after end
        if i == j:
            return
        kept = [[holes[i][0], e]] if holes[i][0] < e else []
        if holes[j - 1][1] > end:
            kept.append([end, holes[j - 1][1]])
        holes[i:j] = kept
