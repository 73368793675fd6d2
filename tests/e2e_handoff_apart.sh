#!/usr/bin/env bash
# e2e_handoff_apart: the end of a hand-off settled over the wire, with no shared folder: each node runs from a
# pftnet launch --prepare-only command with its own --out in a folder of its own (so its default --peers-dir, the
# parent of --out, holds no other node's folder: no receipt and no endpoint file of another node can be read),
# at a fixed port of the topology. Faults are driven by the files each node writes in its own folder (polled
# every 10 ms); waits are for files, log lines and exits, bounded only against a hang.
#  1. paused sender: a -> b. a is SIGSTOPped the moment b's inbox file appears; b stores, ACKs, finishes, stays
#     reachable for a's confirmation of the ACK up to send_deadline (20 s) and leaves; a is continued once b
#     has exited. a must exit 0 with its hand-off "acked" (the ACK that reached it while it was stopped is
#     still read after b left), b's received holding a's bundle. (Before: libzmq dropped the unread ACK with
#     the connection, a waited out send_deadline and exited 7, though b used the bundle; with the shared
#     folder it ended "delivered" by finding b's inbox file, which it cannot here.)
#  2. double failure: a -> b -> c; c is down when b sends. b is SIGKILLed the moment its out/sent/h2 record
#     appears (sent, not acknowledged), restarted at once; c starts 20 s after the restarted b said it sends
#     the hand-off again. No node may lose anything: all exit 0, b's hand-off acked, c holds a, b and c.
#  3. restart = same result: a -> b, first without a fault (the reference), then a killed the moment it reads
#     b's ACK, before it records it (PFT_CRASH_AT=on-ack: in its sent -> acked window) and restarted with the
#     same command once b is past resend_grace (5 s) after its ACK and says it waits for a's confirmation. a
#     must exit 0 with the hand-off acked (b answers the restarted a's offer), and a's and b's accuracies, b's
#     provenance and the bundle id b received must equal the reference's. (Before: b left resend_grace after
#     its ACK; a restarted later found nobody and exited 7 at send_deadline.)
# With --netns (ctest e2e_handoff_apart_netns; root and iproute2, else it skips) the same cases run with each node
# on a host of its own: three network namespaces in a chain, nsA 10.77.1.1 =link1= 10.77.1.2 nsB 10.77.2.2
# =link2= 10.77.2.3 nsC (a, b and c), joined by veth links and nothing else, as in e2e_netns.sh.
# The three cases are independent (own folders, own ports: 7301..7303 with --netns), so they run at once: each is
# mostly idle (b waiting out its 20 s for the stopped a, c down 20 s, a down past resend_grace); each counts its
# failures, collected at the end. Env: PFT_BIN, PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY (picks free ports, reads result.json)"
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
NETNS=0
[ "${1:-}" = --netns ] && NETNS=1
W=$(mktemp -d /tmp/pft_apart_XXXXXX)
pids=()
bgs=()
TAG=pfa$$
declare -A NS=([a]=${TAG}a [b]=${TAG}b [c]=${TAG}c) ADDR=([a]=10.77.1.1 [b]=10.77.1.2 [c]=10.77.2.3)
cleanup() {
    kill -TERM "${bgs[@]}" 2>/dev/null
    kill -CONT "${pids[@]}" 2>/dev/null
    kill -KILL "${pids[@]}" 2>/dev/null
    wait 2>/dev/null
    if [ "$NETNS" = 1 ]; then for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null; done; fi
    if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi
}
trap cleanup EXIT

# --netns: three hosts, a chain of veth links, no route but the links (as e2e_netns.sh)
if [ "$NETNS" = 1 ]; then
    command -v ip >/dev/null 2>&1 || skip "iproute2 (ip) not installed"
    [ "$EUID" = 0 ] || skip "needs root (ip netns add)"
    ip netns add "${NS[a]}" 2>"$W/netns.err" || skip "ip netns add not permitted: $(cat "$W/netns.err")"
    { ip netns add "${NS[b]}" && ip netns add "${NS[c]}" &&
        ip link add v1a netns "${NS[a]}" type veth peer name v1b netns "${NS[b]}" &&
        ip link add v2b netns "${NS[b]}" type veth peer name v2c netns "${NS[c]}" &&
        ip -n "${NS[a]}" addr add 10.77.1.1/24 dev v1a && ip -n "${NS[b]}" addr add 10.77.1.2/24 dev v1b &&
        ip -n "${NS[b]}" addr add 10.77.2.2/24 dev v2b && ip -n "${NS[c]}" addr add 10.77.2.3/24 dev v2c &&
        ip -n "${NS[a]}" link set lo up && ip -n "${NS[b]}" link set lo up && ip -n "${NS[c]}" link set lo up &&
        ip -n "${NS[a]}" link set v1a up && ip -n "${NS[b]}" link set v1b up &&
        ip -n "${NS[b]}" link set v2b up && ip -n "${NS[c]}" link set v2c up; } 2>"$W/setup.err" ||
        skip "cannot create veth links in namespaces: $(cat "$W/setup.err")"
    for _ in $(seq 1 100); do # links come up asynchronously: until a reaches b and b reaches c
        ip netns exec "${NS[a]}" bash -c 'exec 3<>/dev/tcp/10.77.1.2/9' 2>&1 | grep -q refused &&
            ip netns exec "${NS[b]}" bash -c 'exec 3<>/dev/tcp/10.77.2.3/9' 2>&1 | grep -q refused && break
        sleep 0.1
    done
fi

# Free loopback ports for fixed endpoints (the kernel's choice, released before the nodes bind them).
ports() { # N -> N port numbers on one line
    "$PY" -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}
PORTS=($(ports 9)) # 3 per case, all taken at once so that the cases running together get distinct ones
prepare() { # NAME CASE SEND_DEADLINE EDGES IDS... -> W/NAME.prep (one pftnode command per line), fixed endpoints
    local name=$1 slot=$2 sdl=$3 edges=$4 eps="" i=0
    shift 4
    for id in "$@"; do
        if [ "$NETNS" = 1 ]; then # a host of its own: its address, a fixed port (one per case)
            eps="$eps  $id [endpoint = \"tcp://${ADDR[$id]}:$((7300 + slot))\"];
"
        else
            eps="$eps  $id [endpoint = \"tcp://127.0.0.1:${PORTS[$((3 * slot - 3 + i))]}\"];
"
        fi
        i=$((i + 1))
    done
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 40; k = 1; cov = diag; max_iter = 20;\n  deadline = 600; send_deadline = %s;\n%s  %s\n}\n' \
        "$name" "$DATA" "$sdl" "$eps" "$edges" >"$W/$name.dot"
    "$PFT_BIN/pftnet" launch "$W/$name.dot" --out "$W/$name" --prepare-only >"$W/$name.prep" 2>&1 ||
        { fail "prepare $name exited $?: $(cat "$W/$name.prep")"; exit 1; }
}
out() { echo "$W/$1.apart/$2/$3/$3"; } # NAME RUN ID: the node's own folder, alone in its parent (--peers-dir)
start() { # NAME RUN ID -> pid in $started (log appended to W/NAME.RUN-ID.log); RUN separates repeats
    local c
    c=$(grep -- "--id $3 --out $W/$1/$3 " "$W/$1.prep") || { fail "$1: no command for $3"; exit 1; }
    mkdir -p "$W/$1.apart/$2/$3"
    local host=()
    [ "$NETNS" = 1 ] && host=(ip netns exec "${NS[$3]}")
    "${host[@]}" ${c/--out $W\/$1\/$3 /--out $(out "$1" "$2" "$3") } --linger-ms 300 >>"$W/$1.$2-$3.log" 2>&1 &
    started=$!
    pids+=("$started")
}
wait_file() { # GLOB SECONDS: 0 once a file matches
    local end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        compgen -G "$1" >/dev/null && return 0
        sleep 0.01
    done
    return 1
}
wait_log() { # FILE TEXT SECONDS: 0 once FILE contains TEXT
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.01
    done
    return 1
}
bg() { # FUNCTION: runs a case in the background (its own nodes, killed if it is); joined by join
    (
        FAILED=0
        SKIPPED=0
        pids=()
        trap 'kill -CONT "${pids[@]}" 2>/dev/null; kill -KILL "${pids[@]}" 2>/dev/null' EXIT
        trap 'exit 1' TERM
        "$@"
        [ "$FAILED" = 0 ] || exit 1
        [ "$SKIPPED" = 0 ] || exit 77
        exit 0
    ) &
    bgs+=($!)
}
join() { # waits for every background case: 1 fails the test, 77 is a skipped part
    local j rc
    for j in "${bgs[@]}"; do
        wait "$j"
        rc=$?
        [ "$rc" = 0 ] || { [ "$rc" = 77 ] && SKIPPED=1; } || FAILED=1
    done
    bgs=()
}
check() { # NAME RUN PYTHON-ASSERTIONS on r(id) = result.json of a node of that run
    "$PY" - "$W/$1.apart/$2" <<PY || fail "$1/$2: $(tail -n 3 "$W/$1.$2"-*.log | tr '\n' ' ')"
import json, sys
def r(i): return json.load(open("%s/%s/%s/result.json" % (sys.argv[1], i, i)))
$3
PY
}

# 1. paused sender
case_pause() {
    prepare pause 1 20 "a -> b;" a b
    start pause 1 b; pb=$started
    start pause 1 a; pa=$started
    wait_file "$(out pause 1 b)/inbox/h1-*.pftb" 300 || fail "pause: b never stored a's bundle"
    kill -STOP "$pa"
    wait "$pb"; rb=$?
    [ "$rb" -eq 0 ] || fail "pause: b exited $rb"
    kill -CONT "$pa"
    wait "$pa"; ra=$?
    [ "$ra" -eq 0 ] || fail "pause: a exited $ra after it was continued (b had left)"
    check pause 1 '
a, b = r("a"), r("b")
s = a["sent"][0]
assert s["state"] == "acked", s
assert s["bundle_id"] in [x["bundle_id"] for x in b["received"]], (s, b["received"])
print("pause: a continued after b left: %s" % s["state"])
'
}
# 2. double failure
case_dbl() {
    prepare dbl 2 120 "a -> b -> c;" a b c
    start dbl 1 a; pa=$started
    start dbl 1 b; pb=$started
    wait_file "$(out dbl 1 b)/sent/h2" 300 || fail "dbl: b never recorded its send"
    kill -KILL "$pb"
    wait "$pb" 2>/dev/null
    start dbl 1 b; pb=$started
    wait_log "$W/dbl.1-b.log" "was sent before a restart, unacknowledged: sent again" 300 ||
        fail "dbl: the restarted b never said it sends hand-off 2 again"
    sleep 20 # the scenario, not a verdict: c stays down 20 s while b is restarted and sends again
    start dbl 1 c; pc=$started
    wait "$pb"; rb=$?
    wait "$pc"; rc=$?
    wait "$pa"; ra=$?
    [ "$ra" -eq 0 ] || fail "dbl: a exited $ra"
    [ "$rb" -eq 0 ] || fail "dbl: restarted b exited $rb"
    [ "$rc" -eq 0 ] || fail "dbl: c exited $rc"
    check dbl 1 '
b, c = r("b"), r("c")
sent = [s for s in b["sent"] if s["to"] == "c"]
assert sent and sent[0]["state"] == "acked", sent
ids = [x["bundle_id"] for x in c["received"]]
assert sent[0]["bundle_id"] in ids, ("c did not receive b'"'"'s bundle", sent[0]["bundle_id"], ids, c["missing"])
assert c["missing"] == [], c["missing"]
assert sorted(p["node"] for p in c["provenance"]) == ["a", "b", "c"], c["provenance"]
print("dbl: b killed after sending, restarted; c came up 20 s later; b -> c acked; c holds a, b, c")
'
}
# 3. restart = same result
case_rst() {
    prepare rst 3 60 "a -> b;" a b
    start rst ref b; pb=$started
    start rst ref a; pa=$started
    wait "$pa"; ra=$?
    wait "$pb"; rb=$?
    [ "$ra" -eq 0 ] && [ "$rb" -eq 0 ] || fail "rst: the reference run exited a $ra, b $rb"
    start rst 1 b; pb=$started
    PFT_CRASH_AT=on-ack start rst 1 a; pa=$started # a SIGKILLs itself as it reads b's ACK (a test-hooks build)
    wait "$pa"; ra=$?
    [ "$ra" -eq 137 ] || skip_part "rst: a was not killed at the ACK (exit $ra: a build without PFT_TEST_HOOKS?)"
    wait_file "$(out rst 1 b)/result.json" 300 || fail "rst: b never finished"
    # the scenario, not a verdict: a stays down until b is past resend_grace (5 s) after its ACK, which b says as it
    # starts waiting for a's confirmation (or until b leaves: then the restarted a finds nobody, and the case fails)
    for _ in $(seq 1 30000); do
        grep -qF "staying reachable until the predecessors confirm" "$W/rst.1-b.log" 2>/dev/null && break
        kill -0 "$pb" 2>/dev/null || break
        sleep 0.01
    done
    start rst 1 a; pa=$started
    wait "$pa"; ra=$?
    wait "$pb"; rb=$?
    [ "$ra" -eq 0 ] || fail "rst: the restarted a exited $ra"
    [ "$rb" -eq 0 ] || fail "rst: b exited $rb"
    "$PY" - "$W/rst.apart" <<'PY' || fail "rst: restart is not the same result"
import json, sys
def r(run, i): return json.load(open("%s/%s/%s/%s/result.json" % (sys.argv[1], run, i, i)))
s = r("1", "a")["sent"][0]
assert s["state"] == "acked", s
for i in ("a", "b"):
    ref, got = r("ref", i), r("1", i)
    for k in ("accuracy_local", "accuracy_global"):
        assert ref.get(k) == got.get(k), (i, k, ref.get(k), got.get(k))
ref, got = r("ref", "b"), r("1", "b")
assert [x["bundle_id"] for x in got["received"]] == [x["bundle_id"] for x in ref["received"]], (got["received"], ref["received"])
assert got["provenance"] == ref["provenance"], (got["provenance"], ref["provenance"])
print("rst: a killed as it read the ACK, restarted after b finished: %s (%s); results equal the reference's"
      % (s["state"], s["reason"] or "-"))
PY
}
bg case_pause
bg case_dbl
bg case_rst
join
finish
