/* pft_launch_local: the local engine of `pftnet launch` (the default): every node a child process of the
 * launcher on this machine, listening on a loopback port it binds itself (or a fixed one the launcher holds
 * for it until it starts). */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_port.h"
#include "pft_slots.h"
#include "pft_topo_attr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* One held socket per node with a fixed port until it starts: raises the soft open-files limit where that
 * needs it. */
static int local_setup(pft_launch_t *self)
{
    size_t nn = self->nn;
    struct rlimit fl;
    if (getrlimit(RLIMIT_NOFILE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && fl.rlim_cur < nn + 256) {
        fl.rlim_cur = fl.rlim_max == RLIM_INFINITY || fl.rlim_max > nn + 256 ? nn + 256 : fl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &fl);
    }
    return 0;
}

/* Every node without an endpoint gets tcp://127.0.0.1:PORT with PORT port_base + its index when the run sets
 * port_base, else 0: the node binds a free port itself and reports it in <its folder>/endpoint, where its
 * predecessors read it (no port is probed here and released for the node to bind: nothing can take it in
 * between). */
static int local_endpoints(pft_launch_t *self)
{
    int port_base = pft_topo_run(self->topo)->port_base, rc = 0;
    for (size_t i = 0; i < self->nn && rc == 0; i++) {
        const pft_topo_node_t *n = pft_topo_node(self->topo, i);
        if (n->endpoint)
            continue;
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port_base ? port_base + (int)i : 0);
        char id[128];
        snprintf(id, sizeof id, "%s", n->id);
        rc = pft_topo_set_node_attr(self->topo, id, "endpoint", ep);
    }
    return rc;
}

/* Holds each fixed loopback port of a node about to start (bound and listening, for spawn to hand over): a
 * port that cannot be bound would fail its node only once the others wait for it, so the run is refused now,
 * naming the node and the port. Nodes not started here (--absent) get none, nor open ports (port 0: the node
 * binds one itself). */
static int local_reserve(pft_launch_t *self)
{
    for (size_t i = 0; i < self->nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(self->topo, i);
        pft_launch_child_t *c = &self->ch[i];
        int port;
        if (c->absent)
            pft_launch__close_port(c);
        if (c->absent || c->listen_fd >= 0 || !n->endpoint ||
            sscanf(n->endpoint, "tcp://127.0.0.1:%d", &port) != 1 || pft_topo_endpoint_open(n->endpoint))
            continue;
        if (pft_port_probe(port, &c->listen_fd) == 0)
            continue;
        int err = errno;
        pft_launch__close_port(c);
        return pft_err(
            PFT_ENET,
            "node %s: %s cannot be bound on this machine (%s); free the port or move the node (--set "
            "port_base=N moves automatic endpoints; unset or 0, each node binds a free port itself)",
            n->id, n->endpoint, strerror(err));
    }
    return 0;
}

/* Starts c's pftnode in its own process group, its output appended to c->dir/node.log, handing it c's held
 * port. Returns its pid, or -1. */
static pid_t spawn(const pft_launch_t *self, pft_launch_child_t *c)
{
    char *log = pft_fsio_join(c->dir, "node.log");
    if (!log)
        return -1;
    pid_t launcher = getpid(), pid = fork();
    if (pid == 0) {
        pft_launch__die_with_parent(launcher); /* no node outlives its launcher, even one killed by SIGKILL */
        setpgid(0, 0);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        const char *argv[20];
        char fd_text[16];
        pft_launch__node_argv(self, c, argv, fd_text, sizeof fd_text);
        execvp(self->node_bin, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", self->node_bin, strerror(errno));
        _exit(127);
    }
    pft_free(log);
    pft_launch__close_port(c); /* the node has it now */
    return pid;
}

/* BLAS threads per node: the cores shared out over the nodes that run at once (at least 1), unless the user
 * set OPENBLAS_NUM_THREADS. OpenBLAS's idle threads spin: a simulation with more nodes than cores and the
 * default one thread per core per node ran a 64-node chain several times slower. Returns the value set in the
 * environment the nodes inherit (0: the user's). */
static int blas_threads(const pft_launch_t *self)
{
    if (getenv("OPENBLAS_NUM_THREADS"))
        return 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nodes = self->nn ? self->nn : 1;
    int t = cores > (long)nodes ? (int)(cores / (long)nodes) : 1;
    char v[16];
    snprintf(v, sizeof v, "%d", t);
    setenv("OPENBLAS_NUM_THREADS", v, 1);
    return t;
}

/* One process per node not absent, in the order asked, each told its BLAS threads; a line on stderr. */
static int local_start(pft_launch_t *self)
{
    if (self->o.compute_slots > 0) { /* the lock files the nodes take turns on (pft_slots.h) */
        snprintf(self->slots_dir, sizeof self->slots_dir, "%s/slots", self->out_abs);
        int rc = pft_slots_create(self->slots_dir, self->o.compute_slots);
        if (rc)
            return rc;
    }
    self->t0 = pft_fsio_now();
    int reverse = self->o.order && strcmp(self->o.order, "reverse") == 0;
    int threads = blas_threads(self);
    for (size_t k = 0; k < self->nn; k++) {
        pft_launch_child_t *c = &self->ch[reverse ? self->nn - 1 - k : k];
        if (c->absent) {
            c->exited = 1;
            snprintf(c->state, sizeof c->state, "absent");
            continue;
        }
        c->pid = spawn(self, c);
        snprintf(c->state, sizeof c->state, "started");
        if (c->pid < 0)
            c->exited = 1, c->status = 127 << 8;
    }
    if (threads)
        unsetenv("OPENBLAS_NUM_THREADS"); /* the launcher's own baselines keep its default */
    if (!self->o.quiet) {
        char blas[64];
        if (threads)
            snprintf(blas, sizeof blas, "%d BLAS thread%s each", threads, threads == 1 ? "" : "s");
        else
            snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%s", getenv("OPENBLAS_NUM_THREADS"));
        fprintf(stderr, "started %zu pftnode processes (%s, %s); logs in %s/<id>/node.log\n", self->nn,
                self->node_bin, blas, self->o.out_dir);
    }
    return 0;
}

/* The first running child, in file order, that wait4 finds exited; its status file read once more (its last
 * state, for the progress display). */
static int local_next_exit(pft_launch_t *self, size_t *i, int *status, long *max_rss_kb)
{
    for (size_t k = 0; k < self->nn; k++) {
        pft_launch_child_t *c = &self->ch[k];
        struct rusage ru;
        int st;
        if (c->exited || c->absent || wait4(c->pid, &st, WNOHANG, &ru) != c->pid)
            continue;
        pft_launch__read_status(c);
        *i = k;
        *status = st;
        *max_rss_kb = ru.ru_maxrss;
        return 1;
    }
    return 0;
}

/* kill(2) to every started child still running. */
static void local_signal(pft_launch_t *self, int sig)
{
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        if (!c->exited && !c->absent && c->pid > 0)
            kill(c->pid, sig);
    }
}

const pft_launch_engine_t pft_launch__local = {
    .name = "local",
    .setup = local_setup,
    .endpoints = local_endpoints,
    .reserve = local_reserve,
    .start = local_start,
    .next_exit = local_next_exit,
    .signal = local_signal,
};
