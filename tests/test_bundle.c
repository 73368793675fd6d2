/* Tests of pft_bundle: round trips, determinism, sizes against the paper's formula, and hostile bytes. */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_half.h"
#include "pft_rng.h"
#include "pft_test.h"

/* ---------- helpers ---------- */

/* Dyadic weights (exact sums): 1/2, 1/4, ..., the last two equal. */
static void dyadic_weights(double *w, int k)
{
    double left = 1.0;
    for (int j = 0; j < k - 1; j++) {
        w[j] = left / 2;
        left -= w[j];
    }
    w[k - 1] = left;
}

/* Rank of the lowrank models make_gmm builds. */
static int lowrank_q(int d)
{
    return (d + 2) / 3 < d ? (d + 2) / 3 : d - 1;
}

/* A random valid model; dyadic: dyadic weights, else random weights. lowrank: rank lowrank_q(d). */
static pft_gmm_t *make_gmm(pft_rng_t *r, int k, int d, pft_cov_t cov, int dyadic)
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

/* Classes labelled 0, 2, 4, ... with counts split between nodes "node-a" (2/3) and "node-b" (1/3). */
static pft_bundle_t *make_bundle(pft_dtype_t dt, pft_cov_t cov, int d, int k, int n_classes, uint64_t seed,
                                 int dyadic)
{
    pft_rng_t *r = pft_rng_new(seed);
    pft_bundle_t *b = pft_bundle_new("run-1", "node-b", dt, d);
    for (int c = 0; c < n_classes; c++) {
        pft_gmm_t *g = make_gmm(r, k, d, cov, dyadic);
        uint64_t na = 20 + 3 * (uint64_t)c, nb = 10 + (uint64_t)c;
        CHECK(pft_bundle_add_class(b, 2 * c, na + nb, &g) == 0);
        CHECK(g == NULL);
        CHECK(pft_bundle_prov_add(b, "node-a", 2 * c, na) == 0);
        CHECK(pft_bundle_prov_add(b, "node-b", 2 * c, nb) == 0);
    }
    uint8_t parent[PFT_BUNDLE_ID_LEN];
    memset(parent, 0xab, sizeof parent);
    CHECK(pft_bundle_add_parent(b, parent) == 0);
    pft_rng_destroy(&r);
    return b;
}

static double quantise(double v, pft_dtype_t dt)
{
    return dt == PFT_DTYPE_F16 ? pft_half_to_float(pft_half_from_float((float)v)) : (double)(float)v;
}

static size_t cov_numbers(const pft_gmm_t *g)
{
    size_t d = (size_t)pft_gmm_dim(g), k = (size_t)pft_gmm_k(g);
    pft_cov_t c = pft_gmm_cov(g);
    return k * (c == PFT_COV_FULL ? d * d : c == PFT_COV_SPHER ? 1 : d);
}

/* Decoded parameters equal the original ones quantised to the dtype, exactly. */
static int same_params(const pft_gmm_t *a, const pft_gmm_t *b, pft_dtype_t dt)
{
    if (pft_gmm_k(a) != pft_gmm_k(b) || pft_gmm_dim(a) != pft_gmm_dim(b) || pft_gmm_cov(a) != pft_gmm_cov(b))
        return 0;
    size_t k = (size_t)pft_gmm_k(a), d = (size_t)pft_gmm_dim(a);
    for (size_t j = 0; j < k; j++)
        if (fabs(pft_gmm_weights(a)[j] - pft_gmm_weights(b)[j]) > 1e-15)
            return 0;
    for (size_t i = 0; i < k * d; i++)
        if (quantise(pft_gmm_means(a)[i], dt) != pft_gmm_means(b)[i])
            return 0;
    const double *pa = pft_gmm_cov(a) == PFT_COV_FULL ? pft_gmm_chol(a) : pft_gmm_covars(a);
    const double *pb = pft_gmm_cov(b) == PFT_COV_FULL ? pft_gmm_chol(b) : pft_gmm_covars(b);
    for (size_t i = 0; i < cov_numbers(a); i++)
        if (quantise(pa[i], dt) != pb[i])
            return 0;
    if (pft_gmm_rank(a) != pft_gmm_rank(b))
        return 0;
    for (size_t i = 0; i < k * d * (size_t)pft_gmm_rank(a); i++) /* lowrank loadings */
        if (quantise(pft_gmm_factors(a)[i], dt) != pft_gmm_factors(b)[i])
            return 0;
    return 1;
}

static void test_roundtrip(void)
{
    const pft_cov_t covs[4] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER, PFT_COV_LOWRANK};
    const pft_dtype_t dts[2] = {PFT_DTYPE_F16, PFT_DTYPE_F32};
    for (int ci = 0; ci < 4; ci++) {
        for (int ti = 0; ti < 2; ti++) {
            for (int dyadic = 0; dyadic < 2; dyadic++) {
                pft_bundle_t *b =
                    make_bundle(dts[ti], covs[ci], 9, 3, 4, 100 + (uint64_t)(ci * 2 + ti), dyadic);
                CHECK(pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE) == 0);
                uint8_t *buf = NULL, *buf2 = NULL, *buf3 = NULL;
                size_t len = 0, len2 = 0, len3 = 0;
                CHECK(pft_bundle_encode(b, &buf, &len) == 0);
                CHECK(pft_bundle_encode(b, &buf2, &len2) == 0); /* same bundle, same bytes */
                CHECK(len == len2 && memcmp(buf, buf2, len) == 0);
                PFT_FREE(buf2);
                pft_bundle_t *o = NULL;
                int rc = pft_bundle_decode(buf, len, NULL, &o);
                CHECK_MSG(rc == 0, "%s", pft_errmsg());
                if (!o) {
                    pft_free(buf);
                    pft_bundle_destroy(&b);
                    continue;
                }
                CHECK(strcmp(pft_bundle_run_id(o), "run-1") == 0);
                CHECK(strcmp(pft_bundle_producer(o), "node-b") == 0);
                CHECK(pft_bundle_flags(o) == PFT_BUNDLE_COMPLETE);
                CHECK(pft_bundle_dtype(o) == dts[ti]);
                CHECK(pft_bundle_dim(o) == 9);
                CHECK(pft_bundle_n_classes(o) == 4);
                CHECK(pft_bundle_n_parents(o) == 1 && pft_bundle_parent(o, 0)[5] == 0xab);
                CHECK(pft_bundle_prov_n_nodes(o) == 2);
                CHECK(pft_bundle_prov_count(o, "node-a", 6) == 29);
                CHECK(pft_bundle_prov_count(o, "node-b", 6) == 13);
                for (int i = 0; i < 4; i++) {
                    CHECK(pft_bundle_class_label(o, i) == 2 * i);
                    CHECK(pft_bundle_class_count(o, i) == pft_bundle_class_count(b, i));
                    CHECK(same_params(pft_bundle_class_gmm(b, i), pft_bundle_class_gmm(o, i), dts[ti]));
                }
                /* id: stable, the hash of the payload, visible from the message alone */
                uint8_t id1[32], id2[32], id3[32];
                CHECK(pft_bundle_id(b, id1) == 0);
                CHECK(pft_bundle_id(o, id2) == 0);
                CHECK(pft_bundle_message_id(buf, len, id3) == 0);
                CHECK(memcmp(id1, id2, 32) == 0 && memcmp(id1, id3, 32) == 0);
                /* the decoded bundle re-encodes to the identical bytes */
                CHECK(pft_bundle_encode(o, &buf2, &len2) == 0);
                CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
                /* and so does a bundle rebuilt from the decoded parameters (exact when weights are dyadic) */
                pft_bundle_t *re = pft_bundle_new("run-1", "node-b", dts[ti], 9);
                for (int i = 0; i < 4; i++) {
                    pft_gmm_t *g = pft_gmm_dup(pft_bundle_class_gmm(o, i));
                    CHECK(pft_bundle_add_class(re, pft_bundle_class_label(o, i), pft_bundle_class_count(o, i),
                                               &g) == 0);
                }
                CHECK(pft_bundle_prov_merge(re, o) == 0);
                CHECK(pft_bundle_add_parent(re, pft_bundle_parent(o, 0)) == 0);
                CHECK(pft_bundle_set_flags(re, PFT_BUNDLE_COMPLETE) == 0);
                CHECK(pft_bundle_encode(re, &buf3, &len3) == 0);
                if (dyadic)
                    CHECK_MSG(len3 == len && memcmp(buf, buf3, len) == 0,
                              "cov %d dtype %d: rebuilt bytes differ", ci, ti);
                else
                    CHECK(len3 == len);
                pft_free(buf);
                pft_free(buf2);
                pft_free(buf3);
                pft_bundle_destroy(&re);
                pft_bundle_destroy(&o);
                pft_bundle_destroy(&b);
                pft_bundle_destroy(&b); /* safe twice */
            }
        }
    }
}

static void test_signature_and_mutation(void)
{
    pft_bundle_t *b = make_bundle(PFT_DTYPE_F16, PFT_COV_DIAG, 4, 2, 2, 7, 0);
    uint8_t id0[32], id1[32], id2[32], sig[64];
    memset(sig, 0x5a, sizeof sig);
    CHECK(pft_bundle_id(b, id0) == 0);
    CHECK(pft_bundle_set_signature(b, sig, sizeof sig) == 0);
    CHECK(pft_bundle_set_signature(b, sig, PFT_BUNDLE_MAX_SIG + 1) == PFT_EINVAL);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &o) == 0);
    size_t sl = 0;
    const uint8_t *s = o ? pft_bundle_signature(o, &sl) : NULL;
    CHECK(sl == 64 && s && memcmp(s, sig, 64) == 0);
    CHECK(o && pft_bundle_id(o, id1) == 0 && memcmp(id0, id1, 32) == 0); /* signature is outside the id */
    pft_envelope_t env;
    CHECK(pft_envelope_parse(buf, len, NULL, &env) == 0 && env.sig_len == 64 && env.payload_len < len);
    /* any change drops the cached payload: new bytes, new id */
    if (o) {
        CHECK(pft_bundle_set_flags(o, PFT_BUNDLE_COMPLETE) == 0);
        CHECK(pft_bundle_id(o, id2) == 0 && memcmp(id0, id2, 32) != 0);
        CHECK(pft_bundle_set_flags(o, 0x80) == PFT_EINVAL);
    }
    pft_free(buf);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
}

static void test_api_contracts(void)
{
    pft_rng_t *r = pft_rng_new(3);
    CHECK(pft_bundle_new("", "a", PFT_DTYPE_F16, 4) == NULL);
    CHECK(pft_bundle_new("run", "a\nb", PFT_DTYPE_F16, 4) == NULL);
    CHECK(pft_bundle_new("run", "a", PFT_DTYPE_F16, 0) == NULL);
    char long_name[80];
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    CHECK(pft_bundle_new(long_name, "a", PFT_DTYPE_F16, 4) == NULL);
    pft_bundle_t *b = pft_bundle_new("run", "a", PFT_DTYPE_F16, 4);
    pft_gmm_t *g = make_gmm(r, 2, 5, PFT_COV_DIAG, 0);
    CHECK(pft_bundle_add_class(b, 0, 10, &g) == PFT_EINVAL); /* dimension mismatch: caller keeps it */
    CHECK(g != NULL);
    pft_gmm_destroy(&g);
    g = make_gmm(r, 2, 4, PFT_COV_DIAG, 0);
    CHECK(pft_bundle_add_class(b, -1, 10, &g) == PFT_EINVAL && g);
    CHECK(pft_bundle_add_class(b, 3, 0, &g) == PFT_EINVAL && g);
    CHECK(pft_bundle_add_class(b, 3, 10, &g) == 0 && !g);
    g = make_gmm(r, 2, 4, PFT_COV_SPHER, 0);
    CHECK(pft_bundle_add_class(b, 3, 10, &g) == PFT_EINVAL && g); /* twice */
    CHECK(pft_bundle_add_class(b, 1, 7, &g) == 0);                /* sorted on insertion */
    CHECK(pft_bundle_class_label(b, 0) == 1 && pft_bundle_find_class(b, 3) == 1 &&
          pft_bundle_find_class(b, 2) < 0);
    /* counts must match provenance before encoding */
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_prov_add(b, "a", 3, 10) == 0);
    CHECK(pft_bundle_encode(b, &buf, &len) == PFT_EINVAL && buf == NULL);
    CHECK(strstr(pft_errmsg(), "provenance counts sum to 0") != NULL);
    CHECK(pft_bundle_prov_add(b, "a", 1, 7) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 9, 1) == 0); /* a label without a class */
    CHECK(pft_bundle_encode(b, &buf, &len) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "label 9 has no class") != NULL);
    pft_bundle_destroy(&b);

    /* fp16 range: a mean beyond 65504 cannot be sent in fp16 but can in fp32 */
    for (int t = 0; t < 2; t++) {
        b = pft_bundle_new("run", "a", t ? PFT_DTYPE_F32 : PFT_DTYPE_F16, 2);
        g = pft_gmm_new(1, 2, PFT_COV_DIAG);
        double w = 1, mu[2] = {1e5, 0}, var[2] = {1e-9, 1}; /* 1e-9 underflows fp16: sent as 2^-24 */
        CHECK(pft_gmm_set_params(g, &w, mu, var) == 0);
        CHECK(pft_bundle_add_class(b, 0, 5, &g) == 0);
        CHECK(pft_bundle_prov_add(b, "a", 0, 5) == 0);
        int rc = pft_bundle_encode(b, &buf, &len);
        if (t == 0) {
            CHECK(rc == PFT_ERANGE);
            CHECK(strstr(pft_errmsg(), "mean[0] = 100000 does not fit fp16") != NULL);
            pft_bundle_destroy(&b);
            b = pft_bundle_new("run", "a", PFT_DTYPE_F16, 2);
            g = pft_gmm_new(1, 2, PFT_COV_DIAG);
            mu[0] = 1;
            CHECK(pft_gmm_set_params(g, &w, mu, var) == 0);
            CHECK(pft_bundle_add_class(b, 0, 5, &g) == 0);
            CHECK(pft_bundle_prov_add(b, "a", 0, 5) == 0);
            rc = pft_bundle_encode(b, &buf, &len);
        }
        CHECK(rc == 0);
        pft_bundle_t *o = NULL;
        CHECK(pft_bundle_decode(buf, len, NULL, &o) == 0);
        if (o)
            CHECK(pft_gmm_covars(pft_bundle_class_gmm(o, 0))[0] > 0);
        PFT_FREE(buf);
        pft_bundle_destroy(&o);
        pft_bundle_destroy(&b);
    }
    pft_rng_destroy(&r);
}

/* Diamond: a → b, a → c, {b, c} → d. d merges the provenance of both: a counted once. */
static void test_provenance_merge(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "b", PFT_DTYPE_F16, 2),
                 *c = pft_bundle_new("run", "c", PFT_DTYPE_F16, 2),
                 *d = pft_bundle_new("run", "d", PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_prov_add(b, "a", 0, 100) == 0 && pft_bundle_prov_add(b, "a", 1, 50) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 0, 30) == 0);
    CHECK(pft_bundle_prov_add(c, "a", 0, 100) == 0 && pft_bundle_prov_add(c, "a", 1, 50) == 0);
    CHECK(pft_bundle_prov_add(c, "c", 1, 20) == 0);
    CHECK(pft_bundle_prov_merge(d, b) == 0);
    CHECK(pft_bundle_prov_merge(d, c) == 0);
    CHECK(pft_bundle_prov_add(d, "d", 0, 5) == 0);
    CHECK(pft_bundle_prov_n_nodes(d) == 4);
    CHECK(strcmp(pft_bundle_prov_node(d, 0), "a") == 0 && strcmp(pft_bundle_prov_node(d, 3), "d") == 0);
    CHECK(pft_bundle_prov_count(d, "a", 0) == 100 && pft_bundle_prov_count(d, "a", 1) == 50);
    CHECK(pft_bundle_prov_count(d, "c", 1) == 20 && pft_bundle_prov_count(d, "c", 0) == 0);
    CHECK(pft_bundle_prov_contains(d, "b") && !pft_bundle_prov_contains(d, "e"));
    int label;
    uint64_t count;
    CHECK(pft_bundle_prov_n_labels(d, 0) == 2);
    pft_bundle_prov_entry(d, 0, 1, &label, &count);
    CHECK(label == 1 && count == 50);
    /* a conflicting count for the same (node, class) is an error, and d is unaltered */
    pft_bundle_t *e = pft_bundle_new("run", "e", PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_prov_add(e, "e", 0, 1) == 0);
    CHECK(pft_bundle_prov_add(e, "a", 0, 99) == 0);
    CHECK(pft_bundle_prov_merge(d, e) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "conflict") != NULL);
    CHECK(!pft_bundle_prov_contains(d, "e") && pft_bundle_prov_count(d, "a", 0) == 100);
    CHECK(pft_bundle_prov_add(d, "x", 0, 0) == PFT_EINVAL && !pft_bundle_prov_contains(d, "x"));
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&c);
    pft_bundle_destroy(&d);
    pft_bundle_destroy(&e);
}

/* Encoded size against the paper's formula at 16 bits. */
static void test_size_formula(void)
{
    struct {
        pft_cov_t cov;
        int d, k, classes;
    } cases[] = {
        {PFT_COV_DIAG, 1280, 10, 7}, {PFT_COV_SPHER, 1280, 10, 7},  {PFT_COV_FULL, 1280, 1, 7},
        {PFT_COV_FULL, 64, 10, 7},   {PFT_COV_LOWRANK, 1280, 1, 7}, /* rank lowrank_q(1280) = 427 */
        {PFT_COV_LOWRANK, 96, 5, 7},                                /* rank 32 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pft_bundle_t *b =
            make_bundle(PFT_DTYPE_F16, cases[i].cov, cases[i].d, cases[i].k, cases[i].classes, 11, 0);
        size_t d = (size_t)cases[i].d, k = (size_t)cases[i].k;
        size_t q = (size_t)lowrank_q(cases[i].d);
        size_t per_class = cases[i].cov == PFT_COV_DIAG      ? (2 * d + 1) * k
                           : cases[i].cov == PFT_COV_SPHER   ? (d + 2) * k
                           : cases[i].cov == PFT_COV_LOWRANK ? (d * q + 2 * d + 1) * k
                                                             : (2 * d + (d * d - d) / 2 + 1) * k;
        size_t formula = 2 * per_class * (size_t)cases[i].classes;
        CHECK(pft_bundle_formula_bytes(b) == formula);
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(pft_bundle_encode(b, &buf, &len) == 0);
        double excess = (double)len / (double)formula - 1.0;
        printf("  size %-5s d=%zu K=%zu classes=%d fp16: encoded %zu bytes, formula %zu bytes (+%.3f%%, %zd "
               "bytes)\n",
               pft_cov_name(cases[i].cov), d, k, cases[i].classes, len, formula, 100 * excess,
               (ssize_t)len - (ssize_t)formula);
        /* weights travel as fp64 (+6 bytes per component), each class has ~20 bytes of framing,
         * provenance and header ~100 bytes */
        CHECK(len <= formula + formula / 50 + 256);
        CHECK(len >= formula);
        pft_bundle_t *o = NULL;
        CHECK(pft_bundle_decode(buf, len, NULL, &o) == 0);
        pft_free(buf);
        pft_bundle_destroy(&o);
        pft_bundle_destroy(&b);
    }
}

/* ---------- hostile bytes ---------- */

/* A small mixed bundle (diag, full, spher, lowrank classes) for exhaustive mutation. */
static void small_message(uint8_t **buf, size_t *len)
{
    pft_rng_t *r = pft_rng_new(5);
    pft_bundle_t *b = pft_bundle_new("r", "p", PFT_DTYPE_F16, 3);
    pft_cov_t covs[4] = {PFT_COV_DIAG, PFT_COV_FULL, PFT_COV_SPHER, PFT_COV_LOWRANK};
    for (int c = 0; c < 4; c++) {
        pft_gmm_t *g = make_gmm(r, 2, 3, covs[c], 0);
        CHECK(pft_bundle_add_class(b, c, 4, &g) == 0);
        CHECK(pft_bundle_prov_add(b, "p", c, 4) == 0);
    }
    CHECK(pft_bundle_encode(b, buf, len) == 0);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* A decoded bundle must be fully usable: it re-encodes and decodes again. */
static int usable(const pft_bundle_t *o)
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

static void test_truncation(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    int failures = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = pft_alloc(n); /* exact size: ASan sees any read past it */
        memcpy(copy, buf, n);
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(copy, n, NULL, &o) == 0 || o != NULL)
            failures++;
        pft_free(copy);
        pft_bundle_destroy(&o);
    }
    CHECK_MSG(failures == 0, "%d prefixes decoded", failures);
    printf("  %zu prefixes of a %zu-byte bundle all rejected\n", len, len);
    pft_free(buf);
}

static void test_bit_flips(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    int accepted = 0, rejected = 0, bad = 0;
    uint8_t *copy = pft_alloc(len);
    for (size_t i = 0; i < len * 8; i++) {
        memcpy(copy, buf, len);
        copy[i / 8] ^= (uint8_t)(1u << (i % 8));
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(copy, len, NULL, &o);
        if (rc == 0) {
            accepted++;
            if (!o || !usable(o))
                bad++;
        } else {
            rejected++;
            if (o || rc >= 0 || strlen(pft_errmsg()) == 0)
                bad++;
        }
        pft_bundle_destroy(&o);
    }
    CHECK(bad == 0);
    CHECK(rejected > 0);
    printf("  %zu single-bit flips: %d rejected, %d decoded to valid bundles\n", len * 8, rejected, accepted);
    pft_free(copy);
    pft_free(buf);
}

/* Random garbage and random edits of a valid message. */
static void test_random_mutations(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    pft_rng_t *r = pft_rng_new(99);
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        size_t n = t % 2 ? len : (size_t)pft_rng_below(r, 2 * len);
        uint8_t *m = pft_alloc(n);
        if (t % 2) {
            memcpy(m, buf, len);
            int edits = 1 + (int)pft_rng_below(r, 4);
            for (int e = 0; e < edits; e++)
                m[pft_rng_below(r, len)] = (uint8_t)pft_rng_u64(r);
        } else {
            for (size_t i = 0; i < n; i++)
                m[i] = (uint8_t)pft_rng_u64(r);
            if (n > 2) { /* often a plausible start: fixarray(4) "PFTB" */
                m[0] = 0x94;
                m[1] = 0xa4;
            }
        }
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(m, n, NULL, &o) == 0 && !usable(o))
            bad++;
        pft_bundle_destroy(&o);
        pft_free(m);
    }
    CHECK(bad == 0);
    pft_rng_destroy(&r);
    pft_free(buf);
}

/* ---------- hand-built payloads, following docs/WIRE.md (independent of the encoder) ---------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} tbuf_t;

static int tbuf_write(void *data, const char *p, size_t n)
{
    tbuf_t *t = data;
    if (t->len + n > t->cap) {
        t->cap = 2 * (t->len + n);
        t->buf = pft_realloc(t->buf, t->cap);
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
    return 0;
}

/* One class of the hand-built bundle; the fields can be broken one at a time. */
typedef struct {
    int d;      /* dimension written in the header */
    int d_data; /* dimension the arrays are built for */
    int dtype;  /* 0 f16, 1 f32 */
    int cov;    /* 0 full, 1 diag, 2 spher */
    int k;
    int n_classes;
    double w[4];   /* weights of every class */
    int bad_class; /* class whose values are broken below */
    int bad_comp;
    int set_mean; /* replace mean[bad_comp][1] of bad_class by mean_val */
    double mean_val;
    int set_var; /* replace variance / Cholesky diagonal [bad_comp][2] of bad_class by var_val */
    double var_val;
    int d_as_str;        /* write d as a string */
    int extra_field;     /* 9 payload fields */
    uint64_t n_override; /* if not 0: class count */
    int q;               /* cov 3 (lowrank): rank written */
    int q_data;          /* cov 3: rank the loadings are built for */
    int set_factor;      /* cov 3: replace factor[bad_comp][1][0] of bad_class by factor_val */
    double factor_val;
    int class_fields; /* if not 0: fields written per class (the schema wants 7, or 9 for lowrank) */
} spec_t;

static spec_t good_spec(void)
{
    spec_t s = {.d = 3,
                .d_data = 3,
                .dtype = 1,
                .cov = 1,
                .k = 2,
                .n_classes = 4,
                .w = {0.25, 0.75},
                .bad_class = 3,
                .bad_comp = 1,
                .q = 1,
                .q_data = 1};
    return s;
}

static void put_num(uint8_t *dst, size_t i, double v, int dtype)
{
    if (dtype == 0) {
        uint16_t h = pft_half_from_float((float)v);
        dst[2 * i] = (uint8_t)h;
        dst[2 * i + 1] = (uint8_t)(h >> 8);
    } else {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int b = 0; b < 4; b++)
            dst[4 * i + b] = (uint8_t)(u >> (8 * b));
    }
}

static void build_payload(const spec_t *s, tbuf_t *t)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, t, tbuf_write);
    msgpack_pack_array(&pk, s->extra_field ? 9 : 8);
    msgpack_pack_str_with_body(&pk, "run", 3);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_uint64(&pk, (uint64_t)s->dtype);
    if (s->d_as_str)
        msgpack_pack_str_with_body(&pk, "3", 1);
    else
        msgpack_pack_uint64(&pk, (uint64_t)s->d);
    msgpack_pack_array(&pk, 0); /* parents */
    msgpack_pack_array(&pk, 1); /* provenance: node "p" has everything */
    msgpack_pack_array(&pk, 2);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_array(&pk, (size_t)s->n_classes);
    for (int c = 0; c < s->n_classes; c++) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, (uint64_t)c);
        msgpack_pack_uint64(&pk, 10);
    }
    msgpack_pack_array(&pk, (size_t)s->n_classes);
    size_t d = (size_t)s->d_data, k = (size_t)s->k, es = s->dtype ? 4 : 2;
    size_t m = s->cov == 0 ? d * (d + 1) / 2 : s->cov == 2 ? 1 : d;
    uint8_t *tmp = pft_calloc(k * d * d + 8, 8);
    for (int c = 0; c < s->n_classes; c++) {
        int bad = c == s->bad_class;
        int fields = s->class_fields ? s->class_fields : s->cov == 3 ? 9 : 7;
        msgpack_pack_array(&pk, (size_t)fields);
        msgpack_pack_uint64(&pk, (uint64_t)c);
        msgpack_pack_uint64(&pk, s->n_override && bad ? s->n_override : 10);
        msgpack_pack_uint64(&pk, (uint64_t)s->cov);
        msgpack_pack_uint64(&pk, k);
        for (size_t j = 0; j < k; j++) {
            uint64_t u;
            memcpy(&u, &s->w[j], 8);
            for (int b = 0; b < 8; b++)
                tmp[8 * j + (size_t)b] = (uint8_t)(u >> (8 * b));
        }
        msgpack_pack_bin_with_body(&pk, tmp, 8 * k);
        for (size_t i = 0; i < k * d; i++)
            put_num(tmp, i, bad && s->set_mean && i == (size_t)s->bad_comp * d + 1 ? s->mean_val : 0.5,
                    s->dtype);
        msgpack_pack_bin_with_body(&pk, tmp, k * d * es);
        size_t o = 0;
        for (size_t j = 0; j < k; j++) {
            if (s->cov == 0) {
                for (size_t r = 0; r < d; r++)
                    for (size_t q = 0; q <= r; q++, o++) {
                        double v = r == q ? 1.0 : 0.1;
                        if (bad && s->set_var && j == (size_t)s->bad_comp && r == 2 && q == 2)
                            v = s->var_val;
                        put_num(tmp, o, v, s->dtype);
                    }
            } else {
                for (size_t i = 0; i < m; i++, o++) {
                    double v = 1.0;
                    if (bad && s->set_var && j == (size_t)s->bad_comp && i == (s->cov == 2 ? 0u : 2u))
                        v = s->var_val;
                    put_num(tmp, o, v, s->dtype);
                }
            }
        }
        msgpack_pack_bin_with_body(&pk, tmp, k * m * es);
        if (fields >= 9) { /* rank, then loadings K×d×q */
            size_t q = (size_t)s->q_data;
            msgpack_pack_uint64(&pk, (uint64_t)s->q);
            for (size_t i = 0; i < k * d * q; i++) {
                double v = 0.25 * (double)(i % 5) - 0.5;
                if (bad && s->set_factor && i == (size_t)s->bad_comp * d * q + q)
                    v = s->factor_val;
                put_num(tmp, i, v, s->dtype);
            }
            msgpack_pack_bin_with_body(&pk, tmp, k * d * q * es);
        }
        for (int f = fields >= 9 ? 9 : 7; f < fields; f++) /* padding of a wrong field count */
            msgpack_pack_nil(&pk);
    }
    if (s->extra_field)
        msgpack_pack_nil(&pk);
    pft_free(tmp);
}

/* Decodes the envelope around the payload of spec; returns rc, message in pft_errmsg(). */
static int decode_spec(const spec_t *s, const pft_bundle_limits_t *lim)
{
    tbuf_t t = {0};
    build_payload(s, &t);
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_envelope_pack(t.buf, t.len, NULL, 0, &msg, &len) == 0);
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(msg, len, lim, &o);
    CHECK(rc == 0 || o == NULL);
    pft_bundle_destroy(&o);
    pft_free(msg);
    pft_free(t.buf);
    return rc;
}

#define EXPECT_REJECT(spec, lim, code, text)                                                                 \
    do {                                                                                                     \
        int rc_ = decode_spec(&(spec), (lim));                                                               \
        CHECK_MSG(rc_ == (code), "rc %s, expected %s (%s)", pft_errname(rc_), pft_errname(code),             \
                  pft_errmsg());                                                                             \
        CHECK_MSG(strstr(pft_errmsg(), (text)) != NULL, "message '%s' lacks '%s'", pft_errmsg(), (text));    \
    } while (0)

static void test_schema_rejections(void)
{
    spec_t s = good_spec();
    CHECK_MSG(decode_spec(&s, NULL) == 0, "the hand-built payload must decode: %s", pft_errmsg());
    for (int cov = 0; cov < 4; cov++)
        for (int dt = 0; dt < 2; dt++) {
            s = good_spec();
            s.cov = cov;
            s.dtype = dt;
            CHECK_MSG(decode_spec(&s, NULL) == 0, "cov %d dtype %d: %s", cov, dt, pft_errmsg());
        }

    s = good_spec();
    s.set_mean = 1;
    s.mean_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: mean[1] = nan is not finite");
    s = good_spec();
    s.set_mean = 1;
    s.mean_val = INFINITY;
    s.dtype = 0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "mean[1] = inf is not finite");
    s = good_spec();
    s.set_var = 1;
    s.var_val = -0.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -0 is not positive");
    s.var_val = -2.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -2 is not positive");
    s = good_spec();
    s.cov = 2;
    s.set_var = 1;
    s.var_val = -1e-3;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "component 1: variance[0] = -0.001 is not positive");
    s = good_spec();
    s.dtype = 0;
    s.set_var = 1;
    s.var_val = 1e-10; /* rounds to +0 in fp16 */
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "variance[2] = 0 is not positive");
    s = good_spec();
    s.cov = 0;
    s.set_var = 1;
    s.var_val = -0.5;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "component 1: cholesky[2][2] = -0.5 is not positive");
    s = good_spec();
    s.cov = 0;
    s.set_var = 1;
    s.var_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "cholesky[2][2] = nan is not finite");
    s = good_spec();
    s.w[0] = 0.3;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 0 (label 0): weights sum to 1.05");
    s = good_spec();
    s.w[0] = -0.25;
    s.w[1] = 1.25;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "weight[0] = -0.25 is negative");
    s = good_spec();
    s.w[0] = 0.25 + 1e-9; /* within tolerance: accepted and renormalised */
    CHECK(decode_spec(&s, NULL) == 0);
    s = good_spec();
    s.d = 4; /* header says 4, arrays built for 3 */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): means: 24 bytes, expected 32");
    s = good_spec();
    s.d_as_str = 1;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "d: expected non-negative integer, got str");
    s = good_spec();
    s.extra_field = 1;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "top level: 9 elements, expected 8..8");
    s = good_spec();
    s.n_override = 11;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 3 (label 3): n = 11 but provenance counts sum to 10");
    s = good_spec();
    s.k = 3;
    s.w[0] = 0.25, s.w[1] = 0.25, s.w[2] = 0.5;
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    lim.max_k = 2;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "K = 3 outside 1..2");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_classes = 3;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "counts: 4 elements, expected 1..3");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_d = 2;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "d = 3 outside 1..2");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_model_bytes = 200;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "decoded models would exceed");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_bytes = 100;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "exceeds the limit of 100");

    /* lowrank (cov 3): [..., Ψ, q, W] */
    s = good_spec();
    s.cov = 3;
    s.q = s.q_data = 2;
    CHECK_MSG(decode_spec(&s, NULL) == 0, "lowrank rank 2: %s", pft_errmsg());
    s.q = s.q_data = 0; /* rank 0: no loadings, a diagonal model */
    CHECK_MSG(decode_spec(&s, NULL) == 0, "lowrank rank 0: %s", pft_errmsg());
    s = good_spec();
    s.cov = 3;
    s.class_fields = 7;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT,
                  "class 0 (label 0): entry: 7 elements, expected 9 for covariance type 3");
    s = good_spec();
    s.class_fields = 9; /* a diag class with 9 fields */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 9 elements, expected 7 for covariance type 1");
    s = good_spec();
    s.class_fields = 8;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 8 elements, expected 7 for covariance type 1");
    s = good_spec();
    s.class_fields = 10;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 10 elements, expected 7..9");
    s = good_spec();
    s.cov = 4;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "covariance type = 4 outside 0..3");
    s = good_spec();
    s.cov = 3;
    s.q = s.q_data = 3; /* q = d */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): rank = 3 outside 0..2");
    s = good_spec();
    s.cov = 3;
    s.q = 2; /* loadings built for rank 1 */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): factors: 24 bytes, expected 48");
    s = good_spec();
    s.cov = 3;
    s.q = s.q_data = 2;
    s.set_factor = 1;
    s.factor_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: factor[1][0] = nan is not finite");
    s.dtype = 0;
    s.factor_val = 1e6; /* fp16 overflows to inf */
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "factor[1][0] = inf is not finite");
    s = good_spec();
    s.cov = 3;
    s.set_var = 1;
    s.var_val = -0.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -0 is not positive");
    s = good_spec();
    s.cov = 3;
    pft_bundle_limits_default(&lim);
    lim.max_model_bytes = 700; /* the diag classes fit (624 bytes with the last one's transient), the
                                * loadings do not */
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "decoded models would exceed");
    s.cov = 1;
    CHECK(decode_spec(&s, &lim) == 0);
}

static int decode_raw(const uint8_t *b, size_t n)
{
    uint8_t *copy = pft_alloc(n);
    memcpy(copy, b, n);
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(copy, n, NULL, &o);
    pft_bundle_destroy(&o);
    pft_free(copy);
    return rc;
}

/* Envelope-level and encoding-level attacks, hand-crafted bytes. */
static void test_raw_rejections(void)
{
    /* [ "PFTB", 1, bin32 of 0xfffffff0 bytes (absent), nil ]: no 4 GB allocation, a clear message */
    const uint8_t huge_bin[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc6, 0xff, 0xff, 0xff, 0xf0, 0xc0};
    CHECK(decode_raw(huge_bin, sizeof huge_bin) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "declared length 4294967280 exceeds") != NULL);
    /* an array32 of 2^32-1 elements in 5 bytes: msgpack-c alone would allocate ~100 GB for it */
    const uint8_t huge_arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
    CHECK(decode_raw(huge_arr, sizeof huge_arr) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "declared length 4294967295 exceeds") != NULL);
    /* the same inside a payload */
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_envelope_pack(huge_arr, sizeof huge_arr, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "payload") != NULL);
    PFT_FREE(msg);
    /* many tiny objects: capped before msgpack-c allocates its tree */
    size_t n = 3000000;
    uint8_t *many = pft_alloc(n + 5);
    many[0] = 0xdd;
    many[1] = (uint8_t)(n >> 24), many[2] = (uint8_t)(n >> 16), many[3] = (uint8_t)(n >> 8),
    many[4] = (uint8_t)n;
    memset(many + 5, 0x01, n);
    CHECK(pft_envelope_pack(many, n + 5, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_ERANGE);
    CHECK(strstr(pft_errmsg(), "more than 2097152 msgpack objects") != NULL);
    PFT_FREE(msg);
    pft_free(many);
    /* wrong magic, wrong version, payload of the wrong type, map, float, non-canonical int, trailing byte */
    const uint8_t magic[] = {0x94, 0xa4, 'P', 'F', 'T', 'X', 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(magic, sizeof magic) == PFT_EFORMAT && strstr(pft_errmsg(), "magic"));
    const uint8_t version[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x02, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(version, sizeof version) == PFT_EUNSUPPORTED && strstr(pft_errmsg(), "version 2"));
    const uint8_t payload_str[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xa1, 'x', 0xc0};
    CHECK(decode_raw(payload_str, sizeof payload_str) == PFT_EFORMAT &&
          strstr(pft_errmsg(), "payload: expected bin, got str"));
    const uint8_t map[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0x80, 0xc0};
    CHECK(decode_raw(map, sizeof map) == PFT_EFORMAT && strstr(pft_errmsg(), "map not allowed"));
    const uint8_t flt[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0xca, 0, 0, 0x80, 0x3f, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(flt, sizeof flt) == PFT_EFORMAT && strstr(pft_errmsg(), "float not allowed"));
    const uint8_t noncanon[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0xcc, 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(noncanon, sizeof noncanon) == PFT_EFORMAT && strstr(pft_errmsg(), "shortest form"));
    const uint8_t trailing[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc4, 0x00, 0xc0, 0x00};
    CHECK(decode_raw(trailing, sizeof trailing) == PFT_EFORMAT && strstr(pft_errmsg(), "trailing"));
    const uint8_t empty_payload[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(empty_payload, sizeof empty_payload) == PFT_EFORMAT);
    /* deep nesting: rejected by msgpack-c's stack limit, no recursion of ours */
    uint8_t deep[200];
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0xc0;
    CHECK(pft_envelope_pack(deep, sizeof deep, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_EFORMAT && strstr(pft_errmsg(), "nested deeper than 8"));
    PFT_FREE(msg);
    CHECK(decode_raw((const uint8_t *)"", 0) == PFT_EFORMAT);
}

/* Allocation failures at every point of a decode: an error, never a crash or a leak. */
static void test_alloc_failures(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    int ok_at = -1;
    for (long n = 0; n < 200; n++) {
        pft_alloc_fail_after(n);
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(buf, len, NULL, &o);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc < 0 && o == NULL));
        pft_bundle_destroy(&o);
        if (rc == 0) {
            ok_at = (int)n;
            break;
        }
    }
    CHECK(ok_at > 0);
    pft_free(buf);
}

/* Nodes may mix families: one bundle with diag, lowrank, full and spher classes (and lowrank of rank 0)
 * round-trips exactly; encoding refuses a loading that overflows fp16, naming it. */
static void test_lowrank_mixed(void)
{
    pft_rng_t *r = pft_rng_new(17);
    const pft_cov_t covs[5] = {PFT_COV_DIAG, PFT_COV_LOWRANK, PFT_COV_FULL, PFT_COV_SPHER, PFT_COV_LOWRANK};
    for (int ti = 0; ti < 2; ti++) {
        pft_dtype_t dt = ti ? PFT_DTYPE_F32 : PFT_DTYPE_F16;
        pft_bundle_t *b = pft_bundle_new("run-1", "node-b", dt, 7);
        size_t formula = 0;
        for (int c = 0; c < 5; c++) {
            pft_gmm_t *g = c == 4 ? pft_gmm_new_lowrank(2, 7, 0) : make_gmm(r, 1 + c % 3, 7, covs[c], 1);
            formula += pft_gmm_n_wire_params(g);
            CHECK(pft_bundle_add_class(b, c, 5, &g) == 0);
            CHECK(pft_bundle_prov_add(b, "node-b", c, 5) == 0);
        }
        CHECK(formula == (2 * 7 + 1) * 1 + (7 * 3 + 2 * 7 + 1) * 2 + (2 * 7 + 21 + 1) * 3 + (7 + 2) * 1 +
                             (2 * 7 + 1) * 2);
        CHECK(pft_bundle_formula_bytes(b) == formula * (ti ? 4 : 2));
        uint8_t *buf = NULL, *buf2 = NULL;
        size_t len = 0, len2 = 0;
        CHECK(pft_bundle_encode(b, &buf, &len) == 0);
        pft_bundle_t *o = NULL;
        CHECK_MSG(pft_bundle_decode(buf, len, NULL, &o) == 0, "%s", pft_errmsg());
        if (o) {
            for (int c = 0; c < 5; c++) {
                const pft_gmm_t *a = pft_bundle_class_gmm(b, c), *g = pft_bundle_class_gmm(o, c);
                CHECK(pft_gmm_cov(g) == covs[c] && pft_gmm_rank(g) == (c == 1 ? 3 : 0));
                CHECK_MSG(same_params(a, g, dt), "class %d (%s)", c, pft_cov_name(covs[c]));
            }
            CHECK(pft_bundle_encode(o, &buf2, &len2) == 0 && len2 == len && memcmp(buf, buf2, len) == 0);
        }
        pft_free(buf);
        pft_free(buf2);
        pft_bundle_destroy(&o);
        pft_bundle_destroy(&b);
    }
    /* d = 1: lowrank has rank 0 only */
    pft_bundle_t *b = pft_bundle_new("run-1", "p", PFT_DTYPE_F16, 1);
    pft_gmm_t *g = pft_gmm_new_lowrank(1, 1, 0);
    CHECK(pft_bundle_add_class(b, 0, 1, &g) == 0 && pft_bundle_prov_add(b, "p", 0, 1) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_encode(b, &buf, &len) == 0 && pft_bundle_decode(buf, len, NULL, &o) == 0);
    CHECK(o && pft_gmm_rank(pft_bundle_class_gmm(o, 0)) == 0);
    pft_free(buf);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    /* a loading beyond fp16 */
    b = pft_bundle_new("run-1", "p", PFT_DTYPE_F16, 4);
    g = pft_gmm_new_lowrank(1, 4, 2);
    double w = 1, mu[4] = {0}, fa[8] = {0, 0, 0, 0, 0, 7e4, 0, 0}, psi[4] = {1, 1, 1, 1};
    CHECK(pft_gmm_set_params_lowrank(g, &w, mu, fa, psi) == 0);
    CHECK(pft_bundle_add_class(b, 0, 1, &g) == 0 && pft_bundle_prov_add(b, "p", 0, 1) == 0);
    CHECK(pft_bundle_encode(b, &buf, &len) == PFT_ERANGE);
    CHECK_MSG(strstr(pft_errmsg(), "component 0: factor[2][1] = 70000 does not fit fp16") != NULL, "%s",
              pft_errmsg());
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* Bundles of the three original families encode to the same bytes as before the low-rank family was added
 * (ids computed with the v1 codec that predates it): old producers and new ones agree byte for byte. */
static void test_v1_golden(void)
{
    static const char *const expect[3][2] = {
        {"d8ca36e32fc662c24c3e2c699cc79649edf571098a690b66dd8e1122a1e026a6",
         "a1e4c4908ae81834de2192daa59e9e9d0d7eeeca580c96a48c2126e739dec66a"},
        {"d292ca1bbb6125fc5599bafadcba7b6e04b9925dded24d65bfc871b571619f1e",
         "d1074e7662f240a8b0341ce8f0c14eb21b374c11150c6224b29c487cb2d7b959"},
        {"5ce938b697a01738e99c01f7d51856229cb03537751d85d9267ad37ed61a2b6e",
         "1e9fbf4f478a0efdb119ab795d5fcf09ec1c1d06f8753cc7e66342b2c88bd88d"},
    };
    const pft_cov_t covs[3] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    for (int ci = 0; ci < 3; ci++)
        for (int ti = 0; ti < 2; ti++) {
            pft_bundle_t *b = make_bundle(ti ? PFT_DTYPE_F32 : PFT_DTYPE_F16, covs[ci], 5, 2, 3,
                                          900 + (uint64_t)(ci * 2 + ti), 0);
            uint8_t id[PFT_BUNDLE_ID_LEN];
            char hex[2 * PFT_BUNDLE_ID_LEN + 1];
            CHECK(pft_bundle_id(b, id) == 0);
            pft_bundle_id_hex(id, hex);
            CHECK_MSG(strcmp(hex, expect[ci][ti]) == 0, "%s %s: id %s", pft_cov_name(covs[ci]),
                      ti ? "fp32" : "fp16", hex);
            pft_bundle_destroy(&b);
        }
}

int main(void)
{
    RUN(test_roundtrip);
    RUN(test_signature_and_mutation);
    RUN(test_api_contracts);
    RUN(test_provenance_merge);
    RUN(test_size_formula);
    RUN(test_truncation);
    RUN(test_bit_flips);
    RUN(test_random_mutations);
    RUN(test_schema_rejections);
    RUN(test_raw_rejections);
    RUN(test_alloc_failures);
    RUN(test_v1_golden);
    RUN(test_lowrank_mixed);
    return pft_test_done();
}
