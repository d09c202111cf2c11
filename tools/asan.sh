#!/usr/bin/env bash
# Builds every compiled module of ibwire (setup.py's EXTENSIONS: the ICRC/VCRC engine, the
# scanner, the counting scan, the pcap engine's pcapng EPB walk and ERF block locator, the
# file map, the text filler, the rewrite kernel, the row grouping, the connection observer and
# impair's pump, ring and classifier) with AddressSanitizer +
# UndefinedBehaviorSanitizer in a temporary copy of the repository and runs, under them:
#   1. each module's own tests (C engine and twin compared; PYTHONMALLOC=malloc so ASan sees
#      every buffer): tests/crc, tests/scan (scanner, tally, text filler), the pcap engine
#      and file map tests of tests/pcap, tests/rewrite/test_rewrite_kernel.py (damaged frames
#      through the kernel and its numpy twin), tests/analysis/test_streams.py,
#      tests/transport/test_observer.py (compiled observer against its twin) and tests/impair
#      (the forwarder's C pump, receive and send rings and checksum completion on veth pairs);
#   2. a C fuzz loop straight on kernel.c: random bytes and mutated valid frames in buffers
#      malloc'd to their exact size, through locate/verify/icrc/vcrc/fix and the batch, for
#      every CRC-32 code path the CPU has;
#   3. tools/fuzzing/asan_loop.py: random and mutated inputs into every module with
#      exact-size buffers: CRC engine, scanner, counting scan and pcapng walk (lying record
#      and block lengths), text filler (valid templates against the twin, garbage it must
#      refuse), row grouping, rewrite kernel against its twin, ERF block locator, file maps
#      of files that shrink under them, impair's frame classifier and checksum completion
#      against their twins.
# Bounded (FUZZ_CASES, default 300000: the C loop's and the CRC/scan loop's cases, the other
# loops a share of it); exits non-zero on any sanitizer report or test failure.
# ASAN_TESTS="tests/impair ..." runs only those tests in step 1.
# Usage: tools/asan.sh [pytest args...]   (the coverage-guided campaign: tools/fuzz_native.sh)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ_CASES="${FUZZ_CASES:-300000}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ibwire-asan.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
LIBASAN="$(gcc -print-file-name=libasan.so)"
# handle_sigbus=0: the file map (pcap/filemap.c) installs its own SIGBUS handler, and its
# tests check that nothing else is there before and after
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86:handle_sigbus=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87"

echo "== copying the repository to $WORK"
mkdir -p "$WORK/repo"
(cd "$REPO" && tar cf - --exclude=.git --exclude=build --exclude='*.so' --exclude=.hypothesis \
    --exclude='__pycache__' --exclude='src/ibwire/*/_[a-z]*.c' \
    setup.py pyproject.toml src specs tests tools captures) \
    | (cd "$WORK/repo" && tar xf -)

echo "== building with $SAN"
(cd "$WORK/repo" && IBWIRE_CFLAGS="-O1 -g $SAN" IBWIRE_LDFLAGS="$SAN" \
    python setup.py build_ext --inplace --force >"$WORK/build.log" 2>&1) || {
    cat "$WORK/build.log"; exit 1; }
built=$(ls "$WORK"/repo/src/ibwire/*/_*.so 2>/dev/null | wc -l)
wanted=$(grep -cE '^ *\("ibwire\.[a-z_.]+", \[' "$REPO/setup.py")
if [ "$built" -ne "$wanted" ]; then  # every module of setup.py's EXTENSIONS
    cat "$WORK/build.log"; echo "!! $built of $wanted extensions built"; exit 1
fi

status=0
run() {  # run a step, keep going, remember any failure or sanitizer report
    local name="$1"; shift
    echo "== $name"
    if ! "$@" 2>&1 | tee "$WORK/$name.log"; then status=1; fi
    if grep -qE "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" "$WORK/$name.log"; then
        echo "!! sanitizer report in $name"; status=1
    fi
}

san_python() {
    (cd "$WORK/repo" && LD_PRELOAD="$LIBASAN" PYTHONMALLOC=malloc PYTHONPATH=src \
        IBWIRE_SHARED="$REPO/../shared" python "$@")
}

# ASAN_TESTS: the test paths to run (default: every compiled module's)
read -r -a TESTS <<<"${ASAN_TESTS:-tests/crc tests/scan tests/pcap/test_erf_block.py \
    tests/pcap/test_filemap.py tests/pcap/test_map_release.py tests/pcap/test_capture_fuzz.py \
    tests/pcap/test_capture_formats.py tests/rewrite/test_rewrite_kernel.py \
    tests/analysis/test_streams.py tests/transport/test_observer.py tests/impair}"
run pytest san_python -m pytest "${TESTS[@]}" -q -p no:cacheprovider "$@"

# ---------------------------------------------------------------- C fuzz loop
cat >"$WORK/fuzz.c" <<'EOF'
#include "kernel.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* One input in an exactly sized heap buffer: any read past it is an ASan report. */
static void one(const uint8_t *src, size_t n, uint64_t *sink)
{
    uint8_t *p = malloc(n ? n : 1);
    memcpy(p, src, n);
    for (int link = 0; link < IBW_LINK_COUNT; link++) {
        ibw_span s;
        ibw_check c;
        /* also a fault that leaves the CRCs placed: their spans are read and written too */
        if (ibw_verify(p, (int64_t)n, link, &s, &c) == IBW_OK || s.icrc >= 0 || s.vcrc >= 0) {
            if (s.icrc >= 0)
                *sink += ibw_icrc_of(p, &s);
            if (s.vcrc >= 0)
                *sink += ibw_vcrc_of(p, &s);
        }
        *sink += (uint64_t)c.error + c.kind + (uint64_t)s.where + (uint64_t)c.icrc_ok;
        ibw_fix(p, (int64_t)n, link, (int)(next() & 1), &s);
    }
    int64_t off = 0, len = (int64_t)n;
    int8_t a, b;
    uint8_t e, k, links = (uint8_t)(next() % IBW_LINK_COUNT);
    ibw_verify_batch(p, (int64_t)n, &off, &len, &links, 0, 1, &a, &b, &e, &k);
    *sink += e;
    free(p);
}

int main(int argc, char **argv)
{
    FILE *fh = argc == 3 ? fopen(argv[2], "rb") : NULL; /* corpus: u16 length + frame ... */
    if (!fh) {
        fprintf(stderr, "usage: fuzz CASES CORPUS\n");
        return 2;
    }
    long cases = atol(argv[1]);
    static uint8_t corpus[8 << 20], frame[70000];
    size_t csize = fread(corpus, 1, sizeof corpus, fh), nseeds = 0, offs[8192], lens[8192];
    fclose(fh);
    for (size_t at = 0; at + 2 <= csize && nseeds < 8192;) {
        size_t len = (size_t)corpus[at] | (size_t)corpus[at + 1] << 8;
        if (at + 2 + len > csize)
            break;
        lens[nseeds] = len;
        offs[nseeds++] = at + 2;
        at += 2 + len;
    }
    if (!nseeds) {
        fprintf(stderr, "empty corpus\n");
        return 2;
    }
    ibw_init();
    const char *backends[] = {"slice-by-8", "pclmulqdq", "vpclmulqdq"};
    uint64_t sink = 0;
    for (int bi = 0; bi < 3; bi++) {
        if (!ibw_crc32_set_backend(backends[bi]))
            continue;
        for (long i = 0; i < cases / 3; i++) {
            size_t n;
            if (i % 5 == 0) { /* random bytes */
                n = next() % 200;
                for (size_t j = 0; j < n; j++)
                    frame[j] = (uint8_t)next();
            } else { /* a mutated seed */
                size_t s = next() % nseeds;
                n = lens[s];
                memcpy(frame, corpus + offs[s], n);
                int muts = (int)(next() % 4);
                for (int m = 0; m < muts && n; m++) {
                    size_t at = next() % n;
                    switch (next() % 4) {
                    case 0: frame[at] = (uint8_t)next(); break;
                    case 1: frame[at] ^= (uint8_t)(1u << (next() % 8)); break;
                    case 2: if (at + 1 < n) { frame[at] = (uint8_t)(n >> 8); frame[at + 1] = (uint8_t)n; } break;
                    default: frame[at] = (uint8_t)(0xFF * (next() & 1)); break;
                    }
                }
                if (next() % 3 == 0)
                    n = next() % (n + 1); /* truncate */
            }
            one(frame, n, &sink);
        }
        printf("backend %s: %ld cases\n", backends[bi], cases / 3);
    }
    printf("fuzz done (sink %llu)\n", (unsigned long long)sink);
    return 0;
}
EOF

(cd "$WORK/repo" && PYTHONPATH=src:tests/crc python - "$WORK/corpus.bin" <<'EOF'
import random, struct, sys
from crc_frames import bth, native_ib, native_raw, rocev1, rocev2
rng = random.Random(7)
out = bytearray()
for i in range(400):
    body = bth(rng.randrange(256)) + rng.randbytes(rng.choice([0, 4, 16, 64, 240, 1024, 4000]))
    tags = [(0x8100, i)] * (i % 3)
    opts = bytes(4 * (i % 11))
    for b in (native_ib(body), native_ib(body, lnh=3), rocev1(body, vlans=tags),
              rocev1(body, link="grh"), rocev2(body, vlans=tags, ip={"options": opts}),
              rocev2(body, link="ip"), rocev2(body, v6=True, vlans=tags)):
        out += struct.pack("<H", len(b.frame)) + b.frame
    raw = native_raw(rng.randbytes(16), lnh=i % 2)
    out += struct.pack("<H", len(raw)) + raw
assert len(out) < 8 << 20
open(sys.argv[1], "wb").write(out)
EOF
) || status=1

gcc -O1 -g $SAN -I"$WORK/repo/src/ibwire/crc" "$WORK/fuzz.c" \
    "$WORK/repo/src/ibwire/crc/kernel.c" -o "$WORK/fuzz" || status=1
run fuzz_c "$WORK/fuzz" "$FUZZ_CASES" "$WORK/corpus.bin"

# ---------------------------------------------------------------- Python fuzz loop
run fuzz_python san_python -m tools.fuzzing.asan_loop "$FUZZ_CASES"

if [ "$status" -eq 0 ]; then
    echo "== ASan/UBSan: clean"
else
    echo "== ASan/UBSan: FAILED (logs above)"
fi
exit "$status"
