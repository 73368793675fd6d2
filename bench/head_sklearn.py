"""scikit-learn side of bench/head_bench.sh, and its table.

fit PREFIX PFTNET_JSON [--repeat N]
    Fits LogisticRegression (lbfgs, multinomial) on the workload head_bench wrote under PREFIX (same rows,
    same float32 features, same weights; PFTNET_JSON: head_bench's line, for l2, tol and max_iter) and
    prints one JSON line per setting, with the objective f and test accuracy computed in float64 as
    head_bench computes pftnet's:
      - "sklearn (same tol)": tol = pftnet's tol · Σw. scikit-learn 1.2's lbfgs minimises Σw·f (sample
        weights not normalised, l2_reg_strength = 1/C), so this stops at the same max |gradient of f|
        as pftnet's tol.
      - "sklearn (tol 1e-4)": its default tol, as a user would run it (Σw times stricter in f's units).
    Both with C = 1/(l2·Σw), i.e. the same objective. Time: the fastest of --repeat fits (fit() converts
    the float32 input to float64 itself, inside the timed call).
table JSONL
    Prints one table per workload: time, iterations, objective f (float64), test accuracy, time ratio.
"""
import argparse
import json
import time

import numpy as np


def objective(coef, icpt, x, y, w, l2):
    """f = Σ w_i CE_i / Σ w + (l2/2)‖W‖² in float64."""
    z = x @ coef.T + icpt
    zmax = z.max(axis=1, keepdims=True)
    lse = zmax[:, 0] + np.log(np.exp(z - zmax).sum(axis=1))
    ce = lse - z[np.arange(len(y)), y]
    return float((w * ce).sum() / w.sum() + 0.5 * l2 * (coef**2).sum())


def accuracy(coef, icpt, x, y):
    return float(((x @ coef.T + icpt).argmax(axis=1) == y).mean())


def fit(a):
    from sklearn.linear_model import LogisticRegression

    p = json.loads(a.pftnet_json)
    ld = lambda s: np.load(f"{a.prefix}_{s}.npy")
    x, y, w, tx, ty = ld("x"), ld("y"), ld("w").astype(np.float64), ld("tx"), ld("ty")
    x64, tx64 = x.astype(np.float64), tx.astype(np.float64)
    l2, wsum = p["l2"], w.sum()
    for name, tol in (("sklearn (same tol)", p["tol"] * wsum), ("sklearn (tol 1e-4)", 1e-4)):
        best, m = np.inf, None
        for _ in range(a.repeat):
            m = LogisticRegression(C=1.0 / (l2 * wsum), tol=tol, max_iter=p["max_iter"])
            t0 = time.perf_counter()
            m.fit(x, y, sample_weight=w)
            best = min(best, time.perf_counter() - t0)
        print(json.dumps(dict(workload=p["workload"], tool=name, time=best, iters=int(m.n_iter_[0]), tol=tol,
                              f=objective(m.coef_, m.intercept_, x64, y, w, l2),
                              test_acc=accuracy(m.coef_, m.intercept_, tx64, ty))), flush=True)


def table(a):
    rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
    for wl in dict.fromkeys(r["workload"] for r in rows):
        rs = [r for r in rows if r["workload"] == wl]
        p = next(r for r in rs if r["tool"] == "pftnet")
        print(f"\n{wl}: {p['rows']} rows × {p['d']}, {p['classes']} classes, Σw = {p['weight_sum']:.1f}, "
              f"l2 = {p['l2']:.4g}, pftnet tol {p['tol']:g} (max |∇f|)")
        print(f"  {'tool':<20} {'time s':>8} {'iters':>6} {'evals':>6} {'objective f':>14} {'test acc':>9} "
              f"{'time / pftnet':>14}")
        for r in rs:
            evals = str(r.get("evals", "-"))
            print(f"  {r['tool']:<20} {r['time']:8.3f} {r['iters']:6d} {evals:>6} {r['f']:14.9f} "
                  f"{r['test_acc']:9.4f} {r['time'] / p['time']:13.1f}×")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("prefix")
    f.add_argument("pftnet_json")
    f.add_argument("--repeat", type=int, default=1)
    t = sub.add_parser("table")
    t.add_argument("jsonl")
    a = ap.parse_args()
    fit(a) if a.cmd == "fit" else table(a)


if __name__ == "__main__":
    main()
