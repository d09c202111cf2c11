# cython: language_level=3, boundscheck=False, wraparound=False
"""The forwarder's fast path (relay.c): recvmmsg/sendmmsg batches, receive and send rings
(ring.c), pcap records in C; the
pump (pump.c) that forwards both ports in C until a frame needs Python (:class:`Pump`)."""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memset

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
    struct relay_ring:
        int fd
        int64_t cut
    int relay_ring_open(relay_ring *r, int fd, uint32_t frame_size, uint32_t frame_nr) nogil
    void relay_ring_close(relay_ring *r) nogil
    int relay_ring_receive(relay_ring *r, uint8_t *buffer, int64_t slot, int most,
                           int64_t *offsets, int64_t *lengths, int64_t *stamps,
                           uint8_t *csum) nogil
    struct relay_txring:
        int fd
        int64_t longest, queued, full, flushes
    int relay_txring_open(relay_txring *t, int fd, uint32_t frame_size, uint32_t frame_nr,
                          int64_t longest) nogil
    void relay_txring_close(relay_txring *t) nogil
    int relay_txring_flush(relay_txring *t) nogil
    int relay_txring_send(relay_txring *t, int fallback, const uint8_t *buffer,
                          const int64_t *offsets, const int64_t *lengths, int count,
                          int *failed) nogil
    int relay_complete_checksum(uint8_t *f, int64_t len) nogil
    int64_t relay_monotonic_ns() nogil
    struct relay_pump:
        int fd[2]
        int wake
        relay_ring *ring[2]
        relay_txring *tx[2]
        int64_t slot
        int most
        uint8_t *buffer[2]
        int64_t *offsets[2]
        int64_t *lengths[2]
        int64_t *stamps[2]
        uint8_t *csum[2]
        const uint8_t *kind
        int request, ack, read_resp, atomic_ack
        const int64_t *rules
        int nrules
        const int64_t *requests
        const int64_t *answers
        int nrequests, nanswers
        uint8_t *row_direction
        uint8_t *row_opcode
        uint32_t *row_destqp
        uint32_t *row_psn
        uint32_t *row_msn
        int64_t *row_stamp
        int row_capacity, rows
        uint8_t *capture
        int64_t capture_size, capture_used, capture_longest
        int64_t *capture_stamps
        int captured
        int64_t left
        int64_t deadline_ns
        int64_t arrived[2]
        int64_t forwarded[2]
        int64_t failed[2]
        int64_t checksums, batches
        int port, first, count
    int relay_pump_run(relay_pump *p) nogil
    int PUMP_RULE_WORDS

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


#: A receive ring's slots: room for a RoCE frame of the largest IB MTU (4096 bytes of payload
#: and its headers, VLAN tags); longer frames (jumbo, GSO super-frames) come whole through
#: the socket (ring.c).
RING_FRAME = 8192
#: Slots of a receive ring (32 MiB of kernel memory a port).
RING_FRAMES = 4096


cdef class Ring:
    """A socket's PACKET_RX_RING (TPACKET_V2, ring.c); OSError where the kernel refuses."""

    cdef relay_ring r

    def __init__(self, int fd, uint32_t frame_size=RING_FRAME, uint32_t frames=RING_FRAMES):
        cdef int e = relay_ring_open(&self.r, fd, frame_size, frames)
        if e < 0:
            raise OSError(-e, "PACKET_RX_RING")

    @property
    def cut(self):
        """Frames longer than a slot that could not be read whole (lost)."""
        return self.r.cut

    def close(self):
        relay_ring_close(&self.r)

    def __dealloc__(self):
        relay_ring_close(&self.r)


def receive_ring(Ring ring, uint8_t[::1] buffer, int64_t slot, int most,
                 int64_t[::1] offsets, int64_t[::1] lengths, int64_t[::1] stamps,
                 uint8_t[::1] csum):
    """:func:`receive` from a :class:`Ring`."""
    if most > MOST or buffer.shape[0] < most * slot or offsets.shape[0] < most:
        raise ValueError("buffer or arrays too small for the batch")
    cdef int n
    with nogil:
        n = relay_ring_receive(&ring.r, &buffer[0], slot, most, &offsets[0], &lengths[0],
                               &stamps[0], &csum[0])
    return n


#: A send ring's slots: a frame of the largest IB MTU with its headers and VLAN tags.
TX_FRAME = 8192
#: Slots of a send ring (8 MiB a port): four batches of the most a batch holds.
TX_FRAMES = 1024


cdef class TxRing:
    """A socket's PACKET_TX_RING (TPACKET_V2, ring.c) for the frames of a port; ``longest``:
    the longest frame a slot is to take (the device's MTU and Ethernet header: longer ones go
    with sendmmsg on the other socket). OSError where the kernel refuses a ring."""

    cdef relay_txring t

    def __init__(self, int fd, int64_t longest, uint32_t frame_size=TX_FRAME,
                 uint32_t frames=TX_FRAMES):
        cdef int e = relay_txring_open(&self.t, fd, frame_size, frames, longest)
        if e < 0:
            raise OSError(-e, "PACKET_TX_RING")

    @property
    def queued(self):
        """Frames that went through the slots."""
        return self.t.queued

    @property
    def full(self):
        """Frames sent with sendmmsg because no slot was free (the kernel held them all)."""
        return self.t.full

    @property
    def flushes(self):
        """send(2) calls that handed the ring's frames to the device."""
        return self.t.flushes

    def flush(self):
        """Hands what waits in the ring to the device; False when some still waits."""
        cdef int e
        with nogil:
            e = relay_txring_flush(&self.t)
        return e == 0

    def close(self):
        relay_txring_close(&self.t)

    def __dealloc__(self):
        relay_txring_close(&self.t)


def send_batch(int fd, data, int64_t[::1] offsets, int64_t[::1] lengths, TxRing tx=None):
    """Sends the frames of a batch (``data`` a writable buffer) in order, through ``tx``
    where given (``fd`` then takes the frames no slot can); returns how many went."""
    cdef const uint8_t[::1] buf = data
    cdef int failed = 0, sent = 0, count = offsets.shape[0]
    cdef relay_txring *t = NULL if tx is None else &tx.t
    if count == 0:
        return 0
    with nogil:
        if t != NULL:
            sent = relay_txring_send(t, fd, &buf[0], &offsets[0], &lengths[0], count, &failed)
        else:
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


def complete_checksum(uint8_t[::1] frame):
    """Fills in the TCP/UDP checksum of an Ethernet frame left to offload (pump.c's, the
    twin of :func:`ibwire.impair.forge.complete_checksum`); False when it has none."""
    if frame.shape[0] == 0:
        return False
    return bool(relay_complete_checksum(&frame[0], frame.shape[0]))


def monotonic_ns():
    """CLOCK_MONOTONIC in ns, the clock of :meth:`Pump.run`'s deadline."""
    return relay_monotonic_ns()


#: Rows (frames forwarded in C) one pump call summarises at most.
ROWS = 65536
#: Bytes of pcap records one pump call lays out at most (frames beyond go to Python).
CAPTURE_BYTES = 16 << 20
RULE_WORDS = 5


cdef class Pump:
    """Both ports forwarded in C (pump.c) until a frame needs Python.

    ``ports``: each port's (fd, receive ring or None, send ring or None, receive buffer,
    offsets, lengths, stamps, csum) as :class:`ibwire.impair.ports.Port` keeps them; ``wake``: a pipe whose readability ends a
    call; ``kinds``: :data:`ibwire.transport.opkinds.KIND` and the codes of REQUEST, ACK,
    READ_RESP, ATOMIC_ACK; ``capture``: lay out pcap records of the frames forwarded."""

    cdef relay_pump p
    cdef object keep
    cdef public object rows_direction, rows_opcode, rows_destqp, rows_psn, rows_msn, \
        rows_stamp, block, block_stamps
    cdef object rules, requests, answers

    def __init__(self, ports, int wake, int64_t slot, int most, kinds, codes,
                 bint capture):
        cdef uint8_t[::1] buf, cs, kd
        cdef int64_t[::1] o, l, t
        cdef int d
        self.keep = [ports, kinds]
        memset_pump(&self.p)
        self.p.wake = wake
        self.p.slot = slot
        self.p.most = most
        for d in range(2):
            fd, ring, tx, buffer, offsets, lengths, stamps, csum = ports[d]
            self.p.ring[d] = NULL if ring is None else &(<Ring>ring).r
            self.p.tx[d] = NULL if tx is None else &(<TxRing>tx).t
            buf = buffer
            o = offsets
            l = lengths
            t = stamps
            cs = csum
            if o.shape[0] < most or buf.shape[0] < most * slot:
                raise ValueError("port arrays too small for the batch")
            self.p.fd[d] = fd
            self.p.buffer[d] = &buf[0]
            self.p.offsets[d] = &o[0]
            self.p.lengths[d] = &l[0]
            self.p.stamps[d] = &t[0]
            self.p.csum[d] = &cs[0]
        kd = kinds
        self.p.kind = &kd[0]
        self.p.request, self.p.ack, self.p.read_resp, self.p.atomic_ack = codes
        self.rows_direction = np.empty(ROWS, np.uint8)
        self.rows_opcode = np.empty(ROWS, np.uint8)
        self.rows_destqp = np.empty(ROWS, np.uint32)
        self.rows_psn = np.empty(ROWS, np.uint32)
        self.rows_msn = np.empty(ROWS, np.uint32)
        self.rows_stamp = np.empty(ROWS, np.int64)
        cdef uint8_t[::1] rd = self.rows_direction, ro = self.rows_opcode
        cdef uint32_t[::1] rq = self.rows_destqp, rp = self.rows_psn, rm = self.rows_msn
        cdef int64_t[::1] rs = self.rows_stamp
        self.p.row_direction = &rd[0]
        self.p.row_opcode = &ro[0]
        self.p.row_destqp = &rq[0]
        self.p.row_psn = &rp[0]
        self.p.row_msn = &rm[0]
        self.p.row_stamp = &rs[0]
        self.p.row_capacity = ROWS
        cdef uint8_t[::1] blk
        cdef int64_t[::1] bs
        if capture:
            self.block = np.empty(CAPTURE_BYTES, np.uint8)
            self.block[::4096] = 0  # its pages faulted in now, not while forwarding
            self.block_stamps = np.empty(ROWS, np.int64)
            blk = self.block
            bs = self.block_stamps
            self.p.capture = &blk[0]
            self.p.capture_size = CAPTURE_BYTES
            self.p.capture_stamps = &bs[0]
        self.filter(np.zeros((0, RULE_WORDS), np.int64), np.zeros(0, np.int64),
                    np.zeros(0, np.int64))

    def filter(self, rules, requests, answers):
        """Sets the rule rows (``RULE_WORDS`` each: direction, class, opcode, DestQP, PSN;
        -1 any) and the sorted keys (direction << 24 | DestQP) of the requests and answers
        the state knows."""
        cdef const int64_t[:, ::1] r = np.ascontiguousarray(rules, np.int64).reshape(
            -1, RULE_WORDS)
        cdef const int64_t[::1] q = np.ascontiguousarray(requests, np.int64)
        cdef const int64_t[::1] a = np.ascontiguousarray(answers, np.int64)
        self.rules, self.requests, self.answers = r, q, a
        self.p.nrules = r.shape[0]
        self.p.rules = &r[0, 0] if r.shape[0] else NULL
        self.p.nrequests = q.shape[0]
        self.p.requests = &q[0] if q.shape[0] else NULL
        self.p.nanswers = a.shape[0]
        self.p.answers = &a[0] if a.shape[0] else NULL

    def run(self, int64_t left, int64_t deadline_ns):
        """Forwards until a frame needs Python, the wake pipe is readable, a signal, ``left``
        frames arrived (-1: no limit) or ``deadline_ns`` (:func:`monotonic_ns`); returns the
        reason (0 deadline, 1 hand-off, 2 wake, 3 signal, 4 count, 5 rows or block full)."""
        cdef int reason
        self.p.left = left
        self.p.deadline_ns = deadline_ns
        with nogil:
            reason = relay_pump_run(&self.p)
        if reason < 0:
            raise OSError(-reason, "pump")
        return reason

    def results(self):
        """(arrived, forwarded, failed) per direction, checksums completed, batches read,
        and the batch handed back: (port, first frame for Python, frames in it)."""
        return ((self.p.arrived[0], self.p.arrived[1]),
                (self.p.forwarded[0], self.p.forwarded[1]),
                (self.p.failed[0], self.p.failed[1]), self.p.checksums, self.p.batches,
                (self.p.port, self.p.first, self.p.count))

    @property
    def rows(self):
        return self.p.rows

    def captured(self):
        """(records block, records, longest frame, their arrival stamps) of the last call."""
        if self.block is None:
            return None
        return (self.block[:self.p.capture_used], self.p.captured, self.p.capture_longest,
                self.block_stamps[:self.p.captured])


cdef void memset_pump(relay_pump *p) noexcept nogil:
    memset(p, 0, sizeof(relay_pump))
