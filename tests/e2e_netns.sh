#!/usr/bin/env bash
# e2e_netns: a 3-node chain a -> b -> c across three Linux network namespaces joined by veth links
# (nsA 10.77.1.1 =link1= 10.77.1.2 nsB 10.77.2.2 =link2= 10.77.2.3 nsC), with each link cut while a
# hand-off needs it and restored ~3 s later:
#   link1 is down before a starts, so a's connection cannot even be set up (libzmq reconnects);
#   link2 goes down after b's connection to c is established, so b's bundle vanishes into a dead TCP
#   connection and the transport must retransmit it.
# Passes when every node exits 0, c's provenance holds a, b and c with their counts, each hand-off was
# acknowledged only after its link came back, and b retried. Namespaces have no route but their links,
# so traffic can only go between these addresses. Needs root and iproute2; exits 77 (skip) otherwise.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR; optional PFT_NETNS_KEEP=1 keeps outputs.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

DATA=$PFT_SOURCE_DIR/examples/data/pacs-small
CUT_S=3          # seconds each link stays down once a hand-off is waiting on it
WAIT_S=120       # bound of every wait for a node's progress
NODE_TIMEOUT=240 # bound of each pftnode process
SAMPLES=40

command -v ip >/dev/null 2>&1 || skip "iproute2 (ip) not installed"
command -v ss >/dev/null 2>&1 || skip "iproute2 (ss) not installed"
command -v timeout >/dev/null 2>&1 || skip "coreutils timeout not installed"
[ "$EUID" = 0 ] || skip "needs root (ip netns add)"
if [ ! -x "$PFT_BIN/pftnet" ] || [ ! -x "$PFT_BIN/pftnode" ]; then skip "no pftnet/pftnode in $PFT_BIN"; fi
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"

TAG=pft$$
NS_A=${TAG}a NS_B=${TAG}b NS_C=${TAG}c
WORK=$(mktemp -d /tmp/pft_netns_XXXXXX)
PIDS=()
FAILED=0

cleanup() {
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null
    done
    for ns in "$NS_A" "$NS_B" "$NS_C"; do
        ip netns del "$ns" 2>/dev/null
    done
    if [ "$FAILED" = 0 ] && [ "${PFT_NETNS_KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    else
        echo "outputs kept in $WORK" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- namespaces and links (created inside the namespaces: nothing is added to the host's) ----
ip netns add "$NS_A" 2>"$WORK/netns.err" || skip "ip netns add not permitted: $(cat "$WORK/netns.err")"
if ! ip netns add "$NS_B" || ! ip netns add "$NS_C"; then
    fail "ip netns add $NS_B / $NS_C"
    exit 1
fi
setup() {
    ip link add v1a netns "$NS_A" type veth peer name v1b netns "$NS_B" &&
        ip link add v2b netns "$NS_B" type veth peer name v2c netns "$NS_C" &&
        ip -n "$NS_A" addr add 10.77.1.1/24 dev v1a &&
        ip -n "$NS_B" addr add 10.77.1.2/24 dev v1b &&
        ip -n "$NS_B" addr add 10.77.2.2/24 dev v2b &&
        ip -n "$NS_C" addr add 10.77.2.3/24 dev v2c &&
        for ns in "$NS_A" "$NS_B" "$NS_C"; do ip -n "$ns" link set lo up || return 1; done &&
        ip -n "$NS_A" link set v1a up && ip -n "$NS_B" link set v1b up &&
        ip -n "$NS_B" link set v2b up && ip -n "$NS_C" link set v2c up
}
setup 2>"$WORK/setup.err" || skip "cannot create veth links in namespaces: $(cat "$WORK/setup.err")"
# no default route anywhere: a namespace reaches only its links' /24
for ns in "$NS_A" "$NS_B" "$NS_C"; do
    if ip -n "$ns" route show default | grep -q .; then
        fail "$ns has a default route"
        exit 1
    fi
done
wait_ping() { # ns addr: links come up asynchronously (carrier, DAD is IPv6 only)
    for _ in $(seq 1 50); do
        ip netns exec "$1" ping -c1 -W1 "$2" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
if command -v ping >/dev/null 2>&1; then
    wait_ping "$NS_A" 10.77.1.2 || { fail "link1 does not carry traffic"; exit 1; }
    wait_ping "$NS_B" 10.77.2.3 || { fail "link2 does not carry traffic"; exit 1; }
else
    sleep 1
fi

# ---- topology with explicit endpoints; the launcher only partitions the data ----
cat >"$WORK/netns3.dot" <<EOF
// three hosts (network namespaces) in a chain; endpoints are the namespaces' own addresses
digraph netns3 {
    dataset = "$DATA"; partition = iid; samples = $SAMPLES; seed = 7;
    k = 2; cov = diag; max_iter = 30; head_draws = 2; em_draws = 1; min_rows = 1;
    deadline = $WAIT_S; send_deadline = $WAIT_S;
    a [endpoint = "tcp://10.77.1.1:7101"];
    b [endpoint = "tcp://10.77.1.2:7102"];
    c [endpoint = "tcp://10.77.2.3:7103"];
    a -> b -> c;
}
EOF
RUN=$WORK/run
if ! PFTNODE=$PFT_BIN/pftnode "$PFT_BIN/pftnet" launch "$WORK/netns3.dot" --out "$RUN" --prepare-only --quiet \
    >"$WORK/commands" 2>"$WORK/prepare.err"; then
    fail "pftnet launch --prepare-only: $(cat "$WORK/prepare.err")"
    exit 1
fi
declare -A CMD NS
NS=([a]=$NS_A [b]=$NS_B [c]=$NS_C)
while read -r line; do
    id=$(sed -n 's/.* --id \([^ ]*\) .*/\1/p' <<<"$line")
    [ -n "$id" ] && CMD[$id]=$line
done <"$WORK/commands"
for id in a b c; do
    [ -n "${CMD[$id]:-}" ] || { fail "--prepare-only printed no command for $id"; exit 1; }
done

declare -A PID
start_node() { # id: runs the printed pftnode command inside the node's namespace, bounded
    # shellcheck disable=SC2086 # the printed command line is split into words on purpose
    timeout -k 5 "$NODE_TIMEOUT" ip netns exec "${NS[$1]}" ${CMD[$1]} >"$RUN/$1/node.log" 2>&1 &
    PID[$1]=$!
    PIDS+=($!)
}
wait_log() { # id pattern: waits (bounded) until the node's log has a line matching pattern
    local t=0
    until grep -q -E "$2" "$RUN/$1/node.log" 2>/dev/null; do
        if ! kill -0 "${PID[$1]}" 2>/dev/null; then
            fail "$1 exited before logging '$2'"
            return 1
        fi
        if [ $t -ge $((WAIT_S * 10)) ]; then
            fail "$1 did not log '$2' within ${WAIT_S}s"
            return 1
        fi
        sleep 0.1
        t=$((t + 1))
    done
}
lines() { wc -l <"$RUN/$1/node.log"; }

# c and b first; b's outbound connection to c comes up while link2 is intact
start_node c
start_node b
wait_log c 'listening on' && wait_log b 'listening on' || exit 1
for t in $(seq 1 $((WAIT_S * 10))); do
    ip netns exec "$NS_B" ss -Htn state established '( dport = :7103 )' | grep -q 10.77.2.3 && break
    sleep 0.1
done
ip netns exec "$NS_B" ss -Htn state established '( dport = :7103 )' | grep -q 10.77.2.3 ||
    { fail "b never connected to c"; exit 1; }

# cut both links: link1 before a exists, link2 under b's established connection
ip -n "$NS_A" link set v1a down
ip -n "$NS_B" link set v2b down
echo "$(date +%T.%3N) links cut; starting a"
start_node a
wait_log a 'sending refit bundle' || exit 1
sleep "$CUT_S"
grep -q 'hand-off to b acknowledged' "$RUN/a/node.log" && fail "a's hand-off was acknowledged while link1 was down"
A_RESTORE=$(lines a)
ip -n "$NS_A" link set v1a up
echo "$(date +%T.%3N) link1 restored after ${CUT_S}s with a's bundle waiting"
wait_log b 'sending refit bundle' || exit 1
sleep "$CUT_S"
grep -q 'hand-off to c acknowledged' "$RUN/b/node.log" && fail "b's hand-off was acknowledged while link2 was down"
B_RESTORE=$(lines b)
ip -n "$NS_B" link set v2b up
echo "$(date +%T.%3N) link2 restored after ${CUT_S}s with b's bundle waiting"

# ---- every node exits 0 (each bounded by timeout) ----
for id in a b c; do
    wait "${PID[$id]}"
    rc=$?
    [ $rc = 0 ] || fail "node $id exited with $rc (see $RUN/$id/node.log)"
done

# ---- results: provenance, counts, retries, acknowledgement after the restore ----
json() { # file expr: one value from a result.json (python3's json module, else jq)
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"r": r}))' "$1" "$2"
    else
        jq -r "$3" "$1"
    fi
}
C=$RUN/c/result.json B=$RUN/b/result.json A=$RUN/a/result.json
for f in "$A" "$B" "$C"; do
    [ -r "$f" ] || { fail "no $f"; exit 1; }
done
prov=$(json "$C" '",".join(sorted(p["node"] for p in r["provenance"]))' '[.provenance[].node] | sort | join(",")')
[ "$prov" = "a,b,c" ] || fail "c's provenance is '$prov', expected a,b,c"
total=$(json "$C" 'sum(sum(p["counts"].values()) for p in r["provenance"])' '[.provenance[].counts[]] | add')
[ "$total" = $((3 * SAMPLES)) ] || fail "c's provenance counts $total rows, expected $((3 * SAMPLES))"
nsyn=$(json "$C" 'r["n_synthetic"]' '.n_synthetic')
[ "$nsyn" = $((2 * SAMPLES)) ] || fail "c trained on $nsyn synthetic rows, expected $((2 * SAMPLES))"
for f in "$A" "$B" "$C"; do
    st=$(json "$f" 'r["status"]' '.status')
    [ "$st" = ok ] || fail "$f: status '$st'"
done
for f in "$A" "$B"; do
    sent=$(json "$f" '",".join(s["state"] for s in r["sent"])' '[.sent[].state] | join(",")')
    [ "$sent" = acked ] || fail "$f: sends '$sent', expected one acked"
done
a_retries=$(json "$A" 'r["retries"]' '.retries')
b_retries=$(json "$B" 'r["retries"]' '.retries')
# b's offers (a few dozen bytes) are what repeats into the dead connection; its body goes once, on c's grant
# after the restore (transport protocol 2, flow control)
[ "$b_retries" -le 1 ] || fail "b sent its body $((b_retries + 1)) times across the cut, expected at most twice"
ack_a=$(grep -n 'hand-off to b acknowledged' "$RUN/a/node.log" | head -1 | cut -d: -f1)
ack_b=$(grep -n 'hand-off to c acknowledged' "$RUN/b/node.log" | head -1 | cut -d: -f1)
if [ -z "$ack_a" ] || [ "$ack_a" -le "$A_RESTORE" ]; then
    fail "a's acknowledgement (log line ${ack_a:-none}) is not after link1's restore (line $A_RESTORE)"
fi
if [ -z "$ack_b" ] || [ "$ack_b" -le "$B_RESTORE" ]; then
    fail "b's acknowledgement (log line ${ack_b:-none}) is not after link2's restore (line $B_RESTORE)"
fi
dups=$(json "$C" 'r["duplicates_dropped"]' '.duplicates_dropped')
echo "a: retries $a_retries; b: retries $b_retries; c: provenance $prov ($total rows), duplicates dropped $dups"
grep -h -E 'sending|acknowledged|received bundle [0-9a-f]|WARN|ERROR' "$RUN"/[abc]/node.log | cut -c12- | sort

if [ "$FAILED" != 0 ]; then
    for id in a b c; do
        echo "--- $id/node.log (tail)" >&2
        tail -8 "$RUN/$id/node.log" >&2
    done
    exit 1
fi
echo "e2e_netns: passed"
