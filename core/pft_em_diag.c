/* pft_em_diag: EM steps of the diag and spher families (any family of shape vector or scalar): one fused,
 * threaded pass of E-step and statistics.
 *
 * Precision and speed (the general plan is at the top of pft_gmm_em.c):
 * - One fused pass over the data per iteration, in chunks of CHUNK rows that stay in L2 cache.
 * - E-step: distances Σ_j (x_j/σ_kj - μ_kj/σ_kj)² computed directly in float (no expansion, so no
 *   cancellation) by a register-blocked SIMD kernel (pft_la_sqdist) on the centred float working copy, then
 *   a row-wise log-sum-exp in double. The kernel runs at ~80 % of the FMA peak (Zen 5, AVX-512): it does the
 *   same 2 FMAs per (row, component, dimension) as one SGEMM of [X² | X] against [1/σ² | -2μ/σ²], which
 *   OpenBLAS runs two to three times slower on these skinny shapes (packing the rows for K columns), and the
 *   expanded form in float gave cell errors up to 1 nat and negative variances. Responsibilities below
 *   e^RESP_CUT of a row's largest are set to 0 (below).
 * - M-step statistics of the same chunk, Σ r (x - a) and Σ r (x - a)² about the previous means a, in double
 *   (float rows, double differences, products and sums: pft_la_wstats_rows), over the listed rows with
 *   r ≠ 0 only: a sharp mixture has ~1.03 non-zero responsibilities per row on PACS (d = 1280, K = 10), so
 *   this costs a third of the E-step where dense GEMMs Rᵀ·X, Rᵀ·X² would cost more than the E-step. The
 *   variance is S2/N - (S1/N)², S1/N the (small) step of the mean, so E[x²] - μ² never cancels (scikit-learn
 *   issue #30382). Row weights multiply the responsibilities, so weighted and repeated rows agree to double
 *   rounding. The first M-step (from k-means labels; K = 1's closed form) reads the raw rows, exactly.
 * - Chunks are spread over openblas_get_num_threads() threads (kept for the run) with a static partition and
 *   an ordered reduction, so results are bit-identical for a fixed thread count.
 * Measured (PACS l2, K = 10, 100 iterations, one thread): 46 % of the fit in the distance kernel, 13 % in the
 * statistics, the rest in k-means, tables, log-sum-exp and the final double-precision score. */
#include "pft_gmm_internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "pft_error.h"
#include "pft_linalg.h"

/* Responsibilities below e^RESP_CUT (≈ 1.6e-28) of a row's largest are set to 0, so that the statistics skip
 * them: they move log p(x) by an ulp at most (their sum is below half an ulp of the row's sum, which is ≥ 1)
 * and no statistic by more than n·K·1.6e-28 of its mass. With d in the hundreds most cells are far below. */
#define RESP_CUT (-64.0)

/* Row-wise log-sum-exp: v (K log w_k + log N) becomes the responsibilities times the row weight wi (the
 * statistics need w_i·r_ik, em->resp_w); returns log p(x). */
static double row_resp(double *v, size_t K, double wi)
{
    double mx = -INFINITY, s = 0.0;
    for (size_t c = 0; c < K; c++)
        mx = v[c] > mx ? v[c] : mx;
    for (size_t c = 0; c < K; c++) {
        double t = v[c] - mx;
        v[c] = t < RESP_CUT ? 0.0 : exp(t);
        s += v[c];
    }
    for (size_t c = 0; c < K; c++)
        v[c] = v[c] / s * wi;
    return mx + log(s);
}

/* Statistics of rows [i0, i0 + m) about em->shift, into the thread's S1, S2: of the working copy when the
 * pass runs an E-step (its chunk is still in cache), else of the raw rows (exact: the first M-step, and K =
 * 1's closed form). Per component, the rows with a non-zero responsibility are listed first, so the kernel
 * runs without branches. */
static void chunk_stats(diag_worker_t *w, size_t i0, size_t m)
{
    em_t *em = w->em;
    size_t K = em->k, d = em->d, dp = em->dp;
    const double *r = em->resp + i0 * K;
    for (size_t c = 0; c < K; c++)
        w->cnt[c] = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < K; c++)
            if (r[i * K + c] != 0.0) {
                size_t l = c * CHUNK + w->cnt[c]++;
                w->idx[l] = (unsigned)i;
                w->rv[l] = r[i * K + c];
            }
    const float *x = w->estep ? em->xf + i0 * dp : em->x + i0 * d;
    size_t ld = w->estep ? dp : d;
    for (size_t c = 0; c < K; c++)
        if (w->cnt[c])
            pft_la_wstats_rows(x, ld, d, w->idx + c * CHUNK, w->rv + c * CHUNK, w->cnt[c], em->shift + c * dp,
                               w->S1 + c * dp, w->S2 + c * dp);
}

/* One thread's share of the fused pass. */
static void *diag_worker_run(void *arg)
{
    diag_worker_t *w = arg;
    em_t *em = w->em;
    size_t n = em->n, K = em->k, dp = em->dp;
    memset(w->S1, 0, K * dp * sizeof(double));
    memset(w->S2, 0, K * dp * sizeof(double));
    for (size_t ch = w->c0; ch < w->c1; ch++) {
        size_t i0 = ch * CHUNK, m = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *xc = em->xf + i0 * dp;
        if (w->estep) {
            size_t mr = (m + RB - 1) / RB * RB; /* xf has round_up(n, RB) rows */
            pft_la_sqdist(xc, mr, dp, em->sf, em->msf, K, w->dist);
            for (size_t i = 0; i < m; i++) {
                double *v = em->resp + (i0 + i) * K;
                for (size_t c = 0; c < K; c++)
                    v[c] = em->logw[c] - 0.5 * ((double)w->dist[i * K + c] + em->lconst[c]);
                em->ll[i0 + i] = row_resp(v, K, em->w ? em->w[i0 + i] : 1.0);
            }
        }
        chunk_stats(w, i0, m);
    }
    return NULL;
}

/* Σ_j log v_j over v[0..n) (v > 0): one log per product of eight, while the product stays a normal number
 * (a log costs ~20 cycles and this runs for K·d variances per iteration). */
static double sum_log(const double *v, size_t n)
{
    double s = 0.0;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        double p =
            ((v[j] * v[j + 1]) * (v[j + 2] * v[j + 3])) * ((v[j + 4] * v[j + 5]) * (v[j + 6] * v[j + 7]));
        if (isnormal(p)) {
            s += log(p);
        } else {
            for (size_t q = j; q < j + 8; q++)
                s += log(v[q]);
        }
    }
    for (; j < n; j++)
        s += log(v[j]);
    return s;
}

/* The E-step's float tables (1/σ, μ/σ), the statistics' shift (working or raw coordinates), log-weights and
 * constants Σ log σ² + d log 2π, from the current model. */
static void diag_tables(em_t *em, int estep)
{
    size_t K = em->k, d = em->d, dp = em->dp;
    const pft_gmm_t *m = em->m;
    for (size_t c = 0; c < K; c++) {
        const double *mu = m->means + c * d;
        double *sh = em->shift + c * dp;
        float *sf = em->sf + c * dp, *msf = em->msf + c * dp;
        if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_SCALAR) {
            double is = 1.0 / sqrt(m->covars[c]);
            for (size_t j = 0; j < d; j++) {
                sf[j] = (float)is;
                msf[j] = (float)(mu[j] * is);
            }
            em->lconst[c] = (double)d * log(m->covars[c]) + (double)d * LOG_2PI;
        } else {
            const double *var = m->covars + c * d;
            pft_la_inv_sqrt(var, d, em->vtmp);
            for (size_t j = 0; j < d; j++) {
                sf[j] = (float)em->vtmp[j];
                msf[j] = (float)(mu[j] * em->vtmp[j]);
            }
            em->lconst[c] = sum_log(var, d) + (double)d * LOG_2PI;
        }
        for (size_t j = 0; j < d; j++)
            sh[j] = estep ? mu[j] : mu[j] + em->ctr[j];
        em->logw[c] = m->weights[c] > 0.0 ? log(m->weights[c]) : -INFINITY;
    }
}

/* Helper threads of the fused pass, started at the first pass of a run and kept until em_free: a pass wakes
 * them through a condition variable instead of creating and joining threads (about 700 passes in one PACS
 * benchmark run). A share whose thread could not start runs in the calling thread: same partition, same
 * ordered reduction, so the same result. */
static void *diag_helper(void *arg)
{
    diag_worker_t *w = arg;
    em_t *em = w->em;
    unsigned seen = 0;
    pthread_mutex_lock(&em->pool_mu);
    for (;;) {
        while (em->pool_gen == seen && !em->pool_quit)
            pthread_cond_wait(&em->pool_go, &em->pool_mu);
        if (em->pool_quit)
            break;
        seen = em->pool_gen;
        pthread_mutex_unlock(&em->pool_mu);
        diag_worker_run(w);
        pthread_mutex_lock(&em->pool_mu);
        if (--em->pool_pending == 0)
            pthread_cond_signal(&em->pool_done);
    }
    pthread_mutex_unlock(&em->pool_mu);
    return NULL;
}

static void pool_start(em_t *em)
{
    em->pool_tried = 1;
    if (em->nthreads < 2 || pthread_mutex_init(&em->pool_mu, NULL) != 0)
        return;
    if (pthread_cond_init(&em->pool_go, NULL) != 0) {
        pthread_mutex_destroy(&em->pool_mu);
        return;
    }
    if (pthread_cond_init(&em->pool_done, NULL) != 0) {
        pthread_cond_destroy(&em->pool_go);
        pthread_mutex_destroy(&em->pool_mu);
        return;
    }
    em->pool_up = 1;
    em->pool_gen = 0;
    em->pool_quit = 0;
    for (int t = 1; t < em->nthreads; t++)
        em->pool_on[t] = pthread_create(&em->pool_tid[t], NULL, diag_helper, &em->workers[t]) == 0;
}

void pft_em__diag_pool_stop(em_t *em)
{
    if (!em->pool_up)
        return;
    pthread_mutex_lock(&em->pool_mu);
    em->pool_quit = 1;
    pthread_cond_broadcast(&em->pool_go);
    pthread_mutex_unlock(&em->pool_mu);
    for (int t = 1; t < em->nthreads; t++)
        if (em->pool_on[t])
            pthread_join(em->pool_tid[t], NULL);
    pthread_cond_destroy(&em->pool_go);
    pthread_cond_destroy(&em->pool_done);
    pthread_mutex_destroy(&em->pool_mu);
    em->pool_up = 0;
}

/* Runs every worker's share: helpers where they run, the rest here. */
static void run_workers(em_t *em)
{
    if (!em->pool_tried)
        pool_start(em);
    if (!em->pool_up) {
        for (int t = 0; t < em->nthreads; t++)
            diag_worker_run(&em->workers[t]);
        return;
    }
    int helpers = 0;
    for (int t = 1; t < em->nthreads; t++)
        helpers += em->pool_on[t];
    pthread_mutex_lock(&em->pool_mu);
    em->pool_gen++;
    em->pool_pending = helpers;
    pthread_cond_broadcast(&em->pool_go);
    pthread_mutex_unlock(&em->pool_mu);
    diag_worker_run(&em->workers[0]);
    for (int t = 1; t < em->nthreads; t++)
        if (!em->pool_on[t])
            diag_worker_run(&em->workers[t]);
    pthread_mutex_lock(&em->pool_mu);
    while (em->pool_pending > 0)
        pthread_cond_wait(&em->pool_done, &em->pool_mu);
    pthread_mutex_unlock(&em->pool_mu);
}

/* Fused pass over all chunks: (E-step and) statistics; the sums end in workers[0].S1/S2. */
static void diag_pass(em_t *em, int estep)
{
    size_t K = em->k, dp = em->dp;
    diag_tables(em, estep);
    for (int t = 0; t < em->nthreads; t++)
        em->workers[t].estep = estep;
    run_workers(em);
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
    em->stats_valid = 1; /* in working coordinates */
    em->resp_w = 1;
    double s = 0.0;
    for (size_t i = 0; i < em->n; i++)
        s += em_row_w(em, i) * em->ll[i];
    if (!isfinite(s))
        return pft_err(PFT_ENUMERIC, "gmm fit: non-finite log-likelihood in the E-step");
    *mean_ll = s / em->wsum;
    return 0;
}

/* Means and variances of component c from the statistics: mean = shift + S1/N, var = S2/N - (S1/N)² (the
 * shift is the previous mean, so nothing cancels), clamped at 0; raw: the shift is in raw coordinates.
 * diag: the variances go to the model (+ reg); returns their sum (spher). */
static double diag_component(em_t *em, size_t c, int raw)
{
    size_t d = em->d, dp = em->dp;
    const double *s1 = em->workers[0].S1 + c * dp, *s2 = em->workers[0].S2 + c * dp, *sh = em->shift + c * dp;
    double inv = 1.0 / em->nk[c], *mu = em->m->means + c * d, vsum = 0.0;
    double *var = pft_cov_shape(em->cov) == PFT_COV_SHAPE_VECTOR ? em->m->covars + c * d : em->vtmp;
    for (size_t j = 0; j < d; j++) {
        double step = s1[j] * inv, v = s2[j] * inv - step * step;
        mu[j] = sh[j] + step;
        var[j] = v > 0.0 ? v : 0.0;
    }
    if (raw)
        for (size_t j = 0; j < d; j++)
            mu[j] -= em->ctr[j];
    for (size_t j = 0; j < d; j++)
        vsum += var[j];
    if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_VECTOR)
        for (size_t j = 0; j < d; j++)
            var[j] += em->reg;
    return vsum;
}

static int diag_mstep(em_t *em)
{
    size_t d = em->d, K = em->k;
    int raw = !em->stats_valid;
    if (raw)
        diag_pass(em, 0);
    em->stats_valid = 0;
    for (size_t c = 0; c < K; c++) {
        if (!(em->nk[c] > 0.0))
            continue; /* re-seeded by the caller */
        double vsum = diag_component(em, c, raw);
        if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_SCALAR)
            em->m->covars[c] = vsum / (double)d + em->reg;
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
        if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_VECTOR)
            m->covars[c * d + j] = em->gvar[j] + em->reg;
    }
    if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_SCALAR)
        m->covars[c] = mv / (double)d + em->reg;
}

const em_family_t pft_em__diag = {.estep = diag_estep, .mstep = diag_mstep, .reseed = diag_reseed};
