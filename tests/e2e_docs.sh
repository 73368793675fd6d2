#!/usr/bin/env bash
# e2e_docs: the documentation agrees with the code. The generated tables in docs/USAGE.md must equal what the
# programs print today: the topology attributes (`pftnet check --attributes --markdown`, from the table in
# topology/pft_topo_attr.c) and pftnode's exit codes (`pftnode --exit-codes --markdown`, from
# PFT_NODE_EXIT_TABLE in node/peer/pft_node.h). And every relative link in README.md and docs/*.md must name a
# file that exists and, for a link into a .md file with #anchor, a heading there.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
# With --update it rewrites the generated blocks in docs/USAGE.md from the programs instead of checking them.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

USAGE=$PFT_SOURCE_DIR/docs/USAGE.md
UPDATE=0
[ "${1-}" = "--update" ] && UPDATE=1
for p in pftnet pftnode; do
    if [ ! -x "$PFT_BIN/$p" ]; then
        echo "skipped: no $p in $PFT_BIN"
        exit 77
    fi
done
W=$(mktemp -d /tmp/pft_docs_XXXXXX)
trap 'rm -rf "$W"' EXIT
REGEN="PFT_BIN=$PFT_BIN PFT_SOURCE_DIR=$PFT_SOURCE_DIR bash $PFT_SOURCE_DIR/tests/e2e_docs.sh --update"

# block NAME: the lines strictly between "<!-- NAME:begin ..." and "<!-- NAME:end -->" in USAGE.md; fails
# unless each marker occurs exactly once, begin first
block() {
    local name=$1 nb ne
    nb=$(grep -c "^<!-- $name:begin" "$USAGE")
    ne=$(grep -c "^<!-- $name:end -->" "$USAGE")
    if [ "$nb" != 1 ] || [ "$ne" != 1 ]; then
        fail "docs/USAGE.md: expected one '<!-- $name:begin' and one '<!-- $name:end -->' line, found $nb and $ne"
        return 1
    fi
    awk -v b="<!-- $name:begin" -v e="<!-- $name:end -->" '
        index($0, e) == 1 { inside = 0 }
        inside { print }
        index($0, b) == 1 { inside = 1 }' "$USAGE"
}

# replace NAME FILE: puts FILE's lines between NAME's markers in USAGE.md
replace() {
    local name=$1 gen=$2
    awk -v b="<!-- $name:begin" -v e="<!-- $name:end -->" -v gen="$gen" '
        index($0, e) == 1 { skip = 0 }
        !skip { print }
        index($0, b) == 1 { while ((getline l < gen) > 0) print l; skip = 1 }' "$USAGE" >"$W/usage.new" &&
        cat "$W/usage.new" >"$USAGE"
}

# check NAME COMMAND...: the block NAME equals the command's output
check() {
    local name=$1
    shift
    if ! "$@" >"$W/$name.gen" 2>"$W/$name.err"; then
        fail "'$*' exited $? ($(cat "$W/$name.err"))"
        return
    fi
    block "$name" >"$W/$name.doc" || return
    if [ $UPDATE = 1 ]; then
        replace "$name" "$W/$name.gen" && echo "docs/USAGE.md: $name block regenerated from '$*'"
        return
    fi
    if ! diff -u --label "docs/USAGE.md ($name block)" --label "$*" "$W/$name.doc" "$W/$name.gen" >&2; then
        fail "docs/USAGE.md's $name table differs from '$*' (diff above: - document, + code)."
        echo "  If the code is right, regenerate the document's tables with:" >&2
        echo "    $REGEN" >&2
    fi
}

check attributes "$PFT_BIN/pftnet" check --attributes --markdown
check exit-codes "$PFT_BIN/pftnode" --exit-codes --markdown

# ---- relative links in README.md and docs/*.md ----------------------------------------------------------
if [ $UPDATE = 0 ]; then
    if ! python3 - "$PFT_SOURCE_DIR" >&2 <<'EOF'; then
import os, re, sys
root = sys.argv[1]
files = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))

def slugs(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"#{1,6} +(.*?) *#* *$", line)
        if m:
            s = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out

bad = 0
for f in files:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)              # nor do code spans
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        where = os.path.relpath(f, root)
        if not os.path.exists(dest):
            print("%s: link to %s: no such file" % (where, target))
            bad = 1
        elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
            print("%s: link to %s: no heading with that anchor in %s" % (where, target, os.path.relpath(dest, root)))
            bad = 1
sys.exit(bad)
EOF
        fail "broken links in README.md or docs/*.md (listed above)"
    fi
fi

[ $FAILED = 0 ] && echo "e2e_docs: all checks passed"
exit $FAILED
