/* pft_fixed: fixed-point statistics in the integers mod 2^64, so that additive masks cancel exactly. */
#ifndef PFT_FIXED_H
#define PFT_FIXED_H

#include <stddef.h>
#include <stdint.h>

/* Theory (docs/SECAGG.md §2). A statistic v (an entry of a class sum, of a second moment, of a release-rule
 * matrix N·(U Uᵀ + diag psi), with or without a DP noise share) travels as the word
 *     w = round(v · 2^f) mod 2^64,   f = PFT_FIXED_FRAC_BITS = 32,
 * read back as a two's-complement int64 divided by 2^f. Words add with uint64_t wrap-around, so masked words
 * (word + m mod 2^64) sum to the sum of the clear words once every mask cancels, bit for bit.
 *
 * The bound. Rows are clipped to ‖x‖₂ ≤ 1, so every |x_j| ≤ 1 and |x_j x_k| ≤ 1: an entry of a sum or of a
 * second moment Σ x xᵀ over n rows is at most n in absolute value; a PSD matrix's entries are bounded by its
 * diagonal (|A_jk| ≤ sqrt(A_jj A_kk)), and the diagonal of a scatter, or of N·(U Uᵀ + diag psi) (which keeps
 * the scatter's diagonal exactly), is at most Σ x_j² ≤ n. A contribution of n rows with a Gaussian noise
 * share of standard deviation s is therefore bounded per entry by
 *     limit(n, s) = n + PFT_FIXED_NOISE_SDS · s        (pft_fixed_limit)
 * (the encoder refuses, never wraps, a value beyond its limit: a noise draw past 64 standard deviations,
 * probability < 10^-890, is an error). An aggregate's entry is bounded by the sum L of its contributions'
 * limits, and it decodes exactly iff |aggregate| · 2^f < 2^63, which holds whenever
 *     L ≤ PFT_FIXED_TOTAL_MAX = 2^31 − 1         (pft_fixed_check_total)
 * since then |round(v_i 2^f)| ≤ L_i 2^f for each contribution and the sum stays within ±(2^63 − 2^32).
 * In particular every topology with at most PFT_FIXED_MAX_ROWS = 2^30 rows in total, and noise shares whose
 * 64-sd allowances sum to at most 2^30 − 1 (σ ≤ 1.6·10^7 for one aggregate), cannot overflow.
 *
 * Precision. Rounding costs at most 2^-(f+1) ≈ 1.2·10^-10 per entry and contribution (k contributions:
 * k·2^-(f+1)); decoding into a double adds at most |value|·2^-53 (an int64 has more digits than a double).
 * Against the wire's fp32 (2^-24 relative) this is exact for our purposes.
 *
 * Counts are integers and travel as themselves (no scale), also mod 2^64: at most PFT_FIXED_MAX_COUNT each.
 * Decoding takes the bound the aggregate must obey and refuses a word beyond it (PFT_ERANGE): an aggregate
 * whose masks did not all cancel decodes to uniform words, which land inside a bound of L ≪ 2^31 with
 * probability about L·2^-31 per word. */

#define PFT_FIXED_FRAC_BITS 32           /* f: fractional bits of a word */
#define PFT_FIXED_SCALE 4294967296.0     /* 2^f */
#define PFT_FIXED_TOTAL_MAX 2147483647.0 /* 2^31 - 1: the largest bound of any aggregate's entry */
#define PFT_FIXED_MAX_ROWS                                                                                   \
    (UINT64_C(1) << 30)               /* rows of a topology at most (half the range; noise the rest) */
#define PFT_FIXED_NOISE_SDS 64.0      /* noise allowance of a contribution, in standard deviations */
#define PFT_FIXED_MAX_PARTS (1 << 20) /* contributions of one aggregate at most */
#define PFT_FIXED_MAX_COUNT (UINT64_C(1) << 48) /* a count at most, as the wire's counts */

/* The per-entry bound of a contribution of `rows` rows (each ‖x‖₂ ≤ 1) carrying a Gaussian noise share of
 * standard deviation noise_sd ≥ 0: rows + PFT_FIXED_NOISE_SDS · noise_sd. Returns NaN for a negative or
 * non-finite noise_sd. */
double pft_fixed_limit(uint64_t rows, double noise_sd);

/* Checks that k contributions with these per-entry limits (each finite, ≥ 0), summed, can never leave the
 * representable range: 0 if Σ limits ≤ PFT_FIXED_TOTAL_MAX and Σ rows ≤ PFT_FIXED_MAX_ROWS (rows may be
 * NULL: not checked) and k ≤ PFT_FIXED_MAX_PARTS, else PFT_EINVAL with a message giving the sum and the
 * bound. */
int pft_fixed_check_total(const double *limits, const uint64_t *rows, size_t k);

/* Encodes v[0..n) into out[0..n): out[i] = round(v[i] · 2^f) mod 2^64 (round half away from zero).
 * 0, or PFT_EINVAL (out unspecified) naming the first offending index when a value is NaN or infinite or
 * |v[i]| > limit, or when limit is not in [0, PFT_FIXED_TOTAL_MAX]. */
int pft_fixed_encode(const double *v, size_t n, double limit, uint64_t *out);

/* Decodes w[0..n) (two's complement / 2^f) into out[0..n). 0, or PFT_ERANGE naming the first word whose
 * value exceeds limit in absolute value (masks not removed, or not the aggregate the caller expects);
 * PFT_EINVAL when limit is not in [0, PFT_FIXED_TOTAL_MAX]. out is unspecified on error. */
int pft_fixed_decode(const uint64_t *w, size_t n, double limit, double *out);

/* acc[i] += w[i] mod 2^64, and acc[i] -= w[i] mod 2^64. */
void pft_fixed_add(uint64_t *acc, const uint64_t *w, size_t n);
void pft_fixed_sub(uint64_t *acc, const uint64_t *w, size_t n);

/* A count as a word (itself): 0, or PFT_EINVAL for a count above PFT_FIXED_MAX_COUNT. */
int pft_fixed_encode_count(uint64_t count, uint64_t *out);
/* A word as a count of at most max (≤ PFT_FIXED_MAX_COUNT): 0, or PFT_ERANGE (masks not removed, or more
 * than max). */
int pft_fixed_decode_count(uint64_t w, uint64_t max, uint64_t *count);

#endif
