/* pft_dp: DP-FedPFT, differentially private release of one class's Gaussian (K = 1), and a budget ledger.
 *
 * Mechanism (paper §4.3, Theorem 4.1, Appendix B). A node holds n feature rows f_1..f_n of one class,
 * clipped to ‖f‖₂ ≤ 1 (pft_dp_clip; after l2 / sqrt-l2 preprocessing rows already have norm 1). It releases
 *     μ̂ = μ + N(0, σ² I_d),      Σ̃ = Σ + Z,   Z symmetric, Z_ij = Z_ji ~ N(0, σ²) i.i.d. for i ≤ j,
 * where μ = (1/n) Σ f_i and Σ = (1/n) Σ (f_i - μ)(f_i - μ)ᵀ (maximum likelihood, as pft_gmm_fit), and then
 * projects Σ̃ onto the positive semidefinite cone (eigenvalues clamped at 0, the Frobenius-nearest PSD
 * matrix) and adds `var_floor`·I so the result is positive definite and usable by pft_gmm_set_params:
 *     Σ̂ = V max(Λ, 0) Vᵀ + var_floor·I      (eigenvalues of Σ̂ ≥ var_floor).
 * This is the rule pft_gmm_fit applies with reg_covar (variances clamped at 0, then reg_covar added), so with
 * ε = ∞ (σ = 0) and var_floor = reg_covar the release equals the non-private K = 1 fit up to rounding.
 * diag releases μ̂ and the d noisy variances Σ_jj + N(0, σ²), each clamped at 0, plus var_floor; spher
 * releases μ̂ and one noisy variance tr(Σ)/d + N(0, σ²) (pft_gmm's spherical variance), clamped at 0, plus
 * var_floor. These are sub-vectors (or a contraction: |Δ tr Σ/d| ≤ ‖ΔΣ‖_F/√d) of the full release, so their
 * sensitivity is at most the full one and the same σ is (conservatively) valid. Clamping, projection and the
 * var_floor are post-processing and cost no privacy.
 *
 * Neighbouring datasets: one row replaced by another (n is public; the bundle carries n_c in the clear).
 * The guarantee covers the rows given to pft_dp_fit: for a node that refits on its own rows ∪ synthetic rows
 * sampled from inbound (already private) models, n is the union size and the node's own rows are protected;
 * all rows must be clipped (the covariance bound below uses ‖μ‖ ≤ 1).
 *
 * PFT_DP_THM41 (Theorem 4.1):  σ = (4 / (n ε)) · sqrt(5 ln(4/δ)).
 *   Reading of the constant. The L2 sensitivity of the released pair (μ, Σ) under replacement of one row
 *   f → f' with ‖f‖, ‖f'‖ ≤ 1 is
 *     ‖Δμ‖₂ = ‖f - f'‖/n ≤ 2/n,
 *     ‖ΔΣ‖_F ≤ ‖(f fᵀ - f' f'ᵀ)/n‖_F + ‖μμᵀ - μ'μ'ᵀ‖_F ≤ 2/n + ‖μ‖‖Δμ‖ + ‖Δμ‖‖μ'‖ ≤ 2/n + 4/n = 6/n,
 *     Δ₂ = sqrt((2/n)² + (6/n)²) = 2√10/n
 *   (symmetric noise releases the upper triangle once; its L2 change is ≤ ‖ΔΣ‖_F). With the Gaussian
 *   mechanism calibrated as σ = Δ₂ · sqrt(2 ln(4/δ)) / ε this is exactly the theorem's
 *   (2√10/n) · sqrt(2 ln(4/δ)) / ε = (4/(nε)) · sqrt(5 ln(4/δ)).
 *   (This split of the constant is our reconstruction; the paper's proof text was not at hand. Whatever
 *   calibration C(ε, δ) is used, σ = Δ₂ · C(ε, δ) is linear in Δ₂, so B.3's σ below is σ_THM41 · √8 / √40.)
 * PFT_DP_B3 (Remark B.3): release μ and the second moment M = Σ + μμᵀ = (1/n) Σ f_i f_iᵀ instead, then
 *   Σ̂ = PSD(M̂ - μ̂μ̂ᵀ) + var_floor·I (diag: M_jj = mean f_j², spher: mean ‖f‖²/d; same clamp, var_floor).
 *     ‖ΔM‖_F ≤ (‖f‖² + ‖f'‖²)/n ≤ 2/n,   Δ₂ = sqrt((2/n)² + (2/n)²) = 2√2/n  (the remark's sensitivity),
 *   and the same calibration gives
 *     σ = (2√2/n) · sqrt(2 ln(4/δ)) / ε = (4/(nε)) · sqrt(ln(4/δ)) = σ_THM41 / √5.
 *   (‖f fᵀ - f' f'ᵀ‖_F ≤ √2 would tighten Δ₂ to √6/n; not used, to stay with the paper.)
 * Validity check. The calibration sqrt(2 ln(4/δ))/ε is not a valid Gaussian-mechanism calibration for every
 * ε: by the exact characterisation of the Gaussian mechanism (Balle & Wang 2018, Theorem 8, see
 * pft_dp_gauss_delta) it achieves (ε, δ) for every ε ≤ 9 and δ in [1e-10, 0.5] (checked on a grid), but e.g.
 * at ε = 20, δ = 1e-3 the true δ is 37 times too large. pft_dp_sigma therefore returns σ = max(formula above,
 * smallest σ for which the exact δ at sensitivity Δ₂ is ≤ δ), which is the formula wherever the formula is
 * valid (all ε ≤ 9 above), and never overclaims.
 *
 * δ: PFT_DP_DELTA_AUTO means δ = 1/n (the default DP-FedPFT was first built with; the usual advice is δ ≪ 1/n).
 *
 * Composition. One class's Gaussian is (ε, δ)-DP for that class's rows; classes are disjoint, so releasing
 * a whole bundle (every class once) is (ε, δ)-DP per record (parallel composition). A node that releases
 * again (a restart, a second run on the same data) composes sequentially; pft_dp_budget_t keeps a ledger
 * with basic composition (ε and δ add up).
 *
 * Randomness: the noise comes from the caller's pft_rng_t. Anyone who knows its seed can subtract the noise,
 * so a real deployment must seed it from the OS (getrandom), not from a seed in a shared topology file.
 * Floating-point subtleties of sampled Gaussians (Mironov 2012) are not addressed. */
#ifndef PFT_DP_H
#define PFT_DP_H

#include <stddef.h>

#include "pft_gmm.h"
#include "pft_rng.h"

/* Mechanisms. Values are stable (configs, results). */
typedef enum {
    PFT_DP_THM41 = 0, /* noise on (μ, Σ), σ = 4/(nε)·sqrt(5 ln(4/δ)) */
    PFT_DP_B3 = 1,    /* noise on (μ, M = Σ + μμᵀ), σ = 4/(nε)·sqrt(ln(4/δ)) */
} pft_dp_mech_t;

/* δ = 1/n. */
#define PFT_DP_DELTA_AUTO (-1.0)
/* A sensible var_floor (= pft_gmm's default reg_covar). */
#define PFT_DP_FLOOR_DEFAULT 1e-6
/* Rows whose squared norm exceeds 1 by more than this are "not clipped" (pft_dp_fit refuses them);
 * smaller excesses are float rounding of unit rows. */
#define PFT_DP_NORM_TOL 1e-6

/* "thm41" / "b3"; NULL for an unknown value. */
const char *pft_dp_mech_name(pft_dp_mech_t mech);
/* Parses "thm41" / "b3"; returns 0 and sets *out, or PFT_EINVAL with a message listing the valid names. */
int pft_dp_mech_parse(const char *name, pft_dp_mech_t *out);

/* L2 sensitivity Δ₂ of the released vector for n rows: THM41 2√10/n, B3 2√2/n. NaN for n < 1 or an
 * unknown mechanism. */
double pft_dp_sensitivity(pft_dp_mech_t mech, int n);

/* Exact δ(ε) of the Gaussian mechanism with L2 sensitivity sens and noise σ (Balle & Wang 2018, Thm 8):
 *     δ = Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ),
 * clamped at 0 against rounding. 1 for σ = 0 (with sens > 0), NaN for invalid arguments. */
double pft_dp_gauss_delta(double sens, double sigma, double eps);

/* The smallest noise standard deviation σ for which the Gaussian mechanism with L2 sensitivity sens is
 * (ε, δ)-DP by the exact characterisation (pft_dp_gauss_delta; Balle & Wang 2018, "analytic calibration"),
 * to a relative 1e-13 above the exact value (never below it). ε = INFINITY gives 0. NaN for invalid
 * arguments (sens ≤ 0, ε ≤ 0 or NaN, δ outside (0, 1)). */
double pft_dp_sigma_exact(double sens, double eps, double delta);

/* Noise standard deviation per element for n rows at (ε, δ) (see the top of this file: the paper's formula,
 * raised where it would not achieve (ε, δ)). δ may be PFT_DP_DELTA_AUTO (1/n). ε = INFINITY gives 0 (no
 * noise). NaN for invalid arguments: n < 1, ε ≤ 0 or NaN, δ outside (0, 1), unknown mechanism. */
double pft_dp_sigma(pft_dp_mech_t mech, int n, double eps, double delta);

/* Clips the n×d row-major matrix x in place to ‖row‖₂ ≤ 1: a row with norm > 1 is divided by its norm
 * (norms in double); a row of unit norm whose float rounding lands just above 1 is shrunk by a few ulps, so
 * afterwards every row satisfies Σ x_j² ≤ 1 computed in double. Rows with norm ≤ 1 are untouched.
 * Returns the number of rows whose squared norm exceeded 1 + PFT_DP_NORM_TOL (the rows really clipped; the
 * rounding fixes are not counted), or PFT_EINVAL (n < 0, d < 1, x NULL with n > 0, a non-finite value: x
 * may then be partly clipped). */
int pft_dp_clip(float *x, int n, int d);

/* Number of doubles of the second-moment/covariance block for a family: full d·d, diag d, spher 1;
 * 0 for d < 1 or another family (PFT_COV_LOWRANK has no DP release: pft_dp_* return PFT_EINVAL). */
size_t pft_dp_mom_len(pft_cov_t cov, int d);

/* Exact (non-private) statistics of the n×d rows x, accumulated in double:
 * mean[d] = μ; mom = THM41: Σ, B3: M = (1/n) Σ f fᵀ, in the layout of pft_dp_mom_len
 * (full d×d row-major, symmetric; diag the diagonal; spher the trace / d).
 * Errors: PFT_EINVAL (n < 1, d < 1, NULL, unknown family/mechanism), PFT_ENOMEM. */
int pft_dp_moments(const float *x, int n, int d, pft_cov_t cov, pft_dp_mech_t mech, double *mean,
                   double *mom);

/* Adds the mechanism's noise in place: N(0, σ²) to each of mean[0..d) and to mom (full: one draw per
 * element of the upper triangle including the diagonal, mirrored, so the noise is symmetric; diag: one per
 * variance; spher: one). Draws are taken in a fixed order (mean, then mom row by row), so a seed reproduces
 * the release. σ = 0 leaves the inputs unchanged. PFT_EINVAL for σ < 0 / non-finite, d < 1, NULL. */
int pft_dp_add_noise(pft_cov_t cov, int d, double sigma, pft_rng_t *rng, double *mean, double *mom);

/* Turns a noisy mom (THM41: Σ̃; B3: M̂, combined with the noisy mean μ̂ into M̂ - μ̂μ̂ᵀ) into the released
 * covariance in place: full: eigendecomposition (LAPACKE dsyevd), eigenvalues clamped at 0, reconstructed,
 * var_floor added to the diagonal; diag/spher: each variance clamped at 0, plus var_floor. The full result is
 * exactly symmetric with eigenvalues ≥ var_floor (to rounding). n_floored (may be NULL):
 * eigenvalues/variances that were < 0 and clamped; min_eig (may be NULL): the smallest eigenvalue/variance
 * before clamping. Errors: PFT_EINVAL (var_floor ≤ 0 or non-finite, d < 1, NULL, non-finite input),
 * PFT_ENOMEM, PFT_ENUMERIC (the eigensolver failed); mom is unspecified on error. */
int pft_dp_project(pft_dp_mech_t mech, pft_cov_t cov, int d, double var_floor, const double *mean,
                   double *mom, int *n_floored, double *min_eig);

/* What a release did. */
typedef struct {
    pft_dp_mech_t mech; /* mechanism */
    int n, d;           /* rows and dimension */
    double eps, delta;  /* the guarantee: (ε, δ) for these rows; δ resolved from PFT_DP_DELTA_AUTO */
    double sens;        /* L2 sensitivity Δ₂ */
    double sigma;       /* noise standard deviation per element (0 for ε = ∞) */
    int sigma_raised;   /* 1 if the paper's formula was raised to the exact Gaussian calibration */
    int n_floored;      /* eigenvalues / variances that were negative and clamped to 0 */
    double min_eig;     /* smallest eigenvalue / variance of the noisy covariance before projection */
} pft_dp_info_t;

/* Differentially private K = 1 fit of the n×d rows x, which must be clipped (pft_dp_clip): a row with
 * squared norm > 1 + PFT_DP_NORM_TOL is refused. Moments, noise (σ = pft_dp_sigma), projection with var_floor
 * as above; *out is a new one-component model (weight 1) of family cov (caller destroys), info if not NULL is
 * filled. ε = INFINITY gives the exact statistics (non-private; do not call it private).
 * Errors: PFT_EINVAL (n < 1, d < 1, NULL, ε ≤ 0, δ outside (0, 1) unless PFT_DP_DELTA_AUTO, var_floor ≤ 0,
 * unknown family/mechanism, a row not clipped or not finite), PFT_ENOMEM, PFT_ENUMERIC. *out is NULL on
 * error. Consumes rng draws (none for ε = ∞). */
int pft_dp_fit(const float *x, int n, int d, pft_cov_t cov, double eps, double delta, pft_dp_mech_t mech,
               double var_floor, pft_rng_t *rng, pft_gmm_t **out, pft_dp_info_t *info);

/* A node's privacy ledger under basic sequential composition. eps_total = INFINITY means "unlimited". */
typedef struct {
    double eps_total, delta_total; /* the budget */
    double eps_spent, delta_spent; /* charged so far */
    int releases;                  /* successful charges */
} pft_dp_budget_t;

/* Sets the budget with nothing spent: ε_total > 0 (INFINITY: unlimited), δ_total in [0, 1].
 * PFT_EINVAL (b unchanged) otherwise. */
int pft_dp_budget_init(pft_dp_budget_t *b, double eps_total, double delta_total);

/* Charges one (ε, δ) release: 0 and the spend is recorded, or PFT_EBUDGET with a message naming what would
 * be exceeded (spend unchanged) when eps_spent + ε > eps_total or delta_spent + δ > delta_total (with a
 * relative slack of 1e-9 for summation rounding). ε = INFINITY exceeds every finite budget.
 * PFT_EINVAL for ε ≤ 0 or NaN, δ outside [0, 1). */
int pft_dp_budget_charge(pft_dp_budget_t *b, double eps, double delta);

/* ε / δ still available (INFINITY for unlimited; never negative). */
double pft_dp_budget_eps_left(const pft_dp_budget_t *b);
double pft_dp_budget_delta_left(const pft_dp_budget_t *b);

#endif
