/* pft_nearest: nearest-row re-identification of a released mean (the nearest-row attack of
 * docs/SECURITY.md §9).
 *
 * A released mean (a GMM component's, a statistics class's) that stands for one row IS that row. Its ratio
 * is the distance to the nearest own row of its class over the typical spacing of own rows (the median,
 * over at most PFT_NEAREST_MAX rows, of the distance from a row to its nearest other row): ≪ 1 means the
 * mean is a row (a one-row component: 0 up to fp16); means of several rows sit 0.5-0.8 spacings away. */
#ifndef PFT_NEAREST_H
#define PFT_NEAREST_H

#include "pft_verdict.h"

#define PFT_NEAREST_MAX 2000 /* rows of a class used for the typical spacing */
#define PFT_NEAREST_FAIL 0.1 /* ratio below this: the mean is a row */
#define PFT_NEAREST_WARN 0.3 /* below this: the mean is close to one row (a component of ~2 rows) */

/* Median nearest-neighbour distance among the m rows x (m×d); NaN with < 2 rows, or out of memory. */
double pft_nearest_spacing(const float *x, int m, int d);
/* Distance from mu (d) to the nearest of the m rows, its index into *who (may be NULL); NaN without rows. */
double pft_nearest_row(const float *x, int m, int d, const double *mu, int *who);
/* FAIL when ratio < PFT_NEAREST_FAIL, WARN when < PFT_NEAREST_WARN, else PASS (also for NaN: no rows). */
pft_verdict_t pft_nearest_verdict(double ratio);

#endif
