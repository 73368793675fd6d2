/* pft_node_sampling: the knowledge method `sampling` (the paper's protocol, DESIGN.md §1, §4): per class, EM
 * on the node's own rows ∪ draws from every received GMM (as many as the rows it stands for, within the Monte
 * Carlo budget), drift, and the head's input: the same union as weighted rows, or exact moments for a
 * statistics head. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_log.h"

#include <limits.h>
#include <math.h>
#include <string.h>

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Rows of knowledge in bundle b for class label that `counted` does not hold yet. */
static uint64_t new_count(const pft_bundle_t *b, int ci, const pft_bundle_t *counted)
{
    int label = pft_bundle_class_label(b, ci);
    uint64_t n = 0, in_prov = 0;
    for (int p = 0; p < pft_bundle_prov_n_nodes(b); p++) {
        const char *node = pft_bundle_prov_node(b, p);
        uint64_t c = pft_bundle_prov_count(b, node, label);
        in_prov += c;
        if (pft_bundle_prov_count(counted, node, label) == 0)
            n += c;
    }
    if (pft_bundle_prov_n_nodes(b) == 0 || in_prov == 0)
        return pft_bundle_class_count(b, ci); /* no provenance for the class: trust the count */
    return n;
}

/* Appends n draws of class ci of b to rows, each of the given weight. */
static int sample_class(node_t *nd, const pft_bundle_t *b, int ci, int n, double weight, rows_t *rows,
                        uint64_t salt)
{
    int label = pft_bundle_class_label(b, ci);
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(nd->run->seed, fnv1a(nd->me->id) ^ salt, (uint64_t)label));
    if (!rng)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_node__rows_sample(rows, pft_bundle_class_gmm(b, ci), rng, n, label, weight);
    pft_rng_destroy(&rng);
    return rc;
}

/* Appends to rows the synthetic rows of class c received from recv[0..nr), bundle r standing for m[r] rows
 * of it: f draws per row up to the budget (pft_node__mc_draws), each weighing the rows it stands for. */
static int add_received(node_t *nd, int c, inbound_t **recv, const uint64_t *m, size_t nr, int f,
                        rows_t *rows, uint64_t salt)
{
    int *draws = pft_calloc(nr + 1, sizeof *draws);
    if (!draws)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_node__mc_draws(nd, f, m, nr, draws);
    for (size_t r = 0; r < nr && rc == 0; r++) {
        int ci = pft_bundle_find_class(recv[r]->bundle, c);
        if (draws[r] && ci >= 0)
            rc = sample_class(nd, recv[r]->bundle, ci, draws[r], (double)m[r] / draws[r], rows, salt + r);
    }
    pft_free(draws);
    return rc;
}

/* Mean log-likelihood of this node's real features of each class under bundle b (the drift meter). */
static void record_drift(node_t *nd, const char *what, const pft_bundle_t *b)
{
    double total = 0;
    long n_total = 0;
    for (int ci = 0; ci < pft_bundle_n_classes(b); ci++) {
        int label = pft_bundle_class_label(b, ci), n;
        float *xc = NULL;
        if (label >= pft_dataset_n_classes(nd->train) ||
            pft_dataset_gather_class(nd->train, label, &xc, &n) || !n) {
            pft_free(xc);
            continue;
        }
        double ll;
        if (pft_gmm_score(pft_bundle_class_gmm(b, ci), xc, n, &ll) == 0 && isfinite(ll)) {
            total += ll * n;
            n_total += n;
        }
        pft_free(xc);
    }
    if (n_total)
        json_array_append_new(nd->know.drift, json_pack("{s:s,s:s,s:f,s:i}", "bundle", what, "producer",
                                                        pft_bundle_producer(b), "own_avg_loglik",
                                                        total / n_total, "own_rows", (int)n_total));
}

/* The head's rows for class c: the real rows (weight 1) and the draws for the rows of knowledge each received
 * bundle adds (add_received, head_draws per row up to mc_budget). The draws only set the Monte Carlo noise;
 * the objective stays the same (the head's L2 strength follows the represented count, not the row count). */
static int head_rows_add(node_t *nd, int c, const float *own, int n_own, inbound_t **recv,
                         const uint64_t *take, size_t nr)
{
    int rc = pft_node__rows_append(&nd->head.rows, own, n_own, c, 1.0);
    uint64_t *m = pft_calloc(nr + 1, sizeof *m);
    if (!m)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t r = 0; r < nr && take; r++)
        m[r] = take[r * (size_t)nd->n_classes + (size_t)c];
    if (rc == 0)
        rc = add_received(nd, c, recv, m, nr, nd->run->head_draws, &nd->head.rows, 0x4eadULL);
    pft_free(m);
    return rc;
}

/* Synthetic rows per represented row in the EM union (up to mc_budget per class). A release whose sensitivity
 * is per row (the pipeline's answer) uses the plain union, one row per represented row. */
static int em_draws(const node_t *nd)
{
    if (nd->pipe.per_row)
        return 1;
    return nd->run->em_draws;
}

/* What a refit draws on: the stage's received bundles, largest knowledge first, and per bundle r and class c
 * the rows of knowledge it adds that nothing before it counted (take[r·n_classes + c]). */
typedef struct {
    inbound_t **recv;
    size_t nr;
    uint64_t *take;
} refit_in_t;

/* Counts: own data first, then each bundle's not-yet-counted contributors, into counted and in->take. Records
 * each bundle's drift and names it as a parent of b. Returns 0 or an error code (a class out of range). */
static int count_received(node_t *nd, refit_in_t *in, pft_bundle_t *b, pft_bundle_t *counted)
{
    int rc;
    for (int c = 0; c < nd->n_classes; c++)
        if (nd->own_counts[c] &&
            (rc = pft_bundle_prov_add(counted, nd->me->id, c, (uint64_t)nd->own_counts[c])))
            return rc;
    for (size_t r = 0; r < in->nr; r++) {
        const pft_bundle_t *rb = in->recv[r]->bundle;
        for (int ci = 0; ci < pft_bundle_n_classes(rb); ci++) {
            int label = pft_bundle_class_label(rb, ci);
            if (label >= nd->n_classes)
                return pft_err(PFT_EINVAL, "bundle from %s has class %d; this run has %d classes",
                               pft_bundle_producer(rb), label, nd->n_classes);
            in->take[r * (size_t)nd->n_classes + (size_t)label] = new_count(rb, ci, counted);
        }
        if ((rc = pft_bundle_prov_merge(counted, rb)))
            return rc;
        record_drift(nd, "received", rb);
        pft_bundle_add_parent(b, in->recv[r]->id);
    }
    return 0;
}

/* Fills cls with the weighted union EM fits for class c: own rows (weight 1) and the draws for the rows of
 * knowledge each received bundle adds. Sets *n_own (real rows) and *represented (rows of knowledge the union
 * stands for: its weight); counts the received rows in nd->tally.n_synthetic. */
static int class_union(node_t *nd, int c, const refit_in_t *in, rows_t *cls, int *n_own, int *represented)
{
    float *xc = NULL;
    int rc = 0;
    cls->n = 0;
    cls->weight = 0;
    *n_own = 0;
    if (c < pft_dataset_n_classes(nd->train))
        rc = pft_dataset_gather_class(nd->train, c, &xc, n_own);
    if (rc == 0)
        rc = pft_node__rows_append(cls, xc, *n_own, c, 1.0);
    pft_free(xc);
    uint64_t *m = pft_calloc(in->nr + 1, sizeof *m), received = 0;
    if (!m)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    for (size_t r = 0; rc == 0 && r < in->nr; r++)
        if (pft_bundle_find_class(in->recv[r]->bundle, c) >= 0)
            received += m[r] = in->take[r * (size_t)nd->n_classes + (size_t)c];
    if (rc == 0 && received > (uint64_t)(INT_MAX - *n_own))
        rc = pft_err(PFT_ERANGE, "class %d stands for %llu rows: too many", c, (unsigned long long)received);
    if (rc == 0)
        rc = add_received(nd, c, in->recv, m, in->nr, em_draws(nd), cls, 0);
    pft_free(m);
    *represented = *n_own + (int)received;
    nd->tally.n_synthetic += (int)received;
    return rc;
}

static void em_opts(const node_t *nd, int c, pft_gmm_opts_t *go)
{
    pft_gmm_opts_default(go);
    go->k = nd->me->k;
    go->cov = nd->me->cov;
    go->rank = nd->me->cov_rank;
    go->max_iter = nd->run->max_iter;
    go->tol = nd->run->tol;
    go->reg_covar = nd->run->reg_covar;
    go->n_init = nd->run->n_init;
    /* the floor counts represented rows: the weights of the union (class_union) */
    go->min_rows = nd->me->min_rows;
    go->seed = pft_rng_derive(nd->run->seed, fnv1a(nd->me->id), (uint64_t)c);
}

/* Class c's model of its union, through the release steps (the floor may withhold it, a step may make it)
 * and otherwise EM, added to b as standing for `represented` rows. */
static int fit_class(node_t *nd, int c, const rows_t *cls, int n_own, int represented, pft_bundle_t *b)
{
    pft_node__model_t m = {.c = c, .x = cls->x, .n = cls->n, .represented = represented};
    pft_gmm_opts_t go;
    pft_gmm_info_t info = {.iters = 1, .k_used = 1};
    pft_node__set_status(nd, "fitting", NULL);
    double t0 = pft_fsio_now();
    int rc = pft_node__step_model(nd, &m);
    if (rc || m.withheld)
        return rc;
    em_opts(nd, c, &go);
    if (!m.g && (rc = pft_gmm_fit_weighted(cls->x, pft_node__rows_all_unit(cls) ? NULL : cls->w, cls->n,
                                           cls->d, &go, &m.g, &info))) {
        pft_err_wrap(rc, "EM for class %d (%d rows)", c, cls->n);
        pft_gmm_destroy(&m.g);
        return rc;
    }
    double dt = pft_fsio_now() - t0;
    nd->tally.em_seconds += dt;
    if (cls->n > nd->tally.em_rows_max)
        nd->tally.em_rows_max = cls->n;
    nd->tally.em_iters += info.iters;
    nd->tally.em_fits++;
    pft_debug("class %d: %d real + %d synthetic rows, K=%d, %d EM iterations, %.2fs", c, n_own,
              cls->n - n_own, info.k_used, info.iters, dt);
    if (info.floor_dropped > 0)
        pft_info("class %d: K %d -> %d so that every component stands for >= %d rows (%d refits)", c,
                 info.k_used + info.floor_dropped, info.k_used, nd->me->min_rows, info.floor_refits);
    rc = pft_bundle_add_class(b, c, (uint64_t)represented, &m.g);
    pft_gmm_destroy(&m.g);
    return rc;
}

/* Adds to b the provenance of counted without the classes the floor withheld (their rows do not travel),
 * DP guarantees included. */
static int released_provenance(node_t *nd, pft_bundle_t *b, const pft_bundle_t *counted)
{
    int rc = 0;
    for (int e = 0; rc == 0 && e < pft_bundle_prov_n_nodes(counted); e++) {
        const char *id = pft_bundle_prov_node(counted, e);
        int kept = 0;
        for (int j = 0; rc == 0 && j < pft_bundle_prov_n_labels(counted, e); j++) {
            int label;
            uint64_t count;
            pft_bundle_prov_entry(counted, e, j, &label, &count);
            if (pft_node__floor_is_withheld(&nd->know.floor, label))
                continue;
            rc = pft_bundle_prov_add(b, id, label, count);
            kept++;
        }
        double eps, delta;
        if (rc == 0 && kept && pft_bundle_prov_dp(counted, e, &eps, &delta))
            rc = pft_bundle_prov_set_dp(b, id, eps, delta);
    }
    return rc;
}

/* Stamps b: the provenance counted (less withheld classes), this node's DP guarantee, the complete flag. */
static int seal(node_t *nd, pft_bundle_t *b, const pft_bundle_t *counted, int complete)
{
    int rc;
    double eps, delta;
    if ((rc = released_provenance(nd, b, counted)))
        return rc;
    if (pft_node__release_guarantee(nd, &eps, &delta) && pft_bundle_prov_contains(b, nd->me->id) &&
        (rc = pft_bundle_prov_set_dp(b, nd->me->id, eps, delta)))
        return rc;
    if (complete && (rc = pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE)))
        return rc;
    return 0;
}

/* EM on own rows ∪ samples of the received bundles, per class; builds the outbound bundle (*out, the
 * caller's). In a final stage also fills the head's input. On error *out is untouched and the message says
 * why. */
static int refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out)
{
    int gaussian = nd->head_ops->wants_stats;
    int d = pft_dataset_d(nd->train), rc = PFT_ENOMEM;
    refit_in_t in = {.recv = pft_calloc(st->n_recv + 1, sizeof *in.recv)};
    in.nr = in.recv ? pft_node__inbox_stage_bundles(nd, st, in.recv) : 0;
    pft_bundle_t *b = pft_bundle_new(nd->run->run, nd->me->id, (pft_dtype_t)nd->run->dtype, d);
    pft_bundle_t *counted = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, d);
    in.take = pft_calloc(in.nr * (size_t)nd->n_classes + 1, sizeof *in.take);
    rows_t cls = {.d = d};
    if (!in.recv || !b || !counted || !in.take)
        goto done;
    if ((rc = count_received(nd, &in, b, counted)))
        goto done;
    pft_node__floor_reset(&nd->know.floor);
    for (int c = 0; c < nd->n_classes; c++) {
        int n_own = 0, represented = 0;
        if ((rc = class_union(nd, c, &in, &cls, &n_own, &represented)))
            goto done;
        nd->tally.n_real += n_own;
        if (cls.n == 0)
            continue;
        if ((rc = fit_class(nd, c, &cls, n_own, represented, b)))
            goto done;
        if (nd->tally.em_fits == 2)
            pft_node__crash_point("mid-em");
        if (st->final && !gaussian && (rc = head_rows_add(nd, c, cls.x, n_own, in.recv, in.take, in.nr)))
            goto done;
    }
    if (st->final && gaussian && (rc = pft_node__sampling_head_stats(nd, in.recv, in.take, in.nr, NULL)))
        goto done;
    if ((rc = seal(nd, b, counted, complete)))
        goto done;
    pft_node__floor_released(&nd->know.floor, b);
    record_drift(nd, "sent", b);
    *out = b;
    b = NULL;
    rc = 0;
done:
    if (rc == PFT_ENOMEM && !strstr(pft_errmsg(), "memory"))
        pft_err(rc, "out of memory while refitting");
    pft_free(in.take);
    pft_free(in.recv);
    pft_node__rows_free(&cls);
    pft_bundle_destroy(&counted);
    pft_bundle_destroy(&b);
    return rc;
}

/* Head rows for an adopted complete bundle: own rows ∪ draws standing for everyone else's data (the bundle's
 * count minus what this node itself contributed to it), as head_rows_add. */
static int adopt(node_t *nd, const inbound_t *s)
{
    int rc = 0, gaussian = nd->head_ops->wants_stats;
    const pft_bundle_t *b = s->bundle;
    float *xc = NULL;
    if (b)
        record_drift(nd, "received", b);
    for (int c = 0; c < nd->n_classes && rc == 0; c++) {
        int n_own = 0;
        if (c < pft_dataset_n_classes(nd->train) &&
            (rc = pft_dataset_gather_class(nd->train, c, &xc, &n_own)))
            break;
        if (!gaussian)
            rc = pft_node__rows_append(&nd->head.rows, xc, n_own, c, 1.0);
        PFT_FREE(xc);
        nd->tally.n_real += n_own;
        int ci = b ? pft_bundle_find_class(b, c) : -1;
        if (rc || ci < 0)
            continue;
        uint64_t total = pft_bundle_class_count(b, ci), mine = pft_bundle_prov_count(b, nd->me->id, c);
        uint64_t m = total > mine ? total - mine : 0;
        nd->tally.n_synthetic += (int)m;
        inbound_t *one = (inbound_t *)s;
        if (m && !gaussian)
            rc = add_received(nd, c, &one, &m, 1, nd->run->head_draws, &nd->head.rows, 0xc0);
    }
    if (rc == 0 && gaussian)
        rc = pft_node__sampling_head_stats(nd, NULL, NULL, 0, b);
    return rc;
}

int pft_node__sampling_head_stats(node_t *nd, inbound_t **recv, const uint64_t *take, size_t nr,
                                  const pft_bundle_t *complete)
{
    pft_gstat_destroy(&nd->head.stats);
    nd->head.stats = pft_gstat_new(PFT_GSTAT_FULL, pft_dataset_d(nd->train));
    if (!nd->head.stats)
        return PFT_ENOMEM;
    int rc = pft_gstat_add_rows(nd->head.stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                (size_t)pft_dataset_n(nd->train));
    nd->head.has_own = 1;
    for (size_t r = 0; rc == 0 && r < nr; r++)
        for (int c = 0; rc == 0 && c < nd->n_classes; c++) {
            uint64_t m = take[r * (size_t)nd->n_classes + (size_t)c];
            int ci = pft_bundle_find_class(recv[r]->bundle, c);
            if (m && ci >= 0)
                rc = pft_gstat_add_gmm(nd->head.stats, pft_bundle_class_gmm(recv[r]->bundle, ci), c, m);
        }
    for (int c = 0; rc == 0 && complete && c < nd->n_classes; c++) {
        int ci = pft_bundle_find_class(complete, c);
        if (ci < 0)
            continue;
        uint64_t total = pft_bundle_class_count(complete, ci),
                 mine = pft_bundle_prov_count(complete, nd->me->id, c);
        if (total > mine)
            rc = pft_gstat_add_gmm(nd->head.stats, pft_bundle_class_gmm(complete, ci), c, total - mine);
    }
    return rc;
}

const pft_node_method_t pft_node__method_sampling = {
    .name = "sampling",
    .refit = refit,
    .adopt = adopt,
};
