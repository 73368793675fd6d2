/* pft_prep: row-wise feature normalisation (L2, signed square root + L2). */
#include "pft_prep.h"

#include "pft_error.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static const char *const s_names[] = {
    [PFT_PREP_NONE] = "none",
    [PFT_PREP_L2] = "l2",
    [PFT_PREP_SQRT_L2] = "sqrt-l2",
};
#define N_PREP ((int)(sizeof s_names / sizeof s_names[0]))

const char *pft_prep_name(pft_prep_t prep)
{
    return (int)prep >= 0 && (int)prep < N_PREP ? s_names[prep] : NULL;
}

int pft_prep_parse(const char *name, pft_prep_t *out)
{
    for (int i = 0; name && i < N_PREP; i++)
        if (strcmp(name, s_names[i]) == 0) {
            *out = (pft_prep_t)i;
            return 0;
        }
    return pft_err(PFT_EINVAL, "unknown feature preprocessing '%s' (valid: none, l2, sqrt-l2)",
                   name ? name : "(null)");
}

static void l2_rows(float *x, int n, int d)
{
    for (int i = 0; i < n; i++) {
        float *row = x + (size_t)i * (size_t)d;
        double s = 0.0;
        for (int j = 0; j < d; j++)
            s += (double)row[j] * row[j];
        if (s > 0.0) {
            double inv = 1.0 / sqrt(s);
            for (int j = 0; j < d; j++)
                row[j] = (float)(row[j] * inv);
        }
    }
}

int pft_prep_apply(pft_prep_t prep, float *x, int n, int d)
{
    if (!pft_prep_name(prep))
        return pft_err(PFT_EINVAL, "invalid preprocessing value %d", (int)prep);
    if (n < 0 || d < 0)
        return pft_err(PFT_EINVAL, "invalid matrix shape %d×%d for preprocessing", n, d);
    if (prep == PFT_PREP_NONE || n == 0 || d == 0)
        return 0;
    if (prep == PFT_PREP_SQRT_L2) {
        size_t m = (size_t)n * (size_t)d;
        for (size_t i = 0; i < m; i++)
            x[i] = x[i] < 0.0f ? -sqrtf(-x[i]) : sqrtf(x[i]);
    }
    l2_rows(x, n, d);
    return 0;
}
