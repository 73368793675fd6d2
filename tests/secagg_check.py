#!/usr/bin/python3
"""What every node of a secure-aggregation run could see, checked from outside.

A decoder written from docs/WIRE.md (§1 envelope, §2 payload, §2.1 statistics parts) and docs/SECAGG.md §8
(masked parts) alone, with python3-msgpack: it reads every bundle a node sent (NODE/bundle.pftb) or received
(NODE/inbox/*.pftb) and checks, for min_contributors m:
  - every clear part sums at least m contributors (nothing in the clear isolates fewer than m);
  - every masked part is noise to anyone but its opener: its words, read as fixed point (two's complement /
    2^32), fall inside the part's decode bound about as often as uniform words would (≈ bound / 2^31), and the
    class sums they would give have |cos| ≈ 1/√d to the contributors' true class sums (computed here from
    NODE/data/train_x.npy after the l2 prep);
  - no contributor of a masked part sends per-member tallies in the clear beside it (the shrinkage evidence of
    its own rows in its provenance entry, WIRE.md §2);
  - every node's result.json view holds 0 or ≥ m contributors besides itself.
With --same RUN2 --nodes c,d: those nodes' outbound clear parts equal RUN2's (the same statistics, to fp32).
Usage: secagg_check.py RUN [--m 2] [--same RUN2 --nodes c,d,e]; exit 0 when every check holds.
"""
import argparse
import glob
import json
import os
import struct
import sys

import msgpack
import numpy as np

FRAC = 2.0**32


def fail(msg):
    print("secagg_check: FAIL: " + msg)
    sys.exit(1)


def decode(path):
    """A bundle file into a dict: producer, d, dtype, parts (clear or masked), provenance counts."""
    raw = open(path, "rb").read()
    env = msgpack.unpackb(raw, raw=True, strict_map_key=False)
    if not (isinstance(env, list) and len(env) == 4 and env[0] == b"PFTB" and env[1] == 1):
        fail(f"{path}: not a version-1 envelope")
    p = msgpack.unpackb(env[2], raw=True, strict_map_key=False)
    if len(p) not in (9, 10, 11):  # 10: element 9 is the topology fingerprint (WIRE.md §2.4); 11: element 10
        # is the α grid the provenance's evidence shares (WIRE.md §2)
        fail(f"{path}: payload of {len(p)} elements, a statistics bundle has 9 (10 with a topology fingerprint, "
             "11 with an evidence grid)")
    d, dtype = p[4], p[3]
    width, fmt = (2, "<e") if dtype == 0 else (4, "<f")
    out = {"producer": p[1].decode(), "d": d, "parts": [], "prov": {}, "evidence": set()}
    for e in p[6]:
        out["prov"][e[0].decode()] = {int(lab): int(n) for lab, n in e[1]}
        if len(e) == 4 and e[3] is not None:  # [node, counts, dp or nil, evidence]: tallies of its own rows
            out["evidence"].add(e[0].decode())
    for part in p[8]:
        contrib = [c.decode() for c in part[1]]
        q = {"kind": part[0], "contributors": contrib, "masked": len(part) == 5, "classes": []}
        for cl in part[2]:
            if q["masked"]:
                words = np.frombuffer(cl[2], dtype="<u8")
                assert len(words) == d, "masked sum of 8d bytes"
                q["classes"].append((cl[0], cl[1], words))
            else:
                mean = np.array(struct.unpack("<%d%s" % (d, fmt[1]), cl[2]), dtype=np.float64)
                q["classes"].append((cl[0], cl[1], mean))
        if q["masked"]:
            q["shared"] = np.frombuffer(part[3], dtype="<u8")
            assert len(part[4]) in (5, 6), "mask: 5 elements, or 6 with double masking's shares"
            lab, opener, f, bound, div = part[4][:5]
            q["mask"] = {"label": lab.decode(), "opener": opener.decode(), "f": f, "bound": bound, "div": div}
            if len(part[4]) == 6:  # double masking: the one contributor's sealed shares, 64 bytes per member
                assert len(contrib) == 1 and isinstance(part[4][5], bytes) and len(part[4][5]) % 64 == 0
                q["mask"]["shares"] = len(part[4][5])
        else:
            q["shared"] = part[3]
        out["parts"].append(q)
    return out


def fixed(words):
    return words.view("<i8").astype(np.float64) / FRAC


def true_sums(run, node):
    """Class sums of a node's training rows after prep = l2."""
    x = np.load(os.path.join(run, node, "data", "train_x.npy")).astype(np.float64)
    y = np.load(os.path.join(run, node, "data", "train_y.npy"))
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return {int(c): x[y == c].sum(axis=0) for c in np.unique(y)}


def check_run(run, m):
    nodes = sorted(n for n in os.listdir(run) if os.path.isfile(os.path.join(run, n, "result.json")))
    sums = {n: true_sums(run, n) for n in nodes if os.path.exists(os.path.join(run, n, "data", "train_x.npy"))}
    n_files = n_clear = n_masked = 0
    cosines, inside, words_total = [], 0, 0
    for n in nodes:
        files = glob.glob(os.path.join(run, n, "bundle.pftb")) + glob.glob(os.path.join(run, n, "inbox", "*.pftb"))
        for path in files:
            b = decode(path)
            n_files += 1
            for q in b["parts"]:
                if not q["masked"]:
                    n_clear += 1
                    if len(q["contributors"]) < m:
                        fail(f"{path}: a clear part of {q['contributors']}: fewer than {m} contributors")
                    continue
                n_masked += 1
                told = sorted(set(q["contributors"]) & b["evidence"])
                if told:
                    fail(f"{path}: masked part {q['contributors']}: {told} send their shrinkage tallies (of their "
                         "own rows) in the clear beside it")
                if q["mask"]["opener"] in q["contributors"] or q["mask"]["f"] != 32:
                    fail(f"{path}: masked part {q['contributors']}: bad mask {q['mask']}")
                allw = np.concatenate([w for _, _, w in q["classes"]] + [q["shared"]])
                v = fixed(allw)
                inside += int(np.sum(np.abs(v) <= q["mask"]["bound"]))
                words_total += len(v)
                for lab, cnt, w in q["classes"]:
                    truth = sum(sums[c][lab] for c in q["contributors"] if c in sums and lab in sums[c])
                    if cnt == 0 or np.linalg.norm(truth) == 0:
                        continue
                    s = fixed(w)
                    cosines.append(float(abs(s @ truth) / (np.linalg.norm(s) * np.linalg.norm(truth))))
    for n in nodes:
        r = json.load(open(os.path.join(run, n, "result.json")))
        sa = r.get("secure_agg")
        if sa is None:
            fail(f"{run}/{n}/result.json: no secure_agg object")
        others = [v for v in sa["view"] if v != n]
        if 0 < len(others) < m:
            fail(f"{n}: its head sees {len(others)} other contributor(s) ({others}); the rule is 0 or >= {m}")
    frac = inside / max(words_total, 1)
    cs = np.array(cosines) if cosines else np.zeros(1)
    d = decode(glob.glob(os.path.join(run, "*", "bundle.pftb"))[0])["d"]
    print(f"secagg_check: {run}: {n_files} bundles, {n_clear} clear parts (each >= {m} contributors), "
          f"{n_masked} masked parts; masked words inside their decode bound: {inside} of {words_total} "
          f"({frac:.2e}); masked class sums vs true sums: |cos| mean {cs.mean():.4f}, max {cs.max():.4f} "
          f"over {len(cosines)} (1/sqrt(d) = {1 / np.sqrt(d):.4f})")
    if n_masked == 0:
        fail(f"{run}: no masked part anywhere: was secure_agg on?")
    if frac > 1e-3:
        fail(f"{run}: {frac:.2e} of masked words decode inside their bound: not uniform")
    if cosines and (cs.mean() > 0.05 or cs.max() > 0.2):
        fail(f"{run}: masked class sums correlate with the true sums (|cos| mean {cs.mean():.4f})")


def clear_parts(path):
    return [q for q in decode(path)["parts"] if not q["masked"]]


def check_same(run, run2, nodes):
    for n in nodes:
        a, b = clear_parts(os.path.join(run, n, "bundle.pftb")), clear_parts(os.path.join(run2, n, "bundle.pftb"))
        if [q["contributors"] for q in a] != [q["contributors"] for q in b]:
            fail(f"{n}: clear parts {[q['contributors'] for q in a]} vs {[q['contributors'] for q in b]}")
        worst = 0.0
        for qa, qb in zip(a, b):
            for (la, na, ma), (lb, nb, mb) in zip(qa["classes"], qb["classes"]):
                if la != lb or na != nb:
                    fail(f"{n}: class layout differs: ({la}, {na}) vs ({lb}, {nb})")
                worst = max(worst, float(np.max(np.abs(ma - mb))))
        if worst > 1e-5:
            fail(f"{n}: outbound class means differ from {run2}'s by {worst:.3g}")
        print(f"secagg_check: {n}: outbound clear statistics equal {run2}'s (max |mean diff| {worst:.2e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--same")
    ap.add_argument("--nodes", default="")
    a = ap.parse_args()
    check_run(a.run, a.m)
    if a.same:
        check_same(a.run, a.same, [n for n in a.nodes.split(",") if n])
    print("secagg_check: ok")


if __name__ == "__main__":
    main()
