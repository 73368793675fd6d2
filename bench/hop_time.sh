#!/usr/bin/env bash
# A hop's time on an exact chain (the release's cost): an N-node Fashion-MNIST chain, `--rows` iid rows per
# node, k = 1, cov = tied, head = gaussian, prep l2 (the scale benchmark's settings), launched once with
# --no-baselines. Prints, over the relays that release at rank 64 (rows ≥ 64 · 15), the median of
#   wall  from "received bundle" to "sending refit bundle" in each node's log (depends on the machine's load);
#   cpu   (with --perf) the CPU seconds of that relay's process from the first sample inside refit() to the last
#         encoding the sent bundle (pft_bundle_encode, or the signature's encoding that it reuses), from
#         `perf record -F 1999` on each of those relays (independent of other processes' load; perf's own
#         overhead included).
#
# usage: bash bench/hop_time.sh [--nodes 24] [--rows 60] [--bin DIR] [--out DIR] [--perf] [--set K=V ...]
#   (--set: a graph attribute of the chain, e.g. mean_noise=0 for exact class sums)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nodes=24 rows=60 bin="$here/build/node" out=/tmp/pft-hop-time perf=0 extra=""
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes="$2"; shift ;;
    --rows) rows="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --out) out="$2"; shift ;;
    --perf) perf=1 ;;
    --set) extra="$extra ${2%%=*} = ${2#*=};"; shift ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "hop_time.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$bin/pftnet" ] || { echo "no $bin/pftnet: build Release first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
fmnist="$(cd "$here/../shared/data/fashionmnist-mobilenetv2" && pwd)"
mkdir -p "$out"
first=$(( (64 * 15 + rows - 1) / rows - 1 )) # the first node whose part holds 64 · 15 rows
{
    echo "digraph hop$nodes {"
    echo "  dataset = \"$fmnist\"; partition = iid; samples = $rows; k = 1; cov = tied; head = gaussian; prep = l2;$extra"
    printf '  '
    for ((i = 0; i < nodes; i++)); do printf 'n%03d' "$i"; [ "$i" -lt $((nodes - 1)) ] && printf ' -> '; done
    echo ";"
    echo "}"
} > "$out/chain.dot"
node="$bin/pftnode"
if [ "$perf" = 1 ]; then # a wrapper that runs the relays at rank 64 under perf
    command -v perf > /dev/null || { echo "hop_time.sh: --perf needs perf" >&2; exit 1; }
    rm -f "$out"/*.perf
    {
        echo '#!/bin/bash'
        echo 'id=$(echo " $* " | sed -n "s/.* --id \([^ ]*\) .*/\1/p"); i=$((10#${id#n}))'
        echo "if [ \$i -ge $first ] && [ \$i -lt $((nodes - 1)) ]; then"
        echo "  exec perf record -q -F 1999 --call-graph dwarf,16384 -o $out/\$id.perf $bin/pftnode \"\$@\""
        echo "fi"
        echo "exec $bin/pftnode \"\$@\""
    } > "$out/pftnode-perf.sh"
    chmod +x "$out/pftnode-perf.sh"
    node="$out/pftnode-perf.sh"
fi
"$bin/pftnet" launch "$out/chain.dot" --out "$out/run" --force --seed 0 --no-baselines --quiet --pftnode "$node" \
    > "$out/launch.log" 2>&1 || { echo "launch failed (see $out/launch.log)"; exit 1; }
/usr/bin/python3 - "$out" "$first" "$nodes" "$perf" <<'PY'
import datetime, glob, os, re, statistics, subprocess, sys
out, first, nodes, perf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
wall, cpu = [], []
for i in range(first, nodes - 1):
    t = {}
    for line in open("%s/run/n%03d/node.log" % (out, i)):
        for key, what in (("r", "received bundle"), ("s", "sending refit bundle")):
            if what in line and key not in t:
                t[key] = datetime.datetime.fromisoformat(line[:23])
    wall.append((t["s"] - t["r"]).total_seconds())
    if perf:
        p = subprocess.run(["perf", "script", "-i", "%s/n%03d.perf" % (out, i), "-F", "comm,time,ip,sym"],
                           capture_output=True, text=True).stdout
        samples, cur = [], None
        for line in p.splitlines() + [""]:
            if not line.strip():
                if cur:
                    samples.append(cur)
                cur = None
            elif not line[0].isspace():
                cur = [line.split()[0], float(re.search(r"([\d.]+):", line).group(1)), set()]
            elif cur:
                cur[2].add(line.split()[-1])
        s = [x for x in samples if x[0] == "pftnode"]
        t0 = min(x[1] for x in s if "refit" in x[2])
        # the last encoding of the sent bundle (signing encodes it; the send may reuse those bytes)
        enc = ("pft_bundle_encode", "pft_bundle_encode_payload", "pft_bundle_payload", "pft_keys_sign_bundle")
        t1 = max(x[1] for x in s if any(f in x[2] for f in enc))
        cpu.append(sum(1 for x in s if t0 <= x[1] <= t1) / 1999.0)
print("hop (received -> sending refit bundle) at rank 64, relays n%03d..n%03d (%d): median wall %.3f s "
      "(min %.3f, max %.3f)" % (first, nodes - 2, len(wall), statistics.median(wall), min(wall), max(wall)))
if cpu:
    print("  CPU seconds on the hop (perf): median %.3f (min %.3f, max %.3f)" % (
        statistics.median(cpu), min(cpu), max(cpu)))
PY
