/* ibwire pcap layer: runs of pcapng Enhanced Packet Blocks; see pcapng_walk.h. */
#include "pcapng_walk.h"

#include "sequential.h"

#include <string.h>

static inline uint32_t rd32(const uint8_t *p, int swapped)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swapped ? __builtin_bswap32(v) : v;
}

#define PCAPNG_EPB 6u

/* The interface's clock (kind 1: param >= 1, checked by the caller), exact, then clamped. */
static int64_t pcapng_ns(const ibw_pcapng_iface *f, uint64_t units)
{
    unsigned __int128 u; /* the units in ns before the offset: below 2^128 */
    if (f->kind == 0)
        u = (unsigned __int128)units * f->param;
    else if (f->kind == 1)
        u = units / f->param;
    else /* units * 10^9 < 2^94: any shift of 94 or more gives 0 */
        u = f->param >= 94 ? 0 : ((unsigned __int128)units * 1000000000u) >> f->param;
    if (u >> 100) /* past INT64_MAX whatever the offset (|offset| < 2^93) */
        return INT64_MAX;
    __int128 ns = (__int128)u + (__int128)f->offset_s * 1000000000;
    if (ns > INT64_MAX)
        return INT64_MAX;
    return ns < INT64_MIN ? INT64_MIN : (int64_t)ns;
}

int64_t ibw_pcapng_epbs(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                        uint32_t max_len, const ibw_pcapng_iface *ifaces, int64_t n_iface,
                        int64_t cap, int64_t *offs, int64_t *caplen, uint32_t *orig_len,
                        int64_t *ts, uint32_t *iface, int64_t *next)
{
    int64_t rows = 0, line = pos;
    while (rows < cap && end - pos >= 32) {
        const uint8_t *b = buf + pos;
        ibw_ahead(buf, &line, pos, end);
        uint32_t len = rd32(b + 4, swapped);
        if (rd32(b, swapped) != PCAPNG_EPB || len < 32 || (len & 3) || len > max_len
            || (int64_t)len > end - pos || rd32(b + len - 4, swapped) != len)
            break;
        uint32_t id = rd32(b + 8, swapped), cap_len = rd32(b + 20, swapped);
        uint32_t orig = rd32(b + 24, swapped);
        if ((int64_t)id >= n_iface || !ifaces[id].direct || cap_len > len - 32 || cap_len > orig
            || (ifaces[id].snaplen && cap_len > ifaces[id].snaplen))
            break;
        uint64_t units = (uint64_t)rd32(b + 12, swapped) << 32 | rd32(b + 16, swapped);
        offs[rows] = pos + 28;
        caplen[rows] = cap_len;
        orig_len[rows] = orig;
        ts[rows] = pcapng_ns(&ifaces[id], units);
        iface[rows] = id;
        rows++;
        pos += len;
    }
    *next = pos;
    return rows;
}
