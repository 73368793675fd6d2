/* pftnet launch: the local multi-process simulation: partition, start one pftnode per node, watch, collect. */
#define _XOPEN_SOURCE 700 /* nftw flags */
#include "pft_alloc.h"
#include "pft_baseline.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_keys.h"
#include "pft_node.h"
#include "pft_npy.h"
#include "pft_partition.h"
#include "pft_port.h"
#include "pft_topo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <ftw.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t s_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    s_interrupted = 1;
}

typedef struct {
    const char *topo_path, *out_dir, *pftnode, *log_level, *order, *absent;
    const char *seed, *tag, *variant; /* --seed (text: given or not), --tag, --variant; NULL when absent */
    pft_opt_list_t set;               /* --set NAME=VALUE: graph attribute overrides */
    double timeout;
    int json, quiet, no_baselines, prepare_only, force, insecure, keep_going;
} launch_args_t;

typedef struct {
    const char *id;
    char *dir;
    char *key;       /* secret key file passed with --key, or NULL */
    pid_t pid;
    int exited, status;
    int absent;      /* not started (--absent) */
    int stopped;     /* still running when the launcher stopped the run */
    int listen_fd;   /* the node's port, bound and listening, held for it until it is started (-1: none) */
    long max_rss_kb; /* peak resident memory of the process (wait4) */
    char state[128];
    pft_dataset_t *train, *test; /* raw (unpreprocessed) copies for baselines */
} child_t;

static int load_optional_i32(const char *dir, const char *name, int32_t **out, int64_t *n)
{
    char *p = pft_fsio_join(dir, name);
    if (!p)
        return PFT_ENOMEM;
    int rc = 0;
    *out = NULL;
    if (pft_fsio_exists(p))
        rc = pft_npy_read_i32(p, out, n);
    pft_free(p);
    return rc;
}

static int write_share(const pft_dataset_t *ds, const int32_t *idx, int n, const char *dir, const char *xname,
                       const char *yname, pft_dataset_t **copy)
{
    pft_dataset_t *sub = NULL;
    int rc = pft_dataset_subset(ds, (const int *)idx, n, &sub);
    char *xp = pft_fsio_join(dir, xname), *yp = pft_fsio_join(dir, yname);
    if (rc == 0 && (!xp || !yp))
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_npy_write_f32(xp, pft_dataset_x(sub), pft_dataset_n(sub), pft_dataset_d(sub));
    if (rc == 0)
        rc = pft_npy_write_i32(yp, pft_dataset_y(sub), pft_dataset_n(sub));
    pft_free(xp);
    pft_free(yp);
    if (rc == 0 && copy)
        *copy = sub;
    else
        pft_dataset_destroy(&sub);
    return rc;
}

/* Simulation: partitions the dataset, writes each node's share and points the topology at it. */
static int partition_dataset(pft_topo_t *topo, const char *out_dir, child_t *ch, int quiet)
{
    const pft_topo_run_t *run = pft_topo_run(topo);
    size_t nn = pft_topo_node_count(topo);
    char *p[4] = {pft_fsio_join(run->dataset, "train_x.npy"), pft_fsio_join(run->dataset, "train_y.npy"),
                  pft_fsio_join(run->dataset, "test_x.npy"), pft_fsio_join(run->dataset, "test_y.npy")};
    pft_dataset_t *train = NULL, *test = NULL;
    int32_t *dtr = NULL, *dte = NULL;
    int64_t ndtr = 0, ndte = 0;
    pft_partition_t *part = NULL;
    pft_part_node_t *pn = pft_calloc(nn, sizeof *pn);
    char **snap = pft_calloc(nn * 4, sizeof *snap);
    int rc = p[0] && p[1] && p[2] && p[3] && pn && snap ? 0 : PFT_ENOMEM;
    if (rc == 0)
        rc = pft_npy_load_dataset(p[0], p[1], 0, &train);
    if (rc == 0)
        rc = pft_npy_load_dataset(p[2], p[3], pft_dataset_n_classes(train), &test);
    if (rc == 0)
        rc = load_optional_i32(run->dataset, "train_domain.npy", &dtr, &ndtr);
    if (rc == 0)
        rc = load_optional_i32(run->dataset, "test_domain.npy", &dte, &ndte);
    if (rc == 0 && ((dtr && ndtr != pft_dataset_n(train)) || (dte && ndte != pft_dataset_n(test))))
        rc = pft_err(PFT_EINVAL, "%s: domain files do not match the number of rows", run->dataset);
    if (rc)
        goto done;
    if (!quiet)
        fprintf(stderr, "dataset %s: %d train / %d test rows, d=%d, %d classes; partition %s\n", run->dataset,
                pft_dataset_n(train), pft_dataset_n(test), pft_dataset_d(train), pft_dataset_n_classes(train),
                run->partition ? run->partition : "iid");
    pft_part_spec_t spec;
    if ((rc = pft_partition_parse(run->partition ? run->partition : "iid", &spec)))
        goto done;
    /* nodes with data = false (aggregators) take no share: the dataset is split across the others */
    int *share = pft_calloc(nn, sizeof *share), n_data = 0;
    if (!share) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        share[i] = n->has_data ? n_data : -1;
        if (!n->has_data)
            continue;
        pn[n_data].classes = n->classes;
        pn[n_data].domain = n->domain;
        pn[n_data].size = n->samples;
        n_data++;
    }
    rc = pft_partition_split(&spec, pn, n_data, pft_dataset_n_classes(train), pft_dataset_y(train), dtr,
                             pft_dataset_n(train), pft_dataset_y(test), dte, pft_dataset_n(test), run->seed, &part);
    for (size_t i = 0; i < nn && rc == 0; i++) {
        if (share[i] < 0) {
            ch[i].train = pft_dataset_new(0, pft_dataset_d(train), pft_dataset_n_classes(train));
            if (!ch[i].train)
                rc = pft_err(PFT_ENOMEM, "out of memory");
            else if (!quiet)
                fprintf(stderr, "  %-12s no data (data = false)\n", ch[i].id);
            continue;
        }
        int ntr, nte;
        const int32_t *itr = pft_partition_train(part, share[i], &ntr), *ite = pft_partition_test(part, share[i], &nte);
        if (ntr == 0) {
            rc = pft_err(PFT_EINVAL, "partition gives node '%s' no training rows", ch[i].id);
            break;
        }
        char *dd = pft_fsio_join(ch[i].dir, "data");
        rc = dd ? pft_fsio_mkdirs(dd) : PFT_ENOMEM;
        if (rc == 0)
            rc = write_share(train, itr, ntr, dd, "train_x.npy", "train_y.npy", &ch[i].train);
        if (rc == 0 && nte > 0)
            rc = write_share(test, ite, nte, dd, "test_x.npy", "test_y.npy", &ch[i].test);
        for (int k = 0; rc == 0 && k < 4; k++) {
            static const char *files[4] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"};
            snap[i * 4 + (size_t)k] = (k < 2 || nte > 0) ? pft_fsio_join(dd, files[k]) : NULL;
        }
        pft_free(dd);
        if (rc == 0 && !quiet)
            fprintf(stderr, "  %-12s %5d train rows, %5d test rows\n", ch[i].id, ntr, nte);
    }
    /* set attributes after all files exist (each set re-validates the topology) */
    static const char *attrs[4] = {"train", "labels", "test", "test_labels"};
    for (size_t i = 0; i < nn && rc == 0; i++) { /* one revalidation per node, not per file */
        const char *kv[9];
        int m = 0;
        for (int k = 0; k < 4; k++)
            if (snap[i * 4 + (size_t)k]) {
                kv[m++] = attrs[k];
                kv[m++] = snap[i * 4 + (size_t)k];
            }
        kv[m] = NULL;
        char id[128];
        snprintf(id, sizeof id, "%s", ch[i].id); /* ch[i].id points into the topology, stale after a set */
        if (m)
            rc = pft_topo_set_node_attrs(topo, id, kv);
    }
    (void)out_dir;
    pft_free(share);
done:
    for (int k = 0; k < 4; k++)
        pft_free(p[k]);
    for (size_t i = 0; snap && i < nn * 4; i++)
        pft_free(snap[i]);
    pft_free(snap);
    pft_free(pn);
    pft_free(dtr);
    pft_free(dte);
    pft_partition_destroy(&part);
    pft_dataset_destroy(&train);
    pft_dataset_destroy(&test);
    return rc;
}

/* Not a simulation: loads each node's own files for the baselines and the global test set. */
static int load_own_data(const pft_topo_t *topo, child_t *ch)
{
    for (size_t i = 0; i < pft_topo_node_count(topo); i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        int rc = n->has_data ? pft_npy_load_dataset(n->train, n->labels, 0, &ch[i].train) : 0; /* NULL: no data */
        if (rc == 0 && n->test)
            rc = pft_npy_load_dataset(n->test, n->test_labels, 0, &ch[i].test);
        if (rc)
            return pft_err_wrap(rc, "node %s", n->id);
    }
    return 0;
}

/* A copy of d (all rows). */
static int dataset_dup(const pft_dataset_t *d, pft_dataset_t **out)
{
    int n = pft_dataset_n(d);
    int *idx = pft_alloc_array((size_t)n + 1, sizeof *idx);
    if (!idx)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int r = 0; r < n; r++)
        idx[r] = r;
    int rc = pft_dataset_subset(d, idx, n, out);
    pft_free(idx);
    return rc;
}

/* Concatenation of every node's test share (the global evaluation set); *out NULL if none. */
static int concat_tests(child_t *ch, size_t nn, pft_dataset_t **out)
{
    pft_dataset_t *acc = NULL;
    *out = NULL;
    for (size_t i = 0; i < nn; i++) {
        const pft_dataset_t *d = ch[i].test;
        if (!d)
            continue;
        pft_dataset_t *next = NULL;
        int rc = acc ? pft_dataset_concat(acc, d, &next) : dataset_dup(d, &next);
        pft_dataset_destroy(&acc);
        if (rc)
            return rc;
        acc = next;
    }
    *out = acc;
    return 0;
}

/* Simulation keys: every node without a `key` gets a keypair in DIR/keys (kept across restarts of the same
 * run), and the topology names its public half. */
static int make_keys(pft_topo_t *topo, const char *out_dir, child_t *ch, size_t nn)
{
    char *dir = pft_fsio_join(out_dir, "keys");
    int rc = dir ? pft_fsio_mkdirs(dir) : PFT_ENOMEM;
    if (rc == 0)
        chmod(dir, 0700);
    for (size_t i = 0; i < nn && rc == 0; i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        if (n->key)
            continue;
        char name[160];
        snprintf(name, sizeof name, "%s.key", ch[i].id);
        char *sk = pft_fsio_join(dir, name);
        snprintf(name, sizeof name, "%s.pub", ch[i].id);
        char *pk = pft_fsio_join(dir, name);
        pft_keypair_t *kp = NULL;
        if (!sk || !pk)
            rc = PFT_ENOMEM;
        else if (pft_fsio_exists(sk))
            rc = pft_keypair_load(sk, &kp);
        else if (!(kp = pft_keypair_generate()))
            rc = pft_err(PFT_ENOMEM, "cannot generate a keypair");
        else
            rc = pft_keypair_save(kp, sk, pk, ch[i].id, 1);
        if (rc == 0)
            rc = pft_topo_set_node_attr(topo, ch[i].id, "key", pk);
        if (rc == 0) {
            ch[i].key = sk;
            sk = NULL;
        }
        pft_keypair_destroy(&kp);
        pft_free(sk);
        pft_free(pk);
        for (size_t j = 0; j < nn; j++) /* stale after set_attr */
            ch[j].id = pft_topo_node(topo, j)->id;
    }
    pft_free(dir);
    return rc;
}

static int assign_endpoints(pft_topo_t *topo, child_t *ch)
{
    const pft_topo_run_t *run = pft_topo_run(topo);
    int port_base = run->port_base, rc = 0;
    size_t nn = pft_topo_node_count(topo);
    for (size_t i = 0; i < nn && rc == 0; i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        if (n->endpoint)
            continue;
        int port = port_base ? port_base + (int)i : pft_port_pick(&ch[i].listen_fd);
        if (port <= 0) {
            rc = pft_err(PFT_ENET, "no free TCP port for node %s (last error: %s%s)", n->id, strerror(errno),
                         errno == EMFILE ? "; the launcher holds one socket per node: raise `ulimit -n`" : "");
            break;
        }
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        char id[128];
        snprintf(id, sizeof id, "%s", n->id);
        rc = pft_topo_set_node_attr(topo, id, "endpoint", ep);
    }
    return rc;
}

static void close_port(child_t *c)
{
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    c->listen_fd = -1;
}

/* Holds each loopback port of a node about to start (bound and listening, for spawn to hand over): a port
 * that cannot be bound would fail its node only once the others wait for it, so the run is refused now,
 * naming the node and the port. Nodes not started here (--absent) get none. */
static int hold_ports(const pft_topo_t *topo, child_t *ch)
{
    size_t nn = pft_topo_node_count(topo);
    for (size_t i = 0; i < nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(topo, i);
        int port;
        if (ch[i].absent)
            close_port(&ch[i]);
        if (ch[i].absent || ch[i].listen_fd >= 0 || !n->endpoint ||
            sscanf(n->endpoint, "tcp://127.0.0.1:%d", &port) != 1)
            continue;
        if (pft_port_probe(port, &ch[i].listen_fd) == 0)
            continue;
        int err = errno;
        close_port(&ch[i]);
        return pft_err(PFT_ENET,
                       "node %s: %s cannot be bound on this machine (%s); free the port or move the node (--set "
                       "port_base=N moves automatic endpoints, unset or 0 lets the launcher pick free ports)",
                       n->id, n->endpoint, strerror(err));
    }
    return 0;
}

static void pftnode_path(const char *given, char *buf, size_t len)
{
    if (given) {
        snprintf(buf, len, "%s", given);
        return;
    }
    const char *env = getenv("PFTNODE");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        snprintf(buf, len, "%s/pftnode", dirname(self));
        if (access(buf, X_OK) == 0)
            return;
    }
    snprintf(buf, len, "pftnode");
}

static pid_t spawn(const char *pftnode, const char *topo, child_t *c, const char *level, const char *eval_x,
                   const char *eval_y, int insecure)
{
    char *log = pft_fsio_join(c->dir, "node.log");
    if (!log)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        const char *argv[20];
        int a = 0;
        argv[a++] = pftnode;
        argv[a++] = "--topology";
        argv[a++] = topo;
        argv[a++] = "--id";
        argv[a++] = c->id;
        argv[a++] = "--out";
        argv[a++] = c->dir;
        argv[a++] = "--log-level";
        argv[a++] = level;
        if (insecure)
            argv[a++] = "--insecure";
        if (c->key) {
            argv[a++] = "--key";
            argv[a++] = c->key;
        }
        if (eval_x) {
            argv[a++] = "--eval-features";
            argv[a++] = eval_x;
            argv[a++] = "--eval-labels";
            argv[a++] = eval_y;
        }
        char fd_text[16];
        if (c->listen_fd >= 0 && fcntl(c->listen_fd, F_SETFD, 0) == 0) { /* this one survives exec */
            snprintf(fd_text, sizeof fd_text, "%d", c->listen_fd);
            argv[a++] = "--listen-fd";
            argv[a++] = fd_text;
        }
        argv[a] = NULL;
        execvp(pftnode, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", pftnode, strerror(errno));
        _exit(127);
    }
    pft_free(log);
    close_port(c); /* the node has it now */
    return pid;
}

static void read_status(child_t *c)
{
    char *p = pft_fsio_join(c->dir, "status");
    uint8_t *buf = NULL;
    size_t len = 0;
    if (p && pft_fsio_read(p, 4096, &buf, &len) == 0) {
        char *nl = strchr((char *)buf, '\n');
        if (nl)
            *nl = '\0';
        char *sp = strchr((char *)buf, ' ');
        if (sp)
            *sp = '\0'; /* the state word; the detail is for humans reading the file */
        snprintf(c->state, sizeof c->state, "%s", (char *)buf);
    }
    pft_free(buf);
    pft_free(p);
}

/* The message of the last ERROR line of dir/node.log into buf ("" if none). */
static void last_error(const char *dir, char *buf, size_t cap)
{
    buf[0] = '\0';
    char *path = pft_fsio_join(dir, "node.log");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[4096]; /* pft_log writes lines of up to 2048 bytes */
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strchr(line, ' '); /* "<timestamp> <LEVEL> [id] message" */
        if (!m || strncmp(m, " ERROR ", 7) != 0)
            continue;
        m += 7;
        if (*m == '[' && strchr(m, ']')) /* the node's [id] tag */
            m = strchr(m, ']') + 1;
        m += strspn(m, " ");
        snprintf(buf, cap, "%.*s", (int)strcspn(m, "\n"), m);
    }
    if (f)
        fclose(f);
    pft_free(path);
}

/* Starts every node, shows progress, waits for all; returns the number that did not exit 0, of which
 * *n_stopped were stopped by the launcher. *stop_cause: why it stopped them ("timeout", "interrupted"), NULL
 * when it did not or when a failed node was the cause. */
static int run_children(const launch_args_t *a, const char *topo_path, child_t *ch, size_t nn, const char *eval_x,
                        const char *eval_y, double *wall, int *n_stopped, const char **stop_cause)
{
    char node_bin[PATH_MAX];
    pftnode_path(a->pftnode, node_bin, sizeof node_bin);
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    double t0 = pft_fsio_now();
    int reverse = a->order && strcmp(a->order, "reverse") == 0;
    for (size_t k = 0; k < nn; k++) {
        size_t i = reverse ? nn - 1 - k : k;
        if (ch[i].absent) {
            ch[i].exited = 1;
            snprintf(ch[i].state, sizeof ch[i].state, "absent");
            continue;
        }
        ch[i].pid = spawn(node_bin, topo_path, &ch[i], a->log_level, eval_x, eval_y, a->insecure);
        snprintf(ch[i].state, sizeof ch[i].state, "started");
        if (ch[i].pid < 0)
            ch[i].exited = 1, ch[i].status = 127 << 8;
    }
    if (!a->quiet)
        fprintf(stderr, "started %zu pftnode processes (%s); logs in %s/<id>/node.log\n", nn, node_bin, a->out_dir);
    size_t left = 0;
    for (size_t i = 0; i < nn; i++)
        left += !ch[i].absent;
    char last[4096] = "";
    int killed = 0;     /* SIGTERM sent to every running node */
    double kill_at = 0; /* then SIGKILL to those still running at this time */
    const char *stop_why = NULL;
    char why[PATH_MAX + 64];
    while (left > 0) {
        for (size_t i = 0; i < nn; i++) {
            if (ch[i].exited || ch[i].absent)
                continue;
            int st;
            struct rusage ru;
            pid_t r = wait4(ch[i].pid, &st, WNOHANG, &ru);
            if (r == ch[i].pid) {
                ch[i].max_rss_kb = ru.ru_maxrss;
                ch[i].exited = 1;
                ch[i].status = st;
                left--;
                /* a failed node leaves its successors waiting until their deadlines: stop the run instead */
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !a->keep_going && !stop_why && left > 0) {
                    snprintf(why, sizeof why, "node %s failed (see %s/node.log)", ch[i].id, ch[i].dir);
                    stop_why = why;
                }
            }
            read_status(&ch[i]);
        }
        char line[4096];
        int n = 0;
        for (size_t i = 0; i < nn && n < (int)sizeof line - 200; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s:%s", i ? "  " : "", ch[i].id, ch[i].state);
        if (!a->quiet && strcmp(line, last) != 0) {
            fprintf(stderr, "[%6.1fs] %s\n", pft_fsio_now() - t0, line);
            snprintf(last, sizeof last, "%s", line);
        }
        double el = pft_fsio_now() - t0;
        if (!stop_why && s_interrupted)
            stop_why = "interrupted";
        if (!stop_why && a->timeout > 0 && el > a->timeout)
            stop_why = "timeout";
        if (!killed && stop_why) {
            fprintf(stderr, "%s: stopping every node%s\n", stop_why,
                    stop_why == why ? " (--keep-going lets them run on to their deadlines)" : "");
            for (size_t i = 0; i < nn; i++)
                if (!ch[i].exited && ch[i].pid > 0)
                    kill(ch[i].pid, SIGTERM), ch[i].stopped = 1;
            killed = 1;
            kill_at = el + 10;
        } else if (killed && el > kill_at) {
            for (size_t i = 0; i < nn; i++)
                if (!ch[i].exited && ch[i].pid > 0)
                    kill(ch[i].pid, SIGKILL);
        }
        if (left)
            usleep(100000);
    }
    *wall = pft_fsio_now() - t0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    int failed = 0;
    *n_stopped = 0;
    *stop_cause = stop_why && stop_why != why ? stop_why : NULL;
    for (size_t i = 0; i < nn; i++) {
        if (ch[i].absent)
            continue;
        int ok = WIFEXITED(ch[i].status) && WEXITSTATUS(ch[i].status) == 0;
        if (!ok) {
            failed++;
            /* stopped: signalled by the launcher and ended by that signal, not by a failure of its own */
            int stopped = ch[i].stopped && (WIFEXITED(ch[i].status)
                                                ? WEXITSTATUS(ch[i].status) == PFT_EXIT_INTERRUPTED
                                                : WTERMSIG(ch[i].status) == SIGTERM ||
                                                      WTERMSIG(ch[i].status) == SIGKILL);
            *n_stopped += stopped;
            if (stopped)
                fprintf(stderr, "node %s was stopped by the launcher (see %s/node.log)\n", ch[i].id, ch[i].dir);
            else {
                char err[512];
                last_error(ch[i].dir, err, sizeof err);
                if (WIFEXITED(ch[i].status))
                    fprintf(stderr, "node %s failed with exit code %d%s%s (see %s/node.log)\n", ch[i].id,
                            WEXITSTATUS(ch[i].status), err[0] ? ": " : "", err, ch[i].dir);
                else
                    fprintf(stderr, "node %s was killed by signal %d%s%s (see %s/node.log)\n", ch[i].id,
                            WTERMSIG(ch[i].status), err[0] ? ": " : "", err, ch[i].dir);
            }
        }
    }
    return failed;
}

static double jnum(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* v with prec decimals, or "-" where the node has none (it failed or was stopped). */
static const char *cell(char *buf, size_t cap, int prec, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.*f", prec, v);
    return buf;
}

static size_t n_absent(const child_t *ch, size_t nn)
{
    size_t k = 0;
    for (size_t i = 0; i < nn; i++)
        k += ch[i].absent != 0;
    return k;
}

static void print_table(json_t *nodes, json_t *baselines)
{
    printf("%-12s %-9s %9s %9s %7s %7s %11s %11s %6s %7s\n", "node", "role", "acc_local", "acc_glob", "n_real",
           "n_synth", "bytes_sent", "bytes_recv", "em_it", "em_s");
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        json_t *id = json_object_get(n, "id"), *role = json_object_get(n, "role");
        if (!role)
            role = json_object_get(n, "status");
        char c[8][40];
        printf("%-12s %-9s %9s %9s %7s %7s %11s %11s %6s %7s\n", json_string_value(id),
               role ? json_string_value(role) : "?", cell(c[0], 40, 4, jnum(n, "accuracy_local")),
               cell(c[1], 40, 4, jnum(n, "accuracy_global")), cell(c[2], 40, 0, jnum(n, "n_real")),
               cell(c[3], 40, 0, jnum(n, "n_synthetic")), cell(c[4], 40, 0, jnum(n, "bytes_sent")),
               cell(c[5], 40, 0, jnum(n, "bytes_received")), cell(c[6], 40, 1, jnum(n, "em_iters_mean")),
               cell(c[7], 40, 2, jnum(n, "em_seconds")));
    }
    if (baselines && json_object_get(baselines, "centralized")) {
        printf("baselines on the union of test splits: centralized %.4f, local-only mean %.4f",
               jnum(baselines, "centralized"), jnum(baselines, "local_only_mean"));
        if (json_is_number(json_object_get(baselines, "ensemble")))
            printf(", ensemble %.4f, average %.4f", jnum(baselines, "ensemble"), jnum(baselines, "average"));
        if (json_is_number(json_object_get(baselines, "kd")))
            printf(", KD %.4f (T=%g, into %s)", jnum(baselines, "kd"), jnum(baselines, "kd_temperature"),
                   json_string_value(json_object_get(baselines, "kd_node")) ?: "?");
        printf("\n");
    }
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

/* An earlier run in dir would be resumed by its nodes (they reload what they stored); a new launch needs a
 * clean folder. Returns 0 when dir is absent or empty, or was removed with --force. */
static int check_out_dir(const char *dir, int force)
{
    char *p = pft_fsio_join(dir, "topology.dot");
    int used = p && pft_fsio_exists(p);
    pft_free(p);
    if (!used)
        return 0;
    if (!force)
        return pft_err(PFT_EINVAL, "%s holds an earlier run (its nodes would resume from it); choose another --out "
                                   "or add --force to delete it",
                       dir);
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return pft_err(PFT_EIO, "%s: cannot delete the earlier run: %s", dir, strerror(errno));
    return 0;
}

/* --set NAME=VALUE… and --seed N as graph attributes, validated together like the file's own. */
static int apply_overrides(pft_topo_t *topo, const launch_args_t *a)
{
    const char *kv[2 * (PFT_OPT_LIST_MAX + 1) + 1];
    char *names[PFT_OPT_LIST_MAX];
    int n = 0, rc = 0;
    for (int i = 0; i < a->set.n; i++) {
        const char *eq = strchr(a->set.v[i], '=');
        if (!eq || eq == a->set.v[i]) {
            rc = pft_err(PFT_EINVAL, "--set '%s': expected NAME=VALUE", a->set.v[i]);
            goto done;
        }
        names[i] = pft_strdup(a->set.v[i]);
        if (!names[i]) {
            rc = pft_err(PFT_ENOMEM, "out of memory");
            goto done;
        }
        names[i][eq - a->set.v[i]] = '\0';
        n = i + 1;
        kv[2 * i] = names[i];
        kv[2 * i + 1] = eq + 1;
    }
    int m = 2 * n;
    if (a->seed) {
        kv[m++] = "seed";
        kv[m++] = a->seed;
    }
    kv[m] = NULL;
    if (m)
        rc = pft_topo_set_graph_attrs(topo, kv);
    if (rc)
        pft_err_wrap(rc, "%s: --set/--seed", pft_topo_path(topo));
done:
    for (int i = 0; i < n; i++)
        pft_free(names[i]);
    return rc;
}

static const char *cov_name(int c)
{
    static const char *const covs[] = {"full", "diag", "spher", "lowrank"};
    return c >= 0 && c < 4 ? covs[c] : "?";
}

/* The method label of a run: --variant, else "FedPFT <cov> K=<k>" (+ rank, DP) from the run's defaults. */
static void default_variant(const pft_topo_t *topo, char *buf, size_t cap)
{
    const pft_topo_run_t *r = pft_topo_run(topo);
    int c = (int)r->cov;
    int off = snprintf(buf, cap, "FedPFT %s", cov_name(c));
    if (c == 3 && off > 0 && (size_t)off < cap)
        off += snprintf(buf + off, cap - (size_t)off, " q=%d", r->cov_rank);
    if (off > 0 && (size_t)off < cap)
        off += snprintf(buf + off, cap - (size_t)off, " K=%d", r->k);
    if (r->dp_epsilon > 0 && off > 0 && (size_t)off < cap)
        snprintf(buf + off, cap - (size_t)off, ", DP eps=%g", r->dp_epsilon);
}

int pft_cmd_launch(int argc, char **argv)
{
    launch_args_t a;
    const pft_opt_t opts[] = {
        {"out", PFT_OPT_STRING, &a.out_dir, NULL, 0, -1, 1, "DIR", "output folder (one sub-folder per node)"},
        {"pftnode", PFT_OPT_STRING, &a.pftnode, NULL, 0, -1, 0, "PATH",
         "pftnode binary (default: beside pftnet, or $PFTNODE)"},
        {"order", PFT_OPT_STRING, &a.order, "forward", 0, -1, 0, "ORDER",
         "start nodes in file order (forward) or reverse"},
        {"timeout", PFT_OPT_DOUBLE, &a.timeout, "3600", 0, 1e7, 0, "S", "stop every node after this many seconds"},
        {"log-level", PFT_OPT_STRING, &a.log_level, "info", 0, -1, 0, "L", "nodes' log level"},
        {"no-baselines", PFT_OPT_FLAG, &a.no_baselines, NULL, 0, -1, 0, NULL,
         "skip the centralized and local-only baselines"},
        {"set", PFT_OPT_LIST, &a.set, NULL, 0, -1, 0, "NAME=VALUE",
         "override a graph attribute of the topology (e.g. --set k=20 --set cov=spher); nodes' own values still win"},
        {"seed", PFT_OPT_STRING, &a.seed, NULL, 0, -1, 0, "N", "run seed (same as --set seed=N)"},
        {"tag", PFT_OPT_STRING, &a.tag, NULL, 0, -1, 0, "NAME",
         "experiment name recorded in results.json for `pftnet report` (default: the graph name)"},
        {"variant", PFT_OPT_STRING, &a.variant, NULL, 0, -1, 0, "TEXT",
         "method label recorded in results.json (default: \"FedPFT <cov> K=<k>\", with DP when set)"},
        {"keep-going", PFT_OPT_FLAG, &a.keep_going, NULL, 0, -1, 0, NULL,
         "when a node fails, let the others run on to their deadlines (default: stop them all)"},
        {"absent", PFT_OPT_STRING, &a.absent, NULL, 0, -1, 0, "ID[,ID]",
         "do not start these nodes (a dead peer: tests deadlines and fallback edges)"},
        {"insecure", PFT_OPT_FLAG, &a.insecure, NULL, 0, -1, 0, NULL,
         "no keys: plain-text connections and unsigned bundles (nodes log a warning)"},
        {"force", PFT_OPT_FLAG, &a.force, NULL, 0, -1, 0, NULL,
         "DIR holds an earlier run: delete it first (otherwise launch refuses)"},
        {"prepare-only", PFT_OPT_FLAG, &a.prepare_only, NULL, 0, -1, 0, NULL,
         "partition and write DIR/topology.dot, then print each node's pftnode command and exit"},
        {"json", PFT_OPT_FLAG, &a.json, NULL, 0, -1, 0, NULL, "print results.json on stdout instead of the table"},
        {"quiet", PFT_OPT_FLAG, &a.quiet, NULL, 0, -1, 0, NULL, "no progress lines"},
        {0},
    };
    a.pftnode = NULL;
    a.absent = NULL;
    a.seed = a.tag = a.variant = NULL;
    const pft_cli_t cli = {
        "pftnet launch", "TOPO.dot", 1, 1,
        "Starts every node of a topology as a local pftnode process. In a simulation (graph attribute\n"
        "dataset) it first partitions the dataset across the nodes as the topology asks and writes each\n"
        "node's share to DIR/<id>/data. It shows which node is waiting, fitting, training or done, then\n"
        "writes DIR/results.json (every node's result.json, plus the centralized and local-only baselines on\n"
        "the union of all test splits) and prints a table. Exits 1 if any node failed, naming it; a failed node\n"
        "stops the whole run unless --keep-going.",
        opts};
    const char *pos[1];
    int np = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &np);
    if (rc)
        return rc == 1 ? 0 : 2;
    a.topo_path = pos[0];
    if (strcmp(a.order, "forward") != 0 && strcmp(a.order, "reverse") != 0) {
        fprintf(stderr, "pftnet launch: --order '%s': expected forward or reverse\n", a.order);
        return 2;
    }

    pft_topo_t *topo = NULL;
    child_t *ch = NULL;
    static char out_abs[PATH_MAX];
    pft_dataset_t *eval = NULL;
    char *resolved = NULL, *eval_x = NULL, *eval_y = NULL;
    json_t *nodes = json_array(), *baselines = json_object();
    int exit_code = 1;
    size_t nn = 0;
    double wall = 0;

    rc = pft_topo_load(a.topo_path, PFT_TOPO_SKIP_DATA_CHECK, &topo);
    if (rc == 0)
        rc = apply_overrides(topo, &a);
    if (rc)
        goto fail;
    nn = pft_topo_node_count(topo);
    struct rlimit fl; /* one held socket per node until it starts: raise the soft limit where that needs it */
    if (getrlimit(RLIMIT_NOFILE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && fl.rlim_cur < nn + 256) {
        fl.rlim_cur = fl.rlim_max == RLIM_INFINITY || fl.rlim_max > nn + 256 ? nn + 256 : fl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &fl);
    }
    if ((rc = check_out_dir(a.out_dir, a.force)) || (rc = pft_fsio_mkdirs(a.out_dir)))
        goto fail;
    /* every path the launcher writes into the resolved topology must be absolute: relative ones would be read
     * against the topology file's folder */
    if (!realpath(a.out_dir, out_abs)) {
        rc = pft_err(PFT_EIO, "%s: %s", a.out_dir, strerror(errno));
        goto fail;
    }
    a.out_dir = out_abs;
    ch = pft_calloc(nn, sizeof *ch);
    if (!ch) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nn; i++)
        ch[i].listen_fd = -1;
    for (size_t i = 0; i < nn; i++) {
        ch[i].id = pft_topo_node(topo, i)->id;
        ch[i].dir = pft_fsio_join(a.out_dir, ch[i].id);
        if (!ch[i].dir || (rc = pft_fsio_mkdirs(ch[i].dir)))
            goto fail;
    }
    for (const char *p = a.absent; p && *p;) {
        size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < nn && !(strlen(ch[i].id) == len && strncmp(ch[i].id, p, len) == 0))
            i++;
        if (i == nn) {
            rc = pft_err(PFT_EINVAL, "--absent: no node '%.*s' in %s", (int)len, p, a.topo_path);
            goto fail;
        }
        ch[i].absent = 1;
        p += len + (p[len] == ',');
    }
    rc = pft_topo_is_simulation(topo) ? partition_dataset(topo, a.out_dir, ch, a.quiet || a.json)
                                      : load_own_data(topo, ch);
    if (rc)
        goto fail;
    for (size_t i = 0; i < nn; i++) /* pointers are stale after set_attr */
        ch[i].id = pft_topo_node(topo, i)->id;
    if ((rc = assign_endpoints(topo, ch)))
        goto fail;
    for (size_t i = 0; i < nn; i++)
        ch[i].id = pft_topo_node(topo, i)->id;
    if (!a.insecure && (rc = make_keys(topo, a.out_dir, ch, nn)))
        goto fail;
    for (size_t i = 0; i < nn; i++)
        ch[i].id = pft_topo_node(topo, i)->id;
    resolved = pft_fsio_join(a.out_dir, "topology.dot");
    if (!resolved || (rc = pft_topo_write(topo, resolved)))
        goto fail;
    if ((rc = concat_tests(ch, nn, &eval)))
        goto fail;
    if (eval) {
        eval_x = pft_fsio_join(a.out_dir, "eval_x.npy");
        eval_y = pft_fsio_join(a.out_dir, "eval_y.npy");
        if (!eval_x || !eval_y)
            goto fail;
        if ((rc = pft_npy_write_f32(eval_x, pft_dataset_x(eval), pft_dataset_n(eval), pft_dataset_d(eval))) ||
            (rc = pft_npy_write_i32(eval_y, pft_dataset_y(eval), pft_dataset_n(eval))))
            goto fail;
    }

    if (a.prepare_only) {
        for (size_t i = 0; i < nn; i++) /* the nodes are started later, by hand: they bind themselves */
            close_port(&ch[i]);
        char node_bin[PATH_MAX];
        pftnode_path(a.pftnode, node_bin, sizeof node_bin);
        for (size_t i = 0; i < nn; i++) {
            printf("%s --topology %s --id %s --out %s", node_bin, resolved, ch[i].id, ch[i].dir);
            if (a.insecure)
                printf(" --insecure");
            if (ch[i].key)
                printf(" --key %s", ch[i].key);
            if (eval_x)
                printf(" --eval-features %s --eval-labels %s", eval_x, eval_y);
            printf("\n");
        }
        exit_code = 0;
        goto cleanup;
    }
    if ((rc = hold_ports(topo, ch)))
        goto fail;
    int n_stopped = 0;
    const char *stop_cause = NULL;
    int failed = run_children(&a, resolved, ch, nn, eval_x, eval_y, &wall, &n_stopped, &stop_cause);
    for (size_t i = 0; i < nn; i++) {
        char *p = pft_fsio_join(ch[i].dir, "result.json");
        json_error_t err;
        json_t *r = p ? json_load_file(p, 0, &err) : NULL;
        if (!r)
            r = json_pack("{s:s,s:s}", "id", ch[i].id, "status", ch[i].absent ? "absent" : "no result.json");
        /* the node's own VmHWM when it reported one: wait4's figure includes the launcher's size at fork */
        json_t *own = json_object_get(r, "peak_rss_kb");
        json_object_set_new(r, "max_rss_kb", json_integer(json_is_integer(own) && json_integer_value(own) > 0
                                                               ? json_integer_value(own)
                                                               : ch[i].max_rss_kb));
        json_array_append_new(nodes, r);
        pft_free(p);
    }
    json_t *fallbacks = json_array();
    size_t ni;
    json_t *nr;
    json_array_foreach(nodes, ni, nr)
    {
        size_t si;
        json_t *sv;
        json_array_foreach(json_object_get(nr, "sent"), si, sv)
        {
            json_t *ff = json_object_get(sv, "fallback_for");
            if (!ff)
                continue;
            json_array_append_new(fallbacks, json_pack("{s:O,s:O,s:O,s:O}", "from", json_object_get(nr, "id"), "to",
                                                       json_object_get(sv, "to"), "instead_of", ff, "state",
                                                       json_object_get(sv, "state")));
            if (!a.quiet && !a.json)
                fprintf(stderr, "fallback: %s -> %s instead of %s (%s)\n", json_string_value(json_object_get(nr, "id")),
                        json_string_value(json_object_get(sv, "to")), json_string_value(ff),
                        json_string_value(json_object_get(sv, "state")));
        }
    }
    json_object_set_new(baselines, "handoffs", json_integer((json_int_t)pft_topo_handoffs(topo, &(const pft_handoff_t *){0})));

    /* baselines on the union of all test splits, after the nodes so they do not compete for the CPU */
    if (!a.no_baselines && eval && failed < (int)nn) {
        const pft_topo_run_t *br = pft_topo_run(topo);
        pft_baseline_node_t *bn = pft_calloc(nn, sizeof *bn);
        if (!a.quiet && !a.json)
            fprintf(stderr, "computing baselines (centralized, local-only, ensemble, average, KD)...\n");
        rc = bn ? pft_dataset_apply_prep(eval, (pft_prep_t)br->prep) : pft_err(PFT_ENOMEM, "out of memory");
        for (size_t i = 0; i < nn && rc == 0; i++) {
            bn[i] = (pft_baseline_node_t){.id = ch[i].id, .train = ch[i].train};
            if (ch[i].train)
                rc = pft_dataset_apply_prep(ch[i].train, (pft_prep_t)br->prep);
        }
        if (rc == 0)
            rc = pft_baseline_all(bn, (int)nn, eval, pft_dataset_n_classes(eval), br->head_c,
                                  pft_baseline_destination(topo), br->seed, baselines);
        pft_free(bn);
        if (rc)
            goto fail;
    }
    const size_t *order;
    size_t n_order = pft_topo_order(topo, &order);
    for (size_t h = 0; h < n_order; h++)
        json_object_set_new(json_array_get(nodes, order[h]), "hop", json_integer((json_int_t)h));
    const pft_topo_run_t *run = pft_topo_run(topo);
    char variant[160];
    default_variant(topo, variant, sizeof variant);
    json_t *settings = json_pack("{s:i,s:s,s:s,s:s,s:i,s:i,s:f,s:s,s:i}", "k", run->k, "cov",
                                 cov_name((int)run->cov), "dtype",
                                 run->dtype == PFT_TOPO_FP32 ? "fp32" : "fp16", "prep",
                                 run->prep == PFT_TOPO_PREP_NONE ? "none"
                                 : run->prep == PFT_TOPO_PREP_L2 ? "l2"
                                                                 : "sqrt-l2",
                                 "em_draws", run->em_draws, "head_draws", run->head_draws, "dp_epsilon",
                                 run->dp_epsilon, "partition", run->partition ? run->partition : "",
                                 "samples", run->samples);
    json_t *res = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:i,s:f,s:o,s:O,s:O,s:o}", "topology", a.topo_path, "run",
                            run->run ? run->run : "", "tag", a.tag ? a.tag : run->name ? run->name : run->run,
                            "variant", a.variant ? a.variant : variant, "seed", (json_int_t)run->seed, "kind",
                            pft_kind_name(pft_topo_kind(topo)), "n_nodes", (int)nn, "wall_seconds", wall,
                            "settings", settings, "nodes", nodes, "baselines", baselines, "fallbacks", fallbacks);
    char *rp = pft_fsio_join(a.out_dir, "results.json");
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    if (rp && text)
        pft_fsio_write_atomic(rp, text, strlen(text));
    if (a.json)
        printf("%s\n", text ? text : "{}");
    else
        print_table(nodes, baselines);
    if (!a.quiet && !a.json)
        fprintf(stderr, "results: %s (%.1fs)\n", rp ? rp : "?", wall);
    free(text);
    pft_free(rp);
    json_decref(res);
    exit_code = failed ? 1 : 0;
    if (stop_cause)
        fprintf(stderr, "pftnet launch: stopped (%s); %d of %zu started nodes did not finish\n", stop_cause,
                failed, nn - n_absent(ch, nn));
    else if (failed && n_stopped)
        fprintf(stderr, "pftnet launch: %d of %zu nodes failed; %d more stopped by the launcher\n",
                failed - n_stopped, nn, n_stopped);
    else if (failed)
        fprintf(stderr, "pftnet launch: %d of %zu nodes failed\n", failed, nn);
    goto cleanup;
fail:
    fprintf(stderr, "pftnet launch: %s\n", pft_errmsg());
    exit_code = rc == PFT_ETOPO || rc == PFT_EINVAL ? 2 : 1;
cleanup:
    for (size_t i = 0; ch && i < nn; i++) {
        close_port(&ch[i]);
        pft_free(ch[i].dir);
        pft_free(ch[i].key);
        pft_dataset_destroy(&ch[i].train);
        pft_dataset_destroy(&ch[i].test);
    }
    pft_free(ch);
    pft_free(resolved);
    pft_free(eval_x);
    pft_free(eval_y);
    pft_dataset_destroy(&eval);
    pft_topo_destroy(&topo);
    json_decref(nodes);
    json_decref(baselines);
    return exit_code;
}
