# lib_hosts.sh: "hosts" for tests of parties run apart (sourced after lib_e2e.sh): N network namespaces on one
# bridge (each host reaches the others, nothing else; no folder is shared by design of the callers), or, without
# root or iproute2, N loopback addresses 127.0.0.1..N on this machine. The caller sets HOSTS_TAG and WORK.
#   hosts_up ADDR...    one host per address (in namespaces: those addresses on a /24; else 127.0.0.i):
#                       sets HOST_ADDR[i] (the address host i's node binds) and HOSTS_MODE (netns or loopback)
#   on_host I CMD...    runs CMD on host I (inside its namespace, or as is)
#   hosts_down          removes the namespaces
HOST_NS=()
HOST_ADDR=()
HOSTS_MODE=loopback

hosts_down() {
    local ns
    for ns in "${HOST_NS[@]}" "${HOSTS_TAG}sw"; do
        ip netns del "$ns" 2>/dev/null
    done
    return 0
}

# hosts_netns ADDR...: the namespaces, a bridge in a switch namespace, one veth per host; 1 if not possible
hosts_netns() {
    [ "$EUID" = 0 ] && command -v ip >/dev/null 2>&1 || return 1
    local sw=${HOSTS_TAG}sw i=0 a
    ip netns add "$sw" 2>/dev/null || return 1
    ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || return 1
    for a in "$@"; do
        i=$((i + 1))
        local ns=${HOSTS_TAG}h$i
        ip netns add "$ns" || return 1
        HOST_NS[$i]=$ns
        ip link add h$i netns "$ns" type veth peer name p$i netns "$sw" &&
            ip -n "$sw" link set p$i master br0 && ip -n "$sw" link set p$i up &&
            ip -n "$ns" addr add "$a/24" dev h$i && ip -n "$ns" link set h$i up &&
            ip -n "$ns" link set lo up || return 1
        HOST_ADDR[$i]=$a
    done
    # links come up asynchronously: wait (bounded) until host 1 reaches every other
    if command -v ping >/dev/null 2>&1; then
        for i in $(seq 2 $#); do
            local t
            for t in $(seq 1 100); do
                ip netns exec "${HOST_NS[1]}" ping -c1 -W1 "${HOST_ADDR[$i]}" >/dev/null 2>&1 && break
                sleep 0.1
            done
        done
    fi
    return 0
}

hosts_up() {
    if hosts_netns "$@" 2>"$WORK/hosts.err"; then
        HOSTS_MODE=netns
        return 0
    fi
    hosts_down
    HOST_NS=()
    local i
    for i in $(seq 1 $#); do
        HOST_ADDR[$i]=127.0.0.$i
    done
    HOSTS_MODE=loopback
    echo "network namespaces not available ($(head -c 200 "$WORK/hosts.err")): loopback addresses instead" >&2
}

on_host() {
    local i=$1
    shift
    if [ "$HOSTS_MODE" = netns ]; then
        ip netns exec "${HOST_NS[$i]}" "$@"
    else
        "$@"
    fi
}
