/* Carry-less-multiply CRC-32 for kernel.c (included once, after crc_tables.h).
 *
 * Three backends, picked at run time (crc_backend_init):
 *   - slice-by-8 tables (any CPU; also every tail shorter than 16 bytes);
 *   - PCLMULQDQ folding of four 128-bit lanes (x86-64 with pclmul and SSE4.1);
 *   - VPCLMULQDQ folding of four 512-bit lanes (x86-64 with AVX-512F/VL/BW and vpclmulqdq).
 * The builds need no -m flags: the vector functions carry target attributes.
 *
 * Folding: a 128-bit lane H = L * x^64 + U (L = low quadword, the earlier bits) moved forward
 * by D bits is L * (x^(D+64) mod P) + U * (x^D mod P). With bit-reflected operands a carry-less
 * product comes out one degree short of the 128-bit frame, so each constant is stored as the
 * 33-bit reflection of x^(D+32) mod P (for L) and x^(D-32) mod P (for U). The constants below
 * were computed that way (tests compare every backend with zlib.crc32).
 * The final 128-bit remainder R is reduced to the register R(x) * x^32 mod P by two more folds
 * and a Barrett step (crc32_reduce128); bytes after the last full 16-byte block go by table.
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(IBW_NO_SIMD)
#define IBW_X86 1
#include <immintrin.h>
#endif

/* The vector paths read a message as two pieces: a 256-byte head (the start register is
 * XORed into its first 4 bytes), then n bytes at p. ibw_icrc_of can pass a masked copy as the
 * head and the frame itself as the rest, so one fold chain covers the whole ICRC region. */
#define CRC_HEAD 256

#ifdef IBW_X86
/* 33-bit reflected x^e mod P, see the header comment. Index: (for L, for U). */
#define K_D128_L 0x1751997d0ULL  /* x^160 */
#define K_D128_U 0x0ccaa009eULL  /* x^96 */
#define K_D256_L 0x0f1da05aaULL  /* x^288 */
#define K_D256_U 0x15a546366ULL  /* x^224 */
#define K_D384_L 0x03db1ecdcULL  /* x^416 */
#define K_D384_U 0x174359406ULL  /* x^352 */
#define K_D512_L 0x154442bd4ULL  /* x^544 */
#define K_D512_U 0x1c6e41596ULL  /* x^480 */
#define K_D2048_L 0x11542778aULL /* x^2080 */
#define K_D2048_U 0x1322d1430ULL /* x^2016 */
#define K_X96 0x0ccaa009eULL  /* x^96 mod P */
#define K_X64 0x163cd6124ULL  /* x^64 mod P */
#define K_MU 0x1f7011641ULL   /* x^64 div P */
#define K_POLY 0x1db710641ULL /* P itself */

/* always_inline: the AVX-512 path gets its own VEX-encoded copy (no SSE/AVX transitions). */
__attribute__((target("pclmul,sse4.1"), always_inline)) static inline __m128i
fold128(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Folds the rest in 16-byte steps. */
__attribute__((target("pclmul,sse4.1"), always_inline)) static inline __m128i
crc32_fold_rest(__m128i x, const uint8_t **pp, size_t *pn)
{
    const __m128i k128 = _mm_set_epi64x((long long)K_D128_U, (long long)K_D128_L);
    while (*pn >= 16) {
        x = _mm_xor_si128(fold128(x, k128), _mm_loadu_si128((const __m128i *)*pp));
        *pp += 16;
        *pn -= 16;
    }
    return x;
}

/* The register after a 128-bit remainder R: R(x) x^32 mod P. R = L x^64 + U becomes
 * T = L (x^96 mod P) + U x^32 (< 96 bits), then S = T_hi (x^64 mod P) + T_lo (< 64 bits),
 * then Barrett with mu = x^64 div P. */
__attribute__((target("pclmul,sse4.1"), always_inline)) static inline uint32_t
crc32_reduce128(__m128i x)
{
    const __m128i k96 = _mm_set_epi64x(0, (long long)K_X96);
    const __m128i k64mu = _mm_set_epi64x((long long)K_MU, (long long)K_X64);
    const __m128i kp = _mm_set_epi64x(0, (long long)K_POLY);
    const __m128i lo32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i t = _mm_xor_si128(_mm_clmulepi64_si128(x, k96, 0x00), _mm_srli_si128(x, 8));
    __m128i s = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(t, lo32), k64mu, 0x00),
                              _mm_srli_si128(t, 4));
    __m128i q = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(s, lo32), k64mu, 0x10), lo32);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(s, _mm_clmulepi64_si128(q, kp, 0x00)), 1);
}

/* 16 <= n: one lane, 16 bytes a step (short messages). */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc32_pclmul_short(uint32_t c, const uint8_t *p, size_t n)
{
    __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    p += 16;
    n -= 16;
    x = crc32_fold_rest(x, &p, &n);
    return crc32_sb8(crc32_reduce128(x), p, n);
}

__attribute__((target("pclmul,sse4.1"), always_inline)) static inline void
pclmul_fold4(__m128i x[4], const uint8_t **pp, size_t *pn)
{
    const __m128i k512 = _mm_set_epi64x((long long)K_D512_U, (long long)K_D512_L);
    const uint8_t *p = *pp;
    size_t n = *pn;
    while (n >= 64) {
        for (int i = 0; i < 4; i++)
            x[i] = _mm_xor_si128(fold128(x[i], k512),
                                 _mm_loadu_si128((const __m128i *)(p + 16 * i)));
        p += 64;
        n -= 64;
    }
    *pp = p;
    *pn = n;
}

__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc32_pclmul(uint32_t c, const uint8_t *head, size_t hn, const uint8_t *p, size_t n)
{
    /* hn: a multiple of 64 */
    const __m128i k128 = _mm_set_epi64x((long long)K_D128_U, (long long)K_D128_L);
    const uint8_t *h = head + 64;
    hn -= 64;
    __m128i x[4];
    for (int i = 0; i < 4; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(head + 16 * i));
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)c));
    pclmul_fold4(x, &h, &hn);
    pclmul_fold4(x, &p, &n);
    __m128i r = _mm_xor_si128(fold128(x[0], k128), x[1]);
    r = _mm_xor_si128(fold128(r, k128), x[2]);
    r = _mm_xor_si128(fold128(r, k128), x[3]);
    r = crc32_fold_rest(r, &p, &n);
    return crc32_sb8(crc32_reduce128(r), p, n);
}

#define IBW_AVX512 "avx512f,avx512vl,avx512bw,vpclmulqdq,pclmul,sse4.1"

__attribute__((target(IBW_AVX512), always_inline)) static inline __m512i
fold512(__m512i x, __m512i k, __m512i next)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), next, 0x96);
}

/* One 64-byte accumulator: folds the 64-byte blocks at p in, then reduces to the register. */
__attribute__((target(IBW_AVX512), always_inline)) static inline uint32_t
vpclmul_finish(__m512i z0, const uint8_t **pp, size_t *pn)
{
    const __m512i k512 = _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)K_D512_U, (long long)K_D512_L));
    const uint8_t *p = *pp;
    size_t n = *pn;
    while (n >= 64) {
        z0 = fold512(z0, k512, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
    /* Four lanes a, b, c, d (a earliest): a x^384 + b x^256 + c x^128 + d. */
    const __m512i klanes = _mm512_set_epi64(0, 0, (long long)K_D128_U, (long long)K_D128_L,
                                            (long long)K_D256_U, (long long)K_D256_L,
                                            (long long)K_D384_U, (long long)K_D384_L);
    __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(z0, klanes, 0x00),
                                 _mm512_clmulepi64_epi128(z0, klanes, 0x11));
    __m128i x = _mm_xor_si128(_mm512_extracti32x4_epi32(z0, 3),
                              _mm512_castsi512_si128(t));
    x = _mm_xor_si128(x, _mm512_extracti32x4_epi32(t, 1));
    x = _mm_xor_si128(x, _mm512_extracti32x4_epi32(t, 2));
    uint32_t c = crc32_reduce128(crc32_fold_rest(x, &p, &n));
    *pp = p;
    *pn = n;
    return c;
}

/* Four 64-byte accumulators z[0..3] hold the message so far; folds n more bytes at p in and
 * returns the register after the 16-byte blocks (the < 16 bytes left are for the caller). */
__attribute__((target(IBW_AVX512), always_inline)) static inline uint32_t
vpclmul_fold(__m512i z0, __m512i z1, __m512i z2, __m512i z3, const uint8_t **pp, size_t *pn)
{
    const __m512i k2048 = _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)K_D2048_U, (long long)K_D2048_L));
    const __m512i k512 = _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)K_D512_U, (long long)K_D512_L));
    const uint8_t *p = *pp;
    size_t n = *pn;
    while (n >= 256) {
        z0 = fold512(z0, k2048, _mm512_loadu_si512((const void *)p));
        z1 = fold512(z1, k2048, _mm512_loadu_si512((const void *)(p + 64)));
        z2 = fold512(z2, k2048, _mm512_loadu_si512((const void *)(p + 128)));
        z3 = fold512(z3, k2048, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        n -= 256;
    }
    z0 = fold512(z0, k512, z1);
    z0 = fold512(z0, k512, z2);
    z0 = fold512(z0, k512, z3);
    *pp = p;
    *pn = n;
    return vpclmul_finish(z0, pp, pn);
}

__attribute__((target(IBW_AVX512))) static uint32_t
crc32_vpclmul(uint32_t c, const uint8_t *head, const uint8_t *p, size_t n)
{
    __m512i z0 = _mm512_loadu_si512((const void *)head);
    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
    c = vpclmul_fold(z0, _mm512_loadu_si512((const void *)(head + 64)),
                     _mm512_loadu_si512((const void *)(head + 128)),
                     _mm512_loadu_si512((const void *)(head + 192)), &p, &n);
    _mm256_zeroupper(); /* GCC adds no vzeroupper under a target attribute: avoid AVX-SSE stalls */
    return crc32_sb8(c, p, n);
}

/* The register after zeros(lead) || r[0..len), with r0 the register before the zeros, the
 * stream bytes flagged in ff[0..2] (one bit per byte of the first three 64-byte blocks) set to
 * 0xFF and r[0] ORed with first_or; lead + len is a multiple of 64 and lead < 64. Copy-free:
 * the zeros are the masked-out lanes of the first load, which touches no byte before r. */
__attribute__((target(IBW_AVX512))) static uint32_t
crc32_vpclmul_masked(uint32_t r0, const uint8_t *r, size_t len, size_t lead,
                     const uint64_t ff[3], uint8_t first_or)
{
    const __m512i k512 = _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)K_D512_U, (long long)K_D512_L));
    const uint8_t *base = (const uint8_t *)((uintptr_t)r - lead);
    size_t blocks = (lead + len) / 64;
    __m512i z0 = _mm512_maskz_loadu_epi8(~0ULL << lead, (const void *)base);
    __m512i z1 = _mm512_setzero_si512(), z2 = z1, z3 = z1;
    z0 = _mm512_or_si512(z0, _mm512_maskz_set1_epi8(1ULL << lead, (char)first_or));
    z0 = _mm512_xor_si512(_mm512_mask_set1_epi8(z0, ff[0], (char)0xFF),
                          _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)r0)));
    if (blocks > 1)
        z1 = _mm512_mask_set1_epi8(_mm512_loadu_si512((const void *)(base + 64)), ff[1],
                                   (char)0xFF);
    if (blocks > 2)
        z2 = _mm512_mask_set1_epi8(_mm512_loadu_si512((const void *)(base + 128)), ff[2],
                                   (char)0xFF);
    if (blocks > 3)
        z3 = _mm512_loadu_si512((const void *)(base + 192));
    const uint8_t *p = base + 256;
    size_t n = blocks > 4 ? (blocks - 4) * 64 : 0;
    uint32_t c;
    if (blocks >= 4) {
        c = vpclmul_fold(z0, z1, z2, z3, &p, &n);
    } else {
        /* 1 to 3 blocks: fold them into one accumulator. */
        if (blocks > 1)
            z0 = fold512(z0, k512, z1);
        if (blocks > 2)
            z0 = fold512(z0, k512, z2);
        c = vpclmul_finish(z0, &p, &n);
    }
    _mm256_zeroupper();
    return c;
}
#endif /* IBW_X86 */

enum { CRC_SB8 = 0, CRC_PCLMUL = 1, CRC_VPCLMUL = 2 };
static int crc32_backend = CRC_SB8;
static int crc32_best = CRC_SB8;

static void crc_backend_init(void)
{
#ifdef IBW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
        crc32_best = CRC_PCLMUL;
    if (crc32_best == CRC_PCLMUL && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("vpclmulqdq"))
        crc32_best = CRC_VPCLMUL;
#endif
    crc32_backend = crc32_best;
}

/* Register in, register out: a 256-byte head, then n bytes at p. */
static inline uint32_t crc32_update_head(uint32_t c, const uint8_t *head, const uint8_t *p,
                                         size_t n)
{
#ifdef IBW_X86
    if (crc32_backend == CRC_VPCLMUL)
        return crc32_vpclmul(c, head, p, n);
    if (crc32_backend == CRC_PCLMUL)
        return crc32_pclmul(c, head, CRC_HEAD, p, n);
#endif
    return crc32_sb8(crc32_sb8(c, head, CRC_HEAD), p, n);
}

/* Register in, register out. */
static inline uint32_t crc32_update(uint32_t c, const uint8_t *p, size_t n)
{
    if (n >= CRC_HEAD)
        return crc32_update_head(c, p, p + CRC_HEAD, n - CRC_HEAD);
#ifdef IBW_X86
    if (n >= 64 && crc32_backend >= CRC_PCLMUL)
        return crc32_pclmul(c, p, 64, p + 64, n - 64);
    if (n >= 32 && crc32_backend >= CRC_PCLMUL)
        return crc32_pclmul_short(c, p, n);
#endif
    return crc32_sb8(c, p, n);
}

/* memcpy for a few dozen bytes: GCC inlines a variable-length memcpy into a fixed-size
 * stack buffer as "rep movsq", whose start-up cost dominates a small packet. */
static inline void copy_short(uint8_t *d, const uint8_t *s, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 <= n; i += 8)
            memcpy(d + i, s + i, 8);
        memcpy(d + n - 8, s + n - 8, 8); /* the last, possibly overlapping, 8 bytes */
        return;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* The register after the ICRC region of span s (the masked bytes forced to one; a pseudo LRH
 * first when s->pseudo_lrh). The region is CRC'd as zeros(lead) || region, from the register
 * that the lead zeros turn into the start register (lead_register). The lead rounds the
 * stream up to whole 16-byte (64-byte for AVX-512) blocks, so the vector code needs no tail.
 * The masks lie in the first 73 bytes (IPv4 with 40 bytes of options, UDP, BTH byte 4), i.e.
 * within the first 3 blocks of 64 or the 256-byte head. */
static uint32_t crc32_region(const uint8_t *p, const ibw_span *s)
{
    const uint8_t *r = p + s->start;
    size_t len = (size_t)(s->icrc - s->start);
#ifdef IBW_X86
    if (crc32_backend == CRC_VPCLMUL) {
        /* No copy: the masks are set in registers, the zeros are masked-out load lanes. The
         * 128-bit byte map s->ff moves up by lead into the 192 bits of three blocks. */
        size_t lead = (64 - len % 64) % 64;
        const uint64_t ff[3] = {
            s->ff[0] << lead,
            lead ? s->ff[1] << lead | s->ff[0] >> (64 - lead) : s->ff[1],
            lead ? s->ff[1] >> (64 - lead) : 0,
        };
        return crc32_vpclmul_masked(lead_register[s->pseudo_lrh][lead], r, len, lead, ff,
                                    s->first_or);
    }
#endif
    /* The first 256 bytes of the stream (all of it if shorter) are copied and masked; the rest
     * is read in place. */
    uint8_t head[CRC_HEAD];
    size_t lead = (16 - len % 16) % 16;
    size_t copy = lead + len <= CRC_HEAD ? len : CRC_HEAD - lead;
    uint32_t c = lead_register[s->pseudo_lrh][lead];
    uint8_t *q = head + lead;
    memset(head, 0, 16);
    copy_short(q, r, copy);
    for (int i = 0; i < s->nmask; i++)
        q[s->mask_off[i] - s->start] |= s->mask_or[i];
    if (copy == len)
        return crc32_update(c, head, lead + len);
    return crc32_update_head(c, head, r + copy, len - copy);
}
