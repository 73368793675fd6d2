/* pft_lrop: a symmetric d×d operator held as a diagonal plus weighted low-rank terms, never formed densely.
 *
 *     A = diag(a) + Σ_k w_k L_k L_kᵀ        (L_k d×r_k, w_k any sign)
 *
 * is stored as the diagonal a (d) and the factors' columns stacked as the rows of F (R×d, R = Σ r_k) with one
 * weight per row, so A = diag(a) + Fᵀ diag(w) F: d + R·(d + 1) doubles instead of d², and A X for a d×b
 * block X costs two GEMMs of O(d·R·b) instead of O(d²·b). This is the shape of what a relay of exact tied
 * statistics holds (DESIGN.md §8): a received release N·(U Uᵀ + diag ψ) (q columns plus a diagonal), its own
 * rows' scatter Σ (x_i − μ_c)(x_i − μ_c)ᵀ (one column per row) and the merge's between-part terms
 * (n_A n_B / n) δ_c δ_cᵀ (one column per class); pft_lreig finds its leading eigenpairs. */
#ifndef PFT_LROP_H
#define PFT_LROP_H

#include <stdint.h>

typedef struct pft_lrop_t pft_lrop_t;

/* The zero operator of dimension d (1..65536). NULL on failure (pft_errmsg() says why). */
pft_lrop_t *pft_lrop_new(int d);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_lrop_destroy(pft_lrop_t **self_p);

int pft_lrop_dim(const pft_lrop_t *self);
/* R: the number of rank-one terms held. */
int pft_lrop_rank(const pft_lrop_t *self);
/* Borrowed: the diagonal a (d). */
const double *pft_lrop_diag(const pft_lrop_t *self);

/* a += s · v (v: d entries). 0, or PFT_EINVAL (a non-finite value; self unaltered). */
int pft_lrop_add_diag(pft_lrop_t *self, const double *v, double s);
/* A += w · L Lᵀ, L d×r row-major with row stride ld ≥ r (copied). 0, or PFT_EINVAL (r < 0, a non-finite
 * value or weight; self unaltered), PFT_ENOMEM. */
int pft_lrop_add_factor(pft_lrop_t *self, const double *L, int r, int ld, double w);
/* A += w · Σ_i (x_i − c)(x_i − c)ᵀ over n float rows x (n×d row-major), centred at c (d; NULL: 0): one
 * rank-one term per row. Errors as pft_lrop_add_factor. */
int pft_lrop_add_rows(pft_lrop_t *self, const float *x, int n, const double *c, double w);
/* A *= s (the diagonal and every weight). */
void pft_lrop_scale(pft_lrop_t *self, double s);

/* Y = A X for X, Y d×b row-major with row strides ldx, ldy ≥ b (X and Y must not overlap). t: scratch of
 * R·b doubles (NULL when R = 0). */
void pft_lrop_apply(const pft_lrop_t *self, const double *X, int b, int ldx, double *Y, int ldy, double *t);
/* out (d) = diag(A), exactly: a_r + Σ_j w_j F_jr². */
void pft_lrop_diagonal(const pft_lrop_t *self, double *out);
/* out (d×d row-major, both triangles) = A. For tests and the dense fallback. */
void pft_lrop_dense(const pft_lrop_t *self, double *out);

#endif
