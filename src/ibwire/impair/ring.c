/* A port's rings (packet(7), Linux Documentation/networking/packet_mmap.rst).
 *
 * The receive ring: PACKET_RX_RING with TPACKET_V2. The kernel copies each frame into the next
 * slot of a ring shared with user space, in the context that delivered it (for a veth,
 * the sender's), instead of queueing it for recvmmsg(2) to copy in the forwarder's; poll(2)
 * wakes on each frame. relay_ring_receive copies the frames out of the ring into a batch
 * buffer laid out as relay_receive lays it out (the rest of the forwarder does not know
 * the difference) and gives the slots back.
 *
 * A frame longer than a ring slot (a jumbo frame, a tap's or veth's GSO super-frame, up to
 * 64 KiB) is cut in the ring; with PACKET_COPY_THRESH the kernel also queues it whole on the
 * socket and marks the slot TP_STATUS_COPY, and it is read from there with recv(2), in its
 * place. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "relay.h"

/* Sets a TPACKET_V2 ring of ``frame_nr`` slots of ``frame_size`` bytes on ``fd`` (``which``:
 * PACKET_RX_RING or PACKET_TX_RING, after the option ``option`` set to 1) and maps it; 0 or
 * -errno (the ring then taken down again). */
static int map_ring(int fd, int which, int option, uint32_t frame_size, uint32_t frame_nr,
                    uint8_t **map_out, int64_t *size_out)
{
    int version = TPACKET_V2, one = 1;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0)
        return -errno;
    if (setsockopt(fd, SOL_PACKET, option, &one, sizeof(one)) < 0)
        return -errno;
    uint32_t per_block = 8;
    struct tpacket_req req = {frame_size * per_block, frame_nr / per_block, frame_size,
                              frame_nr};
    if (setsockopt(fd, SOL_PACKET, which, &req, sizeof(req)) < 0)
        return -errno;
    int64_t size = (int64_t)req.tp_block_size * req.tp_block_nr;
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        struct tpacket_req none = {0, 0, 0, 0};
        setsockopt(fd, SOL_PACKET, which, &none, sizeof(none));
        return -e;
    }
    *map_out = map;
    *size_out = size;
    return 0;
}

int relay_ring_open(struct relay_ring *r, int fd, uint32_t frame_size, uint32_t frame_nr)
{
    memset(r, 0, sizeof(*r));
    uint8_t *map;
    int64_t size;
    int err = map_ring(fd, PACKET_RX_RING, PACKET_COPY_THRESH, frame_size, frame_nr, &map,
                       &size);
    if (err < 0)
        return err;
    /* what was queued before the ring (frames from before the socket was bound, too) */
    char scrap[1];
    while (recv(fd, scrap, sizeof(scrap), MSG_DONTWAIT | MSG_TRUNC) >= 0)
        ;
    r->fd = fd;
    r->map = map;
    r->size = size;
    r->frame_size = frame_size;
    r->frame_nr = frame_nr;
    return 0;
}

void relay_ring_close(struct relay_ring *r)
{
    if (r->map != NULL)
        munmap(r->map, r->size);
    r->map = NULL;
}

int relay_ring_receive(struct relay_ring *r, uint8_t *buffer, int64_t slot, int most,
                       int64_t *offsets, int64_t *lengths, int64_t *stamps, uint8_t *csum)
{
    int n = 0;
    while (n < most) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(r->map
                                                         + (int64_t)r->head * r->frame_size);
        uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(status & TP_STATUS_USER))
            break;
        const struct sockaddr_ll *ll = (const struct sockaddr_ll *)(
            (uint8_t *)h + TPACKET_ALIGN(sizeof(struct tpacket2_hdr)));
        int64_t at = (int64_t)n * slot + HEADROOM, len = -1;
        if (status & TP_STATUS_COPY) {
            /* the whole frame is queued on the socket, in ring order */
            ssize_t got = recv(r->fd, buffer + at, slot - HEADROOM, MSG_DONTWAIT);
            len = got < 0 ? -1 : got;
        } else if (h->tp_snaplen == h->tp_len && h->tp_snaplen <= slot - HEADROOM) {
            memcpy(buffer + at, (uint8_t *)h + h->tp_mac, h->tp_snaplen);
            len = h->tp_snaplen;
        }
        if (len < 0)
            r->cut++;
        if (len >= 0 && ll->sll_pkttype != PACKET_OUTGOING) {
            relay_put_vlan(buffer, &at, &len, status, h->tp_vlan_tci, h->tp_vlan_tpid);
            offsets[n] = at;
            lengths[n] = len;
            stamps[n] = (int64_t)h->tp_sec * 1000000000 + h->tp_nsec;
            csum[n] = (status & TP_STATUS_CSUMNOTREADY) != 0;
            n++;
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        r->head = r->head + 1 == r->frame_nr ? 0 : r->head + 1;
    }
    return n;
}

/* The send ring: PACKET_TX_RING with TPACKET_V2, on a socket of its own (a send(2) on a
 * socket with a send ring sends what waits in the ring and nothing else, so the forwarder's
 * other sends, Python's, go on the port's receiving socket). A batch is copied into the
 * next slots, each marked TP_STATUS_SEND_REQUEST, and one send(fd, NULL, 0, MSG_DONTWAIT)
 * hands them all to the device (net/packet/af_packet.c, tpacket_snd): the sendmmsg(2) work
 * per frame (its msghdr and iovec read from user space, the copy into a fresh skb) is gone;
 * the kernel builds each skb around its slot and gives the slot back (TP_STATUS_AVAILABLE)
 * when the skb is freed, having copied the data where it outlives the call (a veth's peer,
 * skb_orphan_frags).
 *
 * Order: tpacket_snd transmits the slots in ring order before it returns, so every frame
 * of a batch has gone to the device (or its qdisc) when the call returns, before anything
 * Python sends on the other socket. A frame no slot can take, longer than `longest` (the
 * device's MTU and Ethernet header) or with no free slot (the kernel still holds them all),
 * goes with sendmmsg on the port's socket, but only once what waits in the ring went: a
 * frame is never put ahead of one queued before it. A frame the device refuses for now
 * (a full veth backlog: tpacket_snd leaves its slot TP_STATUS_SEND_REQUEST) is tried again
 * after sched_yield, as relay_send does; one still refused then waits in its slot for the
 * next flush, and a frame that cannot follow it then (no free slot) is counted as failed. */
#define TX_DATA (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll))
#define TX_TRIES 3

static inline struct tpacket2_hdr *tx_slot(const struct relay_txring *t, uint32_t i)
{
    return (struct tpacket2_hdr *)(t->map + (int64_t)i * t->frame_size);
}

static inline uint32_t tx_status(const struct tpacket2_hdr *h)
{
    return __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
}

int relay_txring_open(struct relay_txring *t, int fd, uint32_t frame_size, uint32_t frame_nr,
                      int64_t longest)
{
    memset(t, 0, sizeof(*t));
    uint8_t *map;
    int64_t size;
    /* PACKET_LOSS: a slot the kernel cannot make a frame of is skipped, not left to jam the
     * ring (the frames it would refuse, by length, go with sendmmsg instead and are counted
     * there) */
    int err = map_ring(fd, PACKET_TX_RING, PACKET_LOSS, frame_size, frame_nr, &map, &size);
    if (err < 0)
        return err;
    t->fd = fd;
    t->map = map;
    t->size = size;
    t->frame_size = frame_size;
    t->frame_nr = frame_nr;
    t->longest = longest < (int64_t)(frame_size - TX_DATA) ? longest
                                                           : (int64_t)(frame_size - TX_DATA);
    return 0;
}

void relay_txring_close(struct relay_txring *t)
{
    if (t->map != NULL)
        munmap(t->map, t->size);
    t->map = NULL;
}

/* Hands what waits in the ring to the device: 0 once all of it went, else -errno (or
 * -EAGAIN) with frames still waiting in their slots (they go with the next flush). */
int relay_txring_flush(struct relay_txring *t)
{
    if (t->unflushed == 0)
        return 0;
    const struct tpacket2_hdr *last = tx_slot(t, t->head == 0 ? t->frame_nr - 1 : t->head - 1);
    int e = EAGAIN;
    for (int tries = 0; tries < TX_TRIES; tries++) {
        if (tries)
            sched_yield();
        t->flushes++;
        if (send(t->fd, NULL, 0, MSG_DONTWAIT) < 0)
            e = errno;
        /* the kernel takes the slots in order: once the last left SEND_REQUEST, all did */
        if (tx_status(last) != TP_STATUS_SEND_REQUEST) {
            t->unflushed = 0;
            return 0;
        }
    }
    return -e;
}

int relay_txring_send(struct relay_txring *t, int fallback, const uint8_t *buffer,
                      const int64_t *offsets, const int64_t *lengths, int count, int *failed)
{
    int sent = 0;
    *failed = 0;
    for (int i = 0; i < count; i++) {
        int64_t len = lengths[i];
        struct tpacket2_hdr *h = tx_slot(t, t->head);
        int full = 0;
        if (len >= 14 && len <= t->longest && tx_status(h) != TP_STATUS_AVAILABLE) {
            relay_txring_flush(t);  /* what waits goes first; its slots may come back */
            full = tx_status(h) != TP_STATUS_AVAILABLE;
        }
        if (full || len < 14 || len > t->longest) {
            /* sendmmsg on the port's socket, once nothing waits in the ring */
            int rest = full ? count - i : 1, refused = 0;
            if (relay_txring_flush(t) < 0) {
                *failed += rest;
                i += rest - 1;
                continue;
            }
            if (full)
                t->full += rest;
            sent += relay_send(fallback, buffer, offsets + i, lengths + i, rest, &refused);
            *failed += refused;
            i += rest - 1;
            continue;
        }
        memcpy((uint8_t *)h + TX_DATA, buffer + offsets[i], len);
        h->tp_len = h->tp_snaplen = (uint32_t)len;
        __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
        t->head = t->head + 1 == t->frame_nr ? 0 : t->head + 1;
        t->unflushed++;
        t->queued++;
        sent++;
    }
    relay_txring_flush(t);
    return sent;
}
