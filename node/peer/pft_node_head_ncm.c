/* pft_node_head_ncm: the head `ncm`: nearest class mean with the pooled isotropic variance, i.e. the Gaussian
 * head at shrinkage 1 (Σ = (tr Σ / d)·I): score_c(x) = log π_c − ‖x − μ_c‖² / (2σ²). It uses only the class
 * means, counts and the trace of the pooled scatter, so it stays sound where the scatter is not (DP noise,
 * very few rows); head.npy holds its [W | b] as LDA's. */
#include "pft_node_internal.h"

static int fit(node_t *nd, void **model)
{
    return pft_node__gaussian_fit(nd, 1, 1.0, model);
}

const pft_node_head_t pft_node__head_ncm = {
    .name = "ncm",
    .wants_stats = 1,
    .fit = fit,
    .predict = pft_node__gaussian_predict,
    .write = pft_node__gaussian_write,
    .describe = pft_node__gaussian_describe,
    .destroy = pft_node__gaussian_destroy,
};
