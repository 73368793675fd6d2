#!/usr/bin/env bash
# e2e_random_kill: random SIGKILL and restart. chain5 and ring5 on the bundled example data, each with
# sampling (cov = diag, k = 2), exact statistics (cov = tied, head = ncm) and exact statistics under secure
# aggregation (secure_agg = true; bundle ids are then not compared: each run's keys give other masks): a fault-free reference run of the
# five pftnode processes (from pftnet launch --prepare-only commands), then PFT_KILL_TRIALS trials per mode
# (default 2), each a fresh run in which one node is SIGKILLed and restarted with its own command after a random
# 0-2 s pause: odd trials at a random moment (uniform over the reference run's wall time) a random node still
# working (else one lingering); even trials a random node the moment a random event of its hand-offs happens
# (its first out/sent/, out/acked/ or out/inbox/ file appears, polled every 1 ms). A trial passes when every
# process but the killed one exits 0 (no exit 7, none past the trial's time bound) and every node's accuracies,
# provenance and received bundles (sender, producer, complete or not, bundle id) are identical to the
# reference's. Prints one line per trial and a summary per mode.
# Env: PFT_BIN, PFT_SOURCE_DIR; optional PFT_KILL_TRIALS (per mode), PFT_KILL_SEED (the trials' random seed,
# printed), PFT_KILL_MODES (e.g. "chain5-exact ring5-sampling"; default all six).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY (compares result.json files)"
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
TRIALS=${PFT_KILL_TRIALS:-2}
SEED=${PFT_KILL_SEED:-$(($(date +%s) % 100000))}
MODES=${PFT_KILL_MODES:-chain5-sampling chain5-exact ring5-sampling ring5-exact chain5-secagg ring5-secagg}
BOUND_S=240 # a trial still running this long hangs
RANDOM=$SEED
echo "random-kill: $TRIALS trials per mode, seed $SEED (PFT_KILL_SEED=$SEED reproduces the choices)"
W=$(mktemp -d /tmp/pft_rkill_XXXXXX)
pids=()
cleanup() {
    [ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}" 2>/dev/null
    if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi
}
trap cleanup EXIT
IDS=(a b c d e)

# prepare MODE RUN [DEADLINE]: W/RUN with every node's folder and W/RUN.prep (one pftnode command per line);
# deadline and send_deadline DEADLINE seconds (default 120)
prepare() {
    local edges="a -> b -> c -> d -> e;" stats="cov = diag; k = 2;"
    [ "${1%%-*}" = ring5 ] && edges="start = a; a -> b -> c -> d -> e -> a;"
    [ "${1#*-}" = exact ] && stats="cov = tied; head = ncm;" # ncm: the exact statistics' cheapest head
    [ "${1#*-}" = secagg ] && stats="cov = tied; head = ncm; secure_agg = true;" # masked until the opener
    # one key pair per node for every run of the test: the topology's fingerprint (in every bundle, so in its
    # id) covers the public keys, and a trial must carry the reference's bundle ids
    local keys="" id
    for id in "${IDS[@]}"; do
        [ -f "$W/keys/$id.pub" ] || "$PFT_BIN/pftnet" keygen "$id" --dir "$W/keys" >/dev/null 2>&1 ||
            { fail "keygen $id"; return 1; }
        keys="$keys $id [key = \"$W/keys/$id.pub\"];"
    done
    printf 'digraph rk {\n  dataset = "%s"; partition = iid; samples = 40; seed = 3; max_iter = 20;\n  em_draws = 2; head_draws = 1; %s\n  deadline = %s; send_deadline = %s; on_missing = proceed; resend_grace = 2;\n  %s\n  %s\n}\n' \
        "$DATA" "$stats" "${3:-120}" "${3:-120}" "$keys" "$edges" >"$W/$2.dot"
    "$PFT_BIN/pftnet" launch "$W/$2.dot" --out "$W/$2" --prepare-only >"$W/$2.prep" 2>&1 ||
        { fail "prepare $2 exited $?: $(cat "$W/$2.prep")"; return 1; }
}
# start RUN ID: node ID of RUN in the background, its pid in node_pid[ID] (output appended to W/RUN/ID.out)
declare -A node_pid
start() {
    $(grep -- "--out $W/$1/$2 " "$W/$1.prep") --linger-ms 300 >>"$W/$1/$2.out" 2>&1 &
    node_pid[$2]=$!
    pids+=($!)
}
# now_ms: milliseconds since the epoch
now_ms() { date +%s%3N; }
# finish_run RUN: waits for every node (bounded); codes in node_code[ID] (124: still running at the bound)
declare -A node_code
finish_run() {
    local id end=$(($(now_ms) + BOUND_S * 1000))
    for id in "${IDS[@]}"; do
        while kill -0 "${node_pid[$id]}" 2>/dev/null && [ "$(now_ms)" -lt "$end" ]; do sleep 0.05; done
        if kill -0 "${node_pid[$id]}" 2>/dev/null; then
            kill -KILL "${node_pid[$id]}" 2>/dev/null
            wait "${node_pid[$id]}" 2>/dev/null
            node_code[$id]=124
        else
            wait "${node_pid[$id]}"
            node_code[$id]=$?
        fi
    done
}
# outcome RUN: one line per node of what must not change (accuracies, provenance, received)
outcome() {
    "$PY" - "$W/$1" <<'PY'
import json, sys
for i in "abcde":
    r = json.load(open("%s/%s/result.json" % (sys.argv[1], i)))
    prov = sorted((p["node"], sorted(p["counts"].items())) for p in r["provenance"])
    # secure aggregation: the masks come from each run's own keys (a fresh --prepare-only), so bundle ids differ
    # between runs; what the bundles carry (provenance, accuracies) must not
    sa = "secagg" in sys.argv[1]
    recv = sorted((x["from"], x["producer"], x["complete"], "-" if sa else x["bundle_id"]) for x in r["received"])
    print(i, r["exit_code"], repr(r.get("accuracy_local")), repr(r.get("accuracy_global")), prov, recv,
          sorted(r["missing"]))
PY
}

# at_time RUN REF_MS: waits a random time, uniform over the reference run's, then picks a node still working
# (else one lingering) at random: victim (- if every node has ended) and what (a description)
at_time() {
    local at=$(((RANDOM * 32768 + RANDOM) % $2)) id alive=() busy=()
    while [ $(($(now_ms) - t0)) -lt "$at" ]; do sleep 0.001; done
    for id in "${IDS[@]}"; do
        kill -0 "${node_pid[$id]}" 2>/dev/null || continue
        alive+=("$id")
        grep -qs "^done" "$W/$1/$id/status" || busy+=("$id")
    done
    [ ${#busy[@]} -gt 0 ] && alive=("${busy[@]}")
    victim=-
    what="at $at ms: every node had ended, nobody killed"
    [ ${#alive[@]} -gt 0 ] || return 0
    victim=${alive[$((RANDOM % ${#alive[@]}))]}
    what="killed $victim at a random moment ($at ms)"
}
# at_event RUN MODE REF_MS: a random node and a random event of its hand-offs (its sent/ record appears: bundle
# transmitted, not acknowledged; its acked/ record appears; a bundle appears in its inbox/: stored, its ACK
# maybe not sent), the event awaited by polling every 1 ms (up to twice the reference run's time): victim (- if
# it did not come) and what
at_event() {
    local events=(sent acked inbox) id ev end=$(($(now_ms) + 2 * $3))
    victim=${IDS[$((RANDOM % 5))]}
    [ "${2%%-*}" = chain5 ] && [ "$victim" = a ] && events=(sent acked)
    [ "${2%%-*}" = chain5 ] && [ "$victim" = e ] && events=(inbox)
    ev=${events[$((RANDOM % ${#events[@]}))]}
    until compgen -G "$W/$1/$victim/$ev/h*" >/dev/null; do
        if [ "$(now_ms)" -gt "$end" ] || ! kill -0 "${node_pid[$victim]}" 2>/dev/null; then
            what="$victim's first $ev/ record never came while it ran: nobody killed"
            victim=-
            return 0
        fi
        sleep 0.001
    done
    what="killed $victim the moment its first $ev/ record appeared"
}

for mode in $MODES; do
    ref=$mode-ref
    prepare "$mode" "$ref" || continue
    t0=$(now_ms)
    for id in "${IDS[@]}"; do start "$ref" "$id"; done
    finish_run "$ref"
    ref_ms=$(($(now_ms) - t0))
    for id in "${IDS[@]}"; do
        [ "${node_code[$id]}" = 0 ] || fail "$mode reference: node $id exited ${node_code[$id]}"
    done
    outcome "$ref" >"$W/$ref.outcome" 2>&1 || { fail "$mode reference: $(cat "$W/$ref.outcome")"; continue; }
    echo "$mode: reference run $ref_ms ms; e: $(awk '$1 == "e" {print $3, $4}' "$W/$ref.outcome")"
    # a trial's deadlines scale with the reference run, so that a machine slowed down by other work (the
    # reference took 106 s at load 15-60) does not turn a restart into a missed deadline
    dl=$((ref_ms * 3 / 1000))
    [ "$dl" -ge 120 ] || dl=120
    BOUND_S=$((2 * dl + 60))
    same=0 kills=0
    for t in $(seq 1 "$TRIALS"); do
        run=$mode-t$t
        prepare "$mode" "$run" "$dl" || continue
        pause=$((RANDOM % 2001))
        t0=$(now_ms)
        for id in "${IDS[@]}"; do start "$run" "$id"; done
        if [ $((t % 2)) = 1 ]; then at_time "$run" "$ref_ms"; else at_event "$run" "$mode" "$ref_ms"; fi
        state=
        if [ "$victim" != - ]; then
            state=$(head -c 60 "$W/$run/$victim/status" 2>/dev/null | head -1)
            kill -KILL "${node_pid[$victim]}"
            wait "${node_pid[$victim]}" 2>/dev/null
            what="$what, $(($(now_ms) - t0)) ms in, status '$state'; restarted after $pause ms"
            sleep "$(printf '%d.%03d' $((pause / 1000)) $((pause % 1000)))"
            start "$run" "$victim"
            kills=$((kills + 1))
        fi
        finish_run "$run"
        bad=""
        for id in "${IDS[@]}"; do [ "${node_code[$id]}" = 0 ] || bad="$bad $id:${node_code[$id]}"; done
        outcome "$run" >"$W/$run.outcome" 2>&1
        if [ -n "$bad" ]; then
            fail "$mode trial $t ($what): exit codes$bad"
        elif ! cmp -s "$W/$ref.outcome" "$W/$run.outcome"; then
            fail "$mode trial $t ($what): differs from the reference: $(diff "$W/$ref.outcome" "$W/$run.outcome" | head -4 | tr '\n' ' ')"
        else
            same=$((same + 1))
            echo "  trial $t: $what: identical"
            rm -rf "${W:?}/$run"
        fi
    done
    echo "$mode: $same of $TRIALS trials identical to the reference ($kills with a node killed)"
done
finish
