/* libFuzzer harness: the forwarder's classifier, relay_classify (src/ibwire/impair/relay.c, as
 * relay.h declares it), called as impair/_fast.pyx's classify calls it on a received batch:
 * frames at their offsets in one buffer, any bytes.
 *
 * Each frame is classified alone, in a buffer of exactly its size, then all of them in one
 * call over one buffer. Oracles besides the sanitizers: a row does not depend on its
 * neighbours; a frame taken for InfiniBand has its network header, BTH and ICRC in that order
 * inside the frame, with room for the BTH; a frame not taken has every column at its default.
 * Input: per frame 2 bytes length, then its bytes. */
#include "fuzz_input.h"
#include "relay.h"

#define MOST_FRAMES 64

typedef struct row {
    uint8_t ib, opcode, syndrome;
    int32_t network, bth, icrc;
    uint32_t destqp, psn, msn;
} row;

static void classify(const uint8_t *buf, const int64_t *offs, const int64_t *lens, int count,
                     row *rows)
{
    uint8_t *ib = exact_alloc((size_t)count), *opcode = exact_alloc((size_t)count);
    uint8_t *syndrome = exact_alloc((size_t)count);
    int32_t *network = exact_alloc(4 * (size_t)count), *bth = exact_alloc(4 * (size_t)count);
    int32_t *icrc = exact_alloc(4 * (size_t)count);
    uint32_t *destqp = exact_alloc(4 * (size_t)count), *psn = exact_alloc(4 * (size_t)count);
    uint32_t *msn = exact_alloc(4 * (size_t)count);
    relay_classify(buf, offs, lens, count, ib, network, bth, icrc, opcode, destqp, psn,
                   syndrome, msn);
    memset(rows, 0, sizeof *rows * (size_t)count); /* the padding too: rows are memcmp'd */
    for (int i = 0; i < count; i++) {
        rows[i].ib = ib[i]; rows[i].opcode = opcode[i]; rows[i].syndrome = syndrome[i];
        rows[i].network = network[i]; rows[i].bth = bth[i]; rows[i].icrc = icrc[i];
        rows[i].destqp = destqp[i]; rows[i].psn = psn[i]; rows[i].msn = msn[i];
    }
    free(ib); free(opcode); free(syndrome); free(network); free(bth); free(icrc);
    free(destqp); free(psn); free(msn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t *all = exact_copy(data, size);
    planted_bug(all, size);
    int64_t offs[MOST_FRAMES], lens[MOST_FRAMES];
    int count = 0;
    while (in.n > 0 && count < MOST_FRAMES) {
        size_t got;
        const uint8_t *frame = take_bytes(&in, take_u16(&in) % 2048, &got);
        offs[count] = frame - data;
        lens[count] = (int64_t)got;
        count++;
    }
    if (count == 0) {
        free(all);
        return 0;
    }
    row batch[MOST_FRAMES];
    classify(all, offs, lens, count, batch);
    for (int i = 0; i < count; i++) {
        row one;
        int64_t zero = 0;
        uint8_t *frame = exact_copy(all + offs[i], (size_t)lens[i]);
        classify(frame, &zero, &lens[i], 1, &one);
        FUZZ_CHECK(memcmp(&one, &batch[i], sizeof one) == 0, "frame %d: batch row differs", i);
        if (one.ib) {
            FUZZ_CHECK(one.ib == 1 && one.network >= 14 && one.bth > one.network
                       && one.bth + 12 <= one.icrc && one.icrc + 4 <= lens[i],
                       "frame %d: network %d, BTH %d, ICRC %d of %lld bytes", i, one.network,
                       one.bth, one.icrc, (long long)lens[i]);
            FUZZ_CHECK(one.opcode == frame[one.bth] && one.destqp < (1u << 24)
                       && one.psn < (1u << 24) && one.msn < (1u << 24), "frame %d: BTH", i);
        } else {
            FUZZ_CHECK(one.network == -1 && one.bth == -1 && one.icrc == -1 && one.opcode == 0
                       && one.destqp == 0 && one.psn == 0 && one.msn == 0 && one.syndrome == 0,
                       "frame %d: not InfiniBand, columns set", i);
        }
        free(frame);
    }
    free(all);
    return 0;
}
