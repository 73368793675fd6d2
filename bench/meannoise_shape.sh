#!/usr/bin/env bash
# Does shaping mean_noise buy accuracy back? (issue 33, item 4; bench/README "Shaped mean noise")
#
# Builds pftnode with bench/meannoise_shape.patch (an experiment, not a product option: two environment
# variables change the noise core/pft_meannoise.c adds to each own class sum) in a scratch worktree, then
# launches a topology over seeds for each configuration and prints the sink's accuracy_global:
#   flat   e ~ N(0, S² I)                                   (pftnode's mean_noise = S as shipped)
#   diag   e_j ~ N(0, S² (λ v_j / v̄ + 1 − λ))               v the part's pooled within-class variance per
#                                                           coordinate (PFT_MN_SHAPE = λ)
#   cov    e ~ N(0, S² (λ d W / tr W + (1 − λ) I))          W the part's within-class scatter (PFT_MN_COV = λ)
# The scratch worktree stays in OUT/src for the next run (remove it with `git worktree remove OUT/src`).
# Each has E‖e‖² = S² d: the same noise energy, placed differently. The privacy side is emulated by
# bench/release_zero.py (rules noise:M:R:S and shape:M:R:S).
#
# usage: bash bench/meannoise_shape.sh [--topo chain5.dot] [--sink e] [--seeds "0 1 2 3 4"]
#            [--configs "base:0:-:flat flat:0.2:-:flat diag:0.2:1:diag cov:0.2:1:cov"] [--out DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
topo=chain5.dot sink=e seeds="0 1 2 3 4" out=/tmp/pft-meannoise-shape
configs="base:0:-:flat flat:0.1:-:flat flat:0.2:-:flat diag:0.2:1:diag diag:0.2:0.5:diag cov:0.2:1:cov cov:0.2:0.9:cov"
while [ $# -gt 0 ]; do
    case "$1" in
    --topo) topo="$2"; shift ;;
    --sink) sink="$2"; shift ;;
    --seeds) seeds="$2"; shift ;;
    --configs) configs="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "meannoise_shape.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
[ -d "$here/../shared/data/pacs-mobilenetv2" ] || { echo "meannoise_shape.sh: needs ../shared/data (PACS)" >&2; exit 1; }
mkdir -p "$out"
src="$out/src" build="$out/build"
if [ ! -d "$src" ]; then
    git -C "$here" worktree add --detach "$src" HEAD > /dev/null
    git -C "$src" apply "$here/bench/meannoise_shape.patch"
    ln -sfn "$(cd "$here/../shared" && pwd)" "$out/shared"
fi
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j2 --target pftnet pftnode > /dev/null
for cfg in $configs; do
    IFS=: read -r name S lam mode <<< "$cfg"
    accs=""
    for s in $seeds; do
        run="$out/runs/${topo%.dot}_${name}_${S}_${lam}_s$s"
        mkdir -p "$out/runs"
        env -u PFT_MN_SHAPE -u PFT_MN_COV \
            $([ "$mode" = diag ] && echo PFT_MN_SHAPE="$lam") $([ "$mode" = cov ] && echo PFT_MN_COV="$lam") \
            "$build/node/pftnet" launch "$src/configs/$topo" --out "$run" --seed "$s" --set cov=tied \
            --set mean_noise="$S" --no-baselines --quiet --force > "$run.log" 2>&1 ||
            { echo "launch failed: $run.log" >&2; exit 1; }
        accs="$accs $(awk -v n="$sink" '$1 == n { print $4 }' "$run.log")"
    done
    echo "$topo $mode S=$S lambda=$lam:$accs  mean $(echo $accs | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s / NF }')"
done
