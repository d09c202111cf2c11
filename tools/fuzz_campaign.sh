#!/usr/bin/env bash
# A campaign over every entry point: each target of tools/fuzz_atheris.py runs for SECONDS,
# one after the other, ROUNDS times, with one corpus per target kept in DIR (so later rounds,
# and later campaigns, go on from what earlier ones found). MODE says how:
#   native  the C extensions built with ASan+UBSan and libFuzzer's coverage
#           (tools/fuzz_native.sh): every input, and at its start the whole corpus so far,
#           runs under the sanitizers;
#   python  the installed ibwire (its optimised C, no sanitizer): Python coverage only, about
#           10x the inputs a second; crashes, non-ibwire exceptions and twin disagreements
#           are still found.
# At the end it prints one line per run (target, mode, inputs, seconds, inputs/s, cov, ft,
# status) and writes them to DIR/runs.tsv; findings are DIR/findings/<target>-crash-* (or
# -timeout-*, -oom-*). Exits 1 if any run found something.
# Usage: tools/fuzz_campaign.sh DIR SECONDS [ROUNDS [MODE [TARGETS...]]]
#   e.g. nice -n 10 tools/fuzz_campaign.sh /tmp/campaign 300 2 python
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
DIR="$1"; SECONDS_EACH="$2"; ROUNDS="${3:-1}"; MODE="${4:-native}"
shift $(( $# < 4 ? $# : 4 ))
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(parse scan rewrite show check)
mkdir -p "$DIR/findings" "$DIR/logs"
[ -f "$DIR/runs.tsv" ] || printf 'target\tmode\tinputs\tseconds\tinputs_per_s\tcov\tft\tstatus\n' \
    >"$DIR/runs.tsv"

status=0
for round in $(seq 1 "$ROUNDS"); do
    for target in "${TARGETS[@]}"; do
        mkdir -p "$DIR/corpus/$target"
        log="$DIR/logs/$target-$MODE-$round-$(date -u +%H%M%S).log"
        options=(-max_total_time="$SECONDS_EACH" -print_final_stats=1
                 -artifact_prefix="$DIR/findings/$target-" "$DIR/corpus/$target")
        if [ "$MODE" = native ]; then
            FUZZ_KEEP="${FUZZ_KEEP:-$DIR/build}" "$REPO/tools/fuzz_native.sh" "$target" \
                "${options[@]}" >"$log" 2>&1
        else
            work="$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp)/ibwire-fuzz.XXXXXX")"
            FUZZ_WORK="$work" python "$REPO/tools/fuzz_atheris.py" "$target" "${options[@]}" \
                >"$log" 2>&1
        fi
        rc=$?
        [ "$MODE" = native ] || rm -rf "$work"
        [ "$rc" -eq 0 ] || status=1
        # libFuzzer's final stats: stat::number_of_executed_units, and the last cov:/ft: line
        runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$')
        took=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' \
               | grep -oE '[0-9]+')
        last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
        cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
        ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
        took=${took:-$SECONDS_EACH}
        rate=$(( ${runs:-0} / (took > 0 ? took : 1) ))
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$MODE" "${runs:-0}" "$took" \
            "$rate" "${cov:-?}" "${ft:-?}" "$( [ "$rc" -eq 0 ] && echo clean || echo "FOUND (rc $rc)")" \
            | tee -a "$DIR/runs.tsv"
    done
done
exit "$status"
