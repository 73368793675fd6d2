/* pft_linalg: the one thin place where core/ reaches BLAS and LAPACKE, and core/'s hand-written SIMD kernels.
 */
#ifndef PFT_LINALG_H
#define PFT_LINALG_H

#include <cblas.h>
#include <stddef.h>

/* In place lower Cholesky factor of the symmetric positive definite d×d row-major matrix a
 * (only the lower triangle is read). On success the upper triangle is set to zero and 0 is
 * returned; PFT_ENUMERIC when a is not positive definite (a is then clobbered). */
int pft_la_chol_lower(double *a, int d);

/* out (d×d, row-major) = L Lᵀ for a lower triangular L (upper part of l ignored). */
void pft_la_llt(const double *l, double *out, int d);

/* Copies the lower triangle of the d×d row-major matrix a onto its upper triangle. */
void pft_la_sym_from_lower(double *a, int d);

/* Zeroes the strictly upper triangle of the d×d row-major matrix a. */
void pft_la_zero_upper(double *a, int d);

/* Replaces the columns of a (rows×cols, row-major, rows ≥ cols ≥ 1) by an orthonormal basis of the space
 * they span (Householder QR, then Q; a rank-deficient a still gives orthonormal columns). 0, or
 * PFT_ENOMEM / PFT_ENUMERIC (a is then clobbered). */
int pft_la_orthonormalize(double *a, int rows, int cols);

/* Eigen-decomposition of the symmetric n×n row-major matrix a (only its lower triangle is read):
 * eigenvalues ascending into w[n], and row i of a becomes the unit eigenvector of w[i]. 0, or
 * PFT_ENOMEM / PFT_ENUMERIC (LAPACK did not converge; a is then clobbered). */
int pft_la_eigh(double *a, int n, double *w);

/* As pft_la_eigh, by LAPACK's MRRR driver (dsyevr): several times faster than dsyev for large n, with n² +
 * O(n) doubles of scratch (dsyevd needs 2n²). The eigenvectors may differ in sign (and within repeated
 * eigenvalues). 0, or PFT_ENOMEM / PFT_ENUMERIC (a is then clobbered). */
int pft_la_eigh_fast(double *a, int n, double *w);
/* pft_la_eigh_fast with the eigenvectors into z (n×n, row i the unit eigenvector of w[i]) instead of a: the
 * same numbers; a's lower triangle and diagonal are clobbered, its strict upper triangle is left as it was
 * (pft_la_trid_unreduce's form). 0, or PFT_ENOMEM / PFT_ENUMERIC. */
int pft_la_eigh_into(double *a, int n, double *w, double *z);

/* Householder reduction of the symmetric n×n row-major matrix a (only its lower triangle is read) to
 * tridiagonal form a = Q T Qᵀ, by dsytrd: T's diagonal into td[n], its off-diagonal into te[n] (n-1 used), Q
 * kept as reflectors in a and tau[n] (for pft_la_tridiag_qt_rows). The first third of pft_la_eigh_fast's
 * work, without eigenvectors. 0, or PFT_ENUMERIC. */
int pft_la_tridiag(double *a, int n, double *td, double *te, double *tau);
/* Each of the `rows` rows y_j (n doubles) of y ← Qᵀ y_j, Q from pft_la_tridiag (a, tau). 0, or PFT_ENOMEM
 * / PFT_ENUMERIC (y then unspecified). */
int pft_la_tridiag_qt_rows(const double *a, const double *tau, int n, double *y, int rows);
/* The way back: each row y_j ← Q y_j. 0, or PFT_ENOMEM / PFT_ENUMERIC (y then unspecified). */
int pft_la_tridiag_q_rows(const double *a, const double *tau, int n, double *y, int rows);
/* The eigenvalues of the tridiagonal T (td, te of pft_la_tridiag), ascending, into w[n] (dsterf, O(n²)). 0,
 * or PFT_ENOMEM / PFT_ENUMERIC. */
int pft_la_tridiag_eigvals(const double *td, const double *te, int n, double *w);
/* The smallest and the largest eigenvalue of the same tridiagonal matrix into *lo and *hi, by bisection
 * (LAPACK dstebz, O(n) per eigenvalue, to about machine precision of the largest): what a condition check
 * needs, without all n eigenvalues (dsterf's O(n²)). 0, or PFT_ENOMEM / PFT_ENUMERIC. */
int pft_la_tridiag_extremes(const double *td, const double *te, int n, double *lo, double *hi);
/* A kept tridiagonal reduction a = Q T Qᵀ of a symmetric n×n matrix (pft_la_tridiag's outputs, owned): the
 * reflectors a (n×n; dsytrd leaves the other triangle of the input as it was), tau, T's diagonal td and
 * off-diagonal te (n each). One O(n³) reduction serves two consumers of the same matrix (the shrinkage
 * evidence and the release of its leading eigenpairs). diag (n, or NULL): the matrix's diagonal before the
 * reduction, kept when a is the matrix's own storage reduced in place: with the untouched strict upper
 * triangle it gives the matrix back (pft_la_trid_unreduce), so that no copy of it is needed. */
typedef struct pft_la_trid_t {
    int n;
    double *a, *tau, *td, *te, *diag;
} pft_la_trid_t;
/* Frees t's arrays and zeroes it; safe twice and on a zeroed t. */
void pft_la_trid_free(pft_la_trid_t *t);
/* The matrix t was reduced from, back in t->a (both triangles, bit for bit: its strict upper triangle, which
 * the reduction did not write, mirrored onto the lower one, and the diagonal from t->diag), handed to the
 * caller in *a_out (freed with pft_free); t is then freed (pft_la_trid_free). PFT_EINVAL (*a_out NULL, t
 * unaltered) when t has no a or no diag. */
int pft_la_trid_unreduce(pft_la_trid_t *t, double **a_out);
/* The k largest eigenpairs (1 ≤ k ≤ n) of the matrix t was reduced from: T's by MRRR (dstemr, O(nk)), then
 * back-transformed by Q (dormtr, O(n²k)); eigenvalues descending into w[k], row i of z (k×n) the unit
 * eigenvector of w[i]. What pft_la_eigh_top computes without its own O(n³) reduction, equal to it up to
 * rounding (vectors up to sign, and within repeated eigenvalues). 0, or PFT_EINVAL (k outside 1..n, t not
 * kept), PFT_ENOMEM, PFT_ENUMERIC. */
int pft_la_trid_top(const pft_la_trid_t *t, int k, double *w, double *z);

/* LDLᵀ of the symmetric tridiagonal (diagonal pd[n], off-diagonal pe[n-1]) in place, by dpttrf: 0, or 1 if it
 * is not positive definite. */
int pft_la_pt_factor(double *pd, double *pe, int n);
/* Each of the `rows` rows y_j (n doubles) of y ← T⁻¹ y_j, T factored by pft_la_pt_factor (dpttrs). */
void pft_la_pt_solve_rows(const double *pd, const double *pe, int n, double *y, int rows);

/* The k largest eigenpairs (1 ≤ k ≤ n) of the symmetric n×n row-major matrix a (only its lower triangle is
 * read; a is clobbered), by dsyevr with RANGE = 'I': the eigenvalues descending into w[k] and row i of z
 * (k×n) the unit eigenvector of w[i]. The tridiagonal reduction is the same O(n³) as pft_la_eigh_fast's, but
 * only k eigenvectors are computed and back-transformed (O(n²k) instead of O(n³)). The vectors equal
 * pft_la_eigh_fast's up to sign (and within repeated eigenvalues) and rounding. 0, or PFT_EINVAL (k outside
 * 1..n), PFT_ENOMEM, PFT_ENUMERIC. */
int pft_la_eigh_top(double *a, int n, int k, double *w, double *z);

/* inv (n×n, row-major, both triangles) = (L Lᵀ)⁻¹ from the lower Cholesky factor l (upper part ignored).
 * 0, or PFT_ENUMERIC (a zero diagonal). For small n: multiplying by an explicit inverse with DGEMM beats
 * OpenBLAS's triangular solves on tall right-hand sides by an order of magnitude. */
int pft_la_spd_inverse(const double *l, double *inv, int n);

/* In place inverse of the lower triangular n×n row-major matrix l (upper part untouched). 0, or
 * PFT_ENUMERIC (a zero diagonal). */
int pft_la_tri_inverse_lower(double *l, int n);

/* In float, in place: L⁻¹ of the lower Cholesky factor L of the symmetric positive definite d×d row-major
 * matrix a (lower triangle read; the upper triangle of the result is zero). For preconditioners, where float
 * suffices and d² doubles would be memory for nothing. 0, or PFT_ENUMERIC (a is then clobbered). */
int pft_la_chol_tri_inverse_lower_f(float *a, int d);

/* SIMD kernels on padded float matrices. A padded matrix has a row stride dp that is a multiple of
 * PFT_LA_PAD floats, is 64-byte aligned (pft_alloc_aligned) and holds zeros in its padding; the distance
 * kernel reads rows in blocks of PFT_LA_ROWS, so the row count it is given must be a multiple of that
 * (pad with zero rows). Both are compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at load
 * time; results are bit-identical on one machine, not across instruction sets. */
#define PFT_LA_PAD 64
#define PFT_LA_ROWS 4

/* dist[i·k + c] = Σ_j (x_ij s_cj - ms_cj)² for rows [0, rows) of x (rows × dp) and the k rows of s and ms
 * (k × dp each); with s = NULL, Σ_j (x_ij - ms_cj)². With s = 1/σ and ms = μ/σ this is the Mahalanobis
 * distance of a diagonal Gaussian, computed without expanding the square: the rounding error of
 * x·s - ms is at most u·|μ/σ| and enters squared. Sums are float. */
void pft_la_sqdist(const float *x, size_t rows, size_t dp, const float *s, const float *ms, size_t k,
                   float *dist);

/* For each c < k: s1[c] += Σ_i r_ic (x_i - a_c) and s2[c] += Σ_i r_ic (x_i - a_c)² (elementwise) over rows
 * [0, rows) of x (rows × dp), weights r (rows × k; rows with r_ic = 0 are skipped) and shifts a (k × dp);
 * s1, s2 are k × dp, aligned, and accumulate (zero them first). */
void pft_la_wstats(const float *x, size_t rows, size_t dp, const float *r, size_t k, const float *a,
                   float *s1, float *s2);

/* y[j] += a · x[j] (float x, double y and sums), vectorised. */
void pft_la_axpy_f(size_t n, double a, const float *x, double *y);

/* out[j] = 1 / sqrt(v[j]) for v[0..n) > 0 (vectorised; correctly rounded square root and division). */
void pft_la_inv_sqrt(const double *v, size_t n, double *out);

/* dist[i·k + c] = Σ_j (x_ij - μ_cj)² p_cj in double for rows [0, rows) of x (rows × d, no padding or
 * alignment needed) and the k rows of mu and p (k × d each): the Mahalanobis distance of a diagonal Gaussian
 * (p = 1/σ²) without expanding the square, so nothing cancels. */
void pft_la_wsqdist_d(const double *x, size_t rows, size_t d, const double *mu, const double *p, size_t k,
                      double *dist);

/* s1 += Σ_l r_l (x_{idx_l} - b) and s2 += Σ_l r_l (x_{idx_l} - b)² (elementwise over the first d columns,
 * l < m, in order) over rows of x (row stride ld ≥ d, no padding or alignment needed) with weights r and
 * shift b (d doubles); s1, s2 (d doubles) accumulate. Rows are float; differences, products and sums are
 * double. The caller lists only the rows with r ≠ 0: the sparse responsibilities of a sharp mixture. */
void pft_la_wstats_rows(const float *x, size_t ld, size_t d, const unsigned *idx, const double *r, size_t m,
                        const double *b, double *s1, double *s2);

#endif
