#!/usr/bin/env bash
# The softmax head (pft_head_fit_weighted) against scikit-learn LogisticRegression (lbfgs) on a node's workload:
# the same rows, weights and objective f = Σ w CE / Σ w + (l2/2)‖W‖² (l2 = 1/Σw, sklearn C = 1), in one run.
# Workloads (rows L2-normalised as pftnet's default prep `l2`; see bench/head_bench.c):
#   pacs-plain   all 7993 PACS training rows, unweighted (the one-client case)
#   pacs-node    2000 real PACS rows (weight 1) + 7 × 4000 draws from per-class diagonal Gaussians, weight m_c/B
#   fmnist-node  2000 real Fashion-MNIST rows + 10 × 3000 draws, weight 0.1
#   fmnist-big   4000 real Fashion-MNIST rows + 10 × 3600 draws, weight m_c/B (40000 rows)
# For each: pftnet (default: whitening preconditioner), pftnet with per-feature scaling (the previous default
# preconditioner, for reference), pftnet at tol 1e-7 (f there is the optimum to ~1e-9: the reference for the
# objective column), scikit-learn at the same gradient tolerance and at its default tol. Prints
# time (fastest of --repeat), iterations, evaluations, the objective f recomputed in float64 from each tool's
# weights, test accuracy (test_x/test_y of the same folder) and time / pftnet's. A benchmark, not a test.
#
# usage: bash bench/head_bench.sh [--build DIR] [--out DIR] [--repeat 3] [--threads 1] [--tol 1e-5]
#                                 [--only NAME[,NAME]]
#   --build    a Release build of pftnet (default: build); the driver is compiled against its libraries
#   --threads  OPENBLAS_NUM_THREADS for both tools (pftnet's data pass is single-threaded either way)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build" out=/tmp/pft-head-bench repeat=3 threads=1 tol=1e-5 only=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift ;;
    --out) out="$2"; shift ;;
    --repeat) repeat="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --tol) tol="$2"; shift ;;
    --only) only="$2"; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "head_bench.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
data="$here/../shared/data"
for lib in "$build/core/libpft_core.a" "$build/node/libpft_common.a"; do
    [ -f "$lib" ] || { echo "no $lib: build Release first (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build)" >&2; exit 1; }
done
mkdir -p "$out"
cc -O2 -std=c11 -I"$here/core" -I"$here/node/common" "$here/bench/head_bench.c" "$build/node/libpft_common.a" \
    "$build/core/libpft_core.a" $(pkg-config --libs lapacke openblas) -lm -o "$out/head_bench"
export OPENBLAS_NUM_THREADS="$threads"
py=/usr/bin/python3 # Debian's, with numpy and scikit-learn
jsonl="$out/head_bench_$(date +%Y%m%d-%H%M%S).jsonl"

run() { # NAME DATASET ARGS...
    local name="$1" set="$2"; shift 2
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || return 0
    local common=(--data "$data/$set" --name "$name" --tol "$tol" --repeat "$repeat" "$@")
    local line
    line=$("$out/head_bench" "${common[@]}" --out "$out/$name" --write)
    echo "$line" >> "$jsonl"
    "$out/head_bench" "${common[@]}" --precond 1 --tool "pftnet (scaling)" >> "$jsonl"
    "$out/head_bench" "${common[@]}" --tol 1e-7 --repeat 1 --tool "pftnet (tol 1e-7)" >> "$jsonl"
    "$py" "$here/bench/head_sklearn.py" fit "$out/$name" "$line" --repeat "$repeat" >> "$jsonl"
    echo "$name done" >&2
}
run pacs-plain pacs-mobilenetv2 --real all
run pacs-node pacs-mobilenetv2 --real 2000 --draws 4000 --draw-weight mB
run fmnist-node fashionmnist-mobilenetv2 --real 2000 --draws 3000 --draw-weight 0.1
run fmnist-big fashionmnist-mobilenetv2 --real 4000 --draws 3600 --draw-weight mB
"$py" "$here/bench/head_sklearn.py" table "$jsonl"
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_NUM_THREADS=$threads; raw results: $jsonl"
