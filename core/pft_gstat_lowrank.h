/* pft_gstat_lowrank: a low-rank-plus-diagonal form of a shared (tied) covariance, for the wire.
 *
 * For a symmetric positive semi-definite d×d matrix C with eigenpairs λ_1 ≥ … ≥ λ_d (λ clamped at 0) and unit
 * eigenvectors v_i, the rank-q factor is U = [v_1 √λ_1, …, v_q √λ_q] (d×q) and the diagonal
 * ψ = diag(C − U Uᵀ) = Σ_{i>q} λ_i v_i∘v_i (≥ 0; rounding clamped at 0). Then
 *     C ≈ U Uᵀ + diag(ψ),
 * which keeps C's diagonal (the per-feature variances) exactly, is positive semi-definite by construction and
 * is exact when rank(C) ≤ q. It travels as d·q + d numbers instead of d(d+1)/2 (docs/WIRE.md §2.1). The
 * off-diagonal error is the off-diagonal part of Σ_{i>q} λ_i v_i v_iᵀ. */
#ifndef PFT_GSTAT_LOWRANK_H
#define PFT_GSTAT_LOWRANK_H

#include "pft_lreig.h"

/* The rank-q factor U (d×q, row-major: U[r·q + j]) and diagonal psi (d) of the PSD d×d row-major matrix C
 * (both triangles read; it is copied, not modified): the q leading eigenpairs by pft_la_eigh_fast,
 * eigenvalues clamped at 0, each column's sign fixed so that its entry of largest magnitude (the first on
 * ties) is positive, so the result depends only on the eigenspaces. 0 ≤ q ≤ d (q = 0: psi = diag C).
 * 0, or PFT_EINVAL (d < 1, q outside 0..d, a non-finite entry), PFT_ENOMEM, PFT_ENUMERIC (LAPACK). */
int pft_gstat_lowrank_shared(const double *C, int d, int q, double *U, double *psi);
/* The same, with C's own storage as the eigensolver's workspace (no d×d copy; C is clobbered), for a caller
 * that made C for the purpose. The same numbers bit for bit. */
int pft_gstat_lowrank_shared_inplace(double *C, int d, int q, double *U, double *psi);
/* The same release of C = W / n for a scatter W (d×d, row-major, not modified) and n > 0: C formed in one
 * d×d buffer of its own, then pft_gstat_lowrank_shared_inplace (the same numbers as a caller dividing W by n
 * and calling it). 0, or PFT_EINVAL (also n ≤ 0), PFT_ENOMEM, PFT_ENUMERIC. */
int pft_gstat_lowrank_shared_scatter(const double *W, int d, double n, int q, double *U, double *psi);
/* The same release of W / n computed in W's own storage (W is clobbered: divided by n, then the eigensolver's
 * workspace), for a caller done with W; the same numbers as pft_gstat_lowrank_shared_scatter bit for bit. */
int pft_gstat_lowrank_shared_scatter_inplace(double *W, int d, double n, int q, double *U, double *psi);
/* The same release of W / n computed in W's own storage and W given back as it was, bit for bit: the
 * eigensolver reads one triangle of W (divided by n in place) and clobbers it; the other triangle and a copy
 * of the diagonal (d numbers) restore it. For a caller that needs W after its release (no d×d copy). The same
 * numbers as pft_gstat_lowrank_shared_scatter bit for bit; errors as it (W, symmetric as pft_gstat keeps it,
 * as it was on every return). */
int pft_gstat_lowrank_shared_scatter_keep(double *W, int d, double n, int q, double *U, double *psi);

/* The same release of C = W / n from a tridiagonal reduction t of W (pft_la_trid_t, pft_linalg.h; e.g. the
 * one the shrinkage evidence made of the same W: pft_ghead_evidence_keep) and W's diagonal wdiag (d): the q
 * leading eigenpairs of W by pft_la_trid_top, eigenvalues divided by n, without a second O(d³) reduction.
 * Equals pft_gstat_lowrank_shared of C up to rounding (the eigenvectors where the q-th and (q+1)-th
 * eigenvalues are apart; U Uᵀ + diag psi in any case); signs fixed the same way. 1 ≤ q ≤ d, n > 0. 0, or
 * PFT_EINVAL, PFT_ENOMEM, PFT_ENUMERIC. */
struct pft_la_trid_t;
int pft_gstat_lowrank_shared_trid(const struct pft_la_trid_t *t, const double *wdiag, double n, int q,
                                  double *U, double *psi);

/* The same release of C = W / n for a scatter W held as a diagonal plus low-rank terms (pft_lrop: a relay's
 * received release n_r·(U_r U_rᵀ + diag ψ_r), its own centred rows, the merge's between-part terms), without
 * forming W: the q leading eigenpairs by pft_lreig_top (block Krylov to a residual of 1e-10·‖W‖, LAPACK on
 * the formed matrix when it does not converge: info->dense, which the caller should count and log), psi from
 * W's exact diagonal. Equals pft_gstat_lowrank_shared of the formed C to the solver's tolerance where the
 * q-th and (q+1)-th eigenvalues are apart (otherwise the leading subspace, hence U Uᵀ, is not defined by C
 * either); each column's sign is fixed the same way. 1 ≤ q ≤ d, n > 0; opts NULL: the solver's defaults; info
 * may be NULL. 0, or PFT_EINVAL, PFT_ENOMEM, PFT_ENUMERIC. */
int pft_gstat_lowrank_shared_op(const pft_lrop_t *W, double n, int q, const pft_lreig_opts_t *opts, double *U,
                                double *psi, pft_lreig_info_t *info);

/* The release of C = W / n for a scatter W = diag(dg) + L (d×d, both triangles; dg ≥ 0, d entries) whose
 * part L is positive semi-definite with its range inside the span of the r rows of S (r×d, row-major; any
 * rank): a relay's merged W, whose received release brings n_r·diag ψ_r (dg) and everything else (the
 * factor, own rows, class means) lies in a span of a few hundred vectors. U holds the q leading eigenpairs of
 * L / n (not of W / n: dg's diagonal travels in ψ exactly, as every diagonal does), found in the span (an
 * orthonormal basis by QR, the r×r problem B L Bᵀ: O(d²r) with no d×d reduction), each column's sign fixed
 * as pft_gstat_lowrank_shared fixes it, zero beyond the span's dimension; ψ = diag(W)/n − diag(U Uᵀ) ≥ +0,
 * W's diagonal kept exactly. 0; 1 (U, psi undefined) when the span does not hold L (tr L and tr B L Bᵀ differ
 * by more than 1e-9 of tr L: e.g. DP noise in W), or r is 0 or ≥ d: the caller then releases W as
 * pft_gstat_lowrank_shared_scatter does; PFT_EINVAL (q outside 1..d, n ≤ 0), PFT_ENOMEM, PFT_ENUMERIC. */
int pft_gstat_lowrank_shared_span(const double *W, const double *dg, int d, double n, const double *S, int r,
                                  int q, double *U, double *psi);

/* The same release where the terms of L are known: W = diag(dg) + Fᵀ diag(w) F (F: r×d row-major, weights
 * w ≥ 0; a relay's received factor with weight n_r, its own rows about their class means with weight 1, the
 * merge's between-part terms), so that the q leading eigenpairs of L / n come from the r×r Gram matrix of
 * diag(√w) F (O(d·r²), no d×d product at all). W is still read: a random probe (W z against dg∘z + Fᵀ w F z,
 * one O(d²) product) must agree to 1e-9, else 1 is returned and nothing is set (the terms are not W's: the
 * caller uses pft_gstat_lowrank_shared_span or reduces W). The same numbers as pft_gstat_lowrank_shared_span
 * up to rounding; errors as it (also PFT_EINVAL for a negative or non-finite weight). */
int pft_gstat_lowrank_shared_factor(const double *W, const double *dg, int d, double n, const double *F,
                                    const double *w, int r, int q, double *U, double *psi);

/* A relay's within-class scatter as an operator, without forming d×d (the pieces pft_gstat_merge adds):
 *  - pft_gstat_lowrank_op_add_rows: op += Σ_i (x_i − μ_{y_i})(x_i − μ_{y_i})ᵀ over n float rows x (n×d) with
 *    labels y (≥ 0), μ_c the mean of these rows of class c (one rank-one term per row);
 *  - pft_gstat_lowrank_op_merge: op += the between-part terms of merging statistics b into a, per label in
 *    both, (n_a n_b / (n_a + n_b)) δδᵀ with δ = μ_b − μ_a (one term per shared class).
 * A received release adds n·(U Uᵀ + diag ψ) by pft_lrop_add_factor(op, U, q, q, n) and
 * pft_lrop_add_diag(op, psi, n). With each part's scatter added once and the merge terms of each pairwise
 * merge in the order the statistics were merged, the operator equals the merged W of pft_gstat_merge.
 * 0, or PFT_EINVAL (another d, a negative label, a non-finite value), PFT_ENOMEM; on error op may hold
 * part of the terms. */
int pft_gstat_lowrank_op_add_rows(pft_lrop_t *op, const float *x, const int32_t *y, int n);
struct pft_gstat_t;
int pft_gstat_lowrank_op_merge(pft_lrop_t *op, const struct pft_gstat_t *a, const struct pft_gstat_t *b);

/* C (d×d, row-major, both triangles) = U Uᵀ + diag(psi), U d×q row-major (q ≥ 0; U unread when q = 0). */
void pft_gstat_lowrank_expand(const double *U, const double *psi, int d, int q, double *C);

#endif
