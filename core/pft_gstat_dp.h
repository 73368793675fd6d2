/* pft_gstat_dp: differentially private release of a node's own exact statistics (pft_gstat), by the Gaussian
 * mechanism on per-class sums and second moments (docs/SECURITY.md, "DP for exact statistics").
 *
 * Mechanism. A node holds n labelled rows x_i (class y_i), each clipped to ‖x‖₂ ≤ 1 (rows of larger norm are
 * scaled to norm 1 while they are accumulated, and counted; after l2 preprocessing no row is). It releases
 * its OWN rows' statistics once, as
 *     s̃_c  = s_c + N(0, σ² I_d),              s_c  = Σ_{y_i = c} x_i                 (every class c),
 *     FULL: S̃2_c = S2_c + Z_c,                S2_c = Σ_{y_i = c} x_i x_iᵀ            (every class c),
 *     TIED: S̃2   = S2 + Z,                    S2   = Σ_i x_i x_iᵀ                     (one matrix),
 * where each Z is symmetric with Z_jk = Z_kj ~ N(0, σ²) i.i.d. for j ≤ k (one draw per unordered pair, as
 * pft_dp). The counts n_c are released in the clear: bundles carry them (provenance and parts), so they are
 * public by assumption, as in DP-FedPFT.
 *
 * Neighbouring datasets: one row replaced by another of the same class (pft_dp.h's relation; counts public).
 * Replacing x by x' (both of norm ≤ 1, a = ‖x‖², b = ‖x'‖², t = xᵀx') in class c changes only s_c and the one
 * second moment that holds class c (S2_c for FULL, S2 for TIED):
 *     ‖Δs_c‖²      = ‖x - x'‖²          = a + b - 2t                    ≤ 4,
 *     ‖ΔS2‖_F²     = ‖xxᵀ - x'x'ᵀ‖_F²   = a² + b² - 2t²                 ≤ 2,
 * but the two cannot be extreme together (‖Δs‖² = 4 needs x' = -x, where ΔS2 = 0). Jointly,
 *     ‖Δs_c‖² + ‖ΔS2‖_F² = a + b + a² + b² - 2t - 2t²,
 * which grows with a and b (and |t| ≤ √(ab) allows more t as they grow), so its maximum is at a = b = 1,
 * over t ∈ [-1, 1]: 4 - 2t - 2t² is largest at t = -1/2, giving 4 + 1 - 1/2 = 9/2. The released vector is
 * (s_c, the upper triangle of S2 with the diagonal); its change is at most the above, since an off-diagonal
 * pair counts once in it and twice in ‖·‖_F², and the bound is attained for d ≥ 2 (x, x' spanning two
 * coordinate axes at 120° rotated so that ΔS2 is diagonal). Hence
 *     Δ₂ = sqrt(9/2) = 3/√2 ≈ 2.121   (the looser sum of the separate bounds would be sqrt(4 + 2) = √6
 * ≈ 2.449), the same for FULL and TIED and independent of n (sums, not means). TIED releases one S2 for all
 * classes: d(d+1)/2 noisy entries in total instead of C·d(d+1)/2, the same σ each.
 *
 * Calibration: the analytic one (pft_dp_sigma_exact): the smallest σ whose exact δ of the Gaussian mechanism at
 * Δ₂ (Balle & Wang 2018, pft_dp_gauss_delta) is ≤ δ; below the formula Δ₂ sqrt(2 ln(4/δ))/ε that pft_dp keeps
 * for the paper's per-client mechanism (×0.734 at ε = 1, δ = 1e-5). σ depends on (ε, δ) only, so a receiver
 * can recompute a contributor's σ from the (ε, δ) in its provenance entry (pft_gstat_dp_sigma).
 * δ = PFT_DP_DELTA_AUTO means 1/n with n the node's rows (all classes).
 *
 * Post-processing (no privacy cost): μ_c = s̃_c / n_c; FULL: M_c = S̃2_c - n_c μ_c μ_cᵀ; TIED:
 * W = S̃2 - Σ_c n_c μ_c μ_cᵀ; each scatter projected onto the PSD cone (eigenvalues clamped at 0, the
 * Frobenius-nearest PSD matrix), so the wire's PSD check passes. Merging the released parts downstream is
 * post-processing too: the merged sums are Σ_k s̃_k, whose noise has variance Σ_k σ_k² per entry.
 *
 * Composition: every row is in one class, and a replacement touches one class's sum and one second moment, so
 * the whole release (all classes; for TIED the shared S2 included in Δ₂ above) is (ε, δ)-DP per record. A
 * node that releases again composes sequentially (pft_dp_budget_t). Randomness: the caller's pft_rng_t, which
 * must be seeded from the OS in a deployment (pft_dp.h). Core does no I/O. */
#ifndef PFT_GSTAT_DP_H
#define PFT_GSTAT_DP_H

#include <stddef.h>
#include <stdint.h>

#include "pft_gstat.h"
#include "pft_rng.h"

/* The joint L2 sensitivity of (s_c, S2) under replacement of one row: 3/√2. */
#define PFT_GSTAT_DP_SENS 2.1213203435596424

/* Noise standard deviation per released element at (ε, δ) (δ explicit, in (0, 1)); 0 for ε = ∞; NaN for
 * ε ≤ 0 or NaN, δ outside (0, 1). */
double pft_gstat_dp_sigma(double eps, double delta);

/* The mechanism's output before post-processing. */
typedef struct {
    pft_gstat_kind_t kind;
    int d;
    int n_classes;    /* classes present, labels ascending */
    int *labels;      /* n_classes */
    uint64_t *counts; /* n_classes, public */
    double *sums;     /* n_classes × d: s̃_c */
    double *s2;       /* FULL: n_classes × d × d (S̃2_c); TIED: d × d (S̃2); symmetric, both triangles */
    int clipped;      /* rows whose squared norm exceeded 1 + PFT_DP_NORM_TOL (scaled to norm 1) */
} pft_gstat_dp_raw_t;

/* The noisy sums and second moment(s) of n rows x (n×d float32, row-major) with labels y (≥ 0), noise σ from
 * rng (σ = 0: none, rng may be NULL). Draws in a fixed order: per class (ascending) its sum, then for FULL
 * its S2's upper triangle row by row; TIED: all sums, then S2. *out is new (pft_gstat_dp_raw_destroy). 0, or
 * PFT_EINVAL (n < 1, d < 1, NULL, a negative label, a non-finite value, σ < 0 or non-finite, no rng for σ >
 * 0), PFT_ENOMEM; *out is NULL on error. */
int pft_gstat_dp_raw(pft_gstat_kind_t kind, const float *x, const int32_t *y, size_t n, int d, double sigma,
                     pft_rng_t *rng, pft_gstat_dp_raw_t **out);
/* Frees *raw_p and sets it to NULL; safe on NULL and twice. */
void pft_gstat_dp_raw_destroy(pft_gstat_dp_raw_t **raw_p);

/* Post-processing of raw into statistics (*out, new): means s̃_c / n_c, scatters projected onto the PSD cone.
 * n_floored (may be NULL): eigenvalues that were negative and clamped. 0, or PFT_ENOMEM, PFT_ENUMERIC (the
 * eigensolver failed), PFT_EINVAL (non-finite input); *out is NULL on error. */
int pft_gstat_dp_finish(const pft_gstat_dp_raw_t *raw, pft_gstat_t **out, int *n_floored);

/* What a release did. */
typedef struct {
    double eps, delta;  /* the guarantee for the node's rows; δ resolved from PFT_DP_DELTA_AUTO */
    double sens;        /* Δ₂ = PFT_GSTAT_DP_SENS */
    double sigma;       /* noise standard deviation per element (0 for ε = ∞) */
    size_t n;           /* rows released */
    int clipped;        /* rows scaled down to norm 1 */
    int n_floored;      /* eigenvalues clamped at 0 by the projection */
    size_t noisy_elems; /* noisy scalars released: C·d + (FULL C, TIED 1)·d(d+1)/2 */
} pft_gstat_dp_info_t;

/* The (ε, δ)-DP release of the statistics of n rows x with labels y, of kind FULL or TIED: raw (noise
 * σ = pft_gstat_dp_sigma(ε, δ)) then finish. δ may be PFT_DP_DELTA_AUTO (1/n). ε = INFINITY gives the exact
 * statistics, PSD-projected (not private; rng may be NULL). *out is new; info, if not NULL, is filled.
 * 0, or PFT_EINVAL (bad arguments: n < 1, d < 1, NULL, an unknown kind, ε ≤ 0 or NaN, δ outside (0, 1), no
 * rng for finite ε, a negative label, a non-finite value), PFT_ENOMEM, PFT_ENUMERIC; *out is NULL on error.
 */
int pft_gstat_dp_release(pft_gstat_kind_t kind, const float *x, const int32_t *y, size_t n, int d, double eps,
                         double delta, pft_rng_t *rng, pft_gstat_t **out, pft_gstat_dp_info_t *info);

/* ---- the sums-only release (TIED; what pftnode sends under DP, DESIGN.md §8) ----
 * Only the per-class sums are released, s̃_c = s_c + N(0, σ² I_d), with the counts in the clear. Replacing
 * one row changes one sum by ‖x - x'‖ ≤ 2, so Δ₂ = 2 (PFT_GSTAT_DP_SENS_SUMS) and the whole budget goes to
 * the sums: σ = 2 · C(ε, δ), 2√2/3 ≈ 0.94 of the joint release's σ. Why no second moment: at d = 1280 its
 * noise (σ ≈ 9 per entry, Frobenius norm ≈ σ·d) is about 10⁴ times the within-class scatter's (trace ≈ n/3
 * for L2-normalised rows), so any share of the budget spent on it is lost to the sums (SECURITY.md §6). The
 * result is TIED statistics with means s̃_c / n_c and a ZERO within-class scatter that stands for nothing: a
 * consumer must treat it as "means only" (pftnode keeps such parts apart and uses their means as noisy
 * components, pft_ghead.h). */
#define PFT_GSTAT_DP_SENS_SUMS 2.0

/* σ of the sums-only release at (ε, δ): pft_gstat_dp_sigma rescaled to Δ₂ = 2; same domain. */
double pft_gstat_dp_sigma_sums(double eps, double delta);

/* The sums-only release of n rows (clipped as above), into *out (TIED, zero scatter); info as for
 * pft_gstat_dp_release (sens = 2, n_floored 0, noisy_elems C·d). Errors as pft_gstat_dp_release. */
int pft_gstat_dp_release_sums(const float *x, const int32_t *y, size_t n, int d, double eps, double delta,
                              pft_rng_t *rng, pft_gstat_t **out, pft_gstat_dp_info_t *info);

#endif
