/* pft_e2e_own: a node's own rows read back from the data files the launcher wrote, and the bundle it sent,
 * for tests that check a release against statistics computed here with plain loops (no pft_prep, no gstat).
 */
#ifndef PFT_E2E_OWN_H
#define PFT_E2E_OWN_H

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_npy.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PFT_E2E_OWN_MAX_CLASSES 64

/* A node's own training rows, scaled to norm 1 (prep = l2; the DP mechanisms' clip to norm 1 then changes
 * nothing), and per class the count, the sum and the mean, in double. */
typedef struct {
    int n, d;                            /* rows, features */
    double *x;                           /* n×d, rows of norm 1 */
    int32_t *y;                          /* n labels */
    int n_classes;                       /* 1 + the largest label */
    long count[PFT_E2E_OWN_MAX_CLASSES]; /* rows per class */
    double *sum;                         /* n_classes×d: Σ x over the class */
} pft_e2e_own_t;

/* Loads <out>/<id>/data/train_{x,y}.npy into *own; 0 or -1 (then *own holds nothing to free). */
static inline int pft_e2e_own_load(const char *out, const char *id, pft_e2e_own_t *own)
{
    char px[600], py[600];
    snprintf(px, sizeof px, "%s/%s/data/train_x.npy", out, id);
    snprintf(py, sizeof py, "%s/%s/data/train_y.npy", out, id);
    memset(own, 0, sizeof *own);
    float *xf = NULL;
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(px, &xf, &n, &d) != 0 || pft_npy_read_i32(py, &own->y, &ny) != 0 || ny != n) {
        pft_free(xf);
        pft_free(own->y);
        return -1;
    }
    own->n = (int)n;
    own->d = (int)d;
    own->x = calloc((size_t)(n * d), sizeof(double));
    own->sum = calloc((size_t)(PFT_E2E_OWN_MAX_CLASSES * d), sizeof(double));
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)xf[r * d + j] * xf[r * d + j];
        s = sqrt(s);
        for (int64_t j = 0; j < d; j++)
            own->x[r * d + j] = s > 0 ? xf[r * d + j] / s : 0.0;
        int c = own->y[r];
        if (c < 0 || c >= PFT_E2E_OWN_MAX_CLASSES)
            continue;
        own->count[c]++;
        own->n_classes = c + 1 > own->n_classes ? c + 1 : own->n_classes;
        for (int64_t j = 0; j < d; j++)
            own->sum[c * d + j] += own->x[r * d + j];
    }
    pft_free(xf);
    return 0;
}

/* The within-class scatter W = Σ_c Σ_{y=c} (x − μ_c)(x − μ_c)ᵀ of own's rows (d×d, calloc'd; the caller
 * frees). */
static inline double *pft_e2e_own_within_scatter(const pft_e2e_own_t *own)
{
    int d = own->d;
    double *w = calloc((size_t)d * d, sizeof(double)), *v = calloc((size_t)d, sizeof(double));
    for (int r = 0; r < own->n; r++) {
        int c = own->y[r];
        for (int j = 0; j < d; j++)
            v[j] = own->x[(size_t)r * d + j] - own->sum[(size_t)c * d + j] / (double)own->count[c];
        for (int j = 0; j < d; j++)
            for (int k = 0; k < d; k++)
                w[(size_t)j * d + k] += v[j] * v[k];
    }
    free(v);
    return w;
}

static inline void pft_e2e_own_free(pft_e2e_own_t *own)
{
    free(own->x);
    free(own->sum);
    pft_free(own->y);
    memset(own, 0, sizeof *own);
}

/* Decodes the bundle file at path (what the node sent); NULL when it cannot be read or decoded. */
static inline pft_bundle_t *pft_e2e_read_bundle(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    pft_bundle_t *b = NULL;
    if (got != (size_t)len || pft_bundle_decode(buf, got, NULL, &b) != 0)
        b = NULL;
    free(buf);
    return b;
}

#endif
