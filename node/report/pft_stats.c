/* pft_stats: mean and sample standard deviation of a stream of numbers (Welford), for reports over seeds. */
#include "pft_stats.h"

#include <math.h>
#include <stdio.h>

void pft_stats_add(pft_stats_t *s, double x)
{
    if (isnan(x))
        return;
    s->n++;
    double d = x - s->mean;
    s->mean += d / s->n;
    s->m2 += d * (x - s->mean);
}

double pft_stats_mean(const pft_stats_t *s)
{
    return s->n > 0 ? s->mean : NAN;
}

double pft_stats_std(const pft_stats_t *s)
{
    return s->n > 1 ? sqrt(s->m2 > 0 ? s->m2 / (s->n - 1) : 0.0) : NAN;
}

/* -0.00 reads as a sign error in a table: print zero without its sign. */
static double unsigned_zero(double v, int decimals)
{
    return fabs(v) < 0.5 * pow(10.0, -decimals) ? 0.0 : v;
}

void pft_stats_format(const pft_stats_t *s, double scale, int decimals, int with_n, char *buf, unsigned cap)
{
    if (cap == 0)
        return;
    if (s->n == 0) {
        snprintf(buf, cap, "—");
        return;
    }
    double m = unsigned_zero(s->mean * scale, decimals);
    int used;
    if (s->n > 1)
        used = snprintf(buf, cap, "%.*f ± %.*f", decimals, m, decimals,
                        unsigned_zero(pft_stats_std(s) * fabs(scale), decimals));
    else
        used = snprintf(buf, cap, "%.*f", decimals, m);
    if (with_n && used >= 0 && (unsigned)used < cap)
        snprintf(buf + used, cap - (unsigned)used, " (%d)", s->n);
}
