/* pft_head: linear softmax classifier (multinomial logistic regression) trained by full-batch L-BFGS. */
#ifndef PFT_HEAD_H
#define PFT_HEAD_H

#include <stdint.h>

typedef struct pft_head_t pft_head_t;

/* opts.l2 value meaning "1/n": scikit-learn's LogisticRegression(C=1.0) objective. */
#define PFT_HEAD_L2_AUTO (-1.0)

/* Preconditioners (opts.precond): none; centred per-feature scaling; centred whitening by the (weighted,
 * ridge-regularised) feature covariance, 3-5× fewer iterations than scaling on real features (theory and
 * measurements in pft_head_objective.c). Whitening falls back to scaling when it cannot be set up (a
 * covariance that cannot be factorised, more than 4096 features, no memory for d² doubles). */
enum { PFT_HEAD_PRECOND_NONE = 0, PFT_HEAD_PRECOND_DIAG = 1, PFT_HEAD_PRECOND_WHITEN = 2 };

/* Training options; pft_head_opts_default() gives the documented defaults. The objective is
 *     f(W, b) = mean_i CE(softmax(W x_i + b), y_i) + (l2/2)·‖W‖²_F    (no penalty on b),
 * i.e. scikit-learn's LogisticRegression objective divided by n, with l2 = 1/(C·n). */
typedef struct {
    double l2;    /* L2 strength; ≥ 0, or PFT_HEAD_L2_AUTO (default): 1/n, as sklearn C = 1 */
    int max_iter; /* L-BFGS iterations at most; default 1000 */
    double tol; /* converged when max |∂f/∂W, ∂f/∂b| ≤ tol; default 1e-5 (scikit-learn 1.2's lbfgs applies
                   its tol to Σw·f: its tol = this tol · Σw stops at the same gradient) */
    int history; /* L-BFGS correction pairs kept; default 30 (raw PACS: 102 iterations; 140 with 10) */
    int precond; /* PFT_HEAD_PRECOND_*: the coordinates L-BFGS works in. Only a preconditioner: the objective,
                    its optimum and the exported weights (which act on raw input) are those above; it changes
                    how many iterations convergence takes. Default PFT_HEAD_PRECOND_WHITEN. */
    void (*on_iter)(void *ctx); /* called once per L-BFGS iteration (the caller's chance to do other work
                                   between iterations); default NULL. Does not change the fit. */
    void *on_iter_ctx;
} pft_head_opts_t;

/* What a fit did. */
typedef struct {
    int iters;       /* L-BFGS iterations */
    int evals;       /* objective/gradient evaluations (each is one pass over the data, two products) */
    int converged;   /* 1 if the gradient tolerance was reached */
    double l2;       /* the L2 strength used (resolved from PFT_HEAD_L2_AUTO) */
    double loss;     /* final objective f */
    double grad_max; /* final max |gradient| */
} pft_head_info_t;

void pft_head_opts_default(pft_head_opts_t *opts);

/* Fits a head to x (n×d row-major float32) with labels y[i] in [0, n_classes). Deterministic: the
 * same inputs give the same weights on one machine (no random state; fixed summation orders; BLAS, used to
 * set up the whitening, with a fixed thread count; the SIMD kernels are chosen by instruction set, so another
 * CPU may round differently). Classes without rows are allowed: their probability is driven towards 0 until
 * the gradient tolerance holds. On success *out is a new head (caller destroys) and info, if not NULL, is
 * filled. Errors: PFT_EINVAL (n < 1, d < 1, n_classes < 1, a label out of range, non-finite data, bad
 * options), PFT_ENOMEM, PFT_ENUMERIC (the objective became non-finite). *out is NULL on error. */
int pft_head_fit(const float *x, const int32_t *y, int n, int d, int n_classes, const pft_head_opts_t *opts,
                 pft_head_t **out, pft_head_info_t *info);

/* As pft_head_fit with a weight w[i] > 0 per row (w NULL: pft_head_fit's result, bit for bit). Objective:
 *     f(W, b) = Σ_i w_i CE(softmax(W x_i + b), y_i) / Σ_i w_i + (l2/2)·‖W‖²_F,
 * PFT_HEAD_L2_AUTO meaning l2 = 1/Σ_i w_i: scikit-learn's LogisticRegression(C) with sample_weight = w and
 * l2 = 1/(C·Σ w). A row of weight 2 is that row twice (to rounding); the tolerance applies to the gradient
 * of this f, and the standardisation (opts.standardize) uses weighted means and scales. Errors: as
 * pft_head_fit, and PFT_EINVAL for a weight that is not finite or ≤ 0 (the message names the row) or weights
 * whose sum is not finite. *out is NULL on error. */
int pft_head_fit_weighted(const float *x, const int32_t *y, const double *w, int n, int d, int n_classes,
                          const pft_head_opts_t *opts, pft_head_t **out, pft_head_info_t *info);

/* Knowledge distillation: fits a student head to x with labels y and soft targets q (n×n_classes teacher
 * probabilities at temperature T, rows summing to 1), minimising
 *     f(W, b) = mean_i [α·CE(y_i, softmax(z_i)) + (1−α)·T²·CE(q_i, softmax(z_i/T))] + (l2/2)·‖W‖²_F,
 * z_i = W x_i + b (Hinton et al. 2015; the T² keeps the soft term's gradient scale independent of T).
 * Same optimiser, options, determinism and info as pft_head_fit; with α = 1 the result is pft_head_fit's,
 * bit for bit. Errors: as pft_head_fit, and PFT_EINVAL for q NULL, T ≤ 0 or not finite, α outside [0, 1],
 * a soft target negative or not finite, or a row of q not summing to 1 (to 1e-3). *out is NULL on error. */
int pft_head_fit_distill(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                         double T, double alpha, const pft_head_opts_t *opts, pft_head_t **out,
                         pft_head_info_t *info);

/* The training objective f of pft_head_fit_distill (of pft_head_fit with q NULL and α = 1) at the raw weights
 * wb (n_classes×(d+1) [W | b]), and its gradient w.r.t. wb into grad (same layout); l2 as opts.l2. For
 * gradient checks and diagnostics. Errors: PFT_EINVAL (as the fits; α < 1 without q), PFT_ENOMEM,
 * PFT_ENUMERIC. */
int pft_head_objective(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                       double T, double alpha, double l2, const double *wb, double *f, double *grad);

/* pft_head_objective with row weights w (NULL: all 1), the objective of pft_head_fit_weighted (both terms of
 * a distillation objective weighted alike); PFT_HEAD_L2_AUTO is 1/Σ w. Errors: as pft_head_objective, and
 * PFT_EINVAL for weights as pft_head_fit_weighted. */
int pft_head_objective_weighted(const float *x, const int32_t *y, const float *q, const double *w, int n,
                                int d, int n_classes, double T, double alpha, double l2, const double *wb,
                                double *f, double *grad);

/* A head with the given weights wb: n_classes rows of d+1 floats [W_k | b_k] (the layout of
 * pft_head_weights, i.e. of head.npy). Errors: PFT_EINVAL (sizes, non-finite weights), PFT_ENOMEM. */
int pft_head_from_weights(int n_classes, int d, const float *wb, pft_head_t **out);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_head_destroy(pft_head_t **self_p);

int pft_head_n_classes(const pft_head_t *self);
int pft_head_dim(const pft_head_t *self);
/* Borrowed n_classes×(d+1) row-major matrix [W | b] acting on raw input: logits = W x + b. */
const float *pft_head_weights(const pft_head_t *self);

/* logits[i·C + k] = W_k x_i + b_k for the n×d rows of x (float32, the sums formed in double after the
 * sgemm). PFT_ENOMEM on failure. */
int pft_head_logits(const pft_head_t *self, const float *x, int n, float *logits);
/* out[i] = argmax_k logit_k(x_i) (the lowest k on ties) for the n×d rows of x. PFT_ENOMEM on failure. */
int pft_head_predict(const pft_head_t *self, const float *x, int n, int32_t *out);
/* proba[i·C + k] = softmax probabilities (computed in double). PFT_ENOMEM on failure. */
int pft_head_predict_proba(const pft_head_t *self, const float *x, int n, float *proba);
/* Fraction of rows predicted correctly (0 for n = 0). PFT_ENOMEM on failure. */
int pft_head_accuracy(const pft_head_t *self, const float *x, const int32_t *y, int n, double *acc);
/* Per-class accuracy: acc[k] = correct / rows of true class k (NaN for a class without rows);
 * counts[k] = rows of class k, if counts is not NULL. Labels outside [0, C) → PFT_EINVAL. */
int pft_head_class_accuracy(const pft_head_t *self, const float *x, const int32_t *y, int n, double *acc,
                            int *counts);

#endif
