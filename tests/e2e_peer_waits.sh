#!/usr/bin/env bash
# Only the stage machine waits (node/peer/pft_node_internal.h): the one loop (pft_node_loop.c) is the only
# object of node/peer that polls the transport, and the stage machine (pft_node.c) the only one that turns the
# loop until a condition holds; methods, release steps and chores only compute (a long computation yields
# through pft_node__loop_yield, which waits for nothing). Reads the symbols of the objects the build made (nm).
set -euo pipefail
. "$(dirname "$0")/lib_e2e.sh"
objdir="$PFT_BIN/CMakeFiles/pft_peer.dir/peer"
[ -d "$objdir" ] || { fail "no objects in $objdir"; exit 1; }
bad=0
for o in "$objdir"/*.c.o; do
    f=$(basename "$o" .c.o)
    [ -f "$PFT_SOURCE_DIR/node/peer/$f.c" ] || continue # an object left by a source file that is gone
    uses=$(nm "$o" | awk '$1 == "U" { print $2 }')
    if grep -qx pft_transport_poll <<<"$uses" && [ "$f" != pft_node_loop ]; then
        echo "$f polls the transport itself (only pft_node_loop does)"
        bad=$((bad + 1))
    fi
    if grep -qx pft_node__loop_until <<<"$uses" && [ "$f" != pft_node ]; then
        echo "$f waits on the loop itself (only the stage machine, pft_node, does)"
        bad=$((bad + 1))
    fi
done
echo "$bad wait(s) outside the stage machine"
[ "$bad" -eq 0 ]
