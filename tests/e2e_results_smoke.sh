#!/usr/bin/env bash
# CI's reduced run of the experiments behind docs/RESULTS.md (bench/results.sh --smoke): every experiment once,
# seed 0, on the bundled example data with one EM/head draw, then `pftnet report`. Checks that every experiment
# produced its section, table rows with measured numbers and plots; and, in every launch folder, that what the
# launch wrote agrees with its nodes' own records (tests/launch_check.py: each node's entry is its result.json,
# accuracies in [0, 1], hops, every hand-off `ok` with its bytes on both ends, settings as the topology states
# them, table.txt's rows, `pftnet report`'s figures for the run). Not the accuracies themselves.
set -euo pipefail
: "${PFT_BIN:?PFT_BIN (folder with pftnet, pftnode) not set}"
: "${PFT_SOURCE_DIR:?PFT_SOURCE_DIR not set}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# streamed, so that a run cut short by ctest's timeout still shows how far it got
bash "$PFT_SOURCE_DIR/bench/results.sh" --smoke --bin "$PFT_BIN" --out "$tmp/out" 2>&1 | tee "$tmp/log" ||
    fail "bench/results.sh --smoke failed"
doc="$tmp/out/RESULTS.md"
[ -s "$doc" ] || fail "no $doc"
for tag in chain labelshift covshift star gmm-family ring8 graph10; do
    grep -q "^## $tag\$" "$doc" || fail "no section '## $tag' in RESULTS.md"
done
# the two-client tables carry every baseline, both FedPFT variants and the exact-statistics one, each with a number
for row in "Centralized" "Centralized Gaussian (LDA)" "Ensemble" "Average" "KD" "FedPFT diag K=2" "FedPFT spher K=1" \
    "Exact LDA (tied, gaussian head)"; do
    n=$(grep -c "^| $row[^|]* | [0-9]" "$doc" || true)
    [ "$n" -ge 2 ] || fail "row '$row' with a number found $n times (expected in labelshift and covshift)"
done
# every node of the ring and the mesh ends with everyone's knowledge
grep -q "| 8/8 |" "$doc" || fail "ring8: no node with knowledge 8/8"
if grep -E "^\| [a-h] \|" "$doc" | grep -q "| [1-7]/8 |"; then fail "ring8: a node without everyone's knowledge"; fi
[ "$(grep -c "| 10/10 |" "$doc")" -ge 10 ] || fail "graph10: not every node has knowledge 10/10"
# the synth grid has its exact (tied, Gaussian head) row
grep -q "^| tied | gaussian (LDA, α [0-9.]*) | 1 | .* | [0-9]" "$doc" || fail "gmm-family: no tied Gaussian-head row"
# DP on exact statistics: the launcher supports it (cov = tied with dp_epsilon), so a refusal is a failure
if grep -q "skipping the variant" "$tmp/log"; then
    fail "the launcher refused a variant: $(grep "skipping the variant" "$tmp/log" | head -3)"
fi
[ "$(grep -c "^| DP exact LDA, eps=1, delta=1e-5 | [0-9]" "$doc")" -ge 2 ] || fail "no 'DP exact LDA, eps=1, delta=1e-5' rows"
ls "$tmp/out/plots/"*.svg >/dev/null 2>&1 || fail "no plots"
# every launch exited 0 (results.sh stops at a failed one): every node ok, every hand-off ok
mapfile -t runs < <(find "$tmp/out" -name results.json -printf '%h\n' | sort)
for exp in chain labelshift covshift star ring8 graph10; do
    grep -q "^$tmp/out/$exp/" <<<"$(printf '%s\n' "${runs[@]}")" || fail "no launch folder of $exp"
done
python3 "$PFT_SOURCE_DIR/tests/launch_check.py" --pftnet "$PFT_BIN/pftnet" --all-ok "${runs[@]}" ||
    fail "what the launches wrote (above)"
echo "results smoke: ok"
