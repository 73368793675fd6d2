/* pft_head: multinomial logistic regression (linear softmax head): the API, input checks and inference.
 * The objective and its preconditioners are in pft_head_objective.c, the optimiser in pft_head_lbfgs.c, the
 * SIMD kernels of the data pass in pft_head_kernel.c. */
#include "pft_head.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_head_internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Rows per inference block: B·C·d ≈ 2^19 keeps each sgemm in OpenBLAS's small-matrix kernels. */
#define BLOCK_WORK (1 << 19)
#define BLOCK_MIN 16
#define BLOCK_MAX 256

struct pft_head_t {
    int n_classes; /* C */
    int d;         /* input dimension */
    float *wb;     /* C×(d+1) row-major [W | b] */
};

void pft_head_opts_default(pft_head_opts_t *opts)
{
    *opts = (pft_head_opts_t){.l2 = PFT_HEAD_L2_AUTO,
                              .max_iter = 1000,
                              .tol = 1e-5,
                              .history = 30,
                              .precond = PFT_HEAD_PRECOND_WHITEN};
}

static int block_rows(int C, int d)
{
    double b = (double)BLOCK_WORK / ((double)C * (double)d);
    return b < BLOCK_MIN ? BLOCK_MIN : b > BLOCK_MAX ? BLOCK_MAX : (int)b;
}

static pft_head_t *head_alloc(int C, int d)
{
    pft_head_t *self = pft_alloc(sizeof *self);
    if (!self)
        return NULL;
    self->n_classes = C;
    self->d = d;
    self->wb = pft_alloc_array((size_t)C * ((size_t)d + 1), sizeof(float));
    if (!self->wb) {
        pft_free(self);
        return NULL;
    }
    return self;
}

static int check_fit_args(const float *x, const int32_t *y, int n, int d, int C, const pft_head_opts_t *o)
{
    if (n < 1 || d < 1 || C < 1 || !x || !y)
        return pft_err(PFT_EINVAL, "head: invalid problem (%d rows, %d features, %d classes)", n, d, C);
    if ((size_t)C * ((size_t)d + 1) > (size_t)INT32_MAX || (size_t)d + 1 > (size_t)INT32_MAX)
        return pft_err(PFT_EINVAL, "head: %d classes × %d features is too large", C, d);
    if (!(o->l2 >= 0.0 || o->l2 == PFT_HEAD_L2_AUTO) || !isfinite(o->l2) || o->max_iter < 0 ||
        !(o->tol >= 0.0) || o->history < 1 || o->history > 1000 || o->precond < PFT_HEAD_PRECOND_NONE ||
        o->precond > PFT_HEAD_PRECOND_WHITEN)
        return pft_err(PFT_EINVAL,
                       "head: invalid options (l2 %g, max_iter %d, tol %g, history %d, precond %d)", o->l2,
                       o->max_iter, o->tol, o->history, o->precond);
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= C)
            return pft_err(PFT_EINVAL, "head: row %d: label %d outside [0, %d)", i, (int)y[i], C);
    size_t m = (size_t)n * (size_t)d;
    for (size_t i = 0; i < m; i++)
        if (!isfinite(x[i]))
            return pft_err(PFT_EINVAL, "head: row %zu column %zu: feature is not finite", i / (size_t)d,
                           i % (size_t)d);
    return 0;
}

/* Soft targets: n rows of C finite, non-negative probabilities summing to 1 (to 1e-3). */
static int check_soft_targets(const float *q, int n, int C, double T, double alpha)
{
    if (!(T > 0.0) || !isfinite(T) || !(alpha >= 0.0 && alpha <= 1.0))
        return pft_err(PFT_EINVAL, "head distillation: temperature %g must be > 0 and alpha %g in [0, 1]", T,
                       alpha);
    if (!q)
        return pft_err(PFT_EINVAL, "head distillation: no soft targets");
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = 0; k < C; k++) {
            float v = q[(size_t)i * (size_t)C + (size_t)k];
            if (!isfinite(v) || v < 0.0f)
                return pft_err(PFT_EINVAL,
                               "head distillation: row %d class %d: soft target %g is not a probability", i,
                               k, (double)v);
            sum += v;
        }
        if (fabs(sum - 1.0) > 1e-3)
            return pft_err(PFT_EINVAL, "head distillation: row %d: soft targets sum to %g, not 1", i, sum);
    }
    return 0;
}

/* Row weights: finite and > 0, with a finite sum into *wsum (n without weights). */
static int check_weights(const double *w, int n, double *wsum)
{
    if (!w) {
        *wsum = n;
        return 0;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0.0) || !isfinite(w[i]))
            return pft_err(PFT_EINVAL, "head: row %d: weight %g must be finite and > 0", i, w[i]);
        sum += w[i];
    }
    if (!isfinite(sum))
        return pft_err(PFT_EINVAL, "head: the %d row weights sum to %g", n, sum);
    *wsum = sum;
    return 0;
}

/* Checks every input of an objective (soft targets if q, else α must be 1) and fills *o; l2 as opts.l2. */
static int objective_setup(const float *x, const int32_t *y, const float *q, const double *w, int n, int d,
                           int C, double T, double alpha, const pft_head_opts_t *opts, pft_head_obj_t *o)
{
    int rc = check_fit_args(x, y, n, d, C, opts);
    if (rc == 0 && q)
        rc = check_soft_targets(q, n, C, T, alpha);
    else if (rc == 0 && alpha != 1.0)
        rc = pft_err(PFT_EINVAL, "head objective: alpha %g < 1 needs soft targets", alpha);
    double wsum = 0.0;
    if (rc == 0)
        rc = check_weights(w, n, &wsum);
    if (rc)
        return rc;
    *o = (pft_head_obj_t){
        .x = x, .y = y, .q = q, .w = w, .wsum = wsum, .n = n, .d = d, .C = C, .alpha = alpha, .T = T};
    o->l2 = opts->l2 == PFT_HEAD_L2_AUTO ? 1.0 / wsum : opts->l2;
    return 0;
}

/* Shared entry of the fits: checks, resolves l2, opens the objective and runs fit. */
static int fit_entry(const float *x, const int32_t *y, const float *q, const double *w, int n, int d,
                     int n_classes, double T, double alpha, const pft_head_opts_t *opts, pft_head_t **out,
                     pft_head_info_t *info)
{
    pft_head_opts_t defaults;
    if (!opts) {
        pft_head_opts_default(&defaults);
        opts = &defaults;
    }
    *out = NULL;
    pft_head_obj_t o;
    int rc = objective_setup(x, y, q, w, n, d, n_classes, T, alpha, opts, &o);
    if (rc)
        return rc;
    pft_head_t *head = head_alloc(n_classes, d);
    pft_head_info_t scratch;
    rc = head ? pft_head__objective_open(&o) : pft_err(PFT_ENOMEM, "head: out of memory");
    if (rc == 0)
        pft_head__precondition(&o, opts->precond);
    rc = rc ? rc : pft_head__lbfgs(&o, opts, head->wb, info ? info : &scratch);
    pft_head__objective_close(&o);
    if (rc)
        pft_head_destroy(&head);
    *out = head;
    return rc;
}

int pft_head_fit(const float *x, const int32_t *y, int n, int d, int n_classes, const pft_head_opts_t *opts,
                 pft_head_t **out, pft_head_info_t *info)
{
    return fit_entry(x, y, NULL, NULL, n, d, n_classes, 1.0, 1.0, opts, out, info);
}

int pft_head_fit_weighted(const float *x, const int32_t *y, const double *w, int n, int d, int n_classes,
                          const pft_head_opts_t *opts, pft_head_t **out, pft_head_info_t *info)
{
    return fit_entry(x, y, NULL, w, n, d, n_classes, 1.0, 1.0, opts, out, info);
}

int pft_head_fit_distill(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                         double T, double alpha, const pft_head_opts_t *opts, pft_head_t **out,
                         pft_head_info_t *info)
{
    if (!q) {
        *out = NULL;
        return pft_err(PFT_EINVAL, "head distillation: no soft targets");
    }
    return fit_entry(x, y, q, NULL, n, d, n_classes, T, alpha, opts, out, info);
}

int pft_head_objective_weighted(const float *x, const int32_t *y, const float *q, const double *w, int n,
                                int d, int n_classes, double T, double alpha, double l2, const double *wb,
                                double *f, double *grad)
{
    pft_head_opts_t opts;
    pft_head_opts_default(&opts);
    opts.l2 = l2;
    pft_head_obj_t o;
    int rc = objective_setup(x, y, q, w, n, d, n_classes, T, alpha, &opts, &o);
    if (rc)
        return rc;
    rc = pft_head__objective_open(&o);
    double gmax;
    if (rc == 0) /* without a preconditioner θ is the raw [W | b] and the gradient is the raw gradient */
        rc = pft_head__evaluate(&o, wb, f, grad, &gmax);
    pft_head__objective_close(&o);
    return rc;
}

int pft_head_objective(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                       double T, double alpha, double l2, const double *wb, double *f, double *grad)
{
    return pft_head_objective_weighted(x, y, q, NULL, n, d, n_classes, T, alpha, l2, wb, f, grad);
}

int pft_head_from_weights(int n_classes, int d, const float *wb, pft_head_t **out)
{
    *out = NULL;
    if (n_classes < 1 || d < 1 || !wb || (size_t)n_classes * ((size_t)d + 1) > (size_t)INT32_MAX)
        return pft_err(PFT_EINVAL, "head: invalid weight matrix %d×(%d+1)", n_classes, d);
    size_t P = (size_t)n_classes * ((size_t)d + 1);
    for (size_t i = 0; i < P; i++)
        if (!isfinite(wb[i]))
            return pft_err(PFT_EINVAL, "head: weight row %zu column %zu is not finite", i / ((size_t)d + 1),
                           i % ((size_t)d + 1));
    pft_head_t *self = head_alloc(n_classes, d);
    if (!self)
        return pft_err(PFT_ENOMEM, "head: out of memory");
    memcpy(self->wb, wb, P * sizeof(float));
    *out = self;
    return 0;
}

void pft_head_destroy(pft_head_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_free((*self_p)->wb);
    pft_free(*self_p);
    *self_p = NULL;
}

int pft_head_n_classes(const pft_head_t *self)
{
    return self->n_classes;
}

int pft_head_dim(const pft_head_t *self)
{
    return self->d;
}

const float *pft_head_weights(const pft_head_t *self)
{
    return self->wb;
}

/* ---- inference ---- */

/* Calls fn(ctx, row, logits (double, C)) for every row; logits = W x + b via sgemm in blocks. */
typedef void (*row_fn)(void *ctx, int row, const double *logits, int C);

static int for_each_logits(const pft_head_t *self, const float *x, int n, row_fn fn, void *ctx)
{
    const int C = self->n_classes, d = self->d;
    const size_t dd = (size_t)d + 1;
    if (n <= 0)
        return 0;
    const int block = block_rows(C, d);
    float *z = pft_alloc_array((size_t)block * (size_t)C, sizeof(float));
    double *lg = pft_alloc_array((size_t)C, sizeof(double));
    if (!z || !lg) {
        pft_free(z);
        pft_free(lg);
        return pft_err(PFT_ENOMEM, "head: out of memory");
    }
    for (int i0 = 0; i0 < n; i0 += block) {
        int B = n - i0 < block ? n - i0 : block;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, C, d, 1.0f, x + (size_t)i0 * (size_t)d, d,
                    self->wb, (int)dd, 0.0f, z, C);
        for (int i = 0; i < B; i++) {
            for (int k = 0; k < C; k++)
                lg[k] = (double)z[(size_t)i * (size_t)C + (size_t)k] + self->wb[(size_t)k * dd + (size_t)d];
            fn(ctx, i0 + i, lg, C);
        }
    }
    pft_free(z);
    pft_free(lg);
    return 0;
}

static void logits_fn(void *ctx, int row, const double *lg, int C)
{
    float *out = (float *)ctx + (size_t)row * (size_t)C;
    for (int k = 0; k < C; k++)
        out[k] = (float)lg[k];
}

int pft_head_logits(const pft_head_t *self, const float *x, int n, float *logits)
{
    return for_each_logits(self, x, n, logits_fn, logits);
}

static void argmax_fn(void *ctx, int row, const double *lg, int C)
{
    int best = 0;
    for (int k = 1; k < C; k++)
        if (lg[k] > lg[best])
            best = k;
    ((int32_t *)ctx)[row] = best;
}

int pft_head_predict(const pft_head_t *self, const float *x, int n, int32_t *out)
{
    return for_each_logits(self, x, n, argmax_fn, out);
}

static void proba_fn(void *ctx, int row, const double *lg, int C)
{
    float *pr = (float *)ctx + (size_t)row * (size_t)C;
    double mx = lg[0], sum = 0.0;
    for (int k = 1; k < C; k++)
        mx = fmax(mx, lg[k]);
    for (int k = 0; k < C; k++)
        sum += exp(lg[k] - mx);
    for (int k = 0; k < C; k++)
        pr[k] = (float)(exp(lg[k] - mx) / sum);
}

int pft_head_predict_proba(const pft_head_t *self, const float *x, int n, float *proba)
{
    return for_each_logits(self, x, n, proba_fn, proba);
}

int pft_head_class_accuracy(const pft_head_t *self, const float *x, const int32_t *y, int n, double *acc,
                            int *counts)
{
    const int C = self->n_classes;
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= C)
            return pft_err(PFT_EINVAL, "head: row %d: label %d outside [0, %d)", i, (int)y[i], C);
    int32_t *pred = pft_alloc_array(n > 0 ? (size_t)n : 1, sizeof *pred);
    int *cnt = pft_calloc((size_t)C, sizeof *cnt), *hit = pft_calloc((size_t)C, sizeof *hit);
    int rc = 0;
    if (!pred || !cnt || !hit)
        rc = pft_err(PFT_ENOMEM, "head: out of memory");
    else
        rc = pft_head_predict(self, x, n, pred);
    if (!rc) {
        for (int i = 0; i < n; i++) {
            cnt[y[i]]++;
            hit[y[i]] += pred[i] == y[i];
        }
        for (int k = 0; k < C; k++) {
            acc[k] = cnt[k] ? (double)hit[k] / cnt[k] : NAN;
            if (counts)
                counts[k] = cnt[k];
        }
    }
    pft_free(pred);
    pft_free(cnt);
    pft_free(hit);
    return rc;
}

int pft_head_accuracy(const pft_head_t *self, const float *x, const int32_t *y, int n, double *acc)
{
    *acc = 0.0;
    if (n <= 0)
        return 0;
    int32_t *pred = pft_alloc_array((size_t)n, sizeof *pred);
    if (!pred)
        return pft_err(PFT_ENOMEM, "head: out of memory");
    int rc = pft_head_predict(self, x, n, pred);
    if (!rc) {
        int hit = 0;
        for (int i = 0; i < n; i++)
            hit += pred[i] == y[i];
        *acc = (double)hit / n;
    }
    pft_free(pred);
    return rc;
}
