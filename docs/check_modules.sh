#!/usr/bin/env bash
# check_modules: docs/DESIGN.md §3's module table names every product source file, and names none that does
# not exist. Product files are the .c and .h files under core/, wire/, topology/ and node/.
#
# The table is the one under the "## 3." heading (up to the next heading). In each row the first cell is a
# folder ("`core/`", "`node/peer/`"; an empty first cell continues the folder above), and every file name in
# the row (`pft_x.c`, `pft_x.h`, or `pft_x.[ch]` for the pair) is a file in that folder.
#
# usage: bash docs/check_modules.sh [SOURCE_DIR]   (default: the repository holding this script)
# Prints each file missing from the table and each name in the table with no file; exit 1 if any, else 0.
set -u

root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
design=$root/docs/DESIGN.md
[ -f "$design" ] || { echo "check_modules: no $design" >&2; exit 2; }
tmp=$(mktemp -d /tmp/pft_modules_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The table's rows, each file name expanded to folder/name.
awk '
    /^## 3\./ { inside = 1; next }
    inside && /^#/ { exit }
    inside && /^\|/ {
        n = split($0, cell, "|")
        f = cell[2]
        gsub(/[` ]/, "", f)
        if (f ~ /^-+$/ || f == "folder") next
        if (f != "") folder = f
        if (folder == "") next
        sub(/\/$/, "", folder)
        row = $0
        sub(/^\|[^|]*\|/, "", row)
        while (match(row, /[A-Za-z0-9_]+\.(\[ch\]|c|h)([^A-Za-z0-9_]|$)/)) {
            name = substr(row, RSTART, RLENGTH)
            row = substr(row, RSTART + RLENGTH - 1)
            sub(/[^A-Za-z0-9_.\]\[]$/, "", name)
            if (name ~ /\.\[ch\]$/) {
                stem = substr(name, 1, length(name) - 4)
                print folder "/" stem "c"
                print folder "/" stem "h"
            } else {
                print folder "/" name
            }
        }
    }' "$design" | sort -u >"$tmp/listed"

(cd "$root" && find core wire topology node -name '*.[ch]' -type f | sort -u) >"$tmp/tree"

status=0
if [ ! -s "$tmp/listed" ]; then
    echo "check_modules: no module table found under '## 3.' in docs/DESIGN.md" >&2
    exit 1
fi
missing=$(comm -23 "$tmp/tree" "$tmp/listed")
phantom=$(comm -13 "$tmp/tree" "$tmp/listed")
if [ -n "$missing" ]; then
    echo "files not named in docs/DESIGN.md §3:"
    echo "$missing" | sed 's/^/  /'
    status=1
fi
if [ -n "$phantom" ]; then
    echo "names in docs/DESIGN.md §3 with no such file:"
    echo "$phantom" | sed 's/^/  /'
    status=1
fi
[ $status = 0 ] && echo "check_modules: all $(wc -l <"$tmp/tree") product files named in docs/DESIGN.md §3"
exit $status
