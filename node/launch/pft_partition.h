/* pft_partition: splits a labelled dataset across simulated nodes (iid, Dirichlet label skew, label ranges,
 * domains). */
#ifndef PFT_PARTITION_H
#define PFT_PARTITION_H

#include "pft_topo.h"

#include <stdint.h>

/* The partition rule, as topology parsed the run's `partition` attribute (one grammar, pft_topo_attr.c):
 * "iid", "dirichlet:<beta>", "labels:<classes>|<classes>…", "labels", "domain". */
typedef struct {
    pft_topo_part_t kind; /* PFT_TOPO_PART_* */
    double beta;          /* Dirichlet concentration */
    int n_ranges;         /* labels: number of '|'-separated ranges (0: every node gives its classes) */
    const char *text;     /* the partition text as written (labels: its ranges), borrowed */
} pft_part_spec_t;

/* What one node asks of the partition. */
typedef struct {
    const char *classes; /* class set like "0-3" or "0,2,5" (labels); NULL: from the spec's i-th range */
    int domain;          /* domain id for PFT_TOPO_PART_DOMAIN; -1: none */
    int size;            /* cap on training rows (a seeded random subset of its share); 0: no cap */
} pft_part_node_t;

typedef struct pft_partition_t pft_partition_t;

/* Dirichlet: proportions are drawn again (at most PFT_PART_MAX_DRAWS times) until every node holds at least
 * PFT_PART_MIN_ROWS training rows, or ntr / (2·n_nodes) when that is smaller (NIID-Bench's rule). */
#define PFT_PART_MIN_ROWS 10
#define PFT_PART_MAX_DRAWS 1000

/* The spec of run's partition (run->part_kind, part_beta, part_ranges, partition), borrowed from run. */
void pft_partition_spec(const pft_topo_run_t *run, pft_part_spec_t *spec);

/* Parses a class set ("0-3", "0,2,5", "1-2,6") into flags[0..n_classes); PFT_EINVAL if malformed or out of
 * range. */
int pft_partition_parse_classes(const char *text, int n_classes, uint8_t *flags);

/* Splits train rows (labels ytr, domains dtr or NULL) and test rows (yte, dte or NULL) across n_nodes nodes.
 * Test rows follow the same rule (iid: equal shares; Dirichlet: the same per-class proportions;
 * labels/domain: the same filters) and are never capped. Deterministic for a seed. On success *out is new. */
int pft_partition_split(const pft_part_spec_t *spec, const pft_part_node_t *nodes, int n_nodes, int n_classes,
                        const int32_t *ytr, const int32_t *dtr, int ntr, const int32_t *yte,
                        const int32_t *dte, int nte, uint64_t seed, pft_partition_t **out);

void pft_partition_destroy(pft_partition_t **self_p);

/* Borrowed, ascending row indices of node i's training / test share, and their counts. */
const int32_t *pft_partition_train(const pft_partition_t *self, int node, int *count);
const int32_t *pft_partition_test(const pft_partition_t *self, int node, int *count);

#endif
