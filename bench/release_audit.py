#!/usr/bin/env python3
"""bench/release_audit.py: what the exact-statistics release costs and reveals (SECURITY.md §9).

For each topology (a 3-node chain on chain5's data, configs/chain5.dot, configs/star20.dot, configs/star50.dot)
and each release (`stats_release = lowrank`, the default, and `full_scatter`, the research setting), runs
`pftnet launch ... --set cov=tied`, then `pftnet audit --json` on every bundle a node with rows sent (or the
first `--max-audits` of them), with held-out rows that are not the producer's. By default (`--holdout pooled`)
those are every node's test split (rows no bundle holds) and, in a chain, the last node's training rows: a few
hundred non-members per class, so that a verdict on a small class is not a verdict on its 2-3 own test rows;
`--holdout own` gives the earlier choice (the chain's last node's rows, a star client's own test split). Prints one line per bundle (attack figures, with the zero-support test's worst
class) and one per run (accuracy of the node(s) holding everyone's knowledge, bytes sent), and writes everything to OUT/summary.json.

usage: bench/release_audit.py [--bin build/node] [--out /tmp/pft_release] [--lp 400] [--seed 0]
                              [--only chain3,star20,star50,chain5] [--releases lowrank,full_scatter]
                              [--holdout pooled|own] [--set mean_noise=0 ...]   (attributes for the launch; the audit is told the
                                                             run's mean_noise where set, else assumes the default)
"""
import argparse
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def launch(a, name, dot, release, extra):
    out = os.path.join(a.out, f"{name}-{release}")
    cmd = [os.path.join(a.bin, "pftnet"), "launch", dot, "--out", out, "--force", "--seed", str(a.seed),
           "--no-baselines", "--quiet", "--set", "cov=tied", "--set", f"stats_release={release}",
           "--set", f"port_base={random.randint(20000, 40000)}"] + extra + [
               x for kv in a.set for x in ("--set", kv)]
    env = dict(os.environ, PFTNODE=os.path.join(a.bin, "pftnode"))
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def pooled_holdout(run, nodes, extra):
    """Every node's test split, and the (node, split) pairs in extra, into run/holdout_pool_{x,y}.npy; their paths.
    None of these rows is in any audited bundle (a test split never leaves its node; extra names a node whose
    rows reach no audited bundle)."""
    import numpy as np
    xs, ys = [], []
    for node, split in [(n, "test") for n in nodes] + list(extra):
        px = os.path.join(run, node, "data", f"{split}_x.npy")
        if os.path.exists(px):
            xs.append(np.load(px))
            ys.append(np.load(os.path.join(run, node, "data", f"{split}_y.npy")))
    hx, hy = os.path.join(run, "holdout_pool_x.npy"), os.path.join(run, "holdout_pool_y.npy")
    np.save(hx, np.concatenate(xs))
    np.save(hy, np.concatenate(ys))
    return hx, hy


def audit(a, run, node, held):
    d = os.path.join(run, node)
    hx, hy = held
    cmd = [os.path.join(a.bin, "pftnet"), "audit", os.path.join(d, "bundle.pftb"), "--features",
           os.path.join(d, "data", "train_x.npy"), "--labels", os.path.join(d, "data", "train_y.npy"),
           "--holdout-features", hx, "--holdout-labels", hy, "--lp", str(a.lp), "--json", "--fail-on", "never"] + (
               ["--mean-noise", a.mean_noise] if a.mean_noise is not None else [])
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"audit of {d} failed ({r.returncode}): {r.stderr}")
    o = json.loads(r.stdout)
    at = o["attacks"]
    sub = at["subspace"]["parts"]
    spec = [p for p in sub if p.get("basis", "spectrum") == "spectrum"]
    fac = [p for p in sub if p.get("basis") == "factor"]
    means = [p for p in sub if p.get("basis") == "means"]

    def worst(ps):
        accs = [p["accuracy"] for p in ps if p.get("accuracy") is not None]
        return max(accs) if accs else None

    return {
        "node": node, "bytes": os.path.getsize(os.path.join(d, "bundle.pftb")), "rank": o.get("shared_rank"),
        "own_rows": o["summary"]["own_rows"], "spectrum_proper": any(p["proper"] for p in spec),
        "spectrum_acc": worst(spec), "factor_acc": worst(fac), "means_acc": worst(means),
        "rows_recovered": sum(v.get("rows_recovered", 0) for v in at["vertex"]["parts"]),
        "programs": sum(v.get("programs", 0) for v in at["vertex"]["parts"]),
        "nearest_min_ratio": at["nearest"].get("min_ratio"), "auc": at["likelihood"].get("auc"),
        "verdict": o["verdict"], "exact_leak": o["exact_leak"],
        "zero_support": at["zero_support"],
    }


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def zero_text(z):
    """The zero-support test's worst class: accuracy, its rows, who passes."""
    w = z.get("worst")
    if not w:
        return f"zero support {z['verdict']} (not measured)"
    return (f"zero support {w['accuracy']:.3f} (class {w['label']}, {w['rows']:.0f} rows, {w['zeros']} zeros, "
            f"margin {w.get('margin', 0)}, "
            f"{w['own_pass']}/{w['own_rows']} own, {w['holdout_pass']}/{w['holdout_rows']} held-out pass) "
            f"{z['verdict']}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "node"))
    p.add_argument("--out", default="/tmp/pft_release")
    p.add_argument("--lp", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-audits", type=int, default=60)
    p.add_argument("--only", default="chain3,star20,star50")
    p.add_argument("--releases", default="lowrank,full_scatter")
    p.add_argument("--holdout", choices=("pooled", "own"), default="pooled",
                   help="non-members: every node's test split (+ a chain's last node's rows), or as before")
    p.add_argument("--set", action="append", default=[], metavar="K=V", help="an attribute for every launch")
    a = p.parse_args()
    # the audit is told the run's mean_noise where --set gives it; else it assumes the default, as the run did
    a.mean_noise = next((kv.split("=")[1] for kv in a.set if kv.startswith("mean_noise=")), None)
    a.bin = os.path.abspath(a.bin)
    os.makedirs(a.out, exist_ok=True)
    chain3 = os.path.join(a.out, "chain3.dot")
    with open(os.path.join(ROOT, "configs", "chain5.dot")) as f:
        open(chain3, "w").write(f.read().replace("a -> b -> c -> d -> e;", "a -> b -> c;")
                                .replace("digraph chain5", "digraph chain3")
                                .replace('"../../shared', '"' + os.path.join(ROOT, "..", "shared")))
    topo = {
        "chain3": (chain3, ["a", "b"], lambda n: ("c", "train")),
        "chain5": (os.path.join(ROOT, "configs", "chain5.dot"), ["a", "b", "c", "d"], lambda n: ("e", "train")),
        "star20": (os.path.join(ROOT, "configs", "star20.dot"), None, lambda n: (n, "test")),
        "star50": (os.path.join(ROOT, "configs", "star50.dot"), None, lambda n: (n, "test")),
    }
    summary = []
    for name in a.only.split(","):
        dot, senders, held = topo[name]
        for release in a.releases.split(","):
            run = launch(a, name, dot, release, [])
            res = json.load(open(os.path.join(run, "results.json")))
            nodes = res["nodes"] if isinstance(res["nodes"], list) else list(res["nodes"].values())
            ids = senders or sorted(n["id"] for n in nodes if n.get("bytes_sent", 0) > 0 and n.get("n_real", 0))
            rows = []
            pool = None
            if a.holdout == "pooled":
                last = [held(None)] if senders else []
                pool = pooled_holdout(run, sorted(n["id"] for n in nodes), last)
            for node in ids[: a.max_audits]:
                h = pool or tuple(os.path.join(run, held(node)[0], "data", f"{held(node)[1]}_{k}.npy")
                                  for k in ("x", "y"))
                r = audit(a, run, node, h)
                rows.append(r)
                print(f"{name:7} {release:12} {node:7} rows {r['own_rows']:5} rank {fmt(r['rank'], '%d'):>3} "
                      f"{r['bytes'] / 1e3:8.1f} kB  spectrum {'GAP' if r['spectrum_proper'] else 'none':4} "
                      f"acc {fmt(r['spectrum_acc'])}  means acc {fmt(r['means_acc'])}  factor acc {fmt(r['factor_acc'])}  rows recovered "
                      f"{r['rows_recovered']}/{r['programs']} LPs  nearest {fmt(r['nearest_min_ratio'])}  "
                      f"AUC {fmt(r['auc'])}  {zero_text(r['zero_support'])}  "
                      f"{r['verdict']}{' EXACT LEAK' if r['exact_leak'] else ''}", flush=True)
            accs = {n["id"]: n.get("accuracy_global") for n in nodes}
            sent = sum(n.get("bytes_sent", 0) for n in nodes)
            last = max(accs.values(), key=lambda v: v or 0)
            print(f"{name:7} {release:12} best node accuracy {fmt(last, '%.4f')}  bytes sent {sent / 1e6:.2f} MB",
                  flush=True)
            summary.append({"topology": name, "release": release, "accuracy": accs, "bytes_sent": sent,
                            "bundles": rows})
            json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
