/* pft_node_evidence: one α for one set of statistics (DESIGN.md §8). A node of a statistics head scores its
 * own rows by cross-validation against the statistics it holds, for every α of the Gaussian head's grid
 * (pft_ghead_evidence), and sends the tallies in its provenance entry with the rows those statistics stood
 * for; the head sums the evidence of the contributors of its statistics that scored against at least half
 * of its rows (a tally against a tenth of the rows prefers more shrinkage than the whole needs: star50's
 * clients, each against its own 160 rows, chose 0.5 where the aggregator's 7,900 rows want 0.01) and takes
 * the α with the most rows right, so nodes that hold the same statistics build the same head, from the rows
 * of everyone who saw most of them. Under secure aggregation a member that masks its rows sends no tallies
 * (they are its own rows'; summed under the mask they would be scored against one member's statistics each,
 * the bias the half rule removes). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"
#include "pft_log.h"

#include <string.h>

/* 1 when this node's statistics head chooses its shrinkage from evidence: the gaussian head (ncm fits at
 * α = 1 and never reads it) on tied statistics, a release without DP noise (the tallies of own rows are not
 * noised: none goes beside a noisy release). */
static int wanted(const node_t *nd)
{
    return strcmp(nd->head_ops->name, "gaussian") == 0 && nd->me->exact && nd->me->cov == PFT_COV_TIED &&
           !nd->pipe.noisy;
}

/* The options of this node's evidence: the grid's defaults, the run's seed, the event loop served between
 * folds. */
static void evidence_opts(node_t *nd, pft_ghead_opts_t *o)
{
    pft_ghead_opts_default(o);
    o->seed = nd->run->seed;
    o->on_iter = pft_node__loop_yield;
    o->on_iter_ctx = nd;
}

/* The tallies of own rows against total (keep: computed in total's own scatter, pft_ghead_evidence_keep). */
static int own_tallies(node_t *nd, const pft_gstat_t *total, pft_gstat_t *lend, pft_la_trid_t *keep)
{
    nd->head.has_own_ev = 0;
    if (!wanted(nd) || !total || pft_dataset_n(nd->train) == 0)
        return 0;
    pft_ghead_opts_t o;
    evidence_opts(nd, &o);
    const float *x = pft_dataset_x(nd->train);
    const int32_t *y = pft_dataset_y(nd->train);
    int n = pft_dataset_n(nd->train),
        rc = keep ? pft_ghead_evidence_keep(lend, x, y, n, nd->n_classes, &o, nd->head.own_ev, keep)
                  : pft_ghead_evidence(total, x, y, n, nd->n_classes, &o, nd->head.own_ev);
    if (rc < 0)
        return pft_err_wrap(rc, "the shrinkage evidence of own rows");
    nd->head.has_own_ev = rc == 0;
    nd->head.own_against = pft_gstat_total(total);
    return 0;
}

int pft_node__evidence_own(node_t *nd, const pft_gstat_t *total)
{
    return own_tallies(nd, total, NULL, NULL);
}

int pft_node__evidence_own_keep(node_t *nd, pft_gstat_t *total, pft_la_trid_t *keep)
{
    memset(keep, 0, sizeof *keep);
    return own_tallies(nd, total, total, keep);
}

int pft_node__evidence_own_heldout(node_t *nd, const pft_ghead_lowrank_t *received, uint64_t against)
{
    nd->head.has_own_ev = 0;
    if (!wanted(nd) || pft_dataset_n(nd->train) == 0)
        return 0;
    pft_ghead_opts_t o;
    evidence_opts(nd, &o);
    int rc = pft_ghead_evidence_heldout(received, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                        pft_dataset_n(nd->train), nd->n_classes, &o, nd->head.own_ev);
    if (rc < 0)
        return pft_err_wrap(rc, "the shrinkage evidence of own rows against the received release");
    nd->head.has_own_ev = rc == 0;
    nd->head.own_against = against;
    if (rc == 0)
        pft_info("evidence: own rows held out against the received release (%llu rows, rank %d)",
                 (unsigned long long)against, received->q);
    return 0;
}

int pft_node__evidence_set(const node_t *nd, pft_bundle_t *b, const char *id)
{
    /* a member of a masked group sends none: the tallies of its own rows would travel in the clear beside its
     * masked part, and no node could use them (the opener's statistics hold the whole group) */
    if (!nd->head.has_own_ev || pft_node__secagg_masks_own(nd))
        return 0;
    pft_bundle_tally_t t[PFT_GHEAD_N_ALPHA];
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++) {
        const pft_ghead_evidence_t *e = &nd->head.own_ev[a];
        t[a] = (pft_bundle_tally_t){
            .alpha = e->alpha, .correct = e->correct, .total = e->total, .loss = e->loss};
    }
    return pft_bundle_prov_set_evidence(b, id, nd->head.own_against, t, PFT_GHEAD_N_ALPHA);
}

/* Appends one contributor's tallies (the grid's, else ignored) to nd->head.ev. */
static int append(node_t *nd, const pft_bundle_tally_t *t, int m, uint64_t against)
{
    if (m != PFT_GHEAD_N_ALPHA)
        return 0;
    for (int a = 0; a < m; a++)
        if (t[a].alpha != pft_ghead_alpha_grid(a))
            return 0; /* another grid (another version): not comparable */
    pft_ghead_evidence_t *ev =
        pft_realloc(nd->head.ev, (size_t)(nd->head.n_ev + 1) * PFT_GHEAD_N_ALPHA * sizeof *ev);
    if (ev)
        nd->head.ev = ev;
    double *w = ev ? pft_realloc(nd->head.ev_against, (size_t)(nd->head.n_ev + 1) * sizeof *w) : NULL;
    if (!w)
        return pft_err(PFT_ENOMEM, "out of memory");
    nd->head.ev_against = w;
    w[nd->head.n_ev] = (double)against;
    ev += (size_t)nd->head.n_ev++ * PFT_GHEAD_N_ALPHA;
    for (int a = 0; a < m; a++)
        ev[a] = (pft_ghead_evidence_t){
            .alpha = t[a].alpha, .correct = t[a].correct, .total = t[a].total, .loss = t[a].loss};
    return 0;
}

int pft_node__evidence_gather(node_t *nd, const pft_bundle_t *b)
{
    PFT_FREE(nd->head.ev);
    PFT_FREE(nd->head.ev_against);
    nd->head.n_ev = 0;
    int own_in = 0, rc = 0;
    for (int i = 0; rc == 0 && b && i < pft_bundle_prov_n_nodes(b); i++) {
        int m = 0;
        uint64_t against = 0;
        const pft_bundle_tally_t *t = pft_bundle_prov_evidence(b, i, &m, &against);
        if (!t)
            continue;
        own_in |= strcmp(pft_bundle_prov_node(b, i), nd->me->id) == 0;
        rc = append(nd, t, m, against);
    }
    if (rc == 0 && nd->head.has_own_ev &&
        !own_in) { /* own rows not (or no longer) in the bundle's provenance */
        pft_bundle_tally_t t[PFT_GHEAD_N_ALPHA];
        for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
            t[a] = (pft_bundle_tally_t){.alpha = nd->head.own_ev[a].alpha,
                                        .correct = nd->head.own_ev[a].correct,
                                        .total = nd->head.own_ev[a].total,
                                        .loss = nd->head.own_ev[a].loss};
        rc = append(nd, t, PFT_GHEAD_N_ALPHA, nd->head.own_against);
    }
    return rc;
}

double pft_node__evidence_alpha(const node_t *nd, uint64_t N, uint64_t *rows, int *used)
{
    *rows = 0;
    *used = 0;
    if (!wanted(nd) || nd->head.n_ev == 0 || N == 0)
        return -1.0;
    const pft_ghead_evidence_t **ev = pft_alloc_array((size_t)nd->head.n_ev, sizeof *ev);
    if (!ev)
        return -1.0;
    for (int k = 0; k < nd->head.n_ev; k++) {
        if (2 * nd->head.ev_against[k] < (double)N) /* scored against less than half the rows: not these */
            continue;
        const pft_ghead_evidence_t *e = nd->head.ev + (size_t)k * PFT_GHEAD_N_ALPHA;
        uint64_t most = 0;
        for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
            most = e[a].total > most ? e[a].total : most;
        *rows += most;
        ev[(*used)++] = e;
    }
    double alpha = *used ? pft_ghead_evidence_alpha(ev, NULL, *used) : -1.0;
    pft_free(ev);
    return alpha;
}
