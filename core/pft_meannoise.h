/* pft_meannoise: data-independent Gaussian noise on released class sums, so that a class mean of
 * non-negative rows has no exact zero and no exact upper bound (docs/SECURITY.md §9, "Small classes").
 *
 * Why. Features of a ReLU backbone are ≥ 0. An exact class sum s of n rows bounds every row of the class,
 * x_j ≤ s_j for every coordinate j, and is 0 exactly where all its rows are 0: a recipient that tests a
 * candidate row against s decides membership of small classes almost surely (a fresh row rarely fits under
 * the sum of a handful of rows). The defence releases s̃ = (s + e)·‖s‖/‖s + e‖, e ~ N(0, σ² I_d), with σ a
 * constant of the run (not derived from the rows, so it reveals nothing of them) and e from the caller's
 * seed: a coordinate where every row is 0 is released as a multiple of e_j ≠ 0, and for an attacker who knows
 * σ the bound becomes x_j ≤ ŝ_j + c·σ with ŝ = s̃·sqrt(1 + dσ²/‖s̃‖²) (since ‖s + e‖² ≈ ‖s‖² + dσ²): loose by
 * c·σ (SECURITY.md §9: the measured accuracy of that adaptive test at each margin c). The rescaling to the
 * exact sum's norm keeps n‖μ‖² per class, hence the trace of the released second moment (scatter + n μμᵀ):
 * rows of norm ≤ 1 stay consistent with their statistics (SECURITY.md §7.1's checks), here and after any
 * merge (the unscaled sum grows n‖μ‖² by about dσ²/n, which rows of norm 1 leave no room for).
 *
 * It is not differential privacy: σ is not calibrated to a sensitivity and a single release of one class's
 * sum still reveals the sum to about ±σ per coordinate. Downstream merges add the released sums, so the noise
 * of a class stays about σ·√(parts) on its sum and shrinks as 1/n on its mean. The scatter is left as it is
 * (a shared scatter's rank rule and diagonal are the release rule's business): it keeps the exact rows'
 * spread about their exact mean. */
#ifndef PFT_MEANNOISE_H
#define PFT_MEANNOISE_H

#include <stdint.h>

#include "pft_gstat.h"

/* The class size whose sum gets noise of std exactly mean_noise (pft_meannoise_sigma). */
#define PFT_MEANNOISE_REF_ROWS 10

/* The noise std on the sum of a class of n ≥ 1 rows at the run's mean_noise sigma: sigma·sqrt(10 / n). A
 * class of few rows is the one whose sum bounds its rows tightly (the bound test of pftnet audit decided one
 * of star50's 6-row classes at 0.91 under a flat 0.05) and the one whose mean the head weighs least; the sum of
 * many rows bounds little (its coordinates grow with n) and its mean carries the head, so its noise shrinks
 * (measured, bench/README.md "The default noise": chain5 −0.38 point against −0.44 flat). The count is public
 * (it travels with the sum): the rule reveals nothing of the rows. */
double pft_meannoise_sigma(double sigma, uint64_t n);

/* The noise vector of class `label` (d doubles, each N(0, sigma²)) into e, a pure function of (seed,
 * label): the same class gets the same noise in every release that uses the seed, so that two releases
 * cannot be averaged. 0, or PFT_EINVAL (sigma negative or not finite, d < 1), PFT_ENOMEM. */
int pft_meannoise_draw(uint64_t seed, int label, double sigma, int d, double *e);

/* *out := a copy of st whose every class sum s_c = n_c μ_c is (s_c + e_c)·‖s_c‖/‖s_c + e_c‖ (e_c from
 * pft_meannoise_draw at pft_meannoise_sigma(sigma, n_c)); scatters (per class or tied) unchanged; counts unchanged. 0, or PFT_EINVAL
 * (sigma negative or not finite), PFT_ENOMEM; *out is NULL on error. */
int pft_meannoise_apply(const pft_gstat_t *st, double sigma, uint64_t seed, pft_gstat_t **out);

/* pft_meannoise_apply in place of *st_p: the same numbers bit for bit, a TIED W moved into the noised
 * statistics rather than copied (one d×d fewer on a relay's hop). 0 (*st_p replaced), or the errors of
 * pft_meannoise_apply with *st_p unaltered. */
int pft_meannoise_apply_take(pft_gstat_t **st_p, double sigma, uint64_t seed);

#endif
