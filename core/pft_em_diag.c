/* pft_em_diag: EM steps of the diag and spher families: one fused, threaded pass of E-step and statistics.
 *
 * Precision and speed (the general plan is at the top of pft_gmm_em.c):
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
 *   reduction, so results are bit-identical for a fixed thread count. */
#include "pft_gmm_internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "pft_error.h"
#include "pft_linalg.h"

#define FLUSH_CHUNKS 1 /* chunks whose statistics are summed in float before going into double */

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
            double var = pft_gmm__var_at(em->m, c, j);
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

const em_family_t pft_em__diag = {.estep = diag_estep, .mstep = diag_mstep, .reseed = diag_reseed};
