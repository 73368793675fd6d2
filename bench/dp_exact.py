#!/usr/bin/env python3
"""DP on exact statistics against DP-FedPFT, and against each node's own rows alone.

For the paper's two-client shifts (configs/pacs_labelshift.dot, configs/pacs_covshift.dot) and each seed,
launches in the same run:
  - "DP exact LDA": cov = tied, dp_epsilon = 1 (δ = 1/n): the source releases its class sums alone, the
    destination's LDA head takes them as noisy components (docs/DESIGN.md §8, docs/SECURITY.md §6);
  - "DP-FedPFT": cov = diag, k = 1, dp_epsilon = 1 (the paper's DP-FedPFT, mechanism b3).
Every node's accuracy is on the union of both clients' test rows. Beside them, "own rows alone", twice:
  - "own (node)": what the node's head of its own statistics alone scores on the same rows (result.json
    accuracy_global_own_only, written when noisy components were kept; a node that received nothing has only
    its own rows, so its accuracy is that figure);
  - "own (numpy)": an LDA of the node's own training rows (read back from its data folder), its shrinkage
    chosen by 5-fold cross-validation over them on pftnode's grid (folds seeded here, not as pftnode does),
    computed with numpy independently of pftnode.
"No node below its own rows" is judged against "own (node)", the same head without what was received.

  python3 bench/dp_exact.py [--bin build/node] [--seeds 0,1,2] [--out DIR] [--only labelshift,covshift]

Needs numpy (/usr/bin/python3 on the project machines). Prints a table and writes DIR/summary.json.
"""
import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = [0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
CONFIGS = {"labelshift": "pacs_labelshift", "covshift": "pacs_covshift"}


def launch(pftnet, cfg, out, seed, sets):
    port = random.randint(20000, 40000)
    cmd = [pftnet, "launch", os.path.join(HERE, "configs", cfg + ".dot"), "--out", out, "--force", "--quiet",
           "--no-baselines", "--seed", str(seed), "--set", "port_base=%d" % port]
    for s in sets:
        cmd += ["--set", s]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("launch failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-2000:]))
    res = {}
    for n in json.load(open(os.path.join(out, "results.json")))["nodes"]:
        res[n["id"]] = json.load(open(os.path.join(out, n["id"], "result.json")))
    return res


class Lda:
    """LDA of class means mu, log priors and covariance S: one eigendecomposition, scores at any α."""

    def __init__(self, mu, logpi, S):
        self.ev, self.V = np.linalg.eigh(S)
        self.ev = np.maximum(self.ev, 0)
        self.M, self.logpi = mu @ self.V, logpi

    def scores(self, Xe, a):
        e = (1 - a) * self.ev + a * self.ev.sum() / len(self.ev)
        P = Xe @ self.V
        q = (P ** 2 / e).sum(1)[:, None] - 2 * (P / e) @ self.M.T + ((self.M ** 2) / e).sum(1)[None]
        return -0.5 * q + self.logpi


def fit_stats(x, y, C):
    n = np.array([(y == c).sum() for c in range(C)], float)
    mu = np.array([x[y == c].mean(0) if n[c] else np.zeros(x.shape[1]) for c in range(C)])
    xc = x - mu[y]
    logpi = np.where(n > 0, np.log(np.maximum(n, 1) / n.sum()), -np.inf)
    return mu, logpi, xc.T @ xc / len(y)


def own_rows_accuracy(x, y, Xe, Ye, C, seed=0, folds=5):
    """LDA of the own rows, α by stratified k-fold CV over them (pftnode's grid; α = 0 skipped if singular)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), int)
    for c in range(C):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        fold[idx] = np.arange(len(idx)) % folds
    right = {a: 0 for a in GRID}
    for f in range(folds):
        tr, te = fold != f, fold == f
        m = Lda(*fit_stats(x[tr], y[tr], C))
        for a in GRID:
            if a == 0 and m.ev.min() <= 1e-12 * m.ev.max():  # singular: not a valid point (as in pftnode)
                right[a] = -1
                continue
            right[a] += (m.scores(x[te], a).argmax(1) == y[te]).sum()
    best = max(GRID, key=lambda a: (right[a], a))
    return float((Lda(*fit_stats(x, y, C)).scores(Xe, best).argmax(1) == Ye).mean()), best


def load_rows(node_dir):
    d = os.path.join(node_dir, "data")
    x = np.load(os.path.join(d, "train_x.npy")).astype(np.float64)
    y = np.load(os.path.join(d, "train_y.npy")).astype(int)
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


def test_rows(node_dirs):
    xs, ys = [], []
    for nd in node_dirs:
        d = os.path.join(nd, "data")
        xs.append(np.load(os.path.join(d, "test_x.npy")).astype(np.float64))
        ys.append(np.load(os.path.join(d, "test_y.npy")).astype(int))
    x = np.concatenate(xs)
    return x / np.linalg.norm(x, axis=1, keepdims=True), np.concatenate(ys)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "build", "node"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default=os.path.join(HERE, "runs", "dp_exact"))
    ap.add_argument("--only", default="labelshift,covshift")
    args = ap.parse_args()
    pftnet = os.path.join(args.bin, "pftnet")
    os.environ["PFTNODE"] = os.path.join(args.bin, "pftnode")
    summary = []
    print("%-10s %-4s %-6s %9s %9s %10s %11s %6s %5s" % ("exp", "seed", "node", "DP exact", "DP-FedPFT",
                                                         "own(node)", "own(numpy)", "alpha", "comps"))
    for exp in args.only.split(","):
        for seed in [int(s) for s in args.seeds.split(",")]:
            base = os.path.join(args.out, exp, "s%d" % seed)
            ex = launch(pftnet, CONFIGS[exp], base + "-exact", seed, ["cov=tied", "dp_epsilon=1"])
            fp = launch(pftnet, CONFIGS[exp], base + "-fedpft", seed, ["cov=diag", "k=1", "dp_epsilon=1"])
            dirs = [os.path.join(base + "-exact", n) for n in ex]
            Xe, Ye = test_rows(dirs)
            C = int(Ye.max()) + 1
            for n in ex:
                x, y = load_rows(os.path.join(base + "-exact", n))
                own, a_own = own_rows_accuracy(x, y, Xe, Ye, C)
                g = ex[n].get("gaussian_head") or {}
                own_node = ex[n].get("accuracy_global_own_only")
                if own_node is None and not g.get("noisy_components"):
                    own_node = ex[n]["accuracy_global"]  # nothing received kept: its head is its own rows'
                row = {"exp": exp, "seed": seed, "node": n, "dp_exact": ex[n]["accuracy_global"],
                       "dp_fedpft": fp[n]["accuracy_global"], "own_node": own_node, "own_numpy": own,
                       "own_numpy_alpha": a_own,
                       "alpha": g.get("alpha"), "noisy_components": g.get("noisy_components", 0),
                       "cv_accuracy": g.get("cv_accuracy"), "cv_accuracy_own_only": g.get("cv_accuracy_own_only"),
                       "bytes_sent_exact": ex[n]["bytes_sent"], "bytes_sent_fedpft": fp[n]["bytes_sent"]}
                summary.append(row)
                print("%-10s %-4d %-6s %9.4f %9.4f %10.4f %11.4f %6s %5s" % (
                    exp, seed, n, row["dp_exact"], row["dp_fedpft"], own_node, own, row["alpha"],
                    row["noisy_components"]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for exp in args.only.split(","):
        rows = [r for r in summary if r["exp"] == exp]
        sinks = [r for r in rows if r["noisy_components"] or r["cv_accuracy_own_only"] is not None]
        if sinks:
            m = np.mean([r["dp_exact"] for r in sinks])
            f = np.mean([r["dp_fedpft"] for r in sinks])
            print("%s: destination DP exact %.4f vs DP-FedPFT %.4f (mean of %d seeds)" % (exp, m, f, len(sinks)))
        below = [r for r in rows if r["dp_exact"] < r["own_node"]]
        print("%s: nodes below their own rows alone: %d of %d" % (exp, len(below), len(rows)))


if __name__ == "__main__":
    main()
