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


class Runs:
    """A set of extended PSNs: everything in [low, high) but the holes (sorted, disjoint
    [a, b) runs, their starts and ends in two lists: a hole costs two list slots and two
    integers, and bisection compares integers, not keys). Memory grows with the holes, not
    with the PSNs; each operation finds the holes it concerns by bisection (a tap that misses
    every other packet makes as many holes as packets)."""

    __slots__ = ("low", "high", "starts", "ends")

    def __init__(self) -> None:
        self.low: int | None = None
        self.high = 0
        self.starts: list[int] = []
        self.ends: list[int] = []

    @property
    def holes(self) -> list[tuple[int, int]]:
        """The holes, as (a, b) pairs (made on each call)."""
        return list(zip(self.starts, self.ends, strict=True))

    def hole_count(self) -> int:
        return len(self.starts)

    def __contains__(self, e: int) -> bool:
        if self.low is None or not self.low <= e < self.high:
            return False
        i = bisect_right(self.starts, e) - 1
        return i < 0 or not e < self.ends[i]

    def hole_in(self, a: int, b: int) -> bool:
        """Some PSN of [a, b) is missing."""
        if self.low is None or a < self.low or b > self.high:
            return True
        i = bisect_right(self.ends, a)   # the first hole ending after a
        return i < len(self.starts) and self.starts[i] < b

    def add(self, e: int, count: int) -> None:
        end = e + count
        if self.low is None:
            self.low, self.high = e, end
            return
        starts, ends = self.starts, self.ends
        if end < self.low:
            starts.insert(0, end)
            ends.insert(0, self.low)
        if e > self.high:
            starts.append(self.high)
            ends.append(e)
        self.low, self.high = min(self.low, e), max(self.high, end)
        i = bisect_right(ends, e)              # the first hole ending after e
        j = bisect_left(starts, end, lo=i)     # the first starting at or after end
        if i == j:
            return
        kept_starts, kept_ends = [], []
        if starts[i] < e:
            kept_starts.append(starts[i])
            kept_ends.append(e)
        if ends[j - 1] > end:
            kept_starts.append(end)
            kept_ends.append(ends[j - 1])
        starts[i:j] = kept_starts
        ends[i:j] = kept_ends
