/* pft_fixed: fixed-point statistics in the integers mod 2^64 (scale 2^32, bound in pft_fixed.h). */
#include "pft_fixed.h"

#include <math.h>

#include "pft_error.h"

#define TWO63 9223372036854775808.0 /* 2^63 */

_Static_assert(PFT_FIXED_SCALE == (double)(UINT64_C(1) << PFT_FIXED_FRAC_BITS), "scale is 2^f");
_Static_assert(PFT_FIXED_TOTAL_MAX *PFT_FIXED_SCALE < TWO63, "the bound fits an int64");

double pft_fixed_limit(uint64_t rows, double noise_sd)
{
    if (!(noise_sd >= 0.0) || !isfinite(noise_sd))
        return NAN;
    return (double)rows + PFT_FIXED_NOISE_SDS * noise_sd;
}

static int limit_ok(double limit)
{
    return limit >= 0.0 && limit <= PFT_FIXED_TOTAL_MAX;
}

int pft_fixed_check_total(const double *limits, const uint64_t *rows, size_t k)
{
    double total = 0.0;
    uint64_t total_rows = 0;
    if (k > PFT_FIXED_MAX_PARTS)
        return pft_err(PFT_EINVAL, "fixed point: %zu contributions (at most %d)", k, PFT_FIXED_MAX_PARTS);
    for (size_t i = 0; i < k; i++) {
        if (!(limits[i] >= 0.0) || !isfinite(limits[i]))
            return pft_err(PFT_EINVAL, "fixed point: contribution %zu has limit %g (must be finite, >= 0)", i,
                           limits[i]);
        total += limits[i];
        if (rows) {
            if (rows[i] > PFT_FIXED_MAX_ROWS || total_rows + rows[i] > PFT_FIXED_MAX_ROWS)
                return pft_err(PFT_EINVAL,
                               "fixed point: more than %llu rows in one aggregate (contribution %zu brings "
                               "%llu): the 2^32 scale cannot hold its sums without overflow",
                               (unsigned long long)PFT_FIXED_MAX_ROWS, i, (unsigned long long)rows[i]);
            total_rows += rows[i];
        }
    }
    /* total is the exact sum up to k·2^-22 (k doubles ≤ 2^31, each addition off by ≤ 2^-22): even a true sum
     * that much above 2^31 - 1 keeps Σ |round(v_i 2^32)| ≤ 2^63 - 2^32 + k·2^10 + k/2 < 2^63 for k ≤ 2^20 */
    if (!(total <= PFT_FIXED_TOTAL_MAX))
        return pft_err(
            PFT_EINVAL,
            "fixed point: the contributions' bounds sum to %.17g > %.0f (2^31 - 1): their sum could "
            "overflow the 2^64 ring at scale 2^%d",
            total, PFT_FIXED_TOTAL_MAX, PFT_FIXED_FRAC_BITS);
    return 0;
}

int pft_fixed_encode(const double *v, size_t n, double limit, uint64_t *out)
{
    if (!limit_ok(limit))
        return pft_err(PFT_EINVAL, "fixed point: limit %g outside [0, %.0f]", limit, PFT_FIXED_TOTAL_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return pft_err(PFT_EINVAL, "fixed point: value %zu is %g (not finite)", i, v[i]);
        if (fabs(v[i]) > limit)
            return pft_err(PFT_EINVAL, "fixed point: value %zu = %.17g beyond the contribution's bound %.17g",
                           i, v[i], limit);
        double r = round(v[i] * PFT_FIXED_SCALE); /* |r| <= limit * 2^32 < 2^63: exact in int64 */
        out[i] = (uint64_t)(int64_t)r;            /* conversion to unsigned is mod 2^64 (C11 6.3.1.3) */
    }
    return 0;
}

/* The signed value of a word, as a double (two's complement). */
static double word_value(uint64_t w)
{
    if (w >> 63)
        return -(double)(~w + 1u); /* ~w + 1 = 2^64 - w, in 1..2^63 */
    return (double)w;
}

int pft_fixed_decode(const uint64_t *w, size_t n, double limit, double *out)
{
    if (!limit_ok(limit))
        return pft_err(PFT_EINVAL, "fixed point: limit %g outside [0, %.0f]", limit, PFT_FIXED_TOTAL_MAX);
    for (size_t i = 0; i < n; i++) {
        double x = word_value(w[i]) / PFT_FIXED_SCALE;
        if (fabs(x) > limit)
            return pft_err(
                PFT_ERANGE,
                "fixed point: word %zu decodes to %.6g, beyond the aggregate's bound %.6g (masks not "
                "all removed?)",
                i, x, limit);
        out[i] = x;
    }
    return 0;
}

void pft_fixed_add(uint64_t *acc, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += w[i];
}

void pft_fixed_sub(uint64_t *acc, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] -= w[i];
}

int pft_fixed_encode_count(uint64_t count, uint64_t *out)
{
    if (count > PFT_FIXED_MAX_COUNT)
        return pft_err(PFT_EINVAL, "fixed point: count %llu above %llu", (unsigned long long)count,
                       (unsigned long long)PFT_FIXED_MAX_COUNT);
    *out = count;
    return 0;
}

int pft_fixed_decode_count(uint64_t w, uint64_t max, uint64_t *count)
{
    if (max > PFT_FIXED_MAX_COUNT)
        max = PFT_FIXED_MAX_COUNT;
    if (w > max)
        return pft_err(PFT_ERANGE, "fixed point: count word %llu%s above %llu (masks not all removed?)",
                       (unsigned long long)w, w >> 63 ? " (negative)" : "", (unsigned long long)max);
    *count = w;
    return 0;
}
