/* pft_node_plausible: what a received statistics bundle may claim (issue 20, DESIGN.md §10), checked at the
 * inbox before the ACK, so that an implausible bundle is refused with its reason (counted in refusals)
 * instead of being acknowledged and then failing or skewing the node: every contributor and provenance entry
 * is a node of the topology other than this one (a complete bundle may include it), a part's class count
 * equals its contributors' provenance counts and stays within the rows the topology's partition gives them
 * (where it is known: `samples`), and with row-normalising prep (l2, sqrt-l2: ‖x‖ = 1) no class mean is
 * longer than 1 and no scatter's trace exceeds its rows (Σ‖x − μ‖² ≤ n). Parts whose contributors released
 * with DP carry noise by design and skip the norm checks. */
#include "pft_node_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SLACK 1e-3 /* relative, for fp16 statistics and rounding */

/* The topology node named id, if it may contribute to a bundle sent to this node; else NULL with reason. */
static const pft_topo_node_t *contributor(const node_t *nd, const char *id, int complete, char *reason,
                                          size_t rlen)
{
    const pft_topo_node_t *t = pft_topo_find(nd->topo, id);
    if (!t)
        snprintf(reason, rlen,
                 "implausible statistics: counts rows of '%s', which is not a node of this topology", id);
    else if (t->index == nd->my_index && !complete)
        snprintf(reason, rlen, "implausible statistics: claims rows of node '%s' itself", id);
    else
        return t;
    return NULL;
}

/* 1 if part i's contributors all released with DP (their noise is part of the statistics). */
static int part_dp(const pft_bundle_t *b, int i)
{
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++) {
        const char *id = pft_bundle_part_contributor(b, i, j);
        int dp = 0;
        for (int e = 0; e < pft_bundle_prov_n_nodes(b); e++) {
            double eps, delta;
            if (strcmp(pft_bundle_prov_node(b, e), id) == 0)
                dp = pft_bundle_prov_dp(b, e, &eps, &delta);
        }
        if (!dp)
            return 0;
    }
    return 1;
}

/* Trace of a d×d matrix. */
static double trace(const double *m, int d)
{
    double t = 0;
    for (int k = 0; k < d; k++)
        t += m[(size_t)k * d + k];
    return t;
}

/* Part i's counts against its contributors' provenance and partition; means and scatters against unit rows.
 */
/* A masked part (secure aggregation): its counts against its contributors' partition, and its mask against
 * this node's plan (the group's label and opener, this run's class layout), so that a part that could never
 * open is refused before the ACK. Its words are uniform: nothing else can be checked before opening. */
static int check_masked(const node_t *nd, const pft_bundle_t *b, int i, uint64_t cap, int known, char *reason,
                        size_t rlen)
{
    const pft_bundle_mask_t *m = pft_bundle_part_mask(b, i);
    if (!nd->sec.plan)
        return snprintf(reason, rlen, "a masked part, but this run has secure_agg = off"), 1;
    if (!nd->sec.opener || strcmp(m->opener, nd->sec.opener) != 0 || strcmp(m->label, nd->sec.label) != 0)
        return snprintf(reason, rlen, "a masked part for opener '%s' (label '%s'), not this plan's '%s'",
                        m->opener, m->label, nd->sec.opener ? nd->sec.opener : "(none)"),
               1;
    if (m->div != nd->sec.div)
        return snprintf(reason, rlen, "a masked part with DP noise divisor %u; this plan's is %u", m->div,
                        nd->sec.div),
               1;
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++) {
        const char *who = pft_bundle_part_contributor(b, i, j);
        size_t k = 0;
        while (k < nd->sec.n_members && strcmp(pft_topo_node(nd->topo, nd->sec.members[k])->id, who) != 0)
            k++;
        if (k == nd->sec.n_members)
            return snprintf(reason, rlen, "a masked part counts '%s', not a member of the group opened by '%s'",
                            who, nd->sec.opener),
                   1;
    }
    if (pft_bundle_part_kind(b, i) != PFT_GSTAT_TIED || pft_bundle_part_n_classes(b, i) != nd->n_classes)
        return snprintf(reason, rlen, "a masked part of %d classes; this run masks tied statistics of %d",
                        pft_bundle_part_n_classes(b, i), nd->n_classes),
               1;
    for (int k = 0; k < pft_bundle_part_n_classes(b, i); k++) {
        int label;
        uint64_t n;
        pft_bundle_part_class(b, i, k, &label, &n);
        if (label != k)
            return snprintf(reason, rlen, "a masked part's class %d has label %d", k, label), 1;
        if (known && n > cap)
            return snprintf(reason, rlen,
                            "implausible statistics: class %d counts %llu rows, more than the %llu "
                            "its contributors hold (samples)",
                            label, (unsigned long long)n, (unsigned long long)cap),
                   1;
    }
    return 0;
}

static int check_part(const node_t *nd, const pft_bundle_t *b, int i, int unit, char *reason, size_t rlen)
{
    const pft_gstat_t *st = pft_bundle_part_stats(b, i); /* NULL: masked */
    int nw = pft_bundle_part_n_contributors(b, i), d = st ? pft_gstat_dim(st) : 0, dp = part_dp(b, i);
    uint64_t cap = 0;
    int known = 1;
    for (int j = 0; j < nw; j++) {
        const pft_topo_node_t *t = pft_topo_find(nd->topo, pft_bundle_part_contributor(b, i, j));
        known &= t && t->samples > 0;
        cap += t && t->samples > 0 ? (uint64_t)t->samples : 0;
    }
    if (!st)
        return check_masked(nd, b, i, cap, known, reason, rlen);
    for (int k = 0; k < pft_gstat_n_classes(st); k++) {
        int label = pft_gstat_label(st, k);
        uint64_t n = pft_gstat_count(st, k); /* equal to its contributors' provenance (the decoder checks) */
        if (known && n > cap)
            return snprintf(reason, rlen,
                            "implausible statistics: class %d counts %llu rows, more than the %llu "
                            "its contributors hold (samples)",
                            label, (unsigned long long)n, (unsigned long long)cap),
                   1;
        const double *mu = pft_gstat_mean(st, k);
        double m2 = 0;
        for (int c = 0; c < d; c++)
            m2 += mu[c] * mu[c];
        if (unit && !dp && sqrt(m2) > 1 + SLACK)
            return snprintf(reason, rlen,
                            "implausible statistics: class %d's mean has norm %.4g; rows of norm 1 "
                            "cannot average to more than 1",
                            label, sqrt(m2)),
                   1;
        const double *s = pft_gstat_kind(st) == PFT_GSTAT_FULL ? pft_gstat_scatter(st, k) : NULL;
        if (unit && !dp && s && trace(s, d) > (double)n * (1 + SLACK))
            return snprintf(reason, rlen,
                            "implausible statistics: class %d's scatter has trace %.4g, more than "
                            "its %llu rows of norm 1 allow",
                            label, trace(s, d), (unsigned long long)n),
                   1;
    }
    const double *w = pft_gstat_kind(st) == PFT_GSTAT_TIED ? pft_gstat_tied_scatter(st) : NULL;
    if (unit && !dp && w && trace(w, d) > (double)pft_gstat_total(st) * (1 + SLACK))
        return snprintf(reason, rlen,
                        "implausible statistics: the shared scatter has trace %.4g, more than its "
                        "%llu rows of norm 1 allow",
                        trace(w, d), (unsigned long long)pft_gstat_total(st)),
               1;
    return 0;
}

int pft_node__plausible(const node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen)
{
    int complete = (pft_bundle_flags(b) & PFT_BUNDLE_COMPLETE) != 0;
    for (int e = 0; e < pft_bundle_prov_n_nodes(b); e++)
        if (!contributor(nd, pft_bundle_prov_node(b, e), complete, reason, rlen))
            return 0;
    if (!pft_bundle_is_stats(b))
        return 1;
    int unit = nd->run->prep == PFT_TOPO_PREP_L2 || nd->run->prep == PFT_TOPO_PREP_SQRT_L2;
    for (int i = 0; i < pft_bundle_n_parts(b); i++) {
        for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++)
            if (!contributor(nd, pft_bundle_part_contributor(b, i, j), complete, reason, rlen))
                return 0;
        if (check_part(nd, b, i, unit, reason, rlen))
            return 0;
    }
    return 1;
}
