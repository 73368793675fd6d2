/* pft_node_plausible: what a received bundle may claim (DESIGN.md §9, §12; SECURITY.md §7.1), checked at
 * the inbox before the ACK, so that an implausible bundle is refused with its reason (counted in refusals)
 * instead of being acknowledged and then failing or skewing the node:
 * - every contributor and provenance entry is a node of the topology other than this one (a complete bundle
 *   may include it), and counts no more rows than the topology gives that node (`rows`, else `samples`;
 *   none for a node with data = false; no cap where neither is given);
 * - a DP claim in provenance only where the topology gives that node DP with the same (ε, δ) (δ is explicit
 *   in the topology, never derived from rows: the rule dp-delta);
 * - with row-normalising prep (l2, sqrt-l2: ‖x‖ = 1) no class mean is longer than 1 and no scatter's trace
 *   exceeds its rows, and the two together fit: Σ‖x‖² = tr M + n‖μ‖² ≤ n per class (the shared scatter with
 *   all classes: tr W + Σ_c n_c‖μ_c‖² ≤ N). A part with DP contributors carries their noise: its bounds
 *   grow by what their claimed (ε, δ) imply, at most the noise an honest release exceeds with probability
 *   FAIL_P per bundle (a union bound over its checks; the derivation is in SECURITY.md §7.1).
 * The opened sum of a secure-aggregation group is checked by the same rules before the opener uses it. */
#include "pft_node_internal.h"

#include "pft_gstat_dp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SLACK 1e-3  /* relative, for fp16 statistics and rounding */
#define FAIL_P 1e-9 /* most probability that an honest noisy bundle is refused (union bound) */
#define DP_REL 1e-9 /* relative tolerance between a claimed (ε, δ) and the topology's (both binary64) */

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

/* The public cap on node t's rows: `rows`, else `samples` (a simulation's draw), the smaller where both are
 * given; 0 for a node without data. -1: no cap known. */
static int64_t row_cap(const pft_topo_node_t *t)
{
    if (!t->has_data)
        return 0;
    int64_t cap = t->rows > 0 ? t->rows : -1;
    if (t->samples > 0 && (cap < 0 || t->samples < cap))
        cap = t->samples;
    return cap;
}

static int same(double a, double b)
{
    return fabs(a - b) <= DP_REL * fabs(b);
}

/* Provenance entry e against the topology: its rows within the node's cap, its DP claim (if any) the
 * topology's. 0, or 1 with reason. */
static int check_entry(const node_t *nd, const pft_bundle_t *b, int e, char *reason, size_t rlen)
{
    const char *id = pft_bundle_prov_node(b, e);
    const pft_topo_node_t *t = pft_topo_find(nd->topo, id); /* a node of the topology (checked) */
    uint64_t total = 0;
    for (int j = 0; j < pft_bundle_prov_n_labels(b, e); j++) {
        int label;
        uint64_t n;
        pft_bundle_prov_entry(b, e, j, &label, &n);
        total = n > UINT64_MAX - total ? UINT64_MAX : total + n;
    }
    int64_t cap = row_cap(t);
    if (cap >= 0 && total > (uint64_t)cap)
        return snprintf(reason, rlen,
                        "implausible statistics: provenance counts %llu rows of '%s', more than the %lld the "
                        "topology gives it (rows)",
                        (unsigned long long)total, id, (long long)cap),
               1;
    double eps, delta;
    if (!pft_bundle_prov_dp(b, e, &eps, &delta))
        return 0;
    if (!(t->dp_epsilon > 0))
        return snprintf(reason, rlen,
                        "implausible DP claim: '%s' claims (epsilon %g, delta %g), but the topology gives it "
                        "no DP",
                        id, eps, delta),
               1;
    double want = t->dp_delta; /* explicit, 0 < δ < 1 (the rule dp-delta), for every kind of bundle */
    if (!same(eps, t->dp_epsilon) || !same(delta, want))
        return snprintf(reason, rlen,
                        "implausible DP claim: '%s' claims (epsilon %g, delta %g); the topology gives (%g, "
                        "%g)",
                        id, eps, delta, t->dp_epsilon, want),
               1;
    return 0;
}

/* Σ σ_k² over part i's contributors that claim DP (claims already matched to the topology): the noise
 * variance per entry of its summed sums (and, FULL, second moments), σ at the part's form. 0: exact. */
static double part_noise(const pft_bundle_t *b, int i, pft_gstat_kind_t kind)
{
    double var = 0;
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++) {
        const char *id = pft_bundle_part_contributor(b, i, j);
        for (int e = 0; e < pft_bundle_prov_n_nodes(b); e++) {
            double eps, delta;
            if (strcmp(pft_bundle_prov_node(b, e), id) != 0 || !pft_bundle_prov_dp(b, e, &eps, &delta) ||
                !(delta > 0 && delta < 1))
                continue;
            double s =
                kind == PFT_GSTAT_TIED ? pft_gstat_dp_sigma_sums(eps, delta) : pft_gstat_dp_sigma(eps, delta);
            var += isnan(s) ? 0.0 : s * s;
        }
    }
    return var;
}

/* Laurent & Massart (2000): P(χ²_k ≥ k + 2√(k x) + 2x) ≤ e^{−x}. */
static double chi2_bound(double k, double x)
{
    return k + 2 * sqrt(k * x) + 2 * x;
}

/* Trace of a d×d matrix. */
static double trace(const double *m, int d)
{
    double t = 0;
    for (int k = 0; k < d; k++)
        t += m[(size_t)k * d + k];
    return t;
}

/* A masked part (secure aggregation): its counts against its contributors' public rows, and its mask against
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
            return snprintf(reason, rlen,
                            "a masked part counts '%s', not a member of the group opened by '%s'", who,
                            nd->sec.opener),
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
                            "the topology gives its contributors (rows)",
                            label, (unsigned long long)n, (unsigned long long)cap),
                   1;
    }
    return 0;
}

/* Class k of part st (noise variance var per entry of its sums, x the union bound's exponent) against rows
 * of norm 1: its mean, and (FULL) its scatter's trace and, exact, the two together. 0, or 1 with reason. */
static int check_class(const pft_gstat_t *st, int k, double var, double x, char *reason, size_t rlen)
{
    int label = pft_gstat_label(st, k), d = pft_gstat_dim(st);
    uint64_t n = pft_gstat_count(st, k);
    double nn = n ? (double)n : 1.0, m2 = 0;
    const double *mu = pft_gstat_mean(st, k);
    for (int c = 0; c < d; c++)
        m2 += mu[c] * mu[c];
    /* ‖s + z‖/n ≤ 1 + ‖z‖/n, ‖z‖² ≤ var·χ²_d */
    double lim = 1 + SLACK + (var > 0 ? sqrt(var * chi2_bound(d, x)) / nn : 0);
    if (sqrt(m2) > lim)
        return snprintf(reason, rlen,
                        "implausible statistics: class %d's mean has norm %.4g; rows of norm 1%s cannot "
                        "average to more than %.4g",
                        label, sqrt(m2), var > 0 ? " and their DP noise" : "", lim),
               1;
    const double *s = pft_gstat_kind(st) == PFT_GSTAT_FULL ? pft_gstat_scatter(st, k) : NULL;
    if (!s)
        return 0;
    /* tr P(S2 + Z − nμμᵀ) ≤ tr S2 + Σλ⁺(Z) ≤ n + √d‖Z‖_F, ‖Z‖_F² ≤ 2 var χ²_{d(d+1)/2} */
    double t = trace(s, d), dd = (double)d,
           tlim = nn * (1 + SLACK) + (var > 0 ? sqrt(dd * 2 * var * chi2_bound(dd * (dd + 1) / 2, x)) : 0);
    if (t > tlim)
        return snprintf(reason, rlen,
                        "implausible statistics: class %d's scatter has trace %.4g, more than its %llu rows "
                        "of norm 1%s allow (%.4g)",
                        label, t, (unsigned long long)n, var > 0 ? " and their DP noise" : "", tlim),
               1;
    if (var == 0 && t + nn * m2 > nn * (1 + 2 * SLACK))
        return snprintf(reason, rlen,
                        "implausible statistics: class %d's scatter trace %.4g and mean norm %.4g give its "
                        "%llu rows a total squared norm of %.4g; rows of norm 1 give %llu",
                        label, t, sqrt(m2), (unsigned long long)n, t + nn * m2, (unsigned long long)n),
               1;
    return 0;
}

/* The shared scatter W of an exact TIED part against rows of norm 1: tr W ≤ N and tr W + Σ_c n_c‖μ_c‖² ≤ N
 * (a noisy TIED part travels as means only, its W unused: SECURITY.md §6). 0, or 1 with reason. */
static int check_shared(const pft_gstat_t *st, char *reason, size_t rlen)
{
    int d = pft_gstat_dim(st);
    double N = (double)pft_gstat_total(st), t = trace(pft_gstat_tied_scatter(st), d), sq = 0;
    if (t > N * (1 + SLACK))
        return snprintf(
                   reason, rlen,
                   "implausible statistics: the shared scatter has trace %.4g, more than its %.0f rows of "
                   "norm 1 allow",
                   t, N),
               1;
    for (int k = 0; k < pft_gstat_n_classes(st); k++) {
        const double *mu = pft_gstat_mean(st, k);
        for (int c = 0; c < d; c++)
            sq += (double)pft_gstat_count(st, k) * mu[c] * mu[c];
    }
    if (t + sq > N * (1 + 2 * SLACK))
        return snprintf(reason, rlen,
                        "implausible statistics: the shared scatter's trace %.4g and the class means' "
                        "Σ n‖μ‖² %.4g give %.0f rows a total squared norm of %.4g; rows of norm 1 give %.0f",
                        t, sq, N, t + sq, N),
               1;
    return 0;
}

/* Part i: counts within its contributors' caps; with unit rows, its means and scatters (x: the union bound's
 * exponent for noisy parts). 0, or 1 with reason. */
static int check_part(const node_t *nd, const pft_bundle_t *b, int i, int unit, double x, char *reason,
                      size_t rlen)
{
    const pft_gstat_t *st = pft_bundle_part_stats(b, i); /* NULL: masked */
    uint64_t cap = 0;
    int known = 1;
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++) {
        const pft_topo_node_t *t = pft_topo_find(nd->topo, pft_bundle_part_contributor(b, i, j));
        int64_t c = t ? row_cap(t) : -1;
        known &= c >= 0;
        cap += c > 0 ? (uint64_t)c : 0;
    }
    if (!st)
        return check_masked(nd, b, i, cap, known, reason, rlen);
    double var = part_noise(b, i, pft_gstat_kind(st));
    for (int k = 0; k < pft_gstat_n_classes(st); k++) {
        uint64_t n = pft_gstat_count(st, k); /* equal to its contributors' provenance (the decoder checks) */
        if (known && n > cap)
            return snprintf(reason, rlen,
                            "implausible statistics: class %d counts %llu rows, more than the %llu "
                            "the topology gives its contributors (rows)",
                            pft_gstat_label(st, k), (unsigned long long)n, (unsigned long long)cap),
                   1;
        if (unit && check_class(st, k, var, x, reason, rlen))
            return 1;
    }
    if (unit && var == 0 && pft_gstat_kind(st) == PFT_GSTAT_TIED && check_shared(st, reason, rlen))
        return 1;
    return 0;
}

/* The opened sum of a masked group (st: its statistics after opening, members[0..n) the members whose parts
 * it sums, var the DP noise variance per entry it carries, 0 without DP), with a clear part's rules: class
 * counts within the members' public rows; with unit rows, each class mean against rows of norm 1 (and their
 * noise), and the shared scatter: exact, tr W ≤ N and tr W + Σ n‖μ‖² ≤ N; noisy (W the PSD projection of
 * S2 + Z − Σ n μμᵀ), tr W ≤ N + √(2d·var·q_D(x)) as a FULL class's (SECURITY.md §7.1). */
int pft_node__plausible_opened(const node_t *nd, const pft_gstat_t *st, const size_t *members, size_t n,
                               double var, char *reason, size_t rlen)
{
    uint64_t cap = 0;
    int known = 1, K = pft_gstat_n_classes(st), d = pft_gstat_dim(st);
    for (size_t j = 0; j < n; j++) {
        int64_t c = row_cap(pft_topo_node(nd->topo, members[j]));
        known &= c >= 0;
        cap += c > 0 ? (uint64_t)c : 0;
    }
    int unit = nd->run->prep == PFT_TOPO_PREP_L2 || nd->run->prep == PFT_TOPO_PREP_SQRT_L2;
    double x = log((2.0 * K + 1) / FAIL_P);
    for (int k = 0; k < K; k++) {
        if (known && pft_gstat_count(st, k) > cap)
            return snprintf(reason, rlen,
                            "implausible statistics: class %d counts %llu rows, more than the %llu the "
                            "topology gives the members (rows)",
                            pft_gstat_label(st, k), (unsigned long long)pft_gstat_count(st, k),
                            (unsigned long long)cap),
                   1;
        if (unit && check_class(st, k, var, x, reason, rlen))
            return 1;
    }
    if (!unit || pft_gstat_kind(st) != PFT_GSTAT_TIED)
        return 0;
    if (var == 0)
        return check_shared(st, reason, rlen);
    double N = (double)pft_gstat_total(st), t = trace(pft_gstat_tied_scatter(st), d), dd = (double)d,
           tlim = N * (1 + SLACK) + sqrt(dd * 2 * var * chi2_bound(dd * (dd + 1) / 2, x));
    if (t > tlim)
        return snprintf(
                   reason, rlen,
                   "implausible statistics: the shared scatter has trace %.4g, more than its %.0f rows of "
                   "norm 1 and their DP noise allow (%.4g)",
                   t, N, tlim),
               1;
    return 0;
}

int pft_node__plausible(const node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen)
{
    int complete = (pft_bundle_flags(b) & PFT_BUNDLE_COMPLETE) != 0;
    for (int e = 0; e < pft_bundle_prov_n_nodes(b); e++)
        if (!contributor(nd, pft_bundle_prov_node(b, e), complete, reason, rlen) ||
            check_entry(nd, b, e, reason, rlen))
            return 0;
    if (!pft_bundle_is_stats(b))
        return 1;
    int unit = nd->run->prep == PFT_TOPO_PREP_L2 || nd->run->prep == PFT_TOPO_PREP_SQRT_L2;
    double checks = 0; /* the noise-derived bounds tested (at most two per class), for the union bound */
    for (int i = 0; i < pft_bundle_n_parts(b); i++)
        checks += pft_bundle_part_stats(b, i) ? 2.0 * pft_gstat_n_classes(pft_bundle_part_stats(b, i)) : 0;
    double x = log((checks > 1 ? checks : 1) / FAIL_P);
    for (int i = 0; i < pft_bundle_n_parts(b); i++) {
        for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++)
            if (!contributor(nd, pft_bundle_part_contributor(b, i, j), complete, reason, rlen))
                return 0;
        if (check_part(nd, b, i, unit, x, reason, rlen))
            return 0;
    }
    return 1;
}
