#!/usr/bin/env bash
# e2e_secagg_liar: an opener that lies under secure aggregation (docs/SECAGG.md §5, double masking), in real
# nodes over real sockets on the bundled example features. Star of five clients, every one delivers; the
# aggregator s runs with a test hook (PFT_TEST_LIAR_OPENER=s, PFT_TEST_LIAR_VICTIM=c3) that keeps c3's masked
# bundle aside and declares c3 missing to the four others, then removes from c3's words every pair mask the
# survivors' reveals and its own key allow and writes what it gets (out/secagg/liar-victim.f64). With single
# masking that is c3's exact class sums (the attack reproduced from outside); with double masking c3's
# self-mask is still on: the test checks the hook's view is far from c3's true class sums (computed here from
# c3's data file), that the survivors revealed their use keys with c3 and nothing else of it, and that s opened
# the four survivors' 400 rows only (c3 not used).
# Env: PFT_BIN (folder with pftnet and pftnode, built with test hooks), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
for p in pftnet pftnode; do
    [ -x "$PFT_BIN/$p" ] || skip "no $p in $PFT_BIN"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "no python3"
"$PY" -c 'import msgpack, numpy' 2>/dev/null || skip "python3 lacks msgpack or numpy (.ci/install-deps installs them)"
W=$(mktemp -d /tmp/pft_secliar_XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

printf 'digraph star {\n  dataset = "%s"; partition = iid; samples = 100; deadline = 45; prep = l2;\n  cov = tied; secure_agg = true;\n  s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;\n}\n' \
    "$DATA" >"$W/liar.dot"
"$PFTNET" check "$W/liar.dot" >"$W/check.txt" 2>&1 || fail "check exited $?"
grep -q 'double masking: secagg_threshold = 4 of 5' "$W/check.txt" ||
    fail "pftnet check does not state the threshold: $(grep -i mask "$W/check.txt")"
"$PFTNET" launch "$W/liar.dot" --out "$W/liar" --prepare-only --pftnode "$PFT_BIN/pftnode" >"$W/cmds" 2>&1 ||
    fail "prepare-only exited $?"
declare -A PID
for id in s c1 c2 c3 c4 c5; do
    cmd=$(grep -- "--id $id " "$W/cmds") || fail "no command for $id"
    PFT_TEST_LIAR_OPENER=s PFT_TEST_LIAR_VICTIM=c3 $cmd --log-level info >"$W/$id.out" 2>&1 &
    PID[$id]=$!
done
for id in s c1 c2 c4 c5; do
    wait "${PID[$id]}" || fail "node $id exited $? ($(tail -2 "$W/$id.out"))"
done
kill "${PID[c3]}" 2>/dev/null # declared missing while alive: it waits for a done notice that never comes
grep -q 'test hook: this opener keeps c3' "$W/s.out" || fail "the test hook is not compiled in (PFT_TEST_HOOKS)"
"$PY" - "$W/liar" <<'PY' || fail "the lying opener"
import json, sys
import numpy as np
run = sys.argv[1]
s = json.load(open(f"{run}/s/result.json"))["secure_agg"]
assert s["declared_missing"] == ["c3"] and s["opened_rows"] == 400, s  # c3 declared missing, not used
for c in ["c1", "c2", "c4", "c5"]:
    r = json.load(open(f"{run}/{c}/result.json"))["secure_agg"]
    assert r["revealed_with"] == ["c3"], (c, r)
x = np.load(f"{run}/c3/data/train_x.npy").astype(np.float64)
y = np.load(f"{run}/c3/data/train_y.npy").astype(np.int64)
x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)  # prep = l2, as the nodes do
d, K = x.shape[1], 7
true = np.zeros((K, d))
for c in range(K):
    true[c] = x[y == c].sum(axis=0)
got = np.fromfile(f"{run}/s/secagg/liar-victim.f64", dtype="<f8")
assert got.size >= K * d, got.size
got = got[: K * d].reshape(K, d)
err = float(np.linalg.norm(got - true) / np.linalg.norm(true))
print(f"the lying opener's view of c3's class sums: relative error {err:.3e} (single masking gives ~1e-8)")
assert err > 1e3, err  # the self-mask is still on: uniform words, nothing of c3's sums
PY
finish
