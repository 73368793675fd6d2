/* pft_prep: run-wide feature preprocessing (none, l2, sqrt-l2), identical on every node, applied in place. */
#ifndef PFT_PREP_H
#define PFT_PREP_H

/* Preprocessing applied to every feature row before anything else. Values are stable (configs, results). */
typedef enum {
    PFT_PREP_NONE = 0,    /* features as extracted */
    PFT_PREP_L2 = 1,      /* each row divided by its L2 norm; all-zero rows stay zero */
    PFT_PREP_SQRT_L2 = 2, /* signed square root sign(v)·sqrt(|v|) of each value, then L2 as above */
} pft_prep_t;

/* "none" / "l2" / "sqrt-l2"; NULL for an unknown value. */
const char *pft_prep_name(pft_prep_t prep);
/* Parses a name (exact, lower case); returns 0 and sets *out, or PFT_EINVAL with a message listing the
 * valid names. */
int pft_prep_parse(const char *name, pft_prep_t *out);

/* Applies prep in place to the n×d row-major matrix x (norms accumulated in double). After l2 and sqrt-l2
 * every non-zero row has unit norm (to float rounding), so ‖f‖₂ ≤ 1 holds as DP requires.
 * Returns 0, or PFT_EINVAL (unknown prep, n < 0, d < 0) with x untouched. Non-finite input stays non-finite.
 */
int pft_prep_apply(pft_prep_t prep, float *x, int n, int d);

#endif
