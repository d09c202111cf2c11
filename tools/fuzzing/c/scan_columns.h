/* ibwire libFuzzer harnesses: the scanner's output columns (scan.h's ibw_scan_out), each an
 * exact-size heap array of its rows, as scan/_engine.pyx's _outputs points at numpy columns;
 * and the comparison of one row of two sets of columns. */
#ifndef IBW_FUZZ_SCAN_COLUMNS_H
#define IBW_FUZZ_SCAN_COLUMNS_H

#include "fuzz_input.h"
#include "scan_program.h"

/* The harnesses that scan set the CRC engine up once, as ibwire's import does. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ibw_init();
    return 0;
}

typedef struct columns {
    int64_t rows;
    ibw_scan_prog prog;
    ibw_scan_instr instr[FUZZ_NCOLUMNS];
    uint32_t slots;
    void *cols[FUZZ_NCOLUMNS];
    ibw_scan_out out;
} columns;

#define FIXED_COLUMNS(X)                                                                    \
    X(encapsulation) X(headers) X(vlan_count) X(ecn) X(off_network) X(off_bth)              \
    X(off_payload) X(payload_len) X(off_icrc) X(off_vcrc) X(icrc) X(vcrc) X(icrc_ok)        \
    X(vcrc_ok) X(error) X(site) X(error_off) X(cut)

/* Zeroed columns for `rows` rows of the columns of the slots in `slots` (bit i: slot i). */
static columns *columns_new(int64_t rows, uint32_t slots, int verdicts)
{
    columns *c = exact_alloc(sizeof *c);
    c->rows = rows;
    c->slots = slots;
    fuzz_program(&c->prog, c->instr, slots, verdicts);
    for (int i = 0; i < FUZZ_NCOLUMNS; i++)
        if (slots >> fuzz_instr_slot[i] & 1)
            c->cols[i] = exact_alloc((size_t)fuzz_column_width[i] * (size_t)rows);
    c->out.cols = c->cols;
#define ALLOC(name) c->out.name = exact_alloc(sizeof *c->out.name * (size_t)rows);
    FIXED_COLUMNS(ALLOC)
#undef ALLOC
    return c;
}

/* Every column zeroed again, as a new set of columns is (to reuse one for the next frame). */
static void columns_zero(columns *c)
{
    size_t rows = (size_t)c->rows;
    for (int i = 0; i < FUZZ_NCOLUMNS; i++)
        if (c->cols[i] != NULL)
            memset(c->cols[i], 0, (size_t)fuzz_column_width[i] * rows);
#define ZERO(name) memset(c->out.name, 0, sizeof *c->out.name * rows);
    FIXED_COLUMNS(ZERO)
#undef ZERO
}

static void columns_free(columns *c)
{
    for (int i = 0; i < FUZZ_NCOLUMNS; i++)
        free(c->cols[i]);
#define FREE(name) free(c->out.name);
    FIXED_COLUMNS(FREE)
#undef FREE
    free(c);
}

/* Row i of a against row j of b: every column equal (both over the same slots). */
static int columns_row_equal(const columns *a, int64_t i, const columns *b, int64_t j)
{
#define SAME(name) if (a->out.name[i] != b->out.name[j]) { \
        fprintf(stderr, "column " #name ": %lld vs %lld\n", (long long)a->out.name[i], \
                (long long)b->out.name[j]); return 0; }
    FIXED_COLUMNS(SAME)
#undef SAME
    for (int k = 0; k < FUZZ_NCOLUMNS; k++) {
        if (a->cols[k] == NULL)
            continue;
        size_t w = (size_t)fuzz_column_width[k];
        if (memcmp((uint8_t *)a->cols[k] + w * i, (uint8_t *)b->cols[k] + w * j, w) != 0) {
            fprintf(stderr, "header-field column %d differs\n", k);
            return 0;
        }
    }
    return 1;
}

/* A link code as callers pass them: mostly the four links, sometimes none (255) or any. */
static inline uint8_t link_of(uint8_t v)
{
    switch (v >> 5) {
    case 0: case 1: case 2: case 3: return v & 3;
    case 4: return 255;
    case 5: return 4; /* IBW_LINK_COUNT */
    default: return v;
    }
}

#endif
