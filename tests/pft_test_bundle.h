/* pft_test_bundle: random valid GMMs and hostile-bytes sweeps for the bundle tests (test_bundle*.c). */
#ifndef PFT_TEST_BUNDLE_H
#define PFT_TEST_BUNDLE_H

#include <stdint.h>

#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_test.h"

/* Dyadic weights (exact sums): 1/2, 1/4, ..., the last two equal. */
static inline void dyadic_weights(double *w, int k)
{
    double left = 1.0;
    for (int j = 0; j < k - 1; j++) {
        w[j] = left / 2;
        left -= w[j];
    }
    w[k - 1] = left;
}

/* Rank of the lowrank models make_gmm builds. */
static inline int lowrank_q(int d)
{
    return (d + 2) / 3 < d ? (d + 2) / 3 : d - 1;
}

/* A random valid model; dyadic: dyadic weights, else random weights. lowrank: rank lowrank_q(d). */
static inline pft_gmm_t *make_gmm(pft_rng_t *r, int k, int d, pft_cov_t cov, int dyadic)
{
    int lr = cov == PFT_COV_LOWRANK;
    pft_gmm_t *g = lr ? pft_gmm_new_lowrank(k, d, lowrank_q(d)) : pft_gmm_new(k, d, cov);
    size_t D = (size_t)d, K = (size_t)k;
    size_t cl = cov == PFT_COV_FULL ? D * D : cov == PFT_COV_SPHER ? 1 : D;
    double *w = pft_alloc_array(K, sizeof *w), *mu = pft_alloc_array(K * D, sizeof *mu),
           *cv = pft_calloc(K * cl, sizeof *cv);
    if (dyadic) {
        dyadic_weights(w, k);
    } else {
        double s = 0;
        for (int j = 0; j < k; j++)
            s += w[j] = 0.1 + pft_rng_uniform(r);
        for (int j = 0; j < k; j++)
            w[j] /= s;
    }
    for (size_t i = 0; i < K * D; i++)
        mu[i] = 2.0 * pft_rng_normal(r);
    if (cov == PFT_COV_FULL) {
        for (size_t c = 0; c < K; c++)
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j <= i; j++)
                    cv[c * cl + i * D + j] = i == j ? 0.5 + pft_rng_uniform(r) : 0.1 * pft_rng_normal(r);
        CHECK(pft_gmm_set_params_chol(g, w, mu, cv) == 0);
    } else if (lr) {
        size_t nf = K * D * (size_t)lowrank_q(d);
        double *fa = pft_alloc_array(nf + 1, sizeof *fa);
        for (size_t i = 0; i < K * cl; i++)
            cv[i] = 0.01 + 0.5 * pft_rng_uniform(r);
        for (size_t i = 0; i < nf; i++)
            fa[i] = 0.3 * pft_rng_normal(r);
        CHECK(pft_gmm_set_params_lowrank(g, w, mu, fa, cv) == 0);
        pft_free(fa);
    } else {
        for (size_t i = 0; i < K * cl; i++)
            cv[i] = 0.05 + 2.0 * pft_rng_uniform(r);
        CHECK(pft_gmm_set_params(g, w, mu, cv) == 0);
    }
    pft_free(w);
    pft_free(mu);
    pft_free(cv);
    return g;
}

/* A decoded bundle must be fully usable: it re-encodes and decodes again. */
static inline int pft_test_usable(const pft_bundle_t *o)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pft_bundle_encode(o, &buf, &len))
        return 0;
    pft_bundle_t *again = NULL;
    int rc = pft_bundle_decode(buf, len, NULL, &again);
    pft_free(buf);
    pft_bundle_destroy(&again);
    return rc == 0;
}

/* Decodes every single-bit flip of buf: counts the flips rejected, those decoding to a usable bundle, and the
 * bad outcomes (a decoded bundle that is not usable; a refusal without an error code, a message, or with a
 * bundle). */
static inline void pft_test_bit_flips(const uint8_t *buf, size_t len, int *accepted, int *rejected, int *bad)
{
    *accepted = *rejected = *bad = 0;
    uint8_t *copy = pft_alloc(len);
    for (size_t i = 0; copy && i < len * 8; i++) {
        memcpy(copy, buf, len);
        copy[i / 8] ^= (uint8_t)(1u << (i % 8));
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(copy, len, NULL, &o);
        if (rc == 0) {
            (*accepted)++;
            if (!o || !pft_test_usable(o))
                (*bad)++;
        } else {
            (*rejected)++;
            if (o || rc >= 0 || strlen(pft_errmsg()) == 0)
                (*bad)++;
        }
        pft_bundle_destroy(&o);
    }
    pft_free(copy);
}

#endif
