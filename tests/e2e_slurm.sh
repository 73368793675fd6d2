#!/usr/bin/env bash
# e2e_slurm: `pftnet launch --engine slurm` on a real Slurm cluster of three hosts that the test starts and stops:
# each host a network namespace with one address of its own on a bridge (10.77.0.11-13, interface pft0, no
# other route) and a host name of its own (a UTS namespace: pfth1-3), running its slurmd (3 CPUs declared);
# munged, slurmctld and the launcher (salloc, sbatch) on a fourth namespace, the "login node" (10.77.0.1, the
# bridge), where the whole test runs (nothing is added to the machine's own network). Configuration, state and
# logs in a temporary folder; the filesystem is shared, as on a cluster. The peers bind their own ports on their
# host's address and read each other's endpoints from the run folder: the ring spans the three hosts. An 8-node ring (through salloc) and a 5-node chain (through sbatch --wait) on the bundled example
# data: every node's accuracies, row counts and bytes equal those of the local launch (--engine local) of the
# same topology and seed. Refused before any peer starts, each with its message: no allocation, an allocation
# with fewer tasks than nodes, a run folder the tasks cannot see (the launcher in a mount namespace of its own,
# where DIR is on a private tmpfs). A peer killed (SIGKILL) mid-run stops the run, naming it, and leaves no
# process behind. A run interrupted after its first hand-offs and started again with --resume (what a
# requeued batch job does) ends with the local run's accuracies. Needs root, munge and slurm-wlm (Debian's
# packages, .ci/install-deps installs them); exits 77 (skip) with the reason otherwise, and fails (exit 1) when,
# as root with the packages installed, the daemons do not start. Kills every daemon it
# started on exit, whatever happens.
# Env: PFT_BIN (folder with pftnet and pftnode), PFT_SOURCE_DIR; optional PFT_SLURM_KEEP=1 keeps the folder.
set -u
TAG=pfts$$
if [ -z "${PFT_SLURM_LOGIN_NS:-}" ]; then # the login node: this script again, inside its own namespace
    . "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh"
    [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, munged and slurmd run as root here)"
    for b in ip nsenter unshare; do command -v $b >/dev/null 2>&1 || skip "no $b (iproute2, util-linux)"; done
    ip netns add "${TAG}l" 2>"/tmp/$TAG.err" || skip "ip netns add not permitted: $(cat "/tmp/$TAG.err")"
    rm -f "/tmp/$TAG.err"
    PFT_SLURM_LOGIN_NS=${TAG}l nsenter --net="/run/netns/${TAG}l" bash "${BASH_SOURCE[0]}"
    rc=$?
    ip netns del "${TAG}l"
    exit $rc
fi

. "$(dirname "${BASH_SOURCE[0]}")/lib_e2e.sh" # FAILED, fail, skip, PFT_BIN, PFT_SOURCE_DIR

PFTNET=$(cd "$PFT_BIN" && pwd)/pftnet
DATA=$(cd "$PFT_SOURCE_DIR" && pwd)/examples/data/pacs-small
[ -x "$PFTNET" ] && [ -x "$PFT_BIN/pftnode" ] || skip "no pftnet/pftnode in $PFT_BIN"
[ -r "$DATA/train_x.npy" ] || skip "$DATA not found"
[ "$(id -u)" = 0 ] || skip "needs root (munged and slurmd run as root here)"
for b in munged slurmctld slurmd srun salloc sbatch scancel scontrol sinfo python3 timeout ip unshare; do
    command -v "$b" >/dev/null 2>&1 || skip "no $b: install munge and slurm-wlm (bash .ci/install-deps)"
done

W=$(mktemp -d /tmp/pft_slurm_XXXXXX)
chmod 700 "$W"
PIDS=()  # the daemons
LOCAL=() # the local launches while they run in the background (a launcher stops its nodes on SIGTERM)
cleanup() {
    local p i all=("${LOCAL[@]}" "${PIDS[@]}")
    for p in "${all[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for i in $(seq 1 50); do
        local alive=0
        for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "${all[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${all[@]}"; do wait "$p" 2>/dev/null; done
    for i in 1 2 3; do ip netns del "${TAG}h$i" 2>/dev/null; done
    if [ "$FAILED" = 0 ] && [ "${PFT_SLURM_KEEP:-0}" != 1 ]; then
        rm -rf "$W"
    else
        echo "outputs kept in $W" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the network: this namespace (the login node) holds the bridge, 10.77.0.1; host i a namespace with a veth
# pft0 on it, 10.77.0.1i, and no other route ----
HOSTS=(pfth1 pfth2 pfth3)
net() {
    ip link set lo up && ip link add pftbr type bridge && ip addr add 10.77.0.1/24 dev pftbr &&
        ip link set pftbr up || return 1
    local i
    for i in 1 2 3; do
        ip netns add "${TAG}h$i" && ip link add "pftv$i" type veth peer name pft0 netns "${TAG}h$i" &&
            ip link set "pftv$i" master pftbr && ip link set "pftv$i" up &&
            ip -n "${TAG}h$i" addr add "10.77.0.1$i/24" dev pft0 && ip -n "${TAG}h$i" link set pft0 up &&
            ip -n "${TAG}h$i" link set lo up || return 1
    done
}
net 2>"$W/net.err" || { fail "cannot make the hosts' namespaces and bridge: $(cat "$W/net.err")"; exit 1; }

# ---- topologies: small models so that each run takes seconds under the sanitizers ----
GMM="k = 3; cov = diag; prep = l2; max_iter = 20; em_draws = 2; head_draws = 1; samples = 60; seed = 5;"
GMM="$GMM deadline = 120; send_deadline = 60; dataset = \"$DATA\"; partition = iid;"
printf 'digraph ring8 {\n  start = a; %s\n  a -> b -> c -> d -> e -> f -> g -> h -> a;\n}\n' "$GMM" >"$W/ring8.dot"
printf 'digraph chain5 {\n  %s\n  a -> b -> c -> d -> e;\n}\n' "$GMM" >"$W/chain5.dot"
LAUNCH=(launch --no-baselines --log-level warn --timeout 240)
IFACE=(--iface pft0) # the hosts' names resolve nowhere: each task takes its host's address on pft0

# ---- the local launches the Slurm runs are compared with need no cluster (they run on this namespace's
# loopback, up since net): they run while the daemons start and the refusals below are checked ----
"$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/ring-local" >"$W/ring-local.out" 2>&1 &
LOCAL+=($!)
"$PFTNET" "${LAUNCH[@]}" "$W/chain5.dot" --out "$W/chain-local" >"$W/chain-local.out" 2>&1 &
LOCAL+=($!)

# ---- the cluster: munged, slurmctld on the login node, a slurmd in each host, all in the foreground of this
# script ----
mkdir -p "$W/munge" "$W/state" "$W/spool" "$W/log" && chmod 700 "$W/munge"
head -c 1024 /dev/urandom >"$W/munge/munge.key" && chmod 400 "$W/munge/munge.key"
munged --foreground --force --key-file="$W/munge/munge.key" --socket="$W/munge/sock" \
    --pid-file="$W/munge/pid" --log-file="$W/munge/log" --seed-file="$W/munge/seed" 2>"$W/log/munged.err" &
PIDS+=($!)
for i in $(seq 1 50); do [ -S "$W/munge/sock" ] && break; sleep 0.1; done
# root with the packages installed: a daemon that does not start is a failure, not a skip
[ -S "$W/munge/sock" ] || { fail "munged did not start: $(tail -3 "$W/log/munged.err" "$W/munge/log" 2>/dev/null)"; exit 1; }
CTLD_PORT=6817 SLURMD_PORT=6818 # every namespace is new: nothing else listens there
H=$(hostname -s)
export SLURM_CONF=$W/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=pfttest
SlurmctldHost=$H(10.77.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$W/munge/sock
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool/%n
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd-%n.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
# completed jobs are never purged: sbatch --wait then asks every 2 s whether its job ended (with MinJobAge's
# default, 300, it asks 2, 10, 42 s... after submitting, so a 16 s job returned at 42 s)
MinJobAge=0
NodeName=pfth1 NodeAddr=10.77.0.11 NodeHostname=pfth1 CPUs=3 State=UNKNOWN
NodeName=pfth2 NodeAddr=10.77.0.12 NodeHostname=pfth2 CPUs=3 State=UNKNOWN
NodeName=pfth3 NodeAddr=10.77.0.13 NodeHostname=pfth3 CPUs=3 State=UNKNOWN
PartitionName=pft Nodes=pfth[1-3] Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$W/log/slurmctld.out" 2>&1 &
PIDS+=($!)
for i in 1 2 3; do # its own network and host name: what its tasks see as their host
    mkdir -p "$W/spool/pfth$i"
    nsenter --net="/run/netns/${TAG}h$i" unshare --uts sh -c \
        "hostname pfth$i && exec slurmd -D -f '$SLURM_CONF' -N pfth$i" >"$W/log/slurmd-pfth$i.out" 2>&1 &
    PIDS+=($!)
done
up() { [ "$(sinfo -h -o %t 2>/dev/null | sort -u)" = idle ] && [ "$(sinfo -h -N -o %N 2>/dev/null | wc -l)" = 3 ]; }
for i in $(seq 1 150); do
    up && break
    sleep 0.2
done
up || {
    fail "the Slurm daemons did not start (node states '$(sinfo -h -N -o '%N %t' 2>&1 | tr '\n' ' ')'): $(tail -2 "$W"/log/slurm*.log 2>/dev/null)"
    exit 1
}
echo "cluster up: slurmctld on $H (10.77.0.1:$CTLD_PORT), slurmd on ${HOSTS[*]} (10.77.0.11-13), 3 CPUs each"

# same NAME LOCAL SLURM [FIELDS]: every node's results agree (accuracies, rows, bytes; or FIELDS), each Slurm
# node says its host
same() {
    python3 - "$2/results.json" "$3/results.json" "${4:-}" <<'PY' || fail "$1: the Slurm run differs from the local one"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
na, nb = ({n["id"]: n for n in r["nodes"]} for r in (a, b))
assert sorted(na) == sorted(nb), (sorted(na), sorted(nb))
fields = sys.argv[3].split() or ["accuracy_local", "accuracy_global", "n_real", "n_synthetic", "bytes_sent", "bytes_received"]
for i in na:
    for k in fields:
        assert na[i].get(k) == nb[i].get(k), (i, k, na[i].get(k), nb[i].get(k))
    assert na[i].get("accuracy_global") is not None, i
    assert nb[i].get("host") and "host" not in na[i], (i, nb[i].get("host"))
print("  %d nodes identical, e.g. %s: %.4f / %.4f" % (len(na), i, nb[i]["accuracy_local"], nb[i]["accuracy_global"]))
PY
}

# ---- refused before any peer starts ----
# expect NAME RC PATTERN OUTFILE CODE DIR: exit code RC is CODE, OUTFILE has the message, no node of DIR started
expect() {
    if [ "$2" != "$5" ]; then fail "$1: exit $2, expected $5 ($(tail -3 "$4"))"; fi
    grep -q -- "$3" "$4" || fail "$1: no '$3' in: $(cat "$4")"
    ! ls "$6"/*/node.log >/dev/null 2>&1 || fail "$1: a node was started"
    echo "$1: refused ($(grep -o -- "$3.\{0,60\}" "$4" | head -1)...)"
}
env -u SLURM_JOB_ID "$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/none" --engine slurm >"$W/none.out" 2>&1
expect "no allocation" $? "no SLURM_JOB_ID" "$W/none.out" 2 "$W/none"
timeout 120 salloc -n 4 "$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/few" --engine slurm >"$W/few.out" 2>&1
expect "4 tasks for 8 nodes" $? "has 4 tasks" "$W/few.out" 2 "$W/few"
mkdir -p "$W/private"
if unshare -m true 2>/dev/null; then
    timeout 120 salloc -n 8 unshare -m sh -c "mount -t tmpfs pft '$W/private' &&
        '$PFTNET' ${LAUNCH[*]} '$W/ring8.dot' --out '$W/private/run' --engine slurm ${IFACE[*]}" >"$W/private.out" 2>&1
    expect "DIR not shared" $? "cannot write its marker" "$W/private.out" 2 "$W/private/run"
    # pftnet not on the tasks' host: the launcher runs a copy on a tmpfs only its own mount namespace sees
    mkdir -p "$W/privbin"
    timeout 120 salloc -n 8 unshare -m sh -c "mount -t tmpfs pft '$W/privbin' && cp '$PFTNET' '$W/privbin/pftnet' &&
        PFTNODE='$PFT_BIN/pftnode' '$W/privbin/pftnet' ${LAUNCH[*]} '$W/ring8.dot' --out '$W/nonet' --engine slurm ${IFACE[*]}" \
        >"$W/nonet.out" 2>&1
    expect "pftnet not on a host" $? "it must be at that path on every host" "$W/nonet.out" 2 "$W/nonet"
else
    skip_part "unshare -m not permitted: 'DIR not shared' and 'pftnet not on a host' not checked"
fi
# pftnode not on the tasks' host
timeout 120 salloc -n 8 env PFTNODE="$W/no/such/pftnode" "$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/nonode" \
    --engine slurm "${IFACE[@]}" >"$W/nonode.out" 2>&1
expect "pftnode not on a host" $? "cannot run pftnode" "$W/nonode.out" 2 "$W/nonode"
# explicit endpoints: one off the allocation, one naming its host by name
sed 's|^  a -> b|  a [endpoint = "tcp://10.255.255.9:5000"];\n  a -> b|' "$W/ring8.dot" >"$W/offalloc.dot"
timeout 120 salloc -n 8 "$PFTNET" "${LAUNCH[@]}" "$W/offalloc.dot" --out "$W/offalloc" --engine slurm "${IFACE[@]}" \
    >"$W/offalloc.out" 2>&1
expect "endpoint off the allocation" $? "names a host with no free task in job" "$W/offalloc.out" 2 "$W/offalloc"
sed "s|^  a -> b|  a [endpoint = \"tcp://pfth1:5000\"];\\n  a -> b|" "$W/ring8.dot" >"$W/byname.dot"
timeout 120 salloc -n 8 "$PFTNET" "${LAUNCH[@]}" "$W/byname.dot" --out "$W/byname" --engine slurm "${IFACE[@]}" \
    >"$W/byname.out" 2>&1
expect "endpoint named by host name" $? "names its host by name" "$W/byname.out" 2 "$W/byname"
sed 's|^  a -> b|  a [endpoint = "tcp://127.0.0.1:5000"];\n  a -> b|' "$W/ring8.dot" >"$W/loop.dot"
timeout 120 salloc -n 8 "$PFTNET" "${LAUNCH[@]}" "$W/loop.dot" --out "$W/loop" --engine slurm "${IFACE[@]}" \
    >"$W/loop.out" 2>&1
expect "loopback endpoint on 3 hosts" $? "can only be reached on its own host, and job [0-9]* spans 3 hosts" "$W/loop.out" 2 "$W/loop"

# ---- the ring through salloc, the chain through sbatch, each against its local launch (ended first, so that
# its nodes and the Slurm ones never share the cores) ----
wait "${LOCAL[0]}" || fail "local ring exited $? ($(tail -3 "$W/ring-local.out"))"
wait "${LOCAL[1]}" || fail "local chain exited $? ($(tail -3 "$W/chain-local.out"))"
LOCAL=()
t0=$(date +%s)
timeout 300 salloc -n 8 "$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/ring-slurm" --engine slurm "${IFACE[@]}" \
    >"$W/ring-slurm.out" 2>&1 || fail "slurm ring exited $? ($(tail -5 "$W/ring-slurm.out"))"
echo "ring8 through salloc -n 8: $(($(date +%s) - t0)) s"
grep -q "pftnode processes with one srun step in job" "$W/ring-slurm.out" || fail "slurm ring: no srun step announced"
same ring8 "$W/ring-local" "$W/ring-slurm"
# the ring spans the three hosts: each node on its host's address, at the port it bound and reported
python3 - "$W/ring-slurm" <<'PY' || fail "ring8: not spread over the hosts as expected"
import json, re, sys
d = sys.argv[1]
addr = {"pfth1": "10.77.0.11", "pfth2": "10.77.0.12", "pfth3": "10.77.0.13"}
nodes = json.load(open(d + "/results.json"))["nodes"]
hosts = {}
for n in nodes:
    ep = open("%s/%s/endpoint" % (d, n["id"])).read().strip()
    r = json.load(open("%s/%s/result.json" % (d, n["id"])))
    m = re.fullmatch(r"tcp://([0-9.]+):(\d+)", ep)
    assert m and m.group(1) == addr[n["host"]] and int(m.group(2)) > 0, (n["id"], n["host"], ep)
    assert r["endpoint"] == ep, (n["id"], r["endpoint"], ep)
    hosts.setdefault(n["host"], []).append(n["id"])
assert len(hosts) == 3, hosts
print("  ring8 over %s" % ", ".join("%s (%s): %s" % (h, addr[h], " ".join(sorted(v))) for h, v in sorted(hosts.items())))
PY
grep -q 'endpoint *= *"tcp://10.77.0.1[123]:0"' "$W/ring-slurm/topology.dot" ||
    fail "ring8: the launcher did not give open ports on the hosts' addresses: $(grep endpoint "$W/ring-slurm/topology.dot" | head -3)"

t0=$(date +%s)
timeout 300 sbatch --wait -n 6 -o "$W/chain-slurm.out" \
    --wrap "'$PFTNET' ${LAUNCH[*]} '$W/chain5.dot' --out '$W/chain-slurm' --engine slurm ${IFACE[*]}" >/dev/null ||
    fail "slurm chain (sbatch) exited $? ($(tail -5 "$W/chain-slurm.out"))"
echo "chain5 through sbatch --wait -n 6: $(($(date +%s) - t0)) s"
same chain5 "$W/chain-local" "$W/chain-slurm"

# ---- a peer killed mid-run stops the run, named ----
timeout 300 salloc -n 8 "$PFTNET" "${LAUNCH[@]}" "$W/ring8.dot" --out "$W/kill" --engine slurm "${IFACE[@]}" \
    >"$W/kill.out" 2>&1 &
KILL_JOB=$!
pid=
for i in $(seq 1 600); do
    pid=$(pgrep -f -- "--id d --out $W/kill/d( |$)" | head -1)
    [ -n "$pid" ] && grep -qs . "$W/kill/d/status" && break
    pid=
    sleep 0.1
done
if [ -z "$pid" ]; then
    fail "killed peer: node d never started ($(tail -3 "$W/kill.out"))"
else
    kill -KILL "$pid"
    t0=$(date +%s)
    wait "$KILL_JOB"
    rc=$?
    [ "$rc" = 1 ] || fail "killed peer: exit $rc, expected 1"
    grep -q "node d was killed by signal 9" "$W/kill.out" || fail "killed peer: not named ($(tail -5 "$W/kill.out"))"
    grep -q "stopped by the launcher" "$W/kill.out" || fail "killed peer: the others were not stopped"
    echo "killed peer d: the run stopped $(($(date +%s) - t0)) s later, exit 1, node d named"
fi
! pgrep -f -- "--out $W/kill/" >/dev/null || fail "killed peer: pftnode processes of the run remain"

# ---- interrupted (as by a requeue) after the first hand-offs, then --resume: the local run's accuracies ----
timeout 300 salloc -n 5 "$PFTNET" "${LAUNCH[@]}" "$W/chain5.dot" --out "$W/resume" --engine slurm "${IFACE[@]}" \
    >"$W/resume1.out" 2>&1 &
RESUME_JOB=$!
for i in $(seq 1 600); do
    grep -qs "^done" "$W/resume/b/status" && break
    sleep 0.1
done
pid=$(pgrep -f -- "^$PFTNET launch .*--out $W/resume " | head -1)
if [ -z "$pid" ] || ! grep -qs "^done" "$W/resume/b/status"; then
    fail "resume: node b never finished or the launcher is gone ($(tail -3 "$W/resume1.out"))"
else
    kill -INT "$pid"
    wait "$RESUME_JOB"
    grep -q "stopped (interrupted)" "$W/resume1.out" || fail "resume: the interrupt was not reported"
    t0=$(date +%s)
    timeout 300 salloc -n 5 "$PFTNET" "${LAUNCH[@]}" "$W/chain5.dot" --out "$W/resume" --engine slurm \
        "${IFACE[@]}" --resume >"$W/resume2.out" 2>&1 || fail "resume: exited $? ($(tail -5 "$W/resume2.out"))"
    echo "chain5 interrupted once node b was done, then --resume: $(($(date +%s) - t0)) s"
    same "chain5 resumed" "$W/chain-local" "$W/resume" "accuracy_local accuracy_global n_real n_synthetic"
fi

[ "$FAILED" = 0 ] && [ "$SKIPPED" = 0 ] && echo "e2e_slurm: all checks passed"
finish
