#!/usr/bin/env bash
# e2e_orgs: three organisations a, b, c, each on its own host (a network namespace on one bridge; loopback
# addresses 127.0.0.1-3 where namespaces cannot be made), each with a folder that holds only its own rows and
# its own secret key: the other nodes' files do not exist there, and no folder is shared. They follow
# docs/USAGE.md's walk-through: each runs `pftnet keygen`, sends the others its public key line, endpoint and
# row count, and all three write the same topology from them; each starts its own pftnode.
#   1. a chain a -> b -> c, on a shared file in which every node names its own files by relative paths that
#      exist only in that node's folder (a local simulation's style: each node reads only its own entry's);
#   2. a star a, b -> c with secure_agg = true, on a public topology (no one's files) with each node's files
#      on its command line.
# Each run must end with every node ok and the same accuracies as the same topology under `pftnet launch` on
# one machine (a file naming each node's files, without endpoints or keys: the launcher assigns and makes
# them, also with port_base and no keys), and `pftnet collect` on the three folders must reconcile every
# hand-off (exit 0).
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR; PFT_ORGS_KEEP=1 keeps the outputs.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

NET=$PFT_BIN/pftnet
NODE=$PFT_BIN/pftnode
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -x "$NET" ] && [ -x "$NODE" ] || skip "no pftnet/pftnode in $PFT_BIN"
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
command -v python3 >/dev/null 2>&1 || skip "no python3"
command -v timeout >/dev/null 2>&1 || skip "coreutils timeout not installed"
NODE_TIMEOUT=300 # bound of each pftnode process (a hang, never a verdict)

WORK=$(mktemp -d /tmp/pft_orgs_XXXXXX)
HOSTS_TAG=pfo$$
. "$(dirname "${BASH_SOURCE[0]}")/lib_hosts.sh" # hosts_up, on_host, hosts_down, HOST_ADDR, HOSTS_MODE
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    hosts_down
    if [ "$FAILED" = 0 ] && [ "${PFT_ORGS_KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else echo "outputs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ORGS=(a b c)
hosts_up 10.78.0.1 10.78.0.2 10.78.0.3
echo "hosts: $HOSTS_MODE (${HOST_ADDR[*]})"

# ---- each organisation's own rows: a launcher's split of the bundled data, moved into the org's folder ----
printf 'digraph split {\n  dataset = "%s"; partition = iid; samples = 60; seed = 3;\n  a -> b -> c;\n}\n' \
    "$DATA" >"$WORK/split.dot"
"$NET" launch "$WORK/split.dot" --out "$WORK/split" --prepare-only --insecure --quiet >/dev/null 2>"$WORK/split.err" ||
    { fail "splitting the data: $(cat "$WORK/split.err")"; exit 1; }
for o in "${ORGS[@]}"; do
    mkdir -p "$WORK/org_$o/$o-data"
    cp "$WORK/split/$o/data/"*.npy "$WORK/org_$o/$o-data/" || { fail "copying $o's share"; exit 1; }
done
rm -rf "$WORK/split" # from here on, each organisation's rows are in its folder only

# ---- each organisation: its keypair; what it sends the others: public key line, endpoint, rows ----
declare -A PUB EP ROWS
i=0
for o in "${ORGS[@]}"; do
    i=$((i + 1))
    PUB[$o]=$(cd "$WORK/org_$o" && "$NET" keygen "$o" 2>/dev/null) || { fail "keygen $o"; exit 1; }
    EP[$o]="tcp://${HOST_ADDR[$i]}:710$i"
    ROWS[$o]=$(python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); h = int.from_bytes(d[8:10], "little"); print(eval(d[10:10 + h])["shape"][0])' "$WORK/org_$o/$o-data/train_y.npy")
done

# topology NAME SETTINGS EDGES PER_NODE: the shared file as every organisation writes it; PER_NODE: "files"
# (each node names its own files), "public" (none), "launch" (files, but no endpoint or key: one machine)
topology() {
    local o attrs
    printf 'digraph %s {\n  seed = 7; deadline = 120; send_deadline = 120;\n  %s\n' "$1" "$2"
    for o in "${ORGS[@]}"; do
        attrs="rows = ${ROWS[$o]}"
        [ "$4" = launch ] || attrs="endpoint = \"${EP[$o]}\", key = \"${PUB[$o]}\", $attrs"
        [ "$4" = public ] || attrs="$attrs, train = \"$o-data/train_x.npy\", labels = \"$o-data/train_y.npy\", test = \"$o-data/test_x.npy\", test_labels = \"$o-data/test_y.npy\""
        printf '  %s [%s];\n' "$o" "$attrs"
    done
    printf '  %s\n}\n' "$3"
}

# run_orgs NAME PER_NODE: the topology copied into every org's folder, each org's pftnode started on its
# host from its folder (command line as in docs/USAGE.md), all waited for
run_orgs() {
    local name=$1 o i=0 extra pids=()
    for o in "${ORGS[@]}"; do
        i=$((i + 1))
        cp "$WORK/$name.dot" "$WORK/org_$o/$name.dot"
        extra=()
        [ "$2" = public ] && extra=(--train "$o-data/train_x.npy" --labels "$o-data/train_y.npy"
            --test "$o-data/test_x.npy" --test-labels "$o-data/test_y.npy")
        (cd "$WORK/org_$o" && on_host "$i" timeout -k 5 "$NODE_TIMEOUT" "$NODE" --topology "$name.dot" --id "$o" \
            --out "out-$name" --key "$o.key" "${extra[@]}") >"$WORK/$name-$o.log" 2>&1 &
        pids+=($!)
        PIDS+=($!)
    done
    for i in 0 1 2; do
        wait "${pids[$i]}" || fail "$name: node ${ORGS[$i]} exited $? ($(tail -n 2 "$WORK/$name-${ORGS[$i]}.log"))"
    done
}

# check_apart NAME: no org's folder holds another's rows or secret key
check_apart() {
    local o p
    for o in "${ORGS[@]}"; do
        for p in "${ORGS[@]}"; do
            [ "$o" = "$p" ] && continue
            [ -e "$WORK/org_$o/$p-data" ] && fail "$1: org $o's folder holds $p's data"
            [ -e "$WORK/org_$o/$p.key" ] && fail "$1: org $o's folder holds $p's secret key"
        done
    done
}

# compare NAME: each node's accuracy and rows apart equal those under pftnet launch of NAME-launch.dot
compare() {
    local name=$1
    mkdir -p "$WORK/one"
    for o in "${ORGS[@]}"; do cp -r "$WORK/org_$o/$o-data" "$WORK/one/"; done
    cp "$WORK/$name-launch.dot" "$WORK/one/"
    "$NET" launch "$WORK/one/$name-launch.dot" --out "$WORK/one/$name" --quiet --no-baselines \
        >"$WORK/$name-launch.out" 2>&1 || fail "$name: pftnet launch on one machine exited $? ($(tail -n 3 "$WORK/$name-launch.out"))"
    # the launch's split: its topology names no node's file; each node's are in its own node.conf
    grep -q 'npy' "$WORK/one/$name/topology.dot" && fail "$name: the launch's topology.dot names node files"
    grep -q "^train = .*/a-data/train_x.npy" "$WORK/one/$name/a/node.conf" ||
        fail "$name: a's node.conf does not name its train file"
    python3 - "$WORK" "$name" <<'PY' || fail "$name: results apart differ from the launch's"
import json, sys
work, name = sys.argv[1:3]
one = {n["id"]: n for n in json.load(open(f"{work}/one/{name}/results.json"))["nodes"]}
for o in "abc":
    r = json.load(open(f"{work}/org_{o}/out-{name}/result.json"))
    keys = ("status", "accuracy_local", "n_real", "n_synthetic")
    apart, local = [r.get(k) for k in keys], [one[o].get(k) for k in keys]
    print(f"{name} {o}: apart {apart}  one machine {local}")
    assert r["status"] == "ok" and apart == local, (o, apart, local)
    assert r["accuracy_global"] is None, "no organisation holds the union of the test splits"
PY
}

# collect NAME: pftnet collect on the three folders reconciles every hand-off
collect() {
    local name=$1
    "$NET" collect "$WORK/org_a/$name.dot" "$WORK/org_a/out-$name" "$WORK/org_b/out-$name" "$WORK/org_c/out-$name" \
        --out "$WORK/collected-$name" --quiet >"$WORK/collect-$name.out" 2>&1 ||
        fail "$name: pftnet collect exited $? ($(cat "$WORK/collect-$name.out"))"
    python3 - "$WORK/collected-$name/results.json" <<'PY' || fail "$name: collect did not reconcile every hand-off"
import json, sys
r = json.load(open(sys.argv[1]))
v = [(h["from"], h["to"], h["verdict"]) for h in r["handoffs"]]
print("hand-offs:", v)
assert v and all(x[2] == "ok" for x in v), v
PY
}

# ---- 1. the chain, each node naming its own files in the shared file ----
topology orgs3 'k = 2; cov = diag; max_iter = 30; head_draws = 2; em_draws = 1; min_rows = 1;' \
    'a -> b -> c;' files >"$WORK/orgs3.dot"
topology orgs3 'k = 2; cov = diag; max_iter = 30; head_draws = 2; em_draws = 1; min_rows = 1;' \
    'a -> b -> c;' launch >"$WORK/orgs3-launch.dot"
run_orgs orgs3 files
check_apart orgs3
compare orgs3
# the launcher makes the keys one node at a time: a file without keys is not "some nodes have one"
sed 's/seed = 7;/seed = 7; port_base = 29700;/' "$WORK/orgs3-launch.dot" >"$WORK/one/pb.dot"
"$NET" launch "$WORK/one/pb.dot" --out "$WORK/one/pb" --prepare-only >"$WORK/pb.out" 2>&1 ||
    fail "launching a file with port_base and no keys: exit $? ($(tail -n 2 "$WORK/pb.out"))"
collect orgs3
prov=$(python3 -c 'import json,sys; print(",".join(sorted(p["node"] for p in json.load(open(sys.argv[1]))["provenance"])))' \
    "$WORK/org_c/out-orgs3/result.json" 2>/dev/null)
[ "$prov" = "a,b,c" ] || fail "orgs3: c's provenance is '$prov', expected a,b,c"

# ---- 2. the star with secure aggregation, on the public topology ----
topology star3 'cov = tied; prep = l2; secure_agg = true; min_contributors = 2;' 'a -> c; b -> c;' public \
    >"$WORK/star3.dot"
topology star3 'cov = tied; prep = l2; secure_agg = true; min_contributors = 2;' 'a -> c; b -> c;' launch \
    >"$WORK/star3-launch.dot"
grep -q 'npy' "$WORK/star3.dot" && fail "star3: the public topology names a file"
run_orgs star3 public
check_apart star3
compare star3
collect star3
python3 - "$WORK/org_c/out-star3/result.json" <<'PY' || fail "star3: c did not open a and b's masked sum"
import json, sys
s = json.load(open(sys.argv[1]))["secure_agg"]
print("c opens", s["opens"], "sees", s["view"])
assert sorted(s["opens"]) == ["a", "b"], s
PY

if [ "$FAILED" != 0 ]; then
    for f in "$WORK"/*.log; do
        echo "--- $f (tail)" >&2
        tail -n 4 "$f" >&2
    done
fi
finish
