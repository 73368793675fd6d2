#!/usr/bin/env python3
"""bench/release_zero.py: what the zero-support membership test decides on the default exact release, and what a
per-class floor for releasing a mean (withhold class means of fewer than m rows) leaves of it.

The features are ReLU outputs (>= 0), so a released class mean is exactly 0 where every row of the class is 0:
a row "passes" when it is 0 on that zero set Z (node/audit/pft_zerosupport.h; members always pass). Replays, for
a run folder written by `pftnet launch ... --prepare-only` (or a full launch), each released part of the
default exact release (`cov = tied`; a star client's own rows; a chain's part k sums the rows of nodes a..k,
the bundle node k sends; the last node sends nothing), each of its classes as pftnode's floor releases it
(min_rows = m: a node's own class joins its part when own + received rows of the class reach m, else it is
withheld, SECURITY.md §8):

- Z: the coordinates where every row of the class in the part is 0 (what the mean's zeros say, before fp16
  rounding, which can only add coordinates where a row is below 3e-8 * n);
- non-members: every row of the class in the dataset the run drew from (--pool, train and test) that is not
  a training row of the part's contributors: hundreds to thousands per class, many more than the audit's
  held-out rows, so the pass rate p is measured, not guessed;
- the test's balanced accuracy 1/2 (1 + (1 - p)) (members pass with probability 1).

Prints, per m, the released classes, how many reach 0.6 and 0.9, the worst class with its rows, and the pass
rate by class size. The accuracy each m costs is measured with the node itself (min_rows is that floor):
`pftnet launch configs/chain5.dot --out D --seed S --set cov=tied --set min_rows=M` (see bench/README.md).

Rule pos:M:R:S is the positive perturbation s + |e| instead (emulated only: without rescaling it breaks the
plausibility checks of SECURITY.md 7.1, as unscaled noise did). Rule noise:M:R:S replays pftnode's mean_noise = S (floor M; every own class released standing for fewer than R
rows gets Gaussian noise of std S per coordinate on its sum, rescaled to the sum's norm, as
core/pft_meannoise.h) and runs the bound test (a member lies under its class sum everywhere; zero support is
the case sum = 0) as an attacker who knows S: at margins of c = 0..4 noise std, and the best threshold.
Rule shape:M:R:S is that noise shaped per coordinate (std S * sqrt(v_j / mean v), v the part's pooled
within-class variance: bench/meannoise_shape.patch's diag shape with lambda = 1), the attacker's margin scaled
by the same shape (bench/README.md "Shaped mean noise").

usage: bench/release_zero.py RUN --kind chain|star [--null] [--rules floor:5,...,zerofree:5,loo:5,noise:5:1000000:0.05]
       bench/release_zero.py RUN --kind chain|star --withhold zerofree:5   (RUN from --prepare-only; then run
                                                                            the pftnode commands it printed)
"""
import argparse
import glob
import os
import sys

import numpy as np


def l2(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)  # prep l2 keeps the zeros


def load(run, pool):
    """Per node with rows: its training rows (l2) and labels, and the keys of its raw rows; the pool's rows."""
    nodes = {}
    for d in sorted(glob.glob(os.path.join(run, "*", "data"))):
        if not os.path.exists(d + "/train_x.npy"):
            continue
        x = np.load(d + "/train_x.npy").astype(np.float32)
        nodes[os.path.basename(os.path.dirname(d))] = (l2(x), np.load(d + "/train_y.npy").astype(int),
                                                       {r.tobytes() for r in x})
    if not nodes:
        sys.exit(f"release_zero: no node data under {run} (pftnet launch ... --prepare-only first)")
    px = np.concatenate([np.load(f"{pool}/{s}_x.npy").astype(np.float32) for s in ("train", "test")])
    py = np.concatenate([np.load(f"{pool}/{s}_y.npy").astype(int) for s in ("train", "test")])
    keys = [r.tobytes() for r in px]
    return nodes, (l2(px), py, keys)


def parts(nodes, kind):
    """The released parts: (sender, contributors)."""
    names = sorted(nodes)
    if kind == "star":
        return [(n, [n]) for n in names]
    return [(n, names[: i + 1]) for i, n in enumerate(names[:-1])]


LOO_PASS = 0.8  # a fresh row passing with probability p gives the test 1 - p/2: 0.6 at p = 0.8


def loo_pass(received, own):
    """What the node can tell from its own rows: the fraction of them that are 0 wherever the mean of the part
    without them (received rows and its other own rows) is 0, i.e. how often a fresh row would pass."""
    zr = np.all(np.concatenate(received) == 0, axis=0) if received else np.ones(own.shape[1], bool)
    zo = own == 0
    n = len(own)
    others = zo.sum(0)  # own rows that are 0 at each coordinate
    passed = 0
    for i in range(n):
        z = zr & (others - zo[i] == n - 1)  # zero in every other own row (and every received one)
        passed += bool(np.all(zo[i][z]))
    return passed / n


def rule_keeps(rule, received, own):
    """Whether a node's own rows of a class join its part under rule ("floor:M": own + received rows reach M,
    pftnode's min_rows; "zerofree:M": that, and the part's class mean has no exact zero; "loo:M": that, and a
    leave-one-out estimate over the node's own rows says a fresh row passes the zero-support test with
    probability >= LOO_PASS)."""
    kind, m = rule.split(":")[:2]
    rows = received + [own]
    if sum(len(r) for r in rows) < int(m):
        return False
    if kind == "zerofree":
        return not np.any(np.all(np.concatenate(rows) == 0, axis=0))
    return kind in ("floor", "noise", "pos") or loo_pass(received, own) >= LOO_PASS


def released_rows(nodes, contrib, c, rule):
    """The rows of class c in the part of the last of contrib (a chain's nodes in order; a star client alone),
    and the nodes whose own rows of c the rule withholds."""
    rows, withheld = [], []
    for n in contrib:
        own = nodes[n][0][nodes[n][1] == c]
        if len(own) and rule_keeps(rule, rows, own):
            rows.append(own)
        elif len(own):
            withheld.append(n)
    return rows, withheld


BOUND_CS = (0, 1, 2, 3, 4)  # margins an attacker may choose a priori (reported: the worst class at each)
BOUND_C = 4.0  # the adaptive test's margin in noise standard deviations (a member fails it w.p. <= 1280 Phi(-4))


def noise_of(rule, node, c, d, seed, shape=None):
    """The noise a node adds to its own class sum under "noise:M:R:S" (Gaussian, std S per coordinate, on a
    class released standing for fewer than R rows): seeded by (seed, node, class), data-independent. Under
    "shape:M:R:S" coordinate j's std is S * shape[j] (shape: the part's pooled within-class std per coordinate,
    its mean square 1; what the release's diagonal shows)."""
    h = sum((i + 1) * ord(ch) for i, ch in enumerate(node))
    e = np.random.default_rng([seed, h, c]).normal(0.0, float(rule.split(":")[3]), d)
    return e * shape if shape is not None else e


def pooled_shape(nodes, contrib):
    """The pooled within-class std per coordinate of the rows of contrib (all classes), scaled to mean square 1."""
    x = np.concatenate([nodes[n][0] for n in contrib]).astype(np.float64)
    y = np.concatenate([nodes[n][1] for n in contrib])
    v = np.zeros(x.shape[1])
    for c in np.unique(y):
        r = x[y == c]
        v += ((r - r.mean(0)) ** 2).sum(0)
    v /= len(x)
    return np.sqrt(v / max(v.mean(), 1e-300))


def released_sum(nodes, contrib, c, rule, seed):
    """The class sum the part releases (rows plus each contributor's noise) and how many noise draws it holds."""
    _, m, r, _ = rule.split(":")
    total, draws, rows = None, 0, 0
    for i, n in enumerate(contrib):
        own = nodes[n][0][nodes[n][1] == c]
        if not len(own) or rows + len(own) < int(m):
            continue
        s = own.sum(0).astype(np.float64)
        if rows + len(own) < int(r) and rule.startswith("pos:"):  # a positive perturbation s + |e| (emulated
            s = s + np.abs(noise_of(rule, n, c, own.shape[1], seed))  # only: no rescaling, SECURITY.md 7.1 refuses it)
            draws += 1
        elif rows + len(own) < int(r):  # pftnode's mean_noise: (s + e) rescaled to the norm of s
            shape = pooled_shape(nodes, contrib[: i + 1]) if rule.startswith("shape:") else None
            t = s + noise_of(rule, n, c, own.shape[1], seed, shape)
            s = t * np.linalg.norm(s) / np.linalg.norm(t)
            draws += 1
        rows += len(own)
        total = s if total is None else total + s
    return total, draws


def best_accuracy(own_scores, other_scores):
    """1/2 (TPR + TNR) of the best threshold "member when score <= t" (labelled members and non-members: an
    upper bound on what an attacker with such a sample gets)."""
    t = np.unique(np.concatenate([own_scores, other_scores]))
    tpr = (own_scores[None, :] <= t[:, None]).mean(1)
    tnr = (other_scores[None, :] > t[:, None]).mean(1)
    return float(np.max(0.5 * (tpr + tnr)))


def adaptive(xm, part_rows, xo, sum_rel, draws, s, shape=None):
    """The attacker that knows the noise: a member is <= the class sum everywhere (rows >= 0), so score a row by
    max_j (x_j - released sum_j) (and +inf when it is not 0 where the part's shared scatter has a zero variance,
    i.e. every row of the part is 0: exact in a part of >= 20 rows). Returns the pass rates of members and
    non-members of the bound test at BOUND_C noise std and the best-threshold accuracy of the score."""
    zw = np.all(part_rows == 0, axis=0) if len(part_rows) >= 20 else np.zeros(xm.shape[1], bool)

    sc = np.ones(xm.shape[1]) if shape is None else np.maximum(shape, 1e-9)

    def score(x):
        v = np.max((x - sum_rel[None, :]) / sc[None, :], axis=1)
        return np.where(np.any(x[:, zw] > 0, axis=1), np.inf, v)

    so, sx = score(xm), score(xo)
    lim = BOUND_C * s * np.sqrt(draws)
    zwp = float(np.mean(~np.any(xo[:, zw] > 0, axis=1)))
    by_c = [0.5 * (np.mean(so <= c * s * np.sqrt(draws)) + np.mean(sx > c * s * np.sqrt(draws)))
            for c in BOUND_CS]
    return float(np.mean(so <= lim)), float(np.mean(sx <= lim)), best_accuracy(so, sx), 1 - zwp / 2, by_c


def noise_tests(nodes, pool, kind, rule, seed=0, null=False):
    """Per released class under "noise:M:R:S": (sender, label, rows, draws, exact-zero pass rate, bound test's
    member and non-member pass rates, its accuracy, the best-threshold accuracy, non-members). null: the same
    tests with as many rows of the class that are NOT in the release standing in for its members (drawn from
    the non-members, which lose them): the level any release reaches by chance on classes of these sizes."""
    out = []
    pick = np.random.default_rng([seed, 7])
    px, py, keys = pool
    s = float(rule.split(":")[3])
    for sender, contrib in parts(nodes, kind):
        mine = set().union(*(nodes[n][2] for n in contrib))
        outside = np.array([k not in mine for k in keys])
        member, _ = zip(*[released_rows(nodes, contrib, c, "floor:" + rule.split(":")[1])
                          for c in range(int(max(py)) + 1)])
        if not any(member):
            continue  # the part releases nothing
        part_rows = np.concatenate([np.concatenate(m) for m in member if m])
        for c in range(int(max(py)) + 1):
            if not member[c]:
                continue
            xm = np.concatenate(member[c])
            srel, draws = released_sum(nodes, contrib, c, rule, seed)
            # what the attacker reads: the released sum, the rescaling undone as its expectation gives it
            if rule.startswith(("noise:", "shape:")):
                srel = srel * np.sqrt(1 + draws * len(srel) * s * s / max(float(srel @ srel), 1e-30))
            xo = px[outside & (py == c)]
            if null:
                perm = pick.permutation(len(xo))
                xm, xo = xo[perm[:len(xm)]], xo[perm[len(xm):]]
            z = srel == 0
            pz = float(np.mean(np.all(xo[:, z] == 0, axis=1)))
            shape = pooled_shape(nodes, contrib) if rule.startswith("shape:") else None
            pm, pn, best, zw, by_c = adaptive(xm, part_rows, xo, srel, draws, s, shape)
            out.append((sender, c, len(xm), draws, pz, pm, pn, 0.5 * (pm + 1 - pn), best, len(xo), zw, by_c))
    return out


def report_noise(nodes, pool, kind, rule, null=False):
    t = noise_tests(nodes, pool, kind, rule, null=null)
    if null:
        print("   null: rows not in the release stand in for each class's members (chance level):")
    for i, name in ((7, "bound test"), (8, "best threshold")):
        acc = np.array([e[i] for e in t])
        w = max(t, key=lambda e: e[i])
        print(f"{rule:16}: {len(t)} classes, {sum(e[3] > 0 for e in t)} noised; {name} accuracy > 0.6: "
              f"{(acc > 0.6).sum()}, >= 0.9: {(acc >= 0.9).sum()}; worst {w[0]} class {w[1]}, {w[2]} rows, "
              f"{w[3]} draws, members pass {100 * w[5]:.1f} %, non-members {100 * w[6]:.1f} % of {w[9]}, "
              f"bound {w[7]:.3f}, best {w[8]:.3f}; exact-zero test max {max(0.5 * (2 - e[4]) for e in t):.3f}, "
              f"scatter's zero variances alone max {max(e[10] for e in t):.3f}")
    print("   bound test at margin c std, worst class (classes > 0.6): " + ", ".join(
        f"c={c}: {max(e[11][i] for e in t):.3f} ({sum(e[11][i] > 0.6 for e in t)})" for i, c in enumerate(BOUND_CS)))


def class_tests(nodes, pool, kind, rule):
    """One entry (sender, label, rows, |Z|, pass rate, accuracy, non-members) per released class; the (node,
    class) pairs withheld."""
    out, withheld = [], set()
    px, py, keys = pool
    for sender, contrib in parts(nodes, kind):
        mine = set().union(*(nodes[n][2] for n in contrib))
        outside = np.array([k not in mine for k in keys])
        for c in sorted(set(np.concatenate([nodes[n][1] for n in contrib]))):
            member, wh = released_rows(nodes, contrib, c, rule)
            withheld |= {(n, int(c)) for n in wh}
            if not member:
                continue
            xm = np.concatenate(member)
            z = np.all(xm == 0, axis=0)
            xo = px[outside & (py == c)]
            p = float(np.mean(np.all(xo[:, z] == 0, axis=1)))
            out.append((sender, int(c), len(xm), int(z.sum()), p, 0.5 * (1 + (1 - p)), len(xo)))
    return out, withheld


def withhold(run, nodes, withheld):
    """Rewrites the training files of the nodes in RUN without the withheld (node, class) rows (what the rule
    would leave out of their parts; a node's own head then also lacks them, downstream heads see the rule)."""
    for n in sorted({n for n, _ in withheld}):
        d = os.path.join(run, n, "data")
        x, y = np.load(d + "/train_x.npy"), np.load(d + "/train_y.npy")
        keep = ~np.isin(y, [c for m, c in withheld if m == n])
        np.save(d + "/train_x.npy", x[keep])
        np.save(d + "/train_y.npy", y[keep])
        print(f"  {n}: {int((~keep).sum())} rows of classes {sorted(c for m, c in withheld if m == n)} removed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a folder written by pftnet launch (its */data/*.npy)")
    ap.add_argument("--kind", choices=["chain", "star"], required=True)
    ap.add_argument("--rules", default="floor:5,floor:10,floor:15,floor:20,zerofree:5,loo:5",
                    help="comma-separated rules: floor:M (min_rows = M), zerofree:M (and no exact zero), "
                    "loo:M (and a leave-one-out pass rate >= 0.8), noise:M:R:S (mean_noise = S below R rows), "
                    "shape:M:R:S (that noise shaped by the pooled within-class std)")
    ap.add_argument("--pool", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                   "pacs-mobilenetv2"), help="the dataset the run drew from")
    ap.add_argument("--withhold", metavar="RULE", help="rewrite RUN's training files without what RULE withholds")
    ap.add_argument("--null", action="store_true", help="noise rules: also run each test with rows that are not in "
                    "the release standing in for the members (what chance gives on classes of these sizes)")
    a = ap.parse_args()
    nodes, pool = load(a.run, a.pool)
    print(f"{a.run}: {len(nodes)} nodes with rows, {a.kind}")
    for rule in [a.withhold] if a.withhold else a.rules.split(","):
        if rule.startswith(("noise:", "pos:", "shape:")):
            report_noise(nodes, pool, a.kind, rule)
            if a.null:
                report_noise(nodes, pool, a.kind, rule, null=True)
            continue
        t, wh = class_tests(nodes, pool, a.kind, rule)
        acc = np.array([e[5] for e in t])
        w = max(t, key=lambda e: e[5])
        lost = sum(int(np.sum(nodes[n][1] == c)) for n, c in wh)
        print(f"{rule:11}: {len(t)} classes released, {len(wh)} (node, class) withheld ({lost} rows of "
              f"{sum(len(v[1]) for v in nodes.values())}); zero-support accuracy "
              f"> 0.6: {(acc > 0.6).sum()}, >= 0.9: {(acc >= 0.9).sum()}; worst: {w[0]} class {w[1]}, {w[2]} rows, "
              f"|Z| = {w[3]}, {100 * w[4]:.1f} % of {w[6]} non-members pass, accuracy {w[5]:.3f}")
        by = {}
        for e in t:
            by.setdefault(min(e[2], 20), []).append(e[4])
        print("   pass rate by rows (median, min..max, classes): " + "; ".join(
            f"{'>=20' if k == 20 else k}: {100 * np.median(v):.1f} % ({100 * min(v):.1f}..{100 * max(v):.1f}, "
            f"{len(v)})" for k, v in sorted(by.items())))
        if a.withhold:
            withhold(a.run, nodes, wh)


if __name__ == "__main__":
    main()
