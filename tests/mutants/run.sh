#!/usr/bin/env bash
# Mutation testing (SQLite's way): applies each mutant of a list (tests/mutants/mutants.txt) to a scratch copy
# of the source tree, builds the sanitizer test configuration there, runs the mutant's ctests and reports whether
# they killed it (a test failed) or it survived. Exit 0 when every selected mutant was killed, 1 when one
# survived or did not apply (its original text not found exactly once) or did not build.
# Usage: tests/mutants/run.sh [--src DIR] [--list FILE] [--fast] [--no-baseline] [--build-type T] [--c-flags F]
#                             [NAME-REGEX]
#   --src DIR    the source tree to copy (default: the tree this script is in); CMake passes it for ctest
#   --build-type T, --c-flags F  the scratch build's CMAKE_BUILD_TYPE and its CMAKE_C_FLAGS_<T> (default: Debug and
#                "-g -O1", as tests/run builds build-test/); ctest passes its own build's, so that a mutant's test
#                is compiled as in the suite
#   --list FILE  the mutant list (default: DIR/tests/mutants/mutants.txt)
#   --fast       only the mutants marked `fast: yes` (CI's default suite runs these: ctest mutants_fast)
#   --no-baseline  do not first run the selected mutants' tests on the unmutated tree (they must pass there)
#   NAME-REGEX   run only the mutants whose name matches (a Python regex search), e.g. 'floor|inbox'
# PFT_MUTANTS_DIR=DIR keeps the scratch copy and its build in DIR between runs: only the files that changed are
# copied again and the build is incremental (default: a temporary directory removed at the end).
# PFT_MUTANTS_NICE=N runs the builds and tests at nice N (for a long run beside other work; default: not niced —
# under a CPU hog a niced run starves, and ctest mutants_fast, part of the default suite, must finish there too).
set -uo pipefail
NICE=""
if [ -n "${PFT_MUTANTS_NICE:-}" ]; then
    [[ $PFT_MUTANTS_NICE =~ ^[0-9]+$ ]] || { echo "run.sh: PFT_MUTANTS_NICE must be a number" >&2; exit 2; }
    NICE="nice -n $PFT_MUTANTS_NICE"
fi
SRC=$(cd "$(dirname "$0")/../.." && pwd)
LIST=""
ONLY=.
FAST=no
BASELINE=yes
BUILD_TYPE=Debug
C_FLAGS="-g -O1"
while [ $# -gt 0 ]; do
    case $1 in
    --src) SRC=$(cd "$2" && pwd) && shift 2 || exit 1 ;;
    --list) LIST=$2 && shift 2 ;;
    --fast) FAST=yes && shift ;;
    --no-baseline) BASELINE=no && shift ;;
    --build-type) BUILD_TYPE=$2 && shift 2 ;;
    --c-flags) C_FLAGS=$2 && shift 2 ;;
    *) ONLY=$1 && shift ;;
    esac
done
LIST=${LIST:-$SRC/tests/mutants/mutants.txt}
# A mutant's tests run in the scratch build, which has no mutants ctests (PFT_MUTANTS=OFF); this guard also stops
# a run started from inside another run (a ctest calling this script from a scratch tree).
if [ -n "${PFT_MUTANTS_ACTIVE:-}" ]; then
    echo "run.sh: already inside a mutation run ($PFT_MUTANTS_ACTIVE); refusing to recurse" >&2
    exit 1
fi
if [ -n "${PFT_MUTANTS_DIR:-}" ]; then
    TOP=$PFT_MUTANTS_DIR
    mkdir -p "$TOP" || exit 1
else
    TOP=$(mktemp -d /tmp/pft_mutants_XXXXXX)
    trap 'rm -rf "$TOP"' EXIT
fi
export PFT_MUTANTS_ACTIVE=$TOP
WORK=$TOP/src # the tracked files, with the working tree's uncommitted edits; ../shared as from SRC
mkdir -p "$WORK" && ln -sfn "$(cd "$SRC/.." && pwd)/shared" "$TOP/shared"
# copy the tracked files whose content differs (unchanged files keep their times: the build stays incremental)
git -C "$SRC" ls-files -z | python3 -c '
import os, shutil, sys
src, dst = sys.argv[1:3]
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
copied = 0
for n in names:
    a, b = os.path.join(src, n), os.path.join(dst, n)
    if not os.path.isfile(a):
        continue
    if os.path.isfile(b) and os.path.getsize(a) == os.path.getsize(b):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            if fa.read() == fb.read():
                continue
    os.makedirs(os.path.dirname(b), exist_ok=True)
    shutil.copy2(a, b)
    os.utime(b)  # newer than the objects built from a mutant of it
    copied += 1
print(f"scratch {dst}: {copied} of {len(names)} files copied")
' "$SRC" "$WORK" || { echo "cannot copy the tree"; exit 1; }
t0=$(date +%s)
# Ninja when there is one (.ci/install-deps installs it): Make's recursive dependency checks cost seconds of CPU
# per `cmake --build --target` even when nothing changed, and a run builds once per mutant. A scratch build made
# by the other generator is started again (CMake refuses to switch generators in place).
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
want=$([ ${#GEN[@]} -gt 0 ] && echo Ninja || echo "Unix Makefiles")
if [ -f "$WORK/build/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want" "$WORK/build/CMakeCache.txt"; then
    rm -rf "$WORK/build"
fi
# ccache when the caller set one up (tests/run exports CCACHE_DIR and a CCACHE_BASEDIR above this scratch, so
# that the objects of the suite's own build are hits here): only the files that differ are compiled
LAUNCHER=()
[ -n "${CCACHE_DIR:-}" ] && command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S "$WORK" -B "$WORK/build" "${GEN[@]}" "${LAUNCHER[@]}" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    "-DCMAKE_C_FLAGS_${BUILD_TYPE^^}=$C_FLAGS" -DPFT_SANITIZE=ON -DPFT_TEST_HOOKS=ON -DPFT_WERROR=ON \
    -DPFT_MUTANTS=OFF >/dev/null || exit 1
cmake --build "$WORK/build" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p; s/^\([^ /:]*\): phony$/\1/p' >"$TOP/targets"
# build_for REGEX: builds what the ctests matching REGEX run, into $TOP/build.log: their executables (a test named
# as a target runs it; a script's name is no target) and, only when one of them may start a node, pftnode and
# pftnet: a test whose command is not a program of this build (the e2e_*.sh scripts drive the programs) or an
# executable whose text names a path to either (the C end-to-end tests build "%s/node/pftnode", the launch library
# "%s/pftnode"). A unit test that names neither cannot start them, and linking both for each mutant was most of
# a mutant's build.
build_for() {
    local targets commands programs=no kind path
    targets=$(cd "$WORK/build" && ctest -N -R "$1" | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' |
        grep -Fxf "$TOP/targets" | tr '\n' ' ')
    if [ -n "$targets" ]; then
        # shellcheck disable=SC2086 # target names have no spaces
        $NICE cmake --build "$WORK/build" -j2 --target $targets >>"$TOP/build.log" 2>&1 || return 1
    fi
    # each test's command, now that its executable exists (ctest names no command for a missing one)
    commands=$(cd "$WORK/build" && ctest --show-only=json-v1 -R "$1" | python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin)["tests"]:
    cmd = (t.get("command") or [""])[0]
    print("exe" if cmd.startswith(build + "/") and os.path.isfile(cmd) else "other", cmd)
' "$WORK/build") || return 1
    while read -r kind path; do
        [ "$kind" = exe ] && ! grep -aqE '/pftn(ode|et)' "$path" && continue
        [ -n "$kind" ] && programs=yes
    done <<<"$commands"
    if [ $programs = yes ]; then
        $NICE cmake --build "$WORK/build" -j2 --target pftnode pftnet >>"$TOP/build.log" 2>&1 || return 1
    else
        # none of these tests starts them: a copy left from another mutant must not stand in for the sources'
        rm -f "$WORK/build/node/pftnode" "$WORK/build/node/pftnet"
    fi
}
# the selected mutants as NAME<TAB>FILE<TAB>FROM<TAB>TO<TAB>TESTS lines
python3 - "$LIST" "$ONLY" "$FAST" >"$TOP/list" <<'PY' || exit 1
import re, sys
path, only, fast = sys.argv[1:4]
names = set()
for block in open(path).read().split("\n\n"):
    kv = {}
    for line in block.splitlines():
        if line and not line.startswith("#") and ": " in line:
            k, v = line.split(": ", 1)
            kv[k] = v
    if not kv:
        continue
    missing = [k for k in ("name", "file", "from", "to", "tests") if k not in kv]
    if missing or kv["name"] in names:
        sys.exit(f"mutant block without {missing} or with a name used before: {block!r}")
    names.add(kv["name"])
    if re.search(only, kv["name"]) and (fast == "no" or kv.get("fast") == "yes"):
        print("\t".join(kv[k] for k in ("name", "file", "from", "to", "tests")))
PY
[ -s "$TOP/list" ] || { echo "no mutant selected"; exit 1; }
# every selected mutant's tests, built and (unless --no-baseline) passing on the unmutated tree: a test that
# fails there would "kill" every mutant
all_tests=$(cut -f5 "$TOP/list" | paste -sd'|')
: >"$TOP/build.log"
build_for "$all_tests" || { tail -20 "$TOP/build.log"; exit 1; }
echo "scratch build: $(($(date +%s) - t0)) s"
if [ $BASELINE = yes ]; then
    t0=$(date +%s)
    if ! (cd "$WORK/build" && $NICE ctest -R "$all_tests" --timeout 1800 >"$TOP/ctest.log" 2>&1); then
        echo "baseline: tests fail on the unmutated tree:"
        grep -o '[0-9]* - [^ ]* ([A-Za-z ]*)' "$TOP/ctest.log" | grep -v '(Passed)'
        exit 1
    fi
    echo "baseline: the selected mutants' tests pass on the unmutated tree ($(($(date +%s) - t0)) s)"
fi
killed=0 survived=0 broken=0 total=0
tall=$(date +%s)
while IFS=$'\t' read -r name file from to tests; do
    total=$((total + 1))
    t0=$(date +%s)
    cp -p "$WORK/$file" "$TOP/orig"
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
    # build only what the mutant's tests run
    : >"$TOP/build.log"
    if ! build_for "$tests"; then
        echo "BROKEN   $name: does not build ($(grep -m1 error "$TOP/build.log"))"
        broken=$((broken + 1))
    elif (cd "$WORK/build" && $NICE ctest -R "$tests" -E '^mutants' --no-tests=error --timeout 1800 >"$TOP/ctest.log" 2>&1); then
        echo "SURVIVED $name ($file): $tests passed [$(($(date +%s) - t0)) s]"
        survived=$((survived + 1))
    elif ! grep -q '(Failed)\|(Timeout)\|(Subprocess aborted)\|Exception' "$TOP/ctest.log"; then
        echo "BROKEN   $name: no test ran or failed for '$tests' ($(tail -1 "$TOP/ctest.log"))"
        broken=$((broken + 1))
    else
        by=$(grep -o '[0-9]* - [^ ]* ([A-Za-z ]*)' "$TOP/ctest.log" | grep -v '(Passed)\|(Skipped)' | tr '\n' ' ')
        echo "KILLED   $name ($file) by ${by}[$(($(date +%s) - t0)) s]"
        killed=$((killed + 1))
    fi
    # restore with a fresh time, so that the next build recompiles the original
    cp "$TOP/orig" "$WORK/$file" && touch "$WORK/$file"
done <"$TOP/list"
echo "mutants: $killed killed, $survived survived, $broken broken (of $total; $(($(date +%s) - tall)) s)"
[ "$total" -gt 0 ] && [ $survived = 0 ] && [ $broken = 0 ]
