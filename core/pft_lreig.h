/* pft_lreig: the q leading eigenpairs of a diagonal-plus-low-rank operator (pft_lrop), without forming d×d.
 *
 * A = diag(a) + Fᵀ diag(w) F is not low rank when a is not a multiple of the identity, so there is no small
 * projected problem that is exact; the method is a block Krylov iteration with thick restarts (block Lanczos
 * with full reorthogonalisation and Rayleigh–Ritz, restarted on its b leading Ritz vectors):
 *   1. Q = an orthonormal random d×b block (b = q + extra, seeded), W = A Q;
 *   2. expand Q by `steps` blocks, each the previous block's image W orthonormalised against Q: block
 *      classical Gram–Schmidt twice, each pass followed by a Cholesky QR of the block (Householder QR where
 *      that is ill-conditioned); a direction already in span Q is replaced by a random one, which is what
 *      finds eigenvalues of multiplicity up to b and the null space when q ≥ rank A;
 *   3. Rayleigh–Ritz: H = Qᵀ W (m×m), its b leading eigenpairs (θ_j, s_j), Ritz vectors v_j = Q s_j with
 *      A v_j = W s_j already known (no extra product);
 *   4. converged when every one of the q leading residuals satisfies ‖A v_j − θ_j v_j‖ ≤ tol · ‖A‖, ‖A‖
 *      taken as max |θ| of the Ritz values found (a lower bound of ‖A‖₂ that equals it for PSD A at
 *      convergence); else restart from Q = [v_1 … v_b], W = A Q.
 * Guarantees at convergence (A symmetric): with R = AV − VΘ over the q pairs, there are q eigenvalues of A,
 * each within ‖R‖₂ ≤ √q · tol · ‖A‖ of one θ_j (Kahan); that they are the q leading ones rests on the random
 * start, which has a component along every eigenvector with probability 1 (the tests compare with LAPACK).
 * A vector's angle to its eigenvector is ≤ residual / gap, so vectors are defined (and compared) only where
 * eigenvalues are separated; within a repeated or clustered eigenvalue the subspace is what is defined
 * (compare projectors). Cost per cycle: O(d·R·m) for the products (R = rank of the terms,
 * m = b·(steps + 1)) and O(d·m²) for orthogonalisation; memory 2·d·m + m² doubles beside the operator's
 * R·d (at d = 1280, q = 64: m = 360, 8.4 MB, where the formed matrix alone is 13 MB).
 * When the iteration does not converge in its budget, or the operator is so small that the Krylov space
 * would be most of R^d, the dense path (A formed, LAPACK dsyevr for the top q) gives the answer and
 * info.dense says so. Each eigenvector's sign is fixed: its entry of largest magnitude (the first on ties)
 * is positive. */
#ifndef PFT_LREIG_H
#define PFT_LREIG_H

#include <stdint.h>

#include "pft_lrop.h"

typedef struct {
    double tol;     /* residual bound relative to ‖A‖ (default 1e-10) */
    int extra;      /* block size b = q + extra (default: max(8, q/8)) */
    int steps;      /* Krylov blocks per cycle after the first (default 4) */
    int max_cycles; /* restarts before the dense fallback (default 40) */
    uint64_t seed;  /* of the random start block (default 0) */
} pft_lreig_opts_t;

/* What the solver did. */
typedef struct {
    int cycles;      /* Rayleigh–Ritz cycles run (0 on the dense path) */
    long matvecs;    /* columns A was applied to */
    double residual; /* max over the q pairs of ‖A v − θ v‖ / ‖A‖ at the last cycle (0 if none ran) */
    double norm;     /* the ‖A‖ used */
    int dense;       /* 1: the answer is LAPACK's on the formed matrix (small d, or no convergence) */
} pft_lreig_info_t;

void pft_lreig_opts_default(pft_lreig_opts_t *o);

/* The q leading eigenpairs (1 ≤ q ≤ d) of op: eigenvalues descending into lam[q], row j of V (q×d) the unit
 * eigenvector of lam[j], sign fixed as above. opts NULL: defaults. info may be NULL. 0, or PFT_EINVAL (q
 * outside 1..d, bad options), PFT_ENOMEM, PFT_ENUMERIC (LAPACK failed on the dense fallback). */
int pft_lreig_top(const pft_lrop_t *op, int q, const pft_lreig_opts_t *opts, double *lam, double *V,
                  pft_lreig_info_t *info);

/* The same by the dense path only (A formed, dsyevr for the top q; signs fixed likewise): the reference the
 * tests and the benchmark compare with. Errors as pft_lreig_top. */
int pft_lreig_top_dense(const pft_lrop_t *op, int q, double *lam, double *V);

#endif
