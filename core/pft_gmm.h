/* pft_gmm: Gaussian mixture models (full, diag, spher, low-rank covariances): EM fit, scoring, BIC, sampling.
 */
#ifndef PFT_GMM_H
#define PFT_GMM_H

#include <stddef.h>
#include <stdint.h>

#include "pft_rng.h"

/* Covariance families (paper: G_full, G_diag, G_spher; lowrank: a mixture of factor analysers,
 * Σ_k = W_k W_kᵀ + Ψ_k with W_k d×q and Ψ_k diagonal). Values are part of the wire format. */
typedef enum {
    PFT_COV_FULL = 0,
    PFT_COV_DIAG = 1,
    PFT_COV_SPHER = 2,
    PFT_COV_LOWRANK = 3,
    PFT_COV_TIED = 4, /* not a mixture: exact LDA statistics (pft_gstat); pft_gmm refuses it */
} pft_cov_t;
#define PFT_COV_N 5 /* families: pft_cov_t's values are 0 .. PFT_COV_N - 1 */

/* How a family parameterises a component's covariance. Code whose work depends on the parameters switches
 * on the shape, not on the family: a new family of an existing shape needs no case of its own. */
typedef enum {
    PFT_COV_SHAPE_NONE = 0, /* not a mixture family (tied: exact statistics, pft_gstat) */
    PFT_COV_SHAPE_MATRIX,   /* a d×d covariance kept with its lower Cholesky factor (full) */
    PFT_COV_SHAPE_VECTOR,   /* d variances (diag) */
    PFT_COV_SHAPE_SCALAR,   /* one variance (spher) */
    PFT_COV_SHAPE_FACTOR,   /* W Wᵀ + Ψ: d×q loadings W, d variances Ψ, a rank q (lowrank) */
} pft_cov_shape_t;

/* What a covariance family is: its row in the one table of families (core/pft_cov.c). */
typedef struct {
    pft_cov_shape_t shape;
    int dp; /* 1: DP-FedPFT releases it (pft_dp) */
} pft_cov_family_t;

/* The families' names in pft_cov_t order, NULL-terminated: "full", "diag", "spher", "lowrank", "tied". */
extern const char *const pft_cov_names[PFT_COV_N + 1];
/* The row of cov, or NULL for a value outside pft_cov_t. */
const pft_cov_family_t *pft_cov_family(pft_cov_t cov);
/* cov's shape; PFT_COV_SHAPE_NONE for tied and for a value outside pft_cov_t. */
pft_cov_shape_t pft_cov_shape(pft_cov_t cov);
/* Doubles per component a model keeps in pft_gmm_covars (full d², diag d, spher 1, lowrank Ψ: d); 0: none. */
size_t pft_cov_stored(pft_cov_t cov, size_t d);
/* Covariance numbers per component on the wire (full: the d(d+1)/2 of a triangle; lowrank: Ψ, its loadings
 * travel in a field of their own); 0: none. */
size_t pft_cov_wire(pft_cov_t cov, size_t d);
/* Free covariance parameters per component at rank q (BIC; lowrank: W up to a q×q rotation, and Ψ). */
size_t pft_cov_free(pft_cov_t cov, size_t d, size_t q);
/* "full" / "diag" / "spher" / "lowrank" / "tied"; NULL for an unknown value. */
const char *pft_cov_name(pft_cov_t cov);
/* Parses a name; returns 0 and sets *out, or PFT_EINVAL. */
int pft_cov_parse(const char *name, pft_cov_t *out);

typedef struct pft_gmm_t pft_gmm_t;

/* Fitting options; pft_gmm_opts_default() gives the documented defaults. */
typedef struct {
    int k;            /* components requested (capped at the number of samples); default 10 */
    pft_cov_t cov;    /* covariance family; default PFT_COV_DIAG */
    int max_iter;     /* EM iterations at most; default 100 */
    double tol;       /* stop when |change of mean log-likelihood| < tol; 0 runs max_iter; default 1e-3 */
    double reg_covar; /* added to every variance / covariance diagonal; default 1e-6 */
    int n_init;       /* restarts, the best mean log-likelihood is kept; default 1 */
    int kmeans_iter;  /* Lloyd iterations after k-means++ seeding; default 10 (0: seeding only) */
    uint64_t seed;    /* seed of the k-means++ initialisation (and of lowrank's PCA start); default 0 */
    int rank;         /* lowrank only: factors q per component (≥ 1; clamped to d - 1); default 32 */
    int min_rows; /* privacy floor: every component stands for ≥ min_rows rows (weight·W, the rule below);
                   * ≤ 1: no floor, the paper's protocol; default 1 */
} pft_gmm_opts_t;

/* The privacy floor (opts.min_rows = m > 1). A component's effective rows are weight_k · W, W the rows
 * represented: n for pft_gmm_fit, Σ w_i for pft_gmm_fit_weighted.
 * 1. K starts at min(opts.k, n, ⌊W / m⌋) (K components of ≥ m rows need K·m ≤ W), at least 1.
 * 2. The fit at K (n_init restarts, the best kept as usual). If every component meets the floor, done.
 * 3. diag, spher, full: the component with the fewest rows is merged into the component with the nearest mean
 *    (Euclidean), moment-preserving: weights add, and the merged mean and covariance are those of the pair's
 *    union (diag: per dimension; spher: averaged over dimensions); repeated until every component meets it.
 *    lowrank (a merge would leave the family): refit from scratch with K - 1 until it holds.
 * K = 1 (weight 1) meets the floor whenever W ≥ m; with W < m the result is K = 1 and cannot meet it (callers
 * withhold such a class). Deterministic: it depends only on x, w and opts. Merging was measured against
 * refitting at a smaller K (docs/SECURITY.md, "Privacy floor"): it keeps the rest of the fit and loses less
 * accuracy. Weights go on the wire in fp16: a decoded weight·n may fall below m by fp16's relative rounding
 * (2⁻¹¹). */
/* What a fit did. */
typedef struct {
    int k_requested;     /* opts->k */
    int k_used;          /* components in the model (k capped at n) */
    int iters;           /* EM iterations of the kept run (K = 1 is closed form: 1 whenever max_iter >= 1,
                          * except lowrank, whose K = 1 fit iterates factor-analysis EM steps) */
    int converged;       /* 1 if tol was reached before max_iter (always 1 for K = 1, max_iter >= 1, but
                          * lowrank) */
    int reseeded;        /* empty/collapsed components re-seeded during the kept run */
    double avg_loglik;   /* mean log-likelihood of the training data under the result (weighted: Σ w_i log
                            p(x_i) / W) */
    int floor_dropped;   /* components the privacy floor removed (min(k, n) minus k_used): cap, merges, refits
                          */
    int floor_merged;    /* of which by merging two components */
    int floor_refits;    /* refits the floor caused (lowrank only; 0: the first fit met it, or no floor) */
    double min_eff_rows; /* smallest weight_k · W of the result */
} pft_gmm_info_t;

void pft_gmm_opts_default(pft_gmm_opts_t *opts);

/* A model with all parameters zero (weights 1/k, identity covariances); NULL on failure, and for
 * PFT_COV_LOWRANK (it needs a rank: pft_gmm_new_lowrank). */
pft_gmm_t *pft_gmm_new(int k, int d, pft_cov_t cov);
/* A lowrank model of rank q, 0 ≤ q < d (q = 0 is a diagonal model in lowrank form; q ≥ d is refused, a
 * full model is the right family then): weights 1/k, means 0, W = 0, Ψ = 1. NULL on bad arguments or
 * failure. */
pft_gmm_t *pft_gmm_new_lowrank(int k, int d, int q);
/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_gmm_destroy(pft_gmm_t **self_p);
/* Deep copy; NULL on failure. */
pft_gmm_t *pft_gmm_dup(const pft_gmm_t *self);

int pft_gmm_k(const pft_gmm_t *self);
int pft_gmm_dim(const pft_gmm_t *self);
pft_cov_t pft_gmm_cov(const pft_gmm_t *self);
/* Factors q per component of a lowrank model; 0 for the other families. */
int pft_gmm_rank(const pft_gmm_t *self);

/* Borrowed views of the parameters, row-major:
 * weights K; means K×d; covars: full K×d×d, diag K×d, spher K (variances), lowrank K×d: Ψ, the diagonal
 * part only (Σ_k is W_k W_kᵀ + Ψ_k; it is never formed);
 * chol (full only, else NULL): K×d×d lower Cholesky factors L with L Lᵀ = Σ, upper part zero;
 * factors (lowrank only, else NULL): K×d×q loadings W; psi (lowrank only, else NULL): K×d, as covars. */
const double *pft_gmm_weights(const pft_gmm_t *self);
const double *pft_gmm_means(const pft_gmm_t *self);
const double *pft_gmm_covars(const pft_gmm_t *self);
const double *pft_gmm_chol(const pft_gmm_t *self);
const double *pft_gmm_factors(const pft_gmm_t *self);
const double *pft_gmm_psi(const pft_gmm_t *self);

/* Sets all parameters at once and validates them: weights ≥ 0 summing to 1 (±1e-6, renormalised),
 * finite means, covariances positive definite (full: Cholesky must succeed; diag/spher: > 0).
 * covars has the layout of pft_gmm_covars(). On error the model is unaltered and
 * PFT_EINVAL / PFT_ENUMERIC is returned with a message. PFT_EINVAL for a lowrank model (use
 * pft_gmm_set_params_lowrank). */
int pft_gmm_set_params(pft_gmm_t *self, const double *weights, const double *means, const double *covars);
/* Same for full covariance given by its lower Cholesky factors (K×d×d, upper part ignored);
 * the diagonal of each factor must be > 0. PFT_EINVAL for other families. */
int pft_gmm_set_params_chol(pft_gmm_t *self, const double *weights, const double *means, const double *chol);
/* Same for a lowrank model: factors W (K×d×q, finite) and psi (K×d, finite and > 0). PFT_EINVAL for other
 * families. */
int pft_gmm_set_params_lowrank(pft_gmm_t *self, const double *weights, const double *means,
                               const double *factors, const double *psi);

/* Fits a mixture to x (n×d, row-major float32) by EM with k-means++ initialisation. lowrank: a mixture
 * of factor analysers (Ghahramani & Hinton 1996, with the means updated first, an AECM step), each
 * component started by PCA of its k-means cluster; rank min(opts->rank, d - 1).
 * On success *out is a new model (caller destroys) and info, if not NULL, is filled.
 * Errors: PFT_EINVAL (n < 1, d < 1, bad options, non-finite data), PFT_ERANGE (|x| > 1e15), PFT_ENOMEM,
 * PFT_ENUMERIC. */
int pft_gmm_fit(const float *x, int n, int d, const pft_gmm_opts_t *opts, pft_gmm_t **out,
                pft_gmm_info_t *info);

/* As pft_gmm_fit, with a weight w[i] > 0 per row (NULL: every row weighs 1, and the result is pft_gmm_fit's
 * bit for bit). Maximises Σ w_i log p(x_i): a row of weight 2 is the row repeated twice. E-step
 * responsibilities are unchanged; the M-step uses w_i·r_ik; k-means++ draws ∝ w (first centre) and ∝ w·D²,
 * Lloyd's centres are weighted means. The privacy floor counts weight_k · W, W = Σ w (above); K is still
 * capped at n rows. Errors: those of pft_gmm_fit, and PFT_EINVAL for a weight that is not finite or ≤ 0 (the
 * message names the row) or a non-finite Σ w. */
int pft_gmm_fit_weighted(const float *x, const double *w, int n, int d, const pft_gmm_opts_t *opts,
                         pft_gmm_t **out, pft_gmm_info_t *info);

/* Per-sample log-likelihood log p(x_i) (natural log, full Gaussian constant) into out[n]. */
int pft_gmm_score_samples(const pft_gmm_t *self, const float *x, int n, double *out);
/* Mean log-likelihood over the n rows of x (scikit-learn's score()). */
int pft_gmm_score(const pft_gmm_t *self, const float *x, int n, double *avg_loglik);
/* Weighted mean log-likelihood Σ w_i log p(x_i) / Σ w_i (w NULL: pft_gmm_score). PFT_EINVAL for a weight that
 * is not finite or ≤ 0 (the message names the row). */
int pft_gmm_score_weighted(const pft_gmm_t *self, const float *x, const double *w, int n, double *avg_loglik);
/* Bayesian information criterion on x: -2 Σ log p(x_i) + n_free_params · ln n. */
int pft_gmm_bic(const pft_gmm_t *self, const float *x, int n, double *bic);
/* Free parameters of the model: (K-1) + K·d + covariance parameters (lowrank: d·q + d - q(q-1)/2 per
 * component, W being defined up to a rotation). */
size_t pft_gmm_n_free_params(const pft_gmm_t *self);
/* Numbers the model costs on the wire, the paper's formula:
 * full (2d + (d²-d)/2 + 1)K, diag (2d+1)K, spher (d+2)K; lowrank (d·q + 2d + 1)K. */
size_t pft_gmm_n_wire_params(const pft_gmm_t *self);

/* Draws n samples into out (n×d float32): component counts from the weights (multinomial),
 * then x = μ_k + L_k z (lowrank: x = μ_k + W_k z + Ψ_k^{1/2} ε, z ~ N(0, I_q), ε ~ N(0, I_d)).
 * Rows are grouped by component in component order. */
int pft_gmm_sample(const pft_gmm_t *self, pft_rng_t *rng, int n, float *out);

#endif
