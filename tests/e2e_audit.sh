#!/usr/bin/env bash
# e2e_audit: `pftnet audit` on bundles real nodes wrote, on the bundled example data (samples = 60, about 9
# rows per class). GMM chain a -> b (cov = diag, K = 10) at min_rows = 1 and 5: at min_rows = 1 a's bundle
# has components standing for one row whose means lie on an own row (ratio ~ 0): the nearest-row attack
# FAILs and the default --fail-on exits 3; at min_rows = 5 none stands for fewer than 5 rows and the
# nearest-row attack passes; the likelihood AUC is reported. Exact statistics, a 3-node chain a -> b -> c
# with cov = tied, stats_release = full_scatter (the dense shared scatter, research) and exact class sums
# (mean_noise = 0; the default's noise on the sums takes the rows out of the span): a's bundle FAILs
# loudly (subspace accuracy 1 against c's rows, every own row in the span, rows recovered by the vertex
# attack, "*** FAIL" in the text, exact_leak in the JSON). With the default release (60 rows: rank 4 +
# diagonal, class sums with the default mean_noise) the spectrum shows no subspace, the attack on span(released
# factor, class means) stays below FAIL, no row is recovered, no released mean has an exact zero, the adaptive
# bound test stays below FAIL and --fail-on exact exits 0; a rank-32 factor of the same 60 rows
# (stats_rows_per_rank = 1, stats_rank = 32: what stats_rank = 32 sent before the release rule) shows no
# subspace in its spectrum either, but the factor attack decides membership (FAIL). A part with fewer rows than
# stats_rows_per_rank (no eigenpair) sends only its isotropic variance (its exact diagonal would show the
# coordinates its rows all share, a subspace holding them: star20's 9-row client FAILed so): no subspace.
# A part of 15-19 rows at the default 15 rows per eigenpair sends no eigenpair either (under 20 rows, the
# isotropic variance only): its factor's span is the class means'.
# A statistics bundle is also audited per part (one component per class standing for its count). Exit codes: 3 for a verdict reaching --fail-on, 1 for an unreadable bundle or features
# that are not a matrix, 2 for bad usage (also a bad --fail-on), 0 for --help and --fail-on never.
# Every audit with held-out rows runs the zero-support test (a row passes when it is 0 wherever a released mean
# of its class is): every member passes; a one-row component's zeros (min_rows = 1) decide membership (FAIL).
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

# launch NAME SETTINGS EDGES [SAMPLES]: writes W/NAME.dot and runs it into W/NAME
launch() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = %s; deadline = 120;\n  %s\n  %s\n}\n' \
        "$1" "$DATA" "${4:-60}" "$2" "$3" >"$W/$1.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$1.dot" --out "$W/$1" --no-baselines --quiet \
        >"$W/$1.stdout" 2>"$W/$1.stderr" || fail "launch $1 exited $? ($(cat "$W/$1.stderr"))"
}
GMM="cov = diag; k = 10; max_iter = 20; em_draws = 2; head_draws = 1;"
launch m1 "$GMM min_rows = 1;" "a -> b;"
launch m5 "$GMM min_rows = 5;" "a -> b;"
launch tied "cov = tied; min_rows = 1; stats_release = full_scatter; mean_noise = 0;" "a -> b;"
launch c3t "cov = tied; stats_release = full_scatter; mean_noise = 0;" "a -> b -> c;"
launch c3q "cov = tied;" "a -> b -> c;"
launch c3r "cov = tied; stats_rank = 32; stats_rows_per_rank = 1;" "a -> b -> c;"
launch tiny "cov = tied; stats_rows_per_rank = 100;" "a -> b;"
launch tiny18 "cov = tied; min_rows = 2;" "a -> b;" 18

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
other() { echo --holdout-features "$W/$1/$2/data/train_x.npy" --holdout-labels "$W/$1/$2/data/train_y.npy"; }

# shellcheck disable=SC2046
{
    # text on stdout and the JSON object in a file, from one audit (--json-out)
    run m1_text 3 "$W/m1/a/bundle.pftb" $(own m1) $(held m1) --json-out "$W/m1_json.out"
    run m1_never 0 "$W/m1/a/bundle.pftb" $(own m1) --fail-on never
    run m5_json 0 "$W/m5/a/bundle.pftb" $(own m5) $(held m5) --json --fail-on never --json-out "$W/m5_copy.json"
    run tied_text 3 "$W/tied/a/bundle.pftb" $(own tied) --lp 20 --json-out "$W/tied_json.out"
    run c3t_text 3 "$W/c3t/a/bundle.pftb" $(own c3t) $(other c3t c) --lp 40 --json-out "$W/c3t_json.out"
    run c3t_exact 3 "$W/c3t/a/bundle.pftb" $(own c3t) $(other c3t c) --lp 10 --fail-on exact
    run c3q_text 0 "$W/c3q/a/bundle.pftb" $(own c3q) $(other c3q c) --fail-on exact --json-out "$W/c3q_json.out"
    run c3r_json 3 "$W/c3r/a/bundle.pftb" $(own c3r) $(other c3r c) --json --lp 20
    run tiny_json 0 "$W/tiny/a/bundle.pftb" $(own tiny) $(other tiny b) --json --lp 20 --fail-on exact
    run tiny18_json 0 "$W/tiny18/a/bundle.pftb" $(own tiny18) $(other tiny18 b) --json --lp 20 --fail-on exact
}
has m1_text '^bundle .*producer a, GMMs, d 1280'
has m1_text '^components [0-9]+: [1-9][0-9]* stand for fewer than 1.5 rows'
has m1_text '^nearest row: FAIL: [0-9]+ means, [1-9][0-9]* are rows'
has m1_text '^likelihood membership: (PASS|WARN|FAIL): AUC [01][.][0-9]+ '
has m1_text '^verdict: FAIL'
has m1_text '^zero support: FAIL: worst class [0-9]+ '
py m1_json "assert o['kind'] == 'gmm' and o['prep'] == 'l2' and s['one_row'] > 0, s
assert s['near_row'] >= 1, s  # a one-row component's mean is that row (to fp16)
r = [x['ratio'] for c in o['classes'] for x in c['components'] if x['rows'] < 1.5]
assert r and max(r) < 0.1, r
a = o['attacks']
assert a['nearest']['verdict'] == 'FAIL' and a['nearest']['means_are_rows'] == s['near_row'], a['nearest']
assert o['verdict'] == 'FAIL' and o['exact_leak'] is True, o['verdict']
assert 0.5 <= a['likelihood']['auc'] <= 1 and a['likelihood']['applicable'], a['likelihood']
assert a['subspace']['parts'][0]['part'] == 'mixtures', a['subspace']
assert s['ll_diff'] is not None and s['ll_diff'] > 0, s
assert s['own_rows'] > 0 and s['holdout_rows'] > 0, s
z = a['zero_support']  # a one-row component's zeros are its row's: members pass, held-out rows do not
assert z['verdict'] == 'FAIL' and z['worst']['own_pass'] == z['worst']['own_rows'] > 0, z"
cmp -s "$W/m5_json.out" "$W/m5_copy.json" || fail "m5: --json-out's file differs from --json's stdout"
py m5_json "assert s['one_row'] == 0 and s['min_rows'] >= 5 * (1 - 2 ** -10), s
assert all(x['rows'] >= 5 * (1 - 2 ** -10) for c in o['classes'] for x in c['components'])
assert s['near_row'] == 0 and o['attacks']['nearest']['verdict'] != 'FAIL', s"
py tied_json "assert o['kind'] == 'stats' and s['holdout_rows'] == 0 and s['ll_diff'] is None, s
c = o['classes'][0]
assert c['part'] == 'a' and c['k'] == 1 and c['components'][0]['rows'] == c['n'] and c['own_rows'] == c['n'], c
p = o['attacks']['subspace']['parts'][0]
assert p['proper'] and p['contained'] and p['verdict'] == 'FAIL' and p['accuracy'] is None, p
assert o['attacks']['likelihood']['applicable'] is False, o['attacks']['likelihood']"
has tied_text 'exact statistics'
has tied_text 'every member row lies in the span'
# the dense exact release of a 3-node chain's first node: membership decided and rows recovered
has c3t_text '^subspace membership: FAIL'
has c3t_text '^vertex \(LP\) reconstruction: FAIL'
has c3t_text '[1-9][0-9]* rows RECOVERED'
has c3t_text '^\*\*\* FAIL: a row can be recovered'
py c3t_json "a = o['attacks']
p = a['subspace']['parts'][0]
assert p['proper'] and p['dim'] < p['d'] and p['dim'] == p['member_rows'], p  # N - C + C dimensions
assert p['accuracy'] >= 0.9 and p['member_residual_max'] < 1e-4 < p['holdout_residual_min'], p
v = a['vertex']['parts'][0]
assert v['applicable'] and v['programs'] + v['programs_failed'] == 40 and v['rows_recovered'] >= 1, v
assert v['max_error'] < 1.5e-3 and v['rowlike_rows'] <= v['rowlike'], v
assert o['verdict'] == 'FAIL' and o['exact_leak'] is True"
# the default release (60 rows: rank 4 + diagonal): no subspace in the spectrum; the released factor's span
# with the class means (4 + 7 of 1280 dimensions) holds no row, and its membership test stays below FAIL
has c3q_text 'no subspace \(largest eigenvalue gap'
has c3q_text 'part a \(released factor and class means\): span of dimension'
has c3q_text '^vertex \(LP\) reconstruction: PASS'
py c3q_json "a = o['attacks']
p, m, f = a['subspace']['parts']
assert m['basis'] == 'means' and m['dim'] <= 7 and m['accuracy'] <= f['accuracy'] + 0.05, m
assert o['shared_rank'] == 4 and p['basis'] == 'spectrum' and f['basis'] == 'factor', a['subspace']
assert not p['proper'] and p['gap'] < 1e4 and p['verdict'] == 'PASS', p
assert f['proper'] and f['dim'] <= 4 + 7 and f['accuracy'] < 0.9 and not f['contained'], f
assert f['member_residual_min'] > 0.1, f  # no member row lies in the released span
assert a['vertex']['verdict'] == 'PASS' and all(not v['applicable'] for v in a['vertex']['parts']), a
assert o['exact_leak'] is False, o
z = a['zero_support']  # the default mean_noise: no exact zero, the adaptive bound test below FAIL
assert z['applicable'] and z['mean_noise'] == 0.05 and all(c['zeros'] == 0 for c in z['classes']), z
assert z['verdict'] != 'FAIL', z
assert z['worst']['accuracy'] == max(c['accuracy'] for c in z['classes'] if c['accuracy'] is not None), z"
has c3q_text '^zero support: (PASS|WARN|FAIL): worst class [0-9]+ \([0-9]+ rows, [0-9]+ coordinates exactly 0\)'
# a rank-32 factor of 60 rows (53 within-class directions): its spectrum has no gap (the diagonal), but the
# factor's span holds most of every row: the factor attack FAILs where the spectrum's passed
py c3r_json "a = o['attacks']
p, m, f = a['subspace']['parts']
assert m['basis'] == 'means' and m['dim'] <= 7 and m['accuracy'] <= f['accuracy'] + 0.05, m
assert o['shared_rank'] == 32 and not p['proper'] and p['verdict'] == 'PASS', p
assert f['accuracy'] >= 0.9 and f['verdict'] == 'FAIL' and a['subspace']['verdict'] == 'FAIL', f
assert o['verdict'] == 'FAIL', o['verdict']"
# fewer rows than stats_rows_per_rank: the isotropic variance only, no subspace in the spectrum, no exact leak
py tiny_json "a = o['attacks']
p = a['subspace']['parts'][0]
assert o['shared_rank'] == 1 and p['basis'] == 'spectrum' and not p['proper'] and p['verdict'] == 'PASS', p
assert o['exact_leak'] is False, o"

# 15-19 rows at 15 rows per eigenpair: still no eigenpair under 20 rows (the factor's span is the means')
py tiny18_json "a = o['attacks']
p, m, f = a['subspace']['parts']
n = sum(c['n'] for c in o['classes'])  # rows released (classes under min_rows = 2 withheld)
assert 15 <= n < 20 and m['basis'] == 'means' and f['basis'] == 'factor', (n, a['subspace']['parts'])
assert f['dim'] == m['dim'] and not p['proper'] and p['verdict'] == 'PASS', (p, m, f)
assert o['exact_leak'] is False, o"

# exit codes
run missing 1 "$W/none.pftb" $(own m1)
run notmatrix 1 "$W/m1/a/bundle.pftb" --features "$W/m1/a/data/train_y.npy" --labels "$W/m1/a/data/train_y.npy"
run nolabels 2 "$W/m1/a/bundle.pftb" --features "$W/m1/a/data/train_x.npy"
run halfheld 2 "$W/m1/a/bundle.pftb" $(own m1) --holdout-features "$W/m1/a/data/test_x.npy"
run badprep 2 "$W/m1/a/bundle.pftb" $(own m1) --prep cube
run badfailon 2 "$W/m1/a/bundle.pftb" $(own m1) --fail-on pass
run badlp 2 "$W/m1/a/bundle.pftb" $(own m1) --lp 0
run badjsonout 1 "$W/m1/a/bundle.pftb" $(own m1) --lp 1 --json-out "$W/no/such/dir/a.json"
grep -q 'json-out' "$W/badjsonout.err" || fail "badjsonout: the error does not name --json-out: $(cat "$W/badjsonout.err")"
run help 0 --help
has help 'usage: pftnet audit BUNDLE'
has help '--json-out FILE'
[ $FAILED = 0 ] && echo "e2e_audit: all checks passed"
exit $FAILED
