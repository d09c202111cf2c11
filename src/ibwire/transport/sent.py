"""What request a tap saw at each recent PSN of a connection, to tell a resend from another
request that reuses the PSN.

A retransmission repeats its request: the same opcode at the same PSN, and a READ request
the same virtual address and length, or, sent again after part of its responses came, the
rest of them from a later PSN of its range: address and length moved on by the same number
of bytes (Linux ``rxe_req.c`` ``req_retry``). Anything else at a PSN already used (a SEND at
a PSN a READ reserved for its responses) is a different request: a requester's PSN bug,
which the responder takes for a duplicate (IBA 9.7.5.1.1; Linux ``rxe_resp.c``
``duplicate_request``) and never executes.

Opcodes sit in a ring indexed by the extended PSN (``ibwire.transport.psn_runs``), grown up
to RING entries as requests come; READ requests (their PSN ranges, address and length) in a
list sorted by first PSN, the latest MAX_READS. A PSN that neither remembers is taken for a
resend, as before anything was remembered.
"""

from __future__ import annotations

from bisect import bisect_right, insort

import numpy as np

#: PSNs whose opcode is remembered, at most (a power of two).
RING = 8192
#: READ requests remembered, at most.
MAX_READS = 4096


def _start(read: tuple[int, int, int, int]) -> int:
    return read[0]


class SentRequests:
    """The requests of one connection by PSN: :meth:`add` each first transmission, then
    :meth:`repeats` for a request at a PSN seen before (the observer's pure-Python twin;
    ``ibwire.transport._observer`` holds the same in C)."""

    __slots__ = ("added", "ext", "opcode", "reads", "size")

    def __init__(self) -> None:
        self.size = 0    # entries of the ring
        self.added = 0   # requests added, at most RING counted
        self.ext = np.zeros(0, np.int64)
        self.opcode = np.zeros(0, np.uint8)
        #: (first PSN, PSNs, VA, DMA length), sorted by first PSN
        self.reads: list[tuple[int, int, int, int]] = []

    def _room(self, more: int) -> None:
        """Room for ``more`` requests: the ring grows (powers of two, at most RING) to hold
        every request added."""
        self.added = wanted = min(RING, self.added + more)
        size = self.size
        if wanted <= size:
            return
        new = max(64, size)
        while new < wanted and new < RING:
            new *= 2
        ext, op = np.full(new, -1, np.int64), np.zeros(new, np.uint8)
        known = self.ext >= 0
        at = self.ext[known] & (new - 1)
        ext[at], op[at] = self.ext[known], self.opcode[known]
        self.size, self.ext, self.opcode = new, ext, op

    def add(self, e: int, opcode: int, is_read: bool, count: int, va: int, dmalen: int
            ) -> None:
        """Request ``opcode`` first seen at extended PSN ``e`` (a READ: ``count`` PSNs)."""
        self._room(1)
        at = e & (self.size - 1)
        self.ext[at], self.opcode[at] = e, opcode
        if is_read:
            self._read(e, count, va, dmalen)

    def _read(self, e: int, count: int, va: int, dmalen: int) -> None:
        read = (e, count, va, dmalen)
        if not self.reads or e > self.reads[-1][0]:
            self.reads.append(read)
        else:
            insort(self.reads, read)
        if len(self.reads) > MAX_READS:
            del self.reads[0]

    def repeats(self, e: int, opcode: int, is_read: bool, va: int, dmalen: int) -> bool:
        """Whether a request at extended PSN ``e``, already used, repeats what was sent
        there (False: another request reuses the PSN)."""
        reads = self.reads
        i = bisect_right(reads, e, key=_start) - 1
        if i >= 0 and e < reads[i][0] + reads[i][1]:
            start, _, va0, len0 = reads[i]
            if not is_read:
                return False
            moved = va - va0
            return (moved == 0 and dmalen == len0) if e == start else (
                0 < moved == len0 - dmalen)
        if self.size:
            at = e & (self.size - 1)
            if self.ext[at] == e:
                return bool(self.opcode[at] == opcode)
        return True
