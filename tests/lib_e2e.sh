# lib_e2e.sh: sourced by the tests/e2e_*.sh scripts (not a test itself: the e2e_*.sh glob does not match it).
# Gives them FAILED, fail() (records a failure and goes on), skip() (exit 77: ctest's SKIP_RETURN_CODE),
# skip_part() (records that some checks could not run and goes on), finish() (the exit status) and the two
# folders every script needs, checked: PFT_BIN (pftnet, pftnode) and PFT_SOURCE_DIR (the source tree).
FAILED=0
SKIPPED=0
fail() {
    echo "FAIL: $*" >&2
    FAILED=1
}
skip() {
    echo "skipped: $*"
    exit 77
}
skip_part() {
    echo "skipped: $*"
    SKIPPED=1
}
# Ends the script: 1 when a check failed, else 77 when a part was skipped (a skip is never a pass), else 0.
finish() {
    [ "$FAILED" = 0 ] || exit 1
    [ "$SKIPPED" = 0 ] || exit 77
    exit 0
}
PFT_BIN=${PFT_BIN:?PFT_BIN must name the folder with pftnet and pftnode}
PFT_SOURCE_DIR=${PFT_SOURCE_DIR:?PFT_SOURCE_DIR must name the source tree}
