/* pft_em_full: EM steps of the full-covariance family (double M-step by DSYRK and Cholesky, float E-step).
 *
 * Precision and speed (the general plan is at the top of pft_gmm_em.c):
 * - full: M-step in double (DSYRK of √r-weighted centred rows, DPOTRF): when N_k < d the sample
 *   covariance has d - N_k eigenvalues near zero, and float SYRK noise (~u‖Σ‖) exceeds a typical reg_covar,
 *   which would wreck log det Σ. E-step: one STRSM per component over the whole batch with a float copy of
 *   the factor (half the time of DTRSM); it only steers the responsibilities (the reported log-likelihood
 *   is scored in double) and gave the same fit as a double E-step on PACS class 0, K=5. */
#include "pft_gmm_internal.h"

#include <math.h>
#include <string.h>

#include "pft_error.h"
#include "pft_linalg.h"

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
        total += em_row_w(em, i) * lse;
    }
    if (!isfinite(total))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = total / em->wsum;
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
        /* Rows √r_i (x_i - μ), r including the row weight. A row whose whole contribution r‖x-μ‖² is at
         * most 1e-3·reg·N_k/n (n rows) is dropped: together they move no eigenvalue by more than 1e-3·reg,
         * and most rows of a sharp mixture go. */
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

const em_family_t pft_em__full = {.estep = full_estep, .mstep = full_mstep, .reseed = full_reseed};
