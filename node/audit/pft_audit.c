/* pft_audit: runs every attack on one bundle and assembles the verdicts (the library behind `pftnet audit`).
 */
#include "pft_audit.h"

#include "pft_alloc.h"
#include "pft_audit_internal.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_membership.h"
#include "pft_nearest.h"
#include "pft_vertex.h"
#include "pft_zerosupport.h"

#include <math.h>
#include <string.h>

/* What the per-class pass collects over the bundle. */
typedef struct {
    json_t *classes;
    int components, one_row, near_row, warn_row;
    double min_rows, min_ratio;
    double ll_own, ll_held; /* sums over rows */
    int n_own, n_held;      /* rows scored; also the fill of s_own, s_held */
    double *s_own, *s_held; /* per-row log-likelihoods (the AUC's scores), capacity own->n, held->n */
    double *tmp;            /* scratch of max(own->n, held->n) */
    double ridge;           /* of the statistics Gaussians (pft_audit_opts_t) */
} acc_t;

void pft_audit_opts_default(pft_audit_opts_t *o)
{
    o->n_lp = PFT_VERTEX_LP_DEFAULT;
    o->seed = 1;
    o->ridge = PFT_AUDIT_RIDGE_DEFAULT;
    o->mean_noise = PFT_AUDIT_MEAN_NOISE_DEFAULT;
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The Gaussian of class i of st: mean, covariance C = scatter / n (tied: W / N) plus ridge·tr(C)/d on the
 * diagonal. NULL on failure (message set). */
static pft_gmm_t *stats_gaussian(const pft_gstat_t *st, int i, double ridge)
{
    int d = pft_gstat_dim(st), tied = pft_gstat_kind(st) == PFT_GSTAT_TIED;
    size_t dd = (size_t)d * d;
    const double *S = tied ? pft_gstat_tied_scatter(st) : pft_gstat_scatter(st, i);
    double div = tied ? (double)pft_gstat_total(st) : (double)pft_gstat_count(st, i), one = 1.0, tr = 0;
    double *cov = pft_alloc_array(dd, sizeof *cov);
    pft_gmm_t *g = pft_gmm_new(1, d, PFT_COV_FULL);
    if (!cov || !g || !S) {
        pft_free(cov);
        pft_gmm_destroy(&g);
        pft_err(PFT_ENOMEM, "out of memory for a %d x %d covariance", d, d);
        return NULL;
    }
    for (size_t k = 0; k < dd; k++)
        cov[k] = S[k] / div;
    for (int j = 0; j < d; j++)
        tr += cov[(size_t)j * d + j];
    /* a means-only part (a DP release of sums: zero scatter, WIRE.md §2.1) has no covariance to score with:
     * an isotropic 1/d per coordinate (rows have norm about 1), so the likelihood test is distance to the
     * mean */
    double add = tr > 0 ? ridge * tr / d : 1.0 / d;
    for (int j = 0; j < d; j++)
        cov[(size_t)j * d + j] += add;
    if (pft_gmm_set_params(g, &one, pft_gstat_mean(st, i), cov))
        pft_gmm_destroy(&g);
    pft_free(cov);
    return g;
}

/* Log-likelihoods of the m rows x under g into out, their sum added to *sum. */
static int score(const pft_gmm_t *g, const float *x, int m, double *out, double *sum)
{
    int rc = m ? pft_gmm_score_samples(g, x, m, out) : 0;
    for (int i = 0; rc == 0 && i < m; i++)
        *sum += out[i];
    return rc;
}

/* Log-likelihoods of own and held rows of label c under g: appended to a's scores when keep, else into the
 * class entry only. */
static int class_scores(const pft_gmm_t *g, const float *xo, int m, const float *xh, int mh, int keep,
                        json_t *e, acc_t *a)
{
    double lo = 0, lh = 0;
    int rc = score(g, xo, m, keep ? a->s_own + a->n_own : a->tmp, &lo);
    if (rc == 0)
        rc = score(g, xh, mh, keep ? a->s_held + a->n_held : a->tmp, &lh);
    if (rc)
        return rc;
    if (keep) {
        a->n_own += m;
        a->n_held += mh;
        a->ll_own += lo;
        a->ll_held += lh;
    }
    json_object_set_new(e, "ll_own", m ? json_real(lo / m) : json_null());
    json_object_set_new(e, "ll_holdout", mh ? json_real(lh / mh) : json_null());
    json_object_set_new(e, "ll_diff", m && mh ? json_real(lo / m - lh / mh) : json_null());
    return 0;
}

/* One released class model g (count n) of label c: its components' nearest rows, its rows' scores (kept
 * for the AUC when keep); one entry into a->classes (part: the part's contributors, NULL for a mixture). */
static int audit_class(const pft_gmm_t *g, int c, double n, const char *part, const pft_audit_rows_t *own,
                       const pft_audit_rows_t *held, int keep, acc_t *a)
{
    int d = own->d, m = 0, mh = 0, oom = 0, rc;
    float *xo = pft_audit__gather(own, NULL, c, &m, &oom), *xh = pft_audit__gather(held, NULL, c, &mh, &oom);
    double nn = pft_nearest_spacing(xo, m, d);
    json_t *comps = json_array();
    for (int k = 0; k < pft_gmm_k(g); k++) {
        double w = pft_gmm_weights(g)[k], rows = n * w;
        double dist = pft_nearest_row(xo, m, d, pft_gmm_means(g) + (size_t)k * d, NULL), ratio = dist / nn;
        pft_verdict_t v = pft_nearest_verdict(ratio);
        a->components++;
        a->one_row += rows < 1.5;
        a->near_row += v == PFT_VERDICT_FAIL;
        a->warn_row += v == PFT_VERDICT_WARN;
        a->min_rows = fmin(a->min_rows, rows);
        a->min_ratio = isnan(ratio) ? a->min_ratio : fmin(a->min_ratio, ratio);
        json_array_append_new(comps, json_pack("{s:f,s:f,s:o,s:o}", "weight", w, "rows", rows, "nearest_row",
                                               num(dist), "ratio", num(ratio)));
    }
    json_t *e = json_pack("{s:i,s:f,s:i,s:i,s:o,s:o,s:i}", "label", c, "n", n, "k", pft_gmm_k(g), "own_rows",
                          m, "nn_typical", num(nn), "components", comps, "holdout_rows", mh);
    if (part)
        json_object_set_new(e, "part", json_string(part));
    rc = oom ? pft_err(PFT_ENOMEM, "audit: out of memory for the rows of class %d", c)
             : class_scores(g, xo, m, xh, mh, keep, e, a);
    json_array_append_new(a->classes, e);
    pft_free(xo);
    pft_free(xh);
    return rc;
}

/* "a+b+c": the part's contributors, into buf. */
static const char *part_name(const pft_bundle_t *b, int p, char *buf, size_t cap)
{
    buf[0] = 0;
    size_t len = 0;
    for (int j = 0; j < pft_bundle_part_n_contributors(b, p) && len < cap; j++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", j ? "+" : "",
                                pft_bundle_part_contributor(b, p, j));
    return buf;
}

/* Scores own and held rows under the merged statistics of all parts (the AUC's model when there are
 * several parts). */
static int merged_scores(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                         acc_t *a)
{
    pft_gstat_t *m = NULL;
    int rc = 0;
    for (int p = 0; rc == 0 && p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p); /* NULL: masked, nothing to score */
        if (st && !m)
            rc = (m = pft_gstat_dup(st)) ? 0 : PFT_ENOMEM;
        else if (st)
            rc = pft_gstat_merge(m, st);
    }
    if (!m)
        return rc;
    for (int i = 0; rc == 0 && i < pft_gstat_n_classes(m); i++) {
        int c = pft_gstat_label(m, i), n = 0, nh = 0, oom = 0;
        pft_gmm_t *g = stats_gaussian(m, i, a->ridge);
        float *xo = pft_audit__gather(own, NULL, c, &n, &oom),
              *xh = pft_audit__gather(held, NULL, c, &nh, &oom);
        json_t *scratch = json_object();
        rc = !g ? PFT_ENUMERIC : oom ? PFT_ENOMEM : class_scores(g, xo, n, xh, nh, 1, scratch, a);
        json_decref(scratch);
        pft_gmm_destroy(&g);
        pft_free(xo);
        pft_free(xh);
    }
    pft_gstat_destroy(&m);
    return rc;
}

/* Per class (and part): nearest rows and scores. */
static int audit_classes(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                         acc_t *a)
{
    int rc = 0;
    if (!pft_bundle_is_stats(b)) {
        for (int ci = 0; rc == 0 && ci < pft_bundle_n_classes(b); ci++)
            rc = audit_class(pft_bundle_class_gmm(b, ci), pft_bundle_class_label(b, ci),
                             (double)pft_bundle_class_count(b, ci), NULL, own, held, 1, a);
        return rc;
    }
    int parts = 0;
    for (int p = 0; p < pft_bundle_n_parts(b); p++)
        parts += !pft_bundle_part_is_masked(b, p);
    char name[256];
    for (int p = 0; rc == 0 && p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p);
        if (!st) /* masked: masked_json says why it is not attacked */
            continue;
        part_name(b, p, name, sizeof name);
        for (int i = 0; rc == 0 && i < pft_gstat_n_classes(st); i++) {
            pft_gmm_t *g = stats_gaussian(st, i, a->ridge);
            rc = g ? audit_class(g, pft_gstat_label(st, i), (double)pft_gstat_count(st, i), name, own, held,
                                 parts == 1, a)
                   : PFT_ENUMERIC;
            pft_gmm_destroy(&g);
        }
    }
    return rc == 0 && parts > 1 ? merged_scores(b, own, held, a) : rc;
}

/* A GMM bundle as one part: the exact first and second moments of each class's mixture (TIED). */
static pft_gstat_t *gmm_moments(const pft_bundle_t *b)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, pft_bundle_dim(b));
    for (int ci = 0; st && ci < pft_bundle_n_classes(b); ci++)
        if (pft_gstat_add_gmm(st, pft_bundle_class_gmm(b, ci), pft_bundle_class_label(b, ci),
                              pft_bundle_class_count(b, ci)))
            pft_gstat_destroy(&st);
    return st;
}

/* The subspace and vertex attacks on every part into attacks. */
static int audit_spans(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                       const pft_audit_opts_t *o, json_t *attacks, pft_verdict_t *worst)
{
    pft_verdict_t vs = PFT_VERDICT_PASS, vv = PFT_VERDICT_PASS;
    json_t *sp = json_array(), *vp = json_array();
    int rc = 0;
    char name[256];
    if (pft_bundle_is_stats(b)) {
        for (int p = 0; rc == 0 && p < pft_bundle_n_parts(b); p++) {
            if (pft_bundle_part_is_masked(b, p))
                continue;
            int q = 0;
            const double *u = pft_bundle_part_factor(b, p, &q);
            rc = pft_audit__span(pft_bundle_part_stats(b, p), u, q, part_name(b, p, name, sizeof name), own,
                                 held, o, sp, vp, &vs, &vv);
        }
    } else {
        pft_gstat_t *st = gmm_moments(b);
        rc = st ? pft_audit__span(st, NULL, 0, "mixtures", own, held, o, sp, vp, &vs, &vv) : PFT_ENOMEM;
        pft_gstat_destroy(&st);
    }
    json_object_set_new(attacks, "subspace",
                        json_pack("{s:s,s:f,s:f,s:f,s:o}", "verdict", pft_verdict_name(vs), "fail_at",
                                  PFT_MEMBERSHIP_ACC_FAIL, "warn_above", PFT_MEMBERSHIP_ACC_WARN, "gap_min",
                                  PFT_SUBSPACE_GAP, "parts", sp));
    json_object_set_new(attacks, "vertex",
                        json_pack("{s:s,s:i,s:f,s:o}", "verdict", pft_verdict_name(vv), "programs_per_part",
                                  o->n_lp, "match_cosine", 1 - PFT_VERTEX_MATCH, "parts", vp));
    *worst = pft_verdict_worst(*worst, pft_verdict_worst(vs, vv));
    return rc;
}

/* The nearest-row and likelihood verdicts into attacks. */
static int audit_scores(const acc_t *a, json_t *attacks, pft_verdict_t *worst)
{
    pft_verdict_t vn = pft_nearest_verdict(a->min_ratio), vl = PFT_VERDICT_PASS;
    json_object_set_new(attacks, "nearest",
                        json_pack("{s:s,s:i,s:i,s:i,s:o,s:f,s:f}", "verdict", pft_verdict_name(vn), "means",
                                  a->components, "means_are_rows", a->near_row, "means_near_rows",
                                  a->warn_row, "min_ratio", num(a->min_ratio), "fail_below", PFT_NEAREST_FAIL,
                                  "warn_below", PFT_NEAREST_WARN));
    json_t *nearest = json_object_get(attacks, "nearest");
    json_object_set_new(nearest, "applicable", json_boolean(a->components > 0));
    if (a->components == 0) /* nothing to compare: every part masked (or no class released) */
        json_object_set_new(nearest, "reason", json_string("no mean in the clear (every part is masked)"));
    json_t *l = json_pack("{s:i,s:i,s:f,s:f}", "own_rows", a->n_own, "holdout_rows", a->n_held, "fail_at",
                          PFT_MEMBERSHIP_AUC_FAIL, "warn_at", PFT_MEMBERSHIP_AUC_WARN);
    json_object_set_new(l, "ridge", json_real(a->ridge));
    double auc = NAN;
    if (a->n_own && a->n_held) {
        int rc = pft_membership_auc(a->s_own, a->n_own, a->s_held, a->n_held, &auc);
        if (rc) {
            json_decref(l);
            return rc;
        }
        vl = pft_membership_auc_verdict(auc);
    }
    json_object_set_new(l, "auc", num(auc));
    json_object_set_new(l, "applicable", json_boolean(!isnan(auc)));
    if (isnan(auc))
        json_object_set_new(l, "reason", json_string("no held-out rows of the bundle's classes"));
    json_object_set_new(l, "verdict", json_string(pft_verdict_name(vl)));
    json_object_set_new(attacks, "likelihood", l);
    *worst = pft_verdict_worst(*worst, pft_verdict_worst(vn, vl));
    return 0;
}

static json_t *summary_json(const acc_t *a)
{
    json_t *s = json_pack("{s:i,s:i,s:i,s:f,s:i,s:i}", "components", a->components, "one_row", a->one_row,
                          "near_row", a->near_row, "near_ratio", PFT_NEAREST_FAIL, "own_rows", a->n_own,
                          "holdout_rows", a->n_held);
    double lo = a->n_own ? a->ll_own / a->n_own : NAN, lh = a->n_held ? a->ll_held / a->n_held : NAN;
    json_object_set_new(s, "min_rows", a->components ? json_real(a->min_rows) : json_null());
    json_object_set_new(s, "min_ratio", num(a->min_ratio));
    json_object_set_new(s, "ll_own", num(lo));
    json_object_set_new(s, "ll_holdout", num(lh));
    json_object_set_new(s, "ll_diff", num(lo - lh));
    return s;
}

/* The masked parts, each with why it is not attacked: its words are uniform to anyone without the pair
 * secrets (docs/SECAGG.md §4.1). */
static json_t *masked_json(const pft_bundle_t *b)
{
    json_t *a = json_array();
    char name[256];
    for (int p = 0; a && p < pft_bundle_n_parts(b); p++) {
        const pft_bundle_mask_t *m = pft_bundle_part_mask(b, p);
        if (m)
            json_array_append_new(
                a, json_pack(
                       "{s:s,s:s,s:s,s:s}", "part", part_name(b, p, name, sizeof name), "opener", m->opener,
                       "label", m->label, "verdict",
                       "masked: uninformative without the pair secrets of its contributors and its opener"));
    }
    return a;
}

/* Whether a FAIL is an exact leak: a row recovered (vertex, or a mean that is a row) or membership decided by
 * the subspace. */
static int exact_leak(json_t *attacks)
{
    const char *keys[3] = {"subspace", "vertex", "nearest"};
    for (int i = 0; i < 3; i++)
        if (strcmp(json_string_value(json_object_get(json_object_get(attacks, keys[i]), "verdict")),
                   "FAIL") == 0)
            return 1;
    return 0;
}

int pft_audit_run(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                  const pft_audit_opts_t *o, json_t **out, pft_verdict_t *verdict)
{
    int d = pft_bundle_dim(b), cap = own->n > held->n ? own->n : held->n;
    *out = NULL;
    if (own->d != d || (held->n && held->d != d) || o->n_lp < 1 || !(o->ridge >= 0) ||
        !(o->mean_noise >= 0) || !isfinite(o->mean_noise))
        return pft_err(PFT_EINVAL, "audit: the bundle has d = %d, the rows %d and %d columns (%d programs)",
                       d, own->d, held->d, o->n_lp);
    acc_t a = {.classes = json_array(), .min_rows = INFINITY, .min_ratio = INFINITY, .ridge = o->ridge};
    a.s_own = pft_alloc_array((size_t)own->n + 1, sizeof(double));
    a.s_held = pft_alloc_array((size_t)held->n + 1, sizeof(double));
    a.tmp = pft_alloc_array((size_t)cap + 1, sizeof(double));
    json_t *attacks = json_object();
    pft_verdict_t v = PFT_VERDICT_PASS;
    int rc = !a.s_own || !a.s_held || !a.tmp ? pft_err(PFT_ENOMEM, "audit: out of memory") : 0;
    if (rc == 0)
        rc = audit_classes(b, own, held, &a);
    if (rc == 0)
        rc = audit_spans(b, own, held, o, attacks, &v);
    if (rc == 0)
        rc = audit_scores(&a, attacks, &v);
    json_t *zs = NULL;
    pft_verdict_t vz = PFT_VERDICT_PASS;
    if (rc == 0 && (rc = pft_zerosupport_attack(b, own, held, o->mean_noise, &zs, &vz)) == 0) {
        json_object_set_new(attacks, "zero_support", zs);
        v = pft_verdict_worst(v, vz);
    }
    if (rc == 0) {
        *out = json_pack("{s:s,s:s,s:i,s:O,s:o}", "producer", pft_bundle_producer(b), "kind",
                         pft_bundle_is_stats(b) ? "stats" : "gmm", "d", d, "classes", a.classes, "summary",
                         summary_json(&a));
        json_object_set_new(*out, "shared_rank", json_integer(pft_bundle_shared_rank(b)));
        json_object_set_new(*out, "masked_parts", masked_json(b));
        json_object_set(*out, "attacks", attacks);
        json_object_set_new(*out, "verdict", json_string(pft_verdict_name(v)));
        json_object_set_new(*out, "exact_leak", json_boolean(exact_leak(attacks)));
        *verdict = v;
    }
    json_decref(attacks);
    json_decref(a.classes);
    pft_free(a.s_own);
    pft_free(a.s_held);
    pft_free(a.tmp);
    return rc;
}
