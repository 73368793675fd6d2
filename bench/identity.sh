#!/usr/bin/env bash
# identity: the same runs with two builds, compared on what a refactoring must not change: every node's exit
# code, accuracies (local, global, per class) and the bytes it sent (results.json).
#   bench/identity.sh run BIN OUT [NAME...]   runs the set (or the named runs) with BIN/pftnet into OUT/<name>
#   bench/identity.sh compare OUT_A OUT_B     compares every run present in both; exit 1 on a difference
# Runs (seed 0): ring5 (examples/ring5.dot), chain5, chain5_tied (configs/chain5.dot, cov = tied) and
# chain5_tied_logreg (the same with head = logreg: rows drawn from exact statistics), chain5_tied_floor
# (min_rows = 15: own classes withheld) and chain5_tied_dp (min_rows = 15, dp_epsilon = 8, seeded), chain5_dp
# (the default sampling method with DP-FedPFT: k = 1, dp_epsilon = 1, seeded), star_sa
# (secure aggregation, a star of five clients and an aggregator, examples data) and star_sa_dp (the same with
# DP ε = 1, δ = 0.001; the noise is seeded by PFT_DP_SEED only in a PFT_TEST_HOOKS build); star20, star50_tied
# (configs/, costly: only when named). KEYS=DIR: the star runs take every node's key from DIR (generated there
# once), so that two builds mask with the same keys and their masked bundles can be compared byte for byte.
# DP_EPS: the star_sa_dp run's dp_epsilon (default 1).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
DATA=$here/examples/data/pacs-small

star_dot() { # star_dot FILE SETTINGS [PFTNET]: with KEYS set, every node's key from that folder
    local keys="" id
    if [ -n "${KEYS:-}" ]; then
        mkdir -p "$KEYS"
        for id in s c1 c2 c3 c4 c5; do
            [ -f "$KEYS/$id.pub" ] || "$3" keygen "$id" --dir "$KEYS" >/dev/null 2>&1
            keys="$keys $id [key = \"$(cd "$KEYS" && pwd)/$id.pub\"];"
        done
    fi
    printf 'digraph star_sa {\n  dataset = "%s"; partition = iid; samples = 100; deadline = 240; prep = l2;\n  %s\n  %s\n}\n' \
        "$DATA" "$2" "s [data = false];$keys c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;" >"$1"
}

run_one() { # run_one BIN OUT NAME
    local bin=$1 out=$2 name=$3 dot set=() env=()
    mkdir -p "$out"
    case $name in
    ring5) dot=$here/examples/ring5.dot ;;
    chain5) dot=$here/configs/chain5.dot ;;
    chain5_tied) dot=$here/configs/chain5.dot set=(--set cov=tied) ;;
    chain5_tied_logreg) dot=$here/configs/chain5.dot set=(--set cov=tied --set head=logreg) ;;
    chain5_tied_floor) dot=$here/configs/chain5.dot set=(--set cov=tied --set min_rows=15) ;;
    chain5_tied_dp) dot=$here/configs/chain5.dot set=(--set cov=tied --set min_rows=15 --set dp_epsilon=8)
        env=(PFT_DP_SEED=7) ;;
    chain5_dp) dot=$here/configs/chain5.dot set=(--set k=1 --set dp_epsilon=1) env=(PFT_DP_SEED=7) ;;
    star20) dot=$here/configs/star20.dot ;;
    star50_tied) dot=$here/configs/star50.dot set=(--set cov=tied) ;;
    star_sa) dot=$out/star_sa.dot && star_dot "$dot" "cov = tied; secure_agg = true;" "$bin/pftnet" ;;
    star_sa_dp)
        dot=$out/star_sa_dp.dot
        star_dot "$dot" "cov = tied; secure_agg = true; dp_epsilon = ${DP_EPS:-1}; dp_delta = 0.001;" "$bin/pftnet"
        env=(PFT_DP_SEED=7)
        ;;
    *) echo "unknown run $name" >&2 && return 2 ;;
    esac
    env "${env[@]}" PFTNODE="$bin/pftnode" "$bin/pftnet" launch "$dot" --out "$out/$name" --seed 0 --force \
        --no-baselines --quiet "${set[@]}" >"$out/$name.stdout" 2>"$out/$name.stderr"
    echo "$name: launch exit $?"
}

compare() { # compare A B
    python3 - "$1" "$2" <<'PY'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
bad = runs = 0
def fields(r):
    f = {k: r.get(k) for k in ("exit_code", "status", "accuracy_local", "accuracy_global",
                               "per_class_accuracy_local", "per_class_accuracy_global", "bytes_sent",
                               "bytes_received", "n_real", "n_synthetic", "sent")}
    f["opened_rows"] = (r.get("secure_agg") or {}).get("opened_rows")
    return f
ids = same_ids = 0
for name in sorted(os.listdir(a)):
    fa, fb = os.path.join(a, name, "results.json"), os.path.join(b, name, "results.json")
    if not (os.path.isfile(fa) and os.path.isfile(fb)):
        continue
    runs += 1
    ra, rb = json.load(open(fa)), json.load(open(fb))
    na = {n["id"]: n for n in ra["nodes"]}
    nb = {n["id"]: n for n in rb["nodes"]}
    if sorted(na) != sorted(nb):
        print(f"{name}: nodes differ"); bad += 1; continue
    diff = 0
    for n in sorted(na):
        fa_, fb_ = fields(na[n]), fields(nb[n])
        for k in fa_:
            va, vb = fa_[k], fb_[k]
            if k == "sent":  # per send: successor, bytes and state
                va = [(s.get("to"), s.get("bytes"), s.get("state")) for s in va or []]
                vb = [(s.get("to"), s.get("bytes"), s.get("state")) for s in vb or []]
            if k == "sent":
                ia = [s.get("bundle_id") for s in fa_[k] or []]
                ib = [s.get("bundle_id") for s in fb_[k] or []]
                ids += len(ia)
                same_ids += sum(x == y for x, y in zip(ia, ib))
            if va != vb:
                print(f"{name}/{n}: {k}: {va} != {vb}"); diff += 1
    accs = " ".join(f"{n}={na[n].get('accuracy_global')}" for n in sorted(na))
    print(f"{name}: {'SAME' if not diff else 'DIFFERENT'} ({len(na)} nodes; accuracy_global {accs})")
    bad += diff > 0
print(f"{runs} run(s) compared, {bad} different; bundle ids equal (bit-identical bundles) {same_ids} of {ids} "
      "(masked bundles and DP draws differ by their keys and noise unless seeded)")
sys.exit(1 if bad or not runs else 0)
PY
}

case ${1:-} in
run)
    bin=$(cd "$2" && pwd) out=$3
    shift 3
    names=("$@")
    [ ${#names[@]} -gt 0 ] || names=(ring5 chain5 chain5_tied chain5_tied_logreg chain5_tied_floor chain5_tied_dp chain5_dp star_sa star_sa_dp)
    for n in "${names[@]}"; do run_one "$bin" "$out" "$n"; done
    ;;
compare) compare "$2" "$3" ;;
*) sed -n '2,14p' "$0" && exit 2 ;;
esac
