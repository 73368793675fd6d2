/* pft_zerosupport: the zero-support membership test (where a released mean is exactly 0, so are its rows). */
#include "pft_zerosupport.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_meannoise.h"
#include "pft_membership.h"

#include <math.h>
#include <stdlib.h>

/* One released mean of a class and the rows it stands for; for statistics, the class sum an attacker reads
 * from it (the mean_noise rescaling undone as its expectation gives it) and the noise std on that sum. */
typedef struct {
    const double *mu;
    double rows;
    double *sum; /* statistics: rows·μ·sqrt(1 + dσ²/‖rows·μ‖²) (d doubles, owned by the caller); GMM: NULL */
    double sigma; /* statistics: mean_noise·sqrt(contributors of the part), a single contributor's at its
                   * class's count (pft_meannoise_sigma); 0: exact */
} released_t;

/* Margins of the bound test in noise standard deviations: one the attacker may choose, the best reported. */
static const int s_margins[] = {0, 1, 2, 3, 4};
#define N_MARGINS ((int)(sizeof s_margins / sizeof *s_margins))

double pft_zerosupport_unit(pft_dtype_t dtype)
{
    /* round to nearest even: half the smallest subnormal goes to 0; a double rounded through float first may
     * land there from a hair above, hence the margin */
    return (dtype == PFT_DTYPE_F16 ? ldexp(1.0, -25) : ldexp(1.0, -150)) * (1 + 1e-6);
}

double pft_zerosupport_rel(pft_dtype_t dtype)
{
    return dtype == PFT_DTYPE_F16 ? ldexp(1.0, -10) : ldexp(1.0, -22); /* twice the half-ulp: a margin */
}

int pft_zerosupport_passes(const float *x, const double *mu, int d, double rows, double u)
{
    double tol = rows * u;
    for (int j = 0; j < d; j++)
        if (mu[j] == 0 && (double)x[j] > tol)
            return 0;
    return 1;
}

int pft_zerosupport_bounded(const float *x, const double *sum, int d, double rows, double u, double rel,
                            double slack)
{
    for (int j = 0; j < d; j++)
        if ((double)x[j] > sum[j] * (1 + rel) + rows * u + slack)
            return 0;
    return 1;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The labels b releases in the clear, ascending and distinct, into a new array (count in *n); NULL with
 * *n = 0 when none or out of memory (*oom = 1). */
static int *labels_of(const pft_bundle_t *b, int *n, int *oom)
{
    int cap = 0, m = 0;
    *n = 0;
    if (!pft_bundle_is_stats(b))
        cap = pft_bundle_n_classes(b);
    for (int p = 0; pft_bundle_is_stats(b) && p < pft_bundle_n_parts(b); p++)
        cap += pft_bundle_part_stats(b, p) ? pft_gstat_n_classes(pft_bundle_part_stats(b, p)) : 0;
    int *l = cap ? pft_alloc_array((size_t)cap, sizeof *l) : NULL;
    if (!l) {
        *oom = cap > 0;
        return NULL;
    }
    if (!pft_bundle_is_stats(b))
        for (int i = 0; i < cap; i++)
            l[m++] = pft_bundle_class_label(b, i);
    for (int p = 0; pft_bundle_is_stats(b) && p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p);
        for (int i = 0; st && i < pft_gstat_n_classes(st); i++)
            l[m++] = pft_gstat_label(st, i);
    }
    qsort(l, (size_t)m, sizeof *l, cmp_int);
    for (int i = 0; i < m; i++)
        if (*n == 0 || l[*n - 1] != l[i])
            l[(*n)++] = l[i];
    return l;
}

/* m->sum := what m's mean says of its class sum, for a noise std sigma on the sum (see released_t). */
static void read_sum(released_t *m, int d)
{
    double nn = 0;
    for (int j = 0; j < d; j++)
        nn += (m->rows * m->mu[j]) * (m->rows * m->mu[j]);
    double k = nn > 0 ? sqrt(1 + d * m->sigma * m->sigma / nn) : 1.0;
    for (int j = 0; j < d; j++)
        m->sum[j] = m->rows * m->mu[j] * k;
}

/* The noise std on a class sum of n rows in part p of b at mean_noise sigma per contributor: one
 * contributor's as pftnode draws it (pft_meannoise_sigma); several contributors' classes are of counts the
 * bundle does not give apart, so sigma·sqrt(contributors), the least it can be. */
static double part_sigma(const pft_bundle_t *b, int p, double sigma, uint64_t n)
{
    int k = pft_bundle_part_n_contributors(b, p);
    return k == 1 ? pft_meannoise_sigma(sigma, n) : sigma * sqrt((double)k);
}

/* The released means of label c (a GMM class's components; statistics: the class in each clear part, its
 * sum read into m[k].sum, at noise std sigma per contributor) into m, which has room for them all; their
 * number. */
static int released(const pft_bundle_t *b, int c, double sigma, released_t *m)
{
    int k = 0, d = pft_bundle_dim(b);
    if (!pft_bundle_is_stats(b)) {
        int ci = pft_bundle_find_class(b, c);
        const pft_gmm_t *g = ci >= 0 ? pft_bundle_class_gmm(b, ci) : NULL;
        double n = ci >= 0 ? (double)pft_bundle_class_count(b, ci) : 0;
        for (int j = 0; g && j < pft_gmm_k(g); j++)
            m[k++] = (released_t){pft_gmm_means(g) + (size_t)j * d, n * pft_gmm_weights(g)[j], NULL, 0};
        return k;
    }
    for (int p = 0; p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p);
        int i = st ? pft_gstat_find(st, c) : -1;
        if (i < 0)
            continue;
        double *buf = m[k].sum;
        m[k] = (released_t){pft_gstat_mean(st, i), (double)pft_gstat_count(st, i), buf,
                            part_sigma(b, p, sigma, pft_gstat_count(st, i))};
        read_sum(&m[k++], d);
    }
    return k;
}

/* Whether x passes released mean m: zero support (GMM), or under its class sum within margin standard
 * deviations of its noise (statistics). */
static int passes(const float *x, const released_t *m, int d, double u, double rel, int margin)
{
    if (!m->sum)
        return pft_zerosupport_passes(x, m->mu, d, m->rows, u);
    return pft_zerosupport_bounded(x, m->sum, d, m->rows, u, rel, margin * m->sigma);
}

/* Rows of label c in r into *n, those passing one of the k means into *pass. */
static void count(const pft_audit_rows_t *r, int c, const released_t *m, int k, double u, double rel,
                  int margin, int *n, int *pass)
{
    *n = *pass = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->y[i] != c)
            continue;
        const float *x = r->x + (size_t)i * r->d;
        int ok = 0;
        for (int j = 0; j < k && !ok; j++)
            ok = passes(x, &m[j], r->d, u, rel, margin);
        (*n)++;
        *pass += ok;
    }
}

/* The test of label c (k released means m) into *e: at each margin (statistics with noise), the best. */
static void test_class(int c, const released_t *m, int k, int d, double u, double rel,
                       const pft_audit_rows_t *own, const pft_audit_rows_t *held, pft_zerosupport_class_t *e)
{
    *e = (pft_zerosupport_class_t){.label = c, .means = k, .accuracy = NAN};
    int noised = 0;
    for (int j = 0; j < k; j++)
        noised |= m[j].sum && m[j].sigma > 0;
    for (int j = 0; j < k; j++) {
        int z = 0;
        for (int t = 0; t < d; t++)
            z += m[j].mu[t] == 0;
        e->rows += m[j].rows;
        e->zeros = z > e->zeros ? z : e->zeros;
    }
    for (int i = 0; i < (noised ? N_MARGINS : 1); i++) {
        pft_zerosupport_class_t t = *e;
        count(own, c, m, k, u, rel, s_margins[i], &t.own, &t.own_pass);
        count(held, c, m, k, u, rel, s_margins[i], &t.held, &t.held_pass);
        if (t.own > 0 && t.held > 0)
            t.accuracy = 0.5 * ((double)t.own_pass / t.own + (double)(t.held - t.held_pass) / (double)t.held);
        t.margin = s_margins[i];
        if (i == 0 || (!isnan(t.accuracy) && !(t.accuracy <= e->accuracy)))
            *e = t;
    }
}

/* e := the test of label c with its k means m read as exact sums (margin 0, no rescaling), where that decides
 * better than e (the reading at the assumed noise). */
static void better_exact(int c, const released_t *m, int k, int d, double u, double rel,
                         const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                         pft_zerosupport_class_t *e)
{
    pft_zerosupport_class_t x;
    test_class(c, m, k, d, u, rel, own, held, &x);
    x.exact = 1;
    if (!isnan(x.accuracy) && !(x.accuracy <= e->accuracy))
        *e = x;
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *class_json(const pft_zerosupport_class_t *e)
{
    return json_pack("{s:i,s:f,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:o}", "label", e->label, "rows", e->rows,
                     "means", e->means, "zeros", e->zeros, "own_rows", e->own, "own_pass", e->own_pass,
                     "holdout_rows", e->held, "holdout_pass", e->held_pass, "margin", e->margin,
                     "exact_reading", e->exact, "accuracy", num(e->accuracy));
}

/* The verdict, the worst class and the pooled figures of the n classes e into o; the verdict. */
static pft_verdict_t summarise(const pft_zerosupport_class_t *e, int n, json_t *o)
{
    int worst = -1;
    pft_zerosupport_class_t all = {.label = -1, .accuracy = NAN};
    for (int i = 0; i < n; i++) {
        if (!isnan(e[i].accuracy) && (worst < 0 || e[i].accuracy > e[worst].accuracy))
            worst = i;
        all.means += e[i].means;
        all.rows += e[i].rows;
        all.zeros = e[i].zeros > all.zeros ? e[i].zeros : all.zeros;
        all.own += e[i].own, all.own_pass += e[i].own_pass;
        all.held += e[i].held, all.held_pass += e[i].held_pass;
    }
    if (all.own > 0 && all.held > 0)
        all.accuracy =
            0.5 * ((double)all.own_pass / all.own + (double)(all.held - all.held_pass) / (double)all.held);
    pft_verdict_t v = worst < 0 ? PFT_VERDICT_PASS : pft_membership_accuracy_verdict(e[worst].accuracy);
    json_object_set_new(o, "verdict", json_string(pft_verdict_name(v)));
    json_object_set_new(o, "applicable", json_boolean(worst >= 0));
    if (worst < 0)
        json_object_set_new(o, "reason", json_string("no class with both own and held-out rows"));
    json_object_set_new(o, "accuracy", num(worst < 0 ? NAN : e[worst].accuracy));
    json_object_set_new(o, "worst", worst < 0 ? json_null() : class_json(&e[worst]));
    json_object_set_new(o, "overall", class_json(&all));
    json_object_set_new(o, "fail_at", json_real(PFT_MEMBERSHIP_ACC_FAIL));
    json_object_set_new(o, "warn_above", json_real(PFT_MEMBERSHIP_ACC_WARN));
    return v;
}

int pft_zerosupport_attack(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                           double sigma, json_t **out, pft_verdict_t *verdict)
{
    int d = pft_bundle_dim(b), n = 0, oom = 0, cap = pft_bundle_is_stats(b) ? pft_bundle_n_parts(b) : 0;
    *out = NULL;
    if (own->d != d || (held->n && held->d != d))
        return pft_err(PFT_EINVAL, "zero-support test: the bundle has d = %d, the rows %d and %d columns", d,
                       own->d, held->d);
    for (int i = 0; !pft_bundle_is_stats(b) && i < pft_bundle_n_classes(b); i++)
        cap = pft_gmm_k(pft_bundle_class_gmm(b, i)) > cap ? pft_gmm_k(pft_bundle_class_gmm(b, i)) : cap;
    int *labels = labels_of(b, &n, &oom);
    released_t *m = pft_alloc_array((size_t)cap + 1, sizeof *m);
    double *sums = pft_bundle_is_stats(b) ? pft_alloc_array((size_t)cap * d + 1, sizeof *sums) : NULL;
    pft_zerosupport_class_t *e = pft_alloc_array((size_t)n + 1, sizeof *e);
    json_t *o = json_object(), *classes = json_array();
    int rc = oom || !m || !e || !o || !classes || (pft_bundle_is_stats(b) && !sums)
                 ? pft_err(PFT_ENOMEM, "zero-support test: out of memory")
                 : 0;
    double u = pft_zerosupport_unit(pft_bundle_dtype(b)), rel = pft_zerosupport_rel(pft_bundle_dtype(b));
    for (int i = 0; rc == 0 && sums && i < cap; i++)
        m[i].sum = sums + (size_t)i * d;
    for (int i = 0; rc == 0 && i < n; i++) {
        test_class(labels[i], m, released(b, labels[i], sigma, m), d, u, rel, own, held, &e[i]);
        if (sigma > 0 && sums) /* the sums read as exact too: a producer may have sent them so */
            better_exact(labels[i], m, released(b, labels[i], 0, m), d, u, rel, own, held, &e[i]);
        json_array_append_new(classes, class_json(&e[i]));
    }
    if (rc == 0) {
        *verdict = summarise(e, n, o);
        json_object_set_new(o, "rounding_unit", json_real(u));
        json_object_set_new(o, "mean_noise", json_real(sigma));
        json_object_set(o, "classes", classes);
        *out = o;
        o = NULL;
    }
    json_decref(o);
    json_decref(classes);
    pft_free(labels);
    pft_free(m);
    pft_free(sums);
    pft_free(e);
    return rc;
}
