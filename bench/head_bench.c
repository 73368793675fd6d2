/* head_bench: builds a node-like weighted head workload from real features and times pft_head_fit_weighted.
 *
 * The workload: R real training rows (a seeded subset, weight 1) plus, per class, B draws from a diagonal
 * Gaussian fitted on all training rows of that class, each draw weighted m_c/B (m_c: the class's rows, so the
 * draws stand for the class once more, as a received GMM does) or a fixed weight. Rows are L2-normalised
 * first (pftnet's default prep), the draws are not (as a node's are not). With --write the workload and the
 * test set go to PREFIX_{x,y,w,tx,ty}.npy so that bench/head_sklearn.py fits scikit-learn on exactly these
 * rows. Prints one JSON line: the fastest of --repeat fits, and the objective and test accuracy of the
 * exported float32 weights recomputed in float64 (as head_sklearn.py does for scikit-learn's).
 *
 * usage: head_bench --data DIR [--out PREFIX --write] [--name NAME] [--tool NAME] [--real R|all] [--draws B]
 *                   [--draw-weight mB|W] [--seed S] [--prep l2|none] [--tol T] [--history M] [--max-iter N]
 *                   [--precond 0|1|2] [--repeat N] */
#define _POSIX_C_SOURCE 200809L
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_head.h"
#include "pft_npy.h"
#include "pft_prep.h"
#include "pft_rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CLASSES 256

typedef struct {
    const char *data, *out, *name, *tool, *prep;
    int write;          /* write the workload for head_sklearn.py */
    long real;          /* real rows, -1: all */
    int draws;          /* per class */
    double draw_weight; /* ≤ 0: m_c / B */
    unsigned long long seed;
    pft_head_opts_t opts;
    int repeat;
} args_t;

typedef struct {
    float *x;
    int32_t *y;
    double *w;
    int n, d, C;
} rows_t;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int load(const char *dir, const char *split, const char *prep, float **x, int32_t **y, int *n, int *d)
{
    char px[4096], py[4096];
    snprintf(px, sizeof px, "%s/%s_x.npy", dir, split);
    snprintf(py, sizeof py, "%s/%s_y.npy", dir, split);
    int64_t rows, cols, ny;
    pft_prep_t p;
    int rc = pft_prep_parse(prep, &p);
    rc = rc ? rc : pft_npy_read_f32(px, x, &rows, &cols);
    rc = rc ? rc : pft_npy_read_i32(py, y, &ny);
    if (rc == 0 && ny != rows)
        rc = pft_err(PFT_EFORMAT, "%s: %lld labels for %lld rows", dir, (long long)ny, (long long)rows);
    for (int64_t i = 0; rc == 0 && i < ny; i++)
        if ((*y)[i] < 0 || (*y)[i] >= MAX_CLASSES)
            rc = pft_err(PFT_EFORMAT, "%s: label %d", py, (int)(*y)[i]);
    if (rc == 0) {
        *n = (int)rows;
        *d = (int)cols;
        rc = pft_prep_apply(p, *x, *n, *d);
    }
    return rc;
}

/* Appends B draws per class from the class's diagonal Gaussian (mean, variance over all its rows). */
static void add_draws(const float *x, const int32_t *y, int n, int d, const args_t *a, pft_rng_t *r,
                      rows_t *w)
{
    double *mu = calloc((size_t)d, sizeof *mu), *var = calloc((size_t)d, sizeof *var);
    for (int c = 0; c < w->C; c++) {
        int m = 0;
        memset(mu, 0, (size_t)d * sizeof *mu);
        memset(var, 0, (size_t)d * sizeof *var);
        for (int i = 0; i < n; i++)
            if (y[i] == c) {
                m++;
                for (int j = 0; j < d; j++)
                    mu[j] += x[(size_t)i * d + j];
            }
        if (m == 0)
            continue;
        for (int j = 0; j < d; j++)
            mu[j] /= m;
        for (int i = 0; i < n; i++)
            if (y[i] == c)
                for (int j = 0; j < d; j++) {
                    double t = x[(size_t)i * d + j] - mu[j];
                    var[j] += t * t / m;
                }
        /* rounded to float: the weight head_sklearn.py reads back */
        double wt = (float)(a->draw_weight > 0 ? a->draw_weight : (double)m / a->draws);
        for (int b = 0; b < a->draws; b++, w->n++) {
            float *row = w->x + (size_t)w->n * d;
            for (int j = 0; j < d; j++)
                row[j] = (float)(mu[j] + sqrt(var[j]) * pft_rng_normal(r));
            w->y[w->n] = c;
            w->w[w->n] = wt;
        }
    }
    free(mu);
    free(var);
}

static int build(const float *x, const int32_t *y, int n, int d, int C, const args_t *a, rows_t *w)
{
    long real = a->real < 0 || a->real > n ? n : a->real;
    size_t rows = (size_t)real + (size_t)a->draws * (size_t)C;
    w->x = malloc(rows * (size_t)d * sizeof(float));
    w->y = malloc(rows * sizeof(int32_t));
    w->w = malloc(rows * sizeof(double));
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    if (!w->x || !w->y || !w->w || !idx) {
        free(idx);
        return pft_err(PFT_ENOMEM, "workload of %zu rows", rows);
    }
    pft_rng_t *r = pft_rng_new(a->seed);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    if (real < n)
        pft_rng_shuffle(r, idx, (size_t)n);
    w->n = 0, w->d = d, w->C = C;
    for (long i = 0; i < real; i++, w->n++) {
        memcpy(w->x + (size_t)w->n * d, x + (size_t)idx[i] * d, (size_t)d * sizeof(float));
        w->y[w->n] = y[idx[i]];
        w->w[w->n] = 1.0;
    }
    if (a->draws > 0)
        add_draws(x, y, n, d, a, r, w);
    pft_rng_destroy(&r);
    free(idx);
    return 0;
}

static int write_workload(const rows_t *w, const float *tx, const int32_t *ty, int nt, const char *prefix)
{
    char p[4096];
    float *wf = malloc((size_t)w->n * sizeof *wf);
    if (!wf)
        return pft_err(PFT_ENOMEM, "weights");
    for (int i = 0; i < w->n; i++)
        wf[i] = (float)w->w[i];
    int rc = 0;
#define PATH(s) (snprintf(p, sizeof p, "%s_%s.npy", prefix, s), p)
    rc = rc ? rc : pft_npy_write_f32(PATH("x"), w->x, w->n, w->d);
    rc = rc ? rc : pft_npy_write_i32(PATH("y"), w->y, w->n);
    rc = rc ? rc : pft_npy_write_f32_vec(PATH("w"), wf, w->n);
    rc = rc ? rc : pft_npy_write_f32(PATH("tx"), tx, nt, w->d);
    rc = rc ? rc : pft_npy_write_i32(PATH("ty"), ty, nt);
#undef PATH
    free(wf);
    return rc;
}

/* Logits of row x (d) under wb (C×(d+1)) in double. */
static void logits64(const float *x, int d, int C, const float *wb, double *z)
{
    for (int k = 0; k < C; k++) {
        const float *wk = wb + (size_t)k * (d + 1);
        double s = wk[d];
        for (int j = 0; j < d; j++)
            s += (double)wk[j] * x[j];
        z[k] = s;
    }
}

/* The objective f = Σ w CE / Σ w + (l2/2)‖W‖² of the float32 weights wb, in double. */
static double objective64(const rows_t *w, const float *wb, double l2)
{
    double z[MAX_CLASSES], num = 0, den = 0, pen = 0;
    for (int i = 0; i < w->n; i++) {
        logits64(w->x + (size_t)i * w->d, w->d, w->C, wb, z);
        double mx = z[0], s = 0;
        for (int k = 1; k < w->C; k++)
            mx = fmax(mx, z[k]);
        for (int k = 0; k < w->C; k++)
            s += exp(z[k] - mx);
        num += w->w[i] * (mx + log(s) - z[w->y[i]]);
        den += w->w[i];
    }
    for (int k = 0; k < w->C; k++)
        for (int j = 0; j < w->d; j++)
            pen += (double)wb[(size_t)k * (w->d + 1) + j] * wb[(size_t)k * (w->d + 1) + j];
    return num / den + 0.5 * l2 * pen;
}

static double accuracy64(const float *x, const int32_t *y, int n, int d, int C, const float *wb)
{
    double z[MAX_CLASSES];
    int hit = 0;
    for (int i = 0; i < n; i++) {
        logits64(x + (size_t)i * d, d, C, wb, z);
        int best = 0;
        for (int k = 1; k < C; k++)
            best = z[k] > z[best] ? k : best;
        hit += best == y[i];
    }
    return (double)hit / n;
}

static int parse(int argc, char **argv, args_t *a)
{
    *a = (args_t){.real = 2000, .repeat = 1, .prep = "l2", .name = "workload", .tool = "pftnet"};
    pft_head_opts_default(&a->opts);
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--write") == 0) {
            a->write = 1;
            continue;
        }
        if (!v)
            return pft_err(PFT_EINVAL, "%s needs a value", k);
        i++;
        if (strcmp(k, "--data") == 0)
            a->data = v;
        else if (strcmp(k, "--out") == 0)
            a->out = v;
        else if (strcmp(k, "--name") == 0)
            a->name = v;
        else if (strcmp(k, "--tool") == 0)
            a->tool = v;
        else if (strcmp(k, "--real") == 0)
            a->real = strcmp(v, "all") == 0 ? -1 : atol(v);
        else if (strcmp(k, "--draws") == 0)
            a->draws = atoi(v);
        else if (strcmp(k, "--draw-weight") == 0)
            a->draw_weight = strcmp(v, "mB") == 0 ? 0.0 : atof(v);
        else if (strcmp(k, "--seed") == 0)
            a->seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--prep") == 0)
            a->prep = v;
        else if (strcmp(k, "--tol") == 0)
            a->opts.tol = atof(v);
        else if (strcmp(k, "--history") == 0)
            a->opts.history = atoi(v);
        else if (strcmp(k, "--max-iter") == 0)
            a->opts.max_iter = atoi(v);
        else if (strcmp(k, "--precond") == 0)
            a->opts.precond = atoi(v);
        else if (strcmp(k, "--repeat") == 0)
            a->repeat = atoi(v);
        else
            return pft_err(PFT_EINVAL, "unknown option %s", k);
    }
    if (!a->data || (a->write && !a->out) || a->repeat < 1 || a->draws < 0)
        return pft_err(PFT_EINVAL, "usage: head_bench --data DIR [--out PREFIX --write] [options]");
    return 0;
}

static void print_result(const args_t *a, const rows_t *w, double time, const pft_head_info_t *info,
                         double f64, double acc)
{
    double wsum = 0;
    for (int i = 0; i < w->n; i++)
        wsum += w->w[i];
    printf("{\"workload\": \"%s\", \"tool\": \"%s\", \"rows\": %d, \"d\": %d, \"classes\": %d, "
           "\"weight_sum\": %.6f, \"tol\": %g, \"max_iter\": %d, \"history\": %d, \"precond\": %d, "
           "\"time\": %.4f, \"iters\": %d, \"evals\": %d, \"converged\": %d, \"loss\": %.10f, "
           "\"grad_max\": %.3g, \"l2\": %.17g, \"f\": %.12f, \"test_acc\": %.6f}\n",
           a->name, a->tool, w->n, w->d, w->C, wsum, a->opts.tol, a->opts.max_iter, a->opts.history,
           a->opts.precond, time, info->iters, info->evals, info->converged, info->loss, info->grad_max,
           info->l2, f64, acc);
}

int main(int argc, char **argv)
{
    args_t a;
    float *x = NULL, *tx = NULL;
    int32_t *y = NULL, *ty = NULL;
    int n = 0, d = 0, nt = 0, dt = 0, C = 0;
    rows_t w = {0};
    pft_head_t *h = NULL;
    pft_head_info_t info = {0};
    int rc = parse(argc, argv, &a);
    rc = rc ? rc : load(a.data, "train", a.prep, &x, &y, &n, &d);
    rc = rc ? rc : load(a.data, "test", a.prep, &tx, &ty, &nt, &dt);
    if (rc == 0 && dt != d)
        rc = pft_err(PFT_EFORMAT, "train has %d features, test %d", d, dt);
    for (int i = 0; rc == 0 && i < n; i++)
        C = y[i] + 1 > C ? y[i] + 1 : C;
    rc = rc ? rc : build(x, y, n, d, C, &a, &w);
    if (rc == 0 && a.write)
        rc = write_workload(&w, tx, ty, nt, a.out);
    double best = INFINITY;
    for (int r = 0; rc == 0 && r < a.repeat; r++) {
        pft_head_destroy(&h);
        double t0 = now();
        rc = pft_head_fit_weighted(w.x, w.y, w.w, w.n, w.d, C, &a.opts, &h, &info);
        best = fmin(best, now() - t0);
    }
    if (rc) {
        fprintf(stderr, "head_bench: %s\n", pft_errmsg());
        return 1;
    }
    const float *wb = pft_head_weights(h);
    print_result(&a, &w, best, &info, objective64(&w, wb, info.l2), accuracy64(tx, ty, nt, d, C, wb));
    pft_head_destroy(&h);
    free(w.x), free(w.y), free(w.w);
    pft_free(x), pft_free(y), pft_free(tx), pft_free(ty);
    return 0;
}
