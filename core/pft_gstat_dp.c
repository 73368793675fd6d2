/* pft_gstat_dp: (ε, δ)-DP release of exact statistics: noisy per-class sums and second moments, then
 * post-processed into PSD pft_gstat statistics. */
#include "pft_gstat_dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_dp.h"
#include "pft_error.h"
#include "pft_linalg.h"

#define BLOCK 256 /* rows per DSYRK block (bounds the scratch memory) */

double pft_gstat_dp_sigma(double eps, double delta)
{
    if (!(eps > 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    if (isinf(eps))
        return 0.0;
    /* the exact (analytic) calibration at Δ₂: the smallest σ whose exact δ is ≤ δ */
    return pft_dp_sigma_exact(PFT_GSTAT_DP_SENS, eps, delta);
}

void pft_gstat_dp_raw_destroy(pft_gstat_dp_raw_t **raw_p)
{
    if (!raw_p || !*raw_p)
        return;
    pft_gstat_dp_raw_t *r = *raw_p;
    pft_free(r->labels);
    pft_free(r->counts);
    pft_free(r->sums);
    pft_free(r->s2);
    pft_free(r);
    *raw_p = NULL;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorted distinct labels of y into r->labels / r->counts. */
static int collect_labels(pft_gstat_dp_raw_t *r, const int32_t *y, size_t n)
{
    int32_t *s = pft_alloc_array(n, sizeof *s);
    if (!s)
        return pft_err(PFT_ENOMEM, "gstat dp: out of memory (%zu labels)", n);
    memcpy(s, y, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_i32);
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += i == 0 || s[i] != s[i - 1];
    r->labels = pft_alloc_array((size_t)c, sizeof *r->labels);
    r->counts = pft_calloc((size_t)c, sizeof *r->counts);
    if (!r->labels || !r->counts) {
        pft_free(s);
        return pft_err(PFT_ENOMEM, "gstat dp: out of memory (%d classes)", c);
    }
    c = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || s[i] != s[i - 1])
            r->labels[c++] = s[i];
        r->counts[c - 1]++;
    }
    r->n_classes = c;
    pft_free(s);
    return 0;
}

static int class_index(const pft_gstat_dp_raw_t *r, int32_t label)
{
    int lo = 0, hi = r->n_classes - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (r->labels[mid] == label)
            return mid;
        if (r->labels[mid] < label)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Sums and second moments of the (clipped) rows, in double; the row scale for clipping is applied on the
 * fly. S2 by DSYRK over blocks of rows of one class (FULL) or of all rows (TIED). */
static int accumulate(pft_gstat_dp_raw_t *r, const float *x, const int32_t *y, size_t n, const double *scale)
{
    size_t D = (size_t)r->d;
    double *buf = pft_alloc_array((size_t)BLOCK * D, sizeof *buf);
    if (!buf)
        return pft_err(PFT_ENOMEM, "gstat dp: out of memory (%d×%d block)", BLOCK, r->d);
    int passes = r->kind == PFT_GSTAT_FULL ? r->n_classes : 1;
    for (int p = 0; p < passes; p++) {
        double *s2 = r->s2 + (size_t)p * D * D;
        int m = 0;
        for (size_t i = 0; i <= n; i++) {
            int take = i < n && (r->kind == PFT_GSTAT_TIED || y[i] == r->labels[p]);
            if (take) {
                double *row = r->sums + (size_t)class_index(r, y[i]) * D;
                for (size_t j = 0; j < D; j++) {
                    double v = (double)x[i * D + j] * scale[i];
                    buf[(size_t)m * D + j] = v;
                    row[j] += v;
                }
                m++;
            }
            if (m > 0 && (m == BLOCK || i == n)) {
                cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, r->d, m, 1.0, buf, r->d, 1.0, s2, r->d);
                m = 0;
            }
        }
        pft_la_sym_from_lower(s2, r->d);
    }
    pft_free(buf);
    return 0;
}

/* Symmetric noise: one N(0, σ²) draw per unordered pair (diagonal included), mirrored. */
static void sym_noise(double *a, size_t D, double sigma, pft_rng_t *rng)
{
    for (size_t i = 0; i < D; i++)
        for (size_t j = i; j < D; j++) {
            double z = sigma * pft_rng_normal(rng);
            a[i * D + j] += z;
            if (j != i)
                a[j * D + i] += z;
        }
}

static void add_noise(pft_gstat_dp_raw_t *r, double sigma, pft_rng_t *rng)
{
    if (sigma == 0.0)
        return;
    size_t D = (size_t)r->d;
    for (int c = 0; c < r->n_classes; c++) {
        for (size_t j = 0; j < D; j++)
            r->sums[(size_t)c * D + j] += sigma * pft_rng_normal(rng);
        if (r->kind == PFT_GSTAT_FULL)
            sym_noise(r->s2 + (size_t)c * D * D, D, sigma, rng);
    }
    if (r->kind == PFT_GSTAT_TIED)
        sym_noise(r->s2, D, sigma, rng);
}

int pft_gstat_dp_raw(pft_gstat_kind_t kind, const float *x, const int32_t *y, size_t n, int d, double sigma,
                     pft_rng_t *rng, pft_gstat_dp_raw_t **out)
{
    if (out)
        *out = NULL;
    if (!out || !x || !y || n < 1 || d < 1 || d > 65536 || (kind != PFT_GSTAT_FULL && kind != PFT_GSTAT_TIED))
        return pft_err(PFT_EINVAL, "gstat dp: invalid arguments (n = %zu, d = %d, kind %d)", n, d, (int)kind);
    if (!(sigma >= 0.0) || !isfinite(sigma) || (sigma > 0.0 && !rng))
        return pft_err(PFT_EINVAL, "gstat dp: invalid noise (sigma = %g%s)", sigma, rng ? "" : ", no rng");
    size_t D = (size_t)d;
    double *scale = pft_alloc_array(n, sizeof *scale);
    pft_gstat_dp_raw_t *r = pft_calloc(1, sizeof *r);
    int rc = scale && r ? 0 : pft_err(PFT_ENOMEM, "gstat dp: out of memory (%zu rows)", n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < D; j++)
            s += (double)x[i * D + j] * x[i * D + j];
        if (!isfinite(s))
            rc = pft_err(PFT_EINVAL, "gstat dp: row %zu has a non-finite value", i);
        else if (y[i] < 0)
            rc = pft_err(PFT_EINVAL, "gstat dp: row %zu has a negative label %d", i, (int)y[i]);
        scale[i] = s > 1.0 ? 1.0 / sqrt(s) : 1.0;
        if (rc == 0 && s > 1.0 + PFT_DP_NORM_TOL)
            r->clipped++;
    }
    if (rc == 0) {
        r->kind = kind;
        r->d = d;
        rc = collect_labels(r, y, n);
    }
    if (rc == 0) {
        size_t n_s2 = kind == PFT_GSTAT_FULL ? (size_t)r->n_classes : 1;
        r->sums = pft_calloc((size_t)r->n_classes * D, sizeof *r->sums);
        r->s2 = pft_calloc(n_s2 * D * D, sizeof *r->s2);
        rc = r->sums && r->s2 ? 0 : pft_err(PFT_ENOMEM, "gstat dp: out of memory (d = %d)", d);
    }
    if (rc == 0)
        rc = accumulate(r, x, y, n, scale);
    if (rc == 0) {
        add_noise(r, sigma, rng);
        *out = r;
        r = NULL;
    }
    pft_free(scale);
    pft_gstat_dp_raw_destroy(&r);
    return rc;
}

/* a := V max(Λ, 0) Vᵀ (exactly symmetric); counts the clamped eigenvalues into *neg. v, w: scratch. */
static int psd_project(double *a, int d, double *v, double *w, int *neg)
{
    size_t D = (size_t)d;
    memcpy(v, a, D * D * sizeof *v);
    int rc = pft_la_eigh_fast(v, d, w);
    if (rc)
        return rc;
    int p = 0; /* rows of v become sqrt(λ_k) v_k for λ_k > 0, packed to the front */
    for (size_t k = 0; k < D; k++) {
        if (!(w[k] > 0.0)) {
            *neg += w[k] < 0.0;
            continue;
        }
        double s = sqrt(w[k]);
        for (size_t i = 0; i < D; i++)
            v[(size_t)p * D + i] = s * v[k * D + i];
        p++;
    }
    if (p == 0) {
        memset(a, 0, D * D * sizeof *a);
        return 0;
    }
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, p, 1.0, v, d, 0.0, a, d);
    pft_la_sym_from_lower(a, d);
    return 0;
}

int pft_gstat_dp_finish(const pft_gstat_dp_raw_t *raw, pft_gstat_t **out, int *n_floored)
{
    if (out)
        *out = NULL;
    if (!raw || !out)
        return pft_err(PFT_EINVAL, "gstat dp: invalid arguments");
    int d = raw->d, C = raw->n_classes, neg = 0, rc = 0;
    size_t D = (size_t)d, n_s2 = raw->kind == PFT_GSTAT_FULL ? (size_t)C : 1;
    for (size_t i = 0; i < (size_t)C * D; i++)
        if (!isfinite(raw->sums[i]))
            return pft_err(PFT_EINVAL, "gstat dp: non-finite noisy sum");
    for (size_t i = 0; i < n_s2 * D * D; i++)
        if (!isfinite(raw->s2[i]))
            return pft_err(PFT_EINVAL, "gstat dp: non-finite noisy second moment");
    double *mean = pft_alloc_array((size_t)C * D, sizeof *mean);
    double *m = pft_alloc_array(D * D, sizeof *m), *v = pft_alloc_array(D * D, sizeof *v);
    double *w = pft_alloc_array(D, sizeof *w);
    pft_gstat_t *st = pft_gstat_new(raw->kind, d);
    if (!mean || !m || !v || !w || !st) {
        rc = pft_err(PFT_ENOMEM, "gstat dp: out of memory (d = %d)", d);
        goto done;
    }
    for (int c = 0; c < C; c++)
        for (size_t j = 0; j < D; j++)
            mean[(size_t)c * D + j] = raw->sums[(size_t)c * D + j] / (double)raw->counts[c];
    if (raw->kind == PFT_GSTAT_TIED)
        memcpy(m, raw->s2, D * D * sizeof *m);
    for (int c = 0; rc == 0 && c < C; c++) {
        if (raw->kind == PFT_GSTAT_FULL)
            memcpy(m, raw->s2 + (size_t)c * D * D, D * D * sizeof *m);
        const double *mu = mean + (size_t)c * D;
        double nc = (double)raw->counts[c];
        for (size_t i = 0; i < D; i++) /* nc·mu_i·mu_j is symmetric in IEEE arithmetic */
            for (size_t j = 0; j < D; j++)
                m[i * D + j] -= nc * mu[i] * mu[j];
        if (raw->kind == PFT_GSTAT_FULL) {
            if ((rc = psd_project(m, d, v, w, &neg)) == 0)
                rc = pft_gstat_add_class(st, raw->labels[c], raw->counts[c], mu, m);
        } else {
            rc = pft_gstat_add_class(st, raw->labels[c], raw->counts[c], mu, NULL);
        }
    }
    if (rc == 0 && raw->kind == PFT_GSTAT_TIED && (rc = psd_project(m, d, v, w, &neg)) == 0)
        rc = pft_gstat_add_tied_scatter(st, m);
    if (rc == 0) {
        if (n_floored)
            *n_floored = neg;
        *out = st;
        st = NULL;
    }
done:
    pft_gstat_destroy(&st);
    pft_free(mean);
    pft_free(m);
    pft_free(v);
    pft_free(w);
    return rc;
}

/* The checks both releases make: *out cleared, n ≥ 1, ε > 0, δ (1/n for PFT_DP_DELTA_AUTO) in (0, 1) into
 * *dl, a generator unless ε = ∞. 0 or PFT_EINVAL. */
static int release_args(pft_gstat_t **out, size_t n, double eps, double delta, const pft_rng_t *rng,
                        double *dl)
{
    if (out)
        *out = NULL;
    if (!out || n < 1)
        return pft_err(PFT_EINVAL, "gstat dp: invalid arguments (n = %zu)", n);
    *dl = delta == PFT_DP_DELTA_AUTO ? 1.0 / (double)n : delta;
    if (!(eps > 0.0) || !(*dl > 0.0 && *dl < 1.0))
        return pft_err(PFT_EINVAL, "gstat dp: need epsilon > 0 and 0 < delta < 1 (epsilon = %g, delta = %g)",
                       eps, *dl);
    if (!isinf(eps) && !rng)
        return pft_err(PFT_EINVAL, "gstat dp: a random generator is required for epsilon = %g", eps);
    return 0;
}

int pft_gstat_dp_release(pft_gstat_kind_t kind, const float *x, const int32_t *y, size_t n, int d, double eps,
                         double delta, pft_rng_t *rng, pft_gstat_t **out, pft_gstat_dp_info_t *info)
{
    double dl = 0;
    int rc = release_args(out, n, eps, delta, rng, &dl);
    if (rc)
        return rc;
    double sigma = pft_gstat_dp_sigma(eps, dl);
    pft_gstat_dp_raw_t *raw = NULL;
    int n_floored = 0;
    rc = pft_gstat_dp_raw(kind, x, y, n, d, sigma, rng, &raw);
    if (rc == 0)
        rc = pft_gstat_dp_finish(raw, out, &n_floored);
    if (rc == 0 && info) {
        size_t tri = (size_t)d * ((size_t)d + 1) / 2;
        info->eps = eps;
        info->delta = dl;
        info->sens = PFT_GSTAT_DP_SENS;
        info->sigma = sigma;
        info->n = n;
        info->clipped = raw->clipped;
        info->n_floored = n_floored;
        info->noisy_elems =
            (size_t)raw->n_classes * (size_t)d + (kind == PFT_GSTAT_FULL ? (size_t)raw->n_classes : 1) * tri;
    }
    pft_gstat_dp_raw_destroy(&raw);
    return rc;
}

double pft_gstat_dp_sigma_sums(double eps, double delta)
{
    return pft_gstat_dp_sigma(eps, delta) * (PFT_GSTAT_DP_SENS_SUMS / PFT_GSTAT_DP_SENS);
}

/* Noisy per-class sums of raw (clipped rows already summed) into TIED statistics with a zero scatter. */
static int sums_finish(pft_gstat_dp_raw_t *r, double sigma, pft_rng_t *rng, pft_gstat_t **out)
{
    size_t D = (size_t)r->d;
    double *mean = pft_alloc_array(D, sizeof *mean);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, r->d);
    int rc = mean && st ? 0 : pft_err(PFT_ENOMEM, "gstat dp: out of memory (d = %d)", r->d);
    for (int c = 0; rc == 0 && c < r->n_classes; c++) {
        double *sum = r->sums + (size_t)c * D;
        for (size_t j = 0; j < D; j++) {
            if (sigma > 0.0)
                sum[j] += sigma * pft_rng_normal(rng);
            mean[j] = sum[j] / (double)r->counts[c];
        }
        rc = pft_gstat_add_class(st, r->labels[c], r->counts[c], mean, NULL);
    }
    pft_free(mean);
    if (rc == 0)
        *out = st;
    else
        pft_gstat_destroy(&st);
    return rc;
}

int pft_gstat_dp_release_sums(const float *x, const int32_t *y, size_t n, int d, double eps, double delta,
                              pft_rng_t *rng, pft_gstat_t **out, pft_gstat_dp_info_t *info)
{
    double dl = 0;
    int rc = release_args(out, n, eps, delta, rng, &dl);
    if (rc)
        return rc;
    double sigma = pft_gstat_dp_sigma_sums(eps, dl);
    pft_gstat_dp_raw_t *raw = NULL;
    /* the clipped sums, without noise (σ = 0: the second moment is accumulated and dropped) */
    rc = pft_gstat_dp_raw(PFT_GSTAT_TIED, x, y, n, d, 0.0, NULL, &raw);
    if (rc == 0)
        rc = sums_finish(raw, sigma, rng, out);
    if (rc == 0 && info) {
        info->eps = eps;
        info->delta = dl;
        info->sens = PFT_GSTAT_DP_SENS_SUMS;
        info->sigma = sigma;
        info->n = n;
        info->clipped = raw->clipped;
        info->n_floored = 0;
        info->noisy_elems = (size_t)raw->n_classes * (size_t)d;
    }
    pft_gstat_dp_raw_destroy(&raw);
    return rc;
}
