/* pft_dataset: labelled features in memory, with validation, class gather, subset and concatenation. */
#include "pft_dataset.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

struct pft_dataset_t {
    float *x;      /* n×d row-major features, owned */
    int32_t *y;    /* n labels in [0, n_classes), owned */
    int n;         /* rows */
    int d;         /* feature dimension */
    int n_classes; /* classes (labels are below it; some classes may have no rows) */
};

/* A dataset shell owning x and y (which may be NULL only when n == 0). */
static pft_dataset_t *shell(float *x, int32_t *y, int n, int d, int n_classes)
{
    pft_dataset_t *self = pft_alloc(sizeof *self);
    if (!self)
        return NULL;
    *self = (pft_dataset_t){.x = x, .y = y, .n = n, .d = d, .n_classes = n_classes};
    return self;
}

/* Buffers for n rows of dimension d (at least one byte each, so n == 0 still gives valid pointers). */
static int alloc_rows(int n, int d, float **x, int32_t **y)
{
    *x = pft_alloc_array((size_t)n * (size_t)d, sizeof(float));
    *y = pft_alloc_array((size_t)n, sizeof(int32_t));
    if (*x && *y)
        return 0;
    PFT_FREE(*x);
    PFT_FREE(*y);
    return pft_err(PFT_ENOMEM, "out of memory for a %d×%d dataset", n, d);
}

pft_dataset_t *pft_dataset_new(int n, int d, int n_classes)
{
    if (n < 0 || d < 1 || n_classes < 1 || n_classes > PFT_DATASET_MAX_CLASSES)
        return NULL;
    float *x;
    int32_t *y;
    if (alloc_rows(n, d, &x, &y))
        return NULL;
    memset(x, 0, (size_t)n * (size_t)d * sizeof *x);
    memset(y, 0, (size_t)n * sizeof *y);
    pft_dataset_t *self = shell(x, y, n, d, n_classes);
    if (!self) {
        pft_free(x);
        pft_free(y);
    }
    return self;
}

/* Checks labels (and finds n_classes when *n_classes ≤ 0); what names the label source in messages. */
static int check_labels(const int32_t *y, int n, int *n_classes, const char *what)
{
    int32_t max = -1;
    for (int i = 0; i < n; i++) {
        if (y[i] < 0)
            return pft_err(PFT_EINVAL, "%s: row %d: negative label %" PRId32, what, i, y[i]);
        if (*n_classes > 0 && y[i] >= *n_classes)
            return pft_err(PFT_EINVAL, "%s: row %d: label %" PRId32 " is not below the class count %d", what,
                           i, y[i], *n_classes);
        if (y[i] >= PFT_DATASET_MAX_CLASSES)
            return pft_err(PFT_EINVAL, "%s: row %d: label %" PRId32 " exceeds the class limit %d", what, i,
                           y[i], PFT_DATASET_MAX_CLASSES);
        if (y[i] > max)
            max = y[i];
    }
    if (*n_classes <= 0)
        *n_classes = max + 1 > 0 ? max + 1 : 1;
    if (*n_classes > PFT_DATASET_MAX_CLASSES)
        return pft_err(PFT_EINVAL, "%s: class count %d exceeds the limit %d", what, *n_classes,
                       PFT_DATASET_MAX_CLASSES);
    return 0;
}

static int check_finite(const float *x, int n, int d, const char *what)
{
    size_t m = (size_t)n * (size_t)d;
    for (size_t i = 0; i < m; i++)
        if (!isfinite(x[i]))
            return pft_err(PFT_EFORMAT, "%s: row %zu column %zu: value is not finite", what, i / (size_t)d,
                           i % (size_t)d);
    return 0;
}

int pft_dataset_wrap(float **x_p, int32_t **y_p, int n, int d, int n_classes, pft_dataset_t **out)
{
    return pft_dataset_adopt(x_p, y_p, n, d, n_classes, "features", "labels", out);
}

int pft_dataset_adopt(float **x_p, int32_t **y_p, int n, int d, int n_classes, const char *x_name,
                      const char *y_name, pft_dataset_t **out)
{
    float *x = *x_p;
    int32_t *y = *y_p;
    *x_p = NULL;
    *y_p = NULL;
    *out = NULL;
    int rc;
    if (n == 0 && (!x || !y)) { /* keep the invariant: buffers are never NULL */
        PFT_FREE(x);
        PFT_FREE(y);
        if ((rc = alloc_rows(0, d > 0 ? d : 1, &x, &y)))
            return rc;
    }
    if (n < 0 || d < 1 || (n > 0 && (!x || !y)))
        rc = pft_err(PFT_EINVAL, "invalid dataset: %d rows × %d features", n, d);
    else if (!(rc = check_labels(y, n, &n_classes, y_name)) && !(rc = check_finite(x, n, d, x_name))) {
        *out = shell(x, y, n, d, n_classes);
        if (*out)
            return 0;
        rc = pft_err(PFT_ENOMEM, "out of memory");
    }
    pft_free(x);
    pft_free(y);
    return rc;
}


void pft_dataset_destroy(pft_dataset_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_dataset_t *self = *self_p;
    pft_free(self->x);
    pft_free(self->y);
    pft_free(self);
    *self_p = NULL;
}

int pft_dataset_n(const pft_dataset_t *self)
{
    return self->n;
}

int pft_dataset_d(const pft_dataset_t *self)
{
    return self->d;
}

int pft_dataset_n_classes(const pft_dataset_t *self)
{
    return self->n_classes;
}

const float *pft_dataset_x(const pft_dataset_t *self)
{
    return self->x;
}

const int32_t *pft_dataset_y(const pft_dataset_t *self)
{
    return self->y;
}

float *pft_dataset_x_mut(pft_dataset_t *self)
{
    return self->x;
}

int32_t *pft_dataset_y_mut(pft_dataset_t *self)
{
    return self->y;
}

void pft_dataset_class_counts(const pft_dataset_t *self, int *counts)
{
    memset(counts, 0, (size_t)self->n_classes * sizeof *counts);
    for (int i = 0; i < self->n; i++)
        counts[self->y[i]]++;
}

int pft_dataset_gather_class(const pft_dataset_t *self, int c, float **x_out, int *n_out)
{
    *x_out = NULL;
    *n_out = 0;
    if (c < 0 || c >= self->n_classes)
        return pft_err(PFT_EINVAL, "class %d outside [0, %d)", c, self->n_classes);
    int m = 0;
    for (int i = 0; i < self->n; i++)
        m += self->y[i] == c;
    if (m == 0)
        return 0;
    size_t d = (size_t)self->d;
    float *x = pft_alloc_array((size_t)m * d, sizeof *x);
    if (!x)
        return pft_err(PFT_ENOMEM, "out of memory gathering %d rows of class %d", m, c);
    for (int i = 0, k = 0; i < self->n; i++)
        if (self->y[i] == c)
            memcpy(x + (size_t)k++ * d, self->x + (size_t)i * d, d * sizeof *x);
    *x_out = x;
    *n_out = m;
    return 0;
}

int pft_dataset_subset(const pft_dataset_t *self, const int *idx, int m, pft_dataset_t **out)
{
    *out = NULL;
    if (m < 0 || (m > 0 && !idx))
        return pft_err(PFT_EINVAL, "invalid subset size %d", m);
    for (int k = 0; k < m; k++)
        if (idx[k] < 0 || idx[k] >= self->n)
            return pft_err(PFT_EINVAL, "subset index %d (position %d) outside [0, %d)", idx[k], k, self->n);
    float *x;
    int32_t *y;
    int rc = alloc_rows(m, self->d, &x, &y);
    if (rc)
        return rc;
    size_t d = (size_t)self->d;
    for (int k = 0; k < m; k++) {
        memcpy(x + (size_t)k * d, self->x + (size_t)idx[k] * d, d * sizeof *x);
        y[k] = self->y[idx[k]];
    }
    *out = shell(x, y, m, self->d, self->n_classes);
    if (*out)
        return 0;
    pft_free(x);
    pft_free(y);
    return pft_err(PFT_ENOMEM, "out of memory");
}

int pft_dataset_concat(const pft_dataset_t *a, const pft_dataset_t *b, pft_dataset_t **out)
{
    *out = NULL;
    if (a->d != b->d)
        return pft_err(PFT_EINVAL, "cannot concatenate datasets of dimension %d and %d", a->d, b->d);
    if (a->n > INT_MAX - b->n)
        return pft_err(PFT_EINVAL, "concatenation of %d and %d rows is too large", a->n, b->n);
    int n = a->n + b->n;
    float *x;
    int32_t *y;
    int rc = alloc_rows(n, a->d, &x, &y);
    if (rc)
        return rc;
    size_t d = (size_t)a->d;
    memcpy(x, a->x, (size_t)a->n * d * sizeof *x);
    memcpy(x + (size_t)a->n * d, b->x, (size_t)b->n * d * sizeof *x);
    memcpy(y, a->y, (size_t)a->n * sizeof *y);
    memcpy(y + a->n, b->y, (size_t)b->n * sizeof *y);
    *out = shell(x, y, n, a->d, a->n_classes > b->n_classes ? a->n_classes : b->n_classes);
    if (*out)
        return 0;
    pft_free(x);
    pft_free(y);
    return pft_err(PFT_ENOMEM, "out of memory");
}

int pft_dataset_apply_prep(pft_dataset_t *self, pft_prep_t prep)
{
    return pft_prep_apply(prep, self->x, self->n, self->d);
}
