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

/* The rank-q factor U (d×q, row-major: U[r·q + j]) and diagonal psi (d) of the PSD d×d row-major matrix C
 * (both triangles read; it is copied, not modified): the q leading eigenpairs by pft_la_eigh_fast,
 * eigenvalues clamped at 0, each column's sign fixed so that its entry of largest magnitude (the first on
 * ties) is positive, so the result depends only on the eigenspaces. 0 ≤ q ≤ d (q = 0: psi = diag C).
 * 0, or PFT_EINVAL (d < 1, q outside 0..d, a non-finite entry), PFT_ENOMEM, PFT_ENUMERIC (LAPACK). */
int pft_gstat_lowrank_shared(const double *C, int d, int q, double *U, double *psi);

/* C (d×d, row-major, both triangles) = U Uᵀ + diag(psi), U d×q row-major (q ≥ 0; U unread when q = 0). */
void pft_gstat_lowrank_expand(const double *U, const double *psi, int d, int q, double *C);

#endif
