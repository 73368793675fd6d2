/* pft_shamir: t-of-n Shamir secret sharing over GF(2^61 - 1) of a self-mask seed (docs/SECAGG.md §5). */
#ifndef PFT_SHAMIR_H
#define PFT_SHAMIR_H

#include <stddef.h>
#include <stdint.h>

/* Theory (Shamir, CACM 1979; as used by Bonawitz et al., CCS 2017, for the self-mask seed b_u).
 *
 * The field is GF(p), p = 2^61 - 1 (a Mersenne prime: reduction is a shift and an add, a product fits in
 * 128 bits). A secret is PFT_SHAMIR_ELEMS = 5 field elements (5 × 61 = 305 bits, uniform), each shared on
 * its own with the same share points: a polynomial f_e(x) = s_e + a_e1 x + ... + a_e(t-1) x^(t-1) with
 * coefficients uniform in GF(p), and member i (0-based) receives x = i + 1 and y_e = f_e(i + 1). Any t
 * shares give f_e(0) = s_e by Lagrange interpolation at 0; any t - 1 shares are consistent with every secret,
 * each with exactly one polynomial (the t - 1 points and (0, s) fix it), so they say nothing about s. The
 * self-mask's seed is BLAKE2b-256("pftnet-secagg-self-v1" ‖ the 5 elements, 8 bytes little-endian each):
 * what is shared is the elements, what keys the keystream is their hash.
 *
 * Why GF(2^61 - 1) and not GF(2^8): share points 1..n need n < field size, and GF(2^8) caps a group at 255
 * members; here the group's bound (PFT_SHAMIR_MAX_N) is the only limit. A share is 48 bytes.
 *
 * Share bytes: x (8 bytes, little-endian, 1..PFT_SHAMIR_MAX_N), then y_1..y_5 (8 bytes each, < p). */

#define PFT_SHAMIR_ELEMS 5
#define PFT_SHAMIR_SHARE_LEN 48 /* 8 + 8 · PFT_SHAMIR_ELEMS */
#define PFT_SHAMIR_SEED_LEN 32
#define PFT_SHAMIR_COINS_LEN 32
#define PFT_SHAMIR_MAX_N 65536
#define PFT_SHAMIR_P ((UINT64_C(1) << 61) - 1)

/* A secret: five elements of GF(p), each < PFT_SHAMIR_P. */
typedef struct {
    uint64_t e[PFT_SHAMIR_ELEMS];
} pft_shamir_secret_t;

/* Draws a secret and the t - 1 coefficients of each of its polynomials from the keystream of coins (the
 * caller's randomness: randombytes, or a PRF output when the split must be rebuilt bit for bit), and writes
 * the shares of members 0..n-1 (x = 1..n) into shares[0..n). 0, or PFT_EINVAL (t < 1, t > n, n >
 * PFT_SHAMIR_MAX_N); nothing written then. The caller wipes coins, the secret and the shares it keeps. */
int pft_shamir_split(const uint8_t coins[PFT_SHAMIR_COINS_LEN], size_t t, size_t n,
                     pft_shamir_secret_t *secret, uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN]);

/* The same with the secret and the coefficients given: coef[(j - 1) · PFT_SHAMIR_ELEMS + e] is a_ej, j =
 * 1..t-1, every value < p (PFT_EINVAL otherwise). */
int pft_shamir_split_with(const pft_shamir_secret_t *secret, const uint64_t *coef, size_t t, size_t n,
                          uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN]);

/* Rebuilds the secret from k shares (any order) of a t-of-n split: interpolates from the first t and checks
 * that every further share lies on the same polynomials. 0; PFT_EINVAL for fewer than t shares, a malformed
 * share (x = 0 or beyond PFT_SHAMIR_MAX_N, an element ≥ p), two shares at one x, or a share off the
 * polynomials (a lying or corrupted share: the message gives its x); *secret is unchanged on error. */
int pft_shamir_combine(const uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN], size_t k, size_t t,
                       pft_shamir_secret_t *secret);

/* The x of a share (0 when malformed). */
uint64_t pft_shamir_share_x(const uint8_t share[PFT_SHAMIR_SHARE_LEN]);

/* The self-mask seed of a secret: BLAKE2b-256("pftnet-secagg-self-v1" ‖ elements). */
void pft_shamir_seed(const pft_shamir_secret_t *secret, uint8_t seed[PFT_SHAMIR_SEED_LEN]);

#endif
