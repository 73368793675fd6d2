#!/usr/bin/env python3
"""bench/release_rank.py: what the release rule's rows per eigenpair buys and reveals, on a star.

For a star whose clients' data `pftnet launch --prepare-only` wrote (e.g. configs/star50.dot), replays the
default exact release of every client in numpy, exactly as pftnode builds it (docs/DESIGN.md §8): per class
with at least `min_rows` rows, its count and mean; the within-class scatter W as its q leading eigenpairs
plus its exact diagonal, q = min(rows / R, 64, d - 1), the isotropic variance only below 20 rows. Then, for
each R given:

- accuracy: the data-less aggregator's LDA head on the merged statistics (the exact merge: summed scatters
  plus the between-part terms of the class means; shrinkage toward tr/d at OAS's alpha, as pftnode picks it
  for a node without rows), on the union of the clients' test splits;
- membership: per client, the attack of `pftnet audit` on span(released factor, class means) (the relative
  residual of a row outside the span; the balanced accuracy of the best threshold, own training rows against
  the client's own test rows, both of the classes the part releases, as the audit gathers them), its median over clients, how many clients are above 0.6 (WARN) and at 0.9 or
  more (FAIL), beside the same attack on the class means alone.

The replay is checked against pftnode: on configs/star50.dot, seed 0, R = 20 it gives the node's 84.78 % to
the row. Usage:

  pftnet launch configs/star50.dot --out /tmp/s50 --seed 0 --set cov=tied --prepare-only
  /usr/bin/python3 bench/release_rank.py /tmp/s50 --rows-per-rank 20,15,12,10
"""
import argparse
import glob
import os
import sys

import numpy as np

MIN_DIAG_ROWS = 20  # PFT_TOPO_RELEASE_MIN_DIAG_ROWS
RANK_CAP = 64       # stats_rank's default


def l2(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def load(run):
    dirs = sorted(d for d in glob.glob(os.path.join(run, "*", "data")) if os.path.exists(d + "/train_x.npy"))
    if not dirs:
        sys.exit(f"release_rank: no node data under {run} (run pftnet launch ... --prepare-only first)")
    tr = [(l2(np.load(d + "/train_x.npy").astype(np.float64)), np.load(d + "/train_y.npy").astype(int))
          for d in dirs]
    te = [(l2(np.load(d + "/test_x.npy").astype(np.float64)), np.load(d + "/test_y.npy").astype(int))
          for d in dirs]
    return tr, te


class Client:
    """One client's released classes, its exact scatter's eigendecomposition and diagonal."""

    def __init__(self, x, y, C, min_rows):
        d = x.shape[1]
        self.cnt, self.sums, self.means, self.released = np.zeros(C), np.zeros((C, d)), [], []
        W = np.zeros((d, d))
        for c in range(C):
            xc = x[y == c]
            if len(xc) >= min_rows:
                m = xc.mean(0)
                self.cnt[c], self.sums[c] = len(xc), xc.sum(0)
                self.released.append(c)
                self.means.append(m)
                W += (xc - m).T @ (xc - m)
        self.N = int(self.cnt.sum())
        self.diag, self.trace = np.diag(W).copy(), np.trace(W)
        lam, U = np.linalg.eigh(W)
        self.lam, self.U = lam[::-1], U[:, ::-1]

    def rank(self, R):
        d = len(self.diag)
        return 0 if self.N < MIN_DIAG_ROWS else min(self.N // R, RANK_CAP, d - 1)

    def scatter(self, R):
        q, d = self.rank(R), len(self.diag)
        if q == 0:
            return np.eye(d) * (self.trace / d)
        U, lam = self.U[:, :q], self.lam[:q]
        L = (U * lam) @ U.T
        return L + np.diag(self.diag - np.sum(U * U * lam, 1))


def oas(lam, N, d):
    mu = lam.sum() / (N * d)
    a = np.sum((lam / N) ** 2) / d**2
    den = (N + 1) * (a - mu * mu / d)
    return 1.0 if den <= 0 else min(max((a + mu * mu) / den, 0.0), 1.0)


def accuracy(clients, R, xt, yt):
    d = xt.shape[1]
    n = sum(c.cnt for c in clients)
    mu = sum(c.sums for c in clients) / np.maximum(n, 1)[:, None]
    W = sum(c.scatter(R) for c in clients)
    for c in clients:
        for k in np.nonzero(c.cnt)[0]:
            dm = c.sums[k] / c.cnt[k] - mu[k]
            W += c.cnt[k] * np.outer(dm, dm)
    N = n.sum()
    lam, E = np.linalg.eigh(W / N)
    lam = np.maximum(lam, 0)
    a = oas(lam * N, N, d)
    D = (1 - a) * lam + a * lam.sum() / d
    mbar = (n / N) @ mu
    w = (E @ ((E.T @ (mu - mbar).T) / D[:, None])).T
    b = np.log(np.maximum(n, 1e-300) / N) - 0.5 * np.sum(w * (mu + mbar), 1)
    return float((np.argmax(xt @ w.T + b, 1) == yt).mean()), a


def balanced(r_own, r_held):
    v = np.concatenate([r_own, r_held])
    lab = np.r_[np.ones(len(r_own)), np.zeros(len(r_held))][np.argsort(v, kind="stable")]
    tp = np.cumsum(lab) / len(r_own)
    tn = 1 - np.cumsum(1 - lab) / len(r_held)
    return max(0.5, float(np.max(0.5 * (tp + tn))))


def membership(c, x, y, xh, yh, q):
    """The audit's attack (pft_audit__gather: only rows of the classes the part releases, own and held out)."""
    cols = ([c.U[:, :q]] if q else []) + ([np.array(c.means).T] if c.means else [])
    x, xh = x[np.isin(y, c.released)], xh[np.isin(yh, c.released)]
    if not cols or len(x) == 0 or len(xh) == 0:
        return None
    B, _ = np.linalg.qr(np.hstack(cols))

    def res(z):
        return np.linalg.norm(z - (z @ B) @ B.T, axis=1) / np.linalg.norm(z, axis=1)

    return balanced(res(x), res(xh))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a star's folder written by pftnet launch --prepare-only")
    p.add_argument("--rows-per-rank", default="20,15,12,10", help="comma-separated values of R")
    p.add_argument("--min-rows", type=int, default=5, help="the privacy floor (min_rows)")
    a = p.parse_args()
    Rs = [int(r) for r in a.rows_per_rank.split(",")]
    tr, te = load(a.run)
    C = int(max(max(y.max() for _, y in tr), max(y.max() for _, y in te))) + 1
    xt = np.concatenate([x for x, _ in te])
    yt = np.concatenate([y for _, y in te])
    clients = [Client(x, y, C, a.min_rows) for x, y in tr]
    print(f"{a.run}: {len(clients)} clients, {sum(c.N for c in clients)} rows released, {len(yt)} test rows")
    base = [membership(c, x, y, xh, yh, 0) for c, (x, y), (xh, yh) in zip(clients, tr, te)]
    base = np.array([v for v in base if v is not None])
    print(f"class means alone: membership median {np.median(base):.3f}, max {base.max():.3f}, "
          f"> 0.6: {(base > 0.6).sum()}, >= 0.9: {(base >= 0.9).sum()}")
    for R in Rs:
        acc, alpha = accuracy(clients, R, xt, yt)
        m = [membership(c, x, y, xh, yh, c.rank(R)) for c, (x, y), (xh, yh) in zip(clients, tr, te)]
        m = np.array([v for v in m if v is not None])
        print(f"R = {R:3d}: accuracy {100 * acc:.2f} % (alpha {alpha:.4f}); factor + means membership median "
              f"{np.median(m):.3f}, mean {m.mean():.3f}, max {m.max():.3f}, > 0.6: {(m > 0.6).sum()}, "
              f">= 0.9: {(m >= 0.9).sum()}", flush=True)


if __name__ == "__main__":
    main()
