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

/* tr Σ⁻¹ from the Cholesky factor (columns of L⁻¹ summed in squares). */
static double trace_inv(const double *L)
{
    double t = 0;
    for (int k = 0; k < D; k++) {
        double z[D] = {0};
        for (int i = 0; i < D; i++) {
            double v = i == k;
            for (int j = 0; j < i; j++)
                v -= L[i * D + j] * z[j];
            z[i] = v / L[i * D + i];
        }
        for (int i = 0; i < D; i++)
            t += z[i] * z[i];
    }
    return t;
}

static double lse2(double a, double b)
{
    if (a == -INFINITY)
        return b;
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

/* Exact classes 0, 1 (statistics), noisy components of class 1 and of class 2 (no statistics): every class
 * score difference equals the formula's: s_k(x) = log(n_k / N_all) - ½[(x - μ_k)ᵀ Σ_α⁻¹ (x - μ_k) - τ_k² tr
 * Σ_α⁻¹], a class the log-sum-exp of its components; and the linear head has one row per component. */
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
    double ti = trace_inv(L), sc[n_test * C], worst = 0;
    CHECK(pft_ghead_scores(h, x, n_test, sc) == 0);
    for (int i = 0; i < n_test; i++) {
        double xd[D], want[C] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int j = 0; j < D; j++)
            xd[j] = x[i * D + j];
        for (int c = 0; c < 2; c++)
            want[c] = lse2(want[c], log((double)ns[c] / Nall) - half_quad(L, mus[c], xd));
        for (int e = 0; e < X; e++)
            want[ex[e].label] = lse2(want[ex[e].label], log((double)ex[e].n / Nall) -
                                                            half_quad(L, ex[e].mean, xd) + 0.5 * ex[e].tau2 * ti);
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

int main(void)
{
    RUN(test_scores_formula);
    return pft_test_done();
}
