/* pft_node_head_gaussian: the head `gaussian`: the Bayes classifier of class statistics (pft_ghead): LDA with
 * one shared covariance, QDA for exact statistics with cov = full; the shrinkage chosen by cross-validation
 * over the node's own rows (OAS without them). head.npy holds LDA's [W | b], head_qda_*.npy QDA's parameters.
 * Its fit with a fixed shrinkage is shared with the heads built on it (ncm). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_ghead.h"
#include "pft_log.h"
#include "pft_npy.h"

#include <math.h>
#include <string.h>

typedef struct {
    pft_ghead_t *head;
    pft_ghead_info_t info;
    int n_extra;        /* noisy components in the head (0: none received, or left out) */
    double cv_own_only; /* with noisy components received: held-out accuracy of the own statistics alone */
    pft_ghead_t *plain; /* with noisy components kept: the head of the own statistics alone (eval_more) */
} gaussian_t;

/* The z-score a noisy component of a class the statistics hold needs to be kept (DESIGN.md §8): it must show
 * a distribution the node's statistics of that class do not have (another domain), beyond its noise. Measured
 * (numpy, PACS, ε = 1): covariate shift's photo classes z = 1.9–26.6 (5 of 7 above 3 in each of two draws),
 * iid splits like ring5's z = -1.7–2.0 (their components only add noise: with them every ring5 node scored
 * 0.2–0.7 points below its own statistics). Components of classes the node lacks are always kept: they are
 * its only knowledge of those classes. */
#define NOISY_MIN_Z 3.0

void pft_node__gaussian_destroy(void **model)
{
    gaussian_t *m = *model;
    if (m) {
        pft_ghead_destroy(&m->head);
        pft_ghead_destroy(&m->plain);
    }
    pft_free(m);
    *model = NULL;
}

/* Builds the head from nd->head.stats, which it takes (the head decomposes their own scatter: memory, one d×d
 * matrix less): QDA for exact statistics with cov = full unless lda is set, else LDA. */
/* The shift z-score of noisy component x against class i of the statistics st (v: the pooled variance per
 * row, tr W / N): ‖μ̃ − μ_i‖² less what noise and sampling explain (d τ² + v (1/n_i + 1/n)), over the noise
 * term's standard deviation τ² sqrt(2d). */
static double shift_z(const pft_gstat_t *st, int i, const pft_ghead_extra_t *x, double v)
{
    int d = pft_gstat_dim(st);
    const double *mu = pft_gstat_mean(st, i);
    double q = 0;
    for (int j = 0; j < d; j++)
        q += (x->mean[j] - mu[j]) * (x->mean[j] - mu[j]);
    double expl = d * x->tau2 + v * (1.0 / (double)pft_gstat_count(st, i) + 1.0 / (double)x->n);
    return x->tau2 > 0 ? (q - expl) / (x->tau2 * sqrt(2.0 * d)) : INFINITY;
}

/* Orders nd->head.extra with the components kept first (classes the statistics lack; classes they hold
 * where the shift test passes) and returns how many are kept. */
static int order_extras(node_t *nd)
{
    const pft_gstat_t *st = nd->head.stats;
    const double *w = pft_gstat_kind(st) == PFT_GSTAT_TIED ? pft_gstat_tied_scatter(st) : NULL;
    int d = pft_gstat_dim(st), k = 0;
    double v = 0;
    for (int j = 0; w && j < d; j++)
        v += w[(size_t)j * d + j];
    v /= (double)pft_gstat_total(st);
    for (int i = 0; i < nd->head.n_extra; i++) {
        const pft_ghead_extra_t *x = &nd->head.extra[i];
        int c = pft_gstat_find(st, x->label);
        double z = c < 0 ? INFINITY : shift_z(st, c, x, v);
        if (c >= 0)
            pft_info("noisy component of class %d (%llu rows): shift z = %.1f, %s", x->label,
                     (unsigned long long)x->n, z,
                     z >= NOISY_MIN_Z ? "kept" : "left out (no shift beyond noise)");
        if (z >= NOISY_MIN_Z) {
            pft_ghead_extra_t t = nd->head.extra[k];
            nd->head.extra[k++] = nd->head.extra[i];
            nd->head.extra[i] = t;
        }
    }
    return k;
}

/* One fit of the statistics (kept) with the first n_extra noisy components; *h, *info. */
static int fit_with(node_t *nd, const pft_ghead_opts_t *o, int n_own, int n_extra, pft_ghead_t **h,
                    pft_ghead_info_t *info)
{
    pft_ghead_opts_t on = *o;
    on.n_extra = n_extra;
    on.extra = n_extra ? nd->head.extra : NULL;
    return pft_ghead_fit(nd->head.stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train), n_own,
                         nd->n_classes, &on, h, info);
}

/* The head with noisy components (DESIGN.md §8, SECURITY.md §6): those of classes the statistics lack, and
 * those of classes they hold that pass the shift test; the own statistics alone are fitted too (m->plain,
 * m->cv_own_only: the yardstick result.json reports). */
static int fit_noisy(node_t *nd, const pft_ghead_opts_t *o, int n_own, gaussian_t *m)
{
    int n_keep = order_extras(nd);
    pft_ghead_info_t i0;
    int rc = fit_with(nd, o, n_own, 0, &m->plain, &i0);
    m->cv_own_only = rc == 0 ? i0.cv_acc : NAN;
    m->n_extra = n_keep;
    if (rc == 0 && n_keep > 0)
        return fit_with(nd, o, n_own, n_keep, &m->head, &m->info);
    if (rc == 0) { /* none kept: the own statistics' head is the head */
        m->head = m->plain;
        m->plain = NULL;
        m->info = i0;
    }
    return rc;
}

/* A node without class statistics of its own that received only DP releases of class sums (per-client exact
 * DP at an aggregator without rows): no second moment travelled, so the head is the nearest class mean (α =
 * 1) over the noisy means, each class's components averaged by their rows, with the isotropic within-class
 * variance that rows of norm ≤ 1 imply: tr Σ_c = 1 − ‖μ_c‖², ‖μ_c‖² estimated without the noise's part
 * (‖μ̂_c‖² − d·τ̂²_c, τ̂² the averaged mean's noise variance), clamped to [1e-6, 1]. */
static int stats_from_extras(node_t *nd)
{
    int d = pft_dataset_d(nd->train), K = nd->n_classes, rc = 0;
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    double *mu = pft_alloc_array((size_t)d, sizeof *mu), *w = pft_calloc((size_t)d * d, sizeof *w), tr = 0;
    uint64_t N = 0;
    if (!st || !mu || !w)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    for (int c = 0; rc == 0 && c < K; c++) {
        double n = 0, tau2 = 0, norm2 = 0;
        memset(mu, 0, (size_t)d * sizeof *mu);
        for (int k = 0; k < nd->head.n_extra; k++) {
            const pft_ghead_extra_t *e = &nd->head.extra[k];
            for (int j = 0; e->label == c && j < d; j++)
                mu[j] += (double)e->n * e->mean[j];
            n += e->label == c ? (double)e->n : 0;
            tau2 += e->label == c ? (double)e->n * (double)e->n * e->tau2 : 0;
        }
        if (n <= 0)
            continue;
        for (int j = 0; j < d; j++) {
            mu[j] /= n;
            norm2 += mu[j] * mu[j];
        }
        double t = 1.0 - (norm2 - d * tau2 / (n * n));
        tr += n * (t < 1e-6 ? 1e-6 : t > 1 ? 1 : t);
        N += (uint64_t)n;
        rc = pft_gstat_add_class(st, c, (uint64_t)n, mu, NULL);
    }
    for (int j = 0; rc == 0 && N > 0 && j < d; j++)
        w[(size_t)j * d + j] = tr / d;
    if (rc == 0 && N == 0)
        rc = pft_err(PFT_EINVAL,
                     "no class statistics for the Gaussian head (nothing received, no rows of its own)");
    if (rc == 0)
        rc = pft_gstat_add_tied_scatter(st, w);
    if (rc == 0) {
        pft_gstat_destroy(&nd->head.stats);
        nd->head.stats = st;
        st = NULL;
        nd->head.n_extra = 0;
        pft_warn(
            "Gaussian head: no class statistics of its own, only DP releases of class sums (no second moment "
            "travelled): nearest noisy class mean (shrinkage 1) over %d class(es), %llu rows",
            pft_gstat_n_classes(nd->head.stats), (unsigned long long)N);
    }
    pft_gstat_destroy(&st);
    pft_free(mu);
    pft_free(w);
    return rc;
}

int pft_node__gaussian_fit(node_t *nd, int lda, double alpha, void **model)
{
    if (nd->head.stats && pft_gstat_n_classes(nd->head.stats) == 0 && nd->head.n_extra > 0 &&
        pft_gstat_kind(nd->head.stats) == PFT_GSTAT_TIED) {
        int rc = stats_from_extras(nd);
        if (rc)
            return rc;
        lda = 1, alpha = 1.0;
    }
    if (!nd->head.stats || pft_gstat_n_classes(nd->head.stats) == 0)
        return pft_err(PFT_EINVAL, "no class statistics for the Gaussian head");
    gaussian_t *m = pft_calloc(1, sizeof *m);
    if (!m)
        return pft_err(PFT_ENOMEM, "out of memory");
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.kind = !lda && nd->me->exact && nd->me->cov == PFT_COV_FULL ? PFT_GHEAD_QDA : PFT_GHEAD_LDA;
    o.alpha = alpha;
    o.seed = nd->run->seed;
    o.on_iter = pft_node__loop_yield; /* an acknowledgement arriving meanwhile must be read (DESIGN.md) */
    o.on_iter_ctx = nd;
    int n_own = nd->head.has_own ? pft_dataset_n(nd->train) : 0;
    unsigned long long rows = (unsigned long long)pft_gstat_total(nd->head.stats);
    pft_node__loop_yield(nd); /* an ACK that arrived meanwhile: read it before the fit */
    double t0 = pft_fsio_now();
    int rc = 0, guard = o.kind == PFT_GHEAD_LDA && nd->head.n_extra > 0 && alpha == PFT_GHEAD_AUTO &&
                        n_own >= o.min_cv_rows && pft_gstat_kind(nd->head.stats) == PFT_GSTAT_TIED;
    m->cv_own_only = NAN;
    if (guard) {
        rc = fit_noisy(nd, &o, n_own, m);
    } else {
        if (o.kind == PFT_GHEAD_LDA) { /* the DP releases of sums received: noisy components (pft_ghead.h) */
            o.extra = nd->head.extra;
            o.n_extra = nd->head.n_extra;
            m->n_extra = o.n_extra;
        }
        rc = pft_ghead_fit_take(&nd->head.stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train), n_own,
                                nd->n_classes, &o, &m->head, &m->info);
    }
    pft_gstat_destroy(&nd->head.stats);
    nd->tally.head_seconds = pft_fsio_now() - t0;
    if (rc) {
        pft_node__gaussian_destroy((void **)&m);
        return pft_err_wrap(rc, "the Gaussian head from %llu rows of statistics", rows);
    }
    pft_info("Gaussian head (%s) from %llu rows: shrinkage %.3g (%s%s), %.2fs",
             pft_ghead_kind_name(m->info.kind), (unsigned long long)m->info.n_rows, m->info.alpha,
             m->info.rule, strcmp(m->info.rule, "cv") ? "" : " over own rows", nd->tally.head_seconds);
    *model = m;
    return 0;
}

/* The shrinkage from the evidence of every contributor of the statistics (pft_node_evidence.c) when there is
 * some, else chosen here (cross-validation over own rows, or OAS). */
static int fit(node_t *nd, void **model)
{
    uint64_t N = nd->head.stats ? pft_gstat_total(nd->head.stats) : 0;
    /* with noisy components the own rows' cross-validation sees them; the evidence did not */
    nd->head.ev_alpha =
        nd->head.n_extra ? -1.0 : pft_node__evidence_alpha(nd, N, &nd->head.ev_rows, &nd->head.ev_used);
    if (nd->head.ev_alpha >= 0)
        pft_info("shrinkage %.3g from the evidence of %d of %d contributor(s), %llu rows", nd->head.ev_alpha,
                 nd->head.ev_used, nd->head.n_ev, (unsigned long long)nd->head.ev_rows);
    int rc =
        pft_node__gaussian_fit(nd, 0, nd->head.ev_alpha >= 0 ? nd->head.ev_alpha : PFT_GHEAD_AUTO, model);
    if (rc == 0 && nd->head.ev_alpha >= 0)
        ((gaussian_t *)*model)->info.rule = "evidence";
    return rc;
}

int pft_node__gaussian_predict(const void *model, const float *x, int n, int32_t *pred)
{
    return pft_ghead_predict(((const gaussian_t *)model)->head, x, n, pred);
}

static int plain_predict(const void *model, const float *x, int n, int32_t *pred)
{
    return pft_ghead_predict(((const gaussian_t *)model)->plain, x, n, pred);
}

/* With noisy components kept: the accuracy of the own statistics alone on the same test rows, as
 * accuracy_local_own_only / accuracy_global_own_only (the yardstick of "never below its own rows"). */
static int eval_more(node_t *nd, const void *model, json_t *res)
{
    if (!((const gaussian_t *)model)->plain)
        return 0;
    json_t *tmp = json_object();
    int rc = tmp ? pft_node__eval_score(nd, tmp, plain_predict, model) : pft_err(PFT_ENOMEM, "out of memory");
    static const char *const keys[2][2] = {{"accuracy_local", "accuracy_local_own_only"},
                                           {"accuracy_global", "accuracy_global_own_only"}};
    for (int k = 0; rc == 0 && k < 2; k++)
        json_object_set(res, keys[k][1], json_object_get(tmp, keys[k][0]));
    json_decref(tmp);
    return rc;
}

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

/* head_labels.npy: the class of each row of head.npy (k×1 float32) when it has one row per component. */
static int write_labels(const node_t *nd, const int *lab, int k)
{
    float *v = pft_alloc_array((size_t)k, sizeof *v);
    char *path = pft_fsio_join(nd->args->out_dir, "head_labels.npy");
    int rc = v && path ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < k; i++)
        v[i] = (float)lab[i];
    if (rc == 0)
        rc = pft_npy_write_f32(path, v, k, 1);
    pft_free(v);
    pft_free(path);
    return rc;
}

int pft_node__gaussian_write(const node_t *nd, const void *model)
{
    const gaussian_t *m = model;
    if (m->info.kind != PFT_GHEAD_LDA)
        return write_qda(nd, m->head);
    int k = 0;
    const int *lab = pft_ghead_component_labels(m->head, &k);
    char *path = pft_fsio_join(nd->args->out_dir, "head.npy");
    int rc = path ? pft_npy_write_f32(path, pft_head_weights(pft_ghead_linear(m->head)), k,
                                      pft_ghead_dim(m->head) + 1)
                  : PFT_ENOMEM;
    pft_free(path);
    if (rc == 0 && lab) /* one row per component: each row's class (USAGE.md, head.npy) */
        rc = write_labels(nd, lab, k);
    return rc;
}

void pft_node__gaussian_describe(const node_t *nd, const void *model, json_t *res)
{
    const pft_ghead_info_t *i = &((const gaussian_t *)model)->info;
    json_t *g = json_pack("{s:s,s:f,s:s,s:f,s:i,s:i,s:f,s:I}", "kind", pft_ghead_kind_name(i->kind), "alpha",
                          i->alpha, "rule", i->rule, "oas_alpha", i->oas_alpha, "folds", i->folds, "cv_rows",
                          i->cv_rows, "lambda", i->lambda, "rows", (json_int_t)i->n_rows);
    if (g && !isnan(i->cv_acc))
        json_object_set_new(g, "cv_accuracy", json_real(i->cv_acc));
    const gaussian_t *m = model;
    if (g && nd->head.n_extra > 0) {
        json_object_set_new(g, "noisy_components_received", json_integer(nd->head.n_extra));
        json_object_set_new(g, "noisy_components", json_integer(m->n_extra));
        if (!isnan(m->cv_own_only))
            json_object_set_new(g, "cv_accuracy_own_only", json_real(m->cv_own_only));
    }
    if (g && !strcmp(i->rule, "evidence")) {
        json_object_set_new(g, "evidence_contributors", json_integer(nd->head.ev_used));
        json_object_set_new(g, "evidence_rows", json_integer((json_int_t)nd->head.ev_rows));
    }
    json_object_set_new(res, "gaussian_head", g ? g : json_null());
    json_object_set_new(res, "head", json_string(nd->head_ops->name));
    json_object_set_new(res, "head_iters", json_integer(0));
}

const pft_node_head_t pft_node__head_gaussian = {
    .name = "gaussian",
    .wants_stats = 1,
    .fit = fit,
    .predict = pft_node__gaussian_predict,
    .write = pft_node__gaussian_write,
    .describe = pft_node__gaussian_describe,
    .destroy = pft_node__gaussian_destroy,
    .eval_more = eval_more,
};
