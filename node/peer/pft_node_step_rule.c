/* pft_node_step_rule: the release step `rule` (DESIGN.md §8, SECURITY.md §9; pft_topo_release_rank): a tied
 * part's shared scatter travels as at most one eigenpair per stats_rows_per_rank rows the part stands for
 * (and at most stats_rank) plus its exact diagonal, its isotropic variance only below 20 rows, so that the
 * directions it reveals stay few against its rows; dense under stats_release = full_scatter (research). The
 * one home of the rule in the peer: on the outbound bundle's clear parts (rank caps the encoder honours), and
 * as the second moment a masked part carries (pft_node__rule_matrix, for the step `mask`). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat_lowrank.h"
#include "pft_log.h"

#include <string.h>

/* r += Σ_c s_c s_cᵀ / n_c = Σ_c n_c μ_c μ_cᵀ of st (lower triangle). */
static void add_class_moments(const pft_gstat_t *st, int d, double *r)
{
    for (int k = 0; k < pft_gstat_n_classes(st); k++) {
        const double *mu = pft_gstat_mean(st, k);
        double n = (double)pft_gstat_count(st, k);
        for (int a = 0; a < d; a++)
            for (int b = 0; b <= a; b++)
                r[(size_t)a * d + b] += n * mu[a] * mu[b];
    }
}

/* The rule's factor of the tied covariance c (d×d) at rank q: U (d×q) and ψ (d), isotropic at q = 0. The
 * one call that computes it. */
static int rule_factor(double *c, int d, int q, double *u, double *psi)
{
    int rc = pft_gstat_lowrank_shared(c, d, q, u, psi);
    double tr = 0;
    for (int j = 0; rc == 0 && q == 0 && j < d; j++)
        tr += psi[j];
    for (int j = 0; rc == 0 && q == 0 && j < d; j++)
        psi[j] = tr / d; /* isotropic: which coordinates a handful of rows never vary on stays unsaid */
    return rc;
}

int pft_node__rule_matrix(const node_t *nd, const pft_gstat_t *st, double *r)
{
    int d = pft_gstat_dim(st);
    uint64_t N = pft_gstat_total(st);
    size_t dd = (size_t)d * d;
    /* research (stats_release = full_scatter): the exact W, as the node sends it in the clear */
    if (nd->run->stats_release == PFT_TOPO_RELEASE_FULL_SCATTER) {
        memcpy(r, pft_gstat_tied_scatter(st), dd * sizeof *r);
        add_class_moments(st, d, r);
        pft_info(
            "secure aggregation: own exact second moment, dense (stats_release = full_scatter; %llu rows)",
            (unsigned long long)N);
        return 0;
    }
    int q = pft_topo_release_rank(nd->run, N, d);
    double *c = pft_alloc_array(dd, sizeof *c), *u = pft_alloc_array((size_t)d * (q + 1), sizeof *u),
           *psi = pft_alloc_array((size_t)d, sizeof *psi);
    int rc =
        c && u && psi ? 0 : pft_err(PFT_ENOMEM, "out of memory for the release of a %d×%d scatter", d, d);
    const double *w = pft_gstat_tied_scatter(st);
    for (size_t i = 0; rc == 0 && i < dd; i++)
        c[i] = N ? w[i] / (double)N : 0.0;
    if (rc == 0)
        rc = rule_factor(c, d, q, u, psi);
    if (rc == 0)
        pft_gstat_lowrank_expand(u, psi, d, q, r);
    for (size_t i = 0; rc == 0 && i < dd; i++)
        r[i] *= (double)N;
    if (rc == 0)
        add_class_moments(st, d, r);
    pft_free(c);
    pft_free(u);
    pft_free(psi);
    if (rc == 0)
        pft_info("secure aggregation: own second moment at the release rule's rank %d (%llu rows)", q,
                 (unsigned long long)N);
    return rc;
}

/* 1 when part i of b holds a contributor with a DP guarantee (a release of sums: means only). */
static int part_has_dp(const pft_bundle_t *b, int i)
{
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++)
        for (int e = 0; e < pft_bundle_prov_n_nodes(b); e++) {
            double eps, delta;
            if (strcmp(pft_bundle_prov_node(b, e), pft_bundle_part_contributor(b, i, j)) == 0 &&
                pft_bundle_prov_dp(b, e, &eps, &delta))
                return 1;
        }
    return 0;
}

/* The outbound bundle's parts at the rule's rank. A part holding a DP release of sums is means only: its
 * (zero) scatter travels as rank 0, i.e. one number; a masked part had the rule applied before masking. */
static int rule_bundle(node_t *nd, pft_node__release_t *r)
{
    pft_bundle_t *b = r->b;
    int d = pft_bundle_dim(b), np = pft_bundle_n_parts(b), qmax = 0, rc = 0;
    int dense = nd->run->stats_release == PFT_TOPO_RELEASE_FULL_SCATTER;
    if (dense || np == 0 || pft_bundle_part_kind(b, 0) != PFT_GSTAT_TIED)
        return pft_bundle_set_shared_rank(b, 0);
    for (int i = 0; rc == 0 && i < np; i++) {
        if (pft_bundle_part_is_masked(b, i)) {
            pft_info("release: part %d (%d contributor(s)) masked for '%s'", i,
                     pft_bundle_part_n_contributors(b, i), pft_bundle_part_mask(b, i)->opener);
            continue;
        }
        uint64_t rows = pft_gstat_total(pft_bundle_part_stats(b, i));
        int q = part_has_dp(b, i) ? 0 : pft_topo_release_rank(nd->run, rows, d);
        qmax = q > qmax ? q : qmax;
        rc = pft_bundle_set_part_rank_cap(b, i, q);
        pft_info("release: part %d (%llu rows, %d contributor(s)): shared scatter as %s %d%s", i,
                 (unsigned long long)rows, pft_bundle_part_n_contributors(b, i),
                 q ? "rank" : "isotropic, rank", q, q ? " + diagonal" : "");
    }
    return rc ? rc : pft_bundle_set_shared_rank(b, qmax > 0 ? qmax : 1);
}

/* Every exact release goes by the rule; a bundle of GMMs (the sampling method) carries no shared scatter. */
static int rule_applies(const node_t *nd)
{
    return nd->me->exact;
}

const pft_node_step_t pft_node__step_rule = {
    .name = "rule",
    .applies = rule_applies,
    .bundle = rule_bundle,
};
