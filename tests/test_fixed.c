/* Tests of pft_fixed: fixed-point statistics mod 2^64 (round trips, sums, the overflow bound, refusals). */
#include <float.h>
#include <stdint.h>

#include "pft_error.h"
#include "pft_fixed.h"
#include "pft_test.h"

#define EPS_ROUND (1.0 / 8589934592.0) /* 2^-(f+1) = 2^-33: rounding per entry and contribution */

static uint64_t s_state = 0x9e3779b97f4a7c15u;

/* splitmix64: the tests' own generator, independent of the code under test. */
static uint64_t next64(void)
{
    uint64_t z = (s_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static double unit(void)
{
    return (double)(next64() >> 11) / 4503599627370496.0 - 1.0;
}

static void test_round_trip(void)
{
    enum { N = 4000 };
    static double v[N], back[N];
    static uint64_t w[N];
    /* magnitudes from 1e-12 up to 2^31 - 1, both signs */
    for (int i = 0; i < N; i++)
        v[i] = unit() * pow(2.0, (double)(i % 32)) * (i % 7 == 0 ? 1e-9 : 1.0);
    v[0] = 0.0;
    v[1] = PFT_FIXED_TOTAL_MAX;
    v[2] = -PFT_FIXED_TOTAL_MAX;
    v[3] = EPS_ROUND; /* a tie: rounds away from zero to 2^-32 */
    CHECK(pft_fixed_encode(v, N, PFT_FIXED_TOTAL_MAX, w) == 0);
    CHECK(pft_fixed_decode(w, N, PFT_FIXED_TOTAL_MAX, back) == 0);
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double err = fabs(back[i] - v[i]), allowed = EPS_ROUND + fabs(v[i]) * DBL_EPSILON / 2;
        CHECK_MSG(err <= allowed, "v[%d] = %.17g back %.17g err %.3g", i, v[i], back[i], err);
        if (fabs(v[i]) < 1.0 && err > worst)
            worst = err;
    }
    CHECK(worst <= EPS_ROUND);
    CHECK(w[0] == 0);
    CHECK(back[1] == PFT_FIXED_TOTAL_MAX && back[2] == -PFT_FIXED_TOTAL_MAX);
    CHECK(w[3] == 1);
    /* two's complement: -1 is all ones, -2^-32 the word 2^64 - 1 */
    double m = -1.0 / PFT_FIXED_SCALE, one = 1.0;
    uint64_t wm, w1;
    CHECK(pft_fixed_encode(&m, 1, 1.0, &wm) == 0 && wm == UINT64_MAX);
    CHECK(pft_fixed_encode(&one, 1, 1.0, &w1) == 0 && w1 == (UINT64_C(1) << 32));
}

/* k contributions of n entries, each of r rows' worth (|v| <= r), summed in the ring; the decoded sum equals
 * the sum of the values within k rounding steps (plus the double's own rounding), and equals bit for bit the
 * sum of the rounded integers computed in 128-bit arithmetic (the oracle). */
static void sum_case(int k, int n, double r)
{
    double *v = malloc(sizeof *v * (size_t)n), *sum = calloc((size_t)n, sizeof *sum);
    double *dec = malloc(sizeof *dec * (size_t)n);
    uint64_t *w = malloc(sizeof *w * (size_t)n), *acc = calloc((size_t)n, sizeof *acc);
    __int128 *oracle = calloc((size_t)n, sizeof *oracle);
    double *lim = malloc(sizeof *lim * (size_t)k);
    for (int c = 0; c < k; c++) {
        for (int j = 0; j < n; j++) {
            v[j] = r * unit();
            sum[j] += v[j];
            oracle[j] += (__int128)llround(v[j] * PFT_FIXED_SCALE);
        }
        lim[c] = r;
        CHECK(pft_fixed_encode(v, (size_t)n, r, w) == 0);
        pft_fixed_add(acc, w, (size_t)n);
    }
    CHECK(pft_fixed_check_total(lim, NULL, (size_t)k) == 0);
    CHECK(pft_fixed_decode(acc, (size_t)n, r * k, dec) == 0);
    for (int j = 0; j < n; j++) {
        CHECK_MSG(fabs(dec[j] - sum[j]) <= k * EPS_ROUND + fabs(sum[j]) * 4 * DBL_EPSILON + r * k * 1e-15,
                  "k %d entry %d: %.17g vs %.17g", k, j, dec[j], sum[j]);
        CHECK((int64_t)acc[j] == (int64_t)oracle[j]);
    }
    free(v);
    free(sum);
    free(dec);
    free(w);
    free(acc);
    free(oracle);
    free(lim);
}

static void test_sums(void)
{
    sum_case(2, 100, 1.0);
    sum_case(50, 500, 160.0);     /* star50-like: clients of ~160 rows */
    sum_case(1000, 64, 1000.0);   /* a million rows in all */
    sum_case(64, 64, 16777215.0); /* 64 · (2^24 - 1) < 2^31 - 1: near the top of the range */
}

/* Masks cancel exactly: words + random masks that sum to 0 give back the clear words. */
static void test_masked_sum(void)
{
    enum { K = 7, N = 300 };
    static uint64_t w[K][N], m[K][N], acc[N], clear[N];
    for (int j = 0; j < N; j++) {
        uint64_t total = 0;
        for (int c = 0; c < K; c++) {
            double v = 10.0 * unit();
            CHECK(pft_fixed_encode(&v, 1, 10.0, &w[c][j]) == 0);
            clear[j] += w[c][j];
            m[c][j] = c < K - 1 ? next64() : (uint64_t)0 - total;
            total += m[c][j];
        }
    }
    for (int c = 0; c < K; c++) {
        pft_fixed_add(w[c], m[c], N);
        pft_fixed_add(acc, w[c], N);
    }
    CHECK(memcmp(acc, clear, sizeof acc) == 0);
    pft_fixed_sub(acc, w[0], N); /* taking one contribution back out */
    pft_fixed_add(acc, m[0], N);
    for (int j = 0; j < N; j++)
        CHECK(acc[j] == clear[j] - (w[0][j] - m[0][j]));
}

static void test_refusals(void)
{
    double bad[] = {NAN, INFINITY, -INFINITY};
    uint64_t w;
    for (int i = 0; i < 3; i++) {
        CHECK(pft_fixed_encode(&bad[i], 1, 10.0, &w) == PFT_EINVAL);
        CHECK(strstr(pft_errmsg(), "not finite") != NULL);
    }
    double over = nextafter(10.0, 11.0), at = 10.0, neg = -nextafter(10.0, 11.0);
    CHECK(pft_fixed_encode(&at, 1, 10.0, &w) == 0);
    CHECK(pft_fixed_encode(&over, 1, 10.0, &w) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "beyond the contribution's bound") != NULL);
    CHECK(pft_fixed_encode(&neg, 1, 10.0, &w) == PFT_EINVAL);
    /* the limit itself */
    CHECK(pft_fixed_encode(&at, 1, PFT_FIXED_TOTAL_MAX + 1.0, &w) == PFT_EINVAL);
    CHECK(pft_fixed_encode(&at, 1, -1.0, &w) == PFT_EINVAL);
    CHECK(pft_fixed_encode(&at, 1, NAN, &w) == PFT_EINVAL);
    double out;
    CHECK(pft_fixed_decode(&w, 1, NAN, &out) == PFT_EINVAL);
    /* the second of three values is refused, named */
    double three[] = {1.0, NAN, 2.0};
    uint64_t w3[3];
    CHECK(pft_fixed_encode(three, 3, 5.0, w3) == PFT_EINVAL && strstr(pft_errmsg(), "value 1 ") != NULL);
    CHECK(isnan(pft_fixed_limit(5, -1.0)) && isnan(pft_fixed_limit(5, NAN)));
    CHECK(pft_fixed_limit(100, 1.5) == 196.0);
}

/* The bound is exact: 2^31 - 1 in total decodes; two contributions at the top of the range wrap (a silent
 * wrong value), which is what pft_fixed_check_total refuses. */
static void test_bound(void)
{
    double half = 1073741824.0, rest = 1073741823.0; /* 2^30 and 2^30 - 1 */
    uint64_t a, b, acc = 0;
    double out;
    CHECK(pft_fixed_encode(&half, 1, half, &a) == 0 && pft_fixed_encode(&rest, 1, rest, &b) == 0);
    acc = a + b;
    CHECK(pft_fixed_decode(&acc, 1, PFT_FIXED_TOTAL_MAX, &out) == 0 && out == PFT_FIXED_TOTAL_MAX);
    double nh = -half, nr = -rest;
    CHECK(pft_fixed_encode(&nh, 1, half, &a) == 0 && pft_fixed_encode(&nr, 1, rest, &b) == 0);
    acc = a + b;
    CHECK(pft_fixed_decode(&acc, 1, PFT_FIXED_TOTAL_MAX, &out) == 0 && out == -PFT_FIXED_TOTAL_MAX);
    double lim_ok[] = {half, rest}, lim_bad[] = {half, half};
    CHECK(pft_fixed_check_total(lim_ok, NULL, 2) == 0);
    CHECK(pft_fixed_check_total(lim_bad, NULL, 2) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "could overflow") != NULL);
    /* without the check: 2 · (2^31 - 1) wraps to -2 */
    double top = PFT_FIXED_TOTAL_MAX;
    CHECK(pft_fixed_encode(&top, 1, top, &a) == 0);
    acc = a + a;
    CHECK(pft_fixed_decode(&acc, 1, PFT_FIXED_TOTAL_MAX, &out) == 0 && out == -2.0);
    /* rows: 2^30 in total is the most */
    uint64_t rows_ok[] = {PFT_FIXED_MAX_ROWS - 5, 5}, rows_bad[] = {PFT_FIXED_MAX_ROWS, 1};
    double small[] = {1.0, 1.0};
    CHECK(pft_fixed_check_total(small, rows_ok, 2) == 0);
    CHECK(pft_fixed_check_total(small, rows_bad, 2) == PFT_EINVAL && strstr(pft_errmsg(), "rows") != NULL);
    CHECK(pft_fixed_check_total(small, NULL, (size_t)PFT_FIXED_MAX_PARTS + 1) == PFT_EINVAL); /* k first */
    double nan_lim[] = {1.0, NAN};
    CHECK(pft_fixed_check_total(nan_lim, NULL, 2) == PFT_EINVAL);
    /* a topology of 2^30 rows whose noise allowances fill the rest of the range exactly */
    double lim[2] = {pft_fixed_limit(PFT_FIXED_MAX_ROWS / 2, 0.0),
                     pft_fixed_limit(PFT_FIXED_MAX_ROWS / 2, rest / PFT_FIXED_NOISE_SDS)};
    uint64_t rows[2] = {PFT_FIXED_MAX_ROWS / 2, PFT_FIXED_MAX_ROWS / 2};
    CHECK(lim[0] + lim[1] == PFT_FIXED_TOTAL_MAX);
    CHECK(pft_fixed_check_total(lim, rows, 2) == 0);
    lim[1] = pft_fixed_limit(PFT_FIXED_MAX_ROWS / 2, half / PFT_FIXED_NOISE_SDS); /* one more */
    CHECK(pft_fixed_check_total(lim, rows, 2) == PFT_EINVAL);
}

/* A word that still carries a mask lands outside a small aggregate's bound almost surely. */
static void test_decode_detects_masks(void)
{
    int accepted = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t w = next64();
        double out;
        int rc = pft_fixed_decode(&w, 1, 8000.0, &out);
        CHECK(rc == 0 || rc == PFT_ERANGE);
        accepted += rc == 0;
    }
    /* each is accepted with probability 8000 · 2^33 / 2^64 ≈ 3.7e-6 */
    CHECK_MSG(accepted <= 1, "%d of 10000 uniform words accepted", accepted);
}

static void test_counts(void)
{
    uint64_t w, c, acc = 0;
    CHECK(pft_fixed_encode_count(PFT_FIXED_MAX_COUNT, &w) == 0 && w == PFT_FIXED_MAX_COUNT);
    CHECK(pft_fixed_encode_count(PFT_FIXED_MAX_COUNT + 1, &w) == PFT_EINVAL);
    uint64_t total = 0;
    for (uint64_t i = 1; i <= 50; i++) {
        CHECK(pft_fixed_encode_count(i * 37, &w) == 0);
        acc += w;
        total += i * 37;
    }
    uint64_t mask = next64();
    acc += mask; /* masked: refused */
    CHECK(pft_fixed_decode_count(acc, 100000, &c) == PFT_ERANGE);
    acc -= mask;
    CHECK(pft_fixed_decode_count(acc, 100000, &c) == 0 && c == total);
    CHECK(pft_fixed_decode_count(acc, total - 1, &c) == PFT_ERANGE);
    CHECK(pft_fixed_decode_count(UINT64_MAX, UINT64_MAX, &c) == PFT_ERANGE); /* -1, and above 2^48 */
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_sums);
    RUN(test_masked_sum);
    RUN(test_refusals);
    RUN(test_bound);
    RUN(test_decode_detects_masks);
    RUN(test_counts);
    return pft_test_done();
}
