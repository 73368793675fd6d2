/* Tests of pft_shamir: reconstruction from any t shares, failure from t - 1 (and that t - 1 shares fit every
 * secret), malformed and inconsistent shares refused, the split rebuilt from its coins. */
#include <sodium.h>
#include <stdint.h>

#include "pft_error.h"
#include "pft_shamir.h"
#include "pft_test.h"

#define P PFT_SHAMIR_P
#define MAXN 64

typedef uint8_t share_t[PFT_SHAMIR_SHARE_LEN];

/* An independent field: products reduced with % (the module uses the Mersenne shift). */
static uint64_t mulp(uint64_t a, uint64_t b)
{
    return (uint64_t)(((unsigned __int128)a * b) % P);
}

static uint64_t powp(uint64_t a, uint64_t e)
{
    uint64_t r = 1;
    for (; e; e >>= 1, a = mulp(a, a))
        if (e & 1)
            r = mulp(r, a);
    return r;
}

static uint64_t y_of(const share_t s, int e)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | s[8 + 8 * e + i];
    return v;
}

static void set64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void coins_of(int k, uint8_t coins[PFT_SHAMIR_COINS_LEN])
{
    memset(coins, 0, PFT_SHAMIR_COINS_LEN);
    coins[0] = (uint8_t)k;
    coins[1] = (uint8_t)(k >> 8);
    coins[31] = 0xa5;
}

static int same_secret(const pft_shamir_secret_t *a, const pft_shamir_secret_t *b)
{
    return memcmp(a->e, b->e, sizeof a->e) == 0;
}

/* every t-subset of a 3-of-5 split, and random t- and (t + 5)-subsets of 26-of-50 in random order, rebuild
 * the secret; the elements are in the field and not all zero */
static void test_any_t_shares(void)
{
    uint8_t coins[PFT_SHAMIR_COINS_LEN];
    share_t sh[MAXN], pick[MAXN];
    pft_shamir_secret_t s, r;
    coins_of(1, coins);
    CHECK(pft_shamir_split(coins, 3, 5, &s, sh) == 0);
    for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
        CHECK(s.e[e] < P);
    CHECK(s.e[0] | s.e[1]);
    int subsets = 0;
    for (int m = 0; m < 32; m++) {
        if (__builtin_popcount((unsigned)m) != 3)
            continue;
        int k = 0;
        for (int i = 4; i >= 0; i--) /* reversed order */
            if (m >> i & 1)
                memcpy(pick[k++], sh[i], sizeof(share_t));
        memset(&r, 0, sizeof r);
        CHECK(pft_shamir_combine((const share_t *)pick, 3, 3, &r) == 0);
        CHECK(same_secret(&r, &s));
        subsets++;
    }
    CHECK(subsets == 10);
    coins_of(2, coins);
    CHECK(pft_shamir_split(coins, 26, 50, &s, sh) == 0);
    for (int trial = 0; trial < 20; trial++) {
        int idx[50];
        for (int i = 0; i < 50; i++)
            idx[i] = i;
        for (int i = 49; i > 0; i--) { /* Fisher-Yates with libsodium's uniform draw */
            int j = (int)randombytes_uniform((uint32_t)i + 1), tmp = idx[i];
            idx[i] = idx[j], idx[j] = tmp;
        }
        int k = trial % 2 ? 26 : 31;
        for (int i = 0; i < k; i++)
            memcpy(pick[i], sh[idx[i]], sizeof(share_t));
        CHECK(pft_shamir_combine((const share_t *)pick, (size_t)k, 26, &r) == 0 && same_secret(&r, &s));
    }
    /* t = 1: every share is the secret; t = n: all are needed */
    CHECK(pft_shamir_split(coins, 1, 4, &s, sh) == 0);
    CHECK(pft_shamir_combine((const share_t *)sh + 2, 1, 1, &r) == 0 && same_secret(&r, &s));
    CHECK(y_of(sh[3], 4) == s.e[4]);
    CHECK(pft_shamir_split(coins, 4, 4, &s, sh) == 0);
    CHECK(pft_shamir_combine((const share_t *)sh, 4, 4, &r) == 0 && same_secret(&r, &s));
}

/* coefficients a_1..a_{t-1} of the polynomial of degree ≤ t - 1 through (0, b) and (x_i, y_i), i < t - 1, by
 * expanding its Lagrange form (an oracle of this test's own) */
static void fit(uint64_t b, const uint64_t *x, const uint64_t *y, int t, uint64_t *a)
{
    uint64_t xs[MAXN + 1], ys[MAXN + 1], poly[MAXN + 1], acc[MAXN + 1] = {0};
    xs[0] = 0, ys[0] = b;
    for (int i = 0; i < t - 1; i++)
        xs[i + 1] = x[i], ys[i + 1] = y[i];
    for (int i = 0; i < t; i++) {
        memset(poly, 0, sizeof poly);
        poly[0] = 1;
        uint64_t den = 1;
        int deg = 0;
        for (int j = 0; j < t; j++) {
            if (j == i)
                continue;
            for (int d = deg + 1; d >= 0; d--) /* poly *= (x - x_j) */
                poly[d] = ((d ? poly[d - 1] : 0) + mulp(poly[d], P - xs[j])) % P;
            deg++;
            den = mulp(den, (xs[i] + P - xs[j]) % P);
        }
        uint64_t c = mulp(ys[i], powp(den, P - 2));
        for (int d = 0; d < t; d++)
            acc[d] = (acc[d] + mulp(c, poly[d])) % P;
    }
    CHECK(acc[0] == b);
    for (int j = 1; j < t; j++)
        a[j - 1] = acc[j];
}

/* t - 1 shares do not open: combine refuses, and for any other secret B some polynomial with constant B
 * passes through exactly those shares (so they are consistent with every secret: information-theoretic) */
static void test_t_minus_one(void)
{
    uint8_t coins[PFT_SHAMIR_COINS_LEN];
    share_t sh[MAXN], other[MAXN];
    pft_shamir_secret_t s, r, b;
    const int n = 7, t = 4;
    coins_of(3, coins);
    CHECK(pft_shamir_split(coins, (size_t)t, (size_t)n, &s, sh) == 0);
    memset(&r, 0x77, sizeof r);
    CHECK(pft_shamir_combine((const share_t *)sh, (size_t)t - 1, (size_t)t, &r) == PFT_EINVAL);
    CHECK(r.e[0] == 0x7777777777777777u); /* unchanged */
    const int pick[3] = {1, 4, 6};
    for (int trial = 0; trial < 4; trial++) {
        for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
            b.e[e] = trial == 0 ? 0 : trial == 1 ? P - 1 : (s.e[e] + 12345u * (uint64_t)trial) % P;
        uint64_t coef[(MAXN)*PFT_SHAMIR_ELEMS];
        for (int e = 0; e < PFT_SHAMIR_ELEMS; e++) {
            uint64_t x[3], y[3], a[3];
            for (int i = 0; i < t - 1; i++)
                x[i] = (uint64_t)pick[i] + 1, y[i] = y_of(sh[pick[i]], e);
            fit(b.e[e], x, y, t, a);
            for (int j = 1; j < t; j++)
                coef[(j - 1) * PFT_SHAMIR_ELEMS + e] = a[j - 1];
        }
        CHECK(pft_shamir_split_with(&b, coef, (size_t)t, (size_t)n, other) == 0);
        for (int i = 0; i < t - 1; i++)
            CHECK(memcmp(other[pick[i]], sh[pick[i]], sizeof(share_t)) == 0);
        CHECK(pft_shamir_combine((const share_t *)other, (size_t)t, (size_t)t, &r) == 0 &&
              same_secret(&r, &b));
    }
}

/* malformed shares, two at one x, and a share off the polynomial (with more than t) are refused */
static void test_malformed(void)
{
    uint8_t coins[PFT_SHAMIR_COINS_LEN];
    share_t sh[MAXN], bad[MAXN];
    pft_shamir_secret_t s, r;
    coins_of(4, coins);
    CHECK(pft_shamir_split(coins, 3, 6, &s, sh) == 0);
    memcpy(bad, sh, sizeof(share_t) * 6);
    set64(bad[0], 0); /* x = 0: the secret's own point */
    CHECK(pft_shamir_combine((const share_t *)bad, 3, 3, &r) == PFT_EINVAL);
    CHECK(pft_shamir_share_x(bad[0]) == 0);
    set64(bad[0], PFT_SHAMIR_MAX_N + 1);
    CHECK(pft_shamir_combine((const share_t *)bad, 3, 3, &r) == PFT_EINVAL);
    memcpy(bad[0], sh[0], sizeof(share_t));
    set64(bad[0] + 8 + 8 * 2, P); /* an element out of the field */
    CHECK(pft_shamir_combine((const share_t *)bad, 3, 3, &r) == PFT_EINVAL);
    memcpy(bad[0], sh[0], sizeof(share_t));
    memcpy(bad[1], sh[0], sizeof(share_t)); /* the same point twice */
    CHECK(pft_shamir_combine((const share_t *)bad, 3, 3, &r) == PFT_EINVAL);
    memcpy(bad[1], sh[1], sizeof(share_t));
    bad[4][8 + 3] ^= 1; /* a lying share among 5 > t: found */
    CHECK(pft_shamir_combine((const share_t *)bad, 5, 3, &r) == PFT_EINVAL);
    CHECK(pft_shamir_combine((const share_t *)bad, 3, 3, &r) == 0 && same_secret(&r, &s)); /* not used */
    /* among exactly t shares a lie cannot be seen: the secret comes out wrong (the opener's decode bound
     * catches that: docs/SECAGG.md §5) */
    CHECK(pft_shamir_combine((const share_t *)bad + 2, 3, 3, &r) == 0 && !same_secret(&r, &s));
    CHECK(pft_shamir_split(coins, 0, 6, &s, sh) == PFT_EINVAL);
    CHECK(pft_shamir_split(coins, 7, 6, &s, sh) == PFT_EINVAL);
    CHECK(pft_shamir_combine((const share_t *)sh, 3, 0, &r) == PFT_EINVAL);
}

/* the same coins give the same split (a restart rebuilds it), other coins another; the seed hashes the secret
 */
static void test_coins_and_seed(void)
{
    uint8_t coins[PFT_SHAMIR_COINS_LEN], s1[32], s2[32];
    share_t a[8], b[8];
    pft_shamir_secret_t x, y;
    coins_of(5, coins);
    CHECK(pft_shamir_split(coins, 3, 8, &x, a) == 0 && pft_shamir_split(coins, 3, 8, &y, b) == 0);
    CHECK(same_secret(&x, &y) && memcmp(a, b, sizeof a) == 0);
    coins_of(6, coins);
    CHECK(pft_shamir_split(coins, 3, 8, &y, b) == 0);
    CHECK(!same_secret(&x, &y) && memcmp(a[0], b[0], sizeof a[0]) != 0);
    pft_shamir_seed(&x, s1);
    pft_shamir_seed(&y, s2);
    CHECK(memcmp(s1, s2, 32) != 0);
    pft_shamir_seed(&x, s2);
    CHECK(memcmp(s1, s2, 32) == 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(test_any_t_shares);
    RUN(test_t_minus_one);
    RUN(test_malformed);
    RUN(test_coins_and_seed);
    return pft_test_done();
}
