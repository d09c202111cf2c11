/* ibwire libFuzzer harnesses: reading a fuzz input as a sequence of choices, and the helpers
 * every harness shares (exact-size copies, the planted bug of the CI smoke).
 *
 * Every buffer handed to the code under test is a heap copy of exactly its size, so that
 * AddressSanitizer reports a read or write one byte past it. */
#ifndef IBW_FUZZ_INPUT_H
#define IBW_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static inline uint8_t take_u8(fuzz_in *in)
{
    if (in->n == 0)
        return 0;
    uint8_t v = in->p[0];
    in->p++;
    in->n--;
    return v;
}

static inline uint16_t take_u16(fuzz_in *in)
{
    return (uint16_t)(take_u8(in) | take_u8(in) << 8);
}

static inline uint32_t take_u32(fuzz_in *in)
{
    return (uint32_t)take_u16(in) | (uint32_t)take_u16(in) << 16;
}

static inline uint64_t take_u64(fuzz_in *in)
{
    return (uint64_t)take_u32(in) | (uint64_t)take_u32(in) << 32;
}

/* Up to n bytes (fewer if the input ends): their count in *got. */
static inline const uint8_t *take_bytes(fuzz_in *in, size_t n, size_t *got)
{
    const uint8_t *p = in->p;
    if (n > in->n)
        n = in->n;
    in->p += n;
    in->n -= n;
    *got = n;
    return p;
}

/* An exact-size heap copy; of nothing, malloc(0): ASan reports any read of it. */
static inline uint8_t *exact_copy(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n);
    if (q == NULL && n)
        abort();
    if (n)
        memcpy(q, p, n);
    return q;
}

static inline void *exact_alloc(size_t n)
{
    void *q = calloc(n, 1);
    if (q == NULL && n)
        abort();
    return q;
}

/* A finding that is not a sanitizer's: the harness's own oracle disagreed. */
#define FUZZ_CHECK(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "ibwire fuzz finding: %s (%s:%d): ", #cond, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* The CI smoke's proof that a harness can fail: built with -DIBW_FUZZ_PLANTED_BUG, every
 * harness reads one byte past its exact-size copy of the input, which ASan must report. */
static inline void planted_bug(const uint8_t *exact, size_t n)
{
#ifdef IBW_FUZZ_PLANTED_BUG
    volatile uint8_t past = exact[n];
    (void)past;
#else
    (void)exact;
    (void)n;
#endif
}

#endif
