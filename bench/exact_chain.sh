#!/usr/bin/env bash
# Exact statistics along a long chain: an N-node chain, `samples` rows per node, cov = tied (LDA
# statistics, Gaussian head), carried in fp32 and in fp16. Prints per run: wall time, peak RSS per node (mean and
# max, as each node reports it), the last node's accuracy, the launcher's centralized baselines, bytes per
# hand-off, and how far the last node's statistics are from the centralized statistics of all rows
# (bench/stats_error.c).
#
# usage: bash bench/exact_chain.sh [--nodes 64] [--samples 60] [--data fmnist|pacs|DIR] [--seed 0]
#                                  [--out DIR] [--bin DIR] [--sampling] [--min-rows M]
#   --min-rows  the privacy floor (default: the attribute's default, 5); 1 releases every class, so that the
#               last node's statistics can be compared with all rows (a withheld class shows as a count
#               mismatch and a large error)
#   --sampling  also run the paper's protocol on the same chain (cov = diag, k = 1, the defaults otherwise);
#               slow: minutes
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nodes=64 samples=60 data=fmnist seed=0 out=/tmp/pft-exact-chain bin="$here/build/node" sampling=0 floor=()
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes="$2"; shift ;;
    --samples) samples="$2"; shift ;;
    --data) data="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --out) out="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --sampling) sampling=1 ;;
    --min-rows) floor=(--set "min_rows=$2"); shift ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "exact_chain.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
case "$data" in
fmnist) data="$here/../shared/data/fashionmnist-mobilenetv2" ;;
pacs) data="$here/../shared/data/pacs-mobilenetv2" ;;
esac
data="$(cd "$data" && pwd)"
[ -x "$bin/pftnet" ] || { echo "no $bin/pftnet: build Release first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
mkdir -p "$out"
topo="$out/chain$nodes.dot"
{
    echo "digraph chain$nodes {"
    echo "  dataset = \"$data\"; partition = iid; samples = $samples; k = 1; cov = diag; prep = l2;"
    printf '  '
    for ((i = 0; i < nodes; i++)); do printf 'n%02d' "$i"; [ "$i" -lt $((nodes - 1)) ] && printf ' -> '; done
    echo ";"
    echo "}"
} > "$topo"
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$here/core" -I"$here/wire" -I"$here/node/common" \
    "$here/bench/stats_error.c" "$bin/libpft_common.a" "$bin/../wire/libpft_wire.a" "$bin/../core/libpft_core.a" \
    $(pkg-config --libs lapacke openblas jansson libsodium msgpack libzmq) -lm -o "$out/stats_error"
last=$(printf 'n%02d' $((nodes - 1)))
run() { # NAME ARGS...
    local name="$1"; shift
    "$bin/pftnet" launch "$topo" --out "$out/$name" --force --quiet --seed "$seed" "${floor[@]}" "$@" > "$out/$name.log" 2>&1 ||
        { echo "$name: launch failed (see $out/$name.log)"; return; }
    /usr/bin/python3 - "$out/$name/results.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ns = r["nodes"]; b = r["baselines"]
rss = [n["peak_rss_kb"] / 1024 for n in ns]
print("%-12s wall %6.1f s  RSS/node mean %5.1f max %5.1f MB  last node %.4f  centralized logreg %.4f  "
      "centralized gaussian %s  bytes/hand-off %d  status %s" % (
      sys.argv[2], r["wall_seconds"], sum(rss) / len(rss), max(rss), ns[-1]["accuracy_global"],
      b.get("centralized", float("nan")), "%.4f" % b["centralized_gaussian"] if "centralized_gaussian" in b else "-",
      ns[0]["bytes_sent"], ",".join(sorted(set(n["status"] for n in ns)))))
PY
}
alpha() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][-1]["gaussian_head"]["alpha"])' "$1"; }
for dt in fp32 fp16; do
    run "tied-$dt" --set cov=tied --set stats_dtype=$dt
    OPENBLAS_NUM_THREADS=1 "$out/stats_error" "$out/tied-$dt" "$last" "$nodes" n "$(alpha "$out/tied-$dt/results.json")" |
        sed "s/^/             $dt: /"
done
[ "$sampling" = 1 ] && run sampling
exit 0
