/* pft_test_gmm: helpers shared by the pft_gmm tests (test_gmm.c, test_gmm_em.c): model sanity checks,
 * fixture loading, models from parameters. */
#ifndef PFT_TEST_GMM_H
#define PFT_TEST_GMM_H

#include <stdio.h>
#include <stdlib.h>

#include "pft_gmm.h"
#include "pft_test.h"

static inline int all_finite(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

static inline size_t cov_len(pft_cov_t cov, int d)
{
    return cov == PFT_COV_FULL ? (size_t)d * d : cov == PFT_COV_DIAG ? (size_t)d : 1;
}

/* The model is finite, weights sum to 1, variances ≥ floor. */
static inline void check_model_sane(const pft_gmm_t *g, double floor)
{
    int k = pft_gmm_k(g), d = pft_gmm_dim(g);
    pft_cov_t cov = pft_gmm_cov(g);
    size_t cl = cov_len(cov, d);
    CHECK(all_finite(pft_gmm_weights(g), (size_t)k));
    CHECK(all_finite(pft_gmm_means(g), (size_t)k * d));
    CHECK(all_finite(pft_gmm_covars(g), (size_t)k * cl));
    double s = 0;
    for (int c = 0; c < k; c++) {
        CHECK(pft_gmm_weights(g)[c] >= 0);
        s += pft_gmm_weights(g)[c];
    }
    CHECK_NEAR(s, 1.0, 1e-9);
    const double *cv = pft_gmm_covars(g);
    for (int c = 0; c < k; c++) {
        if (cov == PFT_COV_FULL) {
            for (int j = 0; j < d; j++)
                CHECK_MSG(cv[(size_t)c * cl + (size_t)j * d + j] >= floor, "comp %d dim %d: %g", c, j,
                          cv[(size_t)c * cl + (size_t)j * d + j]);
            CHECK(all_finite(pft_gmm_chol(g) + (size_t)c * cl, cl));
        } else {
            for (size_t j = 0; j < cl; j++)
                CHECK_MSG(cv[c * cl + j] >= floor, "comp %d var %zu: %g", c, j, cv[c * cl + j]);
        }
    }
}

/* Plain-text fixture data: "n d" then n rows. */
static inline float *load_data(const char *name, int *n, int *d)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PFT_FIXTURES_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    float *x = NULL;
    if (fscanf(f, "%d %d", n, d) == 2 && *n > 0 && *d > 0) {
        x = malloc(sizeof(float) * (size_t)*n * (size_t)*d);
        for (size_t i = 0; x && i < (size_t)*n * (size_t)*d; i++)
            if (fscanf(f, "%f", &x[i]) != 1) {
                free(x);
                x = NULL;
            }
    }
    fclose(f);
    return x;
}

/* Model with the given parameters (diag/spher/full); NULL on failure. */
static inline pft_gmm_t *make_model(int k, int d, pft_cov_t cov, const double *w, const double *mu,
                                    const double *cv)
{
    pft_gmm_t *g = pft_gmm_new(k, d, cov);
    if (g && pft_gmm_set_params(g, w, mu, cv) != 0)
        pft_gmm_destroy(&g);
    return g;
}

#endif
