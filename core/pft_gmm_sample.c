/* pft_gmm_sample: draws samples from a mixture (multinomial component counts, then one Gaussian block per
 * component). */
#include "pft_gmm.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm_internal.h"
#include "pft_linalg.h"
#include "pft_rng.h"

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
    float *lf =
        pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX ? pft_alloc_array(D * D, sizeof(float)) : NULL;
    float *sd = pft_alloc_array(D, sizeof(float));
    float *wf = Q ? pft_alloc_array(D * Q, sizeof(float)) : NULL, *z = NULL;
    if (!counts || !sd || (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX && !lf) || (Q && !wf)) {
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
        if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_MATRIX) {
            const double *l = self->chol + c * D * D;
            for (size_t j = 0; j < D * D; j++)
                lf[j] = (float)l[j];
            /* Z := Z · Lᵀ, i.e. each row z_i becomes L z_i. */
            cblas_strmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)m, (int)D, 1.0f,
                        lf, (int)D, row, (int)D);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < D; j++)
                    row[i * D + j] = (float)((double)row[i * D + j] + mu[j]);
        } else if (pft_cov_shape(self->cov) == PFT_COV_SHAPE_FACTOR) {
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
                sd[j] = (float)sqrt(pft_gmm__var_at(self, c, j));
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
