/* pft_shamir: t-of-n Shamir secret sharing over GF(2^61 - 1) (theory in pft_shamir.h). */
#include "pft_shamir.h"

#include <sodium.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"

#define SELF_DOMAIN "pftnet-secagg-self-v1"
#define P PFT_SHAMIR_P

_Static_assert(PFT_SHAMIR_SHARE_LEN == 8 + 8 * PFT_SHAMIR_ELEMS, "share layout");
_Static_assert(PFT_SHAMIR_COINS_LEN == crypto_stream_xchacha20_KEYBYTES, "coins key a keystream");

/* ---------- GF(2^61 - 1) ---------- */

static uint64_t f_add(uint64_t a, uint64_t b)
{
    uint64_t s = a + b; /* < 2^62: no overflow */
    return s >= P ? s - P : s;
}

static uint64_t f_sub(uint64_t a, uint64_t b)
{
    return a >= b ? a - b : a + P - b;
}

static uint64_t f_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 m = (unsigned __int128)a * b; /* < 2^122 */
    uint64_t lo = (uint64_t)m & P, hi = (uint64_t)(m >> 61);
    return f_add(lo, hi >= P ? hi - P : hi); /* 2^61 ≡ 1 (mod p) */
}

static uint64_t f_inv(uint64_t a) /* a ≠ 0: a^(p-2) */
{
    uint64_t r = 1, e = P - 2;
    for (; e; e >>= 1, a = f_mul(a, a))
        if (e & 1)
            r = f_mul(r, a);
    return r;
}

/* ---------- bytes ---------- */

static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

uint64_t pft_shamir_share_x(const uint8_t share[PFT_SHAMIR_SHARE_LEN])
{
    uint64_t x = get64(share);
    for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
        if (get64(share + 8 + 8 * e) >= P)
            return 0;
    return x >= 1 && x <= PFT_SHAMIR_MAX_N ? x : 0;
}

/* ---------- uniform field elements from a keystream ---------- */

typedef struct {
    const uint8_t *key;
    uint8_t block[64];
    uint64_t counter;
    int used; /* bytes of block consumed */
} coins_t;

static uint64_t draw(coins_t *c)
{
    static const uint8_t zeros[64], nonce[crypto_stream_xchacha20_NONCEBYTES];
    for (;;) {
        if (c->used == 64) {
            crypto_stream_xchacha20_xor_ic(c->block, zeros, 64, nonce, c->counter++, c->key);
            c->used = 0;
        }
        uint64_t v = get64(c->block + c->used) & P; /* 61 bits, uniform in [0, 2^61) */
        c->used += 8;
        if (v != P) /* rejection: [0, p) stays uniform */
            return v;
    }
}

/* ---------- split and combine ---------- */

int pft_shamir_split_with(const pft_shamir_secret_t *secret, const uint64_t *coef, size_t t, size_t n,
                          uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN])
{
    if (t < 1 || t > n || n > PFT_SHAMIR_MAX_N)
        return pft_err(PFT_EINVAL, "shamir: a %zu-of-%zu split (1 ≤ t ≤ n ≤ %d)", t, n, PFT_SHAMIR_MAX_N);
    for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
        if (secret->e[e] >= P)
            return pft_err(PFT_EINVAL, "shamir: secret element %d out of the field", e);
    for (size_t j = 0; j < (t - 1) * PFT_SHAMIR_ELEMS; j++)
        if (coef[j] >= P)
            return pft_err(PFT_EINVAL, "shamir: coefficient %zu out of the field", j);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = i + 1;
        put64(shares[i], x);
        for (int e = 0; e < PFT_SHAMIR_ELEMS; e++) { /* Horner */
            uint64_t y = 0;
            for (size_t j = t - 1; j >= 1; j--)
                y = f_add(f_mul(y, x), coef[(j - 1) * PFT_SHAMIR_ELEMS + (size_t)e]);
            y = f_add(f_mul(y, x), secret->e[e]);
            put64(shares[i] + 8 + 8 * e, y);
        }
    }
    return 0;
}

int pft_shamir_split(const uint8_t coins[PFT_SHAMIR_COINS_LEN], size_t t, size_t n,
                     pft_shamir_secret_t *secret, uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN])
{
    if (t < 1 || t > n || n > PFT_SHAMIR_MAX_N)
        return pft_err(PFT_EINVAL, "shamir: a %zu-of-%zu split (1 ≤ t ≤ n ≤ %d)", t, n, PFT_SHAMIR_MAX_N);
    if (sodium_init() < 0)
        return pft_err(PFT_EUNSUPPORTED, "shamir: libsodium cannot be initialised");
    size_t nc = (t - 1) * PFT_SHAMIR_ELEMS;
    uint64_t *coef = pft_alloc_array(nc + 1, sizeof *coef);
    if (!coef)
        return pft_err(PFT_ENOMEM, "out of memory");
    coins_t c = {.key = coins, .used = 64};
    pft_shamir_secret_t s;
    for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
        s.e[e] = draw(&c);
    for (size_t j = 0; j < nc; j++)
        coef[j] = draw(&c);
    int rc = pft_shamir_split_with(&s, coef, t, n, shares);
    if (rc == 0)
        *secret = s;
    sodium_memzero(&s, sizeof s);
    sodium_memzero(&c, sizeof c);
    sodium_memzero(coef, (nc + 1) * sizeof *coef);
    pft_free(coef);
    return rc;
}

/* The barycentric weights of the points xs[0..t) (distinct): lam_i = 1 / Π_{j≠i} (x_i - x_j), all t inverses
 * by one field inversion (Montgomery's batch trick, with pre as scratch: t entries). O(t²) multiplications. */
static void barycentric(const uint64_t *xs, size_t t, uint64_t *lam, uint64_t *pre)
{
    for (size_t i = 0; i < t; i++) {
        uint64_t den = 1;
        for (size_t j = 0; j < t; j++)
            if (j != i)
                den = f_mul(den, f_sub(xs[i], xs[j]));
        lam[i] = den;
    }
    uint64_t acc = 1;
    for (size_t i = 0; i < t; i++) {
        pre[i] = acc; /* Π_{j<i} den_j */
        acc = f_mul(acc, lam[i]);
    }
    uint64_t inv = f_inv(acc); /* 1 / Π_j den_j */
    for (size_t i = t; i-- > 0;) {
        uint64_t d = lam[i];
        lam[i] = f_mul(inv, pre[i]); /* 1 / den_i */
        inv = f_mul(inv, d);
    }
}

/* The Lagrange weights at x0 of the points xs[0..t) from their barycentric weights lam: w_i = lam_i ·
 * Π_{j≠i} (x0 - x_j), the products by prefix and suffix (O(t), no inversion; x0 may be one of the points). */
static void lagrange(const uint64_t *xs, const uint64_t *lam, size_t t, uint64_t x0, uint64_t *w)
{
    uint64_t acc = 1;
    for (size_t i = 0; i < t; i++) {
        w[i] = acc; /* Π_{j<i} (x0 - x_j) */
        acc = f_mul(acc, f_sub(x0, xs[i]));
    }
    acc = 1;
    for (size_t i = t; i-- > 0;) {
        w[i] = f_mul(f_mul(w[i], acc), lam[i]);
        acc = f_mul(acc, f_sub(x0, xs[i]));
    }
}

/* Σ_i w_i · y_e(share i) over the first t shares. */
static uint64_t weighted(const uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN], const uint64_t *w, size_t t, int e)
{
    uint64_t v = 0;
    for (size_t i = 0; i < t; i++)
        v = f_add(v, f_mul(w[i], get64(shares[i] + 8 + 8 * e)));
    return v;
}

/* PFT_EINVAL if a share is malformed or two share one x; xs[0..k) their points. */
static int check_shares(const uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN], size_t k, uint64_t *xs)
{
    for (size_t i = 0; i < k; i++) {
        if ((xs[i] = pft_shamir_share_x(shares[i])) == 0)
            return pft_err(PFT_EINVAL, "shamir: share %zu is malformed (x = %llu, or an element ≥ 2^61 - 1)",
                           i, (unsigned long long)get64(shares[i]));
        for (size_t j = 0; j < i; j++)
            if (xs[j] == xs[i])
                return pft_err(PFT_EINVAL, "shamir: shares %zu and %zu are both at x = %llu", j, i,
                               (unsigned long long)xs[i]);
    }
    return 0;
}

int pft_shamir_combine(const uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN], size_t k, size_t t,
                       pft_shamir_secret_t *secret)
{
    if (t < 1 || k < t || t > PFT_SHAMIR_MAX_N)
        return pft_err(PFT_EINVAL, "shamir: %zu share(s) for a threshold of %zu", k, t);
    uint64_t *xs = pft_alloc_array(k, sizeof *xs), *w = pft_alloc_array(t, sizeof *w),
             *lam = pft_alloc_array(t, sizeof *lam);
    int rc = xs && w && lam ? check_shares(shares, k, xs) : pft_err(PFT_ENOMEM, "out of memory");
    pft_shamir_secret_t s;
    if (rc == 0) {
        barycentric(xs, t, lam, w);
        lagrange(xs, lam, t, 0, w);
        for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
            s.e[e] = weighted(shares, w, t, e);
    }
    for (size_t i = t; rc == 0 && i < k; i++) { /* every further share on the same polynomials */
        lagrange(xs, lam, t, xs[i], w);
        for (int e = 0; rc == 0 && e < PFT_SHAMIR_ELEMS; e++)
            if (weighted(shares, w, t, e) != get64(shares[i] + 8 + 8 * e))
                rc = pft_err(PFT_EINVAL,
                             "shamir: the share at x = %llu is not on the polynomial of the others",
                             (unsigned long long)xs[i]);
    }
    if (rc == 0)
        *secret = s;
    sodium_memzero(&s, sizeof s);
    pft_free(xs);
    pft_free(w);
    pft_free(lam);
    return rc;
}

void pft_shamir_seed(const pft_shamir_secret_t *secret, uint8_t seed[PFT_SHAMIR_SEED_LEN])
{
    uint8_t b[8 * PFT_SHAMIR_ELEMS];
    for (int e = 0; e < PFT_SHAMIR_ELEMS; e++)
        put64(b + 8 * e, secret->e[e]);
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, PFT_SHAMIR_SEED_LEN);
    crypto_generichash_update(&st, (const uint8_t *)SELF_DOMAIN, sizeof SELF_DOMAIN - 1);
    crypto_generichash_update(&st, b, sizeof b);
    crypto_generichash_final(&st, seed, PFT_SHAMIR_SEED_LEN);
    sodium_memzero(&st, sizeof st);
    sodium_memzero(b, sizeof b);
}
