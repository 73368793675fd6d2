/* pft_baseline: the reference heads a reader of the paper expects (centralized oracle, local-only). */
#ifndef PFT_BASELINE_H
#define PFT_BASELINE_H

#include "pft_dataset.h"

/* Trains a head on train (l2 = 1/(head_c·n), as scikit-learn's C) and returns its accuracy on test.
 * *seconds (may be NULL) gets the training time. Errors as pft_head_fit / pft_head_accuracy. */
int pft_baseline_accuracy(const pft_dataset_t *train, const pft_dataset_t *test, int n_classes, double head_c,
                          double *acc, double *seconds);

#endif
