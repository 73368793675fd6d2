/* pft_ghead_qda: QDA's covariances (regularised toward the pooled one, then shrunk) and its choice of λ by
 * cross-validation with each fold's rows removed from the statistics exactly (pft_ghead.h). */
#include "pft_ghead_internal.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

static const double k_lambda_grid[] = {0.25, 0.5, 0.75};
#define N_LAMBDA ((int)(sizeof k_lambda_grid / sizeof k_lambda_grid[0]))

/* A = (1-α)[(1-λ) Mc/nc + λ W/N] + α (tr/d) I, factorised in place (lower Cholesky); log det into *logdet. */
static int qda_factor(double *A, const double *Mc, double nc, const double *W, double N, double alpha,
                      double lambda, int d, double *logdet)
{
    size_t dd = (size_t)d * d;
    for (size_t i = 0; i < dd; i++)
        A[i] = (1.0 - lambda) * (Mc ? Mc[i] : 0.0) / nc + lambda * W[i] / N;
    double tr = 0;
    for (int i = 0; i < d; i++)
        tr += A[(size_t)i * d + i];
    for (size_t i = 0; i < dd; i++)
        A[i] *= 1.0 - alpha;
    for (int i = 0; i < d; i++)
        A[(size_t)i * d + i] += alpha * tr / d;
    int rc = pft_la_chol_lower(A, d);
    if (rc != 0)
        return rc;
    double ld = 0;
    for (int i = 0; i < d; i++)
        ld += 2.0 * log(A[(size_t)i * d + i]);
    *logdet = ld;
    return 0;
}

void pft_ghead__qda_quad(const double *L, const double *mu, double *x, int n, int d, double *q)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] -= mu[j];
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, n, d, 1.0, L, d, x, d);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < d; j++)
            s += x[(size_t)i * d + j] * x[(size_t)i * d + j];
        q[i] = s;
    }
}

/* The cross-validation's state: the statistics, one fold's removed rows and what is left. */
typedef struct {
    const pft_gstat_t *st;
    int d, S, r; /* dimension, classes, rows in the current fold */
    double N, Np;
    double *W, *Wp, *Mc, *A, *U, *Xr, *Z, *mp, *rs, *rcnt, *sc, *q;
    int *truth, *present;
} qcv_t;

static void qcv_free(qcv_t *v)
{
    double **bufs[] = {&v->W, &v->Wp, &v->Mc, &v->A,    &v->U,  &v->Xr,
                       &v->Z, &v->mp, &v->rs, &v->rcnt, &v->sc, &v->q};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        PFT_FREE(*bufs[i]);
    PFT_FREE(v->truth);
    PFT_FREE(v->present);
}

static int qcv_alloc(qcv_t *v, const pft_gstat_t *st, int n)
{
    memset(v, 0, sizeof *v);
    v->st = st;
    v->d = pft_gstat_dim(st);
    v->S = pft_gstat_n_classes(st);
    v->N = (double)pft_gstat_total(st);
    size_t dd = (size_t)v->d * v->d, d = (size_t)v->d, S = (size_t)v->S;
    v->W = pft_alloc_array(dd, sizeof(double));
    v->Wp = pft_alloc_array(dd, sizeof(double));
    v->Mc = pft_alloc_array(dd, sizeof(double));
    v->A = pft_alloc_array(dd, sizeof(double));
    v->U = pft_alloc_array(((size_t)n + S) * d, sizeof(double));
    v->Xr = pft_alloc_array((size_t)n * d, sizeof(double));
    v->Z = pft_alloc_array((size_t)n * d, sizeof(double));
    v->mp = pft_alloc_array(S * d, sizeof(double));
    v->rs = pft_alloc_array(S * d, sizeof(double));
    v->rcnt = pft_alloc_array(S, sizeof(double));
    v->sc = pft_alloc_array((size_t)n * S, sizeof(double));
    v->q = pft_alloc_array((size_t)n, sizeof(double));
    v->truth = pft_alloc_array((size_t)n, sizeof(int));
    v->present = pft_alloc_array(S, sizeof(int));
    if (!v->W || !v->Wp || !v->Mc || !v->A || !v->U || !v->Xr || !v->Z || !v->mp || !v->rs || !v->rcnt ||
        !v->sc || !v->q || !v->truth || !v->present) {
        qcv_free(v);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory for QDA cross-validation");
    }
    pft_gstat_pooled(st, v->W);
    return 0;
}

/* Columns U (m×d rows) of class c's downdate: its removed rows about their mean, then the between-part column
 * (when rows remain). Returns m. */
static int class_columns(const qcv_t *v, int c)
{
    int m = 0, d = v->d;
    double nc = (double)pft_gstat_count(v->st, c), np = nc - v->rcnt[c];
    const double *rs = v->rs + (size_t)c * d;
    for (int i = 0; i < v->r; i++)
        if (v->truth[i] == c) {
            for (int j = 0; j < d; j++)
                v->U[(size_t)m * d + j] = v->Xr[(size_t)i * d + j] - rs[j] / v->rcnt[c];
            m++;
        }
    if (np > 0) {
        double g = sqrt(np * v->rcnt[c] / nc);
        for (int j = 0; j < d; j++)
            v->U[(size_t)m * d + j] = g * (v->mp[(size_t)c * d + j] - rs[j] / v->rcnt[c]);
        m++;
    }
    return m;
}

/* Fold f's rows out of the statistics: Xr, truth, per-class sums and counts, the remaining means mp, and
 * W' = W - Σ_c U_c U_cᵀ. */
static void fold_downdate(qcv_t *v, const float *x, const folds_t *fs, int f)
{
    int d = v->d, S = v->S;
    v->r = 0;
    memset(v->rs, 0, (size_t)S * d * sizeof(double));
    memset(v->rcnt, 0, (size_t)S * sizeof(double));
    for (int k = 0; k < fs->n; k++) {
        if (fs->fold[k] != f)
            continue;
        const float *xk = x + (size_t)fs->row[k] * d;
        for (int j = 0; j < d; j++) {
            v->Xr[(size_t)v->r * d + j] = xk[j];
            v->rs[(size_t)fs->cls[k] * d + j] += xk[j];
        }
        v->truth[v->r++] = fs->cls[k];
        v->rcnt[fs->cls[k]] += 1;
    }
    v->Np = v->N - v->r;
    for (int c = 0; c < S; c++) {
        double nc = (double)pft_gstat_count(v->st, c), np = nc - v->rcnt[c];
        const double *mu = pft_gstat_mean(v->st, c);
        v->present[c] = np > 0;
        for (int j = 0; j < d; j++)
            v->mp[(size_t)c * d + j] = np > 0 ? (nc * mu[j] - v->rs[(size_t)c * d + j]) / np : 0;
    }
    memcpy(v->Wp, v->W, (size_t)d * d * sizeof(double));
    for (int c = 0; c < S; c++)
        if (v->rcnt[c] > 0) {
            int m = class_columns(v, c);
            cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, m, -1.0, v->U, d, 1.0, v->Wp, d);
        }
    pft_la_sym_from_lower(v->Wp, d);
}

/* Scores of the fold's rows for class c at (α, λ) into column c of sc; PFT_ENUMERIC if not positive definite.
 */
static int class_scores(qcv_t *v, int c, double alpha, double lambda)
{
    int d = v->d, S = v->S;
    if (!v->present[c]) {
        for (int i = 0; i < v->r; i++)
            v->sc[(size_t)i * S + c] = -INFINITY;
        return 0;
    }
    double np = (double)pft_gstat_count(v->st, c) - v->rcnt[c], logdet;
    memcpy(v->Mc, pft_gstat_scatter(v->st, c), (size_t)d * d * sizeof(double));
    if (v->rcnt[c] > 0) { /* the class's own downdate */
        int m = class_columns(v, c);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, m, -1.0, v->U, d, 1.0, v->Mc, d);
        pft_la_sym_from_lower(v->Mc, d);
    }
    int rc = qda_factor(v->A, v->Mc, np, v->Wp, v->Np, alpha, lambda, d, &logdet);
    if (rc != 0)
        return rc;
    memcpy(v->Z, v->Xr, (size_t)v->r * d * sizeof(double));
    pft_ghead__qda_quad(v->A, v->mp + (size_t)c * d, v->Z, v->r, d, v->q);
    for (int i = 0; i < v->r; i++)
        v->sc[(size_t)i * S + c] = log(np / v->Np) - 0.5 * logdet - 0.5 * v->q[i];
    return 0;
}

int pft_ghead__qda_cv(const pft_gstat_t *st, const float *x, const folds_t *fs, double alpha,
                      const pft_ghead_opts_t *o, double *lambda_out, double *acc_out)
{
    qcv_t v;
    int rc = qcv_alloc(&v, st, fs->n);
    if (rc != 0)
        return rc;
    tally_t tl[N_LAMBDA];
    memset(tl, 0, sizeof tl);
    for (int f = 0; f < fs->F; f++) {
        fold_downdate(&v, x, fs, f);
        for (int l = 0; l < N_LAMBDA; l++) {
            int ok = 1;
            for (int c = 0; c < v.S && ok; c++) {
                ok = class_scores(&v, c, alpha, k_lambda_grid[l]) == 0;
                if (o->on_iter)
                    o->on_iter(o->on_iter_ctx);
            }
            if (!ok) {
                tl[l].valid = -1; /* not positive definite in some fold: never chosen */
                continue;
            }
            if (tl[l].valid >= 0)
                tl[l].valid = 1;
            for (int i = 0; i < v.r; i++)
                pft_ghead__tally_row(&tl[l], v.sc + (size_t)i * v.S, v.present, v.S, v.truth[i]);
        }
    }
    for (int l = 0; l < N_LAMBDA; l++)
        if (tl[l].valid < 0)
            tl[l].valid = 0;
    int b = pft_ghead__tally_best(tl, N_LAMBDA);
    if (b < 0)
        rc = pft_err(PFT_ENUMERIC, "gaussian head: no QDA covariance is positive definite in every fold");
    else {
        *lambda_out = k_lambda_grid[b];
        *acc_out = (double)tl[b].correct / (double)tl[b].total;
    }
    qcv_free(&v);
    return rc;
}

int pft_ghead__qda_build(const pft_gstat_t *st, double alpha, double lambda, int C, const pft_ghead_opts_t *o,
                         pft_ghead_t *h)
{
    int d = pft_gstat_dim(st), S = pft_gstat_n_classes(st);
    size_t dd = (size_t)d * d;
    double N = (double)pft_gstat_total(st);
    double *W = pft_alloc_array(dd, sizeof(double));
    h->mean = pft_calloc((size_t)C * d, sizeof(double));
    h->chol = pft_calloc((size_t)C * dd, sizeof(double));
    h->bias = pft_alloc_array((size_t)C, sizeof(double));
    if (!W || !h->mean || !h->chol || !h->bias) {
        pft_free(W);
        return pft_err(PFT_ENOMEM, "gaussian head: out of memory for QDA (%d classes, d = %d)", C, d);
    }
    pft_gstat_pooled(st, W);
    for (int l = 0; l < C; l++) {
        h->bias[l] = -INFINITY;
        for (int i = 0; i < d; i++) /* an identity factor keeps the unused classes well defined */
            h->chol[(size_t)l * dd + (size_t)i * d + i] = 1.0;
    }
    int rc = 0;
    for (int c = 0; rc == 0 && c < S; c++) {
        int l = pft_gstat_label(st, c);
        double nc = (double)pft_gstat_count(st, c), logdet;
        rc = qda_factor(h->chol + (size_t)l * dd, pft_gstat_scatter(st, c), nc, W, N, alpha, lambda, d,
                        &logdet);
        if (rc != 0) {
            rc = pft_err_wrap(rc, "gaussian head: QDA covariance of label %d (α = %g, λ = %g)", l, alpha,
                              lambda);
            break;
        }
        memcpy(h->mean + (size_t)l * d, pft_gstat_mean(st, c), (size_t)d * sizeof(double));
        h->bias[l] = log(nc / N) - 0.5 * logdet;
        if (o->on_iter)
            o->on_iter(o->on_iter_ctx);
    }
    pft_free(W);
    return rc;
}
