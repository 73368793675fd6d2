/* pft_gmm_score: log-densities of a mixture: per-sample log-likelihood, mean score, BIC.
 *
 * Theory. A mixture p(x) = Σ_k w_k N(x | μ_k, Σ_k). Scoring works in log space: for each row i and
 * component k, log w_k + log N(x_i | k), then a row-wise log-sum-exp. Public scoring (score_samples,
 * score, bic) runs in double over blocks of rows centred on the batch's column mean c (the means are
 * shifted by the same c), which keeps the quadratic forms well conditioned:
 *   diag/spher: (x-μ)ᵀΣ⁻¹(x-μ) = Σ_j (x_j - μ_kj)² p_kj, p = 1/σ², directly (pft_la_wsqdist_d, SIMD): the
 *               same flops as one DGEMM of [X² | X] against [P | -2 M∘P] without its cancellation, and
 *               several times faster on these skinny shapes (OpenBLAS packs the rows for K columns);
 *   full:       L_k⁻¹(x - μ_k) by one triangular solve (DTRSM) of the whole block per component,
 *               Mahalanobis distance = squared row norm, log det Σ_k = 2 Σ_j log L_k,jj.
 *   lowrank:    Σ = W Wᵀ + Ψ is never formed. With M = I_q + Wᵀ Ψ⁻¹ W = L_M L_Mᵀ (q×q), Woodbury gives
 *               Σ⁻¹ = Ψ⁻¹ - Ψ⁻¹ W M⁻¹ Wᵀ Ψ⁻¹, so (x-μ)ᵀΣ⁻¹(x-μ) = Σ_j (x-μ)_j²/ψ_j - ‖A_kᵀ(x-μ)‖² with
 *               A_k = Ψ⁻¹ W L_M⁻ᵀ (d×q), and the determinant lemma gives log det Σ = log det M + Σ_j log ψ_j.
 *               A block costs one DGEMM of the rows against [A_1 | … | A_K] (d×Kq): O(d·q) per row and
 *               component, O(d·q²) per component to prepare.
 */
#include "pft_gmm.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm_internal.h"
#include "pft_linalg.h"

/* Rows per scoring block: bounds the scratch memory of score_samples for any n. */
#define SCORE_BLOCK 1024

/* diag/spher: lp (m×K) = log N(x_i | μ_k, diag σ_k²) for centred rows xc (m×d) of a batch centred on ctr.
 * work holds 2K·d + K doubles. Direct form Σ_j (x_j - μ_kj)² / σ_kj² (pft_la_wsqdist_d). */
static void logn_diag_d(const pft_gmm_t *self, const double *xc, const double *ctr, int m, double *lp,
                        double *work)
{
    size_t K = (size_t)self->k, D = (size_t)self->d, M = (size_t)m;
    double *mus = work, *prec = mus + K * D, *lconst = prec + K * D;
    for (size_t c = 0; c < K; c++) {
        double slog = 0.0;
        for (size_t j = 0; j < D; j++) {
            double var = pft_gmm__var_at(self, c, j);
            mus[c * D + j] = self->means[c * D + j] - ctr[j];
            prec[c * D + j] = 1.0 / var;
            slog += log(var);
        }
        lconst[c] = slog + (double)D * LOG_2PI;
    }
    pft_la_wsqdist_d(xc, M, D, mus, prec, K, lp);
    for (size_t i = 0; i < M; i++)
        for (size_t c = 0; c < K; c++)
            lp[i * K + c] = -0.5 * (lp[i * K + c] + lconst[c]);
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

void pft_gmm__lr_tab_free(lr_tab_t *t)
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

int pft_gmm__lr_tab_alloc(lr_tab_t *t, size_t k, size_t d, size_t q)
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
        pft_gmm__lr_tab_free(t);
        return PFT_ENOMEM;
    }
    return 0;
}

/* Fills the tables from means, factors W (K×d×q) and psi (K×d); shift NULL: none. PFT_ENUMERIC if some
 * I + Wᵀ Ψ⁻¹ W cannot be factored (only with non-finite or overflowing parameters). */
int pft_gmm__lr_tab_fill(lr_tab_t *t, const double *means, const double *factors, const double *psi,
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
void pft_gmm__lr_logn(const lr_tab_t *t, const double *x, size_t m, double *lp, double *v)
{
    size_t K = t->k, d = t->d, q = t->q, kq = t->kq;
    if (q > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)kq, (int)d, 1.0, x, (int)d, t->a,
                    (int)kq, 0.0, v, (int)kq);
    pft_la_wsqdist_d(x, m, d, t->mus, t->ipsi, K, lp); /* the diagonal part Σ_j (x - μ)_j² / ψ_j */
    for (size_t i = 0; i < m; i++) {
        for (size_t c = 0; c < K; c++) {
            double s = 0.0, quad = lp[i * K + c];
            for (size_t l = 0; l < q; l++) {
                double e = v[i * kq + c * q + l] - t->b[c * q + l];
                s += e * e;
            }
            double maha = quad - s;
            lp[i * K + c] = -0.5 * ((maha > 0.0 ? maha : 0.0) + t->lconst[c]);
        }
    }
}

/* Doubles of scratch logn_*_d / pft_gmm__lr_logn need for a block of m rows. */
static size_t logn_work_d(const pft_gmm_t *self, size_t m)
{
    size_t K = (size_t)self->k, D = (size_t)self->d;
    if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR)
        return m * K * (size_t)self->q + 1;
    return pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX ? m * D : 2 * K * D + K;
}

/* Row-wise log-sum-exp of lp (m×K) plus log weights; writes log p(x_i) to out[i]. If resp is not NULL it
 * receives the normalised responsibilities (m×K); lp and resp may alias. */
void pft_gmm__logsumexp_rows(const double *lp, const double *logw, size_t m, size_t K, double *out,
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
        (pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR &&
         pft_gmm__lr_tab_alloc(&tab, K, D, (size_t)self->q) < 0)) {
        rc = pft_err(PFT_ENOMEM, "gmm score: out of memory");
        goto done;
    }
    for (size_t i = 0; i < N * D; i++)
        if (!isfinite(x[i])) {
            rc = pft_err(PFT_EINVAL, "gmm score: sample %zu has a non-finite value", i / D);
            goto done;
        }
    column_mean(x, N, D, ctr);
    if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR &&
        (rc = pft_gmm__lr_tab_fill(&tab, self->means, self->factors, self->covars, ctr)) < 0) {
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
        if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX)
            logn_full_d(self, xc, ctr, (int)m, lp, work);
        else if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR)
            pft_gmm__lr_logn(&tab, xc, m, lp, work);
        else
            logn_diag_d(self, xc, ctr, (int)m, lp, work);
        pft_gmm__logsumexp_rows(lp, logw, m, K, out + r0, NULL);
    }
done:
    pft_gmm__lr_tab_free(&tab);
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

int pft_gmm__check_weights(const double *w, size_t n, const char *what, double *sum)
{
    double s = 0.0, comp = 0.0; /* Neumaier: Σw of 100 rows of 0.05 comes out as 5, not 5 - 1 ulp */
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(w[i]) || !(w[i] > 0.0))
            return pft_err(PFT_EINVAL, "%s: weight of row %zu is %g (must be finite and > 0)", what, i, w[i]);
        double t = s + w[i];
        comp += fabs(s) >= fabs(w[i]) ? (s - t) + w[i] : (w[i] - t) + s;
        s = t;
    }
    s += comp;
    if (!isfinite(s))
        return pft_err(PFT_EINVAL, "%s: the weights sum to %g", what, s);
    *sum = s;
    return 0;
}

int pft_gmm_score_weighted(const pft_gmm_t *self, const float *x, const double *w, int n, double *avg_loglik)
{
    if (!w)
        return pft_gmm_score(self, x, n, avg_loglik);
    if (!self || !x || !avg_loglik || n < 1)
        return pft_err(PFT_EINVAL, "gmm score: bad arguments (n = %d)", n);
    double total;
    int rc = pft_gmm__check_weights(w, (size_t)n, "gmm score", &total);
    if (rc < 0)
        return rc;
    double *ll = pft_alloc_array((size_t)n, sizeof(double));
    if (!ll)
        return pft_err(PFT_ENOMEM, "gmm score: out of memory");
    rc = pft_gmm_score_samples(self, x, n, ll);
    if (rc == 0) {
        double s = 0.0;
        for (int i = 0; i < n; i++)
            s += w[i] * ll[i];
        *avg_loglik = s / total;
    }
    pft_free(ll);
    return rc;
}

int pft_gmm_bic(const pft_gmm_t *self, const float *x, int n, double *bic)
{
    if (!bic)
        return pft_err(PFT_EINVAL, "gmm bic: NULL output");
    double avg = 0.0;
    int rc = pft_gmm_score(self, x, n, &avg);
    if (rc < 0)
        return rc;
    *bic = -2.0 * avg * n + (double)pft_gmm_n_free_params(self) * log((double)n);
    return 0;
}
