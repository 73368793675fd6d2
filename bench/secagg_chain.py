#!/usr/bin/python3
"""secagg_chain: chain5 (tied, no DP) with today's release rule vs secure aggregation (docs/SECAGG.md 6).

Today (stats_release = lowrank): a sends its release (q = min(rows // 20, 64, d - 1) eigenpairs + exact diagonal,
exact means); b merges it with its own exact rows and re-releases a + b at q = 10; c merges that with its rows...
Under secure aggregation with min_contributors = 2: a and b each mask their own release; c opens their sum
(a's q = 5 release + b's q = 5 release, merged exactly), adds its rows and from there on every hop is today's;
b's head uses only its own rows. (The rule as measured in docs/SECAGG.md: 20 rows per eigenpair; pftnode's
default is 15 since 2026-11-27.) Printed: each node's LDA accuracy on PACS's test split at a few fixed shrinkages
(the same alpha for both, so that only the statistics differ).

Partition: `pftnet launch configs/chain5.dot --out DIR --force --prepare-only --set cov=tied` (iid, 100 rows each).
Usage: /usr/bin/python3 bench/secagg_chain.py --parts DIR
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import secagg_dp as S  # noqa: E402

ALPHAS = [0.1, 0.3, 0.5, 0.7]


def exact(x, y, classes):
    s, n, s2 = S.stats(x, y, classes)
    return s, n, s2  # (class sums, counts, second moment sum x x^T)


def merge(p, q):
    return p[0] + q[0], p[1] + q[1], p[2] + q[2]


def release(p):
    """Today's release of a part: its within-class scatter at q = min(N // 20, 64, d - 1) + exact diagonal."""
    s, n, s2 = p
    return s, n, S.release_rule(s, n, s2)


def accuracy(p, xt, yt, classes):
    s, n, s2 = p
    N = n.sum()
    cov = S.scatter(s, n, s2) / N
    return [S.lda_acc(s / np.maximum(n, 1)[:, None], np.maximum(n, 1e-9) / N, cov, a, xt, yt, classes)
            for a in ALPHAS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", required=True)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                   "pacs-mobilenetv2"))
    a = ap.parse_args()
    names = "abcde"
    rows = {k: (S.l2(np.load(os.path.join(a.parts, k, "data", "train_x.npy"))),
                np.load(os.path.join(a.parts, k, "data", "train_y.npy")).astype(int)) for k in names}
    xt = S.l2(np.load(os.path.join(a.data, "test_x.npy")))
    yt = np.load(os.path.join(a.data, "test_y.npy")).astype(int)
    classes = sorted(set(int(c) for _, y in rows.values() for c in np.unique(y)))
    ex = {k: exact(*rows[k], classes) for k in names}
    today, secagg = {}, {}
    # today: each node's head on (received release) + own exact; it re-releases the merge
    recv = None
    for k in names:
        head = ex[k] if recv is None else merge(recv, ex[k])
        today[k] = accuracy(head, xt, yt, classes)
        recv = release(head)
    # secure aggregation (m = 2): a and b own rows only; c opens rel(a) + rel(b); then as today
    secagg["a"] = today["a"]
    secagg["b"] = accuracy(ex["b"], xt, yt, classes)
    recv = merge(release(ex["a"]), release(ex["b"]))
    for k in "cde":
        head = merge(recv, ex[k])
        secagg[k] = accuracy(head, xt, yt, classes)
        recv = release(head)
    print("chain5 tied, no DP; LDA accuracy on the test split at alpha %s" % ALPHAS)
    for k in names:
        print("  %s  today %s | secure aggregation %s" % (k, " ".join("%.4f" % v for v in today[k]),
                                                         " ".join("%.4f" % v for v in secagg[k])))


if __name__ == "__main__":
    main()
