"""24-bit packet sequence numbers and message sequence numbers (IBA Vol. 1 9.4.1.1, 9.7.5.1).

PSNs count modulo 2^24. Two PSNs are compared by their signed distance, which the responder's
validity rule makes well defined: the 2^23 PSNs at and after the expected PSN are "ahead"
(new or out of sequence), the 2^23 before it are "behind" (duplicates) (IBA 9.7.5.1.1; Linux
``drivers/infiniband/sw/rxe/rxe_hdr.h`` ``psn_compare`` shifts the difference into the top
24 bits of an int for the same reason). The MSN of the AETH is a 24-bit counter too.
"""

from __future__ import annotations

from collections.abc import Iterator

PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1
#: Half the PSN space: a distance of this size or more counts as negative.
HALF = 1 << (PSN_BITS - 1)
MSN_MASK = PSN_MASK


def psn_add(psn: int, n: int) -> int:
    """``psn + n`` modulo 2^24 (``n`` may be negative)."""
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """The signed distance ``a - b`` in PSN space, in [-2^23, 2^23)."""
    d = (a - b) & PSN_MASK
    return d - (1 << PSN_BITS) if d >= HALF else d


def psn_lt(a: int, b: int) -> bool:
    """``a`` comes before ``b`` (within half the PSN space)."""
    return psn_diff(a, b) < 0


def psn_le(a: int, b: int) -> bool:
    return psn_diff(a, b) <= 0


def psn_in_range(psn: int, first: int, count: int) -> bool:
    """``psn`` is one of the ``count`` PSNs starting at ``first`` (wrapping past 0xFFFFFF)."""
    return 0 <= psn_diff(psn, first) < count


def psn_range(first: int, count: int) -> Iterator[int]:
    """The ``count`` PSNs starting at ``first``, wrapping past 0xFFFFFF."""
    for i in range(count):
        yield (first + i) & PSN_MASK


def psn_span(first: int, last: int) -> int:
    """How many PSNs from ``first`` through ``last`` inclusive (``last`` not before ``first``)."""
    return psn_diff(last, first) + 1


def msn_add(msn: int, n: int = 1) -> int:
    """The MSN ``n`` messages later, modulo 2^24."""
    return (msn + n) & MSN_MASK


def check_psn(psn: int, what: str = "PSN") -> int:
    """``psn`` if it fits 24 bits, else ValueError naming ``what``."""
    if not isinstance(psn, int) or not 0 <= psn <= PSN_MASK:
        raise ValueError(f"{what} {psn!r} is not a 24-bit PSN (0..0xFFFFFF)")
    return psn
