#!/usr/bin/env bash
# GMM benchmark: pftnet gmm vs scikit-learn GaussianMixture vs VLFeat vl_gmm on the same features, K, iterations.
#
# usage: bench/gmm_bench.sh [--data pacs|fmnist|DIR] [--k 10] [--cov diag|full|spher] [--iters 100] [--seed 0]
#                           [--prep l2|none] [--repeat 1] [--threads natural|1|both] [--pftnet PATH]
#                           [--extra-iters N] [--full-iters N] [--sk-kmeans] [--no-extra] [--wait-idle SECONDS]
#                           [--idle-pct P] [--out FILE]
#
#   --data      pacs (default) = ../shared/data/pacs-mobilenetv2 (beside the repository), fmnist = the same
#               folder's fashionmnist-mobilenetv2,
#               or any directory holding train_x.npy (float32 n×d) and train_y.npy (int labels)
#   --k --cov --iters --seed   the main comparison (default diag K=10, 100 iterations, tol 0, seed 0);
#               VLFeat only runs when cov is diag (it has no other family)
#   --prep      feature preprocessing applied identically for every tool (default l2: L2 row normalisation).
#               sklearn and VLFeat read a preprocessed copy written once; pftnet gets the raw file + --prep.
#   --repeat    run every tool R times and keep the fastest (machine is shared: timings are noisy)
#   --threads   natural: each tool's own default threading; 1: OMP/OPENBLAS/MKL_NUM_THREADS=1; both
#   --extra-iters  iterations for the extra spher comparison (default: --iters)
#   --full-iters   iterations for the extra full K=1 comparison (default 1: with K=1 one EM iteration already
#               gives the exact maximum-likelihood model, and pftnet stops there whatever --max-iter says)
#   --wait-idle before every tool run wait (at most SECONDS, default 300; 0: never) until the machine's CPUs are
#               >= --idle-pct (default 85) % idle over 2 s, so other jobs on a shared machine disturb timings less
#   --sk-kmeans also run sklearn with init_params='kmeans' (full k-means init; default row uses 'k-means++')
#   --no-extra  skip the extra comparisons vs sklearn: cov full K=1 and cov spher K=k (VLFeat has neither)
#   --out       JSON-lines results file (default build-bench/gmm_bench_<data>_<date>.jsonl)
#
# Build products go to build-bench/ in the repository (the VLFeat program, preprocessed features, results).
# pftnet is expected at build/node/pftnet (Release build); its rows are skipped with a notice if it is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
bdir="$root/build-bench"
py=/usr/bin/python3

data=pacs k=10 cov=diag iters=100 seed=0 prep=l2 repeat=1 threads=natural sk_kmeans=0 extra=1 out=""
extra_iters="" full_iters=1 wait_idle=300 idle_pct=85
pftnet="$root/build/node/pftnet"
while [ $# -gt 0 ]; do
    case "$1" in
    --data) data="$2"; shift 2 ;;
    --k) k="$2"; shift 2 ;;
    --cov) cov="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --prep) prep="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --pftnet) pftnet="$2"; shift 2 ;;
    --extra-iters) extra_iters="$2"; shift 2 ;;
    --full-iters) full_iters="$2"; shift 2 ;;
    --wait-idle) wait_idle="$2"; shift 2 ;;
    --idle-pct) idle_pct="$2"; shift 2 ;;
    --sk-kmeans) sk_kmeans=1; shift ;;
    --no-extra) extra=0; shift ;;
    --out) out="$2"; shift 2 ;;
    -h | --help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gmm_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

case "$data" in
pacs) ddir="$root/../shared/data/pacs-mobilenetv2" ;;
fmnist | fashionmnist) ddir="$root/../shared/data/fashionmnist-mobilenetv2" ;;
*) ddir="$data" ;;
esac
X="$ddir/train_x.npy" Y="$ddir/train_y.npy"
if [ ! -f "$X" ] || [ ! -f "$Y" ]; then
    echo "gmm_bench: $ddir has no train_x.npy/train_y.npy" >&2
    exit 1
fi
case "$cov" in full | diag | spher) ;; *) echo "gmm_bench: --cov must be full, diag or spher" >&2; exit 2 ;; esac
case "$prep" in l2 | none) ;; *) echo "gmm_bench: --prep must be l2 or none" >&2; exit 2 ;; esac
case "$threads" in natural) tmodes="natural" ;; 1) tmodes="1" ;; both) tmodes="natural 1" ;;
*) echo "gmm_bench: --threads must be natural, 1 or both" >&2; exit 2 ;; esac
[ -n "$extra_iters" ] || extra_iters="$iters"
[ -x "$py" ] || { echo "gmm_bench: $py (Debian python3 with numpy/sklearn) not found" >&2; exit 1; }

mkdir -p "$bdir/prep"
dname="$(basename "$ddir")"
[ -n "$out" ] || out="$bdir/gmm_bench_${dname}_$(date +%Y%m%d-%H%M%S).jsonl"
: >"$out"

# 1. the VLFeat program (rebuilt when its source changes)
vlbin="$bdir/gmm_vlfeat"
if [ ! -x "$vlbin" ] || [ "$here/gmm_vlfeat.c" -nt "$vlbin" ]; then
    cc -O2 -std=c11 -Wall -Wextra -o "$vlbin" "$here/gmm_vlfeat.c" -lvl -lm
fi

# 2. the preprocessed copy for sklearn and VLFeat (written once per data set and prep)
PX="$bdir/prep/${dname}_${prep}_train_x.npy"
if [ ! -f "$PX" ] || [ "$X" -nt "$PX" ]; then
    "$py" "$here/gmm_sklearn.py" --features "$X" --prep "$prep" --write-prep "$PX"
fi

have_pftnet=1 pftnet_date=""
if [ ! -x "$pftnet" ]; then
    have_pftnet=0
    echo "gmm_bench: NOTE: $pftnet not found; pftnet rows skipped (build it: cmake -S $root -B $root/build" \
        "-DCMAKE_BUILD_TYPE=Release && cmake --build $root/build --target pftnet)" >&2
else
    # run a snapshot, so that a rebuild during the benchmark cannot mix two versions
    pftnet_src="$pftnet"
    pftnet_date="$(date -r "$pftnet" -Iseconds)"
    cp "$pftnet" "$bdir/pftnet.snapshot.$$"
    pftnet="$bdir/pftnet.snapshot.$$"
    trap 'rm -f "$bdir/pftnet.snapshot.$$" "$bdir/.pftnet_time.$$"' EXIT
fi

# cpu_idle: percentage of idle CPU time over the next 2 seconds (all cores, from /proc/stat)
cpu_idle() {
    local a b
    read -r -a a </proc/stat; sleep 2; read -r -a b </proc/stat
    local tot=0 i
    for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
    echo $(((100 * (b[4] - a[4] + b[5] - a[5])) / (tot > 0 ? tot : 1)))
}

# wait_idle: wait (at most $wait_idle s) until the machine is >= $idle_pct % idle; sets $idle to the last reading
wait_idle() {
    local waited=0
    idle=-1
    [ "$wait_idle" -gt 0 ] || return 0
    while :; do
        idle="$(cpu_idle)"
        [ "$idle" -ge "$idle_pct" ] && return 0
        waited=$((waited + 2))
        if [ "$waited" -ge "$wait_idle" ]; then
            echo "gmm_bench: machine still busy (${idle}% idle) after ${wait_idle}s; running anyway" >&2
            return 0
        fi
    done
}

# record <config> <threads> <row> <rep> <json>: one line of the results file
record() {
    local json="$5"
    if [ -z "$json" ] || [ "${json:0:1}" != "{" ]; then
        echo "gmm_bench: $3 produced no JSON result" >&2
        return 1
    fi
    printf '{"config":"%s","threads":"%s","row":"%s","rep":%s,"idle_before":%s,"pftnet_built":"%s","result":%s}\n' \
        "$1" "$2" "$3" "$4" "$idle" "$pftnet_date" "$json" >>"$out"
}

# run_config <cov> <k> <iters> <with_vlfeat> for every threading mode and repetition
run_config() {
    local c="$1" kk="$2" it="$3" with_vl="$4" tm rep j cfg tf
    cfg="$dname prep=$prep cov=$c K=$kk iters=$it tol=0 seed=$seed"
    tf="$bdir/.pftnet_time.$$"
    for tm in $tmodes; do
        local envs=()
        [ "$tm" = 1 ] && envs=(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1)
        for rep in $(seq 1 "$repeat"); do
            echo "gmm_bench: [$cfg, threads $tm, run $rep/$repeat] load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
            if [ "$have_pftnet" = 1 ]; then
                wait_idle
                # pftnet reports no CPU time; /usr/bin/time measures the whole process (load + prep + fit)
                j="$(env "${envs[@]}" /usr/bin/time -f '%U %S' -o "$tf" "$pftnet" gmm --features "$X" \
                    --labels "$Y" --k "$kk" --cov "$c" --max-iter "$it" --tol 0 --seed "$seed" --prep "$prep" \
                    --json --quiet)"
                j="${j%\}},\"process_cpu_seconds\":$(awk '{print $1 + $2}' "$tf")}"
                record "$cfg" "$tm" "pftnet" "$rep" "$j"
            fi
            wait_idle
            j="$(env "${envs[@]}" "$py" "$here/gmm_sklearn.py" --features "$PX" --labels "$Y" --k "$kk" \
                --cov "$c" --max-iter "$it" --tol 0 --seed "$seed" --prep none --init k-means++ --json)"
            record "$cfg" "$tm" "sklearn (init k-means++)" "$rep" "$j"
            if [ "$sk_kmeans" = 1 ]; then
                wait_idle
                j="$(env "${envs[@]}" "$py" "$here/gmm_sklearn.py" --features "$PX" --labels "$Y" --k "$kk" \
                    --cov "$c" --max-iter "$it" --tol 0 --seed "$seed" --prep none --init kmeans --json)"
                record "$cfg" "$tm" "sklearn (init kmeans)" "$rep" "$j"
            fi
            if [ "$with_vl" = 1 ]; then
                wait_idle
                j="$(env "${envs[@]}" "$vlbin" --features "$PX" --labels "$Y" --k "$kk" --max-iter "$it" \
                    --seed "$seed" --lower-bound 1e-6 --force-iters --json)"
                record "$cfg" "$tm" "vlfeat (forced N)" "$rep" "$j"
                wait_idle
                j="$(env "${envs[@]}" "$vlbin" --features "$PX" --labels "$Y" --k "$kk" --max-iter "$it" \
                    --seed "$seed" --lower-bound 1e-6 --json)"
                record "$cfg" "$tm" "vlfeat (own 1e-5 stop)" "$rep" "$j"
            fi
        done
    done
}

echo "gmm_bench: $(date -Iseconds) $(nproc) cores; results -> $out" >&2
vl=0
[ "$cov" = diag ] && vl=1
run_config "$cov" "$k" "$iters" "$vl"
if [ "$extra" = 1 ]; then
    if [ "$cov" != full ] || [ "$k" != 1 ]; then run_config full 1 "$full_iters" 0; fi
    [ "$cov" = spher ] || run_config spher "$k" "$extra_iters" 0
fi

echo "# GMM benchmark $(date -Iseconds), $(nproc) cores, load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: $0 --data $data --k $k --cov $cov --iters $iters --seed $seed --prep $prep --repeat $repeat" \
    "--threads $threads --extra-iters $extra_iters --full-iters $full_iters --wait-idle $wait_idle --idle-pct $idle_pct$([ "$sk_kmeans" = 1 ] && echo ' --sk-kmeans')$([ "$extra" = 0 ] && echo ' --no-extra')"
echo "# seconds: fit time (wall clock) summed over classes; vlfeat (forced N) shows seconds minus the estimated"
echo "# cost of the E-steps repeated by resuming vl_gmm_em (see notes); t/pftnet > 1 means pftnet is faster;"
echo "# Δll-pftnet < 0 means pftnet's avg log-likelihood is higher. cpu_s: process CPU time of the fit (all threads;"
echo "# pftnet*: whole process incl. loading and preprocessing, measured with /usr/bin/time)."
if [ "$have_pftnet" = 1 ]; then
    echo "# pftnet binary: $pftnet_src (built $pftnet_date)"
fi
"$py" "$here/gmm_table.py" "$out"
