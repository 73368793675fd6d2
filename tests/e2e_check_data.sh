#!/usr/bin/env bash
# e2e_check_data: `pftnet check` reads the data as a launch would, and a launch names the node and the file when
# the data do not fit together. Nodes with their own files (copies of the bundled example data, cut and altered
# here): a NaN in one node's features, a test split of another width than the train split, and two nodes whose
# features differ in width must each fail `pftnet check` (exit 2) naming the node and the file; the intact files
# pass; `pftnet launch` refuses the two widths naming both nodes and files (not "cannot concatenate datasets").
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || skip "no numpy for $PY (writes the altered .npy files)"
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
W=$(mktemp -d /tmp/pft_chkdata_XXXXXX)
trap 'if [ "$FAILED" = 0 ]; then rm -rf "$W"; else echo "outputs kept in $W" >&2; fi' EXIT
"$PY" - "$DATA" "$W" <<'PY'
import numpy as np, os, sys
src, w = sys.argv[1:3]
x, y = np.load(f"{src}/train_x.npy"), np.load(f"{src}/train_y.npy")
tx, ty = np.load(f"{src}/test_x.npy"), np.load(f"{src}/test_y.npy")
for node, (a, b) in {"a": (0, 60), "b": (60, 120)}.items():
    d = f"{w}/{node}"
    os.makedirs(d)
    np.save(f"{d}/x.npy", x[a:b].astype(np.float32)); np.save(f"{d}/y.npy", y[a:b])
    np.save(f"{d}/tx.npy", tx[a:b].astype(np.float32)); np.save(f"{d}/ty.npy", ty[a:b])
os.makedirs(f"{w}/bad")
nan = x[60:120].astype(np.float32).copy(); nan[7, 3] = np.nan
np.save(f"{w}/bad/nan.npy", nan)
np.save(f"{w}/bad/narrow_tx.npy", tx[60:120, : tx.shape[1] // 2].astype(np.float32))
np.save(f"{w}/bad/narrow_x.npy", x[60:120, : x.shape[1] // 2].astype(np.float32))
np.save(f"{w}/bad/narrow_tx2.npy", tx[60:120, : tx.shape[1] // 2].astype(np.float32))
PY
# topo NAME B_TRAIN B_TEST: a -> b, b's train and test features from the given files
topo() {
    printf 'digraph %s {\n  k = 1; cov = diag;\n  node [endpoint = "tcp://127.0.0.1:0"];\n  a [train = "%s/a/x.npy", labels = "%s/a/y.npy", test = "%s/a/tx.npy", test_labels = "%s/a/ty.npy"];\n  b [train = "%s", labels = "%s/b/y.npy", test = "%s", test_labels = "%s/b/ty.npy"];\n  a -> b;\n}\n' \
        "$1" "$W" "$W" "$W" "$W" "$2" "$W" "$3" "$W" >"$W/$1.dot"
}
topo good "$W/b/x.npy" "$W/b/tx.npy"
"$PFT_BIN/pftnet" check "$W/good.dot" >"$W/good.out" 2>&1 || fail "intact files: check exited $?: $(cat "$W/good.out")"
grep -q "2 nodes, 1 hand-off, run" "$W/good.out" || fail "check does not say \"1 hand-off\": $(head -1 "$W/good.out")"
# expect_check NAME NEEDLE...: check of NAME exits 2 with every needle in its message
expect_check() {
    local name=$1 rc
    shift
    "$PFT_BIN/pftnet" check "$W/$name.dot" >"$W/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "$name: check exited $rc, expected 2: $(cat "$W/$name.out")"
    for n in "$@"; do grep -qF -- "$n" "$W/$name.out" || fail "$name: check's message lacks '$n': $(cat "$W/$name.out")"; done
}
topo nan "$W/bad/nan.npy" "$W/b/tx.npy"
expect_check nan "node b" "$W/bad/nan.npy" "row 7 column 3" "NaN"
topo testwidth "$W/b/x.npy" "$W/bad/narrow_tx.npy"
expect_check testwidth "node b" "$W/bad/narrow_tx.npy has 640 columns" "one dimension"
topo nodewidth "$W/bad/narrow_x.npy" "$W/bad/narrow_tx2.npy"
expect_check nodewidth "node b" "$W/bad/narrow_x.npy has 640 columns" "node a's $W/a/x.npy has 1280" "one dimension"
"$PFT_BIN/pftnet" check "$W/nan.dot" --no-data-check >/dev/null 2>&1 || fail "--no-data-check still reads the data"
"$PFT_BIN/pftnet" launch "$W/nodewidth.dot" --out "$W/run" --insecure --no-baselines >"$W/launch.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "launch of two widths exited $rc, expected 2: $(tail -3 "$W/launch.out")"
grep -qF "node b: $W/bad/narrow_x.npy has" "$W/launch.out" || fail "launch does not name the node and file: $(cat "$W/launch.out")"
grep -q "cannot concatenate" "$W/launch.out" && fail "launch still says only 'cannot concatenate'"
[ "$FAILED" = 0 ] && echo "e2e_check_data: ok"
finish
