/* pft_ghead_internal: INTERNAL to core/pft_ghead*.c (the head's struct, the cross-validation folds and
 * tallies both heads share); everything else goes through pft_ghead.h.
 * Files, from the bottom up (a file calls only files above it in this list, never one below):
 *   pft_ghead_cv.c     options and their checks; the cross-validation folds over own rows, the tallies of
 *                      their scores, the α grid
 *   pft_ghead_heldout.c the evidence of rows the statistics do not hold (a relay's against what it received)
 *   pft_ghead_qda.c    QDA: covariances regularised and shrunk, λ by exact-downdate cross-validation
 *   pft_ghead_score.c  a fitted head's accessors, destroy, class scores, predictions, accuracy
 *   pft_ghead.c        options, LDA and its α (in W's eigenbasis or tridiagonal basis), the fit
 * tests/e2e_layers.sh checks this order on the object files' symbols. */
#ifndef PFT_GHEAD_INTERNAL_H
#define PFT_GHEAD_INTERNAL_H

#include "pft_ghead.h"

#define GH_MAX_CV_ROWS 1000 /* own rows scored by the cross-validation at most (a seeded subset) */

struct pft_ghead_t {
    pft_ghead_kind_t kind;
    int C, d;
    pft_head_t *lin; /* LDA: one row per label, or per component (comp_label) */
    int *comp_label; /* LDA with noisy components: K labels, one per row of lin; else NULL */
    int K;           /* rows of lin */
    double *mean;    /* QDA: C×d */
    double *chol;    /* QDA: C×d×d */
    double *bias;    /* QDA: C */
};

/* Cross-validation folds over the caller's own rows.-----------------------------------------------
 */

typedef struct {
    int n;     /* rows taking part */
    int F;     /* folds */
    int *row;  /* n: index into the caller's x */
    int *cls;  /* n: class index in st */
    int *fold; /* n */
} folds_t;

/* Score tallies per grid point. */
typedef struct {
    int valid;
    long correct, total;
    double loss;
} tally_t;

/* pft_ghead_cv.c */
/* The arguments and options of a fit or an evidence checked: 0 or PFT_EINVAL naming what is wrong. */
int pft_ghead__check_args(const pft_gstat_t *st, int n, int C, const pft_ghead_opts_t *o);
/* Own rows → class indices (checked to be part of st), a seeded subset of at most GH_MAX_CV_ROWS, stratified
 * into folds. 0, PFT_EINVAL (a row not in st), PFT_ENOMEM. */
int pft_ghead__folds_make(folds_t *f, const pft_gstat_t *st, const int32_t *y, int n, int folds,
                          uint64_t seed);
void pft_ghead__folds_free(folds_t *f);
/* Tallies one scored row (s over the S classes; absent classes skipped). */
void pft_ghead__tally_row(tally_t *t, const double *s, const int *present, int S, int truth);
/* The shrinkage grid α (PFT_GHEAD_N_ALPHA values, ascending; pft_ghead_alpha_grid, evidence_alpha here). */
extern const double pft_ghead__alpha_grid[];
/* Index of the best valid tally (accuracy, then cross-entropy, then the later grid point), or -1. */
int pft_ghead__tally_best(const tally_t *t, int m);
/* The noisy components' term per unit τ² from tr A and tr A² (A = Σ_α⁻¹). */
double pft_ghead__noise_bonus(double trinv, double trinv2);
/* tr Σ'⁻¹ and tr Σ'⁻² of a fold's downdated covariance Σ' = D - β Uᵀ U (Woodbury; UD overwritten, ZZ m×m). */
void pft_ghead__noise_traces(const double *D, double *UD, const double *K, double *ZZ, int d, int m,
                             double beta, double *trinv, double *trinv2);
/* 0 if a squared pivot of the Cholesky factor L (m×m) is below 1e-8: a nearly singular downdate. */
int pft_ghead__pivots_ok(const double *L, int m);
/* Diagonal of the shrunk covariance (1-α) W/N + α (tr W / (N d)) I in W's eigenbasis (eigenvalues lam),
 * floored at 1e-12 of its largest entry. 1 if no floor was needed. */
int pft_ghead__shrunk_diag(const double *lam, int d, double N, double sumlam, double alpha, double *D);

/* pft_ghead_qda.c */
/* λ by cross-validation over the folds at shrinkage α: *lambda_out, *acc_out. */
int pft_ghead__qda_cv(const pft_gstat_t *st, const float *x, const folds_t *fs, double alpha,
                      const pft_ghead_opts_t *o, double *lambda_out, double *acc_out);
/* The QDA parameters of st at (α, λ) into h. */
int pft_ghead__qda_build(const pft_gstat_t *st, double alpha, double lambda, int C, const pft_ghead_opts_t *o,
                         pft_ghead_t *h);
/* q[i] = ‖L⁻¹(x_i - μ)‖² for the n rows of x (double, overwritten). */
void pft_ghead__qda_quad(const double *L, const double *mu, double *x, int n, int d, double *q);

/* pft_ghead.c */
/* pft_ghead_evidence, computed in the tridiagonal basis of W (eigen 0: a Householder reduction, then per fold
 * and α tridiagonal solves; the eigenbasis where it cannot score an α exactly), or in W's eigenbasis (eigen
 * 1, the reference: the same tallies up to rounding); in st's own scatter, lent and given back unchanged (as
 * pft_ghead_evidence_keep does). */
int pft_ghead__evidence_basis(pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                              const pft_ghead_opts_t *opts, int eigen, pft_ghead_evidence_t *ev);
/* pft_ghead_fit in W's tridiagonal basis (eigen 0: what pft_ghead_fit does for LDA without noisy components;
 * the eigenbasis where it cannot score or build exactly) or in W's eigenbasis (eigen 1, the reference: the same
 * head up to rounding). */
int pft_ghead__fit_basis(const pft_gstat_t *st, const float *x, const int32_t *y, int n, int n_classes,
                         const pft_ghead_opts_t *opts, int eigen, pft_ghead_t **out, pft_ghead_info_t *info);

#endif
