/* pft_ghead_cv: the options and their checks, the cross-validation folds over the caller's own rows and the
 * tallies of their scores, which the LDA and QDA heads share (pft_ghead_internal.h); the shrinkage grid and
 * the α of contributors' tallies. */
#include "pft_ghead_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"
#include "pft_rng.h"

const char *pft_ghead_kind_name(pft_ghead_kind_t kind)
{
    return kind == PFT_GHEAD_LDA ? "lda" : kind == PFT_GHEAD_QDA ? "qda" : NULL;
}

void pft_ghead_opts_default(pft_ghead_opts_t *opts)
{
    opts->kind = PFT_GHEAD_LDA;
    opts->alpha = PFT_GHEAD_AUTO;
    opts->lambda = PFT_GHEAD_AUTO;
    opts->folds = 5;
    opts->min_cv_rows = 10;
    opts->seed = 0;
    opts->on_iter = NULL;
    opts->on_iter_ctx = NULL;
    opts->extra = NULL;
    opts->n_extra = 0;
}

int pft_ghead__check_args(const pft_gstat_t *st, int n, int C, const pft_ghead_opts_t *o)
{
    if (!st || n < 0 || C < 1 || !o)
        return pft_err(PFT_EINVAL, "gaussian head: bad arguments");
    if (!pft_ghead_kind_name(o->kind) || o->folds < 2 || o->folds > 20 || o->min_cv_rows < 2 ||
        !(o->alpha == PFT_GHEAD_AUTO || (o->alpha >= 0 && o->alpha <= 1)) ||
        !(o->lambda == PFT_GHEAD_AUTO || (o->lambda >= 0 && o->lambda <= 1)))
        return pft_err(PFT_EINVAL, "gaussian head: bad options (kind %d, folds %d, α %g, λ %g)", (int)o->kind,
                       o->folds, o->alpha, o->lambda);
    if (o->kind == PFT_GHEAD_QDA && pft_gstat_kind(st) != PFT_GSTAT_FULL)
        return pft_err(PFT_EINVAL, "gaussian head: QDA needs per-class (full) statistics, not tied ones");
    int S = pft_gstat_n_classes(st);
    if (S < 1)
        return pft_err(PFT_EINVAL, "gaussian head: the statistics hold no class");
    if (pft_gstat_label(st, S - 1) >= C)
        return pft_err(PFT_EINVAL, "gaussian head: label %d ≥ %d classes", pft_gstat_label(st, S - 1), C);
    if (o->n_extra < 0 || (o->n_extra > 0 && (!o->extra || o->kind != PFT_GHEAD_LDA)))
        return pft_err(PFT_EINVAL, "gaussian head: noisy components need LDA (%d given)", o->n_extra);
    for (int k = 0; k < o->n_extra; k++) {
        const pft_ghead_extra_t *x = &o->extra[k];
        int ok = x->label >= 0 && x->label < C && x->n >= 1 && x->mean && isfinite(x->tau2) && x->tau2 >= 0;
        for (int i = 0; ok && i < pft_gstat_dim(st); i++)
            ok = isfinite(x->mean[i]);
        if (!ok)
            return pft_err(PFT_EINVAL,
                           "gaussian head: noisy component %d (label %d, %llu rows, tau2 %g) invalid", k,
                           x->label, (unsigned long long)x->n, x->tau2);
    }
    return 0;
}

void pft_ghead__folds_free(folds_t *f)
{
    PFT_FREE(f->row);
    PFT_FREE(f->cls);
    PFT_FREE(f->fold);
}

/* Own rows → class indices (checking they can be in st), a seeded subset of at most GH_MAX_CV_ROWS, and a
 * stratified assignment to folds. */
int pft_ghead__folds_make(folds_t *f, const pft_gstat_t *st, const int32_t *y, int n, int folds,
                          uint64_t seed)
{
    memset(f, 0, sizeof *f);
    int S = pft_gstat_n_classes(st);
    int *perm = pft_alloc_array((size_t)n, sizeof(int));
    uint64_t *own = pft_calloc((size_t)S, sizeof(uint64_t));
    f->row = pft_alloc_array((size_t)n, sizeof(int));
    f->cls = pft_alloc_array((size_t)n, sizeof(int));
    f->fold = pft_alloc_array((size_t)n, sizeof(int));
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, 0x67686561, 0));
    int rc = (!perm || !own || !f->row || !f->cls || !f->fold || !rng)
                 ? pft_err(PFT_ENOMEM, "gaussian head: out of memory for %d rows", n)
                 : 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        int c = pft_gstat_find(st, y[i]);
        if (c < 0 || ++own[c] > pft_gstat_count(st, c))
            rc = pft_err(PFT_EINVAL, "gaussian head: own row %d (label %d) is not part of the statistics", i,
                         (int)y[i]);
        perm[i] = i;
    }
    if (rc == 0) {
        for (int i = n - 1; i > 0; i--) { /* Fisher–Yates */
            int j = (int)pft_rng_below(rng, (uint64_t)i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        f->n = n < GH_MAX_CV_ROWS ? n : GH_MAX_CV_ROWS;
        f->F = folds < f->n ? folds : f->n;
        /* stratified: per class in shuffled order, dealt round-robin, continuing across classes */
        int next = 0, k = 0;
        for (int c = 0; c < S; c++)
            for (int i = 0; i < f->n; i++) {
                int r = perm[i];
                if (pft_gstat_find(st, y[r]) != c)
                    continue;
                f->row[k] = r;
                f->cls[k] = c;
                f->fold[k] = next;
                next = (next + 1) % f->F;
                k++;
            }
    }
    pft_rng_destroy(&rng);
    pft_free(perm);
    pft_free(own);
    if (rc != 0)
        pft_ghead__folds_free(f);
    return rc;
}

void pft_ghead__tally_row(tally_t *t, const double *s, const int *present, int S, int truth)
{
    int best = -1;
    double mx = -DBL_MAX;
    for (int c = 0; c < S; c++)
        if (present[c] && (best < 0 || s[c] > mx)) {
            mx = s[c];
            best = c;
        }
    double z = 0;
    for (int c = 0; c < S; c++)
        if (present[c])
            z += exp(s[c] - mx);
    double lse = mx + log(z);
    t->correct += best == truth;
    t->total++;
    t->loss += present[truth] ? lse - s[truth] : 50.0; /* a class emptied by the fold: capped penalty */
}

/* Index of the best tally: accuracy, then cross-entropy, then the later (larger) grid point. */
int pft_ghead__tally_best(const tally_t *t, int m)
{
    int best = -1;
    for (int i = 0; i < m; i++) {
        if (!t[i].valid || t[i].total == 0)
            continue;
        if (best < 0 || t[i].correct > t[best].correct ||
            (t[i].correct == t[best].correct && t[i].loss <= t[best].loss))
            best = i;
    }
    return best;
}

const double pft_ghead__alpha_grid[] = {0,   0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2,
                                        0.3, 0.4,   0.5,   0.6,  0.7,  0.8,  0.9, 0.95};
_Static_assert(sizeof pft_ghead__alpha_grid / sizeof pft_ghead__alpha_grid[0] == PFT_GHEAD_N_ALPHA,
               "the grid's size is public");

double pft_ghead_alpha_grid(int i)
{
    return i >= 0 && i < PFT_GHEAD_N_ALPHA ? pft_ghead__alpha_grid[i] : NAN;
}

double pft_ghead_evidence_alpha(const pft_ghead_evidence_t *const *ev, const double *w, int m)
{
    double right[PFT_GHEAD_N_ALPHA] = {0}, loss[PFT_GHEAD_N_ALPHA] = {0};
    int usable[PFT_GHEAD_N_ALPHA], best = -1;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++) {
        usable[a] = m > 0;
        for (int k = 0; k < m; k++) {
            double wk = w ? w[k] : 1.0;
            if (ev[k][a].total == 0) /* unusable with one contributor's statistics: never chosen */
                usable[a] = 0;
            right[a] += wk * (double)ev[k][a].correct;
            loss[a] += wk * ev[k][a].loss;
        }
        if (usable[a] &&
            (best < 0 || right[a] > right[best] || (right[a] == right[best] && loss[a] <= loss[best])))
            best = a;
    }
    return best < 0 ? -1.0 : pft_ghead__alpha_grid[best];
}

/* The noisy components' term per unit τ²: E‖e‖²_A less κ standard deviations of it (pft_ghead.h), from
 * tr A and tr A² (A = Σ_α⁻¹). */
double pft_ghead__noise_bonus(double trinv, double trinv2)
{
    return trinv - PFT_GHEAD_NOISE_KAPPA * sqrt(2.0 * trinv2);
}

/* tr Σ'⁻¹ and tr Σ'⁻² of a fold's downdated covariance Σ' = D - β Uᵀ U (rows of U: the downdate), from those
 * of D (*trinv, *trinv2 on entry), K = I - β U D⁻¹ Uᵀ = L Lᵀ (Cholesky, lower) and UD = U D⁻¹ (overwritten by
 * Z = L⁻¹ U D⁻¹). Woodbury: Σ'⁻¹ = D⁻¹ + G, G = β D⁻¹ Uᵀ K⁻¹ U D⁻¹, so tr G = β ‖Z‖², tr D⁻¹G = β Σ Z²/D and
 * tr G² = β² ‖Z Zᵀ‖²_F. ZZ: m×m scratch. */
void pft_ghead__noise_traces(const double *D, double *UD, const double *K, double *ZZ, int d, int m,
                             double beta, double *trinv, double *trinv2)
{
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, m, d, 1.0, K, m, UD, d);
    double zz = 0, zd = 0, f2 = 0;
    for (int a = 0; a < m; a++)
        for (int i = 0; i < d; i++) {
            double z = UD[(size_t)a * d + i];
            zz += z * z;
            zd += z * z / D[i];
        }
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, m, d, 1.0, UD, d, 0.0, ZZ, m);
    for (int a = 0; a < m; a++)
        for (int b = 0; b <= a; b++)
            f2 += (a == b ? 1.0 : 2.0) * ZZ[(size_t)a * m + b] * ZZ[(size_t)a * m + b];
    *trinv += beta * zz;
    *trinv2 += 2.0 * beta * zd + beta * beta * f2;
}

/* 0 if a squared pivot of K's Cholesky factor L is below GH_MIN_PIVOT2 (K = I without a downdate): a nearly
 * singular downdate, whose Woodbury correction amplifies rounding beyond what the two bases share. */
#define GH_MIN_PIVOT2 1e-8
int pft_ghead__pivots_ok(const double *L, int m)
{
    for (int a = 0; a < m; a++)
        if (L[(size_t)a * m + a] * L[(size_t)a * m + a] < GH_MIN_PIVOT2)
            return 0;
    return 1;
}

/* Diagonal of the shrunk covariance (1-α) W/N + α (tr W / (N d)) I in the eigenbasis, floored at 1e-12 of
 * its largest entry. Returns 1 if no floor was needed. */
int pft_ghead__shrunk_diag(const double *lam, int d, double N, double sumlam, double alpha, double *D)
{
    double t = sumlam / (N * d), mx = 0;
    for (int i = 0; i < d; i++) {
        D[i] = (1.0 - alpha) * lam[i] / N + alpha * t;
        if (D[i] > mx)
            mx = D[i];
    }
    int ok = mx > 0;
    for (int i = 0; i < d; i++)
        if (!(D[i] > 1e-12 * mx)) {
            D[i] = mx > 0 ? 1e-12 * mx : 1e-300;
            ok = 0;
        }
    return ok;
}
