/* pft_launch_int: internal to node/launch/pft_launch*.c: the state of one launch and the helpers its steps
 * share. Not for other modules: they use pft_launch.h. */
#ifndef PFT_LAUNCH_INT_H
#define PFT_LAUNCH_INT_H

#include "pft_dataset.h"
#include "pft_dirlock.h"
#include "pft_launch.h"
#include "pft_launch_engine.h"
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
    char *key;          /* secret key file (in its node file), or NULL */
    char *node_file;    /* DIR/<id>/node.conf: its private facts (data files, secret key, evaluation set) */
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

struct pft_launch_t {
    pft_launch_opts_t o;               /* the options; o.out_dir becomes out_abs in prepare */
    pft_topo_t *topo;                  /* the topology, resolved as prepare goes */
    pft_launch_child_t *ch;            /* one per node, in file order */
    size_t nn;                         /* number of nodes */
    char out_abs[PATH_MAX];            /* absolute output folder */
    char node_bin[PATH_MAX];           /* the pftnode binary */
    char *resolved;                    /* DIR/topology.dot */
    pft_dataset_t *eval;               /* union of the test shares (raw); NULL: none */
    char *eval_x, *eval_y;             /* DIR/eval_x.npy, DIR/eval_y.npy; NULL without eval */
    char slots_dir[PATH_MAX + 8];      /* DIR/slots with --compute-slots (the nodes' --compute-slots); "" */
    double t0, wall;                   /* start time, seconds until the last node exited */
    int failed;                        /* started nodes that did not exit 0 */
    int n_stopped;                     /* of those, stopped by the launcher */
    int degraded;                      /* started nodes that completed without a predecessor (not failed) */
    const char *stop_cause;            /* "timeout", "interrupted", or NULL (none, or a failed node) */
    const pft_launch_engine_t *engine; /* chosen from o.engine in prepare; NULL before */
    void *engine_data;                 /* the engine's own state (slurm: the allocation, placement, srun) */
    int signals_caught;                /* old_int and old_term hold the handlers to restore */
    pft_dirlock_t *run_lock;           /* the run folder, held for the launcher's life (pft_launch_own.c) */
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

/* Internal. Every node's training rows per class from ch[].train into *rows (new, nn × *nc), or NULL and 0
 * where a node with data has none here (its own files elsewhere). */
int pft_launch__class_rows(const pft_launch_t *self, uint64_t **rows, size_t *nc);

/* Internal. The concatenation of every node's test share into *out (NULL if none). */
int pft_launch__concat_tests(const pft_launch_t *self, pft_dataset_t **out);

/* pft_launch_own.c: the launcher owns its run folder and its nodes. */
#define PFT_LAUNCH_LOCK "launch.lock" /* in the run folder: the launcher's pid (the lock is the folder's) */
/* Internal. Takes the run folder dir (which exists) for this launcher's life: PFT_EINVAL naming the other
 * launcher when one holds it. */
int pft_launch__lock_run(pft_launch_t *self, const char *dir);
/* Internal. Every node folder in dir still held by a node of an earlier launch: waited for (a node whose
 * launcher was killed dies with it), then stopped (SIGTERM, then SIGKILL) when its holder is a pftnode with
 * that folder open. 0 once all are free; PFT_EINVAL naming a folder held by anything else. */
int pft_launch__stop_leftovers(const pft_launch_t *self, const char *dir);
/* Internal, in a child between fork and exec: it is killed when the launcher (parent) dies; it exits at once
 * when the launcher is already gone. */
void pft_launch__die_with_parent(pid_t parent);

/* Internal. The first word of c->dir/status into c->state (kept when the file cannot be read). */
void pft_launch__read_status(pft_launch_child_t *c);

/* Internal, shared by the launcher and its tasks: the lines a task prints on srun's stdout. */
#define PFT_SLURM_PROBE_LINE "pft-probe" /* <task> ok <host> <addr> | <task> error <host> <why> */
#define PFT_SLURM_START_LINE "pft-start" /* <task> <host> <job>.<step> */
#define PFT_SLURM_EXIT_LINE "pft-exit"   /* <task> <wait status> <peak RSS kB> */

/* pft_launch_reconcile.c: matches every sent hand-off (the nodes' result.json `sent`) with its receiver's
 * `received`; *report gets one {from, to, bundle_id, sender_state, verdict} per hand-off (verdict "ok",
 * "used", "unverified", "lost" or "contradiction"); returns how many are lost or contradicted (each shown on
 * stderr with show, as is every verdict but "ok"). */
int pft_launch_reconcile(json_t *nodes, json_t **report, int show);

/* pft_launch_collect.c: what results.json is made from, by a launch or by `pftnet collect` (pft_gather.c),
 * which gather the nodes' result.json alike. Strings borrowed. */
typedef struct {
    const pft_topo_t *topo;    /* the run's topology */
    const char *topo_path;     /* its path, as results.json names it */
    const char *out_dir;       /* results.json and table.txt go here */
    const char *tag, *variant; /* NULL: the graph name, the method label from the run's settings */
    double wall;               /* the run's wall_seconds */
    int json;  /* print results.json on stdout instead of the table; no reconciliation lines */
    int quiet; /* no closing "results: DIR/results.json" line */
} pft_launch_results_t;

/* Internal. Every bundle a node sent along a fallback edge ({from, to, instead_of, state}), each shown on
 * stderr with show. */
json_t *pft_launch__fallbacks(json_t *nodes, int show);

/* Internal. results.json for nodes (every node's result.json in file order; each gets its hop): the run's
 * settings, baselines (borrowed), fallbacks (taken) and the reconciled hand-offs; *lost gets how many are
 * lost or contradicted (pft_launch_reconcile). NULL when out of memory. */
json_t *pft_launch__results_json(const pft_launch_results_t *r, json_t *nodes, json_t *baselines,
                                 json_t *fallbacks, int *lost);

/* Internal. Writes res (pft_launch__results_json) as out_dir/results.json and table.txt, and prints it (json)
 * or the table. Returns 0, or PFT_EIO / PFT_ENOMEM when results.json could not be written. */
int pft_launch__write_results(const pft_launch_results_t *r, json_t *res);

#endif
