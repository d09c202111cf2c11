#ifndef IBWIRE_IMPAIR_RELAY_H
#define IBWIRE_IMPAIR_RELAY_H
#include <sched.h>
#include <stdint.h>

static inline void sched_yield_wrapper(void) { sched_yield(); }

/* Frame i of a batch is read into slot i, this far into it (room for a VLAN tag put back). */
#define HEADROOM 4

/* One frame's IB transport packet (relay_classify_one): ib 0 for any other frame. */
struct relay_ib {
    uint8_t ib, opcode, syndrome;
    int32_t network, bth, icrc;
    uint32_t destqp, psn, msn;
};

int relay_receive(int fd, uint8_t *buffer, int64_t slot, int most, int64_t *offsets,
                  int64_t *lengths, int64_t *stamps, uint8_t *csum);
void relay_put_vlan(uint8_t *buffer, int64_t *at, int64_t *len, uint32_t status, uint16_t tci,
                    uint16_t tpid);

/* A PACKET_RX_RING (TPACKET_V2) of a socket (ring.c). */
struct relay_ring {
    int fd;
    uint8_t *map;
    int64_t size;
    uint32_t frame_size, frame_nr, head;
    int64_t cut;  /* frames longer than a slot the kernel could not queue whole: lost */
};
int relay_ring_open(struct relay_ring *r, int fd, uint32_t frame_size, uint32_t frame_nr);
void relay_ring_close(struct relay_ring *r);
int relay_ring_receive(struct relay_ring *r, uint8_t *buffer, int64_t slot, int most,
                       int64_t *offsets, int64_t *lengths, int64_t *stamps, uint8_t *csum);
/* A port's send ring: PACKET_TX_RING (TPACKET_V2) on a socket of its own (ring.c). */
struct relay_txring {
    int fd;        /* the ring's socket: a send(2) on it sends the ring, nothing else */
    uint8_t *map;
    int64_t size;
    uint32_t frame_size, frame_nr, head;
    int64_t longest;   /* the longest frame a slot takes (longer ones: sendmmsg) */
    int unflushed;     /* slots written since the last flush */
    int64_t queued;    /* frames that went through the slots */
    int64_t full;      /* frames sent with sendmmsg because no slot was free */
    int64_t flushes;   /* send(2) calls on the ring */
};
int relay_txring_open(struct relay_txring *t, int fd, uint32_t frame_size, uint32_t frame_nr,
                      int64_t longest);
void relay_txring_close(struct relay_txring *t);
int relay_txring_flush(struct relay_txring *t);
int relay_txring_send(struct relay_txring *t, int fallback, const uint8_t *buffer,
                      const int64_t *offsets, const int64_t *lengths, int count, int *failed);
int relay_send(int fd, const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
               int count, int *failed);
int64_t relay_pack_record(const uint8_t *frame, int64_t length, int64_t stamp, uint8_t *out);
int64_t relay_pack_records(const uint8_t *buffer, const int64_t *offsets,
                           const int64_t *lengths, const int64_t *stamps, int count,
                           uint8_t *out);
int relay_classify_one(const uint8_t *f, int64_t len, struct relay_ib *out);
void relay_classify(const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
                    int count, uint8_t *ib, int32_t *network, int32_t *bth, int32_t *icrc,
                    uint8_t *opcode, uint32_t *destqp, uint32_t *psn, uint8_t *syndrome,
                    uint32_t *msn);

/* The pump (pump.c): both ports forwarded in C until a frame needs Python. */
#define PUMP_RULE_WORDS 5  /* direction, class, opcode, destqp, psn (-1: any) */
enum pump_class { PUMP_REQUESTS = 0, PUMP_ANSWERS = 1, PUMP_READ_RESPONSES = 2,
                  PUMP_OPCODE = 3, PUMP_ANY_IB = 4 };
enum pump_reason { PUMP_DEADLINE = 0, PUMP_HANDOFF = 1, PUMP_WAKE = 2, PUMP_SIGNAL = 3,
                   PUMP_COUNT = 4, PUMP_FULL = 5 };

struct relay_pump {
    /* the ports: sockets, receive buffers and their batch columns (relay_receive's) */
    int fd[2], wake;
    struct relay_ring *ring[2];  /* NULL: recvmmsg */
    struct relay_txring *tx[2];  /* a port's send ring; NULL: sendmmsg on fd */
    int64_t slot;
    int most;
    uint8_t *buffer[2];
    int64_t *offsets[2], *lengths[2], *stamps[2];
    uint8_t *csum[2];
    /* the filter: opcode -> kind (ibwire.transport.opkinds.KIND) and the kinds' codes */
    const uint8_t *kind;
    int request, ack, read_resp, atomic_ack;
    const int64_t *rules;  /* nrules rows of PUMP_RULE_WORDS */
    int nrules;
    const int64_t *requests, *answers;  /* sorted keys direction << 24 | DestQP, known */
    int nrequests, nanswers;
    /* what the state learns from the frames forwarded here, one row each */
    uint8_t *row_direction, *row_opcode;
    uint32_t *row_destqp, *row_psn, *row_msn;
    int64_t *row_stamp;
    int row_capacity, rows;
    /* pcap records of the frames forwarded here (capture NULL: none) */
    uint8_t *capture;
    int64_t capture_size, capture_used, capture_longest;
    int64_t *capture_stamps;
    int captured;
    /* limits of one call */
    int64_t left;          /* frames that may still arrive (-1: no limit) */
    int64_t deadline_ns;   /* CLOCK_MONOTONIC */
    /* results of one call */
    int64_t arrived[2], forwarded[2], failed[2], checksums, batches;
    int port, first, count;  /* a batch handed back: its port, first frame for Python, size */
};

int relay_complete_checksum(uint8_t *f, int64_t len);
int relay_pump_run(struct relay_pump *p);
int64_t relay_monotonic_ns(void);
#endif
