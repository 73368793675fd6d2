#!/usr/bin/python3
"""What a launch (or a collect) wrote, checked against itself from outside (docs/USAGE.md "What a launch writes").

For each run folder DIR (holding results.json):
  - results.json has every field the launcher writes; n_nodes is the number of nodes; its settings are the
    resolved DIR/topology.dot's graph attributes where that states them;
  - every node's entry is its own result.json (DIR/<id>/result.json, or the file `collected_from` names) plus
    hop (0 .. n-1, each once), max_rss_kb (the node's own peak where it gave one) and host; accuracies are in
    [0, 1]; wall_seconds is at least every node's (a collect's: the longest);
  - the hand-offs are every non-fallback sent entry, with the verdict recomputed here from the sender's state
    and the receiver's record; the fallbacks are every sent entry with fallback_for;
  - an acknowledged hand-off carries bytes > 0, the receiver records the same bytes for that bundle, and each
    node's bytes_sent / bytes_received are at least the sum of what it sent / received;
  - table.txt has one row per node, in order, each cell the node's figure as the launcher prints it;
  - with --pftnet, `pftnet report DIR`: the comparison table's rows (the variant: mean accuracy of the final
    nodes and the sum of bytes_sent; each baseline) and the per-node table's rows are results.json's figures.
With --all-ok: every node ended ok and every hand-off is `ok` (a launch that exited 0 with every node run).
Usage: launch_check.py [--pftnet PATH] [--all-ok] DIR...; exit 0 when every check holds, else 1 with one line per
failed check.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

RESULTS_KEYS = ("topology", "run", "tag", "variant", "seed", "kind", "n_nodes", "wall_seconds", "settings",
                "nodes", "baselines", "fallbacks", "handoffs")
ADDED_KEYS = ("hop", "max_rss_kb", "host")  # what results.json adds to a node's result.json
SETTINGS_FROM_DOT = ("k", "cov", "dtype", "prep", "em_draws", "head_draws", "partition", "samples", "dp_epsilon",
                     "min_rows", "stats_rank", "mc_budget")

failures = []


def check(cond, where, msg):
    if not cond:
        failures.append(f"{where}: {msg}")
    return cond


def dot_graph_attrs(path):
    """The graph-level `name = value;` lines of a topology written by pftnet (one per line, before the nodes)."""
    attrs = {}
    for line in open(path):
        m = re.match(r'^\t(\w+) = ("(?:[^"\\]|\\.)*"|[^;]*);$', line)
        if m:
            v = m.group(2)
            attrs[m.group(1)] = v[1:-1] if v.startswith('"') else v
    return attrs


def same_setting(have, want):
    if isinstance(have, bool) or isinstance(have, str):
        return str(have).lower() == want.lower()
    try:
        return float(have) == float(want)
    except ValueError:
        return False


def node_result_path(d, r, nid):
    cf = r.get("collected_from")
    if isinstance(cf, dict):
        return cf.get(nid)
    return os.path.join(d, nid, "result.json")


def check_nodes(d, r):
    nodes = r["nodes"]
    check(r["n_nodes"] == len(nodes), d, f"n_nodes {r['n_nodes']}, {len(nodes)} nodes")
    hops = sorted(n.get("hop", -1) for n in nodes)
    check(hops == list(range(len(nodes))), d, f"hops {hops}: not 0 .. n-1 each once")
    walls = []
    for n in nodes:
        nid = n.get("id")
        where = f"{d}: node {nid}"
        path = node_result_path(d, r, nid)
        if n.get("status") in ("absent", "no result.json"):
            check(not path or not os.path.exists(path), where, f"status {n['status']} but {path} exists")
            continue
        if not check(path and os.path.exists(path), where, "no result.json of its own"):
            continue
        own = json.load(open(path))
        mine = {k: v for k, v in n.items() if k not in ADDED_KEYS}
        diff = sorted(k for k in set(own) | set(mine) if own.get(k) != mine.get(k))
        check(not diff, where, f"results.json differs from {path} in {diff}")
        peak = own.get("peak_rss_kb")
        if isinstance(peak, int) and peak > 0:
            check(n.get("max_rss_kb") == peak, where, f"max_rss_kb {n.get('max_rss_kb')}, its own peak {peak}")
        if n.get("status") == "ok":  # accuracy_local is null for a node without a test split of its own
            for key in ("accuracy_local", "accuracy_global"):
                v = n.get(key)
                check((v is None and key == "accuracy_local") or (isinstance(v, (int, float)) and 0 <= v <= 1),
                      where, f"{key} {v} not in [0, 1]")
        if isinstance(n.get("wall_seconds"), (int, float)):
            walls.append(n["wall_seconds"])
    if walls and "collected_from" in r:
        check(r["wall_seconds"] == max(walls), d, f"wall_seconds {r['wall_seconds']}, longest node {max(walls)}")
    elif walls:
        check(r["wall_seconds"] >= max(walls), d, f"wall_seconds {r['wall_seconds']} < a node's {max(walls)}")


def expected_handoffs(nodes):
    """(handoffs, fallbacks) as the launcher documents them, recomputed from the nodes' records."""
    by_id = {n.get("id"): n for n in nodes}
    handoffs, fallbacks = [], []
    for n in nodes:
        for s in n.get("sent", []):
            if "fallback_for" in s:
                fallbacks.append({"from": n["id"], "to": s["to"], "instead_of": s["fallback_for"],
                                  "state": s["state"]})
                continue
            if s.get("fell_back"):
                continue
            recv = by_id.get(s["to"], {}).get("received")
            ok = s["state"] in ("acked", "delivered")
            if not isinstance(recv, list):
                v = "unverified" if ok else "lost"
            elif any(e.get("bundle_id") == s["bundle_id"] for e in recv):
                v = "ok" if ok else "used"
            else:
                v = "contradiction" if ok else "lost"
            handoffs.append({"from": n["id"], "to": s["to"], "bundle_id": s["bundle_id"], "sender_state": s["state"],
                             "verdict": v})
    return handoffs, fallbacks


def check_handoffs(d, r, all_ok):
    nodes = r["nodes"]
    want, fallbacks = expected_handoffs(nodes)
    if "collected_from" in r:  # a collect lists after these the hand-offs of senders it has no result of
        have = [h for h in r["handoffs"] if h.get("bundle_id") is not None]
    else:
        have = r["handoffs"]
    diff = [(h, w) for h, w in zip(have, want) if h != w]
    check(len(have) == len(want) and not diff, d,
          f"{len(have)} hand-offs, {len(want)} from the nodes' records; (results.json, recomputed) differ: {diff}")
    check(r["fallbacks"] == fallbacks, d, f"fallbacks {r['fallbacks']}, the nodes' records {fallbacks}")
    by_id = {n.get("id"): n for n in nodes}
    for n in nodes:
        where = f"{d}: node {n.get('id')}"
        sent = n.get("sent", [])
        acked = [s for s in sent if s.get("state") in ("acked", "delivered")]
        for s in acked:
            check(isinstance(s.get("bytes"), int) and s["bytes"] > 0, where, f"hand-off to {s['to']}: bytes {s.get('bytes')}")
            got = [e for e in by_id.get(s["to"], {}).get("received", []) if e.get("bundle_id") == s["bundle_id"]]
            for e in got:
                check(e.get("bytes") == s.get("bytes"), where,
                      f"hand-off to {s['to']}: {s.get('bytes')} bytes sent, {e.get('bytes')} received")
        if "bytes_sent" in n:
            total = sum(s.get("bytes", 0) for s in acked)
            check(n["bytes_sent"] >= total and (total == 0 or n["bytes_sent"] > 0), where,
                  f"bytes_sent {n['bytes_sent']} below its acknowledged hand-offs' {total}")
        if "bytes_received" in n:
            total = sum(e.get("bytes", 0) for e in n.get("received", []))
            check(n["bytes_received"] >= total, where, f"bytes_received {n['bytes_received']} below {total}")
    if all_ok:
        for n in nodes:
            check(n.get("status") == "ok", d, f"node {n.get('id')} status {n.get('status')}")
        bad = [(h["from"], h["to"], h["verdict"]) for h in r["handoffs"] if h.get("verdict") != "ok"]
        check(not bad, d, f"hand-offs not ok: {bad}")
        check(len(r["handoffs"]) + len(r["fallbacks"]) == r["baselines"].get("handoffs"), d,
              f"{len(r['handoffs'])} hand-offs, the topology has {r['baselines'].get('handoffs')}")


def cell(v, prec, none="-"):
    return none if not isinstance(v, (int, float)) else f"{v:.{prec}f}"


def check_table(d, r):
    path = os.path.join(d, "table.txt")
    if not check(os.path.exists(path), d, "no table.txt"):
        return
    lines = open(path).read().splitlines()
    check(lines[0].split() == ["node", "role", "acc_local", "acc_glob", "n_real", "n_synth", "bytes_sent",
                               "bytes_recv", "em_it", "em_s"], path, f"header {lines[0]!r}")
    rows = [ln.split() for ln in lines[1:]]
    check(len(rows) == len(r["nodes"]), path, f"{len(rows)} rows for {len(r['nodes'])} nodes")
    for n, row in zip(r["nodes"], rows):
        want = [n.get("id"), n.get("role") or n.get("status", "?"), cell(n.get("accuracy_local"), 4),
                cell(n.get("accuracy_global"), 4), cell(n.get("n_real"), 0), cell(n.get("n_synthetic"), 0),
                cell(n.get("bytes_sent"), 0), cell(n.get("bytes_received"), 0), cell(n.get("em_iters_mean"), 1),
                cell(n.get("em_seconds"), 2)]
        if " " not in want[1]:
            check(row == want, path, f"row {row}, results.json gives {want}")


def fmt_bytes(v):
    if v is None:
        return "—"
    if v < 1e3:
        return f"{v:.0f} B"
    if v < 1e6:
        return f"{v / 1e3:.1f} kB"
    if v < 1e9:
        return f"{v / 1e6:.2f} MB"
    return f"{v / 1e9:.2f} GB"


def mean(xs):
    """pft_stats' running mean (Welford), so that a rounding to two decimals falls as the report's does."""
    m = 0.0
    for i, x in enumerate(xs):
        m += (x - m) / (i + 1)
    return m if xs else None


def pct(v):
    if not isinstance(v, (int, float)):
        return "—"
    v = 100.0 * v
    return f"{0.0 if abs(v) < 0.005 else v:.2f}"


def md_tables(text):
    """Every Markdown table of text as (header cells, [row cells])."""
    tables, cur = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if cur is None:
                cur = (cells, [])
                tables.append(cur)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return tables


BASELINE_ROWS = (("Centralized", "centralized", "centralized_bytes"),
                 ("Centralized Gaussian (LDA)", "centralized_gaussian", "centralized_bytes"),
                 ("Local only (mean of nodes)", "local_only_mean", None), ("Ensemble", "ensemble", "ensemble_bytes"),
                 ("Average", "average", "average_bytes"), ("KD", "kd", "kd_bytes"))


def check_report(d, r, pftnet):
    p = subprocess.run([pftnet, "report", d], capture_output=True, text=True)
    if not check(p.returncode == 0, d, f"pftnet report exited {p.returncode}: {p.stderr.strip()}"):
        return
    where = f"{d}: report"
    tables = md_tables(p.stdout)
    comp = [t for t in tables if t[0][:2] == ["method", "accuracy (%)"]]
    if not check(len(comp) == 1, where, f"{len(comp)} comparison tables"):
        return
    rows = {row[0]: row for row in comp[0][1]}
    nodes = r["nodes"]
    has_sink = any(n.get("role") == "sink" for n in nodes)
    final_all = r["kind"] in ("ring", "mesh") or not has_sink
    final = [n["accuracy_global"] for n in nodes if (final_all or n.get("role") == "sink")
             and isinstance(n.get("accuracy_global"), (int, float))]
    sent = [n["bytes_sent"] for n in nodes if isinstance(n.get("bytes_sent"), (int, float))]
    want = [r["variant"], f"{pct(mean(final))} (1)" if final else "—", fmt_bytes(sum(sent) if sent else None)]
    check(rows.get(r["variant"]) == want, where, f"row {rows.get(r['variant'])}, results.json gives {want}")
    b = r["baselines"]
    for label, key, bkey in BASELINE_ROWS:
        if key not in b:
            continue
        row = next((v for k, v in rows.items() if k == label or (label == "KD" and k.startswith("KD"))), None)
        acc = b[key]
        want = ["—", "—"] if acc is None else [f"{pct(acc)} (1)", fmt_bytes(b.get(bkey) if bkey else 0)]
        check(row is not None and row[1:] == want, where, f"{label}: row {row}, results.json gives {want}")
    per_node = [t for t in tables if t[0][:3] == ["node", "hop", "role"]]
    if len(nodes) <= 2:
        check(not per_node, where, "a per-node table for two nodes")
        return
    if not check(len(per_node) == 1, where, f"{len(per_node)} per-node tables"):
        return
    head, body = per_node[0]
    got = {row[0]: dict(zip(head, row)) for row in body}
    local = {e["id"]: e["accuracy_global"] for e in b.get("local_only", [])}
    for n in nodes:
        row = got.get(n["id"])
        if not check(row is not None, where, f"no row for node {n['id']}"):
            continue
        drift = {}
        for e in n.get("drift", []):
            drift[e.get("bundle")] = e.get("own_avg_loglik")
        dr = ["—" if drift.get(k) is None else f"{0.0 if abs(drift[k]) < 0.05 else drift[k]:.1f}"
              for k in ("received", "sent")]
        role = n.get("role", "?") + ("" if n.get("status") == "ok" else f" ({n.get('status', 'no status')})")
        want = {"hop": str(n["hop"]), "role": role,
                "accuracy (%)": pct(n.get("accuracy_global")), "local-only (%)": pct(local.get(n["id"])),
                "knowledge": f"{len(n['provenance'])}/{len(nodes)}" if "provenance" in n else "—",
                "real rows": cell(n.get("n_real"), 0, "—"), "synthetic rows": cell(n.get("n_synthetic"), 0, "—"),
                "drift: own log-lik under received / sent GMM": f"{dr[0]} / {dr[1]}",
                "bytes sent": fmt_bytes(n.get("bytes_sent"))}
        diff = {k: (row.get(k), v) for k, v in want.items() if row.get(k) != v}
        check(not diff, where, f"node {n['id']}: (report, results.json) differ: {diff}")


def check_run(d, pftnet, all_ok):
    r = json.load(open(os.path.join(d, "results.json")))
    missing = [k for k in RESULTS_KEYS if k not in r]
    if not check(not missing, d, f"results.json lacks {missing}"):
        return
    topo = os.path.join(d, "topology.dot")
    if os.path.exists(topo) and "collected_from" not in r:
        attrs = dot_graph_attrs(topo)
        for key in SETTINGS_FROM_DOT:
            if key in attrs:
                check(same_setting(r["settings"].get(key), attrs[key]), d,
                      f"settings.{key} {r['settings'].get(key)!r}, topology.dot {attrs[key]!r}")
        if "seed" in attrs:
            check(str(r["seed"]) == attrs["seed"], d, f"seed {r['seed']}, topology.dot {attrs['seed']}")
    check_nodes(d, r)
    check_handoffs(d, r, all_ok)
    check_table(d, r)
    if pftnet:
        check_report(d, r, pftnet)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--pftnet", help="pftnet, to check `pftnet report DIR` against results.json")
    ap.add_argument("--all-ok", action="store_true", help="every node ok and every hand-off ok")
    a = ap.parse_args()
    for d in a.dirs:
        try:
            check_run(d, a.pftnet, a.all_ok)
        except (OSError, ValueError, KeyError, TypeError) as e:
            failures.append(f"{d}: {type(e).__name__}: {e}")
    for f in failures:
        print(f"launch_check: FAIL: {f}")
    if not failures:
        print(f"launch_check: {len(a.dirs)} run folder(s) checked")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
