/* A port's receive ring: PACKET_RX_RING with TPACKET_V2 (packet(7), Linux
 * Documentation/networking/packet_mmap.rst). The kernel copies each frame into the next
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
#include <sys/socket.h>
#include <unistd.h>

#include "relay.h"

int relay_ring_open(struct relay_ring *r, int fd, uint32_t frame_size, uint32_t frame_nr)
{
    memset(r, 0, sizeof(*r));
    int version = TPACKET_V2, one = 1;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0)
        return -errno;
    if (setsockopt(fd, SOL_PACKET, PACKET_COPY_THRESH, &one, sizeof(one)) < 0)
        return -errno;
    uint32_t per_block = 8;
    struct tpacket_req req = {frame_size * per_block, frame_nr / per_block, frame_size,
                              frame_nr};
    if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0)
        return -errno;
    int64_t size = (int64_t)req.tp_block_size * req.tp_block_nr;
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        struct tpacket_req none = {0, 0, 0, 0};
        setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &none, sizeof(none));
        return -e;
    }
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
