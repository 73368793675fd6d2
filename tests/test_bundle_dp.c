/* Tests of the DP guarantee carried per contributor in a bundle's provenance. */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_test.h"

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

static void test_round_trip(void)
{
    pft_bundle_t *b = small_bundle("b"), *d = NULL;
    CHECK(pft_bundle_prov_set_dp(b, "a", 1.5, 1e-5) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    CHECK(pft_bundle_decode(buf, len, NULL, &d) == 0);
    double eps = 0, delta = 0;
    CHECK(d && pft_bundle_prov_dp(d, 0, &eps, &delta) == 1 && eps == 1.5 && delta == 1e-5);
    CHECK(d && pft_bundle_prov_dp(d, 1, &eps, &delta) == 0 && eps == 0);
    /* re-encoding the decoded bundle gives the same bytes */
    uint8_t *buf2 = NULL;
    size_t len2 = 0;
    CHECK(d && pft_bundle_encode(d, &buf2, &len2) == 0 && len2 == len && memcmp(buf, buf2, len) == 0);
    /* a bundle without guarantees is unchanged by the feature: 16 bytes + 1 header byte + 1 array byte less */
    pft_bundle_t *plain = small_bundle("b");
    uint8_t *pb = NULL;
    size_t pl = 0;
    CHECK(pft_bundle_encode(plain, &pb, &pl) == 0 && pl + 18 == len);
    pft_free(pb);
    pft_bundle_destroy(&plain);

    /* an out-of-range epsilon in the bytes is rejected */
    size_t at = 0;
    for (size_t i = 0; i + 18 <= len; i++)
        if (buf[i] == 0xc4 && buf[i + 1] == 16) {
            double e;
            memcpy(&e, buf + i + 2, 8); /* little-endian host */
            if (e == 1.5)
                at = i + 2;
        }
    CHECK(at > 0);
    double neg = -1.0;
    memcpy(buf + at, &neg, 8);
    pft_bundle_t *bad = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &bad) == PFT_EFORMAT && bad == NULL);
    CHECK(strstr(pft_errmsg(), "dp guarantee") != NULL);
    pft_free(buf);
    pft_free(buf2);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&d);
}

static void test_merge_and_errors(void)
{
    pft_bundle_t *x = small_bundle("x"), *y = small_bundle("y"), *z = small_bundle("z");
    CHECK(pft_bundle_prov_set_dp(x, "a", 1.0, 0.01) == 0);
    CHECK(pft_bundle_prov_merge(z, x) == 0); /* the guarantee travels */
    double eps, delta;
    CHECK(pft_bundle_prov_dp(z, 0, &eps, &delta) == 1 && eps == 1.0);
    CHECK(pft_bundle_prov_set_dp(y, "a", 2.0, 0.01) == 0);
    CHECK(pft_bundle_prov_merge(z, y) == PFT_EINVAL); /* a different guarantee for the same node */
    CHECK(pft_bundle_prov_dp(z, 0, &eps, &delta) == 1 && eps == 1.0); /* z unaltered */
    CHECK(pft_bundle_prov_set_dp(x, "nobody", 1.0, 0.0) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_dp(x, "a", 0.0, 0.0) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_dp(x, "a", 1.0, 2.0) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_dp(x, "a", NAN, 0.0) == PFT_EINVAL);
    pft_bundle_destroy(&x);
    pft_bundle_destroy(&y);
    pft_bundle_destroy(&z);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_merge_and_errors);
    return pft_test_done();
}
