/* pft_subspace: span of a released scatter (cut at its largest spectral gap) and class means; residuals. */
#include "pft_subspace.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

#include <math.h>
#include <string.h>

struct pft_subspace_t {
    int d, rank, dim;
    double gap, tail;
    double *basis; /* dim × d orthonormal rows; NULL when dim = d */
};

/* Removes from v its projection on the m rows of q (twice: classical Gram-Schmidt with reorthogonalisation)
 * and returns the norm of what is left. */
static double orth_against(const double *q, int m, int d, double *v)
{
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < m; k++) {
            const double *qk = q + (size_t)k * d;
            double p = 0;
            for (int j = 0; j < d; j++)
                p += qk[j] * v[j];
            for (int j = 0; j < d; j++)
                v[j] -= p * qk[j];
        }
    double s = 0;
    for (int j = 0; j < d; j++)
        s += v[j] * v[j];
    return sqrt(s);
}

/* Cuts the ascending eigenvalues lam[d] at their largest gap: self->rank, gap and tail. */
static void cut_spectrum(pft_subspace_t *self, const double *lam)
{
    int d = self->d;
    double top = fmax(lam[d - 1], 0);
    self->rank = 0;
    self->gap = INFINITY;
    self->tail = 0;
    if (top <= 0)
        return; /* w = 0: S is the span of the vectors */
    double best = 0, floor = top * PFT_SUBSPACE_FLOOR;
    int best_k = d;
    for (int k = 1; k < d; k++) { /* keep the k largest: lam[d-1] .. lam[d-k] */
        double above = fmax(lam[d - k], floor), below = fmax(lam[d - k - 1], floor);
        if (above / below > best) {
            best = above / below;
            best_k = k;
        }
    }
    self->gap = best;
    if (best >= PFT_SUBSPACE_GAP) {
        self->rank = best_k;
        self->tail = fmax(lam[d - best_k - 1], 0) / top;
    } else {
        self->rank = d;
    }
}

/* Appends to self->basis the kept eigenvectors (rows of ev, ascending order) and the vectors outside
 * their span; self->dim set. */
static void build_basis(pft_subspace_t *self, const double *ev, const double *vecs, int n_vec, double *tmp)
{
    int d = self->d, m = 0;
    for (int k = 0; k < self->rank; k++)
        memcpy(self->basis + (size_t)m++ * d, ev + (size_t)(d - 1 - k) * d, (size_t)d * sizeof *ev);
    for (int i = 0; i < n_vec && m < d; i++) {
        memcpy(tmp, vecs + (size_t)i * d, (size_t)d * sizeof *tmp);
        double n0 = 0;
        for (int j = 0; j < d; j++)
            n0 += tmp[j] * tmp[j];
        n0 = sqrt(n0);
        double r = orth_against(self->basis, m, d, tmp);
        if (n0 > 0 && r > PFT_SUBSPACE_MEAN_TOL * n0) {
            for (int j = 0; j < d; j++)
                self->basis[(size_t)m * d + j] = tmp[j] / r;
            m++;
        }
    }
    self->dim = m;
}

pft_subspace_t *pft_subspace_new(const double *w, int d, const double *vecs, int n_vec)
{
    if (d < 1 || n_vec < 0 || (n_vec && !vecs))
        return pft_err(PFT_EINVAL, "subspace: d = %d, %d vectors", d, n_vec), NULL;
    size_t dd = (size_t)d * d;
    for (size_t i = 0; w && i < dd; i++)
        if (!isfinite(w[i]))
            return pft_err(PFT_EINVAL, "subspace: non-finite scatter entry %zu", i), NULL;
    pft_subspace_t *self = pft_calloc(1, sizeof *self);
    double *ev = pft_alloc_array(dd, sizeof *ev), *lam = pft_alloc_array((size_t)d, sizeof *lam),
           *tmp = pft_alloc_array((size_t)d, sizeof *tmp);
    if (self)
        self->basis = pft_alloc_array(dd, sizeof *self->basis);
    if (!self || !ev || !lam || !tmp || !self->basis) {
        pft_err(PFT_ENOMEM, "subspace: out of memory at d = %d", d);
        goto fail;
    }
    self->d = d;
    if (w) {
        memcpy(ev, w, dd * sizeof *ev);
        if (pft_la_eigh_fast(ev, d, lam)) {
            pft_err_wrap(PFT_ENUMERIC, "subspace: eigendecomposition of the %d x %d scatter", d, d);
            goto fail;
        }
    } else {
        memset(lam, 0, (size_t)d * sizeof *lam);
    }
    cut_spectrum(self, lam);
    if (self->rank < d)
        build_basis(self, ev, vecs, n_vec, tmp);
    if (self->rank >= d || self->dim >= d) {
        self->dim = d;
        PFT_FREE(self->basis);
    }
    pft_free(ev);
    pft_free(lam);
    pft_free(tmp);
    return self;
fail:
    pft_free(ev);
    pft_free(lam);
    pft_free(tmp);
    pft_subspace_destroy(&self);
    return NULL;
}

void pft_subspace_destroy(pft_subspace_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_free((*self_p)->basis);
    pft_free(*self_p);
    *self_p = NULL;
}

int pft_subspace_dim_ambient(const pft_subspace_t *self)
{
    return self->d;
}

int pft_subspace_rank(const pft_subspace_t *self)
{
    return self->rank;
}

int pft_subspace_dim(const pft_subspace_t *self)
{
    return self->dim;
}

int pft_subspace_proper(const pft_subspace_t *self)
{
    return self->dim < self->d;
}

double pft_subspace_gap(const pft_subspace_t *self)
{
    return self->gap;
}

double pft_subspace_tail(const pft_subspace_t *self)
{
    return self->tail;
}

const double *pft_subspace_basis(const pft_subspace_t *self)
{
    return self->basis;
}

int pft_subspace_residuals(const pft_subspace_t *self, const float *x, int n, double *out)
{
    int d = self->d;
    double *v = pft_alloc_array((size_t)d, sizeof *v);
    if (!v)
        return pft_err(PFT_ENOMEM, "subspace: out of memory");
    for (int i = 0; i < n; i++) {
        double n0 = 0;
        for (int j = 0; j < d; j++) {
            v[j] = x[(size_t)i * d + j];
            n0 += v[j] * v[j];
        }
        out[i] = self->dim < d && n0 > 0 ? orth_against(self->basis, self->dim, d, v) / sqrt(n0) : 0;
    }
    pft_free(v);
    return 0;
}
