/* make_seeds: writes the seed bundles of the bundle fuzzer (real encoder output: every covariance family
 * and dtype, several K, d, class counts, provenance shapes, parents, flags and signatures). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, pft_errmsg());
    exit(1);
}

/* A random valid model; dyadic weights (exact sums) or random ones. */
static pft_gmm_t *make_gmm(pft_rng_t *r, int k, int d, pft_cov_t cov, int dyadic)
{
    pft_gmm_t *g = pft_gmm_new(k, d, cov);
    size_t D = (size_t)d, K = (size_t)k, cl = cov == PFT_COV_FULL ? D * D : cov == PFT_COV_DIAG ? D : 1;
    double *w = pft_alloc_array(K, sizeof *w), *mu = pft_alloc_array(K * D, sizeof *mu),
           *cv = pft_calloc(K * cl, sizeof *cv);
    if (!g || !w || !mu || !cv)
        die("out of memory");
    double left = 1.0, s = 0.0;
    for (size_t j = 0; j < K; j++) {
        if (dyadic) {
            w[j] = j + 1 < K ? left / 2 : left;
            left -= w[j];
        } else {
            s += w[j] = 0.1 + pft_rng_uniform(r);
        }
    }
    for (size_t j = 0; !dyadic && j < K; j++)
        w[j] /= s;
    for (size_t i = 0; i < K * D; i++)
        mu[i] = 2.0 * pft_rng_normal(r);
    int rc;
    if (cov == PFT_COV_FULL) {
        for (size_t c = 0; c < K; c++)
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j <= i; j++)
                    cv[c * cl + i * D + j] = i == j ? 0.5 + pft_rng_uniform(r) : 0.1 * pft_rng_normal(r);
        rc = pft_gmm_set_params_chol(g, w, mu, cv);
    } else {
        for (size_t i = 0; i < K * cl; i++)
            cv[i] = 0.05 + 2.0 * pft_rng_uniform(r);
        rc = pft_gmm_set_params(g, w, mu, cv);
    }
    if (rc)
        die("set_params");
    pft_free(w);
    pft_free(mu);
    pft_free(cv);
    return g;
}

typedef struct {
    pft_cov_t cov;
    pft_dtype_t dtype;
    int d, k, n_classes, n_nodes, n_parents, complete, signed_, dyadic;
} seed_t;

static void write_seed(const char *dir, int idx, const seed_t *s)
{
    pft_rng_t *r = pft_rng_new(1000 + (uint64_t)idx);
    pft_bundle_t *b = pft_bundle_new("run-seed", "node-0", s->dtype, s->d);
    if (!r || !b)
        die("new");
    for (int c = 0; c < s->n_classes; c++) {
        pft_gmm_t *g = make_gmm(r, s->k, s->d, s->cov, s->dyadic);
        uint64_t total = 0;
        for (int v = 0; v < s->n_nodes; v++) {
            char node[16];
            snprintf(node, sizeof node, "node-%d", v);
            uint64_t cnt = 5 + (uint64_t)(3 * c + 7 * v);
            total += cnt;
            if (pft_bundle_prov_add(b, node, 3 * c + 1, cnt))
                die("prov_add");
        }
        if (pft_bundle_add_class(b, 3 * c + 1, total, &g))
            die("add_class");
    }
    for (int p = 0; p < s->n_parents; p++) {
        uint8_t id[PFT_BUNDLE_ID_LEN];
        for (int i = 0; i < PFT_BUNDLE_ID_LEN; i++)
            id[i] = (uint8_t)pft_rng_u64(r);
        if (pft_bundle_add_parent(b, id))
            die("add_parent");
    }
    if (s->complete && pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE))
        die("set_flags");
    if (s->signed_) {
        uint8_t sig[64];
        for (int i = 0; i < 64; i++)
            sig[i] = (uint8_t)pft_rng_u64(r);
        if (pft_bundle_set_signature(b, sig, sizeof sig))
            die("set_signature");
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pft_bundle_encode(b, &buf, &len))
        die("encode");
    static const char *covs[] = {"full", "diag", "spher"};
    char path[512];
    snprintf(path, sizeof path, "%s/seed-%02d-%s-%s-d%d-k%d-c%d.bundle", dir, idx, covs[s->cov],
             s->dtype == PFT_DTYPE_F16 ? "f16" : "f32", s->d, s->k, s->n_classes);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
    printf("%s (%zu bytes)\n", path, len);
    pft_free(buf);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    static const seed_t seeds[] = {
        /* cov, dtype, d, k, classes, nodes, parents, complete, signed, dyadic */
        {PFT_COV_DIAG, PFT_DTYPE_F16, 3, 2, 2, 1, 0, 0, 0, 1},
        {PFT_COV_DIAG, PFT_DTYPE_F32, 3, 2, 2, 2, 1, 0, 1, 0},
        {PFT_COV_FULL, PFT_DTYPE_F16, 3, 2, 2, 2, 1, 1, 0, 0},
        {PFT_COV_FULL, PFT_DTYPE_F32, 4, 1, 1, 1, 0, 0, 1, 1},
        {PFT_COV_SPHER, PFT_DTYPE_F16, 2, 3, 3, 3, 2, 0, 1, 0},
        {PFT_COV_SPHER, PFT_DTYPE_F32, 5, 1, 1, 1, 0, 1, 0, 1},
        {PFT_COV_DIAG, PFT_DTYPE_F16, 1, 1, 1, 1, 0, 0, 0, 1},
        {PFT_COV_DIAG, PFT_DTYPE_F16, 64, 4, 5, 3, 2, 0, 1, 0},
        {PFT_COV_FULL, PFT_DTYPE_F16, 24, 2, 2, 2, 1, 0, 1, 0},
        {PFT_COV_SPHER, PFT_DTYPE_F32, 32, 8, 4, 4, 3, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        write_seed(argv[1], (int)i, &seeds[i]);
    return 0;
}
