#!/usr/bin/env bash
# e2e_floor: the privacy floor (min_rows) in real nodes. A GMM chain a -> b -> c on the bundled example data
# with so few rows per node (samples = 30, about 4 per class) that the floor binds: every component of every
# bundle, decoded, stands for >= min_rows rows (count x weight, fp16 rounding allowed); a class with fewer rows
# is withheld from the bundle, reported in result.json (withheld_classes) and absent from its provenance;
# min_released_rows agrees with the decoded bundle. min_rows = 1 restores one-row components. An exact-statistics
# pair (cov = tied): own classes below the floor are withheld from the released part and its provenance, and
# the part's counts match the provenance; a class with fewer own rows than the floor that merges with a received
# part standing for enough rows is released (tiedmerge). pftnet check's forecast of the floor (warning
# floor-withholds) counts the rows the nodes then withhold. The audit only decodes here (--fail-on never: these bundles FAIL its
# attacks). Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$PFT_BIN/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
for p in pftnet pftnode; do
    if [ ! -x "$PFT_BIN/$p" ]; then
        echo "skipped: no $p in $PFT_BIN"
        exit 77
    fi
done
if ! command -v python3 >/dev/null; then
    echo "skipped: no python3"
    exit 77
fi
W=$(mktemp -d /tmp/pft_floor_XXXXXX)
trap 'rm -rf "$W"' EXIT

# launch NAME SETTINGS EDGES: writes W/NAME.dot and runs it into W/NAME
launch() {
    printf 'digraph %s {\n  dataset = "%s"; partition = iid; samples = 30; deadline = 120;\n  %s\n  %s\n}\n' \
        "$1" "$DATA" "$2" "$3" >"$W/$1.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/$1.dot" --out "$W/$1" --no-baselines --quiet \
        >"$W/$1.stdout" 2>"$W/$1.stderr" || fail "launch $1 exited $? ($(cat "$W/$1.stderr"))"
}
GMM="cov = diag; k = 10; max_iter = 20; em_draws = 2; head_draws = 1;"
launch floor5 "$GMM min_rows = 5;" "a -> b -> c;"
launch floor1 "$GMM min_rows = 1;" "a -> b -> c;"
launch tied5 "cov = tied; min_rows = 5;" "a -> b;"
# a holds many rows: b's classes with fewer than 5 own rows merge with a's part, so they are released
launch tiedmerge "cov = tied; min_rows = 5;" "a [samples = 300]; a -> b;"

# b's 4 rows of classes 0-2 (file order: b first), a's and c's of the others: the floor withholds every class of
# b, which then releases none of its rows: its bundle carries a's part without naming b, and the run completes
# (before, b's encoder refused a part naming b with no provenance entry of b: exit 8); in a ring too, where b's
# head takes its own rows in lap 2 (the complete bundle does not count them)
for kind in chain ring; do
    edges="a -> b -> c;"
    [ $kind = ring ] && edges="a -> b -> c -> a; start = a;"
    printf 'digraph all%s {\n  dataset = "%s"; partition = "labels:0-2|3-6|3-6"; deadline = 120;\n  cov = tied; min_rows = 5; b [samples = 4]; c [samples = 60];\n  %s\n}\n' \
        $kind "$DATA" "$edges" >"$W/all$kind.dot"
    PFTNODE=$PFT_BIN/pftnode "$PFTNET" launch "$W/all$kind.dot" --out "$W/all$kind" --no-baselines --quiet \
        >"$W/all$kind.stdout" 2>"$W/all$kind.stderr" || fail "launch all$kind exited $? ($(cat "$W/all$kind.stderr"))"
    "$PFTNET" inspect "$W/all$kind/b/bundle.pftb" --json >"$W/all$kind/b/inspect.json" ||
        fail "all$kind: inspect b's bundle exited $?"
    python3 - "$W/all$kind" $kind <<'PY' || fail "all$kind: b withholds every class"
import json, sys
d, kind = sys.argv[1], sys.argv[2]
r = {n: json.load(open("%s/%s/result.json" % (d, n))) for n in "abc"}
assert all(x["exit_code"] == 0 for x in r.values()), {n: x["exit_code"] for n, x in r.items()}
own = r["b"]["withheld_classes"]
assert own and sum(w["rows"] for w in own) == 4, own  # every row of b withheld
i = json.load(open(d + "/b/inspect.json"))
assert all(p["node"] != "b" for p in i["provenance"]), i["provenance"]
assert all("b" not in part["contributors"] for part in i["parts"]), [p["contributors"] for p in i["parts"]]
held = sum(e["n"] for part in i["parts"] for e in part["classes"])
assert held == sum(e["n"] for p in i["provenance"] for e in p["counts"]) == r["a"]["n_real"], held
if kind == "ring":  # b's head: everyone's rows once, its own from its data
    rows = r["b"]["gaussian_head"]["rows"]
    assert rows == sum(x["n_real"] for x in r.values()), (rows, [x["n_real"] for x in r.values()])
print("all%s: b withheld" % kind, own, "and named in no part; every node exit 0")
PY
done

# check DIR NODE MIN: the decoded bundle of NODE against its result.json
check() {
    local dir=$W/$1/$2
    "$PFTNET" audit "$dir/bundle.pftb" --features "$dir/data/train_x.npy" --labels "$dir/data/train_y.npy" \
        --json --fail-on never --lp 1 >"$dir/audit.json" 2>"$dir/audit.err" ||
        fail "$1/$2: audit exited $? ($(cat "$dir/audit.err"))"
    "$PFTNET" inspect "$dir/bundle.pftb" --json >"$dir/inspect.json" || fail "$1/$2: inspect exited $?"
    python3 - "$dir" "$2" "$3" <<'PY' || fail "$1/$2: floor check failed"
import json, sys
d, me, m = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = json.load(open(d + "/audit.json"))
i = json.load(open(d + "/inspect.json"))
r = json.load(open(d + "/result.json"))
assert r["exit_code"] == 0 and r["min_rows"] == m, (r["exit_code"], r["min_rows"])
comps = [(c["label"], x["rows"]) for c in a["classes"] for x in c["components"]]
assert comps, "no component"
low = [(l, x) for l, x in comps if x < m * (1 - 2.0 ** -10)]
assert not low, "components below the floor: %s" % low
# min_released_rows: per class the smallest count x weight (fp16 weights: 0.1 %)
mr = r["min_released_rows"]
for c in a["classes"]:
    got = min(x["rows"] for x in c["components"])
    want = mr[str(c["label"])]
    assert abs(got - want) <= 1e-3 * want + 1e-9, (c["label"], got, want)
released = {c["label"] for c in a["classes"]}
assert set(int(k) for k in mr) == released, (mr, released)
withheld = {w["class"] for w in r["withheld_classes"]}
for w in r["withheld_classes"]:
    assert w["rows"] < m, w
assert not (withheld & released), (withheld, released)
# provenance names only released classes, and its counts are what the classes / parts stand for
prov = {}
for p in i["provenance"]:
    for e in p["counts"]:
        assert e["label"] in released, ("provenance counts class", e["label"], "which is not released")
        prov[e["label"]] = prov.get(e["label"], 0) + e["n"]
if i["family"] == "gmm":
    held = {c["label"]: c["n"] for c in i["classes"]}
else:
    held = {}
    for part in i["parts"]:
        for e in part["classes"]:
            held[e["label"]] = held.get(e["label"], 0) + e["n"]
assert held == prov, ("released counts", held, "provenance", prov)
print(me, "components", len(comps), "smallest %.2f" % min(x for _, x in comps), "withheld", sorted(withheld))
PY
}
# recompute DIR NODE MIN: withheld classes and their rows recomputed, not read from result.json: per class the
# node's own rows (its label file, read here without numpy) plus, for a GMM node, the rows its inbox's bundle
# stands for (decoded provenance), for an exact-statistics node in a chain the rows of the received parts (they
# travel merged with its own); a class with 0 < rows < MIN must be withheld (and absent from the bundle), one
# with rows >= MIN released; result.json's withheld_classes must say exactly that
recompute() {
    local dir=$W/$1/$2 f i=0
    mkdir -p "$dir/inbox-json"
    for f in "$dir"/inbox/*.pftb; do
        [ -e "$f" ] || continue
        i=$((i + 1))
        "$PFTNET" inspect "$f" --json >"$dir/inbox-json/$i.json" || fail "$1/$2: inspect $f exited $?"
    done
    python3 - "$dir" "$3" <<'PY' || fail "$1/$2: withheld classes differ from the recomputation"
import ast, glob, json, struct, sys
d, m = sys.argv[1], int(sys.argv[2])
raw = open(d + "/data/train_y.npy", "rb").read()
assert raw[:6] == b"\x93NUMPY", "not a .npy file"
hl, off = (int.from_bytes(raw[8:10], "little"), 10) if raw[6] == 1 else (int.from_bytes(raw[8:12], "little"), 12)
h = ast.literal_eval(raw[off:off + hl].decode("latin1"))
size = int(h["descr"][2:])
n = h["shape"][0]
labels = struct.unpack("<%d%s" % (n, {4: "i", 8: "q"}[size]), raw[off + hl:off + hl + n * size])
rows = {}
for y in labels:
    rows[y] = rows.get(y, 0) + 1
i = json.load(open(d + "/inspect.json"))
if i["family"] == "gmm":  # own rows and received samples together
    for path in glob.glob(d + "/inbox-json/*.json"):
        for p in json.load(open(path))["provenance"]:
            for e in p["counts"]:
                rows[e["label"]] = rows.get(e["label"], 0) + e["n"]
    released = {c["label"] for c in i["classes"]}
    want = {c: k for c, k in rows.items() if 0 < k < m}
    want_released = {c for c, k in rows.items() if k >= m}
else:  # exact statistics: the classes the node's own provenance entry releases; a class stands for its own
    # rows plus those of the received parts that travel merged with them (in a chain, every received part: one
    # group), and a withheld class is reported with its own rows
    me = json.load(open(d + "/result.json"))["id"]
    released = {e["label"] for p in i["provenance"] if p["node"] == me for e in p["counts"]}
    merged = {}
    for path in glob.glob(d + "/inbox-json/*.json"):
        for part in json.load(open(path))["parts"]:
            for e in part["classes"]:
                merged[e["label"]] = merged.get(e["label"], 0) + e["n"]
    want = {c: k for c, k in rows.items() if 0 < k and k + merged.get(c, 0) < m}
    want_released = {c for c, k in rows.items() if k > 0 and k + merged.get(c, 0) >= m}
    lifted = sorted(c for c in want_released if rows[c] < m)
    if lifted:
        print(d.split("/")[-1], "classes released with fewer than", m, "own rows, thanks to merged rows:", lifted)
r = json.load(open(d + "/result.json"))
got = {w["class"]: w["rows"] for w in r["withheld_classes"]}
assert got == want, ("withheld", got, "recomputed", want)
assert released == want_released, ("released", released, "recomputed", want_released, rows)
print(d.split("/")[-1], "rows per class", dict(sorted(rows.items())), "withheld", sorted(want))
PY
}
for n in a b c; do
    check floor5 $n 5
    recompute floor5 $n 5
done
check tied5 a 5
check tied5 b 5
recompute tied5 a 5
recompute tied5 b 5
check tiedmerge b 5
recompute tiedmerge b 5 >"$W/tiedmerge/b/recompute.out"
cat "$W/tiedmerge/b/recompute.out"
grep -q "thanks to merged rows" "$W/tiedmerge/b/recompute.out" ||
    fail "tiedmerge: no class of b was released on merged rows (the case does not bind)"
# an exact sink's head (tied5, tiedmerge: a -> b): the rows a released and every own row of b, withheld classes
# included (b's released rows go straight into the received part's sum; its head adds the withheld ones)
for run in tied5 tiedmerge; do
    python3 - "$W/$run" $run <<'PY' || fail "$run: b's head does not hold a's released rows and all of b's"
import json, sys
d, run = sys.argv[1], sys.argv[2]
r = {n: json.load(open("%s/%s/result.json" % (d, n))) for n in "ab"}
a_rel = r["a"]["n_real"] - sum(w["rows"] for w in r["a"]["withheld_classes"])
held = r["b"]["gaussian_head"]["rows"]
assert held == a_rel + r["b"]["n_real"], (held, a_rel, r["b"]["n_real"])
assert run != "tied5" or r["b"]["withheld_classes"], "tied5: b withholds nothing (the case does not bind)"
print(run, "b's head rows", held, "= a's released", a_rel, "+ b's own", r["b"]["n_real"])
PY
done
# the floor binds here: something was withheld or merged, and at min_rows = 1 components stand for one row
python3 - "$W" <<'PY' || fail "floor5 did not bind / floor1 has no one-row component"
import json, sys
W = sys.argv[1]
w = sum(len(json.load(open(f"{W}/floor5/{n}/result.json"))["withheld_classes"]) for n in "abc")
assert w > 0, "no class withheld at samples = 30"
one = json.load(open(f"{W}/floor1/a/result.json"))
assert one["withheld_classes"] == [] and min(one["min_released_rows"].values()) < 1.5, one["min_released_rows"]
t = json.load(open(f"{W}/tied5/a/result.json"))
assert t["withheld_classes"], "tied: nothing withheld at samples = 30"
PY
# the forecast (pftnet check's and the launcher's warning floor-withholds, from the partition's rows per class)
# says the rows the nodes then withheld: where it warns, its count is the sum over the nodes' withheld_classes
# (and the launch printed it too); where it is silent, they withheld under a tenth of the rows
for run in floor5 floor1 tied5 tiedmerge allchain allring; do
    "$PFTNET" check "$W/$run.dot" --json >"$W/$run.check.json" 2>/dev/null || fail "check $run exited $?"
    python3 - "$W" $run <<'PY' || fail "$run: the floor's forecast differs from what the nodes withheld"
import glob, json, re, sys
W, run = sys.argv[1], sys.argv[2]
warn = [w["text"] for w in json.load(open(f"{W}/{run}.check.json"))["warnings"] if w["rule"] == "floor-withholds"]
res = [json.load(open(f)) for f in glob.glob(f"{W}/{run}/*/result.json")]
held = sum(w["rows"] for r in res for w in r["withheld_classes"])
total = sum(r["n_real"] for r in res)
launch = open(f"{W}/{run}.stderr").read()
if warn:
    m = re.search(r"keeps (\d+) of the (\d+) training rows", warn[0])
    assert m and (int(m.group(1)), int(m.group(2))) == (held, total), (warn[0], held, total)
    assert "warning floor-withholds: " in launch and m.group(0) in launch, "the launch did not warn"
else:
    assert held * 10 < total and "floor-withholds" not in launch, (held, total)
print(run, "forecast", "warned" if warn else "silent", "withheld", held, "of", total)
PY
done
grep -q "withheld from the bundle" "$W/floor5/a/node.log" "$W/floor5/b/node.log" "$W/floor5/c/node.log" ||
    fail "no log line names a withheld class"
[ $FAILED = 0 ] && echo "e2e_floor: all checks passed"
exit $FAILED
