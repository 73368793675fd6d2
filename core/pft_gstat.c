/* pft_gstat: exact Gaussian statistics of labelled rows, merged by the pairwise update (theory in
 * pft_gstat.h). */
#include "pft_gstat.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_linalg.h"

#define GSTAT_MAX_D 65536
#define GSTAT_MAX_COUNT (UINT64_C(1) << 62)

typedef struct {
    int label;
    uint64_t n;
    double *mean;    /* d */
    double *scatter; /* d×d, FULL only */
} gclass_t;

struct pft_gstat_t {
    pft_gstat_kind_t kind;
    int d;
    int n_classes;
    int cap;
    gclass_t *cls; /* sorted by label */
    double *w;     /* d×d within-class scatter, TIED only */
};

const char *pft_gstat_kind_name(pft_gstat_kind_t kind)
{
    switch (kind) {
    case PFT_GSTAT_FULL:
        return "full";
    case PFT_GSTAT_TIED:
        return "tied";
    }
    return NULL;
}

pft_gstat_t *pft_gstat_new(pft_gstat_kind_t kind, int d)
{
    if (!pft_gstat_kind_name(kind) || d < 1 || d > GSTAT_MAX_D) {
        pft_err(PFT_EINVAL, "gstat: kind %d, d = %d (1..%d)", (int)kind, d, GSTAT_MAX_D);
        return NULL;
    }
    pft_gstat_t *s = pft_calloc(1, sizeof *s);
    if (!s) {
        pft_err(PFT_ENOMEM, "gstat: out of memory");
        return NULL;
    }
    s->kind = kind;
    s->d = d;
    if (kind == PFT_GSTAT_TIED) {
        s->w = pft_calloc((size_t)d * d, sizeof(double));
        if (!s->w) {
            pft_free(s);
            pft_err(PFT_ENOMEM, "gstat: out of memory for a %d×%d scatter", d, d);
            return NULL;
        }
    }
    return s;
}

static void class_free(gclass_t *c)
{
    PFT_FREE(c->mean);
    PFT_FREE(c->scatter);
}

void pft_gstat_destroy(pft_gstat_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_gstat_t *s = *self_p;
    for (int i = 0; i < s->n_classes; i++)
        class_free(&s->cls[i]);
    pft_free(s->cls);
    pft_free(s->w);
    pft_free(s);
    *self_p = NULL;
}

pft_gstat_t *pft_gstat_dup(const pft_gstat_t *self)
{
    pft_gstat_t *s = pft_gstat_new(self->kind, self->d);
    if (!s)
        return NULL;
    size_t dd = (size_t)self->d * self->d;
    if (s->w)
        memcpy(s->w, self->w, dd * sizeof(double));
    for (int i = 0; i < self->n_classes; i++) {
        const gclass_t *c = &self->cls[i];
        if (pft_gstat_add_class(s, c->label, c->n, c->mean, c->scatter) != 0) {
            pft_gstat_destroy(&s);
            return NULL;
        }
    }
    return s;
}

pft_gstat_kind_t pft_gstat_kind(const pft_gstat_t *self)
{
    return self->kind;
}
int pft_gstat_dim(const pft_gstat_t *self)
{
    return self->d;
}
int pft_gstat_n_classes(const pft_gstat_t *self)
{
    return self->n_classes;
}
int pft_gstat_label(const pft_gstat_t *self, int i)
{
    return self->cls[i].label;
}
uint64_t pft_gstat_count(const pft_gstat_t *self, int i)
{
    return self->cls[i].n;
}
const double *pft_gstat_mean(const pft_gstat_t *self, int i)
{
    return self->cls[i].mean;
}
const double *pft_gstat_scatter(const pft_gstat_t *self, int i)
{
    return self->cls[i].scatter;
}
const double *pft_gstat_tied_scatter(const pft_gstat_t *self)
{
    return self->w;
}

int pft_gstat_find(const pft_gstat_t *self, int label)
{
    int lo = 0, hi = self->n_classes - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (self->cls[mid].label == label)
            return mid;
        if (self->cls[mid].label < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

uint64_t pft_gstat_total(const pft_gstat_t *self)
{
    uint64_t t = 0;
    for (int i = 0; i < self->n_classes; i++)
        t += self->cls[i].n;
    return t;
}

static int all_finite(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* Inserts an empty class (n = 0) for label at its sorted place; returns its index or a negative error. */
static int class_insert(pft_gstat_t *s, int label)
{
    if (s->n_classes == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        gclass_t *nc = pft_realloc(s->cls, (size_t)cap * sizeof *nc);
        if (!nc)
            return pft_err(PFT_ENOMEM, "gstat: out of memory for %d classes", cap);
        s->cls = nc;
        s->cap = cap;
    }
    gclass_t c = {.label = label};
    size_t dd = (size_t)s->d * s->d;
    c.mean = pft_calloc((size_t)s->d, sizeof(double));
    if (s->kind == PFT_GSTAT_FULL)
        c.scatter = pft_calloc(dd, sizeof(double));
    if (!c.mean || (s->kind == PFT_GSTAT_FULL && !c.scatter)) {
        class_free(&c);
        return pft_err(PFT_ENOMEM, "gstat: out of memory for class %d", label);
    }
    int at = 0;
    while (at < s->n_classes && s->cls[at].label < label)
        at++;
    memmove(&s->cls[at + 1], &s->cls[at], (size_t)(s->n_classes - at) * sizeof *s->cls);
    s->cls[at] = c;
    s->n_classes++;
    return at;
}

/* The pairwise update of one class with a part (n, mean, scatter) whose values were checked. The scatter
 * target is the class's own (FULL) or W (TIED); only its lower triangle is right afterwards: the caller
 * mirrors it (pft_la_sym_from_lower) once after its last update, not once per class. */
static void merge_part(pft_gstat_t *s, gclass_t *c, uint64_t n, const double *mean, const double *scatter)
{
    int d = s->d;
    size_t dd = (size_t)d * d;
    double *target = s->kind == PFT_GSTAT_FULL ? c->scatter : s->w;
    if (scatter)
        cblas_daxpy((int)dd, 1.0, scatter, 1, target, 1);
    if (c->n == 0) {
        memcpy(c->mean, mean, (size_t)d * sizeof(double));
        c->n = n;
        return;
    }
    double na = (double)c->n, nb = (double)n, nt = na + nb;
    double *delta = pft_alloc((size_t)d * sizeof(double));
    if (delta) {
        for (int j = 0; j < d; j++)
            delta[j] = mean[j] - c->mean[j];
        cblas_dsyr(CblasRowMajor, CblasLower, d, na * nb / nt, delta, 1, target, d);
        for (int j = 0; j < d; j++)
            c->mean[j] += (nb / nt) * delta[j];
        pft_free(delta);
    } else {
        /* No scratch: the same update, one element at a time. */
        double f = na * nb / nt;
        for (int i = 0; i < d; i++)
            for (int j = 0; j <= i; j++)
                target[(size_t)i * d + j] += f * (mean[i] - c->mean[i]) * (mean[j] - c->mean[j]);
        for (int j = 0; j < d; j++)
            c->mean[j] += (nb / nt) * (mean[j] - c->mean[j]);
    }
    c->n += n;
}

int pft_gstat_add_class(pft_gstat_t *self, int label, uint64_t n, const double *mean, const double *scatter)
{
    size_t dd = (size_t)self->d * self->d;
    if (label < 0 || n < 1 || n > GSTAT_MAX_COUNT || !mean)
        return pft_err(PFT_EINVAL, "gstat: class %d: bad label or count %llu", label, (unsigned long long)n);
    if (!all_finite(mean, (size_t)self->d) || (scatter && !all_finite(scatter, dd)))
        return pft_err(PFT_EINVAL, "gstat: class %d: non-finite mean or scatter", label);
    int at = pft_gstat_find(self, label);
    if (at >= 0 && self->cls[at].n > GSTAT_MAX_COUNT - n)
        return pft_err(PFT_EINVAL, "gstat: class %d: count overflows", label);
    if (at < 0) {
        at = class_insert(self, label);
        if (at < 0)
            return at;
    }
    int touched = scatter || self->cls[at].n > 0; /* a first part without scatter leaves it as it was */
    merge_part(self, &self->cls[at], n, mean, scatter);
    if (touched)
        pft_la_sym_from_lower(self->kind == PFT_GSTAT_FULL ? self->cls[at].scatter : self->w, self->d);
    return 0;
}

int pft_gstat_add_tied_scatter(pft_gstat_t *self, const double *w)
{
    size_t dd = (size_t)self->d * self->d;
    if (self->kind != PFT_GSTAT_TIED)
        return pft_err(PFT_EINVAL, "gstat: a shared scatter added to full statistics");
    if (!all_finite(w, dd))
        return pft_err(PFT_EINVAL, "gstat: non-finite shared scatter");
    cblas_daxpy((int)dd, 1.0, w, 1, self->w, 1);
    return 0;
}

int pft_gstat_set_tied_scatter(pft_gstat_t *self, double **w_p)
{
    size_t dd = (size_t)self->d * self->d;
    double *w = *w_p;
    if (self->kind != PFT_GSTAT_TIED || !w)
        return pft_err(PFT_EINVAL, "gstat: a shared scatter set on full statistics, or none given");
    if (!all_finite(w, dd))
        return pft_err(PFT_EINVAL, "gstat: non-finite shared scatter");
    for (size_t i = 0; i < dd; i++)
        w[i] += 0.0; /* as 0 + w in pft_gstat_add_tied_scatter: −0 → +0 */
    pft_free(self->w);
    self->w = w;
    *w_p = NULL;
    return 0;
}

static void class_remove(pft_gstat_t *s, int at)
{
    class_free(&s->cls[at]);
    memmove(&s->cls[at], &s->cls[at + 1], (size_t)(s->n_classes - at - 1) * sizeof *s->cls);
    s->n_classes--;
}

/* Inserts an empty class for every label of labels[0..n) not yet present, so that the merges that follow
 * cannot fail; on failure removes the ones it inserted and returns the error (self unaltered). */
static int ensure_classes(pft_gstat_t *s, const int *labels, int n)
{
    for (int i = 0; i < n; i++) {
        if (pft_gstat_find(s, labels[i]) >= 0)
            continue;
        int rc = class_insert(s, labels[i]);
        if (rc < 0) {
            for (int at = s->n_classes - 1; at >= 0; at--)
                if (s->cls[at].n == 0)
                    class_remove(s, at);
            return rc;
        }
    }
    return 0;
}

/* Distinct labels of y[0..n) (in order of first appearance) with their row counts; *n_out of them. */
static int distinct_labels(const int32_t *y, size_t n, int **labels, size_t **counts, int *n_out)
{
    int cap = 16, k = 0, ok = 1;
    int *lab = pft_alloc_array((size_t)cap, sizeof *lab);
    size_t *cnt = pft_alloc_array((size_t)cap, sizeof *cnt);
    ok = lab && cnt;
    for (size_t i = 0; ok && i < n; i++) {
        int j = 0;
        while (j < k && lab[j] != y[i])
            j++;
        if (j == k && k == cap) {
            int *nl = pft_realloc(lab, 2 * (size_t)cap * sizeof *lab);
            lab = nl ? nl : lab;
            size_t *nc = nl ? pft_realloc(cnt, 2 * (size_t)cap * sizeof *cnt) : NULL;
            cnt = nc ? nc : cnt;
            ok = nl && nc;
            cap *= 2;
        }
        if (ok && j == k) {
            lab[k] = y[i];
            cnt[k++] = 0;
        }
        if (ok)
            cnt[j]++;
    }
    if (!ok) {
        pft_free(lab);
        pft_free(cnt);
        return pft_err(PFT_ENOMEM, "gstat: out of memory for the labels");
    }
    *labels = lab;
    *counts = cnt;
    *n_out = k;
    return 0;
}

/* The rows of `label` centred at their mean (m rows into xc), the mean into mean; their scatter is added to
 * target's lower triangle by one SYRK (the caller mirrors it). */
static void batch_class(int d, const float *x, const int32_t *y, size_t n, int label, size_t m, double *xc,
                        double *mean, double *target)
{
    memset(mean, 0, (size_t)d * sizeof(double));
    for (size_t i = 0; i < n; i++)
        if (y[i] == label)
            for (int j = 0; j < d; j++)
                mean[j] += x[i * (size_t)d + j];
    for (int j = 0; j < d; j++)
        mean[j] /= (double)m;
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] != label)
            continue;
        for (int j = 0; j < d; j++)
            xc[r * d + j] = (double)x[i * (size_t)d + j] - mean[j];
        r++;
    }
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, (int)m, 1.0, xc, d, 1.0, target, d);
}

int pft_gstat_add_rows(pft_gstat_t *self, const float *x, const int32_t *y, size_t n)
{
    int d = self->d;
    for (size_t i = 0; i < n; i++) {
        if (y[i] < 0)
            return pft_err(PFT_EINVAL, "gstat: row %zu: label %d is negative", i, (int)y[i]);
        for (int j = 0; j < d; j++)
            if (!isfinite(x[i * (size_t)d + j]))
                return pft_err(PFT_EINVAL, "gstat: row %zu: feature %d is not finite", i, j);
    }
    int *labels = NULL, k = 0;
    size_t *counts = NULL, maxm = 1;
    int rc = distinct_labels(y, n, &labels, &counts, &k);
    if (rc != 0)
        return rc;
    for (int i = 0; i < k; i++) {
        int at = pft_gstat_find(self, labels[i]);
        if (at >= 0 && self->cls[at].n > GSTAT_MAX_COUNT - counts[i])
            rc = pft_err(PFT_EINVAL, "gstat: class %d: count overflows", labels[i]);
        maxm = counts[i] > maxm ? counts[i] : maxm;
    }
    /* everything that can fail comes first: self is unaltered on error, and the merges cannot fail */
    double *xc = rc == 0 ? pft_alloc_array(maxm, (size_t)d * sizeof(double)) : NULL;
    double *mean = rc == 0 ? pft_alloc((size_t)d * sizeof(double)) : NULL;
    if (rc == 0 && (!xc || !mean))
        rc = pft_err(PFT_ENOMEM, "gstat: out of memory for %zu rows", maxm);
    if (rc == 0)
        rc = ensure_classes(self, labels, k);
    for (int i = 0; rc == 0 && i < k; i++) {
        gclass_t *c = &self->cls[pft_gstat_find(self, labels[i])];
        /* the batch's own scatter goes straight into the target; merge_part then adds the between term */
        batch_class(d, x, y, n, labels[i], counts[i], xc, mean,
                    self->kind == PFT_GSTAT_FULL ? c->scatter : self->w);
        merge_part(self, c, counts[i], mean, NULL);
        if (self->kind == PFT_GSTAT_FULL)
            pft_la_sym_from_lower(c->scatter, d);
    }
    if (rc == 0 && self->kind == PFT_GSTAT_TIED)
        pft_la_sym_from_lower(self->w, d);
    pft_free(xc);
    pft_free(mean);
    pft_free(labels);
    pft_free(counts);
    return rc;
}

int pft_gstat_merge(pft_gstat_t *self, const pft_gstat_t *other)
{
    if (other->d != self->d)
        return pft_err(PFT_EINVAL, "gstat: merging d = %d into d = %d", other->d, self->d);
    if (self->kind == PFT_GSTAT_FULL && other->kind == PFT_GSTAT_TIED)
        return pft_err(PFT_EINVAL,
                       "gstat: tied statistics cannot merge into full ones (no per-class scatter)");
    int *labels = pft_alloc_array((size_t)(other->n_classes > 0 ? other->n_classes : 1), sizeof *labels);
    if (!labels)
        return pft_err(PFT_ENOMEM, "gstat: out of memory");
    int rc = 0;
    for (int i = 0; i < other->n_classes; i++) {
        labels[i] = other->cls[i].label;
        int at = pft_gstat_find(self, labels[i]);
        if (at >= 0 && self->cls[at].n > GSTAT_MAX_COUNT - other->cls[i].n)
            rc = pft_err(PFT_EINVAL, "gstat: class %d: count overflows", labels[i]);
    }
    if (rc == 0) /* in place: once the classes exist, nothing can fail */
        rc = ensure_classes(self, labels, other->n_classes);
    for (int i = 0; rc == 0 && i < other->n_classes; i++) {
        const gclass_t *o = &other->cls[i];
        gclass_t *c = &self->cls[pft_gstat_find(self, o->label)];
        merge_part(self, c, o->n, o->mean, o->scatter);
        if (self->kind == PFT_GSTAT_FULL)
            pft_la_sym_from_lower(c->scatter, self->d);
    }
    if (rc == 0 && other->w)
        cblas_daxpy(self->d * self->d, 1.0, other->w, 1, self->w, 1);
    if (rc == 0 && self->kind == PFT_GSTAT_TIED)
        pft_la_sym_from_lower(self->w, self->d); /* W's lower triangle after the classes' updates */
    pft_free(labels);
    return rc;
}

/* Self's classes (labels, counts, means) in new statistics of its kind and d, no scatter; NULL if out of
 * memory. */
static pft_gstat_t *classes_only(const pft_gstat_t *self)
{
    pft_gstat_t *t = pft_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = self->kind;
    t->d = self->d;
    int *labels = pft_alloc_array((size_t)(self->n_classes > 0 ? self->n_classes : 1), sizeof *labels);
    for (int i = 0; labels && i < self->n_classes; i++)
        labels[i] = self->cls[i].label;
    if (!labels || ensure_classes(t, labels, self->n_classes)) {
        pft_free(labels);
        pft_gstat_destroy(&t);
        return NULL;
    }
    pft_free(labels);
    for (int i = 0; i < self->n_classes; i++) {
        gclass_t *c = &t->cls[pft_gstat_find(t, self->cls[i].label)];
        memcpy(c->mean, self->cls[i].mean, (size_t)self->d * sizeof(double));
        c->n = self->cls[i].n;
    }
    return t;
}

int pft_gstat_classes_with(const pft_gstat_t *self, double **w_p, pft_gstat_t **out)
{
    *out = NULL;
    if (self->kind != PFT_GSTAT_TIED || !*w_p)
        return pft_err(PFT_EINVAL, "gstat: a scatter goes only with tied statistics");
    pft_gstat_t *t = classes_only(self);
    if (!t)
        return pft_err(PFT_ENOMEM, "gstat: out of memory");
    size_t dd = (size_t)self->d * self->d;
    t->w = *w_p;
    *w_p = NULL;
    for (size_t i = 0; i < dd; i++)
        t->w[i] += 0.0; /* as 0 + w in pft_gstat_merge: −0 → +0 */
    pft_la_sym_from_lower(t->w, t->d);
    *out = t;
    return 0;
}

int pft_gstat_take_all(pft_gstat_t *self, pft_gstat_t **out)
{
    *out = NULL;
    if (self->kind != PFT_GSTAT_TIED || !self->w)
        return pft_err(PFT_EINVAL, "gstat: only tied statistics holding a scatter can hand it over");
    double *w = self->w;
    int rc = pft_gstat_classes_with(self, &w, out);
    if (rc == 0)
        self->w = NULL;
    return rc;
}

int pft_gstat_merge_take(pft_gstat_t **self_p, pft_gstat_t **other_p)
{
    if (*self_p) {
        int rc = pft_gstat_merge(*self_p, *other_p);
        if (rc == 0)
            pft_gstat_destroy(other_p);
        return rc;
    }
    pft_gstat_t *t = NULL;
    int rc = pft_gstat_take_all(*other_p, &t);
    if (rc != 0)
        return rc;
    pft_gstat_destroy(other_p);
    *self_p = t;
    return 0;
}

int pft_gstat_same_classes(const pft_gstat_t *a, const pft_gstat_t *b)
{
    size_t bytes = (size_t)a->d * sizeof(double);
    if (a->kind != b->kind || a->d != b->d || a->n_classes != b->n_classes)
        return 0;
    for (int i = 0; i < a->n_classes; i++) {
        const gclass_t *x = &a->cls[i], *y = &b->cls[i];
        if (x->n != y->n || x->label != y->label || memcmp(x->mean, y->mean, bytes))
            return 0;
    }
    return 1;
}

int pft_gstat_equal(const pft_gstat_t *a, const pft_gstat_t *b)
{
    size_t d = (size_t)a->d, dd = d * d;
    if (a->kind != b->kind || a->d != b->d || a->n_classes != b->n_classes || !a->w != !b->w)
        return 0;
    for (int i = 0; i < a->n_classes; i++) {
        const gclass_t *x = &a->cls[i], *y = &b->cls[i];
        if (x->label != y->label || x->n != y->n || memcmp(x->mean, y->mean, d * sizeof(double)) != 0 ||
            !x->scatter != !y->scatter || (x->scatter && memcmp(x->scatter, y->scatter, dd * sizeof(double))))
            return 0;
    }
    return !a->w || memcmp(a->w, b->w, dd * sizeof(double)) == 0;
}

double *pft_gstat_take_tied_scatter(pft_gstat_t *self)
{
    double *w = self->w;
    self->w = NULL;
    return w;
}

int pft_gstat_give_tied_scatter(pft_gstat_t *self, double **w_p)
{
    if (self->kind != PFT_GSTAT_TIED || self->w || !*w_p)
        return pft_err(PFT_EINVAL, "gstat: a scatter given back to statistics that did not lend one");
    self->w = *w_p;
    *w_p = NULL;
    return 0;
}

void pft_gstat_pooled(const pft_gstat_t *self, double *w)
{
    size_t dd = (size_t)self->d * self->d;
    if (self->kind == PFT_GSTAT_TIED) {
        memcpy(w, self->w, dd * sizeof(double));
        return;
    }
    memset(w, 0, dd * sizeof(double));
    for (int i = 0; i < self->n_classes; i++)
        cblas_daxpy((int)dd, 1.0, self->cls[i].scatter, 1, w, 1);
}

int pft_gstat_add_mixture(pft_gstat_t *self, int label, uint64_t n, int k, const double *weights,
                          const double *means, const double *covs)
{
    int d = self->d;
    size_t dd = (size_t)d * d;
    if (k < 1 || n < 1)
        return pft_err(PFT_EINVAL, "gstat: mixture with k = %d, n = %llu", k, (unsigned long long)n);
    double *mean = pft_calloc((size_t)d, sizeof(double));
    double *second = pft_calloc(dd, sizeof(double));
    if (!mean || !second) {
        pft_free(mean);
        pft_free(second);
        return pft_err(PFT_ENOMEM, "gstat: out of memory");
    }
    for (int c = 0; c < k; c++)
        cblas_daxpy(d, weights[c], means + (size_t)c * d, 1, mean, 1);
    /* E[(x-μ)(x-μ)ᵀ] = Σ w_k (Σ_k + (μ_k - μ)(μ_k - μ)ᵀ), formed centred for accuracy. */
    double *dev = pft_alloc((size_t)d * sizeof(double));
    int rc = dev ? 0 : pft_err(PFT_ENOMEM, "gstat: out of memory");
    for (int c = 0; rc == 0 && c < k; c++) {
        cblas_daxpy((int)dd, weights[c], covs + (size_t)c * dd, 1, second, 1);
        for (int j = 0; j < d; j++)
            dev[j] = means[(size_t)c * d + j] - mean[j];
        cblas_dsyr(CblasRowMajor, CblasLower, d, weights[c], dev, 1, second, d);
    }
    if (rc == 0) {
        pft_la_sym_from_lower(second, d);
        cblas_dscal((int)dd, (double)n, second, 1);
        rc = pft_gstat_add_class(self, label, n, mean, second);
    }
    pft_free(dev);
    pft_free(mean);
    pft_free(second);
    return rc;
}

int pft_gstat_add_gmm(pft_gstat_t *st, const struct pft_gmm_t *g, int label, uint64_t n)
{
    int k = pft_gmm_k(g), d = pft_gmm_dim(g);
    if (d != st->d)
        return pft_err(PFT_EINVAL, "gstat: a mixture of d = %d into d = %d", d, st->d);
    size_t dd = (size_t)d * d;
    double *covs = pft_calloc((size_t)k * dd, sizeof(double));
    if (!covs)
        return pft_err(PFT_ENOMEM, "out of memory for a mixture's moments (k = %d, d = %d)", k, d);
    const double *cv = pft_gmm_covars(g), *chol = pft_gmm_chol(g), *W = pft_gmm_factors(g);
    int q = pft_gmm_rank(g);
    for (int c = 0; c < k; c++) {
        double *S = covs + (size_t)c * dd;
        switch (pft_cov_shape(pft_gmm_cov(g))) {
        case PFT_COV_SHAPE_MATRIX:
            pft_la_llt(chol + (size_t)c * dd, S, d);
            break;
        case PFT_COV_SHAPE_VECTOR:
            for (int i = 0; i < d; i++)
                S[(size_t)i * d + i] = cv[(size_t)c * d + i];
            break;
        case PFT_COV_SHAPE_SCALAR:
            for (int i = 0; i < d; i++)
                S[(size_t)i * d + i] = cv[c];
            break;
        case PFT_COV_SHAPE_FACTOR:
            if (q > 0)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, d, q, 1.0, W + (size_t)c * d * q, q,
                            W + (size_t)c * d * q, q, 0.0, S, d);
            for (int i = 0; i < d; i++)
                S[(size_t)i * d + i] += cv[(size_t)c * d + i];
            break;
        case PFT_COV_SHAPE_NONE:
            break;
        }
    }
    int rc = pft_gstat_add_mixture(st, label, n, k, pft_gmm_weights(g), pft_gmm_means(g), covs);
    pft_free(covs);
    return rc;
}

int pft_gstat_check_psd(const double *s, int d, double eps)
{
    size_t dd = (size_t)d * d;
    double tr = 0;
    for (int i = 0; i < d; i++)
        tr += s[(size_t)i * d + i];
    if (!(tr >= 0) || !isfinite(tr))
        return pft_err(PFT_ENUMERIC, "scatter: trace %g is negative or not finite", tr);
    for (int i = 0; i < d; i++)
        if (s[(size_t)i * d + i] < 0)
            return pft_err(PFT_ENUMERIC, "scatter: diagonal[%d] = %g is negative", i, s[(size_t)i * d + i]);
    double *a = pft_alloc_array(dd, sizeof(double));
    if (!a)
        return pft_err(PFT_ENOMEM, "scatter: out of memory for the PSD check");
    memcpy(a, s, dd * sizeof(double));
    double jitter = 2.0 * eps * tr + 1e-300;
    for (int i = 0; i < d; i++)
        a[(size_t)i * d + i] += jitter;
    int rc = pft_la_chol_lower(a, d);
    pft_free(a);
    if (rc != 0)
        return pft_err(PFT_ENUMERIC,
                       "scatter is not positive semi-definite (Cholesky of s + %.3g·I failed; trace %g)",
                       jitter, tr);
    return 0;
}
