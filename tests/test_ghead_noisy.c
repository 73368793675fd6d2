/* Tests of pft_ghead's noisy components (DP sums received: means known up to N(0, τ² I)): the scores against
 * the formula written out here, the cross-validation knowing them against a brute-force refit per fold, and
 * classes reached only through noisy means classified on held-out rows. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_linalg.h"
#include "pft_rng.h"
#include "pft_test.h"

enum { D = 4 };

/* ½ (x - μ)ᵀ Σ⁻¹ (x - μ) with L the lower Cholesky factor of Σ. */
static double half_quad(const double *L, const double *mu, const double *x)
{
    double z[D], q = 0;
    for (int i = 0; i < D; i++) {
        double v = x[i] - mu[i];
        for (int j = 0; j < i; j++)
            v -= L[i * D + j] * z[j];
        z[i] = v / L[i * D + i];
        q += z[i] * z[i];
    }
    return 0.5 * q;
}

/* tr Σ⁻¹ and tr Σ⁻² from the Cholesky factor: Σ⁻¹ = ZᵀZ with Z = L⁻¹ (column k solves L z = e_k). */
static void traces_inv(const double *L, double *t1, double *t2)
{
    double Z[D * D];
    for (int k = 0; k < D; k++)
        for (int i = 0; i < D; i++) {
            double v = i == k;
            for (int j = 0; j < i; j++)
                v -= L[i * D + j] * Z[j * D + k];
            Z[i * D + k] = v / L[i * D + i];
        }
    *t1 = *t2 = 0;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double a = 0;
            for (int r = 0; r < D; r++)
                a += Z[r * D + i] * Z[r * D + j];
            *t1 += i == j ? a : 0;
            *t2 += a * a;
        }
}

static double lse2(double a, double b)
{
    if (a == -INFINITY)
        return b;
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

/* Exact classes 0, 1 (statistics), noisy components of class 1 and of class 2 (no statistics): every class
 * score difference equals the formula's: s_k(x) = log(n_k / N_all) - ½[(x - μ_k)ᵀ A (x - μ_k) - τ_k² (tr A -
 * κ sqrt(2 tr A²))], A = Σ_α⁻¹, κ = 1, a class the log-sum-exp of its components; and the linear head has one
 * row per component. */
static void test_scores_formula(void)
{
    enum { C = 4, X = 2, n_test = 40 };
    double mus[2][D] = {{0, 0, 0, 0}, {2, 1, 0, -1}};
    double S[D * D] = {2, 0.5, 0, 0, 0.5, 1, 0.2, 0, 0, 0.2, 1.5, 0.3, 0, 0, 0.3, 1};
    uint64_t ns[2] = {30, 50};
    double N = 80;
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, D);
    for (int c = 0; c < 2; c++)
        CHECK(pft_gstat_add_class(st, c, ns[c], mus[c], NULL) == 0);
    double W[D * D];
    for (int i = 0; i < D * D; i++)
        W[i] = S[i] * N;
    CHECK(pft_gstat_add_tied_scatter(st, W) == 0);
    double xm[X][D] = {{1.5, 1.2, 0.3, -0.5}, {-1, 2, 1, 0}};
    pft_ghead_extra_t ex[X] = {{.label = 1, .n = 20, .mean = xm[0], .tau2 = 0.3},
                               {.label = 2, .n = 40, .mean = xm[1], .tau2 = 0.05}};
    double Nall = N + 20 + 40, tr = 0;
    for (int i = 0; i < D; i++)
        tr += S[i * D + i];
    float x[n_test * D];
    pft_rng_t *r = pft_rng_new(11);
    for (int i = 0; i < n_test * D; i++)
        x[i] = (float)(1.5 * pft_rng_normal(r));
    pft_rng_destroy(&r);
    const double al = 0.3;
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.alpha = al;
    o.extra = ex;
    o.n_extra = X;
    pft_ghead_t *h = NULL;
    CHECK(pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, NULL) == 0);
    if (!h)
        goto done;
    int k = 0;
    const int *lab = pft_ghead_component_labels(h, &k);
    CHECK(lab && k == 4 && lab[0] == 0 && lab[1] == 1 && lab[2] == 1 && lab[3] == 2);
    double L[D * D];
    for (int i = 0; i < D * D; i++)
        L[i] = (1 - al) * S[i] + (i % (D + 1) == 0 ? al * tr / D : 0);
    CHECK(pft_la_chol_lower(L, D) == 0);
    double t1, t2, sc[n_test * C], worst = 0;
    traces_inv(L, &t1, &t2);
    double ti = t1 - 1.0 * sqrt(2.0 * t2); /* κ = 1, written out */
    CHECK(pft_ghead_scores(h, x, n_test, sc) == 0);
    for (int i = 0; i < n_test; i++) {
        double xd[D], want[C] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int j = 0; j < D; j++)
            xd[j] = x[i * D + j];
        for (int c = 0; c < 2; c++)
            want[c] = lse2(want[c], log((double)ns[c] / Nall) - half_quad(L, mus[c], xd));
        for (int e = 0; e < X; e++)
            want[ex[e].label] =
                lse2(want[ex[e].label],
                     log((double)ex[e].n / Nall) - half_quad(L, ex[e].mean, xd) + 0.5 * ex[e].tau2 * ti);
        CHECK(sc[i * C + 3] == -INFINITY); /* a class with nothing */
        for (int c = 1; c < 3; c++) {
            double got = sc[i * C + c] - sc[i * C], exp_ = want[c] - want[0];
            double e = fabs(got - exp_) / (1 + fabs(exp_));
            worst = e > worst ? e : worst;
        }
    }
    CHECK_MSG(worst < 1e-5, "score differences off the formula's by up to %g (relative)", worst);
    pft_ghead_destroy(&h);
done:
    pft_gstat_destroy(&st);
}

/* n rows in d dims of C classes: class c centred at shift on dimension c, unit noise. */
static void make_rows(int n, int d, int C, double shift, uint64_t seed, float *x, int32_t *y)
{
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)(i % C);
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = (float)(pft_rng_normal(r) + (j == y[i] ? shift : 0));
    }
    pft_rng_destroy(&r);
}

/* Leave-one-out accuracy at α by refitting from scratch for every held-out row, with the same noisy
 * components (the brute force the cross-validation's downdate must equal). */
static long loo_right(const float *up_x, const int32_t *up_y, int n_up, const float *x, const int32_t *y,
                      int n, int d, int C, double alpha, const pft_ghead_extra_t *ex, int n_ex)
{
    long ok = 0;
    for (int hold = 0; hold < n; hold++) {
        pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
        pft_gstat_add_rows(st, up_x, up_y, (size_t)n_up);
        for (int i = 0; i < n; i++)
            if (i != hold)
                pft_gstat_add_rows(st, x + (size_t)i * d, y + i, 1);
        pft_ghead_opts_t o;
        pft_ghead_opts_default(&o);
        o.alpha = alpha;
        o.extra = ex;
        o.n_extra = n_ex;
        pft_ghead_t *h = NULL;
        if (pft_ghead_fit(st, NULL, NULL, 0, C, &o, &h, NULL) == 0) {
            int32_t p;
            pft_ghead_predict(h, x + (size_t)hold * d, 1, &p);
            ok += p == y[hold];
        }
        pft_ghead_destroy(&h);
        pft_gstat_destroy(&st);
    }
    return ok;
}

/* The cross-validation knowing noisy components (two classes the own rows lack, one they have) agrees with
 * refitting per held-out row at every α of the grid, with fewer rows than dimensions (N = 20 < d = 30: the
 * fold's downdate leaves directions at α t, so the trace of the inverse must follow it). */
static void test_cv_matches_refit(void)
{
    enum { d = 30, C = 5, n_up = 6, n = 14 };
    float up[n_up * d], x[n * d];
    int32_t uy[n_up], y[n];
    make_rows(n_up, d, 3, 2.0, 31, up, uy);
    make_rows(n, d, 3, 2.0, 32, x, y);
    double xm[3][d];
    pft_rng_t *r = pft_rng_new(33);
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < d; j++)
            xm[k][j] = (j == 2 + k ? 2.0 : 0.0) + 0.3 * pft_rng_normal(r);
    pft_rng_destroy(&r);
    /* τ² large enough that the noise term decides rows (with 0.09 neither trace's downdate terms mattered) */
    pft_ghead_extra_t ex[3] = {{.label = 3, .n = 10, .mean = xm[0], .tau2 = 0.3},
                               {.label = 4, .n = 15, .mean = xm[1], .tau2 = 0.3},
                               {.label = 2, .n = 8, .mean = xm[2], .tau2 = 0.3}};
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(st, up, uy, n_up) == 0);
    CHECK(pft_gstat_add_rows(st, x, y, n) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.folds = 20; /* more folds than rows: leave-one-out, so the assignment does not matter */
    o.extra = ex;
    o.n_extra = 3;
    pft_ghead_evidence_t ev[PFT_GHEAD_N_ALPHA];
    CHECK(pft_ghead_evidence(st, x, y, n, C, &o, ev) == 0);
    int checked = 0;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++) {
        if (ev[a].total == 0) /* α = 0: singular */
            continue;
        long want = loo_right(up, uy, n_up, x, y, n, d, C, ev[a].alpha, ex, 3);
        CHECK_MSG((long)ev[a].correct == want, "α = %g: cross-validation %llu right, refits %ld", ev[a].alpha,
                  (unsigned long long)ev[a].correct, want);
        checked++;
    }
    CHECK(checked >= PFT_GHEAD_N_ALPHA - 1);
    /* the components change the tallies (they take part) */
    pft_ghead_evidence_t ev0[PFT_GHEAD_N_ALPHA];
    o.n_extra = 0;
    CHECK(pft_ghead_evidence(st, x, y, n, C, &o, ev0) == 0);
    long diff = 0;
    for (int a = 0; a < PFT_GHEAD_N_ALPHA; a++)
        diff += labs((long)ev[a].correct - (long)ev0[a].correct);
    CHECK_MSG(diff > 0, "noisy components never took an own row");
    /* refusals: a component of a label beyond the classes, negative noise, QDA */
    pft_ghead_t *h = NULL;
    pft_ghead_extra_t bad = ex[0];
    o.n_extra = 1;
    o.extra = &bad;
    bad.label = C;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, NULL) == PFT_EINVAL && !h);
    bad = ex[0];
    bad.tau2 = -1;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, NULL) == PFT_EINVAL && !h);
    bad = ex[0];
    o.kind = PFT_GHEAD_QDA;
    CHECK(pft_ghead_fit(st, x, y, n, C, &o, &h, NULL) == PFT_EINVAL && !h);
    pft_gstat_destroy(&st);
}

/* Classes known only through noisy means: rows of those classes, drawn fresh, are classified far above
 * chance (the head reaches classes no own row holds). */
static void test_noisy_classes_recognised(void)
{
    enum { d = 40, C = 4, n_own = 200, n_test = 400 };
    float *x = pft_alloc_array((size_t)n_own * d, sizeof(float));
    float *xt = pft_alloc_array((size_t)n_test * d, sizeof(float));
    int32_t y[n_own], yt[n_test];
    make_rows(n_own, d, 2, 3.0, 41, x, y);    /* own: classes 0, 1 */
    make_rows(n_test, d, C, 3.0, 42, xt, yt); /* test: all four */
    double xm[2][d];
    const double tau2[2] = {0.01, 0.05};
    pft_rng_t *r = pft_rng_new(43);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < d; j++)
            xm[k][j] = (j == 2 + k ? 3.0 : 0.0) + sqrt(tau2[k]) * pft_rng_normal(r);
    pft_rng_destroy(&r);
    pft_ghead_extra_t ex[2] = {{.label = 2, .n = 100, .mean = xm[0], .tau2 = tau2[0]},
                               {.label = 3, .n = 100, .mean = xm[1], .tau2 = tau2[1]}};
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(pft_gstat_add_rows(st, x, y, n_own) == 0);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.extra = ex;
    o.n_extra = 2;
    pft_ghead_t *h = NULL;
    pft_ghead_info_t info;
    double acc = 0, per[C];
    CHECK(pft_ghead_fit(st, x, y, n_own, C, &o, &h, &info) == 0);
    if (h)
        CHECK(pft_ghead_accuracy(h, xt, yt, n_test, &acc, per, NULL) == 0);
    fprintf(stderr,
            "  four classes, two through noisy means only: accuracy %.3f (classes 2, 3: %.3f, %.3f; α %g)\n",
            acc, per[2], per[3], info.alpha);
    CHECK_MSG(acc > 0.85 && per[2] > 0.8 && per[3] > 0.8, "accuracy %.3f, classes 2, 3: %.3f, %.3f", acc,
              per[2], per[3]);
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    pft_free(x);
    pft_free(xt);
}

int main(void)
{
    RUN(test_scores_formula);
    RUN(test_cv_matches_refit);
    RUN(test_noisy_classes_recognised);
    return pft_test_done();
}
