/* ibwire batch scanner; see scan.h. */
#include "scan.h"

#include <string.h>

#include "sequential.h"
#include "kernel.h"

#define ETHERNET_LEN 14
#define TAG_LEN 4
#define IPV4_LEN 20
#define IPV6_LEN 40
#define LRH_LEN 8
#define BTH_LEN 12
#define MAD_LEN 24
#define RMPP_LEN 12

static inline uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static inline uint32_t be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Header `slot` is at p; it fits (the caller checked). */
static void put(const ibw_scan_prog *g, const ibw_scan_out *out, int64_t row, int slot,
                const uint8_t *p)
{
    const ibw_scan_instr *ins = g->instr + g->slot_first[slot];
    const ibw_scan_instr *last = ins + g->slot_count[slot];
    out->headers[row] |= 1u << slot;
    for (; ins < last; ins++) {
        const uint8_t *q = p + ins->at;
        void *col = out->cols[ins->column];
        uint64_t v;
        switch (ins->load) {
        case 1: v = q[0]; break;
        case 2: v = be16(q); break;
        case 4: v = be32(q); break;
        case 8: v = be64(q); break;
        default: memcpy((uint8_t *)col + 16 * row, q, 16); continue;
        }
        v = (v >> ins->shift) & ins->mask;
        switch (ins->width) {
        case 1: ((uint8_t *)col)[row] = (uint8_t)v; break;
        case 2: ((uint16_t *)col)[row] = (uint16_t)v; break;
        case 4: ((uint32_t *)col)[row] = (uint32_t)v; break;
        default: ((uint64_t *)col)[row] = v; break;
        }
    }
}

static inline int fits(int64_t n, int64_t at, int64_t size)
{
    return at >= 0 && size <= n - at;
}

/* ECN from a traffic class laid out as in IPv6 and the GRH (low nibble of byte 0, high of 1). */
static inline int8_t ecn_of_tclass(const uint8_t *p)
{
    return (int8_t)((p[1] >> 4) & 3);
}

/* The headers before the transport, read wherever they fit (also on other traffic). */
static void network(const ibw_scan_prog *g, const ibw_scan_out *out, int64_t row,
                    const uint8_t *p, int64_t n, int link)
{
    int64_t net = -1;
    unsigned type = 0;
    if (link == IBW_LINK_ETHERNET) {
        if (n < ETHERNET_LEN)
            return;
        put(g, out, row, g->eth, p);
        type = be16(p + 12);
        int64_t o = ETHERNET_LEN;
        unsigned tags = 0;
        while (type == 0x8100 || type == 0x88A8 || type == 0x9100) {
            if (!fits(n, o, TAG_LEN))
                break;
            if (tags == 0)
                put(g, out, row, g->vlan, p + o);
            tags++;
            type = be16(p + o + 2);
            o += TAG_LEN;
        }
        out->vlan_count[row] = (uint8_t)(tags > 255 ? 255 : tags);
        if (type == 0x0800 || type == 0x86DD || type == 0x8915)
            net = o;
        if (type == 0x8915) {
            if (fits(n, net, IPV6_LEN)) {
                put(g, out, row, g->grh, p + net);
                out->ecn[row] = ecn_of_tclass(p + net);
            }
            out->off_network[row] = (int32_t)net;
            return;
        }
    } else if (link == IBW_LINK_IP) {
        net = 0;
    } else if (link == IBW_LINK_GRH) {
        out->off_network[row] = 0;
        if (n >= IPV6_LEN) {
            put(g, out, row, g->grh, p);
            out->ecn[row] = ecn_of_tclass(p);
        }
        return;
    } else if (link == IBW_LINK_INFINIBAND) {
        out->off_network[row] = 0;
        if (n < LRH_LEN)
            return;
        put(g, out, row, g->lrh, p);
        if ((p[1] & 3) == 3 && n >= LRH_LEN + IPV6_LEN) {
            put(g, out, row, g->grh, p + LRH_LEN);
            out->ecn[row] = ecn_of_tclass(p + LRH_LEN);
        }
        return;
    } else {
        return;
    }
    if (net < 0 || net >= n)
        return;
    out->off_network[row] = (int32_t)net;
    const uint8_t *ip = p + net;
    int64_t udp = -1;
    if (ip[0] >> 4 == 4 && (link == IBW_LINK_IP || type == 0x0800)) {
        if (!fits(n, net, IPV4_LEN))
            return;
        put(g, out, row, g->ip, ip);
        out->ecn[row] = (int8_t)(ip[1] & 3);
        int64_t ihl = (int64_t)(ip[0] & 0x0F) * 4;
        if (ip[9] == 17 && ihl >= IPV4_LEN && (be16(ip + 6) & 0x1FFF) == 0)
            udp = net + ihl;
    } else if (ip[0] >> 4 == 6 && (link == IBW_LINK_IP || type == 0x86DD)) {
        if (!fits(n, net, IPV6_LEN))
            return;
        put(g, out, row, g->ipv6, ip);
        out->ecn[row] = ecn_of_tclass(ip);
        if (ip[6] == 17)
            udp = net + IPV6_LEN;
    }
    if (udp >= 0 && fits(n, udp, 8))
        put(g, out, row, g->udp, p + udp);
}

static inline void fault(const ibw_scan_out *out, int64_t row, int error, int site,
                         int64_t where)
{
    out->error[row] = (uint8_t)error;
    out->site[row] = (uint8_t)site;
    out->error_off[row] = (int32_t)where;
}

/* The header at `where` (a scanner site), which the length fields allow, runs past the
 * bytes the capture kept: a truncation there, the frame marked cut. */
static inline void cut(const ibw_scan_out *out, int64_t row, int site, int64_t where)
{
    fault(out, row, IBW_TRUNCATED, site, where);
    out->off_payload[row] = (int32_t)where;
    out->cut[row] |= IBW_CUT_HEADER;
}

/* The payload of a packet whose header the capture cut, from `end` (where its headers end,
 * as far as is known) to the ICRC less the pad, if the length fields leave room for it. */
static inline void cut_payload(const ibw_scan_out *out, int64_t row, const uint8_t *p,
                               int64_t bth, int64_t end, int64_t icrc)
{
    int64_t pad = (p[bth + 1] >> 4) & 3;
    if (end + pad <= icrc) {
        out->off_payload[row] = (int32_t)end;
        out->payload_len[row] = (int32_t)(icrc - end - pad);
    }
}

/* The views of the MAD body at `body` (ibwire.scan.views) for its class and attribute `key`:
 * each view is the whole attribute, put only where it ends by the ICRC and the capture kept
 * the bytes of its fields (its extent: a headers-only capture may cut the body). */
static void views(const ibw_scan_prog *g, const ibw_scan_out *out, int64_t row,
                  const uint8_t *p, uint32_t key, int64_t body, int64_t icrc, int64_t kept)
{
    for (int32_t i = 0; i < g->nviews; i++) {
        int slot = g->view_slot[i];
        if (g->view_key[i] == key && g->slot_size[slot] <= icrc - body
            && g->view_extent[i] <= kept - body)
            put(g, out, row, slot, p + body);
    }
}

/* BTH, the opcode's extended headers, MAD/RMPP and the pad, between bth and the ICRC, of a
 * frame of which the capture kept n bytes: the length fields (icrc) bound the headers, and
 * a header they allow but the capture cut is a truncation at that header. */
static void transport(const ibw_scan_prog *g, const ibw_scan_out *out, int64_t row,
                      const uint8_t *p, int64_t n, int64_t bth, int64_t icrc)
{
    int64_t kept = icrc < n ? icrc : n; /* the bytes of the transport the capture kept */
    if (BTH_LEN > kept - bth) {
        cut(out, row, g->site_slot_base + g->bth, bth);
        return;
    }
    put(g, out, row, g->bth, p + bth);
    out->off_bth[row] = (int32_t)bth;
    unsigned op = p[bth];
    int64_t cursor = bth + BTH_LEN;
    unsigned len = g->chain_len[op];
    if (len == IBW_SCAN_NO_OPCODE) { /* unknown headers: all of it is payload */
        out->off_payload[row] = (int32_t)cursor;
        out->payload_len[row] = (int32_t)(icrc - cursor);
        return;
    }
    uint32_t srcqp = 0xFFFFFFFF; /* none */
    for (unsigned j = 0; j < len; j++) {
        int slot = g->chain[op * IBW_SCAN_MAX_CHAIN + j];
        int64_t size = g->slot_size[slot];
        if (size > icrc - cursor) {
            fault(out, row, IBW_MALFORMED, g->site_slot_base + slot, cursor);
            return;
        }
        if (size > kept - cursor) { /* the payload is still where the opcode's headers end */
            cut(out, row, g->site_slot_base + slot, cursor);
            int64_t end = cursor;
            for (unsigned k = j; k < len; k++)
                end += g->slot_size[g->chain[op * IBW_SCAN_MAX_CHAIN + k]];
            cut_payload(out, row, p, bth, end, icrc);
            return;
        }
        put(g, out, row, slot, p + cursor);
        if (slot == g->deth)
            srcqp = be32(p + cursor + 4) & 0xFFFFFF;
        cursor += size;
    }
    /* a MAD: UD to or from QP0/QP1 (program.WELL_KNOWN_QPS, checked by a test) */
    uint32_t destqp = be32(p + bth + 4) & 0xFFFFFF;
    if ((g->op_flags[op] & 1) && (destqp <= 1 || srcqp <= 1) && MAD_LEN <= icrc - cursor) {
        if (MAD_LEN > kept - cursor) { /* a payload from here, as far as is known */
            cut(out, row, g->site_slot_base + g->mad, cursor);
            cut_payload(out, row, p, bth, cursor, icrc);
            return;
        }
        put(g, out, row, g->mad, p + cursor);
        unsigned mgmt = p[cursor + 1];
        uint32_t key = mgmt << 16 | be16(p + cursor + 16); /* class, AttributeID */
        cursor += MAD_LEN;
        int body = 1; /* the body starts after the RMPP header, if its class has one */
        if (g->rmpp[mgmt]) {
            body = RMPP_LEN <= icrc - cursor;
            if (body && RMPP_LEN > kept - cursor) {
                cut(out, row, g->site_slot_base + g->rmpp_slot, cursor);
                cut_payload(out, row, p, bth, cursor, icrc);
                return;
            }
            if (body) {
                put(g, out, row, g->rmpp_slot, p + cursor);
                cursor += RMPP_LEN;
            }
        }
        if (body)
            views(g, out, row, p, key, cursor, icrc, kept);
    }
    int64_t pad = (p[bth + 1] >> 4) & 3;
    out->off_payload[row] = (int32_t)cursor;
    if (pad > icrc - cursor) {
        fault(out, row, IBW_MALFORMED, g->site_padcnt, bth + 1);
        return;
    }
    out->payload_len[row] = (int32_t)(icrc - cursor - pad);
}

static void defaults(const ibw_scan_out *out, int64_t i)
{
    out->ecn[i] = -1;
    out->off_network[i] = out->off_bth[i] = out->off_payload[i] = -1;
    out->payload_len[i] = out->off_icrc[i] = out->off_vcrc[i] = -1;
    out->icrc_ok[i] = out->vcrc_ok[i] = -1;
}

/* The CRC columns of row i. */
static inline void verdicts(const ibw_scan_out *out, int64_t i, const ibw_span *s,
                            const ibw_check *c)
{
    out->icrc_ok[i] = c->icrc_ok;
    out->vcrc_ok[i] = c->vcrc_ok;
    out->icrc[i] = c->icrc_wire;
    out->vcrc[i] = c->vcrc_wire;
    out->off_icrc[i] = (int32_t)s->icrc;
    out->off_vcrc[i] = (int32_t)s->vcrc;
}

/* One frame into row i; network 0: not the link and network columns (only verdicts and the
 * transport walk, which can fail). */
static inline void scan_frame(const ibw_scan_prog *prog, const ibw_scan_out *out, int64_t i,
                              const uint8_t *p, int64_t n, int64_t wire, int link,
                              int network_columns)
{
    ibw_span s;
    ibw_check c;
    if (network_columns)
        network(prog, out, i, p, n, link);
    if (prog->verdicts)
        ibw_verify_wire(p, n, wire, link, &s, &c);
    else
        ibw_place_wire(p, n, wire, link, &s, &c);
    out->encapsulation[i] = c.kind;
    out->cut[i] = (uint8_t)s.cut;
    if (c.error != IBW_OK) {
        fault(out, i, c.error, s.site, s.where);
        if (s.icrc >= 0 || s.vcrc >= 0) /* the fault leaves the CRCs placed: their verdicts */
            verdicts(out, i, &s, &c);
        return;
    }
    verdicts(out, i, &s, &c);
    if (s.bth >= 0) {
        transport(prog, out, i, p, n, s.bth, s.icrc);
    } else { /* LNH 0/1: no transport, the rest up to the VCRC is payload */
        out->off_payload[i] = LRH_LEN;
        out->payload_len[i] = (int32_t)(s.vcrc - LRH_LEN);
    }
}

/* The length on the wire of a frame of n bytes kept from a record that lost orig - caplen
 * (a snap length); the frame may start after a cooked header that the record counts. */
static inline int64_t wire_of_record(int64_t n, int64_t caplen, int64_t orig)
{
    return orig > caplen ? n + (orig - caplen) : n;
}

static inline int64_t wire_of(int64_t caplen, int64_t orig)
{
    return wire_of_record(caplen, caplen, orig);
}

/* Whether frame [off, off + n) lies in a buffer of buflen bytes. */
static inline int in_buffer(int64_t off, int64_t n, int64_t buflen)
{
    return off >= 0 && n >= 0 && off <= buflen && n <= buflen - off;
}

void ibw_scan(const uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
              const int64_t *wires, const uint8_t *links, int64_t count,
              const ibw_scan_prog *prog, const ibw_scan_out *out)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t k = i + IBW_AHEAD_FRAMES;
        if (k < count && in_buffer(offs[k], lens[k], buflen))
            ibw_ahead_frame(buf + offs[k], lens[k]);
        defaults(out, i);
        int link = links[i];
        int64_t off = offs[i], n = lens[i];
        if (link >= IBW_LINK_COUNT) {
            out->error[i] = IBW_NOT_IB;
            continue;
        }
        if (!in_buffer(off, n, buflen)) {
            out->error[i] = IBW_TRUNCATED;
            continue;
        }
        scan_frame(prog, out, i, buf + off, n, wires != NULL ? wires[i] : n, link, 1);
    }
}

/* ---------------------------------------------------------------- classic pcap records */

static inline uint32_t rd32(const uint8_t *p, int swapped)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swapped ? __builtin_bswap32(v) : v;
}

/* The caplen of the record header at pos, or -1 with *status set: 1 caplen above max_caplen,
 * 2 the record not all in [pos, end). There are at least 16 bytes at pos. */
static inline int64_t record_caplen(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                                    uint32_t max_caplen, int *status)
{
    uint32_t len = rd32(buf + pos + 8, swapped);
    if (len > max_caplen) {
        *status = 1;
        return -1;
    }
    if ((int64_t)len > end - pos - 16) {
        *status = 2;
        return -1;
    }
    return len;
}

/* Where a walk that stopped at pos ends: a partial record header is status 2. */
static inline void walk_stopped(int64_t pos, int64_t end, int64_t *next, int *status)
{
    if (*status == 0 && end > pos && end - pos < 16)
        *status = 2;
    *next = pos;
}

/* The record walk of ibw_pcap_records and ibw_scan_pcap; scan: NULL to only walk. */
static int64_t pcap_walk(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                         int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int64_t *offs,
                         int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                         int *status, int link, const ibw_scan_prog *prog,
                         const ibw_scan_out *out, int64_t release_every)
{
    int64_t rows = 0, line = pos, released = pos;
    *status = 0;
    while (rows < cap && end - pos >= 16) {
        const uint8_t *h = buf + pos;
        ibw_ahead(buf, &line, pos, end);
        ibw_let_go(buf, &released, pos, release_every);
        int64_t len = record_caplen(buf, pos, end, swapped, max_caplen, status);
        if (len < 0)
            break;
        offs[rows] = pos + 16;
        caplen[rows] = len;
        orig_len[rows] = rd32(h + 12, swapped);
        ts[rows] = (int64_t)rd32(h, swapped) * 1000000000 + (int64_t)rd32(h + 4, swapped) * fraction_ns;
        pos += 16 + len;
        if (out != NULL) {
            defaults(out, rows);
            if (link >= IBW_LINK_COUNT)
                out->error[rows] = IBW_NOT_IB;
            else
                scan_frame(prog, out, rows, h + 16, len, wire_of(len, orig_len[rows]), link, 1);
        }
        rows++;
    }
    walk_stopped(pos, end, next, status);
    return rows;
}

int64_t ibw_pcap_records(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                         int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int64_t *offs,
                         int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                         int *status)
{
    return pcap_walk(buf, pos, end, swapped, fraction_ns, max_caplen, cap, offs, caplen,
                     orig_len, ts, next, status, IBW_SCAN_LINK_NONE, NULL, NULL, 0);
}

int64_t ibw_scan_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                      int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int link,
                      const ibw_scan_prog *prog, const ibw_scan_out *out, int64_t *offs,
                      int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                      int *status, int64_t release_every)
{
    return pcap_walk(buf, pos, end, swapped, fraction_ns, max_caplen, cap, offs, caplen,
                     orig_len, ts, next, status, link, prog, out, release_every);
}

/* One row of columns, for a scan that only counts. */
typedef struct scratch_row {
    uint32_t headers, icrc;
    int32_t off_network, off_bth, off_payload, payload_len, off_icrc, off_vcrc, error_off;
    uint16_t vcrc;
    uint8_t encapsulation, vlan_count, error, site, cut;
    int8_t ecn, icrc_ok, vcrc_ok;
} scratch_row;

/* What a counting walk needs for each record: the program, a scratch row and the columns
 * over it, and the Linux cooked header's table with the last key looked up in it. */
typedef struct counter {
    const ibw_scan_prog *prog;
    const ibw_sll_links *sll;
    scratch_row r;
    ibw_scan_out out;
    void *no_columns[1]; /* the program selects no header field */
    uint32_t sll_key;
    int sll_code;
} counter;

static void counter_init(counter *k, const ibw_scan_prog *prog, const ibw_sll_links *sll)
{
    scratch_row *r = &k->r;
    const ibw_scan_out out = {
        k->no_columns, &r->encapsulation, &r->headers, &r->vlan_count, &r->ecn, &r->off_network,
        &r->off_bth, &r->off_payload, &r->payload_len, &r->off_icrc, &r->off_vcrc, &r->icrc,
        &r->vcrc, &r->icrc_ok, &r->vcrc_ok, &r->error, &r->site, &r->error_off, &r->cut};
    k->prog = prog;
    k->sll = sll;
    k->out = out;
    k->no_columns[0] = NULL;
    k->sll_key = 0xFFFFFFFF;
    k->sll_code = IBW_SCAN_LINK_NONE;
}

/* The link of the frame behind a Linux cooked header (ARPHRD type, protocol). */
static int sll_code(counter *k, uint32_t arphrd, uint32_t protocol)
{
    uint32_t key = arphrd << 16 | protocol;
    if (key != k->sll_key) {
        k->sll_key = key;
        k->sll_code = IBW_SCAN_LINK_NONE;
        for (int64_t i = 0; i < k->sll->count; i++)
            if (k->sll->keys[i] == key) {
                k->sll_code = k->sll->codes[i];
                break;
            }
    }
    return k->sll_code;
}

/* A packet that failed only because the capture cut one of its headers (IBW_CUT_HEADER: the
 * error is that truncation), as ScanBatch.failed() says. */
static inline int capture_cut(const scratch_row *r)
{
    return r->error == IBW_TRUNCATED && (r->cut & IBW_CUT_HEADER);
}

/* Scan and count the data of one record (link: where its frame starts, as ibw_record_link);
 * returns whether it failed. A record too short for its cooked header is the reader's error
 * record (a capture error: failed, an error, neither InfiniBand nor other traffic). */
static int count_record(counter *k, ibw_tally *tally, const uint8_t *data, int64_t len,
                        int64_t orig, int header, int code)
{
    int64_t caplen = len;
    scratch_row *r = &k->r;
    tally->records++;
    if (header != IBW_RECORD_FRAME) {
        int64_t size = header == IBW_RECORD_SLL ? 16 : 20;
        if (len < size) {
            tally->failed++;
            tally->errors++;
            return 1;
        }
        code = header == IBW_RECORD_SLL ? sll_code(k, be16(data + 2), be16(data + 14))
                                        : sll_code(k, be16(data + 8), be16(data));
        data += size;
        len -= size;
    }
    memset(r, 0, sizeof *r);
    defaults(&k->out, 0);
    if (code >= IBW_LINK_COUNT)
        r->error = IBW_NOT_IB;
    else
        scan_frame(k->prog, &k->out, 0, data, len, wire_of_record(len, caplen, orig), code,
                   0);
    int failed = r->icrc_ok == 0 || r->vcrc_ok == 0
                 || (r->error != IBW_OK && r->error != IBW_NOT_IB && !capture_cut(r));
    tally->ib += r->encapsulation != IBW_KIND_NONE && r->error != IBW_NOT_IB;
    tally->other += r->error == IBW_NOT_IB;
    tally->failed += failed;
    tally->icrc_bad += r->icrc_ok == 0;
    tally->vcrc_bad += r->vcrc_ok == 0;
    tally->errors += r->error > IBW_NOT_IB && !capture_cut(r);
    if (r->cut != 0 && !failed) {
        tally->cut++;
        if (len > tally->cut_kept) /* the frame's bytes kept (a cooked header not counted) */
            tally->cut_kept = len;
    }
    return failed;
}

int64_t ibw_check_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                       uint32_t max_caplen, uint32_t snaplen, ibw_record_link link,
                       const ibw_sll_links *sll, const ibw_scan_prog *prog, ibw_tally *tally,
                       int64_t *flagged, int64_t cap_flagged, int64_t *next, int *status)
{
    counter k;
    counter_init(&k, prog, sll);
    int64_t listed = 0, first = tally->records + 1, line = pos;
    *status = 0;
    while (listed < cap_flagged && end - pos >= 16) {
        const uint8_t *h = buf + pos;
        ibw_ahead(buf, &line, pos, end);
        int64_t len = record_caplen(buf, pos, end, swapped, max_caplen, status);
        if (len < 0)
            break;
        uint32_t orig = rd32(h + 12, swapped);
        int64_t data = pos + 16;
        pos = data + len;
        int failed = count_record(&k, tally, h + 16, len, orig, link.header, link.code);
        if (failed || (uint64_t)len > orig || (snaplen > 0 && (uint64_t)len > snaplen)) {
            flagged[2 * listed] = tally->records - first;
            flagged[2 * listed + 1] = data;
            listed++;
        }
    }
    walk_stopped(pos, end, next, status);
    return listed;
}

#define PCAPNG_EPB 6u /* Enhanced Packet Block (draft-ietf-opsawg-pcapng section 4.3) */

/* The Enhanced Packet Block at pos when its lengths hold together (the block all in
 * [pos, end), its length a multiple of 4 from 32 to max_len, the trailing copy equal, caplen
 * within the block): its length, else 0; *status 2 when the data may end inside it. */
static inline int64_t epb_length(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                                 uint32_t max_len, int *status)
{
    const uint8_t *b = buf + pos;
    if (end - pos < 32) {
        *status = end > pos ? 2 : 0;
        return 0;
    }
    uint32_t len = rd32(b + 4, swapped);
    if ((int64_t)len > end - pos) {
        *status = 2;
        return 0;
    }
    if (rd32(b, swapped) != PCAPNG_EPB || len < 32 || (len & 3) || len > max_len
        || rd32(b + len - 4, swapped) != len || rd32(b + 20, swapped) > len - 32)
        return 0;
    return len;
}

int64_t ibw_check_pcapng(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                         uint32_t max_len, const ibw_count_iface *ifaces, int64_t n_iface,
                         const ibw_sll_links *sll, const ibw_scan_prog *prog,
                         ibw_tally *tally, int64_t *flagged, int64_t cap_flagged,
                         int64_t *next, int *status)
{
    counter k;
    counter_init(&k, prog, sll);
    int64_t listed = 0, first = tally->records + 1, line = pos;
    *status = 0;
    while (pos < end) {
        if (listed >= cap_flagged) {
            *status = 1;
            break;
        }
        ibw_ahead(buf, &line, pos, end);
        int64_t len = epb_length(buf, pos, end, swapped, max_len, status);
        if (len == 0)
            break;
        const uint8_t *b = buf + pos;
        uint32_t id = rd32(b + 8, swapped), cap_len = rd32(b + 20, swapped);
        uint32_t orig = rd32(b + 24, swapped);
        if ((int64_t)id >= n_iface || ifaces[id].header < 0 || cap_len > orig
            || (ifaces[id].snaplen && cap_len > ifaces[id].snaplen))
            break;
        if (count_record(&k, tally, b + 28, cap_len, orig, ifaces[id].header,
                         ifaces[id].code)) {
            flagged[2 * listed] = tally->records - first;
            flagged[2 * listed + 1] = pos;
            listed++;
        }
        pos += len;
    }
    *next = pos;
    return listed;
}

int64_t ibw_pcapng_sync(const uint8_t *buf, int64_t from, int64_t end, int swapped,
                        uint32_t max_len, int depth, int64_t search)
{
    int64_t last = from + search < end ? from + search : end;
    for (int64_t at = from; at < last; at += 4) {
        int64_t pos = at;
        int k = 0, status = 0;
        for (; k < depth && pos < end; k++) {
            int64_t len = epb_length(buf, pos, end, swapped, max_len, &status);
            if (len == 0 || rd32(buf + pos + 20, swapped) > rd32(buf + pos + 24, swapped))
                break;
            pos += len;
        }
        if (k == depth || (k > 0 && pos == end))
            return at;
    }
    return -1;
}

/* Is there a plausible record header at pos, all of its record in [pos, end)? Its length,
 * -1 if not. Plausible: caplen at least 8 (zero bytes make no record) and at most max_caplen
 * and orig_len, orig_len under 16 MiB (a frame, even a GRO one), a fraction of a second under
 * fraction_limit, and (after the first) seconds within a day of the previous record's. */
#define PLAUSIBLE_ORIG_LEN (1u << 24)

static inline int64_t plausible(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                                uint32_t max_caplen, uint32_t fraction_limit, int64_t *seconds)
{
    if (end - pos < 16)
        return -1;
    const uint8_t *h = buf + pos;
    uint32_t len = rd32(h + 8, swapped);
    int64_t s = rd32(h, swapped);
    uint32_t orig = rd32(h + 12, swapped);
    if (len < 8 || len > max_caplen || len > orig || orig >= PLAUSIBLE_ORIG_LEN
        || rd32(h + 4, swapped) >= fraction_limit || (int64_t)len > end - pos - 16
        || (*seconds >= 0 && (s > *seconds + 86400 || s < *seconds - 86400)))
        return -1;
    *seconds = s;
    return 16 + (int64_t)len;
}

int64_t ibw_pcap_sync(const uint8_t *buf, int64_t from, int64_t end, int swapped,
                      uint32_t max_caplen, uint32_t fraction_limit, int depth, int64_t search)
{
    int64_t last = from + search < end ? from + search : end;
    for (int64_t at = from; at < last; at++) {
        int64_t pos = at, seconds = -1;
        int k = 0;
        for (; k < depth && pos < end; k++) {
            int64_t size = plausible(buf, pos, end, swapped, max_caplen, fraction_limit,
                                     &seconds);
            if (size < 0)
                break;
            pos += size;
        }
        if (k == depth || (k > 0 && pos == end))
            return at;
    }
    return -1;
}
