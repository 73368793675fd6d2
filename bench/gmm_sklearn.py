#!/usr/bin/python3
"""Benchmark helper: per-class scikit-learn GaussianMixture fit, time and avg log-likelihood (JSON on stdout).

Also writes preprocessed copies of the features for the other tools (--write-prep).

  gmm_sklearn.py --features X.npy --labels Y.npy [--k 10] [--cov diag] [--max-iter 100] [--tol 0]
                 [--seed 0] [--prep l2|none] [--init k-means++|kmeans] [--reg-covar 1e-6] [--json]
  gmm_sklearn.py --features X.npy --prep l2 --write-prep OUT.npy

Fit per class c: GaussianMixture(n_components=K, covariance_type=cov, max_iter=N, tol=tol, reg_covar,
init_params, random_state=seed + c).fit(X_c); only fit() is timed (wall clock, and process CPU time of all
threads), summed over classes.
With tol=0 sklearn's test |change| < tol never holds, so every class runs exactly max_iter E/M iterations
(n_iter_ == max_iter); n_iter_ is reported (min and max over classes).
avg_loglik = sum_c n_c * score(X_c) / n = mean over all samples of log p(x | its class's GMM).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np


def preprocess(x, prep):
    """Applies the run-wide preprocessing; float64 arithmetic, float32 result."""
    if prep == "none":
        return np.ascontiguousarray(x, dtype=np.float32)
    if prep == "l2":
        x64 = x.astype(np.float64)
        norms = np.linalg.norm(x64, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(x64 / norms, dtype=np.float32)
    raise ValueError("unknown --prep %r" % prep)


def blas_threads():
    """Threads numpy's BLAS and sklearn's OpenMP will use (threadpoolctl ships with sklearn)."""
    try:
        from threadpoolctl import threadpool_info
        return {i["user_api"] + ":" + i["internal_api"]: i["num_threads"] for i in threadpool_info()}
    except Exception as e:  # pragma: no cover - informative only
        return {"unknown": str(e)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", required=True)
    ap.add_argument("--labels")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--cov", default="diag", choices=["full", "diag", "spher", "spherical", "tied"])
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--tol", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prep", default="l2", choices=["none", "l2"])
    ap.add_argument("--init", default="k-means++", choices=["k-means++", "kmeans", "random", "random_from_data"])
    ap.add_argument("--reg-covar", type=float, default=1e-6)
    ap.add_argument("--write-prep", metavar="OUT.npy", help="write the preprocessed features and exit")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    x = preprocess(np.load(a.features), a.prep)
    if a.write_prep:
        tmp = a.write_prep + ".tmp.npy"
        np.save(tmp, x)
        os.replace(tmp, a.write_prep)
        return 0
    if not a.labels:
        ap.error("--labels is required unless --write-prep is given")
    y = np.load(a.labels).astype(np.int64)
    if y.shape != (x.shape[0],):
        ap.error("labels shape %s does not match features %s" % (y.shape, x.shape))

    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    cov = "spherical" if a.cov == "spher" else a.cov
    classes = np.unique(y)
    seconds = 0.0
    cpu = 0.0
    ll_sum = 0.0
    iters = []
    for c in classes:
        xc = x[y == c]
        gm = GaussianMixture(n_components=a.k, covariance_type=cov, max_iter=a.max_iter, tol=a.tol,
                             reg_covar=a.reg_covar, init_params=a.init, random_state=a.seed + int(c))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # expected with tol=0
            c0 = time.process_time()
            t0 = time.perf_counter()
            gm.fit(xc)
            seconds += time.perf_counter() - t0
            cpu += time.process_time() - c0
        ll_sum += gm.score(xc) * xc.shape[0]
        iters.append(int(gm.n_iter_))

    res = {"tool": "sklearn", "version": sklearn.__version__, "classes": int(len(classes)), "n": int(x.shape[0]),
           "d": int(x.shape[1]), "k": a.k, "cov": a.cov, "init": a.init, "avg_loglik": ll_sum / x.shape[0],
           "iters": max(iters), "iters_min": min(iters), "seconds": seconds, "cpu_seconds": cpu, "threads": blas_threads()}
    if a.json:
        print(json.dumps(res))
    else:
        for key, v in res.items():
            print("%-12s %s" % (key, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
