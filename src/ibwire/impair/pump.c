/* The forwarder's pump: both ports forwarded in C, frames reaching Python only when they
 * must.
 *
 * One call polls both sockets (and the forwarder's wake pipe), reads what arrived on a port
 * as one batch (relay_ring_receive from the port's receive ring, ring.c, or relay_receive:
 * recvmmsg(2)), and walks it in order. A frame stays in C
 * unless it is an IB/RoCE frame that
 *   - carries a MAD (DestQP 0 or 1: the CM exchange the live state learns from),
 *   - is a request to a (direction, DestQP) the state has no connection for, or an answer
 *     to a requester QPN it has not bound (the state learns them in Python),
 *   - may be hit by a rule: each rule's selectors that C tests cheaply (direction, request /
 *     answer / READ response class or opcode, DestQP, PSN) are given as one row; a frame
 *     matching a row goes to Python, which decides the rest (counts, rates, nth, tx).
 * Frames kept in C have a checksum left to offload completed, are recorded (pcap records
 * into the capture block) and, for requests and answers, summarised in one row each
 * (direction, opcode, DestQP, PSN, MSN, arrival) for the live state; then the batch up to
 * the first frame for Python is sent on (relay_txring_send: the other port's send ring,
 * ring.c; relay_send: sendmmsg(2), where it has none) and the call returns,
 * handing that frame and the rest of its batch to Python. Nothing of a later batch is read
 * before Python has dealt with them, so no frame overtakes one handed to Python.
 *
 * The call also returns at the deadline (progress, stop, held frames), when the wake pipe
 * is readable (stop, inject), when poll(2) is interrupted by a signal (Python's handler
 * runs), when the frame count is reached and before a batch could overflow the rows or the
 * capture block. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "relay.h"

int64_t relay_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

static uint32_t ones_sum(const uint8_t *p, int64_t n, uint32_t sum)
{
    uint64_t s = sum;
    int64_t i = 0;
    for (; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (i < n)
        s += (uint32_t)p[i] << 8;
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint32_t)s;
}

/* The TCP or UDP checksum of an Ethernet frame (IPv4 or IPv6, VLAN tags skipped) whose
 * sender left it to offload, filled in (RFC 793, RFC 768, RFC 8200 8.1: the pseudo-header
 * and the segment; a UDP checksum that comes to 0 is sent as 0xFFFF); 0 when the frame is
 * neither or cut short. The twin is ibwire.impair.forge.complete_checksum. */
int relay_complete_checksum(uint8_t *f, int64_t len)
{
    int64_t at = 12;
    if (len < 14)
        return 0;
    uint32_t type = get16(f + at);
    while ((type == 0x8100 || type == 0x88A8 || type == 0x9100) && at + 6 <= len) {
        at += 4;
        type = get16(f + at);
    }
    int64_t l3 = at + 2, l4, length;
    uint32_t proto, sum;
    if (type == 0x0800 && len >= l3 + 20) {
        int64_t ihl = (f[l3] & 0x0F) * 4;
        if (ihl < 20)
            return 0;
        proto = f[l3 + 9];
        length = (int64_t)get16(f + l3 + 2) - ihl;
        l4 = l3 + ihl;
        sum = ones_sum(f + l3 + 12, 8, 0);
    } else if (type == 0x86DD && len >= l3 + 40) {
        proto = f[l3 + 6];
        length = get16(f + l3 + 4);
        l4 = l3 + 40;
        sum = ones_sum(f + l3 + 8, 32, 0);
    } else {
        return 0;
    }
    if ((proto != 6 && proto != 17) || length <= 0)
        return 0;
    int64_t where = l4 + (proto == 6 ? 16 : 6);
    if (where + 2 > len || l4 + length > len)
        return 1;  /* a segment cut short keeps its checksum (as the twin) */
    sum += proto + (uint32_t)(length >> 16) + (uint32_t)(length & 0xFFFF);
    f[where] = f[where + 1] = 0;
    sum = ones_sum(f + l4, length, sum);
    uint32_t value = ~sum & 0xFFFF;
    if (proto == 17 && value == 0)
        value = 0xFFFF;
    f[where] = value >> 8;
    f[where + 1] = value & 0xFF;
    return 1;
}

static int known(const int64_t *keys, int n, int64_t key)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && keys[lo] == key;
}

/* 1: the frame goes to Python; 0: it stays in C, *row says whether the state wants a row. */
static int for_python(const struct relay_pump *p, int d, const struct relay_ib *ib, int *row)
{
    *row = 0;
    if (!ib->ib)
        return 0;
    if (ib->destqp <= 1)
        return 1;
    int kind = p->kind[ib->opcode];
    int64_t key = (int64_t)d << 24 | ib->destqp;
    int answer = kind == p->ack || kind == p->read_resp || kind == p->atomic_ack;
    if (kind == p->request) {
        if (!known(p->requests, p->nrequests, key))
            return 1;
        *row = 1;
    } else if (answer) {
        if (!known(p->answers, p->nanswers, key))
            return 1;
        *row = 1;
    }
    for (int j = 0; j < p->nrules; j++) {
        const int64_t *r = p->rules + j * PUMP_RULE_WORDS;
        if (r[0] >= 0 && r[0] != d)
            continue;
        switch (r[1]) {
        case PUMP_REQUESTS: if (kind != p->request) continue; break;
        case PUMP_ANSWERS: if (!answer) continue; break;
        case PUMP_READ_RESPONSES: if (kind != p->read_resp) continue; break;
        case PUMP_OPCODE: if (ib->opcode != r[2]) continue; break;
        default: break;
        }
        if (r[3] >= 0 && r[3] != ib->destqp)
            continue;
        if (r[4] >= 0 && r[4] != ib->psn)
            continue;
        return 1;
    }
    return 0;
}

/* Walks batch d (n frames): returns the index of the first frame for Python (n: none). */
static int walk(struct relay_pump *p, int d, int n)
{
    uint8_t *buffer = p->buffer[d];
    for (int i = 0; i < n; i++) {
        uint8_t *f = buffer + p->offsets[d][i];
        int64_t len = p->lengths[d][i], stamp = p->stamps[d][i];
        struct relay_ib ib;
        int row;
        relay_classify_one(f, len, &ib);
        if (for_python(p, d, &ib, &row))
            return i;
        if (p->capture != NULL && p->capture_used + 16 + len > p->capture_size)
            return i;  /* the block is full: Python records this one and the rest */
        if (p->csum[d][i]) {
            p->checksums += relay_complete_checksum(f, len);
            p->csum[d][i] = 0;
        }
        if (p->capture != NULL) {
            p->capture_used += relay_pack_record(f, len, stamp, p->capture + p->capture_used);
            p->capture_stamps[p->captured++] = stamp;
            if (len > p->capture_longest)
                p->capture_longest = len;
        }
        if (row) {
            int k = p->rows++;
            p->row_direction[k] = (uint8_t)d;
            p->row_opcode[k] = ib.opcode;
            p->row_destqp[k] = ib.destqp;
            p->row_psn[k] = ib.psn;
            p->row_msn[k] = ib.msn;
            p->row_stamp[k] = stamp;
        }
    }
    return n;
}

int relay_pump_run(struct relay_pump *p)
{
    struct pollfd fds[3] = {{p->fd[0], POLLIN, 0}, {p->fd[1], POLLIN, 0}, {p->wake, POLLIN, 0}};
    p->rows = p->captured = 0;
    p->capture_used = p->capture_longest = 0;
    p->checksums = p->batches = 0;
    for (int d = 0; d < 2; d++)
        p->arrived[d] = p->forwarded[d] = p->failed[d] = 0;
    p->port = -1;
    p->first = p->count = 0;
    for (int polled = 0;; polled = 1) {
        if (p->left == 0)
            return PUMP_COUNT;
        int64_t now = relay_monotonic_ns();
        if (polled && now >= p->deadline_ns)
            return PUMP_DEADLINE;  /* the ports are polled at least once a call */
        int64_t wait = now >= p->deadline_ns ? 0 : (p->deadline_ns - now + 999999) / 1000000;
        int ready = poll(fds, 3, wait > 1000 ? 1000 : (int)wait);
        if (ready < 0)
            return errno == EINTR ? PUMP_SIGNAL : -errno;
        if (ready == 0)
            continue;
        if (fds[2].revents)
            return PUMP_WAKE;
        for (int d = 0; d < 2; d++) {
            if (!(fds[d].revents & (POLLIN | POLLERR)))
                continue;
            int most = p->most;
            if (p->left >= 0 && p->left < most)
                most = (int)p->left;
            if (most == 0)
                return PUMP_COUNT;
            if (p->rows + most > p->row_capacity || (p->capture != NULL &&
                    (p->captured + most > p->row_capacity
                     || p->capture_used > p->capture_size / 2)))
                return PUMP_FULL;
            int n = p->ring[d] != NULL
                ? relay_ring_receive(p->ring[d], p->buffer[d], p->slot, most, p->offsets[d],
                                     p->lengths[d], p->stamps[d], p->csum[d])
                : relay_receive(p->fd[d], p->buffer[d], p->slot, most, p->offsets[d],
                                p->lengths[d], p->stamps[d], p->csum[d]);
            if (n < 0)
                return n;
            if (n == 0)
                continue;
            p->arrived[d] += n;
            p->batches++;
            if (p->left > 0)
                p->left -= n;
            int stop = walk(p, d, n);
            if (stop > 0) {
                int failed = 0;
                struct relay_txring *tx = p->tx[1 - d];
                p->forwarded[d] += tx != NULL
                    ? relay_txring_send(tx, p->fd[1 - d], p->buffer[d], p->offsets[d],
                                        p->lengths[d], stop, &failed)
                    : relay_send(p->fd[1 - d], p->buffer[d], p->offsets[d], p->lengths[d],
                                 stop, &failed);
                p->failed[d] += failed;
            }
            if (stop < n) {
                p->port = d;
                p->first = stop;
                p->count = n;
                return PUMP_HANDOFF;
            }
        }
    }
}
