#!/usr/bin/env bash
# e2e_slots: pftnet launch --compute-slots N, real nodes on the bundled example data. A star of six clients,
# every one ready to refit at once, and an aggregator: with one slot, no two nodes compute at the same time
# (the intervals between each node's "compute slot … taken" and "… given back" log lines, over all nodes, do
# not overlap), every node takes and gives back its slot once per stage, the run ends as without slots (every
# node exit 0, the aggregator's accuracy the same as a run without --compute-slots: the slots change when a
# node computes, never what), and some node waited for its slot. With two slots, at most two intervals
# overlap at any time. In a ring (secure aggregation on), a member passes lap 2's complete bundle on before it
# queues for the slot of its head, keeps it light while queued (decoded again in its slot), and the one slot is
# never held twice. Bad values are refused: --compute-slots -1 or 4097 (usage, exit 2), under --engine
# slurm, and pftnode --compute-slots on a folder without slot files.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, finish, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
command -v python3 >/dev/null || skip "no python3"
W=$(mktemp -d /tmp/pft_slots_XXXXXX)
trap 'rm -rf "$W"' EXIT

cat >"$W/star.dot" <<EOF
digraph star {
  dataset = "$DATA"; partition = iid; samples = 40; cov = tied; prep = l2; min_rows = 1; mean_noise = 0;
  deadline = 600; send_deadline = 300;
  s [data = false];
  c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s; c6 -> s;
}
EOF

# launch NAME [OPTIONS...]: runs the star into W/NAME
launch() {
    local name=$1
    shift
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/star.dot" --out "$W/$name" --no-baselines --quiet --seed 0 "$@" \
        >"$W/$name.stdout" 2>"$W/$name.stderr" || fail "launch $name exited $? ($(cat "$W/$name.stderr"))"
}
launch free
launch one --compute-slots 1
launch two --compute-slots 2
# a ring with secure aggregation: lap 2 passes the complete bundle on before the node queues for the slot of
# its head, keeps it light meanwhile (decoded again once the slot is its own), and one slot is never held by two
# nodes at once
cat >"$W/ring.dot" <<EOF
digraph ring {
  dataset = "$DATA"; partition = iid; samples = 40; cov = tied; prep = l2; min_rows = 1; mean_noise = 0;
  deadline = 600; send_deadline = 300; secure_agg = true; start = r0;
  r0 -> r1 -> r2 -> r3 -> r0;
}
EOF
PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/ring.dot" --out "$W/ring" --no-baselines --quiet --seed 0 \
    --compute-slots 1 >"$W/ring.stdout" 2>"$W/ring.stderr" || fail "launch ring exited $? ($(cat "$W/ring.stderr"))"
python3 - "$W/ring" <<'PY' || fail "ring: lap 2 or the slot not as it should be"
import datetime, glob, os, re, sys
ev, fwd = [], 0
for log in sorted(glob.glob(sys.argv[1] + "/*/node.log")):
    text = open(log).read()
    t = {}
    for m in re.finditer(r"^(\S+) INFO  \[\S+\] stage (\d+): compute slot \d+ (?:of \d+ )?(taken|given back)", text, re.M):
        ts = datetime.datetime.fromisoformat(m.group(1)).timestamp()
        if m.group(3) == "taken":
            t[m.group(2)] = ts
        else:
            ev.append((t.pop(m.group(2)), ts))
    if "sending complete bundle" in text:  # a member that passes lap 2 on (not the producer, not the last)
        assert text.index("sending complete bundle") < text.index("stage 2: compute slot"), log
        # it queued with the complete bundle light (no dense d×d held in the queue), decoded once in its slot
        slot2 = text.index("stage 2: compute slot")
        assert text.find("decoded again from its", slot2) > 0, (log, "complete bundle kept decoded while queued")
        fwd += 1
assert fwd >= 2, ("members that passed lap 2 on", fwd)
ev.sort()
assert all(a[1] <= b[0] for a, b in zip(ev, ev[1:])), ("two nodes held the one slot", ev)
print("ring:", fwd, "members passed lap 2 on before their slot;", len(ev), "slot intervals, never two at once")
PY

# check NAME SLOTS: the slot intervals of every node of W/NAME, at most SLOTS at once
check() {
    python3 - "$W/$1" "$2" "$W/free" <<'PY' || fail "$1: compute slots not kept"
import datetime, glob, json, os, re, sys
d, slots, free = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pat = re.compile(r"^(\S+) INFO  \[(\S+)\] stage (\d+): compute slot (\d+) (?:of \d+ )?(taken|given back)")
ev, per = [], {}
for log in glob.glob(d + "/*/node.log"):
    node = os.path.basename(os.path.dirname(log))
    held = None
    for line in open(log, errors="replace"):
        m = pat.match(line)
        if not m:
            continue
        t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
        if m.group(5) == "taken":
            assert held is None, (node, "took a slot while holding one")
            assert int(m.group(4)) < slots, (node, "slot", m.group(4), "of", slots)
            held = t
        else:
            assert held is not None, (node, "gave back a slot it did not hold")
            ev.append((held, t, node))
            held = None
            per[node] = per.get(node, 0) + 1
    assert held is None, (node, "never gave its slot back")
nodes = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(d + "/*/node.log"))
assert sorted(per) == nodes and all(v == 1 for v in per.values()), ("one interval per node and stage", per)
# the most intervals open at one time (a give-back logged before the next take: touching ends do not overlap)
points = sorted([(a, 1) for a, _, _ in ev] + [(b, -1) for _, b, _ in ev], key=lambda p: (p[0], p[1]))
cur = most = 0
for _, s in points:
    cur += s
    most = max(most, cur)
assert most <= slots, ("intervals open at once", most, "slots", slots)
r = {n["id"]: n for n in json.load(open(d + "/results.json"))["nodes"]}
f = {n["id"]: n for n in json.load(open(free + "/results.json"))["nodes"]}
assert all(n["exit_code"] == 0 for n in r.values()), {k: n["exit_code"] for k, n in r.items()}
assert r["s"]["accuracy_global"] == f["s"]["accuracy_global"], (r["s"]["accuracy_global"], f["s"]["accuracy_global"])
print(os.path.basename(d), len(ev), "intervals, at most", most, "open at once; s", r["s"]["accuracy_global"],
      "as without slots")
PY
}
check one 1
check two 2
# with one slot and six clients ready together, somebody waited for it
grep -hq "taken after [0-9]*\.[0-9]*s" "$W"/one/*/node.log || fail "one: no node logged taking its slot"
python3 - "$W/one" <<'PY' || fail "one: no node waited for the slot (the case does not bind)"
import glob, re, sys
w = [float(m.group(1)) for p in glob.glob(sys.argv[1] + "/*/node.log") for m in
     re.finditer(r"compute slot \d+ of 1 taken after ([0-9.]+)s", open(p).read())]
assert max(w) > 0.05, w
print("one: waits", sorted(round(x, 2) for x in w))
PY

# refused
for bad in -1 4097; do
    "$PFTNET" launch "$W/star.dot" --out "$W/bad" --compute-slots $bad >"$W/bad.out" 2>&1
    rc=$?
    [ $rc = 2 ] || fail "--compute-slots $bad: exit $rc, want 2 ($(cat "$W/bad.out"))"
done
SLURM_JOB_ID=1 "$PFTNET" launch "$W/star.dot" --out "$W/badslurm" --engine slurm --compute-slots 2 >"$W/bad.out" 2>&1 &&
    fail "--compute-slots under --engine slurm was taken"
grep -q "compute-slots is for the local engine" "$W/bad.out" || fail "slurm refusal: $(cat "$W/bad.out")"
mkdir -p "$W/noslots"
"$PFT_BIN/pftnode" --topology "$W/one/topology.dot" --id c1 --out "$W/noslots/c1" \
    --node-file "$W/one/c1/node.conf" --compute-slots "$W/noslots" >"$W/noslots.out" 2>&1 &&
    fail "pftnode ran with a --compute-slots folder without slot files"
grep -q "compute slots: .*slot.0" "$W/noslots/c1/node.log" "$W/noslots.out" 2>/dev/null ||
    fail "pftnode without slot files: $(cat "$W/noslots.out" "$W/noslots/c1/node.log" 2>/dev/null | tail -3)"
[ $FAILED = 0 ] && echo "e2e_slots: all checks passed"
finish
