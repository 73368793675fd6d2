/* Tests of pft_gstat_dp: the sensitivity, σ's calibration, the noise's statistics, PSD releases, ε = ∞ equals
 * the exact statistics, clipping, bad arguments. */
#include <stdint.h>

#include "pft_alloc.h"
#include "pft_dp.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_gstat_dp.h"
#include "pft_linalg.h"
#include "pft_rng.h"
#include "pft_test.h"

/* n×d rows of norm 1 (random directions), labels 0..C-1 in turn. */
static void unit_rows(int n, int d, int C, uint64_t seed, float *x, int32_t *y)
{
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < d; j++) {
            double v = pft_rng_normal(r) + (j == i % C ? 2.0 : 0.0); /* class-dependent direction */
            x[(size_t)i * d + j] = (float)v;
            s += v * v;
        }
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = (float)(x[(size_t)i * d + j] / sqrt(s) * (1.0 - 1e-7));
        y[i] = i % C;
    }
    pft_rng_destroy(&r);
}

/* ‖Δs‖² + ‖ΔS2 upper triangle‖² of replacing x by x' (d-vectors). */
static double change2(const double *x, const double *xp, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++) {
        s += (x[i] - xp[i]) * (x[i] - xp[i]);
        for (int j = i; j < d; j++) {
            double t = x[i] * x[j] - xp[i] * xp[j];
            s += t * t;
        }
    }
    return s;
}

static void test_sensitivity(void)
{
    CHECK_NEAR(PFT_GSTAT_DP_SENS, 3.0 / sqrt(2.0), 1e-15);
    /* attained: unit vectors at 120° (xᵀx' = a² - b² = -1/2) placed so that ΔS2 = diag(2ab, -2ab) is
     * diagonal: ‖Δs‖² = 3, ‖ΔS2‖_F² = 8a²b² = 3/2 */
    double c = 1 / sqrt(2.0), a = 0.5, b = sqrt(0.75);
    double x[2] = {c * (a + b), c * (a - b)}, xp[2] = {c * (a - b), c * (a + b)};
    CHECK_NEAR(x[0] * xp[0] + x[1] * xp[1], -0.5, 1e-15);
    CHECK_NEAR(change2(x, xp, 2), 4.5, 1e-12);
    /* never exceeded: random pairs of norm ≤ 1 in d = 2..5, and the antipodal pair (‖Δs‖² = 4, ΔS2 = 0) */
    pft_rng_t *r = pft_rng_new(7);
    double worst = 0;
    for (int t = 0; t < 200000; t++) {
        int d = 2 + t % 4;
        double u[5], v[5], nu = 0, nv = 0;
        for (int j = 0; j < d; j++) {
            u[j] = pft_rng_normal(r);
            v[j] = pft_rng_normal(r);
            nu += u[j] * u[j];
            nv += v[j] * v[j];
        }
        double su = (t % 3 ? 1.0 : pft_rng_uniform(r)) / sqrt(nu),
               sv = (t % 5 ? 1.0 : pft_rng_uniform(r)) / sqrt(nv);
        for (int j = 0; j < d; j++) {
            u[j] *= su;
            v[j] *= sv;
        }
        double ch = change2(u, v, d);
        worst = ch > worst ? ch : worst;
    }
    pft_rng_destroy(&r);
    CHECK_MSG(worst <= 4.5 + 1e-12 && worst > 4.3, "worst change %g", worst);
    double e[2] = {1, 0}, me[2] = {-1, 0};
    CHECK_NEAR(change2(e, me, 2), 4.0, 1e-15);
}

static void test_sigma(void)
{
    /* the analytic calibration: σ/Δ₂ = 2.5746570186372061 at ε = 1, δ = 1e-3 and 0.24672179738433923 at ε =
     * 20 (40-digit bisection of Balle & Wang's exact δ(σ) in mpmath, independent of pft_dp), tight (1e-9 less
     * noise breaks δ) and below the formula Δ₂·sqrt(2 ln(4/δ))/ε of the paper's calibration */
    double s = pft_gstat_dp_sigma(1.0, 1e-3), f = PFT_GSTAT_DP_SENS * sqrt(2.0 * log(4000.0));
    CHECK_NEAR(s / PFT_GSTAT_DP_SENS, 2.5746570186372061, 1e-11);
    CHECK(s < 0.7 * f);
    CHECK(pft_dp_gauss_delta(PFT_GSTAT_DP_SENS, s, 1.0) <= 1e-3);
    CHECK(pft_dp_gauss_delta(PFT_GSTAT_DP_SENS, s * (1 - 1e-9), 1.0) > 1e-3);
    CHECK_NEAR(pft_gstat_dp_sigma(1.0, 1e-5) / PFT_GSTAT_DP_SENS, 3.7306316348159418, 1e-11);
    CHECK(pft_gstat_dp_sigma(INFINITY, 0.1) == 0.0);
    CHECK(isnan(pft_gstat_dp_sigma(0.0, 0.1)));
    CHECK(isnan(pft_gstat_dp_sigma(-1.0, 0.1)));
    CHECK(isnan(pft_gstat_dp_sigma(NAN, 0.1)));
    CHECK(isnan(pft_gstat_dp_sigma(1.0, 0.0)));
    CHECK(isnan(pft_gstat_dp_sigma(1.0, 1.0)));
    CHECK(isnan(pft_gstat_dp_sigma(1.0, PFT_DP_DELTA_AUTO)));
    double sr = pft_gstat_dp_sigma(20.0, 1e-3);
    CHECK_NEAR(sr / PFT_GSTAT_DP_SENS, 0.24672179738433923, 1e-11);
    CHECK(pft_dp_gauss_delta(PFT_GSTAT_DP_SENS, sr, 20.0) <= 1e-3);
    CHECK(pft_dp_gauss_delta(PFT_GSTAT_DP_SENS, sr * (1 - 1e-9), 20.0) > 1e-3);
    CHECK(isnan(pft_dp_sigma_exact(0.0, 1.0, 0.1)) && isnan(pft_dp_sigma_exact(1.0, 1.0, 1.0)));
}

static double rms(const double *v, int r)
{
    double s = 0;
    for (int i = 0; i < r; i++)
        s += v[i] * v[i];
    return sqrt(s / r);
}

/* The noise of the raw release: mean 0, std σ for every sum and every upper-triangle element of S2, the same
 * draw mirrored. */
static void test_noise_statistics(void)
{
    enum { R = 3000, D = 4, N = 60, C = 3 };
    float x[N * D];
    int32_t y[N];
    unit_rows(N, D, C, 3, x, y);
    double sigma = pft_gstat_dp_sigma(1.0, 1e-3);
    for (int k = 0; k < 2; k++) {
        pft_gstat_kind_t kind = k ? PFT_GSTAT_TIED : PFT_GSTAT_FULL;
        pft_gstat_dp_raw_t *r0 = NULL;
        CHECK(pft_gstat_dp_raw(kind, x, y, N, D, 0.0, NULL, &r0) == 0);
        if (!r0)
            return;
        CHECK(r0->n_classes == C && r0->clipped == 0);
        int n_s2 = k ? 1 : C, n_el = C * D + n_s2 * D * D;
        double *nz = pft_alloc_array((size_t)R * n_el, sizeof(double)); /* element-major */
        int sym = 1;
        pft_rng_t *rng = pft_rng_new(0);
        for (int t = 0; t < R; t++) {
            pft_gstat_dp_raw_t *r = NULL;
            pft_rng_seed(rng, 5000 + (uint64_t)t);
            CHECK(pft_gstat_dp_raw(kind, x, y, N, D, sigma, rng, &r) == 0);
            if (!r)
                break;
            for (int e = 0; e < C * D; e++)
                nz[(size_t)e * R + t] = r->sums[e] - r0->sums[e];
            for (int e = 0; e < n_s2 * D * D; e++)
                nz[(size_t)(C * D + e) * R + t] = r->s2[e] - r0->s2[e];
            for (int m = 0; m < n_s2; m++)
                for (int i = 0; i < D; i++)
                    for (int j = 0; j < D; j++)
                        sym &= r->s2[(m * D + i) * D + j] == r->s2[(m * D + j) * D + i];
            pft_gstat_dp_raw_destroy(&r);
        }
        CHECK(sym);
        for (int e = 0; e < n_el; e++) {
            if (e >= C * D) { /* S2: the upper triangle only */
                int q = (e - C * D) % (D * D), i = q / D, j = q % D;
                if (j < i)
                    continue;
            }
            const double *v = nz + (size_t)e * R;
            double s = rms(v, R), mu = 0;
            for (int t = 0; t < R; t++)
                mu += v[t] / R;
            CHECK_MSG(fabs(s / sigma - 1) < 0.05, "kind %d element %d: std %g vs sigma %g", k, e, s, sigma);
            CHECK(fabs(mu) < 4 * sigma / sqrt(R));
        }
        /* distinct elements draw independently: the two sums' first entries are uncorrelated */
        double cr = 0;
        for (int t = 0; t < R; t++)
            cr += nz[t] * nz[(size_t)D * R + t] / (R * sigma * sigma);
        CHECK(fabs(cr) < 4 / sqrt(R));
        pft_rng_destroy(&rng);
        pft_free(nz);
        pft_gstat_dp_raw_destroy(&r0);
    }
}

/* Smallest eigenvalue of the symmetric d×d matrix s, relative to its trace. */
static double min_eig_rel(const double *s, int d)
{
    double *a = pft_alloc_array((size_t)d * d, sizeof(double)),
           *w = pft_alloc_array((size_t)d, sizeof(double));
    memcpy(a, s, (size_t)d * d * sizeof(double));
    double tr = 0;
    for (int i = 0; i < d; i++)
        tr += s[i * d + i];
    CHECK(pft_la_eigh(a, d, w) == 0);
    double m = w[0] / (tr > 0 ? tr : 1);
    pft_free(a);
    pft_free(w);
    return m;
}

/* Few rows, much noise: the released scatters are PSD (the wire's check passes), with eigenvalues clamped. */
static void test_psd(void)
{
    enum { N = 20, D = 8, C = 2 };
    float x[N * D];
    int32_t y[N];
    unit_rows(N, D, C, 11, x, y);
    pft_rng_t *rng = pft_rng_new(1);
    for (int k = 0; k < 2; k++)
        for (int rep = 0; rep < 20; rep++) {
            pft_gstat_kind_t kind = k ? PFT_GSTAT_TIED : PFT_GSTAT_FULL;
            pft_gstat_t *st = NULL;
            pft_gstat_dp_info_t info;
            CHECK(pft_gstat_dp_release(kind, x, y, N, D, 1.0, PFT_DP_DELTA_AUTO, rng, &st, &info) == 0);
            if (!st)
                continue;
            CHECK(pft_gstat_kind(st) == kind && pft_gstat_n_classes(st) == C && pft_gstat_total(st) == N);
            CHECK(info.n_floored > 0);
            CHECK_NEAR(info.delta, 1.0 / N, 1e-15);
            CHECK(info.noisy_elems == (size_t)(C * D + (k ? 1 : C) * D * (D + 1) / 2));
            if (kind == PFT_GSTAT_TIED) {
                CHECK(min_eig_rel(pft_gstat_tied_scatter(st), D) > -1e-12);
                CHECK(pft_gstat_check_psd(pft_gstat_tied_scatter(st), D, 0x1p-24) == 0);
            } else {
                for (int c = 0; c < C; c++) {
                    CHECK(min_eig_rel(pft_gstat_scatter(st, c), D) > -1e-12);
                    CHECK(pft_gstat_check_psd(pft_gstat_scatter(st, c), D, 0x1p-24) == 0);
                }
            }
            pft_gstat_destroy(&st);
        }
    pft_rng_destroy(&rng);
}

/* max |a - b| over len doubles. */
static double maxdiff(const double *a, const double *b, size_t len)
{
    double m = 0;
    for (size_t i = 0; i < len; i++)
        m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
    return m;
}

/* The release at ε = ∞ (no noise) and at a huge ε against pft_gstat_add_rows of the same rows. */
static void check_close(const pft_gstat_t *st, const pft_gstat_t *ex, double tol)
{
    int d = pft_gstat_dim(ex);
    size_t dd = (size_t)d * d;
    CHECK(pft_gstat_n_classes(st) == pft_gstat_n_classes(ex));
    for (int c = 0; c < pft_gstat_n_classes(ex) && c < pft_gstat_n_classes(st); c++) {
        CHECK(pft_gstat_label(st, c) == pft_gstat_label(ex, c) &&
              pft_gstat_count(st, c) == pft_gstat_count(ex, c));
        CHECK_MSG(maxdiff(pft_gstat_mean(st, c), pft_gstat_mean(ex, c), (size_t)d) < tol, "class %d mean", c);
        if (pft_gstat_kind(ex) == PFT_GSTAT_FULL)
            CHECK_MSG(maxdiff(pft_gstat_scatter(st, c), pft_gstat_scatter(ex, c), dd) < tol,
                      "class %d scatter", c);
    }
    if (pft_gstat_kind(ex) == PFT_GSTAT_TIED)
        CHECK_MSG(maxdiff(pft_gstat_tied_scatter(st), pft_gstat_tied_scatter(ex), dd) < tol, "tied scatter");
}

static void test_exact_limit(void)
{
    enum { N = 300, D = 6, C = 3 };
    float x[N * D];
    int32_t y[N];
    unit_rows(N, D, C, 5, x, y);
    pft_rng_t *rng = pft_rng_new(2);
    for (int k = 0; k < 2; k++) {
        pft_gstat_kind_t kind = k ? PFT_GSTAT_TIED : PFT_GSTAT_FULL;
        pft_gstat_t *ex = pft_gstat_new(kind, D), *st = NULL;
        CHECK(pft_gstat_add_rows(ex, x, y, N) == 0);
        pft_gstat_dp_info_t info;
        CHECK(pft_gstat_dp_release(kind, x, y, N, D, INFINITY, 0.1, NULL, &st, &info) == 0);
        CHECK(info.sigma == 0.0 && info.clipped == 0 && info.n == N);
        if (st)
            check_close(st, ex, 1e-10);
        pft_gstat_destroy(&st);
        CHECK(pft_gstat_dp_release(kind, x, y, N, D, 1e9, 1e-5, rng, &st, &info) == 0); /* σ ≈ Δ₂/√(2ε) */
        CHECK(info.sigma > 0 && info.sigma < 1e-4);
        if (st)
            check_close(st, ex, 1e-3);
        pft_gstat_destroy(&st);
        pft_gstat_destroy(&ex);
    }
    pft_rng_destroy(&rng);
}

/* Rows of norm > 1 are scaled to norm 1 and counted; the release equals the statistics of the scaled rows. */
static void test_clipping(void)
{
    enum { N = 40, D = 5, C = 2 };
    float x[N * D], xs[N * D];
    int32_t y[N];
    unit_rows(N, D, C, 9, x, y);
    memcpy(xs, x, sizeof x);
    for (int i = 0; i < N; i += 4) /* 10 rows of norm 3 */
        for (int j = 0; j < D; j++)
            x[i * D + j] *= 3.0f;
    pft_gstat_t *ex = pft_gstat_new(PFT_GSTAT_FULL, D), *st = NULL;
    CHECK(pft_gstat_add_rows(ex, xs, y, N) == 0);
    pft_gstat_dp_info_t info;
    CHECK(pft_gstat_dp_release(PFT_GSTAT_FULL, x, y, N, D, INFINITY, 0.1, NULL, &st, &info) == 0);
    CHECK(info.clipped == 10);
    if (st)
        check_close(st, ex, 1e-6);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&ex);
    pft_gstat_dp_raw_t *raw = NULL;
    CHECK(pft_gstat_dp_raw(PFT_GSTAT_TIED, x, y, N, D, 0.0, NULL, &raw) == 0 && raw && raw->clipped == 10);
    pft_gstat_dp_raw_destroy(&raw);
    pft_gstat_dp_raw_destroy(&raw); /* safe twice */
}

static void test_bad_arguments(void)
{
    enum { N = 10, D = 3 };
    float x[N * D];
    int32_t y[N];
    unit_rows(N, D, 2, 1, x, y);
    pft_rng_t *rng = pft_rng_new(3);
    pft_gstat_t *st = (pft_gstat_t *)1;
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, 0, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL && !st);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, 0, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, NULL, y, N, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, NULL, N, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release((pft_gstat_kind_t)7, x, y, N, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, 0.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, -1.0, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, NAN, 0.1, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, 1.0, 0.0, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, 1.0, 1.0, rng, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, 1.0, 0.1, NULL, &st, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_dp_release(PFT_GSTAT_TIED, x, y, N, D, 1.0, 0.1, rng, NULL, NULL) == PFT_EINVAL);
    y[3] = -1;
    CHECK(pft_gstat_dp_release(PFT_GSTAT_FULL, x, y, N, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL && !st);
    y[3] = 1;
    x[5] = NAN;
    CHECK(pft_gstat_dp_release(PFT_GSTAT_FULL, x, y, N, D, 1.0, 0.1, rng, &st, NULL) == PFT_EINVAL && !st);
    x[5] = 0.0f;
    pft_gstat_dp_raw_t *raw = NULL;
    CHECK(pft_gstat_dp_raw(PFT_GSTAT_FULL, x, y, N, D, -1.0, rng, &raw) == PFT_EINVAL && !raw);
    CHECK(pft_gstat_dp_raw(PFT_GSTAT_FULL, x, y, N, D, INFINITY, rng, &raw) == PFT_EINVAL);
    CHECK(pft_gstat_dp_raw(PFT_GSTAT_FULL, x, y, N, D, 1.0, NULL, &raw) == PFT_EINVAL);
    CHECK(pft_gstat_dp_finish(NULL, &st, NULL) == PFT_EINVAL);
    /* valid again */
    CHECK(pft_gstat_dp_release(PFT_GSTAT_FULL, x, y, N, D, 1.0, 0.1, rng, &st, NULL) == 0 && st);
    pft_gstat_destroy(&st);
    pft_rng_destroy(&rng);
}

/* The sums-only release (what a tied node sends under DP): σ = 2 · 2.5746570186372061 at ε = 1, δ = 1e-3 (the
 * analytic calibration at Δ₂ = 2, test_sigma); per class
 * the released mean times n_c minus the exact sum is N(0, σ²) (std within 5 % over R releases, mean near 0);
 * counts exact, the scatter zero; info says Δ₂ = 2 and C·d noisy elements. */
static void test_sums_release(void)
{
    enum { R = 2000, D = 3, N = 30, C = 3 };
    float x[N * D];
    int32_t y[N];
    unit_rows(N, D, C, 3, x, y);
    double delta = 1e-3, sigma = 2.0 * 2.5746570186372061;
    CHECK_NEAR(pft_gstat_dp_sigma_sums(1.0, delta), sigma, 1e-10);
    CHECK(pft_dp_gauss_delta(PFT_GSTAT_DP_SENS_SUMS, sigma, 1.0) <= delta);
    double exact[C * D] = {0};
    uint64_t cnt[C] = {0};
    for (int i = 0; i < N; i++) {
        cnt[y[i]]++;
        for (int j = 0; j < D; j++)
            exact[y[i] * D + j] += x[i * D + j];
    }
    double se2 = 0, se = 0, w_abs = 0;
    long m = 0;
    pft_rng_t *rng = pft_rng_new(7);
    for (int t = 0; t < R; t++) {
        pft_gstat_t *st = NULL;
        pft_gstat_dp_info_t info;
        CHECK(pft_gstat_dp_release_sums(x, y, N, D, 1.0, delta, rng, &st, &info) == 0);
        if (!st)
            break;
        if (t == 0) {
            CHECK(info.sens == PFT_GSTAT_DP_SENS_SUMS && info.noisy_elems == (size_t)C * D && info.n == N);
            CHECK_NEAR(info.sigma, sigma, 1e-12);
            CHECK(pft_gstat_kind(st) == PFT_GSTAT_TIED && pft_gstat_n_classes(st) == C);
        }
        for (int c = 0; c < C; c++) {
            CHECK(pft_gstat_count(st, c) == cnt[c]);
            for (int j = 0; j < D; j++) {
                double e = (double)cnt[c] * pft_gstat_mean(st, c)[j] - exact[c * D + j];
                se += e;
                se2 += e * e;
                m++;
            }
        }
        const double *w = pft_gstat_tied_scatter(st);
        for (int k = 0; k < D * D; k++)
            w_abs += fabs(w[k]);
        pft_gstat_destroy(&st);
    }
    pft_rng_destroy(&rng);
    double sd = sqrt(se2 / (double)m), mu = se / (double)m;
    CHECK_MSG(fabs(sd / sigma - 1) < 0.05 && fabs(mu) < 4 * sigma / sqrt((double)m),
              "released sums − exact: std %g (σ %g), mean %g", sd, sigma, mu);
    CHECK(w_abs == 0.0);
    pft_gstat_t *st = NULL;
    CHECK(pft_gstat_dp_release_sums(x, y, N, D, 0.0, delta, rng, &st, NULL) == PFT_EINVAL && !st);
    CHECK(pft_gstat_dp_release_sums(x, y, N, D, 1.0, delta, NULL, &st, NULL) == PFT_EINVAL && !st);
}

int main(void)
{
    RUN(test_sensitivity);
    RUN(test_sigma);
    RUN(test_noise_statistics);
    RUN(test_psd);
    RUN(test_exact_limit);
    RUN(test_clipping);
    RUN(test_bad_arguments);
    RUN(test_sums_release);
    return pft_test_done();
}
