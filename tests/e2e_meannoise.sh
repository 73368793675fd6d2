#!/usr/bin/env bash
# e2e_meannoise: the release step mean_noise on real nodes (SECURITY.md §9, "Small classes"). A 3-node chain of
# exact statistics (cov = tied) on the bundled example data (samples = 60: node a holds a class of 7 rows) is
# run with exact class sums (mean_noise = 0) and with the default (mean_noise = 0.05). The attack: the audit's
# bound test on a's bundle (a member lies under its class sum everywhere; zero support is the case sum = 0),
# a's own rows the members, a's test split (33 rows per class) the non-members. Exact sums: the 7-row class's
# mean has exact zeros and the test decides membership (> 0.6). With the step: no exact zero, and the test
# that takes the sums as exact (--mean-noise 0) falls to <= 0.6; the adaptive test (--mean-noise 0.05, which
# allows for the noise at margins 0-4 std and keeps the best, the audit's default) is reported and must stay
# below FAIL (0.9). The same audit of the exact run still decides. The run with
# the step logs it in its release pipeline and its last node still scores.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
for p in pftnet pftnode; do
    [ -x "$PFT_BIN/$p" ] || skip "no $p in $PFT_BIN"
done
command -v python3 >/dev/null || skip "no python3"
W=$(mktemp -d /tmp/pft_meannoise_XXXXXX)
trap 'rm -rf "$W"' EXIT

# launch NAME SETTINGS: a -> b -> c with cov = tied and SETTINGS, into W/NAME
launch() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 60; deadline = 120;\n  cov = tied; %s\n  a -> b -> c;\n}\n' \
        "$1" "$DATA" "$2" >"$W/$1.dot"
    PFT_MEAN_NOISE_SEED=5 PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$1.dot" --out "$W/$1" --no-baselines \
        --quiet >"$W/$1.stdout" 2>"$W/$1.stderr" || fail "launch $1 exited $? ($(cat "$W/$1.stderr"))"
}
launch exact "mean_noise = 0;"
launch noised "" # the default

# audit NAME SIGMA: a's bundle of run NAME, a's test split held out, the attacker assuming mean_noise SIGMA
# (default: the audit's own default, which is the run's)
audit() {
    local d=$W/$1/a noise=()
    [ "$2" = default ] || noise=(--mean-noise "$2")
    "$PFTNET" audit "$d/bundle.pftb" --features "$d/data/train_x.npy" --labels "$d/data/train_y.npy" \
        --holdout-features "$d/data/test_x.npy" --holdout-labels "$d/data/test_y.npy" --lp 20 --json \
        --fail-on never "${noise[@]}" >"$W/$1-$2.json" 2>"$W/$1-$2.err" ||
        fail "audit of $1 (mean_noise $2) exited $? ($(cat "$W/$1-$2.err"))"
}
audit exact 0
audit exact default
audit noised 0
audit noised default

# cls NAME SIGMA: "rows zeros accuracy margin exact_reading" of a's 7-row class (the lowest label among them in the exact
# run) in run NAME's audit at SIGMA
cls() {
    python3 -c "import json, sys
z = json.load(open(sys.argv[1]))['attacks']['zero_support']
pick = [c['label'] for c in json.load(open(sys.argv[2]))['attacks']['zero_support']['classes'] if c['rows'] == 7]
c = [c for c in z['classes'] if pick and c['label'] == min(pick)]
print(*((int(c[0]['rows']), c[0]['zeros'], c[0]['accuracy'], c[0]['margin'], int(c[0].get('exact_reading', 0)))
        if c else (0, 0, 0, 0, 0)))" \
        "$W/$1-$2.json" "$W/exact-0.json" || fail "no zero-support classes in $1-$2"
}
read -r rows zeros acc _ _ <<<"$(cls exact 0)"
echo "exact sums: the $rows-row class has $zeros zeros, bound test accuracy $acc"
[ "$rows" = 7 ] || fail "a has no class of 7 rows (the example data changed?)"
[ "$zeros" -gt 0 ] || fail "exact sums: the 7-row class's mean has no exact zero"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 0.6)" "$acc" ||
    fail "exact sums: the bound test decides only $acc on the 7-row class (> 0.6 expected: the attack works)"

read -r _ _ acc _ _ <<<"$(cls exact default)"
echo "exact sums, the audit assuming the default noise: accuracy $acc"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 0.6)" "$acc" ||
    fail "the audit assuming the default noise lost the exact bound: $acc (> 0.6 expected)"
read -r rows zeros acc _ _ <<<"$(cls noised 0)"
echo "mean_noise 0.05 (default), attacker taking the sums as exact: $rows rows, $zeros zeros, accuracy $acc"
[ "$zeros" = 0 ] || fail "mean_noise: the 7-row class's released mean still has $zeros exact zeros"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) <= 0.6)" "$acc" ||
    fail "mean_noise: the bound test still reaches $acc on the 7-row class (<= 0.6 expected)"

read -r rows zeros acc margin _ <<<"$(cls noised default)"
echo "mean_noise 0.05 (default), adaptive attacker (margins 0-4 std): accuracy $acc at margin $margin"
python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 0.9)" "$acc" ||
    fail "mean_noise: the adaptive bound test reaches $acc on the 7-row class (a FAIL)"

grep -q 'release: floor → mean_noise → rule' "$W/noised/a/node.log" ||
    fail "the noised run's release pipeline does not name mean_noise ($(grep 'release:' "$W/noised/a/node.log"))"
grep -q 'release: floor → rule' "$W/exact/a/node.log" || fail "the exact run's pipeline is not floor → rule"
python3 -c "import json, sys
r = json.load(open(sys.argv[1]))
n = r['nodes'] if isinstance(r['nodes'], list) else list(r['nodes'].values())
c = [x for x in n if x['id'] == 'c'][0]
sys.exit(not c.get('accuracy_global', 0) > 0.5)" "$W/noised/results.json" || fail "mean_noise: node c did not score"

finish
