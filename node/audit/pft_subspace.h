/* pft_subspace: the subspace a release confines its rows to, and each row's distance from it (the subspace
 * membership attack of docs/SECURITY.md §9).
 *
 * A class mean μ_c and a within-class scatter W of N rows (tied: one W; full: the pooled Σ_c M_c) put every
 * row x of the class in S = range(W) + span(μ_c): x = μ_c + (x − μ_c) and x − μ_c ∈ range(W). When N − C < d
 * (fewer rows than dimensions) W has rank N − C and S is a proper subspace the recipient knows, so a row's
 * relative residual ‖x − P_S x‖ / ‖x‖ decides membership. The released matrix has been rounded (fp32 or fp16
 * on the wire), so its rank is read from the spectrum: the eigenvalues λ_1 ≥ … ≥ λ_d, each relative to λ_1
 * and floored at PFT_SUBSPACE_FLOOR, are cut at their largest ratio λ_k / λ_{k+1}; a subspace exists when
 * that ratio is at least PFT_SUBSPACE_GAP (a rounding floor under real directions). A full-rank matrix, or a
 * rank q + diagonal one (`stats_rank`, a GMM's reg_covar), shows no such gap: no subspace. */
#ifndef PFT_SUBSPACE_H
#define PFT_SUBSPACE_H

#include "pft_verdict.h"

#define PFT_SUBSPACE_GAP 1e4       /* smallest eigenvalue ratio at the cut that counts as a rank gap */
#define PFT_SUBSPACE_FLOOR 1e-18   /* eigenvalues below this × λ_1 count as exactly 0 */
#define PFT_SUBSPACE_MEAN_TOL 1e-6 /* a vector within this relative distance of the span adds nothing */
#define PFT_SUBSPACE_EXACT 1e-4    /* every member residual below this (and dim < d): exact containment */

typedef struct pft_subspace_t pft_subspace_t;

/* The span of w (d×d symmetric, row-major, both triangles; NULL: the zero matrix) cut at its largest
 * spectral gap, plus the n_vec vectors vecs (n_vec×d, row-major; e.g. the class means). NULL on failure
 * (pft_errmsg() says why: PFT_EINVAL for bad arguments or non-finite values, PFT_ENOMEM, PFT_ENUMERIC when
 * the eigendecomposition fails). Without a gap the result has dim = d (no subspace). */
pft_subspace_t *pft_subspace_new(const double *w, int d, const double *vecs, int n_vec);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_subspace_destroy(pft_subspace_t **self_p);

int pft_subspace_dim_ambient(const pft_subspace_t *self);
/* Eigen-directions of w kept (0 without a gap, unless w is 0). */
int pft_subspace_rank(const pft_subspace_t *self);
/* Dimension of S: rank + the vectors outside range(w); d when there is no gap (no subspace). */
int pft_subspace_dim(const pft_subspace_t *self);
/* 1 when S is a proper subspace (a gap, or w = 0, and dim < d). */
int pft_subspace_proper(const pft_subspace_t *self);
/* λ_rank / λ_rank+1 at the largest gap (relative eigenvalues, floored); INFINITY when w = 0. */
double pft_subspace_gap(const pft_subspace_t *self);
/* λ_rank+1 / λ_1 below the cut (0 when w = 0 or rank = d). */
double pft_subspace_tail(const pft_subspace_t *self);
/* Borrowed: the orthonormal basis of S, dim rows of d (row-major); NULL when dim = d. */
const double *pft_subspace_basis(const pft_subspace_t *self);

/* Relative residuals ‖x_i − P_S x_i‖ / ‖x_i‖ of the n rows x (n×d float) into out[n]; 0 for a zero row and
 * for every row when S is the whole space. 0, or PFT_ENOMEM. */
int pft_subspace_residuals(const pft_subspace_t *self, const float *x, int n, double *out);

#endif
