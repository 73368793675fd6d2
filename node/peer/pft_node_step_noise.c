/* pft_node_step_noise: the release step `noise` (DP for exact statistics, SECURITY.md §6): with dp_epsilon >
 * 0 the own part that goes on is the node's (ε, δ)-DP release of the statistics of its released rows
 * (pft_node__release_stats); its own head keeps the rows themselves. A masked node adds its noise share
 * inside the step `mask` instead (docs/SECAGG.md §7). */
#include "pft_node_internal.h"

/* r->st := the DP release of r->rows (all own rows when the floor withheld nothing). */
static int noise_own(node_t *nd, pft_node__release_t *r)
{
    int rc = pft_node__release_stats(nd, r->rows ? r->rows : nd->train, pft_node__parts_kind(nd), &r->st);
    if (rc == 0)
        r->exact_rows = 1; /* what goes on differs from the rows: the head reads them again, exactly */
    return rc;
}

static int noise_applies(const node_t *nd)
{
    return nd->me->dp_epsilon > 0 && !pft_node__secagg_masks_own(nd);
}

const pft_node_step_t pft_node__step_noise = {
    .name = "noise",
    .applies = noise_applies,
    .own = noise_own,
};
