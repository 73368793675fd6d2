#!/usr/bin/env bash
# e2e_secagg_dropout: a star's client that never delivers, under secure aggregation (docs/SECAGG.md §5), in real
# nodes over real sockets on the bundled example features:
#   - star of five clients, c3 never started: at its deadline the aggregator declares c3 missing, the four
#     survivors reveal their use keys with c3, the aggregator opens the sum of the four; the run completes
#     (every started node exits 0) and the aggregator's head equals, weight for weight, the head of a star of
#     the four on the very same data files (and so does its accuracy); every bundle is checked from outside by
#     tests/secagg_check.py;
#   - a late bundle after the declaration is refused: c1 holds its reveal back (test hook) until c3's send has
#     ended, c3 starts once the declaration is out; the aggregator NACKs c3's bundle ("the survivors revealed their masks with it"),
#     c3 exits 7 (its send refused), and the aggregator's head is the same as without the late bundle;
#   - DP (ε = 1, δ = 0.001) with dp_dropouts = 1: each share is σ²/4, the four survivors' sum opens with σ;
#     with dp_dropouts = 0 the aggregator refuses to open without c3 (the four shares would carry σ²·4/5 < σ²)
#     and no survivor reveals anything;
#   - a DP member killed the instant its bundle was stored, before it read the ACK, and restarted: it sends the
#     same bytes again (no fresh noise draw, ledger charged once), and the run completes;
#   - the aggregator killed right after it declared c3 missing and restarted: the run ends as without the kill;
#   - a survivor that holds its reveal back past send_deadline: the aggregator exits 14, naming it.
# The first run waits out the aggregator's deadline (DEADLINE s: long enough for the clients on a loaded
# machine); the others set PFT_TEST_GONE=c3 (a test hook, pft_node_inbox.c): c3's hand-off is past its
# deadline as soon as the four others have delivered, a condition instead of DEADLINE seconds each.
# Env: PFT_BIN (folder with pftnet and pftnode, built with test hooks), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
CHECK=$PFT_SOURCE_DIR/tests/secagg_check.py
for p in pftnet pftnode; do
    [ -x "$PFT_BIN/$p" ] || skip "no $p in $PFT_BIN"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "no python3"
"$PY" -c 'import msgpack, numpy' 2>/dev/null || skip "python3 lacks msgpack or numpy (.ci/install-deps installs them)"
W=$(mktemp -d /tmp/pft_secdrop_XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
DEADLINE=45 # the aggregator's wait for its clients, seconds (clients take a few seconds under ASan)

STAR="s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;"
topo() { # NAME SETTINGS: writes W/NAME.dot (every graph named star: one run id, one partition)
    printf 'digraph star {\n  dataset = "%s"; partition = iid; samples = 100; deadline = %d; prep = l2;\n  cov = tied; secure_agg = true; %s\n  %s\n}\n' \
        "$DATA" "$DEADLINE" "$2" "$STAR" >"$W/$1.dot"
}
launch() { # NAME [launch options]: runs W/NAME.dot into W/NAME; launch's status
    local name=$1
    shift
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$name.dot" --out "$W/$name" --no-baselines --quiet "$@" \
        >"$W/$name.stdout" 2>"$W/$name.stderr"
}

# 1. c3 never starts
topo drop ""
"$PFTNET" check "$W/drop.dot" >"$W/check.txt" 2>&1 || fail "check of the star exited $?"
grep -q 'dropouts: recovered' "$W/check.txt" || fail "pftnet check does not say a star's dropouts are recovered"
printf 'digraph chain {\n  dataset = "%s"; partition = iid; samples = 100; cov = tied; secure_agg = true;\n  a -> b -> c -> d;\n}\n' \
    "$DATA" >"$W/chain.dot"
"$PFTNET" check "$W/chain.dot" 2>&1 | grep -q 'dropouts: not recovered' ||
    fail "pftnet check does not say a chain's dropouts are not recovered"
launch drop --absent c3 || fail "star without c3: launch exited $? ($(tail -3 "$W/drop.stderr"))"
"$PY" "$CHECK" "$W/drop" || fail "star without c3: secagg_check"
"$PY" - "$W/drop" <<'PY' || fail "star without c3: declaration and reveals"
import json, sys
run = sys.argv[1]
s = json.load(open(f"{run}/s/result.json"))["secure_agg"]
assert s["declared_missing"] == ["c3"] and s["opened_rows"] == 400 and s["recover_dropouts"], s
for c in ["c1", "c2", "c4", "c5"]:
    r = json.load(open(f"{run}/{c}/result.json"))["secure_agg"]
    assert r["revealed_with"] == ["c3"] and r["done_notice"], (c, r)
print("star without c3: s declared c3 missing, c1 c2 c4 c5 revealed their use keys with c3, s opened 400 rows")
PY

# the same four clients' data files in a star of four: the oracle
"$PY" - "$W/drop" c3 "$W/four.dot" <<'PY' || fail "writing the star of four"
import re, sys
run, gone, out = sys.argv[1:4]
t = open(f"{run}/topology.dot").read()
t = re.sub(r"\n\t(dataset|partition|samples) = [^;]*;", "", t)
t = re.sub(r"\n\t%s \[[^\]]*\];" % re.escape(gone), "", t)
t = re.sub(r"\n\t%s -> [^;]*;" % re.escape(gone), "", t)
assert gone not in t and "s [data=false," in t
t = t.replace("s [data=false,", f's [data=false, test="{run}/eval_x.npy", test_labels="{run}/eval_y.npy",')
for c in ("c1", "c2", "c4", "c5"):  # each client's files: in its own node.conf, not in the topology
    own = dict(l.split(" = ", 1) for l in open(f"{run}/{c}/node.conf").read().splitlines() if " = " in l)
    files = ", ".join(f'{k}="{own[k]}"' for k in ("train", "labels", "test", "test_labels") if k in own)
    t, n = re.subn(r"\n\t%s \[" % c, f"\n\t{c} [{files}, ", t)
    assert n == 1, c
open(out, "w").write(t)
PY
launch four || fail "star of four: launch exited $? ($(tail -3 "$W/four.stderr"))"
same_head() { # RUN: the aggregator of RUN has the head and the accuracy of the star of four
    "$PY" - "$1" "$W/four" <<'PY'
import json, sys
import numpy as np
a, b = sys.argv[1], sys.argv[2]
ha, hb = np.load(f"{a}/s/head.npy"), np.load(f"{b}/s/head.npy")
diff = float(np.max(np.abs(ha - hb)))
acc_a = json.load(open(f"{a}/s/result.json"))["accuracy_global"]
acc_b = json.load(open(f"{b}/s/result.json"))["accuracy_local"]  # the same eval files, as s's own test set
print(f"{a}: aggregator head max |diff| {diff:.2e} to the star of four, accuracy {acc_a:.4f} vs {acc_b:.4f}")
assert ha.shape == hb.shape and diff <= 1e-6 * max(1.0, float(np.max(np.abs(hb)))), diff
assert acc_a == acc_b, (acc_a, acc_b)
PY
}

# crash_restart NAME VICTIM POINT IDS...: starts the nodes IDS of W/NAME.dot by hand (their pftnode commands from
# --prepare-only), VICTIM with PFT_CRASH_AT=POINT; checks it was killed there (137), starts it again, and waits for
# every node to exit 0. Outputs: W/NAME.ID.out.
crash_restart() {
    local name=$1 victim=$2 point=$3 id cmd rc
    shift 3
    local -A pid
    "$PFTNET" launch "$W/$name.dot" --out "$W/$name" --prepare-only --pftnode "$PFT_BIN/pftnode" \
        >"$W/$name.cmds" 2>&1 || fail "$name: prepare-only exited $?"
    for id in "$@"; do
        cmd=$(grep -- "--id $id " "$W/$name.cmds")
        if [ "$id" = "$victim" ]; then
            PFT_CRASH_AT=$point $cmd >"$W/$name.$id.out" 2>&1 &
        else
            $cmd >"$W/$name.$id.out" 2>&1 &
        fi
        pid[$id]=$!
    done
    wait "${pid[$victim]}"
    rc=$?
    [ "$rc" = 137 ] || fail "$name: $victim exited $rc, not killed at $point (137)"
    $(grep -- "--id $victim " "$W/$name.cmds") >>"$W/$name.$victim.out" 2>&1
    rc=$? # the opener went on without the missing member: degraded (exit 16)
    [ "$rc" = 0 ] || { [ "$victim" = s ] && [ "$rc" = 16 ]; } || fail "$name: restarted $victim exited $rc"
    for id in "$@"; do
        [ "$id" = "$victim" ] || wait "${pid[$id]}" || fail "$name: node $id exited $?"
    done
}
same_head "$W/drop" || fail "star without c3: the aggregator differs from the star of four"

# from here on, c3's hand-off is due once the four others are in (PFT_TEST_GONE), not after DEADLINE seconds
export PFT_TEST_GONE=c3

# 2. a late bundle, once the survivors are revealing, is refused
topo late ""
"$PFTNET" launch "$W/late.dot" --out "$W/late" --prepare-only --pftnode "$PFT_BIN/pftnode" >"$W/late.cmds" 2>&1 ||
    fail "late: prepare-only exited $?"
declare -A PID
for id in s c1 c2 c4 c5; do
    cmd=$(grep -- "--id $id " "$W/late.cmds")
    PFT_TEST_REVEAL_LATE=c1:until=$W/late.go $cmd --log-level info >"$W/late.$id.out" 2>&1 &
    PID[$id]=$!
done
for _ in $(seq 1 $((DEADLINE * 4 + 120))); do
    grep -q 'declared 1 member(s) missing' "$W/late.s.out" 2>/dev/null && break
    sleep 0.5
done
grep -q 'declared 1 member(s) missing' "$W/late.s.out" || fail "late: s never declared c3 missing"
$(grep -- "--id c3 " "$W/late.cmds") >"$W/late.c3.out" 2>&1
c3_rc=$?
touch "$W/late.go" # c3's send ended (refused): c1 reveals now
for id in s c1 c2 c4 c5; do # s went on without c3: degraded (exit 16)
    wait "${PID[$id]}"
    rc=$?
    [ "$rc" = 0 ] || { [ "$id" = s ] && [ "$rc" = 16 ]; } || fail "late: node $id exited $rc"
done
[ "$c3_rc" = 7 ] || fail "late: c3 exited $c3_rc, not 7 (its send refused: PFT_EXIT_SEND)"
grep -q 'the survivors revealed their masks with it' "$W/late.s.out" ||
    fail "late: s did not refuse c3's late bundle ($(grep -i c3 "$W/late.s.out" | tail -3))"
"$PY" - "$W/late" <<'PY' || fail "late: result"
import json, sys
run = sys.argv[1]
s = json.load(open(f"{run}/s/result.json"))
assert s["secure_agg"]["declared_missing"] == ["c3"] and s["secure_agg"]["opened_rows"] == 400, s["secure_agg"]
assert s["rejected"] >= 1 and any("revealed their masks" in r for r in s["refusals"]), s["refusals"]
print("late: c3's bundle NACKed after the declaration; s opened the four survivors' 400 rows")
PY
cmp -s "$W/late/c1/data/train_x.npy" "$W/drop/c1/data/train_x.npy" || fail "late: another partition than drop's"
same_head "$W/late" || fail "late: the aggregator differs from the star of four"

# 3. DP: dp_dropouts = 1 opens with sigma; dp_dropouts = 0 refuses, and nobody reveals
DP='dp_epsilon = 1; dp_delta = 0.001;'
STAR="s [data = false, dp_epsilon = 0]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s;"
topo dp1 "$DP dp_dropouts = 1;"
launch dp1 --absent c3 || fail "DP, dp_dropouts = 1: launch exited $? ($(tail -3 "$W/dp1.stderr"))"
"$PY" - "$W/dp1" <<'PY' || fail "DP, dp_dropouts = 1: sigma"
import json, math, sys
s = json.load(open(f"{sys.argv[1]}/s/result.json"))["secure_agg"]
dp = s["dp"]
assert dp["noise_div"] == 4 and abs(dp["share_sd"] - dp["sigma"] / 2) < 1e-6 * dp["sigma"], dp
assert s["declared_missing"] == ["c3"] and abs(s["opened_sigma"] - dp["sigma"]) < 1e-6 * dp["sigma"], s
print(f"DP with dp_dropouts = 1: shares sigma/2 = {dp['share_sd']:.4f}, 4 survivors open sigma = {s['opened_sigma']:.4f}")
PY
topo dp0 "$DP"
if launch dp0 --absent c3 --keep-going; then
    fail "DP, dp_dropouts = 0: the aggregator opened without c3"
fi
grep -q 'whose noise shares' "$W/dp0/s/node.log" || fail "DP, dp_dropouts = 0: no reason ($(tail -2 "$W/dp0/s/node.log"))"
"$PY" - "$W/dp0" <<'PY' || fail "DP, dp_dropouts = 0: a survivor revealed"
import json, os, sys
s = json.load(open(f"{sys.argv[1]}/s/result.json")).get("secure_agg", {})
assert s.get("declared_missing") == [], s  # refused before declaring anything
for c in ["c1", "c2", "c4", "c5"]:
    r = json.load(open(f"{sys.argv[1]}/{c}/result.json"))["secure_agg"]
    assert r["revealed_with"] == [] and r["done_notice"], (c, r)
    assert not os.path.exists(f"{sys.argv[1]}/{c}/secagg/answered"), c
print("DP with dp_dropouts = 0: s refused to open without c3; no survivor revealed; all were told")
PY

# 5. the opener killed right after it declared c3 missing, then restarted: it declares again (the same signed
#    bytes), survivors whose reveal found no opener send it again, and the run ends as without the kill
topo restart ""
crash_restart restart s after-declare s c1 c2 c4 c5
"$PY" - "$W/restart" <<'PY' || fail "restart: result"
import json, sys
s = json.load(open(f"{sys.argv[1]}/s/result.json"))["secure_agg"]
assert s["declared_missing"] == ["c3"] and s["opened_rows"] == 400, s
print("restart: s killed after declaring c3 missing, restarted, declared again and opened the survivors' 400 rows")
PY
same_head "$W/restart" || fail "restart: the aggregator differs from the star of four"

# 4. a DP member killed the instant its bundle was stored but before it read the ACK (PFT_CRASH_AT=on-ack), then
#    restarted: it sends the stored bytes again, not a fresh noise draw (the aggregator keeps the first one and
#    would refuse another for the hand-off), its ledger charged once; every node exits 0
topo dprestart "$DP"
unset PFT_TEST_GONE # c3 takes part here: it must not be due before it delivers
crash_restart dprestart c1 on-ack s c1 c2 c3 c4 c5
export PFT_TEST_GONE=c3
grep -q 'goes again, not a fresh noise draw' "$W/dprestart.c1.out" || fail "dprestart: c1 drew its noise again"
"$PY" - "$W/dprestart" <<'PY' || fail "dprestart: result"
import json, sys
run = sys.argv[1]
s = json.load(open(f"{run}/s/result.json"))
assert s["secure_agg"]["opened_rows"] == 500 and s["rejected"] == 0, (s["secure_agg"], s["refusals"])
led = json.load(open(f"{run}/c1/dp_ledger.json"))
assert led["releases"] == 1 and led["eps_spent"] == 1.0, led
print(f"dprestart: c1 killed at on-ack and restarted sent its stored bundle again; ledger {led}; s opened 500 rows")
PY
# 6. a survivor that never reveals: c1 holds its reveal back 20 s (test hook), longer than send_deadline (8 s):
#    the aggregator stops with exit 15 (secure aggregation: a survivor never answered), naming c1, the sum masked
topo unrevealed "send_deadline = 8;"
PFT_TEST_REVEAL_LATE=c1 launch unrevealed --absent c3
"$PY" - "$W/unrevealed" <<'PY' || fail "unrevealed: the aggregator did not end with exit 15"
import json, sys
s = json.load(open(f"{sys.argv[1]}/s/result.json"))
assert s["exit_code"] == 15 and s["secure_agg"].get("opened_rows") is None, (s["exit_code"], s["secure_agg"])
print("unrevealed: s declared c3 missing, c1 never revealed within send_deadline: exit 15, nothing opened")
PY
grep -q 'survivor c1 took the declaration but revealed nothing within send_deadline' "$W/unrevealed/s/node.log" ||
    fail "unrevealed: the aggregator's log does not name c1: $(grep ERROR "$W/unrevealed/s/node.log")"

finish
