#!/usr/bin/python3
"""secagg_dp: DP noise paid once (secure aggregation) vs per client, on star50's partition.

Each of star50's 50 clients holds its Dirichlet(0.1) share of PACS (l2 rows, ||x|| = 1). The aggregator trains an
LDA head from the tied exact statistics: per-class sums s_c and one second moment S2 = sum x x^T.

* exact:      the clear sums (no DP), as today's star50 exact run without the release rule.
* per-client: every client releases its own (s_c, S2) with the project's mechanism (core/pft_gstat_dp.c): noise
              N(0, sigma_i^2) per entry of its sums and of S2's upper triangle (mirrored), sigma_i =
              3/sqrt(2) * sqrt(2 ln(4/delta_i)) / eps, delta_i = 1/n_i (dp_delta's old default, the node's rows; now 1e-5);
              its scatter is projected onto the PSD cone (post-processing, as pftnode does), then the aggregator
              merges the 50 releases (`per_client`; `per_client_raw`: merged without the per-client projection).
* secagg:     every client adds its share N(0, sigma^2/k) (k = 50) to the same entries, masks, and only the sum
              opens: the aggregate carries N(0, sigma^2) once, sigma at delta = 1/N (N = all 7,993 rows, stricter
              than every client's 1/n_i); one PSD projection at the aggregator.

Shrinkage (the aggregator has no rows): alpha of Sigma_a = (1-a) Sigma + a tr(Sigma)/d I chosen
  - `oas`: the OAS estimate computed from the (noisy) statistics alone (pftnode's rule for a row-less node);
  - the whole grid 0.05..0.95 is printed too; its best entry is chosen on the test split (an oracle, reported as
    such, never as the result).
Evaluated on PACS's test split (../shared/data/pacs-mobilenetv2/test_x.npy, 1,998 rows, l2).

Partition: `pftnet launch configs/star50.dot --out DIR --force --prepare-only --set cov=tied` writes each client's
rows to DIR/cNN/data/train_{x,y}.npy (pftnet's own Dirichlet(0.1) split, seed 0); pass DIR with --parts.

With --release (no DP): the opened sum of every client's release-rule second moment (its scatter at q =
min(rows // 20, 64, d - 1) eigenpairs plus its exact diagonal, plus its class means' outer products), i.e. what the
aggregator opens when each client masks the release it sends today (docs/SECAGG.md par. 6).

Usage: /usr/bin/python3 bench/secagg_dp.py --parts /tmp/h7-star50 [--eps 1] [--seeds 0,1,2] [--release]
"""
import argparse
import glob
import math
import os
import sys

import numpy as np

SENS = 3.0 / math.sqrt(2.0)
GRID = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]


def sigma(eps, delta):
    """core/pft_gstat_dp.c at eps <= 9 (DP-FedPFT's calibration, Delta_2 = 3/sqrt 2)."""
    return SENS * math.sqrt(2.0 * math.log(4.0 / delta)) / eps


def l2(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(n, 1e-12)).astype(np.float64)


def load_parts(root):
    parts = []
    for d in sorted(glob.glob(os.path.join(root, "c*", "data"))):
        x = l2(np.load(os.path.join(d, "train_x.npy")))
        y = np.load(os.path.join(d, "train_y.npy")).astype(int)
        parts.append((x, y))
    if not parts:
        sys.exit("no client data under %s (run pftnet launch --prepare-only first)" % root)
    return parts


def stats(x, y, classes):
    d = x.shape[1]
    s = np.zeros((len(classes), d))
    n = np.zeros(len(classes))
    for i, c in enumerate(classes):
        m = y == c
        s[i] = x[m].sum(0)
        n[i] = m.sum()
    return s, n, x.T @ x


def sym_noise(rng, d, sd):
    z = rng.normal(0.0, sd, (d, d))
    u = np.triu(z)
    return u + np.triu(u, 1).T


def psd(w):
    lam, v = np.linalg.eigh(w)
    return (v * np.maximum(lam, 0.0)) @ v.T


def scatter(s, n, s2):
    """W = S2 - sum_c n_c mu_c mu_c^T for the classes present."""
    w = s2.copy()
    for i in range(len(n)):
        if n[i] > 0:
            w -= np.outer(s[i], s[i]) / n[i]
    return w


def oas_alpha(cov, n):
    d = cov.shape[0]
    tr = np.trace(cov)
    tr2 = np.sum(cov * cov)
    num = (1 - 2.0 / d) * tr2 + tr * tr
    den = (n + 1 - 2.0 / d) * (tr2 - tr * tr / d)
    return float(min(1.0, num / den)) if den > 0 else 1.0


def lda_acc(mu, prior, cov, alpha, xt, yt, classes):
    d = cov.shape[0]
    c = (1 - alpha) * cov + alpha * np.trace(cov) / d * np.eye(d)
    p = np.linalg.solve(c, mu.T)  # d x C
    score = xt @ p - 0.5 * np.sum(mu.T * p, 0) + np.log(prior)
    return float(np.mean(np.array(classes)[np.argmax(score, 1)] == yt))


def evaluate(s, n, w, xt, yt, classes):
    """Accuracies of the LDA head from (noisy) class sums s, counts n and scatter w (already PSD)."""
    N = n.sum()
    mu = s / n[:, None]
    cov = w / N
    d = cov.shape[0]
    grid = {a: lda_acc(mu, n / N, cov, a, xt, yt, classes) for a in GRID}
    a_oas = oas_alpha(cov, N)
    a_oas_g = min(GRID, key=lambda a: abs(a - a_oas))
    best = max(grid, key=grid.get)
    return {
        "oas": (a_oas, grid[a_oas_g], a_oas_g),
        "oracle": (best, grid[best]),
        "grid": grid,
    }


def release_rule(s, n, s2, rows_per_rank=20, cap=64):
    """A contributor's release-rule second moment (DESIGN.md par. 8): its within-class scatter W as N (U U^T +
    diag psi), q = min(N // 20, 64, d - 1) leading eigenpairs of C = W / N (below 20 rows: tr(C)/d I), plus its
    class means' outer products, so that summing these over contributors and subtracting the pooled means'
    gives the merge of the released parts (what a masked bundle carries without DP). The rule as measured in
    docs/SECAGG.md par. 9 (20 rows per eigenpair); pftnode's default is 15 since 2026-11-27 (pass
    rows_per_rank=15 to replay it; below 20 rows no eigenpair either way)."""
    present = n > 0
    N = n.sum()
    d = s2.shape[0]
    c = scatter(s[present], n[present], s2) / N
    q = 0 if N < 20 else min(int(N) // rows_per_rank, cap, d - 1)  # pftnode: no eigenpair below 20 rows
    if q == 0:
        rel = np.trace(c) / d * np.eye(d)
    else:
        lam, v = np.linalg.eigh(c)
        u = v[:, -q:] * np.sqrt(np.maximum(lam[-q:], 0.0))
        rel = u @ u.T
        rel += np.diag(np.maximum(np.diag(c) - np.diag(rel), 0.0))
    return N * rel + sum(np.outer(s[i], s[i]) / n[i] for i in np.flatnonzero(present))


def run_release(parts, xt, yt, classes):
    """No DP: the opened sum of the clients' release-rule second moments, beside the exact statistics."""
    loc = [stats(x, y, classes) for x, y in parts]
    s_all = sum(t[0] for t in loc)
    n_all = sum(t[1] for t in loc)
    r_all = sum(release_rule(*t) for t in loc)
    return evaluate(s_all, n_all, scatter(s_all, n_all, r_all), xt, yt, classes)


def run(parts, eps, seed, xt, yt, classes):
    d = parts[0][0].shape[1]
    rng = np.random.default_rng(seed)
    k = len(parts)
    N = sum(len(y) for _, y in parts)
    loc = [stats(x, y, classes) for x, y in parts]
    s_all = sum(t[0] for t in loc)
    n_all = sum(t[1] for t in loc)
    s2_all = sum(t[2] for t in loc)
    out = {"exact": evaluate(s_all, n_all, scatter(s_all, n_all, s2_all), xt, yt, classes)}
    # per-client DP: each release noised at its own sigma_i (delta_i = 1/n_i), projected, then merged
    s_pc, s2_pc, s2_raw, var = np.zeros_like(s_all), np.zeros_like(s2_all), np.zeros_like(s2_all), 0.0
    var_c = np.zeros(len(classes))  # noise variance of each class sum: the clients holding the class
    for (s, n, s2), (_, y) in zip(loc, parts):
        sd = sigma(eps, 1.0 / len(y))
        var += sd * sd
        present = n > 0
        var_c += np.where(present, sd * sd, 0.0)
        sn = s + rng.normal(0.0, sd, s.shape)
        s2n = s2 + sym_noise(rng, d, sd)
        s2_raw += s2n
        wn = psd(scatter(sn[present], n[present], s2n))
        s_pc += np.where(present[:, None], sn, 0.0)  # a client releases only the classes it holds
        s2_pc += wn + sum(np.outer(sn[i], sn[i]) / n[i] for i in np.flatnonzero(present))
    out["per_client"] = evaluate(s_pc, n_all, psd(scatter(s_pc, n_all, s2_pc)), xt, yt, classes)
    # the same releases merged without the per-client PSD projection (an upper bound of what merging can do):
    # what remains is the noise of the 50 releases' class sums and second moments
    out["per_client_raw"] = evaluate(s_pc, n_all, psd(scatter(s_pc, n_all, s2_raw)), xt, yt, classes)
    mean_sd = [math.sqrt(v) / c for v, c in zip(var_c, n_all)]
    out["per_client_mean_noise_norm"] = [m * math.sqrt(d) for m in mean_sd]
    out["per_client_sigma_rms"] = math.sqrt(var / k)
    # secure aggregation: shares N(0, sigma^2/k) on every entry of every client's (s, S2); one opening
    sd = sigma(eps, 1.0 / N)
    s_sa, s2_sa = s_all.copy(), s2_all.copy()
    for _ in range(k):
        s_sa += rng.normal(0.0, sd / math.sqrt(k), s_all.shape)
        s2_sa += sym_noise(rng, d, sd / math.sqrt(k))
    out["secagg"] = evaluate(s_sa, n_all, psd(scatter(s_sa, n_all, s2_sa)), xt, yt, classes)
    out["secagg_sigma"] = sd
    out["secagg_mean_noise_norm"] = [sd / c * math.sqrt(d) for c in n_all]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", required=True, help="pftnet launch --prepare-only output folder of star50")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                   "pacs-mobilenetv2"))
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--release", action="store_true",
                    help="also: no DP, the opened sum of every client's release-rule second moment")
    a = ap.parse_args()
    parts = load_parts(a.parts)
    xt = l2(np.load(os.path.join(a.data, "test_x.npy")))
    yt = np.load(os.path.join(a.data, "test_y.npy")).astype(int)
    classes = sorted(set(int(c) for _, y in parts for c in np.unique(y)))
    N = sum(len(y) for _, y in parts)
    print("clients %d, rows %d (%d..%d per client), classes %d, test rows %d, eps %g" %
          (len(parts), N, min(len(y) for _, y in parts), max(len(y) for _, y in parts), len(classes), len(yt),
           a.eps))
    if a.release:
        e = run_release(parts, xt, yt, classes)
        print("  %-14s oas alpha %.3f (grid %.2f) -> %.4f | oracle alpha %.2f -> %.4f" %
              ("release_sum", e["oas"][0], e["oas"][2], e["oas"][1], e["oracle"][0], e["oracle"][1]))
        print("             grid: " + " ".join("%.2f:%.4f" % (k, v) for k, v in e["grid"].items()))
        sys.stdout.flush()
    for seed in [int(s) for s in a.seeds.split(",") if s]:
        r = run(parts, a.eps, seed, xt, yt, classes)
        print("seed %d: secagg sigma %.3f (delta 1/%d); per-client sigma rms %.3f (delta 1/n_i), aggregate noise "
              "sd %.3f" % (seed, r["secagg_sigma"], N, r["per_client_sigma_rms"],
                           r["per_client_sigma_rms"] * math.sqrt(len(parts))))
        print("  expected norm of a class mean's noise: secagg %s; per-client %s (a class mean has norm <= 1)" %
              (" ".join("%.2f" % v for v in r["secagg_mean_noise_norm"]),
               " ".join("%.2f" % v for v in r["per_client_mean_noise_norm"])))
        for name in ("exact", "secagg", "per_client", "per_client_raw"):
            e = r[name]
            print("  %-14s oas alpha %.3f (grid %.2f) -> %.4f | oracle alpha %.2f -> %.4f" %
                  (name, e["oas"][0], e["oas"][2], e["oas"][1], e["oracle"][0], e["oracle"][1]))
            print("             grid: " + " ".join("%.2f:%.4f" % (k, v) for k, v in e["grid"].items()))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
