#!/usr/bin/env bash
# Runs the paper's experiments on the shared real features and regenerates docs/RESULTS.md:
#   chain      linear chain of 5, 100 iid rows each (paper §5.4)          configs/chain5.dot
#   labelshift two clients, classes 0-3 -> 4-6 (paper §5.3, Table 2)      configs/pacs_labelshift.dot
#   covshift   two clients, photo -> sketch (paper §5.3, Table 2)         configs/pacs_covshift.dot
#   star       20 Dirichlet(0.1) clients -> data-less aggregator (§5.2)   configs/star20.dot
#   star50     50 Dirichlet(0.1) clients -> data-less aggregator (Table 5) configs/star50.dot
#   gmm-family accuracy vs bytes, cov x K, one client (§6.1, Fig. 7 left)  pftnet synth
#   ring8      ring of 8                                                  configs/ring8.dot
#   graph10    random strongly connected graph of 10                      configs/graph10.dot
# Beside FedPFT, every experiment runs the exact-statistics family (docs/DESIGN.md §8: cov = tied, LDA statistics
# merged exactly, Gaussian head), and the synth grid adds Gaussian-head rows (tied, diag K=10, full K=1).
# Every run is kept under OUT (one folder per experiment/variant/seed, with its logs); a run whose results
# exist is not repeated, so an interrupted invocation resumes. --smoke is CI's reduced version: one seed, the
# bundled example data, one EM/head draw, small families; it writes OUT/RESULTS.md instead of docs/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
    cat <<EOF
usage: bash bench/results.sh [options]

Runs the experiments of docs/RESULTS.md (3 seeds; about 35 minutes on 2 cores) and regenerates it.

options:
  --smoke            reduced version for CI: seed 0, examples/data/pacs-small, 60 rows per node, K=2,
                     one EM/head draw, families spher/diag K<=2, exact statistics (tied) only in the two-client
                     experiments and the synth grid (checks the pipeline, not the accuracies)
  --only LIST        comma-separated experiments: chain,labelshift,covshift,star,star50,gmm-family,ring8,
                     graph10
  --seeds "S ..."    seeds (default "0 1 2"; --smoke: "0")
  --full-k "K ..."   K values for the full-covariance family (default "1 5 10"; at d=1280 a full K=20 bundle
                     needs more than the decoder's 4 GiB bound in memory)
  --out DIR          where runs go (default runs/results; --smoke: runs/results-smoke)
  --doc FILE         the Markdown written (default docs/RESULTS.md; --smoke: OUT/RESULTS.md)
  --bin DIR          folder with pftnet and pftnode (default build/node, built in Release if missing)
  --rerun            run again even where results exist
  --no-report        only run the experiments
  -h, --help         this help
EOF
}

smoke=0 only="" seeds="" full_k="1 5 10" out="" doc="" bin="" rerun=0 report=1
while [ $# -gt 0 ]; do
    case "$1" in
    --smoke) smoke=1 ;;
    --only) only="$2"; shift ;;
    --seeds) seeds="$2"; shift ;;
    --full-k) full_k="$2"; shift ;;
    --out) out="$2"; shift ;;
    --doc) doc="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --rerun) rerun=1 ;;
    --no-report) report=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench/results.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if [ "$smoke" = 1 ]; then
    seeds="${seeds:-0}"
    out="${out:-$here/runs/results-smoke}"
    doc="${doc:-$out/RESULTS.md}"
else
    seeds="${seeds:-0 1 2}"
    out="${out:-$here/runs/results}"
    doc="${doc:-$here/docs/RESULTS.md}"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ -z "$bin" ]; then
    bin="$here/build/node"
    if [ ! -x "$bin/pftnet" ] || [ ! -x "$bin/pftnode" ]; then
        echo "building pftnet (Release) in build/ ..."
        cmake -S "$here" -B "$here/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$here/build" -j2 >/dev/null
    fi
fi
bin="$(cd "$bin" && pwd)"
pftnet="$bin/pftnet"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" # nodes run side by side: one BLAS thread each

data="$here/../shared/data/pacs-mobilenetv2"
common=()
if [ "$smoke" = 1 ]; then
    data="$here/examples/data/pacs-small"
    # port_base=0: the launcher gives each node a free port (below the ephemeral range), away from the configs'
    # own block (a full run may be going on beside CI's). A failed launch stops at once; --timeout bounds a hung one.
    common=(--set "dataset=$data" --set em_draws=1 --set head_draws=1 --set samples=60 --set max_iter=20
        --set port_base=0 --timeout 240)
fi
[ -f "$data/train_x.npy" ] || { echo "bench/results.sh: no dataset at $data" >&2; exit 1; }

want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
t_start=$(date +%s)
runs=0 skipped=0

# launch EXP VARIANT_DIR CONFIG SEED ARGS... : one pftnet launch into OUT/EXP/VARIANT_DIR/sSEED
launch() {
    local exp="$1" vdir="$2" cfg="$3" seed="$4"
    shift 4
    local dir="$out/$exp/$vdir/s$seed"
    if [ "$rerun" = 0 ] && [ -f "$dir/results.json" ]; then
        skipped=$((skipped + 1))
        return 0
    fi
    mkdir -p "$(dirname "$dir")"
    local t0=$(date +%s)
    printf '%-11s %-18s seed %s ... ' "$exp" "$vdir" "$seed"
    if (cd "$here" && "$pftnet" launch "configs/$cfg" --out "$dir" --force --quiet --seed "$seed" --tag "$exp" \
        "${common[@]}" "$@" >"$dir.log" 2>&1); then
        runs=$((runs + 1))
        printf 'done in %ds\n' $(($(date +%s) - t0))
    else
        printf 'FAILED (log: %s)\n' "$dir.log"
        tail -20 "$dir.log" >&2
        grep -h " ERROR " "$dir"/*/node.log 2>/dev/null | head -20 >&2 || true
        return 1
    fi
}

# dp_exact_ok CFG: 0 if the launcher accepts DP on exact statistics for configs/CFG (probed once per config with
# --prepare-only: DP for exact statistics may not be built yet, and the launcher then refuses it at load).
declare -A dp_exact=()
dp_exact_ok() {
    local cfg="$1" tmp msg
    if [ -z "${dp_exact[$cfg]:-}" ]; then
        tmp="$(mktemp -d)"
        if msg=$(cd "$here" && "$pftnet" launch "configs/$cfg" --out "$tmp/probe" --prepare-only "${common[@]}" \
            --set cov=tied --set dp_epsilon=1 2>&1 >/dev/null); then
            dp_exact[$cfg]=yes
        else
            dp_exact[$cfg]=no
            echo "notice: skipping the variant 'DP exact LDA, eps=1, delta=1e-5' on $cfg: the launcher refuses it:" >&2
            echo "  ${msg##*: }" >&2
        fi
        rm -rf "$tmp"
    fi
    [ "${dp_exact[$cfg]}" = yes ]
}

# the exact-statistics family beside FedPFT (dirs named so that they sort after FedPFT's: the report lists
# variants in the order it finds them)
exact=(--set cov=tied --variant "Exact LDA (tied, gaussian head)" --no-baselines)
# the research setting beside it: the exact dense scatter (stats_release = full_scatter; rows can be rebuilt
# from it, docs/SECURITY.md §9), to show what the default low-rank release costs
full=(--set cov=tied --set stats_release=full_scatter --variant "Exact LDA, full scatter (research)" --no-baselines)

for s in $seeds; do
    if want chain; then
        launch chain fedpft chain5.dot "$s"
        [ "$smoke" = 1 ] || launch chain tied-exact chain5.dot "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch chain tied-full chain5.dot "$s" "${full[@]}"
    fi
    for exp in labelshift covshift; do
        want $exp || continue
        cfg=pacs_labelshift.dot
        [ $exp = covshift ] && cfg=pacs_covshift.dot
        # the baselines (Centralized, Ensemble, Average, KD) depend on the seed only: computed with the first
        k=10
        [ "$smoke" = 1 ] && k=2
        launch $exp diag-k$k $cfg "$s" --set cov=diag --set k=$k --variant "FedPFT diag K=$k"
        if [ "$smoke" = 1 ]; then
            launch $exp spher-k1 $cfg "$s" --set cov=spher --set k=1 --variant "FedPFT spher K=1" --no-baselines
        else
            launch $exp diag-k20 $cfg "$s" --set cov=diag --set k=20 --variant "FedPFT diag K=20" --no-baselines
            launch $exp spher-k1 $cfg "$s" --set cov=spher --set k=1 --variant "FedPFT spher K=1" --no-baselines
            launch $exp dp-diag-k1 $cfg "$s" --set cov=diag --set k=1 --set dp_epsilon=1 \
                --variant "DP-FedPFT diag K=1, eps=1, delta=1e-5" --no-baselines
        fi
        launch $exp tied-exact $cfg "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch $exp tied-full $cfg "$s" "${full[@]}"
        if [ "$rerun" = 1 ] || [ ! -f "$out/$exp/tied-exact-dp/s$s/results.json" ]; then
            dp_exact_ok $cfg || continue
        fi
        launch $exp tied-exact-dp $cfg "$s" --set cov=tied --set dp_epsilon=1 --variant "DP exact LDA, eps=1, delta=1e-5" \
            --no-baselines
    done
    if want star; then
        if [ "$smoke" = 1 ]; then # 2100 rows: Dirichlet(0.1) over 20 clients leaves some with almost nothing
            launch star fedpft star20.dot "$s" --set "partition=dirichlet:0.5"
        else
            launch star fedpft star20.dot "$s"
            launch star tied-exact star20.dot "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch star tied-full star20.dot "$s" "${full[@]}"
        fi
    fi
    if want star50 && [ "$smoke" = 0 ]; then
        launch star50 fedpft star50.dot "$s"
        launch star50 tied-exact star50.dot "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch star50 tied-full star50.dot "$s" "${full[@]}"
    fi
    if want ring8; then
        launch ring8 fedpft ring8.dot "$s"
        [ "$smoke" = 1 ] || launch ring8 tied-exact ring8.dot "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch ring8 tied-full ring8.dot "$s" "${full[@]}"
    fi
    if want graph10; then
        launch graph10 fedpft graph10.dot "$s"
        [ "$smoke" = 1 ] || launch graph10 tied-exact graph10.dot "$s" "${exact[@]}"
        [ "$smoke" = 1 ] || launch graph10 tied-full graph10.dot "$s" "${full[@]}"
    fi
    if want gmm-family; then
        # cov:K,K[:head]; head logreg (FedPFT: a softmax head on samples) unless named. full K=1 is asked for
        # logreg explicitly: synth's default head for it is the exact (QDA) one.
        families="spher:1,5,10,20,50 diag:1,5,10,20,50 full:${full_k// /,} tied:1:gaussian diag:10:gaussian"
        families="$families full:1:gaussian"
        [ "$smoke" = 1 ] && families="spher:1,2 diag:1,2 tied:1:gaussian"
        mkdir -p "$out/gmm-family"
        for fam in $families; do
            cov="${fam%%:*}"
            ks="${fam#*:}"
            head=logreg
            [[ "$ks" == *:* ]] && head="${ks#*:}" ks="${ks%%:*}"
            suffix=""
            [ "$head" = logreg ] || suffix="-$head"
            for k in ${ks//,/ }; do
                f="$out/gmm-family/$cov-k$k$suffix-s$s.jsonl"
                if [ "$rerun" = 0 ] && [ -s "$f" ]; then
                    skipped=$((skipped + 1))
                    continue
                fi
                t0=$(date +%s)
                printf '%-11s %-18s seed %s ... ' gmm-family "$cov K=$k${suffix:+ $head}" "$s"
                if "$pftnet" synth --train-features "$data/train_x.npy" --train-labels "$data/train_y.npy" \
                    --test-features "$data/test_x.npy" --test-labels "$data/test_y.npy" --cov "$cov" --k "$k" \
                    --head "$head" --seed "$s" --json >"$f.tmp" 2>"$f.log"; then
                    mv "$f.tmp" "$f"
                    runs=$((runs + 1))
                    printf 'done in %ds\n' $(($(date +%s) - t0))
                else
                    rm -f "$f.tmp"
                    printf 'FAILED (log: %s)\n' "$f.log"
                    exit 1
                fi
            done
        done
    fi
done
echo "experiments: $runs run, $skipped already done, $(($(date +%s) - t_start))s"

[ "$report" = 1 ] || exit 0
paths=()
for exp in chain labelshift covshift star star50 gmm-family ring8 graph10; do
    want $exp && [ -d "$out/$exp" ] && paths+=("$out/$exp")
done
mkdir -p "$(dirname "$doc")"
docdir="$(cd "$(dirname "$doc")" && pwd)"
plots="$docdir/results"
[ "$smoke" = 1 ] && plots="$docdir/plots"
cd "$here" # topology paths in the report relative to the repository
"$pftnet" report "${paths[@]}" --notes "$here/docs/results-notes" --plots "$plots" --format svg \
    --title "pftnet: measured results" --out "$doc"
echo "report: $doc (plots in $plots)"
