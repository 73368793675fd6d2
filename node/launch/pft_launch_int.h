/* pft_launch_int: internal to node/launch/pft_launch*.c: the state of one launch and the helpers its steps
 * share. Not for other modules: they use pft_launch.h. */
#ifndef PFT_LAUNCH_INT_H
#define PFT_LAUNCH_INT_H

#include "pft_dataset.h"
#include "pft_launch.h"
#include "pft_topo.h"

#include <jansson.h>

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* One node of the run, as the launcher sees it. */
typedef struct {
    const char *id;     /* points into the topology: stale after a set (pft_launch__refresh_ids) */
    char *dir;          /* DIR/<id> */
    char *key;          /* secret key file passed with --key, or NULL */
    pid_t pid;          /* its pftnode process (-1: could not be started) */
    int exited, status; /* wait status once exited */
    int absent;         /* not started (--absent) */
    int stopped;        /* still running when the launcher stopped the run (2: Slurm stopped it) */
    int listen_fd;      /* its port, bound and listening, held until it is started (-1: none) */
    long max_rss_kb;    /* peak resident memory of the process (wait4, by the launcher or its task) */
    int task;           /* slurm: its task in the peers' srun step (-1: none, absent) */
    int lost;           /* slurm: its task ended without reporting how pftnode exited */
    char host[256];     /* slurm: the host its task runs on ("" locally) */
    char state[128];    /* the first word of DIR/<id>/status */
    pft_dataset_t *train, *test; /* raw (unpreprocessed) copies for baselines; NULL: none */
} pft_launch_child_t;

typedef struct pft_launch_slurm_t pft_launch_slurm_t;

struct pft_launch_t {
    pft_launch_opts_t o;       /* the options; o.out_dir becomes out_abs in prepare */
    pft_topo_t *topo;          /* the topology, resolved as prepare goes */
    pft_launch_child_t *ch;    /* one per node, in file order */
    size_t nn;                 /* number of nodes */
    char out_abs[PATH_MAX];    /* absolute output folder */
    char node_bin[PATH_MAX];   /* the pftnode binary */
    char *resolved;            /* DIR/topology.dot */
    pft_dataset_t *eval;       /* union of the test shares (raw); NULL: none */
    char *eval_x, *eval_y;     /* DIR/eval_x.npy, DIR/eval_y.npy; NULL without eval */
    double t0, wall;           /* start time, seconds until the last node exited */
    int failed;                /* started nodes that did not exit 0 */
    int n_stopped;             /* of those, stopped by the launcher */
    const char *stop_cause;    /* "timeout", "interrupted", or NULL (none, or a failed node) */
    pft_launch_slurm_t *slurm; /* --engine slurm: the allocation, the placement, the srun step; NULL: local */
    int signals_caught;        /* old_int and old_term hold the handlers to restore */
    struct sigaction old_int, old_term;
};

/* Internal. Points every ch[i].id at the topology's current node ids (stale after each pft_topo_set_*). */
void pft_launch__refresh_ids(pft_launch_t *self);

/* Internal. pftnode's command line for c into argv (room for 20; fd_text holds --listen-fd's value, used
 * when c holds a port). Borrowed strings. */
void pft_launch__node_argv(const pft_launch_t *self, const pft_launch_child_t *c, const char **argv,
                           char *fd_text, size_t fd_cap);

/* Internal. Closes c's held port, if any. */
void pft_launch__close_port(pft_launch_child_t *c);

/* Internal. The data step of prepare: a simulation's partition into DIR/<id>/data (pointing the topology at
 * each share), else each node's own files; fills ch[].train and ch[].test. */
int pft_launch__load_data(pft_launch_t *self);

/* Internal. The concatenation of every node's test share into *out (NULL if none). */
int pft_launch__concat_tests(const pft_launch_t *self, pft_dataset_t **out);

/* Internal, the Slurm engine (pft_launch_slurm.c). Checks that the launch runs inside an allocation with srun
 * at hand and makes self->slurm; PFT_EINVAL with what to do otherwise. */
int pft_launch__slurm_new(pft_launch_t *self);

/* Internal. Frees the engine, killing its srun step if one still runs; nulls *s_p. */
void pft_launch__slurm_destroy(pft_launch_slurm_t **s_p);

/* Internal. After the children exist: refuses an allocation with fewer tasks than started nodes, then runs a
 * short srun step in which every task reports its host, address and free ports and writes a marker file into
 * DIR; refuses (PFT_EINVAL) a DIR that some host cannot see, and hosts the peers cannot reach. */
int pft_launch__slurm_place(pft_launch_t *self);

/* Internal. Gives each node a task (explicit endpoints to a task on their host) and every node without an
 * explicit endpoint tcp://ADDR:PORT of its task (port_base + i when the run sets port_base). */
int pft_launch__slurm_endpoints(pft_launch_t *self);

/* Internal. Starts every node not absent with one srun step (DIR/slurm/tasks lists each task's command).
 * Returns 0, or PFT_EIO when srun cannot be started. */
int pft_launch__slurm_start(pft_launch_t *self);

/* Internal. The next node whose task reported its exit since the last call: its index, wait status and peak
 * RSS; once srun has ended, each started node that never reported, with c->lost set. 1 if one was returned.
 */
int pft_launch__slurm_next_exit(pft_launch_t *self, size_t *i, int *status, long *max_rss_kb);

/* Internal. SIGTERM: every running node, through `scancel --signal=TERM JOB.STEP` (pftnode stops cleanly);
 * SIGKILL: ends the step (srun killed; Slurm kills its tasks). */
void pft_launch__slurm_signal(pft_launch_t *self, int sig);

/* Internal. After the watch: waits for srun to end (it is killed after 30 s). */
void pft_launch__slurm_end(pft_launch_t *self);

/* Internal, shared by the launcher and its tasks: the lines a task prints on srun's stdout. */
#define PFT_SLURM_PROBE_LINE                                                                                 \
    "pft-probe" /* <task> ok <host> <addr> <port>[,<port>…] | <task> error <host> <why> */
#define PFT_SLURM_START_LINE "pft-start" /* <task> <host> <job>.<step> */
#define PFT_SLURM_EXIT_LINE "pft-exit"   /* <task> <wait status> <peak RSS kB> */
#define PFT_SLURM_PORTS_MAX 64           /* ports one probe task may hold */

/* pft_launch_reconcile.c: matches every sent hand-off (the nodes' result.json `sent`) with its receiver's
 * `received`; *report gets one {from, to, bundle_id, sender_state, verdict} per hand-off (verdict "ok",
 * "used", "unverified", "lost" or "contradiction"); returns how many are lost or contradicted (each shown on
 * stderr with show, as is every verdict but "ok"). */
int pft_launch_reconcile(json_t *nodes, json_t **report, int show);

#endif
