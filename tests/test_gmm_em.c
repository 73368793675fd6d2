/* Tests of pft_gmm_fit (EM) for the full, diag and spher families: recovery of a known mixture, degenerate
 * inputs, argument checks, determinism and iteration counts, monotone likelihood, allocation failures,
 * threads, and one fit on real PACS features (skipped when absent). The lowrank family: test_gmm_lowrank.c.
 */
#include <cblas.h>
#include <stdint.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_gmm.h"

/* ---------------------------------------------------------------------------------------------- */
/* EM */

/* Fits a sample of a known, well-separated mixture and matches the components back. */
static void check_recovery(pft_cov_t cov)
{
    const int d = 4, k = 3, n = 6000;
    double w[3] = {0.2, 0.3, 0.5}, mu[12] = {0, 0, 0, 0, 10, 10, 0, 0, 0, 10, 10, -10};
    double cv[3 * 16] = {0};
    size_t cl = cov_len(cov, d);
    for (int c = 0; c < k; c++) {
        if (cov == PFT_COV_FULL) {
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++)
                    cv[c * cl + i * d + j] = i == j ? 1.0 + c : (i + j == 3 ? 0.4 : 0.0);
        } else {
            for (size_t j = 0; j < cl; j++)
                cv[c * cl + j] = 0.5 + c + 0.25 * (double)j;
        }
    }
    pft_gmm_t *truth = make_model(k, d, cov, w, mu, cv);
    CHECK(truth != NULL);
    if (!truth)
        return;
    float *x = malloc(sizeof(float) * n * d);
    pft_rng_t *r = pft_rng_new(77);
    CHECK(pft_gmm_sample(truth, r, n, x) == 0);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.k = k;
    o.cov = cov;
    o.tol = 1e-6;
    o.max_iter = 500;
    pft_gmm_t *g = NULL;
    pft_gmm_info_t info;
    CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
    if (g) {
        CHECK(info.k_used == 3 && info.k_requested == 3 && info.converged == 1 && info.iters >= 1);
        for (int c = 0; c < k; c++) {
            int best = 0;
            double bd = INFINITY;
            for (int e = 0; e < k; e++) {
                double s = 0;
                for (int j = 0; j < d; j++) {
                    double t = pft_gmm_means(g)[e * d + j] - mu[c * d + j];
                    s += t * t;
                }
                if (s < bd) {
                    bd = s;
                    best = e;
                }
            }
            CHECK_MSG(sqrt(bd) < 0.15, "%s comp %d: mean off by %g", pft_cov_name(cov), c, sqrt(bd));
            CHECK_NEAR(pft_gmm_weights(g)[best], w[c], 0.02);
            for (size_t j = 0; j < cl; j++) {
                double e = cv[c * cl + j], got = pft_gmm_covars(g)[best * cl + j];
                CHECK_MSG(fabs(got - e) <= 0.1 * fmax(1.0, fabs(e)), "%s comp %d cov %zu: %g vs %g",
                          pft_cov_name(cov), c, j, got, e);
            }
        }
        double truth_ll, fit_ll;
        CHECK(pft_gmm_score(truth, x, n, &truth_ll) == 0);
        CHECK(pft_gmm_score(g, x, n, &fit_ll) == 0);
        CHECK(fit_ll >= truth_ll - 1e-9); /* MLE beats the generating parameters on their own sample */
        pft_gmm_destroy(&g);
    }
    pft_rng_destroy(&r);
    pft_gmm_destroy(&truth);
    free(x);
}

static void test_recovery_full(void)
{
    check_recovery(PFT_COV_FULL);
}

static void test_recovery_diag(void)
{
    check_recovery(PFT_COV_DIAG);
}

static void test_recovery_spher(void)
{
    check_recovery(PFT_COV_SPHER);
}

static pft_gmm_t *fit_or_null(const float *x, int n, int d, int k, pft_cov_t cov, double reg,
                              pft_gmm_info_t *info)
{
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.k = k;
    o.cov = cov;
    o.reg_covar = reg;
    pft_gmm_t *g = NULL;
    int rc = pft_gmm_fit(x, n, d, &o, &g, info);
    CHECK_MSG(rc == 0, "fit %s k=%d n=%d d=%d: %s", pft_cov_name(cov), k, n, d, pft_errmsg());
    return g;
}

static void test_degenerate_inputs(void)
{
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    float dup[50 * 3], one[3] = {1, 2, 3}, four[4 * 3], zv[60 * 4], line[40];
    for (int i = 0; i < 50; i++) {
        dup[i * 3] = 1.5f;
        dup[i * 3 + 1] = -2.0f;
        dup[i * 3 + 2] = 0.0f;
    }
    for (int i = 0; i < 12; i++)
        four[i] = (float)(i * i % 7);
    pft_rng_t *r = pft_rng_new(9);
    for (int i = 0; i < 60; i++) {
        zv[i * 4] = (float)pft_rng_normal(r) + (i % 2 ? 5.0f : 0.0f);
        zv[i * 4 + 1] = 0.0f;                                     /* all zero */
        zv[i * 4 + 2] = 3.25f;                                    /* constant, non-zero */
        zv[i * 4 + 3] = i % 2 ? 0.0f : (float)pft_rng_uniform(r); /* zero within one cluster */
    }
    for (int i = 0; i < 40; i++)
        line[i] = (float)(i % 4) * 10.0f + (float)pft_rng_uniform(r);
    for (int t = 0; t < 3; t++) {
        pft_gmm_info_t info;
        pft_gmm_t *g;
        /* all duplicates, with and without reg_covar */
        g = fit_or_null(dup, 50, 3, 3, covs[t], 1e-6, &info);
        if (g) {
            check_model_sane(g, 1e-6);
            CHECK(isfinite(info.avg_loglik));
            pft_gmm_destroy(&g);
        }
        g = fit_or_null(dup, 50, 3, 3, covs[t], 0.0, &info);
        if (g) {
            check_model_sane(g, 0.0);
            CHECK(isfinite(info.avg_loglik));
            pft_gmm_destroy(&g);
        }
        /* one sample */
        g = fit_or_null(one, 1, 3, 5, covs[t], 1e-6, &info);
        if (g) {
            CHECK(info.k_used == 1 && info.k_requested == 5 && pft_gmm_k(g) == 1);
            CHECK(pft_gmm_means(g)[2] == 3.0);
            check_model_sane(g, 1e-6);
            pft_gmm_destroy(&g);
        }
        /* K > n */
        g = fit_or_null(four, 4, 3, 10, covs[t], 1e-6, &info);
        if (g) {
            CHECK(info.k_used == 4 && pft_gmm_k(g) == 4);
            check_model_sane(g, 1e-6);
            CHECK(isfinite(info.avg_loglik));
            pft_gmm_destroy(&g);
        }
        /* zero-variance dimensions */
        g = fit_or_null(zv, 60, 4, 2, covs[t], 1e-6, &info);
        if (g) {
            check_model_sane(g, 1e-6);
            CHECK(isfinite(info.avg_loglik));
            if (covs[t] == PFT_COV_DIAG)
                for (int c = 0; c < 2; c++) {
                    CHECK_NEAR(pft_gmm_covars(g)[c * 4 + 1], 1e-6, 1e-12);
                    CHECK_NEAR(pft_gmm_covars(g)[c * 4 + 2], 1e-6, 1e-12);
                    CHECK_NEAR(pft_gmm_means(g)[c * 4 + 2], 3.25, 1e-6);
                }
            pft_gmm_destroy(&g);
        }
        /* d = 1, four clusters */
        g = fit_or_null(line, 40, 1, 4, covs[t], 1e-6, &info);
        if (g) {
            check_model_sane(g, 1e-6);
            CHECK(info.avg_loglik > -2.0);
            pft_gmm_destroy(&g);
        }
    }
    pft_rng_destroy(&r);
}

static void test_invalid_fit_args(void)
{
    float x[6] = {1, 2, 3, 4, 5, 6};
    pft_gmm_opts_t o;
    pft_gmm_t *g = (pft_gmm_t *)1;
    pft_gmm_opts_default(&o);
    CHECK(pft_gmm_fit(x, 0, 2, &o, &g, NULL) == PFT_EINVAL);
    CHECK(g == NULL);
    CHECK(pft_gmm_fit(x, 3, 0, &o, &g, NULL) == PFT_EINVAL);
    CHECK(pft_gmm_fit(NULL, 3, 2, &o, &g, NULL) == PFT_EINVAL);
    pft_gmm_opts_t bad = o;
    bad.k = 0;
    CHECK(pft_gmm_fit(x, 3, 2, &bad, &g, NULL) == PFT_EINVAL);
    bad = o;
    bad.tol = -1;
    CHECK(pft_gmm_fit(x, 3, 2, &bad, &g, NULL) == PFT_EINVAL);
    bad = o;
    bad.reg_covar = NAN;
    CHECK(pft_gmm_fit(x, 3, 2, &bad, &g, NULL) == PFT_EINVAL);
    bad = o;
    bad.n_init = 0;
    CHECK(pft_gmm_fit(x, 3, 2, &bad, &g, NULL) == PFT_EINVAL);
    bad = o;
    bad.cov = (pft_cov_t)5;
    CHECK(pft_gmm_fit(x, 3, 2, &bad, &g, NULL) == PFT_EINVAL);
    x[4] = 1e20f;
    CHECK(pft_gmm_fit(x, 3, 2, &o, &g, NULL) == PFT_ERANGE);
    x[4] = INFINITY;
    CHECK(pft_gmm_fit(x, 3, 2, &o, &g, NULL) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "not finite") != NULL);
    CHECK(g == NULL);
}

static void test_determinism_and_iterations(void)
{
    int n = 0, d = 0;
    float *x = load_data("gmm_relu_data.txt", &n, &d);
    CHECK(x != NULL);
    if (!x)
        return;
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    for (int t = 0; t < 3; t++) {
        pft_gmm_opts_t o;
        pft_gmm_opts_default(&o);
        o.k = 5;
        o.cov = covs[t];
        o.seed = 1234;
        pft_gmm_t *a = NULL, *b = NULL, *c = NULL;
        pft_gmm_info_t ia, ib, ic;
        CHECK(pft_gmm_fit(x, n, d, &o, &a, &ia) == 0);
        CHECK(pft_gmm_fit(x, n, d, &o, &b, &ib) == 0);
        o.seed = 99;
        CHECK(pft_gmm_fit(x, n, d, &o, &c, &ic) == 0);
        if (a && b && c) {
            size_t cl = cov_len(covs[t], d);
            CHECK(memcmp(pft_gmm_weights(a), pft_gmm_weights(b), 5 * sizeof(double)) == 0);
            CHECK(memcmp(pft_gmm_means(a), pft_gmm_means(b), 5 * (size_t)d * sizeof(double)) == 0);
            CHECK(memcmp(pft_gmm_covars(a), pft_gmm_covars(b), 5 * cl * sizeof(double)) == 0);
            CHECK(memcmp(&ia.avg_loglik, &ib.avg_loglik, sizeof(double)) == 0 && ia.iters == ib.iters);
            CHECK(memcmp(pft_gmm_means(a), pft_gmm_means(c), 5 * (size_t)d * sizeof(double)) != 0);
        }
        pft_gmm_destroy(&a);
        pft_gmm_destroy(&b);
        pft_gmm_destroy(&c);

        /* tol = 0 runs exactly max_iter iterations; more restarts never do worse than the first. */
        o.seed = 5;
        o.tol = 0;
        o.max_iter = 7;
        pft_gmm_t *g = NULL, *h = NULL;
        pft_gmm_info_t i1, i3;
        CHECK(pft_gmm_fit(x, n, d, &o, &g, &i1) == 0);
        CHECK(i1.iters == 7 && i1.converged == 0);
        o.n_init = 3;
        CHECK(pft_gmm_fit(x, n, d, &o, &h, &i3) == 0);
        CHECK(i3.avg_loglik >= i1.avg_loglik);
        /* max_iter = 0: the k-means initialisation alone */
        pft_gmm_destroy(&g);
        o.max_iter = 0;
        o.n_init = 1;
        CHECK(pft_gmm_fit(x, n, d, &o, &g, &i1) == 0);
        CHECK(i1.iters == 0 && g != NULL);
        pft_gmm_destroy(&g);
        pft_gmm_destroy(&h);
    }
    free(x);
}

/* EM never decreases the log-likelihood (checked through successive max_iter values). */
static void test_monotone(void)
{
    int n = 0, d = 0;
    float *x = load_data("gmm_relu_data.txt", &n, &d);
    if (!x)
        return;
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    for (int t = 0; t < 3; t++) {
        double prev = -INFINITY;
        for (int it = 1; it <= 12; it++) {
            pft_gmm_opts_t o;
            pft_gmm_opts_default(&o);
            o.k = 4;
            o.cov = covs[t];
            o.tol = 0;
            o.max_iter = it;
            pft_gmm_t *g = NULL;
            pft_gmm_info_t info;
            CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
            CHECK_MSG(info.reseeded > 0 || info.avg_loglik >= prev - 1e-7, "%s iter %d: %.9f < %.9f",
                      pft_cov_name(covs[t]), it, info.avg_loglik, prev);
            prev = info.avg_loglik;
            pft_gmm_destroy(&g);
        }
    }
    free(x);
}

/* Allocation failures anywhere in fit give PFT_ENOMEM and leak nothing (ASan checks leaks). */
static void test_alloc_failures(void)
{
    int n = 0, d = 0;
    float *x = load_data("gmm_blobs_data.txt", &n, &d);
    if (!x)
        return;
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG};
    for (int t = 0; t < 2; t++) {
        pft_gmm_opts_t o;
        pft_gmm_opts_default(&o);
        o.k = 3;
        o.cov = covs[t];
        o.max_iter = 3;
        int ok = 0, nomem = 0; /* the injection happened: steps failed with PFT_ENOMEM before one succeeded */
        for (long fail = 0; fail < 200 && !ok; fail++) {
            pft_gmm_t *g = NULL;
            pft_alloc_fail_after(fail);
            int rc = pft_gmm_fit(x, n, d, &o, &g, NULL);
            pft_alloc_fail_after(-1);
            CHECK(rc == 0 || rc == PFT_ENOMEM);
            CHECK((rc == 0) == (g != NULL));
            nomem += rc == PFT_ENOMEM;
            ok = rc == 0;
            pft_gmm_destroy(&g);
        }
        CHECK_MSG(ok && nomem >= 2, "cov %d: %d steps failed with PFT_ENOMEM, success %d", (int)covs[t],
                  nomem, ok);
    }
    free(x);
}

/* ---------------------------------------------------------------------------------------------- */
/* Real PACS features */

/* IEEE 754 binary16 to float (the test's own conversion). */
static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* Minimal reader for a C-order float32 or float16 2-D .npy file (the test's own, independent of pft_npy);
 * float16 is widened to float. */
static float *read_npy_f32(const char *path, int *rows, int *cols)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char pre[10];
    float *x = NULL;
    if (fread(pre, 1, 10, f) == 10 && memcmp(pre, "\x93NUMPY", 6) == 0 && pre[6] == 1) {
        unsigned hl = pre[8] | (unsigned)pre[9] << 8;
        char *hdr = calloc(1, hl + 1);
        int f2 = hdr && fread(hdr, 1, hl, f) == hl && strstr(hdr, "'<f2'");
        if (hdr && (f2 || strstr(hdr, "'<f4'")) && strstr(hdr, "False")) {
            const char *s = strstr(hdr, "'shape': (");
            if (s && sscanf(s, "'shape': (%d, %d)", rows, cols) == 2 && *rows > 0 && *cols > 0) {
                size_t cnt = (size_t)*rows * (size_t)*cols, sz = f2 ? 2 : 4;
                x = malloc(cnt * sizeof(float));
                if (x && fread(x, sz, cnt, f) != cnt) {
                    free(x);
                    x = NULL;
                }
                for (size_t i = cnt; x && f2 && i-- > 0;) { /* widen in place, from the end */
                    uint16_t h;
                    memcpy(&h, (const char *)x + 2 * i, 2);
                    x[i] = half_to_float(h);
                }
            }
        }
        free(hdr);
    }
    fclose(f);
    return x;
}

static int32_t *read_npy_i32(const char *path, int n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char pre[10];
    int32_t *y = NULL;
    if (fread(pre, 1, 10, f) == 10 && memcmp(pre, "\x93NUMPY", 6) == 0) {
        fseek(f, 10 + (long)(pre[8] | pre[9] << 8), SEEK_SET);
        y = malloc(sizeof(int32_t) * (size_t)n);
        if (y && fread(y, sizeof(int32_t), (size_t)n, f) != (size_t)n) {
            free(y);
            y = NULL;
        }
    }
    fclose(f);
    return y;
}

/* The fused diag/spher pass spreads its chunks over OpenBLAS's thread count (helper threads kept for the
 * run): with a fixed count the fit is bit-identical run to run, weighted or not, and it agrees with the
 * one-thread fit to rounding (only the order of the per-thread sums differs). */
static void test_threads(void)
{
    const int n = 3000, d = 16, k = 4;
    float *x = malloc(sizeof(float) * n * d);
    double *w = malloc(sizeof(double) * n);
    pft_rng_t *r = pft_rng_new(31);
    for (int i = 0; i < n; i++) {
        w[i] = 0.5 + (double)(i % 7);
        for (int j = 0; j < d; j++)
            x[i * d + j] = (float)((j == i % k ? 8.0 : 0.0) + (1.0 + 0.1 * j) * pft_rng_normal(r));
    }
    pft_cov_t covs[] = {PFT_COV_DIAG, PFT_COV_SPHER};
    for (int t = 0; t < 2; t++) {
        pft_gmm_opts_t o;
        pft_gmm_opts_default(&o);
        o.k = k;
        o.cov = covs[t];
        o.tol = 0;
        o.max_iter = 20;
        pft_gmm_t *a = NULL, *b = NULL, *c = NULL, *e = NULL;
        pft_gmm_info_t ia, ib, ic, ie;
        openblas_set_num_threads(2);
        CHECK(pft_gmm_fit(x, n, d, &o, &a, &ia) == 0);
        CHECK(pft_gmm_fit(x, n, d, &o, &b, &ib) == 0);
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &e, &ie) == 0);
        pft_gmm_t *e2 = NULL;
        CHECK(pft_gmm_fit_weighted(x, w, n, d, &o, &e2, NULL) == 0);
        openblas_set_num_threads(1);
        CHECK(pft_gmm_fit(x, n, d, &o, &c, &ic) == 0);
        if (a && b && c && e && e2) {
            size_t cl = cov_len(covs[t], d);
            CHECK(memcmp(pft_gmm_means(a), pft_gmm_means(b), (size_t)k * d * sizeof(double)) == 0);
            CHECK(memcmp(pft_gmm_covars(a), pft_gmm_covars(b), k * cl * sizeof(double)) == 0);
            CHECK(memcmp(&ia.avg_loglik, &ib.avg_loglik, sizeof(double)) == 0);
            CHECK(memcmp(pft_gmm_means(e), pft_gmm_means(e2), (size_t)k * d * sizeof(double)) == 0);
            CHECK(memcmp(pft_gmm_covars(e), pft_gmm_covars(e2), k * cl * sizeof(double)) == 0);
            for (size_t q = 0; q < (size_t)k * d; q++)
                CHECK_NEAR(pft_gmm_means(a)[q], pft_gmm_means(c)[q],
                           1e-9 * fmax(1.0, fabs(pft_gmm_means(c)[q])));
            for (size_t q = 0; q < k * cl; q++)
                CHECK_NEAR(pft_gmm_covars(a)[q], pft_gmm_covars(c)[q], 1e-9 * pft_gmm_covars(c)[q]);
            CHECK_NEAR(ia.avg_loglik, ic.avg_loglik, 1e-9 * fabs(ic.avg_loglik));
        }
        pft_gmm_destroy(&a), pft_gmm_destroy(&b), pft_gmm_destroy(&c), pft_gmm_destroy(&e),
            pft_gmm_destroy(&e2);
    }
    pft_rng_destroy(&r);
    free(x), free(w);
}

static void test_pacs(void)
{
    char xpath[4096], ypath[4096];
    snprintf(xpath, sizeof xpath, "%s", pft_test_example_data("train_x.npy"));
    snprintf(ypath, sizeof ypath, "%s", pft_test_example_data("train_y.npy"));
    int rows = 0, cols = 0;
    float *x = read_npy_f32(xpath, &rows, &cols);
    int32_t *y = x ? read_npy_i32(ypath, rows) : NULL;
    CHECK(x != NULL && y != NULL && cols == 1280);
    if (!x || !y) {
        free(x);
        free(y);
        return;
    }
    /* Class 0, compacted in place. */
    int m = 0;
    for (int i = 0; i < rows; i++)
        if (y[i] == 0)
            memmove(x + (size_t)m++ * cols, x + (size_t)i * cols, sizeof(float) * cols);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.cov = PFT_COV_DIAG;
    o.max_iter = 30;
    pft_gmm_t *g10 = NULL, *g1 = NULL;
    pft_gmm_info_t i10, i1;
    o.k = 10;
    CHECK(pft_gmm_fit(x, m, cols, &o, &g10, &i10) == 0);
    o.k = 1;
    CHECK(pft_gmm_fit(x, m, cols, &o, &g1, &i1) == 0);
    if (g10 && g1) {
        check_model_sane(g10, 1e-6);
        check_model_sane(g1, 1e-6);
        CHECK(i10.k_used == 10 && i10.reseeded == 0);
        CHECK_MSG(i10.avg_loglik > i1.avg_loglik, "K=10 %.4f vs K=1 %.4f", i10.avg_loglik, i1.avg_loglik);
        fprintf(stderr, "    PACS class 0 (%d rows): avg loglik K=1 %.4f, K=10 %.4f (%d iters)\n", m,
                i1.avg_loglik, i10.avg_loglik, i10.iters);
        /* K=1 diag is closed form: the mean and the (biased) variance + reg_covar. */
        double maxe = 0;
        for (int j = 0; j < cols; j++) {
            double s = 0, s2 = 0;
            for (int i = 0; i < m; i++)
                s += x[(size_t)i * cols + j];
            s /= m;
            for (int i = 0; i < m; i++)
                s2 += (x[(size_t)i * cols + j] - s) * (x[(size_t)i * cols + j] - s);
            s2 = s2 / m + 1e-6;
            double e = fabs(pft_gmm_covars(g1)[j] - s2) / s2;
            maxe = e > maxe ? e : maxe;
        }
        CHECK_MSG(maxe < 5e-6, "K=1 variance rel err %g", maxe);
        fprintf(stderr, "    K=1 variance max rel err %.3g\n", maxe);
    }
    pft_gmm_destroy(&g10);
    pft_gmm_destroy(&g1);
    free(x);
    free(y);
}

int main(void)
{
    RUN(test_recovery_full);
    RUN(test_recovery_diag);
    RUN(test_recovery_spher);
    RUN(test_degenerate_inputs);
    RUN(test_invalid_fit_args);
    RUN(test_determinism_and_iterations);
    RUN(test_monotone);
    RUN(test_alloc_failures);
    RUN(test_threads);
    RUN(test_pacs);
    return pft_test_done();
}
