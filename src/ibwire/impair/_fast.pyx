# cython: language_level=3, boundscheck=False, wraparound=False
"""The forwarder's fast path (relay.c): recvmmsg/sendmmsg batches, pcap records in C."""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

cdef extern from "relay.h":
    int relay_receive(int fd, uint8_t *buffer, int64_t slot, int most, int64_t *offsets,
                      int64_t *lengths, int64_t *stamps, uint8_t *csum) nogil
    int relay_send(int fd, const uint8_t *buffer, const int64_t *offsets,
                   const int64_t *lengths, int count, int *failed) nogil
    int64_t relay_pack_records(const uint8_t *buffer, const int64_t *offsets,
                               const int64_t *lengths, const int64_t *stamps, int count,
                               uint8_t *out) nogil
    void relay_classify(const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
                        int count, uint8_t *ib, int32_t *network, int32_t *bth, int32_t *icrc,
                        uint8_t *opcode, uint32_t *destqp, uint32_t *psn, uint8_t *syndrome,
                        uint32_t *msn) nogil

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


def classify(data, int64_t[::1] offsets, int64_t[::1] lengths):
    """The columns :mod:`ibwire.impair.state` reads, for the frames of a batch: ``ib`` (a
    RoCEv2/RoCEv1 transport packet), ``offset.network``, ``offset.bth``, ``offset.icrc``,
    ``bth.opcode``, ``bth.destqp``, ``bth.psn``, ``aeth.syndrome``, ``aeth.msn`` (the AETH
    words, read for every opcode)."""
    cdef const uint8_t[::1] buf = data
    cdef int n = offsets.shape[0]
    ib = np.zeros(n, np.uint8)
    network = np.empty(n, np.int32)
    bth = np.empty(n, np.int32)
    icrc = np.empty(n, np.int32)
    opcode = np.empty(n, np.uint8)
    destqp = np.empty(n, np.uint32)
    psn = np.empty(n, np.uint32)
    syndrome = np.empty(n, np.uint8)
    msn = np.empty(n, np.uint32)
    cdef uint8_t[::1] v_ib = ib, v_op = opcode, v_syn = syndrome
    cdef int32_t[::1] v_net = network, v_bth = bth, v_icrc = icrc
    cdef uint32_t[::1] v_qp = destqp, v_psn = psn, v_msn = msn
    if n:
        with nogil:
            relay_classify(&buf[0], &offsets[0], &lengths[0], n, &v_ib[0], &v_net[0],
                           &v_bth[0], &v_icrc[0], &v_op[0], &v_qp[0], &v_psn[0], &v_syn[0],
                           &v_msn[0])
    return {"ib": ib.view(bool), "offset.network": network, "offset.bth": bth,
            "offset.icrc": icrc, "bth.opcode": opcode, "bth.destqp": destqp, "bth.psn": psn,
            "aeth.syndrome": syndrome, "aeth.msn": msn}
