/* pft_node_parts: exact statistics as parts, each standing for a known set of contributors (DESIGN.md §8):
 * taken once per contributor (a part that overlaps what is counted without being contained in it is
 * refused), folded per group of the plan (pft_topo_part_groups) as they arrive, merged for the head and
 * written into the outbound bundle, one part per group. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fixed.h"
#include "pft_gstat_dp.h"
#include "pft_log.h"

#include <math.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

/* An empty set of parts for nd: groups computed; 0 or an error. */
int pft_node__parts_init(const node_t *nd, parts_t *ps)
{
    size_t n = pft_topo_node_count(nd->topo);
    memset(ps, 0, sizeof *ps);
    ps->n_nodes = n;
    ps->covered = pft_calloc(n, 1);
    ps->grp = pft_alloc_array(n, sizeof *ps->grp);
    ps->acc = pft_calloc(n, sizeof *ps->acc);
    ps->noisy = pft_calloc(n, 1);
    ps->nvar = pft_calloc(n * (size_t)(nd->n_classes > 0 ? nd->n_classes : 1), sizeof *ps->nvar);
    if (!ps->covered || !ps->grp || !ps->acc || !ps->noisy || !ps->nvar)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (nd->sec.plan) { /* secure aggregation: room for the masked sums, one per group */
        ps->n_words = pft_bundle_masked_words(PFT_GSTAT_TIED, nd->n_classes, pft_dataset_d(nd->train));
        ps->mw = pft_calloc(n, sizeof *ps->mw);
        ps->mbound = pft_calloc(n, sizeof *ps->mbound);
        ps->mcount = pft_calloc(n * (size_t)(nd->n_classes > 0 ? nd->n_classes : 1), sizeof *ps->mcount);
        if (!ps->mw || !ps->mbound || !ps->mcount || ps->n_words == 0)
            return pft_err(PFT_ENOMEM, "out of memory");
    }
    return pft_topo_part_groups(nd->topo, nd->my_index, ps->grp);
}

void pft_node__parts_free(parts_t *ps)
{
    for (int i = 0; i < ps->n; i++) {
        pft_gstat_destroy(&ps->p[i].st);
        pft_free(ps->p[i].who);
    }
    for (size_t g = 0; ps->acc && g < ps->n_nodes; g++)
        pft_gstat_destroy(&ps->acc[g]);
    for (size_t g = 0; ps->mw && g < ps->n_nodes; g++)
        pft_free(ps->mw[g]);
    PFT_FREE(ps->mw);
    PFT_FREE(ps->mbound);
    PFT_FREE(ps->mcount);
    PFT_FREE(ps->p);
    PFT_FREE(ps->covered);
    PFT_FREE(ps->grp);
    PFT_FREE(ps->acc);
    PFT_FREE(ps->noisy);
    PFT_FREE(ps->nvar);
    ps->n = ps->cap = 0;
}

pft_gstat_kind_t pft_node__parts_kind(const node_t *nd)
{
    return nd->me->cov == PFT_COV_TIED ? PFT_GSTAT_TIED : PFT_GSTAT_FULL;
}

/* The statistics a part stands for. */
const pft_gstat_t *pft_node__parts_stats(const part_t *p)
{
    return p->st ? p->st : p->view;
}

/* Takes *st (owned; on success) or view (borrowed; st NULL) as a part of contributors who[0..n); refuses a
 * part that overlaps what is already counted without being contained in it; skips one that is wholly counted
 * (returns 1). */
int pft_node__parts_take(parts_t *ps, pft_gstat_t **st, const pft_gstat_t *view, const size_t *who, int n_who,
                         const pft_bundle_t *b, const char *from)
{
    int seen = 0;
    for (int i = 0; i < n_who; i++)
        seen += ps->covered[who[i]];
    if (seen == n_who)
        return 1;
    if (seen > 0)
        return pft_err(
            PFT_EINVAL,
            "a part of %s's bundle sums %d contributors of which %d are already counted: it cannot be "
            "split, so taking it would count rows twice (does the sender use this topology?)",
            from, n_who, seen);
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 8;
        part_t *np = pft_realloc(ps->p, (size_t)cap * sizeof *np);
        if (!np)
            return pft_err(PFT_ENOMEM, "out of memory");
        ps->p = np;
        ps->cap = cap;
    }
    part_t *p = &ps->p[ps->n];
    p->who = pft_alloc_array((size_t)n_who, sizeof *p->who);
    if (!p->who)
        return pft_err(PFT_ENOMEM, "out of memory");
    memcpy(p->who, who, (size_t)n_who * sizeof *who);
    p->n_who = n_who;
    p->b = b;
    p->st = st ? *st : NULL;
    p->view = st ? NULL : view;
    p->merged = 0;
    p->exact_rows = 0;
    p->floor_rows = 0;
    p->floor_rest = 0;
    p->masked = 0;
    p->group = -1;
    if (st)
        *st = NULL;
    for (int i = 0; i < n_who; i++)
        ps->covered[who[i]] = 1;
    ps->n++;
    return 0;
}

/* Node indices of names; PFT_EINVAL for a name that is not a node of the topology. */
static int indices_of(const node_t *nd, const char *const *names, int n, size_t *out, const char *from)
{
    for (int i = 0; i < n; i++) {
        const pft_topo_node_t *t = pft_topo_find(nd->topo, names[i]);
        if (!t)
            return pft_err(PFT_EINVAL,
                           "%s's bundle counts rows of '%s', which is not a node of this topology", from,
                           names[i]);
        out[i] = t->index;
    }
    return 0;
}

int pft_node__parts_take_masked(const node_t *nd, parts_t *ps, const size_t *who, int n_who,
                                const pft_bundle_t *b, const uint64_t *words, const uint64_t *counts,
                                double bound, const char *from)
{
    long g = ps->grp[who[0]];
    if (!ps->mw)
        return pft_err(PFT_EINVAL, "%s sent a masked part, but this run has secure_agg = off", from);
    if (g < 0)
        return pft_err(PFT_EINVAL, "a masked part counts rows of '%s', which cannot reach this node",
                       pft_topo_node(nd->topo, who[0])->id);
    int rc = pft_node__parts_take(ps, NULL, NULL, who, n_who, b, from);
    if (rc != 0)
        return rc;
    part_t *p = &ps->p[ps->n - 1];
    p->masked = 1;
    p->group = g;
    if (!ps->mw[g] && !(ps->mw[g] = pft_calloc(ps->n_words, sizeof *ps->mw[g])))
        return pft_err(PFT_ENOMEM, "out of memory for a masked sum of %zu words", ps->n_words);
    pft_fixed_add(ps->mw[g], words, ps->n_words);
    ps->mbound[g] += bound;
    for (int c = 0; c < nd->n_classes; c++)
        ps->mcount[(size_t)g * nd->n_classes + c] += counts[c];
    return 0;
}

/* Takes masked part i of b (secure aggregation): its layout must be this run's (TIED, every class 0..K-1)
 * and its mask this node's plan's (the group's label and opener); its words are summed, never read. */
static int take_masked_part(node_t *nd, parts_t *ps, const pft_bundle_t *b, int i, const size_t *who, int nw,
                            const pft_bundle_t *prov, const char *from)
{
    const pft_bundle_mask_t *m = pft_bundle_part_mask(b, i);
    size_t n = 0;
    const uint64_t *w = pft_bundle_part_words(b, i, &n);
    int K = nd->n_classes, ok = pft_bundle_part_kind(b, i) == PFT_GSTAT_TIED &&
                                pft_bundle_part_n_classes(b, i) == K && n == ps->n_words;
    uint64_t *counts = pft_calloc((size_t)K + 1, sizeof *counts);
    if (!counts)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int k = 0; ok && k < K; k++) {
        int label;
        pft_bundle_part_class(b, i, k, &label, &counts[k]);
        ok = label == k;
    }
    int rc = 0;
    if (!ok)
        rc = pft_err(PFT_EINVAL,
                     "%s's masked part %d does not have this run's layout (tied, classes 0..%d, %zu words): "
                     "every member must mask the same classes",
                     from, i, K - 1, ps->n_words);
    else if (!nd->sec.opener || strcmp(m->label, nd->sec.label) != 0 ||
             strcmp(m->opener, nd->sec.opener) != 0)
        rc = pft_err(PFT_EINVAL,
                     "%s's masked part %d is masked for '%s' (label '%s'), not for this plan's "
                     "opener '%s'",
                     from, i, m->opener, m->label, nd->sec.opener ? nd->sec.opener : "(none)");
    if (rc == 0 && nd->dm.victim && nw == 1 && (long)who[0] + 1 == nd->dm.victim && !nd->dm.victim_words) {
        /* tests (PFT_TEST_LIAR_*): a lying opener keeps the victim's words aside and declares it missing */
        nd->dm.victim_words = pft_alloc_array(n, sizeof *w);
        nd->dm.victim_bound = (double)m->bound;
        if (nd->dm.victim_words)
            memcpy(nd->dm.victim_words, w, n * sizeof *w);
        pft_free(counts);
        return 0;
    }
    if (rc == 0)
        rc = pft_node__parts_take_masked(nd, ps, who, nw, prov, w, counts, (double)m->bound, from);
    pft_free(counts);
    return rc;
}

/* The parts of a received bundle: its statistics parts, or one FULL part of a mixture bundle's moments. mine
 * (NULL, or b itself: a bundle decoded for this call, destroyed after it) hands its parts' statistics over,
 * so that the fold moves them instead of copying them. */
int pft_node__parts_take_bundle(node_t *nd, parts_t *ps, const pft_bundle_t *b, pft_bundle_t *mine,
                                const pft_bundle_t *prov)
{
    const char *from = pft_bundle_producer(b);
    int np = pft_bundle_prov_n_nodes(b), rc = 0;
    size_t *who = pft_alloc_array((size_t)(np > 0 ? np : 1), sizeof *who);
    const char **names = pft_alloc_array((size_t)(np > 0 ? np : 1), sizeof *names);
    if (!who || !names) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    if (!pft_bundle_is_stats(
            b)) { /* a mixture bundle: its classes' exact moments, all contributors together */
        pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_FULL, pft_bundle_dim(b));
        rc = st ? 0 : PFT_ENOMEM;
        for (int ci = 0; rc == 0 && ci < pft_bundle_n_classes(b); ci++)
            rc = pft_gstat_add_gmm(st, pft_bundle_class_gmm(b, ci), pft_bundle_class_label(b, ci),
                                   pft_bundle_class_count(b, ci));
        for (int i = 0; i < np; i++)
            names[i] = pft_bundle_prov_node(b, i);
        if (rc == 0 && (rc = indices_of(nd, names, np, who, from)) == 0)
            rc = pft_node__parts_take(ps, &st, NULL, who, np, prov, from);
        pft_gstat_destroy(&st);
        rc = rc == 1 ? 0 : rc;
        goto done;
    }
    for (int i = 0; rc == 0 && i < pft_bundle_n_parts(b); i++) {
        int nw = pft_bundle_part_n_contributors(b, i);
        for (int j = 0; j < nw && j < np; j++)
            names[j] = pft_bundle_part_contributor(b, i, j);
        if (nw > np) {
            rc = pft_err(PFT_EINVAL, "%s's bundle: a part has more contributors than its provenance", from);
            break;
        }
        if ((rc = indices_of(nd, names, nw, who, from)) != 0)
            break;
        pft_gstat_t *st = NULL;
        if (pft_bundle_part_is_masked(b, i))
            rc = take_masked_part(nd, ps, b, i, who, nw, prov, from);
        else if (mine == b && (rc = pft_bundle_take_part_stats(mine, i, &st)) == 0)
            rc = pft_node__parts_take(ps, &st, NULL, who, nw, prov, from);
        else if (mine != b)
            rc = pft_node__parts_take(ps, NULL, pft_bundle_part_stats(b, i), who, nw, prov, from);
        pft_gstat_destroy(&st); /* a part wholly counted already */
        rc = rc == 1 ? 0 : rc;
    }
done:
    pft_free(who);
    pft_free(names);
    return rc;
}

/* Merges the statistics of every received part not merged yet into its group's accumulator (memory: the
 * parts of a decoded bundle are folded before the next bundle is decoded). The parts keep their contributors
 * and provenance. */
int pft_node__parts_fold(const node_t *nd, parts_t *ps, int any_group)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < ps->n; i++) {
        part_t *p = &ps->p[i];
        if (p->merged || !p->b || p->exact_rows || p->masked) /* own rows stay apart (floor, DP, the head's
                                                                  exact copy); masked parts are summed */
            continue;
        long g = ps->grp[p->who[0]];
        if (g < 0 && any_group) /* a complete bundle (no outbound parts): a slot of its own, for the head */
            g = (long)p->who[0];
        if (g < 0)
            return pft_err(PFT_EINVAL, "a received part counts rows of '%s', which cannot reach this node",
                           pft_topo_node(nd->topo, p->who[0])->id);
        if (pft_node__parts_noise(nd, p, ps->nvar + (size_t)g * nd->n_classes))
            ps->noisy[g] = 1; /* a DP release of sums: the group's scatter means nothing from here on */
        if (!ps->acc[g] && p->st && pft_gstat_kind(p->st) == PFT_GSTAT_TIED &&
            pft_gstat_tied_scatter(p->st) && pft_node__parts_kind(nd) == PFT_GSTAT_TIED) {
            rc = pft_gstat_merge_take(&ps->acc[g], &p->st); /* the first part: moved, the same numbers */
        } else {
            if (!ps->acc[g] &&
                !(ps->acc[g] = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train))))
                return pft_err(PFT_ENOMEM, "out of memory");
            rc = pft_gstat_merge(ps->acc[g], pft_node__parts_stats(p));
        }
        if (rc == 0) {
            pft_gstat_destroy(&p->st);
            p->view = NULL;
            p->merged = 1;
            p->group = g;
        }
    }
    return rc;
}

int pft_node__parts_add_withheld(const node_t *nd, pft_gstat_t *t)
{
    int n = pft_dataset_n(nd->train), m = 0;
    const int32_t *y = pft_dataset_y(nd->train);
    int *idx = pft_alloc_array((size_t)n + 1, sizeof *idx);
    if (!idx)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        if (pft_node__floor_is_withheld(&nd->know.floor, y[i]))
            idx[m++] = i;
    pft_dataset_t *w = NULL;
    int rc = m > 0 ? pft_dataset_subset(nd->train, idx, m, &w) : 0;
    if (rc == 0 && w)
        rc = pft_gstat_add_rows(t, pft_dataset_x(w), pft_dataset_y(w), (size_t)m);
    pft_dataset_destroy(&w);
    pft_free(idx);
    return rc;
}

int pft_node__parts_total(const node_t *nd, const parts_t *ps, pft_gstat_t **out)
{
    pft_gstat_t *t = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train));
    int rc = t ? 0 : PFT_ENOMEM;
    for (size_t g = 0; rc == 0 && g < ps->n_nodes; g++)
        if (ps->acc[g] && !ps->noisy[g]) /* noisy groups: the head's noisy components instead */
            rc = pft_gstat_merge(t, ps->acc[g]);
    for (int i = 0; rc == 0 && i < ps->n; i++)
        if (!ps->p[i].merged && (!ps->p[i].masked || ps->p[i].exact_rows)) /* masked: not this node's view */
            rc = ps->p[i].exact_rows
                     ? pft_gstat_add_rows(t, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                          (size_t)pft_dataset_n(nd->train))
                     : pft_gstat_merge(t, pft_node__parts_stats(&ps->p[i]));
    for (int i = 0; rc == 0 && i < ps->n; i++)
        if (ps->p[i].floor_rest)
            rc = pft_node__parts_add_withheld(nd, t);
    if (rc != 0) {
        pft_gstat_destroy(&t);
        return pft_err_wrap(rc, "merging the statistics");
    }
    *out = t;
    return 0;
}

int pft_node__parts_total_take(const node_t *nd, parts_t *ps, pft_gstat_t **out)
{
    long only = -1;
    for (size_t g = 0; g < ps->n_nodes; g++)
        if (ps->acc[g]) {
            if (only >= 0 || ps->noisy[g])
                return pft_node__parts_total(nd, ps, out);
            only = (long)g;
        }
    for (int i = 0; i < ps->n; i++)
        if ((!ps->p[i].merged && (!ps->p[i].masked || ps->p[i].exact_rows)) || ps->p[i].floor_rest)
            return pft_node__parts_total(nd, ps, out);
    if (only < 0 || pft_gstat_kind(ps->acc[only]) != PFT_GSTAT_TIED || !pft_gstat_tied_scatter(ps->acc[only]))
        return pft_node__parts_total(nd, ps, out);
    int rc = pft_gstat_take_all(ps->acc[only], out);
    return rc ? pft_err_wrap(rc, "merging the statistics") : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Records the provenance of part p's contributors in b: counts and DP guarantee from the bundle the part came
 * from, or own (with this node's (ε, δ) when the part is its DP release). */
static int part_provenance(node_t *nd, const part_t *p, pft_bundle_t *b)
{
    int rc = 0;
    for (int w = 0; rc == 0 && w < p->n_who; w++) {
        const char *id = pft_topo_node(nd->topo, p->who[w])->id;
        if (!p->b) {
            for (int c = 0; rc == 0 && c < nd->n_classes; c++)
                if (nd->own_counts[c] && !pft_node__floor_is_withheld(&nd->know.floor, c))
                    rc = pft_bundle_prov_add(b, id, c, (uint64_t)nd->own_counts[c]);
            double eps, delta;
            if (rc == 0 && p->exact_rows && pft_node__release_guarantee(nd, &eps, &delta))
                rc = pft_bundle_prov_set_dp(b, id, eps, delta);
            continue;
        }
        for (int e = 0; e < pft_bundle_prov_n_nodes(p->b); e++) {
            if (strcmp(pft_bundle_prov_node(p->b, e), id) != 0)
                continue;
            for (int j = 0; rc == 0 && j < pft_bundle_prov_n_labels(p->b, e); j++) {
                int label;
                uint64_t count;
                pft_bundle_prov_entry(p->b, e, j, &label, &count);
                rc = pft_bundle_prov_add(b, id, label, count);
            }
            double eps, delta;
            if (rc == 0 && pft_bundle_prov_dp(p->b, e, &eps, &delta))
                rc = pft_bundle_prov_set_dp(b, id, eps, delta);
            int m = 0;
            uint64_t against = 0;
            const pft_bundle_tally_t *ev = pft_bundle_prov_evidence(p->b, e, &m, &against);
            if (rc == 0 && ev && !p->masked) /* the shrinkage's evidence travels with its contributor
                                                (pft_node_evidence.c); never beside a masked part */
                rc = pft_bundle_prov_set_evidence(b, id, against, ev, m);
        }
    }
    return rc;
}

/* Noise of one contributor's part of the head's statistics: σ of its release (0: none) and whether its rows
 * entered exactly here (own rows kept beside own release). Sets *eps, *delta when it has a guarantee. */
double pft_node__parts_sigma(const node_t *nd, const part_t *p, const char *id, double *eps, double *delta,
                             int *has_dp, int *exact_here)
{
    *has_dp = *exact_here = 0;
    *eps = *delta = 0;
    if (!p->b) { /* own rows: exact in the head, whether or not a DP release of them went on */
        *exact_here = 1;
        double e, dl;
        if (pft_node__release_guarantee(nd, &e, &dl) && dl > 0) {
            *has_dp = 1;
            *eps = e;
            *delta = dl;
        }
    } else {
        for (int e = 0; e < pft_bundle_prov_n_nodes(p->b); e++)
            if (strcmp(pft_bundle_prov_node(p->b, e), id) == 0)
                *has_dp = pft_bundle_prov_dp(p->b, e, eps, delta);
    }
    if (!*has_dp || !(*delta > 0 && *delta < 1))
        return 0.0;
    double s = pft_node__parts_kind(nd) == PFT_GSTAT_TIED ? pft_gstat_dp_sigma_sums(*eps, *delta)
                                                          : pft_gstat_dp_sigma(*eps, *delta);
    return isnan(s) ? 0.0 : s;
}

/* Adds σ² to the variance of every class contributor id holds (its provenance labels, or own counts). */
void pft_node__parts_class_var(const node_t *nd, const part_t *p, const char *id, double var, double *v)
{
    if (!p->b) {
        for (int c = 0; c < nd->n_classes; c++)
            v[c] += nd->own_counts[c] ? var : 0.0;
        return;
    }
    for (int e = 0; e < pft_bundle_prov_n_nodes(p->b); e++) {
        if (strcmp(pft_bundle_prov_node(p->b, e), id) != 0)
            continue;
        for (int j = 0; j < pft_bundle_prov_n_labels(p->b, e); j++) {
            int label;
            uint64_t count;
            pft_bundle_prov_entry(p->b, e, j, &label, &count);
            if (label >= 0 && label < nd->n_classes)
                v[label] += var;
        }
    }
}

int pft_node__parts_noise(const node_t *nd, const part_t *p, double *var)
{
    int noisy = 0;
    for (int w = 0; w < p->n_who; w++) {
        const char *id = pft_topo_node(nd->topo, p->who[w])->id;
        double eps, delta;
        int has_dp, exact_here;
        double s = pft_node__parts_sigma(nd, p, id, &eps, &delta, &has_dp, &exact_here);
        if (!has_dp || exact_here)
            continue;
        noisy = 1;
        if (var)
            pft_node__parts_class_var(nd, p, id, s * s, var);
    }
    return noisy && pft_node__parts_kind(nd) == PFT_GSTAT_TIED;
}

/* 1 when a received part merged into group g counts this node's own rows (a complete bundle of a ring's lap
 * 2 holds the node's own release). */
static int group_has_me(const node_t *nd, const parts_t *ps, size_t g)
{
    for (int i = 0; i < ps->n; i++)
        for (int w = 0; ps->p[i].merged && ps->p[i].group == (long)g && w < ps->p[i].n_who; w++)
            if (ps->p[i].who[w] == nd->my_index)
                return 1;
    return 0;
}

/* Component k of class c standing for n rows of mean mu (d); with mine, the node's own rows of class c are
 * taken out of it exactly (sums add: what is left is the others' sums and the noise). 0: nothing left. */
static int noisy_component(node_t *nd, int k, int c, uint64_t n, const double *mu, int mine, double var)
{
    int d = pft_dataset_d(nd->train);
    double *m = nd->head.extra_means + (size_t)k * d;
    uint64_t own = mine && c < nd->n_classes ? (uint64_t)nd->own_counts[c] : 0;
    if (own >= n)
        return 0;
    for (int j = 0; j < d; j++)
        m[j] = (double)n * mu[j];
    const float *x = pft_dataset_x(nd->train);
    const int32_t *y = pft_dataset_y(nd->train);
    for (int i = 0; own && i < pft_dataset_n(nd->train); i++)
        for (int j = 0; y[i] == c && j < d; j++)
            m[j] -= x[(size_t)i * d + j];
    double left = (double)(n - own);
    for (int j = 0; j < d; j++)
        m[j] /= left;
    nd->head.extra[k] = (pft_ghead_extra_t){.label = c, .n = n - own, .mean = m, .tau2 = var / (left * left)};
    pft_info("noisy component: class %d of %llu rows, noise per entry of its mean %.4g%s", c,
             (unsigned long long)(n - own), sqrt(var) / left, own ? " (own rows taken out)" : "");
    return 1;
}

int pft_node__parts_noisy(node_t *nd, const parts_t *ps, int *own_inside)
{
    if (own_inside)
        *own_inside = 0;
    int d = pft_dataset_d(nd->train), k = 0, m = 0;
    PFT_FREE(nd->head.extra);
    PFT_FREE(nd->head.extra_means);
    nd->head.n_extra = 0;
    for (size_t g = 0; g < ps->n_nodes; g++)
        m += ps->acc[g] && ps->noisy[g] ? pft_gstat_n_classes(ps->acc[g]) : 0;
    if (m == 0)
        return 0;
    nd->head.extra = pft_alloc_array((size_t)m, sizeof *nd->head.extra);
    nd->head.extra_means = pft_alloc_array((size_t)m * d, sizeof(double));
    if (!nd->head.extra || !nd->head.extra_means)
        return pft_err(PFT_ENOMEM, "out of memory for %d noisy components", m);
    for (size_t g = 0; g < ps->n_nodes; g++) {
        const pft_gstat_t *a = ps->noisy[g] ? ps->acc[g] : NULL;
        int mine = a && group_has_me(nd, ps, g);
        if (mine && own_inside)
            *own_inside = 1;
        for (int i = 0; a && i < pft_gstat_n_classes(a); i++) {
            int c = pft_gstat_label(a, i);
            double var = c < nd->n_classes ? ps->nvar[g * (size_t)nd->n_classes + (size_t)c] : 0.0;
            k += noisy_component(nd, k, c, pft_gstat_count(a, i), pft_gstat_mean(a, i), mine, var);
        }
    }
    nd->head.n_extra = k;
    return 0;
}

/* 1 when part p is (or holds) a DP release of sums: a received noisy part, or this node's own release. */
static int released_noisy(const node_t *nd, const part_t *p)
{
    if (pft_node__parts_kind(nd) != PFT_GSTAT_TIED)
        return 0;
    return pft_node__parts_noise(nd, p, NULL) || (!p->b && p->exact_rows && nd->pipe.noisy);
}

int pft_node__parts_rows_apart(const node_t *nd, const parts_t *ps)
{
    if (pft_node__parts_kind(nd) != PFT_GSTAT_TIED || nd->pipe.noisy || nd->sec.plan)
        return 0;
    long g0 = -1;
    int apart = 0;
    for (int i = 0; i < ps->n; i++) {
        const part_t *p = &ps->p[i];
        long g = ps->grp[p->who[0]];
        if (p->masked || (p->exact_rows && !p->floor_rows) || released_noisy(nd, p) || (g0 >= 0 && g != g0))
            return 0;
        g0 = g;
        apart |= p->floor_rows || p->floor_rest;
    }
    for (size_t g = 0; g < ps->n_nodes; g++)
        if (ps->noisy[g] || (ps->acc[g] && (long)g != g0))
            return 0;
    return apart;
}

/* The group whose accumulator this node's own part may join at once: its own group g, when g's accumulator is
 * the only one and in the clear (no noise, no secure aggregation); else -1 (the head's merge would add the
 * own part in another order, or apart). */
static long own_fold_group(const node_t *nd, const parts_t *ps)
{
    long g = ps->grp[nd->my_index];
    if (nd->sec.plan || g < 0 || !ps->acc[g] || ps->noisy[g])
        return -1;
    for (size_t k = 0; k < ps->n_nodes; k++)
        if (ps->acc[k] && (long)k != g)
            return -1;
    return g;
}

int pft_node__parts_take_own_rows(const node_t *nd, parts_t *ps, const pft_dataset_t *rows, int floor_rest,
                                  int *taken)
{
    *taken = 0;
    long g = own_fold_group(nd, ps);
    if (g < 0 || ps->covered[nd->my_index] || pft_gstat_kind(ps->acc[g]) != pft_node__parts_kind(nd))
        return 0;
    for (int i = 0; i < ps->n; i++)
        if (!ps->p[i].merged)
            return 0;
    int rc = pft_node__parts_take(ps, NULL, NULL, &nd->my_index, 1, NULL, nd->me->id);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    part_t *own = &ps->p[ps->n - 1];
    rc =
        pft_gstat_add_rows(ps->acc[g], pft_dataset_x(rows), pft_dataset_y(rows), (size_t)pft_dataset_n(rows));
    if (rc != 0)
        return pft_err_wrap(rc, "adding this node's rows to its group's statistics");
    own->merged = 1;
    own->group = g;
    own->floor_rest = floor_rest;
    *taken = 1;
    return 0;
}

int pft_node__parts_fold_own(const node_t *nd, parts_t *ps)
{
    long g = own_fold_group(nd, ps);
    part_t *own = NULL;
    if (g < 0)
        return 0;
    for (int i = 0; i < ps->n; i++) {
        part_t *p = &ps->p[i];
        if (p->merged)
            continue;
        if (own || p->b || !p->st || p->exact_rows || p->masked || released_noisy(nd, p))
            return 0;
        own = p;
    }
    int rc = own && pft_gstat_kind(own->st) == pft_gstat_kind(ps->acc[g])
                 ? pft_gstat_merge(ps->acc[g], own->st)
                 : 1;
    if (rc == 0) {
        pft_gstat_destroy(&own->st);
        own->merged = 1;
        own->group = g;
    }
    return rc == 1 ? 0 : rc;
}

/* st as means only: its counts and means, a zero scatter (a group holding a DP release of sums). */
static int means_only(const node_t *nd, pft_gstat_t **st)
{
    pft_gstat_t *m = pft_gstat_new(PFT_GSTAT_TIED, pft_dataset_d(nd->train));
    int rc = m ? 0 : PFT_ENOMEM;
    for (int i = 0; rc == 0 && i < pft_gstat_n_classes(*st); i++)
        rc = pft_gstat_add_class(m, pft_gstat_label(*st, i), pft_gstat_count(*st, i), pft_gstat_mean(*st, i),
                                 NULL);
    if (rc == 0) {
        pft_gstat_destroy(st);
        *st = m;
    } else {
        pft_gstat_destroy(&m);
    }
    return rc;
}

/* One outbound part per group of the plan: the taken parts of a group merged. */
/* Adds to st (created on first use, in this node's kind) the statistics src; with steal and st still NULL,
 * src itself becomes st (*src_owned set to NULL). */
static int accumulate(const node_t *nd, pft_gstat_t **st, pft_gstat_t **src_owned, const pft_gstat_t *src,
                      int steal)
{
    if (!*st && steal && src_owned && *src_owned && pft_gstat_kind(*src_owned) == pft_node__parts_kind(nd)) {
        *st = *src_owned; /* merge into it in place */
        *src_owned = NULL;
        return 0;
    }
    if (!*st && !(*st = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train))))
        return PFT_ENOMEM;
    return pft_gstat_merge(*st, src);
}

/* Group g's masked parts (not opened here) as one masked part of b: their words summed, counts and bounds
 * summed, every contributor's provenance; with steal the sum itself goes (ps no longer holds it). */
static int add_masked_group(node_t *nd, parts_t *ps, pft_bundle_t *b, size_t g, const char **ids, int steal)
{
    int n_ids = 0, rc = 0, K = nd->n_classes;
    for (int i = 0; rc == 0 && i < ps->n; i++) {
        part_t *p = &ps->p[i];
        if (ps->grp[p->who[0]] != (long)g)
            continue;
        if (!p->masked || p->merged)
            return pft_err(PFT_EINVAL,
                           "group of '%s' holds masked and clear statistics: they cannot travel "
                           "as one part",
                           pft_topo_node(nd->topo, p->who[0])->id);
        for (int w = 0; w < p->n_who; w++)
            ids[n_ids++] = pft_topo_node(nd->topo, p->who[w])->id;
        rc = part_provenance(nd, p, b);
    }
    int *labels = pft_alloc_array((size_t)K, sizeof *labels);
    uint64_t *words = steal ? ps->mw[g] : pft_alloc_array(ps->n_words, sizeof *words);
    if (!labels || !words)
        rc = rc ? rc : pft_err(PFT_ENOMEM, "out of memory");
    for (int c = 0; labels && c < K; c++)
        labels[c] = c;
    if (rc == 0 && !steal)
        memcpy(words, ps->mw[g], ps->n_words * sizeof *words);
    pft_bundle_mask_t m = {
        .frac_bits = PFT_FIXED_FRAC_BITS, .bound = (uint64_t)ceil(ps->mbound[g]), .div = nd->sec.div};
    snprintf(m.label, sizeof m.label, "%s", nd->sec.label);
    snprintf(m.opener, sizeof m.opener, "%s", nd->sec.opener ? nd->sec.opener : "");
    if (n_ids == 1 && nd->dm.blob && strcmp(ids[0], nd->me->id) == 0) /* double masking: own shares */
        m.shares = nd->dm.blob, m.shares_len = nd->dm.blob_len;
    if (rc == 0) {
        qsort(ids, (size_t)n_ids, sizeof *ids, cmp_str);
        rc = pft_bundle_add_masked_part(b, ids, n_ids, PFT_GSTAT_TIED, K, labels, ps->mcount + g * (size_t)K,
                                        &words, &m);
    }
    if (steal && !words)
        ps->mw[g] = NULL; /* taken by the bundle */
    else if (!steal)
        pft_free(words);
    pft_free(labels);
    return rc;
}

/* 1 if this node's own part holds a row: some own class not withheld by the floor. */
static int own_released(const node_t *nd)
{
    for (int c = 0; c < nd->n_classes; c++)
        if (nd->own_counts[c] && !pft_node__floor_is_withheld(&nd->know.floor, c))
            return 1;
    return 0;
}

/* 1 if group g holds a masked part not opened here. */
static int group_masked(const parts_t *ps, size_t g)
{
    for (int i = 0; i < ps->n; i++)
        if (ps->grp[ps->p[i].who[0]] == (long)g && ps->p[i].masked && !ps->p[i].merged)
            return 1;
    return 0;
}

/* One outbound part per group of the plan: the group's accumulated received parts and its other parts. With
 * steal, the accumulator (or the node's own part) becomes the outbound part instead of a copy: it is then
 * gone from ps (only when ps is not needed for the head). */
int pft_node__parts_add_groups(node_t *nd, parts_t *ps, pft_bundle_t *b, int steal)
{
    size_t n = ps->n_nodes;
    const long *grp = ps->grp;
    const char **ids = pft_alloc_array(n, sizeof *ids);
    int rc = ids ? 0 : PFT_ENOMEM;
    for (int i = 0; rc == 0 && i < ps->n; i++) /* a part must lie within one group */
        for (int w = 1; w < ps->p[i].n_who; w++)
            if (grp[ps->p[i].who[w]] != grp[ps->p[i].who[0]])
                rc = pft_err(PFT_EINVAL,
                             "a received part joins '%s' and '%s', which this node's plan keeps apart",
                             pft_topo_node(nd->topo, ps->p[i].who[0])->id,
                             pft_topo_node(nd->topo, ps->p[i].who[w])->id);
    for (size_t g = 0; rc == 0 && g < n; g++) {
        if (grp[g] != (long)g)
            continue;
        if (group_masked(ps, g)) {
            rc = add_masked_group(nd, ps, b, g, ids, steal);
            continue;
        }
        pft_gstat_t *st = NULL;
        int n_ids = 0, noisy = ps->noisy[g];
        if (ps->acc[g])
            rc = accumulate(nd, &st, &ps->acc[g], ps->acc[g], steal);
        for (int i = 0; rc == 0 && i < ps->n; i++) {
            part_t *p = &ps->p[i];
            if (grp[p->who[0]] != (long)g)
                continue;
            if (!p->merged)
                rc = accumulate(nd, &st, &p->st, pft_node__parts_stats(p), steal);
            noisy |= released_noisy(nd, p);
            if (!p->b && !own_released(nd))
                continue; /* the floor withheld every own class: no own row in the part, nor its id */
            for (int w = 0; w < p->n_who; w++)
                ids[n_ids++] = pft_topo_node(nd->topo, p->who[w])->id;
            if (rc == 0)
                rc = part_provenance(nd, p, b);
        }
        if (rc == 0 && st && noisy)
            rc = means_only(nd, &st);
        if (rc == 0 && st && pft_gstat_n_classes(st) > 0) { /* none: every class withheld by the floor */
            qsort(ids, (size_t)n_ids, sizeof *ids, cmp_str);
            rc = pft_bundle_add_part(b, ids, n_ids, &st);
        }
        pft_gstat_destroy(&st);
    }
    pft_free(ids);
    return rc;
}
