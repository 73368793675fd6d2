/* pft_stats: mean and sample standard deviation of a stream of numbers (Welford), for reports over seeds. */
#ifndef PFT_STATS_H
#define PFT_STATS_H

/* A running summary. Zero-initialise ({0}) to start; NaN values are ignored (a missing measurement). */
typedef struct {
    int n;       /* values added */
    double mean; /* their mean (0 when n = 0) */
    double m2;   /* sum of squared deviations from the mean (Welford's accumulator) */
} pft_stats_t;

/* Adds x unless it is NaN. */
void pft_stats_add(pft_stats_t *s, double x);

/* The mean, or NaN when no value was added. */
double pft_stats_mean(const pft_stats_t *s);

/* The sample standard deviation (divisor n − 1), or NaN when fewer than two values were added. */
double pft_stats_std(const pft_stats_t *s);

/* Writes "mean ± std (n)" with `decimals` decimals after multiplying by scale (100 for percentages):
 * "71.47 ± 0.15 (3)"; with one value "71.47 (1)"; with none "—". with_n = 0 leaves out " (n)".
 * Always NUL-terminates buf (truncating if cap is too small). */
void pft_stats_format(const pft_stats_t *s, double scale, int decimals, int with_n, char *buf, unsigned cap);

#endif
