/* pft_ghead_heldout: the shrinkage evidence of rows the statistics do not hold (pft_ghead.h,
 * pft_ghead_evidence_heldout): a relay's own rows scored against the release it received, N·(U Uᵀ + diag ψ),
 * by Woodbury's identity in the factor's q dimensions; no fold, no d×d matrix. */
#include "pft_ghead_internal.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"
#include "pft_rng.h"

/* The class index of label in r (labels ascending), or -1. */
static int find_label(const pft_ghead_lowrank_t *r, int label)
{
    int lo = 0, hi = r->S - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (r->label[mid] == label)
            return mid;
        if (r->label[mid] < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int check(const pft_ghead_lowrank_t *r, int n, int C, const pft_ghead_opts_t *o)
{
    if (!r || !o || n < 0 || C < 1 || r->d < 1 || r->S < 0 || r->q < 0 || r->q > r->d ||
        (r->S > 0 && (!r->label || !r->count || !r->mean)) || !r->psi || (r->q > 0 && !r->U))
        return pft_err(PFT_EINVAL, "held-out evidence: bad arguments");
    if (o->kind != PFT_GHEAD_LDA)
        return pft_err(PFT_EINVAL, "held-out evidence: evidence is for LDA (tied statistics)");
    for (int c = 0; c < r->S; c++)
        if (r->label[c] < 0 || r->label[c] >= C || (c > 0 && r->label[c] <= r->label[c - 1]) ||
            r->count[c] < 1)
            return pft_err(PFT_EINVAL, "held-out evidence: class %d (label %d, %llu rows) invalid", c,
                           (int)r->label[c], (unsigned long long)r->count[c]);
    for (int j = 0; j < r->d; j++)
        if (!isfinite(r->psi[j]) || r->psi[j] < 0)
            return pft_err(PFT_EINVAL, "held-out evidence: psi[%d] = %g", j, r->psi[j]);
    return 0;
}

/* The rows scored: those whose class r holds, a seeded subset of at most GH_MAX_CV_ROWS; their indices into
 * idx and class indices into cls. The count. */
static int pick_rows(const pft_ghead_lowrank_t *r, const int32_t *y, int n, uint64_t seed, int *idx, int *cls)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (find_label(r, y[i]) >= 0)
            idx[m++] = i;
    if (m > GH_MAX_CV_ROWS) { /* the first GH_MAX_CV_ROWS of a seeded shuffle, kept in row order */
        pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, 0x68656c64, 0));
        for (int i = 0; rng && i < GH_MAX_CV_ROWS; i++) {
            int j = i + (int)pft_rng_below(rng, (uint64_t)(m - i)), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        if (!rng)
            return -1;
        pft_rng_destroy(&rng);
        m = GH_MAX_CV_ROWS;
        /* insertion sort: row order, so the tallies do not depend on the draw's order */
        for (int i = 1; i < m; i++)
            for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
    }
    for (int i = 0; i < m; i++)
        cls[i] = find_label(r, y[idx[i]]);
    return m;
}

typedef struct {
    int d, q, m, S;
    const double *X, *M, *U, *psi; /* the rows (m×d), the class means (S×d), the factor, ψ */
    double t;                      /* tr(U Uᵀ + diag ψ) / d: the shrinkage target's scale */
    double *dinv, *XD, *MD, *A, *K, *PX, *PM, *XM, *CR, *s;
    int *present;
} ho_t;

/* The tallies of the rows for one α: Σ_α = (1 − α)(U Uᵀ + diag ψ) + α t I = diag δ + (1 − α) U Uᵀ, whose
 * inverse is D⁻¹ − D⁻¹ U K⁻¹ Uᵀ D⁻¹ with K = I / (1 − α) + Uᵀ D⁻¹ U (q×q). tl->valid stays 0 where δ is not
 * positive (1e-12 of its largest entry) or K not positive definite. */
static void score_alpha(ho_t *h, double alpha, const int *cls, const double *logpi, tally_t *tl)
{
    int d = h->d, q = h->q, m = h->m, S = h->S;
    double top = 0, low = INFINITY;
    for (int j = 0; j < d; j++) {
        double v = (1.0 - alpha) * h->psi[j] + alpha * h->t;
        top = v > top ? v : top;
        low = v < low ? v : low;
        h->dinv[j] = v;
    }
    if (!(top > 0) || !(low > 1e-12 * top))
        return;
    for (int j = 0; j < d; j++)
        h->dinv[j] = 1.0 / h->dinv[j];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < d; j++)
            h->XD[(size_t)i * d + j] = h->X[(size_t)i * d + j] * h->dinv[j];
    for (int c = 0; c < S; c++)
        for (int j = 0; j < d; j++)
            h->MD[(size_t)c * d + j] = h->M[(size_t)c * d + j] * h->dinv[j];
    /* the diagonal's quadratic forms: xᵀD⁻¹x, xᵀD⁻¹μ, μᵀD⁻¹μ */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, S, d, 1.0, h->XD, d, h->M, d, 0.0, h->XM, S);
    if (q > 0) {
        for (int j = 0; j < d; j++) /* A = D^(-1/2) U */
            for (int k = 0; k < q; k++)
                h->A[(size_t)j * q + k] = h->U[(size_t)j * q + k] * sqrt(h->dinv[j]);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, q, d, 1.0, h->A, q, 0.0, h->K, q);
        for (int k = 0; k < q; k++)
            h->K[(size_t)k * q + k] += 1.0 / (1.0 - alpha);
        if (pft_la_chol_lower(h->K, q) != 0)
            return;
        /* P = (D⁻¹ x)ᵀ U L⁻ᵀ per row (and per mean): the correction is ‖P_x − P_μ‖² */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, q, d, 1.0, h->XD, d, h->U, q, 0.0, h->PX,
                    q);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, q, d, 1.0, h->MD, d, h->U, q, 0.0, h->PM,
                    q);
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, q, 1.0, h->K, q,
                    h->PX, q);
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, S, q, 1.0, h->K, q,
                    h->PM, q);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, S, q, 1.0, h->PX, q, h->PM, q, 0.0, h->CR, S);
    }
    double *mm = h->s + S, *pm = h->s + 2 * S;
    for (int c = 0; c < S; c++) {
        mm[c] = cblas_ddot(d, h->M + (size_t)c * d, 1, h->MD + (size_t)c * d, 1);
        pm[c] = q > 0 ? cblas_ddot(q, h->PM + (size_t)c * q, 1, h->PM + (size_t)c * q, 1) : 0.0;
    }
    for (int i = 0; i < m; i++) {
        double xx = cblas_ddot(d, h->X + (size_t)i * d, 1, h->XD + (size_t)i * d, 1);
        double px = q > 0 ? cblas_ddot(q, h->PX + (size_t)i * q, 1, h->PX + (size_t)i * q, 1) : 0.0;
        for (int c = 0; c < S; c++) {
            double quad = xx - 2 * h->XM[(size_t)i * S + c] + mm[c];
            if (q > 0)
                quad -= px - 2 * h->CR[(size_t)i * S + c] + pm[c];
            h->s[c] = logpi[c] - 0.5 * quad;
        }
        pft_ghead__tally_row(tl, h->s, h->present, S, cls[i]);
    }
    tl->valid = 1;
}

static void ho_free(ho_t *h)
{
    double **p[] = {&h->dinv, &h->XD, &h->MD, &h->A, &h->K, &h->PX, &h->PM, &h->XM, &h->CR, &h->s};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        PFT_FREE(*p[i]);
    PFT_FREE(h->present);
}

static int ho_alloc(ho_t *h)
{
    size_t d = (size_t)h->d, q = (size_t)h->q, m = (size_t)h->m, S = (size_t)h->S;
    h->dinv = pft_alloc_array(d, sizeof(double));
    h->XD = pft_alloc_array(m * d, sizeof(double));
    h->MD = pft_alloc_array(S * d, sizeof(double));
    h->A = pft_alloc_array(d * q + 1, sizeof(double));
    h->K = pft_alloc_array(q * q + 1, sizeof(double));
    h->PX = pft_alloc_array(m * q + 1, sizeof(double));
    h->PM = pft_alloc_array(S * q + 1, sizeof(double));
    h->XM = pft_alloc_array(m * S, sizeof(double));
    h->CR = pft_alloc_array(m * S, sizeof(double));
    h->s = pft_alloc_array(3 * S, sizeof(double));
    h->present = pft_alloc_array(S, sizeof(int));
    if (h->dinv && h->XD && h->MD && h->A && h->K && h->PX && h->PM && h->XM && h->CR && h->s && h->present) {
        for (size_t c = 0; c < S; c++)
            h->present[c] = 1;
        return 0;
    }
    ho_free(h);
    return pft_err(PFT_ENOMEM, "held-out evidence: out of memory for %zu rows", m);
}

int pft_ghead_evidence_heldout(const pft_ghead_lowrank_t *r, const float *x, const int32_t *y, int n,
                               int n_classes, const pft_ghead_opts_t *opts, pft_ghead_evidence_t *ev)
{
    int rc = check(r, n, n_classes, opts);
    if (rc)
        return rc;
    if (n < opts->min_cv_rows || r->S < 2)
        return 1;
    int d = r->d, S = r->S;
    int *idx = pft_alloc_array((size_t)n, sizeof(int)), *cls = pft_alloc_array((size_t)n, sizeof(int));
    double *X = NULL, *logpi = pft_alloc_array((size_t)S, sizeof(double));
    ho_t h = {.d = d, .q = r->q, .S = S, .M = r->mean, .U = r->U, .psi = r->psi};
    if (!idx || !cls || !logpi)
        rc = pft_err(PFT_ENOMEM, "held-out evidence: out of memory for %d rows", n);
    if (rc == 0 && (h.m = pick_rows(r, y, n, opts->seed, idx, cls)) < 0)
        rc = pft_err(PFT_ENOMEM, "held-out evidence: out of memory");
    if (rc == 0 && h.m < 1)
        rc = 1; /* no own row of a class the statistics hold */
    if (rc == 0 && !(X = pft_alloc_array((size_t)h.m * d, sizeof(double))))
        rc = pft_err(PFT_ENOMEM, "held-out evidence: out of memory for %d rows", h.m);
    for (int i = 0; rc == 0 && i < h.m; i++)
        for (int j = 0; j < d; j++) {
            X[(size_t)i * d + j] = x[(size_t)idx[i] * d + j];
            if (!isfinite(X[(size_t)i * d + j]))
                rc = pft_err(PFT_EINVAL, "held-out evidence: row %d has a non-finite value", idx[i]);
        }
    if (rc == 0) {
        uint64_t N = 0;
        for (int c = 0; c < S; c++)
            N += r->count[c];
        for (int c = 0; c < S; c++)
            logpi[c] = log((double)r->count[c] / (double)N);
        double tr = 0;
        for (int j = 0; j < d; j++)
            tr += r->psi[j];
        for (size_t k = 0; k < (size_t)d * r->q; k++)
            tr += r->U[k] * r->U[k];
        h.t = tr / d;
        h.X = X;
        rc = tr > 0 && isfinite(tr) ? ho_alloc(&h) : 1; /* nothing to shrink towards: no evidence */
    }
    if (rc == 0) {
        for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++) {
            tally_t tl = {0};
            score_alpha(&h, pft_ghead__alpha_grid[a], cls, logpi, &tl);
            int ok = tl.valid && tl.total > 0;
            ev[a] = (pft_ghead_evidence_t){.alpha = pft_ghead__alpha_grid[a],
                                           .correct = ok ? (uint64_t)tl.correct : 0,
                                           .total = ok ? (uint64_t)tl.total : 0,
                                           .loss = ok ? tl.loss : 0};
            if (opts->on_iter && a % 4 == 3)
                opts->on_iter(opts->on_iter_ctx);
        }
        ho_free(&h);
    }
    pft_free(idx);
    pft_free(cls);
    pft_free(logpi);
    pft_free(X);
    return rc;
}
