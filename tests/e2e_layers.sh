#!/usr/bin/env bash
# Every product folder (core, wire, topology, node/*) is free of circles: no two object files of a folder call
# each other, directly or round a longer cycle, and where a folder's <stem>_internal.h lists its files from the
# bottom up (node/peer, wire's bundle and transport, core's gmm and ghead, node/audit), no file calls one below
# it. Reads the symbols of the objects the build made (nm), so it checks what the code does (tests/layers.py).
set -euo pipefail
. "$(dirname "$0")/lib_e2e.sh"
command -v nm >/dev/null || skip "nm (binutils) not installed"
python3 "$PFT_SOURCE_DIR/tests/layers.py" "$(dirname "$PFT_BIN")" "$PFT_SOURCE_DIR" || fail "circles or upward calls (above)"
finish
