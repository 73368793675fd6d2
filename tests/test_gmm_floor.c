/* Tests of the privacy floor of pft_gmm_fit (opts.min_rows, pft_gmm.h): every component of a fit stands for
 * at least min_rows rows (weight · n) in every family; K = 1 when n < 2·min_rows; no floor (≤ 1) and a floor
 * that does not bind give exactly the fit without it; merges preserve the mixture's mean; deterministic;
 * info reports what was dropped. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_test.h"

/* n rows of dimension d: a few tight clusters and isolated rows far from everything (what EM gives a
 * component of its own when K is large). */
static float *tiny_class(int n, int d, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)d);
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) {
            double centre = i % 3 == 0 ? 20.0 * (double)(i + j) : (double)(i % 2) * 5.0;
            x[(size_t)i * d + j] = (float)(centre + 0.1 * pft_rng_normal(r));
        }
    pft_rng_destroy(&r);
    return x;
}

static double min_eff(const pft_gmm_t *g, int n)
{
    double m = INFINITY;
    for (int c = 0; c < pft_gmm_k(g); c++)
        m = fmin(m, pft_gmm_weights(g)[c] * n);
    return m;
}

static int same_model(const pft_gmm_t *a, const pft_gmm_t *b)
{
    int k = pft_gmm_k(a), d = pft_gmm_dim(a);
    if (k != pft_gmm_k(b) || d != pft_gmm_dim(b))
        return 0;
    size_t cl = pft_gmm_cov(a) == PFT_COV_FULL    ? (size_t)d * d
                : pft_gmm_cov(a) == PFT_COV_SPHER ? 1
                                                  : (size_t)d;
    return memcmp(pft_gmm_weights(a), pft_gmm_weights(b), sizeof(double) * k) == 0 &&
           memcmp(pft_gmm_means(a), pft_gmm_means(b), sizeof(double) * k * d) == 0 &&
           memcmp(pft_gmm_covars(a), pft_gmm_covars(b), sizeof(double) * k * cl) == 0;
}

/* Every family, several sizes and floors: every component meets the floor; info agrees with the model. */
static void test_floor_holds(void)
{
    const pft_cov_t covs[] = {PFT_COV_DIAG, PFT_COV_SPHER, PFT_COV_FULL, PFT_COV_LOWRANK};
    const int sizes[] = {6, 12, 30, 61}, floors[] = {2, 5, 10};
    const int d = 4;
    for (size_t f = 0; f < sizeof covs / sizeof *covs; f++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t m = 0; m < sizeof floors / sizeof *floors; m++) {
                int n = sizes[s], floor = floors[m];
                float *x = tiny_class(n, d, 100 + s);
                pft_gmm_opts_t o;
                pft_gmm_opts_default(&o);
                o.k = 10;
                o.cov = covs[f];
                o.rank = 2;
                o.min_rows = floor;
                pft_gmm_t *g = NULL;
                pft_gmm_info_t info;
                CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
                if (g) {
                    int k_first = n < 10 ? n : 10;
                    double me = min_eff(g, n);
                    if (n >= floor)
                        CHECK_MSG(me >= floor, "%s n=%d floor=%d: a component stands for %.3f rows",
                                  pft_cov_name(covs[f]), n, floor, me);
                    else
                        CHECK(pft_gmm_k(g) == 1);
                    CHECK(pft_gmm_k(g) <= (n / floor > 0 ? n / floor : 1));
                    CHECK(info.k_used == pft_gmm_k(g));
                    CHECK(info.floor_dropped == k_first - info.k_used);
                    CHECK_NEAR(info.min_eff_rows, me, 1e-9);
                    CHECK(info.floor_merged <= info.floor_dropped);
                    CHECK(covs[f] == PFT_COV_LOWRANK ? info.floor_merged == 0 : info.floor_refits == 0);
                    /* EM's mixture mean is the data mean, and a moment-preserving merge keeps it */
                    for (int j = 0; info.reseeded == 0 && j < d; j++) {
                        double mx = 0, mm = 0;
                        for (int i = 0; i < n; i++)
                            mx += x[(size_t)i * d + j] / n;
                        for (int c = 0; c < pft_gmm_k(g); c++)
                            mm += pft_gmm_weights(g)[c] * pft_gmm_means(g)[(size_t)c * d + j];
                        CHECK_NEAR(mm, mx, 1e-6 * (1 + fabs(mx)));
                    }
                }
                pft_gmm_destroy(&g);
                free(x);
            }
}

/* n < min_rows: K = 1 (the floor cannot hold; callers withhold such a class). */
static void test_below_floor(void)
{
    const int n = 3, d = 2;
    float *x = tiny_class(n, d, 9);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.min_rows = 5;
    pft_gmm_t *g = NULL;
    pft_gmm_info_t info;
    CHECK(pft_gmm_fit(x, n, d, &o, &g, &info) == 0);
    CHECK(g && pft_gmm_k(g) == 1 && info.floor_dropped == 2);
    CHECK_NEAR(info.min_eff_rows, 3.0, 1e-12);
    pft_gmm_destroy(&g);
    free(x);
}

/* Without a floor (min_rows 0 or 1) the fit is exactly the unfloored one, which here has a component standing
 * for one row; a floor that does not bind (every component already above it) changes nothing either. */
static void test_no_floor_is_today(void)
{
    const int n = 30, d = 4;
    float *x = tiny_class(n, d, 5);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    CHECK(o.min_rows == 1);
    pft_gmm_t *a = NULL, *b = NULL, *c = NULL;
    pft_gmm_info_t ia, ib, ic;
    o.min_rows = 0;
    CHECK(pft_gmm_fit(x, n, d, &o, &a, &ia) == 0);
    o.min_rows = 1;
    CHECK(pft_gmm_fit(x, n, d, &o, &b, &ib) == 0);
    CHECK(a && b && same_model(a, b));
    CHECK(ia.k_used == 10 && ib.floor_dropped == 0 && ib.floor_refits == 0);
    CHECK_MSG(min_eff(a, n) < 1.5, "the unfloored fit keeps a one-row component (%.3f)", min_eff(a, n));
    /* a floor at the smallest count of the unfloored fit does not bind */
    o.min_rows = (int)floor(min_eff(a, n) + 1e-9);
    if (o.min_rows > 1) {
        CHECK(pft_gmm_fit(x, n, d, &o, &c, &ic) == 0);
        CHECK(c && same_model(a, c) && ic.floor_refits == 0);
    }
    pft_gmm_destroy(&a);
    pft_gmm_destroy(&b);
    pft_gmm_destroy(&c);
    /* a large class far above the floor: identical with and without it */
    const int n2 = 2000;
    float *y = malloc(sizeof(float) * n2 * d);
    pft_rng_t *r = pft_rng_new(3);
    for (int i = 0; i < n2 * d; i++)
        y[i] = (float)((i / d) % 4 * 3.0 + pft_rng_normal(r));
    pft_rng_destroy(&r);
    o.k = 4;
    o.min_rows = 1;
    CHECK(pft_gmm_fit(y, n2, d, &o, &a, &ia) == 0);
    o.min_rows = 5;
    CHECK(pft_gmm_fit(y, n2, d, &o, &b, &ib) == 0);
    CHECK(a && b && same_model(a, b) && ib.floor_refits == 0 && ib.floor_dropped == 0);
    pft_gmm_destroy(&a);
    pft_gmm_destroy(&b);
    free(y);
    free(x);
}

/* The floored fit is deterministic: the same input and seed give the same model, restarts included. */
static void test_deterministic(void)
{
    const int n = 40, d = 3;
    float *x = tiny_class(n, d, 11);
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.min_rows = 5;
    o.n_init = 3;
    o.seed = 42;
    pft_gmm_t *a = NULL, *b = NULL;
    pft_gmm_info_t ia, ib;
    CHECK(pft_gmm_fit(x, n, d, &o, &a, &ia) == 0);
    CHECK(pft_gmm_fit(x, n, d, &o, &b, &ib) == 0);
    CHECK(a && b && same_model(a, b) && ia.floor_refits == ib.floor_refits);
    CHECK(ia.min_eff_rows >= 5);
    pft_gmm_destroy(&a);
    pft_gmm_destroy(&b);
    free(x);
}

int main(void)
{
    RUN(test_floor_holds);
    RUN(test_below_floor);
    RUN(test_no_floor_is_today);
    RUN(test_deterministic);
    return pft_test_done();
}
