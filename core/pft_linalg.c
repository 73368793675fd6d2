/* pft_linalg: the one thin place where core/ reaches BLAS and LAPACKE, and core/'s hand-written SIMD kernels.
 */
#include "pft_linalg.h"

#include <lapacke.h>
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PFT_HAVE_AVX512_PATH 1 /* kernels with an AVX-512 version chosen at run time */
#endif

#include "pft_alloc.h"
#include "pft_error.h"

int pft_la_chol_lower(double *a, int d)
{
    /* A row-major lower triangle is a column-major upper triangle: factor A = UᵀU in column-major
     * order without LAPACKE's transposing copy; U read row-major is L. */
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', d, a, d);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "Cholesky factorisation failed (leading minor %d)", (int)info);
    pft_la_zero_upper(a, d);
    return 0;
}

void pft_la_llt(const double *l, double *out, int d)
{
    /* out := Lᵀ (lower triangle of l only), then out := L · out with TRMM (which reads only the lower
     * triangle of l), then mirror so the result is exactly symmetric. */
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            out[(size_t)i * d + j] = j >= i ? l[(size_t)j * d + i] : 0.0;
    cblas_dtrmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, d, d, 1.0, l, d, out, d);
    pft_la_sym_from_lower(out, d);
}

void pft_la_sym_from_lower(double *a, int d)
{
    /* in tiles of 32×32, so that the column read of the lower triangle stays in cache (a plain loop reads
     * one cache line per element at d = 1280: 5 ms per call, against under 1 ms) */
    enum { T = 32 };
    for (int i0 = 0; i0 < d; i0 += T)
        for (int j0 = i0; j0 < d; j0 += T) {
            int i1 = i0 + T < d ? i0 + T : d, j1 = j0 + T < d ? j0 + T : d;
            for (int i = i0; i < i1; i++)
                for (int j = (j0 > i + 1 ? j0 : i + 1); j < j1; j++)
                    a[(size_t)i * d + j] = a[(size_t)j * d + i];
        }
}

void pft_la_zero_upper(double *a, int d)
{
    for (int i = 0; i < d; i++)
        memset(a + (size_t)i * d + i + 1, 0, (size_t)(d - i - 1) * sizeof *a);
}

int pft_la_orthonormalize(double *a, int rows, int cols)
{
    /* The row-major rows×cols matrix A is the column-major cols×rows matrix Aᵀ: an LQ factorisation
     * Aᵀ = L Q gives Q (cols×rows, orthonormal rows) in column-major order, which read row-major is a
     * rows×cols matrix with orthonormal columns spanning those of A. No transposing copies. */
    if (rows < cols || cols < 1)
        return pft_err(PFT_EINVAL, "orthonormalize: %d×%d (need rows >= cols >= 1)", rows, cols);
    double q1 = 0, q2 = 0;
    lapack_int info = LAPACKE_dgelqf_work(LAPACK_COL_MAJOR, cols, rows, a, cols, NULL, &q1, -1);
    if (info == 0)
        info = LAPACKE_dorglq_work(LAPACK_COL_MAJOR, cols, rows, cols, a, cols, NULL, &q2, -1);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "orthonormalize: workspace query failed (%d)", (int)info);
    lapack_int lwork = (lapack_int)(q1 > q2 ? q1 : q2);
    if (lwork < cols)
        lwork = cols;
    double *tau = pft_alloc_array((size_t)cols, sizeof *tau);
    double *work = pft_alloc_array((size_t)lwork, sizeof *work);
    int rc = 0;
    if (!tau || !work) {
        rc = pft_err(PFT_ENOMEM, "orthonormalize: out of memory");
        goto done;
    }
    info = LAPACKE_dgelqf_work(LAPACK_COL_MAJOR, cols, rows, a, cols, tau, work, lwork);
    if (info == 0)
        info = LAPACKE_dorglq_work(LAPACK_COL_MAJOR, cols, rows, cols, a, cols, tau, work, lwork);
    if (info != 0)
        rc = pft_err(PFT_ENUMERIC, "orthonormalize: LAPACK failed (%d)", (int)info);
done:
    pft_free(tau);
    pft_free(work);
    return rc;
}

int pft_la_eigh(double *a, int n, double *w)
{
    /* The row-major lower triangle is the column-major upper triangle; the eigenvectors LAPACK returns as
     * column-major columns are row-major rows. */
    double q = 0;
    lapack_int info = LAPACKE_dsyev_work(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w, &q, -1);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "eigh: workspace query failed (%d)", (int)info);
    lapack_int lwork = (lapack_int)q;
    if (lwork < 3 * n)
        lwork = 3 * n;
    double *work = pft_alloc_array((size_t)lwork, sizeof *work);
    if (!work)
        return pft_err(PFT_ENOMEM, "eigh: out of memory");
    info = LAPACKE_dsyev_work(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w, work, lwork);
    pft_free(work);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "eigh: LAPACK dsyev failed (%d)", (int)info);
    return 0;
}

/* DSYEVR on the column-major upper (row-major lower) triangle of a: every eigenpair (k = n, range 'A') or the
 * k largest (range 'I'), ascending in w, the vectors as k row-major rows of z (n×k column-major). The
 * workspace query, the allocations and the call, for both; what names the caller in messages. */
static int dsyevr(double *a, int n, int k, double *w, double *z, const char *what)
{
    char range = k == n ? 'A' : 'I';
    lapack_int *isuppz = pft_alloc_array(2 * (size_t)n, sizeof *isuppz);
    double q = 0;
    lapack_int iq = 0, m = 0, il = range == 'I' ? n - k + 1 : 0, iu = range == 'I' ? n : 0;
    lapack_int info = isuppz ? LAPACKE_dsyevr_work(LAPACK_COL_MAJOR, 'V', range, 'U', n, a, n, 0, 0, il, iu,
                                                   0, &m, w, z, n, isuppz, &q, -1, &iq, -1)
                             : -1000;
    lapack_int lwork = (lapack_int)q, liwork = iq;
    double *work = info == 0 ? pft_alloc_array((size_t)lwork, sizeof *work) : NULL;
    lapack_int *iwork = info == 0 ? pft_alloc_array((size_t)liwork, sizeof *iwork) : NULL;
    int rc = 0;
    if (info == -1000 || (info == 0 && (!work || !iwork)))
        rc = pft_err(PFT_ENOMEM, "%s: out of memory", what);
    else if (info != 0)
        rc = pft_err(PFT_ENUMERIC, "%s: workspace query failed (%d)", what, (int)info);
    if (rc == 0) {
        info = LAPACKE_dsyevr_work(LAPACK_COL_MAJOR, 'V', range, 'U', n, a, n, 0, 0, il, iu, 0, &m, w, z, n,
                                   isuppz, work, lwork, iwork, liwork);
        if (info != 0 || m != k)
            rc = pft_err(PFT_ENUMERIC, "%s: LAPACK dsyevr failed (%d, %d of %d eigenvalues)", what, (int)info,
                         (int)m, k);
    }
    pft_free(isuppz);
    pft_free(work);
    pft_free(iwork);
    return rc;
}

int pft_la_eigh_fast(double *a, int n, double *w)
{
    /* DSYEVR (relatively robust representations) writes the vectors to a separate Z: n² doubles beside a and
     * O(n) workspace, where DSYEVD wants 2n² more. Z's columns (column-major) are row-major rows, as in eigh.
     */
    double *z = pft_alloc_array((size_t)n * (size_t)n, sizeof *z);
    int rc = z ? dsyevr(a, n, n, w, z, "eigh") : pft_err(PFT_ENOMEM, "eigh: out of memory");
    if (rc == 0)
        memcpy(a, z, (size_t)n * (size_t)n * sizeof *a);
    pft_free(z);
    return rc;
}

int pft_la_eigh_into(double *a, int n, double *w, double *z)
{
    return dsyevr(a, n, n, w, z, "eigh");
}

int pft_la_tridiag(double *a, int n, double *td, double *te, double *tau)
{
    /* column-major 'U' of a row-major matrix is its lower triangle, as in pft_la_eigh_fast */
    lapack_int info = LAPACKE_dsytrd(LAPACK_COL_MAJOR, 'U', n, a, n, td, te, tau);
    return info == 0 ? 0
                     : pft_err(PFT_ENUMERIC, "tridiagonal reduction: LAPACK dsytrd failed (%d)", (int)info);
}

/* y ← Q y (trans 'N') or Qᵀ y ('T') for the `rows` rows of y (n doubles each: the columns of a column-major
 * n×rows matrix), Q the reflectors of pft_la_tridiag (a, tau). The workspace is at least rows·64 + 65·64
 * doubles: with the size dormtr's query returns, this LAPACK applies the reflectors one at a time (dorm2l),
 * about twice as slow (12.6 against 6.8 ms at n = 1280, 64 rows). 0, or PFT_ENOMEM / PFT_ENUMERIC. */
static int ormtr(const double *a, const double *tau, int n, char trans, double *y, int rows, const char *what)
{
    if (rows == 0)
        return 0;
    double q = 0;
    lapack_int info =
        LAPACKE_dormtr_work(LAPACK_COL_MAJOR, 'L', 'U', trans, n, rows, a, n, tau, y, n, &q, -1);
    size_t lwork = (size_t)q > (size_t)rows * 64 + 65 * 64 ? (size_t)q : (size_t)rows * 64 + 65 * 64;
    double *work = info == 0 ? pft_alloc_array(lwork, sizeof *work) : NULL;
    if (info == 0 && !work)
        return pft_err(PFT_ENOMEM, "%s: out of memory", what);
    if (info == 0)
        info = LAPACKE_dormtr_work(LAPACK_COL_MAJOR, 'L', 'U', trans, n, rows, a, n, tau, y, n, work,
                                   (lapack_int)lwork);
    pft_free(work);
    return info == 0 ? 0 : pft_err(PFT_ENUMERIC, "%s: LAPACK dormtr failed (%d)", what, (int)info);
}

int pft_la_tridiag_qt_rows(const double *a, const double *tau, int n, double *y, int rows)
{
    return ormtr(a, tau, n, 'T', y, rows, "tridiagonal basis");
}

int pft_la_tridiag_q_rows(const double *a, const double *tau, int n, double *y, int rows)
{
    return ormtr(a, tau, n, 'N', y, rows, "tridiagonal basis, back");
}

int pft_la_tridiag_eigvals(const double *td, const double *te, int n, double *w)
{
    double *e = pft_alloc_array((size_t)n, sizeof *e);
    if (!e)
        return pft_err(PFT_ENOMEM, "tridiagonal eigenvalues: out of memory");
    memcpy(w, td, (size_t)n * sizeof *w);
    if (n > 1)
        memcpy(e, te, (size_t)(n - 1) * sizeof *e);
    lapack_int info = LAPACKE_dsterf(n, w, e);
    pft_free(e);
    return info == 0 ? 0
                     : pft_err(PFT_ENUMERIC, "tridiagonal eigenvalues: LAPACK dsterf failed (%d)", (int)info);
}

int pft_la_tridiag_extremes(const double *td, const double *te, int n, double *lo, double *hi)
{
    double *w = pft_alloc_array((size_t)n, sizeof *w);
    lapack_int *ib = pft_alloc_array((size_t)n, sizeof *ib), *is = pft_alloc_array((size_t)n, sizeof *is);
    int rc = w && ib && is ? 0 : pft_err(PFT_ENOMEM, "tridiagonal extremes: out of memory");
    for (int k = 0; rc == 0 && k < 2; k++) { /* bisection for the first, then the n-th eigenvalue */
        lapack_int m = 0, nsplit = 0, at = k ? n : 1;
        lapack_int info = LAPACKE_dstebz('I', 'E', n, 0, 0, at, at, 0, td, te, &m, &nsplit, w, ib, is);
        if (info != 0 || m != 1)
            rc = pft_err(PFT_ENUMERIC, "tridiagonal extremes: LAPACK dstebz failed (%d, %d found)", (int)info,
                         (int)m);
        else
            *(k ? hi : lo) = w[0];
    }
    pft_free(w);
    pft_free(ib);
    pft_free(is);
    return rc;
}

void pft_la_trid_free(pft_la_trid_t *t)
{
    PFT_FREE(t->a);
    PFT_FREE(t->tau);
    PFT_FREE(t->td);
    PFT_FREE(t->te);
    PFT_FREE(t->diag);
    t->n = 0;
}

int pft_la_trid_unreduce(pft_la_trid_t *t, double **a_out)
{
    *a_out = NULL;
    if (!t->a || !t->diag)
        return pft_err(PFT_EINVAL, "tridiagonal reduction: no matrix or no diagonal kept to give it back");
    enum { T = 32 }; /* tiles, as pft_la_sym_from_lower */
    int n = t->n;
    double *a = t->a;
    for (int i0 = 0; i0 < n; i0 += T)
        for (int j0 = i0; j0 < n; j0 += T) {
            int i1 = i0 + T < n ? i0 + T : n, j1 = j0 + T < n ? j0 + T : n;
            for (int i = i0; i < i1; i++)
                for (int j = (j0 > i + 1 ? j0 : i + 1); j < j1; j++)
                    a[(size_t)j * n + i] = a[(size_t)i * n + j];
        }
    for (int i = 0; i < n; i++)
        a[(size_t)i * n + i] = t->diag[i];
    t->a = NULL;
    pft_la_trid_free(t);
    *a_out = a;
    return 0;
}

/* Reverses the order of the k eigenpairs (w[k], rows of z of n): ascending → descending. */
static void reverse_pairs(double *w, double *z, int n, int k)
{
    for (int i = 0; i < k / 2; i++) {
        int j = k - 1 - i;
        double t = w[i];
        w[i] = w[j];
        w[j] = t;
        for (int r = 0; r < n; r++) {
            t = z[(size_t)i * n + r];
            z[(size_t)i * n + r] = z[(size_t)j * n + r];
            z[(size_t)j * n + r] = t;
        }
    }
}

int pft_la_trid_top(const pft_la_trid_t *t, int k, double *w, double *z)
{
    int n = t->n;
    if (!t->a || n < 1 || k < 1 || k > n)
        return pft_err(PFT_EINVAL, "tridiagonal top: k = %d outside 1..%d, or no reduction kept", k, n);
    double *d = pft_alloc_array((size_t)n, sizeof *d), *e = pft_alloc_array((size_t)n, sizeof *e);
    double *wa = pft_alloc_array((size_t)n, sizeof *wa);
    lapack_int *isuppz = pft_alloc_array(2 * (size_t)k, sizeof *isuppz), m = 0, tryrac = 1;
    int rc = d && e && wa && isuppz ? 0 : pft_err(PFT_ENOMEM, "tridiagonal top: out of memory");
    if (rc == 0) {
        memcpy(d, t->td, (size_t)n * sizeof *d);
        memcpy(e, t->te, (size_t)n * sizeof *e);
        e[n - 1] = 0;
        /* z as the column-major n×k matrix of T's eigenvectors, ascending */
        lapack_int info = LAPACKE_dstemr(LAPACK_COL_MAJOR, 'V', 'I', n, d, e, 0, 0, n - k + 1, n, &m, wa, z,
                                         n, k, isuppz, &tryrac);
        if (info != 0 || m != k)
            rc = pft_err(PFT_ENUMERIC, "tridiagonal top: LAPACK dstemr failed (%d, %d of %d eigenvalues)",
                         (int)info, (int)m, k);
    }
    if (rc == 0) /* Q z: the eigenvectors of the reduced matrix */
        rc = ormtr(t->a, t->tau, n, 'N', z, k, "tridiagonal top");
    if (rc == 0) {
        memcpy(w, wa, (size_t)k * sizeof *w);
        reverse_pairs(w, z, n, k);
    }
    pft_free(d);
    pft_free(e);
    pft_free(wa);
    pft_free(isuppz);
    return rc;
}

int pft_la_pt_factor(double *pd, double *pe, int n)
{
    return LAPACKE_dpttrf(n, pd, pe) == 0 ? 0 : 1;
}

void pft_la_pt_solve_rows(const double *pd, const double *pe, int n, double *y, int rows)
{
    if (rows > 0)
        LAPACKE_dpttrs(LAPACK_COL_MAJOR, n, rows, pd, pe, y, n);
}

int pft_la_eigh_top(double *a, int n, int k, double *w, double *z)
{
    if (n < 1 || k < 1 || k > n)
        return pft_err(PFT_EINVAL, "eigh top: k = %d outside 1..%d", k, n);
    double *wa = pft_alloc_array((size_t)n, sizeof *wa); /* dsyevr writes up to n values */
    int rc = wa ? dsyevr(a, n, k, wa, z, "eigh top") : pft_err(PFT_ENOMEM, "eigh top: out of memory");
    if (rc == 0) {
        reverse_pairs(wa, z, n, k);
        memcpy(w, wa, (size_t)k * sizeof *w);
    }
    pft_free(wa);
    return rc;
}

int pft_la_spd_inverse(const double *l, double *inv, int n)
{
    /* row-major lower = column-major upper: DPOTRI on U = Lᵀ leaves the upper triangle of A⁻¹ there,
     * i.e. its row-major lower triangle */
    memcpy(inv, l, (size_t)n * (size_t)n * sizeof *inv);
    lapack_int info = LAPACKE_dpotri_work(LAPACK_COL_MAJOR, 'U', n, inv, n);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "inverse: singular Cholesky factor (%d)", (int)info);
    pft_la_sym_from_lower(inv, n);
    return 0;
}

int pft_la_tri_inverse_lower(double *l, int n)
{
    lapack_int info = LAPACKE_dtrtri_work(LAPACK_COL_MAJOR, 'U', 'N', n, l, n);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "triangular inverse: zero diagonal at %d", (int)info);
    return 0;
}

int pft_la_chol_tri_inverse_lower_f(float *a, int d)
{
    /* row-major lower = column-major upper, as pft_la_chol_lower */
    lapack_int info = LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', d, a, d);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "Cholesky factorisation failed (leading minor %d)", (int)info);
    info = LAPACKE_strtri_work(LAPACK_COL_MAJOR, 'U', 'N', d, a, d);
    if (info != 0)
        return pft_err(PFT_ENUMERIC, "triangular inverse: zero diagonal at %d", (int)info);
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++)
            a[(size_t)i * d + j] = 0.0f;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* SIMD kernels */

#define VL 16 /* floats per vector */
#define RB PFT_LA_ROWS
#define JB 4 /* vectors per column block in pft_la_wstats (VL × JB = PFT_LA_PAD) */

typedef float v16f __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64), aligned(8))); /* unaligned access allowed */

/* The kernels are compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at load time (GCC function
 * multiversioning); fused multiply-add is allowed inside them. They are written with 16-lane vectors. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PFT_SIMD_CLONES                                                                                      \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),                             \
                   optimize("fp-contract=fast")))
#else
#define PFT_SIMD_CLONES
#endif

/* Rows [0, nr) of x (nr ≤ 8, a constant where inlined) against the k centres: one accumulator per row, so
 * nr independent FMA chains share each load of s and ms. */
static inline __attribute__((always_inline)) void sqdist_block(const float *restrict x, size_t dp,
                                                               const float *restrict s,
                                                               const float *restrict ms, size_t k,
                                                               float *restrict dist, int nr)
{
    for (size_t c = 0; c < k; c++) {
        const float *mc = ms + c * dp, *sc = s ? s + c * dp : NULL;
        v16f acc[8];
        for (int r = 0; r < nr; r++)
            acc[r] = (v16f){0};
        if (sc) {
            for (size_t j = 0; j < dp; j += VL) {
                v16f mv = *(const v16f *)(mc + j), sv = *(const v16f *)(sc + j);
                for (int r = 0; r < nr; r++) {
                    v16f t = *(const v16f *)(x + (size_t)r * dp + j) * sv - mv;
                    acc[r] += t * t;
                }
            }
        } else {
            for (size_t j = 0; j < dp; j += VL) {
                v16f mv = *(const v16f *)(mc + j);
                for (int r = 0; r < nr; r++) {
                    v16f t = *(const v16f *)(x + (size_t)r * dp + j) - mv;
                    acc[r] += t * t;
                }
            }
        }
        for (int r = 0; r < nr; r++) {
            float h = 0.0f;
            for (int l = 0; l < VL; l++)
                h += acc[r][l];
            dist[(size_t)r * k + c] = h;
        }
    }
}

/* Blocks of 8 rows where 32 vector registers hold their accumulators (AVX-512: measured 15-25 % faster than
 * 4 on Zen 5), else of 4 (AVX2 has 16 registers: 8 rows would spill). */
static int sqdist_rows8(void)
{
#ifdef PFT_HAVE_AVX512_PATH
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

PFT_SIMD_CLONES
void pft_la_sqdist(const float *restrict x, size_t rows, size_t dp, const float *restrict s,
                   const float *restrict ms, size_t k, float *restrict dist)
{
    size_t i0 = 0;
    if (sqdist_rows8())
        for (; i0 + 8 <= rows; i0 += 8)
            sqdist_block(x + i0 * dp, dp, s, ms, k, dist + i0 * k, 8);
    for (; i0 < rows; i0 += RB)
        sqdist_block(x + i0 * dp, dp, s, ms, k, dist + i0 * k, RB);
}

PFT_SIMD_CLONES
void pft_la_wstats(const float *restrict x, size_t rows, size_t dp, const float *restrict r, size_t k,
                   const float *restrict a, float *restrict s1, float *restrict s2)
{
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < dp; j += VL * JB) {
            v16f a1[JB], a2[JB], av[JB];
            for (int b = 0; b < JB; b++) {
                a1[b] = *(const v16f *)(s1 + c * dp + j + (size_t)b * VL);
                a2[b] = *(const v16f *)(s2 + c * dp + j + (size_t)b * VL);
                av[b] = *(const v16f *)(a + c * dp + j + (size_t)b * VL);
            }
            for (size_t i = 0; i < rows; i++) {
                float rc = r[i * k + c];
                if (rc == 0.0f)
                    continue;
                v16f rv = (v16f){0} + rc;
                for (int b = 0; b < JB; b++) {
                    v16f t = *(const v16f *)(x + i * dp + j + (size_t)b * VL) - av[b];
                    v16f u = rv * t;
                    a1[b] += u;
                    a2[b] += u * t;
                }
            }
            for (int b = 0; b < JB; b++) {
                *(v16f *)(s1 + c * dp + j + (size_t)b * VL) = a1[b];
                *(v16f *)(s2 + c * dp + j + (size_t)b * VL) = a2[b];
            }
        }
}

PFT_SIMD_CLONES
void pft_la_axpy_f(size_t n, double a, const float *restrict x, double *restrict y)
{
    for (size_t j = 0; j < n; j++)
        y[j] += a * (double)x[j];
}

PFT_SIMD_CLONES
void pft_la_wsqdist_d(const double *restrict x, size_t rows, size_t d, const double *restrict mu,
                      const double *restrict p, size_t k, double *restrict dist)
{
    size_t dv = d / 8 * 8;
    for (size_t i0 = 0; i0 < rows; i0 += 4) {
        size_t rb = rows - i0 < 4 ? rows - i0 : 4;
        const double *xb = x + i0 * d;
        for (size_t c = 0; c < k; c++) {
            const double *mc = mu + c * d, *pc = p + c * d;
            v8d acc[4] = {0}; /* one chain per row: four rows keep the FMA units busy */
            for (size_t j = 0; j < dv; j += 8) {
                v8d mv = *(const v8d *)(mc + j), pv = *(const v8d *)(pc + j);
                for (size_t r = 0; r < rb; r++) {
                    v8d e = *(const v8d *)(xb + r * d + j) - mv;
                    acc[r] += e * e * pv;
                }
            }
            for (size_t r = 0; r < rb; r++) {
                double h = 0.0;
                for (int l = 0; l < 8; l++)
                    h += acc[r][l];
                for (size_t j = dv; j < d; j++) {
                    double e = xb[r * d + j] - mc[j];
                    h += e * e * pc[j];
                }
                dist[(i0 + r) * k + c] = h;
            }
        }
    }
}

/* Columns [j0, d) of pft_la_wstats_rows, row by row over the width (s1, s2 and b stay in L1). */
PFT_SIMD_CLONES
static void wstats_rows_generic(const float *restrict x, size_t ld, size_t j0, size_t d,
                                const unsigned *restrict idx, const double *restrict r, size_t m,
                                const double *restrict b, double *restrict s1, double *restrict s2)
{
    for (size_t l = 0; l < m; l++) {
        const float *xr = x + (size_t)idx[l] * ld;
        double rl = r[l];
        for (size_t j = j0; j < d; j++) {
            double t = (double)xr[j] - b[j], u = rl * t;
            s1[j] += u;
            s2[j] += u * t;
        }
    }
}

#ifdef PFT_HAVE_AVX512_PATH
/* Columns [0, d - d mod 32) of pft_la_wstats_rows with AVX-512F: column blocks of 32 doubles whose sums stay
 * in registers while the listed rows stream by. Written with intrinsics because GCC 12 widens float vectors
 * to double by halves (four instructions for one vcvtps2pd); measured 2× the generic loop on Zen 5. Returns
 * the first column left to the caller. */
__attribute__((target("avx512f"))) static size_t wstats_rows_avx512(const float *restrict x, size_t ld,
                                                                    size_t d, const unsigned *restrict idx,
                                                                    const double *restrict r, size_t m,
                                                                    const double *restrict b,
                                                                    double *restrict s1, double *restrict s2)
{
    size_t dv = d / 32 * 32;
    for (size_t j = 0; j < dv; j += 32) {
        __m512d a1[4], a2[4], av[4];
        for (int q = 0; q < 4; q++) {
            a1[q] = _mm512_loadu_pd(s1 + j + 8 * q);
            a2[q] = _mm512_loadu_pd(s2 + j + 8 * q);
            av[q] = _mm512_loadu_pd(b + j + 8 * q);
        }
        for (size_t l = 0; l < m; l++) {
            const float *xr = x + (size_t)idx[l] * ld + j;
            __m512d rv = _mm512_set1_pd(r[l]);
            for (int q = 0; q < 4; q++) {
                __m512d t = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(xr + 8 * q)), av[q]);
                __m512d u = _mm512_mul_pd(rv, t);
                a1[q] = _mm512_add_pd(a1[q], u);
                a2[q] = _mm512_fmadd_pd(u, t, a2[q]);
            }
        }
        for (int q = 0; q < 4; q++) {
            _mm512_storeu_pd(s1 + j + 8 * q, a1[q]);
            _mm512_storeu_pd(s2 + j + 8 * q, a2[q]);
        }
    }
    return dv;
}

/* pft_la_inv_sqrt for n - n mod 8 entries (GCC keeps square roots scalar for errno's sake). */
__attribute__((target("avx512f"))) static size_t inv_sqrt_avx512(const double *restrict v, size_t n,
                                                                 double *restrict out)
{
    size_t nv = n / 8 * 8;
    __m512d one = _mm512_set1_pd(1.0);
    for (size_t j = 0; j < nv; j += 8)
        _mm512_storeu_pd(out + j, _mm512_div_pd(one, _mm512_sqrt_pd(_mm512_loadu_pd(v + j))));
    return nv;
}
#endif

void pft_la_inv_sqrt(const double *restrict v, size_t n, double *restrict out)
{
    size_t j = 0;
#ifdef PFT_HAVE_AVX512_PATH
    if (__builtin_cpu_supports("avx512f"))
        j = inv_sqrt_avx512(v, n, out);
#endif
    for (; j < n; j++)
        out[j] = 1.0 / sqrt(v[j]);
}

void pft_la_wstats_rows(const float *restrict x, size_t ld, size_t d, const unsigned *restrict idx,
                        const double *restrict r, size_t m, const double *restrict b, double *restrict s1,
                        double *restrict s2)
{
    size_t j0 = 0;
#ifdef PFT_HAVE_AVX512_PATH
    if (__builtin_cpu_supports("avx512f"))
        j0 = wstats_rows_avx512(x, ld, d, idx, r, m, b, s1, s2);
#endif
    if (j0 < d)
        wstats_rows_generic(x, ld, j0, d, idx, r, m, b, s1, s2);
}
