/* pft_node_stats: exact statistics in a peer: refit by merging parts (each contributor counted once), the
 * statistics of the Gaussian head, and the Gaussian head itself (DESIGN.md §8). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_ghead.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_gstat_dp.h"
#include "pft_linalg.h"
#include "pft_log.h"
#include "pft_npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A part taken for this node's statistics. */
typedef struct {
    pft_gstat_t *st; /* owned: what is sent on (this node's own part: its DP release when dp_epsilon > 0) */
    const pft_gstat_t
        *view;      /* borrowed instead of st: a received bundle's part (the bundle outlives the refit) */
    int exact_rows; /* 1: this node's own part as sent differs from its rows (floor, DP): the head adds the
                       rows themselves, exactly, from the dataset */
    size_t *who;    /* contributor node indices */
    int n_who;
    const pft_bundle_t *b; /* where its provenance is read (NULL: this node's own rows) */
    int merged;            /* its statistics were merged into acc[group] (st and view are then NULL) */
} part_t;

typedef struct {
    part_t *p;
    int n, cap;
    unsigned char *covered; /* by node index */
    size_t n_nodes;
    long *grp;         /* this node's part groups, by node index (pft_topo_part_groups) */
    pft_gstat_t **acc; /* by group id: the merged statistics of the received parts of that group, or NULL */
} parts_t;

/* An empty set of parts for nd: groups computed; 0 or an error. */
static int parts_init(const node_t *nd, parts_t *ps)
{
    size_t n = pft_topo_node_count(nd->topo);
    memset(ps, 0, sizeof *ps);
    ps->n_nodes = n;
    ps->covered = pft_calloc(n, 1);
    ps->grp = pft_alloc_array(n, sizeof *ps->grp);
    ps->acc = pft_calloc(n, sizeof *ps->acc);
    if (!ps->covered || !ps->grp || !ps->acc)
        return pft_err(PFT_ENOMEM, "out of memory");
    return pft_topo_part_groups(nd->topo, nd->my_index, ps->grp);
}

static void parts_free(parts_t *ps)
{
    for (int i = 0; i < ps->n; i++) {
        pft_gstat_destroy(&ps->p[i].st);
        pft_free(ps->p[i].who);
    }
    for (size_t g = 0; ps->acc && g < ps->n_nodes; g++)
        pft_gstat_destroy(&ps->acc[g]);
    PFT_FREE(ps->p);
    PFT_FREE(ps->covered);
    PFT_FREE(ps->grp);
    PFT_FREE(ps->acc);
    ps->n = ps->cap = 0;
}

static pft_gstat_kind_t my_kind(const node_t *nd)
{
    return nd->me->cov == PFT_COV_TIED ? PFT_GSTAT_TIED : PFT_GSTAT_FULL;
}

/* The statistics a part stands for. */
static const pft_gstat_t *part_stats(const part_t *p)
{
    return p->st ? p->st : p->view;
}

/* Takes *st (owned; on success) or view (borrowed; st NULL) as a part of contributors who[0..n); refuses a
 * part that overlaps what is already counted without being contained in it; skips one that is wholly counted
 * (returns 1). */
static int parts_take(parts_t *ps, pft_gstat_t **st, const pft_gstat_t *view, const size_t *who, int n_who,
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

/* The parts of a received bundle: its statistics parts, or one FULL part of a mixture bundle's moments. */
static int take_bundle(node_t *nd, parts_t *ps, const pft_bundle_t *b, const pft_bundle_t *prov)
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
            rc = parts_take(ps, &st, NULL, who, np, prov, from);
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
        rc = parts_take(ps, NULL, pft_bundle_part_stats(b, i), who, nw, prov, from);
        rc = rc == 1 ? 0 : rc;
    }
done:
    pft_free(who);
    pft_free(names);
    return rc;
}

/* The privacy floor on own statistics: the node's own rows less the classes with fewer than min_rows rows
 * (each withheld and reported), into *out; NULL (and nothing withheld) when no class is below the floor. */
static int floor_rows(node_t *nd, const uint64_t *merged, pft_dataset_t **out)
{
    *out = NULL;
    int n = pft_dataset_n(nd->train), m = 0, below = 0;
    char *keep = pft_alloc((size_t)nd->n_classes + 1);
    if (!keep)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int c = 0; c < nd->n_classes; c++) { /* the class as released: own rows and what merges with them */
        uint64_t rel = (uint64_t)nd->own_counts[c] + (merged ? merged[c] : 0);
        keep[c] = nd->own_counts[c] == 0 || rel >= (uint64_t)nd->me->min_rows;
        below += !keep[c];
    }
    if (!below) {
        pft_free(keep);
        return 0;
    }
    if (!below)
        return 0;
    int *idx = pft_alloc_array((size_t)n, sizeof *idx);
    if (!idx) {
        pft_free(keep);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    const int32_t *y = pft_dataset_y(nd->train);
    for (int i = 0; i < n; i++)
        if (keep[y[i]])
            idx[m++] = i;
    for (int c = 0; c < nd->n_classes; c++)
        if (!keep[c])
            pft_node__result_withhold(nd, c, (uint64_t)nd->own_counts[c], "own statistics");
    int rc = pft_dataset_subset(nd->train, idx, m, out);
    pft_free(idx);
    pft_free(keep);
    return rc;
}

/* Merges the statistics of every received part not merged yet into its group's accumulator (memory: the
 * parts of a decoded bundle are folded before the next bundle is decoded). The parts keep their contributors
 * and provenance. */
static int parts_fold(const node_t *nd, parts_t *ps, int any_group)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < ps->n; i++) {
        part_t *p = &ps->p[i];
        if (p->merged || !p->b || p->exact_rows) /* own rows stay apart (floor, DP, the head's exact copy) */
            continue;
        long g = ps->grp[p->who[0]];
        if (g < 0 && any_group) /* a complete bundle (no outbound parts): a slot of its own, for the head */
            g = (long)p->who[0];
        if (g < 0)
            return pft_err(PFT_EINVAL, "a received part counts rows of '%s', which cannot reach this node",
                           pft_topo_node(nd->topo, p->who[0])->id);
        if (!ps->acc[g] && !(ps->acc[g] = pft_gstat_new(my_kind(nd), pft_dataset_d(nd->train))))
            return pft_err(PFT_ENOMEM, "out of memory");
        rc = pft_gstat_merge(ps->acc[g], part_stats(p));
        if (rc == 0) {
            pft_gstat_destroy(&p->st);
            p->view = NULL;
            p->merged = 1;
        }
    }
    return rc;
}

/* Takes the parts of received bundle s: its statistics are decoded again from the stored bytes when the
 * inbox kept only its provenance (s->light), folded into the group accumulators, and freed. complete: s is a
 * complete bundle, used for the head only (its contributors need not reach this node along lap 1). */
static int take_received(node_t *nd, parts_t *ps, const inbound_t *s, int complete)
{
    pft_bundle_t *full = NULL;
    if (s->light) {
        pft_bundle_limits_t lim;
        pft_node__limits(nd, &lim);
        int rc = pft_bundle_decode(s->bytes, s->len, &lim, &full);
        if (rc != 0)
            return pft_err_wrap(rc, "decoding the bundle from %s again", s->from);
    }
    /* provenance is read from the kept (light) bundle, which outlives this call */
    int rc = take_bundle(nd, ps, full ? full : s->bundle, s->bundle);
    if (rc == 0)
        rc = parts_fold(nd, ps, complete);
    pft_bundle_destroy(&full);
    return rc;
}

/* This node's own rows as a part (nothing for a node without rows). With release set, classes below the
 * privacy floor are left out of what goes on (floor_rows: a class counts as released with merged[c], the rows
 * of received parts that will be sent merged with the node's own; the exact statistics of every own row are
 * kept beside it for the node's own head), and with dp_epsilon > 0 the part is the node's (ε, δ)-DP release
 * of its statistics (pft_gstat_dp), again with the exact statistics kept beside it (its own rows need no
 * protection from itself). */
static int take_own(node_t *nd, parts_t *ps, int release, const uint64_t *merged)
{
    int n = pft_dataset_n(nd->train);
    if (n == 0)
        return 0;
    pft_dataset_t *rel = NULL, *all = nd->train;
    pft_gstat_t *st = NULL, *noisy = NULL, *sent = NULL;
    int rc = 0, dp = release && nd->me->dp_epsilon > 0;
    if (release && (rc = pft_node__result_floor_reset(nd)) == 0)
        rc = floor_rows(nd, merged, &rel);
    if (rc == 0 && !rel && !dp) { /* what goes on: every own row, exactly */
        st = pft_gstat_new(my_kind(nd), pft_dataset_d(nd->train));
        rc = st ? pft_gstat_add_rows(st, pft_dataset_x(nd->train), pft_dataset_y(nd->train), (size_t)n)
                : PFT_ENOMEM;
    }
    if (rc == 0 && rel && !dp) { /* what goes on: the rows of the classes that meet the floor */
        sent = pft_gstat_new(my_kind(nd), pft_dataset_d(rel));
        rc = sent ? pft_gstat_add_rows(sent, pft_dataset_x(rel), pft_dataset_y(rel),
                                       (size_t)pft_dataset_n(rel))
                  : PFT_ENOMEM;
    }
    if (rc == 0 && dp) {
        nd->train = rel ? rel : all; /* the release reads nd->train */
        rc = pft_node__release_stats(nd, my_kind(nd), &noisy);
        nd->train = all;
    }
    pft_gstat_t **go = dp ? &noisy : sent ? &sent : &st;
    if (rc == 0)
        rc = parts_take(ps, go, NULL, &nd->my_index, 1, NULL, nd->me->id);
    if (rc == 0 && go != &st) /* the head reads the node's rows again, exactly */
        ps->p[ps->n - 1].exact_rows = 1;
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&sent);
    pft_gstat_destroy(&noisy);
    pft_dataset_destroy(&rel);
    return rc == 1 ? 0 : rc;
}

/* Merge of every taken part, in this node's kind (own rows exactly where a DP release went on instead). */
static int parts_total(const node_t *nd, const parts_t *ps, pft_gstat_t **out)
{
    pft_gstat_t *t = pft_gstat_new(my_kind(nd), pft_dataset_d(nd->train));
    int rc = t ? 0 : PFT_ENOMEM;
    for (size_t g = 0; rc == 0 && g < ps->n_nodes; g++)
        if (ps->acc[g])
            rc = pft_gstat_merge(t, ps->acc[g]);
    for (int i = 0; rc == 0 && i < ps->n; i++)
        if (!ps->p[i].merged)
            rc = ps->p[i].exact_rows
                     ? pft_gstat_add_rows(t, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                          (size_t)pft_dataset_n(nd->train))
                     : pft_gstat_merge(t, part_stats(&ps->p[i]));
    if (rc != 0) {
        pft_gstat_destroy(&t);
        return pft_err_wrap(rc, "merging the statistics");
    }
    *out = t;
    return 0;
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
                if (nd->own_counts[c] && !pft_node__result_is_withheld(nd, c))
                    rc = pft_bundle_prov_add(b, id, c, (uint64_t)nd->own_counts[c]);
            if (rc == 0 && p->exact_rows && nd->me->dp_epsilon > 0)
                rc = pft_bundle_prov_set_dp(b, id, nd->me->dp_epsilon, nd->dp_delta_max);
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
        }
    }
    return rc;
}

/* Noise of one contributor's part of the head's statistics: σ of its release (0: none) and whether its rows
 * entered exactly here (own rows kept beside own release). Sets *eps, *delta when it has a guarantee. */
static double contributor_sigma(const node_t *nd, const part_t *p, const char *id, double *eps, double *delta,
                                int *has_dp, int *exact_here)
{
    *has_dp = *exact_here = 0;
    *eps = *delta = 0;
    if (!p->b) { /* own rows: exact in the head, whether or not a DP release of them went on */
        *exact_here = 1;
        if (nd->me->dp_epsilon > 0 && nd->dp_delta_max > 0) {
            *has_dp = 1;
            *eps = nd->me->dp_epsilon;
            *delta = nd->dp_delta_max;
        }
    } else {
        for (int e = 0; e < pft_bundle_prov_n_nodes(p->b); e++)
            if (strcmp(pft_bundle_prov_node(p->b, e), id) == 0)
                *has_dp = pft_bundle_prov_dp(p->b, e, eps, delta);
    }
    if (!*has_dp || !(*delta > 0 && *delta < 1))
        return 0.0;
    double s = pft_gstat_dp_sigma(*eps, *delta);
    return isnan(s) ? 0.0 : s;
}

/* Adds σ² to the variance of every class contributor id holds (its provenance labels, or own counts). */
static void add_class_var(const node_t *nd, const part_t *p, const char *id, double var, double *v)
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

/* result.json "dp_noise" (kept in nd->dp under "noise"): the noise accumulated over hops in the head's
 * statistics (nd->head_stats, the merge of ps). Each DP contributor's σ follows from its (ε, δ) since Δ₂ is
 * fixed (pft_gstat_dp_sigma); the merged sums Σ_k s̃_k carry Σ_k σ_k² per entry, as does the merged second
 * moment (TIED: every contributor; FULL: per class, the contributors holding it); a merged class mean carries
 * the standard deviation sqrt(Σ σ_k²) / n_c per entry. Nothing when no contributor released with DP. */
static void noise_json(node_t *nd, const parts_t *ps)
{
    double *v = pft_calloc((size_t)nd->n_classes, sizeof *v), tied = 0.0;
    json_t *per = json_array(), *nonpriv = json_array();
    int any = 0;
    for (int i = 0; v && per && nonpriv && i < ps->n; i++)
        for (int w = 0; w < ps->p[i].n_who; w++) {
            const char *id = pft_topo_node(nd->topo, ps->p[i].who[w])->id;
            double eps, delta;
            int has_dp, exact_here;
            double s = contributor_sigma(nd, &ps->p[i], id, &eps, &delta, &has_dp, &exact_here);
            if (!has_dp) {
                json_array_append_new(nonpriv, json_string(id));
                continue;
            }
            any = 1;
            json_array_append_new(per, json_pack("{s:s,s:f,s:f,s:f,s:b}", "node", id, "epsilon", eps, "delta",
                                                 delta, "sigma", s, "exact_here", exact_here));
            if (exact_here)
                continue;
            add_class_var(nd, &ps->p[i], id, s * s, v);
            tied += s * s;
        }
    if (any && nd->dp && nd->head_stats) {
        json_t *sums = json_object(), *mstd = json_object(), *s2 = json_object();
        for (int i = 0; i < pft_gstat_n_classes(nd->head_stats); i++) {
            int c = pft_gstat_label(nd->head_stats, i);
            char key[16];
            snprintf(key, sizeof key, "%d", c);
            double var = c < nd->n_classes ? v[c] : 0.0;
            json_object_set_new(sums, key, json_real(var));
            json_object_set_new(mstd, key, json_real(sqrt(var) / (double)pft_gstat_count(nd->head_stats, i)));
            json_object_set_new(s2, key, json_real(var));
        }
        json_t *o =
            json_pack("{s:s,s:f,s:o,s:o,s:o,s:o}", "kind", pft_gstat_kind_name(my_kind(nd)), "sensitivity",
                      PFT_GSTAT_DP_SENS, "per_contributor", json_incref(per), "non_private",
                      json_incref(nonpriv), "sum_variance_sums", sums, "mean_std_per_entry", mstd);
        if (o && my_kind(nd) == PFT_GSTAT_TIED) {
            json_decref(s2);
            json_object_set_new(o, "sum_variance_second_moment", json_real(tied));
        } else if (o) {
            json_object_set_new(o, "sum_variance_second_moment", s2);
        } else {
            json_decref(s2);
        }
        if (o)
            json_object_set_new(nd->dp, "noise", o);
    }
    json_decref(per);
    json_decref(nonpriv);
    pft_free(v);
}

/* One outbound part per group of the plan: the taken parts of a group merged. */
/* Adds to st (created on first use, in this node's kind) the statistics src; with steal and st still NULL,
 * src itself becomes st (*src_owned set to NULL). */
static int accumulate(const node_t *nd, pft_gstat_t **st, pft_gstat_t **src_owned, const pft_gstat_t *src,
                      int steal)
{
    if (!*st && steal && src_owned && *src_owned && pft_gstat_kind(*src_owned) == my_kind(nd)) {
        *st = *src_owned; /* merge into it in place */
        *src_owned = NULL;
        return 0;
    }
    if (!*st && !(*st = pft_gstat_new(my_kind(nd), pft_dataset_d(nd->train))))
        return PFT_ENOMEM;
    return pft_gstat_merge(*st, src);
}

/* One outbound part per group of the plan: the group's accumulated received parts and its other parts. With
 * steal, the accumulator (or the node's own part) becomes the outbound part instead of a copy: it is then
 * gone from ps (only when ps is not needed for the head). */
static int add_group_parts(node_t *nd, parts_t *ps, pft_bundle_t *b, int steal)
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
        pft_gstat_t *st = NULL;
        int n_ids = 0;
        if (ps->acc[g])
            rc = accumulate(nd, &st, &ps->acc[g], ps->acc[g], steal);
        for (int i = 0; rc == 0 && i < ps->n; i++) {
            part_t *p = &ps->p[i];
            if (grp[p->who[0]] != (long)g)
                continue;
            if (!p->merged)
                rc = accumulate(nd, &st, p->exact_rows ? NULL : &p->st, part_stats(p), steal);
            for (int w = 0; w < p->n_who; w++)
                ids[n_ids++] = pft_topo_node(nd->topo, p->who[w])->id;
            if (rc == 0)
                rc = part_provenance(nd, p, b);
        }
        if (rc == 0 && st && pft_gstat_n_classes(st) > 0) { /* none: every class withheld by the floor */
            qsort(ids, (size_t)n_ids, sizeof *ids, cmp_str);
            rc = pft_bundle_add_part(b, ids, n_ids, &st);
        }
        pft_gstat_destroy(&st);
    }
    pft_free(ids);
    return rc;
}

/* A softmax head on exact statistics (head = logreg): its rows are the node's own (weight 1), and per class
 * draws from the Gaussian N(μ_c, Σ) of the statistics standing for the class's rows beyond the node's own
 * (Σ = W/N for tied statistics, M_c/n_c for full ones, reg_covar added): head_draws per row up to mc_budget,
 * each weighted, as the sampling path does (pft_node__mc_draws). Fills nd->head_rows and the row counters;
 * the statistics are freed. */
static int logreg_rows(node_t *nd)
{
    const pft_gstat_t *st = nd->head_stats;
    int d = pft_gstat_dim(st), f = nd->run->head_draws, rc = 0;
    size_t dd = (size_t)d * d;
    double N = (double)pft_gstat_total(st), one = 1.0;
    double *cov = pft_alloc_array(dd, sizeof *cov);
    float *xc = NULL;
    nd->n_real = nd->n_synthetic = 0;
    if (!cov)
        return pft_err(PFT_ENOMEM, "out of memory for a %d×%d covariance", d, d);
    for (int c = 0; rc == 0 && c < nd->n_classes; c++) {
        int n_own = 0;
        if (c < pft_dataset_n_classes(nd->train) &&
            (rc = pft_dataset_gather_class(nd->train, c, &xc, &n_own)))
            break;
        rc = pft_node__rows_append(&nd->head_rows, xc, n_own, c, 1.0);
        PFT_FREE(xc);
        nd->n_real += n_own;
        int i = pft_gstat_find(st, c);
        uint64_t n_c = i >= 0 ? pft_gstat_count(st, i) : 0;
        uint64_t m = n_c > (uint64_t)n_own ? n_c - (uint64_t)n_own : 0;
        if (rc || m == 0)
            continue;
        int take = 0;
        if ((rc = pft_node__mc_draws(nd, f, &m, 1, &take)))
            break;
        const double *S =
            pft_gstat_kind(st) == PFT_GSTAT_TIED ? pft_gstat_tied_scatter(st) : pft_gstat_scatter(st, i);
        double div = pft_gstat_kind(st) == PFT_GSTAT_TIED ? N : (double)n_c;
        for (size_t k = 0; k < dd; k++)
            cov[k] = S[k] / div;
        for (int j = 0; j < d; j++)
            cov[(size_t)j * d + j] += nd->run->reg_covar;
        pft_gmm_t *g = pft_gmm_new(1, d, PFT_COV_FULL);
        pft_rng_t *rng = pft_rng_new(pft_rng_derive(nd->run->seed, 0x6c6f67ULL ^ nd->my_index, (uint64_t)c));
        rc = g && rng ? pft_gmm_set_params(g, &one, pft_gstat_mean(st, i), cov) : PFT_ENOMEM;
        if (rc == 0)
            rc = pft_node__rows_sample(&nd->head_rows, g, rng, take, c, (double)m / take);
        if (rc == 0) {
            nd->n_synthetic += (int)m;
        } else {
            pft_err_wrap(rc, "drawing the head's rows of class %d from its Gaussian", c);
        }
        pft_gmm_destroy(&g);
        pft_rng_destroy(&rng);
    }
    pft_free(cov);
    pft_gstat_destroy(&nd->head_stats);
    return rc;
}

/* Per class, the rows of the taken parts that travel in this node's own group (merged with its own rows).
 * NULL if out of memory. */
static uint64_t *own_group_rows(node_t *nd, const parts_t *ps)
{
    uint64_t *rows = pft_calloc((size_t)nd->n_classes + 1, sizeof *rows);
    long g = ps->grp[nd->my_index];
    for (int i = -1; rows && i < ps->n; i++) {
        const pft_gstat_t *s = i < 0 ? ps->acc[g] : ps->p[i].merged ? NULL : part_stats(&ps->p[i]);
        if (!s || (i >= 0 && ps->grp[ps->p[i].who[0]] != g))
            continue;
        for (int k = 0; k < pft_gstat_n_classes(s); k++)
            if (pft_gstat_label(s, k) < nd->n_classes)
                rows[pft_gstat_label(s, k)] += pft_gstat_count(s, k);
    }
    return rows;
}

int pft_node__stats_refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out)
{
    pft_node__set_status(nd, "merging", NULL);
    double t0 = pft_fsio_now();
    parts_t ps;
    int prc = parts_init(nd, &ps);
    inbound_t **recv = pft_calloc(st->n_recv + 1, sizeof *recv);
    int d = pft_dataset_d(nd->train);
    pft_dtype_t dt = nd->run->stats_dtype == PFT_TOPO_FP16 ? PFT_DTYPE_F16 : PFT_DTYPE_F32;
    pft_bundle_t *b = pft_bundle_new(nd->run->run, nd->me->id, dt, d);
    int rc = prc ? prc : recv && b ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0) /* cov=tied: the shared covariance as a rank-q factor plus diagonal (0: dense) */
        rc = pft_bundle_set_shared_rank(b, nd->run->stats_rank < d ? nd->run->stats_rank : d - 1);
    size_t nr = rc == 0 ? pft_node__inbox_stage_bundles(nd, st, recv) : 0;
    for (size_t r = 0; rc == 0 && r < nr; r++) {
        rc = take_received(nd, &ps, recv[r], 0);
        if (rc == 0)
            rc = pft_bundle_add_parent(b, recv[r]->id);
    }
    if (rc == 0 && ps.covered[nd->my_index])
        rc = pft_err(PFT_EINVAL, "a received part already counts this node's own rows");
    uint64_t *merged = rc == 0 ? own_group_rows(nd, &ps) : NULL;
    if (rc == 0 && !merged)
        rc = PFT_ENOMEM;
    if (rc == 0)
        rc = take_own(nd, &ps, 1, merged);
    pft_free(merged);
    if (rc == 0 && st->final) { /* the head's statistics first: then the outbound parts may take the
                                   accumulators (no copy of them) */
        pft_gstat_destroy(&nd->head_stats);
        rc = parts_total(nd, &ps, &nd->head_stats);
        nd->head_has_own = 1;
    }
    if (rc == 0)
        rc = add_group_parts(nd, &ps, b, 1);
    if (rc == 0 && complete)
        rc = pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE);
    if (rc == 0 && st->final)
        noise_json(nd, &ps);
    int n_synth = 0;
    if (rc == 0 && st->final && nd->me->head == PFT_TOPO_HEAD_LOGREG) {
        rc = logreg_rows(nd);
        n_synth = nd->n_synthetic;
    }
    if (rc == 0) {
        nd->n_real = pft_dataset_n(nd->train);
        nd->n_synthetic = n_synth;
        nd->em_seconds += pft_fsio_now() - t0;
        pft_info("merged own statistics with %d received part(s) into %d part(s) in %.2fs",
                 ps.n - (nd->n_real > 0), pft_bundle_n_parts(b), pft_fsio_now() - t0);
        nd->em_fits++;
        *out = b;
        b = NULL;
    }
    parts_free(&ps);
    pft_free(recv);
    pft_bundle_destroy(&b);
    return rc;
}

int pft_node__stats_adopt(node_t *nd, const inbound_t *s)
{
    parts_t ps;
    int rc = parts_init(nd, &ps);
    if (rc == 0 && s->bundle)
        rc = take_received(nd, &ps, s, 1);
    nd->head_has_own = ps.covered && ps.covered[nd->my_index];
    if (rc == 0 && !nd->head_has_own) /* no complete bundle, or one without this node: add own rows */
        rc = take_own(nd, &ps, 0, NULL);
    nd->head_has_own = 1;
    if (rc == 0) {
        pft_gstat_destroy(&nd->head_stats);
        rc = parts_total(nd, &ps, &nd->head_stats);
    }
    if (rc == 0)
        noise_json(nd, &ps);
    nd->n_real = pft_dataset_n(nd->train);
    if (rc == 0 && nd->me->head == PFT_TOPO_HEAD_LOGREG)
        rc = logreg_rows(nd);
    parts_free(&ps);
    return rc;
}

int pft_node__stats_for_mixtures(node_t *nd, inbound_t **recv, const uint64_t *take, size_t nr,
                                 const pft_bundle_t *complete)
{
    pft_gstat_destroy(&nd->head_stats);
    nd->head_stats = pft_gstat_new(PFT_GSTAT_FULL, pft_dataset_d(nd->train));
    if (!nd->head_stats)
        return PFT_ENOMEM;
    int rc = pft_gstat_add_rows(nd->head_stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                (size_t)pft_dataset_n(nd->train));
    nd->head_has_own = 1;
    for (size_t r = 0; rc == 0 && r < nr; r++)
        for (int c = 0; rc == 0 && c < nd->n_classes; c++) {
            uint64_t m = take[r * (size_t)nd->n_classes + (size_t)c];
            int ci = pft_bundle_find_class(recv[r]->bundle, c);
            if (m && ci >= 0)
                rc = pft_gstat_add_gmm(nd->head_stats, pft_bundle_class_gmm(recv[r]->bundle, ci), c, m);
        }
    for (int c = 0; rc == 0 && complete && c < nd->n_classes; c++) {
        int ci = pft_bundle_find_class(complete, c);
        if (ci < 0)
            continue;
        uint64_t total = pft_bundle_class_count(complete, ci),
                 mine = pft_bundle_prov_count(complete, nd->me->id, c);
        if (total > mine)
            rc = pft_gstat_add_gmm(nd->head_stats, pft_bundle_class_gmm(complete, ci), c, total - mine);
    }
    return rc;
}

/* ---- the Gaussian head ----------------------------------------------------------------------------------
 */

static int write_qda(const node_t *nd, const pft_ghead_t *h)
{
    int C = pft_ghead_n_classes(h), d = pft_ghead_dim(h), rc = 0;
    size_t dd = (size_t)d * d;
    float *buf = pft_alloc_array((size_t)C * dd, sizeof(float));
    if (!buf)
        return pft_err(PFT_ENOMEM, "out of memory writing the QDA head");
    struct {
        const char *name;
        const double *v;
        size_t cols;
    } parts[3] = {{"head_qda_means.npy", pft_ghead_qda_means(h), (size_t)d},
                  {"head_qda_chol.npy", pft_ghead_qda_chol(h), dd},
                  {"head_qda_bias.npy", pft_ghead_qda_bias(h), 1}};
    for (int k = 0; rc == 0 && k < 3; k++) {
        for (size_t i = 0; i < (size_t)C * parts[k].cols; i++)
            buf[i] = isinf(parts[k].v[i]) ? -3.0e38f : (float)parts[k].v[i];
        char *path = pft_fsio_join(nd->args->out_dir, parts[k].name);
        rc = path ? pft_npy_write_f32(path, buf, C, (int64_t)parts[k].cols) : PFT_ENOMEM;
        pft_free(path);
    }
    pft_free(buf);
    return rc;
}

/* The Gaussian head's predictions (pft_node__result_evaluate's predictor). */
static int ghead_predict(const void *model, const float *x, int n, int32_t *pred)
{
    return pft_ghead_predict(model, x, n, pred);
}

int pft_node__stats_train_head(node_t *nd, json_t *res)
{
    pft_node__set_status(nd, "training", NULL);
    if (!nd->head_stats || pft_gstat_n_classes(nd->head_stats) == 0)
        return pft_err(PFT_EINVAL, "no class statistics for the Gaussian head");
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.kind = nd->me->exact && nd->me->cov == PFT_COV_FULL ? PFT_GHEAD_QDA : PFT_GHEAD_LDA;
    o.seed = nd->run->seed;
    o.on_iter = pft_node__result_serve; /* an acknowledgement arriving meanwhile must be read (DESIGN.md) */
    o.on_iter_ctx = nd;
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    int n_own = nd->head_has_own ? pft_dataset_n(nd->train) : 0;
    unsigned long long rows = (unsigned long long)pft_gstat_total(nd->head_stats);
    pft_node__result_serve(nd); /* an ACK that arrived meanwhile: read it before the fit */
    double t0 = pft_fsio_now();
    /* the head takes the statistics: it decomposes their own scatter (memory: one d×d matrix less) */
    int rc = pft_ghead_fit_take(&nd->head_stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train), n_own,
                                nd->n_classes, &o, &h, &info);
    nd->head_seconds = pft_fsio_now() - t0;
    if (rc)
        return pft_err_wrap(rc, "the Gaussian head from %llu rows of statistics", rows);
    pft_info("Gaussian head (%s) from %llu rows: shrinkage %.3g (%s%s), %.2fs",
             pft_ghead_kind_name(info.kind), (unsigned long long)info.n_rows, info.alpha, info.rule,
             strcmp(info.rule, "cv") ? "" : " over own rows", nd->head_seconds);
    char *path = pft_fsio_join(nd->args->out_dir, "head.npy");
    if (!path)
        rc = PFT_ENOMEM;
    else if (info.kind == PFT_GHEAD_LDA)
        rc = pft_npy_write_f32(path, pft_head_weights(pft_ghead_linear(h)), nd->n_classes,
                               pft_ghead_dim(h) + 1);
    else
        rc = write_qda(nd, h);
    pft_gstat_destroy(&nd->head_stats); /* fitted: the evaluation needs the head only */
    pft_free(path);
    if (rc == 0)
        rc = pft_node__result_evaluate(nd, res, ghead_predict, h);
    if (rc == 0) {
        json_t *g =
            json_pack("{s:s,s:f,s:s,s:f,s:i,s:i,s:f,s:I}", "kind", pft_ghead_kind_name(info.kind), "alpha",
                      info.alpha, "rule", info.rule, "oas_alpha", info.oas_alpha, "folds", info.folds,
                      "cv_rows", info.cv_rows, "lambda", info.lambda, "rows", (json_int_t)info.n_rows);
        if (g && !isnan(info.cv_acc))
            json_object_set_new(g, "cv_accuracy", json_real(info.cv_acc));
        json_object_set_new(res, "gaussian_head", g ? g : json_null());
        json_object_set_new(res, "head", json_string("gaussian"));
        json_object_set_new(res, "head_iters", json_integer(0));
    }
    pft_ghead_destroy(&h);
    return rc;
}
