/* ibwire pcap layer: the C walk of runs of pcapng Enhanced Packet Blocks.
 *
 * The walk belongs to the reader layer (ibwire.pcap): the index (ibwire.pcap.index) and the
 * scanner's windows (ibwire.scan.capture) both take it, through the walker's bulk hook. Its
 * pure-Python twin is ibwire.pcap._python.pcapng_epbs; pcapng format: draft-ietf-opsawg-pcapng
 * section 4.3 (Enhanced Packet Block).
 */
#ifndef IBWIRE_PCAPNG_WALK_H
#define IBWIRE_PCAPNG_WALK_H

#include <stdint.h>

/* How a pcapng interface's timestamps become nanoseconds: units (of its if_tsresol) times
 * `param` (kind 0), divided by `param` (kind 1, param >= 1), or times 10^9 shifted right by
 * `param` (kind 2, a binary resolution); then its if_tsoffset seconds added; clamped to
 * int64. Only
 * interfaces marked `direct` (records are frames with no link header) are walked in C. */
typedef struct ibw_pcapng_iface {
    uint64_t param;
    int64_t offset_s;
    uint32_t snaplen;
    uint8_t kind, direct, pad_[2];
} ibw_pcapng_iface;

/* Consecutive pcapng Enhanced Packet Blocks from pos, each of them the walker's common case
 * (ibwire.pcap.pcapng): block length a multiple of 4 from 32 to max_len, the block all in
 * [pos, end) and its trailing length equal, a direct interface below n_iface, caplen within
 * the block and at most orig_len and the interface's snaplen (0: none). Rows: frame offset,
 * caplen, orig_len, timestamp ns, interface. Stops at the first other block or after cap
 * rows; returns the row count, *next where it stopped. `swapped`: the section's byte order is
 * not the machine's. */
int64_t ibw_pcapng_epbs(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                        uint32_t max_len, const ibw_pcapng_iface *ifaces, int64_t n_iface,
                        int64_t cap, int64_t *offs, int64_t *caplen, uint32_t *orig_len,
                        int64_t *ts, uint32_t *iface, int64_t *next);

#endif /* IBWIRE_PCAPNG_WALK_H */
