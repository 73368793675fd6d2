#!/usr/bin/env bash
# The peer's files form layers (node/peer/pft_node_internal.h lists them bottom-up): no two object files of
# node/peer call each other, and none calls a file listed below it. Reads the symbols of the objects the
# build made (nm), so it checks what the code does, not what its comments say.
set -euo pipefail
. "$(dirname "$0")/lib_e2e.sh"
objdir="$PFT_BIN/CMakeFiles/pft_peer.dir/peer"
[ -d "$objdir" ] || { fail "no objects in $objdir"; exit 1; }
order=$(sed -n '/Files, from the bottom up/,/Functions shared between files/p' "$PFT_SOURCE_DIR/node/peer/pft_node_internal.h" |
    grep -o 'pft_node[a-z_*]*\.c' | sed 's/\.c$//')
[ -n "$order" ] || { fail "no file list in pft_node_internal.h"; exit 1; }
python3 - "$objdir" "$PFT_SOURCE_DIR/node/peer" $order <<'PY'
import subprocess, sys, glob, os, fnmatch
objdir, srcdir, order = sys.argv[1], sys.argv[2], sys.argv[3:]
defs, uses = {}, {}
for o in glob.glob(os.path.join(objdir, "*.c.o")):
    f = os.path.basename(o)[:-4]  # pft_node_x.c.o -> pft_node_x
    if not os.path.exists(os.path.join(srcdir, f + ".c")):
        continue  # an object left by a source file that is gone
    out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDRB":
            defs[p[2]] = f
        elif len(p) == 2 and p[0] == "U":
            uses.setdefault(f, set()).add(p[1])
def rank(f):
    for i, pat in enumerate(order):
        if fnmatch.fnmatch(f, pat):
            return i
    return None
bad = 0
edges = set()
for f, syms in uses.items():
    for s in syms:
        g = defs.get(s)
        if g and g != f:
            edges.add((f, g))
for f, g in sorted(edges):
    rf, rg = rank(f), rank(g)
    if (g, f) in edges:
        print("both directions: %s <-> %s" % (f, g)); bad += 1
    elif rf is None or rg is None:
        print("not in the list of pft_node_internal.h: %s" % (f if rf is None else g)); bad += 1
    elif rg > rf:
        print("upward call: %s (layer %d) calls %s (layer %d)" % (f, rf, g, rg)); bad += 1
print("%d calls between %d files of node/peer, %d against the layers" % (len(edges), len(uses), bad))
sys.exit(1 if bad else 0)
PY
