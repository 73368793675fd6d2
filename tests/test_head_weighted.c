/* Tests of pft_head_fit_weighted: NULL and unit weights are pft_head_fit bit for bit, integer weights are
 * repetition, a known optimum of scikit-learn's sample_weight objective, scale invariance, the weighted
 * gradient against finite differences, and the refusal of bad weights. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_head.h"
#include "pft_rng.h"
#include "pft_test.h"

#include <stdint.h>

enum { D = 6, C = 4 };

/* C overlapping Gaussian blobs in D dimensions (centres 2 apart, unit noise) with label noise: not
 * separable, so the optimum is interior and unique. */
static void noisy_blobs(int n, float *x, int32_t *y, uint64_t seed)
{
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++) {
        int c = i % C;
        for (int j = 0; j < D; j++)
            x[i * D + j] = (float)(pft_rng_normal(r) + (j == c ? 2.0 : 0.0) + 0.5 * j);
        y[i] = pft_rng_below(r, 10) == 0 ? (c + 1) % C : c;
    }
    pft_rng_destroy(&r);
}

static int same_fit(const pft_head_t *a, const pft_head_info_t *ia, const pft_head_t *b,
                    const pft_head_info_t *ib)
{
    return memcmp(pft_head_weights(a), pft_head_weights(b), C * (D + 1) * sizeof(float)) == 0 &&
           ia->iters == ib->iters && ia->evals == ib->evals && ia->loss == ib->loss && ia->l2 == ib->l2 &&
           ia->grad_max == ib->grad_max;
}

/* w NULL and w all 1 are pft_head_fit, bit for bit (weights, path, loss), with and without standardisation.
 */
static void test_null_and_unit_weights(void)
{
    enum { N = 200 };
    float x[N * D];
    int32_t y[N];
    double ones[N];
    noisy_blobs(N, x, y, 1);
    for (int i = 0; i < N; i++)
        ones[i] = 1.0;
    for (int pc = 0; pc < 3; pc++) { /* every preconditioner: same optimum */
        pft_head_opts_t o;
        pft_head_opts_default(&o);
        o.precond = pc;
        pft_head_t *a = NULL, *b = NULL, *c = NULL;
        pft_head_info_t ia, ib, ic;
        CHECK(pft_head_fit(x, y, N, D, C, &o, &a, &ia) == 0);
        CHECK(pft_head_fit_weighted(x, y, NULL, N, D, C, &o, &b, &ib) == 0);
        CHECK(pft_head_fit_weighted(x, y, ones, N, D, C, &o, &c, &ic) == 0);
        if (a && b && c) {
            CHECK(ia.converged && ia.iters > 3);
            CHECK(same_fit(a, &ia, b, &ib));
            CHECK(same_fit(a, &ia, c, &ic));
        }
        pft_head_destroy(&a);
        pft_head_destroy(&b);
        pft_head_destroy(&c);
    }
}

/* Integer weights against the rows repeated: the same optimum (objective, weights, probabilities), the
 * automatic l2 1/Σw = 1/(rows repeated), with and without standardisation. */
static void test_weights_are_repetition(void)
{
    enum { N = 150, MAXW = 4 };
    float x[N * D], xr[N * MAXW * D];
    int32_t y[N], yr[N * MAXW];
    double w[N];
    noisy_blobs(N, x, y, 2);
    pft_rng_t *r = pft_rng_new(3);
    int nr = 0;
    for (int i = 0; i < N; i++) {
        int k = 1 + (int)pft_rng_below(r, MAXW);
        w[i] = k;
        for (int t = 0; t < k; t++, nr++) {
            memcpy(xr + nr * D, x + i * D, D * sizeof(float));
            yr[nr] = y[i];
        }
    }
    pft_rng_destroy(&r);
    for (int pc = 0; pc < 3; pc++) { /* every preconditioner: same optimum */
        pft_head_opts_t o;
        pft_head_opts_default(&o);
        o.precond = pc;
        o.tol = 1e-6;
        pft_head_t *hw = NULL, *hr = NULL;
        pft_head_info_t iw, ir;
        CHECK(pft_head_fit_weighted(x, y, w, N, D, C, &o, &hw, &iw) == 0);
        CHECK(pft_head_fit(xr, yr, nr, D, C, &o, &hr, &ir) == 0);
        if (!hw || !hr)
            continue;
        CHECK(iw.converged && ir.converged);
        CHECK_NEAR(iw.l2, 1.0 / nr, 1e-15);
        CHECK_NEAR(iw.loss, ir.loss, 1e-7); /* f itself carries float32-logit rounding of ~1e-8 */
        const float *a = pft_head_weights(hw), *b = pft_head_weights(hr);
        for (int i = 0; i < C * (D + 1); i++)
            CHECK_NEAR(a[i], b[i], 1e-4);
        float pa[N * C], pb[N * C];
        CHECK(pft_head_predict_proba(hw, x, N, pa) == 0 && pft_head_predict_proba(hr, x, N, pb) == 0);
        for (int i = 0; i < N * C; i++)
            CHECK_NEAR(pa[i], pb[i], 1e-5);
        /* and the weights matter: the same rows unweighted land elsewhere */
        pft_head_t *hu = NULL;
        pft_head_info_t iu;
        CHECK(pft_head_fit(x, y, N, D, C, &o, &hu, &iu) == 0);
        if (hu)
            CHECK(fabs(pft_head_weights(hu)[0] - a[0]) > 1e-3);
        pft_head_destroy(&hu);
        pft_head_destroy(&hw);
        pft_head_destroy(&hr);
    }
}

/* scikit-learn's sample_weight objective on a 12-point set: the optimum of
 *     Σ w_i CE_i / Σ w + ‖W‖²/(2 Σ w)   (LogisticRegression(C = 1), Σ w = 15)
 * computed in float64 by scipy.optimize BFGS to max |gradient| 1.3e-9 (objective 0.4770166357064729).
 * scikit-learn 1.2.1's LogisticRegression(C=1, tol=1e-12).fit(X, y, sample_weight=w) agrees to 5e-5. */
static void test_sklearn_sample_weight(void)
{
    static const float tx[12][2] = {{0, 0}, {1, 0.5f},    {0.5f, 1}, {2, 2}, {2.5f, 1.5f}, {1.5f, 2.5f},
                                    {4, 0}, {3.5f, 0.5f}, {4.5f, 1}, {1, 1}, {3, 1},       {2, 0.5f}};
    static const int32_t ty[12] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2};
    static const double tw[12] = {1, 0.5, 2, 1, 3, 0.25, 1, 1, 1.5, 2, 0.5, 1.25};
    static const double coef[3][2] = {{-1.319960342074, -0.229335893971},
                                      {0.34023073715, 1.111353387594},
                                      {0.979729604924, -0.882017493623}};
    static const double icpt[3] = {2.750772166903, -1.535464031865, -1.215308135038};
    static const double proba0[3] = {0.968331529208, 0.01332095446, 0.018347516331};
    for (int pc = 0; pc < 3; pc++) { /* every preconditioner: same optimum */
        pft_head_opts_t o;
        pft_head_opts_default(&o);
        o.tol = 1e-7;
        o.precond = pc;
        pft_head_t *h = NULL;
        pft_head_info_t info;
        CHECK(pft_head_fit_weighted(&tx[0][0], ty, tw, 12, 2, 3, &o, &h, &info) == 0);
        if (!h)
            continue;
        CHECK(info.converged && info.grad_max <= 1e-7);
        CHECK_NEAR(info.l2, 1.0 / 15.0, 1e-15);
        CHECK_NEAR(info.loss, 0.4770166357064729, 1e-7);
        const float *wb = pft_head_weights(h);
        for (int k = 0; k < 3; k++) {
            CHECK_NEAR(wb[k * 3 + 0], coef[k][0], 1e-5);
            CHECK_NEAR(wb[k * 3 + 1], coef[k][1], 1e-5);
            CHECK_NEAR(wb[k * 3 + 2], icpt[k], 1e-5);
        }
        float p[3];
        CHECK(pft_head_predict_proba(h, &tx[0][0], 1, p) == 0);
        for (int k = 0; k < 3; k++)
            CHECK_NEAR(p[k], proba0[k], 1e-6);
        pft_head_destroy(&h);
    }
}

/* Only relative weights matter at a fixed l2 (the loss is a weighted mean): w and 0.1·w, or m/B-style
 * fractions, give the same optimum. */
static void test_scale_invariance(void)
{
    enum { N = 120 };
    float x[N * D];
    int32_t y[N];
    double w[N], w10[N];
    noisy_blobs(N, x, y, 4);
    for (int i = 0; i < N; i++) {
        w[i] = i % 3 == 0 ? 1.0 : 7.0 / 30.0; /* real rows 1, draws m/B */
        w10[i] = 0.1 * w[i];
    }
    pft_head_opts_t o;
    pft_head_opts_default(&o);
    o.l2 = 0.01;
    o.tol = 1e-6;
    pft_head_t *a = NULL, *b = NULL;
    pft_head_info_t ia, ib;
    CHECK(pft_head_fit_weighted(x, y, w, N, D, C, &o, &a, &ia) == 0);
    CHECK(pft_head_fit_weighted(x, y, w10, N, D, C, &o, &b, &ib) == 0);
    if (a && b) {
        CHECK(ia.l2 == 0.01 && ib.l2 == 0.01);
        CHECK_NEAR(ia.loss, ib.loss, 1e-7);
        for (int i = 0; i < C * (D + 1); i++)
            CHECK_NEAR(pft_head_weights(a)[i], pft_head_weights(b)[i], 1e-5);
    }
    pft_head_destroy(&a);
    pft_head_destroy(&b);
}

/* The weighted gradient (plain and distillation) against central differences of the weighted objective. */
static void test_weighted_gradient(void)
{
    enum { N = 40, P = C * (D + 1) };
    float x[N * D], q[N * C];
    int32_t y[N];
    double w[N], wb[P], g[P], gp[P], f, fp, fm;
    noisy_blobs(N, x, y, 5);
    pft_rng_t *r = pft_rng_new(6);
    for (int i = 0; i < N; i++) {
        w[i] = 0.05 + 3.0 * pft_rng_uniform(r);
        double e[C], s = 0;
        for (int k = 0; k < C; k++)
            s += e[k] = exp(pft_rng_normal(r));
        for (int k = 0; k < C; k++)
            q[i * C + k] = (float)(e[k] / s);
    }
    for (int j = 0; j < P; j++)
        wb[j] = 0.3 * pft_rng_normal(r);
    pft_rng_destroy(&r);
    const float *qs[2] = {NULL, q};
    const double alphas[2] = {1.0, 0.4}, h = 1e-3;
    for (int t = 0; t < 2; t++) {
        CHECK(pft_head_objective_weighted(x, y, qs[t], w, N, D, C, 3.0, alphas[t], 0.05, wb, &f, g) == 0);
        double worst = 0;
        for (int j = 0; j < P; j++) {
            double keep = wb[j];
            wb[j] = keep + h;
            CHECK(pft_head_objective_weighted(x, y, qs[t], w, N, D, C, 3.0, alphas[t], 0.05, wb, &fp, gp) ==
                  0);
            wb[j] = keep - h;
            CHECK(pft_head_objective_weighted(x, y, qs[t], w, N, D, C, 3.0, alphas[t], 0.05, wb, &fm, gp) ==
                  0);
            wb[j] = keep;
            worst = fmax(worst, fabs((fp - fm) / (2 * h) - g[j]) / fmax(1.0, fabs(g[j])));
        }
        fprintf(stderr, "  %s: f = %.6f, worst relative gradient error %.2e\n", t ? "distillation" : "labels",
                f, worst);
        CHECK(worst < 2e-3);
    }
    /* the weights are really there, and NULL is all ones */
    double f1, fw, f0;
    double ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0;
    CHECK(pft_head_objective_weighted(x, y, NULL, w, N, D, C, 1.0, 1.0, 0.05, wb, &fw, g) == 0);
    CHECK(pft_head_objective_weighted(x, y, NULL, ones, N, D, C, 1.0, 1.0, 0.05, wb, &f1, g) == 0);
    CHECK(pft_head_objective(x, y, NULL, N, D, C, 1.0, 1.0, 0.05, wb, &f0, gp) == 0);
    CHECK(f1 == f0 && fabs(fw - f0) > 1e-3);
}

static void test_invalid_weights(void)
{
    enum { N = 8 };
    float x[N * D];
    int32_t y[N];
    double w[N];
    noisy_blobs(N, x, y, 7);
    const double bad[5] = {0.0, -1.0, NAN, INFINITY, -0.0};
    for (int b = 0; b < 5; b++) {
        for (int i = 0; i < N; i++)
            w[i] = 1.0;
        w[5] = bad[b];
        pft_head_t *h = (pft_head_t *)1;
        CHECK(pft_head_fit_weighted(x, y, w, N, D, C, NULL, &h, NULL) == PFT_EINVAL && h == NULL);
        CHECK_MSG(strstr(pft_errmsg(), "row 5: weight") != NULL, "%s", pft_errmsg());
        double f, g[C * (D + 1)] = {0};
        CHECK(pft_head_objective_weighted(x, y, NULL, w, N, D, C, 1.0, 1.0, 0.1, g, &f, g) == PFT_EINVAL);
    }
    /* each weight finite, the sum not */
    for (int i = 0; i < N; i++)
        w[i] = 1e308;
    pft_head_t *h = (pft_head_t *)1;
    CHECK(pft_head_fit_weighted(x, y, w, N, D, C, NULL, &h, NULL) == PFT_EINVAL && h == NULL);
    CHECK_MSG(strstr(pft_errmsg(), "weights sum") != NULL, "%s", pft_errmsg());
    /* allocation failures are reported, never crash or leak */
    for (int i = 0; i < N; i++)
        w[i] = 0.5 + i;
    int ok = 0;
    for (long k = 0; k < 30 && !ok; k++) {
        pft_alloc_fail_after(k);
        int rc = pft_head_fit_weighted(x, y, w, N, D, C, NULL, &h, NULL);
        pft_alloc_fail_after(-1);
        ok = rc == 0;
        CHECK(rc == 0 || (rc == PFT_ENOMEM && h == NULL));
        pft_head_destroy(&h);
    }
    CHECK(ok);
}

/* Same weighted inputs, same weights out. */
static void test_weighted_deterministic(void)
{
    enum { N = 300 };
    float x[N * D];
    int32_t y[N];
    double w[N];
    noisy_blobs(N, x, y, 8);
    for (int i = 0; i < N; i++)
        w[i] = i < N / 3 ? 1.0 : 0.1;
    pft_head_t *a = NULL, *b = NULL;
    pft_head_info_t ia, ib;
    CHECK(pft_head_fit_weighted(x, y, w, N, D, C, NULL, &a, &ia) == 0);
    CHECK(pft_head_fit_weighted(x, y, w, N, D, C, NULL, &b, &ib) == 0);
    if (a && b)
        CHECK(ia.converged && same_fit(a, &ia, b, &ib));
    pft_head_destroy(&a);
    pft_head_destroy(&b);
}

int main(void)
{
    RUN(test_null_and_unit_weights);
    RUN(test_weights_are_repetition);
    RUN(test_sklearn_sample_weight);
    RUN(test_scale_invariance);
    RUN(test_weighted_gradient);
    RUN(test_invalid_weights);
    RUN(test_weighted_deterministic);
    return pft_test_done();
}
