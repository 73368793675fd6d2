#!/usr/bin/env bash
# e2e_rules: one verdict for every rule between attributes (topology/pft_topo_rules.h). Each topology of
# tests/fixtures/rules/ breaks one rule (its first line says which: "// expect: RULE"); it goes through
#   1. pftnet check FILE,
#   2. pftnet launch FILE --prepare-only,
#   3. pftnode, started on the launcher's resolved copy as pftnet launch --prepare-only prints it (the copy
#      written with the test hook PFT_TEST_SKIP_RULES, so that the node's own check is what refuses),
# and all three must refuse with the same verdict (a rule: check and launch exit 2, pftnode 3; a policy: 14
# from all three) and the same words ("rule NAME: ..." identical, NAME the one the fixture expects).
# Then --set: pftnet check previews what pftnet launch --set would run (the same verdict both ways).
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
PFTNODE=$PFT_BIN/pftnode
FIX=$(cd "$PFT_SOURCE_DIR/tests/fixtures/rules" && pwd)
for p in pftnet pftnode; do
    [ -x "$PFT_BIN/$p" ] || skip "no $p in $PFT_BIN"
done
W=$(mktemp -d /tmp/pft_rules_XXXXXX)
trap 'rm -rf "$W"' EXIT

# the words of a verdict: the "rule NAME: ..." of the first line that has one (no file, no line number)
words() {
    grep -o 'rule [a-z-]*: .*' "$1" | head -1
}
# expected exit statuses per entry point for a verdict of kind rule / policy
want() { # KIND ENTRY(check|launch|node)
    if [ "$1" = secagg-class-holders ]; then echo 14; elif [ "$2" = node ]; then echo 3; else echo 2; fi
}

# The hook that lets the launcher write a rule-breaking topology exists in test-hook builds only.
PFT_TEST_SKIP_RULES=1 "$PFTNET" launch "$FIX/star_prep_none.dot" --out "$W/hook" --prepare-only --quiet \
    >/dev/null 2>"$W/hook.err"
grep -q 'PFT_TEST_SKIP_RULES' "$W/hook.err" || skip "pftnet built without PFT_TEST_HOOKS (no PFT_TEST_SKIP_RULES)"

n=0
for f in "$FIX"/*.dot; do
    name=$(basename "$f" .dot)
    rule=$(sed -n '1s|^// expect: \([a-z-]*\)$|\1|p' "$f")
    [ -n "$rule" ] || { fail "$name: no '// expect: RULE' first line"; continue; }
    n=$((n + 1))
    "$PFTNET" check "$f" >"$W/$name.check.out" 2>"$W/$name.check.err"
    rc_c=$?
    PFTNODE=$PFTNODE "$PFTNET" launch "$f" --out "$W/$name.launch" --prepare-only --quiet \
        >"$W/$name.launch.out" 2>"$W/$name.launch.err"
    rc_l=$?
    PFT_TEST_SKIP_RULES=1 PFTNODE=$PFTNODE "$PFTNET" launch "$f" --out "$W/$name.node" --prepare-only --quiet \
        >"$W/$name.cmds" 2>"$W/$name.cmds.err" || {
        fail "$name: the launcher with PFT_TEST_SKIP_RULES did not write the resolved copy: $(tail -2 "$W/$name.cmds.err")"
        continue
    }
    cmd=$(grep -m1 -- '--topology' "$W/$name.cmds")
    [ -n "$cmd" ] || { fail "$name: no pftnode command printed"; continue; }
    # the node refuses at start (before binding); a node that does not refuse ends at its deadlines (5 s)
    eval "$cmd --linger-ms 0" >"$W/$name.node.out" 2>"$W/$name.node.err"
    rc_n=$?
    w_c=$(words "$W/$name.check.err")
    w_l=$(words "$W/$name.launch.err")
    w_n=$(words "$W/$name.node.err")
    [ "$rc_c" = "$(want "$rule" check)" ] || fail "$name: pftnet check exited $rc_c, not $(want "$rule" check): $(tail -1 "$W/$name.check.err")"
    [ "$rc_l" = "$(want "$rule" launch)" ] || fail "$name: pftnet launch exited $rc_l, not $(want "$rule" launch): $(tail -1 "$W/$name.launch.err")"
    [ "$rc_n" = "$(want "$rule" node)" ] || fail "$name: pftnode exited $rc_n, not $(want "$rule" node): $(tail -1 "$W/$name.node.err")"
    case "$w_c" in
    "rule $rule: "*) ;;
    *) fail "$name: pftnet check does not name rule $rule: '$w_c'" ;;
    esac
    [ "$w_l" = "$w_c" ] || fail "$name: launch and check differ in words:
  check:  $w_c
  launch: $w_l"
    [ "$w_n" = "$w_c" ] || fail "$name: pftnode and check differ in words:
  check:   $w_c
  pftnode: $w_n"
    echo "$name: check $rc_c, launch $rc_l, pftnode $rc_n: $w_c"
done
[ "$n" -ge 12 ] || fail "only $n rule-breaking topologies in $FIX (at least 12)"

# --set: pftnet check shows the plan that pftnet launch --set would use, and refuses what it would refuse
f=$FIX/star_prep_none.dot
"$PFTNET" check "$f" --set prep=l2 >"$W/set.out" 2>"$W/set.err" || fail "check --set prep=l2 exited $?: $(cat "$W/set.err")"
grep -q '^secure aggregation (min_contributors = 2' "$W/set.out" || fail "check --set prep=l2 prints no secure-aggregation plan"
grep -q '^  c1 .*own rows masked for s' "$W/set.out" || fail "check --set prep=l2: no release line for c1: $(grep -A5 '^release' "$W/set.out")"
PFTNODE=$PFTNODE "$PFTNET" launch "$f" --set prep=l2 --out "$W/set.launch" --prepare-only --quiet >/dev/null 2>"$W/set.launch.err" ||
    fail "launch --set prep=l2 --prepare-only exited $?: $(tail -2 "$W/set.launch.err")"
"$PFTNET" check "$FIX/chain_pair.dot" --set secure_agg=false >/dev/null 2>"$W/set2.err" ||
    fail "check --set secure_agg=false of chain_pair exited $?: $(cat "$W/set2.err")"
"$PFTNET" check "$FIX/chain_pair.dot" --set secure_agg=false --set cov=diag --set dp_epsilon=1 >/dev/null 2>"$W/set3.err"
rc=$?
[ $rc = 2 ] && [ "$(words "$W/set3.err")" = "rule dp-k: node 'a': DP-FedPFT releases one Gaussian per class: set k = 1 (it has k = 10)" ] ||
    fail "check --set dp_epsilon=1 (k = 10): exit $rc, $(cat "$W/set3.err")"
PFTNODE=$PFTNODE "$PFTNET" launch "$FIX/chain_pair.dot" --set secure_agg=false --set cov=diag --set dp_epsilon=1 --out "$W/set3" \
    --prepare-only --quiet >/dev/null 2>"$W/set3.launch.err"
rc=$?
[ $rc = 2 ] && [ "$(words "$W/set3.launch.err")" = "$(words "$W/set3.err")" ] ||
    fail "launch --set dp_epsilon=1: exit $rc, $(cat "$W/set3.launch.err")"
finish
