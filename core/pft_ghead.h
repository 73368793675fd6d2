/* pft_ghead: the Gaussian (Bayes) classifier of exact class statistics: LDA (shared covariance) or QDA.
 *
 * Given per-class counts n_c, means μ_c and scatters (pft_gstat), the classifier scores
 *     LDA: s_c(x) = log π_c - ½ (x - μ_c)ᵀ Σ_α⁻¹ (x - μ_c),             Σ = W / N (W the pooled scatter),
 *     QDA: s_c(x) = log π_c - ½ log|Σ_c| - ½ (x - μ_c)ᵀ Σ_c⁻¹ (x - μ_c),
 *          Σ_c = (1-α)[(1-λ) M_c/n_c + λ W/N] + α t_c I,
 * with π_c = n_c / N, the shrinkage Σ_α = (1-α) Σ + α (tr Σ / d) I toward the scaled identity, and t_c the
 * mean eigenvalue of the bracket. LDA is linear: its weights are exported as the [W | b] of a pft_head
 * (w_c = Σ_α⁻¹(μ_c - μ̄), b_c = log π_c - ½ (μ_c - μ̄)ᵀ Σ_α⁻¹ (μ_c + μ̄), μ̄ the overall mean: the same argmax
 * and posteriors, smaller numbers).
 *
 * How α (and QDA's λ) is chosen (`rule` in the info):
 *  - "cv": k-fold cross-validation over the caller's own rows, which must be part of the statistics. Each
 *    fold's rows are removed from the statistics exactly (the pairwise update run backwards), the classifier
 *    of the remaining statistics scores them, and the α with the best held-out accuracy wins (ties: the lower
 *    held-out cross-entropy, then the larger α). LDA works in the eigenbasis of the total W: a fold's removal
 *    is a low-rank downdate W' = W - UUᵀ (one column per removed row and per affected class), solved with
 *    the Woodbury identity, so all folds and all α of the grid cost one eigendecomposition. QDA then chooses
 *    λ ∈ {0.25, 0.5, 0.75} the same way (one Cholesky factorisation per fold, λ and class), keeping LDA's α.
 *  - "oas": the Oracle Approximating Shrinkage estimate (Chen, Wiesel, Eldar & Hero 2010, as scikit-learn's
 *    OAS) computed from the statistics alone, when the caller has fewer than `min_cv_rows` own rows (a
 *    data-less aggregator); QDA then uses λ = 0.5.
 *  - "fixed": opts.alpha (and opts.lambda) given.
 *
 * Noisy components (LDA only; DESIGN.md §8, SECURITY.md §6). A class mean known only up to isotropic noise
 * (a DP release of sums: μ̃ = μ + e, e ~ N(0, τ² I)) joins the exact statistics as a component of its class
 * with the shared covariance, scored with the noise's contribution removed, less one standard deviation of
 * it: s_k(x) = log π_k - ½ [(x - μ̃_k)ᵀ A (x - μ̃_k) - τ_k² (tr A - κ sqrt(2 tr A²))],   A = Σ_α⁻¹, κ = 1. (e ~
 * N(0, τ² I): eᵀAe has mean τ² tr A and variance 2τ⁴ tr A². With κ = 0 the score's expectation over e is that
 * of the true mean, but a mean whose noise happens to be short in the directions A stretches wins every row;
 * κ = 1 lets a noisy mean win only rows clearly nearer to it. Measured, numpy on PACS at ε = 1, own-row
 * cross-validation's α: covariate shift 0.723 / 0.806 / 0.761 at κ = 0, 0.834 / 0.827 / 0.776 at κ = 1, 0.812
 * / 0.813 / 0.803 at κ = 2 for three noise draws; label shift 0.735 / 0.732 at κ = 0, 0.718 / 0.722 at κ = 1,
 * 0.627 / 0.683 at κ = 2.) A class's score is the log-sum-exp of its
 * components (its exact statistics, if any, and its noisy components); priors π over all rows (exact and
 * noisy). The components take part in the cross-validation as they are (fixed: they hold none of the own
 * rows), so α is chosen knowing them; in a fold tr A and tr A² are those of the fold's downdated covariance
 * (exact, by the Woodbury identity). The linear head then has one row per component. */
#ifndef PFT_GHEAD_H
#define PFT_GHEAD_H

#include <stdint.h>

#include "pft_gstat.h"
#include "pft_head.h"

typedef enum {
    PFT_GHEAD_LDA = 0,
    PFT_GHEAD_QDA = 1,
} pft_ghead_kind_t;

/* "lda" / "qda"; NULL for an unknown value. */
const char *pft_ghead_kind_name(pft_ghead_kind_t kind);

/* opts.alpha / opts.lambda value meaning "choose it". */
#define PFT_GHEAD_AUTO (-1.0)

typedef struct {
    pft_ghead_kind_t kind; /* default LDA; QDA needs FULL statistics */
    double alpha;          /* shrinkage in [0, 1], or PFT_GHEAD_AUTO (default) */
    double lambda;         /* QDA: weight of the pooled covariance in [0, 1], or PFT_GHEAD_AUTO (default) */
    int folds;             /* cross-validation folds, 2..20; default 5 (fewer rows: one fold per row) */
    int min_cv_rows;       /* own rows below which OAS is used instead of cross-validation; default 10 */
    uint64_t seed;         /* assignment of rows to folds; default 0 */
    void (*on_iter)(void *ctx); /* called between the steps of the fit (each fold, each factorisation): the
                                   caller's chance to do other work; default NULL. Does not change the fit. */
    void *on_iter_ctx;
    const struct pft_ghead_extra_t *extra; /* LDA: noisy components (see above); default NULL */
    int n_extra;                           /* how many; default 0 */
} pft_ghead_opts_t;

/* κ of the noisy components' term (above). */
#define PFT_GHEAD_NOISE_KAPPA 1.0

/* A noisy component of a class: its mean known up to N(0, τ² I) noise per entry. */
typedef struct pft_ghead_extra_t {
    int label;          /* its class, 0 ≤ label < n_classes */
    uint64_t n;         /* rows it stands for (its prior weight), ≥ 1 */
    const double *mean; /* d doubles: the noisy mean (borrowed for the fit's duration) */
    double tau2;        /* variance per entry of the mean's noise, ≥ 0 */
} pft_ghead_extra_t;

typedef struct {
    pft_ghead_kind_t kind;
    double alpha;     /* the shrinkage used */
    double lambda;    /* QDA: the pooled weight used; LDA: 1 */
    const char *rule; /* how α was chosen: "cv", "oas" or "fixed" (static string); QDA's λ is chosen by
                         cross-validation whenever opts.lambda is AUTO and the own rows allow it, else 0.5 */
    int folds;        /* folds of the cross-validation (0 unless rule is "cv") */
    int cv_rows;      /* own rows scored in the cross-validation */
    double cv_acc;    /* held-out accuracy of the chosen α (λ); NaN without cross-validation */
    double oas_alpha; /* the OAS estimate (always computed, for the record) */
    int n_classes;    /* classes of the statistics */
    uint64_t n_rows;  /* rows the statistics stand for */
} pft_ghead_info_t;

void pft_ghead_opts_default(pft_ghead_opts_t *opts);

/* ---- evidence for α that travels with the statistics (one α for one set of statistics) ----
 * A contributor's evidence is its cross-validation tally, on its own rows against the statistics it holds,
 * for every α of the fixed grid (pft_ghead_alpha_grid): rows scored, rows right, summed held-out
 * cross-entropy. Tallies add, so every node holding the same contributors' evidence chooses the same α,
 * from everyone's rows (DESIGN.md §8). */
#define PFT_GHEAD_N_ALPHA 17
typedef struct {
    double alpha;     /* the grid point */
    uint64_t correct; /* held-out rows classified right */
    uint64_t total;   /* held-out rows scored; 0: this α is not usable with these statistics */
    double loss;      /* summed held-out cross-entropy (nats) */
} pft_ghead_evidence_t;

/* The grid's α i (0 ≤ i < PFT_GHEAD_N_ALPHA, ascending from 0 to 0.95); NaN outside. */
double pft_ghead_alpha_grid(int i);
/* The LDA cross-validation tally of the caller's own rows x, y (n, part of st, as for pft_ghead_fit) for
 * every α of the grid into ev[PFT_GHEAD_N_ALPHA] (opts: folds, min_cv_rows, seed, on_iter). 0; 1 (ev
 * untouched) when the rows are too few for cross-validation (n < min_cv_rows, or one class); PFT_EINVAL (as
 * pft_ghead_fit; also for QDA), PFT_ENOMEM, PFT_ENUMERIC. Computed in W's tridiagonal basis (a Householder
 * reduction, no eigenvectors: about a third of the fit's eigendecomposition at d = 1280), the same tallies as
 * the fit's eigenbasis up to rounding; in the eigenbasis where the tridiagonal solves cannot match it for an
 * α > 0. Where they cannot for α = 0 (no shrinkage: a nearly singular downdate of a nearly singular W), α = 0
 * is unusable in the tallies (total 0), not scored in the eigenbasis. */
int pft_ghead_evidence(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                       const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev);
/* pft_ghead_evidence, computed in st's own scatter W (no copy of it: a d×d matrix less), and where it was
 * computed in W's tridiagonal basis (returns 0 and keep->a set), that reduction handed to the caller in *keep
 * (zeroed on entry): the release of the same W takes its leading eigenpairs from it
 * (pft_gstat_lowrank_shared_trid) instead of reducing W again, and keep->diag is W's diagonal. W is then
 * lent: st holds no scatter (pft_gstat_tied_scatter NULL; read only its counts and means) until
 * pft_ghead_evidence_give_back(st, keep) puts it back, bit for bit. keep->a NULL: nothing kept, and st's W is
 * as it was (the eigenbasis was used, no tally, or an error). Returns as pft_ghead_evidence. */
struct pft_la_trid_t;
int pft_ghead_evidence_keep(pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                            const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev,
                            struct pft_la_trid_t *keep);
/* The scatter pft_ghead_evidence_keep lent, back in st as it was (pft_la_trid_unreduce); keep is freed. 0, or
 * PFT_EINVAL (keep holds no lent scatter, or st did not lend one; both then unaltered). */
int pft_ghead_evidence_give_back(pft_gstat_t *st, struct pft_la_trid_t *keep);
/* Statistics as a low-rank release describes them (pft_gstat_lowrank.h): S classes (labels ascending, counts
 * ≥ 1, means S×d) whose within-class scatter is N·(U Uᵀ + diag ψ), N the sum of the counts, U d×q row-major
 * (q ≥ 0), ψ ≥ 0. Borrowed arrays. */
typedef struct {
    int d, S, q;
    const int32_t *label;
    const uint64_t *count;
    const double *mean;
    const double *U;
    const double *psi;
} pft_ghead_lowrank_t;
/* The evidence of rows that the statistics r do not hold (a relay's own rows x, y against the release it
 * received), for every α of the grid into ev[PFT_GHEAD_N_ALPHA]: each row of a class of r (a seeded subset of
 * at most 1000) scored once by the LDA of r at α, Σ_α = (1 − α)(U Uᵀ + diag ψ) + α·tr(U Uᵀ + diag ψ)/d·I,
 * through Woodbury's identity in q dimensions (O(d·q²) per α, no d×d matrix, no fold: the rows are held out
 * already). An α whose Σ_α is not numerically positive definite is unusable (total 0). 0; 1 (ev untouched)
 * when the rows are too few (n < opts->min_cv_rows), r holds fewer than two classes, or no row is of a class
 * of r; PFT_EINVAL (bad arguments, a label ≥ n_classes, a non-finite row), PFT_ENOMEM. */
int pft_ghead_evidence_heldout(const pft_ghead_lowrank_t *r, const float *x, const int32_t *y, int n,
                               int n_classes, const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev);
/* The α of the weighted evidence of m contributors (ev[k]: PFT_GHEAD_N_ALPHA tallies each, weight w[k] in
 * [0, 1]; NULL: all 1): most rows right, then the lower cross-entropy, then the larger α; an α unusable for
 * one contributor is never chosen. -1 when none is usable or m = 0. */
double pft_ghead_evidence_alpha(const pft_ghead_evidence_t *const *ev, const double *w, int m);

typedef struct pft_ghead_t pft_ghead_t;

/* Fits the classifier of the statistics st for labels 0..n_classes-1 (a label without statistics gets
 * probability 0; every label of st must be < n_classes). x, y: the caller's own rows (n ≥ 0, n×d float32),
 * already included in st, used only to choose α (λ). On success *out is a new head and info, if not NULL, is
 * filled. Errors: PFT_EINVAL (bad options or arguments, QDA from TIED statistics, no class, a label of st ≥
 * n_classes, own rows not contained in st), PFT_ENUMERIC (a covariance not positive definite even with the
 * chosen shrinkage, e.g. α = 0 from fewer rows than dimensions), PFT_ENOMEM. *out is NULL on error. */
int pft_ghead_fit(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                  const pft_ghead_opts_t *opts, pft_ghead_t **out, pft_ghead_info_t *info);

/* pft_ghead_fit that takes the statistics (*st_p is destroyed and set to NULL, on success and on error): an
 * LDA head then reduces the statistics' own scatter instead of a copy of it (a d×d matrix less). An LDA head
 * without noisy components is computed in W's tridiagonal basis (no eigenvectors: one d×d in all), the same
 * head as W's eigenbasis gives up to rounding; in the eigenbasis where it cannot be computed exactly there. */
int pft_ghead_fit_take(pft_gstat_t **st_p, const float *x, const int32_t *y, int n, int n_classes,
                       const pft_ghead_opts_t *opts, pft_ghead_t **out, pft_ghead_info_t *info);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_ghead_destroy(pft_ghead_t **self_p);

int pft_ghead_n_classes(const pft_ghead_t *self);
int pft_ghead_dim(const pft_ghead_t *self);
/* LDA: the equivalent linear head (borrowed; its weights are head.npy's [W | b]); NULL for QDA. With noisy
 * components it has one row per component, not per class: see pft_ghead_component_labels. */
const pft_head_t *pft_ghead_linear(const pft_ghead_t *self);
/* LDA with noisy components: the class of each row of the linear head (*k rows: the exact classes in label
 * order, then the noisy components in the order given); a class's score is the log-sum-exp of its rows'
 * logits. NULL (and *k = C) when the head has one row per class. */
const int *pft_ghead_component_labels(const pft_ghead_t *self, int *k);

/* QDA's parameters (borrowed; NULL for LDA): means C×d, lower Cholesky factors C×d×d of the Σ_c, and the
 * biases C: s_c(x) = bias_c - ½ ‖L_c⁻¹ (x - μ_c)‖². A class without statistics has bias -inf. */
const double *pft_ghead_qda_means(const pft_ghead_t *self);
const double *pft_ghead_qda_chol(const pft_ghead_t *self);
const double *pft_ghead_qda_bias(const pft_ghead_t *self);

/* scores[i·C + c] = s_c(x_i) for the n×d rows of x (double). PFT_ENOMEM. */
int pft_ghead_scores(const pft_ghead_t *self, const float *x, int n, double *scores);
/* out[i] = argmax_c s_c(x_i) (the lowest c on ties). PFT_ENOMEM. */
int pft_ghead_predict(const pft_ghead_t *self, const float *x, int n, int32_t *out);
/* Fraction of rows predicted correctly, and per-class accuracy as pft_head_class_accuracy (acc_class and
 * counts may be NULL). PFT_EINVAL for labels outside [0, C), PFT_ENOMEM. */
int pft_ghead_accuracy(const pft_ghead_t *self, const float *x, const int32_t *y, int n, double *acc,
                       double *acc_class, int *counts);

#endif
