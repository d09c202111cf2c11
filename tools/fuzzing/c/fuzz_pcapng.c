/* libFuzzer harness: the runs of pcapng Enhanced Packet Blocks, in memory: ibw_pcapng_epbs
 * (src/ibwire/pcap/pcapng_walk.c, behind pcap/_engine.pyx's pcapng_epbs), ibw_check_pcapng and
 * ibw_pcapng_sync (src/ibwire/scan/scan.c, behind scan/_tally.pyx), with the interfaces their
 * callers build: clocks as ibwire.pcap.pcapng.check_clock lets through (kind 0, 1 with a
 * divisor of at least 1, 2), any offset, snaplens, direct or not; a window inside the buffer;
 * cap at most (end - pos) / 32 rows.
 *
 * Oracles besides the sanitizers: every row's frame lies in its block inside the window, its
 * interface is direct and below the count; the counting walk takes (at least) the run the
 * index walk takes where their conditions agree; a sync guess lies where it searched.
 * Input: byte 0 options, 2 bytes window start, 2 bytes window cut, byte interface count, 16
 * bytes per interface, then the blocks. */
#include "kernel.h"
#include "pcapng_walk.h"
#include "scan_columns.h"

#define MAX_LEN (256u * 1024 * 1024) /* ibwire.pcap.records.MAX_CAPLEN */
#define MOST_IFACES 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t opt = take_u8(&in);
    int swapped = opt & 1;
    uint16_t start = take_u16(&in), tail = take_u16(&in);
    int64_t n_iface = take_u8(&in) % (MOST_IFACES + 1);
    ibw_pcapng_iface *ifaces = exact_alloc(sizeof(ibw_pcapng_iface) * (size_t)n_iface);
    ibw_count_iface *counted = exact_alloc(sizeof(ibw_count_iface) * (size_t)n_iface);
    for (int64_t i = 0; i < n_iface; i++) {
        uint8_t how = take_u8(&in);
        uint64_t param = take_u32(&in);
        if (how & 0x80)
            param = param << 32 | take_u32(&in);
        ifaces[i].kind = how % 3;
        if (ifaces[i].kind == 1 && param == 0)
            param = 1; /* check_clock: a divisor */
        ifaces[i].param = param;
        ifaces[i].offset_s = (int64_t)take_u64(&in);
        uint16_t snap = take_u16(&in);
        ifaces[i].snaplen = how & 0x40 ? 0 : snap;
        ifaces[i].direct = how >> 3 & 1;
        counted[i].snaplen = ifaces[i].snaplen;
        counted[i].header = (int32_t)(how >> 4 & 3) - 1; /* -1: not counted, else a header */
        counted[i].code = link_of(take_u8(&in));
    }
    int64_t buflen = (int64_t)in.n;
    uint8_t *buf = exact_copy(in.p, in.n);
    planted_bug(buf, in.n);
    int64_t pos = buflen ? start % (buflen + 1) : 0;
    if (opt & 2)
        pos &= ~(int64_t)3;
    int64_t end = opt & 4 ? buflen : buflen - (buflen - pos ? tail % (buflen - pos + 1) : 0);
    uint32_t max_len = opt & 8 ? MAX_LEN : 64 + (uint32_t)(tail & 0x3FF);

    int64_t cap = (end - pos) / 32;
    int64_t *offs = exact_alloc(sizeof(int64_t) * (size_t)cap);
    int64_t *caplen = exact_alloc(sizeof(int64_t) * (size_t)cap);
    uint32_t *orig = exact_alloc(sizeof(uint32_t) * (size_t)cap);
    int64_t *ts = exact_alloc(sizeof(int64_t) * (size_t)cap);
    uint32_t *iface = exact_alloc(sizeof(uint32_t) * (size_t)cap);
    int64_t next = -1;
    int64_t rows = ibw_pcapng_epbs(buf, pos, end, swapped, max_len, ifaces, n_iface, cap, offs,
                                   caplen, orig, ts, iface, &next);
    FUZZ_CHECK(rows >= 0 && rows <= cap && next >= pos && next <= end, "epbs: %lld rows",
               (long long)rows);
    for (int64_t i = 0; i < rows; i++) {
        FUZZ_CHECK(offs[i] >= pos + 28 && offs[i] + caplen[i] + 4 <= next
                   && caplen[i] <= orig[i], "EPB row %lld", (long long)i);
        FUZZ_CHECK(iface[i] < n_iface && ifaces[iface[i]].direct, "row %lld interface %u",
                   (long long)i, iface[i]);
    }

    ibw_scan_prog counting; /* _tally.pyx's: the layout only, no column, verdicts on */
    ibw_scan_instr none[FUZZ_NCOLUMNS];
    fuzz_program(&counting, none, 0, 1);
    ibw_sll_links sll = {fuzz_sll_keys, fuzz_sll_codes, FUZZ_NSLL};
    ibw_tally tally;
    memset(&tally, 0, sizeof tally);
    int64_t cap_flagged = 1 + (opt >> 4);
    int64_t *flagged = exact_alloc(2 * sizeof(int64_t) * (size_t)cap_flagged);
    int64_t next2 = -1;
    int status = -1;
    int64_t listed = ibw_check_pcapng(buf, pos, end, swapped, max_len, counted, n_iface, &sll,
                                      &counting, &tally, flagged, cap_flagged, &next2, &status);
    FUZZ_CHECK(listed >= 0 && listed <= cap_flagged && next2 >= pos && next2 <= end
               && status >= 0 && status <= 2, "check_pcapng: %lld listed, status %d",
               (long long)listed, status);
    FUZZ_CHECK(tally.failed <= tally.records && tally.ib + tally.other <= tally.records,
               "tally counts");
    for (int64_t i = 0; i < listed; i++)
        FUZZ_CHECK(flagged[2 * i] >= 0 && flagged[2 * i] < tally.records
                   && flagged[2 * i + 1] >= pos && flagged[2 * i + 1] + 32 <= end,
                   "flagged %lld", (long long)i);

    int depth = 1 + (tail >> 12);
    int64_t search = opt & 0x80 ? 1024 * 1024 : 1 + (tail & 0x1FF);
    int64_t guess = ibw_pcapng_sync(buf, pos, end, swapped, max_len, depth, search);
    FUZZ_CHECK(guess == -1 || (guess >= pos && guess < pos + search && guess < end
                               && (guess - pos) % 4 == 0), "pcapng_sync %lld",
               (long long)guess);

    free(flagged);
    free(offs); free(caplen); free(orig); free(ts); free(iface);
    free(ifaces); free(counted);
    free(buf);
    return 0;
}
