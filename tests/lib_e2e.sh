# lib_e2e.sh: sourced by the tests/e2e_*.sh scripts (not a test itself: the e2e_*.sh glob does not match it).
# Gives them FAILED, fail() (records a failure and goes on), skip() (exit 77: ctest's SKIP_RETURN_CODE) and the
# two folders every script needs, checked: PFT_BIN (pftnet, pftnode) and PFT_SOURCE_DIR (the source tree).
FAILED=0
fail() {
    echo "FAIL: $*" >&2
    FAILED=1
}
skip() {
    echo "skipped: $*"
    exit 77
}
PFT_BIN=${PFT_BIN:?PFT_BIN must name the folder with pftnet and pftnode}
PFT_SOURCE_DIR=${PFT_SOURCE_DIR:?PFT_SOURCE_DIR must name the source tree}
