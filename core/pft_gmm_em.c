/* pft_gmm_em: pft_gmm_fit and pft_gmm_fit_weighted, the EM driver: set-up (centre, working copies), k-means++
 * start, the E/M loop with re-seeding of empty components, restarts, the privacy floor. The per-family steps
 * are behind em_family_t, one file each: pft_em_diag.c (diag and spher), pft_em_full.c, pft_em_lowrank.c.
 *
 * Row weights (pft_gmm_fit_weighted): the weighted log-likelihood Σ w_i log p(x_i) is maximised, a row of
 * weight w standing for w identical rows. The E-step is unchanged; em_mstep multiplies the responsibilities
 * by the weights before any family's M-step (which therefore needs no weights of its own), so masses, means
 * and covariances are the weighted ones. The centre, the data variance, k-means++ (draws ∝ w and ∝ w·D²) and
 * Lloyd's centres are weighted the same way; W = Σ w replaces n wherever rows are counted (the mean
 * log-likelihood, the empty-component threshold, the privacy floor), while K stays capped at n rows. With
 * w NULL every weight is 1 and no multiplication is made, so pft_gmm_fit is the same code path.
 *
 * Precision and speed plan (float32 data, double parameters); each family's part is at the top of its file:
 * - Centre: every dimension is shifted by the data mean, except dimensions where at least a quarter of
 *   the values are exactly zero (post-ReLU features), which keep 0 as their centre, so exact zeros stay
 *   exact zeros in the working copy.
 * - Variances are clamped at 0 before reg_covar is added, so they never go below reg_covar. */
#include "pft_gmm.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm_internal.h"
#include "pft_kmeans.h"
#include "pft_linalg.h"

/* Largest |x| fit accepts: squares and their sums over 1e7 rows stay finite in float. */
#define PFT_GMM_MAX_ABS 1e15
#define EM_NK_EMPTY 1.0     /* a component with less responsibility mass (in samples) is re-seeded */
#define EM_SPARSE_FRAC 0.25 /* dimensions with at least this fraction of exact zeros are centred at 0 */

/* The steps of each covariance family (diag's serve spher too), one table per file. */
extern const em_family_t pft_em__diag, pft_em__full, pft_em__lowrank;
static const em_family_t *const s_em[PFT_COV_N] = {
    [PFT_COV_FULL] = &pft_em__full,
    [PFT_COV_DIAG] = &pft_em__diag,
    [PFT_COV_SPHER] = &pft_em__diag,
    [PFT_COV_LOWRANK] = &pft_em__lowrank,
};

/* The steps of a covariance family (a mixture family: pft_gmm__cov_valid). */
static const em_family_t *em_family(pft_cov_t cov)
{
    return s_em[cov];
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

/* M-step from em->resp: row weights folded in (r_ik := w_i·r_ik, so every family's M-step is the weighted
 * one), masses, family parameters, weights; empty components (and full components that cannot be factored)
 * are re-seeded at the worst-explained rows. Masses are in represented rows (units of w). */
static int em_mstep(em_t *em)
{
    size_t n = em->n, K = em->k;
    if (em->w && !em->resp_w)
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < K; c++)
                em->resp[i * K + c] *= em->w[i];
    em->resp_w = 0;
    double empty = 0.5 * em->wsum / (double)K, fresh = em->wsum / (double)K;
    if (empty > EM_NK_EMPTY)
        empty = EM_NK_EMPTY;
    if (fresh > 1.0) /* a re-seeded component starts with the mass of one row (less if W < K) */
        fresh = 1.0;
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
            em->nk[c] = fresh;
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
    pft_em__diag_pool_stop(em);
    pft_free(em->vtmp);
    pft_free(em->ctr);
    pft_free(em->xf);
    pft_free(em->xd);
    pft_free(em->gvar);
    pft_gmm_destroy(&em->m);
    pft_free(em->logw);
    pft_free(em->resp);
    pft_free(em->ll);
    pft_free(em->nk);
    pft_free(em->shift);
    pft_free(em->sf);
    pft_free(em->msf);
    pft_free(em->lconst);
    for (int t = 0; t < EM_MAX_THREADS; t++) {
        diag_worker_t *w = &em->workers[t];
        pft_free(w->S1);
        pft_free(w->S2);
        pft_free(w->dist);
        pft_free(w->idx);
        pft_free(w->rv);
        pft_free(w->cnt);
    }
    pft_free(em->work);
    pft_free(em->yf);
    pft_free(em->lf);
    pft_free(em->used);
    pft_gmm__lr_tab_free(&em->tab);
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
    em->m = pft_gmm__alloc((int)K, (int)d, em->cov, (int)em->q);
    em->logw = pft_alloc_array(K, sizeof(double));
    em->resp = pft_alloc_array(n * K, sizeof(double));
    em->ll = pft_calloc(n, sizeof(double));
    em->nk = pft_alloc_array(K, sizeof(double));
    em->used = pft_alloc(n);
    if (!em->ctr || !em->gvar || !em->xf || !em->m || !em->logw || !em->resp || !em->ll || !em->nk ||
        !em->used)
        return PFT_ENOMEM;
    if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_MATRIX) {
        em->xd = pft_alloc_array(n * d, sizeof(double));
        em->work = pft_alloc_array(n * d, sizeof(double));
        em->yf = pft_alloc_aligned(n * d * sizeof(float));
        em->lf = pft_alloc_aligned(d * d * sizeof(float));
        return em->xd && em->work && em->yf && em->lf ? 0 : PFT_ENOMEM;
    }
    if (pft_cov_shape(em->cov) == PFT_COV_SHAPE_FACTOR) {
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
        return pft_gmm__lr_tab_alloc(&em->tab, K, d, q);
    }
    em->shift = pft_alloc_array(K * dp, sizeof(double));
    em->sf = pft_alloc_aligned(K * dp * sizeof(float));
    em->msf = pft_alloc_aligned(K * dp * sizeof(float));
    em->lconst = pft_alloc_array(K, sizeof(double));
    em->vtmp = pft_alloc_array(d, sizeof(double));
    if (!em->shift || !em->sf || !em->msf || !em->lconst || !em->vtmp)
        return PFT_ENOMEM;
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
        w->dist = pft_alloc_array((size_t)CHUNK * K, sizeof(float));
        w->idx = pft_alloc_array((size_t)CHUNK * K, sizeof(unsigned));
        w->rv = pft_alloc_array((size_t)CHUNK * K, sizeof(double));
        w->cnt = pft_alloc_array(K, sizeof(size_t));
        if (!w->S1 || !w->S2 || !w->dist || !w->idx || !w->rv || !w->cnt)
            return PFT_ENOMEM;
    }
    return 0;
}

/* em->ctr: the (weighted) mean, or 0 where at least EM_SPARSE_FRAC of the mass is exactly zero (zero mass
 * counted in gvar, which is free until em_variance). */
static void em_centre(em_t *em)
{
    size_t n = em->n, d = em->d;
    const float *x = em->x;
    for (size_t i = 0; i < n; i++) {
        double wi = em_row_w(em, i);
        for (size_t j = 0; j < d; j++) {
            double v = x[i * d + j];
            em->ctr[j] += wi * v;
            em->gvar[j] += v == 0.0 ? wi : 0.0;
        }
    }
    for (size_t j = 0; j < d; j++)
        em->ctr[j] = em->gvar[j] >= EM_SPARSE_FRAC * em->wsum ? 0.0 : em->ctr[j] / em->wsum;
}

/* The centred working copies (float xf with zero padding; double xd where the family has one) and, in the
 * same pass, mean[] = the (weighted) mean of the centred rows. */
static void em_copies(em_t *em, double *mean)
{
    size_t n = em->n, d = em->d, dp = em->dp, nr = (n + RB - 1) / RB * RB;
    const float *x = em->x;
    memset(mean, 0, d * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double wi = em_row_w(em, i);
        float *xf = em->xf + i * dp;
        for (size_t j = 0; j < d; j++) {
            double t = (double)x[i * d + j] - em->ctr[j];
            xf[j] = (float)t;
            mean[j] += wi * t;
            if (em->xd)
                em->xd[i * d + j] = t;
        }
        memset(xf + d, 0, (dp - d) * sizeof(float));
    }
    memset(em->xf + n * dp, 0, (nr - n) * dp * sizeof(float)); /* the distance kernel reads rows by RB */
    for (size_t j = 0; j < d; j++)
        mean[j] /= em->wsum;
}

/* em->gvar: the (weighted) data variance per dimension about the exact mean, in double; em->reg. */
static void em_variance(em_t *em, const double *mean, double reg_covar)
{
    size_t n = em->n, d = em->d;
    const float *x = em->x;
    memset(em->gvar, 0, d * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double wi = em_row_w(em, i);
        for (size_t j = 0; j < d; j++) {
            double t = (double)x[i * d + j] - em->ctr[j] - mean[j];
            em->gvar[j] += wi * t * t;
        }
    }
    double mvar = 0.0;
    for (size_t j = 0; j < d; j++) {
        em->gvar[j] /= em->wsum;
        mvar += em->gvar[j];
    }
    mvar /= (double)d;
    /* reg_covar, but at least a tiny fraction of the data variance so that a model always exists. */
    double tiny = 1e-12 * (mvar > 0.0 ? mvar : 1.0);
    em->reg = reg_covar > tiny ? reg_covar : tiny;
}

/* Centre, working copies of the data, data variance, scratch for K components. */
static int em_init(em_t *em, const float *x, const double *w, double wsum, size_t n, size_t d, size_t K,
                   pft_cov_t cov, size_t q, double reg_covar)
{
    memset(em, 0, sizeof *em);
    em->w = w;
    em->wsum = wsum;
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
    double *mean = pft_alloc_array(d, sizeof(double));
    if (!mean) {
        em_free(em);
        return pft_err(PFT_ENOMEM, "gmm fit: out of memory");
    }
    em_centre(em);
    em_copies(em, mean);
    em_variance(em, mean, reg_covar);
    pft_free(mean);
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
    if ((rc = pft_kmeans_weighted(em->xf, em->w, (int)n, (int)dp, (int)K, opts->kmeans_iter, rng, centers,
                                  labels, NULL)) < 0)
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
    em->resp_w = 0;
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
    if (!pft_gmm__cov_valid(o->cov))
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
    if (pft_cov_shape(o->cov) == PFT_COV_SHAPE_FACTOR && o->rank < 1)
        return pft_err(PFT_EINVAL, "gmm fit: rank = %d (must be >= 1)", o->rank);
    return 0;
}

/* Smallest weight_k · W of a model (W: the rows represented). */
static double min_eff_rows(const pft_gmm_t *g, double W)
{
    double m = INFINITY;
    for (int c = 0; c < g->k; c++)
        if (g->weights[c] * W < m)
            m = g->weights[c] * W;
    return m;
}

/* Components of g with weight_k · W ≥ min_rows. */
static size_t n_meeting(const pft_gmm_t *g, double W, int min_rows)
{
    size_t ok = 0;
    for (int c = 0; c < g->k; c++)
        ok += g->weights[c] * W >= (double)min_rows;
    return ok;
}

/* Moment-preserving merge of component a into component b of g (diag, spher, full): a new model with K - 1
 * components whose merged component has weight w_a + w_b and the mean and covariance of the two together.
 * NULL on failure (message set). */
static pft_gmm_t *merge_pair(const pft_gmm_t *g, int a, int b)
{
    int K = g->k, d = g->d;
    size_t D = (size_t)d, cl = pft_cov_stored(g->cov, D);
    double *w = pft_alloc_array((size_t)K, sizeof *w), *mu = pft_alloc_array((size_t)K * D, sizeof *mu);
    double *cv = pft_alloc_array((size_t)K * cl, sizeof *cv);
    pft_gmm_t *out = w && mu && cv ? pft_gmm_new(K - 1, d, g->cov) : NULL;
    if (!out) {
        pft_free(w), pft_free(mu), pft_free(cv);
        pft_err(PFT_ENOMEM, "gmm fit: out of memory");
        return NULL;
    }
    int o = 0, mb = -1;
    for (int c = 0; c < K; c++) {
        if (c == a)
            continue;
        if (c == b)
            mb = o;
        w[o] = g->weights[c];
        memcpy(mu + (size_t)o * D, g->means + (size_t)c * D, D * sizeof *mu);
        memcpy(cv + (size_t)o * cl, g->covars + (size_t)c * cl, cl * sizeof *cv);
        o++;
    }
    double wa = g->weights[a], wb = g->weights[b], wt = wa + wb;
    const double *ma = g->means + (size_t)a * D, *mb_ = g->means + (size_t)b * D;
    double *m = mu + (size_t)mb * D, *S = cv + (size_t)mb * cl;
    const double *Sa = g->covars + (size_t)a * cl, *Sb = g->covars + (size_t)b * cl;
    for (size_t j = 0; j < D; j++)
        m[j] = (wa * ma[j] + wb * mb_[j]) / wt;
    if (pft_cov_shape(g->cov) == PFT_COV_SHAPE_MATRIX) {
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++)
                S[i * D + j] = (wa * (Sa[i * D + j] + (ma[i] - m[i]) * (ma[j] - m[j])) +
                                wb * (Sb[i * D + j] + (mb_[i] - m[i]) * (mb_[j] - m[j]))) /
                               wt;
    } else if (pft_cov_shape(g->cov) == PFT_COV_SHAPE_SCALAR) {
        double da = 0, db = 0;
        for (size_t j = 0; j < D; j++) {
            da += (ma[j] - m[j]) * (ma[j] - m[j]);
            db += (mb_[j] - m[j]) * (mb_[j] - m[j]);
        }
        S[0] = (wa * (Sa[0] + da / (double)D) + wb * (Sb[0] + db / (double)D)) / wt;
    } else {
        for (size_t j = 0; j < D; j++)
            S[j] = (wa * (Sa[j] + (ma[j] - m[j]) * (ma[j] - m[j])) +
                    wb * (Sb[j] + (mb_[j] - m[j]) * (mb_[j] - m[j]))) /
                   wt;
    }
    w[mb] = wt;
    if (pft_gmm_set_params(out, w, mu, cv) < 0)
        pft_gmm_destroy(&out);
    pft_free(w), pft_free(mu), pft_free(cv);
    return out;
}

/* Merges the component with the fewest rows into the one with the nearest mean until every component
 * stands for ≥ min_rows rows (or one is left). Returns 0 with *g replaced, or an error code. */
static int merge_small(pft_gmm_t **g, double W, int min_rows, int *merged)
{
    while ((*g)->k > 1) {
        int a = 0, K = (*g)->k, d = (*g)->d;
        for (int c = 1; c < K; c++)
            if ((*g)->weights[c] < (*g)->weights[a])
                a = c;
        if ((*g)->weights[a] * W >= (double)min_rows)
            return 0;
        int b = -1;
        double bd = INFINITY;
        for (int c = 0; c < K; c++) {
            if (c == a)
                continue;
            double s = 0;
            for (int j = 0; j < d; j++) {
                double t = (*g)->means[(size_t)a * d + j] - (*g)->means[(size_t)c * d + j];
                s += t * t;
            }
            if (s < bd) {
                bd = s;
                b = c;
            }
        }
        pft_gmm_t *m = merge_pair(*g, a, b);
        if (!m)
            return pft_err(PFT_ENUMERIC, "gmm fit: merging two components failed");
        pft_gmm_destroy(g);
        *g = m;
        (*merged)++;
    }
    return 0;
}

/* The best of opts->n_init EM runs at K components into *out (uncentred) and *info. */
static int fit_k(const float *x, const double *w, double W, size_t N, size_t D, size_t K, size_t Q,
                 const pft_gmm_opts_t *opts, pft_gmm_t **out, pft_gmm_info_t *info)
{
    em_t em;
    int rc;
    if ((rc = em_init(&em, x, w, W, N, D, K, opts->cov, Q, opts->reg_covar)) < 0)
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
            if (pft_cov_shape(opts->cov) == PFT_COV_SHAPE_MATRIX)
                pft_la_sym_from_lower(cand->covars + c * D * D, (int)D);
        }
        double avg;
        if ((rc = pft_gmm_score_weighted(cand, x, w, (int)N, &avg)) < 0) {
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
    *info = best_info;
done:
    pft_gmm_destroy(&best);
    pft_rng_destroy(&rng);
    em_free(&em);
    return rc;
}

int pft_gmm_fit(const float *x, int n, int d, const pft_gmm_opts_t *opts, pft_gmm_t **out,
                pft_gmm_info_t *info)
{
    return pft_gmm_fit_weighted(x, NULL, n, d, opts, out, info);
}

/* Components the privacy floor allows at the start: min(K, ⌊W / m⌋), at least 1 (m = 0: no floor). */
static size_t floor_start_k(size_t K, double W, int min_rows)
{
    if (!min_rows)
        return K;
    double q = floor(W / (double)min_rows);
    if (q * (double)min_rows > W) /* W/m rounded up to an integer */
        q -= 1.0;
    if (q < 1.0)
        return 1;
    return q < (double)K ? (size_t)q : K;
}

/* Checks sizes, options and data; sets *K (k capped at n rows) and *Q (lowrank rank, clamped). */
static int check_input(const float *x, int n, int d, const pft_gmm_opts_t *opts, size_t *K, size_t *Q)
{
    if (n < 1 || d < 1)
        return pft_err(PFT_EINVAL, "gmm fit: n = %d, d = %d (both must be >= 1)", n, d);
    int rc = check_opts(opts);
    if (rc < 0)
        return rc;
    size_t N = (size_t)n, D = (size_t)d;
    *K = (size_t)(opts->k < n ? opts->k : n);
    *Q = 0;
    if (pft_cov_shape(opts->cov) == PFT_COV_SHAPE_MATRIX && D * D > PFT_GMM_MAX_ELEMS / *K)
        return pft_err(PFT_EINVAL, "gmm fit: full covariance with d = %d, k = %zu is too large", d, *K);
    if (pft_cov_shape(opts->cov) == PFT_COV_SHAPE_FACTOR) {
        *Q = (size_t)opts->rank < D ? (size_t)opts->rank : D - 1; /* q ≥ d would be full: clamp */
        if (*Q && D * *Q > PFT_GMM_MAX_ELEMS / *K)
            return pft_err(PFT_EINVAL, "gmm fit: lowrank with d = %d, rank %zu, k = %zu is too large", d, *Q,
                           *K);
    }
    for (size_t i = 0; i < N * D; i++) {
        if (!isfinite(x[i]))
            return pft_err(PFT_EINVAL, "gmm fit: sample %zu, dimension %zu is not finite", i / D, i % D);
        if (fabsf(x[i]) > PFT_GMM_MAX_ABS)
            return pft_err(PFT_ERANGE, "gmm fit: sample %zu, dimension %zu is %g (|x| must be <= %g)", i / D,
                           i % D, (double)x[i], PFT_GMM_MAX_ABS);
    }
    return 0;
}

int pft_gmm_fit_weighted(const float *x, const double *w, int n, int d, const pft_gmm_opts_t *opts,
                         pft_gmm_t **out, pft_gmm_info_t *info)
{
    if (!x || !opts || !out)
        return pft_err(PFT_EINVAL, "gmm fit: NULL argument");
    *out = NULL;
    size_t K = 1, Q = 0, N = (size_t)n, D = (size_t)d;
    int rc = check_input(x, n, d, opts, &K, &Q);
    if (rc < 0)
        return rc;
    double W = (double)N; /* the rows represented */
    if (w && (rc = pft_gmm__check_weights(w, N, "gmm fit", &W)) < 0)
        return rc;
    int min_rows = opts->min_rows > 1 ? opts->min_rows : 0;
    size_t k_first = K;
    K = floor_start_k(K, W, min_rows); /* K components of ≥ m rows need K·m ≤ W */
    pft_gmm_t *g = NULL;
    pft_gmm_info_t gi = {0};
    int refits = 0;
    for (;;) {
        if ((rc = fit_k(x, w, W, N, D, K, Q, opts, &g, &gi)) < 0)
            return rc;
        size_t ok = min_rows ? n_meeting(g, W, min_rows) : K;
        if (ok == K || K == 1)
            break;
        if (pft_cov_shape(opts->cov) !=
            PFT_COV_SHAPE_FACTOR) { /* merge the smallest into its nearest until all meet the floor */
            int merged = 0;
            if ((rc = merge_small(&g, W, min_rows, &merged)) < 0 ||
                (rc = pft_gmm_score_weighted(g, x, w, n, &gi.avg_loglik)) < 0) {
                pft_gmm_destroy(&g);
                return rc;
            }
            gi.k_used = g->k;
            gi.floor_merged = merged;
            K = (size_t)g->k;
            break;
        }
        pft_gmm_destroy(&g); /* lowrank: a merge would leave the family; refit with one component fewer */
        K--;
        refits++;
    }
    gi.floor_dropped = (int)(k_first - K);
    gi.floor_refits = refits;
    gi.min_eff_rows = min_eff_rows(g, W);
    *out = g;
    if (info)
        *info = gi;
    return 0;
}
