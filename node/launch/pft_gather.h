/* pft_gather: `pftnet collect`: the result.json files of nodes run apart (by hand, on other hosts, by other
 * organisations), checked against the run's topology and gathered into one results.json and table as
 * `pftnet launch` gathers its own nodes' (hops, fallbacks, every hand-off reconciled from both ends). */
#ifndef PFT_GATHER_H
#define PFT_GATHER_H

#include <stddef.h>

/* What `pftnet collect` was asked to do. Strings borrowed. */
typedef struct {
    const char *topo_path;     /* the topology the nodes ran (the public file, or a launch's resolved copy) */
    const char *out_dir;       /* results.json and table.txt go here (made if missing) */
    const char *const *paths;  /* each a node's --out folder, a folder holding its result.json, or the file */
    size_t n_paths;            /* number of paths */
    const char *tag, *variant; /* recorded in results.json; NULL: as a launch would record them */
    int json;                  /* print results.json on stdout instead of the table */
    int quiet;                 /* no lines on stderr but errors and the hand-offs not reconciled */
    int force;                 /* replace a results.json in out_dir that `pftnet collect` did not write */
    int allow_degraded;        /* a degraded node (went on without a predecessor) is not a fault */
} pft_gather_opts_t;

/* The exit codes of `pftnet collect` (its --help and docs/USAGE.md give them). */
#define PFT_GATHER_EXIT_OK 0 /* every node's result, each ok, every hand-off reconciled from both ends */
#define PFT_GATHER_EXIT_FAULT                                                                                \
    1                            /* a node did not end ok (degraded too, unless allowed), or a hand-off was  \
                                    lost or contradicted */
#define PFT_GATHER_EXIT_BADARG 2 /* bad command line or input, or out_dir cannot be made; nothing written */
#define PFT_GATHER_EXIT_MISSING                                                                              \
    3 /* no fault seen, but nodes left no result.json: their hand-offs unverified */

/* Reads the topology (its data files need not exist here) and every path's result.json, refusing one that
 * is not of this run (another run id, an unknown node, a node whose role, family or hand-offs the topology
 * does not give it) or a node given twice, and naming the file; then writes out_dir/results.json (every node
 * of the topology in file order, a stub for one without a result, `collected_from`: each node's file) and
 * table.txt, and prints the table (or, json, results.json) and what is missing or failed. *exit_code gets one
 * of PFT_GATHER_EXIT_*. Returns 0, or PFT_EINVAL / PFT_ETOPO / PFT_EFORMAT (bad input: nothing written),
 * PFT_EIO, PFT_ENOMEM, with the message in pft_errmsg(). */
int pft_gather_run(const pft_gather_opts_t *o, int *exit_code);

#endif
