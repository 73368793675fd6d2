/* pft_gstat_lowrank: rank-q factor plus diagonal of a shared covariance (theory in pft_gstat_lowrank.h). */
#include "pft_gstat_lowrank.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_linalg.h"

#include <lapacke.h>

/* Column j of U (d×q, row-major) = v·√max(λ, 0), v's sign fixed so that its entry of largest magnitude (the
 * first on ties) is positive. */
static void lowrank_column(const double *v, double lam, int d, int q, int j, double *U)
{
    double s = sqrt(lam > 0 ? lam : 0.0), big = 0;
    int at = 0;
    for (int r = 0; r < d; r++)
        if (fabs(v[r]) > big) {
            big = fabs(v[r]);
            at = r;
        }
    if (v[at] < 0)
        s = -s;
    for (int r = 0; r < d; r++)
        U[(size_t)r * q + j] = v[r] * s;
}

/* ψ = diag(W) / n − diag(U Uᵀ), clamped at +0 (never −0: one byte string per content on the wire); the
 * diagonal read at w[i · stride] (stride 1: a vector of it, d + 1: W itself; psi may be w when stride is 1).
 */
static void release_psi(const double *w, size_t stride, int d, double n, const double *U, int q, double *psi)
{
    for (int r = 0; r < d; r++) {
        double p = w[(size_t)r * stride] / n;
        for (int j = 0; j < q; j++)
            p -= U[(size_t)r * q + j] * U[(size_t)r * q + j];
        psi[r] = p > 0 ? p : 0.0;
    }
}

/* pft_gstat_lowrank_shared of C with a (d×d) as the eigensolver's workspace, clobbered: a copy of C, or C
 * itself (its diagonal and values are read before). */
static int lowrank_shared(const double *C, double *a, int d, int q, double *U, double *psi)
{
    size_t dd = (size_t)d * (size_t)d;
    for (size_t i = 0; i < dd; i++)
        if (!isfinite(C[i]))
            return pft_err(PFT_EINVAL, "gstat lowrank: C[%zu][%zu] = %g is not finite", i / (size_t)d,
                           i % (size_t)d, C[i]);
    for (int r = 0; r < d; r++)
        psi[r] = C[(size_t)r * d + r];
    if (q == 0) {
        for (int r = 0; r < d; r++)
            psi[r] = psi[r] > 0 ? psi[r] : 0.0;
        return 0;
    }
    double *w = pft_alloc_array((size_t)q, sizeof *w), *z = pft_alloc_array((size_t)q * d, sizeof *z);
    int rc = a && w && z ? 0 : pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for a %d×%d matrix", d, d);
    if (rc == 0) {
        if (a != C)
            memcpy(a, C, dd * sizeof *a);
        rc = pft_la_eigh_top(a, d, q, w, z); /* descending; row j of z is the eigenvector of w[j] */
    }
    for (int j = 0; rc == 0 && j < q; j++)
        lowrank_column(z + (size_t)j * d, w[j], d, q, j, U);
    for (int r = 0; rc == 0 && r < d; r++) {
        double p = psi[r];
        for (int j = 0; j < q; j++)
            p -= U[(size_t)r * q + j] * U[(size_t)r * q + j];
        psi[r] = p > 0 ? p : 0.0; /* never -0: one byte string per content on the wire */
    }
    pft_free(w);
    pft_free(z);
    return rc;
}

int pft_gstat_lowrank_shared(const double *C, int d, int q, double *U, double *psi)
{
    if (d < 1 || q < 0 || q > d)
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 0..d (d = %d)", q, d);
    double *a = q > 0 ? pft_alloc_array((size_t)d * (size_t)d, sizeof *a) : NULL;
    int rc = lowrank_shared(C, a, d, q, U, psi);
    pft_free(a);
    return rc;
}

int pft_gstat_lowrank_shared_inplace(double *C, int d, int q, double *U, double *psi)
{
    if (d < 1 || q < 0 || q > d)
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 0..d (d = %d)", q, d);
    return lowrank_shared(C, C, d, q, U, psi);
}

int pft_gstat_lowrank_shared_scatter(const double *W, int d, double n, int q, double *U, double *psi)
{
    if (d < 1 || q < 0 || q > d || !(n > 0))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 0..d (d = %d) or n = %g not positive", q, d, n);
    double *c = pft_alloc_array((size_t)d * (size_t)d, sizeof *c);
    if (!c)
        return pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for a %d×%d covariance", d, d);
    memcpy(c, W, (size_t)d * (size_t)d * sizeof *c);
    int rc = pft_gstat_lowrank_shared_scatter_inplace(c, d, n, q, U, psi);
    pft_free(c);
    return rc;
}

int pft_gstat_lowrank_shared_scatter_inplace(double *W, int d, double n, int q, double *U, double *psi)
{
    if (d < 1 || q < 0 || q > d || !(n > 0))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 0..d (d = %d) or n = %g not positive", q, d,
                       n);
    for (size_t i = 0; i < (size_t)d * (size_t)d; i++)
        W[i] /= n;
    return lowrank_shared(W, W, d, q, U, psi);
}

int pft_gstat_lowrank_shared_scatter_keep(double *W, int d, double n, int q, double *U, double *psi)
{
    if (d < 1 || q < 0 || q > d || !(n > 0))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 0..d (d = %d) or n = %g not positive", q, d,
                       n);
    double *diag = pft_alloc_array((size_t)d, sizeof *diag);
    if (!diag)
        return pft_err(PFT_ENOMEM, "gstat lowrank: out of memory");
    /* row-major lower triangle = the column-major upper one the eigensolver reads (pft_la_eigh_top) */
    for (size_t r = 0; r < (size_t)d; r++) {
        diag[r] = W[r * (size_t)d + r];
        for (size_t c = 0; c <= r; c++)
            W[r * (size_t)d + c] /= n;
    }
    int rc = lowrank_shared(W, W, d, q, U, psi);
    for (size_t r = 0; r < (size_t)d; r++) {
        for (size_t c = 0; c < r; c++)
            W[r * (size_t)d + c] = W[c * (size_t)d + r];
        W[r * (size_t)d + r] = diag[r];
    }
    pft_free(diag);
    return rc;
}

int pft_gstat_lowrank_shared_trid(const pft_la_trid_t *t, const double *wdiag, double n, int q, double *U,
                                  double *psi)
{
    int d = t->n;
    if (q < 1 || q > d || !(n > 0) || !isfinite(n))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 1..%d or n = %g", q, d, n);
    double *lam = pft_alloc_array((size_t)q, sizeof *lam), *z = pft_alloc_array((size_t)q * d, sizeof *z);
    int rc = lam && z ? pft_la_trid_top(t, q, lam, z)
                      : pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for %d eigenvectors", q);
    for (int j = 0; rc == 0 && j < q; j++)
        lowrank_column(z + (size_t)j * d, lam[j] / n, d, q, j, U);
    if (rc == 0)
        release_psi(wdiag, 1, d, n, U, q, psi);
    pft_free(lam);
    pft_free(z);
    return rc;
}

int pft_gstat_lowrank_shared_op(const pft_lrop_t *W, double n, int q, const pft_lreig_opts_t *opts, double *U,
                                double *psi, pft_lreig_info_t *info)
{
    int d = pft_lrop_dim(W);
    if (q < 1 || q > d || !(n > 0) || !isfinite(n))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 1..%d or n = %g", q, d, n);
    double *lam = pft_alloc_array((size_t)q, sizeof *lam), *z = pft_alloc_array((size_t)q * d, sizeof *z);
    int rc = lam && z ? pft_lreig_top(W, q, opts, lam, z, info)
                      : pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for %d eigenvectors", q);
    for (int j = 0; rc == 0 && j < q; j++)
        lowrank_column(z + (size_t)j * d, lam[j] / n, d, q, j, U);
    if (rc == 0) {
        pft_lrop_diagonal(W, psi);
        release_psi(psi, 1, d, n, U, q, psi);
    }
    pft_free(lam);
    pft_free(z);
    return rc;
}

/* Q (r×d, rows orthonormal) of a QR factorisation of Sᵀ: an orthonormal basis of a space holding the span of
 * S's rows (all of it, whatever S's rank). 0, or PFT_ENUMERIC. */
static int span_basis(double *Q, int r, int d, double *tau)
{
    lapack_int info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, d, r, Q, d, tau);
    if (info == 0)
        info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, d, r, r, Q, d, tau);
    return info ? pft_err(PFT_ENUMERIC, "gstat lowrank: QR of a %d×%d span failed (%d)", d, r, (int)info) : 0;
}

int pft_gstat_lowrank_shared_span(const double *W, const double *dg, int d, double n, const double *S, int r,
                                  int q, double *U, double *psi)
{
    if (d < 1 || q < 1 || q > d || r < 0 || !(n > 0) || !isfinite(n))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 1..%d, r = %d or n = %g", q, d, r, n);
    if (r == 0 || r >= d)
        return 1; /* nothing to project on, or no smaller problem */
    size_t rd = (size_t)r * d;
    int k = q < r ? q : r, rc = 0;
    double *B = pft_alloc_array(rd, sizeof *B), *T = pft_alloc_array(rd, sizeof *T),
           *P = pft_alloc_array((size_t)r * r, sizeof *P), *tau = pft_alloc_array((size_t)r, sizeof *tau),
           *lam = pft_alloc_array((size_t)k, sizeof *lam), *z = pft_alloc_array((size_t)k * r, sizeof *z),
           *v = pft_calloc((size_t)k * d, sizeof *v);
    if (!B || !T || !P || !tau || !lam || !z || !v)
        rc = pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for a span of %d", r);
    if (rc == 0) {
        memcpy(B, S, rd * sizeof *B);
        rc = span_basis(B, r, d, tau);
    }
    double trl = 0, trp = 0;
    if (rc == 0) { /* P = B (W − diag dg) Bᵀ, and the traces that say whether the span holds W − diag dg */
        cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, r, d, 1.0, W, d, B, d, 0.0, T, d);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < d; j++)
                T[(size_t)i * d + j] -= B[(size_t)i * d + j] * dg[j];
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, r, d, 1.0, T, d, B, d, 0.0, P, r);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < i; j++)
                P[(size_t)i * r + j] = P[(size_t)j * r + i] =
                    0.5 * (P[(size_t)i * r + j] + P[(size_t)j * r + i]);
        for (int j = 0; j < d; j++)
            trl += W[(size_t)j * d + j] - dg[j];
        for (int i = 0; i < r; i++)
            trp += P[(size_t)i * r + i];
        if (!isfinite(trl) || !isfinite(trp) || !(fabs(trl - trp) <= 1e-9 * fabs(trl) + DBL_MIN))
            rc = 1; /* W − diag dg is not (numerically) PSD within the span: the caller reduces W */
    }
    if (rc == 0) /* descending; row j of z: the eigenvector in B's coordinates */
        rc = pft_la_eigh_top(P, r, k, lam, z);
    if (rc == 0) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, d, r, 1.0, z, r, B, d, 0.0, v, d);
        for (int j = 0; j < q; j++) /* beyond the span's dimension: zero columns */
            if (j < k)
                lowrank_column(v + (size_t)j * d, lam[j] / n, d, q, j, U);
            else
                for (int i = 0; i < d; i++)
                    U[(size_t)i * q + j] = 0.0;
        release_psi(W, (size_t)d + 1, d, n, U, q, psi);
    }
    pft_free(B);
    pft_free(T);
    pft_free(P);
    pft_free(tau);
    pft_free(lam);
    pft_free(z);
    pft_free(v);
    return rc;
}

/* 1 when W z = dg∘z + Fᵀ diag(w) F z for the probe z (entries ±1, seeded) to 1e-9 of the larger side: W
 * equals diag(dg) + Fᵀ diag(w) F, but for a difference a fixed random vector misses (probability 0 for any
 * E ≠ 0 that does not depend on the seed). t: r doubles of scratch; y1, y2, z: d each. */
static int factor_probe(const double *W, const double *dg, int d, const double *F, const double *w, int r,
                        double *t, double *y1, double *y2, double *z)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int j = 0; j < d; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        z[j] = x >> 63 ? 1.0 : -1.0;
    }
    cblas_dsymv(CblasRowMajor, CblasUpper, d, 1.0, W, d, z, 1, 0.0, y1, 1);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, r, d, 1.0, F, d, z, 1, 0.0, t, 1);
    for (int k = 0; k < r; k++)
        t[k] *= w[k];
    cblas_dgemv(CblasRowMajor, CblasTrans, r, d, 1.0, F, d, t, 1, 0.0, y2, 1);
    double e = 0, a = 0, b = 0;
    for (int j = 0; j < d; j++) {
        y2[j] += dg[j] * z[j];
        e += (y1[j] - y2[j]) * (y1[j] - y2[j]);
        a += y1[j] * y1[j];
        b += y2[j] * y2[j];
    }
    return isfinite(e) && sqrt(e) <= 1e-9 * sqrt(a > b ? a : b);
}

int pft_gstat_lowrank_shared_factor(const double *W, const double *dg, int d, double n, const double *F,
                                    const double *w, int r, int q, double *U, double *psi)
{
    if (d < 1 || q < 1 || q > d || r < 0 || !(n > 0) || !isfinite(n))
        return pft_err(PFT_EINVAL, "gstat lowrank: q = %d outside 1..%d, r = %d or n = %g", q, d, r, n);
    for (int k = 0; k < r; k++)
        if (!(w[k] >= 0) || !isfinite(w[k]))
            return pft_err(PFT_EINVAL, "gstat lowrank: weight %d = %g", k, w[k]);
    if (r == 0 || r >= d)
        return 1;
    int k = q < r ? q : r, rc = 0;
    double *Fs = pft_alloc_array((size_t)r * d, sizeof *Fs), *G = pft_alloc_array((size_t)r * r, sizeof *G),
           *lam = pft_alloc_array((size_t)k, sizeof *lam), *z = pft_alloc_array((size_t)k * r, sizeof *z),
           *col = pft_alloc_array((size_t)k * d, sizeof *col), *t = pft_alloc_array((size_t)r, sizeof *t),
           *pv = pft_alloc_array((size_t)3 * d, sizeof *pv);
    if (!Fs || !G || !lam || !z || !col || !t || !pv)
        rc = pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for %d factor rows", r);
    /* W not the diagonal plus these terms: 1, the caller finds another way */
    if (rc == 0 && !factor_probe(W, dg, d, F, w, r, t, pv, pv + d, pv + 2 * (size_t)d))
        rc = 1;
    if (rc == 0) { /* G = F̃ F̃ᵀ with F̃ = diag(√w) F: its eigenpairs are L's (F̃ᵀ v / √λ) */
        for (int i = 0; i < r; i++) {
            double sw = sqrt(w[i]);
            for (int j = 0; j < d; j++)
                Fs[(size_t)i * d + j] = F[(size_t)i * d + j] * sw;
        }
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, r, d, 1.0, Fs, d, 0.0, G, r);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < i; j++)
                G[(size_t)i * r + j] = G[(size_t)j * r + i];
        rc = pft_la_eigh_top(G, r, k, lam, z);
    }
    if (rc == 0) { /* column j = F̃ᵀ v_j / √n = u_j √(λ_j / n), its sign fixed as lowrank_column fixes it */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, d, r, 1.0 / sqrt(n), z, r, Fs, d, 0.0, col,
                    d);
        for (int j = 0; j < q; j++) {
            const double *c = col + (size_t)(j < k ? j : 0) * d;
            double big = 0, s = 1.0;
            int at = 0;
            for (int i = 0; i < d; i++)
                if (fabs(c[i]) > big) {
                    big = fabs(c[i]);
                    at = i;
                }
            s = c[at] < 0 ? -1.0 : 1.0;
            for (int i = 0; i < d; i++)
                U[(size_t)i * q + j] = j < k && lam[j] > 0 ? c[i] * s + 0.0 : 0.0;
        }
        release_psi(W, (size_t)d + 1, d, n, U, q, psi);
    }
    pft_free(Fs);
    pft_free(G);
    pft_free(lam);
    pft_free(z);
    pft_free(col);
    pft_free(t);
    pft_free(pv);
    return rc;
}

int pft_gstat_lowrank_op_add_rows(pft_lrop_t *op, const float *x, const int32_t *y, int n)
{
    int d = pft_lrop_dim(op), C = 0;
    for (int i = 0; i < n; i++) {
        if (y[i] < 0)
            return pft_err(PFT_EINVAL, "gstat lowrank: row %d has label %d", i, (int)y[i]);
        C = y[i] + 1 > C ? y[i] + 1 : C;
    }
    double *mu = pft_calloc((size_t)C * d + 1, sizeof *mu), *cnt = pft_calloc((size_t)C + 1, sizeof *cnt);
    int rc = mu && cnt ? 0 : pft_err(PFT_ENOMEM, "gstat lowrank: out of memory for %d class means", C);
    for (int i = 0; rc == 0 && i < n; i++) {
        cnt[y[i]]++;
        for (int j = 0; j < d; j++)
            mu[(size_t)y[i] * d + j] += x[(size_t)i * d + j];
    }
    for (int c = 0; rc == 0 && c < C; c++)
        for (int j = 0; cnt[c] > 0 && j < d; j++)
            mu[(size_t)c * d + j] /= cnt[c];
    for (int i = 0; rc == 0 && i < n; i++)
        rc = pft_lrop_add_rows(op, x + (size_t)i * d, 1, mu + (size_t)y[i] * d, 1.0);
    pft_free(mu);
    pft_free(cnt);
    return rc;
}

int pft_gstat_lowrank_op_merge(pft_lrop_t *op, const pft_gstat_t *a, const pft_gstat_t *b)
{
    int d = pft_lrop_dim(op);
    if (pft_gstat_dim(a) != d || pft_gstat_dim(b) != d)
        return pft_err(PFT_EINVAL, "gstat lowrank: statistics of d = %d and %d for an operator of d = %d",
                       pft_gstat_dim(a), pft_gstat_dim(b), d);
    double *delta = pft_alloc_array((size_t)d, sizeof *delta);
    int rc = delta ? 0 : pft_err(PFT_ENOMEM, "gstat lowrank: out of memory");
    for (int i = 0; rc == 0 && i < pft_gstat_n_classes(b); i++) {
        int k = pft_gstat_find(a, pft_gstat_label(b, i));
        if (k < 0)
            continue;
        double na = (double)pft_gstat_count(a, k), nb = (double)pft_gstat_count(b, i);
        const double *ma = pft_gstat_mean(a, k), *mb = pft_gstat_mean(b, i);
        for (int j = 0; j < d; j++)
            delta[j] = mb[j] - ma[j];
        rc = pft_lrop_add_factor(op, delta, 1, 1, na * nb / (na + nb));
    }
    pft_free(delta);
    return rc;
}

void pft_gstat_lowrank_expand(const double *U, const double *psi, int d, int q, double *C)
{
    size_t dd = (size_t)d * (size_t)d;
    if (q > 0) {
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, d, q, 1.0, U, q, 0.0, C, d);
        pft_la_sym_from_lower(C, d);
    } else {
        memset(C, 0, dd * sizeof *C);
    }
    for (int r = 0; r < d; r++)
        C[(size_t)r * d + r] += psi[r];
}
