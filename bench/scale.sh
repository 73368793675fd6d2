#!/usr/bin/env bash
# Scale: the sampling path (the paper's protocol with pftnet's defaults) on big topologies.
# Runs, each with the defaults of the topology attributes:
#   chain64   a 64-node chain, Fashion-MNIST iid, 60 rows per node, k = 1, cov = diag
#   chain256  a 256-node chain, Fashion-MNIST iid, --rows rows per node (default 12), k = 1, cov = diag
#   ring256   a 256-node ring, the same
#   star50    configs/star50.dot (the paper's Table 5: 50 Dirichlet(0.1) PACS clients, one data-less server)
#   ringN, chainN, meshN (any N from 3 to 4096, e.g. ring1000): the same per-node settings as ring256; meshN is
#             a random strongly connected graph of average degree 3 (a random directed cycle through all nodes
#             plus N/2 random chords, seed 0), root n0000; past 256 nodes deadline and send_deadline are 3600 s
#             (a ring's last node waits for every hop of lap 1)
# and prints per run: wall time, every node's exit, peak RSS per node (mean, max) and summed over the nodes,
# the last node's (the server's) accuracy and the centralized baseline. The launcher's progress screen of each
# run is kept in OUT/<name>.screen (captured through `script`, i.e. as on a terminal).
#
# usage: bash bench/scale.sh [--only chain64,chain256,ring256,star50] [--rows 12] [--seed 0] [--bin DIR]
#                            [--out DIR] [--set NAME=VALUE]... [--slots N] [--no-baselines]
# --slots N: pftnet launch --compute-slots N (at most N nodes compute at once). --no-baselines: pftnet launch
# --no-baselines (at 1,000 nodes the launcher's baselines take about 17 minutes after the run). --set cov=tied:
# exact statistics (the default cov = diag is the paper's sampling protocol); --set secure_agg=true: masked
# exact statistics.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
every=1 only=chain64,chain256,ring256,star50 rows=12 seed=0 bin="$here/build/node" out=/tmp/pft-scale sets=() slots=()
nobase=()
while [ $# -gt 0 ]; do
    case "$1" in
    --only) only="$2"; shift ;;
    --rows) rows="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --out) out="$2"; shift ;;
    --set) sets+=(--set "$2"); shift ;;
    --slots) slots=(--compute-slots "$2"); shift ;;
    --no-baselines) nobase=(--no-baselines) ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$bin/pftnet" ] || { echo "no $bin/pftnet: build Release first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
fmnist="$(cd "$here/../shared/data/fashionmnist-mobilenetv2" && pwd)"
mkdir -p "$out"

# chain|ring|mesh N ROWS > dot (node ids n000 … for up to 1000 nodes, n0000 … beyond)
topo() {
    local kind="$1" n="$2" r="$3" w=3
    [ "$n" -gt 999 ] && w=4
    echo "digraph ${kind}$n {"
    echo "  dataset = \"$fmnist\"; partition = iid; samples = $r; k = 1; cov = diag; prep = l2;"
    [ "$n" -gt 256 ] && echo "  deadline = 3600; send_deadline = 3600;"
    [ "$kind" = ring ] && printf '  start = n%0*d;\n' "$w" 0
    if [ "$kind" = mesh ]; then
        python3 - "$n" "$w" <<'PY'
import random, sys
n, w = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(0)
names = ["n%0*d" % (w, i) for i in range(n)]
perm = names[:]
rng.shuffle(perm)
edges = [(perm[i], perm[(i + 1) % n]) for i in range(n)]
have = set(edges)
while len(edges) < n + n // 2:
    u, v = rng.sample(names, 2)
    if (u, v) not in have and (v, u) not in have:
        have.add((u, v))
        edges.append((u, v))
print("  root = %s;" % names[0])
print("  %s;" % "; ".join(names))
for u, v in edges:
    print("  %s -> %s;" % (u, v))
PY
        echo "}"
        return
    fi
    printf '  '
    for ((i = 0; i < n; i++)); do printf 'n%0*d' "$w" "$i"; [ "$i" -lt $((n - 1)) ] && printf ' -> '; done
    [ "$kind" = ring ] && printf ' -> n%0*d' "$w" 0
    echo ";"
    echo "}"
}

report() { # NAME
    /usr/bin/python3 - "$out/$1/results.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ns = r["nodes"]; b = r.get("baselines") or {}
rss = [max(n.get("peak_rss_kb") or 0, n.get("max_rss_kb") or 0) / 1024 for n in ns]
last = ns[-1] if r["kind"] != "ring" else ns[0]
exits = {}
for n in ns:
    exits[n["exit_code"]] = exits.get(n["exit_code"], 0) + 1
acc = [n["accuracy_global"] for n in ns if n.get("accuracy_global") is not None]
hs = [n.get("head_seconds") or 0 for n in ns]; es = [n.get("em_seconds") or 0 for n in ns]
print("%-9s %4d nodes  wall %6.1f s  exits %s  RSS/node mean %5.1f max %5.1f MB, total %.2f GB  "
      "last %s %.4f  nodes mean %.4f  centralized %.4f  head s sum %.0f max %.1f  EM s sum %.0f" % (
      sys.argv[2], len(ns), r["wall_seconds"], exits, sum(rss) / len(rss), max(rss), sum(rss) / 1024,
      last["id"], last["accuracy_global"], sum(acc) / len(acc), b.get("centralized", float("nan")),
      sum(hs), max(hs), sum(es)))
PY
}

# Samples, every $every seconds (1; 10 past 256 nodes: reading a thousand smaps_rollup files every second took a
# sixth of this machine) until the file $1.stop appears, the memory of all pftnode processes at once: the sum
# of their RSS (shared library pages counted once per process) and of their PSS (shared pages split between
# the processes that map them: what the machine actually spends); keeps the largest of each in $1.
sample_memory() {
    local f="$1" max_rss=0 max_pss=0 rss pss
    while [ ! -e "$f.stop" ]; do
        read -r rss pss < <(for p in $(pgrep -x pftnode); do cat "/proc/$p/smaps_rollup" 2>/dev/null; done | awk '
            /^Rss:/ {r += $2} /^Pss:/ {p += $2} END {print r + 0, p + 0}' || echo "0 0")
        [ "$rss" -gt "$max_rss" ] && max_rss=$rss
        [ "$pss" -gt "$max_pss" ] && max_pss=$pss
        echo "$max_rss $max_pss" > "$f"
        sleep "$every"
    done
}

run() { # NAME TOPO
    local name="$1" t="$2"
    local mem="$out/$name.mem"
    rm -f "$mem" "$mem.stop"
    sample_memory "$mem" &
    local sampler=$!
    # `script` gives the launcher a terminal, so the screen is the one a user sees (one line, updated in place)
    script -qefc "$bin/pftnet launch $t --out $out/$name --force --seed $seed ${sets[*]} ${slots[*]} ${nobase[*]}" "$out/$name.screen" \
        > /dev/null 2>&1 || echo "$name: launch failed (see $out/$name.screen)"
    touch "$mem.stop"
    wait "$sampler" || true
    report "$name"
    read -r r p < "$mem"
    printf '%-9s all processes at once (every %d s): RSS sum %.2f GB, PSS sum %.2f GB\n' "$name" "$every" \
        "$(echo "$r / 1048576" | bc -l)" "$(echo "$p / 1048576" | bc -l)"
}

IFS=, read -ra which <<< "$only"
for w in "${which[@]}"; do
    case "$w" in
    chain64) topo chain 64 60 > "$out/chain64.dot"; run chain64 "$out/chain64.dot" ;;
    chain256) topo chain 256 "$rows" > "$out/chain256.dot"; run chain256 "$out/chain256.dot" ;;
    ring256) topo ring 256 "$rows" > "$out/ring256.dot"; run ring256 "$out/ring256.dot" ;;
    star50) run star50 "$here/configs/star50.dot" ;;
    ring[0-9]* | chain[0-9]* | mesh[0-9]*)
        k="${w%%[0-9]*}" n="${w#"$k"}"
        [ "$n" -ge 3 ] && [ "$n" -le 4096 ] || { echo "scale.sh: $w: N must be 3 to 4096" >&2; exit 2; }
        topo "$k" "$n" "$rows" > "$out/$w.dot"
        every=1
        [ "$n" -gt 256 ] && every=10
        run "$w" "$out/$w.dot" ;;
    *) echo "scale.sh: unknown run '$w'" >&2; exit 2 ;;
    esac
done
