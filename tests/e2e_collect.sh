#!/usr/bin/env bash
# e2e_collect: `pftnet collect` gathers the results of nodes run by hand. A chain a -> b -> c on the bundled
# PACS sample is prepared with `pftnet launch --prepare-only` and each node run by hand with pftnode, each with
# its own --out folder; c's result.json also travels as a lone file (what a party would hand over). Then:
# - collect gives one results.json with every node and both hand-offs reconciled `ok` (exit 0), and
#   `pftnet report` reads it;
# - the per-node figures equal those of the same topology under `pftnet launch`;
# - a node left out is listed with status "no result.json", its hand-offs "unverified" (exit 3), whether it
#   is the receiver or the sender;
# - a receiver whose record contradicts its sender's makes the hand-off a `contradiction` (exit 1);
# - a result.json of another run, of an unknown node, of a node the topology gives another role, or a node
#   given twice is refused naming the file (exit 2), and nothing is written;
# - a launch's results.json is not replaced without --force; a collect's own is.
# Every wait is for a process to end (each pftnode bounded by `timeout`), never for a time.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
NODE_TIMEOUT=300 # bound of each pftnode process (its deadlines are 120 s)
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
command -v timeout >/dev/null 2>&1 || skip "coreutils timeout not installed"
W=$(mktemp -d /tmp/pft_collect_XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi' EXIT
NET="$PFT_BIN/pftnet"
# em_draws and head_draws differ and dtype is stated, so that results.json's settings can be checked against them
printf 'digraph hand3 {\n  dataset = "%s"; partition = iid; samples = 40; k = 2; cov = diag; deadline = 120;\n  em_draws = 1; head_draws = 2; dtype = fp16;\n  a -> b -> c;\n}\n' \
    "$DATA" >"$W/hand3.dot"

# ---- the chain by hand: prepared by the launcher, each node started from its printed command ----
"$NET" launch "$W/hand3.dot" --out "$W/run" --prepare-only >"$W/prep.out" 2>&1 ||
    { fail "prepare-only exited $?: $(cat "$W/prep.out")"; exit 1; }
T=$W/run/topology.dot
for id in c b a; do
    cmd=$(grep -- "--id $id " "$W/prep.out")
    [ -n "$cmd" ] || { fail "no pftnode command for $id in: $(cat "$W/prep.out")"; exit 1; }
    case "$cmd" in *"--node-file "*) ;; *) fail "$id's printed command has no --node-file: $cmd" ;; esac
    nf=$(sed -n 's/.*--node-file \([^ ]*\).*/\1/p' <<<"$cmd")
    grep -q '^eval_features = ' "$nf" || fail "$id's node file $nf names no eval_features: $(cat "$nf")"
    # its own --out folder, outside the launcher's run folder; the three share a parent (the default --peers-dir)
    # because the topology leaves their ports open (each reads its successor's endpoint file there)
    cmd=${cmd/--out $W\/run\/$id/--out $W\/hand\/$id}
    timeout "$NODE_TIMEOUT" $cmd >"$W/$id.log" 2>&1 &
    pids+=($!)
done
for i in 0 1 2; do
    wait "${pids[$i]}" || fail "node ${pids[$i]} (c, b, a in that order) exited $?: $(tail -n 3 "$W"/*.log)"
done
[ "$FAILED" = 0 ] || exit 1
mkdir -p "$W/mail"
cp "$W/hand/c/result.json" "$W/mail/c-result.json" # c's result, handed over as a file

# check_results FILE PYTHON: runs PYTHON with r = FILE's JSON and the helpers below; fails with its message
check_results() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
nodes = {n["id"]: n for n in r["nodes"]}
def verdicts():
    return {(h["from"], h["to"]): h["verdict"] for h in r["handoffs"]}
exec(sys.argv[2])
PY
}

# ---- every node: one results.json, both hand-offs ok, the report reads it ----
"$NET" collect "$T" "$W/hand/a" "$W/hand/b" "$W/mail/c-result.json" --out "$W/all" >"$W/all.out" 2>"$W/all.err"
rc=$?
[ "$rc" -eq 0 ] || fail "collect of every node exited $rc, expected 0: $(cat "$W/all.err")"
check_results "$W/all/results.json" '
assert [n["id"] for n in r["nodes"]] == ["a", "b", "c"], [n["id"] for n in r["nodes"]]
for i, n in nodes.items():
    assert n["status"] == "ok" and n["run"] == "hand3", (i, n.get("status"))
    assert isinstance(n["accuracy_global"], float), (i, "accuracy_global", n.get("accuracy_global"))
assert [nodes[i]["hop"] for i in "abc"] == [0, 1, 2]
assert verdicts() == {("a", "b"): "ok", ("b", "c"): "ok"}, r["handoffs"]
assert r["n_nodes"] == 3 and r["kind"] == "chain" and r["run"] == "hand3", (r["n_nodes"], r["kind"])
assert sorted(r["collected_from"]) == ["a", "b", "c"], r["collected_from"]
assert r["collected_from"]["c"].endswith("mail/c-result.json"), r["collected_from"]
' 2>"$W/check.err" || fail "results.json of every node: $(tail -n 3 "$W/check.err")"
[ -s "$W/all/table.txt" ] || fail "no table.txt"
grep -q "^c  *sink " "$W/all.out" || fail "the printed table has no row for c: $(cat "$W/all.out")"
"$NET" report "$W/all" --out "$W/report.md" 2>"$W/report.err" || fail "report exited $?: $(cat "$W/report.err")"
grep -q "^| c | 2 | sink | " "$W/report.md" || fail "the report has no row for c: $(cat "$W/report.md")"

# ---- the same topology under pftnet launch: the same figures per node ----
"$NET" launch "$W/hand3.dot" --out "$W/launch" --no-baselines --quiet >"$W/launch.out" 2>&1 ||
    fail "launch exited $?: $(tail -n 5 "$W/launch.out")"
python3 - "$W/all/results.json" "$W/launch/results.json" <<'PY' 2>"$W/cmp.err" || fail "hand vs launch: $(tail -n 3 "$W/cmp.err")"
import json, sys
hand, launch = ({n["id"]: n for n in json.load(open(p))["nodes"]} for p in sys.argv[1:3])
assert sorted(hand) == sorted(launch), (sorted(hand), sorted(launch))
for i in hand:
    for key in ("accuracy_local", "accuracy_global", "n_real", "n_synthetic", "bytes_sent", "bytes_received"):
        assert hand[i][key] == launch[i][key], (i, key, hand[i][key], launch[i][key])
PY

# ---- what both wrote, checked against the nodes' own records: each node's entry, hops, hand-offs and their
# bytes, settings, table.txt, the report's figures (tests/launch_check.py) ----
python3 "$PFT_SOURCE_DIR/tests/launch_check.py" --pftnet "$NET" --all-ok "$W/all" "$W/launch" >"$W/lc.out" 2>&1 ||
    fail "what collect and launch wrote: $(cat "$W/lc.out")"

# ---- the run's wall time is its longest node's, wherever that node sits in the file (here a, the first: a
# party's result as handed over, its wall time raised; in the runs above the last node is also the longest) ----
python3 - "$W" <<'PY' || fail "could not write the slow result"
import json, sys
w = sys.argv[1]
r = json.load(open(f"{w}/hand/a/result.json"))
r["wall_seconds"] = 10000.0
json.dump(r, open(f"{w}/mail/a-slow.json", "w"))
PY
"$NET" collect "$T" "$W/mail/a-slow.json" "$W/hand/b" "$W/hand/c" --out "$W/slow" --quiet >/dev/null 2>"$W/slow.err" ||
    fail "collect with a slow a exited $?: $(cat "$W/slow.err")"
check_results "$W/slow/results.json" 'assert r["wall_seconds"] == 10000.0, r["wall_seconds"]' 2>"$W/check.err" ||
    fail "a collect's wall time is not its longest node's: $(tail -n 3 "$W/check.err")"

# ---- a node left out: listed, its hand-offs unverified, exit 3 ----
"$NET" collect "$T" "$W/hand/a" "$W/hand/b" --out "$W/no_c" >/dev/null 2>"$W/no_c.err"
rc=$?
[ "$rc" -eq 3 ] || fail "collect without c exited $rc, expected 3: $(cat "$W/no_c.err")"
grep -q "no result.json for c" "$W/no_c.err" || fail "collect without c does not say so: $(cat "$W/no_c.err")"
check_results "$W/no_c/results.json" '
assert nodes["c"]["status"] == "no result.json", nodes["c"]
assert verdicts() == {("a", "b"): "ok", ("b", "c"): "unverified"}, r["handoffs"]
' 2>"$W/check.err" || fail "results.json without c: $(tail -n 3 "$W/check.err")"
"$NET" collect "$T" "$W/hand/b" "$W/hand/c" --out "$W/no_a" --quiet >/dev/null 2>"$W/no_a.err"
rc=$?
[ "$rc" -eq 3 ] || fail "collect without a exited $rc, expected 3: $(cat "$W/no_a.err")"
check_results "$W/no_a/results.json" '
assert nodes["a"]["status"] == "no result.json", nodes["a"]
assert verdicts() == {("a", "b"): "unverified", ("b", "c"): "ok"}, r["handoffs"]
' 2>"$W/check.err" || fail "results.json without a: $(tail -n 3 "$W/check.err")"
"$NET" report "$W/no_a" >/dev/null 2>"$W/report.err" || fail "report of a partial collect exited $?: $(cat "$W/report.err")"
python3 "$PFT_SOURCE_DIR/tests/launch_check.py" --pftnet "$NET" "$W/no_a" >"$W/lc.out" 2>&1 ||
    fail "what a partial collect wrote: $(cat "$W/lc.out")"

# ---- a fault: c does not hold the bundle b says c acknowledged (contradiction), exit 1 with results ----
python3 - "$W" <<'PY' || fail "could not write the altered result"
import json, sys
w = sys.argv[1]
r = json.load(open(f"{w}/hand/c/result.json"))
r["received"][0]["bundle_id"] = "0" * 64  # c's record names another bundle than the one b sent
json.dump(r, open(f"{w}/mail/c-other-bundle.json", "w"))
PY
"$NET" collect "$T" "$W/hand/a" "$W/hand/b" "$W/mail/c-other-bundle.json" --out "$W/fault" --quiet \
    >/dev/null 2>"$W/fault.err"
rc=$?
[ "$rc" -eq 1 ] || fail "collect with a contradicted hand-off exited $rc, expected 1: $(cat "$W/fault.err")"
grep -q "hand-off b -> c (bundle [0-9a-f]*): contradiction" "$W/fault.err" ||
    fail "the contradiction is not named: $(cat "$W/fault.err")"
check_results "$W/fault/results.json" '
assert verdicts() == {("a", "b"): "ok", ("b", "c"): "contradiction"}, r["handoffs"]
' 2>"$W/check.err" || fail "results.json with a contradiction: $(tail -n 3 "$W/check.err")"

# ---- refused, naming the file, nothing written: other run, unknown node, another role, a node twice ----
python3 - "$W" <<'PY' || fail "could not write the foreign results"
import json, sys
w = sys.argv[1]
def variant(src, dst, **changes):
    r = json.load(open(f"{w}/hand/{src}/result.json"))
    r.update(changes)
    json.dump(r, open(f"{w}/mail/{dst}", "w"))
variant("b", "other-run.json", run="hand4")  # the run id another topology gives
variant("b", "unknown.json", id="z")
variant("c", "c-as-a.json", id="a")          # a sink's result under a source's name
PY
refused() { # NAME PATTERN PATH...: collect PATH... must exit 2, naming PATTERN, writing nothing
    local name=$1 pattern=$2
    shift 2
    "$NET" collect "$T" "$@" --out "$W/refused_$name" >/dev/null 2>"$W/refused_$name.err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "$name: exited $rc, expected 2: $(cat "$W/refused_$name.err")"
    grep -qF -- "$pattern" "$W/refused_$name.err" || fail "$name: no '$pattern' in: $(cat "$W/refused_$name.err")"
    [ ! -e "$W/refused_$name" ] || fail "$name: $W/refused_$name was written"
}
refused other_run "$W/mail/other-run.json: a result of run 'hand4'" "$W/hand/a" "$W/mail/other-run.json"
refused unknown "$W/mail/unknown.json: node 'z' is not a node of" "$W/mail/unknown.json"
refused role "$W/mail/c-as-a.json: node 'a' has role sink there" "$W/mail/c-as-a.json" "$W/hand/b"
refused twice "both hold node 'c'" "$W/hand/c" "$W/mail/c-result.json"
refused no_result "$W/mail: no result.json there" "$W/mail"

# ---- a launch's results.json is kept without --force; a collect's own is replaced ----
sum=$(sha256sum <"$W/launch/results.json")
"$NET" collect "$T" "$W/hand/a" "$W/hand/b" "$W/hand/c" --out "$W/launch" --quiet >/dev/null 2>"$W/over.err"
rc=$?
[ "$rc" -eq 2 ] || fail "collect into a launch folder exited $rc, expected 2: $(cat "$W/over.err")"
[ "$(sha256sum <"$W/launch/results.json")" = "$sum" ] || fail "collect replaced a launch's results.json"
"$NET" collect "$T" "$W/hand/a" "$W/hand/b" "$W/hand/c" --out "$W/no_c" --quiet >/dev/null 2>"$W/again.err" ||
    fail "collect again into its own folder exited $?: $(cat "$W/again.err")"
check_results "$W/no_c/results.json" 'assert nodes["c"]["status"] == "ok", nodes["c"]' 2>"$W/check.err" ||
    fail "collect again did not replace its own results.json: $(tail -n 3 "$W/check.err")"

[ "$FAILED" = 0 ] && echo "e2e_collect: ok"
finish
