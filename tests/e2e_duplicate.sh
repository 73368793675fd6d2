#!/usr/bin/env bash
# e2e_duplicate: one pftnode per output folder. A chain a -> b, prepared with --prepare-only and
# run by hand: once b has finished and lingers, b's command is started again with the same --out. The second
# instance must exit 13 (the folder's lock is held) without writing anything there: b's result.json, status
# and every other file stay byte for byte as they were, and the first b still ends with exit 0. The same
# holds once b/lock (the pid file) is deleted: the lock is held on the folder itself. After the
# first b is gone the lock is free again: a third start of b (a restart) may take the folder.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
W=$(mktemp -d /tmp/pft_dup_XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT
printf 'digraph dup {\n  dataset = "%s"; partition = iid; samples = 30; k = 1; cov = diag; deadline = 120;\n  a -> b;\n}\n' \
    "$DATA" >"$W/dup.dot"
"$PFT_BIN/pftnet" launch "$W/dup.dot" --out "$W/run" --prepare-only >"$W/prep.out" 2>&1 ||
    { fail "prepare-only exited $?: $(cat "$W/prep.out")"; exit 1; }
cmd_a=$(grep -- "--id a " "$W/prep.out")
cmd_b=$(grep -- "--id b " "$W/prep.out")
[ -n "$cmd_a" ] && [ -n "$cmd_b" ] || { fail "no pftnode commands in: $(cat "$W/prep.out")"; exit 1; }

$cmd_b --linger-ms 60000 >"$W/b1.log" 2>&1 &
b1=$!
pids+=("$b1")
$cmd_a >"$W/a.log" 2>&1 || fail "a exited $?"
# wait (events, not time) until b1 wrote its final status
for _ in $(seq 1 1200); do
    grep -q '^done' "$W/run/b/status" 2>/dev/null && break
    kill -0 "$b1" 2>/dev/null || break
    sleep 0.1
done
grep -q '^done' "$W/run/b/status" || { fail "b never reached done: $(cat "$W/run/b/status" 2>&1)"; exit 1; }
kill -0 "$b1" 2>/dev/null || { fail "b1 is not lingering (the test needs it up)"; exit 1; }

snapshot() { (cd "$W/run/b" && find . -type f ! -name node.log -print0 | sort -z | xargs -0 sha256sum); }
snapshot >"$W/before.sha"
$cmd_b >"$W/b2.log" 2>&1
rc=$?
[ "$rc" -eq 13 ] || fail "second instance exited $rc, expected 13 (lock held): $(tail -3 "$W/b2.log")"
grep -q "held by another pftnode (pid $b1)" "$W/b2.log" || fail "second instance's log does not name the holder: $(cat "$W/b2.log")"
snapshot >"$W/after.sha"
diff "$W/before.sha" "$W/after.sha" >"$W/sha.diff" || fail "the second instance changed b's folder: $(cat "$W/sha.diff")"
# the lock is the folder's, not the file's: with out/lock deleted, a duplicate is still refused and writes nothing
rm -f "$W/run/b/lock"
snapshot >"$W/before2.sha"
$cmd_b >"$W/b2b.log" 2>&1
rc=$?
[ "$rc" -eq 13 ] || fail "with b/lock deleted, a second instance exited $rc, expected 13: $(tail -3 "$W/b2b.log")"
snapshot >"$W/after2.sha"
diff "$W/before2.sha" "$W/after2.sha" >"$W/sha2.diff" || fail "with b/lock deleted, the second instance changed b's folder: $(cat "$W/sha2.diff")"
python3 - "$W/run/b/result.json" <<'PY' || fail "b's result.json is not the finished one"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exit_code"] == 0 and r["status"] == "ok" and r["accuracy_global"] is not None, r.get("status")
PY
kill -TERM "$b1"
wait "$b1"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 10 ] || fail "first b exited $rc after SIGTERM while lingering"
# the lock is free once its holder is gone: a restart of b takes the folder and ends its run
$cmd_b --linger-ms 0 >"$W/b3.log" 2>&1 &
b3=$!
pids+=("$b3")
wait "$b3"
rc=$?
[ "$rc" -ne 13 ] || fail "a restart after the holder ended still found the lock held"
[ "$FAILED" -eq 0 ] && echo "e2e_duplicate: ok"
exit "$FAILED"
