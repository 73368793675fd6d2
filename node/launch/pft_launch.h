/* pft_launch: the simulator behind `pftnet launch`, in four steps: prepare the run folder, start one pftnode
 * process per node (locally, or on the tasks of a Slurm allocation), watch them to the end, collect their
 * results. */
#ifndef PFT_LAUNCH_H
#define PFT_LAUNCH_H

#include "pft_cli.h"
#include "pft_topo.h"

#include <stddef.h>
#include <stdint.h>

/* What `pftnet launch` was asked to do (its options). Strings are borrowed for the life of the run. */
typedef struct {
    const char *topo_path; /* the topology file */
    const char *out_dir;   /* output folder (one sub-folder per node) */
    const char *pftnode;   /* pftnode binary; NULL: $PFTNODE, else beside pftnet, else on PATH */
    const char *log_level; /* the nodes' --log-level */
    const char *order;     /* "forward" or "reverse": the order nodes are started in */
    const char *absent;    /* "ID[,ID]": nodes not started; NULL: none */
    const char *seed;      /* --seed as text (a graph attribute override); NULL: absent */
    const char *tag;       /* experiment name for results.json; NULL: the graph name */
    const char *variant;   /* method label for results.json; NULL: from the run's settings */
    const char *engine;   /* "local" (child processes) or "slurm" (one srun step in the current allocation) */
    const char *iface;    /* slurm: network interface whose IPv4 address nodes listen on; NULL: the host's */
    pft_opt_list_t set;   /* --set NAME=VALUE: graph attribute overrides */
    double timeout;       /* stop every node after this many seconds (0: never) */
    int json;             /* print results.json on stdout instead of the table */
    int quiet;            /* no progress lines */
    int no_baselines;     /* skip the baselines */
    int force;            /* delete an earlier run in out_dir */
    int resume;           /* keep an earlier run of the same topology in out_dir: its nodes resume from it */
    int insecure;         /* no keys: plain text, unsigned bundles */
    int keep_going;       /* a failed node does not stop the others */
    int exit_interrupted; /* pftnode's exit code when it stopped on SIGTERM (PFT_EXIT_INTERRUPTED) */
    int exit_degraded;  /* pftnode's exit code when it completed without a predecessor (PFT_EXIT_DEGRADED) */
    int compute_slots;  /* local engine: at most this many nodes compute at once (0: no limit) */
    int allow_degraded; /* a degraded node does not make the launch exit 1 (nor does one whose missing
                           predecessors were all --absent) */
    /* Makes node id's keypair as the files sk (secret) and pk (public), or checks the one in sk when that
     * file exists (an earlier start of the same run); 0 or an error code. Required unless insecure: keys
     * belong to wire/, which launch/ does not call. */
    int (*keypair)(const char *id, const char *sk, const char *pk);
} pft_launch_opts_t;

typedef struct pft_launch_t pft_launch_t;

/* 1 if name is a launch engine (--engine); names gets the engines' names as "a, b or c" (cap bytes; NULL:
 * not wanted). */
int pft_launch_engine_known(const char *name, char *names, size_t cap);

/* A run for opts (copied; its strings stay borrowed); NULL when out of memory. */
pft_launch_t *pft_launch_new(const pft_launch_opts_t *opts);

/* Stops nothing: closes held ports, restores signal handlers, frees; nulls *self_p; safe twice. */
void pft_launch_destroy(pft_launch_t **self_p);

/* What `pftnet check` asks of the data, without writing anything: the data a launch of topo would load (a
 * simulation's dataset, else every node's own files) is loaded and checked as the launch does (finite values,
 * integer labels, rows matching, one feature dimension for train and test and over all nodes). With rows not
 * NULL, *rows (new, node_count × *nc) gets every node's training rows per class as the launch would give them
 * (pft_topo_facts_t's class_rows), or NULL with *nc 0 where a node's own files are not here. 0, or
 * PFT_EINVAL / PFT_EFORMAT / PFT_EIO naming the node and the file. */
int pft_launch_check_data(const pft_topo_t *topo, uint64_t **rows, size_t *nc);

/* Step 1. Loads the topology and applies the overrides, makes the output folder (refusing an earlier run
 * without force), gives each node its folder, its data (partitioned in a simulation, its own files
 * otherwise), an endpoint (holding automatic ports) and a key, writes the resolved DIR/topology.dot and the
 * global evaluation set DIR/eval_{x,y}.npy. Prints progress unless quiet or json. Returns 0, or an error
 * code with the message in pft_errmsg() (PFT_ETOPO / PFT_EINVAL: the user's input is wrong). */
int pft_launch_prepare(pft_launch_t *self);

/* After prepare, instead of starting: releases the held ports and prints each node's pftnode command. */
void pft_launch_print_commands(pft_launch_t *self);

/* Step 2. Holds every node's loopback port (refusing a port that cannot be bound), catches SIGINT/SIGTERM
 * and starts one pftnode per node not absent, in the order asked; under Slurm, all at once through one srun
 * step. Returns 0 or PFT_ENET / PFT_EIO (nothing started). */
int pft_launch_start(pft_launch_t *self);

/* Step 3. Shows progress until every started node has exited, stopping them all on a failure (unless
 * keep_going), on the timeout or on a signal; then names each node that failed and how. */
void pft_launch_watch(pft_launch_t *self);

/* Step 4. Gathers every node's result.json, the fallback hand-offs and (unless no_baselines) the baselines
 * into DIR/results.json, prints it or the table and a summary. *exit_code: 0, or 1 when a node failed.
 * Returns 0, or the error code of the baselines (nothing written then). */
int pft_launch_collect(pft_launch_t *self, int *exit_code);

/* What runs on each task of a Slurm launch, started by the launcher's srun steps: `launch --slurm-probe DIR
 * NONCE PFTNODE IFACE` (reports the task's host and address, writes a marker file into DIR)
 * or `launch --slurm-task TASKS` (runs the task's pftnode, reports how it ended). argv[0] is "launch".
 * Returns the process's exit code. */
int pft_launch_slurm_task_main(int argc, char **argv);

#endif
