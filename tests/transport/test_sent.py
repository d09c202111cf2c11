"""The requests remembered by PSN: a resend repeats its request, another request does not."""

from __future__ import annotations

from ibwire.transport.sent import MAX_READS, RING, SentRequests

SEND, WRITE, READ = 0x04, 0x0A, 0x0C


def test_the_ring_grows_and_keeps_the_latest():
    s = SentRequests()
    for e in range(100):
        s.add(e, SEND, False, 1, 0, 0)
    assert s.size == 128 and s.repeats(0, SEND, False, 0, 0)
    assert not s.repeats(99, WRITE, False, 0, 0)
    n = 3 * RING
    for e in range(100, 100 + n):
        s.add(e, WRITE, False, 1, 0, 0)
    assert s.size == RING
    assert not s.repeats(99 + n, SEND, False, 0, 0)        # the latest are known
    assert s.repeats(150, SEND, False, 0, 0)                # forgotten: taken for a resend


def test_reads_by_range():
    s = SentRequests()
    for k in range(MAX_READS + 10):
        s.add(10 * k, READ, True, 4, 4096 * k, 4000)
    assert len(s.reads) == MAX_READS
    last = 10 * (MAX_READS + 9)
    assert s.repeats(last, READ, True, 4096 * (MAX_READS + 9), 4000)
    assert s.repeats(last + 2, READ, True, 4096 * (MAX_READS + 9) + 2048, 1952)
    assert not s.repeats(last + 2, READ, True, 4096 * (MAX_READS + 9), 4000)
    assert not s.repeats(last + 3, SEND, False, 0, 0)
    assert s.repeats(0, SEND, False, 0, 0)                  # forgotten READ
