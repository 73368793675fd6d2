/* pft_ghead_score: a fitted Gaussian head's accessors, class scores, predictions and accuracy (pft_ghead.h).
 */
#include "pft_ghead.h"
#include "pft_ghead_internal.h"

#include <math.h>

#include "pft_alloc.h"
#include "pft_error.h"

void pft_ghead_destroy(pft_ghead_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_ghead_t *h = *self_p;
    pft_head_destroy(&h->lin);
    pft_free(h->comp_label);
    pft_free(h->mean);
    pft_free(h->chol);
    pft_free(h->bias);
    pft_free(h);
    *self_p = NULL;
}

int pft_ghead_n_classes(const pft_ghead_t *self)
{
    return self->C;
}
int pft_ghead_dim(const pft_ghead_t *self)
{
    return self->d;
}
const pft_head_t *pft_ghead_linear(const pft_ghead_t *self)
{
    return self->lin;
}
const int *pft_ghead_component_labels(const pft_ghead_t *self, int *k)
{
    *k = self->comp_label ? self->K : self->C;
    return self->comp_label;
}

const double *pft_ghead_qda_means(const pft_ghead_t *self)
{
    return self->mean;
}
const double *pft_ghead_qda_chol(const pft_ghead_t *self)
{
    return self->chol;
}
const double *pft_ghead_qda_bias(const pft_ghead_t *self)
{
    return self->bias;
}

/* A row's class scores from its component logits lg (K): the log-sum-exp per class; -inf for none. */
static void lse_components(const pft_ghead_t *h, const float *lg, double *sc)
{
    for (int c = 0; c < h->C; c++)
        sc[c] = -INFINITY;
    for (int k = 0; k < h->K; k++) {
        double a = sc[h->comp_label[k]], b = lg[k], mx = a > b ? a : b;
        sc[h->comp_label[k]] = a == -INFINITY ? b : mx + log(exp(a - mx) + exp(b - mx));
    }
}

int pft_ghead_scores(const pft_ghead_t *self, const float *x, int n, double *scores)
{
    int C = self->C, d = self->d;
    if (self->kind == PFT_GHEAD_LDA) {
        int K = self->comp_label ? self->K : C;
        float *lg = pft_alloc_array((size_t)(n > 0 ? n : 1) * K, sizeof(float));
        if (!lg)
            return pft_err(PFT_ENOMEM, "gaussian head: out of memory for %d rows", n);
        int rc = pft_head_logits(self->lin, x, n, lg);
        for (size_t i = 0; rc == 0 && !self->comp_label && i < (size_t)n * C; i++)
            scores[i] = lg[i];
        for (size_t i = 0; rc == 0 && self->comp_label && i < (size_t)n; i++)
            lse_components(self, lg + i * K, scores + i * C);
        pft_free(lg);
        return rc;
    }
    enum { CHUNK = 512 };
    double *z = pft_alloc_array((size_t)CHUNK * d, sizeof(double));
    double *q = pft_alloc_array(CHUNK, sizeof(double));
    if (!z || !q) {
        pft_free(z);
        pft_free(q);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory");
    }
    for (int at = 0; at < n; at += CHUNK) {
        int m = n - at < CHUNK ? n - at : CHUNK;
        for (int c = 0; c < C; c++) {
            if (self->bias[c] == -INFINITY) {
                for (int i = 0; i < m; i++)
                    scores[(size_t)(at + i) * C + c] = -INFINITY;
                continue;
            }
            for (size_t i = 0; i < (size_t)m * d; i++)
                z[i] = x[(size_t)at * d + i];
            pft_ghead__qda_quad(self->chol + (size_t)c * d * d, self->mean + (size_t)c * d, z, m, d, q);
            for (int i = 0; i < m; i++)
                scores[(size_t)(at + i) * C + c] = self->bias[c] - 0.5 * q[i];
        }
    }
    pft_free(z);
    pft_free(q);
    return 0;
}

int pft_ghead_predict(const pft_ghead_t *self, const float *x, int n, int32_t *out)
{
    int C = self->C;
    double *s = pft_alloc_array((size_t)(n > 0 ? n : 1) * C, sizeof(double));
    if (!s)
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory for %d rows", n);
    int rc = pft_ghead_scores(self, x, n, s);
    for (int i = 0; rc == 0 && i < n; i++) {
        int best = 0;
        for (int c = 1; c < C; c++)
            if (s[(size_t)i * C + c] > s[(size_t)i * C + best])
                best = c;
        out[i] = best;
    }
    pft_free(s);
    return rc;
}

int pft_ghead_accuracy(const pft_ghead_t *self, const float *x, const int32_t *y, int n, double *acc,
                       double *acc_class, int *counts)
{
    int C = self->C;
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= C)
            return pft_err(PFT_EINVAL, "gaussian head: label %d outside [0, %d)", (int)y[i], C);
    int32_t *pred = pft_alloc_array((size_t)(n > 0 ? n : 1), sizeof(int32_t));
    int *tot = pft_calloc((size_t)C, sizeof(int)), *hit = pft_calloc((size_t)C, sizeof(int));
    int rc = (!pred || !tot || !hit) ? pft_err(PFT_ENOMEM, "gaussian head: out of memory") : 0;
    if (rc == 0)
        rc = pft_ghead_predict(self, x, n, pred);
    if (rc == 0) {
        long ok = 0;
        for (int i = 0; i < n; i++) {
            tot[y[i]]++;
            if (pred[i] == y[i]) {
                hit[y[i]]++;
                ok++;
            }
        }
        *acc = n > 0 ? (double)ok / n : 0;
        for (int c = 0; c < C; c++) {
            if (acc_class)
                acc_class[c] = tot[c] ? (double)hit[c] / tot[c] : NAN;
            if (counts)
                counts[c] = tot[c];
        }
    }
    pft_free(pred);
    pft_free(tot);
    pft_free(hit);
    return rc;
}
