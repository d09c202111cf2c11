/* ibwire: reading a capture front to back: ask for what is ahead, let go of what is behind.
 *
 * Ahead: a walk of records is a chain of dependent loads: the next record's place is known only
 * once this record's length is read. When records are far apart (RoCE WRITEs of 1 KiB and
 * more), every step is a cache miss that the hardware prefetchers do not hide: a bare walk
 * of tools/bench_qp.py's 1M-packet capture took 130 ns a record on an EPYC VM, 35 ns when
 * every cache line up to 2 KiB ahead of it was asked for in advance, and the scanner's
 * walk of it with no fields went from 0.19 to 0.12 s. A prefetch never faults: where the
 * pages ahead are not mapped yet, it costs nothing and does nothing. */
#ifndef IBWIRE_SEQUENTIAL_H
#define IBWIRE_SEQUENTIAL_H

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define IBW_AHEAD_BYTES 2048
#define IBW_LINE 64
/* How many frames ahead of a walk by offsets its frames are asked for. */
#define IBW_AHEAD_FRAMES 4

/* Ask for every cache line of buf from *line up to pos + IBW_AHEAD_BYTES (not past end);
 * *line starts at the walk's first position and only moves forward. */
static inline void ibw_ahead(const uint8_t *buf, int64_t *line, int64_t pos, int64_t end)
{
    int64_t want = pos + IBW_AHEAD_BYTES < end ? pos + IBW_AHEAD_BYTES : end;
    int64_t l = *line;
    for (; l < want; l += IBW_LINE)
        __builtin_prefetch(buf + l);
    *line = l;
}

/* The same for a walk whose records' places are known (an index of offsets): the first two
 * cache lines of a frame (the headers) and its last (the ICRC). Bounds are the caller's. */
static inline void ibw_ahead_frame(const uint8_t *frame, int64_t n)
{
    __builtin_prefetch(frame);
    __builtin_prefetch(frame + IBW_LINE);
    if (n > 4)
        __builtin_prefetch(frame + n - 4);
}

/* Behind: a window of a file mapped for one walk keeps every page the walk read in the
 * process's memory (its resident set) until it is unmapped; a walk whose reader rarely looks
 * at the frames again can let them go as it passes, every `every` bytes (0: never): the pages
 * stay in the page cache, and a later read faults them in again. Only for a buffer that is a
 * read-only map of a file (on anonymous memory MADV_DONTNEED would zero the data). */
static inline void ibw_let_go(const uint8_t *buf, int64_t *released, int64_t pos,
                              int64_t every)
{
    if (every <= 0 || pos - *released < every)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)(buf + *released) + page - 1) & ~(page - 1);
    uintptr_t to = (uintptr_t)(buf + pos) & ~(page - 1);
    if (to > from)
        madvise((void *)from, to - from, MADV_DONTNEED);
    *released = pos;
}

#endif
