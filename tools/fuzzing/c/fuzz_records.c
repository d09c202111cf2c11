/* libFuzzer harness: the classic pcap record walks of src/ibwire/scan/scan.c over a buffer of
 * records, as their callers (scan/_engine.pyx's pcap_records and scan_pcap, scan/_tally.pyx's
 * check_pcap and pcap_sync, driven by ibwire.scan.capture and ibwire.scan.tally) call them:
 * a window pos..end inside the buffer, cap rows at most (end - pos) / 16, MAX_CAPLEN and the
 * fraction limits of the readers, the real Linux cooked header table, FLAGGED_CAP-like caps.
 *
 * Oracles besides the sanitizers: the walk alone and the walk with the scan agree on the
 * records; the scan's row i equals ibw_scan of that record's frame alone (in its own
 * exact-size buffer); the counting walk counts every record the plain walk found (until it
 * pauses); a sync guess is a boundary at or after where it searched from.
 * Input: byte 0 options, byte 1 the link, 2 bytes the window start, 2 bytes the flagged cap,
 * 4 bytes max caplen and snaplen choices, then the records. */
#include "kernel.h"
#include "scan_columns.h"

#define MAX_CAPLEN (256u * 1024 * 1024) /* ibwire.pcap.records.MAX_CAPLEN */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t opt = take_u8(&in);
    int swapped = opt & 1, nano = opt >> 1 & 1, header = (opt >> 2 & 3) % 3;
    int verdicts = opt >> 4 & 1;
    int link = link_of(take_u8(&in));
    uint16_t start = take_u16(&in), flag_cap = take_u16(&in);
    uint8_t caps = take_u8(&in), snap = take_u8(&in);
    uint16_t tail = take_u16(&in);
    uint32_t max_caplen = (caps & 3) == 0 ? MAX_CAPLEN : (caps & 3) == 1 ? 65535u
                          : (caps & 3) == 2 ? 0xFFFFFFFFu : caps;
    uint32_t snaplen = snap & 1 ? 0 : (uint32_t)snap * 8;
    int64_t buflen = (int64_t)in.n;
    uint8_t *buf = exact_copy(in.p, in.n);
    planted_bug(buf, in.n);
    int64_t pos = buflen ? start % (buflen + 1) : 0;
    int64_t end = buflen - (buflen - pos ? tail % (buflen - pos + 1) : 0);
    if (opt & 0x80)
        end = buflen;
    int64_t fraction_ns = nano ? 1 : 1000;
    int64_t cap = (end - pos) / 16;

    /* the plain walk */
    int64_t *offs = exact_alloc(sizeof(int64_t) * (size_t)cap);
    int64_t *caplen = exact_alloc(sizeof(int64_t) * (size_t)cap);
    uint32_t *orig = exact_alloc(sizeof(uint32_t) * (size_t)cap);
    int64_t *ts = exact_alloc(sizeof(int64_t) * (size_t)cap);
    int64_t next = -1;
    int status = -1;
    int64_t rows = ibw_pcap_records(buf, pos, end, swapped, fraction_ns, max_caplen, cap, offs,
                                    caplen, orig, ts, &next, &status);
    FUZZ_CHECK(rows >= 0 && rows <= cap && next >= pos && next <= end && status >= 0
               && status <= 2, "walk: %lld rows, next %lld, status %d", (long long)rows,
               (long long)next, status);
    for (int64_t i = 0; i < rows; i++)
        FUZZ_CHECK(offs[i] >= pos + 16 && offs[i] + caplen[i] <= end, "record %lld outside",
                   (long long)i);

    /* the walk with the scan: the same records, each row as the frame scanned alone */
    int64_t *offs2 = exact_alloc(sizeof(int64_t) * (size_t)cap);
    int64_t *caplen2 = exact_alloc(sizeof(int64_t) * (size_t)cap);
    uint32_t *orig2 = exact_alloc(sizeof(uint32_t) * (size_t)cap);
    int64_t *ts2 = exact_alloc(sizeof(int64_t) * (size_t)cap);
    int64_t next2 = -1;
    int status2 = -1;
    columns *cols = columns_new(cap, 0xFFFFFFFFu, verdicts);
    int64_t rows2 = ibw_scan_pcap(buf, pos, end, swapped, fraction_ns, max_caplen, cap, link,
                                  &cols->prog, &cols->out, offs2, caplen2, orig2, ts2, &next2,
                                  &status2, 0);
    FUZZ_CHECK(rows2 == rows && next2 == next && status2 == status, "scan_pcap walked apart");
    FUZZ_CHECK(memcmp(offs, offs2, sizeof(int64_t) * (size_t)rows) == 0
               && memcmp(caplen, caplen2, sizeof(int64_t) * (size_t)rows) == 0
               && memcmp(orig, orig2, sizeof(uint32_t) * (size_t)rows) == 0
               && memcmp(ts, ts2, sizeof(int64_t) * (size_t)rows) == 0, "records differ");
    columns *single = columns_new(1, 0xFFFFFFFFu, verdicts);
    for (int64_t i = 0; i < rows && i < 8; i++) {
        uint8_t *one = exact_copy(buf + offs[i], (size_t)caplen[i]);
        int64_t zero = 0, wire = (int64_t)orig[i] > caplen[i] ? (int64_t)orig[i] : caplen[i];
        uint8_t code = (uint8_t)link;
        columns_zero(single);
        ibw_scan(one, caplen[i], &zero, &caplen[i], &wire, &code, 1, &single->prog,
                 &single->out);
        FUZZ_CHECK(columns_row_equal(cols, i, single, 0), "record %lld: scan_pcap row differs",
                   (long long)i);
        free(one);
    }
    columns_free(single);
    columns_free(cols);

    /* the counting walk: it pauses after flag_cap records listed, else walks as far */
    ibw_tally tally;
    memset(&tally, 0, sizeof tally);
    ibw_sll_links sll = {fuzz_sll_keys, fuzz_sll_codes, FUZZ_NSLL};
    ibw_record_link frames = {header, link};
    ibw_scan_prog counting; /* _tally.pyx's: the layout only, no column, verdicts on */
    ibw_scan_instr none[FUZZ_NCOLUMNS];
    fuzz_program(&counting, none, 0, 1);
    int64_t cap_flagged = 1 + flag_cap % 64;
    int64_t *flagged = exact_alloc(2 * sizeof(int64_t) * (size_t)cap_flagged);
    int64_t next3 = -1;
    int status3 = -1;
    int64_t listed = ibw_check_pcap(buf, pos, end, swapped, max_caplen, snaplen, frames, &sll,
                                    &counting, &tally, flagged, cap_flagged, &next3,
                                    &status3);
    FUZZ_CHECK(listed >= 0 && listed <= cap_flagged, "listed %lld", (long long)listed);
    if (listed < cap_flagged)
        FUZZ_CHECK(tally.records == rows && next3 == next && status3 == status,
                   "check_pcap: %lld records, walk %lld", (long long)tally.records,
                   (long long)rows);
    FUZZ_CHECK(tally.failed <= tally.records && tally.ib + tally.other <= tally.records
               && tally.cut <= tally.records, "tally counts");
    for (int64_t i = 0; i < listed; i++)
        FUZZ_CHECK(flagged[2 * i] >= 0 && flagged[2 * i] < tally.records
                   && flagged[2 * i + 1] >= pos + 16 && flagged[2 * i + 1] <= end,
                   "flagged %lld", (long long)i);

    /* the guessed boundary of a split walk (ibwire.scan.tally's SYNC_DEPTH/SYNC_SEARCH) */
    int depth = 1 + (opt >> 5 & 7);
    int64_t search = opt & 0x40 ? 1024 * 1024 : 1 + tail % 512;
    int64_t guess = ibw_pcap_sync(buf, pos, end, swapped, max_caplen,
                                  nano ? 1000000000u : 1000000u, depth, search);
    FUZZ_CHECK(guess == -1 || (guess >= pos && guess < pos + search && guess < end),
               "pcap_sync %lld", (long long)guess);

    free(flagged);
    free(offs); free(caplen); free(orig); free(ts);
    free(offs2); free(caplen2); free(orig2); free(ts2);
    free(buf);
    return 0;
}
