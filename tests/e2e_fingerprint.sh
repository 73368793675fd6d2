#!/usr/bin/env bash
# e2e_fingerprint: the same run, checked. A chain a -> b -> c prepared with pftnet launch --prepare-only; a runs
# the resolved topology, b a copy of it with one public fact changed: k, cov, c's key, an edge. Each
# time b refuses a's bundle before the ACK with a reason naming the difference, and a exits 7 (a successor
# rejected its bundle) with that reason in its log. A copy that differs only in form (a comment, a layout
# attribute, b's private paths, an edge's deadline: timing is each party's own) has the same fingerprint: that run completes. pftnet check prints the
# fingerprint (text and --json) and tells the copies apart; pftnet inspect shows the one a's bundle carries.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
W=$(mktemp -d /tmp/pft_fp_XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT
printf 'digraph fp {\n  dataset = "%s"; partition = iid; samples = 30; k = 1; cov = diag; deadline = 600;\n  send_deadline = 600;\n  a -> b -> c;\n}\n' \
    "$DATA" >"$W/fp.dot"
"$PFT_BIN/pftnet" launch "$W/fp.dot" --out "$W/run" --prepare-only >"$W/prep.out" 2>&1 ||
    { fail "prepare-only exited $?: $(cat "$W/prep.out")"; exit 1; }
cmd_a=$(grep -- "--id a " "$W/prep.out")
cmd_b=$(grep -- "--id b " "$W/prep.out")
[ -n "$cmd_a" ] && [ -n "$cmd_b" ] || { fail "no pftnode commands in: $(cat "$W/prep.out")"; exit 1; }
TOPO=$W/run/topology.dot
"$PFT_BIN/pftnet" keygen other --dir "$W" >/dev/null 2>&1 || { fail "keygen failed"; exit 1; }

fp_of() { "$PFT_BIN/pftnet" check --no-data-check "$1" | sed -n 's/^fingerprint: //p'; }
fp=$(fp_of "$TOPO")
[[ "$fp" =~ ^[0-9a-f]{4}( [0-9a-f]{4}){15}$ ]] || fail "pftnet check prints no fingerprint: '$fp'"
"$PFT_BIN/pftnet" check --json --no-data-check "$TOPO" | grep -q "\"fingerprint\": \"$fp\"" ||
    fail "pftnet check --json lacks the fingerprint $fp"

# variant NAME SED-EXPRESSION: b's copy of the topology
variant() { sed "$2" "$TOPO" >"$W/$1.dot"; }
variant same 's|^digraph fp {|// b'"'"'s own copy\ndigraph fp {\n\tbgcolor = white;|; s|b/data/test_x.npy|b/data/../data/test_x.npy|; s/^\ta -> b;/\ta -> b [deadline = 500];/'
variant k 's/^\tk = 1;/\tk = 3;/'
variant cov 's/^\tcov = diag;/\tcov = spher;/'
variant key "s|$W/run/keys/c.pub|$W/other.pub|"
variant edge 's/^\ta -> b;/\ta -> b;\n\ta -> c;/'
[ "$(fp_of "$W/same.dot")" = "$fp" ] || fail "a copy differing only in form has another fingerprint"
for v in k cov key edge; do
    cmp -s "$TOPO" "$W/$v.dot" && fail "variant $v did not change the file"
    [ "$(fp_of "$W/$v.dot")" != "$fp" ] || fail "variant $v has the same fingerprint"
done

# run VARIANT: b on its copy (background), a on the original, both with fresh output folders under o_VARIANT
# (their data stays where the launcher put it); sets rc_a; b is stopped once a has ended (b's own successor c
# never runs).
run() {
    local o=$W/o_$1 ca cb
    mkdir -p "$o"
    ca=${cmd_a/--out $W\/run\/a/--out $o/a}
    cb=${cmd_b/--out $W\/run\/b/--out $o/b}
    ${cb/--topology $TOPO/--topology $W/$1.dot} >"$W/b_$1.log" 2>&1 &
    local b=$!
    pids+=("$b")
    $ca >"$W/a_$1.log" 2>&1
    rc_a=$?
    kill -TERM "$b" 2>/dev/null
    wait "$b" 2>/dev/null
}

run same
[ "$rc_a" -eq 0 ] || fail "same topology, other form: a exited $rc_a: $(grep -i error "$W/a_same.log" | head -3)"
grep -q "topology differs" "$W/b_same.log" && fail "same topology refused: $(grep 'topology differs' "$W/b_same.log")"
grep -q "topology fingerprint: $fp" "$W/b_same.log" || fail "b does not log the fingerprint $fp"
"$PFT_BIN/pftnet" inspect "$W/o_same/a/bundle.pftb" | grep -qx "topology   $fp" ||
    fail "pftnet inspect does not show a's bundle's fingerprint $fp"

# expect VARIANT NEEDLE: b refused naming NEEDLE, a exited 7 with the reason in its log
expect() {
    run "$1"
    grep -q "topology differs.*$2" "$W/b_$1.log" ||
        fail "$1: b's log lacks the refusal naming '$2': $(grep -i 'refus\|differs' "$W/b_$1.log" | head -3)"
    [ "$rc_a" -eq 7 ] || fail "$1: a exited $rc_a, expected 7"
    grep -q "hand-off to b rejected: .*topology differs.*$2" "$W/a_$1.log" ||
        fail "$1: a's log lacks the reason naming '$2': $(grep 'hand-off to b' "$W/a_$1.log")"
    echo "$1: $(grep -o 'topology differs.*' "$W/a_$1.log" | head -1)"
}
expect k "k (3 here)"
expect cov "cov (spher here)"
expect key "key of node c"
expect edge "edges (here: a->b, a->c, b->c)"
finish
