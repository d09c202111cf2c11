#!/usr/bin/env bash
# Fast fuzzing of ibwire's compiled code, entry point by entry point, millions of inputs:
#   C harnesses (tools/fuzzing/c/fuzz_*.c): libFuzzer + ASan + UBSan, no Python, straight on
#     the C: crc (crc/kernel.c), scan (scan.c's ibw_scan), records (scan.c's pcap walks),
#     pcapng (pcap/pcapng_walk.c and scan.c's pcapng walks), filemap (pcap/filemap.c),
#     relay (impair/relay.c's classifier);
#   Cython harnesses (tools/fuzzing/cython_targets.py): atheris over the compiled modules'
#     functions, against their Python twins, the modules built with ASan + UBSan + libFuzzer
#     coverage (tools/fuzz_native.sh's build): cy-tally, cy-text, cy-kernel, cy-streams,
#     cy-observer, cy-engine.
# Each harness runs for BUDGET (seconds, or runs=N inputs), on its corpus DIR/corpus/NAME
# (kept between runs) and the seeds of tools/fuzzing/c_seeds.py; findings go to
# DIR/findings/NAME-crash-* (-timeout-*, -oom-*, -leak-*). Prints a line per run (inputs,
# inputs/s, cov, ft, status), appends it to DIR/runs.jsonl and writes DIR/summary.json (the
# totals per entry point over every run in DIR). Exits 1 if any run found something.
#
# Usage: tools/fuzz_c.sh DIR BUDGET [NAME...]      (no NAME: every C harness)
#   e.g. nice -n 10 tools/fuzz_c.sh /tmp/cfuzz 600
#        nice -n 10 tools/fuzz_c.sh /tmp/cfuzz runs=2000000 crc scan
#        tools/fuzz_c.sh /tmp/cfuzz 120 cy-tally cy-text      (Cython: needs atheris)
# Environment: CLANG (default clang-14), FUZZ_C_CFLAGS (more compiler flags, e.g.
# -DIBW_FUZZ_PLANTED_BUG: every harness reads one byte past its input, the smoke's proof that
# ASan reports), FUZZ_C_BUILD (where the harnesses are built; default DIR/build),
# FUZZ_C_ARGS (more libFuzzer options), FUZZ_KEEP (the Cython build, as fuzz_native.sh).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 2 ] || { sed -n 2,29p "$0"; exit 2; }
DIR="$1"; BUDGET="$2"; shift 2
C_HARNESSES=(crc scan records pcapng filemap relay)
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=("${C_HARNESSES[@]}")
case "$BUDGET" in
    runs=*) LIMIT=(-runs="${BUDGET#runs=}") ;;
    *) LIMIT=(-max_total_time="$BUDGET") ;;
esac
mkdir -p "$DIR/findings" "$DIR/logs" "$DIR/corpus"
DIR="$(cd "$DIR" && pwd)"
BUILD="${FUZZ_C_BUILD:-$DIR/build}"
CLANG="${CLANG:-$(command -v clang-14 || command -v clang || true)}"
PYTHON="${PYTHON:-python3}"
SRC="$REPO/src/ibwire"
FUZZ="$REPO/tools/fuzzing"

# the sources of each C harness, besides its own file
sources() {
    case "$1" in
        crc) echo "$SRC/crc/kernel.c" ;;
        scan|records) echo "$SRC/scan/scan.c $SRC/crc/kernel.c" ;;
        pcapng) echo "$SRC/pcap/pcapng_walk.c $SRC/scan/scan.c $SRC/crc/kernel.c" ;;
        filemap) echo "$SRC/pcap/filemap.c" ;;
        relay) echo "$SRC/impair/relay.c" ;;
        *) return 1 ;;
    esac
}

build_c() {
    local name="$1" bin="$BUILD/fuzz_$1" srcs
    srcs="$(sources "$name")" || { echo "fuzz_c: no harness $name" >&2; return 1; }
    [ -n "$CLANG" ] || { echo "fuzz_c: clang is needed (apt-get install clang-14)" >&2; return 1; }
    mkdir -p "$BUILD"
    if [ ! -f "$BUILD/scan_program.h" ] || [ "$SRC/scan/_layout.py" -nt "$BUILD/scan_program.h" ]; then
        PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$FUZZ/scan_program_h.py" \
            "$BUILD/scan_program.h" || return 1
    fi
    local newest
    newest="$(ls -t "$FUZZ"/c/*.[ch] "$BUILD/scan_program.h" $srcs "$SRC"/*/*.h 2>/dev/null | head -1)"
    if [ -f "$bin" ] && [ "$bin" -nt "$newest" ] && [ "$(cat "$bin.flags" 2>/dev/null)" = "${FUZZ_C_CFLAGS:-}" ]; then
        return 0
    fi
    # shellcheck disable=SC2086 # word splitting of the source list and extra flags is meant
    "$CLANG" -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined ${FUZZ_C_CFLAGS:-} -I"$FUZZ/c" -I"$BUILD" \
        -I"$SRC/crc" -I"$SRC/scan" -I"$SRC/pcap" -I"$SRC/impair" \
        "$FUZZ/c/fuzz_$name.c" $srcs -o "$bin" || return 1
    printf '%s' "${FUZZ_C_CFLAGS:-}" >"$bin.flags"
}

if [ ! -d "$DIR/seeds" ]; then
    PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$FUZZ/c_seeds.py" \
        "$DIR/seeds.tmp" >/dev/null && mv "$DIR/seeds.tmp" "$DIR/seeds"
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=64:malloc_context_size=20}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
status=0
for name in "${NAMES[@]}"; do
    mkdir -p "$DIR/corpus/$name"
    log="$DIR/logs/$name-$(date -u +%Y%m%dT%H%M%S).log"
    seeds=()
    [ -d "$DIR/seeds/${name#cy-}" ] && seeds=("$DIR/seeds/${name#cy-}")
    options=("${LIMIT[@]}" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048
             -artifact_prefix="$DIR/findings/$name-" ${FUZZ_C_ARGS:-}
             "$DIR/corpus/$name" "${seeds[@]}")
    started=$(date +%s.%N)
    case "$name" in
        cy-*)
            ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=64" \
            FUZZ_KEEP="${FUZZ_KEEP:-$DIR/cython-build}" FUZZ_SCRIPT="$REPO/tools/fuzz_cython.py" \
                "$REPO/tools/fuzz_native.sh" "${name#cy-}" "${options[@]}" >"$log" 2>&1
            ;;
        *)
            if ! build_c "$name" >"$log" 2>&1; then
                cat "$log" >&2
                status=1
                continue
            fi
            "$BUILD/fuzz_$name" "${options[@]}" >>"$log" 2>&1
            ;;
    esac
    rc=$?
    [ "$rc" -eq 0 ] || status=1
    "$PYTHON" "$FUZZ/fuzz_c_summary.py" "$DIR" "$name" "$log" "$rc" "$started" || status=1
done
exit "$status"
