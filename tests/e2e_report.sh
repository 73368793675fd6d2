#!/usr/bin/env bash
# e2e_report: runs the real `pftnet report` on the hand-made results in tests/fixtures/report/good (two seeds of a
# 3-node chain, one of them in the old format and with a timed-out node; a 2-node run with two variants and every
# baseline; synth lines; in tests/fixtures/report/exact a chain with an exact-statistics variant whose run has no
# baselines, the centralized Gaussian baseline and synth lines with Gaussian heads) and checks the Markdown exactly: mean ± std strings, row order, "—" for baselines without
# a value, section order (directory order, then command-line order), notes, determinism; the errors for malformed
# files (naming file and line); and, when gnuplot is installed, that --plots writes non-empty SVG (and PNG) files
# with their .dat/.gp beside them, linked relative to --out's folder (that part is skipped without gnuplot).
# Env: PFT_BIN (folder with pftnet), PFT_SOURCE_DIR. Fixtures: tests/fixtures/report/make_report_fixtures.py.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
FX=$PFT_SOURCE_DIR/tests/fixtures/report
if [ ! -x "$PFTNET" ]; then
    echo "skipped: no pftnet in $PFT_BIN"
    exit 77
fi
W=$(mktemp -d /tmp/pft_report_XXXXXX)
trap 'rm -rf "$W"' EXIT

# expect_block NAME FILE: the lines of stdin must appear in FILE consecutively and in this order
expect_block() {
    local name=$1 file=$2
    cat >"$W/expect"
    if ! python3 - "$W/expect" "$file" <<'EOF'; then
import sys
want = open(sys.argv[1]).read().splitlines()
have = open(sys.argv[2]).read().splitlines()
ok = any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1))
sys.exit(0 if ok else 1)
EOF
        fail "$name: block not found in $file; expected:"
        cat "$W/expect" >&2
    fi
}

# ---- the whole fixture folder: directory order chain3, family.jsonl (gmm-family), pair ----------------------
(cd "$FX" && "$PFTNET" report good >"$W/good.md" 2>"$W/good.err") || fail "report good exited $? ($(cat "$W/good.err"))"
[ -s "$W/good.err" ] && fail "report good wrote to stderr: $(cat "$W/good.err")"
headings=$(grep '^## ' "$W/good.md" | tr '\n' ' ')
[ "$headings" = "## chain3 ## gmm-family ## pair " ] || fail "section order: '$headings'"

expect_block "chain3 comparison" "$W/good.md" <<'EOF'
| method | accuracy (%) | bytes communicated |
|:--|--:|--:|
| Centralized | 75.50 ± 0.71 (2) | — |
| Local only (mean of nodes) | 51.00 ± 1.41 (2) | 0 B |
| KD | — | — |
| FedPFT diag K=5 | 71.00 ± 1.41 (2) | 2.0 kB |
EOF
expect_block "chain3 caption" "$W/good.md" <<'EOF'
Accuracy on the union of all nodes' test splits, mean ± sample std over seeds (number of seeds in parentheses). FedPFT rows: mean accuracy of the sink node(s) (chain); bytes: sum of bytes_sent over all nodes.
EOF
expect_block "chain3 per node" "$W/good.md" <<'EOF'
### FedPFT diag K=5

2 runs (seeds 0, 1), wall time 11.0 ± 1.4 s; 1 of them did not finish (a node failed or was stopped; its figures count where it recorded them). Settings: k=5, cov=diag, dtype=fp16, prep=l2, em_draws=10, head_draws=10, dp_epsilon=0, partition=iid, samples=100.

| node | hop | role | accuracy (%) | local-only (%) | knowledge | real rows | synthetic rows | drift: own log-lik under received / sent GMM | bytes sent |
|:--|--:|:--|--:|--:|--:|--:|--:|--:|--:|
| a | 0 | source | 52.00 ± 2.83 | 49.00 ± 1.41 | 1/3 | 100 | 0 | — / 61.0 ± 1.4 | 1.0 kB |
| b | 1 | relay (timeout in 1 of 2 runs) | 60.00 (1) | 50.00 ± 2.83 | 2/3 | 100 | 100 | -100.0 / 50.0 | 2.0 kB |
| c | 2 | sink | 71.00 ± 1.41 | 54.00 ± 2.83 | (2.5 ± 0.7)/3 | 100 | 150.0 ± 70.7 | 12.0 ± 2.8 / — | 0 B |
EOF
expect_block "synth family" "$W/good.md" <<'EOF'
5 `pftnet synth --json` lines, grouped by covariance, K and rank over seeds. Head on raw features: 80.00 ± 0.00 (5).

| cov | K | bytes per class (fp16) | bundle bytes | acc_synth (%) | gap to raw (pp) |
|:--|--:|--:|--:|--:|--:|
| diag | 1 | 5.1 kB | 36.0 kB | 71.00 ± 1.41 (2) | 9.00 ± 1.41 (2) |
| diag | 10 | 51.2 kB | 360.0 kB | 76.00 (1) | 4.00 (1) |
| spher | 10 | 26.0 kB | 182.0 kB | 74.00 (1) | 6.00 (1) |
| lowrank (r=8) | 1 | 23.0 kB | 161.0 kB | 78.00 (1) | 2.00 (1) |
EOF
# baselines from the first run of seed 7 (the second run's differ on purpose), then the variants in order
expect_block "pair comparison" "$W/good.md" <<'EOF'
| Centralized | 80.00 (1) | 5.12 MB |
| Local only (mean of nodes) | 60.00 (1) | 0 B |
| Ensemble | 65.00 (1) | 35.8 kB |
| Average | 55.00 (1) | 35.8 kB |
| KD (T=5) | 70.00 (1) | 35.8 kB |
| FedPFT diag K=10 | 74.00 (1) | 35.0 kB |
| FedPFT full K=1 | 76.00 (1) | 820.0 kB |
EOF
expect_block "pair KD note" "$W/good.md" <<'EOF'
KD: T chosen on a validation split of the destination's training rows (node dst); choosing T on the test set instead would give 71.00 (1) (best T per seed: 10).
EOF
grep -q '^| node | hop' <(sed -n '/^## pair/,$p' "$W/good.md") && fail "pair (2 nodes) has a per-node table"
grep -q '!\[' "$W/good.md" && fail "image links without --plots"

# ---- exact statistics (tests/fixtures/report/exact): a run without baselines first, the centralized Gaussian
# baseline, the shrinkage column, settings cov "?" shown as the nodes' own, synth heads ------------------------
(cd "$FX" && "$PFTNET" report exact >"$W/exact.md" 2>"$W/exact.err") || fail "report exact exited $? ($(cat "$W/exact.err"))"
expect_block "exact comparison" "$W/exact.md" <<'EOF'
| Centralized | 73.00 (1) | 1.02 MB |
| Centralized Gaussian (LDA) | 78.00 (1) | 1.02 MB |
| Local only (mean of nodes) | 50.00 (1) | 0 B |
| Exact LDA (tied, gaussian head) | 78.00 (1) | 6.60 MB |
| FedPFT diag K=5 | 71.00 (1) | 720.0 kB |
EOF
grep -qx 'Centralized Gaussian (LDA): the Gaussian (LDA) head on the same raw rows as Centralized, its shrinkage chosen by 5-fold cross-validation over them (α per seed: 0.5); an exact-statistics run'"'"'s nodes with everyone'"'"'s knowledge hold the same statistics.' "$W/exact.md" ||
    fail "exact: centralized Gaussian note"
expect_block "exact per node" "$W/exact.md" <<'EOF'
1 run (seed 0), wall time 2.0 s. Settings: k=5, cov=tied. Head: Gaussian (LDA) from the node's class statistics, shrinkage α of the final node(s) 0.50 (rule: cv).

| node | hop | role | accuracy (%) | local-only (%) | knowledge | real rows | synthetic rows | drift: own log-lik under received / sent GMM | shrinkage α | bytes sent |
|:--|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|
| a | 0 | source | 62.00 | 50.00 | 1/3 | 100 | 0 | — / — | 0.90 | 3.30 MB |
| b | 1 | relay | 70.00 | 48.00 | 2/3 | 100 | 0 | — / — | 0.70 | 3.30 MB |
| c | 2 | sink | 78.00 | 52.00 | 3/3 | 100 | 0 | — / — | 0.50 | 0 B |
EOF
expect_block "exact synth heads" "$W/exact.md" <<'EOF'
| cov | head | K | bytes per class (fp16) | bundle bytes | acc_synth (%) | gap to raw (pp) |
|:--|:--|--:|--:|--:|--:|--:|
| diag | logreg | 10 | 51.2 kB | 360.0 kB | 75.00 ± 1.41 (2) | 5.00 ± 1.41 (2) |
| diag | gaussian (LDA, α 0.04) | 10 | 51.2 kB | 360.0 kB | 79.00 (1) | 1.00 (1) |
| tied | gaussian (LDA, α 0.1) | 1 | — | 1.65 MB | 85.00 ± 1.41 (2) | -5.00 ± 1.41 (2) |
EOF

# ---- command-line order, explicit files, determinism --------------------------------------------------------
(cd "$FX/good" && "$PFTNET" report pair chain3/s1/results.json chain3/s0 >"$W/order.md") || fail "report in order exited $?"
headings=$(grep '^## ' "$W/order.md" | tr '\n' ' ')
[ "$headings" = "## pair ## chain3 " ] || fail "command-line order: '$headings'"
grep -qx '2 runs (seeds 1, 0), wall time 11.0 ± 1.4 s; 1 of them did not finish (a node failed or was stopped; its figures count where it recorded them). Settings: k=5, cov=diag, dtype=fp16, prep=l2, em_draws=10, head_draws=10, dp_epsilon=0, partition=iid, samples=100.' "$W/order.md" ||
    fail "chain3 settings line (seeds in command-line order)"
(cd "$FX" && "$PFTNET" report good >"$W/good2.md") && cmp -s "$W/good.md" "$W/good2.md" || fail "two runs differ"

# ---- --out, --title, --notes ---------------------------------------------------------------------------------
mkdir -p "$W/notes"
printf 'Intro text.\n' >"$W/notes/intro.md"
printf 'Notes on chain3.\n' >"$W/notes/chain3.md"
printf 'The end.\n' >"$W/notes/outro.md"
"$PFTNET" report "$FX/good" --out "$W/rep/report.md" --title 'Chains | pairs' --notes "$W/notes" >"$W/out.stdout" ||
    fail "report --out exited $?"
[ -s "$W/out.stdout" ] && fail "report --out also wrote to stdout"
[ "$(sed -n 1,3p "$W/rep/report.md" | tr '\n' '~')" = '# Chains | pairs~~Intro text.~' ] || fail "title/intro"
[ "$(grep -A2 '^## chain3' "$W/rep/report.md" | tr '\n' '~')" = '## chain3~~Notes on chain3.~' ] || fail "tag notes"
[ "$(tail -n 1 "$W/rep/report.md")" = 'The end.' ] || fail "outro"

# ---- errors --------------------------------------------------------------------------------------------------
check_error() { # check_error PATH EXPECTED-TEXT
    (cd "$FX" && "$PFTNET" report "$1" >"$W/err.out" 2>"$W/err.err")
    local rc=$?
    [ $rc = 1 ] || fail "report $1: exit $rc, expected 1"
    grep -qF -- "$2" "$W/err.err" || fail "report $1: stderr '$(cat "$W/err.err")' lacks '$2'"
    [ -s "$W/err.out" ] && fail "report $1 wrote a report"
}
check_error bad/broken/results.json "pftnet report: bad/broken/results.json:3:25: not valid JSON"
check_error bad/notrun "bad/notrun/results.json: not a pftnet launch results.json (no \"nodes\" array)"
check_error bad/lines.jsonl "bad/lines.jsonl:2:"
check_error nonexistent "nonexistent: No such file or directory"
mkdir -p "$W/empty"
check_error "$W/empty" "no results.json or *.jsonl file"
"$PFTNET" report >/dev/null 2>&1
[ $? = 2 ] || fail "report without PATH: expected exit 2"
"$PFTNET" report --format gif "$FX/good" >/dev/null 2>&1
[ $? = 2 ] || fail "--format gif: expected exit 2"
"$PFTNET" report --help | grep -q -- '--plots DIR' || fail "--help lacks --plots"

# ---- plots ---------------------------------------------------------------------------------------------------
PATH=/nonexistent "$PFTNET" report "$FX/good" --plots "$W/np" >/dev/null 2>"$W/np.err"
[ $? = 1 ] && grep -q 'needs gnuplot' "$W/np.err" || fail "--plots without gnuplot: $(cat "$W/np.err")"
mkdir -p "$W/fakebin" && printf '#!/bin/sh\necho "fake gnuplot: broken" >&2\nexit 3\n' >"$W/fakebin/gnuplot" &&
    chmod +x "$W/fakebin/gnuplot"
PATH=$W/fakebin:$PATH "$PFTNET" report "$FX/good" --plots "$W/fp" --out "$W/fp/r.md" >/dev/null 2>"$W/fp.err"
[ $? = 1 ] && grep -q "gnuplot failed on $W/fp/chain3-accuracy.gp (exit status 3" "$W/fp.err" ||
    fail "failing gnuplot: $(cat "$W/fp.err")"
[ -e "$W/fp/r.md" ] && fail "a report was written although gnuplot failed"
if command -v gnuplot >/dev/null 2>&1; then
    "$PFTNET" report "$FX/good" --out "$W/rep/report.md" --plots "$W/rep/plots" 2>"$W/plots.err" ||
        fail "report --plots exited $?"
    [ -s "$W/plots.err" ] && fail "report --plots (gnuplot) wrote to stderr: $(cat "$W/plots.err")"
    # exact statistics: per-hop plot with the centralized Gaussian line, drift of the FedPFT variant only
    "$PFTNET" report "$FX/exact" --out "$W/ex/report.md" --plots "$W/ex/plots" 2>"$W/ex.err" ||
        fail "report exact --plots exited $? ($(cat "$W/ex.err"))"
    [ -s "$W/ex.err" ] && fail "report exact --plots wrote to stderr: $(cat "$W/ex.err")"
    for img in exact3-acc-bytes exact3-accuracy exact3-drift exact-family-synth; do
        grep -q '<svg' "$W/ex/plots/$img.svg" 2>/dev/null || fail "exact: $img.svg missing or not SVG"
    done
    grep -q "title 'centralized Gaussian (LDA)'" "$W/ex/plots/exact3-accuracy.gp" ||
        fail "exact: no centralized Gaussian line in exact3-accuracy.gp"
    grep -q "xtic(2)" "$W/ex/plots/exact3-drift.gp" || fail "exact: drift plot without node names"
    grep -q "title 'tied + gaussian head (LDA)'" "$W/ex/plots/exact-family-synth.gp" ||
        fail "exact: no tied series in exact-family-synth.gp"
    for img in chain3-accuracy chain3-drift gmm-family-synth pair-acc-bytes pair-accuracy; do
        f=$W/rep/plots/$img.svg
        { [ -s "$f" ] && grep -q '<svg' "$f"; } || fail "$img.svg missing or not SVG"
        [ -s "$W/rep/plots/$img.dat" ] && [ -s "$W/rep/plots/$img.gp" ] || fail "$img .dat/.gp missing"
        grep -qF "](plots/$img.svg)" "$W/rep/report.md" || fail "no link to plots/$img.svg"
    done
    # chain3 has one comparison row with bytes > 0 (FedPFT): no accuracy-vs-bytes plot
    [ "$(ls "$W/rep/plots" | wc -l)" = 15 ] || fail "plots folder: $(ls "$W/rep/plots" | tr '\n' ' ')"
    grep -q 'chain3-acc-bytes' "$W/rep/report.md" && fail "link to a chain3 accuracy-vs-bytes plot"
    # restyling: the scripts rerun in place
    (cd "$W/rep/plots" && gnuplot chain3-accuracy.gp) || fail "rerunning chain3-accuracy.gp failed"
    # links relative to --out's folder; PNG through pngcairo
    "$PFTNET" report "$FX/good/pair" --out "$W/a/report.md" --plots "$W/b/plots" --format png || fail "png exited $?"
    grep -qF '](../b/plots/pair-acc-bytes.png)' "$W/a/report.md" || fail "relative link: $(grep '!\[' "$W/a/report.md")"
    [ "$(head -c 4 "$W/b/plots/pair-accuracy.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "pair-accuracy.png not PNG"
    # a later report into the same folder (one experiment fewer, PNG instead of SVG) removes the plot files it no
    # longer makes, and only those
    echo "mine" >"$W/rep/plots/chain3-notes.txt"
    "$PFTNET" report "$FX/good/pair" --out "$W/rep/report.md" --plots "$W/rep/plots" --format png ||
        fail "second report exited $?"
    left=$(ls "$W/rep/plots" | tr '\n' ' ')
    [ "$left" = "chain3-notes.txt pair-acc-bytes.dat pair-acc-bytes.gp pair-acc-bytes.png pair-accuracy.dat pair-accuracy.gp pair-accuracy.png " ] ||
        fail "after a report of pair alone, the plots folder holds: $left"
    # a DP variant beside one without DP is left out of the drift plot (its own log-likelihoods, -1.4e8 here,
    # would flatten the other curve), and the report says so
    mkdir -p "$W/dp/plain" "$W/dp/noisy"
    for v in plain noisy; do
        eps=0; dr=-1000.5; [ $v = noisy ] && eps=1 && dr=-140000000
        printf '{"tag": "dpmix", "variant": "FedPFT diag K=1%s", "seed": 0, "kind": "chain", "settings": {"k": 1, "dp_epsilon": %s},
 "nodes": [{"id": "a", "hop": 0, "role": "source", "status": "ok", "accuracy_global": 0.5, "drift": [{"bundle": "sent", "own_avg_loglik": %s}]},
           {"id": "b", "hop": 1, "role": "sink", "status": "ok", "accuracy_global": 0.6, "drift": [{"bundle": "received", "own_avg_loglik": %s}]}]}\n' \
            "$([ $v = noisy ] && echo ', DP eps=1')" "$eps" "$dr" "$dr" >"$W/dp/$v/results.json"
    done
    "$PFTNET" report "$W/dp" --out "$W/dp/report.md" --plots "$W/dp/plots" >"$W/dp.out" 2>&1 || fail "dp report exited $?: $(cat "$W/dp.out")"
    [ -s "$W/dp/plots/dpmix-drift.dat" ] || fail "no drift plot for dpmix: $(ls "$W/dp/plots")"
    grep -q 'e+08\|140000000' "$W/dp/plots/dpmix-drift.dat" && fail "the DP variant is in the drift plot's data"
    grep -q -- '-1000.5' "$W/dp/plots/dpmix-drift.dat" || fail "the plain variant is not in the drift plot's data"
    grep -qF 'Not in the drift plot: FedPFT diag K=1, DP eps=1 (DP:' "$W/dp/report.md" ||
        fail "the report does not say which variant the drift plot leaves out: $(grep -n drift "$W/dp/report.md")"
else
    skip_part "gnuplot not installed: the plot checks did not run"
fi

[ $FAILED = 0 ] && [ $SKIPPED = 0 ] && echo "e2e_report: all checks passed"
finish
