/* pft_head: multinomial logistic regression, full-batch L-BFGS on a GEMM-based objective.
 *
 * Objective (mean over rows, as scikit-learn ≥ 1.1 scales it):
 *     f(W, b) = (1/n) Σ_i [logsumexp_k(z_ik) − z_i,y_i] + (l2/2)‖W‖²,   z_i = W x_i + b.
 *     ∂f/∂W = (1/n) Rᵀ X + l2 W,   ∂f/∂b = (1/n) Σ_i R_i,   R = softmax(Z) − onehot(y).
 * One evaluation walks X in row blocks: Z_blk = X_blk Wᵀ (sgemm), softmax rows in double, then
 * G_blk = R_blkᵀ X_blk (sgemm) while X_blk is still in cache; block gradients are summed in double.
 *
 * Distillation (pft_head_fit_distill) weights the label term by α and adds a soft-target term per row,
 *     (1−α)·T²·CE(q_i, softmax(z_i/T)) = (1−α)·T²·Σ_k q_ik [logsumexp(z_i/T) − z_ik/T],
 * whose derivative w.r.t. z_i is (1−α)·T·((Σ_k q_ik)·softmax(z_i/T) − q_i): only the residual R changes,
 * so both fits share this objective and the optimiser below (α = 1 and no q is pft_head_fit, bit for bit).
 *
 * Preconditioning (opts.standardize): L-BFGS runs on θ = [V | c] with W = V diag(1/s),
 * b = c − W μ (μ, s: column means and scales of X). This is a linear change of variables, so the
 * minimiser in (W, b) is unchanged; the bias absorbs the centring, and the scaling equalises the
 * curvature of the features, which cuts the iteration count several-fold on real features.
 * ∂f/∂V_kj = (∂f/∂W_kj − ∂f/∂b_k μ_j) / s_j,  ∂f/∂c = ∂f/∂b.
 *
 * L-BFGS: two-loop recursion with H0 = (sᵀy / yᵀy) I, strong-Wolfe line search (Nocedal & Wright,
 * Algorithms 3.5/3.6, c1 = 1e-4, c2 = 0.9, cubic interpolation with safeguards), which also accepts
 * Hager & Zhang's approximate Wolfe points (SIAM J. Optim. 16(1), 2005) so that convergence is not
 * stopped by rounding noise in f. */
#include "pft_head.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

/* Rows per GEMM block: B·C·d ≈ 2^19 keeps each product in OpenBLAS's small-matrix kernels (measured 2-4×
 * faster than the general path for C ≈ 10 outputs) and a block of X in L2 for the second product. */
#define BLOCK_WORK (1 << 19)
#define BLOCK_MIN 16
#define BLOCK_MAX 256
#define MAX_LS_EVALS 25
#define WOLFE_C1 1e-4
#define WOLFE_C2 0.9
#define APPROX_WOLFE_EPS 1e-6 /* relative slack on f for the approximate Wolfe test */

struct pft_head_t {
    int n_classes; /* C */
    int d;         /* input dimension */
    float *wb;     /* C×(d+1) row-major [W | b] */
};

void pft_head_opts_default(pft_head_opts_t *opts)
{
    *opts = (pft_head_opts_t){
        .l2 = PFT_HEAD_L2_AUTO, .max_iter = 1000, .tol = 1e-5, .history = 30, .standardize = 1};
}

/* ---- objective ---- */

static int block_rows(int C, int d)
{
    double b = (double)BLOCK_WORK / ((double)C * (double)d);
    return b < BLOCK_MIN ? BLOCK_MIN : b > BLOCK_MAX ? BLOCK_MAX : (int)b;
}

typedef struct {
    const float *x;   /* n×d */
    const int32_t *y; /* n */
    const float *q;   /* n×C soft targets, or NULL: no soft-target term */
    int n, d, C;
    int block; /* rows per GEMM block */
    size_t P;  /* parameters: C·(d+1) */
    double l2;
    double alpha;   /* weight of the label term (1 without distillation) */
    double T;       /* temperature of the soft-target term */
    double *mu, *s; /* column means / scales (0 and 1 without standardisation) */
    double *w_raw;  /* C×(d+1) raw [W | b] for the current θ */
    float *wf;      /* C×(d+1) float copy of w_raw for sgemm */
    float *z;       /* block×C logits */
    float *rt;      /* C×block residuals R = ∂(row loss)/∂z, transposed */
    double *e;      /* 2C scratch: logits, then exponentials; [C, 2C): exponentials at temperature T */
    float *gblk;    /* C×d block gradient */
    double *g_raw;  /* C×(d+1) raw gradient */
    int evals;
} objective_t;

/* Allocates o's buffers for the sizes already set in o (n, d, C); mu = 0, s = 1. PFT_ENOMEM on failure
 * (objective_close releases what was allocated). */
static int objective_open(objective_t *o)
{
    const int C = o->C, d = o->d;
    o->P = (size_t)C * ((size_t)d + 1);
    o->block = block_rows(C, d);
    o->mu = pft_calloc(2 * (size_t)d + 2 * o->P, sizeof(double)); /* mu, s, w_raw, g_raw */
    o->wf = pft_alloc_array(o->P, sizeof(float));
    o->z = pft_alloc_array((size_t)o->block * (size_t)C, sizeof(float));
    o->rt = pft_alloc_array((size_t)o->block * (size_t)C, sizeof(float));
    o->e = pft_alloc_array(2 * (size_t)C, sizeof(double));
    o->gblk = pft_alloc_array((size_t)C * (size_t)d, sizeof(float));
    if (!o->mu || !o->wf || !o->z || !o->rt || !o->e || !o->gblk)
        return pft_err(PFT_ENOMEM, "head: out of memory (%d classes × %d features)", C, d);
    o->s = o->mu + d;
    o->w_raw = o->s + d;
    o->g_raw = o->w_raw + o->P;
    for (int j = 0; j < d; j++)
        o->s[j] = 1.0;
    return 0;
}

static void objective_close(objective_t *o)
{
    pft_free(o->mu);
    pft_free(o->wf);
    pft_free(o->z);
    pft_free(o->rt);
    pft_free(o->e);
    pft_free(o->gblk);
    o->mu = o->s = o->w_raw = o->g_raw = o->e = NULL;
    o->wf = o->z = o->rt = o->gblk = NULL;
}

/* θ (preconditioned [V | c]) → raw [W | b]. */
static void theta_to_raw(const objective_t *o, const double *theta, double *raw)
{
    size_t dd = (size_t)o->d + 1;
    for (int k = 0; k < o->C; k++) {
        const double *t = theta + (size_t)k * dd;
        double *r = raw + (size_t)k * dd;
        double shift = 0.0;
        for (int j = 0; j < o->d; j++) {
            r[j] = t[j] / o->s[j];
            shift += r[j] * o->mu[j];
        }
        r[o->d] = t[o->d] - shift;
    }
}

/* Evaluates f and the preconditioned gradient g at θ; *gmax = max |raw gradient|. */
static int evaluate(objective_t *o, const double *theta, double *f, double *g, double *gmax)
{
    const int C = o->C, d = o->d;
    const size_t dd = (size_t)d + 1;
    o->evals++;
    theta_to_raw(o, theta, o->w_raw);
    for (size_t i = 0; i < o->P; i++)
        o->wf[i] = (float)o->w_raw[i];
    memset(o->g_raw, 0, o->P * sizeof *o->g_raw);

    const double a_hard = o->alpha, a_soft = o->q ? 1.0 - o->alpha : 0.0, T = o->T;
    double loss = 0.0, soft = 0.0;
    for (int i0 = 0; i0 < o->n; i0 += o->block) {
        int B = o->n - i0 < o->block ? o->n - i0 : o->block;
        const float *xb = o->x + (size_t)i0 * (size_t)d;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, C, d, 1.0f, xb, d, o->wf, (int)dd, 0.0f, o->z,
                    C);
        for (int i = 0; i < B; i++) {
            const float *zr = o->z + (size_t)i * (size_t)C;
            double zmax = -DBL_MAX, sum = 0.0;
            for (int k = 0; k < C; k++) {
                o->e[k] = (double)zr[k] + o->w_raw[(size_t)k * dd + (size_t)d];
                zmax = fmax(zmax, o->e[k]);
            }
            int yi = o->y[i0 + i];
            double *es = o->e + C, qsum = 0.0, sum_t = 0.0;
            const float *qi = a_soft != 0.0 ? o->q + (size_t)(i0 + i) * (size_t)C : NULL;
            if (qi) { /* soft term, from the logits before e is overwritten */
                double qz = 0.0;
                for (int k = 0; k < C; k++) {
                    sum_t += es[k] = exp((o->e[k] - zmax) / T);
                    qsum += qi[k];
                    qz += qi[k] * (o->e[k] - zmax) / T;
                }
                soft += T * T * (qsum * log(sum_t) - qz); /* Σ q_k (lse(z/T) − z_k/T), shifted by zmax/T */
            }
            loss += zmax - o->e[yi];
            for (int k = 0; k < C; k++)
                sum += o->e[k] = exp(o->e[k] - zmax);
            loss += log(sum);
            for (int k = 0; k < C; k++) {
                double r = a_hard * (o->e[k] / sum - (k == yi ? 1.0 : 0.0));
                if (qi)
                    r += a_soft * T * (qsum * es[k] / sum_t - qi[k]);
                o->g_raw[(size_t)k * dd + (size_t)d] += r;
                o->rt[(size_t)k * (size_t)B + (size_t)i] = (float)r; /* R transposed: C×B */
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, d, B, 1.0f, o->rt, B, xb, d, 0.0f, o->gblk,
                    d);
        for (int k = 0; k < C; k++)
            for (int j = 0; j < d; j++)
                o->g_raw[(size_t)k * dd + (size_t)j] += o->gblk[(size_t)k * (size_t)d + (size_t)j];
    }

    const double inv_n = 1.0 / o->n;
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
        double *gt = g + (size_t)k * dd;
        for (int j = 0; j < d; j++)
            gt[j] = (gr[j] - gr[d] * o->mu[j]) / o->s[j];
        gt[d] = gr[d];
    }
    *f = (a_hard * loss + a_soft * soft) * inv_n + 0.5 * o->l2 * pen;
    *gmax = gm;
    if (!isfinite(*f) || !isfinite(gm))
        return pft_err(PFT_ENUMERIC, "head training: objective became non-finite");
    return 0;
}

/* ---- L-BFGS ---- */

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* A point on the search line: step, value, gradient, directional derivative; x and g are owned buffers. */
typedef struct {
    double a, f, gtd, gmax;
    double *x, *g;
} point_t;

static void swap_points(point_t *p, point_t *q)
{
    point_t t = *p;
    *p = *q;
    *q = t;
}

/* Evaluates at x0 + a·dir into *pt. */
static int eval_at(objective_t *o, const double *x0, const double *dir, double a, point_t *pt)
{
    for (size_t i = 0; i < o->P; i++)
        pt->x[i] = x0[i] + a * dir[i];
    pt->a = a;
    int rc = evaluate(o, pt->x, &pt->f, pt->g, &pt->gmax);
    if (!rc)
        pt->gtd = dot(pt->g, dir, o->P);
    return rc;
}

/* Minimiser of the cubic through (a, fa, da), (b, fb, db), kept inside [lo + 0.1w, hi − 0.1w]; bisection
 * if the cubic has no usable minimiser. */
static double cubic_step(double a, double fa, double da, double b, double fb, double db)
{
    double lo = fmin(a, b), hi = fmax(a, b), w = hi - lo;
    double d1 = da + db - 3.0 * (fa - fb) / (a - b);
    double disc = d1 * d1 - da * db;
    double t = 0.5 * (a + b);
    if (disc >= 0.0) {
        double d2 = copysign(sqrt(disc), b - a);
        double den = db - da + 2.0 * d2;
        if (den != 0.0) {
            double c = b - (b - a) * (db + d2 - d1) / den;
            if (isfinite(c))
                t = c;
        }
    }
    if (!(t >= lo + 0.1 * w && t <= hi - 0.1 * w))
        t = 0.5 * (a + b);
    return t;
}

/* Strong-Wolfe line search from *cur along dir (cur->gtd < 0). On success *cur holds the accepted point
 * and 0 is returned; 1 means no acceptable step was found (cur unchanged); < 0 is an error.
 * trial, lo, hi are scratch points. */
static int line_search(objective_t *o, point_t *cur, const double *dir, double a0, point_t *trial,
                       point_t *lo, point_t *hi)
{
    const double f0 = cur->f, d0 = cur->gtd;
    int rc, evals = 0;
    /* lo starts as the current point (a = 0): copy its scalars; its x/g are only read after an update. */
    lo->a = 0.0;
    lo->f = f0;
    lo->gtd = d0;
    int lo_valid = 0; /* lo holds an evaluated point with a > 0 */
    double a = a0;
    int bracketed = 0;
    for (;;) {
        if (evals++ >= MAX_LS_EVALS)
            break;
        if ((rc = eval_at(o, cur->x, dir, a, trial)))
            return rc;
        int armijo = trial->f <= f0 + WOLFE_C1 * a * d0;
        /* Hager-Zhang approximate Wolfe conditions: near the optimum the decrease Armijo asks for falls
         * below the rounding noise of f (float32 logits), while the directional derivative stays
         * accurate; accept a step that flattens the slope enough if f has not risen beyond the noise. */
        if (trial->f <= f0 + APPROX_WOLFE_EPS * fabs(f0) && trial->gtd >= WOLFE_C2 * d0 &&
            trial->gtd <= (2.0 * WOLFE_C1 - 1.0) * d0) {
            swap_points(cur, trial);
            return 0;
        }
        if (!bracketed) {
            if (!armijo || (lo_valid && trial->f >= lo->f)) {
                swap_points(hi, trial);
                bracketed = 1;
            } else if (fabs(trial->gtd) <= -WOLFE_C2 * d0) {
                swap_points(cur, trial);
                return 0;
            } else if (trial->gtd >= 0.0) {
                swap_points(hi, lo); /* hi: the previous lo (a = 0 is scalars only; hi is never returned) */
                swap_points(lo, trial);
                lo_valid = 1;
                bracketed = 1;
            } else {
                swap_points(lo, trial);
                lo_valid = 1;
                a = fmin(4.0 * a, 1e10); /* extrapolate */
                continue;
            }
        } else {
            if (!armijo || trial->f >= lo->f) {
                swap_points(hi, trial);
            } else {
                if (fabs(trial->gtd) <= -WOLFE_C2 * d0) {
                    swap_points(cur, trial);
                    return 0;
                }
                if (trial->gtd * (hi->a - lo->a) >= 0.0)
                    swap_points(hi, lo);
                swap_points(lo, trial);
                lo_valid = 1;
            }
        }
        if (fabs(hi->a - lo->a) <= 1e-12 * fmax(1.0, hi->a))
            break;
        a = cubic_step(lo->a, lo->f, lo->gtd, hi->a, hi->f, hi->gtd);
    }
    /* Out of evaluations: accept the best point found if it decreased f sufficiently. */
    if (lo_valid && lo->f <= f0 + WOLFE_C1 * lo->a * d0 && lo->f < f0) {
        swap_points(cur, lo);
        return 0;
    }
    return 1;
}

/* Column means and scales for the preconditioner (scale floor keeps l2/s² from dominating). */
static void column_stats(const float *x, int n, int d, double l2, double *mu, double *s)
{
    for (int j = 0; j < d; j++)
        mu[j] = s[j] = 0.0;
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * (size_t)d;
        for (int j = 0; j < d; j++)
            mu[j] += r[j];
    }
    for (int j = 0; j < d; j++)
        mu[j] /= n;
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * (size_t)d;
        for (int j = 0; j < d; j++) {
            double t = r[j] - mu[j];
            s[j] += t * t;
        }
    }
    double floor = fmax(sqrt(l2), 1e-6);
    for (int j = 0; j < d; j++)
        s[j] = fmax(sqrt(s[j] / n), floor);
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
        !(o->tol >= 0.0) || o->history < 1 || o->history > 1000)
        return pft_err(PFT_EINVAL, "head: invalid options (l2 %g, max_iter %d, tol %g, history %d)", o->l2,
                       o->max_iter, o->tol, o->history);
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

/* Two-loop recursion: dir = −H g from the stored pairs (ring buffer, newest at (next − 1) mod m). */
static void lbfgs_direction(const double *g, const double *S, const double *Y, const double *rho,
                            double *alpha, int stored, int next, int m, size_t P, double *dir)
{
    for (size_t i = 0; i < P; i++)
        dir[i] = -g[i];
    for (int j = 0; j < stored; j++) {
        int k = (next - 1 - j + m) % m;
        alpha[k] = rho[k] * dot(S + (size_t)k * P, dir, P);
        for (size_t i = 0; i < P; i++)
            dir[i] -= alpha[k] * Y[(size_t)k * P + i];
    }
    if (stored > 0) {
        int k = (next - 1 + m) % m;
        const double *yk = Y + (size_t)k * P;
        double gamma = 1.0 / (rho[k] * dot(yk, yk, P)); /* sᵀy / yᵀy */
        for (size_t i = 0; i < P; i++)
            dir[i] *= gamma;
    }
    for (int j = stored - 1; j >= 0; j--) {
        int k = (next - 1 - j + m) % m;
        double beta = rho[k] * dot(Y + (size_t)k * P, dir, P);
        for (size_t i = 0; i < P; i++)
            dir[i] += (alpha[k] - beta) * S[(size_t)k * P + i];
    }
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

/* Minimises the objective o (sizes, data and term weights set, buffers open) by L-BFGS; *out as pft_head_fit.
 */
static int fit(objective_t *o, const pft_head_opts_t *opts, pft_head_t **out, pft_head_info_t *info)
{
    const int C = o->C, d = o->d, n = o->n, m = opts->history;
    const size_t P = o->P;
    int rc = 0;
    /* One arena of doubles: dir, x_old, g_old; 4 points × (x, g); S, Y (m each). */
    double *arena = pft_calloc((3 + 8 + 2 * (size_t)m) * P, sizeof(double));
    double *rho = pft_calloc((size_t)m, sizeof(double));
    double *alpha = pft_calloc((size_t)m, sizeof(double));
    pft_head_t *head = head_alloc(C, d);
    if (!arena || !rho || !alpha || !head) {
        rc = pft_err(PFT_ENOMEM, "head: out of memory (%d classes × %d features)", C, d);
        goto done;
    }
    double *p = arena;
    double *dir = p, *x_old = p + P, *g_old = p + 2 * P;
    p += 3 * P;
    point_t pts[4];
    for (int i = 0; i < 4; i++) {
        pts[i].x = p, p += P;
        pts[i].g = p, p += P;
    }
    double *S = p, *Y = p + (size_t)m * P;
    point_t *cur = &pts[0];

    if (opts->standardize)
        column_stats(o->x, n, d, o->l2, o->mu, o->s);

    /* Start at θ = 0: W = 0, b = 0 (uniform probabilities). */
    if ((rc = evaluate(o, cur->x, &cur->f, cur->g, &cur->gmax)))
        goto done;
    int iters = 0, stored = 0, next = 0, converged = cur->gmax <= opts->tol;
    while (!converged && iters < opts->max_iter) {
        if (opts->on_iter)
            opts->on_iter(opts->on_iter_ctx);
        lbfgs_direction(cur->g, S, Y, rho, alpha, stored, next, m, P, dir);
        cur->gtd = dot(cur->g, dir, P);
        if (!(cur->gtd < 0.0)) { /* not a descent direction: restart from steepest descent */
            stored = 0;
            lbfgs_direction(cur->g, S, Y, rho, alpha, 0, next, m, P, dir);
            cur->gtd = dot(cur->g, dir, P);
        }
        double a0 = stored == 0 ? fmin(1.0, 1.0 / sqrt(-cur->gtd)) : 1.0;
        memcpy(x_old, cur->x, P * sizeof(double));
        memcpy(g_old, cur->g, P * sizeof(double));
        int ls = line_search(o, cur, dir, a0, &pts[1], &pts[2], &pts[3]);
        if (ls < 0) {
            rc = ls;
            goto done;
        }
        iters++;
        if (ls > 0) {
            if (stored == 0)
                break;  /* even steepest descent finds no decrease: at the precision limit */
            stored = 0; /* drop the curvature history and retry */
            continue;
        }
        double *sk = S + (size_t)next * P, *yk = Y + (size_t)next * P;
        for (size_t i = 0; i < P; i++) {
            sk[i] = cur->x[i] - x_old[i];
            yk[i] = cur->g[i] - g_old[i];
        }
        double sy = dot(sk, yk, P), yy = dot(yk, yk, P);
        if (sy > 1e-12 * yy && yy > 0.0) { /* keep H positive definite */
            rho[next] = 1.0 / sy;
            next = (next + 1) % m;
            if (stored < m)
                stored++;
        }
        converged = cur->gmax <= opts->tol;
    }

    /* Export raw weights [W | b]. */
    theta_to_raw(o, cur->x, o->w_raw);
    for (size_t i = 0; i < P; i++)
        head->wb[i] = (float)o->w_raw[i];
    if (info)
        *info = (pft_head_info_t){.iters = iters,
                                  .evals = o->evals,
                                  .converged = converged,
                                  .l2 = o->l2,
                                  .loss = cur->f,
                                  .grad_max = cur->gmax};
done:
    pft_free(arena);
    pft_free(rho);
    pft_free(alpha);
    if (rc)
        pft_head_destroy(&head);
    *out = head;
    return rc;
}

/* Shared entry of both fits: checks, resolves l2, opens the objective and runs fit. */
static int fit_entry(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes, double T,
                     double alpha, const pft_head_opts_t *opts, pft_head_t **out, pft_head_info_t *info)
{
    pft_head_opts_t defaults;
    if (!opts) {
        pft_head_opts_default(&defaults);
        opts = &defaults;
    }
    *out = NULL;
    int rc = check_fit_args(x, y, n, d, n_classes, opts);
    if (rc == 0 && q)
        rc = check_soft_targets(q, n, n_classes, T, alpha);
    if (rc)
        return rc;
    objective_t o = {.x = x, .y = y, .q = q, .n = n, .d = d, .C = n_classes, .alpha = alpha, .T = T};
    o.l2 = opts->l2 == PFT_HEAD_L2_AUTO ? 1.0 / n : opts->l2;
    rc = objective_open(&o);
    if (rc == 0)
        rc = fit(&o, opts, out, info);
    objective_close(&o);
    return rc;
}

int pft_head_fit(const float *x, const int32_t *y, int n, int d, int n_classes, const pft_head_opts_t *opts,
                 pft_head_t **out, pft_head_info_t *info)
{
    return fit_entry(x, y, NULL, n, d, n_classes, 1.0, 1.0, opts, out, info);
}

int pft_head_fit_distill(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                         double T, double alpha, const pft_head_opts_t *opts, pft_head_t **out,
                         pft_head_info_t *info)
{
    if (!q) {
        *out = NULL;
        return pft_err(PFT_EINVAL, "head distillation: no soft targets");
    }
    return fit_entry(x, y, q, n, d, n_classes, T, alpha, opts, out, info);
}

int pft_head_objective(const float *x, const int32_t *y, const float *q, int n, int d, int n_classes,
                       double T, double alpha, double l2, const double *wb, double *f, double *grad)
{
    pft_head_opts_t opts;
    pft_head_opts_default(&opts);
    opts.l2 = l2;
    int rc = check_fit_args(x, y, n, d, n_classes, &opts);
    if (rc == 0 && q)
        rc = check_soft_targets(q, n, n_classes, T, alpha);
    else if (rc == 0 && alpha != 1.0)
        rc = pft_err(PFT_EINVAL, "head objective: alpha %g < 1 needs soft targets", alpha);
    if (rc)
        return rc;
    objective_t o = {.x = x, .y = y, .q = q, .n = n, .d = d, .C = n_classes, .alpha = alpha, .T = T};
    o.l2 = l2 == PFT_HEAD_L2_AUTO ? 1.0 / n : l2;
    rc = objective_open(&o);
    double gmax;
    if (rc == 0) /* without standardisation θ is the raw [W | b] and the gradient is the raw gradient */
        rc = evaluate(&o, wb, f, grad, &gmax);
    objective_close(&o);
    return rc;
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
