/* libFuzzer harness: the ICRC/VCRC kernel (src/ibwire/crc/kernel.c), every CRC-32 backend.
 *
 * Oracles besides the sanitizers:
 *  - ibw_crc32 (each backend: slice-by-8, pclmulqdq, vpclmulqdq where the CPU has them) and
 *    ibw_crc16 against a plain bitwise CRC written here from the parameters (CRC-32:
 *    poly 0x04C11DB7 reflected, init and xorout 0xFFFFFFFF, zlib.crc32; VCRC: poly 0x100B
 *    reflected, init and xorout 0xFFFF; IBA 7.8.1 and 7.8.2);
 *  - the ICRC a verify computes against the bitwise CRC-32 of the span it located: 8 x 0xFF
 *    for the LRH where the encapsulation has none, then the covered bytes with the span's
 *    masks ORed in; the VCRC against the bitwise CRC-16 of the bytes before it;
 *  - the span's own contract (kernel.h): CRCs inside the frame unless flagged cut, masks in
 *    ascending order inside the covered region;
 *  - ibw_fix then ibw_verify: a CRC fix writes is a CRC verify accepts;
 *  - the batch entry points agree with the per-frame ones, records outside the buffer
 *    included.
 * Input: byte 0 the link and options, 2 bytes wire-length delta, 4 bytes a CRC seed, then the
 * frame. */
#include <stdint.h>
#include <string.h>

#include "fuzz_input.h"
#include "kernel.h"

static const char *const backends[] = {"slice-by-8", "pclmulqdq", "vpclmulqdq"};

static uint32_t ref_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
}

static uint16_t ref_crc16(const uint8_t *p, size_t n)
{
    uint16_t c = 0xFFFF;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (uint16_t)((c >> 1) ^ 0xD008) : (uint16_t)(c >> 1);
    }
    return (uint16_t)~c;
}

/* The ICRC of a located span, bitwise, from the masks the span lists. */
static uint32_t ref_icrc(const uint8_t *p, const ibw_span *s)
{
    static const uint8_t lrh[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    size_t len = (size_t)(s->icrc - s->start);
    uint8_t *masked = exact_copy(p + s->start, len);
    for (int i = 0; i < s->nmask; i++)
        masked[s->mask_off[i] - s->start] |= s->mask_or[i];
    uint32_t c = s->pseudo_lrh ? ref_crc32(0, lrh, 8) : 0;
    c = ref_crc32(c, masked, len);
    free(masked);
    return c;
}

static int nbackends;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ibw_init();
    static const uint8_t check[] = "123456789";
    if (ref_crc32(0, check, 9) != 0xCBF43926u || ref_crc16(check, 9) != 0x0A3D)
        abort(); /* the reference itself (RevEng check values) */
    for (nbackends = 0; nbackends < 3 && ibw_crc32_set_backend(backends[nbackends]);)
        nbackends++;
    return 0;
}

/* The contract of a span located over n bytes (kernel.h). */
static void check_span(const ibw_span *s, int64_t n, int error)
{
    FUZZ_CHECK(s->error == error, "error %d, span says %d", error, s->error);
    FUZZ_CHECK(s->nmask >= 0 && s->nmask <= IBW_MAX_MASKS, "nmask %d", s->nmask);
    if (s->icrc >= 0) {
        FUZZ_CHECK(s->start >= 0 && s->start <= s->icrc, "start %lld icrc %lld",
                   (long long)s->start, (long long)s->icrc);
        FUZZ_CHECK((s->cut & IBW_CUT_ICRC) || s->icrc + 4 <= n, "icrc %lld of %lld",
                   (long long)s->icrc, (long long)n);
        for (int i = 0; i < s->nmask; i++) {
            FUZZ_CHECK(s->mask_off[i] >= s->start && s->mask_off[i] < s->icrc
                       && s->mask_off[i] - s->start < 128, "mask %d at %lld", i,
                       (long long)s->mask_off[i]);
            FUZZ_CHECK(i == 0 || s->mask_off[i] > s->mask_off[i - 1], "masks out of order");
        }
    }
    if (s->vcrc >= 0)
        FUZZ_CHECK((s->cut & IBW_CUT_VCRC) || s->vcrc + 2 <= n, "vcrc %lld of %lld",
                   (long long)s->vcrc, (long long)n);
}

/* verify (or verify_wire) with every backend: the same verdict, the reference CRCs. */
static void verify_all(const uint8_t *p, int64_t n, int64_t wire, int link, ibw_check *out,
                       ibw_span *span)
{
    for (int b = 0; b < nbackends; b++) {
        ibw_span s;
        ibw_check c;
        ibw_crc32_set_backend(backends[b]);
        int error = ibw_verify_wire(p, n, wire, link, &s, &c);
        check_span(&s, n, error);
        if (c.icrc_ok >= 0)
            FUZZ_CHECK(c.icrc_computed == ref_icrc(p, &s), "%s ICRC %08x, bitwise %08x",
                       backends[b], c.icrc_computed, ref_icrc(p, &s));
        if (c.vcrc_ok >= 0)
            FUZZ_CHECK(c.vcrc_computed == ref_crc16(p, (size_t)s.vcrc), "VCRC %04x, bitwise %04x",
                       c.vcrc_computed, ref_crc16(p, (size_t)s.vcrc));
        if (b == 0) {
            *out = c;
            *span = s;
        } else {
            FUZZ_CHECK(memcmp(&c, out, sizeof c) == 0, "%s and %s disagree", backends[b],
                       backends[0]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t opt = take_u8(&in);
    int16_t delta = (int16_t)take_u16(&in);
    uint32_t seed = take_u32(&in);
    int link = opt & 3;
    size_t n;
    const uint8_t *raw = take_bytes(&in, in.n, &n);
    uint8_t *p = exact_copy(raw, n);
    planted_bug(p, n);

    /* the CRC primitives, whole and split in two at a point the input picks */
    uint32_t want32 = ref_crc32(seed, p, n);
    uint16_t want16 = ref_crc16(p, n);
    size_t cut = n ? seed % (n + 1) : 0;
    for (int b = 0; b < nbackends; b++) {
        ibw_crc32_set_backend(backends[b]);
        FUZZ_CHECK(ibw_crc32(seed, p, n) == want32, "%s crc32 of %zu bytes", backends[b], n);
        FUZZ_CHECK(ibw_crc32(ibw_crc32(seed, p, cut), p + cut, n - cut) == want32,
                   "%s crc32 split at %zu", backends[b], cut);
    }
    FUZZ_CHECK(ibw_crc16(p, n) == want16, "crc16 of %zu bytes", n);

    /* the walker and the verdicts, on the whole frame and as cut by a snap length */
    ibw_check c;
    ibw_span s;
    verify_all(p, (int64_t)n, (int64_t)n, link, &c, &s);
    int64_t wire = (int64_t)n + delta;
    if (opt & 4)
        wire = delta < 0 ? INT64_MAX + delta : (int64_t)n * (delta & 7);
    ibw_check cw;
    ibw_span sw;
    verify_all(p, (int64_t)n, wire, link, &cw, &sw);

    /* the batch verify against the single one; records outside the buffer */
    int64_t offs[4] = {0, (int64_t)n + 1, -1, (int64_t)(n / 2)};
    int64_t lens[4] = {(int64_t)n, 0, 1, (int64_t)(n - n / 2) + 1};
    uint8_t links[4] = {(uint8_t)link, (uint8_t)link, (uint8_t)link, (uint8_t)link};
    int8_t icrc_ok[4], vcrc_ok[4], was_right[4];
    uint8_t error[4], kind[4];
    ibw_verify_batch(p, (int64_t)n, offs, lens, links, opt & 8 ? 0 : 1, 4, icrc_ok, vcrc_ok,
                     error, kind);
    FUZZ_CHECK(icrc_ok[0] == c.icrc_ok && vcrc_ok[0] == c.vcrc_ok && error[0] == c.error
               && kind[0] == c.kind, "batch verify differs from verify");
    for (int i = 1; i < 4; i++)
        FUZZ_CHECK(error[i] == IBW_TRUNCATED && icrc_ok[i] == -1, "record %d outside", i);
    FUZZ_CHECK(ibw_check_records((int64_t)n, offs, lens, 4) == 1, "check_records");

    /* fix, then verify: what fix writes, verify accepts (unless writing moved the span:
     * a CRC placed over a length field) */
    uint8_t *q = exact_copy(p, n);
    ibw_span f;
    int fixed = ibw_fix(q, (int64_t)n, link, opt >> 4 & 1, &f);
    ibw_check after;
    ibw_span sa;
    ibw_verify(q, (int64_t)n, link, &sa, &after);
    if (sa.icrc == f.icrc && sa.vcrc == f.vcrc && sa.error == f.error && sa.nmask == f.nmask
        && (fixed == IBW_OK || opt >> 4 & 1)) {
        if (f.icrc >= 0)
            FUZZ_CHECK(after.icrc_ok == 1, "ICRC fixed, then bad");
        if (f.vcrc >= 0)
            FUZZ_CHECK(after.vcrc_ok == 1, "VCRC fixed, then bad");
    }
    /* the batch fix does the same to a copy */
    uint8_t *r = exact_copy(p, n);
    ibw_fix_batch(r, (int64_t)n, offs, lens, links, 0, 4, was_right);
    if (ibw_locate(p, (int64_t)n, link, &s) == IBW_OK) {
        FUZZ_CHECK(memcmp(q, r, n) == 0, "fix_batch differs from fix");
        FUZZ_CHECK(was_right[0] == ((c.icrc_ok != 0) && (c.vcrc_ok != 0)),
                   "was_right %d, verdicts %d %d", was_right[0], c.icrc_ok, c.vcrc_ok);
    } else {
        FUZZ_CHECK(was_right[0] == -1 && memcmp(p, r, n) == 0, "fix_batch wrote a faulty frame");
    }
    for (int i = 1; i < 4; i++)
        FUZZ_CHECK(was_right[i] == -1, "fix_batch record %d outside", i);
    free(r);
    free(q);
    free(p);
    return 0;
}
