#!/usr/bin/python3
"""Reference pipeline for `pftnet synth`: scikit-learn GaussianMixture per class + LogisticRegression.

Same protocol as pftnet synth: L2-normalised features, one GMM per class, as many samples per class as the
class had, LogisticRegression(lbfgs, C=1) on the samples vs on the raw features, accuracy on the test set.
(sklearn keeps parameters in float64; pftnet additionally rounds them to fp16 as on the wire.)

usage: /usr/bin/python3 bench/synth_reference.py [--data DIR] [--cov diag] [--k 10] [--seed 0]
prints one JSON object: {"acc_raw":..., "acc_synth":..., "cov":..., "k":..., "fit_seconds":..., "lr_seconds":...}
"""
import argparse
import json
import os
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.mixture import GaussianMixture


def l2(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1
    return x / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))  # bench/; the data lives beside the repository
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data", "pacs-mobilenetv2"))
    ap.add_argument("--cov", default="diag", choices=["full", "diag", "spherical", "spher"])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-raw", action="store_true", help="do not train the raw-feature head")
    a = ap.parse_args()
    cov = "spherical" if a.cov == "spher" else a.cov
    xtr = l2(np.load(f"{a.data}/train_x.npy").astype(np.float64))
    ytr = np.load(f"{a.data}/train_y.npy")
    xte = l2(np.load(f"{a.data}/test_x.npy").astype(np.float64))
    yte = np.load(f"{a.data}/test_y.npy")
    rng = np.random.RandomState(a.seed)
    xs, ys = [], []
    t0 = time.time()
    for c in np.unique(ytr):
        xc = xtr[ytr == c]
        g = GaussianMixture(n_components=min(a.k, len(xc)), covariance_type=cov, reg_covar=1e-6,
                            random_state=a.seed).fit(xc)
        s, _ = g.sample(len(xc))
        xs.append(s)
        ys.append(np.full(len(xc), c))
    fit_s = time.time() - t0
    xs, ys = np.vstack(xs), np.concatenate(ys)
    out = {"cov": a.cov, "k": a.k, "seed": a.seed, "fit_seconds": fit_s}
    t0 = time.time()
    out["acc_synth"] = float(LogisticRegression(C=1.0, max_iter=5000).fit(xs, ys).score(xte, yte))
    if not a.skip_raw:
        out["acc_raw"] = float(LogisticRegression(C=1.0, max_iter=5000).fit(xtr, ytr).score(xte, yte))
    out["lr_seconds"] = time.time() - t0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
