/* pft_lreig: leading eigenpairs of a diagonal-plus-low-rank operator by block Krylov with thick restarts
 * (theory in pft_lreig.h). */
#include "pft_lreig.h"

#include <lapacke.h>
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"
#include "pft_rng.h"

/* The iteration's state: the basis Q and its image W (both d×mmax row-major, the first m columns used). */
typedef struct {
    const pft_lrop_t *op;
    int d, b, mmax, m;
    double *Q, *W;
    double *Z;   /* d×b: the block being orthonormalised */
    double *T;   /* mmax×b: projection coefficients; also the operator's R×b scratch */
    double *H;   /* mmax×mmax: the projected matrix */
    double *S;   /* b×mmax: its leading eigenvectors (rows) */
    double *th;  /* b Ritz values, descending */
    double *V;   /* d×b Ritz vectors */
    double *AV;  /* d×b their images */
    double *tau; /* b Householder scalars */
    double *nrm; /* b column norms */
    pft_rng_t *rng;
    long matvecs;
} ks_t;

void pft_lreig_opts_default(pft_lreig_opts_t *o)
{
    o->tol = 1e-10;
    o->extra = -1; /* max(8, q/8) */
    o->steps = 4;
    o->max_cycles = 40;
    o->seed = 0;
}

/* Fixes the sign of the unit vector v (n): its entry of largest magnitude (the first on ties) positive. */
static void fix_sign(double *v, int n)
{
    double big = 0;
    int at = 0;
    for (int r = 0; r < n; r++)
        if (fabs(v[r]) > big) {
            big = fabs(v[r]);
            at = r;
        }
    if (v[at] < 0)
        for (int r = 0; r < n; r++)
            v[r] = -v[r];
}

int pft_lreig_top_dense(const pft_lrop_t *op, int q, double *lam, double *V)
{
    int d = pft_lrop_dim(op);
    if (q < 1 || q > d)
        return pft_err(PFT_EINVAL, "lreig: q = %d outside 1..%d", q, d);
    double *a = pft_alloc_array((size_t)d * d, sizeof *a);
    if (!a)
        return pft_err(PFT_ENOMEM, "lreig: out of memory for a %d×%d matrix", d, d);
    pft_lrop_dense(op, a);
    int rc = pft_la_eigh_top(a, d, q, lam, V);
    for (int j = 0; rc == 0 && j < q; j++)
        fix_sign(V + (size_t)j * d, d);
    pft_free(a);
    return rc;
}

/* Z -= Q[:, :m] (Q[:, :m]ᵀ Z). */
static void project(ks_t *k)
{
    if (k->m == 0)
        return;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k->m, k->b, k->d, 1.0, k->Q, k->mmax, k->Z, k->b,
                0.0, k->T, k->b);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k->d, k->b, k->m, -1.0, k->Q, k->mmax, k->T, k->b,
                1.0, k->Z, k->b);
}

/* Column norms of Z into k->nrm. */
static void col_norms(ks_t *k)
{
    for (int j = 0; j < k->b; j++)
        k->nrm[j] = 0;
    for (int r = 0; r < k->d; r++)
        for (int j = 0; j < k->b; j++)
            k->nrm[j] += k->Z[(size_t)r * k->b + j] * k->Z[(size_t)r * k->b + j];
    for (int j = 0; j < k->b; j++)
        k->nrm[j] = sqrt(k->nrm[j]);
}

static void random_column(ks_t *k, int j)
{
    for (int r = 0; r < k->d; r++)
        k->Z[(size_t)r * k->b + j] = pft_rng_normal(k->rng);
}

/* Householder QR of Z in place (Z becomes Q); columns whose R diagonal is below 1e-8 of the largest are
 * replaced by random ones and 1 is returned (their Q column is arbitrary, possibly in span Q). */
static int qr(ks_t *k, int *redo)
{
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, k->d, k->b, k->Z, k->b, k->tau);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "lreig: QR failed (%d)", (int)info);
    double big = 0;
    for (int j = 0; j < k->b; j++)
        big = fmax(big, fabs(k->Z[(size_t)j * k->b + j]));
    for (int j = 0; j < k->b; j++)
        k->nrm[j] = fabs(k->Z[(size_t)j * k->b + j]) <= 1e-8 * big ? 0.0 : 1.0;
    info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, k->d, k->b, k->b, k->Z, k->b, k->tau);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "lreig: QR failed (%d)", (int)info);
    *redo = 0;
    for (int j = 0; j < k->b; j++)
        if (k->nrm[j] == 0) {
            random_column(k, j);
            *redo = 1;
        }
    return 0;
}

/* Cholesky QR of Z in place: G = ZᵀZ = RᵀR, Z ← Z R⁻¹ (two BLAS-3 calls where Householder QR is mostly
 * BLAS-2). 1 (Z untouched) when G is not numerically positive definite or R's diagonal spans more than 1e6
 * (the orthogonality lost, ε·κ², would exceed 1e-4): the caller then uses Householder. S serves as scratch.
 */
static int chol_qr(ks_t *k)
{
    int b = k->b;
    double *G = k->S;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, b, k->d, 1.0, k->Z, b, 0.0, G, b);
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', b, G, b) != 0)
        return 1;
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < b; j++)
        lo = fmin(lo, fabs(G[(size_t)j * b + j])), hi = fmax(hi, fabs(G[(size_t)j * b + j]));
    if (!(lo > 1e-6 * hi))
        return 1;
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, k->d, b, 1.0, G, b, k->Z,
                b);
    return 0;
}

/* Orthonormalises Z's columns: Cholesky QR, or Householder QR where that is ill-conditioned (*redo as qr). */
static int orthonormalize(ks_t *k, int *redo)
{
    *redo = 0;
    return chol_qr(k) == 0 ? 0 : qr(k, redo);
}

/* Makes Z (d×b) orthonormal and orthogonal to Q[:, :m]: a projection and an orthonormalisation, twice
 * (block CGS2). A column found dependent, or that the second projection finds mostly in span Q (below half
 * its length), is replaced by a random one and the block done again. */
static int orth_block(ks_t *k)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        project(k);
        int redo = 0, rc = orthonormalize(k, &redo);
        if (rc)
            return rc;
        if (redo)
            continue;
        project(k);
        col_norms(k);
        for (int j = 0; j < k->b; j++)
            if (!(k->nrm[j] > 0.5)) {
                random_column(k, j);
                redo = 1;
            }
        if (redo)
            continue;
        if ((rc = orthonormalize(k, &redo)))
            return rc;
        if (!redo)
            return 0;
    }
    return pft_err(PFT_ENUMERIC, "lreig: no orthonormal block after 8 attempts (d = %d, m = %d, b = %d)",
                   k->d, k->m, k->b);
}

/* Appends Z as the next block of Q and its image as the next block of W. */
static void append(ks_t *k)
{
    for (int r = 0; r < k->d; r++)
        memcpy(k->Q + (size_t)r * k->mmax + k->m, k->Z + (size_t)r * k->b, (size_t)k->b * sizeof(double));
    pft_lrop_apply(k->op, k->Q + k->m, k->b, k->mmax, k->W + k->m, k->mmax, k->T);
    k->matvecs += k->b;
    k->m += k->b;
}

/* Rayleigh–Ritz on Q[:, :m]: Ritz values th, vectors V and images AV; the largest residual of the first q
 * relative to ‖A‖ into *res, ‖A‖ into *norm. */
static int ritz(ks_t *k, int q, double *res, double *norm)
{
    int m = k->m, d = k->d, b = k->b;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, m, d, 1.0, k->Q, k->mmax, k->W, k->mmax, 0.0,
                k->H, m);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < i; j++)
            k->H[(size_t)i * m + j] = 0.5 * (k->H[(size_t)i * m + j] + k->H[(size_t)j * m + i]);
    int rc = pft_la_eigh_top(k->H, m, b, k->th, k->S);
    if (rc)
        return pft_err_wrap(rc, "lreig: the projected %d×%d problem", m, m);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, b, m, 1.0, k->Q, k->mmax, k->S, m, 0.0, k->V, b);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, b, m, 1.0, k->W, k->mmax, k->S, m, 0.0, k->AV, b);
    *norm = fmax(fabs(k->th[0]), fabs(k->th[b - 1]));
    for (int j = 0; j < b; j++)
        k->nrm[j] = 0;
    for (int r = 0; r < d; r++)
        for (int j = 0; j < q; j++) {
            double e = k->AV[(size_t)r * b + j] - k->th[j] * k->V[(size_t)r * b + j];
            k->nrm[j] += e * e;
        }
    *res = 0;
    for (int j = 0; j < q; j++)
        *res = fmax(*res, sqrt(k->nrm[j]) / (*norm > 0 ? *norm : 1.0));
    return 0;
}

/* Q = V, W = AV: the restart's first block. */
static void restart(ks_t *k)
{
    for (int r = 0; r < k->d; r++) {
        memcpy(k->Q + (size_t)r * k->mmax, k->V + (size_t)r * k->b, (size_t)k->b * sizeof(double));
        memcpy(k->W + (size_t)r * k->mmax, k->AV + (size_t)r * k->b, (size_t)k->b * sizeof(double));
    }
    k->m = k->b;
}

static void ks_free(ks_t *k)
{
    double *bufs[] = {k->Q, k->W, k->Z, k->T, k->H, k->S, k->th, k->V, k->AV, k->tau, k->nrm};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        pft_free(bufs[i]);
    pft_rng_destroy(&k->rng);
}

static int ks_init(ks_t *k, const pft_lrop_t *op, int b, int mmax, uint64_t seed)
{
    memset(k, 0, sizeof *k);
    k->op = op;
    k->d = pft_lrop_dim(op);
    k->b = b;
    k->mmax = mmax;
    size_t d = (size_t)k->d, R = (size_t)pft_lrop_rank(op);
    k->Q = pft_alloc_array(d * mmax, sizeof(double));
    k->W = pft_alloc_array(d * mmax, sizeof(double));
    k->Z = pft_alloc_array(d * b, sizeof(double));
    k->T = pft_alloc_array(((size_t)mmax > R ? (size_t)mmax : R) * b, sizeof(double));
    k->H = pft_alloc_array((size_t)mmax * mmax, sizeof(double));
    k->S = pft_alloc_array((size_t)b * mmax, sizeof(double));
    k->th = pft_alloc_array((size_t)b, sizeof(double));
    k->V = pft_alloc_array(d * b, sizeof(double));
    k->AV = pft_alloc_array(d * b, sizeof(double));
    k->tau = pft_alloc_array((size_t)b, sizeof(double));
    k->nrm = pft_alloc_array((size_t)b, sizeof(double));
    k->rng = pft_rng_new(seed);
    if (!k->Q || !k->W || !k->Z || !k->T || !k->H || !k->S || !k->th || !k->V || !k->AV || !k->tau ||
        !k->nrm || !k->rng) {
        ks_free(k);
        return pft_err(PFT_ENOMEM, "lreig: out of memory for a %d×%d Krylov basis", k->d, mmax);
    }
    return 0;
}

/* Z = block j of W (columns [j·b, (j+1)·b)): the image of Q's block j, the next block's raw directions. */
static void take_image(ks_t *k, int j)
{
    for (int r = 0; r < k->d; r++)
        memcpy(k->Z + (size_t)r * k->b, k->W + (size_t)r * k->mmax + (size_t)j * k->b,
               (size_t)k->b * sizeof(double));
}

/* The iteration; 1 when it did not converge within the budget (the caller falls back to dense). */
static int iterate(ks_t *k, int q, const pft_lreig_opts_t *o, pft_lreig_info_t *info)
{
    for (int j = 0; j < k->b; j++)
        random_column(k, j);
    int rc = orth_block(k);
    if (rc == 0)
        append(k);
    for (int cycle = 1; rc == 0 && cycle <= o->max_cycles; cycle++) {
        for (int s = 0; rc == 0 && s < o->steps; s++) {
            take_image(k, k->m / k->b - 1);
            if ((rc = orth_block(k)) == 0)
                append(k);
        }
        if (rc == 0)
            rc = ritz(k, q, &info->residual, &info->norm);
        info->cycles = cycle;
        if (rc == 0 && info->residual <= o->tol)
            return 0;
        if (rc == 0)
            restart(k);
    }
    return rc ? rc : 1;
}

int pft_lreig_top(const pft_lrop_t *op, int q, const pft_lreig_opts_t *opts, double *lam, double *V,
                  pft_lreig_info_t *info)
{
    pft_lreig_opts_t o;
    pft_lreig_info_t tmp;
    pft_lreig_opts_default(&o);
    if (opts)
        o = *opts;
    info = info ? info : &tmp;
    memset(info, 0, sizeof *info);
    int d = pft_lrop_dim(op);
    if (q < 1 || q > d)
        return pft_err(PFT_EINVAL, "lreig: q = %d outside 1..%d", q, d);
    if (!(o.tol > 0) || o.steps < 1 || o.max_cycles < 1)
        return pft_err(PFT_EINVAL, "lreig: tol %g, steps %d, max_cycles %d", o.tol, o.steps, o.max_cycles);
    int extra = o.extra >= 0 ? o.extra : q / 8 > 8 ? q / 8 : 8, b = q + extra;
    long mmax = (long)b * (o.steps + 1);
    if (mmax > d) { /* the Krylov space would be R^d or most of it: LAPACK on the formed matrix is cheaper */
        info->dense = 1;
        return pft_lreig_top_dense(op, q, lam, V);
    }
    ks_t k;
    int rc = ks_init(&k, op, b, (int)mmax, o.seed);
    if (rc)
        return rc;
    rc = iterate(&k, q, &o, info);
    info->matvecs = k.matvecs;
    for (int j = 0; rc == 0 && j < q; j++) {
        lam[j] = k.th[j];
        for (int r = 0; r < d; r++)
            V[(size_t)j * d + r] = k.V[(size_t)r * b + j];
        fix_sign(V + (size_t)j * d, d);
    }
    ks_free(&k);
    if (rc == 1) { /* not converged within the budget */
        info->dense = 1;
        rc = pft_lreig_top_dense(op, q, lam, V);
    }
    return rc;
}
