#!/usr/bin/env bash
# Runs one fuzzer for a while, then minimises its findings into tests/fuzz/corpus/<target>/.
# Usage: tests/fuzz/run.sh TARGET SECONDS [extra libFuzzer flags]   (TARGET: bundle | topo | npy)
# Needs tests/fuzz/build.sh first. Work corpus: build-fuzz/work/<target>; crashes: build-fuzz/crashes/<target>;
# libFuzzer's log: build-fuzz/logs/<target>-<date>.log (its last lines give the execution count).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
t="$1"
secs="$2"
shift 2
bdir="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
case "$t" in
bundle) max_len=65536 ;;
topo) max_len=16384 ;;
npy) max_len=8192 ;;
*)
    echo "unknown target $t" >&2
    exit 2
    ;;
esac
fz="$bdir/fuzz/fuzz_$t"
work="$bdir/work/$t"
seeds="$bdir/seeds/$t"
corpus="$root/tests/fuzz/corpus/$t"
mkdir -p "$work" "$bdir/crashes/$t" "$bdir/logs" "$corpus" "$seeds"
# seeds (regenerated each time; cheap)
case "$t" in
bundle) "$bdir/fuzz/make_seeds" "$seeds" >/dev/null ;;
topo) /usr/bin/python3 "$root/tests/fuzz/make_topo_seeds.py" "$seeds" >/dev/null ;;
npy) /usr/bin/python3 "$root/tests/fuzz/make_npy_seeds.py" "$seeds" ;;
esac
export OPENBLAS_NUM_THREADS=1
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=1"
export FUZZ_TOPO_KNOWN="${FUZZ_TOPO_KNOWN-}" # e.g. reorder,lexer to step over fixed findings on old code (README.md)
log="$bdir/logs/$t-$(date +%Y%m%d-%H%M%S).log"
echo "fuzzing $t for $secs s; log $log"
# exit status 0 = time ran out, nothing found
set +e
nice -n 10 "$fz" -max_len="$max_len" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
    -dict="$root/tests/fuzz/$t.dict" -artifact_prefix="$bdir/crashes/$t/" -print_final_stats=1 "$@" \
    "$work" "$seeds" "$corpus" >"$log" 2>&1
rc=$?
set -e
grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb|^Done [0-9]+ runs" "$log" || true
if [ "$rc" != 0 ]; then
    echo "fuzzer exited with $rc: a finding; see $log and $bdir/crashes/$t/" >&2
    exit "$rc"
fi
# minimise: everything into a fresh folder, which then replaces the committed corpus
fresh="$bdir/merge-$t"
rm -rf "$fresh" && mkdir -p "$fresh"
"$fz" -merge=1 -max_len="$max_len" -dict="$root/tests/fuzz/$t.dict" "$fresh" "$corpus" "$work" "$seeds" \
    >"$log.merge" 2>&1
rm -f "$corpus"/*
cp "$fresh"/* "$corpus"/
echo "corpus $corpus: $(ls "$corpus" | wc -l) files, $(du -sk "$corpus" | cut -f1) KiB"
