#!/usr/bin/env bash
# The coverage-guided campaign with the C extensions instrumented: builds every ibwire
# extension with clang's -fsanitize=address,undefined,fuzzer-no-link in a temporary copy of the
# repository (the installed ibwire is left alone), then runs tools/fuzz_atheris.py on it with
# atheris's ASan+libFuzzer runtime preloaded, so libFuzzer's coverage (cov/ft) counts the
# edges of the C code as well as ibwire's Python, and any ASan/UBSan report is a finding.
#
# Usage: tools/fuzz_native.sh TARGET [libFuzzer options...]
#   e.g. tools/fuzz_native.sh scan -max_total_time=600 -print_final_stats=1
# Needs clang (CLANG, default clang-14 or clang) and atheris (pip install '.[atheris]').
# FUZZ_KEEP=DIR builds into DIR and keeps it (later runs reuse the build); findings
# (crash-*, timeout-*) go to the working directory, or to -artifact_prefix.
# FUZZ_SCRIPT=FILE runs another harness on the build (tools/fuzz_cython.py: the Cython
# modules straight, TARGET one of its targets).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 1 ] || { sed -n 2,12p "$0"; exit 2; }
CLANG="${CLANG:-$(command -v clang-14 || command -v clang || true)}"
[ -n "$CLANG" ] || { echo "fuzz_native: clang is needed (apt-get install clang)" >&2; exit 2; }
PRELOAD="$(python -c 'import atheris, os; print(os.path.join(atheris.path(), "asan_with_fuzzer.so"))')"
[ -f "$PRELOAD" ] || { echo "fuzz_native: $PRELOAD missing (atheris without its runtime)" >&2; exit 2; }

if [ -n "${FUZZ_KEEP:-}" ]; then
    WORK="$FUZZ_KEEP"; mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/ibwire-fuzz.XXXXXX")"
fi
# the inputs' capture files (tools/fuzzing/targets.py), in memory where /dev/shm is
FUZZ_WORK="$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/ibwire-fuzz.XXXXXX")"
export FUZZ_WORK
trap 'rm -rf "$FUZZ_WORK"; [ -n "${FUZZ_KEEP:-}" ] || rm -rf "$WORK"' EXIT
SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if ! ls "$WORK"/repo/src/ibwire/rewrite/_kernel*.so >/dev/null 2>&1; then
    echo "== building the extensions with $SAN (clang: $CLANG)" >&2
    mkdir -p "$WORK/repo"
    # the Cython outputs (_*.c) are left behind: cythonize writes them anew
    (cd "$REPO" && tar cf - --exclude=build --exclude='*.so' --exclude='__pycache__' \
        --exclude='src/ibwire/*/_[a-z]*.c' setup.py pyproject.toml src specs) \
        | (cd "$WORK/repo" && tar xf -)
    (cd "$WORK/repo" && CC="$CLANG" LDSHARED="$CLANG -shared" IBWIRE_CFLAGS="-O1 -g $SAN" \
        IBWIRE_LDFLAGS="$SAN" python setup.py build_ext --inplace --force \
        >"$WORK/build.log" 2>&1) || { cat "$WORK/build.log" >&2; exit 1; }
    built=$(ls "$WORK"/repo/src/ibwire/*/_*.so | wc -l)
    wanted=$(grep -cE '^ *\("ibwire\.[a-z_.]+", \[' "$REPO/setup.py")
    if [ "$built" -ne "$wanted" ]; then  # every extension of setup.py's EXTENSIONS
        cat "$WORK/build.log" >&2
        echo "fuzz_native: $built of $wanted extensions built" >&2
        exit 1
    fi
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# PYTHONMALLOC=malloc: every Python buffer is a malloc ASan can see the bounds of.
LD_PRELOAD="$PRELOAD" PYTHONMALLOC=malloc PYTHONPATH="$WORK/repo/src" \
    python "${FUZZ_SCRIPT:-$REPO/tools/fuzz_atheris.py}" "$@" || status=$?
exit "${status:-0}"
