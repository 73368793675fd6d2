#!/usr/bin/env bash
# e2e_secagg: secure aggregation (secure_agg = true, docs/SECAGG.md) in real nodes over real sockets, on the
# bundled example features, checked from outside by tests/secagg_check.py (a decoder written from docs/WIRE.md
# and docs/SECAGG.md §8: every bundle sent or received, every node's result.json):
#   - chain a -> b -> c -> d -> e: a and b send only masked parts; c opens a + b; no clear part anywhere holds
#     fewer than min_contributors = 2 contributors; masked words are uniform (inside their bound ≈ never, class
#     sums |cos| ≈ 1/√d to the truth); c, d and e send the same clear statistics as the run without secure
#     aggregation (same release), to fp32;
#   - ring of five: lap 1 masked to the producer, lap 2 the opened total; the same checks; and with
#     secagg_degree = 2 (sparse pairs): fewer mask peers, the same accuracies;
#   - star of five clients and an aggregator (no rows): the aggregator's head equals the run without secure
#     aggregation, weight for weight, and so does its accuracy; one client (12 rows) is too small for one
#     eigenpair, so its masked release is the isotropic one it would send in the clear;
#   - diamond a -> {b, c} -> d: d opens a + b + c, b and c see a masked;
#   - a member's class sums x20 (test hook): the aggregator refuses to open the group, says which and why (exit 17);
#   - pftnet inspect shows a masked part's opener; pftnet audit calls it uninformative and why;
#   - star with DP (ε = 1, δ = 0.001): each client's share is σ/√5, the aggregator opens σ and reports it;
#   - refusals, never silently in the clear: cov = diag, a chain of two (nobody may open), DP where the opener
#     has rows, DP with δ = 0 or with unequal (ε, δ), --insecure (no keys to agree on masks), secagg_degree
#     in a star, a class
#     held by one member of a group (chain at 60 rows per node: the opener refuses to open).
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
CHECK=$PFT_SOURCE_DIR/tests/secagg_check.py
for p in pftnet pftnode; do
    [ -x "$PFT_BIN/$p" ] || skip "no $p in $PFT_BIN"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "no python3"
"$PY" -c 'import msgpack, numpy' 2>/dev/null || skip "python3 lacks msgpack or numpy (.ci/install-deps installs them)"
W=$(mktemp -d /tmp/pft_secagg_XXXXXX)
trap 'rm -rf "$W"' EXIT

# launch NAME SETTINGS EDGES [launch options]: writes W/NAME.dot and runs it into W/NAME; 0 or launch's status
launch() {
    local name=$1 settings=$2 edges=$3
    shift 3
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = %d; deadline = 240; prep = l2;\n  %s\n  %s\n}\n' \
        "$name" "$DATA" "${SAMPLES:-100}" "$settings" "$edges" >"$W/$name.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$name.dot" --out "$W/$name" --no-baselines --quiet "$@" \
        >"$W/$name.stdout" 2>"$W/$name.stderr"
}
must_launch() {
    launch "$@" || fail "launch $1 exited $? ($(tail -5 "$W/$1.stderr"))"
}

SA="cov = tied; secure_agg = true; mean_noise = 0;" # exact sums: the runs are compared with each other
CLEAR="cov = tied; mean_noise = 0;"
CHAIN="a -> b -> c -> d -> e;"
must_launch chain_sa "$SA" "$CHAIN"
must_launch chain_clear "$CLEAR" "$CHAIN"
"$PY" "$CHECK" "$W/chain_sa" --same "$W/chain_clear" --nodes c,d,e || fail "chain: secagg_check"
"$PY" - "$W/chain_sa" <<'PY' || fail "chain: who masks, who opens"
import json, sys
run = sys.argv[1]
r = {n: json.load(open(f"{run}/{n}/result.json"))["secure_agg"] for n in "abcde"}
assert r["a"]["view"] == ["a"] and r["b"]["view"] == ["b"], (r["a"], r["b"])
assert r["a"]["masks_own"] and r["b"]["masks_own"] and not r["c"]["masks_own"], r
assert r["c"]["opens"] == ["a", "b"] and r["d"]["opens"] is None, r
assert r["e"]["view"] == ["a", "b", "c", "d", "e"], r["e"]
print("chain: a and b mask for c; c opens a + b; e sees all five")
PY

must_launch ring_sa "$SA start = a;" "a -> b -> c -> d -> e -> a;"
"$PY" "$CHECK" "$W/ring_sa" || fail "ring: secagg_check"

# sparse pairs (secagg_degree = 2, docs/SECAGG.md §4.6): each of the four members masks with its two neighbours
# in node order and the producer e instead of all four; the opened total, hence every head, is the same
must_launch ring_deg "$SA start = a; secagg_degree = 2;" "a -> b -> c -> d -> e -> a;"
"$PY" "$CHECK" "$W/ring_deg" || fail "ring, secagg_degree = 2: secagg_check"
"$PY" - "$W/ring_deg" "$W/ring_sa" <<'PY' || fail "ring, secagg_degree = 2: pairs or heads differ"
import json, sys
deg, full = sys.argv[1], sys.argv[2]
r = {n: json.load(open(f"{deg}/{n}/result.json")) for n in "abcde"}
f = {n: json.load(open(f"{full}/{n}/result.json")) for n in "abcde"}
assert r["a"]["secure_agg"]["mask_peers"] == ["b", "d", "e"], r["a"]["secure_agg"]
assert r["c"]["secure_agg"]["mask_peers"] == ["b", "d", "e"], r["c"]["secure_agg"]
assert f["a"]["secure_agg"]["mask_peers"] == ["b", "c", "d", "e"], f["a"]["secure_agg"]
for n in "abcde":
    assert r[n]["accuracy_global"] == f[n]["accuracy_global"], (n, r[n]["accuracy_global"], f[n]["accuracy_global"])
print("ring, secagg_degree = 2: a masks with b, d and e (every pair: b, c, d, e); every node's accuracy as with every pair")
PY

# c1 holds 12 rows, too few for one eigenpair of the release rule (rank 0: its scatter isotropic), in both runs;
# min_rows = 1, so that it releases every class in the clear too (in a group the floor is the group's)
STAR="s [data = false]; c1 [samples = 12, min_rows = 1]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;"
must_launch star_sa "$SA" "$STAR"
must_launch star_clear "$CLEAR" "$STAR"
"$PY" "$CHECK" "$W/star_sa" || fail "star: secagg_check"
grep -q "secure aggregation: own second moment at the release rule's rank 0 (12 rows)" "$W/star_sa/c1/node.log" ||
    fail "star: c1 (12 rows) did not mask a rank-0 release: $(grep 'own second moment' "$W/star_sa/c1/node.log")"
"$PY" - "$W/star_sa" "$W/star_clear" <<'PY' || fail "star: the aggregator differs from the run without secure aggregation"
import json, sys
import numpy as np
sa, cl = sys.argv[1], sys.argv[2]
ha, hc = np.load(f"{sa}/s/head.npy"), np.load(f"{cl}/s/head.npy")
diff = float(np.max(np.abs(ha - hc)))
ra, rc = json.load(open(f"{sa}/s/result.json")), json.load(open(f"{cl}/s/result.json"))
aa, ac = ra["accuracy_global"], rc["accuracy_global"]
print(f"star: aggregator head max |diff| {diff:.2e}, accuracy {aa:.4f} vs {ac:.4f} without secure aggregation")
assert ha.shape == hc.shape and diff < 1e-6 * max(1.0, float(np.max(np.abs(hc)))), diff
assert aa == ac, (aa, ac)
assert ra["secure_agg"]["opens"] == ["c1", "c2", "c3", "c4", "c5"], ra["secure_agg"]
PY

# a member that multiplies its class sums by 20 before masking (test hook PFT_TEST_SCALE_SUMS, test-hook builds):
# the aggregator refuses to open the group, names it and the check it failed, exits 17, trains nothing on it
X20=0
PFT_TEST_SCALE_SUMS=c2 launch star_x20 "$SA" "$STAR" || X20=$?
if ! grep -q 'test hook: class sums x20' "$W/star_x20/c2/node.log" 2>/dev/null; then
    skip_part "pftnode built without PFT_TEST_HOOKS (no PFT_TEST_SCALE_SUMS): the x20 member not tried"
elif [ "$X20" = 0 ]; then
    fail "star, c2's class sums x20: the aggregator opened the group and used it"
else
    "$PY" - "$W/star_x20" <<'PY' || fail "star, c2's class sums x20: the refusal does not name the group and why"
import json, sys
r = json.load(open(f"{sys.argv[1]}/s/result.json"))
ref = r["secure_agg"]["open_refused"]
assert r["exit_code"] == 17, r["exit_code"]
assert ref["opener"] == "s" and ref["members"] == ["c1", "c2", "c3", "c4", "c5"], ref
assert "implausible statistics" in ref["reason"] and "mean has norm" in ref["reason"], ref["reason"]
print("star, c2's class sums x20: not opened:", ref["reason"])
PY
fi

# DP noise paid once: each client masks its noisy sums and second moment with a share N(0, σ²/5); the
# aggregator opens statistics with σ per entry, and reports it; the clients' provenance carries (ε, δ)
must_launch star_dp "$SA dp_epsilon = 1; dp_delta = 0.001;" "s [data = false, dp_epsilon = 0]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;"
"$PY" "$CHECK" "$W/star_dp" || fail "star with DP: secagg_check"
"$PY" - "$W/star_dp" <<'PY' || fail "star with DP: noise shares"
import json, math, sys
run = sys.argv[1]
s = json.load(open(f"{run}/s/result.json"))["secure_agg"]
c = json.load(open(f"{run}/c1/result.json"))
dp = s["dp"]
# σ = Δ₂ · 2.5746570186372061 at Δ₂ = 3/√2, ε = 1, δ = 1e-3: the analytic calibration (SECURITY.md §6; the
# constant from a 40-digit bisection of the exact δ(σ), tests/test_gstat_dp.c)
want = 3 / math.sqrt(2) * 2.5746570186372061
assert dp["noise_div"] == 5 and abs(dp["sigma"] - want) / want < 0.05, (dp, want)
assert abs(dp["share_sd"] - dp["sigma"] / math.sqrt(5)) < 1e-6 * dp["sigma"], dp
assert abs(s["opened_sigma"] - dp["sigma"]) < 1e-6 * dp["sigma"], s
rel = c["dp"]["release"]
assert abs(rel["sigma_share"] - dp["share_sd"]) < 1e-6 * dp["share_sd"] and rel["epsilon"] == 1, rel
print(f"star with DP: sigma {dp['sigma']:.4f} (analytic {want:.4f}), shares {dp['share_sd']:.4f} x 5, opened {s['opened_sigma']:.4f}")
PY
"$PFTNET" inspect "$W/star_dp/c1/bundle.pftb" --json >"$W/dp_inspect.json" || fail "inspect of a DP masked bundle"
"$PY" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["parts"][0]["masked"]["div"] == 5, o["parts"][0]; assert o["provenance"][0]["dp"]["eps"] == 1, o["provenance"]' \
    "$W/dp_inspect.json" || fail "a DP client's masked part lacks its divisor or its provenance (ε, δ)"

must_launch diamond_sa "$SA" "a -> b; a -> c; b -> d; c -> d;"
"$PY" "$CHECK" "$W/diamond_sa" || fail "diamond: secagg_check"

# inspect and audit of a masked bundle (b's: a's and b's rows, masked for c)
B=$W/chain_sa/b
"$PFTNET" inspect "$B/bundle.pftb" >"$W/inspect.txt" 2>&1 || fail "inspect of a masked bundle exited $?"
grep -q 'masked for opener c' "$W/inspect.txt" || fail "inspect does not show the masked part: $(cat "$W/inspect.txt")"
"$PFTNET" inspect "$B/bundle.pftb" --json >"$W/inspect.json" || fail "inspect --json exited $?"
"$PY" -c 'import json,sys; p=json.load(open(sys.argv[1]))["parts"][0]; assert p["masked"]["opener"] == "c", p' \
    "$W/inspect.json" || fail "inspect --json: no masked object"
"$PFTNET" audit "$B/bundle.pftb" --features "$B/data/train_x.npy" --labels "$B/data/train_y.npy" --lp 1 \
    --fail-on never >"$W/audit.txt" 2>&1 || fail "audit of a masked bundle exited $? ($(tail -3 "$W/audit.txt"))"
grep -q 'masked: uninformative without the pair secrets of its contributors and its opener' "$W/audit.txt" ||
    fail "audit does not report the masked part as uninformative: $(cat "$W/audit.txt")"
# nothing in the clear: no "nan", and a PASS that says nothing was measured
grep -qiw 'nan' "$W/audit.txt" && fail "audit of a masked bundle prints nan: $(cat "$W/audit.txt")"
grep -q '^nearest row: not measured: no mean in the clear' "$W/audit.txt" &&
    grep -q '^verdict: PASS (nothing in the clear was measured' "$W/audit.txt" ||
    fail "audit of a masked bundle does not say nothing was measured: $(cat "$W/audit.txt")"

# refused with a clear error, never sent in the clear
refused() { # NAME SETTINGS EDGES NEEDLE [launch options]
    local name=$1 needle=$4
    if launch "$1" "$2" "$3" "${@:5}"; then
        fail "$name: secure aggregation that cannot hold was launched"
    elif ! grep -rqi -- "$needle" "$W/$name.stderr" "$W/$name"/*/node.log 2>/dev/null; then
        fail "$name: the refusal does not say '$needle': $(tail -3 "$W/$name.stderr")"
    fi
}
refused diag "cov = diag; secure_agg = true;" "a -> b -> c;" "cov = tied"
refused pair "$SA" "a -> b;" "min_contributors"
refused dp_opener_rows "$SA dp_epsilon = 1; dp_delta = 0.001;" "a -> b -> c;" "has rows of its own"
refused dp_delta_zero "$SA dp_epsilon = 1; dp_delta = 0;" "s [data = false, dp_epsilon = 0]; a -> s; b -> s;" "0 < dp_delta < 1"
refused dp_unequal "$SA dp_epsilon = 1; dp_delta = 0.001;" "s [data = false, dp_epsilon = 0]; b [dp_epsilon = 2]; a -> s; b -> s;" "same (dp_epsilon, dp_delta)"
refused insecure "$SA" "a -> b -> c;" "insecure" --insecure
refused degree_star "$SA secagg_degree = 2;" "s [data = false]; a -> s; b -> s; c -> s; d -> s;" "secagg_degree = 2 in a star"
# at 60 rows per node class 2 has one holder among a and b: c must not open (their sum would show a's class mean)
SAMPLES=60 refused short_class "$SA" "$CHAIN" "fewer than min_contributors"
finish
