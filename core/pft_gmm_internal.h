/* pft_gmm_internal: internal to core/pft_gmm*.c and core/pft_em_*.c; not part of the API. The model struct,
 * the EM state and its per-family table, and the functions these files share (pft_gmm__: the model and its
 * log-densities; pft_em__: the EM families).
 * Files, from the bottom up (a file calls only files above it in this list, never one below):
 *   pft_cov.c          the covariance families' table: names, shapes, parameter counts
 *   pft_gmm.c          the model object: creation, getters, validated setters, parameter counts
 *   pft_gmm_score.c    log-densities, score, BIC
 *   pft_gmm_sample.c   sampling
 *   pft_em_*.c         the EM steps of each family (diag: any vector or scalar family; full; lowrank)
 *   pft_gmm_em.c       pft_gmm_fit: the EM driver, the families' EM table s_em
 * tests/e2e_layers.sh checks this order on the object files' symbols. */
#ifndef PFT_GMM_INTERNAL_H
#define PFT_GMM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "pft_gmm.h"
#include "pft_linalg.h"
#include "pft_rng.h"

#define LOG_2PI 1.8378770664093454836

/* Largest K·d·d (full) we accept, so that sizes never overflow and a bad request fails cleanly. */
#define PFT_GMM_MAX_ELEMS ((size_t)1 << 34)

struct pft_gmm_t {
    int k;           /* components */
    int d;           /* dimension */
    pft_cov_t cov;   /* covariance family */
    double *weights; /* K mixing weights, ≥ 0, summing to 1 */
    double *means;   /* K×d means */
    double *covars;  /* full K×d×d, diag K×d, spher K */
    double *chol;    /* full only: K×d×d lower Cholesky factors of covars (upper part zero); else NULL */
    int q;           /* lowrank only: factors per component (0 ≤ q < d); else 0 */
    double *factors; /* lowrank only: K×d×q loadings W (covars holds Ψ, K×d); else NULL */
};

/* ------------------------------------------------------------------------------------------------ */
/* Model (pft_gmm.c) */

/* 1 if cov is one of the four families, else 0. */
int pft_gmm__cov_valid(pft_cov_t cov);
/* pft_gmm_new for every family; q is the lowrank rank (0 for the others). NULL on bad arguments or
 * failure. */
pft_gmm_t *pft_gmm__alloc(int k, int d, pft_cov_t cov, int q);

/* Variance of component c in dimension j (diag and spher). */
static inline double pft_gmm__var_at(const pft_gmm_t *self, size_t c, size_t j)
{
    return pft_cov_shape(self->cov) == PFT_COV_SHAPE_SCALAR ? self->covars[c]
                                                            : self->covars[c * (size_t)self->d + j];
}

/* ------------------------------------------------------------------------------------------------ */
/* Log-densities (pft_gmm_score.c), shared with EM; the contracts are at the definitions */

/* Checks row weights (finite, > 0) and sets *sum = Σ w (compensated). PFT_EINVAL naming the row, prefixed
 * with `what`. */
int pft_gmm__check_weights(const double *w, size_t n, const char *what, double *sum);

/* lowrank: the per-component tables of the Woodbury form, for rows in coordinates shifted by `shift`. */
typedef struct {
    size_t k, d, q, kq;
    double *a; /* d×Kq: column block k is A_k = Ψ_k⁻¹ W_k L_k⁻ᵀ (L_k L_kᵀ = I + W_kᵀ Ψ_k⁻¹ W_k) */
    double *b;      /* Kq: (μ_k - shift)ᵀ A_k */
    double *ipsi;   /* K×d: 1/ψ */
    double *mus;    /* K×d: μ_k - shift */
    double *lconst; /* K: log det Σ_k + d log 2π */
    double *m;      /* q×q scratch */
    double *tmp;    /* d×q scratch */
} lr_tab_t;

void pft_gmm__lr_tab_free(lr_tab_t *t);
/* 0, or PFT_ENOMEM (no message; t is left zeroed). */
int pft_gmm__lr_tab_alloc(lr_tab_t *t, size_t k, size_t d, size_t q);
int pft_gmm__lr_tab_fill(lr_tab_t *t, const double *means, const double *factors, const double *psi,
                         const double *shift);
void pft_gmm__lr_logn(const lr_tab_t *t, const double *x, size_t m, double *lp, double *v);
void pft_gmm__logsumexp_rows(const double *lp, const double *logw, size_t m, size_t K, double *out,
                             double *resp);

/* ------------------------------------------------------------------------------------------------ */
/* EM: the driver (pft_gmm_em.c) and one file per covariance family (pft_em_diag.c, pft_em_full.c,
 * pft_em_lowrank.c). The precision plan is at the top of those files. */

#define EM_MAX_THREADS 16

#define DPAD PFT_LA_PAD /* working rows are padded to a multiple of this many floats */
#define RB PFT_LA_ROWS  /* the distance kernel works on blocks of this many rows */
#define CHUNK 128       /* rows per chunk of the fused pass (multiple of RB) */

/* lowrank constants the driver's set-up needs too (the others are in pft_em_lowrank.c) */
#define LR_OVERSAMPLE 10   /* extra directions of the randomized PCA start */
#define LR_BLOCK 512       /* rows per E-step block */
#define LR_SMAT_MAX_D 4096 /* K = 1 forms S (d×d float) only up to this dimension */
#define LR_EXPECT_ITERS 40 /* factor-analysis steps assumed when choosing between S and Ỹ */

typedef struct em_t em_t;

/* Per-family EM steps: a new covariance family adds a file pft_em_<family>.c defining its table, named in
 * s_em (pft_gmm_em.c). */
typedef struct {
    /* E-step under em->m: responsibilities into em->resp, log p(x_i) into em->ll, mean into *mean_ll */
    int (*estep)(em_t *em, double *mean_ll);
    /* means and covariances of em->m from em->resp and em->nk (components with nk = 0 are skipped) */
    int (*mstep)(em_t *em);
    /* restarts component c at data row `row` with the data variance as covariance */
    void (*reseed)(em_t *em, size_t c, size_t row);
    /* K = 1 after the first M-step: iterates to convergence; NULL when that M-step is the exact answer */
    int (*solo)(em_t *em, const pft_gmm_opts_t *opts, int *iters, int *converged);
} em_family_t;

/* Scratch of one thread of the fused diag/spher pass. */
typedef struct {
    em_t *em;
    size_t c0, c1;   /* chunk range [c0, c1) */
    int estep;       /* 1: E-step then statistics; 0: statistics from em->resp */
    double *S1, *S2; /* K×dp running sums over this thread's chunks */
    float *dist;     /* CHUNK×K distances */
    unsigned *idx;   /* K×CHUNK rows of the chunk with a non-zero responsibility, per component */
    double *rv;      /* K×CHUNK their responsibilities */
    size_t *cnt;     /* K: how many */
} diag_worker_t;

struct em_t {
    size_t n, d, k;
    size_t dp; /* padded row stride of xf (multiple of DPAD) */
    pft_cov_t cov;
    const float *x;  /* raw data n×d */
    const double *w; /* n row weights, or NULL (every row weighs 1) */
    double wsum;     /* Σ w (n when w is NULL): the rows represented */
    double *ctr;     /* d: centre of the working coordinates */
    float *xf;       /* round_up(n, RB)×dp centred data (float, zero padded) */
    double *xd;      /* full: n×d centred data (double) */
    double *gvar;    /* d: data variance per dimension (re-seeding) */
    double reg;      /* variance added to every covariance: max(reg_covar, tiny floor) */
    pft_gmm_t *m;    /* current model; means in centred coordinates */
    double *logw;    /* K log weights */
    double *resp; /* n×K responsibilities (full: log-probabilities first); the M-step works on w_i·r_ik */
    int resp_w;   /* resp already holds w_i·r_ik (the fused diag pass folds the weights in itself) */
    double *ll;   /* n: log p(x_i) of the last E-step */
    double *nk;   /* K responsibility mass */
    /* diag/spher */
    double *shift;   /* K×dp uncentred means of the last E-step: the shift of the statistics (raw rows) */
    float *sf, *msf; /* K×dp 1/σ and μ/σ, float, zero padded */
    double *lconst;  /* K: Σ log σ² + d log 2π */
    int stats_valid; /* S1/S2 of workers[0] hold the statistics of the last E-step */
    int nthreads;
    diag_worker_t workers[EM_MAX_THREADS];
    double *vtmp; /* d: spher's per-dimension variances */
    /* helper threads of the fused pass (pft_em_diag.c) */
    int pool_tried, pool_up, pool_quit; /* start attempted; mutex and conditions live; helpers must return */
    unsigned pool_gen;                  /* pass number: a helper runs its share when it changes */
    int pool_pending;                   /* helpers still running the current pass */
    int pool_on[EM_MAX_THREADS];        /* [1, nthreads): helper t runs */
    pthread_t pool_tid[EM_MAX_THREADS];
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_go, pool_done;
    /* full */
    double *work;        /* n×d rows for SYRK */
    float *yf;           /* n×d rows for the float TRSM of the E-step */
    float *lf;           /* d×d float copy of one Cholesky factor */
    unsigned char *used; /* n: rows already used for re-seeding this M-step */
    int reseeded;        /* components re-seeded so far in this run */
    /* lowrank (also uses xd, and yf for the weighted centred rows Ỹ of one component) */
    size_t q, r;         /* rank; directions of the PCA start (min(q + LR_OVERSAMPLE, d)) */
    size_t rows;         /* rows of Ỹ gathered last */
    lr_tab_t tab;        /* E-step tables */
    double *lv;          /* LR_BLOCK × Kq: block products of the E-step */
    double *pw, *cw;     /* d×q: Ψ⁻¹W; d×r: S Ψ⁻¹W or S Ω */
    double *sb, *xw;     /* d×q (+ d): C M⁻¹ and the new W */
    float *pf, *cf, *tf; /* d×r, d×r, n×r: float operand, result and intermediate of S · X */
    float *smat;         /* K = 1 only: d×d S = ỸᵀỸ (float, both triangles), or NULL */
    int smat_valid;      /* smat holds S of the last gather */
    double *om;          /* d×r: the PCA start's subspace */
    double *th;          /* 3 (d×q + d): SQUAREM's θ0, θ1, θ2 */
    double tol;          /* opts->tol (the inner factor-analysis loop of the M-step uses it too) */
    double
        *sq; /* 5 q×q + r×r + r + r×q: M, L_M, L_G, G⁻¹, M⁻¹; Rayleigh quotient, eigenvalues, top vectors */
    double *sdiag;        /* d: diag S of the current component */
    unsigned char *fresh; /* K: component starts from PCA at its next M-step */
    pft_rng_t *rng;       /* the run's generator (PCA starts) */
};

/* Weight of row i. */
static inline double em_row_w(const em_t *em, size_t i)
{
    return em->w ? em->w[i] : 1.0;
}

/* Stops the diag helper threads of em, if any (em_free). */
void pft_em__diag_pool_stop(em_t *em);

#endif
