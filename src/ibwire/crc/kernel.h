/* ibwire ICRC/VCRC kernel: CRC primitives, the frame walker, per-packet and batch checks.
 *
 * One walker (ibw_locate) finds where the ICRC region of a frame is; every other entry point
 * (icrc, vcrc, verify, fix, the batch loop, and later the capture scanner) goes through it.
 * Nothing here reads outside [p, p + n): every length field is checked before it is used.
 *
 * Algorithm and masks: shared/reference/crc.md (rxe_icrc.c, scapy contrib/roce.py, the
 * Endace VCRC parameters and 43 hardware-captured native IB frames).
 */
#ifndef IBWIRE_CRC_KERNEL_H
#define IBWIRE_CRC_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* Where a frame starts (Python: LINK_CODES). */
enum ibw_link {
    IBW_LINK_ETHERNET = 0,
    IBW_LINK_INFINIBAND = 1,
    IBW_LINK_IP = 2,
    IBW_LINK_GRH = 3,
    IBW_LINK_COUNT = 4
};

/* Per-packet outcome (Python: ERROR_NAMES). */
enum ibw_error {
    IBW_OK = 0,
    IBW_NOT_IB = 1,
    IBW_TRUNCATED = 2,
    IBW_MALFORMED = 3,
    IBW_UNSUPPORTED = 4
};

/* Encapsulation (Python: KIND_NAMES). */
enum ibw_kind {
    IBW_KIND_NONE = 0,
    IBW_KIND_IB_LRH = 1,      /* native IB, LNH 2: LRH, BTH */
    IBW_KIND_IB_GRH = 2,      /* native IB, LNH 3: LRH, GRH, BTH */
    IBW_KIND_IB_RAW = 3,      /* native IB, LNH 0: VCRC only */
    IBW_KIND_IB_IP = 4,       /* native IB, LNH 1: VCRC only */
    IBW_KIND_ROCEV1 = 5,      /* GRH, BTH (EtherType 0x8915) */
    IBW_KIND_ROCEV2_IPV4 = 6, /* IPv4, UDP 4791, BTH */
    IBW_KIND_ROCEV2_IPV6 = 7  /* IPv6, UDP 4791, BTH */
};

/* The places a fault can be reported: (name, header, field). Python keeps the same table
 * (ibwire.crc._common.SITES); a test checks that the two agree. */
#define IBW_SITES(X)                                          \
    X(NONE, "", "")                                           \
    X(ETH_TYPE, "Ethernet", "ethertype")                      \
    X(VLAN_TYPE, "VLAN", "ethertype")                         \
    X(IP_VERSION, "IP", "version")                            \
    X(IPV4_HEADER, "IPv4", "header")                          \
    X(IPV4_VERSION, "IPv4", "version")                        \
    X(IPV4_PROTOCOL, "IPv4", "protocol")                      \
    X(IPV4_IHL, "IPv4", "ihl")                                \
    X(IPV4_FRAGMENT, "IPv4", "fragment")                      \
    X(IPV4_TOTAL_LENGTH, "IPv4", "total_length")              \
    X(IPV6_HEADER, "IPv6", "header")                          \
    X(IPV6_VERSION, "IPv6", "version")                        \
    X(IPV6_NEXT_HEADER, "IPv6", "next_header")                \
    X(IPV6_EXTENSION, "IPv6", "extension_header")             \
    X(IPV6_PAYLOAD_LENGTH, "IPv6", "payload_length")          \
    X(UDP_HEADER, "UDP", "header")                            \
    X(UDP_DST_PORT, "UDP", "dst_port")                        \
    X(UDP_LENGTH, "UDP", "length")                            \
    X(GRH_HEADER, "GRH", "header")                            \
    X(GRH_VERSION, "GRH", "ipver")                            \
    X(GRH_NEXT_HEADER, "GRH", "next_header")                  \
    X(GRH_PAYLOAD_LENGTH, "GRH", "payload_length")            \
    X(LRH_HEADER, "LRH", "header")                            \
    X(LRH_PACKET_LENGTH, "LRH", "packet_length")              \
    X(LRH_LNH, "LRH", "lnh")                                  \
    X(VCRC, "VCRC", "vcrc")

enum ibw_site {
#define IBW_SITE_ENUM(name, header, field) IBW_SITE_##name,
    IBW_SITES(IBW_SITE_ENUM)
#undef IBW_SITE_ENUM
    IBW_SITE_COUNT
};

extern const char *const ibw_site_header[IBW_SITE_COUNT];
extern const char *const ibw_site_field[IBW_SITE_COUNT];

#define IBW_MAX_MASKS 8

/* A CRC placed by the length fields past the bytes the capture kept (a snap length): it
 * cannot be verified (ibw_locate_wire). */
#define IBW_CUT_ICRC 1
#define IBW_CUT_VCRC 2
/* A header of an InfiniBand/RoCE packet runs past the captured bytes (the error names it). */
#define IBW_CUT_HEADER 4

/* Where the ICRC region of one frame is. Offsets are from the frame start. */
typedef struct ibw_span {
    int64_t start;   /* first covered byte (after the 8 x 0xFF pseudo LRH if pseudo_lrh) */
    int64_t bth;     /* BTH offset, -1 if no ICRC (LNH 0/1) */
    int64_t icrc;    /* ICRC offset = end of the covered region, -1 if none */
    int64_t vcrc;    /* VCRC offset (native IB), -1 if none */
    int64_t where;   /* fault: byte offset of the field at fault */
    int32_t kind;    /* enum ibw_kind; set as soon as known, even on a fault */
    int32_t error;   /* enum ibw_error */
    int32_t site;    /* fault: enum ibw_site */
    int32_t pseudo_lrh;
    int32_t cut;     /* IBW_CUT_*: a CRC the length fields place past the captured bytes */
    int32_t nmask;
    int64_t mask_off[IBW_MAX_MASKS]; /* masked bytes, in ascending order */
    uint8_t mask_or[IBW_MAX_MASKS];  /* bits forced to one in each of them */
    /* The same masks for the vector code: bit i of ff[i / 64] = byte start + i is forced to
     * 0xFF; first_or = the bits forced to one in byte start (VL, or the traffic class nibble). */
    uint64_t ff[2];
    uint8_t first_or;
} ibw_span;

/* One packet's verdict (batch columns); also set on a fault that leaves the CRC placed. */
typedef struct ibw_check {
    int8_t icrc_ok;  /* 1 ok, 0 bad, -1 not applicable */
    int8_t vcrc_ok;
    uint8_t error;
    uint8_t kind;
    uint32_t icrc_wire, icrc_computed;
    uint16_t vcrc_wire, vcrc_computed;
} ibw_check;

/* Builds the tables and picks the CRC-32 backend; idempotent, call once before anything. */
void ibw_init(void);
/* "vpclmulqdq", "pclmulqdq" or "slice-by-8". */
const char *ibw_crc32_backend(void);
/* Forces a backend by name (for tests and benchmarks); returns 0 if unavailable. */
int ibw_crc32_set_backend(const char *name);

/* zlib.crc32-compatible: crc is the previous finished value (0 to start). */
uint32_t ibw_crc32(uint32_t crc, const uint8_t *p, size_t n);
/* The VCRC CRC-16 (poly 0x100B reflected, init and xorout 0xFFFF). */
uint16_t ibw_crc16(const uint8_t *p, size_t n);

/* The walker: fills s and returns s->error. link is enum ibw_link. A fault may still leave
 * the CRCs placed (s->icrc >= 0 or s->vcrc >= 0, with the masks): the length fields put them
 * inside the frame although a header is broken (a GRH IPVer or next header; a UDP length
 * that disagrees with the IP length, which then places the ICRC; an LRH PktLen too short for
 * the transport headers, which still places the VCRC; a GRH PayLen that disagrees with the
 * LRH PktLen, which then places both). The verdict then tells a corrupted packet (CRC bad)
 * from one the sender built wrong (CRC good). */
int ibw_locate(const uint8_t *p, int64_t n, int link, ibw_span *s);
/* ibw_locate of a frame the capture may have cut: n bytes kept of `wire` on the wire (its
 * original length; wire <= n: not cut). The length fields are checked against `wire`, the
 * headers read from the n bytes only; a CRC they place past n is flagged in s->cut, not read. */
int ibw_locate_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s);
/* CRC values for a span that ibw_locate accepted (icrc >= 0, resp. vcrc >= 0). */
uint32_t ibw_icrc_of(const uint8_t *p, const ibw_span *s);
uint16_t ibw_vcrc_of(const uint8_t *p, const ibw_span *s);
/* locate + the CRCs as on the wire (c->icrc_wire, c->vcrc_wire), also those a fault leaves
 * placed, without checking them (verdicts -1); returns c->error. */
int ibw_place(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c);
/* ibw_place + both checks; returns c->error. */
int ibw_verify(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c);
/* ibw_place and ibw_verify of a frame cut by the capture (see ibw_locate_wire): a CRC past
 * the kept bytes keeps its verdict -1 and its wire value 0. */
int ibw_place_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s,
                   ibw_check *c);
int ibw_verify_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s,
                    ibw_check *c);
/* locate + write the ICRC (and the VCRC after it) in place; returns s->error. placed: also
 * write the CRCs that a fault leaves placed (else a fault writes nothing). */
int ibw_fix(uint8_t *p, int64_t n, int link, int placed, ibw_span *s);

/* Index of the first record outside [0, buflen), or -1 when all are inside. */
int64_t ibw_check_records(int64_t buflen, const int64_t *offs, const int64_t *lens, int64_t count);
/* Verifies count records of buf; links[i * link_stride] is each record's link (stride 0: one
 * link for all). Records outside the buffer get IBW_TRUNCATED. Needs no Python, no GIL. */
void ibw_verify_batch(const uint8_t *buf, int64_t buflen, const int64_t *offs,
                      const int64_t *lens, const uint8_t *links, int64_t link_stride,
                      int64_t count, int8_t *icrc_ok, int8_t *vcrc_ok, uint8_t *error,
                      uint8_t *kind);
/* ibw_fix of count records of buf, in place (strict: a record with a fault, or outside the
 * buffer, is left as it is). was_right[i]: 1 its CRCs on the wire were already right (the
 * bytes written are the same), 0 they were rewritten, -1 nothing written. No GIL needed. */
void ibw_fix_batch(uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
                   const uint8_t *links, int64_t link_stride, int64_t count, int8_t *was_right);

#endif /* IBWIRE_CRC_KERNEL_H */
