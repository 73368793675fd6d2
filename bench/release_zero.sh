#!/usr/bin/env bash
# bench/release_zero.sh TOPO KIND RULE OUT [SEED]: the accuracy a release rule costs, measured with pftnode
# itself and no change to it: `pftnet launch TOPO --prepare-only` (cov = tied, the default exact release) writes
# every node's data, bench/release_zero.py --withhold RULE removes from each node's training rows the classes
# RULE would leave out of its part (KIND: chain or star), then every node runs; prints each node's
# accuracy_global. For a star the aggregator's figure is the one that counts, for a chain the last node's
# (a sending node's own head loses the removed rows too, which the rule would not take from it).
# RULE floor:M is what min_rows = M does (`pftnet launch TOPO --set cov=tied --set min_rows=M` measures it
# directly). A node left without rows is not started: its successors wait for it until their deadline (DEADLINE
# sets a shorter one, seconds), then proceed without it, as they would without its bundle.
# Env: PFT_BIN (default build/node), PYTHON (default /usr/bin/python3, with numpy), DEADLINE.
set -eu
TOPO=$1 KIND=$2 RULE=$3 OUT=$4 SEED=${5:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PFT_BIN:-$ROOT/build/node}
PY=${PYTHON:-/usr/bin/python3}
PFTNODE=$BIN/pftnode "$BIN/pftnet" launch "$TOPO" --out "$OUT" --force --seed "$SEED" --set cov=tied \
    --set port_base=$((20000 + RANDOM % 20000)) ${DEADLINE:+--set deadline=$DEADLINE} --prepare-only >"$OUT.cmds"
"$PY" "$ROOT/bench/release_zero.py" "$OUT" --kind "$KIND" --withhold "$RULE"
pids=()
while read -r line; do
    case $line in
    *pftnode\ --topology*)
        id=$(sed 's/.* --id \([^ ]*\) .*/\1/' <<<"$line")
        if [ -f "$OUT/$id/data/train_y.npy" ] && [ "$(stat -c %s "$OUT/$id/data/train_y.npy")" -le 128 ]; then
            echo "  $id: every row withheld, not started (its successors proceed without it at their deadline)"
            continue
        fi
        eval "$line --log-level warn" >/dev/null 2>&1 &
        pids+=($!)
        ;;
    esac
done <"$OUT.cmds"
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
"$PY" - "$OUT" <<'PYEOF'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*", "result.json"))):
    r = json.load(open(f))
    print(f"{os.path.basename(os.path.dirname(f)):7} accuracy_global {r.get('accuracy_global')}")
PYEOF
exit $rc
