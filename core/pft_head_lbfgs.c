/* pft_head_lbfgs: the optimiser of pft_head, full-batch L-BFGS on the preconditioned objective.
 *
 * Two-loop recursion with H0 = (sᵀy / yᵀy) I, strong-Wolfe line search (Nocedal & Wright, Algorithms 3.5/3.6,
 * c1 = 1e-4, c2 = 0.9, cubic interpolation with safeguards), which also accepts Hager & Zhang's approximate
 * Wolfe points (SIAM J. Optim. 16(1), 2005) so that convergence is not stopped by rounding noise in f. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_head_internal.h"

#include <math.h>
#include <string.h>

#define MAX_LS_EVALS 25
#define WOLFE_C1 1e-4
#define WOLFE_C2 0.9
#define APPROX_WOLFE_EPS 1e-6 /* relative slack on f for the approximate Wolfe test */

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
static int eval_at(pft_head_obj_t *o, const double *x0, const double *dir, double a, point_t *pt)
{
    for (size_t i = 0; i < o->P; i++)
        pt->x[i] = x0[i] + a * dir[i];
    pt->a = a;
    int rc = pft_head__evaluate(o, pt->x, &pt->f, pt->g, &pt->gmax);
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
static int line_search(pft_head_obj_t *o, point_t *cur, const double *dir, double a0, point_t *trial,
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

/* The L-BFGS state: 4 points on the line (current, trial, bracket ends), the previous point, the direction
 * and m correction pairs (S, Y, ρ) in a ring buffer. */
typedef struct {
    double *arena, *rho, *alpha;
    double *dir, *x_old, *g_old, *S, *Y;
    point_t pts[4];
    int m, stored, next;
} lbfgs_t;

static int lbfgs_open(lbfgs_t *s, int m, size_t P)
{
    *s = (lbfgs_t){.m = m};
    /* One arena of doubles: dir, x_old, g_old; 4 points × (x, g); S, Y (m each). */
    s->arena = pft_calloc((3 + 8 + 2 * (size_t)m) * P, sizeof(double));
    s->rho = pft_calloc((size_t)m, sizeof(double));
    s->alpha = pft_calloc((size_t)m, sizeof(double));
    if (!s->arena || !s->rho || !s->alpha)
        return pft_err(PFT_ENOMEM, "head: out of memory (L-BFGS with %d pairs of %zu parameters)", m, P);
    double *p = s->arena;
    s->dir = p, s->x_old = p + P, s->g_old = p + 2 * P;
    p += 3 * P;
    for (int i = 0; i < 4; i++) {
        s->pts[i].x = p, p += P;
        s->pts[i].g = p, p += P;
    }
    s->S = p, s->Y = p + (size_t)m * P;
    return 0;
}

static void lbfgs_close(lbfgs_t *s)
{
    pft_free(s->arena);
    pft_free(s->rho);
    pft_free(s->alpha);
}

/* Stores the pair (x − x_old, g − g_old) of the step just taken, if its curvature keeps H positive definite.
 */
static void lbfgs_update(lbfgs_t *s, const point_t *cur, size_t P)
{
    double *sk = s->S + (size_t)s->next * P, *yk = s->Y + (size_t)s->next * P;
    for (size_t i = 0; i < P; i++) {
        sk[i] = cur->x[i] - s->x_old[i];
        yk[i] = cur->g[i] - s->g_old[i];
    }
    double sy = dot(sk, yk, P), yy = dot(yk, yk, P);
    if (sy > 1e-12 * yy && yy > 0.0) {
        s->rho[s->next] = 1.0 / sy;
        s->next = (s->next + 1) % s->m;
        if (s->stored < s->m)
            s->stored++;
    }
}

/* The search direction at cur into s->dir (steepest descent if the history gives none); cur->gtd set. */
static void lbfgs_step_direction(lbfgs_t *s, point_t *cur, size_t P)
{
    lbfgs_direction(cur->g, s->S, s->Y, s->rho, s->alpha, s->stored, s->next, s->m, P, s->dir);
    cur->gtd = dot(cur->g, s->dir, P);
    if (!(cur->gtd < 0.0)) { /* not a descent direction: restart from steepest descent */
        s->stored = 0;
        lbfgs_direction(cur->g, s->S, s->Y, s->rho, s->alpha, 0, s->next, s->m, P, s->dir);
        cur->gtd = dot(cur->g, s->dir, P);
    }
}

int pft_head__lbfgs(pft_head_obj_t *o, const pft_head_opts_t *opts, float *wb, pft_head_info_t *info)
{
    const size_t P = o->P;
    lbfgs_t s;
    int rc = lbfgs_open(&s, opts->history, P);
    if (rc)
        goto done;
    point_t *cur = &s.pts[0];
    /* Start at θ = 0: W = 0, b = 0 (uniform probabilities). */
    if ((rc = pft_head__evaluate(o, cur->x, &cur->f, cur->g, &cur->gmax)))
        goto done;
    int iters = 0, converged = cur->gmax <= opts->tol;
    while (!converged && iters < opts->max_iter) {
        if (opts->on_iter)
            opts->on_iter(opts->on_iter_ctx);
        lbfgs_step_direction(&s, cur, P);
        double a0 = s.stored == 0 ? fmin(1.0, 1.0 / sqrt(-cur->gtd)) : 1.0;
        memcpy(s.x_old, cur->x, P * sizeof(double));
        memcpy(s.g_old, cur->g, P * sizeof(double));
        int ls = line_search(o, cur, s.dir, a0, &s.pts[1], &s.pts[2], &s.pts[3]);
        if (ls < 0) {
            rc = ls;
            goto done;
        }
        iters++;
        if (ls > 0) {
            if (s.stored == 0)
                break;    /* even steepest descent finds no decrease: at the precision limit */
            s.stored = 0; /* drop the curvature history and retry */
            continue;
        }
        lbfgs_update(&s, cur, P);
        converged = cur->gmax <= opts->tol;
    }
    /* Export raw weights [W | b]. */
    pft_head__theta_to_raw(o, cur->x, o->w_raw);
    for (size_t i = 0; i < P; i++)
        wb[i] = (float)o->w_raw[i];
    *info = (pft_head_info_t){.iters = iters,
                              .evals = o->evals,
                              .converged = converged,
                              .l2 = o->l2,
                              .loss = cur->f,
                              .grad_max = cur->gmax};
done:
    lbfgs_close(&s);
    return rc;
}
