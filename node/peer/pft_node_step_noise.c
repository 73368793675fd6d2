/* pft_node_step_noise: the release step `noise` (SECURITY.md §6; DP-FedPFT, paper §4.3), the one home of the
 * DP decision in a release: with dp_epsilon > 0 the step applies and declares what that makes every release
 * of this node (noisy, drawn anew each time, its sensitivity per row: nd->pipe), which the other files ask.
 * Exact method: the own part that goes on is the node's (ε, δ)-DP release of the statistics of its released
 * rows (pft_node__release_stats); its own head keeps the rows themselves; a masked node adds its noise share
 * inside the step `mask` instead (docs/SECAGG.md §7). Sampling method: each class's model is the DP-FedPFT
 * release of its union (pft_node__release_fit), not EM. */
#include "pft_node_internal.h"

#include "pft_error.h"

/* r->st := the DP release of r->rows (all own rows when the floor withheld nothing). */
static int noise_own(node_t *nd, pft_node__release_t *r)
{
    if (pft_node__secagg_masks_own(nd))
        return 0; /* the step mask adds this node's noise share to what it masks */
    int rc = pft_node__release_stats(nd, r->rows ? r->rows : nd->train, pft_node__parts_kind(nd), &r->st);
    if (rc == 0)
        r->exact_rows = 1; /* what goes on differs from the rows: the head reads them again, exactly */
    return rc;
}

/* m->g := the class's noisy K = 1 Gaussian of its union. */
static int noise_model(node_t *nd, pft_node__model_t *m)
{
    int rc = pft_node__release_fit(nd, m->c, m->x, m->n, &m->g);
    return rc ? pft_err_wrap(rc, "DP release for class %d (%d rows)", m->c, m->n) : 0;
}

static int noise_applies(const node_t *nd)
{
    return nd->me->dp_epsilon > 0;
}

static void noise_declare(node_t *nd)
{
    nd->pipe.noisy = nd->pipe.redraws = nd->pipe.per_row = 1;
}

const pft_node_step_t pft_node__step_noise = {
    .name = "noise",
    .applies = noise_applies,
    .declare = noise_declare,
    .own = noise_own,
    .model = noise_model,
};
