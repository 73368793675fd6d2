#!/usr/bin/env bash
# e2e_audit: `pftnet audit` on bundles real nodes wrote. A GMM chain a -> b on the bundled example data
# (samples = 60, about 9 rows per class; cov = diag, K = 10) at min_rows = 1 and 5, and an exact-statistics
# pair (cov = tied). Checks: at min_rows = 1 a's bundle has components standing for one row whose means lie
# on an own row (ratio ~ 0) and the text names them; at min_rows = 5 none stands for fewer than 5 rows; the
# membership signal (own vs held-out log-likelihood) is reported with its difference; a statistics bundle is
# audited per part (kind "stats", one component per class standing for its count); exit codes: 1 for an
# unreadable bundle or features that are not a matrix, 2 for bad usage, 0 for --help.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
for p in pftnet pftnode; do
    if [ ! -x "$PFT_BIN/$p" ]; then
        echo "skipped: no $p in $PFT_BIN"
        exit 77
    fi
done
if ! command -v python3 >/dev/null; then
    echo "skipped: no python3"
    exit 77
fi
W=$(mktemp -d /tmp/pft_audit_XXXXXX)
trap 'rm -rf "$W"' EXIT

# launch NAME SETTINGS EDGES: writes W/NAME.dot and runs it into W/NAME
launch() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 60; deadline = 120;\n  %s\n  %s\n}\n' \
        "$1" "$DATA" "$2" "$3" >"$W/$1.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$1.dot" --out "$W/$1" --no-baselines --quiet \
        >"$W/$1.stdout" 2>"$W/$1.stderr" || fail "launch $1 exited $? ($(cat "$W/$1.stderr"))"
}
GMM="cov = diag; k = 10; max_iter = 20; em_draws = 2; head_draws = 1;"
launch m1 "$GMM min_rows = 1;" "a -> b;"
launch m5 "$GMM min_rows = 5;" "a -> b;"
launch tied "cov = tied; min_rows = 1;" "a -> b;"

# run NAME EXPECTED_CODE ARGS...: runs pftnet audit ARGS into W/NAME.out and W/NAME.err
run() {
    local name=$1 want=$2
    shift 2
    "$PFTNET" audit "$@" >"$W/$name.out" 2>"$W/$name.err"
    local code=$?
    [ "$code" = "$want" ] || fail "$name: 'pftnet audit $*' exited $code, expected $want ($(cat "$W/$name.err"))"
}
has() {
    grep -Eq -- "$2" "$W/$1.out" || fail "$1: no line matching '$2' in:$(printf '\n')$(cat "$W/$1.out")"
}
py() {
    python3 -c "import json, sys
o = json.load(open(sys.argv[1]))
s = o['summary']
$2" "$W/$1.out" || fail "$1: JSON check failed: $2"
}
own() { echo --features "$W/$1/a/data/train_x.npy" --labels "$W/$1/a/data/train_y.npy"; }
held() { echo --holdout-features "$W/$1/a/data/test_x.npy" --holdout-labels "$W/$1/a/data/test_y.npy"; }

# shellcheck disable=SC2046
{
    run m1_text 0 "$W/m1/a/bundle.pftb" $(own m1) $(held m1)
    run m1_json 0 "$W/m1/a/bundle.pftb" $(own m1) $(held m1) --json
    run m5_json 0 "$W/m5/a/bundle.pftb" $(own m5) $(held m5) --json
    run tied_json 0 "$W/tied/a/bundle.pftb" $(own tied) --json
    run tied_text 0 "$W/tied/a/bundle.pftb" $(own tied)
}
has m1_text '^bundle .*producer a, GMMs, d 1280'
has m1_text '^components [0-9]+: [1-9][0-9]* stand for fewer than 1.5 rows'
has m1_text '^membership: mean log-likelihood of own rows .*, held-out rows .*, difference'
py m1_json "assert o['kind'] == 'gmm' and o['prep'] == 'l2' and s['one_row'] > 0, s
assert s['near_row'] >= 1, s  # a one-row component's mean is that row (to fp16)
r = [x['ratio'] for c in o['classes'] for x in c['components'] if x['rows'] < 1.5]
assert r and max(r) < 0.1, r
assert s['ll_diff'] is not None and s['ll_diff'] > 0, s
assert s['own_rows'] > 0 and s['holdout_rows'] > 0, s"
py m5_json "assert s['one_row'] == 0 and s['min_rows'] >= 5 * (1 - 2 ** -10), s
assert all(x['rows'] >= 5 * (1 - 2 ** -10) for c in o['classes'] for x in c['components'])
assert s['near_row'] == 0, s"
py tied_json "assert o['kind'] == 'stats' and s['holdout_rows'] == 0 and s['ll_diff'] is None, s
c = o['classes'][0]
assert c['part'] == 0 and c['k'] == 1 and c['components'][0]['rows'] == c['n'] and c['own_rows'] == c['n'], c"
has tied_text 'exact statistics'

# exit codes
run missing 1 "$W/none.pftb" $(own m1)
run notmatrix 1 "$W/m1/a/bundle.pftb" --features "$W/m1/a/data/train_y.npy" --labels "$W/m1/a/data/train_y.npy"
run nolabels 2 "$W/m1/a/bundle.pftb" --features "$W/m1/a/data/train_x.npy"
run halfheld 2 "$W/m1/a/bundle.pftb" $(own m1) --holdout-features "$W/m1/a/data/test_x.npy"
run badprep 2 "$W/m1/a/bundle.pftb" $(own m1) --prep cube
run help 0 --help
has help 'usage: pftnet audit BUNDLE'
[ $FAILED = 0 ] && echo "e2e_audit: all checks passed"
exit $FAILED
