# cython: language_level=3, boundscheck=False, wraparound=False
"""The forwarder's fast path (relay.c): recvmmsg/sendmmsg batches, pcap records in C."""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

cdef extern from "relay.h":
    int relay_receive(int fd, uint8_t *buffer, int64_t slot, int most, int64_t *offsets,
                      int64_t *lengths, int64_t *stamps, uint8_t *csum) nogil
    int relay_send(int fd, const uint8_t *buffer, const int64_t *offsets,
                   const int64_t *lengths, int count, int *failed) nogil
    int64_t relay_pack_records(const uint8_t *buffer, const int64_t *offsets,
                               const int64_t *lengths, const int64_t *stamps, int count,
                               uint8_t *out) nogil

MOST = 256


def receive(int fd, uint8_t[::1] buffer, int64_t slot, int most, int64_t[::1] offsets,
            int64_t[::1] lengths, int64_t[::1] stamps, uint8_t[::1] csum):
    """Reads up to ``most`` frames into ``buffer`` (slot ``i`` for frame ``i``); returns how
    many, filling their offsets, lengths, arrival times and checksum-not-ready flags."""
    if most > MOST or buffer.shape[0] < most * slot or offsets.shape[0] < most:
        raise ValueError("buffer or arrays too small for the batch")
    cdef int n
    with nogil:
        n = relay_receive(fd, &buffer[0], slot, most, &offsets[0], &lengths[0], &stamps[0],
                          &csum[0])
    if n < 0:
        raise OSError(-n, "recvmmsg")
    return n


def send_batch(int fd, data, int64_t[::1] offsets, int64_t[::1] lengths):
    """Sends the frames of a batch (``data`` a writable buffer); returns how many went."""
    cdef const uint8_t[::1] buf = data
    cdef int failed = 0, sent = 0, count = offsets.shape[0]
    if count == 0:
        return 0
    with nogil:
        sent = relay_send(fd, &buf[0], &offsets[0], &lengths[0], count, &failed)
    return sent


def pack_records(data, int64_t[::1] offsets, int64_t[::1] lengths, int64_t[::1] stamps):
    """(pcap records with ns stamps, this host's byte order, longest frame) of a batch."""
    cdef const uint8_t[::1] buf = data
    cdef int count = offsets.shape[0]
    if count == 0:
        return b"", 0
    total = int(np.asarray(lengths).sum()) + 16 * count
    out = np.empty(total, np.uint8)
    cdef uint8_t[::1] o = out
    with nogil:
        relay_pack_records(&buf[0], &offsets[0], &lengths[0], &stamps[0], count, &o[0])
    return out, int(np.asarray(lengths).max())
