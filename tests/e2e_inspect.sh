#!/usr/bin/env bash
# e2e_inspect: `pftnet inspect` on bundles real nodes wrote. Two tiny launches on the bundled example data (a GMM
# chain a -> b, cov = diag K = 2; an exact-statistics diamond a->b, a->c, b->d, c->d, cov = tied), then: a's GMM
# bundle (producer, 7 classes, diag K=2, provenance {a}, text and --json); b's statistics bundle (2 parts,
# contributors [a] and [b]); --key with the producer's .pub (valid, exit 0) and another node's (INVALID, exit 3);
# a truncated copy and a missing file (exit 1, a message naming the file); bad usage (exit 2); --help.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$PFT_SOURCE_DIR/examples/data/pacs-small
for p in pftnet pftnode; do
    if [ ! -x "$PFT_BIN/$p" ]; then
        echo "skipped: no $p in $PFT_BIN"
        exit 77
    fi
done
if ! command -v python3 >/dev/null; then
    echo "skipped: no python3"
    exit 77
fi
W=$(mktemp -d /tmp/pft_inspect_XXXXXX)
trap 'rm -rf "$W"' EXIT

# launch NAME SETTINGS EDGES: writes W/NAME.dot and runs it into W/NAME
launch() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 60; deadline = 120;\n  %s\n  %s\n}\n' \
        "$1" "$DATA" "$2" "$3" >"$W/$1.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$1.dot" --out "$W/$1" --no-baselines --quiet \
        >"$W/$1.stdout" 2>"$W/$1.stderr" || fail "launch $1 exited $? ($(cat "$W/$1.stderr"))"
}
# min_rows = 1: every class of 60 rows travels with K = 2 (the floor is e2e_floor.sh's)
launch chain "cov = diag; k = 2; max_iter = 20; em_draws = 1; head_draws = 1; min_rows = 1;" "a -> b;"
launch diamond "cov = tied;" "a -> b; a -> c; b -> d; c -> d;"

# run NAME EXPECTED_CODE ARGS...: runs pftnet inspect ARGS into W/NAME.out and W/NAME.err
run() {
    local name=$1 want=$2
    shift 2
    "$PFTNET" inspect "$@" >"$W/$name.out" 2>"$W/$name.err"
    local code=$?
    [ "$code" = "$want" ] || fail "$name: 'pftnet inspect $*' exited $code, expected $want ($(cat "$W/$name.err"))"
}
# has NAME REGEX: a line of W/NAME.out matches (extended regex)
has() {
    grep -Eq -- "$2" "$W/$1.out" || fail "$1: no line matching '$2' in:$(printf '\n')$(cat "$W/$1.out")"
}
# py NAME CODE: python3 asserts over o = the JSON object in W/NAME.out
py() {
    python3 -c "import json, sys
o = json.load(open(sys.argv[1]))
$2" "$W/$1.out" || fail "$1: JSON check failed: $2"
}

# ---- a's GMM bundle, text ------------------------------------------------------------------------------------
A=$W/chain/a/bundle.pftb
run gmm 0 "$A"
has gmm '^producer +a$'
has gmm '^run +chain$'
has gmm '^id +[0-9a-f]{64}$'
has gmm '^family +GMM, 7 classes$'
has gmm '^provenance +1 node$'
has gmm '^  a +60 rows: '
has gmm '^signature +present \(64 bytes\), not verified$'
has gmm '^bytes +message [0-9]+, payload [0-9]+, formula [0-9]+$'
[ "$(grep -Ec '^ +[0-9]+ +[0-9]+  diag +2 +-$' "$W/gmm.out")" = 7 ] || fail "gmm: expected 7 'diag K=2' class lines"
[ -s "$W/gmm.err" ] && fail "gmm: wrote to stderr: $(cat "$W/gmm.err")"

# ---- the same, --json --------------------------------------------------------------------------------------
run gmmjson 0 "$A" --json
py gmmjson 'assert o["producer"] == "a" and o["run"] == "chain" and o["family"] == "gmm", o
assert len(o["id"]) == 64 and o["complete"] is False and o["flags"] == 0 and o["dtype"] == "fp16", o
assert len(o["classes"]) == 7 and all(c["cov"] == "diag" and c["k"] == 2 and c["rank"] is None for c in o["classes"])
assert [p["node"] for p in o["provenance"]] == ["a"] and o["provenance"][0]["dp"] is None
assert sum(c["n"] for c in o["counts"]) == 60 and o["counts"] == [{"label": c["label"], "n": c["n"]} for c in o["classes"]]
assert o["parts"] == [] and o["parents"] == []
b = o["bytes"]
assert b["message"] > b["payload"] > 0 and b["formula"] > 0
assert o["signature"] == {"state": "present", "bytes": 64, "key": None, "fingerprint": None}, o["signature"]'
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes"]["message"])' "$W/gmmjson.out")" = \
    "$(stat -c %s "$A")" ] || fail "gmmjson: bytes.message is not the file's size"

# b received a's bundle: its inbox copy has the same id, and b's own bundle names it as parent
run inbox 0 --json "$(ls "$W"/chain/b/inbox/*.pftb | head -1)"
run bjson 0 --json "$W/chain/b/bundle.pftb"
ida=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$W/gmmjson.out")
py inbox "assert o['id'] == '$ida' and o['producer'] == 'a', o['id']"
py bjson "assert o['parents'] == ['$ida'] and [p['node'] for p in o['provenance']] == ['a', 'b'], o['parents']"

# ---- b's statistics bundle in the diamond ------------------------------------------------------------------
S=$W/diamond/b/bundle.pftb
run stats 0 "$S"
has stats '^producer +b$'
has stats '^family +statistics, 2 parts$'
has stats '^  part 0 +tied +contributors a; 60 rows: '
has stats '^  part 1 +tied +contributors b; 60 rows: '
has stats '^counts +120 rows: '
has stats '^provenance +2 nodes$'
run statsjson 0 "$S" --json
py statsjson 'assert o["family"] == "statistics" and o["classes"] == [], o["family"]
assert [p["contributors"] for p in o["parts"]] == [["a"], ["b"]] and all(p["kind"] == "tied" for p in o["parts"])
assert sum(c["n"] for c in o["counts"]) == 120 and len(o["parents"]) == 1
for p in o["parts"]: assert sum(c["n"] for c in p["classes"]) == 60'

# ---- signatures ----------------------------------------------------------------------------------------------
run keyok 0 "$S" --key "$W/diamond/keys/b.pub"
has keyok "^signature +valid for $W/diamond/keys/b.pub \(fingerprint [0-9a-f]{16}\)$"
run keybad 3 "$S" --key "$W/diamond/keys/c.pub"
has keybad "^signature +INVALID for $W/diamond/keys/c.pub "
run keyinline 0 "$S" --key "$(cat "$W/diamond/keys/b.pub")"
has keyinline '^signature +valid for the inline key '
run keyjson 3 "$S" --json --key "$W/diamond/keys/a.pub"
py keyjson 'assert o["signature"]["state"] == "invalid" and len(o["signature"]["fingerprint"]) == 16, o["signature"]'
run keymissing 2 "$S" --key "$W/nokey.pub"
grep -q "nokey.pub" "$W/keymissing.err" || fail "keymissing: message does not name the key file"

# ---- errors ------------------------------------------------------------------------------------------------
head -c 3000 "$A" >"$W/trunc.pftb"
run trunc 1 "$W/trunc.pftb"
grep -q "^pftnet inspect: $W/trunc.pftb: bundle decode: " "$W/trunc.err" || fail "trunc: message: $(cat "$W/trunc.err")"
[ -s "$W/trunc.out" ] && fail "trunc: printed on stdout"
run missing 1 "$W/none.pftb"
grep -q "$W/none.pftb" "$W/missing.err" || fail "missing: message does not name the file: $(cat "$W/missing.err")"
run nopos 2
run twopos 2 "$A" "$A"
run badopt 2 "$A" --bogus
run help 0 --help
has help '^usage: pftnet inspect BUNDLE'
"$PFTNET" --help | grep -q '^  inspect ' || fail "pftnet --help does not list inspect"

[ $FAILED = 0 ] && echo "e2e_inspect: all checks passed"
exit $FAILED
