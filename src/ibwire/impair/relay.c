/* The forwarder's fast path: a batch of frames in with recvmmsg(2), out with sendmmsg(2),
 * and pcap records laid out, without a Python call per frame.
 *
 * Frame i of a received batch is read into slot i of one buffer (slot bytes each, the frame
 * at 4 bytes into its slot so that a VLAN tag the driver took off, PACKET_AUXDATA's
 * TP_STATUS_VLAN_VALID, packet(7), is put back in place in front of the EtherType).
 * Frames the host sent itself (PACKET_OUTGOING) are skipped. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "relay.h"

#define MOST 256
#define CONTROL 128

void relay_put_vlan(uint8_t *buffer, int64_t *at, int64_t *len, uint32_t status, uint16_t tci,
                    uint16_t tpid)
{
    if (!(status & TP_STATUS_VLAN_VALID) || *len < 12)
        return;
    if (!(status & TP_STATUS_VLAN_TPID_VALID))
        tpid = 0x8100;
    uint8_t *f = buffer + *at;
    memmove(f - HEADROOM, f, 12);
    *at -= HEADROOM;
    f = buffer + *at;
    f[12] = tpid >> 8; f[13] = tpid & 0xff;
    f[14] = tci >> 8; f[15] = tci & 0xff;
    *len += HEADROOM;
}

int relay_receive(int fd, uint8_t *buffer, int64_t slot, int most, int64_t *offsets,
                  int64_t *lengths, int64_t *stamps, uint8_t *csum)
{
    struct mmsghdr msgs[MOST];
    struct iovec iov[MOST];
    struct sockaddr_ll names[MOST];
    uint8_t control[MOST][CONTROL];
    if (most > MOST)
        most = MOST;
    memset(msgs, 0, sizeof(msgs[0]) * most);
    for (int i = 0; i < most; i++) {
        iov[i].iov_base = buffer + i * slot + HEADROOM;
        iov[i].iov_len = slot - HEADROOM;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &names[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(names[i]);
        msgs[i].msg_hdr.msg_control = control[i];
        msgs[i].msg_hdr.msg_controllen = CONTROL;
    }
    int got = recvmmsg(fd, msgs, most, MSG_DONTWAIT, NULL);
    if (got < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    int n = 0;
    for (int i = 0; i < got; i++) {
        if (names[i].sll_pkttype == PACKET_OUTGOING)
            continue;
        int64_t at = i * slot + HEADROOM, len = msgs[i].msg_len;
        int64_t stamp = 0;
        uint8_t needs = 0;
        struct msghdr *h = &msgs[i].msg_hdr;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
            if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) {
                struct tpacket_auxdata aux;
                memcpy(&aux, CMSG_DATA(c), sizeof(aux));
                needs = (aux.tp_status & TP_STATUS_CSUMNOTREADY) != 0;
                relay_put_vlan(buffer, &at, &len, aux.tp_status, aux.tp_vlan_tci,
                               aux.tp_vlan_tpid);
            } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof(ts));
                stamp = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            }
        }
        offsets[n] = at;
        lengths[n] = len;
        stamps[n] = stamp;
        csum[n] = needs;
        n++;
    }
    return n;
}

int relay_send(int fd, const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
               int count, int *failed)
{
    struct mmsghdr msgs[MOST];
    struct iovec iov[MOST];
    int sent = 0, i = 0;
    *failed = 0;
    while (i < count) {
        int chunk = count - i < MOST ? count - i : MOST;
        memset(msgs, 0, sizeof(msgs[0]) * chunk);
        for (int k = 0; k < chunk; k++) {
            iov[k].iov_base = (void *)(buffer + offsets[i + k]);
            iov[k].iov_len = lengths[i + k];
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int done = sendmmsg(fd, msgs, chunk, 0);
        if (done < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EINTR)) {
            sched_yield_wrapper();
            done = sendmmsg(fd, msgs, chunk, 0);
        }
        if (done <= 0) {  /* the kernel refuses this frame: count it, go on */
            (*failed)++;
            i++;
            continue;
        }
        sent += done;
        i += done;
    }
    return sent;
}

int64_t relay_pack_record(const uint8_t *frame, int64_t length, int64_t stamp, uint8_t *out)
{
    uint32_t head[4];
    head[0] = (uint32_t)(stamp / 1000000000);
    head[1] = (uint32_t)(stamp % 1000000000);
    head[2] = head[3] = (uint32_t)length;
    memcpy(out, head, 16);
    memcpy(out + 16, frame, length);
    return 16 + length;
}

int64_t relay_pack_records(const uint8_t *buffer, const int64_t *offsets,
                           const int64_t *lengths, const int64_t *stamps, int count,
                           uint8_t *out)
{
    int64_t at = 0;
    for (int i = 0; i < count; i++)
        at += relay_pack_record(buffer + offsets[i], lengths[i], stamps[i], out + at);
    return at;
}

/* Where the IB transport packet of each frame is: RoCEv2 (IPv4 or IPv6, UDP destination
 * port 4791, IBA Annex A17) or RoCEv1 (EtherType 0x8915, GRH, Annex A16), behind any
 * number of VLAN tags (0x8100, 0x88A8, 0x9100). ib[i] is 0 for any other frame, and for one
 * whose network headers disagree (an IP version or GRH IPVer not the EtherType's, a UDP
 * length other than the IP payload's, an IPv4 fragment): where the scanner, which the twin
 * ibwire.impair.classify reads, places no BTH either. The ICRC's place comes from the IP
 * (or GRH) length, so Ethernet padding is not taken for it. The AETH words are read
 * whatever the opcode (the caller knows which opcodes carry one). */
static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t be24(const uint8_t *p) { return (uint32_t)p[0] << 16 | p[1] << 8 | p[2]; }

int relay_classify_one(const uint8_t *f, int64_t len, struct relay_ib *out)
{
    int64_t at = 12, end = 0, b = -1;
    memset(out, 0, sizeof(*out));
    out->network = out->bth = out->icrc = -1;
    if (len < 14)
        return 0;
    uint32_t type = be16(f + at);
    while ((type == 0x8100 || type == 0x88A8 || type == 0x9100) && at + 6 <= len) {
        at += 4;  /* as many tags as the frame holds, as the scanner reads them */
        type = be16(f + at);
    }
    int64_t l3 = at + 2;
    if (type == 0x0800 && l3 + 20 <= len) {
        int64_t ihl = (f[l3] & 0x0F) * 4;
        if ((f[l3] >> 4) != 4 || ihl < 20 || f[l3 + 9] != 17
            || (be16(f + l3 + 6) & 0x3FFF) != 0)
            return 0;
        int64_t udp = l3 + ihl;
        if (udp + 8 > len || be16(f + udp + 2) != 4791
            || be16(f + udp + 4) != be16(f + l3 + 2) - ihl)
            return 0;
        b = udp + 8;
        end = l3 + be16(f + l3 + 2);
    } else if (type == 0x86DD && l3 + 40 <= len) {
        int64_t udp = l3 + 40;
        if ((f[l3] >> 4) != 6 || f[l3 + 6] != 17 || udp + 8 > len || be16(f + udp + 2) != 4791
            || be16(f + udp + 4) != be16(f + l3 + 4))
            return 0;
        b = udp + 8;
        end = udp + be16(f + l3 + 4);
    } else if (type == 0x8915 && l3 + 40 <= len) {
        if ((f[l3] >> 4) != 6 || f[l3 + 6] != 0x1B)  /* IPVer 6, next header: IBA */
            return 0;
        b = l3 + 40;
        end = b + be16(f + l3 + 4);
    } else {
        return 0;
    }
    if (end > len || b + 12 + 4 > end)
        return 0;
    out->ib = 1; out->network = (int32_t)l3; out->bth = (int32_t)b;
    out->icrc = (int32_t)(end - 4);
    out->opcode = f[b];
    out->destqp = be24(f + b + 5);
    out->psn = be24(f + b + 9);
    if (b + 16 <= end - 4) {
        out->syndrome = f[b + 12];
        out->msn = be24(f + b + 13);
    }
    return 1;
}

void relay_classify(const uint8_t *buffer, const int64_t *offsets, const int64_t *lengths,
                    int count, uint8_t *ib, int32_t *network, int32_t *bth, int32_t *icrc,
                    uint8_t *opcode, uint32_t *destqp, uint32_t *psn, uint8_t *syndrome,
                    uint32_t *msn)
{
    struct relay_ib one;
    for (int i = 0; i < count; i++) {
        relay_classify_one(buffer + offsets[i], lengths[i], &one);
        ib[i] = one.ib; network[i] = one.network; bth[i] = one.bth; icrc[i] = one.icrc;
        opcode[i] = one.opcode; destqp[i] = one.destqp; psn[i] = one.psn;
        syndrome[i] = one.syndrome; msn[i] = one.msn;
    }
}
