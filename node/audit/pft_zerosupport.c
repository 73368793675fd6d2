/* pft_zerosupport: the zero-support membership test (where a released mean is exactly 0, so are its rows). */
#include "pft_zerosupport.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_membership.h"

#include <math.h>
#include <stdlib.h>

/* One released mean of a class and the rows it stands for. */
typedef struct {
    const double *mu;
    double rows;
} released_t;

double pft_zerosupport_unit(pft_dtype_t dtype)
{
    /* round to nearest even: half the smallest subnormal goes to 0; a double rounded through float first may
     * land there from a hair above, hence the margin */
    return (dtype == PFT_DTYPE_F16 ? ldexp(1.0, -25) : ldexp(1.0, -150)) * (1 + 1e-6);
}

int pft_zerosupport_passes(const float *x, const double *mu, int d, double rows, double u)
{
    double tol = rows * u;
    for (int j = 0; j < d; j++)
        if (mu[j] == 0 && (double)x[j] > tol)
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

/* The released means of label c (a GMM class's components; statistics: the class in each clear part) into m,
 * which has room for them all; their number. */
static int released(const pft_bundle_t *b, int c, released_t *m)
{
    int k = 0, d = pft_bundle_dim(b);
    if (!pft_bundle_is_stats(b)) {
        int ci = pft_bundle_find_class(b, c);
        const pft_gmm_t *g = ci >= 0 ? pft_bundle_class_gmm(b, ci) : NULL;
        double n = ci >= 0 ? (double)pft_bundle_class_count(b, ci) : 0;
        for (int j = 0; g && j < pft_gmm_k(g); j++)
            m[k++] = (released_t){pft_gmm_means(g) + (size_t)j * d, n * pft_gmm_weights(g)[j]};
        return k;
    }
    for (int p = 0; p < pft_bundle_n_parts(b); p++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, p);
        int i = st ? pft_gstat_find(st, c) : -1;
        if (i >= 0)
            m[k++] = (released_t){pft_gstat_mean(st, i), (double)pft_gstat_count(st, i)};
    }
    return k;
}

/* Rows of label c in r into *n, those passing one of the k means into *pass. */
static void count(const pft_audit_rows_t *r, int c, const released_t *m, int k, double u, int *n, int *pass)
{
    *n = *pass = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->y[i] != c)
            continue;
        const float *x = r->x + (size_t)i * r->d;
        int ok = 0;
        for (int j = 0; j < k && !ok; j++)
            ok = pft_zerosupport_passes(x, m[j].mu, r->d, m[j].rows, u);
        (*n)++;
        *pass += ok;
    }
}

/* The test of label c (k released means m) into *e. */
static void test_class(int c, const released_t *m, int k, int d, double u, const pft_audit_rows_t *own,
                       const pft_audit_rows_t *held, pft_zerosupport_class_t *e)
{
    *e = (pft_zerosupport_class_t){.label = c, .means = k, .accuracy = NAN};
    for (int j = 0; j < k; j++) {
        int z = 0;
        for (int t = 0; t < d; t++)
            z += m[j].mu[t] == 0;
        e->rows += m[j].rows;
        e->zeros = z > e->zeros ? z : e->zeros;
    }
    count(own, c, m, k, u, &e->own, &e->own_pass);
    count(held, c, m, k, u, &e->held, &e->held_pass);
    if (e->own > 0 && e->held > 0)
        e->accuracy =
            0.5 * ((double)e->own_pass / e->own + (double)(e->held - e->held_pass) / (double)e->held);
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *class_json(const pft_zerosupport_class_t *e)
{
    return json_pack("{s:i,s:f,s:i,s:i,s:i,s:i,s:i,s:i,s:o}", "label", e->label, "rows", e->rows, "means",
                     e->means, "zeros", e->zeros, "own_rows", e->own, "own_pass", e->own_pass, "holdout_rows",
                     e->held, "holdout_pass", e->held_pass, "accuracy", num(e->accuracy));
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
                           json_t **out, pft_verdict_t *verdict)
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
    pft_zerosupport_class_t *e = pft_alloc_array((size_t)n + 1, sizeof *e);
    json_t *o = json_object(), *classes = json_array();
    int rc = oom || !m || !e || !o || !classes ? pft_err(PFT_ENOMEM, "zero-support test: out of memory") : 0;
    double u = pft_zerosupport_unit(pft_bundle_dtype(b));
    for (int i = 0; rc == 0 && i < n; i++) {
        test_class(labels[i], m, released(b, labels[i], m), d, u, own, held, &e[i]);
        json_array_append_new(classes, class_json(&e[i]));
    }
    if (rc == 0) {
        *verdict = summarise(e, n, o);
        json_object_set_new(o, "rounding_unit", json_real(u));
        json_object_set(o, "classes", classes);
        *out = o;
        o = NULL;
    }
    json_decref(o);
    json_decref(classes);
    pft_free(labels);
    pft_free(m);
    pft_free(e);
    return rc;
}
