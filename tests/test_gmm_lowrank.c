/* Tests of the lowrank covariance family (mixture of factor analysers): API, Woodbury scoring against a
 * dense computation, sampling, recovery of a known factor model, EM monotonicity, degenerate inputs. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_linalg.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_topo.h"

/* ---------- helpers ---------- */

/* A lowrank model with random parameters: means N(0, mscale²), loadings N(0, wscale²), noise variances
 * uniform in [plo, phi]. */
static pft_gmm_t *random_lowrank(pft_rng_t *r, int k, int d, int q, double mscale, double wscale, double plo,
                                 double phi)
{
    size_t K = (size_t)k, D = (size_t)d, Q = (size_t)q;
    pft_gmm_t *g = pft_gmm_new_lowrank(k, d, q);
    double *w = pft_alloc_array(K, sizeof *w), *mu = pft_alloc_array(K * D, sizeof *mu);
    double *W = pft_alloc_array(K * D * Q + 1, sizeof *W), *psi = pft_alloc_array(K * D, sizeof *psi);
    double s = 0;
    for (size_t c = 0; c < K; c++)
        s += w[c] = 0.2 + pft_rng_uniform(r);
    for (size_t c = 0; c < K; c++)
        w[c] /= s;
    for (size_t i = 0; i < K * D; i++) {
        mu[i] = mscale * pft_rng_normal(r);
        psi[i] = plo + (phi - plo) * pft_rng_uniform(r);
    }
    for (size_t i = 0; i < K * D * Q; i++)
        W[i] = wscale * pft_rng_normal(r);
    CHECK(g != NULL);
    if (g)
        CHECK_MSG(pft_gmm_set_params_lowrank(g, w, mu, W, psi) == 0, "%s", pft_errmsg());
    pft_free(w);
    pft_free(mu);
    pft_free(W);
    pft_free(psi);
    return g;
}

/* The same mixture as a full-covariance model: Σ_k = W_k W_kᵀ + Ψ_k formed densely. */
static pft_gmm_t *dense_copy(const pft_gmm_t *g)
{
    size_t K = (size_t)pft_gmm_k(g), D = (size_t)pft_gmm_dim(g), Q = (size_t)pft_gmm_rank(g);
    double *cov = pft_calloc(K * D * D, sizeof *cov);
    const double *W = pft_gmm_factors(g), *psi = pft_gmm_psi(g);
    for (size_t c = 0; c < K; c++)
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < D; j++) {
                double s = i == j ? psi[c * D + i] : 0.0;
                for (size_t l = 0; l < Q; l++)
                    s += W[(c * D + i) * Q + l] * W[(c * D + j) * Q + l];
                cov[(c * D + i) * D + j] = s;
            }
    pft_gmm_t *f = pft_gmm_new((int)K, (int)D, PFT_COV_FULL);
    CHECK(f && pft_gmm_set_params(f, pft_gmm_weights(g), pft_gmm_means(g), cov) == 0);
    pft_free(cov);
    return f;
}

/* Largest principal angle (radians) between the column spans of a and b (d×q row-major each). */
static double max_principal_angle(const double *a, const double *b, int d, int q)
{
    size_t D = (size_t)d, Q = (size_t)q;
    double *qa = pft_alloc_array(D * Q, sizeof *qa), *qb = pft_alloc_array(D * Q, sizeof *qb);
    double *m = pft_calloc(Q * Q, sizeof *m), *mm = pft_calloc(Q * Q, sizeof *mm),
           *ev = pft_alloc_array(Q, 8);
    memcpy(qa, a, D * Q * sizeof *qa);
    memcpy(qb, b, D * Q * sizeof *qb);
    CHECK(pft_la_orthonormalize(qa, d, q) == 0 && pft_la_orthonormalize(qb, d, q) == 0);
    for (size_t i = 0; i < Q; i++) /* m = Qaᵀ Qb */
        for (size_t j = 0; j < Q; j++)
            for (size_t t = 0; t < D; t++)
                m[i * Q + j] += qa[t * Q + i] * qb[t * Q + j];
    for (size_t i = 0; i < Q; i++) /* mm = mᵀ m: eigenvalues cos² θ */
        for (size_t j = 0; j < Q; j++)
            for (size_t t = 0; t < Q; t++)
                mm[i * Q + j] += m[t * Q + i] * m[t * Q + j];
    CHECK(pft_la_eigh(mm, q, ev) == 0);
    double c2 = ev[0] < 1.0 ? (ev[0] > 0.0 ? ev[0] : 0.0) : 1.0;
    pft_free(qa);
    pft_free(qb);
    pft_free(m);
    pft_free(mm);
    pft_free(ev);
    return acos(sqrt(c2));
}

/* Every parameter finite, noise variances positive, and the model scores and samples finite values. */
static int model_finite(const pft_gmm_t *g, const float *x, int n)
{
    size_t K = (size_t)pft_gmm_k(g), D = (size_t)pft_gmm_dim(g), Q = (size_t)pft_gmm_rank(g);
    int ok = pft_gmm_cov(g) == PFT_COV_LOWRANK && Q < D;
    for (size_t i = 0; i < K * D * Q; i++)
        ok &= isfinite(pft_gmm_factors(g)[i]);
    for (size_t i = 0; i < K * D; i++)
        ok &= isfinite(pft_gmm_means(g)[i]) && isfinite(pft_gmm_psi(g)[i]) && pft_gmm_psi(g)[i] > 0;
    double avg = NAN, bic = NAN;
    ok &= pft_gmm_score(g, x, n, &avg) == 0 && isfinite(avg);
    ok &= pft_gmm_bic(g, x, n, &bic) == 0 && isfinite(bic);
    float *s = pft_alloc_array(64 * D, sizeof *s);
    pft_rng_t *r = pft_rng_new(5);
    ok &= pft_gmm_sample(g, r, 64, s) == 0;
    for (size_t i = 0; i < 64 * D; i++)
        ok &= isfinite(s[i]);
    pft_rng_destroy(&r);
    pft_free(s);
    return ok;
}

/* ---------- tests ---------- */

static void test_api(void)
{
    pft_cov_t c;
    CHECK(strcmp(pft_cov_name(PFT_COV_LOWRANK), "lowrank") == 0);
    CHECK(pft_cov_parse("lowrank", &c) == 0 && c == PFT_COV_LOWRANK);
    CHECK(PFT_COV_LOWRANK == 3); /* wire format */
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    CHECK(o.rank == 32 && o.cov == PFT_COV_DIAG);

    CHECK(pft_gmm_new(2, 5, PFT_COV_LOWRANK) == NULL); /* needs a rank */
    CHECK(pft_gmm_new_lowrank(2, 5, 5) == NULL);       /* q ≥ d */
    CHECK(pft_gmm_new_lowrank(2, 5, -1) == NULL);
    CHECK(pft_gmm_new_lowrank(0, 5, 2) == NULL);
    pft_gmm_t *g0 = pft_gmm_new_lowrank(1, 1, 0); /* d = 1: only q = 0 */
    CHECK(g0 && pft_gmm_rank(g0) == 0 && pft_gmm_psi(g0)[0] == 1.0);
    pft_gmm_destroy(&g0);

    pft_gmm_t *g = pft_gmm_new_lowrank(3, 7, 2);
    CHECK(g && pft_gmm_cov(g) == PFT_COV_LOWRANK && pft_gmm_rank(g) == 2 && pft_gmm_k(g) == 3);
    CHECK(pft_gmm_chol(g) == NULL && pft_gmm_factors(g) && pft_gmm_psi(g) == pft_gmm_covars(g));
    CHECK(pft_gmm_factors(g)[0] == 0.0 && pft_gmm_psi(g)[20] == 1.0 &&
          fabs(pft_gmm_weights(g)[2] - 1.0 / 3) < 1e-15);
    /* formulas: wire (d·q + 2d + 1)K; free (K-1) + K·d + K(d·q + d - q(q-1)/2) */
    CHECK(pft_gmm_n_wire_params(g) == (7 * 2 + 2 * 7 + 1) * 3);
    CHECK(pft_gmm_n_free_params(g) == 2 + 3 * 7 + 3 * (7 * 2 + 7 - 1));
    pft_gmm_t *dg = pft_gmm_new(3, 7, PFT_COV_DIAG);
    CHECK(pft_gmm_rank(dg) == 0 && pft_gmm_factors(dg) == NULL && pft_gmm_psi(dg) == NULL);
    double w[3] = {0.2, 0.3, 0.5}, mu[21] = {0}, W[42], psi[21];
    for (int i = 0; i < 42; i++)
        W[i] = 0.1 * i;
    for (int i = 0; i < 21; i++)
        psi[i] = 0.5 + i;
    CHECK(pft_gmm_set_params_lowrank(dg, w, mu, W, psi) == PFT_EINVAL); /* not lowrank */
    CHECK(pft_gmm_set_params(g, w, mu, psi) == PFT_EINVAL);             /* lowrank needs W */
    CHECK(pft_gmm_set_params_lowrank(g, w, mu, NULL, psi) == PFT_EINVAL);
    psi[4] = 0.0;
    CHECK(pft_gmm_set_params_lowrank(g, w, mu, W, psi) == PFT_ENUMERIC);
    CHECK_MSG(strstr(pft_errmsg(), "component 0: noise variance 4") != NULL, "%s", pft_errmsg());
    psi[4] = 1.0;
    W[17] = NAN;
    CHECK(pft_gmm_set_params_lowrank(g, w, mu, W, psi) == PFT_EINVAL);
    CHECK_MSG(strstr(pft_errmsg(), "component 1: factor loading (1,1)") != NULL, "%s", pft_errmsg());
    CHECK(pft_gmm_factors(g)[17] == 0.0); /* unaltered on error */
    W[17] = 1.7;
    w[0] = 0.3;
    CHECK(pft_gmm_set_params_lowrank(g, w, mu, W, psi) == PFT_EINVAL);
    w[0] = 0.2;
    CHECK(pft_gmm_set_params_lowrank(g, w, mu, W, psi) == 0);
    pft_gmm_t *cp = pft_gmm_dup(g);
    CHECK(cp && pft_gmm_rank(cp) == 2 && memcmp(pft_gmm_factors(cp), W, sizeof W) == 0 &&
          memcmp(pft_gmm_psi(cp), psi, sizeof psi) == 0 && pft_gmm_factors(cp) != pft_gmm_factors(g));
    /* fit refuses rank < 1 */
    float x[40];
    for (int i = 0; i < 40; i++)
        x[i] = (float)(i % 7);
    o.cov = PFT_COV_LOWRANK;
    o.rank = 0;
    pft_gmm_t *f = NULL;
    CHECK(pft_gmm_fit(x, 8, 5, &o, &f, NULL) == PFT_EINVAL && f == NULL);
    pft_gmm_destroy(&cp);
    pft_gmm_destroy(&dg);
    pft_gmm_destroy(&g);
    pft_gmm_destroy(&g);
}

/* Woodbury / determinant-lemma scoring equals a dense-covariance computation of the same model. */
static void check_dense(pft_rng_t *r, int k, int d, int q, double mscale, double wscale, double plo,
                        double phi, int n)
{
    pft_gmm_t *g = random_lowrank(r, k, d, q, mscale, wscale, plo, phi);
    pft_gmm_t *f = dense_copy(g);
    float *x = pft_alloc_array((size_t)n * (size_t)d, sizeof *x);
    double *a = pft_alloc_array((size_t)n, sizeof *a), *b = pft_alloc_array((size_t)n, sizeof *b);
    CHECK(pft_gmm_sample(g, r, n - 10, x) == 0);
    for (size_t i = (size_t)(n - 10) * (size_t)d; i < (size_t)n * (size_t)d; i++) /* 10 far outliers */
        x[i] = (float)(5.0 * mscale * pft_rng_normal(r) + 3.0);
    CHECK(pft_gmm_score_samples(g, x, n, a) == 0 && pft_gmm_score_samples(f, x, n, b) == 0);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double rel = fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i]));
        worst = rel > worst ? rel : worst;
    }
    CHECK_MSG(worst <= 1e-6, "k %d d %d q %d: max relative difference %.3g", k, d, q, worst);
    fprintf(stderr, "    k=%d d=%d q=%d: max rel diff vs dense %.2e (ll of row 0: %.6f)\n", k, d, q, worst,
            a[0]);
    double bic, ll;
    CHECK(pft_gmm_bic(g, x, n, &bic) == 0 && pft_gmm_score(g, x, n, &ll) == 0);
    CHECK_NEAR(bic, -2.0 * ll * n + (double)pft_gmm_n_free_params(g) * log((double)n), 1e-9 * fabs(bic));
    pft_free(x);
    pft_free(a);
    pft_free(b);
    pft_gmm_destroy(&g);
    pft_gmm_destroy(&f);
}

static void test_loglik_matches_dense(void)
{
    pft_rng_t *r = pft_rng_new(11);
    check_dense(r, 3, 40, 5, 2.0, 0.5, 0.05, 1.0, 400);
    check_dense(r, 1, 12, 11, 1.0, 1.0, 0.01, 0.1, 200); /* q = d - 1 */
    check_dense(r, 2, 9, 0, 1.0, 1.0, 0.1, 2.0, 100);    /* q = 0: diagonal */
    /* PACS-like scales: variances ~1e-4, strong factors over weak noise (cancellation in Woodbury) */
    check_dense(r, 2, 256, 32, 0.03, 0.01, 2e-6, 5e-5, 300);
    pft_rng_destroy(&r);
}

static void test_sampling(void)
{
    pft_rng_t *r = pft_rng_new(3);
    const int d = 6, q = 2, n = 200000;
    pft_gmm_t *g = random_lowrank(r, 1, d, q, 1.0, 1.0, 0.2, 0.8);
    float *x = pft_alloc_array((size_t)n * d, sizeof *x), *y = pft_alloc_array((size_t)n * d, sizeof *y);
    pft_rng_t *a = pft_rng_new(77), *b = pft_rng_new(77);
    CHECK(pft_gmm_sample(g, a, n, x) == 0 && pft_gmm_sample(g, b, n, y) == 0);
    CHECK(memcmp(x, y, (size_t)n * d * sizeof *x) == 0); /* seeded */
    double mean[6] = {0}, cov[36] = {0};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            mean[j] += x[i * d + j] / (double)n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            for (int l = 0; l < d; l++)
                cov[j * d + l] += (x[i * d + j] - mean[j]) * (x[i * d + l] - mean[l]) / (double)n;
    const double *W = pft_gmm_factors(g), *psi = pft_gmm_psi(g), *mu = pft_gmm_means(g);
    double worst = 0;
    for (int j = 0; j < d; j++) {
        double sj = psi[j] + W[j * q] * W[j * q] + W[j * q + 1] * W[j * q + 1];
        CHECK_NEAR(mean[j], mu[j], 5 * sqrt(sj / n));
        for (int l = 0; l < d; l++) {
            double sl = psi[l] + W[l * q] * W[l * q] + W[l * q + 1] * W[l * q + 1];
            double want = (j == l ? psi[j] : 0.0) + W[j * q] * W[l * q] + W[j * q + 1] * W[l * q + 1];
            double err = fabs(cov[j * d + l] - want) / sqrt(sj * sl);
            worst = err > worst ? err : worst;
        }
    }
    CHECK_MSG(worst < 0.02, "sample covariance off by %.3g (relative to sqrt(s_jj s_ll))", worst);
    pft_rng_destroy(&a);
    pft_rng_destroy(&b);
    pft_rng_destroy(&r);
    pft_free(x);
    pft_free(y);
    pft_gmm_destroy(&g);
}

/* Data x (n×d) from one factor model: x = μ + W z + Ψ^{1/2} ε. */
static void draw_factor_model(pft_rng_t *r, const double *mu, const double *W, const double *psi, int d,
                              int q, int n, float *x)
{
    for (int i = 0; i < n; i++) {
        double z[16];
        for (int l = 0; l < q; l++)
            z[l] = pft_rng_normal(r);
        for (int j = 0; j < d; j++) {
            double v = mu[j] + sqrt(psi[j]) * pft_rng_normal(r);
            for (int l = 0; l < q; l++)
                v += W[j * q + l] * z[l];
            x[(size_t)i * d + j] = (float)v;
        }
    }
}

static void test_recovers_factor_model(void)
{
    pft_rng_t *r = pft_rng_new(21);
    const int d = 30, q = 3, n = 20000;
    double mu[30], W[90], psi[30];
    for (int j = 0; j < d; j++) {
        mu[j] = 2.0 * pft_rng_normal(r);
        psi[j] = 0.1 + 0.5 * pft_rng_uniform(r);
    }
    for (int i = 0; i < d * q; i++)
        W[i] = pft_rng_normal(r);
    float *x = pft_alloc_array((size_t)n * d, sizeof *x);
    draw_factor_model(r, mu, W, psi, d, q, n, x);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = 1;
    o.rank = q;
    o.tol = 1e-7;
    o.max_iter = 2000;
    pft_gmm_t *g = NULL, *g0 = NULL;
    pft_gmm_info_t info;
    CHECK_MSG(pft_gmm_fit(x, n, d, &o, &g, &info) == 0, "%s", pft_errmsg());
    if (!g)
        goto done;
    double angle = max_principal_angle(W, pft_gmm_factors(g), d, q), worst = 0;
    for (int j = 0; j < d; j++) {
        double rel = fabs(pft_gmm_psi(g)[j] - psi[j]) / psi[j];
        worst = rel > worst ? rel : worst;
    }
    fprintf(stderr,
            "    K=1 d=%d q=%d n=%d: %d iters, max principal angle %.4f rad, max noise rel err %.3f\n", d, q,
            n, info.iters, angle, worst);
    CHECK_MSG(angle < 0.05, "principal angle %.4f", angle);
    CHECK_MSG(worst < 0.1, "noise variance relative error %.3f", worst);
    CHECK(info.converged);
    /* maximum likelihood: the fit explains its training data at least as well as the true model */
    pft_gmm_t *truth = pft_gmm_new_lowrank(1, d, q);
    double one = 1.0, ll_fit, ll_true;
    CHECK(pft_gmm_set_params_lowrank(truth, &one, mu, W, psi) == 0);
    CHECK(pft_gmm_score(truth, x, n, &ll_true) == 0 && pft_gmm_score(g, x, n, &ll_fit) == 0);
    CHECK_MSG(ll_fit >= ll_true - 1e-6, "fit %.6f < truth %.6f", ll_fit, ll_true);
    CHECK_NEAR(info.avg_loglik, ll_fit, 1e-9 * fabs(ll_fit));
    /* and better than its own PCA start (max_iter 0) */
    o.max_iter = 0;
    pft_gmm_info_t info0;
    CHECK(pft_gmm_fit(x, n, d, &o, &g0, &info0) == 0);
    CHECK_MSG(info.avg_loglik > info0.avg_loglik, "EM %.6f vs PCA start %.6f", info.avg_loglik,
              info0.avg_loglik);
    pft_gmm_destroy(&truth);
done:
    pft_gmm_destroy(&g);
    pft_gmm_destroy(&g0);
    pft_free(x);
    pft_rng_destroy(&r);
}

/* Two factor analysers with their own subspaces, far apart: a K = 2 fit finds both. */
static void test_recovers_mixture(void)
{
    pft_rng_t *r = pft_rng_new(31);
    const int d = 20, q = 2, nc = 8000, n = 2 * nc;
    double mu[2][20], W[2][40], psi[2][20];
    for (int c = 0; c < 2; c++) {
        for (int j = 0; j < d; j++) {
            mu[c][j] = (c ? 6.0 : -6.0) + pft_rng_normal(r);
            psi[c][j] = 0.05 + 0.3 * pft_rng_uniform(r);
        }
        for (int i = 0; i < d * q; i++)
            W[c][i] = pft_rng_normal(r);
    }
    float *x = pft_alloc_array((size_t)n * d, sizeof *x);
    draw_factor_model(r, mu[0], W[0], psi[0], d, q, nc, x);
    draw_factor_model(r, mu[1], W[1], psi[1], d, q, nc, x + (size_t)nc * d);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = 2;
    o.rank = q;
    o.tol = 1e-6;
    o.max_iter = 1000;
    o.seed = 4;
    pft_gmm_t *g = NULL;
    pft_gmm_info_t info;
    CHECK_MSG(pft_gmm_fit(x, n, d, &o, &g, &info) == 0, "%s", pft_errmsg());
    if (g) {
        for (int c = 0; c < 2; c++) {
            int t = pft_gmm_means(g)[c * d] * mu[1][0] > 0; /* the true component on the same side */
            double angle = max_principal_angle(W[t], pft_gmm_factors(g) + (size_t)c * d * q, d, q), worst = 0;
            for (int j = 0; j < d; j++) {
                double rel = fabs(pft_gmm_psi(g)[c * d + j] - psi[t][j]) / psi[t][j];
                worst = rel > worst ? rel : worst;
            }
            fprintf(
                stderr,
                "    K=2 component %d (true %d): weight %.4f, angle %.4f rad, noise rel err %.3f, %d iters\n",
                c, t, pft_gmm_weights(g)[c], angle, worst, info.iters);
            CHECK_NEAR(pft_gmm_weights(g)[c], 0.5, 1e-3);
            CHECK(angle < 0.05);
            CHECK(worst < 0.15);
        }
    }
    pft_gmm_destroy(&g);
    pft_free(x);
    pft_rng_destroy(&r);
}

/* Blobs of random factor models for the EM tests. */
static float *blob_data(pft_rng_t *r, int k, int d, int q, int per, double sep)
{
    float *x = pft_alloc_array((size_t)k * per * d, sizeof *x);
    double *mu = pft_alloc_array((size_t)d, 8), *W = pft_alloc_array((size_t)d * q, 8),
           *psi = pft_alloc_array((size_t)d, 8);
    for (int c = 0; c < k; c++) {
        for (int j = 0; j < d; j++) {
            mu[j] = sep * pft_rng_normal(r);
            psi[j] = 0.1 + pft_rng_uniform(r);
        }
        for (int i = 0; i < d * q; i++)
            W[i] = pft_rng_normal(r);
        draw_factor_model(r, mu, W, psi, d, q, per, x + (size_t)c * per * d);
    }
    pft_free(mu);
    pft_free(W);
    pft_free(psi);
    return x;
}

/* AECM never decreases the log-likelihood: runs of 1, 2, ... iterations from the same start. */
static void test_em_monotone(void)
{
    pft_rng_t *r = pft_rng_new(41);
    const int k = 3, d = 15, q = 3, per = 300, n = k * per;
    float *x = blob_data(r, k, d, q, per, 1.5); /* overlapping: EM has work to do */
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = k;
    o.rank = q;
    o.tol = 0;
    double prev = -INFINITY;
    int drops = 0;
    for (int it = 1; it <= 25; it++) {
        o.max_iter = it;
        pft_gmm_t *g = NULL;
        pft_gmm_info_t info;
        CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
        if (!g)
            break;
        CHECK(info.reseeded == 0);
        if (info.avg_loglik < prev - 1e-9 * fabs(prev)) {
            drops++;
            fprintf(stderr, "    iteration %d: %.9f < %.9f\n", it, info.avg_loglik, prev);
        }
        prev = info.avg_loglik;
        pft_gmm_destroy(&g);
    }
    CHECK_MSG(drops == 0, "log-likelihood decreased %d times", drops);
    /* K = 1 (accelerated factor-analysis steps): more iterations never end worse than fewer */
    o.k = 1;
    double ll[4];
    const int its[4] = {0, 1, 5, 100};
    for (int i = 0; i < 4; i++) {
        o.max_iter = its[i];
        o.tol = 1e-8;
        pft_gmm_t *g = NULL;
        pft_gmm_info_t info;
        CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
        ll[i] = info.avg_loglik;
        pft_gmm_destroy(&g);
        if (i > 0)
            CHECK_MSG(ll[i] >= ll[i - 1] - 1e-9 * fabs(ll[i]), "K=1: %d iters %.9f < %d iters %.9f", its[i],
                      ll[i], its[i - 1], ll[i - 1]);
    }
    pft_free(x);
    pft_rng_destroy(&r);
}

static void test_seeded(void)
{
    pft_rng_t *r = pft_rng_new(51);
    const int k = 3, d = 12, q = 2, per = 200, n = k * per;
    float *x = blob_data(r, k, d, q, per, 2.0);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = 4;
    o.rank = q;
    o.seed = 9;
    pft_gmm_t *a = NULL, *b = NULL, *c = NULL;
    CHECK(pft_gmm_fit(x, n, d, &o, &a, NULL) == 0 && pft_gmm_fit(x, n, d, &o, &b, NULL) == 0);
    o.seed = 10;
    CHECK(pft_gmm_fit(x, n, d, &o, &c, NULL) == 0);
    if (a && b && c) {
        size_t nw = (size_t)4 * d * q;
        CHECK(memcmp(pft_gmm_factors(a), pft_gmm_factors(b), nw * sizeof(double)) == 0);
        CHECK(memcmp(pft_gmm_psi(a), pft_gmm_psi(b), (size_t)4 * d * sizeof(double)) == 0);
        CHECK(memcmp(pft_gmm_means(a), pft_gmm_means(b), (size_t)4 * d * sizeof(double)) == 0);
        CHECK(memcmp(pft_gmm_factors(a), pft_gmm_factors(c), nw * sizeof(double)) != 0);
    }
    pft_gmm_destroy(&a);
    pft_gmm_destroy(&b);
    pft_gmm_destroy(&c);
    pft_free(x);
    pft_rng_destroy(&r);
}

/* Fits x (n×d) with lowrank K = k, rank q and checks the model is finite; returns the rank used. */
static int fit_degenerate(const char *what, const float *x, int n, int d, int k, int q, double reg)
{
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = k;
    o.rank = q;
    o.reg_covar = reg;
    pft_gmm_t *g = NULL;
    pft_gmm_info_t info;
    int rc = pft_gmm_fit(x, n, d, &o, &g, &info);
    CHECK_MSG(rc == 0, "%s: %s", what, pft_errmsg());
    int used = -1;
    if (g) {
        CHECK_MSG(model_finite(g, x, n), "%s: model not finite", what);
        CHECK_MSG(isfinite(info.avg_loglik), "%s: avg loglik %g", what, info.avg_loglik);
        used = pft_gmm_rank(g);
    }
    pft_gmm_destroy(&g);
    return used;
}

static void test_degenerate(void)
{
    pft_rng_t *r = pft_rng_new(61);
    const int d = 10;
    float *x = pft_alloc_array(200 * d, sizeof *x);
    for (int i = 0; i < 50 * d; i++) /* identical rows */
        x[i] = (float)(i % d) * 0.5f - 1.0f;
    fit_degenerate("identical rows K=1", x, 50, d, 1, 4, 1e-6);
    fit_degenerate("identical rows K=3", x, 50, d, 3, 4, 1e-6);
    fit_degenerate("identical rows, reg 0", x, 50, d, 2, 4, 0.0);
    fit_degenerate("one row", x, 1, d, 1, 4, 1e-6);
    for (int i = 0; i < 200 * d; i++)
        x[i] = (float)pft_rng_normal(r);
    fit_degenerate("n < q", x, 3, d, 1, 8, 1e-6);
    fit_degenerate("n < q, K=2", x, 3, d, 2, 8, 1e-6);
    fit_degenerate("K = n", x, 6, d, 6, 2, 1e-6);
    CHECK(fit_degenerate("rank ≥ d clamps", x, 200, d, 1, 50, 1e-6) == d - 1);
    CHECK(fit_degenerate("d = 1", x, 200, 1, 2, 32, 1e-6) == 0);
    CHECK(fit_degenerate("d = 2", x, 200, 2, 1, 32, 1e-6) == 1);
    for (int i = 0; i < 200; i++) /* a constant dimension, a duplicated dimension */
        x[i * d + 3] = 2.5f, x[i * d + 5] = x[i * d + 4];
    fit_degenerate("constant and duplicated dimensions", x, 200, d, 2, 3, 1e-6);
    fit_degenerate("constant and duplicated dimensions, reg 0", x, 200, d, 2, 3, 0.0);
    for (int i = 0; i < 200 * d; i++) /* two points only */
        x[i] = (float)((i / d) % 2) * 3.0f + (float)(i % d);
    fit_degenerate("two distinct points", x, 200, d, 3, 2, 1e-6);
    for (int i = 0; i < 200 * d; i++)
        x[i] = (float)(1e12 * pft_rng_normal(r));
    fit_degenerate("scale 1e12", x, 200, d, 2, 3, 1e-6);
    for (int i = 0; i < 200 * d; i++)
        x[i] = (float)(1e-12 * pft_rng_normal(r));
    fit_degenerate("scale 1e-12", x, 200, d, 2, 3, 0.0);
    pft_free(x);
    pft_rng_destroy(&r);
}

/* Real features: a rank-32 fit of one PACS class scores like the dense matrix it stands for. */
static void test_pacs(void)
{
    char xbuf[4096], ybuf[4096];
    snprintf(xbuf, sizeof xbuf, "%s", pft_test_example_data("train_x.npy"));
    snprintf(ybuf, sizeof ybuf, "%s", pft_test_example_data("train_y.npy"));
    pft_dataset_t *ds = NULL;
    float *xc = NULL;
    int n = 0;
    CHECK(pft_npy_load_dataset(xbuf, ybuf, 0, &ds) == 0);
    if (!ds)
        return;
    CHECK(pft_dataset_apply_prep(ds, PFT_PREP_L2) == 0);
    CHECK(pft_dataset_gather_class(ds, 5, &xc, &n) == 0);
    int d = pft_dataset_d(ds);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_LOWRANK;
    o.k = 1;
    o.rank = 32;
    pft_gmm_t *g = NULL, *g0 = NULL;
    pft_gmm_info_t info, info0;
    CHECK(pft_gmm_fit(xc, n, d, &o, &g, &info) == 0);
    o.max_iter = 0;
    CHECK(pft_gmm_fit(xc, n, d, &o, &g0, &info0) == 0);
    if (g && g0) {
        fprintf(stderr,
                "    PACS class 5 (%d rows, l2): rank 32 avg loglik %.4f after %d iters (PCA start %.4f)\n",
                n, info.avg_loglik, info.iters, info0.avg_loglik);
        CHECK(info.avg_loglik > info0.avg_loglik && info.converged);
        pft_gmm_t *f = dense_copy(g);
        double *a = pft_alloc_array(64, 8), *b = pft_alloc_array(64, 8), worst = 0;
        CHECK(pft_gmm_score_samples(g, xc, 64, a) == 0 && f && pft_gmm_score_samples(f, xc, 64, b) == 0);
        for (int i = 0; i < 64; i++)
            worst = fmax(worst, fabs(a[i] - b[i]) / fabs(b[i]));
        fprintf(stderr, "    Woodbury vs dense on 64 rows: max rel diff %.2e\n", worst);
        CHECK(worst <= 1e-6);
        pft_free(a);
        pft_free(b);
        pft_gmm_destroy(&f);
    }
    pft_gmm_destroy(&g);
    pft_gmm_destroy(&g0);
    pft_free(xc);
    pft_dataset_destroy(&ds);
}

/* Topology files carry the family and its rank: graph default, node override, default 32, bounds. */
static void test_topology_attrs(void)
{
    char path[] = "/tmp/pft_lowrank_topo_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const char *text = "digraph t {\n  dataset = \"/nonexistent\"; cov = lowrank; cov_rank = 8;\n"
                       "  a -> b -> c;\n  b [cov_rank = 4];\n  c [cov = diag];\n}\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    pft_topo_t *t = NULL;
    CHECK_MSG(pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t) == 0, "%s", pft_errmsg());
    if (t) {
        CHECK(pft_topo_run(t)->cov == PFT_COV_LOWRANK && pft_topo_run(t)->cov_rank == 8);
        CHECK(pft_topo_find(t, "a")->cov == PFT_COV_LOWRANK && pft_topo_find(t, "a")->cov_rank == 8);
        CHECK(pft_topo_find(t, "b")->cov == PFT_COV_LOWRANK && pft_topo_find(t, "b")->cov_rank == 4);
        CHECK(pft_topo_find(t, "c")->cov == PFT_COV_DIAG);
        pft_topo_destroy(&t);
    }
    FILE *f = fopen(path, "w");
    fputs("digraph t {\n  dataset = \"/nonexistent\"; cov = lowrank;\n  a -> b;\n}\n", f);
    fclose(f);
    CHECK(pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t) == 0);
    if (t)
        CHECK(pft_topo_run(t)->cov_rank == 32 && pft_topo_find(t, "b")->cov_rank == 32); /* default */
    pft_topo_destroy(&t);
    f = fopen(path, "w");
    fputs("digraph t {\n  dataset = \"/nonexistent\"; cov = lowrank;\n  a -> b;\n  b [cov_rank = 0];\n}\n",
          f);
    fclose(f);
    CHECK(pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t) != 0 && t == NULL);
    CHECK_MSG(strstr(pft_errmsg(), ":4:") && strstr(pft_errmsg(), "cov_rank=0"), "%s", pft_errmsg());
    f = fopen(path, "w");
    fputs("digraph t {\n  dataset = \"/nonexistent\"; cov = lowrnak;\n  a -> b;\n}\n", f);
    fclose(f);
    CHECK(pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t) != 0);
    CHECK_MSG(strstr(pft_errmsg(), "full|diag|spher|lowrank") != NULL, "%s", pft_errmsg());
    unlink(path);
}

int main(void)
{
    RUN(test_api);
    RUN(test_loglik_matches_dense);
    RUN(test_sampling);
    RUN(test_recovers_factor_model);
    RUN(test_recovers_mixture);
    RUN(test_em_monotone);
    RUN(test_seeded);
    RUN(test_degenerate);
    RUN(test_topology_attrs);
    RUN(test_pacs);
    return pft_test_done();
}
