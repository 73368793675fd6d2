/* Tests of pft_gstat and pft_ghead: exact merging against centralized statistics, PSD checks, mixture
 * moments, the Gaussian heads against the Bayes rule, and the cross-validation against a brute-force refit
 * per fold. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_gstat_lowrank.h"
#include "pft_linalg.h"
#include "pft_rng.h"
#include "pft_test.h"

/* n rows in d dims of C classes: class c centred at c·shift on dimension c % d, correlated noise. */
static void make_rows(int n, int d, int C, double shift, uint64_t seed, float *x, int32_t *y)
{
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)pft_rng_below(r, (uint64_t)C);
        double common = pft_rng_normal(r);
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = (float)(0.5 * common + pft_rng_normal(r) * (1.0 + 0.1 * j) +
                                           (j == y[i] % d ? shift * y[i] : 0) + 3);
    }
    pft_rng_destroy(&r);
}

static double rel_err(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* A chain of parts merged one by one equals the statistics of all rows at once (1e-9 relative). */
static void test_chain_merge_exact(void)
{
    const int d = 12, C = 4, parts = 6, per = 40;
    float *x = malloc(sizeof(float) * parts * per * d);
    int32_t *y = malloc(sizeof(int32_t) * parts * per);
    make_rows(parts * per, d, C, 2.0, 7, x, y);
    for (int kind = 0; kind < 2; kind++) {
        pft_gstat_t *central = pft_gstat_new((pft_gstat_kind_t)kind, d);
        CHECK(pft_gstat_add_rows(central, x, y, (size_t)parts * per) == 0);
        pft_gstat_t *acc = pft_gstat_new((pft_gstat_kind_t)kind, d);
        for (int p = 0; p < parts; p++) { /* each node: own rows, then merge into what came from upstream */
            pft_gstat_t *own = pft_gstat_new((pft_gstat_kind_t)kind, d);
            CHECK(pft_gstat_add_rows(own, x + (size_t)p * per * d, y + p * per, (size_t)per) == 0);
            CHECK(pft_gstat_merge(acc, own) == 0);
            pft_gstat_destroy(&own);
        }
        CHECK(pft_gstat_n_classes(acc) == pft_gstat_n_classes(central));
        CHECK(pft_gstat_total(acc) == (uint64_t)parts * per);
        double worst = 0;
        for (int c = 0; c < pft_gstat_n_classes(acc); c++) {
            CHECK(pft_gstat_count(acc, c) == pft_gstat_count(central, c));
            double e = rel_err(pft_gstat_mean(acc, c), pft_gstat_mean(central, c), (size_t)d);
            worst = e > worst ? e : worst;
            if (kind == PFT_GSTAT_FULL) {
                e = rel_err(pft_gstat_scatter(acc, c), pft_gstat_scatter(central, c), (size_t)d * d);
                worst = e > worst ? e : worst;
            }
        }
        double *wa = malloc(sizeof(double) * d * d), *wc = malloc(sizeof(double) * d * d);
        pft_gstat_pooled(acc, wa);
        pft_gstat_pooled(central, wc);
        double e = rel_err(wa, wc, (size_t)d * d);
        worst = e > worst ? e : worst;
        CHECK_MSG(worst < 1e-9, "%s: relative error %.3g", pft_gstat_kind_name((pft_gstat_kind_t)kind),
                  worst);
        /* the naive one-pass formula, for scale: the scatter from Σxxᵀ - nμμᵀ in double */
        free(wa);
        free(wc);
        pft_gstat_destroy(&acc);
        pft_gstat_destroy(&central);
    }
    free(x);
    free(y);
}

/* FULL merges into TIED (pooled); the reverse is refused; dup is deep. */
static void test_kinds(void)
{
    const int d = 5, n = 60;
    float x[60 * 5];
    int32_t y[60];
    make_rows(n, d, 3, 1.0, 3, x, y);
    pft_gstat_t *full = pft_gstat_new(PFT_GSTAT_FULL, d), *tied = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(full, x, y, n) == 0);
    CHECK(pft_gstat_add_rows(tied, x, y, n) == 0);
    pft_gstat_t *t2 = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_merge(t2, full) == 0);
    double a[25], b[25];
    pft_gstat_pooled(t2, a);
    pft_gstat_pooled(tied, b);
    CHECK(rel_err(a, b, 25) < 1e-12);
    CHECK(pft_gstat_merge(full, tied) == PFT_EINVAL);
    CHECK(pft_gstat_scatter(tied, 0) == NULL && pft_gstat_tied_scatter(full) == NULL);
    pft_gstat_t *dup = pft_gstat_dup(full);
    CHECK(dup && pft_gstat_total(dup) == (uint64_t)n);
    pft_gstat_destroy(&dup);
    pft_gstat_destroy(&dup);
    /* bad input leaves the statistics unaltered */
    float bad[5] = {1, 2, NAN, 4, 5};
    int32_t lab = 0;
    CHECK(pft_gstat_add_rows(full, bad, &lab, 1) == PFT_EINVAL);
    lab = -1;
    CHECK(pft_gstat_add_rows(full, x, &lab, 1) == PFT_EINVAL);
    CHECK(pft_gstat_total(full) == (uint64_t)n);
    double m[5] = {0};
    CHECK(pft_gstat_add_class(full, 1, 0, m, NULL) == PFT_EINVAL);
    m[2] = INFINITY;
    CHECK(pft_gstat_add_class(full, 1, 3, m, NULL) == PFT_EINVAL);
    CHECK(pft_gstat_new(PFT_GSTAT_FULL, 0) == NULL);
    pft_gstat_destroy(&full);
    pft_gstat_destroy(&tied);
    pft_gstat_destroy(&t2);
}

/* A mixture's moments: two components, known answer. */
static void test_mixture_moments(void)
{
    const int d = 2;
    double w[2] = {0.25, 0.75}, mu[4] = {0, 0, 4, 2}, cov[8] = {1, 0.5, 0.5, 2, 3, 0, 0, 1};
    pft_gstat_t *s = pft_gstat_new(PFT_GSTAT_FULL, d);
    CHECK(pft_gstat_add_mixture(s, 0, 100, 2, w, mu, cov) == 0);
    const double *m = pft_gstat_mean(s, 0), *sc = pft_gstat_scatter(s, 0);
    CHECK_NEAR(m[0], 3.0, 1e-12);
    CHECK_NEAR(m[1], 1.5, 1e-12);
    /* Σ = Σ w_k Σ_k + Σ w_k (μ_k - μ)(μ_k - μ)ᵀ: [[2.5+3, 0.125+1.5], [.., 1.25+0.75]] */
    CHECK_NEAR(sc[0] / 100, 0.25 * 1 + 0.75 * 3 + 0.25 * 9 + 0.75 * 1, 1e-12);
    CHECK_NEAR(sc[1] / 100, 0.25 * 0.5 + 0.25 * 3 * 1.5 + 0.75 * 1 * 0.5, 1e-12);
    CHECK_NEAR(sc[3] / 100, 0.25 * 2 + 0.75 * 1 + 0.25 * 2.25 + 0.75 * 0.25, 1e-12);
    CHECK_NEAR(sc[1], sc[2], 0);
    pft_gstat_destroy(&s);
}

/* PSD check: a rank-deficient scatter rounded to fp32 passes, an indefinite matrix does not. */
static void test_check_psd(void)
{
    const int d = 30, n = 10; /* n < d: singular scatter */
    float x[10 * 30];
    int32_t y[10] = {0};
    make_rows(n, d, 1, 0, 11, x, y);
    pft_gstat_t *s = pft_gstat_new(PFT_GSTAT_FULL, d);
    CHECK(pft_gstat_add_rows(s, x, y, n) == 0);
    double m[900];
    memcpy(m, pft_gstat_scatter(s, 0), sizeof m);
    for (int i = 0; i < d * d; i++)
        m[i] = (float)m[i];
    CHECK(pft_gstat_check_psd(m, d, 0x1p-24) == 0);
    m[0] = -m[0];
    CHECK(pft_gstat_check_psd(m, d, 0x1p-24) == PFT_ENUMERIC);
    memcpy(m, pft_gstat_scatter(s, 0), sizeof m);
    m[1] = m[d] = 10 * sqrt(m[0] * m[d + 1]); /* a 2×2 minor with a negative determinant */
    CHECK(pft_gstat_check_psd(m, d, 0x1p-24) == PFT_ENUMERIC);
    pft_gstat_destroy(&s);
}

/* Statistics of known Gaussians (set exactly through add_class); the heads' decisions are the Bayes rule's.
 */
static void test_bayes_rule(void)
{
    const int d = 4, C = 3, n_test = 500;
    double mus[3][4] = {{0, 0, 0, 0}, {2, 1, 0, -1}, {-1, 2, 1, 0}};
    double sig[3][16];
    double base[16] = {2, 0.5, 0, 0, 0.5, 1, 0.2, 0, 0, 0.2, 1.5, 0.3, 0, 0, 0.3, 1};
    uint64_t ns[3] = {100, 300, 600};
    for (int kind = 0; kind < 2; kind++) {
        pft_gstat_t *st = pft_gstat_new(kind == 0 ? PFT_GSTAT_TIED : PFT_GSTAT_FULL, d);
        for (int c = 0; c < C; c++) {
            double sc[16];
            for (int i = 0; i < 16; i++) {
                sig[c][i] =
                    base[i] * (kind == 0 ? 1.0 : 1.0 + 0.5 * c) + (kind == 1 && i % 5 == 0 ? 0.3 * c : 0);
                sc[i] = sig[c][i] * (double)ns[c];
            }
            CHECK(pft_gstat_add_class(st, c, ns[c], mus[c], sc) == 0);
        }
        pft_ghead_opts_t o;
        pft_ghead_opts_default(&o);
        o.kind = kind == 0 ? PFT_GHEAD_LDA : PFT_GHEAD_QDA;
        o.alpha = 0;
        o.lambda = 0;
        pft_ghead_t *h = NULL;
        pft_ghead_info_t info;
        CHECK(pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, &info) == 0);
        CHECK(info.rule && strcmp(info.rule, "fixed") == 0);
        /* naive Bayes rule */
        float x[500 * 4];
        pft_rng_t *r = pft_rng_new(5);
        for (int i = 0; i < n_test * d; i++)
            x[i] = (float)(2.0 * pft_rng_normal(r));
        pft_rng_destroy(&r);
        int32_t pred[500];
        CHECK(pft_ghead_predict(h, x, n_test, pred) == 0);
        double N = 1000, pooled[16] = {0};
        for (int c = 0; c < C; c++)
            for (int i = 0; i < 16; i++)
                pooled[i] += sig[c][i] * (double)ns[c] / N;
        int agree = 0;
        for (int t = 0; t < n_test; t++) {
            int best = -1;
            double bs = -INFINITY;
            for (int c = 0; c < C; c++) {
                double L[16];
                memcpy(L, kind == 0 ? pooled : sig[c], sizeof L);
                CHECK(pft_la_chol_lower(L, d) == 0);
                double z[4], ld = 0;
                for (int i = 0; i < d; i++) { /* forward solve L z = x - μ */
                    double v = x[t * d + i] - mus[c][i];
                    for (int j = 0; j < i; j++)
                        v -= L[i * d + j] * z[j];
                    z[i] = v / L[i * d + i];
                    ld += 2 * log(L[i * d + i]);
                }
                double q = 0;
                for (int i = 0; i < d; i++)
                    q += z[i] * z[i];
                double s = log((double)ns[c] / N) - 0.5 * q - (kind == 1 ? 0.5 * ld : 0);
                if (s > bs) {
                    bs = s;
                    best = c;
                }
            }
            agree += best == pred[t];
        }
        CHECK_MSG(agree == n_test, "%s: %d of %d decisions agree", kind == 0 ? "LDA" : "QDA", agree, n_test);
        pft_ghead_destroy(&h);
        pft_ghead_destroy(&h);
        pft_gstat_destroy(&st);
    }
}

/* Gaussian log-density part -½ (x-μ)ᵀ Σ⁻¹ (x-μ) with Σ = L Lᵀ (L from pft_la_chol_lower), by forward solve.
 */
static double half_mahal(const double *L, const double *mu, const float *x, int d)
{
    double z[8], q = 0;
    for (int i = 0; i < d; i++) {
        double v = x[i] - mu[i];
        for (int j = 0; j < i; j++)
            v -= L[i * d + j] * z[j];
        z[i] = v / L[i * d + i];
        q += z[i] * z[i];
    }
    return -0.5 * q;
}

/* LDA's shrinkage against formulas written out here: the covariance at α is (1-α) S + α (tr S / d) I (S the
 * pooled covariance W/N), checked through the score differences s_c - s_0 = log π_c/π_0 + the Gaussian terms
 * (the quadratic term of x cancels); and with no own rows α is OAS (Chen et al. 2010, as in
 * scikit-learn's sklearn.covariance.oas: μ = tr S / d, a = mean of S's squared entries, α = min(1, (a + μ²) /
 * ((N + 1)(a - μ²/d)))). */
static void test_lda_shrinkage_oracle(void)
{
    enum { d = 4, C = 3, n_test = 50 };
    double mus[C][d] = {{0, 0, 0, 0}, {2, 1, 0, -1}, {-1, 2, 1, 0}};
    double S[d * d] = {2, 0.5, 0, 0, 0.5, 1, 0.2, 0, 0, 0.2, 1.5, 0.3, 0, 0, 0.3, 1};
    uint64_t ns[C] = {30, 50, 40};
    double N = 120;
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    for (int c = 0; c < C; c++)
        CHECK(pft_gstat_add_class(st, c, ns[c], mus[c], NULL) == 0);
    double W[d * d];
    for (int i = 0; i < d * d; i++)
        W[i] = S[i] * N;
    CHECK(pft_gstat_add_tied_scatter(st, W) == 0);
    double tr = 0, sq = 0;
    for (int i = 0; i < d; i++)
        tr += S[i * d + i];
    for (int i = 0; i < d * d; i++)
        sq += S[i] * S[i];
    double mu = tr / d, a = sq / (d * d);
    double oas = (a + mu * mu) / ((N + 1) * (a - mu * mu / d));
    oas = oas > 1 ? 1 : oas;
    float x[n_test * d];
    pft_rng_t *r = pft_rng_new(9);
    for (int i = 0; i < n_test * d; i++)
        x[i] = (float)(1.5 * pft_rng_normal(r));
    pft_rng_destroy(&r);
    double alphas[] = {0.4, PFT_GHEAD_AUTO};
    for (int t = 0; t < 2; t++) {
        pft_ghead_opts_t o;
        pft_ghead_opts_default(&o);
        o.alpha = alphas[t];
        pft_ghead_t *h = NULL;
        pft_ghead_info_t info;
        CHECK(pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, &info) == 0);
        if (!h)
            continue;
        double al = t == 0 ? 0.4 : oas;
        if (t == 1) {
            CHECK(strcmp(info.rule, "oas") == 0);
            CHECK_NEAR(info.oas_alpha, oas, 1e-12 * oas);
            CHECK_NEAR(info.alpha, oas, 1e-12 * oas);
        }
        double L[d * d];
        for (int i = 0; i < d * d; i++)
            L[i] = (1 - al) * S[i] + (i % (d + 1) == 0 ? al * mu : 0);
        CHECK(pft_la_chol_lower(L, d) == 0);
        double sc[n_test * C];
        CHECK(pft_ghead_scores(h, x, n_test, sc) == 0);
        double worst = 0;
        for (int i = 0; i < n_test; i++) {
            double o0 = log((double)ns[0] / N) + half_mahal(L, mus[0], x + i * d, d);
            for (int c = 1; c < C; c++) {
                double oc = log((double)ns[c] / N) + half_mahal(L, mus[c], x + i * d, d);
                double e = fabs((sc[i * C + c] - sc[i * C]) - (oc - o0)) / (1 + fabs(oc - o0));
                worst = e > worst ? e : worst;
            }
        }
        /* the linear head keeps its weights in float: agreement to float precision */
        CHECK_MSG(worst < 1e-5, "α = %g: score differences off the formula's by up to %g (relative)", al,
                  worst);
        pft_ghead_destroy(&h);
    }
    pft_gstat_destroy(&st);
}

/* Brute force: held-out accuracy of LDA at α for leave-one-out over own rows, refitting from scratch. */
static double loo_acc(const float *up_x, const int32_t *up_y, int n_up, const float *x, const int32_t *y,
                      int n, int d, int C, double alpha)
{
    int ok = 0;
    for (int hold = 0; hold < n; hold++) {
        pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
        pft_gstat_add_rows(st, up_x, up_y, (size_t)n_up);
        for (int i = 0; i < n; i++)
            if (i != hold)
                pft_gstat_add_rows(st, x + (size_t)i * d, y + i, 1);
        pft_ghead_opts_t o;
        pft_ghead_opts_default(&o);
        o.alpha = alpha;
        pft_ghead_t *h = NULL;
        if (pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, NULL) == 0) {
            int32_t p;
            pft_ghead_predict(h, x + (size_t)hold * d, 1, &p);
            ok += p == y[hold];
        }
        pft_ghead_destroy(&h);
        pft_gstat_destroy(&st);
    }
    return (double)ok / n;
}

/* The cross-validation's exact downdate (Woodbury in the eigenbasis) agrees with refitting per fold. */
static void test_cv_matches_refit(void)
{
    const int d = 20, C = 3, n_up = 40, n = 15; /* N = 55 > d; the LOO statistics lose one row */
    float up[40 * 20], x[15 * 20];
    int32_t uy[40], y[15];
    make_rows(n_up, d, C, 1.2, 21, up, uy);
    make_rows(n, d, C, 1.2, 22, x, y);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(st, up, uy, n_up) == 0);
    CHECK(pft_gstat_add_rows(st, x, y, n) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.folds = 20; /* more folds than rows: leave-one-out, so the assignment does not matter */
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == 0);
    CHECK(strcmp(info.rule, "cv") == 0 && info.folds == n && info.cv_rows == n);
    double brute = loo_acc(up, uy, n_up, x, y, n, d, C, info.alpha);
    CHECK_NEAR(info.cv_acc, brute, 1e-12);
    double grid[] = {0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.9};
    for (size_t g = 0; g < sizeof grid / sizeof grid[0]; g++)
        CHECK_MSG(loo_acc(up, uy, n_up, x, y, n, d, C, grid[g]) <= info.cv_acc + 1e-12,
                  "α = %g beats the choice", grid[g]);
    CHECK(info.oas_alpha >= 0 && info.oas_alpha <= 1);
    pft_ghead_destroy(&h);
    /* own rows that are not part of the statistics are refused */
    int32_t wrong[15];
    for (int i = 0; i < n; i++)
        wrong[i] = 3; /* a label the statistics do not hold */
    CHECK(pft_ghead_fit(st, x, wrong, n, C, &o, &h, &info) == PFT_EINVAL && h == NULL);
    /* QDA from tied statistics is refused; a label beyond n_classes too */
    o.kind = PFT_GHEAD_QDA;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == PFT_EINVAL);
    o.kind = PFT_GHEAD_LDA;
    CHECK(pft_ghead_fit(st, x, y, n, 2, &o, &h, &info) == PFT_EINVAL);
    /* few own rows: OAS */
    CHECK(pft_ghead_fit(st, x, y, 3, C, &o, &h, &info) == 0 && strcmp(info.rule, "oas") == 0);
    CHECK_NEAR(info.alpha, info.oas_alpha, 0);
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
}

/* Cholesky factor (lower, in place) of the d×d symmetric positive definite a, with plain loops (no LAPACK, no
 * pft_la); 0, or -1 when a pivot is not positive. */
static int chol_plain(double *a, int d)
{
    for (int j = 0; j < d; j++) {
        double s = a[j * d + j];
        for (int k = 0; k < j; k++)
            s -= a[j * d + k] * a[j * d + k];
        if (!(s > 0))
            return -1;
        a[j * d + j] = sqrt(s);
        for (int i = j + 1; i < d; i++) {
            double v = a[i * d + j];
            for (int k = 0; k < j; k++)
                v -= a[i * d + k] * a[j * d + k];
            a[i * d + j] = v / a[j * d + j];
        }
    }
    return 0;
}

/* Brute-force QDA of raw rows (n×d, labels 0..C-1) at (α, λ), the discriminant of pft_ghead.h written out
 * with plain loops: per class n_c, μ_c, M_c; W = Σ M_c, N = Σ n_c; Σ_c = (1-α)[(1-λ) M_c/n_c + λ W/N] + α t_c
 * I with t_c the bracket's mean eigenvalue (trace / d); s_c(x) = log(n_c/N) - ½ log|Σ_c| - ½ (x-μ_c)ᵀ Σ_c⁻¹
 * (x-μ_c); classes without rows are never chosen. Predictions into pred, scores into sc (n×C; -inf for a
 * class without rows). d ≤ 8, C ≤ 4. */
static void qda_brute(const float *x, const int32_t *y, int n, int d, int C, double alpha, double lambda,
                      int32_t *pred, double *sc)
{
    double cnt[4] = {0}, mu[4][8] = {{0}}, m[4][64] = {{0}}, w[64] = {0}, L[4][64], logdet[4] = {0};
    for (int r = 0; r < n; r++) {
        cnt[y[r]]++;
        for (int j = 0; j < d; j++)
            mu[y[r]][j] += x[r * d + j];
    }
    double N = 0;
    for (int c = 0; c < C; c++) {
        N += cnt[c];
        for (int j = 0; j < d && cnt[c] > 0; j++)
            mu[c][j] /= cnt[c];
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                m[y[r]][i * d + j] += (x[r * d + i] - mu[y[r]][i]) * (x[r * d + j] - mu[y[r]][j]);
    for (int c = 0; c < C; c++)
        for (int i = 0; i < d * d; i++)
            w[i] += m[c][i];
    for (int c = 0; c < C; c++) {
        if (cnt[c] == 0)
            continue;
        double tr = 0;
        for (int i = 0; i < d * d; i++)
            L[c][i] = (1 - lambda) * m[c][i] / cnt[c] + lambda * w[i] / N;
        for (int i = 0; i < d; i++)
            tr += L[c][i * d + i];
        for (int i = 0; i < d * d; i++)
            L[c][i] = (1 - alpha) * L[c][i] + (i % (d + 1) == 0 ? alpha * tr / d : 0);
        CHECK(chol_plain(L[c], d) == 0);
        for (int i = 0; i < d; i++)
            logdet[c] += 2 * log(L[c][i * d + i]);
    }
    for (int r = 0; r < n; r++) {
        double best = -INFINITY;
        pred[r] = -1;
        for (int c = 0; c < C; c++) {
            sc[r * C + c] = -INFINITY;
            if (cnt[c] == 0)
                continue;
            double z[8], q = 0;
            for (int i = 0; i < d; i++) { /* L z = x - μ_c */
                double v = x[r * d + i] - mu[c][i];
                for (int k = 0; k < i; k++)
                    v -= L[c][i * d + k] * z[k];
                z[i] = v / L[c][i * d + i];
                q += z[i] * z[i];
            }
            double s = log(cnt[c] / N) - 0.5 * logdet[c] - 0.5 * q;
            sc[r * C + c] = s;
            if (s > best) {
                best = s;
                pred[r] = c;
            }
        }
    }
}

/* QDA with chosen λ: every prediction is the brute-force discriminant's at the chosen (α, λ) (so its accuracy
 * is the brute force's), labels without statistics are never predicted. */
/* Shrinkage evidence (one α for one set of statistics): each grid point's tally equals the brute-force
 * leave-one-out count of rows right (refit from the other rows), a contributor's evidence alone chooses what
 * pft_ghead_fit's cross-validation chooses, and tallies add: a second contributor's evidence moves the choice
 * only as much as its weight lets it. */
static void test_evidence(void)
{
    const int d = 20, C = 3, n_up = 40, n = 15;
    float up[40 * 20], x[15 * 20], x2[15 * 20];
    int32_t uy[40], y[15], y2[15];
    make_rows(n_up, d, C, 1.2, 21, up, uy);
    make_rows(n, d, C, 1.2, 22, x, y);
    make_rows(n, d, C, 0.4, 23, x2, y2); /* a harder contributor */
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(st, up, uy, n_up) == 0 && pft_gstat_add_rows(st, x, y, n) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.folds = 20; /* leave-one-out */
    pft_ghead_evidence_t ev[PFT_GHEAD_N_ALPHA], ev2[PFT_GHEAD_N_ALPHA];
    CHECK(pft_ghead_evidence(st, x, y, n, C, &o, ev) == 0);
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++) {
        CHECK(ev[a].alpha == pft_ghead_alpha_grid(a) && (a == 0 || ev[a].alpha > ev[a - 1].alpha));
        if (ev[a].total == 0)
            continue; /* α unusable with these statistics */
        double brute = loo_acc(up, uy, n_up, x, y, n, d, C, ev[a].alpha);
        CHECK_MSG(ev[a].total == (uint64_t)n && fabs((double)ev[a].correct - brute * n) < 1e-9,
                  "α %g: %llu of %llu right, brute force %.0f", ev[a].alpha,
                  (unsigned long long)ev[a].correct, (unsigned long long)ev[a].total, brute * n);
    }
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == 0);
    const pft_ghead_evidence_t *one[2] = {ev, ev2};
    CHECK_NEAR(pft_ghead_evidence_alpha(one, NULL, 1), info.alpha, 0);
    pft_ghead_destroy(&h);
    pft_gstat_t *st2 = pft_gstat_dup(st);
    CHECK(pft_gstat_add_rows(st2, x2, y2, n) == 0);
    CHECK(pft_ghead_evidence(st2, x2, y2, n, C, &o, ev2) == 0);
    double w0[2] = {1, 0}, w1[2] = {0, 1};
    CHECK_NEAR(pft_ghead_evidence_alpha(one, w0, 2), info.alpha, 0); /* weight 0: ignored */
    double a1 = pft_ghead_evidence_alpha(one + 1, NULL, 1);
    CHECK_NEAR(pft_ghead_evidence_alpha(one, w1, 2), a1, 0);
    /* the sum: the α whose summed right count is largest, by brute force over the grid */
    double both = pft_ghead_evidence_alpha(one, NULL, 2);
    uint64_t best = 0;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
        if (ev[a].total && ev2[a].total && ev[a].correct + ev2[a].correct > best)
            best = ev[a].correct + ev2[a].correct;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
        if (ev[a].alpha == both)
            CHECK(ev[a].correct + ev2[a].correct == best && ev[a].total && ev2[a].total);
    CHECK(pft_ghead_evidence_alpha(one, NULL, 0) == -1.0);
    /* too few rows: no evidence (1), QDA refused */
    CHECK(pft_ghead_evidence(st, x, y, 3, C, &o, ev) == 1);
    o.kind = PFT_GHEAD_QDA;
    CHECK(pft_ghead_evidence(st, x, y, n, C, &o, ev) == PFT_EINVAL);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&st2);
}

/* The α the rule chooses from tallies ev (most rows right, then the lower cross-entropy, then the larger α),
 * by brute force: its grid index, or -1 when none is usable. */
static int rule_best(const pft_ghead_evidence_t *ev)
{
    int b = -1;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
        if (ev[a].total && (b < 0 || ev[a].correct > ev[b].correct ||
                            (ev[a].correct == ev[b].correct && ev[a].loss <= ev[b].loss)))
            b = a;
    return b;
}

/* 1 if the tie at the top of ev matters: among the α with the most rows right, the lowest cross-entropy is
 * neither the first nor the last of them (so "first" or "last" alone chooses another α). */
static int tie_matters(const pft_ghead_evidence_t *ev)
{
    int b = rule_best(ev), first = -1, last = -1;
    for (int a = 0; b >= 0 && a < PFT_GHEAD_N_ALPHA; a++)
        if (ev[a].total && ev[a].correct == ev[b].correct) {
            first = first < 0 ? a : first;
            last = a;
        }
    return b >= 0 && b != first && b != last && ev[b].loss < ev[last].loss && ev[b].loss < ev[first].loss;
}

/* The cross-validation's tie-break: among α with the same rows right, the lower held-out cross-entropy, then
 * the larger α. pft_ghead_fit's α (leave-one-out) is the rule applied, by brute force here, to the same
 * folds' tallies (pft_ghead_evidence); the rows are the first of seeds 100.. whose tie matters (the lowest
 * cross-entropy inside a tie of several α). Then pft_ghead_evidence_alpha on tallies written by hand. */
static void test_cv_tie_break(void)
{
    const int d = 20, C = 3, n_up = 40, n = 15;
    float up[40 * 20], x[15 * 20];
    int32_t uy[40], y[15];
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.folds = 20; /* leave-one-out */
    pft_ghead_evidence_t ev[PFT_GHEAD_N_ALPHA];
    int seed = 100, found = 0;
    pft_gstat_t *st = NULL;
    for (; seed < 200 && !found; seed++) {
        pft_gstat_destroy(&st);
        make_rows(n_up, d, C, 1.2, (uint64_t)seed, up, uy);
        make_rows(n, d, C, 0.6, (uint64_t)seed + 1000, x, y);
        st = pft_gstat_new(PFT_GSTAT_TIED, d);
        CHECK(pft_gstat_add_rows(st, up, uy, n_up) == 0 && pft_gstat_add_rows(st, x, y, n) == 0);
        found = pft_ghead_evidence(st, x, y, n, C, &o, ev) == 0 && tie_matters(ev);
    }
    CHECK_MSG(found, "no seed in 100..199 gives a tie whose lowest cross-entropy is inside it");
    if (found) {
        pft_ghead_t *h = NULL;
        pft_ghead_info_t info;
        int b = rule_best(ev);
        CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == 0);
        fprintf(stderr, "  seed %d: %llu of %d right at best; chosen α %g, the rule's %g (loss %.4f)\n",
                seed - 1, (unsigned long long)ev[b].correct, n, info.alpha, ev[b].alpha, ev[b].loss);
        CHECK_NEAR(info.alpha, ev[b].alpha, 0);
        const pft_ghead_evidence_t *one[1] = {ev};
        CHECK_NEAR(pft_ghead_evidence_alpha(one, NULL, 1), ev[b].alpha, 0);
        pft_ghead_destroy(&h);
    }
    pft_gstat_destroy(&st);
    /* by hand: α 3, 7, 9, 12 right 10 times, the rest 9; cross-entropy 5, 2, 2, 4: the tie 7/9 goes to 9 */
    pft_ghead_evidence_t hand[PFT_GHEAD_N_ALPHA];
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
        hand[a] =
            (pft_ghead_evidence_t){.alpha = pft_ghead_alpha_grid(a), .correct = 9, .total = 12, .loss = 1};
    hand[3].correct = hand[7].correct = hand[9].correct = hand[12].correct = 10;
    hand[3].loss = 5, hand[7].loss = 2, hand[9].loss = 2, hand[12].loss = 4;
    const pft_ghead_evidence_t *h1[1] = {hand};
    CHECK_NEAR(pft_ghead_evidence_alpha(h1, NULL, 1), pft_ghead_alpha_grid(9), 0);
    hand[9].loss = 2.5; /* now 7 alone has the lowest */
    CHECK_NEAR(pft_ghead_evidence_alpha(h1, NULL, 1), pft_ghead_alpha_grid(7), 0);
    hand[0].correct = 11, hand[0].loss = 100; /* rows right come first */
    CHECK_NEAR(pft_ghead_evidence_alpha(h1, NULL, 1), pft_ghead_alpha_grid(0), 0);
}

static void test_qda_cv(void)
{
    const int d = 6, C = 4, n = 400;
    float *x = malloc(sizeof(float) * n * d);
    int32_t *y = malloc(sizeof(int32_t) * n);
    make_rows(n, d, 3, 3.0, 31, x, y); /* labels 0..2 only; C = 4 */
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_FULL, d);
    CHECK(pft_gstat_add_rows(st, x, y, n) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.kind = PFT_GHEAD_QDA;
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == 0);
    CHECK(info.lambda == 0.25 || info.lambda == 0.5 || info.lambda == 0.75);
    CHECK(info.cv_acc > 0.6);
    double acc, pc[4];
    int cnt[4];
    CHECK(pft_ghead_accuracy(h, x, y, n, &acc, pc, cnt) == 0);
    CHECK(cnt[3] == 0 && isnan(pc[3]));
    int32_t *p = malloc(sizeof(int32_t) * n), *q = malloc(sizeof(int32_t) * n);
    CHECK(pft_ghead_predict(h, x, n, p) == 0);
    double *s = malloc(sizeof(double) * n * C), *bs = malloc(sizeof(double) * n * C), worst = 0;
    qda_brute(x, y, n, d, C, info.alpha, info.lambda, q, bs);
    CHECK(pft_ghead_scores(h, x, n, s) == 0);
    int never3 = 1, agree = 0, right = 0;
    for (int i = 0; i < n; i++) {
        never3 &= p[i] != 3;
        agree += p[i] == q[i];
        right += q[i] == y[i];
        for (int c = 0; c < 3; c++) /* the classes with rows: every score, not only the argmax */
            worst = fmax(worst, fabs(s[i * C + c] - bs[i * C + c]) / (1 + fabs(bs[i * C + c])));
    }
    CHECK_MSG(worst < 1e-9, "QDA scores differ from the brute force's by %.3g (relative)", worst);
    free(s);
    free(bs);
    CHECK(never3);
    CHECK_MSG(agree == n, "QDA at α %g, λ %g: %d of %d predictions are the brute force's", info.alpha,
              info.lambda, agree, n);
    CHECK_NEAR(acc, (double)right / n, 1e-12);
    free(p);
    free(q);
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    free(x);
    free(y);
}

/* Allocation failure at every allocation of add_rows and merge: a clean PFT_ENOMEM with the statistics
 * unaltered, or success. */
static void test_alloc_failures(void)
{
    const int d = 6, n = 50;
    float x[50 * 6];
    int32_t y[50];
    make_rows(n, d, 4, 1.0, 41, x, y);
    pft_gstat_t *base = pft_gstat_new(PFT_GSTAT_FULL, d), *other = pft_gstat_new(PFT_GSTAT_FULL, d);
    CHECK(pft_gstat_add_rows(base, x, y, 20) == 0 && pft_gstat_add_rows(other, x + 20 * d, y + 20, 30) == 0);
    int bad = 0, ok = 0;
    for (int op = 0; op < 2; op++)
        for (long k = 0; k < 40; k++) {
            pft_gstat_t *s = pft_gstat_dup(base);
            pft_alloc_fail_after(k);
            int rc = op == 0 ? pft_gstat_add_rows(s, x + 20 * d, y + 20, 30) : pft_gstat_merge(s, other);
            pft_alloc_fail_after(-1);
            if (rc == 0)
                ok++;
            else if (rc != PFT_ENOMEM || pft_gstat_total(s) != 20 ||
                     pft_gstat_n_classes(s) != pft_gstat_n_classes(base) ||
                     rel_err(pft_gstat_mean(s, 0), pft_gstat_mean(base, 0), (size_t)d) != 0)
                bad++;
            pft_gstat_destroy(&s);
        }
    CHECK(bad == 0);
    CHECK(ok > 0);
    pft_gstat_destroy(&base);
    pft_gstat_destroy(&other);
}

/* C = A Aᵀ (d×d) with A d×r Gaussian, column j scaled by 0.7^j (a decaying spectrum), r ≤ d. */
static void make_psd(int d, int r, uint64_t seed, double *c)
{
    double *a = malloc(sizeof(double) * (size_t)d * r);
    pft_rng_t *g = pft_rng_new(seed);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < r; j++)
            a[(size_t)i * r + j] = pft_rng_normal(g) * pow(0.7, j);
    for (int i = 0; i < d; i++)
        for (int k = 0; k < d; k++) {
            double v = 0;
            for (int j = 0; j < r; j++)
                v += a[(size_t)i * r + j] * a[(size_t)k * r + j];
            c[(size_t)i * d + k] = v;
        }
    pft_rng_destroy(&g);
    free(a);
}

/* Low-rank-plus-diagonal form of a shared covariance: exact when rank(C) ≤ q, the diagonal kept, psi ≥ 0, the
 * error not increasing in q, signs canonical, bad arguments refused. */
static void test_lowrank_shared(void)
{
    const int d = 24;
    double *c = malloc(sizeof(double) * d * d), *r = malloc(sizeof(double) * d * d);
    double *u = malloc(sizeof(double) * d * d), *psi = malloc(sizeof(double) * d);
    /* rank 5: exact from q = 5 on */
    make_psd(d, 5, 3, c);
    for (int q = 5; q <= d; q += 6) {
        CHECK(pft_gstat_lowrank_shared(c, d, q, u, psi) == 0);
        pft_gstat_lowrank_expand(u, psi, d, q, r);
        CHECK_MSG(rel_err(r, c, (size_t)d * d) < 1e-10, "q = %d: error %g", q, rel_err(r, c, (size_t)d * d));
    }
    /* full rank, decaying spectrum: diagonal exact, psi ≥ 0, error non-increasing in q, symmetric */
    make_psd(d, d, 4, c);
    double prev = INFINITY;
    for (int q = 0; q <= d; q++) {
        CHECK(pft_gstat_lowrank_shared(c, d, q, u, psi) == 0);
        pft_gstat_lowrank_expand(u, psi, d, q, r);
        int diag_ok = 1, psi_ok = 1, sym_ok = 1;
        for (int i = 0; i < d; i++) {
            diag_ok &= fabs(r[(size_t)i * d + i] - c[(size_t)i * d + i]) <= 1e-10 * c[(size_t)i * d + i];
            psi_ok &= psi[i] >= 0 && !signbit(psi[i]);
            for (int k = 0; k < i; k++)
                sym_ok &= r[(size_t)i * d + k] == r[(size_t)k * d + i];
        }
        CHECK_MSG(diag_ok && psi_ok && sym_ok, "q = %d", q);
        double e = rel_err(r, c, (size_t)d * d);
        CHECK_MSG(e <= prev * (1 + 1e-9) + 1e-14, "q = %d: error %g after %g", q, e, prev);
        prev = e;
        if (q == 1 || q == 4) /* the leading directions carry most of it */
            CHECK_MSG(e < (q == 1 ? 0.6 : 0.3), "q = %d: error %g", q, e);
        /* each column's largest-magnitude entry is positive */
        for (int j = 0; j < q; j++) {
            int at = 0;
            for (int i = 1; i < d; i++)
                if (fabs(u[(size_t)i * q + j]) > fabs(u[(size_t)at * q + j]))
                    at = i;
            CHECK(u[(size_t)at * q + j] >= 0);
        }
    }
    CHECK(prev < 1e-10);
    /* deterministic */
    double *u2 = malloc(sizeof(double) * d * 8), *psi2 = malloc(sizeof(double) * d);
    CHECK(pft_gstat_lowrank_shared(c, d, 8, u, psi) == 0 && pft_gstat_lowrank_shared(c, d, 8, u2, psi2) == 0);
    CHECK(memcmp(u, u2, sizeof(double) * d * 8) == 0 && memcmp(psi, psi2, sizeof(double) * d) == 0);
    /* a zero matrix: U = 0, psi = +0 */
    memset(c, 0, sizeof(double) * d * d);
    CHECK(pft_gstat_lowrank_shared(c, d, 3, u, psi) == 0);
    CHECK(u[0] == 0 && psi[0] == 0 && !signbit(psi[0]));
    /* refused */
    CHECK(pft_gstat_lowrank_shared(c, d, -1, u, psi) == PFT_EINVAL);
    CHECK(pft_gstat_lowrank_shared(c, d, d + 1, u, psi) == PFT_EINVAL);
    c[5] = NAN;
    CHECK(pft_gstat_lowrank_shared(c, d, 3, u, psi) == PFT_EINVAL);
    c[5] = 0;
    /* allocation failure: a clean PFT_ENOMEM while an allocation fails, then, once every allocation the call
     * makes succeeds, the same result as without injection */
    make_psd(d, d, 4, c);
    CHECK(pft_gstat_lowrank_shared(c, d, 3, u2, psi2) == 0);
    int nomem = 0, ok = 0;
    for (long k = 0; k < 100 && !ok; k++) {
        memset(u, 0, sizeof(double) * d * 3);
        pft_alloc_fail_after(k);
        int rc = pft_gstat_lowrank_shared(c, d, 3, u, psi);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || rc == PFT_ENOMEM);
        nomem += rc == PFT_ENOMEM;
        ok = rc == 0;
    }
    CHECK_MSG(nomem >= 1 && ok, "%d steps failed with PFT_ENOMEM before a success (%d): no injection seen",
              nomem, ok);
    CHECK(memcmp(u, u2, sizeof(double) * d * 3) == 0 && memcmp(psi, psi2, sizeof(double) * d) == 0);
    /* in the caller's storage (no copy): the same numbers bit for bit; refused as the copying call */
    CHECK(pft_gstat_lowrank_shared_inplace(c, d, 3, u, psi) == 0);
    CHECK(memcmp(u, u2, sizeof(double) * d * 3) == 0 && memcmp(psi, psi2, sizeof(double) * d) == 0);
    CHECK(pft_gstat_lowrank_shared_inplace(c, d, d + 1, u, psi) == PFT_EINVAL);
    free(c);
    free(r);
    free(u);
    free(psi);
    free(u2);
    free(psi2);
}

/* Own rows so few per class that leaving any fold out leaves no within-class scatter (one class of two rows,
 * the rest single rows): no α of the grid is valid in every fold, and the head falls back to the closed-form
 * rule instead of failing (a 1000-node ring's nodes of 10-12 rows over 10 classes failed here). With no class
 * of two different rows there is no covariance at all: refused, with a reason. */
static void test_cv_no_valid_fold(void)
{
    enum { d = 40, C = 9, n = 10 }; /* d > n, as features of 1280 coordinates over a dozen rows */
    float x[n * d];
    int32_t y[n];
    pft_rng_t *r = pft_rng_new(31);
    for (int i = 0; i < n; i++) {
        y[i] = i < 2 ? 0 : i - 1; /* class 0: rows 0 and 1; classes 1..8: one row each */
        for (int j = 0; j < d; j++)
            x[i * d + j] = (float)fmax(0.0, pft_rng_normal(r) + (j == y[i] ? 2.0 : 0.0)); /* ReLU-like */
    }
    pft_rng_destroy(&r);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(st, x, y, n) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    CHECK(n >= o.min_cv_rows); /* cross-validation is tried */
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, &info) == 0 && h != NULL);
    CHECK(h && strcmp(info.rule, "oas") == 0);
    CHECK_NEAR(info.alpha, info.oas_alpha, 0);
    if (h) {
        int32_t p[n];
        pft_ghead_predict(h, x, n, p);
        int ok = 0;
        for (int i = 0; i < n; i++)
            ok += p[i] == y[i];
        CHECK_MSG(ok >= n - 2, "%d of %d own rows", ok, n); /* a usable head, not a constant */
    }
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    /* every class one row (tr W = 0): nearest class mean, each own row its own class; with cross-validation
     * tried (10 rows) and without (9) */
    for (int m = n - 1; m <= n; m++) {
        int32_t yy[n];
        for (int i = 0; i < m; i++)
            yy[i] = i; /* row i its own class: classes 0..m-1 */
        st = pft_gstat_new(PFT_GSTAT_TIED, d);
        CHECK(pft_gstat_add_rows(st, x, yy, m) == 0);
        CHECK(pft_ghead_fit(st, x, yy, m, m, &o, &h, &info) == 0 && h != NULL);
        CHECK(h && strcmp(info.rule, "isotropic") == 0 && info.alpha == 1.0);
        if (h) {
            int32_t p[n];
            pft_ghead_predict(h, x, m, p);
            for (int i = 0; i < m; i++)
                CHECK_MSG(p[i] == yy[i], "%d rows, row %d: %d", m, i, (int)p[i]);
        }
        pft_ghead_destroy(&h);
        pft_gstat_destroy(&st);
    }
}

/* Moves instead of copies (a relay's decode, fold and head statistics): each gives, bit for bit, the numbers
 * of the copy it replaces — pft_gstat_take_all and pft_gstat_merge_take those of a merge into new empty
 * statistics (W's lower triangle mirrored, −0 as +0), and so pft_gstat_classes_with with that W given back,
 * pft_gstat_set_tied_scatter those of
 * pft_gstat_add_tied_scatter — and what they refuse; pft_gstat_same_classes sees means and counts, not W. */
static void test_moves(void)
{
    const int d = 6, n = 40;
    float x[40 * 6];
    int32_t y[40];
    make_rows(n, d, 3, 1.0, 5, x, y);
    pft_gstat_t *a = pft_gstat_new(PFT_GSTAT_TIED, d), *ref = pft_gstat_new(PFT_GSTAT_TIED, d), *t = NULL;
    CHECK(a && ref && pft_gstat_add_rows(a, x, y, n) == 0);
    double *w = pft_gstat_take_tied_scatter(a); /* an asymmetric entry and a −0 the merge would change */
    w[1] += 1e-3;
    w[3 * d + 4] = w[4 * d + 3] = -0.0;
    CHECK(pft_gstat_give_tied_scatter(a, &w) == 0);
    CHECK(pft_gstat_merge(ref, a) == 0);
    pft_gstat_t *a2 = pft_gstat_dup(a);
    CHECK(pft_gstat_take_all(a, &t) == 0 && t && pft_gstat_equal(t, ref));
    CHECK(t && !signbit(pft_gstat_tied_scatter(t)[3 * d + 4]) &&
          pft_gstat_tied_scatter(t)[1] == pft_gstat_tied_scatter(t)[d]);
    CHECK(pft_gstat_tied_scatter(a) == NULL && pft_gstat_total(a) == (uint64_t)n);
    CHECK(pft_gstat_same_classes(a, ref) && !pft_gstat_equal(a, ref));
    pft_gstat_t *t2 = NULL;
    CHECK(pft_gstat_take_all(a, &t2) == PFT_EINVAL && !t2); /* no scatter left */
    /* the classes of statistics whose W went elsewhere, with that W back (a release computed in it first) */
    pft_gstat_t *a3 = pft_gstat_dup(a2), *t3 = NULL;
    double *w3 = a3 ? pft_gstat_take_tied_scatter(a3) : NULL, *none = NULL;
    CHECK(w3 && pft_gstat_classes_with(a3, &w3, &t3) == 0 && !w3 && t3 && pft_gstat_equal(t3, ref));
    CHECK(pft_gstat_classes_with(a3, &none, &t2) == PFT_EINVAL && !t2); /* no W given */
    pft_gstat_destroy(&a3), pft_gstat_destroy(&t3);
    pft_gstat_t *m = NULL;
    CHECK(pft_gstat_merge_take(&m, &a2) == 0 && !a2 && m && pft_gstat_equal(m, ref));
    pft_gstat_t *b = pft_gstat_new(PFT_GSTAT_TIED, d), *b2 = NULL;
    CHECK(pft_gstat_add_rows(b, x, y, 10) == 0 && (b2 = pft_gstat_dup(b)) != NULL);
    pft_gstat_t *want = pft_gstat_dup(m);
    CHECK(pft_gstat_merge(want, b2) == 0);
    CHECK(pft_gstat_merge_take(&m, &b) == 0 && !b && pft_gstat_equal(m, want)); /* into existing: a merge */
    double mean[6] = {0.5, 0, 0, 1, 0, 0};
    pft_gstat_t *s1 = pft_gstat_new(PFT_GSTAT_TIED, d), *s2 = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_class(s1, 2, 4, mean, NULL) == 0 && pft_gstat_add_class(s2, 2, 4, mean, NULL) == 0);
    double *sc = pft_alloc_array((size_t)d * d, sizeof *sc);
    for (int i = 0; i < d * d; i++)
        sc[i] = i % 7 == 0 ? 1.0 + i : (i % 5 == 0 ? -0.0 : 0.25);
    CHECK(pft_gstat_add_tied_scatter(s1, sc) == 0);
    sc[2] = NAN;
    CHECK(pft_gstat_set_tied_scatter(s2, &sc) == PFT_EINVAL && sc); /* refused: kept by the caller */
    sc[2] = 0.25;
    CHECK(pft_gstat_set_tied_scatter(s2, &sc) == 0 && !sc && pft_gstat_equal(s1, s2));
    mean[5] = 1e-7; /* the last coordinate */
    pft_gstat_t *s3 = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_class(s3, 2, 4, mean, NULL) == 0 && !pft_gstat_same_classes(s3, s2));
    pft_gstat_t *full = pft_gstat_new(PFT_GSTAT_FULL, d);
    double *w2 = pft_alloc_array((size_t)d * d, sizeof *w2);
    CHECK(pft_gstat_set_tied_scatter(full, &w2) == PFT_EINVAL && w2);
    CHECK(pft_gstat_take_all(full, &t2) == PFT_EINVAL && !t2);
    CHECK(pft_gstat_classes_with(full, &w2, &t2) == PFT_EINVAL && !t2 && w2); /* FULL: kept by the caller */
    pft_free(w2);
    pft_free(sc);
    pft_gstat_t *all[] = {a, ref, t, m, want, b2, s1, s2, s3, full};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pft_gstat_destroy(&all[i]);
}

int main(void)
{
    RUN(test_chain_merge_exact);
    RUN(test_kinds);
    RUN(test_moves);
    RUN(test_mixture_moments);
    RUN(test_check_psd);
    RUN(test_bayes_rule);
    RUN(test_lda_shrinkage_oracle);
    RUN(test_cv_matches_refit);
    RUN(test_evidence);
    RUN(test_cv_tie_break);
    RUN(test_cv_no_valid_fold);
    RUN(test_qda_cv);
    RUN(test_alloc_failures);
    RUN(test_lowrank_shared);
    return pft_test_done();
}
