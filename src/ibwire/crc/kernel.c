/* ibwire ICRC/VCRC kernel; see kernel.h. The frame walker lives here, in one place. */
#include "kernel.h"

#include "crc_tables.h"
#include "crc_simd.h"

#define IBW_ROCE_PORT 4791
#define IBW_GRH_NEXT_HEADER_IBA 0x1B
#define IBW_BTH 12
#define IBW_ICRC 4
#define IBW_UDP 8
#define IBW_GRH 40
#define IBW_LRH 8

const char *const ibw_site_header[IBW_SITE_COUNT] = {
#define IBW_SITE_HEADER(name, header, field) header,
    IBW_SITES(IBW_SITE_HEADER)
#undef IBW_SITE_HEADER
};
const char *const ibw_site_field[IBW_SITE_COUNT] = {
#define IBW_SITE_FIELD(name, header, field) field,
    IBW_SITES(IBW_SITE_FIELD)
#undef IBW_SITE_FIELD
};

static int initialised;

void ibw_init(void)
{
    if (initialised)
        return;
    crc_tables_init();
    crc_backend_init();
    lead_registers_init();
    initialised = 1;
}

static const char *const backend_names[] = {"slice-by-8", "pclmulqdq", "vpclmulqdq"};

const char *ibw_crc32_backend(void)
{
    return backend_names[crc32_backend];
}

int ibw_crc32_set_backend(const char *name)
{
    for (int i = 0; i <= crc32_best; i++) {
        if (strcmp(name, backend_names[i]) == 0) {
            crc32_backend = i;
            return 1;
        }
    }
    return 0;
}

uint32_t ibw_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~crc32_update(~crc, p, n);
}

uint16_t ibw_crc16(const uint8_t *p, size_t n)
{
    return (uint16_t)~crc16_sb8(0xFFFF, p, n);
}

/* ---------------------------------------------------------------- the walker */

static inline unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static inline int fault(ibw_span *s, int error, int site, int64_t where)
{
    s->error = error;
    s->site = site;
    s->where = where;
    return error;
}

/* Masks are added after s->start is set, less than 128 bytes after it. */
static inline void mask(ibw_span *s, int64_t off, uint8_t bits)
{
    int64_t rel = off - s->start;
    s->mask_off[s->nmask] = off;
    s->mask_or[s->nmask] = bits;
    s->nmask++;
    if (bits == 0xFF)
        s->ff[rel >> 6] |= 1ULL << (rel & 63);
    else /* only ever the region's first byte */
        s->first_or |= bits;
}

/* GRH at g: TClass (low nibble of byte 0, high nibble of byte 1), FlowLabel, HopLmt. */
static void mask_grh(ibw_span *s, int64_t g)
{
    mask(s, g, 0x0F);
    mask(s, g + 1, 0xFF);
    mask(s, g + 2, 0xFF);
    mask(s, g + 3, 0xFF);
    mask(s, g + 7, 0xFF);
}

/* The BTH follows at bth; the covered region ends at icrc. */
static int done(ibw_span *s, int64_t bth, int64_t icrc)
{
    mask(s, bth + 4, 0xFF); /* FECN, BECN, Resv6a */
    s->bth = bth;
    s->icrc = icrc;
    return IBW_OK;
}

static int walk_grh(const uint8_t *p, int64_t n, int64_t w, int64_t g, ibw_span *s)
{
    s->kind = IBW_KIND_ROCEV1;
    if (n - g < IBW_GRH)
        return fault(s, IBW_TRUNCATED, IBW_SITE_GRH_HEADER, g);
    int64_t paylen = be16(p + g + 4);
    /* PayLen alone places the ICRC: a wrong IPVer or next header still gets its verdict */
    int placed = paylen >= IBW_BTH + IBW_ICRC && paylen <= w - g - IBW_GRH;
    if (placed) {
        s->start = g;
        s->pseudo_lrh = 1;
        mask_grh(s, g);
        done(s, g + IBW_GRH, g + IBW_GRH + paylen - IBW_ICRC);
    }
    if (p[g] >> 4 != 6)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_VERSION, g);
    if (p[g + 6] != IBW_GRH_NEXT_HEADER_IBA)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_NEXT_HEADER, g + 6);
    if (paylen < IBW_BTH + IBW_ICRC)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_PAYLOAD_LENGTH, g + 4);
    if (!placed)
        return fault(s, IBW_TRUNCATED, IBW_SITE_GRH_PAYLOAD_LENGTH, g + 4);
    return IBW_OK;
}

static int walk_ipv4(const uint8_t *p, int64_t n, int64_t w, int64_t o, ibw_span *s)
{
    if (n - o < 20)
        return fault(s, IBW_TRUNCATED, IBW_SITE_IPV4_HEADER, o);
    if (p[o] >> 4 != 4)
        return fault(s, IBW_MALFORMED, IBW_SITE_IPV4_VERSION, o);
    int64_t ihl = (int64_t)(p[o] & 0x0F) * 4;
    if (ihl < 20)
        return fault(s, IBW_MALFORMED, IBW_SITE_IPV4_IHL, o);
    if (p[o + 9] != 17)
        return fault(s, IBW_NOT_IB, IBW_SITE_IPV4_PROTOCOL, o + 9);
    if (be16(p + o + 6) & 0x1FFF) /* a later fragment: no UDP header to tell what it is */
        return fault(s, IBW_NOT_IB, IBW_SITE_IPV4_FRAGMENT, o + 6);
    if (n - o < ihl)
        return fault(s, IBW_TRUNCATED, IBW_SITE_IPV4_IHL, o);
    int64_t u = o + ihl;
    if (n - u < IBW_UDP)
        return fault(s, IBW_TRUNCATED, IBW_SITE_UDP_HEADER, u);
    if (be16(p + u + 2) != IBW_ROCE_PORT)
        return fault(s, IBW_NOT_IB, IBW_SITE_UDP_DST_PORT, u + 2);
    s->kind = IBW_KIND_ROCEV2_IPV4;
    if (p[o + 6] & 0x20) /* MF: the first fragment of a RoCEv2 packet */
        return fault(s, IBW_UNSUPPORTED, IBW_SITE_IPV4_FRAGMENT, o + 6);
    int64_t total = be16(p + o + 2);
    if (total < ihl + IBW_UDP + IBW_BTH + IBW_ICRC)
        return fault(s, IBW_MALFORMED, IBW_SITE_IPV4_TOTAL_LENGTH, o + 2);
    int udp_lies = (int64_t)be16(p + u + 4) != total - ihl;
    if (total > w - o) /* the UDP length's lie, if any, is the first fault */
        return udp_lies ? fault(s, IBW_MALFORMED, IBW_SITE_UDP_LENGTH, u + 4)
                        : fault(s, IBW_TRUNCATED, IBW_SITE_IPV4_TOTAL_LENGTH, o + 2);
    s->start = o;
    s->pseudo_lrh = 1;
    mask(s, o + 1, 0xFF);  /* TOS: DSCP + ECN */
    mask(s, o + 8, 0xFF);  /* TTL */
    mask(s, o + 10, 0xFF); /* header checksum */
    mask(s, o + 11, 0xFF);
    mask(s, u + 6, 0xFF); /* UDP checksum */
    mask(s, u + 7, 0xFF);
    done(s, u + IBW_UDP, o + total - IBW_ICRC);
    /* a UDP length that disagrees: the IP total length (which delimits the datagram in a
     * padded Ethernet frame) still places the ICRC, so the packet gets its verdict too */
    return udp_lies ? fault(s, IBW_MALFORMED, IBW_SITE_UDP_LENGTH, u + 4) : IBW_OK;
}

/* IPv6 whose next header is not UDP: follow the extension headers only to tell RoCE
 * (unsupported) from other traffic (not IB). */
static int walk_ipv6_ext(const uint8_t *p, int64_t n, int64_t o, ibw_span *s)
{
    unsigned nh = p[o + 6];
    int64_t q = o + 40;
    for (;;) {
        switch (nh) {
        case 0: case 43: case 60: case 135: case 139: case 140: case 253: case 254:
            if (n - q < 8)
                return fault(s, IBW_NOT_IB, IBW_SITE_IPV6_EXTENSION, q);
            nh = p[q];
            q += ((int64_t)p[q + 1] + 1) * 8;
            break;
        case 51: /* AH counts 4-byte units, minus 2 */
            if (n - q < 8)
                return fault(s, IBW_NOT_IB, IBW_SITE_IPV6_EXTENSION, q);
            nh = p[q];
            q += ((int64_t)p[q + 1] + 2) * 4;
            break;
        case 44: /* fragment: a fragment of UDP cannot be checked */
            if (n - q < 8)
                return fault(s, IBW_NOT_IB, IBW_SITE_IPV6_EXTENSION, q);
            if (p[q] == 17)
                return fault(s, IBW_UNSUPPORTED, IBW_SITE_IPV6_EXTENSION, q);
            return fault(s, IBW_NOT_IB, IBW_SITE_IPV6_NEXT_HEADER, o + 6);
        case 17:
            if (n - q < IBW_UDP)
                return fault(s, IBW_TRUNCATED, IBW_SITE_UDP_HEADER, q);
            if (be16(p + q + 2) != IBW_ROCE_PORT)
                return fault(s, IBW_NOT_IB, IBW_SITE_UDP_DST_PORT, q + 2);
            s->kind = IBW_KIND_ROCEV2_IPV6;
            return fault(s, IBW_UNSUPPORTED, IBW_SITE_IPV6_NEXT_HEADER, o + 6);
        default:
            return fault(s, IBW_NOT_IB, IBW_SITE_IPV6_NEXT_HEADER, o + 6);
        }
    }
}

static int walk_ipv6(const uint8_t *p, int64_t n, int64_t w, int64_t o, ibw_span *s)
{
    if (n - o < 40)
        return fault(s, IBW_TRUNCATED, IBW_SITE_IPV6_HEADER, o);
    if (p[o] >> 4 != 6)
        return fault(s, IBW_MALFORMED, IBW_SITE_IPV6_VERSION, o);
    if (p[o + 6] != 17)
        return walk_ipv6_ext(p, n, o, s);
    int64_t u = o + 40;
    if (n - u < IBW_UDP)
        return fault(s, IBW_TRUNCATED, IBW_SITE_UDP_HEADER, u);
    if (be16(p + u + 2) != IBW_ROCE_PORT)
        return fault(s, IBW_NOT_IB, IBW_SITE_UDP_DST_PORT, u + 2);
    s->kind = IBW_KIND_ROCEV2_IPV6;
    int64_t plen = be16(p + o + 4);
    if (plen < IBW_UDP + IBW_BTH + IBW_ICRC)
        return fault(s, IBW_MALFORMED, IBW_SITE_IPV6_PAYLOAD_LENGTH, o + 4);
    int udp_lies = (int64_t)be16(p + u + 4) != plen;
    if (plen > w - u)
        return udp_lies ? fault(s, IBW_MALFORMED, IBW_SITE_UDP_LENGTH, u + 4)
                        : fault(s, IBW_TRUNCATED, IBW_SITE_IPV6_PAYLOAD_LENGTH, o + 4);
    s->start = o;
    s->pseudo_lrh = 1;
    mask_grh(s, o);      /* same layout: traffic class, flow label, hop limit */
    mask(s, u + 6, 0xFF); /* UDP checksum */
    mask(s, u + 7, 0xFF);
    done(s, u + IBW_UDP, u + plen - IBW_ICRC);
    return udp_lies ? fault(s, IBW_MALFORMED, IBW_SITE_UDP_LENGTH, u + 4) : IBW_OK; /* as IPv4 */
}

static int walk_ethernet(const uint8_t *p, int64_t n, int64_t w, ibw_span *s)
{
    if (n < 14)
        return fault(s, IBW_TRUNCATED, IBW_SITE_ETH_TYPE, 12);
    unsigned type = be16(p + 12);
    int64_t o = 14;
    while (type == 0x8100 || type == 0x88A8 || type == 0x9100) {
        if (n - o < 4)
            return fault(s, IBW_TRUNCATED, IBW_SITE_VLAN_TYPE, o + 2);
        type = be16(p + o + 2);
        o += 4;
    }
    switch (type) {
    case 0x0800: return walk_ipv4(p, n, w, o, s);
    case 0x86DD: return walk_ipv6(p, n, w, o, s);
    case 0x8915: return walk_grh(p, n, w, o, s);
    default: return fault(s, IBW_NOT_IB, IBW_SITE_ETH_TYPE, o - 2);
    }
}

static int walk_ip(const uint8_t *p, int64_t n, int64_t w, ibw_span *s)
{
    if (n < 1)
        return fault(s, IBW_TRUNCATED, IBW_SITE_IP_VERSION, 0);
    switch (p[0] >> 4) {
    case 4: return walk_ipv4(p, n, w, 0, s);
    case 6: return walk_ipv6(p, n, w, 0, s);
    default: return fault(s, IBW_NOT_IB, IBW_SITE_IP_VERSION, 0);
    }
}

/* Native IB: the LRH PktLen (4-byte words, LRH .. ICRC) places the ICRC and the VCRC. */
static int walk_lrh(const uint8_t *p, int64_t n, int64_t w, ibw_span *s)
{
    static const int kinds[4] = {IBW_KIND_IB_RAW, IBW_KIND_IB_IP, IBW_KIND_IB_LRH,
                                 IBW_KIND_IB_GRH};
    static const int64_t least[4] = {IBW_LRH, IBW_LRH, IBW_LRH + IBW_BTH + IBW_ICRC,
                                     IBW_LRH + IBW_GRH + IBW_BTH + IBW_ICRC};
    if (n < IBW_LRH)
        return fault(s, IBW_TRUNCATED, IBW_SITE_LRH_HEADER, 0);
    unsigned lnh = p[1] & 3;
    int64_t len = (int64_t)(be16(p + 4) & 0x7FF) * 4; /* PktLen: word 1, bits 5..15 */
    s->kind = kinds[lnh];
    if (len < least[lnh]) {
        /* no room for the transport headers, but the VCRC is still where PktLen says */
        if (len >= IBW_LRH && len + 2 <= w)
            s->vcrc = len;
        return fault(s, IBW_MALFORMED, IBW_SITE_LRH_PACKET_LENGTH, 4);
    }
    if (len + 2 > w)
        return fault(s, IBW_TRUNCATED, IBW_SITE_LRH_PACKET_LENGTH, 4);
    s->vcrc = len;
    if (lnh < 2)
        return IBW_OK; /* raw or IP packet: VCRC only */
    if (lnh == 2) {
        mask(s, 0, 0xF0); /* VL */
        return done(s, IBW_LRH, len - IBW_ICRC);
    }
    /* LNH 3: the whole LRH is variant, i.e. the 8 x 0xFF pseudo LRH, then the GRH. PktLen
     * places both CRCs (the link layer goes by it), so a broken GRH still gets verdicts. */
    const int64_t g = IBW_LRH;
    s->start = g;
    s->pseudo_lrh = 1;
    mask_grh(s, g);
    done(s, g + IBW_GRH, len - IBW_ICRC);
    if (n - g < IBW_GRH) /* PktLen is within the wire length, but the capture cut the GRH */
        return fault(s, IBW_TRUNCATED, IBW_SITE_GRH_HEADER, g);
    if (p[g] >> 4 != 6)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_VERSION, g);
    if (p[g + 6] != IBW_GRH_NEXT_HEADER_IBA)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_NEXT_HEADER, g + 6);
    if ((int64_t)be16(p + g + 4) != len - IBW_LRH - IBW_GRH)
        return fault(s, IBW_MALFORMED, IBW_SITE_GRH_PAYLOAD_LENGTH, g + 4);
    return IBW_OK;
}

static int walk(const uint8_t *p, int64_t n, int64_t w, int link, ibw_span *s)
{
    s->start = 0;
    s->bth = s->icrc = s->vcrc = -1;
    s->where = 0;
    s->kind = IBW_KIND_NONE;
    s->error = IBW_OK;
    s->site = IBW_SITE_NONE;
    s->pseudo_lrh = 0;
    s->nmask = 0;
    s->ff[0] = s->ff[1] = 0;
    s->first_or = 0;
    s->cut = 0;
    if (n < 0)
        n = 0;
    if (w < n)
        w = n;
    switch (link) {
    case IBW_LINK_ETHERNET: return walk_ethernet(p, n, w, s);
    case IBW_LINK_INFINIBAND: return walk_lrh(p, n, w, s);
    case IBW_LINK_IP: return walk_ip(p, n, w, s);
    case IBW_LINK_GRH: return walk_grh(p, n, w, 0, s);
    default: return fault(s, IBW_NOT_IB, IBW_SITE_NONE, 0);
    }
}

/* The sites of the length fields that place the CRCs (a truncation there is their lie). */
static inline int length_site(int site)
{
    return site == IBW_SITE_IPV4_TOTAL_LENGTH || site == IBW_SITE_IPV6_PAYLOAD_LENGTH
           || site == IBW_SITE_GRH_PAYLOAD_LENGTH || site == IBW_SITE_LRH_PACKET_LENGTH;
}

int ibw_locate_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s)
{
    int error = walk(p, n, wire, link, s);
    /* the length fields may place a CRC past the bytes the capture kept: not verifiable */
    if (s->icrc >= 0 && s->icrc + IBW_ICRC > n)
        s->cut |= IBW_CUT_ICRC;
    if (s->vcrc >= 0 && s->vcrc + 2 > n) /* a frame cut at all: no CRC of it is verified */
        s->cut |= IBW_CUT_VCRC | (s->icrc >= 0 ? IBW_CUT_ICRC : 0);
    /* an InfiniBand/RoCE packet whose headers the capture cut: not a length field's lie */
    if (error == IBW_TRUNCATED && n < wire && s->kind != IBW_KIND_NONE && !length_site(s->site))
        s->cut |= IBW_CUT_HEADER;
    return error;
}

int ibw_locate(const uint8_t *p, int64_t n, int link, ibw_span *s)
{
    return walk(p, n, n, link, s);
}

/* ---------------------------------------------------------------- CRCs of a span */

uint32_t ibw_icrc_of(const uint8_t *p, const ibw_span *s)
{
    return ~crc32_region(p, s);
}

uint16_t ibw_vcrc_of(const uint8_t *p, const ibw_span *s)
{
    return ibw_crc16(p, (size_t)s->vcrc);
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ibw_place_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s,
                   ibw_check *c)
{
    c->icrc_ok = c->vcrc_ok = -1;
    c->icrc_wire = c->icrc_computed = 0;
    c->vcrc_wire = c->vcrc_computed = 0;
    c->error = (uint8_t)ibw_locate_wire(p, n, wire, link, s);
    c->kind = (uint8_t)s->kind;
    if (c->error != IBW_OK && s->icrc < 0 && s->vcrc < 0)
        return c->error; /* the fault leaves no CRC placed */
    if (s->icrc >= 0 && !(s->cut & IBW_CUT_ICRC))
        c->icrc_wire = le32(p + s->icrc);
    if (s->vcrc >= 0 && !(s->cut & IBW_CUT_VCRC))
        c->vcrc_wire = (uint16_t)(p[s->vcrc] | p[s->vcrc + 1] << 8);
    return c->error;
}

int ibw_place(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c)
{
    return ibw_place_wire(p, n, n, link, s, c);
}

int ibw_verify_wire(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_span *s,
                    ibw_check *c)
{
    ibw_place_wire(p, n, wire, link, s, c); /* a fault that places no CRC leaves both < 0 */
    if (s->icrc >= 0 && !(s->cut & IBW_CUT_ICRC)) {
        c->icrc_computed = ibw_icrc_of(p, s);
        c->icrc_ok = c->icrc_computed == c->icrc_wire;
    }
    if (s->vcrc >= 0 && !(s->cut & IBW_CUT_VCRC)) {
        c->vcrc_computed = ibw_vcrc_of(p, s);
        c->vcrc_ok = c->vcrc_computed == c->vcrc_wire;
    }
    return c->error;
}

int ibw_verify(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c)
{
    return ibw_verify_wire(p, n, n, link, s, c);
}

int ibw_fix(uint8_t *p, int64_t n, int link, int placed, ibw_span *s)
{
    if (ibw_locate(p, n, link, s) != IBW_OK && !placed)
        return s->error;
    if (s->icrc >= 0) {
        uint32_t v = ibw_icrc_of(p, s);
        for (int i = 0; i < 4; i++)
            p[s->icrc + i] = (uint8_t)(v >> (8 * i));
    }
    if (s->vcrc >= 0) {
        uint16_t v = ibw_vcrc_of(p, s);
        p[s->vcrc] = (uint8_t)v;
        p[s->vcrc + 1] = (uint8_t)(v >> 8);
    }
    return s->error;
}

/* ---------------------------------------------------------------- batch */

static inline int record_outside(int64_t buflen, int64_t off, int64_t len)
{
    return off < 0 || len < 0 || off > buflen || len > buflen - off;
}

int64_t ibw_check_records(int64_t buflen, const int64_t *offs, const int64_t *lens,
                          int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (record_outside(buflen, offs[i], lens[i]))
            return i;
    return -1;
}

void ibw_verify_batch(const uint8_t *buf, int64_t buflen, const int64_t *offs,
                      const int64_t *lens, const uint8_t *links, int64_t link_stride,
                      int64_t count, int8_t *icrc_ok, int8_t *vcrc_ok, uint8_t *error,
                      uint8_t *kind)
{
    ibw_span s;
    ibw_check c;
    for (int64_t i = 0; i < count; i++) {
        if (record_outside(buflen, offs[i], lens[i])) {
            icrc_ok[i] = vcrc_ok[i] = -1;
            error[i] = IBW_TRUNCATED;
            kind[i] = IBW_KIND_NONE;
            continue;
        }
        ibw_verify(buf + offs[i], lens[i], links[i * link_stride], &s, &c);
        icrc_ok[i] = c.icrc_ok;
        vcrc_ok[i] = c.vcrc_ok;
        error[i] = c.error;
        kind[i] = c.kind;
    }
}

void ibw_fix_batch(uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
                   const uint8_t *links, int64_t link_stride, int64_t count, int8_t *was_right)
{
    ibw_span s;
    for (int64_t i = 0; i < count; i++) {
        uint8_t *p = buf + offs[i];
        if (record_outside(buflen, offs[i], lens[i]) ||
            ibw_locate(p, lens[i], links[i * link_stride], &s) != IBW_OK) {
            was_right[i] = -1; /* nothing written */
            continue;
        }
        int same = 1;
        if (s.icrc >= 0) {
            uint32_t v = ibw_icrc_of(p, &s);
            same = le32(p + s.icrc) == v;
            for (int k = 0; k < 4; k++)
                p[s.icrc + k] = (uint8_t)(v >> (8 * k));
        }
        if (s.vcrc >= 0) { /* after the ICRC, which it covers */
            uint16_t v = ibw_vcrc_of(p, &s);
            same &= (uint16_t)(p[s.vcrc] | p[s.vcrc + 1] << 8) == v;
            p[s.vcrc] = (uint8_t)v;
            p[s.vcrc + 1] = (uint8_t)(v >> 8);
        }
        was_right[i] = (int8_t)same;
    }
}
