#!/usr/bin/env bash
# e2e_usage_twohost: docs/USAGE.md §2's two-host example runs as written. The test copies the example's three
# fenced blocks from the doc (the topology after "A complete example", then the two hosts' `sh` blocks), gives
# each host a folder of its own holding the topology and its own data only (photo rows on host 10.0.0.1, sketch
# rows on host 10.0.0.2, split from the bundled examples/data/pacs-small by domain), and runs each host's block
# on its host (a network namespace with the doc's address; loopback addresses 127.0.0.1 and .2 in their place
# where namespaces cannot be made): first the `pftnet keygen` lines, then the public keys are exchanged as the
# comments say, then the rest. Passes when both nodes exit 0 with status ok, both hosts print the same
# fingerprint, dst's knowledge holds src's rows, and no host's folder holds the other's data or secret key.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR; PFT_TWOHOST_KEEP=1 keeps the outputs.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

DOC=$PFT_SOURCE_DIR/docs/USAGE.md
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -x "$PFT_BIN/pftnet" ] && [ -x "$PFT_BIN/pftnode" ] || skip "no pftnet/pftnode in $PFT_BIN"
[ -r "$DATA/train_domain.npy" ] || skip "$DATA not found"
command -v python3 >/dev/null 2>&1 || skip "no python3"
command -v timeout >/dev/null 2>&1 || skip "coreutils timeout not installed"
NODE_TIMEOUT=600 # bound of each host's block (a hang, never a verdict)

WORK=$(mktemp -d /tmp/pft_twohost_XXXXXX)
HOSTS_TAG=pft2h$$
. "$(dirname "${BASH_SOURCE[0]}")/lib_hosts.sh" # hosts_up, on_host, hosts_down, HOST_ADDR, HOSTS_MODE
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    hosts_down
    if [ "$FAILED" = 0 ] && [ "${PFT_TWOHOST_KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else echo "outputs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the example's blocks, copied from the doc ----
python3 - "$DOC" "$WORK" <<'PY' || { fail "docs/USAGE.md: the two-host example's blocks not found"; exit 1; }
import re, sys
doc, work = sys.argv[1:3]
text = open(doc).read()
start = text.index("A complete example, the 2-client covariate-shift setting")
blocks = re.findall(r"```(\w+)\n(.*?)```", text[start:], re.S)[:3]
assert [b[0] for b in blocks] == ["dot", "sh", "sh"], [b[0] for b in blocks]
open(f"{work}/covshift.dot", "w").write(blocks[0][1])
for i, (_, body) in enumerate(blocks[1:], 1):
    first = body.splitlines()[0]
    m = re.match(r"# host (\S+), .*\(node (\w+)\)", first)
    assert m, first
    open(f"{work}/host{i}.addr", "w").write(m.group(1) + " " + m.group(2) + "\n")
    open(f"{work}/host{i}.sh", "w").write(body)
PY
read -r ADDR1 ID1 <"$WORK/host1.addr"
read -r ADDR2 ID2 <"$WORK/host2.addr"
[ "$ID1/$ID2" = src/dst ] || { fail "the example's hosts run '$ID1' and '$ID2', expected src and dst"; exit 1; }
hosts_up "$ADDR1" "$ADDR2"
echo "hosts: $HOSTS_MODE (${HOST_ADDR[*]})"
if [ "$HOSTS_MODE" = loopback ]; then # the doc's addresses are not this machine's: the loopback ones instead
    sed -i "s|tcp://$ADDR1:|tcp://${HOST_ADDR[1]}:|; s|tcp://$ADDR2:|tcp://${HOST_ADDR[2]}:|" "$WORK/covshift.dot"
fi

# ---- each host's folder: the topology and its own rows (photo: domain 2, sketch: domain 3) ----
printf 'digraph split {\n  dataset = "%s"; partition = domain;\n  src [domain = 2]; dst [domain = 3];\n  src -> dst;\n}\n' \
    "$DATA" >"$WORK/split.dot"
"$PFT_BIN/pftnet" launch "$WORK/split.dot" --out "$WORK/split" --prepare-only --insecure --quiet >/dev/null \
    2>"$WORK/split.err" || { fail "splitting the data: $(cat "$WORK/split.err")"; exit 1; }
mkdir -p "$WORK/host1/photo" "$WORK/host2/sketch"
cp "$WORK/split/src/data/"*.npy "$WORK/host1/photo/" && cp "$WORK/split/dst/data/"*.npy "$WORK/host2/sketch/" ||
    { fail "copying the shares"; exit 1; }
rm -rf "$WORK/split"
cp "$WORK/covshift.dot" "$WORK/host1/" && cp "$WORK/covshift.dot" "$WORK/host2/"

# ---- phase 1 on each host: its keygen lines; then each sends its .pub to the other ----
export PATH="$PFT_BIN:$PATH"
for i in 1 2; do
    grep -E '^pftnet keygen' "$WORK/host$i.sh" >"$WORK/host$i.keygen.sh"
    grep -vE '^pftnet keygen' "$WORK/host$i.sh" >"$WORK/host$i.run.sh"
    [ -s "$WORK/host$i.keygen.sh" ] || fail "host $i's block has no pftnet keygen line"
    (cd "$WORK/host$i" && on_host "$i" bash -e "$WORK/host$i.keygen.sh") >"$WORK/host$i.keygen.log" 2>&1 ||
        fail "host $i: keygen: $(cat "$WORK/host$i.keygen.log")"
done
cp "$WORK/host1/$ID1.pub" "$WORK/host2/" && cp "$WORK/host2/$ID2.pub" "$WORK/host1/" ||
    { fail "exchanging the public keys"; exit 1; }

# ---- phase 2: the rest of each block, both hosts at once ----
for i in 1 2; do
    (cd "$WORK/host$i" && on_host "$i" timeout -k 5 "$NODE_TIMEOUT" bash -e "$WORK/host$i.run.sh") \
        >"$WORK/host$i.log" 2>&1 &
    PIDS+=($!)
done
for i in 1 2; do
    wait "${PIDS[$((i - 1))]}" || fail "host $i's block exited $? ($(tail -n 3 "$WORK/host$i.log"))"
done

fp1=$(grep -m1 '^fingerprint:' "$WORK/host1.log")
fp2=$(grep -m1 '^fingerprint:' "$WORK/host2.log")
[ -n "$fp1" ] && [ "$fp1" = "$fp2" ] || fail "the hosts' fingerprints differ: '$fp1' / '$fp2'"
python3 - "$WORK/host1/out/result.json" "$WORK/host2/out/result.json" <<'PY' || fail "the results are not as expected"
import json, sys
src, dst = (json.load(open(p)) for p in sys.argv[1:3])
for r in (src, dst):
    assert r["status"] == "ok" and r["exit_code"] == 0, (r["id"], r["status"])
prov = sorted(p["node"] for p in dst["provenance"])
assert prov == ["dst", "src"], prov
print("src acc_local %.4f; dst acc_local %.4f, knowledge of %s" % (src["accuracy_local"], dst["accuracy_local"], prov))
PY
[ -e "$WORK/host1/sketch" ] || [ -e "$WORK/host1/$ID2.key" ] && fail "host 1's folder holds the other's files"
[ -e "$WORK/host2/photo" ] || [ -e "$WORK/host2/$ID1.key" ] && fail "host 2's folder holds the other's files"
finish
