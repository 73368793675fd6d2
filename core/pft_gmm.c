/* pft_gmm: the Gaussian mixture model object: creation, copies, getters, validated parameter setters,
 * parameter counts.
 *
 * The module's other files: pft_cov.c (the covariance families' table: names, counts, EM steps),
 * pft_gmm_score.c (log-densities, score, BIC, with the scoring theory), pft_gmm_sample.c (sampling),
 * pft_gmm_em.c (pft_gmm_fit: the EM driver and its precision plan), and one file per covariance family
 * behind the EM table em_family_t: pft_em_diag.c (diag and spher), pft_em_full.c, pft_em_lowrank.c.
 * pft_gmm_internal.h holds what they share. Parameters are stored in double. */
#include "pft_gmm.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm_internal.h"
#include "pft_linalg.h"

int pft_gmm__cov_valid(pft_cov_t cov)
{
    return pft_cov_shape(cov) != PFT_COV_SHAPE_NONE;
}

/* Doubles per component in the covars array (lowrank: Ψ). */
static size_t cov_len(pft_cov_t cov, size_t d)
{
    return pft_cov_stored(cov, d);
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
    opts->min_rows = 1;
}

/* pft_gmm_new for every family; q is the lowrank rank (0 for the others). */
pft_gmm_t *pft_gmm__alloc(int k, int d, pft_cov_t cov, int q)
{
    pft_cov_shape_t shape = pft_cov_shape(cov);
    if (k < 1 || d < 1 || !pft_gmm__cov_valid(cov) || q < 0 ||
        (shape == PFT_COV_SHAPE_FACTOR ? q >= d : q != 0))
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
    if (shape == PFT_COV_SHAPE_MATRIX)
        self->chol = pft_calloc(K * cl, sizeof(double));
    if (shape == PFT_COV_SHAPE_FACTOR) {
        self->q = q;
        self->factors = pft_calloc(K * D * Q + 1, sizeof(double));
    }
    if (!self->weights || !self->means || !self->covars || (shape == PFT_COV_SHAPE_MATRIX && !self->chol) ||
        (shape == PFT_COV_SHAPE_FACTOR && !self->factors)) {
        pft_gmm_destroy(&self);
        return NULL;
    }
    for (size_t c = 0; c < K; c++) {
        self->weights[c] = 1.0 / (double)k;
        if (shape == PFT_COV_SHAPE_MATRIX) { /* the identity */
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
    return pft_cov_shape(cov) == PFT_COV_SHAPE_FACTOR ? NULL : pft_gmm__alloc(k, d, cov, 0);
}

pft_gmm_t *pft_gmm_new_lowrank(int k, int d, int q)
{
    return pft_gmm__alloc(k, d, PFT_COV_LOWRANK, q);
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
    pft_gmm_t *copy = pft_gmm__alloc(self->k, self->d, self->cov, self->q);
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
    return pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR ? self->covars : NULL;
}

size_t pft_gmm_n_free_params(const pft_gmm_t *self)
{
    size_t K = (size_t)self->k, D = (size_t)self->d;
    return (K - 1) + K * D + K * pft_cov_free(self->cov, D, (size_t)self->q);
}

size_t pft_gmm_n_wire_params(const pft_gmm_t *self)
{
    size_t K = (size_t)self->k, D = (size_t)self->d;
    return (1 + D + pft_cov_wire(self->cov, D) + D * (size_t)self->q) * K;
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
    double *ch =
        pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX ? pft_alloc_array(K * cl, sizeof(double)) : NULL;
    if (!w || !cv || (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX && !ch)) {
        rc = pft_err(PFT_ENOMEM, "gmm set_params: out of memory");
        goto done;
    }
    if ((rc = check_weights(weights, self->k, w)) < 0 || (rc = check_means(means, K * D)) < 0)
        goto done;
    if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX && chol) {
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
    } else if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX) {
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
    if (self && pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR)
        return pft_err(PFT_EINVAL, "gmm set_params: model is lowrank (use pft_gmm_set_params_lowrank)");
    return set_params_impl(self, weights, means, covars, NULL);
}

int pft_gmm_set_params_chol(pft_gmm_t *self, const double *weights, const double *means, const double *chol)
{
    if (!self || !chol)
        return pft_err(PFT_EINVAL, "gmm set_params_chol: NULL argument");
    if (pft_cov_shape(self->cov) != PFT_COV_SHAPE_MATRIX)
        return pft_err(PFT_EINVAL, "gmm set_params_chol: model is %s, not full", pft_cov_name(self->cov));
    return set_params_impl(self, weights, means, NULL, chol);
}

int pft_gmm_set_params_lowrank(pft_gmm_t *self, const double *weights, const double *means,
                               const double *factors, const double *psi)
{
    if (!self || !weights || !means || !psi || (!factors && self->q > 0))
        return pft_err(PFT_EINVAL, "gmm set_params_lowrank: NULL argument");
    if (pft_cov_shape(self->cov) != PFT_COV_SHAPE_FACTOR)
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
