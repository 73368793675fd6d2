/* cmd_audit: `pftnet audit BUNDLE --features X.npy --labels Y.npy [--holdout-features H.npy --holdout-labels
 * HY.npy] [--prep P] [--json]`: what a bundle reveals about the rows it was fitted on.
 *
 * Per class and released component (a GMM component, or one class of a statistics part):
 * - rows: the rows it stands for, count × weight (statistics: the class count);
 * - ratio: the distance from its mean to the nearest own row of the class, over the typical distance
 *   between own rows (the median nearest-neighbour distance within the class). A ratio ≪ 1 means the mean
 *   is essentially one row: what a component standing for one row gives away;
 * - membership: the mean log-likelihood of own rows of the class under the released class model against that
 *   of held-out rows of the class (optional), and their difference (per row). A large positive difference
 *   says the model fits its training rows much better than fresh ones: it remembers them.
 * Statistics are audited as the Gaussian they define (mean, scatter / n + 1e-6 I; tied: the shared scatter /
 * N). Exit 0; 1 if a file cannot be read or does not match the bundle (dimension); 2 on bad usage. */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_gstat.h"
#include "pft_npy.h"
#include "pft_prep.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_NN_MAX 2000    /* rows of a class used for the typical nearest-neighbour distance */
#define AUDIT_REG 1e-6       /* added to the diagonal of a statistics Gaussian */
#define AUDIT_NEAR_RATIO 0.1 /* summary: a mean nearer than this many typical distances "is a row" */

/* Rows of one file pair, preprocessed. */
typedef struct {
    float *x;
    int32_t *y;
    int n, d;
} rows_t;

/* What the audit counts over the whole bundle. */
typedef struct {
    int components, one_row, near_row;
    double min_rows;
    double ll_own, ll_held; /* sums over rows */
    long n_own, n_held;
} summary_t;

static void rows_free(rows_t *r)
{
    PFT_FREE(r->x);
    PFT_FREE(r->y);
}

/* Reads features and labels, applies prep; 0 or 1 after printing why. */
static int rows_load(const char *xp, const char *yp, pft_prep_t prep, rows_t *r)
{
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(xp, &r->x, &n, &d) || pft_npy_read_i32(yp, &r->y, &ny)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        return 1;
    }
    if (n != ny || n > INT32_MAX / 2 || d > 1 << 20) {
        fprintf(stderr, "pftnet audit: %s has %lld rows, %s %lld labels\n", xp, (long long)n, yp,
                (long long)ny);
        return 1;
    }
    r->n = (int)n;
    r->d = (int)d;
    if (pft_prep_apply(prep, r->x, r->n, r->d)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        return 1;
    }
    return 0;
}

/* The rows of class c (a new buffer, *m rows; NULL with *m = 0 when there are none or out of memory). */
static float *gather(const rows_t *r, int c, int *m)
{
    *m = 0;
    for (int i = 0; i < r->n; i++)
        *m += r->y[i] == c;
    float *x = *m ? pft_alloc_array((size_t)*m * (size_t)r->d, sizeof *x) : NULL;
    if (!x) {
        *m = 0;
        return NULL;
    }
    for (int i = 0, j = 0; i < r->n; i++)
        if (r->y[i] == c)
            memcpy(x + (size_t)j++ * r->d, r->x + (size_t)i * r->d, (size_t)r->d * sizeof *x);
    return x;
}

static double dist2_fd(const float *a, const double *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++) {
        double t = (double)a[j] - b[j];
        s += t * t;
    }
    return s;
}

static double dist2_ff(const float *a, const float *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++) {
        double t = (double)a[j] - (double)b[j];
        s += t * t;
    }
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over (at most AUDIT_NN_MAX) rows of the distance to the nearest other row; NaN with < 2 rows. */
static double typical_nn(const float *x, int m, int d)
{
    int n = m < AUDIT_NN_MAX ? m : AUDIT_NN_MAX;
    if (n < 2)
        return NAN;
    double *nn = pft_alloc_array((size_t)n, sizeof *nn);
    if (!nn)
        return NAN;
    for (int i = 0; i < n; i++) {
        nn[i] = INFINITY;
        for (int j = 0; j < n; j++)
            if (j != i)
                nn[i] = fmin(nn[i], dist2_ff(x + (size_t)i * d, x + (size_t)j * d, d));
    }
    qsort(nn, (size_t)n, sizeof *nn, cmp_double);
    double med = n % 2 ? nn[n / 2] : 0.5 * (nn[n / 2 - 1] + nn[n / 2]);
    pft_free(nn);
    return sqrt(med);
}

/* Distance from mu to the nearest of the m rows; NaN without rows. */
static double nearest(const float *x, int m, int d, const double *mu)
{
    double best = INFINITY;
    for (int i = 0; i < m; i++)
        best = fmin(best, dist2_fd(x + (size_t)i * d, mu, d));
    return m ? sqrt(best) : NAN;
}

/* Sum of log p(x_i) over the rows under g into *sum; 0 or an error. */
static int ll_sum(const pft_gmm_t *g, const float *x, int m, double *sum)
{
    *sum = 0;
    if (!m)
        return 0;
    double avg;
    int rc = pft_gmm_score(g, x, m, &avg);
    if (rc == 0)
        *sum = avg * m;
    return rc;
}

/* The Gaussian of class i of statistics st: mean, covariance scatter / n (tied: shared scatter / N) plus
 * AUDIT_REG on the diagonal. NULL on failure (message set). */
static pft_gmm_t *stats_gaussian(const pft_gstat_t *st, int i)
{
    int d = pft_gstat_dim(st);
    size_t dd = (size_t)d * d;
    int tied = pft_gstat_kind(st) == PFT_GSTAT_TIED;
    const double *S = tied ? pft_gstat_tied_scatter(st) : pft_gstat_scatter(st, i);
    double div = tied ? (double)pft_gstat_total(st) : (double)pft_gstat_count(st, i), one = 1.0;
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
        cov[(size_t)j * d + j] += AUDIT_REG;
    if (pft_gmm_set_params(g, &one, pft_gstat_mean(st, i), cov))
        pft_gmm_destroy(&g);
    pft_free(cov);
    return g;
}

/* Audits one released class model g (count n) of label c: one JSON entry (part: the statistics part, -1
 * for a mixture), summary updated. Returns 0 or an error code. */
static int audit_class(const pft_gmm_t *g, int c, double n, int part, const rows_t *own, const rows_t *held,
                       json_t *classes, summary_t *s)
{
    int d = own->d, m = 0, mh = 0, rc = 0;
    float *xo = gather(own, c, &m), *xh = held->x ? gather(held, c, &mh) : NULL;
    double nn = typical_nn(xo, m, d), llo = 0, llh = 0;
    json_t *comps = json_array();
    for (int k = 0; k < pft_gmm_k(g); k++) {
        const double *mu = pft_gmm_means(g) + (size_t)k * d;
        double rows = n * pft_gmm_weights(g)[k], dist = nearest(xo, m, d, mu), ratio = dist / nn;
        s->components++;
        s->one_row += rows < 1.5;
        s->near_row += ratio < AUDIT_NEAR_RATIO;
        s->min_rows = fmin(s->min_rows, rows);
        json_array_append_new(comps,
                              json_pack("{s:f,s:f,s:o,s:o}", "weight", pft_gmm_weights(g)[k], "rows", rows,
                                        "nearest_row", isnan(dist) ? json_null() : json_real(dist), "ratio",
                                        isfinite(ratio) ? json_real(ratio) : json_null()));
    }
    if ((rc = ll_sum(g, xo, m, &llo)) == 0)
        rc = ll_sum(g, xh, mh, &llh);
    s->ll_own += llo;
    s->ll_held += llh;
    s->n_own += m;
    s->n_held += mh;
    json_t *e = json_pack("{s:i,s:f,s:i,s:i,s:o,s:o,s:i}", "label", c, "n", n, "k", pft_gmm_k(g), "own_rows",
                          m, "nn_typical", isnan(nn) ? json_null() : json_real(nn), "components", comps,
                          "holdout_rows", mh);
    if (part >= 0)
        json_object_set_new(e, "part", json_integer(part));
    json_object_set_new(e, "ll_own", m ? json_real(llo / m) : json_null());
    json_object_set_new(e, "ll_holdout", mh ? json_real(llh / mh) : json_null());
    json_object_set_new(e, "ll_diff", m && mh ? json_real(llo / m - llh / mh) : json_null());
    json_array_append_new(classes, e);
    pft_free(xo);
    pft_free(xh);
    return rc;
}

/* Every class of the bundle, into classes and s. */
static int audit_bundle(const pft_bundle_t *b, const rows_t *own, const rows_t *held, json_t *classes,
                        summary_t *s)
{
    int rc = 0;
    if (!pft_bundle_is_stats(b)) {
        for (int ci = 0; rc == 0 && ci < pft_bundle_n_classes(b); ci++)
            rc = audit_class(pft_bundle_class_gmm(b, ci), pft_bundle_class_label(b, ci),
                             (double)pft_bundle_class_count(b, ci), -1, own, held, classes, s);
        return rc;
    }
    for (int p = 0; rc == 0 && p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p);
        for (int i = 0; rc == 0 && i < pft_gstat_n_classes(st); i++) {
            pft_gmm_t *g = stats_gaussian(st, i);
            rc = g ? audit_class(g, pft_gstat_label(st, i), (double)pft_gstat_count(st, i), p, own, held,
                                 classes, s)
                   : PFT_ENUMERIC;
            pft_gmm_destroy(&g);
        }
    }
    return rc;
}

static void print_text(const char *path, const pft_bundle_t *b, const json_t *classes, const summary_t *s,
                       int has_held)
{
    int stats = pft_bundle_is_stats(b);
    printf("bundle %s: producer %s, %s, d %d\n", path, pft_bundle_producer(b),
           stats ? "exact statistics" : "GMMs", pft_bundle_dim(b));
    printf("%5s %4s %9s %4s %9s %9s %9s %7s %11s %11s %9s\n", "class", "part", "n", "K", "min_rows",
           "one_row", "nn_typ", "min_rat", "ll_own", "ll_held", "ll_diff");
    size_t i;
    json_t *e;
    json_array_foreach(classes, i, e)
    {
        json_t *comps = json_object_get(e, "components"), *c;
        size_t k;
        double mr = INFINITY, mrat = INFINITY;
        int one = 0;
        json_array_foreach(comps, k, c)
        {
            double r = json_number_value(json_object_get(c, "rows"));
            mr = fmin(mr, r);
            one += r < 1.5;
            json_t *rat = json_object_get(c, "ratio");
            if (json_is_number(rat))
                mrat = fmin(mrat, json_number_value(rat));
        }
        json_t *part = json_object_get(e, "part");
        char ps[16] = "-";
        if (part)
            snprintf(ps, sizeof ps, "%d", (int)json_integer_value(part));
        printf("%5d %4s %9.0f %4d %9.2f %9d %9.4f %7.3f",
               (int)json_integer_value(json_object_get(e, "label")), ps,
               json_number_value(json_object_get(e, "n")), (int)json_array_size(comps), mr, one,
               json_number_value(json_object_get(e, "nn_typical")), mrat);
        const char *keys[3] = {"ll_own", "ll_holdout", "ll_diff"};
        for (int j = 0; j < 3; j++) {
            json_t *v = json_object_get(e, keys[j]);
            if (json_is_number(v))
                printf(" %11.2f", json_number_value(v));
            else
                printf(" %11s", "-");
        }
        printf("\n");
    }
    printf("components %d: %d stand for fewer than 1.5 rows; smallest stands for %.2f rows; %d means lie "
           "within %.1f of the typical row spacing of an own row\n",
           s->components, s->one_row, s->min_rows, s->near_row, AUDIT_NEAR_RATIO);
    if (s->n_own)
        printf("membership: mean log-likelihood of own rows %.2f", s->ll_own / (double)s->n_own);
    if (has_held && s->n_held)
        printf(", held-out rows %.2f, difference %.2f per row", s->ll_held / (double)s->n_held,
               s->ll_own / (double)s->n_own - s->ll_held / (double)s->n_held);
    printf("\n");
}

static json_t *summary_json(const char *path, const pft_bundle_t *b, json_t *classes, const summary_t *s,
                            const char *prep)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:s,s:o}", "bundle", path, "producer", pft_bundle_producer(b),
                          "kind", pft_bundle_is_stats(b) ? "stats" : "gmm", "d", pft_bundle_dim(b), "prep",
                          prep, "classes", classes);
    json_t *sum = json_pack("{s:i,s:i,s:i,s:f,s:I,s:I}", "components", s->components, "one_row", s->one_row,
                            "near_row", s->near_row, "near_ratio", AUDIT_NEAR_RATIO, "own_rows",
                            (json_int_t)s->n_own, "holdout_rows", (json_int_t)s->n_held);
    if (!o || !sum) {
        json_decref(o);
        json_decref(sum);
        return NULL;
    }
    json_object_set_new(sum, "min_rows", s->components ? json_real(s->min_rows) : json_null());
    double lo = s->n_own ? s->ll_own / (double)s->n_own : NAN,
           lh = s->n_held ? s->ll_held / (double)s->n_held : NAN;
    json_object_set_new(sum, "ll_own", isnan(lo) ? json_null() : json_real(lo));
    json_object_set_new(sum, "ll_holdout", isnan(lh) ? json_null() : json_real(lh));
    json_object_set_new(sum, "ll_diff", isnan(lo - lh) ? json_null() : json_real(lo - lh));
    json_object_set_new(o, "summary", sum);
    return o;
}

int pft_cmd_audit(int argc, char **argv)
{
    const char *fx = NULL, *fy = NULL, *hx = NULL, *hy = NULL, *prep_name = NULL;
    int json = 0;
    const pft_opt_t opts[] = {
        {"features", PFT_OPT_STRING, &fx, NULL, 0, -1, 1, "X.npy",
         "the rows the bundle was fitted on (own rows)"},
        {"labels", PFT_OPT_STRING, &fy, NULL, 0, -1, 1, "Y.npy", "their labels"},
        {"holdout-features", PFT_OPT_STRING, &hx, NULL, 0, -1, 0, "X.npy",
         "rows of the same distribution the bundle did not see (membership signal)"},
        {"holdout-labels", PFT_OPT_STRING, &hy, NULL, 0, -1, 0, "Y.npy", "their labels"},
        {"prep", PFT_OPT_STRING, &prep_name, "l2", 0, -1, 0, "P",
         "the run's feature preprocessing, applied to both: none, l2, sqrt-l2"},
        {"json", PFT_OPT_FLAG, &json, NULL, 0, -1, 0, NULL, "print one JSON object on stdout"},
        {0},
    };
    const pft_cli_t cli = {
        .prog = "pftnet audit",
        .positional = "BUNDLE",
        .min_pos = 1,
        .max_pos = 1,
        .summary =
            "What a bundle reveals about the rows it was fitted on. Per class and released component: the\n"
            "rows it stands for (count x weight; statistics: the class count), the distance from its mean "
            "to\n"
            "the nearest own row over the typical nearest-neighbour distance between own rows (ratio; << 1:\n"
            "the mean is essentially a row), and the mean log-likelihood of own rows vs held-out rows under\n"
            "the released model (membership signal; their difference). See docs/USAGE.md \"pftnet audit\".\n"
            "Exit 0; 1 if a file cannot be read or does not match the bundle; 2 on bad usage.",
        .opts = opts,
    };
    const char *pos[1] = {NULL};
    int n_pos = 0, rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc)
        return rc == 1 ? 0 : 2;
    pft_prep_t prep;
    if (pft_prep_parse(prep_name, &prep)) {
        fprintf(stderr, "pftnet audit: --prep: %s\n", pft_errmsg());
        return 2;
    }
    if (!hx != !hy) {
        fprintf(stderr, "pftnet audit: --holdout-features and --holdout-labels go together\n");
        return 2;
    }
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    uint8_t *msg = NULL;
    size_t len = 0;
    pft_bundle_t *b = NULL;
    rows_t own = {0}, held = {0};
    json_t *classes = json_array();
    summary_t s = {.min_rows = INFINITY};
    int code = 1;
    if (pft_fsio_read(pos[0], lim.max_bytes, &msg, &len) || pft_bundle_decode(msg, len, &lim, &b)) {
        fprintf(stderr, "pftnet audit: %s: %s\n", pos[0], pft_errmsg());
        goto done;
    }
    if (rows_load(fx, fy, prep, &own) || (hx && rows_load(hx, hy, prep, &held)))
        goto done;
    if (own.d != pft_bundle_dim(b) || (hx && held.d != own.d)) {
        fprintf(stderr, "pftnet audit: the bundle has d = %d; %s has %d columns%s\n", pft_bundle_dim(b), fx,
                own.d, hx && held.d != own.d ? " and the held-out rows another number" : "");
        goto done;
    }
    if (audit_bundle(b, &own, &held, classes, &s)) {
        fprintf(stderr, "pftnet audit: %s\n", pft_errmsg());
        goto done;
    }
    code = 0;
    if (json) {
        json_t *o = summary_json(pos[0], b, json_incref(classes), &s, prep_name);
        char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8)) : NULL;
        if (text)
            printf("%s\n", text);
        else
            fprintf(stderr, "pftnet audit: out of memory\n"), code = 1;
        free(text);
        json_decref(o);
    } else {
        print_text(pos[0], b, classes, &s, hx != NULL);
    }
done:
    json_decref(classes);
    rows_free(&own);
    rows_free(&held);
    pft_bundle_destroy(&b);
    pft_free(msg);
    return code;
}
