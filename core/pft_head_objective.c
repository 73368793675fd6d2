/* pft_head_objective: the training objective of pft_head, its gradient, and the preconditioners.
 *
 * Objective (weighted mean over rows, as scikit-learn ≥ 1.1 scales it with sample_weight; w_i = 1 without
 * weights, so N = Σ_i w_i = n):
 *     f(W, b) = (1/N) Σ_i w_i [logsumexp_k(z_ik) − z_i,y_i] + (l2/2)‖W‖²,   z_i = W x_i + b.
 *     ∂f/∂W = (1/N) Rᵀ X + l2 W,   ∂f/∂b = (1/N) Σ_i R_i,   R_i = w_i (softmax(z_i) − onehot(y_i)).
 * A row of weight 2 is that row twice, exactly: the weight only multiplies the row's loss and residual.
 * One evaluation is one pass over X in blocks of rows that stay in L2: Z_blk = X_blk Wᵀ (SIMD kernel, float
 * sums), softmax rows in double, then G += R_blkᵀ X_blk (SIMD kernel) while X_blk is still in cache; block
 * gradients are summed in double. X is read from memory once per evaluation and never copied.
 *
 * Distillation (pft_head_fit_distill) weights the label term by α and adds a soft-target term per row,
 *     (1−α)·T²·CE(q_i, softmax(z_i/T)) = (1−α)·T²·Σ_k q_ik [logsumexp(z_i/T) − z_ik/T],
 * whose derivative w.r.t. z_i is (1−α)·T·((Σ_k q_ik)·softmax(z_i/T) − q_i): only the residual R changes,
 * so both fits share this objective and the optimiser (α = 1 and no q is pft_head_fit, bit for bit).
 *
 * Preconditioning: the optimiser runs on θ = [V | c] with W = V M, b = c − W μ, a linear change of variables
 * (the minimiser in (W, b) is unchanged; the bias absorbs the centring μ):
 *     ∂f/∂V = (∂f/∂W − ∂f/∂b μᵀ) Mᵀ,   ∂f/∂c = ∂f/∂b.
 * - diagonal (PFT_HEAD_PRECOND_DIAG): M = diag(1/s), s the weighted column scales (floored at √l2).
 * - whitening (PFT_HEAD_PRECOND_WHITEN, default): M = L⁻¹ with L Lᵀ = Σ + εI, Σ the weighted covariance of
 *   the rows. In θ the Hessian of the label term is ≈ A ⊗ Σ(Σ + εI)⁻¹ (A: the softmax curvature, exactly so
 *   at θ = 0) and that of the penalty l2·(Σ + εI)⁻¹: with ε ≈ l2/a (a: a typical softmax curvature) every
 *   direction gets about the same curvature, and whitening fully (ε → 0) would instead amplify the noisy
 *   directions of small variance. Measured on MobileNetV2 features (PACS, Fashion-MNIST; l2 rows and raw,
 *   weighted Gaussian draws; bench/head_bench.sh) the L-BFGS evaluations drop 3-5× against the diagonal
 *   scaling, which leaves the strong correlations between features. ε = max(50·l2, 5·trace(Σ)/d): on l2 rows
 *   the first term rules and 20·l2 … 100·l2 were within 10 % of each other (ε → l2: 2× more evaluations);
 *   on raw features (large variance against l2 = 1/n) the second, 2 … 10·trace/d alike. Σ comes from a
 *   strided subsample of at most d rows (only a preconditioner: d/2 rows did as well) and costs one SYRK and
 *   one Cholesky factorisation and inverse (~55 ms at d = 1280 with the means); M is applied with the SIMD
 *   kernels in float, two d×d×C products per evaluation (~5 % of one). */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_head_internal.h"
#include "pft_linalg.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define BLOCK_BYTES (1 << 19) /* rows per block: ≤ 512 KiB of X, in L2 between the two kernels */
#define WHITEN_EPS_L2 50.0    /* ε ≥ 50·l2 */
#define WHITEN_EPS_TRACE 5.0  /* ε ≥ 5·trace(Σ)/d: whiten the leading directions only */
#define WHITEN_ROWS_PER_DIM 1 /* covariance subsample: at most d rows */
#define WHITEN_MAX_D 4096     /* larger d: scaling instead (whitening holds d² floats) */
#define SYRK_ROWS 256         /* rows per SYRK call */

int pft_head__objective_open(pft_head_obj_t *o)
{
    const int C = o->C, d = o->d;
    int block = BLOCK_BYTES / (4 * d);
    o->block = block < 16 ? 16 : block > 1024 ? 1024 : block;
    o->P = (size_t)C * ((size_t)d + 1);
    o->precond = PFT_HEAD_PRECOND_NONE;
    o->mu = pft_calloc(2 * (size_t)d + 2 * o->P, sizeof(double)); /* mu, s, w_raw, g_raw */
    o->wf = pft_alloc_array(o->P, sizeof(float));
    o->z = pft_alloc_array((size_t)o->block * (size_t)C, sizeof(float));
    o->r = pft_alloc_array((size_t)o->block * (size_t)C, sizeof(float));
    o->e = pft_alloc_array(2 * (size_t)C, sizeof(double));
    o->gblk = pft_alloc_array((size_t)C * (size_t)d, sizeof(float));
    if (!o->mu || !o->wf || !o->z || !o->r || !o->e || !o->gblk)
        return pft_err(PFT_ENOMEM, "head: out of memory (%d classes × %d features)", C, d);
    o->s = o->mu + d;
    o->w_raw = o->s + d;
    o->g_raw = o->w_raw + o->P;
    for (int j = 0; j < d; j++)
        o->s[j] = 1.0;
    return 0;
}

void pft_head__objective_close(pft_head_obj_t *o)
{
    pft_free(o->mu);
    pft_free(o->wf);
    pft_free(o->z);
    pft_free(o->r);
    pft_free(o->e);
    pft_free(o->gblk);
    pft_free(o->pinv);
    pft_free(o->vt);
    o->mu = o->s = o->w_raw = o->g_raw = o->e = NULL;
    o->wf = o->z = o->r = o->gblk = o->pinv = o->vt = NULL;
}

/* ---- preconditioners ---- */

/* Weighted column means μ, and with scales (not NULL) the weighted column scales, floored at √l2 so that
 * l2/s² cannot dominate. Weighted, so that a row of weight 2 and that row twice give the same path. */
static void column_stats(const pft_head_obj_t *o, double *mu, double *s)
{
    const int d = o->d;
    memset(mu, 0, (size_t)d * sizeof *mu);
    for (int i = 0; i < o->n; i++) {
        const float *r = o->x + (size_t)i * (size_t)d;
        const double wi = o->w ? o->w[i] : 1.0;
        for (int j = 0; j < d; j++)
            mu[j] += wi * r[j];
    }
    for (int j = 0; j < d; j++)
        mu[j] /= o->wsum;
    if (!s)
        return;
    memset(s, 0, (size_t)d * sizeof *s);
    for (int i = 0; i < o->n; i++) {
        const float *r = o->x + (size_t)i * (size_t)d;
        const double wi = o->w ? o->w[i] : 1.0;
        for (int j = 0; j < d; j++) {
            double t = r[j] - mu[j];
            s[j] += wi * t * t;
        }
    }
    double floor = fmax(sqrt(o->l2), 1e-6);
    for (int j = 0; j < d; j++)
        s[j] = fmax(sqrt(s[j] / o->wsum), floor);
}

/* Σ + εI (lower triangle, d×d row-major floats) from the weighted covariance (about mu) of every stride-th
 * row, into a new *out. 1 when out of memory. Float throughout (accumulated by SSYRK): it is only a
 * preconditioner, and a node's memory peaks here (d² doubles would be 13 MB more at d = 1280). */
static int sub_covariance(const pft_head_obj_t *o, int stride, float **out)
{
    const int d = o->d;
    float *blk = pft_alloc_array((size_t)SYRK_ROWS * (size_t)d, sizeof(float));
    float *cov = blk ? pft_calloc((size_t)d * (size_t)d, sizeof(float)) : NULL;
    if (!cov) {
        pft_free(blk);
        return 1;
    }
    double wsub = 0.0, trace = 0.0;
    int b = 0;
    for (int i = 0; i < o->n; i += stride) {
        const double wi = o->w ? o->w[i] : 1.0, sw = sqrt(wi);
        const float *r = o->x + (size_t)i * (size_t)d;
        wsub += wi;
        for (int j = 0; j < d; j++)
            blk[(size_t)b * (size_t)d + (size_t)j] = (float)(sw * (r[j] - o->mu[j]));
        if (++b == SYRK_ROWS || i + stride >= o->n) {
            cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, d, b, 1.0f, blk, d, 1.0f, cov, d);
            b = 0;
        }
    }
    pft_free(blk);
    const float inv = (float)(1.0 / wsub);
    for (int i = 0; i < d; i++)
        for (int j = 0; j <= i; j++)
            cov[(size_t)i * (size_t)d + (size_t)j] *= inv;
    for (int j = 0; j < d; j++)
        trace += cov[(size_t)j * (size_t)d + (size_t)j];
    const double eps = fmax(WHITEN_EPS_L2 * o->l2, WHITEN_EPS_TRACE * trace / d);
    for (int j = 0; j < d; j++)
        cov[(size_t)j * (size_t)d + (size_t)j] += (float)eps;
    *out = cov;
    return 0;
}

/* pinv = L⁻¹, L Lᵀ = Σ + εI (theory at the top), in float; o->pinv and o->vt set. 1 (o unchanged) when
 * whitening is not possible: Σ + εI not positive definite in floating point (ε = 0: l2 = 0 and every feature
 * constant), d above WHITEN_MAX_D, or not enough memory for d² floats (it is only a preconditioner). */
static int whiten(pft_head_obj_t *o)
{
    const int d = o->d, max_rows = WHITEN_ROWS_PER_DIM * d;
    const int stride = o->n <= max_rows ? 1 : (o->n + max_rows - 1) / max_rows;
    float *a = NULL, *vt = NULL;
    if (d > WHITEN_MAX_D || sub_covariance(o, stride, &a))
        return 1;
    int rc = 1;
    if (!(a[0] > 0.0f) /* ε = 0 and a zero first feature */ || pft_la_chol_tri_inverse_lower_f(a, d))
        goto done;
    vt = pft_alloc_array((size_t)d * (size_t)o->C, sizeof(float));
    if (!vt)
        goto done;
    o->pinv = a, a = NULL; /* the upper triangle is zero */
    o->vt = vt, vt = NULL;
    rc = 0;
done:
    pft_free(a);
    pft_free(vt);
    return rc;
}

void pft_head__precondition(pft_head_obj_t *o, int kind)
{
    if (kind == PFT_HEAD_PRECOND_NONE)
        return;
    if (kind == PFT_HEAD_PRECOND_WHITEN) {
        column_stats(o, o->mu, NULL);
        if (whiten(o) == 0) {
            o->precond = PFT_HEAD_PRECOND_WHITEN;
            return;
        }
        pft_err_clear(); /* the diagonal preconditioner instead */
    }
    column_stats(o, o->mu, o->s);
    o->precond = PFT_HEAD_PRECOND_DIAG;
}

/* ---- objective ---- */

/* W = V M into the first d columns of raw (row stride d+1); raw's bias column untouched. */
static void apply_m(pft_head_obj_t *o, const double *theta, double *raw)
{
    const int C = o->C, d = o->d;
    const size_t dd = (size_t)d + 1;
    if (!o->pinv) {
        for (int k = 0; k < C; k++)
            for (int j = 0; j < d; j++)
                raw[(size_t)k * dd + (size_t)j] = theta[(size_t)k * dd + (size_t)j] / o->s[j];
        return;
    }
    /* W_kj = Σ_m V_km pinv_mj: the gradient kernel with pinv as the rows and Vᵀ as the residuals. */
    for (int m = 0; m < d; m++)
        for (int k = 0; k < C; k++)
            o->vt[(size_t)m * (size_t)C + (size_t)k] = (float)theta[(size_t)k * dd + (size_t)m];
    memset(o->gblk, 0, (size_t)C * (size_t)d * sizeof *o->gblk);
    pft_head_k_grad(o->pinv, d, d, o->vt, C, o->gblk, d);
    for (int k = 0; k < C; k++)
        for (int j = 0; j < d; j++)
            raw[(size_t)k * dd + (size_t)j] = o->gblk[(size_t)k * (size_t)d + (size_t)j];
}

void pft_head__theta_to_raw(pft_head_obj_t *o, const double *theta, double *raw)
{
    const size_t dd = (size_t)o->d + 1;
    apply_m(o, theta, raw);
    for (int k = 0; k < o->C; k++) {
        double *r = raw + (size_t)k * dd, shift = 0.0;
        for (int j = 0; j < o->d; j++)
            shift += r[j] * o->mu[j];
        r[o->d] = theta[(size_t)k * dd + (size_t)o->d] - shift;
    }
}

/* g ← (g_raw − g_b μᵀ) Mᵀ and g_c = g_b: the gradient in θ from the raw gradient. */
static void gradient_to_theta(pft_head_obj_t *o, double *g)
{
    const int C = o->C, d = o->d;
    const size_t dd = (size_t)d + 1;
    for (int k = 0; k < C; k++) {
        const double *gr = o->g_raw + (size_t)k * dd;
        double *gt = g + (size_t)k * dd;
        for (int j = 0; j < d; j++)
            gt[j] = (gr[j] - gr[d] * o->mu[j]) / o->s[j];
        gt[d] = gr[d];
    }
    if (!o->pinv)
        return;
    /* (g Mᵀ)_km = Σ_j g_kj pinv_mj: the logits kernel with pinv as the rows and g as the weights. */
    for (int k = 0; k < C; k++)
        for (int j = 0; j < d; j++)
            o->wf[(size_t)k * dd + (size_t)j] = (float)g[(size_t)k * dd + (size_t)j];
    pft_head_k_logits(o->pinv, d, d, o->wf, (int)dd, C, o->vt);
    for (int k = 0; k < C; k++)
        for (int m = 0; m < d; m++)
            g[(size_t)k * dd + (size_t)m] = o->vt[(size_t)m * (size_t)C + (size_t)k];
}

/* Loss of row i (label and soft terms, weighted) from its logits z (float, bias not added); its residuals
 * ∂/∂z into r (C floats). *soft gets the soft term. */
static double row_loss(pft_head_obj_t *o, int i, const float *z, float *r, double *soft)
{
    const int C = o->C;
    const size_t dd = (size_t)o->d + 1;
    const double a_hard = o->alpha, a_soft = o->q ? 1.0 - o->alpha : 0.0, T = o->T;
    const double wi = o->w ? o->w[i] : 1.0;
    const int yi = o->y[i];
    double *e = o->e, *es = o->e + C, zmax = -DBL_MAX, sum = 0.0, qsum = 0.0, sum_t = 0.0;
    for (int k = 0; k < C; k++) {
        e[k] = (double)z[k] + o->w_raw[(size_t)k * dd + (size_t)o->d];
        zmax = fmax(zmax, e[k]);
    }
    const float *qi = a_soft != 0.0 ? o->q + (size_t)i * (size_t)C : NULL;
    if (qi) { /* soft term, from the logits before e is overwritten */
        double qz = 0.0;
        for (int k = 0; k < C; k++) {
            sum_t += es[k] = exp((e[k] - zmax) / T);
            qsum += qi[k];
            qz += qi[k] * (e[k] - zmax) / T;
        }
        *soft += wi * T * T * (qsum * log(sum_t) - qz); /* Σ q_k (lse(z/T) − z_k/T), less zmax/T */
    }
    double loss = zmax - e[yi];
    for (int k = 0; k < C; k++)
        sum += e[k] = exp(e[k] - zmax);
    for (int k = 0; k < C; k++) {
        double rk = a_hard * (e[k] / sum - (k == yi ? 1.0 : 0.0));
        if (qi)
            rk += a_soft * T * (qsum * es[k] / sum_t - qi[k]);
        r[k] = (float)(wi * rk);
    }
    return wi * (loss + log(sum));
}

/* One pass over the rows: Σ_i w_i CE_i (label term) into *loss, the soft term into *soft, the unnormalised
 * raw gradient Σ_i R_iᵀ [x_i | 1] into g_raw. */
static void data_pass(pft_head_obj_t *o, double *loss, double *soft)
{
    const int C = o->C, d = o->d;
    const size_t dd = (size_t)d + 1;
    memset(o->g_raw, 0, o->P * sizeof *o->g_raw);
    for (int i0 = 0; i0 < o->n; i0 += o->block) {
        const int B = o->n - i0 < o->block ? o->n - i0 : o->block;
        const float *xb = o->x + (size_t)i0 * (size_t)d;
        pft_head_k_logits(xb, B, d, o->wf, (int)dd, C, o->z);
        for (int i = 0; i < B; i++) {
            float *ri = o->r + (size_t)i * (size_t)C;
            *loss += row_loss(o, i0 + i, o->z + (size_t)i * (size_t)C, ri, soft);
            for (int k = 0; k < C; k++)
                o->g_raw[(size_t)k * dd + (size_t)d] += ri[k];
        }
        memset(o->gblk, 0, (size_t)C * (size_t)d * sizeof *o->gblk);
        pft_head_k_grad(xb, B, d, o->r, C, o->gblk, d);
        for (int k = 0; k < C; k++)
            for (int j = 0; j < d; j++)
                o->g_raw[(size_t)k * dd + (size_t)j] += o->gblk[(size_t)k * (size_t)d + (size_t)j];
    }
}

int pft_head__evaluate(pft_head_obj_t *o, const double *theta, double *f, double *g, double *gmax)
{
    const int C = o->C, d = o->d;
    const size_t dd = (size_t)d + 1;
    o->evals++;
    pft_head__theta_to_raw(o, theta, o->w_raw);
    for (size_t i = 0; i < o->P; i++)
        o->wf[i] = (float)o->w_raw[i];
    double loss = 0.0, soft = 0.0;
    data_pass(o, &loss, &soft);

    const double inv_n = 1.0 / o->wsum;
    double pen = 0.0, gm = 0.0;
    for (int k = 0; k < C; k++) {
        double *gr = o->g_raw + (size_t)k * dd;
        const double *wr = o->w_raw + (size_t)k * dd;
        for (int j = 0; j < d; j++) {
            pen += wr[j] * wr[j];
            gr[j] = gr[j] * inv_n + o->l2 * wr[j];
        }
        gr[d] *= inv_n;
        for (size_t j = 0; j < dd; j++)
            gm = fmax(gm, fabs(gr[j]));
    }
    gradient_to_theta(o, g);
    *f = (o->alpha * loss + (o->q ? 1.0 - o->alpha : 0.0) * soft) * inv_n + 0.5 * o->l2 * pen;
    *gmax = gm;
    if (!isfinite(*f) || !isfinite(gm))
        return pft_err(PFT_ENUMERIC, "head training: objective became non-finite");
    return 0;
}
