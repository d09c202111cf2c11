/* libFuzzer harness: capture maps that survive the file shrinking (src/ibwire/pcap/filemap.c),
 * used as pcap/_filemap.pyx's CaptureMap uses them: a file (a memfd) mapped read-only and
 * shared, the map registered, read front to back while the file is cut (ftruncate) at a point
 * the input picks, released, unmapped; sometimes a map longer than the file, sometimes two
 * maps of the same file at once.
 *
 * Oracles besides the sanitizers and "no SIGBUS gets through": a byte below the file's size at
 * the time it is read is the file's byte, any other reads as zero; the map reports a fault
 * exactly when a page wholly past the file's end was read; the fault counter counts them.
 * Input: byte 0 options, 2 bytes map length slack, 2 bytes where the read cuts the file, 2
 * bytes the size it is cut to, then the file's bytes. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "filemap.h"
#include "fuzz_input.h"

static long page;
static int fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    page = sysconf(_SC_PAGESIZE);
    fd = memfd_create("ibwire-fuzz-filemap", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    return 0;
}

static void write_all(const uint8_t *p, size_t n)
{
    if (ftruncate(fd, 0) != 0 || pwrite(fd, p, n, 0) != (ssize_t)n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    uint8_t opt = take_u8(&in);
    uint16_t slack = take_u16(&in), cut_at = take_u16(&in), cut_to = take_u16(&in);
    size_t n = in.n;
    uint8_t *file = exact_copy(in.p, n);
    planted_bug(file, n);
    write_all(file, n);
    /* the map: the file's length, or up to 3 pages more (a window past its end) */
    size_t length = n + (opt & 1 ? slack % (3 * (size_t)page) : 0);
    if (length == 0) { /* CaptureMap maps nothing for an empty window */
        free(file);
        return 0;
    }
    const uint8_t *map = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
    FUZZ_CHECK(map != MAP_FAILED, "mmap of %zu bytes", length);
    madvise((void *)map, length, MADV_SEQUENTIAL);
    int slot = ibw_map_register((uintptr_t)map, (uintptr_t)map + length);
    FUZZ_CHECK(slot >= 0, "register");
    int other = -1; /* a second map of the same file, registered meanwhile */
    const uint8_t *map2 = NULL;
    if (opt & 2) {
        map2 = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
        FUZZ_CHECK(map2 != MAP_FAILED, "second mmap");
        other = ibw_map_register((uintptr_t)map2, (uintptr_t)map2 + length);
        FUZZ_CHECK(other >= 0 && other != slot, "second register");
    }
    int64_t before = ibw_map_faults();
    size_t file_size = n, cut = length ? cut_at % (length + 1) : 0;
    size_t new_size = n ? cut_to % (n + 1) : 0;
    int expect_fault = 0;
    size_t stride = opt & 4 ? 1 : 61; /* every byte, or a sample of them */
    for (size_t i = 0; i < length; i += (i + stride < cut || i >= cut) ? stride : 1) {
        if (i >= cut && file_size != new_size && (opt & 8)) {
            if (ftruncate(fd, (off_t)new_size) != 0)
                abort();
            file_size = new_size;
        }
        uint8_t want = i < file_size ? file[i] : 0;
        uint8_t got = map[i];
        size_t pages_of_file = (file_size + (size_t)page - 1) / (size_t)page;
        if (i / (size_t)page >= pages_of_file)
            expect_fault = 1;
        FUZZ_CHECK(got == want || (i >= file_size), "byte %zu of the map: %u, file %u", i, got,
                   want);
        FUZZ_CHECK(i < file_size || got == 0, "byte %zu past the file's end reads %u", i, got);
    }
    int faulted = ibw_map_faulted(slot);
    FUZZ_CHECK(faulted == expect_fault, "faulted %d, expected %d", faulted, expect_fault);
    FUZZ_CHECK(ibw_map_faults() >= before + expect_fault, "fault count");
    if (map2 != NULL) {
        FUZZ_CHECK(!ibw_map_faulted(other), "the other map faulted");
        FUZZ_CHECK(ibw_map_release(other) == 0, "release of the other map");
        munmap((void *)map2, length);
    }
    FUZZ_CHECK(ibw_map_release(slot) == faulted, "release");
    FUZZ_CHECK(ibw_map_release(slot) == 0 && !ibw_map_faulted(-1)
               && !ibw_map_faulted(IBW_MAP_SLOTS), "released slot");
    munmap((void *)map, length);
    free(file);
    return 0;
}
