#!/usr/bin/env bash
# e2e_ports: nodes bind their own ports, with real pftnet launch / pftnode processes on the bundled
# example data:
#  1. open ports under the launcher: chain a -> b -> c with a at tcp://127.0.0.1:*, b at tcp://127.0.0.1:0 and
#     c without endpoint (no port_base: the launcher gives port 0). Every node exits 0, c holds a, b and c;
#     each node's out/endpoint is tcp://127.0.0.1:N with N > 0, the three distinct, equal to result.json
#     `endpoint` and to the "listening on" line of its log, and each predecessor's log says it read its
#     successor's endpoint from that file.
#  2. a successor that moves: a -> b from --prepare-only commands (which remove an endpoint file an earlier
#     run left in b's folder); b starts, reports its endpoint and is
#     SIGKILLed; a starts and connects to the dead port; b is restarted on a new port, a follows it ("b moved
#     to"), both exit 0 and b received a's bundle.
#  3. a port held by another process: b's fixed endpoint tcp://127.0.0.1:P with P held (bound, listening) by
#     this script: b's pftnode exits 5 and says it cannot bind P (address in use); with P still held and b's
#     port left open, a -> b completes and b reports a port other than P.
# Env: PFT_BIN, PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY (holds a port, reads result.json)"
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
W=$(mktemp -d /tmp/pft_ports_XXXXXX)
pids=()
cleanup() {
    kill -KILL "${pids[@]}" 2>/dev/null
    if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi
}
trap cleanup EXIT

topo() { # NAME BODY -> W/NAME.dot
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 40; k = 1; cov = diag; max_iter = 20;\n  deadline = 600; send_deadline = 300;\n  %s\n}\n' \
        "$1" "$DATA" "$2" >"$W/$1.dot"
}
prepare() { # NAME BODY -> W/NAME.prep (one pftnode command per line)
    topo "$1" "$2"
    "$PFT_BIN/pftnet" launch "$W/$1.dot" --out "$W/$1" --prepare-only >"$W/$1.prep" 2>&1 ||
        { fail "prepare $1 exited $?: $(cat "$W/$1.prep")"; exit 1; }
}
start() { # NAME ID -> pid in $started (output appended to W/NAME-ID.log)
    $(grep -- "--out $W/$1/$2 " "$W/$1.prep") --linger-ms 300 >>"$W/$1-$2.log" 2>&1 &
    started=$!
    pids+=("$started")
}
wait_file() { # PATH SECONDS: 0 once it exists
    local end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        [ -e "$1" ] && return 0
        sleep 0.01
    done
    return 1
}

# 1. open ports under the launcher
topo open 'a -> b -> c;
  a [endpoint = "tcp://127.0.0.1:*"];
  b [endpoint = "tcp://127.0.0.1:0"];'
"$PFT_BIN/pftnet" launch "$W/open.dot" --out "$W/open" --no-baselines --quiet >"$W/open.out" 2>"$W/open.err" ||
    fail "open: launch exited $?: $(tail -n 5 "$W/open.err")"
grep -q 'endpoint *= *"tcp://127.0.0.1:0"' "$W/open/topology.dot" ||
    fail "open: the launcher did not give c an open port: $(grep endpoint "$W/open/topology.dot")"
"$PY" - "$W/open" <<'PY' || fail "open ports"
import json, re, sys
d = sys.argv[1]
eps = {}
for i in "abc":
    ep = open("%s/%s/endpoint" % (d, i)).read().strip()
    m = re.fullmatch(r"tcp://127\.0\.0\.1:(\d+)", ep)
    assert m and 0 < int(m.group(1)) < 65536, (i, ep)
    r = json.load(open("%s/%s/result.json" % (d, i)))
    assert r["exit_code"] == 0 and r["endpoint"] == ep, (i, r["exit_code"], r.get("endpoint"), ep)
    log = open("%s/%s/node.log" % (d, i)).read()
    assert re.search(r"listening on %s\b" % re.escape(ep), log), (i, ep)
    eps[i] = ep
assert len(set(eps.values())) == 3, eps
for pred, succ in (("a", "b"), ("b", "c")):
    log = open("%s/%s/node.log" % (d, pred)).read()
    want = "%s listens on %s (from %s/%s/endpoint)" % (succ, eps[succ], d, succ)
    assert want in log, (pred, want)
# result.json "transport": the transport's own counters, agreeing with the node's
for i, acked, accepted in (("a", 1, 0), ("b", 1, 1), ("c", 0, 1)):
    r = json.load(open("%s/%s/result.json" % (d, i)))
    t = r["transport"]
    assert t["acked"] == acked and t["accepted"] == accepted and t["failed"] == 0, (i, t)
    assert t["bytes_sent"] == r["bytes_sent"] and t["retries"] == r["retries"], (i, t)
    assert (t["offers"] >= 1) == (acked == 1) and t["offer_bytes"] == 46 * t["offers"], (i, t)
    assert t["eager_sends"] + t["grants_received"] >= acked, (i, t)
c = json.load(open(d + "/c/result.json"))
assert sorted(p["node"] for p in c["provenance"]) == ["a", "b", "c"], c["provenance"]
assert c["missing"] == [], c["missing"]
print("open: a %s, b %s, c %s; c holds a, b, c" % (eps["a"], eps["b"], eps["c"]))
PY

# 2. a successor that moves to another port
mkdir -p "$W/move/b" && echo "tcp://127.0.0.1:1" >"$W/move/b/endpoint" # an earlier run's, its port gone
prepare move "a -> b;"
[ ! -e "$W/move/b/endpoint" ] || fail "move: the launcher left an earlier run's endpoint file in b's folder"
start move b; pb=$started
wait_file "$W/move/b/endpoint" 300 || fail "move: b never reported its endpoint"
old=$(cat "$W/move/b/endpoint")
kill -KILL "$pb"
wait "$pb" 2>/dev/null
start move a; pa=$started
wait_file "$W/move/a/sent/h1" 300 || fail "move: a never recorded its send"
# a has read b's old endpoint and retries on the dead port meanwhile (the event, not a time)
for _ in $(seq 1 30000); do grep -qF "b listens on $old " "$W/move-a.log" 2>/dev/null && break; sleep 0.01; done
start move b; pb=$started
wait "$pb"; rb=$?
wait "$pa"; ra=$?
new=$(cat "$W/move/b/endpoint")
[ "$ra" -eq 0 ] || fail "move: a exited $ra"
[ "$rb" -eq 0 ] || fail "move: restarted b exited $rb"
[ "$old" != "$new" ] || fail "move: b came back on its old endpoint $old (the test needs another one)"
grep -q "b listens on $old " "$W/move-a.log" || fail "move: a never connected to b's first endpoint $old"
grep -q "b moved to $new " "$W/move-a.log" || fail "move: a did not follow b to $new: $(grep ' b ' "$W/move-a.log")"
"$PY" - "$W/move" <<'PY' || fail "move: hand-off"
import json, sys
a = json.load(open(sys.argv[1] + "/a/result.json"))
b = json.load(open(sys.argv[1] + "/b/result.json"))
assert a["sent"][0]["state"] == "acked", a["sent"]
assert a["sent"][0]["bundle_id"] in [x["bundle_id"] for x in b["received"]], (a["sent"], b["received"])
PY
echo "move: b at $old, killed, back at $new; a followed it, hand-off acked"

# 3. a port held by another process
"$PY" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
time.sleep(600)' >"$W/held.port" &
holder=$!
pids+=("$holder")
wait_file "$W/held.port" 10
for _ in $(seq 1 100); do [ -s "$W/held.port" ] && break; sleep 0.05; done
P=$(cat "$W/held.port")
[ -n "$P" ] || { fail "held: no port held"; exit 1; }
prepare fixed "a -> b;
  b [endpoint = \"tcp://127.0.0.1:$P\"];"
start fixed b; pb=$started
wait "$pb"; rfixed=$?
[ "$rfixed" -eq 5 ] || fail "fixed: b exited $rfixed on a held port, expected 5"
grep -q "binding tcp://127.0.0.1:$P: .*Address already in use" "$W/fixed-b.log" ||
    fail "fixed: b's log does not say it cannot bind $P: $(tail -n 3 "$W/fixed-b.log")"
prepare free "a -> b;"
start free b; pb=$started
start free a; pa=$started
wait "$pb"; rb=$?
wait "$pa"; ra=$?
[ "$ra" -eq 0 ] && [ "$rb" -eq 0 ] || fail "free: a exited $ra, b $rb with port $P held elsewhere"
got=$(cat "$W/free/b/endpoint" 2>/dev/null)
[ -n "$got" ] && [ "$got" != "tcp://127.0.0.1:$P" ] || fail "free: b reports '$got' while $P is held"
echo "held port $P: b's fixed endpoint -> exit $rfixed (cannot bind: address in use); open port -> b at $got, a and b exit 0"
kill "$holder" 2>/dev/null
finish
