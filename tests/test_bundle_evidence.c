/* Tests of the shrinkage evidence carried per contributor in a bundle's provenance: round
 * trip to the bit, with and without a DP guarantee beside it, the bytes it costs, survival of merges and the
 * conflict of two different tallies for one node, refusal of bad values through the API and in the bytes. */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_test.h"

#include <math.h>

static pft_bundle_t *small_bundle(const char *producer)
{
    pft_bundle_t *b = pft_bundle_new("run", producer, PFT_DTYPE_F32, 2);
    pft_gmm_t *g = pft_gmm_new(1, 2, PFT_COV_DIAG);
    double w[1] = {1}, mu[2] = {0.5, -0.5}, var[2] = {0.1, 0.2};
    CHECK(pft_gmm_set_params(g, w, mu, var) == 0);
    CHECK(pft_bundle_add_class(b, 0, 30, &g) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 0, 10) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 0, 20) == 0);
    return b;
}

static const pft_bundle_tally_t k_t[3] = {
    {.alpha = 0.0, .correct = 0, .total = 0, .loss = 0},
    {.alpha = 0.1, .correct = 7, .total = 10, .loss = 4.25},
    {.alpha = 0.5, .correct = 9, .total = 10, .loss = 2.5},
};

static void test_round_trip(void)
{
    pft_bundle_t *b = small_bundle("b"), *d = NULL;
    uint8_t *plain = NULL, *buf = NULL, *buf2 = NULL;
    size_t pl = 0, len = 0, len2 = 0;
    CHECK(pft_bundle_encode(b, &plain, &pl) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "b", 30, k_t, 3) == 0);
    CHECK(pft_bundle_prov_set_dp(b, "a", 1.0, 1e-5) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "a", 10, k_t + 1, 2) == 0);
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    /* b: nil + bin(8 + 96) (1 + 2 + 104 bytes, the entry's header unchanged); a: dp bin(16) (18) and
     * bin(8 + 64) (2 + 72); and the payload's own bin header grows by one byte past 255 bytes */
    CHECK_MSG(len == pl + 1 + 2 + 104 + 18 + 2 + 72 + 1, "%zu bytes with evidence, %zu without", len, pl);
    CHECK(pft_bundle_decode(buf, len, NULL, &d) == 0);
    int m = 0;
    uint64_t against = 0;
    const pft_bundle_tally_t *t = d ? pft_bundle_prov_evidence(d, 1, &m, &against) : NULL; /* "b" */
    CHECK(t && m == 3 && against == 30 && memcmp(t, k_t, sizeof k_t) == 0);
    t = d ? pft_bundle_prov_evidence(d, 0, &m, &against) : NULL; /* "a": beside its DP guarantee */
    double eps = 0, delta = 0;
    CHECK(t && m == 2 && against == 10 && t[1].correct == 9 && pft_bundle_prov_dp(d, 0, &eps, &delta) &&
          eps == 1.0);
    CHECK(d && pft_bundle_encode(d, &buf2, &len2) == 0 && len2 == len && memcmp(buf, buf2, len) == 0);
    pft_free(plain);
    pft_free(buf);
    pft_free(buf2);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&d);
}

/* The encoded bundle with "b"'s evidence, and the offset of its bin's body. */
static uint8_t *encoded(size_t *len, size_t *at)
{
    pft_bundle_t *b = small_bundle("b");
    CHECK(pft_bundle_prov_set_evidence(b, "b", 30, k_t, 3) == 0);
    uint8_t *buf = NULL;
    CHECK(pft_bundle_encode(b, &buf, len) == 0);
    pft_bundle_destroy(&b);
    *at = 0;
    for (size_t i = 0; buf && i + 2 + 104 <= *len; i++)
        if (buf[i] == 0xc4 && buf[i + 1] == 104)
            *at = i + 2;
    CHECK(*at > 0);
    return buf;
}

static void expect_refused(uint8_t *buf, size_t len, const char *what)
{
    pft_bundle_t *bad = NULL;
    int rc = pft_bundle_decode(buf, len, NULL, &bad);
    CHECK_MSG(rc == PFT_EFORMAT && bad == NULL && strstr(pft_errmsg(), "evidence"), "%s: rc %d (%s)", what,
              rc, pft_errmsg());
    pft_bundle_destroy(&bad);
}

static void test_bytes_refused(void)
{
    size_t len, at;
    struct {
        size_t off; /* from the body's start */
        double v;
        const char *what;
    } f64[] = {{8 + 32 * 1, 1.5, "alpha above 1"},
               {8 + 32 * 2, 0.05, "alpha not ascending"},
               {8 + 32 * 1 + 24, -1, "negative loss"},
               {8 + 32 * 2 + 24, NAN, "NaN loss"}};
    for (size_t k = 0; k < sizeof f64 / sizeof f64[0]; k++) {
        uint8_t *buf = encoded(&len, &at);
        memcpy(buf + at + f64[k].off, &f64[k].v, 8); /* little-endian host */
        expect_refused(buf, len, f64[k].what);
        pft_free(buf);
    }
    struct {
        size_t off;
        uint64_t v;
        const char *what;
    } u64[] = {{0, 0, "against 0 rows"},
               {8 + 32 * 1 + 8, 11, "more right than scored"},
               {8 + 32 * 2 + 16, (1ULL << 48) + 1, "scored above 2^48"}};
    for (size_t k = 0; k < sizeof u64 / sizeof u64[0]; k++) {
        uint8_t *buf = encoded(&len, &at);
        memcpy(buf + at + u64[k].off, &u64[k].v, 8);
        expect_refused(buf, len, u64[k].what);
        pft_free(buf);
    }
    uint8_t *buf = encoded(&len, &at);
    buf[at - 1] = 103; /* a length that is not 8 + 32 m: the rest no longer parses as the bundle either */
    pft_bundle_t *bad = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &bad) != 0 && bad == NULL);
    pft_free(buf);
}

static void test_merge_and_api(void)
{
    pft_bundle_t *x = small_bundle("x"), *y = small_bundle("y"), *z = small_bundle("z");
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, 3) == 0);
    CHECK(pft_bundle_prov_merge(z, x) == 0); /* the evidence travels */
    int m = 0;
    uint64_t against = 0;
    CHECK(pft_bundle_prov_evidence(z, 0, &m, &against) && m == 3 && against == 10);
    CHECK(pft_bundle_prov_merge(z, x) == 0); /* the same evidence again (a diamond) */
    CHECK(pft_bundle_prov_set_evidence(y, "a", 11, k_t, 3) == 0);
    CHECK(pft_bundle_prov_merge(z, y) == PFT_EINVAL); /* other evidence for the same node */
    CHECK(pft_bundle_prov_evidence(z, 0, &m, &against) && against == 10);
    pft_bundle_tally_t t[3];
    memcpy(t, k_t, sizeof t);
    CHECK(pft_bundle_prov_set_evidence(x, "nobody", 10, k_t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 0, k_t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, 0) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, PFT_BUNDLE_MAX_TALLIES + 1) == PFT_EINVAL);
    t[1].correct = 11;
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, t, 3) == PFT_EINVAL);
    t[1].correct = 7;
    t[2].alpha = 0.1;
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_evidence(x, 1, &m, &against) == NULL && m == 0 && against == 0); /* "b": none */
    pft_bundle_destroy(&x);
    pft_bundle_destroy(&y);
    pft_bundle_destroy(&z);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_bytes_refused);
    RUN(test_merge_and_api);
    return pft_test_done();
}
