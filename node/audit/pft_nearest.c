/* pft_nearest: distances from released means to own rows and the typical spacing of rows. */
#include "pft_nearest.h"

#include "pft_alloc.h"

#include <math.h>
#include <stdlib.h>

static double dist2_ff(const float *a, const float *b, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++) {
        double t = (double)a[j] - (double)b[j];
        s += t * t;
    }
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pft_nearest_spacing(const float *x, int m, int d)
{
    int n = m < PFT_NEAREST_MAX ? m : PFT_NEAREST_MAX;
    if (n < 2)
        return NAN;
    double *nn = pft_alloc_array((size_t)n, sizeof *nn);
    if (!nn)
        return NAN;
    for (int i = 0; i < n; i++) {
        nn[i] = INFINITY;
        for (int j = 0; j < n; j++)
            if (j != i)
                nn[i] = fmin(nn[i], dist2_ff(x + (size_t)i * d, x + (size_t)j * d, d));
    }
    qsort(nn, (size_t)n, sizeof *nn, cmp_double);
    double med = n % 2 ? nn[n / 2] : 0.5 * (nn[n / 2 - 1] + nn[n / 2]);
    pft_free(nn);
    return sqrt(med);
}

double pft_nearest_row(const float *x, int m, int d, const double *mu, int *who)
{
    double best = INFINITY;
    int w = -1;
    for (int i = 0; i < m; i++) {
        double s = 0;
        for (int j = 0; j < d; j++) {
            double t = (double)x[(size_t)i * d + j] - mu[j];
            s += t * t;
        }
        if (s < best)
            best = s, w = i;
    }
    if (who)
        *who = w;
    return m ? sqrt(best) : NAN;
}

pft_verdict_t pft_nearest_verdict(double ratio)
{
    return ratio < PFT_NEAREST_FAIL   ? PFT_VERDICT_FAIL
           : ratio < PFT_NEAREST_WARN ? PFT_VERDICT_WARN
                                      : PFT_VERDICT_PASS;
}
