#!/usr/bin/env bash
# e2e_behaviour: documented pftnode behaviour that no other test observed, each through exit codes and files
# (pftnode is a black box): on_missing = fail exits 6 at the deadline, proceed 16 (degraded; launch and
# collect name it); malformed data exits 4; EM on features
# beyond its range exits 8; SIGTERM to a waiting node exits 10; dp_delta and dp_mech set the σ each class is
# released with (the formulas of docs/USAGE.md, computed here); stats_dtype = fp16 halves the statistics on the
# wire (and decodes); a non-default resend_grace keeps a node reachable that long after its last ACK. Real
# processes on loopback on the bundled example data. Env: PFT_BIN (folder with pftnet and pftnode),
# PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
PFTNODE=$PFT_BIN/pftnode
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -x "$PFTNET" ] && [ -x "$PFTNODE" ] || skip "no pftnet/pftnode in $PFT_BIN"
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
command -v python3 >/dev/null 2>&1 || skip "no python3"

W=$(mktemp -d /tmp/pft_behaviour_XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi
}
trap cleanup EXIT

# topo NAME BODY: W/NAME.dot, small models on the example data
topo() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 60; k = 1; cov = diag; max_iter = 20;\n  em_draws = 2; head_draws = 1; deadline = 120; send_deadline = 60;\n%s\n}\n' \
        "$1" "$DATA" "$2" >"$W/$1.dot"
}
# launch NAME [ARGS]: pftnet launch W/NAME.dot into W/NAME; returns its exit status
launch() {
    local name=$1
    shift
    PFTNODE=$PFTNODE "$PFTNET" launch "$W/$name.dot" --out "$W/$name" --quiet --no-baselines "$@" \
        >"$W/$name.stdout" 2>"$W/$name.stderr"
}
# py FILE EXPR: prints EXPR evaluated with r = the JSON in FILE (and math)
py() {
    python3 -c 'import json, math, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
# wait_for FILE TEXT SECONDS: 0 once FILE contains TEXT
wait_for() {
    local i
    for i in $(seq 1 $(($3 * 20))); do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# ---- on_missing = fail: b's predecessor never comes; at its 2 s deadline b exits 6 (proceed would exit 0) ----
topo onfail $'  on_missing = fail;\n  a -> b [deadline = 2];'
launch onfail --absent a --keep-going
[ "$(py "$W/onfail/results.json" '[n["exit_code"] for n in r["nodes"] if n["id"] == "b"][0]')" = 6 ] ||
    fail "on_missing = fail: b's exit code is not 6 ($(tail -3 "$W/onfail/b/node.log" 2>/dev/null))"

# ---- exit 16: a node that went on without its predecessor (on_missing = proceed) says so ----
topo degr '  a -> b [deadline = 2];'
launch degr --absent a || fail "degraded, a --absent: launch exited $? ($(tail -3 "$W/degr.stderr"))"
[ "$(py "$W/degr/b/result.json" '(r["exit_code"], r["status"], r["missing"])')" = "(16, 'degraded', ['a'])" ] ||
    fail "degraded: b's result.json says $(py "$W/degr/b/result.json" '(r["exit_code"], r["status"], r["missing"])')"
grep -q "node b is degraded: it went on without a (--absent)" "$W/degr.stderr" ||
    fail "degraded: launch did not name b ($(cat "$W/degr.stderr"))"
# by hand, a never started: collect reports the degraded node and exits 1, unless --allow-degraded (then 3:
# a's result is missing)
topo degrh '  a -> b [deadline = 1];'
launch degrh --prepare-only --insecure || fail "prepare-only exited $?"
timeout 120 "$PFTNODE" --topology "$W/degrh/topology.dot" --id b --out "$W/degrh/b" --insecure >"$W/degrh-b.log" 2>&1
code=$?
[ $code = 16 ] || fail "degraded by hand: pftnode exited $code, not 16 ($(tail -2 "$W/degrh-b.log"))"
"$PFTNET" collect "$W/degrh/topology.dot" "$W/degrh/b" --out "$W/degrh-c1" >/dev/null 2>"$W/degrh-c1.err"
code=$?
[ $code = 1 ] && grep -q "node b is degraded: it went on without a" "$W/degrh-c1.err" ||
    fail "collect of a degraded node: exit $code ($(cat "$W/degrh-c1.err"))"
"$PFTNET" collect "$W/degrh/topology.dot" "$W/degrh/b" --out "$W/degrh-c2" --allow-degraded >/dev/null \
    2>"$W/degrh-c2.err"
code=$?
[ $code = 3 ] || fail "collect --allow-degraded: exit $code, not 3 ($(cat "$W/degrh-c2.err"))"

# ---- exit 4: a node whose data file is malformed (truncated) refuses at once ----
topo data "  a -> b;"
launch data --prepare-only --insecure || fail "prepare-only exited $?"
head -c 100 "$W/data/b/data/train_x.npy" >"$W/trunc.npy" && mv "$W/trunc.npy" "$W/data/b/data/train_x.npy"
timeout 120 "$PFTNODE" --topology "$W/data/topology.dot" --id b --out "$W/data/b" --insecure \
    >"$W/data-b.out" 2>&1
code=$?
[ $code = 4 ] || fail "malformed data: pftnode exited $code, not 4 ($(tail -2 "$W/data-b.out"))"

# ---- exit 8: EM fails numerically on features beyond its range (|x| > 1e15 with prep = none) ----
topo numeric "  prep = none;
  a -> b;"
launch numeric --prepare-only --insecure || fail "prepare-only exited $?"
python3 - "$W/numeric/a/data/train_x.npy" <<'PY' || fail "could not rewrite a's features"
import struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
hl, off = (int.from_bytes(raw[8:10], "little"), 10) if raw[6] == 1 else (int.from_bytes(raw[8:12], "little"), 12)
assert b"'<f4'" in raw[off:off + hl], "not float32 features"
n = (len(raw) - off - hl) // 4
raw[off + hl:] = struct.pack("<%df" % n, *[3e38 if i % 2 else -3e38 for i in range(n)])
open(sys.argv[1], "wb").write(raw)
PY
timeout 120 "$PFTNODE" --topology "$W/numeric/topology.dot" --id a --out "$W/numeric/a" --insecure \
    >"$W/numeric-a.log" 2>&1
code=$?
[ $code = 8 ] || fail "features of 3e38: pftnode exited $code, not 8 ($(tail -2 "$W/numeric-a.log"))"

# ---- exit 10: SIGTERM to a node waiting for its predecessor ----
topo term "  a -> b;"
launch term --prepare-only --insecure || fail "prepare-only exited $?"
"$PFTNODE" --topology "$W/term/topology.dot" --id b --out "$W/term/b" --insecure >"$W/term-b.log" 2>&1 &
pid=$!
PIDS+=("$pid")
# the event, not a sleep: b says it listens (it then waits for a; its deadline is 120 s)
wait_for "$W/term-b.log" "listening on" 60 || fail "b never said it listens"
kill -TERM "$pid"
wait "$pid"
code=$?
[ $code = 10 ] || fail "SIGTERM to a waiting node: exit $code, not 10"

# ---- dp_delta and dp_mech: the σ of every class release is the documented formula for its n, ε, δ ----
topo dp $'  a [dp_epsilon = 1, dp_delta = 0.001];\n  b [dp_epsilon = 2, dp_mech = thm41];\n  a -> b -> c;'
launch dp || fail "dp run exited $? ($(tail -3 "$W/dp.stderr"))"
# b3 (dp_delta = 0.001 given): σ = 4/(nε)·sqrt(ln(4/δ)); thm41 (the default δ = 1e-5, never 1/n):
# σ = 4/(nε)·sqrt(5 ln(4/δ))
check_dp() { # NODE MECH EPS DELTA FACTOR
    py "$W/dp/$1/result.json" "(
all(abs(c['sigma'] - 4 / (c['n'] * $3) * math.sqrt($5 * math.log(4 / $4))) <= 1e-6 * c['sigma']
    and abs(c['delta'] - $4) <= 1e-6 * c['delta'] for c in r['dp']['per_class'])
    and r['dp']['mechanism'] == '$2' and len(r['dp']['per_class']) > 0)"
}
[ "$(check_dp a b3 1 0.001 1)" = True ] || fail "dp_delta = 0.001: a's σ/δ are not the b3 formula's: $(py "$W/dp/a/result.json" 'r["dp"]')"
[ "$(check_dp b thm41 2 0.00001 5)" = True ] || fail "dp_mech = thm41: b's σ is not Theorem 4.1's: $(py "$W/dp/b/result.json" 'r["dp"]')"

# ---- stats_dtype = fp16: exact statistics at half the bytes, and the bundle still decodes ----
for dt in fp32 fp16; do
    topo "st$dt" "  cov = tied; stats_dtype = $dt;"$'\n'"  a -> b;"
    launch "st$dt" || fail "stats_dtype = $dt: launch exited $?"
done
b32=$(stat -c %s "$W/stfp32/a/bundle.pftb" 2>/dev/null || echo 0)
b16=$(stat -c %s "$W/stfp16/a/bundle.pftb" 2>/dev/null || echo 0)
[ "$b16" -gt 0 ] && [ $((b16 * 10)) -lt $((b32 * 6)) ] ||
    fail "stats_dtype = fp16: a's bundle is $b16 bytes, fp32 $b32 (not about half)"
"$PFTNET" inspect "$W/stfp16/a/bundle.pftb" --json >"$W/st16.json" || fail "the fp16 bundle does not decode"

# ---- resend_grace = 12: the sink stays reachable 12 s after its last ACK (the default is 5 s) ----
topo grace $'  resend_grace = 12;\n  a -> b;'
launch grace || fail "resend_grace run exited $?"
python3 - "$W/grace/b/node.log" <<'PY' || fail "resend_grace = 12: b left too early"
import datetime, sys
def first(text):
    for line in open(sys.argv[1]):
        if text in line:
            return datetime.datetime.fromisoformat(line.split()[0])
got, done = first("received bundle"), first("done in")
assert got and done, "no 'received bundle' / 'done in' line"
stay = (done - got).total_seconds()
print("b left %.1f s after its ACK (resend_grace = 12)" % stay)
assert stay >= 11.8, stay
PY

[ $FAILED = 0 ] && echo "e2e_behaviour: all checks passed"
finish
