/* pft_lrop: a diagonal plus weighted low-rank terms as a d×d operator (theory in pft_lrop.h). */
#include "pft_lrop.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

struct pft_lrop_t {
    int d;
    int R;     /* rank-one terms held */
    int cap;   /* rows allocated in F and w */
    double *a; /* the diagonal (d) */
    double *F; /* R×d row-major: one term's vector per row */
    double *w; /* R weights */
};

pft_lrop_t *pft_lrop_new(int d)
{
    if (d < 1 || d > 65536) {
        pft_err(PFT_EINVAL, "lrop: dimension %d outside 1..65536", d);
        return NULL;
    }
    pft_lrop_t *self = pft_calloc(1, sizeof *self);
    if (self)
        self->a = pft_calloc((size_t)d, sizeof *self->a);
    if (!self || !self->a) {
        pft_lrop_destroy(&self);
        pft_err(PFT_ENOMEM, "lrop: out of memory for d = %d", d);
        return NULL;
    }
    self->d = d;
    return self;
}

void pft_lrop_destroy(pft_lrop_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_lrop_t *self = *self_p;
    pft_free(self->a);
    pft_free(self->F);
    pft_free(self->w);
    pft_free(self);
    *self_p = NULL;
}

int pft_lrop_dim(const pft_lrop_t *self)
{
    return self->d;
}
int pft_lrop_rank(const pft_lrop_t *self)
{
    return self->R;
}
const double *pft_lrop_diag(const pft_lrop_t *self)
{
    return self->a;
}

int pft_lrop_add_diag(pft_lrop_t *self, const double *v, double s)
{
    for (int r = 0; r < self->d; r++)
        if (!isfinite(v[r] * s))
            return pft_err(PFT_EINVAL, "lrop: diagonal entry %d is %g", r, v[r] * s);
    for (int r = 0; r < self->d; r++)
        self->a[r] += s * v[r];
    return 0;
}

/* Room for r more terms. */
static int reserve(pft_lrop_t *self, int r)
{
    if (r < 0 || r > 65536 * 64 - self->R)
        return pft_err(PFT_EINVAL, "lrop: %d more terms beside %d", r, self->R);
    if (self->R + r <= self->cap)
        return 0;
    int cap = self->cap * 2 > self->R + r ? self->cap * 2 : self->R + r;
    double *F = pft_realloc(self->F, (size_t)cap * self->d * sizeof *F);
    if (F)
        self->F = F;
    double *w = F ? pft_realloc(self->w, (size_t)cap * sizeof *w) : NULL;
    if (w)
        self->w = w;
    if (!F || !w)
        return pft_err(PFT_ENOMEM, "lrop: out of memory for %d terms of d = %d", cap, self->d);
    self->cap = cap;
    return 0;
}

int pft_lrop_add_factor(pft_lrop_t *self, const double *L, int r, int ld, double w)
{
    if (!isfinite(w) || r < 0 || (r > 0 && ld < r))
        return pft_err(PFT_EINVAL, "lrop: factor of %d columns (stride %d), weight %g", r, ld, w);
    for (int i = 0; i < self->d; i++)
        for (int j = 0; j < r; j++)
            if (!isfinite(L[(size_t)i * ld + j]))
                return pft_err(PFT_EINVAL, "lrop: factor entry [%d][%d] is %g", i, j, L[(size_t)i * ld + j]);
    int rc = reserve(self, r);
    if (rc)
        return rc;
    for (int j = 0; j < r; j++) {
        double *f = self->F + (size_t)(self->R + j) * self->d;
        for (int i = 0; i < self->d; i++)
            f[i] = L[(size_t)i * ld + j];
        self->w[self->R + j] = w;
    }
    self->R += r;
    return 0;
}

int pft_lrop_add_rows(pft_lrop_t *self, const float *x, int n, const double *c, double w)
{
    size_t d = (size_t)self->d;
    if (!isfinite(w) || n < 0)
        return pft_err(PFT_EINVAL, "lrop: %d rows, weight %g", n, w);
    for (size_t k = 0; k < (size_t)n * d; k++)
        if (!isfinite(x[k]) || (c && !isfinite(c[k % d])))
            return pft_err(PFT_EINVAL, "lrop: row %zu, entry %zu is not finite", k / d, k % d);
    int rc = reserve(self, n);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        double *f = self->F + (size_t)(self->R + i) * d;
        for (size_t j = 0; j < d; j++)
            f[j] = (double)x[(size_t)i * d + j] - (c ? c[j] : 0.0);
        self->w[self->R + i] = w;
    }
    self->R += n;
    return 0;
}

void pft_lrop_scale(pft_lrop_t *self, double s)
{
    for (int r = 0; r < self->d; r++)
        self->a[r] *= s;
    for (int j = 0; j < self->R; j++)
        self->w[j] *= s;
}

void pft_lrop_apply(const pft_lrop_t *self, const double *X, int b, int ldx, double *Y, int ldy, double *t)
{
    int d = self->d, R = self->R;
    for (int r = 0; r < d; r++)
        for (int j = 0; j < b; j++)
            Y[(size_t)r * ldy + j] = self->a[r] * X[(size_t)r * ldx + j];
    if (R == 0 || b == 0)
        return;
    /* t = diag(w) F X (R×b), then Y += Fᵀ t */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, b, d, 1.0, self->F, d, X, ldx, 0.0, t, b);
    for (int k = 0; k < R; k++)
        for (int j = 0; j < b; j++)
            t[(size_t)k * b + j] *= self->w[k];
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, b, R, 1.0, self->F, d, t, b, 1.0, Y, ldy);
}

void pft_lrop_diagonal(const pft_lrop_t *self, double *out)
{
    int d = self->d;
    memcpy(out, self->a, (size_t)d * sizeof *out);
    for (int k = 0; k < self->R; k++) {
        const double *f = self->F + (size_t)k * d;
        for (int r = 0; r < d; r++)
            out[r] += self->w[k] * f[r] * f[r];
    }
}

void pft_lrop_dense(const pft_lrop_t *self, double *out)
{
    int d = self->d, R = self->R;
    memset(out, 0, (size_t)d * d * sizeof *out);
    double *g = R ? pft_alloc_array((size_t)R * d, sizeof *g) : NULL;
    for (int sign = 1; sign >= -1;
         sign -= 2) { /* Fᵀ diag(w) F as two SYRKs: positive, then negative weights */
        int m = 0;
        for (int k = 0; k < R; k++) {
            if ((self->w[k] > 0) != (sign > 0) || self->w[k] == 0)
                continue;
            double s = sqrt(fabs(self->w[k]));
            const double *f = self->F + (size_t)k * d;
            if (!g) { /* out of memory for the copy: one rank-one update at a time */
                cblas_dsyr(CblasRowMajor, CblasLower, d, self->w[k], f, 1, out, d);
                continue;
            }
            for (int r = 0; r < d; r++)
                g[(size_t)m * d + r] = s * f[r];
            m++;
        }
        if (m)
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, m, (double)sign, g, d, 1.0, out, d);
    }
    pft_free(g);
    pft_la_sym_from_lower(out, d);
    for (int r = 0; r < d; r++)
        out[(size_t)r * d + r] += self->a[r];
}
