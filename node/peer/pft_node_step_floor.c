/* pft_node_step_floor: the release step `floor` (min_rows, DESIGN.md §9): the classes of this node's own
 * rows that would be released standing for fewer than min_rows rows (own rows and what merges with them) are
 * left out of what goes on, each withheld and recorded (pft_node_floor.c); the node's own head still has
 * them. The sampling method withholds the model of a class whose union stands for fewer rows. A masked node
 * has no floor of its own: it applies where the group's sum opens. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"

/* Own rows less the classes below the floor into r->rows; nothing (r->rows NULL, nothing withheld) when no
 * class is below it. */
static int floor_own(node_t *nd, pft_node__release_t *r)
{
    int n = pft_dataset_n(nd->train), m = 0, below = 0;
    char *keep = pft_alloc((size_t)nd->n_classes + 1);
    if (!keep)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int c = 0; c < nd->n_classes; c++) { /* the class as released: own rows and what merges with them */
        uint64_t rel = (uint64_t)nd->own_counts[c] + (r->merged ? r->merged[c] : 0);
        keep[c] = nd->own_counts[c] == 0 || rel >= (uint64_t)nd->me->min_rows;
        below += !keep[c];
    }
    int *idx = below ? pft_alloc_array((size_t)n, sizeof *idx) : NULL;
    int rc = !below ? 0 : idx ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    const int32_t *y = pft_dataset_y(nd->train);
    for (int i = 0; rc == 0 && below && i < n; i++)
        if (keep[y[i]])
            idx[m++] = i;
    for (int c = 0; rc == 0 && below && c < nd->n_classes; c++)
        if (!keep[c])
            pft_node__floor_withhold(&nd->know.floor, nd->me->min_rows, c, (uint64_t)nd->own_counts[c],
                                     "own statistics");
    if (rc == 0 && below)
        rc = pft_dataset_subset(nd->train, idx, m, &r->rows);
    pft_free(idx);
    pft_free(keep);
    return rc;
}

/* Sampling method: a class whose union stands for fewer than min_rows rows (own rows and what the received
 * models stand for) is withheld: no model of it goes on. */
static int floor_model(node_t *nd, pft_node__model_t *m)
{
    if (m->represented >= nd->me->min_rows)
        return 0;
    pft_node__floor_withhold(&nd->know.floor, nd->me->min_rows, m->c, (uint64_t)m->represented,
                             "union (own rows and samples)");
    m->withheld = 1;
    return 0;
}

/* Every node that releases its own rows in the clear (not masked). */
static int floor_applies(const node_t *nd)
{
    return !pft_node__secagg_masks_own(nd);
}

const pft_node_step_t pft_node__step_floor = {
    .name = "floor",
    .applies = floor_applies,
    .own = floor_own,
    .model = floor_model,
};
