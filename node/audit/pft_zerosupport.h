/* pft_zerosupport: the zero-support membership test of `pftnet audit` (docs/SECURITY.md §9).
 *
 * The features of a ReLU backbone are non-negative (prep l2 and sqrt-l2 keep their zeros). A released mean of
 * n non-negative rows is 0 at coordinate j exactly when every one of its rows is 0 there, so its zero set
 * Z = {j : mean_j = 0} tells a recipient where all its rows vanish. A candidate row "passes" a released mean
 * when it is 0 on all of Z, up to the wire's rounding: a mean that rounds to 0 was at most u (half the
 * dtype's smallest subnormal: 2^-25 for fp16, 2^-150 for fp32), so its rows are at most n·u there. A row
 * passes its class when it passes one of the class's released means (a GMM class: any component, standing for
 * n·w_k rows, since every row has a positive responsibility somewhere; statistics: the class in any part), so
 * every member passes. The test fits nothing: per class, its balanced accuracy is ½ (members passing /
 * members + non-members failing / non-members), an unbiased estimate of the test's own accuracy. Few rows
 * make Z large and a fresh row rarely passes.
 *
 * The bound test (statistics). A class sum s of n non-negative rows bounds each of them: x_j ≤ s_j at every
 * coordinate, zero support being the case s_j = 0. A released class of statistics is its sum (n·μ, exact up
 * to the dtype's relative rounding), so a row passes when it lies under it everywhere; members always pass,
 * and a fresh row rarely fits under the sum of a handful of rows. Under mean_noise = σ (core/pft_meannoise.h:
 * each contributor's class sum released as (s + e)·‖s‖/‖s + e‖, e ~ N(0, σ² I)) the attacker adapts: it
 * reads ŝ = n·μ·sqrt(1 + dσ_p²/‖n·μ‖²), σ_p = σ·sqrt(contributors of the part), and tests x_j ≤ ŝ_j + c·σ_p
 * at margins c = 0, 1, 2, 3, 4 (c = 0 alone without noise), keeping per class the margin that decides best
 * (one of five a priori choices, each scored without fitting: the best is an upper bound), and reads the sums
 * as exact too (c = 0, no rescaling: a producer may not have added the noise assumed). A GMM component
 * mean bounds nothing (responsibilities are soft): GMM classes get the zero-support test only.
 *
 * What else could reveal zero support, and why it adds nothing here: a zero variance (a diagonal entry of a
 * released scatter, psi of a low-rank release, a variance before reg_covar) or a zero row of a released
 * factor says the rows are constant at j, i.e. equal to the mean there; for non-negative rows that is zero
 * support only where the mean is 0 as well, which Z already holds. */
#ifndef PFT_ZEROSUPPORT_H
#define PFT_ZEROSUPPORT_H

#include "pft_audit.h"
#include "pft_bundle.h"
#include "pft_verdict.h"

#include <jansson.h>

/* One class's test: the largest zero set among its released means, and who passes. */
typedef struct {
    int label;
    double rows; /* rows the class's released means stand for (summed over parts / components) */
    int means;   /* released means of the class (parts or GMM components) */
    int zeros;   /* |Z| of its largest zero set */
    int own, own_pass;
    int held, held_pass;
    int margin;      /* statistics: the bound test's margin c (noise std) that decided best */
    int exact;       /* statistics under an assumed noise: 1 when the sums read as exact decided best */
    double accuracy; /* ½ (own_pass / own + (held − held_pass) / held); NaN when own or held is 0 */
} pft_zerosupport_class_t;

/* u: the largest value the dtype rounds to 0 (half its smallest positive subnormal). */
double pft_zerosupport_unit(pft_dtype_t dtype);

/* Whether the row x (d) passes the released mean mu (d) standing for rows rows, at rounding unit u: x_j ≤
 * rows·u wherever mu_j = 0. */
int pft_zerosupport_passes(const float *x, const double *mu, int d, double rows, double u);

/* The relative rounding of a mean in the dtype, with a margin (fp16 2^-10, fp32 2^-22). */
double pft_zerosupport_rel(pft_dtype_t dtype);

/* Whether the row x (d) lies under the class sum sum (d) of rows rows: x_j ≤ sum_j·(1 + rel) + rows·u +
 * slack at every j. */
int pft_zerosupport_bounded(const float *x, const double *sum, int d, double rows, double u, double rel,
                            double slack);

/* The test on every clear class of b (masked parts are skipped) with the producer's rows (members) and
 * held-out rows (non-members; n = 0: accuracies not measured, PASS); sigma: the mean_noise the attacker
 * assumes (0: exact sums). *out: a new JSON object {"verdict",
 * "applicable", "accuracy" (the worst class's), "worst": {...}, "overall": {...}, "classes": [...],
 * "fail_at", "warn_above"}; *verdict: the worst class's accuracy through pft_membership_accuracy_verdict. 0,
 * or PFT_EINVAL (rows of another dimension than b's), PFT_ENOMEM (message set). */
int pft_zerosupport_attack(const pft_bundle_t *b, const pft_audit_rows_t *own, const pft_audit_rows_t *held,
                           double sigma, json_t **out, pft_verdict_t *verdict);

#endif
