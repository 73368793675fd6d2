/* Tests of pft_gmm_fit_weighted and pft_gmm_score_weighted: a row of weight w is the row repeated w times
 * (every covariance family, K > 1), NULL and all-ones weights give pft_gmm_fit's result bit for bit, the K =
 * 1 closed form is the weighted moment estimate, the privacy floor counts represented rows (fractional
 * weights), bad weights are refused with the row named. */
#include <stdint.h>
#include <string.h>

#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_test.h"

/* n rows in d dimensions around three centres 6 apart, with distinct scales per dimension (so that a lowrank
 * fit has well-defined principal directions) and a correlation between dimensions 0 and 1. */
static float *three_blobs(int n, int d, uint64_t seed)
{
    pft_rng_t *r = pft_rng_new(seed);
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)d);
    for (int i = 0; i < n; i++) {
        int c = i % 3;
        double z0 = pft_rng_normal(r);
        for (int j = 0; j < d; j++) {
            double v = (j == c % d ? 6.0 : 0.0) + (j == (c + 1) % d ? -3.0 * c : 0.0) +
                       (0.5 + 0.6 * j) * pft_rng_normal(r) + (j < 2 ? 0.8 * z0 : 0.0);
            x[(size_t)i * d + j] = (float)v;
        }
    }
    pft_rng_destroy(&r);
    return x;
}

/* n rows in d dimensions around three centres 8 apart, each cluster a factor-analysis model: two factors of
 * scales 3 and 2 (different directions per cluster) and noise of scale 0.3, so a lowrank fit is well posed.
 */
static float *three_factor_blobs(int n, int d, uint64_t seed)
{
    pft_rng_t *r = pft_rng_new(seed);
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)d);
    for (int i = 0; i < n; i++) {
        int c = i % 3;
        double z1 = 3.0 * pft_rng_normal(r), z2 = 2.0 * pft_rng_normal(r);
        for (int j = 0; j < d; j++) {
            double f1 = j == (c + 1) % d ? 1.0 : j == (c + 2) % d ? 0.5 : 0.0;
            double f2 = j == (c + 3) % d ? 1.0 : j == c % d ? -0.4 : 0.0;
            x[(size_t)i * d + j] =
                (float)((j == c % d ? 8.0 : 0.0) + f1 * z1 + f2 * z2 + 0.3 * pft_rng_normal(r));
        }
    }
    pft_rng_destroy(&r);
    return x;
}

/* Integer weights 1, 2, 3 in a fixed pattern. */
static double *int_weights(int n, int *total)
{
    double *w = malloc(sizeof(double) * (size_t)n);
    *total = 0;
    for (int i = 0; i < n; i++) {
        w[i] = 1.0 + (double)((i * 7) % 3);
        *total += (int)w[i];
    }
    return w;
}

/* Row i repeated w[i] times, consecutively and in order. */
static float *repeat_rows(const float *x, const double *w, int n, int d, int total)
{
    float *y = malloc(sizeof(float) * (size_t)total * (size_t)d);
    size_t o = 0;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < (int)w[i]; t++, o++)
            memcpy(y + o * d, x + (size_t)i * d, sizeof(float) * (size_t)d);
    return y;
}

/* max_i |a_i - b_i| / max(|b_i|, 1) */
static double rel_diff(const double *a, const double *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / fmax(fabs(b[i]), 1.0);
        m = e > m ? e : m;
    }
    return m;
}

static size_t covars_len(const pft_gmm_t *g)
{
    size_t k = (size_t)pft_gmm_k(g), d = (size_t)pft_gmm_dim(g);
    switch (pft_gmm_cov(g)) {
    case PFT_COV_FULL:
        return k * d * d;
    case PFT_COV_SPHER:
        return k;
    default:
        return k * d;
    }
}

/* Largest relative parameter difference of two models of the same shape (INFINITY if the shapes differ). */
static double model_diff(const pft_gmm_t *a, const pft_gmm_t *b)
{
    if (pft_gmm_k(a) != pft_gmm_k(b) || pft_gmm_dim(a) != pft_gmm_dim(b) || pft_gmm_cov(a) != pft_gmm_cov(b))
        return INFINITY;
    size_t k = (size_t)pft_gmm_k(a), d = (size_t)pft_gmm_dim(a);
    double m = rel_diff(pft_gmm_weights(a), pft_gmm_weights(b), k);
    m = fmax(m, rel_diff(pft_gmm_means(a), pft_gmm_means(b), k * d));
    m = fmax(m, rel_diff(pft_gmm_covars(a), pft_gmm_covars(b), covars_len(a)));
    if (pft_gmm_cov(a) == PFT_COV_LOWRANK)
        m = fmax(m, rel_diff(pft_gmm_factors(a), pft_gmm_factors(b), k * d * (size_t)pft_gmm_rank(a)));
    return m;
}

/* Same bits: parameters and the info a caller sees. */
static int same_bits(const pft_gmm_t *a, const pft_gmm_t *b, const pft_gmm_info_t *ia,
                     const pft_gmm_info_t *ib)
{
    if (model_diff(a, b) == INFINITY)
        return 0;
    size_t k = (size_t)pft_gmm_k(a), d = (size_t)pft_gmm_dim(a);
    int same = memcmp(pft_gmm_weights(a), pft_gmm_weights(b), k * sizeof(double)) == 0 &&
               memcmp(pft_gmm_means(a), pft_gmm_means(b), k * d * sizeof(double)) == 0 &&
               memcmp(pft_gmm_covars(a), pft_gmm_covars(b), covars_len(a) * sizeof(double)) == 0;
    if (pft_gmm_cov(a) == PFT_COV_LOWRANK)
        same &= memcmp(pft_gmm_factors(a), pft_gmm_factors(b),
                       k * d * (size_t)pft_gmm_rank(a) * sizeof(double)) == 0;
    return same && memcmp(&ia->avg_loglik, &ib->avg_loglik, sizeof(double)) == 0 && ia->iters == ib->iters &&
           ia->k_used == ib->k_used && ia->reseeded == ib->reseeded;
}

static void opts_for(pft_gmm_opts_t *o, pft_cov_t cov, int k)
{
    pft_gmm_opts_default(o);
    o->k = k;
    o->cov = cov;
    o->max_iter = 30;
    o->tol = 0.0;
    o->rank = 2;
    o->seed = 5;
    o->reg_covar =
        1e-9; /* full/lowrank drop rows below 1e-3·reg of mass: keep that far below the tolerance */
}

/* Integer weights against the rows repeated: the k-means++ draws agree, so the fits agree to rounding:
 * parameters to tol after max_iter iterations, the mean log-likelihoods to tol_ll. */
static void check_weighted_is_repeated(pft_cov_t cov, int max_iter, double tol, double tol_ll)
{
    const int n = 300, d = 6;
    int total;
    float *x = cov == PFT_COV_LOWRANK ? three_factor_blobs(n, d, 11) : three_blobs(n, d, 11);
    double *w = int_weights(n, &total);
    float *y = repeat_rows(x, w, n, d, total);
    pft_gmm_opts_t o;
    opts_for(&o, cov, 3);
    o.max_iter = max_iter;
    pft_gmm_t *gw = NULL, *gr = NULL;
    pft_gmm_info_t iw, ir;
    CHECK_MSG(pft_gmm_fit_weighted(x, w, n, d, &o, &gw, &iw) == 0, "%s", pft_errmsg());
    CHECK_MSG(pft_gmm_fit(y, total, d, &o, &gr, &ir) == 0, "%s", pft_errmsg());
    if (gw && gr) {
        double e = model_diff(gw, gr);
        CHECK_MSG(e <= tol, "%s: weighted vs repeated differ by %.3g (tol %.3g)", pft_cov_name(cov), e, tol);
        CHECK(iw.k_used == 3 && ir.k_used == 3 && iw.iters == ir.iters);
        CHECK_NEAR(iw.avg_loglik, ir.avg_loglik, tol_ll * fabs(ir.avg_loglik));
        double s;
        CHECK(pft_gmm_score_weighted(gw, x, w, n, &s) == 0);
        CHECK_NEAR(s, iw.avg_loglik, 1e-12 * fabs(s));
    }
    pft_gmm_destroy(&gw);
    pft_gmm_destroy(&gr);
    free(x), free(w), free(y);
}

static void test_repeated_diag(void)
{
    check_weighted_is_repeated(PFT_COV_DIAG, 30, 1e-9, 1e-12);
}

static void test_repeated_spher(void)
{
    check_weighted_is_repeated(PFT_COV_SPHER, 30, 1e-9, 1e-12);
}

static void test_repeated_full(void)
{
    check_weighted_is_repeated(PFT_COV_FULL, 30, 1e-9, 1e-12);
}

/* lowrank multiplies by S in float (its precision plan, pft_em_lowrank.c), so the two fits differ by float
 * rounding; the factor-analysis steps then follow flat directions of the likelihood differently (a
 * one-ulp change of one value moves Ψ by a few percent after 30 iterations). So: the start (weighted k-means,
 * M-step and PCA of the weighted rows) to float precision, and the log-likelihood after 30 iterations. */
static void test_repeated_lowrank(void)
{
    check_weighted_is_repeated(PFT_COV_LOWRANK, 0, 1e-4, 1e-6);
    check_weighted_is_repeated(PFT_COV_LOWRANK, 30, INFINITY, 1e-4);
}

/* NULL weights are pft_gmm_fit; all-ones weights are too, bit for bit (multiplying by 1 is exact). */
static void test_null_and_ones_bitwise(void)
{
    const int n = 240, d = 5;
    pft_cov_t covs[] = {PFT_COV_DIAG, PFT_COV_SPHER, PFT_COV_FULL, PFT_COV_LOWRANK};
    float *x = three_blobs(n, d, 3);
    double *ones = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++)
        ones[i] = 1.0;
    for (int t = 0; t < 4; t++) {
        pft_gmm_opts_t o;
        opts_for(&o, covs[t], 4);
        o.min_rows = 70; /* the floor too: 240 / 70 → K = 3 */
        pft_gmm_t *a = NULL, *b = NULL, *c = NULL;
        pft_gmm_info_t ia, ib, ic;
        CHECK(pft_gmm_fit(x, n, d, &o, &a, &ia) == 0);
        CHECK(pft_gmm_fit_weighted(x, NULL, n, d, &o, &b, &ib) == 0);
        CHECK(pft_gmm_fit_weighted(x, ones, n, d, &o, &c, &ic) == 0);
        if (a && b && c) {
            CHECK_MSG(same_bits(a, b, &ia, &ib), "%s: NULL weights differ", pft_cov_name(covs[t]));
            CHECK_MSG(same_bits(a, c, &ia, &ic), "%s: unit weights differ", pft_cov_name(covs[t]));
            CHECK(memcmp(&ia.min_eff_rows, &ic.min_eff_rows, sizeof(double)) == 0);
            CHECK(ia.k_used <= 3 && ia.min_eff_rows >= 70);
        }
        pft_gmm_destroy(&a), pft_gmm_destroy(&b), pft_gmm_destroy(&c);
    }
    free(x), free(ones);
}

/* K = 1 is the weighted mean and variance (+ reg_covar), for any positive weights. */
static void test_k1_closed_form(void)
{
    const int n = 50, d = 3;
    float *x = three_blobs(n, d, 8);
    double w[50], sw = 0.0, mu[3] = {0}, var[3] = {0};
    for (int i = 0; i < n; i++) {
        w[i] = 0.1 + 0.37 * (double)(i % 5);
        sw += w[i];
        for (int j = 0; j < d; j++)
            mu[j] += w[i] * x[i * d + j];
    }
    for (int j = 0; j < d; j++)
        mu[j] /= sw;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            var[j] += w[i] * (x[i * d + j] - mu[j]) * (x[i * d + j] - mu[j]);
    pft_cov_t covs[] = {PFT_COV_DIAG, PFT_COV_FULL};
    for (int t = 0; t < 2; t++) {
        pft_gmm_opts_t o;
        opts_for(&o, covs[t], 1);
        o.reg_covar = 1e-6;
        pft_gmm_t *g = NULL;
        pft_gmm_info_t info;
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &g, &info) == 0);
        if (!g)
            continue;
        CHECK(info.k_used == 1 && info.iters == 1 && info.converged == 1);
        for (int j = 0; j < d; j++) {
            double v = covs[t] == PFT_COV_FULL ? pft_gmm_covars(g)[j * d + j] : pft_gmm_covars(g)[j];
            CHECK_NEAR(pft_gmm_means(g)[j], mu[j], 1e-12 * fmax(1.0, fabs(mu[j])));
            CHECK_NEAR(v, var[j] / sw + 1e-6, 1e-12 * v);
        }
        CHECK_NEAR(info.min_eff_rows, sw, 1e-12 * sw);
        pft_gmm_destroy(&g);
    }
    free(x);
}

/* The floor counts represented rows: 100 rows of weight 0.05 stand for 5 rows. */
static void test_floor_fractional(void)
{
    const int n = 100, d = 4;
    float *x = three_blobs(n, d, 21);
    double w[100];
    pft_cov_t covs[] = {PFT_COV_DIAG, PFT_COV_LOWRANK};
    for (int t = 0; t < 2; t++) {
        pft_gmm_opts_t o;
        opts_for(&o, covs[t], 5);
        o.min_rows = 5;
        for (int i = 0; i < n; i++)
            w[i] = 0.05;
        pft_gmm_t *g = NULL;
        pft_gmm_info_t info;
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &g, &info) == 0);
        if (g) {
            CHECK_MSG(info.k_used == 1, "%s: K = %d", pft_cov_name(covs[t]), info.k_used);
            CHECK_NEAR(info.min_eff_rows, 5.0, 1e-12);
            CHECK(info.floor_dropped == 4);
        }
        pft_gmm_destroy(&g);
        /* weight 0.2: 20 rows represented, so at most 4 components of ≥ 5 */
        for (int i = 0; i < n; i++)
            w[i] = 0.2;
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &g, &info) == 0);
        if (g) {
            CHECK(info.k_used <= 4 && info.k_used >= 1);
            CHECK_MSG(info.min_eff_rows >= 5.0, "%s: %g", pft_cov_name(covs[t]), info.min_eff_rows);
            for (int c = 0; c < pft_gmm_k(g); c++)
                CHECK(pft_gmm_weights(g)[c] * 20.0 >= 5.0);
        }
        pft_gmm_destroy(&g);
    }
    /* without a floor, K is still capped by the rows, not by Σw */
    pft_gmm_opts_t o;
    opts_for(&o, PFT_COV_DIAG, 3);
    for (int i = 0; i < n; i++)
        w[i] = 0.01;
    pft_gmm_t *g = NULL;
    pft_gmm_info_t info;
    CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &g, &info) == 0);
    CHECK(g && info.k_used == 3);
    pft_gmm_destroy(&g);
    free(x);
}

static void test_bad_weights(void)
{
    const int n = 20, d = 2;
    float *x = three_blobs(n, d, 2);
    double bad[] = {0.0, -1.0, NAN, INFINITY, -0.0};
    double w[20];
    pft_gmm_opts_t o;
    opts_for(&o, PFT_COV_DIAG, 2);
    pft_gmm_t *g = pft_gmm_new(1, d, PFT_COV_DIAG);
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        for (int i = 0; i < n; i++)
            w[i] = 1.0;
        w[7] = bad[t];
        pft_gmm_t *out = NULL;
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &out, NULL) == PFT_EINVAL);
        CHECK(out == NULL);
        CHECK_MSG(strstr(pft_errmsg(), "row 7") != NULL, "%s", pft_errmsg());
        double s;
        CHECK(pft_gmm_score_weighted(g, x, w, n, &s) == PFT_EINVAL);
        CHECK(strstr(pft_errmsg(), "row 7") != NULL);
    }
    for (int i = 0; i < n; i++)
        w[i] = 1e308; /* each finite, the sum is not */
    pft_gmm_t *out = NULL;
    CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &out, NULL) == PFT_EINVAL);
    pft_gmm_destroy(&g);
    free(x);
}

/* Weighted scoring: integer weights score as the repeated rows; NULL is pft_gmm_score. */
static void test_score_weighted(void)
{
    const int n = 90, d = 3;
    int total;
    float *x = three_blobs(n, d, 4);
    double *w = int_weights(n, &total);
    float *y = repeat_rows(x, w, n, d, total);
    pft_gmm_opts_t o;
    opts_for(&o, PFT_COV_FULL, 2);
    pft_gmm_t *g = NULL;
    CHECK(pft_gmm_fit(x, n, d, &o, &g, NULL) == 0);
    if (g) {
        double a, b, c, e;
        CHECK(pft_gmm_score_weighted(g, x, w, n, &a) == 0);
        CHECK(pft_gmm_score(g, y, total, &b) == 0);
        CHECK_NEAR(a, b, 1e-12 * fabs(b));
        CHECK(pft_gmm_score_weighted(g, x, NULL, n, &c) == 0);
        CHECK(pft_gmm_score(g, x, n, &e) == 0);
        CHECK(memcmp(&c, &e, sizeof c) == 0);
    }
    pft_gmm_destroy(&g);
    free(x), free(w), free(y);
}

int main(void)
{
    RUN(test_repeated_diag);
    RUN(test_repeated_spher);
    RUN(test_repeated_full);
    RUN(test_repeated_lowrank);
    RUN(test_null_and_ones_bitwise);
    RUN(test_k1_closed_form);
    RUN(test_floor_fractional);
    RUN(test_bad_weights);
    RUN(test_score_weighted);
    return pft_test_done();
}
