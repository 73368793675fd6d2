/* pft_node_step_mask: the release step `mask` (secure aggregation, docs/SECAGG.md): a member of a group sends
 * every own row's statistics masked (pft_node__secagg_take_own: class sums and the rule's second moment, its
 * DP noise share with DP), never in the clear; the floor applies where the group's sum opens. */
#include "pft_node_internal.h"

#include "pft_error.h"

/* Every own row, exactly, into a masked part of r->ps (the part taken: r->taken). */
static int mask_own(node_t *nd, pft_node__release_t *r)
{
    int n = pft_dataset_n(nd->train);
    pft_gstat_t *st = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train));
    int rc = st ? pft_gstat_add_rows(st, pft_dataset_x(nd->train), pft_dataset_y(nd->train), (size_t)n)
                : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_node__secagg_take_own(nd, r->ps, st);
    pft_gstat_destroy(&st);
    r->taken = rc == 0;
    return rc;
}

/* A member of a masked group (secure aggregation is for exact statistics: never a bundle of GMMs). */
static int mask_applies(const node_t *nd)
{
    return pft_node__secagg_masks_own(nd);
}

const pft_node_step_t pft_node__step_mask = {
    .name = "mask",
    .applies = mask_applies,
    .own = mask_own,
};
