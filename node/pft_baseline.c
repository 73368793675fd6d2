/* pft_baseline: one place that trains a head the way every node does, for baselines and comparisons. */
#include "pft_baseline.h"

#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_head.h"

int pft_baseline_accuracy(const pft_dataset_t *train, const pft_dataset_t *test, int n_classes, double head_c,
                          double *acc, double *seconds)
{
    pft_head_opts_t ho;
    pft_head_opts_default(&ho);
    ho.l2 = 1.0 / (head_c * pft_dataset_n(train));
    if (n_classes < pft_dataset_n_classes(train))
        n_classes = pft_dataset_n_classes(train);
    pft_head_t *h = NULL;
    double t0 = pft_fsio_now();
    int rc = pft_head_fit(pft_dataset_x(train), pft_dataset_y(train), pft_dataset_n(train), pft_dataset_d(train),
                          n_classes, &ho, &h, NULL);
    if (seconds)
        *seconds = pft_fsio_now() - t0;
    if (rc)
        return pft_err_wrap(rc, "training a head on %d rows", pft_dataset_n(train));
    rc = pft_head_accuracy(h, pft_dataset_x(test), pft_dataset_y(test), pft_dataset_n(test), acc);
    pft_head_destroy(&h);
    return rc;
}
