/* pft_launch_engine: internal to node/launch/: how a launch starts, watches and stops its pftnode processes,
 * as a const ops table per engine (local child processes; the tasks of a Slurm allocation), chosen once from
 * --engine. The steps in pft_launch_prepare.c and pft_launch_run.c call through it and never test which
 * engine runs. */
#ifndef PFT_LAUNCH_ENGINE_H
#define PFT_LAUNCH_ENGINE_H

#include "pft_launch.h"

#include <stddef.h>

/* One engine. Entries marked "may be NULL" are skipped when absent. */
typedef struct {
    const char *name; /* its --engine value */
    /* Prepare, before the output folder is made: checks what the engine needs and makes its state in
     * self->engine_data. 0, or an error code with what to do (PFT_EINVAL). */
    int (*setup)(pft_launch_t *self);
    /* Prepare, once the children exist and before the data (may be NULL): places the nodes, failing fast. */
    int (*place)(pft_launch_t *self);
    /* Prepare, after the data: an endpoint for every node whose topology gives none. */
    int (*endpoints)(pft_launch_t *self);
    /* Start, before the signal handlers are set (may be NULL): reserves what the nodes need, refusing the run
     * (nothing started) when it cannot. */
    int (*reserve)(pft_launch_t *self);
    /* Start: starts every node not absent, sets t0 and each child's state ("absent" ones exited). 0 or an
     * error code (nothing started). */
    int (*start)(pft_launch_t *self);
    /* Watch: the next started node that exited since the last call: its index, wait status and peak RSS; 1 if
     * one was returned, 0 if none. The watch reads the status file of running nodes only: an engine that
     * shows a node's last state reads it itself as the node exits (pft_launch__read_status). */
    int (*next_exit)(pft_launch_t *self, size_t *i, int *status, long *max_rss_kb);
    /* Watch: sends sig to every started node still running (SIGTERM: stop cleanly; SIGKILL: end now). */
    void (*signal)(pft_launch_t *self, int sig);
    /* After the watch (may be NULL): waits for what the engine ran besides the nodes. */
    void (*end)(pft_launch_t *self);
    /* Destroy (may be NULL): frees self->engine_data, stopping what still runs. */
    void (*destroy)(pft_launch_t *self);
    /* A node that exited as interrupted (SIGTERM) without the launcher stopping it: NULL, a failure of that
     * node; else the engine stopped it, and this is the cause of stopping the run. */
    const char *outside_stop;
} pft_launch_engine_t;

extern const pft_launch_engine_t pft_launch__local; /* pft_launch_local.c */
extern const pft_launch_engine_t pft_launch__slurm; /* pft_launch_slurm.c */

/* Internal. The engine called name (NULL: local); NULL if there is none. */
const pft_launch_engine_t *pft_launch__engine(const char *name);

#endif
