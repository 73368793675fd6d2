#!/usr/bin/env bash
# e2e_ncm: head = ncm (nearest class mean with the pooled isotropic variance) in real nodes, against an oracle
# written here from the rows alone. An exact chain a -> b (cov = tied) on the bundled example data: b's head
# stands for the union of a's and b's rows, so numpy rebuilds it from the two nodes' training files: class
# means mu_c, priors pi_c = n_c / N, sigma^2 = tr(W) / (N d) with W the pooled within-class scatter, and
# score_c(x) = log pi_c - |x - mu_c|^2 / (2 sigma^2). b's head.npy must predict every evaluation row as the
# oracle does, its accuracy must be the oracle's, result.json must say head "ncm" with alpha 1 ("fixed"); a
# sampling chain (cov = diag, k = 2) with head = ncm must score within 2 points of it (NCM needs only means,
# counts and a trace, which the GMMs carry). Env: PFT_BIN, PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR
PY=/usr/bin/python3 # Debian's, with python3-numpy (.ci/install-deps)
"$PY" -c 'import numpy' 2>/dev/null || skip "no numpy for $PY"
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
W=$(mktemp -d /tmp/pft_ncm_XXXXXX)
trap 'rm -rf "$W"' EXIT
launch() { # NAME SETTINGS
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 80; prep = l2; deadline = 120;\n  %s\n  a -> b;\n}\n' \
        "$1" "$DATA" "$2" >"$W/$1.dot"
    "$PFT_BIN/pftnet" launch "$W/$1.dot" --out "$W/$1" --no-baselines --quiet >"$W/$1.out" 2>&1 ||
        fail "launch $1 exited $?: $(tail -5 "$W/$1.out")"
}
launch exact "cov = tied; head = ncm; min_rows = 1; mean_noise = 0;" # exact sums: the oracle is the rows
launch sampling "cov = diag; k = 2; head = ncm;"
"$PY" - "$W" <<'PY' || fail "ncm oracle"
import json, sys
import numpy as np
w = sys.argv[1]
run = w + "/exact"
def rows(node):
    x = np.load("%s/%s/data/train_x.npy" % (run, node)).astype(np.float64)
    y = np.load("%s/%s/data/train_y.npy" % (run, node))
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30), y  # prep = l2
xa, ya = rows("a"); xb, yb = rows("b")
X = np.vstack([xa, xb]); Y = np.concatenate([ya, yb])
C = int(max(Y.max() + 1, 7)); N, d = X.shape
mu = np.zeros((C, d)); n = np.zeros(C)
for c in range(C):
    if (Y == c).any():
        mu[c] = X[Y == c].mean(0); n[c] = (Y == c).sum()
trW = sum(((X[Y == c] - mu[c]) ** 2).sum() for c in range(C))
s2 = trW / (N * d)
ex = np.load(run + "/eval_x.npy").astype(np.float64)
ex /= np.maximum(np.linalg.norm(ex, axis=1, keepdims=True), 1e-30)
ey = np.load(run + "/eval_y.npy")
with np.errstate(divide="ignore"):
    score = np.log(n / N)[None, :] - ((ex[:, None, :] - mu[None, :, :]) ** 2).sum(2) / (2 * s2)
want = score.argmax(1)
H = np.load(run + "/b/head.npy").astype(np.float64)  # [W | b], C x (d + 1)
got = (ex @ H[:, :d].T + H[:, d]).argmax(1)
agree = (got == want).mean()
r = json.load(open(run + "/b/result.json"))
g = r["gaussian_head"]
print("ncm: %d eval rows, head.npy agrees with the oracle on %.4f; accuracy %.4f (oracle %.4f); alpha %s %s" % (
    len(ey), agree, r["accuracy_global"], (want == ey).mean(), g["alpha"], g["rule"]))
# fp32 head weights: a row whose two best oracle scores are nearly tied may go either way
margin = np.sort(score, 1)[:, -1] - np.sort(score, 1)[:, -2]
assert (got == want)[margin > 1e-3].all(), "head.npy disagrees with the oracle beyond ties"
assert abs(r["accuracy_global"] - (want == ey).mean()) <= 2.0 / len(ey), "accuracy is not the oracle's"
assert r["head"] == "ncm" and g["alpha"] == 1.0 and g["rule"] == "fixed" and g["kind"] == "lda", (r["head"], g)
s = json.load(open(w + "/sampling/b/result.json"))
assert s["exit_code"] == 0 and s["head"] == "ncm" and s["gaussian_head"]["alpha"] == 1.0, s.get("head")
# NCM needs only class means, counts and the trace of the pooled scatter, which a's GMM (k = 2, diag, fp16)
# carries almost exactly: the sampling path's head must score as the exact one's
print("ncm on the sampling path: accuracy %.4f (exact path %.4f)" % (s["accuracy_global"], r["accuracy_global"]))
assert abs(s["accuracy_global"] - r["accuracy_global"]) <= 0.02, (s["accuracy_global"], r["accuracy_global"])
PY
[ "$FAILED" -eq 0 ] && echo "e2e_ncm: ok"
exit "$FAILED"
