/* ibwire batch scanner: one pass over the frames of a capture buffer, filling columns.
 *
 * The CRC walker (ibw_locate in crc/kernel.c) says where the BTH and the ICRC are and whether
 * the encapsulation holds together; this file adds the walk of the transport headers (the
 * opcode's extended headers, MAD, RMPP, PadCnt) and the extraction of every header field into
 * its column. What to extract comes from ibwire.scan.program, derived in Python from the
 * Construct declarations and specs/opcodes.tsv: nothing here knows a field by name.
 *
 * Nothing reads outside [frame, frame + length): a header is only read when it fits.
 */
#ifndef IBWIRE_SCAN_H
#define IBWIRE_SCAN_H

#include <stdint.h>

#define IBW_SCAN_MAX_SLOTS 32
#define IBW_SCAN_MAX_CHAIN 4
#define IBW_SCAN_MAX_VIEWS 32
#define IBW_SCAN_NO_OPCODE 0xFF
#define IBW_SCAN_LINK_NONE 255

/* Read a field: load `load` bytes big-endian from byte `at` of the header, shift right,
 * mask, store `width` bytes into column `column` (load 16: copy 16 bytes). */
typedef struct ibw_scan_instr {
    uint64_t mask;
    int32_t column;
    int32_t at;
    int32_t load;
    int32_t shift;
    int32_t width;
    int32_t pad_;
} ibw_scan_instr;

typedef struct ibw_scan_prog {
    int32_t nslots;
    int32_t slot_size[IBW_SCAN_MAX_SLOTS];
    int32_t slot_first[IBW_SCAN_MAX_SLOTS]; /* first instruction of the slot */
    int32_t slot_count[IBW_SCAN_MAX_SLOTS];
    const ibw_scan_instr *instr;
    const uint8_t *chain;     /* [256][IBW_SCAN_MAX_CHAIN]: extended-header slots per opcode */
    const uint8_t *chain_len; /* [256]: IBW_SCAN_NO_OPCODE for reserved/vendor opcodes */
    const uint8_t *op_flags;  /* [256]: bit 0 UD transport */
    const uint8_t *rmpp;      /* [256]: MAD class carries RMPP */
    /* MAD body views (ibwire.scan.views): the slot view_slot[i] is put at the MAD body when
     * the MAD's MgmtClass << 16 | AttributeID is view_key[i] and the slot fits */
    int32_t nviews;
    uint32_t view_key[IBW_SCAN_MAX_VIEWS];
    int32_t view_slot[IBW_SCAN_MAX_VIEWS];
    int32_t view_extent[IBW_SCAN_MAX_VIEWS]; /* bytes of the attribute its fields are in */
    int32_t eth, vlan, ip, ipv6, udp, lrh, grh, bth, deth, mad, rmpp_slot;
    int32_t site_slot_base, site_padcnt;
    /* 1: compute the CRC verdicts; 0: place the CRCs and read them from the wire only
     * (icrc_ok and vcrc_ok -1), for readers that do not look at verdicts */
    int32_t verdicts;
} ibw_scan_prog;

/* Output columns, count rows each; cols[i] is header-field column i. */
typedef struct ibw_scan_out {
    void *const *cols;
    uint8_t *encapsulation;
    uint32_t *headers;
    uint8_t *vlan_count;
    int8_t *ecn;
    int32_t *off_network, *off_bth, *off_payload, *payload_len, *off_icrc, *off_vcrc;
    uint32_t *icrc;
    uint16_t *vcrc;
    int8_t *icrc_ok, *vcrc_ok;
    uint8_t *error, *site;
    int32_t *error_off;
    uint8_t *cut; /* IBW_CUT_* (crc/kernel.h): CRCs past the bytes the capture kept */
} ibw_scan_out;

/* Scan count frames of buf (frame i: buf[offs[i], offs[i] + lens[i]), link links[i], a
 * enum ibw_link or IBW_SCAN_LINK_NONE; wires[i] its length on the wire, more than lens[i]
 * where a snap length cut it, or wires NULL: none cut). Columns must be zeroed; needs
 * ibw_init(), no GIL. */
void ibw_scan(const uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
              const int64_t *wires, const uint8_t *links, int64_t count,
              const ibw_scan_prog *prog, const ibw_scan_out *out);

/* Classic pcap records in buf[pos, end): rows for at most cap whole records (frame offset,
 * caplen, orig_len, timestamp ns). Returns the row count; *next is where the walk stopped and
 * *status why: 0 end of data (or cap reached), 1 caplen above max_caplen at *next, 2 a record
 * not all in the buffer at *next. */
int64_t ibw_pcap_records(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                         int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int64_t *offs,
                         int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                         int *status);

/* ibw_pcap_records and ibw_scan in one pass: each record is scanned as it is walked (frames
 * start at `link`), the lines ahead asked for (sequential.h); release_every > 0: buf is a
 * read-only map of a file whose pages the walk lets go every that many bytes (ibw_let_go). */
int64_t ibw_scan_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                      int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int link,
                      const ibw_scan_prog *prog, const ibw_scan_out *out, int64_t *offs,
                      int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                      int *status, int64_t release_every);

/* What ibw_check_pcap counts (the summary of `ibwire check`). */
typedef struct ibw_tally {
    int64_t records; /* records walked */
    int64_t ib;      /* an encapsulation was recognised (even if it then failed) */
    int64_t other;   /* other traffic (IBW_NOT_IB) */
    int64_t failed;  /* a CRC mismatch or an error other than IBW_NOT_IB */
    int64_t icrc_bad, vcrc_bad, errors;
    int64_t cut;      /* not failed, but cut by the capture (a snap length): unverifiable */
    int64_t cut_kept; /* the most bytes kept of a cut frame (its snap length, as a rule) */
} ibw_tally;

/* Where the frame of a record starts: at the record (IBW_RECORD_FRAME; it starts at `code`,
 * an enum ibw_link or IBW_SCAN_LINK_NONE), or after a Linux cooked header (IBW_RECORD_SLL,
 * 16 bytes; IBW_RECORD_SLL2, 20 bytes) whose ARPHRD type and protocol give its link through
 * an ibw_sll_links table. */
enum ibw_record_header { IBW_RECORD_FRAME = 0, IBW_RECORD_SLL = 1, IBW_RECORD_SLL2 = 2 };

typedef struct ibw_record_link {
    int32_t header; /* enum ibw_record_header */
    int32_t code;
} ibw_record_link;

/* The links behind Linux cooked headers: keys[i] (ARPHRD type << 16 | protocol) has link
 * codes[i]; any other key: IBW_SCAN_LINK_NONE. */
typedef struct ibw_sll_links {
    const uint32_t *keys;
    const uint8_t *codes;
    int64_t count;
} ibw_sll_links;

/* ibw_scan_pcap without columns: every record is scanned and counted into *tally (added to).
 * The records to look at again (failed, or caplen above snaplen or orig_len: a capture
 * warning) are listed in flagged[] as pairs (record from the first one walked here, offset of
 * its data), at most cap_flagged pairs: the walk stops after the record that fills it. A
 * record too short for its cooked header counts as the reader's error record (failed, an
 * error). Returns the count listed; *next and *status as ibw_pcap_records. */
int64_t ibw_check_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                       uint32_t max_caplen, uint32_t snaplen, ibw_record_link link,
                       const ibw_sll_links *sll, const ibw_scan_prog *prog, ibw_tally *tally,
                       int64_t *flagged, int64_t cap_flagged, int64_t *next, int *status);

/* A pcapng interface for the counting walk: its snaplen (0: none) and where its frames start
 * (header -1: its packets are not counted here). */
typedef struct ibw_count_iface {
    uint32_t snaplen;
    int32_t header; /* enum ibw_record_header, or -1 */
    int32_t code;
} ibw_count_iface;

/* ibw_check_pcap over the run of pcapng Enhanced Packet Blocks from pos that the walker
 * (ibwire.pcap.pcapng) reads as plain packets: the block's lengths hold together (all in
 * [pos, end), a multiple of 4 from 32 to max_len, trailing copy equal, caplen within it), an
 * interface below n_iface with header >= 0, caplen at most orig_len and the interface's
 * snaplen. Failed records are listed as (record from the first one walked here, block
 * offset). Returns the count listed; *next is where the run stopped and *status why: 0 a
 * block it does not take (or the end of the data), 1 after the cap_flagged-th record listed,
 * 2 the data may end inside the block at *next (fewer than 32 bytes, or its length runs past
 * end). */
int64_t ibw_check_pcapng(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                         uint32_t max_len, const ibw_count_iface *ifaces, int64_t n_iface,
                         const ibw_sll_links *sll, const ibw_scan_prog *prog,
                         ibw_tally *tally, int64_t *flagged, int64_t cap_flagged,
                         int64_t *next, int *status);

/* Where a run of `depth` Enhanced Packet Blocks whose lengths hold together (as for
 * ibw_check_pcapng) and whose caplen is at most orig_len starts, searching every 4th byte of
 * [from, from + search); -1 if none (a run that ends exactly at end counts too). A guess, as
 * ibw_pcap_sync's. */
int64_t ibw_pcapng_sync(const uint8_t *buf, int64_t from, int64_t end, int swapped,
                        uint32_t max_len, int depth, int64_t search);

/* Where a run of `depth` whole, plausible classic pcap record headers (8 <= caplen <=
 * max_caplen and orig_len < 16 MiB, fraction of a second < fraction_limit, seconds within a day of the
 * previous record's) starts, searching [from, from + search); -1 if none (a run that ends
 * exactly at end counts too). Only a guess to split a buffer between threads: the walk from the
 * start must arrive exactly there for the guess to be used. */
int64_t ibw_pcap_sync(const uint8_t *buf, int64_t from, int64_t end, int swapped,
                      uint32_t max_caplen, uint32_t fraction_limit, int depth, int64_t search);

#endif /* IBWIRE_SCAN_H */
