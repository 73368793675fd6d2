/* pft_gmm: Gaussian mixture models (full, diag, spher, low-rank covariances): EM fit, scoring, BIC, sampling.
 *
 * Theory. A mixture p(x) = Σ_k w_k N(x | μ_k, Σ_k). Scoring works in log space: for each row i and
 * component k, log w_k + log N(x_i | k), then a row-wise log-sum-exp. Public scoring (score_samples,
 * score, bic) runs in double over blocks of rows centred on the batch's column mean c (the means are
 * shifted by the same c), which keeps the expanded quadratic forms well conditioned:
 *   diag/spher: (x-μ)ᵀΣ⁻¹(x-μ) = Σ_j x_j² p_kj - 2 Σ_j x_j μ_kj p_kj + Σ_j μ_kj² p_kj, p = 1/σ²,
 *               so a block costs one DGEMM of [X² | X] (m×2d) against [P | -2 M∘P] (K×2d);
 *   full:       L_k⁻¹(x - μ_k) by one triangular solve (DTRSM) of the whole block per component,
 *               Mahalanobis distance = squared row norm, log det Σ_k = 2 Σ_j log L_k,jj.
 *   lowrank:    Σ = W Wᵀ + Ψ is never formed. With M = I_q + Wᵀ Ψ⁻¹ W = L_M L_Mᵀ (q×q), Woodbury gives
 *               Σ⁻¹ = Ψ⁻¹ - Ψ⁻¹ W M⁻¹ Wᵀ Ψ⁻¹, so (x-μ)ᵀΣ⁻¹(x-μ) = Σ_j (x-μ)_j²/ψ_j - ‖A_kᵀ(x-μ)‖² with
 *               A_k = Ψ⁻¹ W L_M⁻ᵀ (d×q), and the determinant lemma gives log det Σ = log det M + Σ_j log ψ_j.
 *               A block costs one DGEMM of the rows against [A_1 | … | A_K] (d×Kq): O(d·q) per row and
 *               component, O(d·q²) per component to prepare.
 * Parameters are stored in double. EM (pft_gmm_fit, below) has its own precision plan.
 *
 * The per-family parts (covariance layout, validation, scoring, E-step, M-step, re-seeding, sampling)
 * are separate functions per family; EM dispatches through a per-family table (em_family). */
#include "pft_gmm.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_kmeans.h"
#include "pft_linalg.h"

#define LOG_2PI 1.8378770664093454836

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
/* Names */

const char *pft_cov_name(pft_cov_t cov)
{
    switch (cov) {
    case PFT_COV_FULL:
        return "full";
    case PFT_COV_DIAG:
        return "diag";
    case PFT_COV_SPHER:
        return "spher";
    case PFT_COV_LOWRANK:
        return "lowrank";
    }
    return NULL;
}

int pft_cov_parse(const char *name, pft_cov_t *out)
{
    static const pft_cov_t all[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER, PFT_COV_LOWRANK};
    if (!name || !out)
        return pft_err(PFT_EINVAL, "covariance type: missing name");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, pft_cov_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    if (strcmp(name, "spherical") == 0) { /* scikit-learn's spelling */
        *out = PFT_COV_SPHER;
        return 0;
    }
    return pft_err(PFT_EINVAL, "unknown covariance type '%s' (expected full, diag, spher or lowrank)", name);
}

static int cov_valid(pft_cov_t cov)
{
    return cov == PFT_COV_FULL || cov == PFT_COV_DIAG || cov == PFT_COV_SPHER || cov == PFT_COV_LOWRANK;
}

/* Doubles per component in the covars array (lowrank: Ψ). */
static size_t cov_len(pft_cov_t cov, size_t d)
{
    switch (cov) {
    case PFT_COV_FULL:
        return d * d;
    case PFT_COV_DIAG:
    case PFT_COV_LOWRANK:
        return d;
    case PFT_COV_SPHER:
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Model object */

void pft_gmm_opts_default(pft_gmm_opts_t *opts)
{
    opts->k = 10;
    opts->cov = PFT_COV_DIAG;
    opts->max_iter = 100;
    opts->tol = 1e-3;
    opts->reg_covar = 1e-6;
    opts->n_init = 1;
    opts->kmeans_iter = 10;
    opts->seed = 0;
    opts->rank = 32;
}

/* Largest K·d·d (full) we accept, so that sizes never overflow and a bad request fails cleanly. */
#define PFT_GMM_MAX_ELEMS ((size_t)1 << 34)

/* pft_gmm_new for every family; q is the lowrank rank (0 for the others). */
static pft_gmm_t *gmm_alloc(int k, int d, pft_cov_t cov, int q)
{
    if (k < 1 || d < 1 || !cov_valid(cov) || q < 0 || (cov == PFT_COV_LOWRANK ? q >= d : q != 0))
        return NULL;
    size_t K = (size_t)k, D = (size_t)d, cl = cov_len(cov, D), Q = (size_t)q;
    if (cl > PFT_GMM_MAX_ELEMS / K || D > PFT_GMM_MAX_ELEMS / K || (Q && D * Q > PFT_GMM_MAX_ELEMS / K))
        return NULL;
    pft_gmm_t *self = pft_calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->k = k;
    self->d = d;
    self->cov = cov;
    self->weights = pft_alloc_array(K, sizeof(double));
    self->means = pft_calloc(K * D, sizeof(double));
    self->covars = pft_calloc(K * cl, sizeof(double));
    if (cov == PFT_COV_FULL)
        self->chol = pft_calloc(K * cl, sizeof(double));
    if (cov == PFT_COV_LOWRANK) {
        self->q = q;
        self->factors = pft_calloc(K * D * Q + 1, sizeof(double));
    }
    if (!self->weights || !self->means || !self->covars || (cov == PFT_COV_FULL && !self->chol) ||
        (cov == PFT_COV_LOWRANK && !self->factors)) {
        pft_gmm_destroy(&self);
        return NULL;
    }
    for (size_t c = 0; c < K; c++) {
        self->weights[c] = 1.0 / (double)k;
        if (cov == PFT_COV_FULL) {
            for (size_t j = 0; j < D; j++) {
                self->covars[c * cl + j * D + j] = 1.0;
                self->chol[c * cl + j * D + j] = 1.0;
            }
        } else {
            for (size_t j = 0; j < cl; j++)
                self->covars[c * cl + j] = 1.0;
        }
    }
    return self;
}

pft_gmm_t *pft_gmm_new(int k, int d, pft_cov_t cov)
{
    return cov == PFT_COV_LOWRANK ? NULL : gmm_alloc(k, d, cov, 0);
}

pft_gmm_t *pft_gmm_new_lowrank(int k, int d, int q)
{
    return gmm_alloc(k, d, PFT_COV_LOWRANK, q);
}

void pft_gmm_destroy(pft_gmm_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_gmm_t *self = *self_p;
    pft_free(self->weights);
    pft_free(self->means);
    pft_free(self->covars);
    pft_free(self->chol);
    pft_free(self->factors);
    pft_free(self);
    *self_p = NULL;
}

pft_gmm_t *pft_gmm_dup(const pft_gmm_t *self)
{
    if (!self)
        return NULL;
    pft_gmm_t *copy = gmm_alloc(self->k, self->d, self->cov, self->q);
    if (!copy)
        return NULL;
    size_t K = (size_t)self->k, D = (size_t)self->d, cl = cov_len(self->cov, D);
    memcpy(copy->weights, self->weights, K * sizeof(double));
    memcpy(copy->means, self->means, K * D * sizeof(double));
    memcpy(copy->covars, self->covars, K * cl * sizeof(double));
    if (self->chol)
        memcpy(copy->chol, self->chol, K * cl * sizeof(double));
    if (self->factors)
        memcpy(copy->factors, self->factors, K * D * (size_t)self->q * sizeof(double));
    return copy;
}

int pft_gmm_k(const pft_gmm_t *self)
{
    return self->k;
}

int pft_gmm_dim(const pft_gmm_t *self)
{
    return self->d;
}

pft_cov_t pft_gmm_cov(const pft_gmm_t *self)
{
    return self->cov;
}

int pft_gmm_rank(const pft_gmm_t *self)
{
    return self->q;
}

const double *pft_gmm_weights(const pft_gmm_t *self)
{
    return self->weights;
}

const double *pft_gmm_means(const pft_gmm_t *self)
{
    return self->means;
}

const double *pft_gmm_covars(const pft_gmm_t *self)
{
    return self->covars;
}

const double *pft_gmm_chol(const pft_gmm_t *self)
{
    return self->chol;
}

const double *pft_gmm_factors(const pft_gmm_t *self)
{
    return self->factors;
}

const double *pft_gmm_psi(const pft_gmm_t *self)
{
    return self->cov == PFT_COV_LOWRANK ? self->covars : NULL;
}

size_t pft_gmm_n_free_params(const pft_gmm_t *self)
{
    size_t K = (size_t)self->k, D = (size_t)self->d, cov;
    switch (self->cov) {
    case PFT_COV_FULL:
        cov = D * (D + 1) / 2;
        break;
    case PFT_COV_DIAG:
        cov = D;
        break;
    case PFT_COV_LOWRANK: {
        size_t Q = (size_t)self->q;
        cov = D * Q + D - (Q ? Q * (Q - 1) / 2 : 0); /* W up to a q×q rotation */
        break;
    }
    default:
        cov = 1;
        break;
    }
    return (K - 1) + K * D + K * cov;
}

size_t pft_gmm_n_wire_params(const pft_gmm_t *self)
{
    size_t K = (size_t)self->k, D = (size_t)self->d;
    switch (self->cov) {
    case PFT_COV_FULL:
        return (2 * D + (D * D - D) / 2 + 1) * K;
    case PFT_COV_DIAG:
        return (2 * D + 1) * K;
    case PFT_COV_LOWRANK:
        return (D * (size_t)self->q + 2 * D + 1) * K;
    default:
        return (D + 2) * K;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* Setting parameters */

/* Checks weights (finite, ≥ 0, sum 1 ± 1e-6) and writes the renormalised copy to out. */
static int check_weights(const double *w, int k, double *out)
{
    double sum = 0.0;
    for (int c = 0; c < k; c++) {
        if (!isfinite(w[c]) || w[c] < 0.0)
            return pft_err(PFT_EINVAL, "weight %d is %g (must be finite and >= 0)", c, w[c]);
        sum += w[c];
    }
    if (!(fabs(sum - 1.0) <= 1e-6))
        return pft_err(PFT_EINVAL, "weights sum to %.9g (must be 1 within 1e-6)", sum);
    for (int c = 0; c < k; c++)
        out[c] = w[c] / sum;
    return 0;
}

static int check_means(const double *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(m[i]))
            return pft_err(PFT_EINVAL, "mean element %zu is not finite", i);
    return 0;
}

/* Validates one full covariance (symmetric, finite, positive definite) and writes its symmetrised copy
 * to cov_out and its lower Cholesky factor to chol_out. */
static int check_full_cov(const double *a, int d, int comp, double *cov_out, double *chol_out)
{
    size_t D = (size_t)d;
    for (size_t i = 0; i < D; i++) {
        if (!isfinite(a[i * D + i]) || !(a[i * D + i] >= DBL_MIN))
            return pft_err(PFT_ENUMERIC, "component %d: covariance diagonal %zu is %g (must be > 0)", comp, i,
                           a[i * D + i]);
    }
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < i; j++) {
            double lo = a[i * D + j], up = a[j * D + i];
            if (!isfinite(lo) || !isfinite(up))
                return pft_err(PFT_EINVAL, "component %d: covariance (%zu,%zu) is not finite", comp, i, j);
            double scale = sqrt(a[i * D + i] * a[j * D + j]);
            if (fabs(lo - up) > 1e-6 * scale)
                return pft_err(PFT_EINVAL, "component %d: covariance is not symmetric at (%zu,%zu): %g vs %g",
                               comp, i, j, lo, up);
        }
    memcpy(cov_out, a, D * D * sizeof(double));
    pft_la_sym_from_lower(cov_out, d);
    memcpy(chol_out, cov_out, D * D * sizeof(double));
    int rc = pft_la_chol_lower(chol_out, d);
    if (rc < 0)
        return pft_err_wrap(rc, "component %d: covariance is not positive definite: ", comp);
    return 0;
}

/* Shared body of set_params / set_params_chol: validates into fresh buffers, then swaps them in. */
static int set_params_impl(pft_gmm_t *self, const double *weights, const double *means, const double *covars,
                           const double *chol)
{
    if (!self || !weights || !means || (!covars && !chol))
        return pft_err(PFT_EINVAL, "gmm set_params: NULL argument");
    size_t K = (size_t)self->k, D = (size_t)self->d, cl = cov_len(self->cov, D);
    int rc = PFT_ENOMEM;
    double *w = pft_alloc_array(K, sizeof(double));
    double *cv = pft_alloc_array(K * cl, sizeof(double));
    double *ch = self->cov == PFT_COV_FULL ? pft_alloc_array(K * cl, sizeof(double)) : NULL;
    if (!w || !cv || (self->cov == PFT_COV_FULL && !ch)) {
        rc = pft_err(PFT_ENOMEM, "gmm set_params: out of memory");
        goto done;
    }
    if ((rc = check_weights(weights, self->k, w)) < 0 || (rc = check_means(means, K * D)) < 0)
        goto done;
    if (self->cov == PFT_COV_FULL && chol) {
        for (size_t c = 0; c < K; c++) {
            const double *l = chol + c * cl;
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j <= i; j++) {
                    double v = l[i * D + j];
                    if (!isfinite(v) || (i == j && !(v >= DBL_MIN))) {
                        rc = pft_err(PFT_ENUMERIC, "component %zu: Cholesky factor (%zu,%zu) is %g", c, i, j,
                                     v);
                        goto done;
                    }
                }
            memcpy(ch + c * cl, l, cl * sizeof(double));
            pft_la_zero_upper(ch + c * cl, self->d);
            pft_la_llt(ch + c * cl, cv + c * cl, self->d);
        }
    } else if (self->cov == PFT_COV_FULL) {
        for (size_t c = 0; c < K; c++)
            if ((rc = check_full_cov(covars + c * cl, self->d, (int)c, cv + c * cl, ch + c * cl)) < 0)
                goto done;
    } else {
        for (size_t i = 0; i < K * cl; i++) {
            if (!isfinite(covars[i]) || !(covars[i] >= DBL_MIN)) {
                rc = pft_err(PFT_ENUMERIC, "variance %zu (component %zu) is %g (must be finite and > 0)", i,
                             i / cl, covars[i]);
                goto done;
            }
            cv[i] = covars[i];
        }
    }
    memcpy(self->means, means, K * D * sizeof(double));
    pft_free(self->weights);
    self->weights = w;
    w = NULL;
    pft_free(self->covars);
    self->covars = cv;
    cv = NULL;
    if (ch) {
        pft_free(self->chol);
        self->chol = ch;
        ch = NULL;
    }
    rc = 0;
done:
    pft_free(w);
    pft_free(cv);
    pft_free(ch);
    return rc;
}

int pft_gmm_set_params(pft_gmm_t *self, const double *weights, const double *means, const double *covars)
{
    if (!covars)
        return pft_err(PFT_EINVAL, "gmm set_params: NULL covariances");
    if (self && self->cov == PFT_COV_LOWRANK)
        return pft_err(PFT_EINVAL, "gmm set_params: model is lowrank (use pft_gmm_set_params_lowrank)");
    return set_params_impl(self, weights, means, covars, NULL);
}

int pft_gmm_set_params_chol(pft_gmm_t *self, const double *weights, const double *means, const double *chol)
{
    if (!self || !chol)
        return pft_err(PFT_EINVAL, "gmm set_params_chol: NULL argument");
    if (self->cov != PFT_COV_FULL)
        return pft_err(PFT_EINVAL, "gmm set_params_chol: model is %s, not full", pft_cov_name(self->cov));
    return set_params_impl(self, weights, means, NULL, chol);
}

int pft_gmm_set_params_lowrank(pft_gmm_t *self, const double *weights, const double *means,
                               const double *factors, const double *psi)
{
    if (!self || !weights || !means || !psi || (!factors && self->q > 0))
        return pft_err(PFT_EINVAL, "gmm set_params_lowrank: NULL argument");
    if (self->cov != PFT_COV_LOWRANK)
        return pft_err(PFT_EINVAL, "gmm set_params_lowrank: model is %s, not lowrank",
                       pft_cov_name(self->cov));
    size_t K = (size_t)self->k, D = (size_t)self->d, nw = K * D * (size_t)self->q;
    double *w = pft_alloc_array(K, sizeof(double));
    int rc = 0;
    if (!w)
        return pft_err(PFT_ENOMEM, "gmm set_params_lowrank: out of memory");
    if ((rc = check_weights(weights, self->k, w)) < 0 || (rc = check_means(means, K * D)) < 0)
        goto done;
    for (size_t i = 0; i < nw; i++)
        if (!isfinite(factors[i])) {
            rc = pft_err(PFT_EINVAL, "component %zu: factor loading (%zu,%zu) is not finite", i / (nw / K),
                         i % (nw / K) / (size_t)self->q, i % (size_t)self->q);
            goto done;
        }
    for (size_t i = 0; i < K * D; i++)
        if (!isfinite(psi[i]) || !(psi[i] >= DBL_MIN)) {
            rc = pft_err(PFT_ENUMERIC, "component %zu: noise variance %zu is %g (must be finite and > 0)",
                         i / D, i % D, psi[i]);
            goto done;
        }
    memcpy(self->weights, w, K * sizeof(double));
    memcpy(self->means, means, K * D * sizeof(double));
    if (nw)
        memcpy(self->factors, factors, nw * sizeof(double));
    memcpy(self->covars, psi, K * D * sizeof(double));
done:
    pft_free(w);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* Scoring (double precision, blocks of rows) */

/* Rows per scoring block: bounds the scratch memory of score_samples for any n. */
#define SCORE_BLOCK 1024

/* Variance of component c in dimension j (diag and spher). */
static double var_at(const pft_gmm_t *self, size_t c, size_t j)
{
    return self->cov == PFT_COV_SPHER ? self->covars[c] : self->covars[c * (size_t)self->d + j];
}

/* diag/spher: lp (m×K) = log N(x_i | μ_k, diag σ_k²) for centred rows xc (m×d) of a batch centred on
 * ctr. work holds (m + K)·2d + 2K doubles. One DGEMM of [X² | X] against [P | -2 (μ-c)∘P]. */
static void logn_diag_d(const pft_gmm_t *self, const double *xc, const double *ctr, int m, double *lp,
                        double *work)
{
    size_t K = (size_t)self->k, D = (size_t)self->d, D2 = 2 * D, M = (size_t)m;
    double *z = work, *w = z + M * D2, *mconst = w + K * D2, *lconst = mconst + K;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < D; j++) {
            double v = xc[i * D + j];
            z[i * D2 + j] = v * v;
            z[i * D2 + D + j] = v;
        }
    for (size_t c = 0; c < K; c++) {
        double smu = 0.0, slog = 0.0;
        for (size_t j = 0; j < D; j++) {
            double var = var_at(self, c, j), p = 1.0 / var, mu = self->means[c * D + j] - ctr[j];
            w[c * D2 + j] = p;
            w[c * D2 + D + j] = -2.0 * mu * p;
            smu += mu * mu * p;
            slog += log(var);
        }
        mconst[c] = smu;
        lconst[c] = slog + (double)D * LOG_2PI;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, (int)K, (int)D2, 1.0, z, (int)D2, w, (int)D2, 0.0,
                lp, (int)K);
    for (size_t i = 0; i < M; i++)
        for (size_t c = 0; c < K; c++) {
            double maha = lp[i * K + c] + mconst[c];
            lp[i * K + c] = -0.5 * ((maha > 0.0 ? maha : 0.0) + lconst[c]);
        }
}

/* full: lp (m×K) = log N(x_i | μ_k, L_k L_kᵀ) for centred rows xc (m×d) of a batch centred on ctr.
 * work holds m·d doubles. One DTRSM of the whole block per component. */
static void logn_full_d(const pft_gmm_t *self, const double *xc, const double *ctr, int m, double *lp,
                        double *work)
{
    size_t K = (size_t)self->k, D = (size_t)self->d, M = (size_t)m;
    for (size_t c = 0; c < K; c++) {
        const double *mu = self->means + c * D, *l = self->chol + c * D * D;
        double logdet = 0.0;
        for (size_t j = 0; j < D; j++)
            logdet += 2.0 * log(l[j * D + j]);
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < D; j++)
                work[i * D + j] = xc[i * D + j] - (mu[j] - ctr[j]);
        /* Y := Y · L⁻ᵀ, i.e. each row y_i = L⁻¹ (x_i - μ). */
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, (int)D, 1.0, l,
                    (int)D, work, (int)D);
        for (size_t i = 0; i < M; i++) {
            double s = 0.0;
            for (size_t j = 0; j < D; j++)
                s += work[i * D + j] * work[i * D + j];
            lp[i * K + c] = -0.5 * (s + logdet + (double)D * LOG_2PI);
        }
    }
}

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

static void lr_tab_free(lr_tab_t *t)
{
    pft_free(t->a);
    pft_free(t->b);
    pft_free(t->ipsi);
    pft_free(t->mus);
    pft_free(t->lconst);
    pft_free(t->m);
    pft_free(t->tmp);
    memset(t, 0, sizeof *t);
}

static int lr_tab_alloc(lr_tab_t *t, size_t k, size_t d, size_t q)
{
    memset(t, 0, sizeof *t);
    t->k = k, t->d = d, t->q = q, t->kq = k * q;
    t->a = pft_alloc_array(d * t->kq + 1, sizeof(double));
    t->b = pft_alloc_array(t->kq + 1, sizeof(double));
    t->ipsi = pft_alloc_array(k * d, sizeof(double));
    t->mus = pft_alloc_array(k * d, sizeof(double));
    t->lconst = pft_alloc_array(k, sizeof(double));
    t->m = pft_alloc_array(q * q + 1, sizeof(double));
    t->tmp = pft_alloc_array(d * q + 1, sizeof(double));
    if (!t->a || !t->b || !t->ipsi || !t->mus || !t->lconst || !t->m || !t->tmp) {
        lr_tab_free(t);
        return PFT_ENOMEM;
    }
    return 0;
}

/* Fills the tables from means, factors W (K×d×q) and psi (K×d); shift NULL: none. PFT_ENUMERIC if some
 * I + Wᵀ Ψ⁻¹ W cannot be factored (only with non-finite or overflowing parameters). */
static int lr_tab_fill(lr_tab_t *t, const double *means, const double *factors, const double *psi,
                       const double *shift)
{
    size_t d = t->d, q = t->q, kq = t->kq;
    for (size_t c = 0; c < t->k; c++) {
        const double *w = factors + c * d * q, *ps = psi + c * d;
        double *ip = t->ipsi + c * d, *mu = t->mus + c * d, logdet = 0.0;
        for (size_t j = 0; j < d; j++) {
            ip[j] = 1.0 / ps[j];
            mu[j] = means[c * d + j] - (shift ? shift[j] : 0.0);
            logdet += log(ps[j]);
            for (size_t l = 0; l < q; l++)
                t->a[j * kq + c * q + l] = w[j * q + l] * ip[j];
        }
        if (q > 0) {
            /* M = I + Wᵀ (Ψ⁻¹ W), L_M, then A := (Ψ⁻¹ W) L_M⁻ᵀ */
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)d, 1.0, w, (int)q,
                        t->a + c * q, (int)kq, 0.0, t->m, (int)q);
            for (size_t l = 0; l < q; l++)
                t->m[l * q + l] += 1.0;
            if (pft_la_chol_lower(t->m, (int)q) < 0)
                return pft_err(PFT_ENUMERIC, "component %zu: I + WᵀΨ⁻¹W is not positive definite", c);
            for (size_t l = 0; l < q; l++)
                logdet += 2.0 * log(t->m[l * q + l]);
            if (pft_la_tri_inverse_lower(t->m, (int)q) < 0)
                return pft_err(PFT_ENUMERIC, "component %zu: I + WᵀΨ⁻¹W is singular", c);
            for (size_t j = 0; j < d; j++)
                memcpy(t->tmp + j * q, t->a + j * kq + c * q, q * sizeof(double));
            /* A = (Ψ⁻¹W) L⁻ᵀ (the upper part of m, the unused half of the factor, is ignored) */
            pft_la_zero_upper(t->m, (int)q);
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d, (int)q, (int)q, 1.0, t->tmp, (int)q,
                        t->m, (int)q, 0.0, t->a + c * q, (int)kq);
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)d, (int)q, 1.0, t->a + c * q, (int)kq, mu, 1, 0.0,
                        t->b + c * q, 1);
        }
        t->lconst[c] = logdet + (double)d * LOG_2PI;
    }
    return 0;
}

/* lp (m×K) = log N(x_i | μ_k, W_k W_kᵀ + Ψ_k) for rows x (m×d) in the tables' coordinates; v holds m·Kq
 * doubles. One DGEMM of the block against [A_1 | … | A_K]. */
static void lr_logn(const lr_tab_t *t, const double *x, size_t m, double *lp, double *v)
{
    size_t K = t->k, d = t->d, q = t->q, kq = t->kq;
    if (q > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)kq, (int)d, 1.0, x, (int)d, t->a,
                    (int)kq, 0.0, v, (int)kq);
    for (size_t i = 0; i < m; i++) {
        const double *xi = x + i * d;
        for (size_t c = 0; c < K; c++) {
            const double *mu = t->mus + c * d, *ip = t->ipsi + c * d;
            double s = 0.0, a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
            size_t j = 0;
            for (; j + 4 <= d; j += 4) { /* four partial sums: the loop is latency-bound otherwise */
                double e0 = xi[j] - mu[j], e1 = xi[j + 1] - mu[j + 1];
                double e2 = xi[j + 2] - mu[j + 2], e3 = xi[j + 3] - mu[j + 3];
                a0 += e0 * e0 * ip[j];
                a1 += e1 * e1 * ip[j + 1];
                a2 += e2 * e2 * ip[j + 2];
                a3 += e3 * e3 * ip[j + 3];
            }
            for (; j < d; j++) {
                double e = xi[j] - mu[j];
                a0 += e * e * ip[j];
            }
            double quad = (a0 + a1) + (a2 + a3);
            for (size_t l = 0; l < q; l++) {
                double e = v[i * kq + c * q + l] - t->b[c * q + l];
                s += e * e;
            }
            double maha = quad - s;
            lp[i * K + c] = -0.5 * ((maha > 0.0 ? maha : 0.0) + t->lconst[c]);
        }
    }
}

/* Doubles of scratch logn_*_d / lr_logn need for a block of m rows. */
static size_t logn_work_d(const pft_gmm_t *self, size_t m)
{
    size_t K = (size_t)self->k, D = (size_t)self->d;
    if (self->cov == PFT_COV_LOWRANK)
        return m * K * (size_t)self->q + 1;
    return self->cov == PFT_COV_FULL ? m * D : (m + K) * 2 * D + 2 * K;
}

/* Row-wise log-sum-exp of lp (m×K) plus log weights; writes log p(x_i) to out[i]. If resp is not NULL it
 * receives the normalised responsibilities (m×K); lp and resp may alias. */
static void logsumexp_rows(const double *lp, const double *logw, size_t m, size_t K, double *out,
                           double *resp)
{
    for (size_t i = 0; i < m; i++) {
        const double *row = lp + i * K;
        double mx = -INFINITY;
        for (size_t c = 0; c < K; c++) {
            double v = row[c] + logw[c];
            if (v > mx)
                mx = v;
        }
        double s = 0.0;
        for (size_t c = 0; c < K; c++)
            s += exp(row[c] + logw[c] - mx);
        double lse = mx + log(s);
        out[i] = lse;
        if (resp)
            for (size_t c = 0; c < K; c++)
                resp[i * K + c] = exp(row[c] + logw[c] - lse);
    }
}

/* Column means of x (n×d float) in double. */
static void column_mean(const float *x, size_t n, size_t d, double *mean)
{
    memset(mean, 0, d * sizeof *mean);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            mean[j] += (double)x[i * d + j];
    for (size_t j = 0; j < d; j++)
        mean[j] /= (double)n;
}

int pft_gmm_score_samples(const pft_gmm_t *self, const float *x, int n, double *out)
{
    if (!self || !x || !out || n < 1)
        return pft_err(PFT_EINVAL, "gmm score: bad arguments (n = %d)", n);
    size_t K = (size_t)self->k, D = (size_t)self->d, N = (size_t)n;
    size_t bm = N < SCORE_BLOCK ? N : SCORE_BLOCK;
    int rc = 0;
    double *ctr = pft_alloc_array(D, sizeof(double));
    double *logw = pft_alloc_array(K, sizeof(double));
    double *xc = pft_alloc_array(bm * D, sizeof(double));
    double *lp = pft_alloc_array(bm * K, sizeof(double));
    double *work = pft_alloc_array(logn_work_d(self, bm), sizeof(double));
    lr_tab_t tab = {0};
    if (!ctr || !logw || !xc || !lp || !work ||
        (self->cov == PFT_COV_LOWRANK && lr_tab_alloc(&tab, K, D, (size_t)self->q) < 0)) {
        rc = pft_err(PFT_ENOMEM, "gmm score: out of memory");
        goto done;
    }
    for (size_t i = 0; i < N * D; i++)
        if (!isfinite(x[i])) {
            rc = pft_err(PFT_EINVAL, "gmm score: sample %zu has a non-finite value", i / D);
            goto done;
        }
    column_mean(x, N, D, ctr);
    if (self->cov == PFT_COV_LOWRANK &&
        (rc = lr_tab_fill(&tab, self->means, self->factors, self->covars, ctr)) < 0) {
        rc = pft_err_wrap(rc, "gmm score: ");
        goto done;
    }
    for (size_t c = 0; c < K; c++)
        logw[c] = self->weights[c] > 0.0 ? log(self->weights[c]) : -INFINITY;
    for (size_t r0 = 0; r0 < N; r0 += bm) {
        size_t m = N - r0 < bm ? N - r0 : bm;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < D; j++)
                xc[i * D + j] = (double)x[(r0 + i) * D + j] - ctr[j];
        if (self->cov == PFT_COV_FULL)
            logn_full_d(self, xc, ctr, (int)m, lp, work);
        else if (self->cov == PFT_COV_LOWRANK)
            lr_logn(&tab, xc, m, lp, work);
        else
            logn_diag_d(self, xc, ctr, (int)m, lp, work);
        logsumexp_rows(lp, logw, m, K, out + r0, NULL);
    }
done:
    lr_tab_free(&tab);
    pft_free(ctr);
    pft_free(logw);
    pft_free(xc);
    pft_free(lp);
    pft_free(work);
    return rc;
}

int pft_gmm_score(const pft_gmm_t *self, const float *x, int n, double *avg_loglik)
{
    if (!self || !x || !avg_loglik || n < 1)
        return pft_err(PFT_EINVAL, "gmm score: bad arguments (n = %d)", n);
    double *ll = pft_alloc_array((size_t)n, sizeof(double));
    if (!ll)
        return pft_err(PFT_ENOMEM, "gmm score: out of memory");
    int rc = pft_gmm_score_samples(self, x, n, ll);
    if (rc == 0) {
        double s = 0.0;
        for (int i = 0; i < n; i++)
            s += ll[i];
        *avg_loglik = s / n;
    }
    pft_free(ll);
    return rc;
}

int pft_gmm_bic(const pft_gmm_t *self, const float *x, int n, double *bic)
{
    if (!bic)
        return pft_err(PFT_EINVAL, "gmm bic: NULL output");
    double avg;
    int rc = pft_gmm_score(self, x, n, &avg);
    if (rc < 0)
        return rc;
    *bic = -2.0 * avg * n + (double)pft_gmm_n_free_params(self) * log((double)n);
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Sampling */

/* Component counts of n draws from the weights: one categorical draw per sample, so the counts are
 * multinomial. Rounding in the cumulative sum falls to the last component with positive weight. */
static void sample_counts(const pft_gmm_t *self, pft_rng_t *rng, int n, int *counts)
{
    int K = self->k, last = K - 1;
    while (last > 0 && !(self->weights[last] > 0.0))
        last--;
    memset(counts, 0, (size_t)K * sizeof *counts);
    for (int i = 0; i < n; i++) {
        double u = pft_rng_uniform(rng), acc = 0.0;
        int c;
        for (c = 0; c < last; c++) {
            acc += self->weights[c];
            if (u < acc)
                break;
        }
        counts[c]++;
    }
}

int pft_gmm_sample(const pft_gmm_t *self, pft_rng_t *rng, int n, float *out)
{
    if (!self || !rng || n < 0 || (!out && n > 0))
        return pft_err(PFT_EINVAL, "gmm sample: bad arguments (n = %d)", n);
    if (n == 0)
        return 0;
    size_t K = (size_t)self->k, D = (size_t)self->d;
    int rc = 0;
    size_t Q = (size_t)self->q, zmax = 0;
    int *counts = pft_alloc_array(K, sizeof(int));
    float *lf = self->cov == PFT_COV_FULL ? pft_alloc_array(D * D, sizeof(float)) : NULL;
    float *sd = pft_alloc_array(D, sizeof(float));
    float *wf = Q ? pft_alloc_array(D * Q, sizeof(float)) : NULL, *z = NULL;
    if (!counts || !sd || (self->cov == PFT_COV_FULL && !lf) || (Q && !wf)) {
        rc = pft_err(PFT_ENOMEM, "gmm sample: out of memory");
        goto done;
    }
    sample_counts(self, rng, n, counts);
    for (size_t c = 0; c < K; c++)
        zmax = (size_t)counts[c] > zmax ? (size_t)counts[c] : zmax;
    if (Q && !(z = pft_alloc_array(zmax * Q, sizeof(float)))) {
        rc = pft_err(PFT_ENOMEM, "gmm sample: out of memory");
        goto done;
    }
    float *row = out;
    for (size_t c = 0; c < K; c++) {
        size_t m = (size_t)counts[c];
        if (m == 0)
            continue;
        const double *mu = self->means + c * D;
        pft_rng_normal_fill(rng, row, m * D);
        if (self->cov == PFT_COV_FULL) {
            const double *l = self->chol + c * D * D;
            for (size_t j = 0; j < D * D; j++)
                lf[j] = (float)l[j];
            /* Z := Z · Lᵀ, i.e. each row z_i becomes L z_i. */
            cblas_strmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)m, (int)D, 1.0f,
                        lf, (int)D, row, (int)D);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < D; j++)
                    row[i * D + j] = (float)((double)row[i * D + j] + mu[j]);
        } else if (self->cov == PFT_COV_LOWRANK) {
            /* rows hold ε: scale by Ψ^{1/2}, add Z Wᵀ (one SGEMM), then μ */
            const double *psi = self->covars + c * D, *w = self->factors + c * D * Q;
            for (size_t j = 0; j < D; j++)
                sd[j] = (float)sqrt(psi[j]);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < D; j++)
                    row[i * D + j] *= sd[j];
            if (Q) {
                for (size_t j = 0; j < D * Q; j++)
                    wf[j] = (float)w[j];
                pft_rng_normal_fill(rng, z, m * Q);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)D, (int)Q, 1.0f, z, (int)Q,
                            wf, (int)Q, 1.0f, row, (int)D);
            }
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < D; j++)
                    row[i * D + j] = (float)((double)row[i * D + j] + mu[j]);
        } else {
            for (size_t j = 0; j < D; j++)
                sd[j] = (float)sqrt(var_at(self, c, j));
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < D; j++)
                    row[i * D + j] = (float)((double)sd[j] * row[i * D + j] + mu[j]);
        }
        row += m * D;
    }
done:
    pft_free(counts);
    pft_free(lf);
    pft_free(sd);
    pft_free(wf);
    pft_free(z);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */
/* EM
 *
 * Precision and speed plan (float32 data, double parameters):
 * - Centre: every dimension is shifted by the data mean, except dimensions where at least a quarter of
 *   the values are exactly zero (post-ReLU features), which keep 0 as their centre, so exact zeros stay
 *   exact zeros in the working copy.
 * - diag/spher: one fused pass over the data per iteration, in chunks of rows that stay in L2 cache:
 *   E-step distances Σ_j (x_j/σ_kj - μ_kj/σ_kj)² computed directly (no expansion, so no cancellation) by a
 *   register-blocked SIMD kernel, row-wise log-sum-exp (n×K exps), then the M-step statistics of the
 *   same chunk, Σ r (x - a) and Σ r (x - a)², about the previous means a, again directly. The variance is
 *   S2/N - (S1/N)², where S1/N is the (small) step of the mean, so E[x²] - μ² never cancels
 *   (scikit-learn issue #30382). Chunk sums are float, accumulated in double across chunks.
 *   Measured on PACS class 0 (1383×1280, K=10): OpenBLAS SGEMM on these skinny shapes (n×K, K×d) is
 *   bound by packing the data matrix and cost two to three times this pass, and the expanded form
 *   x²p - 2xμp + μ²p in float gave cell errors up to 1 nat and negative variances with mean centring.
 *   Chunks are spread over openblas_get_num_threads() threads with a static partition and an ordered
 *   reduction, so results are bit-identical for a fixed thread count.
 * - full: M-step in double (DSYRK of √r-weighted centred rows, DPOTRF): when N_k < d the sample
 *   covariance has d - N_k eigenvalues near zero, and float SYRK noise (~u‖Σ‖) exceeds a typical reg_covar,
 *   which would wreck log det Σ. E-step: one STRSM per component over the whole batch with a float copy of
 *   the factor (half the time of DTRSM); it only steers the responsibilities (the reported log-likelihood
 *   is scored in double) and gave the same fit as a double E-step on PACS class 0, K=5.
 * - Variances are clamped at 0 before reg_covar is added, so they never go below reg_covar.
 * - lowrank (mixture of factor analysers), never forming Σ (d×d):
 *   start: per component, PCA of its k-means cluster by randomized subspace iteration (q + 10 directions,
 *   3 power steps, seeded from the run's generator): W = V_q (Λ_q - σ²)^{1/2} with σ² the mean discarded
 *   eigenvalue (probabilistic PCA), Ψ = diag(S) - diag(W Wᵀ), so diag Σ = diag S.
 *   E-step (double): the Woodbury form of the scoring section over blocks of rows, one DGEMM per block
 *   against [A_1 | … | A_K]; its two quadratic forms subtract (cancellation), so it stays in double.
 *   M-step (ECM, Meng & Rubin 1993): μ_k = weighted mean (exact), then factor-analysis EM steps for
 *   (W_k, Ψ_k) given the weighted covariance S_k (Ghahramani & Hinton 1996, with μ fixed), each of which
 *   raises the component's weighted log-likelihood: with P = Ψ⁻¹W, M = I + WᵀP, C = S P and G = M + PᵀC,
 *     W' = C G⁻¹ M,   Ψ' = diag(S) - rowsum(W' ∘ C M⁻¹),
 *   O(d·q²) besides the product C = S P. S is never formed for K > 1: C = Ỹᵀ(Ỹ P) over the weighted
 *   centred rows Ỹ (S = ỸᵀỸ), two SGEMMs, O(n_k·d·q); K = 1 forms S once (SSYRK) when that is cheaper
 *   for the expected number of steps, then C = S P is one SGEMM. Float is enough there: C only moves the
 *   parameters, and the log-likelihood below comes out within ~1e-7 of its size (measured on PACS: 2e-5
 *   nats of ~3800). Up to LR_INNER steps per M-step (one step per E-step took 73 EM iterations for K = 5
 *   on PACS, ten took 8, at a third of the time), accelerated by SQUAREM (lr_fa_iterate).
 *   Ψ is floored at LR_PSI_FLOOR·S_jj (no Heywood collapse), then reg_covar is added. A re-seeded
 *   component (W = 0 is a fixed point of the step) gets a fresh PCA start.
 *   K = 1: the responsibilities never change, so EM is factor-analysis steps on fixed rows, to
 *   convergence; the mean log-likelihood of the parameters entering each step comes from the same
 *   products, -½[d log 2π + log det Σ + Σ_j S_jj/ψ_j - tr(M⁻¹ PᵀC)], and drives the convergence test.
 *   Products with small q×q matrices use explicit inverses and DGEMM: OpenBLAS's triangular solves on
 *   d×q right-hand sides took a quarter of the K = 1 fit. */

/* Largest |x| fit accepts: squares and their sums over 1e7 rows stay finite in float. */
#define PFT_GMM_MAX_ABS 1e15
#define EM_NK_EMPTY 1.0     /* a component with less responsibility mass (in samples) is re-seeded */
#define EM_SPARSE_FRAC 0.25 /* dimensions with at least this fraction of exact zeros are centred at 0 */
#define EM_MAX_THREADS 16

#define DPAD PFT_LA_PAD /* working rows are padded to a multiple of this many floats */
#define RB PFT_LA_ROWS  /* the distance kernel works on blocks of this many rows */
#define FLUSH_CHUNKS 1  /* chunks whose statistics are summed in float before going into double */
#define CHUNK 128       /* rows per chunk of the fused pass (multiple of RB) */

typedef struct em_t em_t;

/* Per-family EM steps: a new covariance family adds one row to em_family(). */
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
    float *s1, *s2;  /* K×dp sums of the last few chunks (float) */
    float *dist;     /* CHUNK×K distances */
    float *rf;       /* CHUNK×K responsibilities */
} diag_worker_t;

struct em_t {
    size_t n, d, k;
    size_t dp; /* padded row stride of xf (multiple of DPAD) */
    pft_cov_t cov;
    const float *x; /* raw data n×d */
    double *ctr;    /* d: centre of the working coordinates */
    float *xf;      /* round_up(n, RB)×dp centred data (float, zero padded) */
    double *xd;     /* full: n×d centred data (double) */
    double *gvar;   /* d: data variance per dimension (re-seeding) */
    double reg;     /* variance added to every covariance: max(reg_covar, tiny floor) */
    pft_gmm_t *m;   /* current model; means in centred coordinates */
    double *logw;   /* K log weights */
    double *resp;   /* n×K responsibilities (full: log-probabilities first) */
    double *ll;     /* n: log p(x_i) of the last E-step */
    double *nk;     /* K responsibility mass */
    /* diag/spher */
    float *muf;      /* K×dp means (the shift a of the statistics), float, zero padded */
    float *sf, *msf; /* K×dp 1/σ and μ/σ, float, zero padded */
    double *lconst;  /* K: Σ log σ² + d log 2π */
    int stats_valid; /* S1/S2 of workers[0] hold the statistics of the last E-step */
    int nthreads;
    diag_worker_t workers[EM_MAX_THREADS];
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

/* ---- diag / spher ---- */

/* One thread's share of the fused pass. */
static void *diag_worker_run(void *arg)
{
    diag_worker_t *w = arg;
    em_t *em = w->em;
    size_t n = em->n, K = em->k, dp = em->dp;
    memset(w->S1, 0, K * dp * sizeof(double));
    memset(w->S2, 0, K * dp * sizeof(double));
    memset(w->s1, 0, K * dp * sizeof(float));
    memset(w->s2, 0, K * dp * sizeof(float));
    for (size_t ch = w->c0; ch < w->c1; ch++) {
        size_t i0 = ch * CHUNK, m = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *xc = em->xf + i0 * dp;
        if (w->estep) {
            size_t mr = (m + RB - 1) / RB * RB; /* xf has round_up(n, RB) rows */
            pft_la_sqdist(xc, mr, dp, em->sf, em->msf, K, w->dist);
            for (size_t i = 0; i < m; i++) {
                double *v = em->resp + (i0 + i) * K, mx = -INFINITY;
                for (size_t c = 0; c < K; c++) {
                    v[c] = em->logw[c] - 0.5 * ((double)w->dist[i * K + c] + em->lconst[c]);
                    if (v[c] > mx)
                        mx = v[c];
                }
                double s = 0.0;
                for (size_t c = 0; c < K; c++) {
                    v[c] = exp(v[c] - mx);
                    s += v[c];
                }
                em->ll[i0 + i] = mx + log(s);
                for (size_t c = 0; c < K; c++)
                    v[c] /= s;
            }
        }
        for (size_t i = 0; i < m * K; i++)
            w->rf[i] = (float)em->resp[i0 * K + i];
        pft_la_wstats(xc, m, dp, w->rf, K, em->muf, w->s1, w->s2);
        /* Float sums over at most FLUSH_CHUNKS chunks, then into the double totals. */
        if ((ch - w->c0) % FLUSH_CHUNKS == FLUSH_CHUNKS - 1 || ch + 1 == w->c1) {
            for (size_t q = 0; q < K * dp; q++) {
                w->S1[q] += w->s1[q];
                w->S2[q] += w->s2[q];
            }
            memset(w->s1, 0, K * dp * sizeof(float));
            memset(w->s2, 0, K * dp * sizeof(float));
        }
    }
    return NULL;
}

/* Fused pass over all chunks: (E-step and) statistics; the sums end in workers[0].S1/S2. */
static void diag_pass(em_t *em, int estep)
{
    size_t K = em->k, dp = em->dp;
    for (size_t c = 0; c < K; c++) {
        double sl = 0.0;
        for (size_t j = 0; j < em->d; j++) {
            double var = var_at(em->m, c, j);
            double mu = em->m->means[c * em->d + j], is = 1.0 / sqrt(var);
            em->muf[c * dp + j] = (float)mu;
            em->sf[c * dp + j] = (float)is;
            em->msf[c * dp + j] = (float)(mu * is);
            sl += log(var);
        }
        em->lconst[c] = sl + (double)em->d * LOG_2PI;
        em->logw[c] = em->m->weights[c] > 0.0 ? log(em->m->weights[c]) : -INFINITY;
    }
    pthread_t tid[EM_MAX_THREADS];
    int started[EM_MAX_THREADS] = {0};
    for (int t = 0; t < em->nthreads; t++) {
        em->workers[t].estep = estep;
        if (t > 0)
            started[t] = pthread_create(&tid[t], NULL, diag_worker_run, &em->workers[t]) == 0;
    }
    diag_worker_run(&em->workers[0]);
    for (int t = 1; t < em->nthreads; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            diag_worker_run(&em->workers[t]); /* could not start a thread: same work, same result */
    }
    double *S1 = em->workers[0].S1, *S2 = em->workers[0].S2;
    for (int t = 1; t < em->nthreads; t++)
        for (size_t q = 0; q < K * dp; q++) {
            S1[q] += em->workers[t].S1[q];
            S2[q] += em->workers[t].S2[q];
        }
}

static int diag_estep(em_t *em, double *mean_ll)
{
    diag_pass(em, 1);
    em->stats_valid = 1;
    double s = 0.0;
    for (size_t i = 0; i < em->n; i++)
        s += em->ll[i];
    if (!isfinite(s))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = s / (double)em->n;
    return 0;
}

static int diag_mstep(em_t *em)
{
    size_t d = em->d, dp = em->dp, K = em->k;
    pft_gmm_t *m = em->m;
    if (!em->stats_valid)
        diag_pass(em, 0);
    em->stats_valid = 0;
    const double *S1 = em->workers[0].S1, *S2 = em->workers[0].S2;
    for (size_t c = 0; c < K; c++) {
        double nk = em->nk[c], vsum = 0.0;
        if (!(nk > 0.0))
            continue; /* re-seeded by the caller */
        for (size_t j = 0; j < d; j++) {
            double step = S1[c * dp + j] / nk, v = S2[c * dp + j] / nk - step * step;
            v = v > 0.0 ? v : 0.0;
            m->means[c * d + j] = (double)em->muf[c * dp + j] + step;
            if (em->cov == PFT_COV_DIAG)
                m->covars[c * d + j] = v + em->reg;
            vsum += v;
        }
        if (em->cov == PFT_COV_SPHER)
            m->covars[c] = vsum / (double)d + em->reg;
    }
    return 0;
}

static void diag_reseed(em_t *em, size_t c, size_t row)
{
    size_t d = em->d;
    pft_gmm_t *m = em->m;
    double mv = 0.0;
    for (size_t j = 0; j < d; j++) {
        m->means[c * d + j] = (double)em->x[row * d + j] - em->ctr[j];
        mv += em->gvar[j];
        if (em->cov == PFT_COV_DIAG)
            m->covars[c * d + j] = em->gvar[j] + em->reg;
    }
    if (em->cov == PFT_COV_SPHER)
        m->covars[c] = mv / (double)d + em->reg;
}

/* ---- full ---- */

static int full_estep(em_t *em, double *mean_ll)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    for (size_t c = 0; c < K; c++) {
        const double *mu = m->means + c * d, *l = m->chol + c * d * d;
        double logdet = 0.0, logw = m->weights[c] > 0.0 ? log(m->weights[c]) : -INFINITY;
        for (size_t j = 0; j < d; j++)
            logdet += 2.0 * log(l[j * d + j]);
        for (size_t q = 0; q < d * d; q++)
            em->lf[q] = (float)l[q];
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                em->yf[i * d + j] = (float)(em->xd[i * d + j] - mu[j]);
        /* Y := Y · L⁻ᵀ: row i becomes L⁻¹ (x_i - μ). */
        cblas_strsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)n, (int)d, 1.0f,
                    em->lf, (int)d, em->yf, (int)d);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            const float *y = em->yf + i * d;
            for (size_t j = 0; j < d; j++)
                s += (double)y[j] * y[j];
            em->resp[i * K + c] = logw - 0.5 * (s + logdet + (double)d * LOG_2PI);
        }
    }
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double *v = em->resp + i * K, mx = -INFINITY;
        for (size_t c = 0; c < K; c++)
            if (v[c] > mx)
                mx = v[c];
        double s = 0.0;
        for (size_t c = 0; c < K; c++)
            s += exp(v[c] - mx);
        double lse = mx + log(s);
        for (size_t c = 0; c < K; c++)
            v[c] = exp(v[c] - lse);
        em->ll[i] = lse;
        total += lse;
    }
    if (!isfinite(total))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = total / (double)n;
    return 0;
}

/* Factors covars of component c into chol, adding diagonal jitter when the factorisation fails.
 * Returns 0, or PFT_ENUMERIC when even the largest jitter fails. */
static int full_factor(em_t *em, size_t c)
{
    size_t d = em->d;
    double *cov = em->m->covars + c * d * d, *l = em->m->chol + c * d * d, tr = 0.0;
    for (size_t j = 0; j < d; j++)
        tr += cov[j * d + j];
    double jitter = 1e-10 * tr / (double)d;
    for (int attempt = 0; attempt < 8; attempt++) {
        memcpy(l, cov, d * d * sizeof *l);
        if (pft_la_chol_lower(l, (int)d) == 0)
            return 0;
        for (size_t j = 0; j < d; j++)
            cov[j * d + j] += jitter;
        jitter *= 10.0;
    }
    pft_err_clear();
    return PFT_ENUMERIC;
}

static int full_mstep(em_t *em)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)d, (int)n, 1.0, em->resp, (int)K,
                em->xd, (int)d, 0.0, m->means, (int)d);
    for (size_t c = 0; c < K; c++) {
        double nk = em->nk[c];
        if (!(nk > 0.0))
            continue;
        double *mu = m->means + c * d, *cov = m->covars + c * d * d;
        for (size_t j = 0; j < d; j++)
            mu[j] /= nk;
        /* Rows √r_i (x_i - μ). A row whose whole contribution r‖x-μ‖² is at most 1e-3·reg·N_k/n is
         * dropped: together they move no eigenvalue by more than 1e-3·reg, and most rows of a sharp
         * mixture go. */
        size_t rows = 0;
        double drop = 1e-3 * em->reg * nk / (double)n;
        for (size_t i = 0; i < n; i++) {
            double r = em->resp[i * K + c];
            if (r == 0.0)
                continue;
            double *w = em->work + rows * d, s = 0.0;
            for (size_t j = 0; j < d; j++) {
                w[j] = em->xd[i * d + j] - mu[j];
                s += w[j] * w[j];
            }
            if (r * s <= drop)
                continue;
            double sr = sqrt(r);
            for (size_t j = 0; j < d; j++)
                w[j] *= sr;
            rows++;
        }
        if (rows > 0)
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, (int)d, (int)rows, 1.0 / nk, em->work, (int)d,
                        0.0, cov, (int)d);
        else
            memset(cov, 0, d * d * sizeof *cov);
        for (size_t j = 0; j < d; j++)
            cov[j * d + j] += em->reg;
        /* Only the lower triangle is kept up to date during EM; pft_gmm_fit mirrors it at the end. */
        if (full_factor(em, c) < 0)
            em->nk[c] = 0.0; /* not positive definite even with jitter: re-seeded by the caller */
    }
    return 0;
}

static void full_reseed(em_t *em, size_t c, size_t row)
{
    size_t d = em->d;
    pft_gmm_t *m = em->m;
    double *cov = m->covars + c * d * d, *l = m->chol + c * d * d;
    memset(cov, 0, d * d * sizeof *cov);
    memset(l, 0, d * d * sizeof *l);
    for (size_t j = 0; j < d; j++) {
        m->means[c * d + j] = em->xd[row * d + j];
        cov[j * d + j] = em->gvar[j] + em->reg;
        l[j * d + j] = sqrt(cov[j * d + j]);
    }
}

/* ---- lowrank (mixture of factor analysers) ---- */

#define LR_OVERSAMPLE 10   /* extra directions of the randomized PCA start */
#define LR_POWER 3         /* subspace iterations of the PCA start */
#define LR_PSI_FLOOR 1e-3  /* ψ_j ≥ this fraction of the component's variance S_jj (before reg_covar) */
#define LR_BLOCK 512       /* rows per E-step block */
#define LR_SMAT_MAX_D 4096 /* K = 1 forms S (d×d float) only up to this dimension */
#define LR_EXPECT_ITERS 40 /* factor-analysis steps assumed when choosing between S and Ỹ */
#define LR_INNER 10        /* K > 1: factor-analysis steps per M-step at most (ECM with several CM cycles) */

static int lowrank_estep(em_t *em, double *mean_ll)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    int rc = lr_tab_fill(&em->tab, m->means, m->factors, m->covars, NULL);
    if (rc < 0)
        return pft_err_wrap(rc, "gmm fit: ");
    for (size_t c = 0; c < K; c++)
        em->logw[c] = m->weights[c] > 0.0 ? log(m->weights[c]) : -INFINITY;
    double total = 0.0;
    for (size_t i0 = 0; i0 < n; i0 += LR_BLOCK) {
        size_t mb = n - i0 < LR_BLOCK ? n - i0 : LR_BLOCK;
        lr_logn(&em->tab, em->xd + i0 * d, mb, em->resp + i0 * K, em->lv);
        logsumexp_rows(em->resp + i0 * K, em->logw, mb, K, em->ll + i0, em->resp + i0 * K);
        for (size_t i = 0; i < mb; i++)
            total += em->ll[i0 + i];
    }
    if (!isfinite(total))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = total / (double)n;
    return 0;
}

/* Weighted centred rows of component c, √(r_i/N_k) (x_i - μ_k), into em->yf (float), diag S into em->sdiag.
 * Rows with r‖x-μ‖² ≤ 1e-3·reg·N_k/n are dropped (as in full_mstep) unless K = 1. With K = 1 (and a
 * dimension where it pays) S = ỸᵀỸ is formed too (em->smat). Sets em->rows. */
static void lr_gather(em_t *em, size_t c)
{
    size_t n = em->n, d = em->d, K = em->k, rows = 0;
    double nk = em->nk[c], drop = K == 1 ? -1.0 : 1e-3 * em->reg * nk / (double)n;
    const double *mu = em->m->means + c * d;
    double *e = em->sb; /* d doubles of scratch */
    memset(em->sdiag, 0, d * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double r = em->resp[i * K + c], s = 0.0;
        if (r == 0.0 && K > 1)
            continue;
        for (size_t j = 0; j < d; j++) {
            e[j] = em->xd[i * d + j] - mu[j];
            s += e[j] * e[j];
        }
        if (r * s <= drop)
            continue;
        double sr = sqrt(r / nk);
        float *w = em->yf + rows * d;
        for (size_t j = 0; j < d; j++) {
            double v = e[j] * sr;
            w[j] = (float)v;
            em->sdiag[j] += v * v;
        }
        rows++;
    }
    em->rows = rows;
    em->smat_valid = 0;
    if (em->smat && rows > 0) {
        cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, (int)d, (int)rows, 1.0f, em->yf, (int)d, 0.0f,
                    em->smat, (int)d);
        for (size_t a = 0; a < d; a++)
            for (size_t b = a + 1; b < d; b++)
                em->smat[a * d + b] = em->smat[b * d + a];
        em->smat_valid = 1;
    }
}

/* out (d×cols, double) = S · in (d×cols, double) for the rows of the last lr_gather, in float: through S
 * when it was formed, else as Ỹᵀ (Ỹ in). */
static void lr_smul(em_t *em, const double *in, double *out, size_t cols)
{
    size_t d = em->d, rows = em->rows;
    for (size_t i = 0; i < d * cols; i++)
        em->pf[i] = (float)in[i];
    if (em->smat_valid) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)cols, (int)d, 1.0f, em->smat,
                    (int)d, em->pf, (int)cols, 0.0f, em->cf, (int)cols);
    } else if (rows > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)d, 1.0f, em->yf,
                    (int)d, em->pf, (int)cols, 0.0f, em->tf, (int)cols);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)cols, (int)rows, 1.0f, em->yf,
                    (int)d, em->tf, (int)cols, 0.0f, em->cf, (int)cols);
    } else {
        memset(em->cf, 0, d * cols * sizeof(float));
    }
    for (size_t i = 0; i < d * cols; i++)
        out[i] = em->cf[i];
}

/* Ψ_j = max(S_jj - e_j, LR_PSI_FLOOR·S_jj) + reg for component c (e: the variance the factors explain). */
static void lr_set_psi(em_t *em, size_t c, const double *explained)
{
    double *psi = em->m->covars + c * em->d;
    for (size_t j = 0; j < em->d; j++) {
        double s = em->sdiag[j], v = s - explained[j];
        psi[j] = (v > LR_PSI_FLOOR * s ? v : LR_PSI_FLOOR * s) + em->reg;
    }
}

/* PCA start of component c from the rows of the last lr_gather (randomized subspace iteration; see the
 * plan above). */
static int lr_pca_start(em_t *em, size_t c)
{
    size_t d = em->d, q = em->q, r = em->r;
    double *W = em->m->factors + c * d * q, *ex = em->sb; /* ex: d explained variances */
    double *rr = em->sq + 5 * q * q, *ev = rr + r * r, *ut = ev + r;
    int rc;
    if (q == 0) {
        memset(ex, 0, d * sizeof *ex);
        lr_set_psi(em, c, ex);
        return 0;
    }
    for (size_t i = 0; i < d * r; i++)
        em->om[i] = pft_rng_normal(em->rng);
    for (int it = 0; it < LR_POWER; it++) {
        lr_smul(em, em->om, em->cw, r); /* Ω := orth(S Ω) */
        memcpy(em->om, em->cw, d * r * sizeof(double));
        if ((rc = pft_la_orthonormalize(em->om, (int)d, (int)r)) < 0)
            return rc;
    }
    /* Rayleigh-Ritz: the top q eigenpairs of Ωᵀ S Ω */
    lr_smul(em, em->om, em->cw, r);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)r, (int)d, 1.0, em->om, (int)r, em->cw,
                (int)r, 0.0, rr, (int)r);
    if ((rc = pft_la_eigh(rr, (int)r, ev)) < 0)
        return rc;
    double tr = 0.0, top = 0.0;
    for (size_t j = 0; j < d; j++)
        tr += em->sdiag[j];
    for (size_t l = 0; l < q; l++)
        top += ev[r - 1 - l] > 0.0 ? ev[r - 1 - l] : 0.0;
    double sigma2 = d > q ? (tr - top) / (double)(d - q) : 0.0;
    sigma2 = sigma2 > 0.0 ? sigma2 : 0.0;
    /* A direction without support still gets a small loading, so that EM can grow it (W = 0 is fixed). */
    double small = 1e-4 * (tr / (double)d + em->reg);
    for (size_t l = 0; l < q; l++) {
        double lam = ev[r - 1 - l] - sigma2, sc = sqrt(lam > small ? lam : small);
        for (size_t m2 = 0; m2 < r; m2++)
            ut[m2 * q + l] = rr[(r - 1 - l) * r + m2] * sc;
    }
    /* W = Ω U_q (Λ_q - σ²)^{1/2} */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)r, 1.0, em->om, (int)r, ut,
                (int)q, 0.0, W, (int)q);
    for (size_t j = 0; j < d; j++) {
        double e = 0.0;
        for (size_t l = 0; l < q; l++)
            e += W[j * q + l] * W[j * q + l];
        ex[j] = e;
    }
    lr_set_psi(em, c, ex);
    return 0;
}

/* One factor-analysis EM step for component c from the rows of the last lr_gather; *ll (if not NULL)
 * receives the mean log-likelihood of those weighted rows under the Gaussian of the parameters entering
 * the step. PFT_ENUMERIC if a q×q factorisation fails (parameters kept). */
static int lr_fa_step(em_t *em, size_t c, double *ll)
{
    size_t d = em->d, q = em->q;
    double *W = em->m->factors + c * d * q, *psi = em->m->covars + c * d;
    double *M = em->sq, *Lm = M + q * q, *G = Lm + q * q, *Gi = G + q * q, *Mi = Gi + q * q;
    if (q == 0) {
        double s = 0.0, quad = 0.0;
        for (size_t j = 0; j < d; j++) {
            s += log(psi[j]);
            quad += em->sdiag[j] / psi[j];
        }
        if (ll)
            *ll = -0.5 * ((double)d * LOG_2PI + s + quad);
        memset(em->sb, 0, d * sizeof(double));
        lr_set_psi(em, c, em->sb);
        return 0;
    }
    for (size_t j = 0; j < d; j++)
        for (size_t l = 0; l < q; l++)
            em->pw[j * q + l] = W[j * q + l] / psi[j];
    /* M = I + WᵀΨ⁻¹W; C = S P; G = M + PᵀC */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)d, 1.0, W, (int)q, em->pw,
                (int)q, 0.0, M, (int)q);
    for (size_t l = 0; l < q; l++)
        M[l * q + l] += 1.0;
    lr_smul(em, em->pw, em->cw, q);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)d, 1.0, em->pw, (int)q, em->cw,
                (int)q, 0.0, G, (int)q);
    for (size_t a = 0; a < q; a++)
        for (size_t b = 0; b <= a; b++) {
            double g = 0.5 * (G[a * q + b] + G[b * q + a]), mm = 0.5 * (M[a * q + b] + M[b * q + a]);
            G[a * q + b] = G[b * q + a] = g + mm;
            M[a * q + b] = M[b * q + a] = mm;
        }
    memcpy(Lm, M, q * q * sizeof(double));
    if (pft_la_chol_lower(Lm, (int)q) < 0 || pft_la_chol_lower(G, (int)q) < 0 ||
        pft_la_spd_inverse(G, Gi, (int)q) < 0 || pft_la_spd_inverse(Lm, Mi, (int)q) < 0) {
        pft_err_clear();
        return PFT_ENUMERIC;
    }
    /* C M⁻¹ (= S βᵀ with β = M⁻¹ Wᵀ Ψ⁻¹), and the log-likelihood of the entering parameters */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)q, 1.0, em->cw, (int)q, Mi,
                (int)q, 0.0, em->sb, (int)q);
    if (ll) {
        double logdet = 0.0, quad = 0.0, tr = 0.0;
        for (size_t l = 0; l < q; l++)
            logdet += 2.0 * log(Lm[l * q + l]);
        for (size_t j = 0; j < d; j++) {
            logdet += log(psi[j]);
            quad += em->sdiag[j] / psi[j];
        }
        for (size_t i = 0; i < d * q; i++)
            tr += em->pw[i] * em->sb[i];
        *ll = -0.5 * ((double)d * LOG_2PI + logdet + quad - tr);
    }
    /* W' = C (G⁻¹ M) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)q, (int)q, (int)q, 1.0, Gi, (int)q, M, (int)q,
                0.0, Lm, (int)q);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d, (int)q, (int)q, 1.0, em->cw, (int)q, Lm,
                (int)q, 0.0, em->xw, (int)q);
    /* Ψ' = diag S - rowsum(W' ∘ C M⁻¹) */
    double *ex = em->pw; /* P is no longer needed */
    for (size_t j = 0; j < d; j++) {
        double e = 0.0;
        for (size_t l = 0; l < q; l++)
            e += em->xw[j * q + l] * em->sb[j * q + l];
        ex[j] = e;
    }
    memcpy(W, em->xw, d * q * sizeof(double));
    lr_set_psi(em, c, ex);
    return 0;
}

/* Factor-analysis steps for component c on the rows (and S) of the last lr_gather, accelerated by SQUAREM
 * (Varadhan & Roland 2008, scheme S3): from θ0, two steps give θ1, θ2; r = θ1 - θ0, v = θ2 - θ1 - r,
 * α = -‖r‖/‖v‖ (at most -1), θ' = θ0 - 2αr + α²v with Ψ' projected onto its floor, then one more step
 * from θ'. The log-likelihood of θ' comes with that step; if it is below that of θ1 (or not finite) the
 * cycle falls back to θ2, plain EM. θ = (W_c, Ψ_c); a cycle costs three steps. Runs at most max_steps
 * steps (*steps says how many) and stops (*converged = 1) when the mean log-likelihood of the weighted
 * rows at a cycle's θ0 changes less than tol, or decreases: the products with S run in float and resolve
 * it to about 1e-7 of its size (measured: 2e-5 nats on PACS, 5e-6 on 20000 rows of d = 30), so a tol below
 * that ends at the float optimum. PFT_ENUMERIC if the first step fails (parameters unchanged); a later
 * failure keeps the last good parameters. */
static int lr_fa_iterate(em_t *em, size_t c, int max_steps, double tol, int *steps, int *converged)
{
    size_t d = em->d, nw = d * em->q, nt = nw + d;
    double *W = em->m->factors + c * nw, *psi = em->m->covars + c * d;
    double *t0 = em->th, *t1 = t0 + nt, *t2 = t1 + nt;
    double prev = -INFINITY, ll0, ll1, llp;
    *steps = 0;
    *converged = 0;
#define LR_SAVE(t) (memcpy((t), W, nw * sizeof(double)), memcpy((t) + nw, psi, d * sizeof(double)))
#define LR_LOAD(t) (memcpy(W, (t), nw * sizeof(double)), memcpy(psi, (t) + nw, d * sizeof(double)))
    while (*steps < max_steps) {
        LR_SAVE(t0);
        if (lr_fa_step(em, c, &ll0) < 0)
            return *steps ? 0 : PFT_ENUMERIC; /* keep the last good parameters */
        (*steps)++;
        /* In exact arithmetic ll0 never decreases from cycle to cycle; a decrease is the rounding of the
         * float products with S, so the optimum is reached as closely as they resolve it. */
        if ((tol > 0.0 && fabs(ll0 - prev) < tol) || ll0 < prev) {
            *converged = 1;
            break;
        }
        prev = ll0;
        if (*steps + 2 > max_steps)
            continue; /* no room for a cycle: plain steps */
        LR_SAVE(t1);
        if (lr_fa_step(em, c, &ll1) < 0)
            break;
        (*steps)++;
        LR_SAVE(t2);
        double rr = 0.0, vv = 0.0;
        for (size_t i = 0; i < nt; i++) {
            double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            rr += r * r;
            vv += v * v;
        }
        double alpha = vv > 0.0 ? -sqrt(rr / vv) : -1.0;
        if (!(alpha < -1.0))
            alpha = -1.0; /* θ' = θ2 */
        for (size_t i = 0; i < nt; i++) {
            double r = t1[i] - t0[i], v = t2[i] - 2.0 * t1[i] + t0[i];
            double x = t0[i] - 2.0 * alpha * r + alpha * alpha * v;
            if (i < nw) {
                W[i] = x;
            } else {
                size_t j = i - nw;
                double lo = LR_PSI_FLOOR * em->sdiag[j] + em->reg;
                psi[j] = x > lo ? x : lo;
            }
        }
        int bad = lr_fa_step(em, c, &llp) < 0;
        (*steps)++;
        if (bad || !isfinite(llp) || llp < ll1) {
            LR_LOAD(t2); /* the extrapolation lost: continue from plain EM */
            if (bad)
                break;
        }
    }
#undef LR_SAVE
#undef LR_LOAD
    return 0;
}

static int lowrank_mstep(em_t *em)
{
    size_t n = em->n, d = em->d, K = em->k;
    pft_gmm_t *m = em->m;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)d, (int)n, 1.0, em->resp, (int)K,
                em->xd, (int)d, 0.0, m->means, (int)d);
    for (size_t c = 0; c < K; c++) {
        double nk = em->nk[c];
        if (!(nk > 0.0))
            continue; /* re-seeded by the caller */
        for (size_t j = 0; j < d; j++)
            m->means[c * d + j] /= nk;
        lr_gather(em, c);
        if (em->fresh[c]) {
            int rc = lr_pca_start(em, c);
            if (rc == PFT_ENOMEM)
                return pft_err_wrap(rc, "gmm fit: ");
            if (rc < 0) {
                pft_err_clear();
                em->nk[c] = 0.0;
                continue;
            }
            em->fresh[c] = 0;
        } else {
            int steps, conv;
            if (lr_fa_iterate(em, c, LR_INNER, em->tol, &steps, &conv) < 0)
                em->nk[c] = 0.0; /* re-seeded by the caller */
        }
    }
    return 0;
}

static void lowrank_reseed(em_t *em, size_t c, size_t row)
{
    size_t d = em->d;
    pft_gmm_t *m = em->m;
    memset(m->factors + c * d * em->q, 0, d * em->q * sizeof(double));
    for (size_t j = 0; j < d; j++) {
        m->means[c * d + j] = em->xd[row * d + j];
        m->covars[c * d + j] = em->gvar[j] + em->reg;
    }
    em->fresh[c] = 1;
}

/* K = 1: the responsibilities never change, so EM is factor-analysis steps on the rows (and S) the first
 * M-step gathered, to convergence. The model already holds the PCA start and the mean. */
static int lowrank_solo(em_t *em, const pft_gmm_opts_t *opts, int *iters, int *converged)
{
    lr_fa_iterate(em, 0, opts->max_iter, opts->tol, iters, converged);
    return 0;
}

static const em_family_t *em_family(pft_cov_t cov)
{
    static const em_family_t diag = {.estep = diag_estep, .mstep = diag_mstep, .reseed = diag_reseed};
    static const em_family_t full = {.estep = full_estep, .mstep = full_mstep, .reseed = full_reseed};
    static const em_family_t lowrank = {
        .estep = lowrank_estep, .mstep = lowrank_mstep, .reseed = lowrank_reseed, .solo = lowrank_solo};
    return cov == PFT_COV_FULL ? &full : cov == PFT_COV_LOWRANK ? &lowrank : &diag;
}

/* ---- family-independent steps ---- */

/* Row with the smallest log-likelihood not yet used by this M-step. */
static size_t worst_row(em_t *em)
{
    size_t best = 0;
    double bv = INFINITY;
    for (size_t i = 0; i < em->n; i++)
        if (!em->used[i] && em->ll[i] < bv) {
            bv = em->ll[i];
            best = i;
        }
    em->used[best] = 1;
    return best;
}

/* M-step from em->resp: masses, family parameters, weights; empty components (and full components that
 * cannot be factored) are re-seeded at the worst-explained rows. */
static int em_mstep(em_t *em)
{
    size_t n = em->n, K = em->k;
    double empty = 0.5 * (double)n / (double)K;
    if (empty > EM_NK_EMPTY)
        empty = EM_NK_EMPTY;
    for (size_t c = 0; c < K; c++)
        em->nk[c] = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < K; c++)
            em->nk[c] += em->resp[i * K + c];
    for (size_t c = 0; c < K; c++)
        if (!(em->nk[c] >= empty))
            em->nk[c] = 0.0;
    int rc = em_family(em->cov)->mstep(em);
    if (rc < 0)
        return rc;
    memset(em->used, 0, n);
    double total = 0.0;
    for (size_t c = 0; c < K; c++) {
        if (!(em->nk[c] > 0.0)) {
            em_family(em->cov)->reseed(em, c, worst_row(em));
            em->nk[c] = 1.0;
            em->reseeded++;
        }
        total += em->nk[c];
    }
    for (size_t c = 0; c < K; c++)
        em->m->weights[c] = em->nk[c] / total;
    return 0;
}

/* ---- set-up, one run, fit ---- */

static void em_free(em_t *em)
{
    pft_free(em->ctr);
    pft_free(em->xf);
    pft_free(em->xd);
    pft_free(em->gvar);
    pft_gmm_destroy(&em->m);
    pft_free(em->logw);
    pft_free(em->resp);
    pft_free(em->ll);
    pft_free(em->nk);
    pft_free(em->muf);
    pft_free(em->sf);
    pft_free(em->msf);
    pft_free(em->lconst);
    for (int t = 0; t < EM_MAX_THREADS; t++) {
        diag_worker_t *w = &em->workers[t];
        pft_free(w->S1);
        pft_free(w->S2);
        pft_free(w->s1);
        pft_free(w->s2);
        pft_free(w->dist);
        pft_free(w->rf);
    }
    pft_free(em->work);
    pft_free(em->yf);
    pft_free(em->lf);
    pft_free(em->used);
    lr_tab_free(&em->tab);
    pft_free(em->lv);
    pft_free(em->pw);
    pft_free(em->cw);
    pft_free(em->sb);
    pft_free(em->xw);
    pft_free(em->pf);
    pft_free(em->cf);
    pft_free(em->tf);
    pft_free(em->smat);
    pft_free(em->om);
    pft_free(em->th);
    pft_free(em->sq);
    pft_free(em->sdiag);
    pft_free(em->fresh);
    memset(em, 0, sizeof *em);
}

/* Threads of the fused pass: OpenBLAS's setting, at most one per chunk. */
static int em_threads(size_t n)
{
    int t = openblas_get_num_threads();
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    if (t < 1)
        t = 1;
    if (t > EM_MAX_THREADS)
        t = EM_MAX_THREADS;
    if ((size_t)t > chunks)
        t = (int)chunks;
    return t;
}

static int em_alloc(em_t *em)
{
    size_t n = em->n, d = em->d, K = em->k, dp = em->dp, nr = (n + RB - 1) / RB * RB;
    em->ctr = pft_calloc(d, sizeof(double));
    em->gvar = pft_calloc(d, sizeof(double));
    em->xf = pft_alloc_aligned(nr * dp * sizeof(float));
    em->m = gmm_alloc((int)K, (int)d, em->cov, (int)em->q);
    em->logw = pft_alloc_array(K, sizeof(double));
    em->resp = pft_alloc_array(n * K, sizeof(double));
    em->ll = pft_calloc(n, sizeof(double));
    em->nk = pft_alloc_array(K, sizeof(double));
    em->used = pft_alloc(n);
    if (!em->ctr || !em->gvar || !em->xf || !em->m || !em->logw || !em->resp || !em->ll || !em->nk ||
        !em->used)
        return PFT_ENOMEM;
    if (em->cov == PFT_COV_FULL) {
        em->xd = pft_alloc_array(n * d, sizeof(double));
        em->work = pft_alloc_array(n * d, sizeof(double));
        em->yf = pft_alloc_aligned(n * d * sizeof(float));
        em->lf = pft_alloc_aligned(d * d * sizeof(float));
        return em->xd && em->work && em->yf && em->lf ? 0 : PFT_ENOMEM;
    }
    if (em->cov == PFT_COV_LOWRANK) {
        size_t q = em->q, r = em->r, w = (q > r ? q : r) + 1;
        /* K = 1 forms S when d·(n/2 + 2qE) < 4nqE (SYRK runs about twice as fast as the skinny GEMMs) */
        int smat = K == 1 && d <= LR_SMAT_MAX_D &&
                   (double)d * ((double)n / 2 + 2.0 * (double)q * LR_EXPECT_ITERS) <
                       4.0 * (double)n * (double)q * LR_EXPECT_ITERS;
        em->xd = pft_alloc_array(n * d, sizeof(double));
        em->yf = pft_alloc_array(n * d, sizeof(float));
        em->lv = pft_alloc_array((size_t)LR_BLOCK * K * q + 1, sizeof(double));
        em->pw = pft_alloc_array(d * q + d, sizeof(double));
        em->cw = pft_alloc_array(d * w, sizeof(double));
        em->sb = pft_alloc_array(d * q + d, sizeof(double));
        em->xw = pft_alloc_array(d * q + 1, sizeof(double));
        em->pf = pft_alloc_array(d * w, sizeof(float));
        em->cf = pft_alloc_array(d * w, sizeof(float));
        em->tf = pft_alloc_array(n * w, sizeof(float));
        em->smat = smat ? pft_alloc_array(d * d, sizeof(float)) : NULL;
        em->om = pft_alloc_array(d * r + 1, sizeof(double));
        em->th = pft_alloc_array(3 * (d * q + d), sizeof(double));
        em->sq = pft_alloc_array(5 * q * q + r * r + r + r * q + 1, sizeof(double));
        em->sdiag = pft_alloc_array(d, sizeof(double));
        em->fresh = pft_calloc(K, 1);
        if (!em->xd || !em->yf || !em->lv || !em->pw || !em->cw || !em->sb || !em->xw || !em->pf || !em->cf ||
            !em->tf || (smat && !em->smat) || !em->om || !em->th || !em->sq || !em->sdiag || !em->fresh)
            return PFT_ENOMEM;
        return lr_tab_alloc(&em->tab, K, d, q);
    }
    em->muf = pft_alloc_aligned(K * dp * sizeof(float));
    em->sf = pft_alloc_aligned(K * dp * sizeof(float));
    em->msf = pft_alloc_aligned(K * dp * sizeof(float));
    em->lconst = pft_alloc_array(K, sizeof(double));
    if (!em->muf || !em->sf || !em->msf || !em->lconst)
        return PFT_ENOMEM;
    memset(em->muf, 0, K * dp * sizeof(float));
    memset(em->sf, 0, K * dp * sizeof(float));
    memset(em->msf, 0, K * dp * sizeof(float));
    em->nthreads = em_threads(n);
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    for (int t = 0; t < em->nthreads; t++) {
        diag_worker_t *w = &em->workers[t];
        w->em = em;
        w->c0 = chunks * (size_t)t / (size_t)em->nthreads;
        w->c1 = chunks * (size_t)(t + 1) / (size_t)em->nthreads;
        w->S1 = pft_alloc_array(K * dp, sizeof(double));
        w->S2 = pft_alloc_array(K * dp, sizeof(double));
        w->s1 = pft_alloc_aligned(K * dp * sizeof(float));
        w->s2 = pft_alloc_aligned(K * dp * sizeof(float));
        w->dist = pft_alloc_array((size_t)CHUNK * K, sizeof(float));
        w->rf = pft_alloc_array((size_t)CHUNK * K, sizeof(float));
        if (!w->S1 || !w->S2 || !w->s1 || !w->s2 || !w->dist || !w->rf)
            return PFT_ENOMEM;
    }
    return 0;
}

/* Centre, working copies of the data, data variance, scratch for K components. */
static int em_init(em_t *em, const float *x, size_t n, size_t d, size_t K, pft_cov_t cov, size_t q,
                   double reg_covar)
{
    memset(em, 0, sizeof *em);
    em->n = n;
    em->d = d;
    em->k = K;
    em->q = q;
    em->r = q + LR_OVERSAMPLE < d ? q + LR_OVERSAMPLE : d;
    em->dp = (d + DPAD - 1) / DPAD * DPAD;
    em->cov = cov;
    em->x = x;
    if (em_alloc(em) < 0) {
        em_free(em);
        return pft_err(PFT_ENOMEM, "gmm fit: out of memory (n %zu, d %zu, k %zu)", n, d, K);
    }
    size_t dp = em->dp, nr = (n + RB - 1) / RB * RB;
    /* Centre: the mean, or 0 where many values are exactly zero (zero counts borrowed from gvar). */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double v = x[i * d + j];
            em->ctr[j] += v;
            em->gvar[j] += v == 0.0 ? 1.0 : 0.0;
        }
    for (size_t j = 0; j < d; j++)
        em->ctr[j] = em->gvar[j] >= EM_SPARSE_FRAC * (double)n ? 0.0 : em->ctr[j] / (double)n;
    /* Working copies and the data variance per dimension (about the exact mean, in double). */
    memset(em->xf, 0, nr * dp * sizeof(float));
    memset(em->gvar, 0, d * sizeof(double));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double t = (double)x[i * d + j] - em->ctr[j];
            em->xf[i * dp + j] = (float)t;
            if (em->xd)
                em->xd[i * d + j] = t;
        }
    double *mean = pft_calloc(d, sizeof(double));
    if (!mean) {
        em_free(em);
        return pft_err(PFT_ENOMEM, "gmm fit: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            mean[j] += (double)x[i * d + j] - em->ctr[j];
    for (size_t j = 0; j < d; j++)
        mean[j] /= (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double t = (double)x[i * d + j] - em->ctr[j] - mean[j];
            em->gvar[j] += t * t;
        }
    pft_free(mean);
    double mvar = 0.0;
    for (size_t j = 0; j < d; j++) {
        em->gvar[j] /= (double)n;
        mvar += em->gvar[j];
    }
    mvar /= (double)d;
    /* reg_covar, but at least a tiny fraction of the data variance so that a model always exists. */
    double tiny = 1e-12 * (mvar > 0.0 ? mvar : 1.0);
    em->reg = reg_covar > tiny ? reg_covar : tiny;
    return 0;
}

/* One EM run from a k-means++ start drawn from rng; leaves the model in em->m (centred coordinates). */
static int em_run(em_t *em, const pft_gmm_opts_t *opts, pft_rng_t *rng, int *iters, int *converged)
{
    size_t n = em->n, d = em->d, dp = em->dp, K = em->k;
    int *labels = pft_alloc_array(n, sizeof(int));
    double *centers = pft_alloc_array(K * dp, sizeof(double));
    int rc = 0;
    if (!labels || !centers) {
        rc = pft_err(PFT_ENOMEM, "gmm fit: out of memory");
        goto done;
    }
    /* k-means on the padded working copy: the zero padding adds nothing to any distance. */
    if ((rc = pft_kmeans(em->xf, (int)n, (int)dp, (int)K, opts->kmeans_iter, rng, centers, labels, NULL)) < 0)
        goto done;
    /* Initial parameters: an M-step from the hard k-means assignment (as scikit-learn does), with the
     * k-means centres as the shift of the statistics. */
    for (size_t c = 0; c < K; c++)
        for (size_t j = 0; j < d; j++)
            em->m->means[c * d + j] = centers[c * dp + j];
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < K; c++)
            em->resp[i * K + c] = (size_t)labels[i] == c ? 1.0 : 0.0;
    memset(em->ll, 0, n * sizeof(double));
    em->reseeded = 0;
    em->stats_valid = 0;
    em->rng = rng;
    em->tol = opts->tol;
    if (em->fresh)
        memset(em->fresh, 1, K);
    if ((rc = em_mstep(em)) < 0)
        goto done;
    double prev = -INFINITY, cur = -INFINITY;
    *iters = 0;
    *converged = 0;
    if (K == 1 && opts->max_iter > 0) {
        /* One component: every responsibility is exactly 1, so the M-step above is already the maximum
         * likelihood estimate and further iterations would recompute the same parameters, except for
         * families without a closed form (lowrank), which iterate on the fixed responsibilities. */
        if (em_family(em->cov)->solo) {
            rc = em_family(em->cov)->solo(em, opts, iters, converged);
            goto done;
        }
        *iters = 1;
        *converged = 1;
        goto done;
    }
    for (int it = 0; it < opts->max_iter; it++) {
        prev = cur;
        if ((rc = em_family(em->cov)->estep(em, &cur)) < 0)
            goto done;
        if ((rc = em_mstep(em)) < 0)
            goto done;
        (*iters)++;
        if (opts->tol > 0.0 && fabs(cur - prev) < opts->tol) {
            *converged = 1;
            break;
        }
    }
done:
    pft_free(labels);
    pft_free(centers);
    return rc;
}

static int check_opts(const pft_gmm_opts_t *o)
{
    if (o->k < 1)
        return pft_err(PFT_EINVAL, "gmm fit: k = %d (must be >= 1)", o->k);
    if (!cov_valid(o->cov))
        return pft_err(PFT_EINVAL, "gmm fit: unknown covariance type %d", (int)o->cov);
    if (o->max_iter < 0)
        return pft_err(PFT_EINVAL, "gmm fit: max_iter = %d (must be >= 0)", o->max_iter);
    if (!isfinite(o->tol) || o->tol < 0.0)
        return pft_err(PFT_EINVAL, "gmm fit: tol = %g (must be finite and >= 0)", o->tol);
    if (!isfinite(o->reg_covar) || o->reg_covar < 0.0)
        return pft_err(PFT_EINVAL, "gmm fit: reg_covar = %g (must be finite and >= 0)", o->reg_covar);
    if (o->n_init < 1)
        return pft_err(PFT_EINVAL, "gmm fit: n_init = %d (must be >= 1)", o->n_init);
    if (o->kmeans_iter < 0)
        return pft_err(PFT_EINVAL, "gmm fit: kmeans_iter = %d (must be >= 0)", o->kmeans_iter);
    if (o->cov == PFT_COV_LOWRANK && o->rank < 1)
        return pft_err(PFT_EINVAL, "gmm fit: rank = %d (must be >= 1)", o->rank);
    return 0;
}

int pft_gmm_fit(const float *x, int n, int d, const pft_gmm_opts_t *opts, pft_gmm_t **out,
                pft_gmm_info_t *info)
{
    if (!x || !opts || !out)
        return pft_err(PFT_EINVAL, "gmm fit: NULL argument");
    *out = NULL;
    if (n < 1 || d < 1)
        return pft_err(PFT_EINVAL, "gmm fit: n = %d, d = %d (both must be >= 1)", n, d);
    int rc = check_opts(opts);
    if (rc < 0)
        return rc;
    size_t N = (size_t)n, D = (size_t)d, K = (size_t)(opts->k < n ? opts->k : n), Q = 0;
    if (opts->cov == PFT_COV_FULL && D * D > PFT_GMM_MAX_ELEMS / K)
        return pft_err(PFT_EINVAL, "gmm fit: full covariance with d = %d, k = %zu is too large", d, K);
    if (opts->cov == PFT_COV_LOWRANK) {
        Q = (size_t)opts->rank < D ? (size_t)opts->rank : D - 1; /* q ≥ d would be full: clamp */
        if (Q && D * Q > PFT_GMM_MAX_ELEMS / K)
            return pft_err(PFT_EINVAL, "gmm fit: lowrank with d = %d, rank %zu, k = %zu is too large", d, Q,
                           K);
    }
    for (size_t i = 0; i < N * D; i++) {
        if (!isfinite(x[i]))
            return pft_err(PFT_EINVAL, "gmm fit: sample %zu, dimension %zu is not finite", i / D, i % D);
        if (fabsf(x[i]) > PFT_GMM_MAX_ABS)
            return pft_err(PFT_ERANGE, "gmm fit: sample %zu, dimension %zu is %g (|x| must be <= %g)", i / D,
                           i % D, (double)x[i], PFT_GMM_MAX_ABS);
    }
    em_t em;
    if ((rc = em_init(&em, x, N, D, K, opts->cov, Q, opts->reg_covar)) < 0)
        return rc;
    pft_gmm_t *best = NULL;
    pft_gmm_info_t best_info = {0};
    pft_rng_t *rng = pft_rng_new(0);
    if (!rng) {
        rc = pft_err(PFT_ENOMEM, "gmm fit: out of memory");
        goto done;
    }
    for (int r = 0; r < opts->n_init; r++) {
        pft_rng_seed(rng, pft_rng_derive(opts->seed, 0x676d6d /* "gmm" */, (uint64_t)r));
        int iters = 0, converged = 0;
        if ((rc = em_run(&em, opts, rng, &iters, &converged)) < 0)
            goto done;
        pft_gmm_t *cand = pft_gmm_dup(em.m);
        if (!cand) {
            rc = pft_err(PFT_ENOMEM, "gmm fit: out of memory");
            goto done;
        }
        for (size_t c = 0; c < K; c++) {
            for (size_t j = 0; j < D; j++)
                cand->means[c * D + j] += em.ctr[j];
            if (opts->cov == PFT_COV_FULL)
                pft_la_sym_from_lower(cand->covars + c * D * D, d);
        }
        double avg;
        if ((rc = pft_gmm_score(cand, x, n, &avg)) < 0) {
            pft_gmm_destroy(&cand);
            goto done;
        }
        if (!best || avg > best_info.avg_loglik) {
            pft_gmm_destroy(&best);
            best = cand;
            best_info = (pft_gmm_info_t){.k_requested = opts->k,
                                         .k_used = (int)K,
                                         .iters = iters,
                                         .converged = converged,
                                         .reseeded = em.reseeded,
                                         .avg_loglik = avg};
        } else {
            pft_gmm_destroy(&cand);
        }
    }
    *out = best;
    best = NULL;
    if (info)
        *info = best_info;
done:
    pft_gmm_destroy(&best);
    pft_rng_destroy(&rng);
    em_free(&em);
    return rc;
}
