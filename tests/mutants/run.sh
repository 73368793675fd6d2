#!/usr/bin/env bash
# Mutation testing (SQLite's way): applies each mutant of tests/mutants/mutants.txt to a scratch copy of the
# source tree, builds the sanitizer test configuration there, runs the mutant's ctests and reports whether they
# killed it (a test failed) or it survived. Exit 0 when every mutant was killed, 1 when one survived or did not
# apply (its original text not found exactly once) or did not build. Usage: tests/mutants/run.sh [NAME-REGEX]
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
LIST=$SRC/tests/mutants/mutants.txt
ONLY=${1:-.}
TOP=$(mktemp -d /tmp/pft_mutants_XXXXXX)
trap 'rm -rf "$TOP"' EXIT
WORK=$TOP/src # the tracked files, with the working tree's uncommitted edits; ../shared as from SRC
mkdir -p "$WORK" && ln -s "$(cd "$SRC/.." && pwd)/shared" "$TOP/shared"
git -C "$SRC" ls-files -z | (cd "$SRC" && xargs -0 cp --parents -t "$WORK") || { echo "cannot copy the tree"; exit 1; }
cmake -S "$WORK" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Debug -DPFT_SANITIZE=ON -DPFT_TEST_HOOKS=ON -DPFT_WERROR=ON \
    >/dev/null || exit 1
nice cmake --build "$WORK/build" -j2 >"$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; exit 1; }
# mutants as NAME<TAB>FILE<TAB>FROM<TAB>TO<TAB>TESTS lines
python3 - "$LIST" >"$WORK/list" <<'PY' || exit 1
import sys
for block in open(sys.argv[1]).read().split("\n\n"):
    kv = {}
    for line in block.splitlines():
        if line and not line.startswith("#") and ": " in line:
            k, v = line.split(": ", 1)
            kv[k] = v
    if kv:
        print("\t".join(kv[k] for k in ("name", "file", "from", "to", "tests")))
PY
killed=0 survived=0 broken=0
while IFS=$'\t' read -r name file from to tests; do
    [[ $name =~ $ONLY ]] || continue
    cp "$WORK/$file" "$WORK/orig"
    if ! python3 - "$WORK/$file" "$from" "$to" <<'PY'; then
import sys
path, a, b = sys.argv[1:4]
s = open(path).read()
if s.count(a) != 1:
    sys.exit(1)
open(path, "w").write(s.replace(a, b))
PY
        echo "BROKEN   $name: '$from' is not in $file exactly once"
        broken=$((broken + 1))
        continue
    fi
    if ! nice cmake --build "$WORK/build" -j2 >"$WORK/build.log" 2>&1; then
        echo "BROKEN   $name: does not build ($(grep -m1 error "$WORK/build.log"))"
        broken=$((broken + 1))
    elif (cd "$WORK/build" && ctest -R "$tests" --timeout 900 >"$WORK/ctest.log" 2>&1); then
        echo "SURVIVED $name ($file): $tests passed"
        survived=$((survived + 1))
    else
        echo "KILLED   $name ($file) by $(grep -o '[0-9]* - [^ ]* (Failed)' "$WORK/ctest.log" | tr '\n' ' ')"
        killed=$((killed + 1))
    fi
    cp "$WORK/orig" "$WORK/$file"
done <"$WORK/list"
echo "mutants: $killed killed, $survived survived, $broken broken"
[ $survived = 0 ] && [ $broken = 0 ]
