/* Tests of pft_meannoise: the noise is a pure function of (seed, label) with the stated std; a release keeps
 * counts, scatters and each class sum's norm, moves every sum by exactly the drawn noise (up to the
 * rescaling), leaves no exact zero where the rows all vanish; sigma = 0 is the identity; bad arguments. */
#include <stdint.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_meannoise.h"
#include "pft_rng.h"
#include "pft_test.h"

#define D 64
#define N 21

/* N non-negative rows of dimension D, norm 1, labels 0..2 in turn; coordinates 0..9 are 0 in every row of
 * class 0 (its exact sum is 0 there). */
static void rows(float *x, int32_t *y)
{
    pft_rng_t *r = pft_rng_new(3);
    for (int i = 0; i < N; i++) {
        double s = 0;
        y[i] = i % 3;
        for (int j = 0; j < D; j++) {
            double v = (y[i] == 0 && j < 10) || pft_rng_uniform(r) < 0.3 ? 0.0 : pft_rng_uniform(r);
            x[(size_t)i * D + j] = (float)v;
            s += v * v;
        }
        for (int j = 0; j < D; j++)
            x[(size_t)i * D + j] = (float)(x[(size_t)i * D + j] / sqrt(s));
    }
    pft_rng_destroy(&r);
}

static void test_draw(void)
{
    enum { M = 20000 };
    double *a = pft_alloc_array(M, sizeof *a), *b = pft_alloc_array(M, sizeof *b);
    CHECK(pft_meannoise_draw(9, 2, 0.05, M, a) == 0 && pft_meannoise_draw(9, 2, 0.05, M, b) == 0);
    CHECK(memcmp(a, b, M * sizeof *a) == 0); /* the same class, the same noise: releases cannot be averaged */
    double m = 0, v = 0;
    for (int j = 0; j < M; j++)
        m += a[j] / M;
    for (int j = 0; j < M; j++)
        v += (a[j] - m) * (a[j] - m) / (M - 1);
    CHECK_NEAR(m, 0.0, 4 * 0.05 / sqrt(M));
    CHECK_NEAR(sqrt(v), 0.05, 0.05 * 0.03); /* the std of a std estimate of M draws: σ/sqrt(2M) = 0.5 % */
    CHECK(pft_meannoise_draw(9, 3, 0.05, M, b) == 0 && memcmp(a, b, M * sizeof *a) != 0);  /* another class */
    CHECK(pft_meannoise_draw(10, 2, 0.05, M, b) == 0 && memcmp(a, b, M * sizeof *a) != 0); /* another seed */
    pft_free(a);
    pft_free(b);
}

/* The release of st (TIED or FULL) at sigma 0.05: what it keeps and what it moves. */
static void check_release(pft_gstat_kind_t kind)
{
    float x[N * D];
    int32_t y[N];
    rows(x, y);
    pft_gstat_t *st = pft_gstat_new(kind, D), *o = NULL;
    CHECK(st && pft_gstat_add_rows(st, x, y, N) == 0);
    CHECK(pft_meannoise_apply(st, 0.05, 77, &o) == 0 && o);
    CHECK(pft_gstat_n_classes(o) == 3 && pft_gstat_total(o) == N);
    if (kind == PFT_GSTAT_TIED)
        CHECK(memcmp(pft_gstat_tied_scatter(o), pft_gstat_tied_scatter(st), sizeof(double) * D * D) == 0);
    for (int i = 0; kind == PFT_GSTAT_FULL && i < 3; i++)
        CHECK(memcmp(pft_gstat_scatter(o, i), pft_gstat_scatter(st, i), sizeof(double) * D * D) == 0);
    for (int i = 0; i < 3; i++) {
        double n = (double)pft_gstat_count(st, i), e[D], ns = 0, nt = 0, err = 0;
        const double *mu = pft_gstat_mean(st, i), *mt = pft_gstat_mean(o, i);
        CHECK(pft_gstat_count(o, i) == pft_gstat_count(st, i) && pft_gstat_label(o, i) == i);
        /* 7 rows a class: noise of std 0.05·sqrt(10/7) */
        CHECK(pft_meannoise_draw(77, i, pft_meannoise_sigma(0.05, (uint64_t)n), D, e) == 0);
        for (int j = 0; j < D; j++) {
            ns += n * mu[j] * n * mu[j];
            nt += (n * mu[j] + e[j]) * (n * mu[j] + e[j]);
        }
        for (int j = 0; j < D; j++) /* the released sum is (s + e)·‖s‖/‖s + e‖ */
            err = fmax(err, fabs(n * mt[j] - (n * mu[j] + e[j]) * sqrt(ns / nt)));
        CHECK_MSG(err < 1e-12, "class %d: released sum off by %g", i, err);
        double nr = 0;
        for (int j = 0; j < D; j++)
            nr += n * mt[j] * n * mt[j];
        CHECK_NEAR(sqrt(nr), sqrt(ns), 1e-12); /* Σ n‖μ‖² kept: rows of norm 1 stay plausible */
    }
    int zeros_before = 0, zeros_after = 0;
    for (int j = 0; j < 10; j++) {
        zeros_before += pft_gstat_mean(st, 0)[j] == 0;
        zeros_after += pft_gstat_mean(o, 0)[j] == 0;
    }
    CHECK(zeros_before == 10 && zeros_after == 0);
    pft_gstat_destroy(&o);
    CHECK(pft_meannoise_apply(st, 0, 77, &o) == 0 && o); /* sigma = 0: the exact means */
    for (int i = 0; o && i < 3; i++)
        CHECK(memcmp(pft_gstat_mean(o, i), pft_gstat_mean(st, i), sizeof(double) * D) == 0);
    pft_gstat_destroy(&o);
    /* in place: the same numbers bit for bit, st replaced */
    pft_gstat_t *t = pft_gstat_dup(st);
    CHECK(t && pft_meannoise_apply(st, 0.05, 77, &o) == 0 && pft_meannoise_apply_take(&t, 0.05, 77) == 0);
    CHECK(t && o && t != st && pft_gstat_equal(t, o));
    pft_gstat_destroy(&t);
    pft_gstat_destroy(&o);
    pft_gstat_destroy(&st);
}

static void test_sigma(void)
{
    CHECK(pft_meannoise_sigma(0.05, 10) == 0.05);
    CHECK_NEAR(pft_meannoise_sigma(0.05, 1000), 0.005, 1e-15);
    CHECK_NEAR(pft_meannoise_sigma(0.05, 5), 0.05 * sqrt(2.0), 1e-15);
    CHECK_NEAR(pft_meannoise_sigma(0.05, 1), 0.05 * sqrt(10.0), 1e-15);
    CHECK(pft_meannoise_sigma(0, 3) == 0); /* off stays off */
}

static void test_release(void)
{
    check_release(PFT_GSTAT_TIED);
    check_release(PFT_GSTAT_FULL);
}

static void test_bad_arguments(void)
{
    float x[N * D];
    int32_t y[N];
    double e[D];
    rows(x, y);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, D), *o = (pft_gstat_t *)&e;
    CHECK(st && pft_gstat_add_rows(st, x, y, N) == 0);
    CHECK(pft_meannoise_apply(st, -1, 1, &o) == PFT_EINVAL && o == NULL);
    o = (pft_gstat_t *)&e;
    CHECK(pft_meannoise_apply(st, NAN, 1, &o) == PFT_EINVAL && o == NULL);
    CHECK(pft_meannoise_apply(st, INFINITY, 1, &o) == PFT_EINVAL && o == NULL);
    pft_gstat_t *before = pft_gstat_dup(st), *kept = st;
    CHECK(pft_meannoise_apply_take(&st, -1, 1) == PFT_EINVAL && st == kept && pft_gstat_equal(st, before));
    pft_gstat_destroy(&before);
    CHECK(pft_meannoise_draw(1, 0, -0.1, D, e) == PFT_EINVAL);
    CHECK(pft_meannoise_draw(1, 0, 0.1, 0, e) == PFT_EINVAL);
    pft_gstat_destroy(&st);
}

int main(void)
{
    RUN(test_draw);
    RUN(test_sigma);
    RUN(test_release);
    RUN(test_bad_arguments);
    return pft_test_done();
}
