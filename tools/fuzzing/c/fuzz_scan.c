/* libFuzzer harness: the batch scanner's frame entry point, ibw_scan (src/ibwire/scan/scan.c),
 * called as scan/_engine.pyx's scan_frames calls it: the program ibwire.scan.program builds
 * (all columns, or the columns of some headers: scan_frames(fields=...)), with or without
 * the CRC verdicts, frames at arbitrary offsets and lengths (records outside the buffer
 * included: the caller does not check them), wire lengths from a snap length or absent.
 *
 * Each frame is scanned alone, in a buffer of exactly its size, then all of them in one call
 * over one buffer; besides the sanitizers, the oracle is that a row does not depend on its
 * neighbours: the batch row equals the frame's own.
 * Input: byte 0 options, 4 bytes the header slots (if selected by the options), then per frame
 * a link byte, 2 bytes length, 2 bytes wire-length delta (if wires), the frame's bytes. */
#include "kernel.h"
#include "scan_columns.h"

#define MOST_FRAMES 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t opt = take_u8(&in);
    int verdicts = opt & 1, with_wires = opt >> 1 & 1, bogus = opt >> 2 & 1;
    uint32_t slots = (opt & 8) ? take_u32(&in) : 0xFFFFFFFFu;
    /* the frames lie in `all` where they lie in the rest of the input */
    const uint8_t *start = in.p;
    size_t buflen = in.n;
    uint8_t *all = exact_copy(start, buflen);
    int64_t offs[MOST_FRAMES + 4], lens[MOST_FRAMES + 4], wires[MOST_FRAMES + 4];
    uint8_t links[MOST_FRAMES + 4];
    int64_t count = 0;
    planted_bug(all, buflen);
    while (in.n > 0 && count < MOST_FRAMES) {
        links[count] = link_of(take_u8(&in));
        size_t want = take_u16(&in), got;
        int16_t delta = with_wires ? (int16_t)take_u16(&in) : 0;
        const uint8_t *frame = take_bytes(&in, want % 1600, &got);
        offs[count] = frame - start;
        lens[count] = (int64_t)got;
        wires[count] = delta == INT16_MIN ? INT64_MAX : (int64_t)got + delta;
        count++;
    }
    int64_t frames = count;
    if (bogus) { /* records outside the buffer: the scanner must see it, not read them */
        static const int64_t bad_offs[4] = {-1, 0, INT64_MAX, 1};
        int64_t bad_lens[4] = {1, (int64_t)buflen + 1, 1, INT64_MAX};
        for (int k = 0; k < 4; k++) {
            offs[count] = bad_offs[k];
            lens[count] = bad_lens[k];
            wires[count] = bad_lens[k];
            links[count] = 0;
            count++;
        }
    }

    columns *batch = columns_new(count, slots, verdicts);
    ibw_scan(all, (int64_t)buflen, offs, lens, with_wires ? wires : NULL, links, count,
             &batch->prog, &batch->out);
    columns *single = columns_new(1, slots, verdicts);
    for (int64_t i = 0; i < frames; i++) {
        uint8_t *one = exact_copy(all + offs[i], (size_t)lens[i]);
        int64_t zero = 0;
        columns_zero(single);
        ibw_scan(one, lens[i], &zero, &lens[i], with_wires ? &wires[i] : NULL, &links[i], 1,
                 &single->prog, &single->out);
        FUZZ_CHECK(columns_row_equal(batch, i, single, 0), "frame %lld: batch row differs",
                   (long long)i);
        int32_t pay = single->out.off_payload[0], plen = single->out.payload_len[0];
        if (pay >= 0 && plen >= 0 && single->out.error[0] == IBW_OK)
            FUZZ_CHECK((int64_t)pay + plen <= lens[i] || (with_wires && wires[i] > lens[i]),
                       "payload %d+%d past the frame's %lld bytes", pay, plen,
                       (long long)lens[i]);
        free(one);
    }
    columns_free(single);
    for (int64_t i = frames; i < count; i++)
        FUZZ_CHECK(batch->out.error[i] == IBW_TRUNCATED, "record %lld outside the buffer",
                   (long long)i);
    columns_free(batch);
    free(all);
    return 0;
}
