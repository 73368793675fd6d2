/* lowrank_eig: the release's eigenpairs at a relay, dense LAPACK against the structured solver, in one run.
 *
 * A relay of exact tied statistics holds W = n_r·(U Uᵀ + diag ψ) (the received release of rank q) + its own
 * rows' within-class scatter + the merge's between-part terms, and releases the q leading eigenpairs of W/N.
 * From real features (L2-normalised rows) this builds that W: the received part is the release (rank q, by
 * pft_gstat_lowrank_shared) of the first --received rows, the own part the next --rows rows. It then times,
 * each --repeat times (medians):
 *   dense-all  the release as it was: dsyevr of all d eigenpairs of the formed d×d matrix (pft_la_eigh_fast);
 *   dense-top  pft_gstat_lowrank_shared today: dsyevr of the top q only (RANGE = 'I');
 *   lreig      pft_gstat_lowrank_shared_op: block Krylov on the operator, W never formed;
 * and prints the ratios and how far lreig's release is from dense-top's: eigenvalues (max relative
 * difference), the projectors onto the q leading eigenvectors (‖P − P'‖_F), U Uᵀ + diag ψ (max entry
 * difference relative to the largest entry), the solver's cycles, products and residual. Not a test: nothing
 * asserts.
 *
 * build (from the repository root, after a Release build in build/):
 *   cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Icore -Inode/common bench/lowrank_eig.c
 * build/node/libpft_common.a \ build/core/libpft_core.a $(pkg-config --libs lapacke openblas) -lm -o
 * build/lowrank_eig run: OPENBLAS_NUM_THREADS=1 build/lowrank_eig [--data DIR] [--received 1200] [--rows 60]
 * [--q 64] [--repeat 5] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat_lowrank.h"
#include "pft_linalg.h"
#include "pft_lreig.h"
#include "pft_lrop.h"
#include "pft_npy.h"

#define MAX_CLASSES 64

static pft_lreig_opts_t g_opts; /* the solver's defaults, --steps and --extra override */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per-class counts and means (double) of n rows. */
static void class_stats(const float *x, const int32_t *y, int n, int d, double *cnt, double *mu)
{
    memset(cnt, 0, MAX_CLASSES * sizeof *cnt);
    memset(mu, 0, (size_t)MAX_CLASSES * d * sizeof *mu);
    for (int i = 0; i < n; i++) {
        cnt[y[i]]++;
        for (int j = 0; j < d; j++)
            mu[(size_t)y[i] * d + j] += x[(size_t)i * d + j];
    }
    for (int c = 0; c < MAX_CLASSES; c++)
        for (int j = 0; cnt[c] > 0 && j < d; j++)
            mu[(size_t)c * d + j] /= cnt[c];
}

/* The within-class scatter of n rows as an operator (one term per row, centred at its class mean). */
static pft_lrop_t *scatter_op(const float *x, const int32_t *y, int n, int d, const double *mu)
{
    pft_lrop_t *op = pft_lrop_new(d);
    for (int i = 0; op && i < n; i++)
        if (pft_lrop_add_rows(op, x + (size_t)i * d, 1, mu + (size_t)y[i] * d, 1.0))
            pft_lrop_destroy(&op);
    return op;
}

typedef struct {
    int d, q, nr, no;
    pft_lrop_t *W; /* the relay's scatter, structured */
    double *dense; /* the same, formed (d×d) */
    double N;      /* rows it stands for */
} relay_t;

/* The relay's W from received rows x[0, nr) (released at rank q) and own rows x[nr, nr + no). */
static int relay_build(relay_t *rl, const float *x, const int32_t *y, int d, int q)
{
    int nr = rl->nr, no = rl->no;
    double *cr = malloc(MAX_CLASSES * sizeof *cr), *co = malloc(MAX_CLASSES * sizeof *co);
    double *mr = malloc((size_t)MAX_CLASSES * d * sizeof *mr),
           *mo = malloc((size_t)MAX_CLASSES * d * sizeof *mo);
    double *U = malloc((size_t)d * q * sizeof *U), *psi = malloc((size_t)d * sizeof *psi);
    double *C = malloc((size_t)d * d * sizeof *C), *delta = malloc((size_t)d * sizeof *delta);
    class_stats(x, y, nr, d, cr, mr);
    class_stats(x + (size_t)nr * d, y + nr, no, d, co, mo);
    pft_lrop_t *rec = scatter_op(x, y, nr, d, mr); /* the received part's scatter, then its release */
    pft_lrop_dense(rec, C);
    for (size_t i = 0; i < (size_t)d * d; i++)
        C[i] /= nr;
    int rc = pft_gstat_lowrank_shared(C, d, q, U, psi);
    rl->W = scatter_op(x + (size_t)nr * d, y + nr, no, d, mo);
    if (rc == 0 && rl->W)
        rc = pft_lrop_add_factor(rl->W, U, q, q, (double)nr) || pft_lrop_add_diag(rl->W, psi, (double)nr);
    for (int c = 0; rc == 0 && c < MAX_CLASSES; c++) { /* between-part terms (n_A n_B / n) δδᵀ */
        if (cr[c] == 0 || co[c] == 0)
            continue;
        for (int j = 0; j < d; j++)
            delta[j] = mo[(size_t)c * d + j] - mr[(size_t)c * d + j];
        rc = pft_lrop_add_factor(rl->W, delta, 1, 1, cr[c] * co[c] / (cr[c] + co[c]));
    }
    rl->N = nr + no;
    rl->dense = rc == 0 ? C : NULL;
    if (rl->dense)
        pft_lrop_dense(rl->W, rl->dense);
    else
        free(C);
    pft_lrop_destroy(&rec);
    free(cr), free(co), free(mr), free(mo), free(U), free(psi), free(delta);
    return rc || !rl->W ? -1 : 0;
}

/* ‖P − P'‖_F for the projectors onto the column spaces of A, B (d×q, orthonormal columns, row-major), as
 * √2 · ‖B − A (Aᵀ B)‖_F. */
static double projector_distance(const double *A, const double *B, int d, int q)
{
    double *m = malloc((size_t)q * q * sizeof *m), *r = malloc((size_t)d * q * sizeof *r), s = 0;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, q, q, d, 1.0, A, q, B, q, 0.0, m, q);
    memcpy(r, B, (size_t)d * q * sizeof *r);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, q, q, -1.0, A, q, m, q, 1.0, r, q);
    for (size_t i = 0; i < (size_t)d * q; i++)
        s += r[i] * r[i];
    free(m);
    free(r);
    return sqrt(2.0 * s);
}

/* U with unit columns (U's columns divided by their norms). */
static void unit_columns(const double *U, int d, int q, double *out)
{
    for (int j = 0; j < q; j++) {
        double s = 0;
        for (int r = 0; r < d; r++)
            s += U[(size_t)r * q + j] * U[(size_t)r * q + j];
        s = s > 0 ? sqrt(s) : 1;
        for (int r = 0; r < d; r++)
            out[(size_t)r * q + j] = U[(size_t)r * q + j] / s;
    }
}

static void compare(const relay_t *rl, const double *U0, const double *p0, const double *U1, const double *p1)
{
    int d = rl->d, q = rl->q;
    double *a = malloc((size_t)d * q * sizeof *a), *b = malloc((size_t)d * q * sizeof *b);
    double ev = 0, cmax = 0, cdiff = 0, udiff = 0;
    for (int j = 0; j < q; j++) {
        double s0 = 0, s1 = 0;
        for (int r = 0; r < d; r++) {
            s0 += U0[(size_t)r * q + j] * U0[(size_t)r * q + j];
            s1 += U1[(size_t)r * q + j] * U1[(size_t)r * q + j];
        }
        ev = fmax(ev, fabs(s0 - s1) / s0);
    }
    for (size_t i = 0; i < (size_t)d * q; i++)
        udiff = fmax(udiff, fabs(U0[i] - U1[i]));
    for (int r = 0; r < d; r++)
        for (int c = 0; c <= r; c++) {
            double x0 = (r == c ? p0[r] : 0), x1 = (r == c ? p1[r] : 0);
            for (int j = 0; j < q; j++) {
                x0 += U0[(size_t)r * q + j] * U0[(size_t)c * q + j];
                x1 += U1[(size_t)r * q + j] * U1[(size_t)c * q + j];
            }
            cmax = fmax(cmax, fabs(x0));
            cdiff = fmax(cdiff, fabs(x0 - x1));
        }
    unit_columns(U0, d, q, a);
    unit_columns(U1, d, q, b);
    printf("  lreig vs dense-top: eigenvalues max rel diff %.2e, projector distance %.2e, "
           "U U' + diag psi max diff / max entry %.2e, U max entry diff %.2e\n",
           ev, projector_distance(a, b, d, q), cdiff / cmax, udiff);
    free(a);
    free(b);
}

/* Times the three methods rep times each on rl (medians). */
/* The spectrum near the cut (what sets the iteration's convergence): λ_1, λ_q, λ_{q+1} of W / N and the
 * largest entry of its diagonal term. */
static void spectrum_note(const relay_t *rl)
{
    int d = rl->d, q = rl->q;
    double *lam = malloc((size_t)(q + 1) * sizeof *lam), *V = malloc((size_t)(q + 1) * d * sizeof *V), mx = 0;
    const double *a = pft_lrop_diag(rl->W);
    for (int r = 0; r < d; r++)
        mx = fmax(mx, a[r]);
    if (pft_lreig_top_dense(rl->W, q + 1, lam, V) == 0)
        printf("  spectrum of W/N: lambda_1 %.4g, lambda_q %.4g, lambda_q+1 %.4g; diagonal term max %.4g\n",
               lam[0] / rl->N, lam[q - 1] / rl->N, lam[q] / rl->N, mx / rl->N);
    free(lam);
    free(V);
}

static int run(const relay_t *rl, int rep)
{
    int d = rl->d, q = rl->q;
    double *a = malloc((size_t)d * d * sizeof *a), *w = malloc((size_t)d * sizeof *w);
    double *U0 = malloc((size_t)d * q * sizeof *U0), *p0 = malloc((size_t)d * sizeof *p0);
    double *U1 = malloc((size_t)d * q * sizeof *U1), *p1 = malloc((size_t)d * sizeof *p1);
    double *C = malloc((size_t)d * d * sizeof *C), *t[3];
    for (int m = 0; m < 3; m++)
        t[m] = malloc((size_t)rep * sizeof(double));
    pft_lreig_info_t info = {0};
    int rc = 0;
    for (int k = 0; rc == 0 && k < rep; k++) {
        double t0 = now();
        for (size_t i = 0; i < (size_t)d * d; i++) /* the old release: C = W/N, then all d eigenpairs */
            a[i] = rl->dense[i] / rl->N;
        rc = pft_la_eigh_fast(a, d, w);
        double t1 = now();
        for (size_t i = 0; rc == 0 && i < (size_t)d * d; i++)
            C[i] = rl->dense[i] / rl->N;
        rc = rc ? rc : pft_gstat_lowrank_shared(C, d, q, U0, p0);
        double t2 = now();
        rc = rc ? rc : pft_gstat_lowrank_shared_op(rl->W, rl->N, q, &g_opts, U1, p1, &info);
        double t3 = now();
        t[0][k] = t1 - t0, t[1][k] = t2 - t1, t[2][k] = t3 - t2;
    }
    if (rc == 0) {
        double m0 = median(t[0], rep), m1 = median(t[1], rep), m2 = median(t[2], rep);
        printf(
            "d %d, q %d, received %d rows (rank %d + diagonal), own %d rows: operator rank %d, %d repeats\n",
            d, q, rl->nr, q, rl->no, pft_lrop_rank(rl->W), rep);
        printf("  median s: dense-all %.4f  dense-top %.4f  lreig %.4f  |  dense-all/lreig %.1fx  "
               "dense-top/lreig %.1fx\n",
               m0, m1, m2, m0 / m2, m1 / m2);
        printf("  lreig: %d cycles, %ld products, residual %.2e of |W|, dense fallback %d\n", info.cycles,
               info.matvecs, info.residual, info.dense);
        compare(rl, U0, p0, U1, p1);
        spectrum_note(rl);
    } else {
        fprintf(stderr, "lowrank_eig: %s\n", pft_errmsg());
    }
    free(a), free(w), free(U0), free(p0), free(U1), free(p1), free(C);
    for (int m = 0; m < 3; m++)
        free(t[m]);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = "../shared/data/pacs-mobilenetv2";
    int nr = 1200, q = 64, rep = 5, rows[8] = {60, 500}, nrows = 2;
    pft_lreig_opts_default(&g_opts);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--received"))
            nr = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows"))
            rows[0] = atoi(argv[i + 1]), nrows = 1;
        else if (!strcmp(argv[i], "--q"))
            q = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeat"))
            rep = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            g_opts.steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--extra"))
            g_opts.extra = atoi(argv[i + 1]);
        else
            return fprintf(stderr, "lowrank_eig: unknown option %s\n", argv[i]), 2;
    }
    char px[512], py[512];
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    snprintf(py, sizeof py, "%s/train_y.npy", dir);
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(px, &x, &n, &d) || pft_npy_read_i32(py, &y, &ny) || ny != n)
        return fprintf(stderr, "lowrank_eig: %s\n", pft_errmsg()), 1;
    for (int64_t i = 0; i < n; i++) { /* prep l2, as the runs */
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)x[i * d + j] * x[i * d + j];
        for (int64_t j = 0; s > 0 && j < d; j++)
            x[i * d + j] = (float)(x[i * d + j] / sqrt(s));
    }
    /* rows in a fixed shuffled order (the files are sorted by class): i ↦ (i · 7919) mod n, n prime to 7919
     */
    float *xs = malloc((size_t)n * d * sizeof *xs);
    int32_t *ys = malloc((size_t)n * sizeof *ys);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (i * 7919) % n;
        memcpy(xs + i * d, x + k * d, (size_t)d * sizeof *xs);
        ys[i] = y[k];
    }
    memcpy(x, xs, (size_t)n * d * sizeof *x);
    memcpy(y, ys, (size_t)n * sizeof *y);
    free(xs);
    free(ys);
    for (int k = 0; k < nrows; k++) {
        relay_t rl = {.d = (int)d, .q = q, .nr = nr, .no = rows[k]};
        if (nr + rows[k] > n || relay_build(&rl, x, y, (int)d, q))
            return fprintf(stderr, "lowrank_eig: cannot build the relay (%s)\n", pft_errmsg()), 1;
        int rc = run(&rl, rep);
        pft_lrop_destroy(&rl.W);
        free(rl.dense);
        if (rc)
            return 1;
    }
    pft_free(x);
    pft_free(y);
    return 0;
}
