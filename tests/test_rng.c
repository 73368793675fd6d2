/* Tests of pft_rng (determinism, moments) and pft_error (table, context messages). */
#include "pft_error.h"
#include "pft_rng.h"
#include "pft_test.h"

static void test_same_seed_same_stream(void)
{
    pft_rng_t *a = pft_rng_new(42), *b = pft_rng_new(42), *c = pft_rng_new(43);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = pft_rng_u64(a), y = pft_rng_u64(b), z = pft_rng_u64(c);
        same &= x == y;
        differ |= x != z;
    }
    CHECK(same);
    CHECK(differ);
    pft_rng_destroy(&a);
    pft_rng_destroy(&b);
    pft_rng_destroy(&c);
    CHECK(a == NULL);
    pft_rng_destroy(&a); /* safe twice */
}

static void test_normal_moments(void)
{
    pft_rng_t *r = pft_rng_new(7);
    const int n = 400000;
    double s = 0, s2 = 0, s4 = 0;
    for (int i = 0; i < n; i++) {
        double z = pft_rng_normal(r);
        s += z;
        s2 += z * z;
        s4 += z * z * z * z;
    }
    CHECK_NEAR(s / n, 0.0, 0.01);
    CHECK_NEAR(s2 / n, 1.0, 0.01);
    CHECK_NEAR(s4 / n, 3.0, 0.05); /* kurtosis of a Gaussian */
    pft_rng_destroy(&r);
}

static void test_uniform_and_below(void)
{
    pft_rng_t *r = pft_rng_new(1);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        double u = pft_rng_uniform(r);
        CHECK(u >= 0.0 && u < 1.0);
        counts[pft_rng_below(r, 7)]++;
    }
    for (int i = 0; i < 7; i++)
        CHECK(counts[i] > 9500 && counts[i] < 10500);
    pft_rng_destroy(&r);
}

static void test_derive_distinct(void)
{
    CHECK(pft_rng_derive(0, 1, 2) != pft_rng_derive(0, 2, 1));
    CHECK(pft_rng_derive(0, 1, 2) == pft_rng_derive(0, 1, 2));
    CHECK(pft_rng_derive(0, 1, 2) != pft_rng_derive(1, 1, 2));
}

static void test_gamma_and_shuffle(void)
{
    pft_rng_t *r = pft_rng_new(3);
    const double shapes[] = {0.1, 0.5, 1.0, 2.5, 10.0};
    for (int s = 0; s < 5; s++) {
        double m = 0, v = 0;
        const int n = 200000;
        for (int i = 0; i < n; i++) {
            double g = pft_rng_gamma(r, shapes[s]);
            CHECK(g >= 0 && isfinite(g));
            m += g;
            v += g * g;
        }
        m /= n;
        v = v / n - m * m;
        CHECK_NEAR(m, shapes[s], 0.03 * shapes[s] + 0.005); /* mean = shape */
        CHECK_NEAR(v, shapes[s], 0.06 * shapes[s] + 0.01); /* variance = shape */
    }
    int32_t idx[100];
    int sum = 0, moved = 0;
    for (int i = 0; i < 100; i++)
        idx[i] = i;
    pft_rng_shuffle(r, idx, 100);
    int seen[100] = {0};
    for (int i = 0; i < 100; i++) {
        seen[idx[i]]++;
        sum += idx[i];
        moved += idx[i] != i;
    }
    for (int i = 0; i < 100; i++)
        CHECK(seen[i] == 1);
    CHECK(sum == 4950);
    CHECK(moved > 80);
    pft_rng_destroy(&r);
}

static void test_error_messages(void)
{
    CHECK(strcmp(pft_strerror(PFT_EFORMAT), "malformed input") == 0);
    CHECK(strcmp(pft_errname(PFT_ENOMEM), "PFT_ENOMEM") == 0);
    CHECK(strcmp(pft_strerror(-999), "unknown error") == 0);
    int rc = pft_err(PFT_EIO, "reading %s", "x.npy");
    CHECK(rc == PFT_EIO);
    rc = pft_err_wrap(rc, "node %s", "a");
    CHECK(rc == PFT_EIO);
    CHECK(strcmp(pft_errmsg(), "node a: reading x.npy") == 0);
    pft_err_clear();
    CHECK(strcmp(pft_errmsg(), "success") == 0);
}

int main(void)
{
    RUN(test_same_seed_same_stream);
    RUN(test_normal_moments);
    RUN(test_uniform_and_below);
    RUN(test_derive_distinct);
    RUN(test_gamma_and_shuffle);
    RUN(test_error_messages);
    return pft_test_done();
}
