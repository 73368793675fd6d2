/* Tests of the tridiagonal basis: the shrinkage evidence (per-α tallies of the exact-downdate
 * cross-validation of own rows) and the LDA head (pft_ghead_fit: α by its rule, then the weights) computed
 * from W's Householder reduction with tridiagonal solves equal the ones computed in W's eigenbasis (the
 * reference), on the bundled PACS subset and on generated rows, with W singular (fewer rows than dimensions:
 * α = 0 invalid) and regular. */
#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_ghead.h"
#include "pft_ghead_internal.h"
#include "pft_gstat.h"
#include "pft_linalg.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_test.h"

/* Evidence of the own rows (xo, yo, no) against the statistics of the rows (x, y, n), both ways: every α's
 * totals and rows right equal, its loss to 1e-9 relative, the chosen α the same. */
static void compare(const float *x, const int32_t *y, int n, const float *xo, const int32_t *yo, int no,
                    int d, int C, const char *what)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d), *st0 = NULL;
    CHECK(st && pft_gstat_add_rows(st, x, y, (size_t)n) == 0 && (st0 = pft_gstat_dup(st)));
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.seed = 3;
    pft_ghead_evidence_t ref[PFT_GHEAD_N_ALPHA], tri[PFT_GHEAD_N_ALPHA];
    int r1 = pft_ghead__evidence_basis(st, xo, yo, no, C, &o, 1, ref);
    CHECK_MSG(pft_gstat_equal(st, st0), "%s: W not given back as it was by the eigenbasis", what);
    int r2 = pft_ghead_evidence(st, xo, yo, no, C, &o, tri);
    CHECK_MSG(r1 == 0 && r2 == 0, "%s: %d %d %s", what, r1, r2, pft_errmsg());
    int valid = 0;
    double worst = 0;
    for (int a = 0; r1 == 0 && r2 == 0 && a < PFT_GHEAD_N_ALPHA; a++) {
        CHECK_MSG(ref[a].total == tri[a].total && ref[a].correct == tri[a].correct,
                  "%s: α = %g: %llu/%llu right in the eigenbasis, %llu/%llu tridiagonal", what, ref[a].alpha,
                  (unsigned long long)ref[a].correct, (unsigned long long)ref[a].total,
                  (unsigned long long)tri[a].correct, (unsigned long long)tri[a].total);
        double rel = fabs(ref[a].loss - tri[a].loss) / (fabs(ref[a].loss) > 1e-300 ? fabs(ref[a].loss) : 1.0);
        worst = rel > worst ? rel : worst;
        valid += ref[a].total > 0;
    }
    CHECK_MSG(worst <= 1e-9, "%s: loss differs by %.3g relative", what, worst);
    const pft_ghead_evidence_t *e1[1] = {ref}, *e2[1] = {tri};
    double a1 = pft_ghead_evidence_alpha(e1, NULL, 1), a2 = pft_ghead_evidence_alpha(e2, NULL, 1);
    CHECK_MSG(a1 == a2 && a1 >= 0, "%s: α %g in the eigenbasis, %g tridiagonal", what, a1, a2);
    fprintf(stderr, "  %s: %d valid α, chosen %g both ways, loss within %.2g relative\n", what, valid, a1,
            worst);
    CHECK(valid >= PFT_GHEAD_N_ALPHA - 1);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&st0);
}

/* The LDA head of the statistics of (x, y, n) with own rows (xo, yo, no), fit both ways (alpha: fixed, or
 * PFT_GHEAD_AUTO): the same rule and α, every row's class scores within 1e-9 of their largest magnitude, the
 * same predictions on x (the head's weights are float32: rounding of the order of 1e-13 rarely shows); *rule_out: the rule both took. */
static void compare_fit(const float *x, const int32_t *y, int n, const float *xo, const int32_t *yo, int no,
                        int d, int C, double alpha, const char *what, const char **rule_out)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d), *st0 = NULL;
    CHECK(st && pft_gstat_add_rows(st, x, y, (size_t)n) == 0 && (st0 = pft_gstat_dup(st)));
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.seed = 5;
    o.alpha = alpha;
    pft_ghead_t *he = NULL, *ht = NULL;
    pft_ghead_info_t ie, it;
    int r1 = pft_ghead__fit_basis(st, xo, yo, no, C, &o, 1, &he, &ie);
    int r2 = pft_ghead__fit_basis(st, xo, yo, no, C, &o, 0, &ht, &it);
    CHECK_MSG(r1 == 0 && r2 == 0, "%s: %d %d %s", what, r1, r2, pft_errmsg());
    CHECK_MSG(pft_gstat_equal(st, st0), "%s: the statistics changed", what);
    double *se = pft_alloc_array((size_t)n * C, sizeof *se), *sc = pft_alloc_array((size_t)n * C, sizeof *sc);
    int32_t *pe = pft_alloc_array((size_t)n, sizeof *pe), *pt = pft_alloc_array((size_t)n, sizeof *pt);
    if (r1 == 0 && r2 == 0 && se && sc && pe && pt) {
        /* a grid α equal; OAS's from T's eigenvalues (dsterf), W's up to rounding */
        double tol = strcmp(it.rule, "oas") ? 0 : 1e-12;
        CHECK_MSG(!strcmp(ie.rule, it.rule) && fabs(ie.alpha - it.alpha) <= tol,
                  "%s: %s α %.17g in the eigenbasis, %s α %.17g", what, ie.rule, ie.alpha, it.rule, it.alpha);
        CHECK(pft_ghead_scores(he, x, n, se) == 0 && pft_ghead_scores(ht, x, n, sc) == 0);
        CHECK(pft_ghead_predict(he, x, n, pe) == 0 && pft_ghead_predict(ht, x, n, pt) == 0);
        double worst = 0;
        int differ = 0;
        for (int i = 0; i < n; i++) {
            double mx = 0;
            for (int c = 0; c < C; c++)
                mx = fmax(mx, fabs(se[(size_t)i * C + c]));
            for (int c = 0; c < C; c++)
                if (isfinite(se[(size_t)i * C + c]) || isfinite(sc[(size_t)i * C + c]))
                    worst = fmax(worst, fabs(se[(size_t)i * C + c] - sc[(size_t)i * C + c]) / fmax(mx, 1e-300));
            differ += pe[i] != pt[i];
        }
        CHECK_MSG(worst <= 1e-9, "%s: class scores differ by %.3g relative", what, worst);
        CHECK_MSG(differ == 0, "%s: %d of %d predictions differ", what, differ, n);
        fprintf(stderr, "  %s: rule %s, α %g both ways, scores within %.2g relative\n", what, it.rule, it.alpha,
                worst);
        *rule_out = it.rule;
    }
    pft_free(se), pft_free(sc), pft_free(pe), pft_free(pt);
    pft_ghead_destroy(&he);
    pft_ghead_destroy(&ht);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&st0);
}

/* Every k-th of the n rows (d each) into xo, yo; how many. */
static int every(const float *x, const int32_t *y, int n, int d, int k, float *xo, int32_t *yo)
{
    int m = 0;
    for (int i = 0; i < n; i += k, m++) {
        memcpy(xo + (size_t)m * d, x + (size_t)i * d, (size_t)d * sizeof *xo);
        yo[m] = y[i];
    }
    return m;
}

/* The bundled PACS subset (d = 1280, 7 classes): statistics of all 2,100 rows (W regular) and of 700 (W
 * singular), 60 own rows among them. */
static void test_pacs_small(void)
{
    const char *dir = PFT_SOURCE_DIR "/examples/data/pacs-small";
    char xp[4096], yp[4096];
    snprintf(xp, sizeof xp, "%s/train_x.npy", dir);
    snprintf(yp, sizeof yp, "%s/train_y.npy", dir);
    pft_dataset_t *tr = NULL;
    CHECK_MSG(pft_npy_load_dataset(xp, yp, 7, &tr) == 0, "%s", pft_errmsg());
    if (!tr)
        return;
    int n = (int)pft_dataset_n(tr), d = (int)pft_dataset_d(tr);
    float *xs = pft_alloc_array((size_t)n * d, sizeof *xs), *xo = pft_alloc_array((size_t)n * d, sizeof *xo);
    int32_t *ys = pft_alloc_array((size_t)n, sizeof *ys), *yo = pft_alloc_array((size_t)n, sizeof *yo);
    CHECK(xs && xo && ys && yo);
    int no = every(pft_dataset_x(tr), pft_dataset_y(tr), n, d, 35, xo, yo);
    compare(pft_dataset_x(tr), pft_dataset_y(tr), n, xo, yo, no, d, 7, "pacs-small, 2100 rows");
    int ns = every(pft_dataset_x(tr), pft_dataset_y(tr), n, d, 3, xs, ys);
    no = every(xs, ys, ns, d, 12, xo, yo);
    compare(xs, ys, ns, xo, yo, no, d, 7, "pacs-small, 700 rows");
    const char *rule = "";
    compare_fit(xs, ys, ns, xo, yo, no, d, 7, PFT_GHEAD_AUTO, "fit, 700 rows, α by cross-validation", &rule);
    CHECK(!strcmp(rule, "cv"));
    compare_fit(xs, ys, ns, xo, yo, 6, d, 7, PFT_GHEAD_AUTO, "fit, 700 rows, 6 own rows: OAS", &rule);
    CHECK(!strcmp(rule, "oas"));
    compare_fit(pft_dataset_x(tr), pft_dataset_y(tr), n, xo, yo, 0, d, 7, 0.3, "fit, 2100 rows, α 0.3", &rule);
    CHECK(!strcmp(rule, "fixed"));
    /* α = 0 with W singular: the eigenbasis floors Σ's diagonal, which the tridiagonal basis cannot: it
     * falls back, and the head is the eigenbasis' */
    compare_fit(xs, ys, ns, xo, yo, 0, d, 7, 0.0, "fit, 700 rows, α 0 (W singular)", &rule);
    CHECK(!strcmp(rule, "fixed"));
    pft_free(xs);
    pft_free(xo);
    pft_free(ys);
    pft_free(yo);
    pft_dataset_destroy(&tr);
}

/* Generated rows: 4 classes in d = 48 with a spread spectrum, 30 rows (W singular) and 400 (W regular). */
static void test_generated(void)
{
    enum { d = 48, C = 4, N = 400 };
    pft_rng_t *r = pft_rng_new(11);
    float *x = pft_alloc_array((size_t)N * d, sizeof *x);
    int32_t *y = pft_alloc_array(N, sizeof *y);
    CHECK(r && x && y);
    for (int i = 0; i < N; i++) {
        y[i] = i % C;
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] =
                (float)(0.1 * y[i] * (j % 3 - 1) + (0.2 + pow(0.85, j)) * pft_rng_normal(r));
    }
    compare(x, y, 30, x, y, 30, d, C, "generated, 30 rows in d = 48");
    compare(x, y, N, x, y, 120, d, C, "generated, 400 rows in d = 48");
    const char *rule = "";
    compare_fit(x, y, N, x, y, 120, d, C, PFT_GHEAD_AUTO, "fit, generated, 400 rows", &rule);
    CHECK(!strcmp(rule, "cv"));
    compare_fit(x, y, 30, x, y, 30, d, C, PFT_GHEAD_AUTO, "fit, generated, 30 rows", &rule);
    float *xi = pft_alloc_array((size_t)N * d, sizeof *xi); /* every row its class's: W = 0 */
    for (int i = 0; xi && i < N; i++)
        for (int j = 0; j < d; j++)
            xi[(size_t)i * d + j] = (float)(y[i] == j % C) + 0.25f * (float)y[i];
    if (xi)
        compare_fit(xi, y, 40, xi, y, 0, d, C, PFT_GHEAD_AUTO, "fit, W = 0", &rule);
    CHECK(!strcmp(rule, "isotropic"));
    pft_free(xi);
    pft_free(x);
    pft_free(y);
    pft_rng_destroy(&r);
}

/* W regular but nearly singular (30 rows in d = 48 and a ridge of eps·I): at α = 0 a fold's downdate leaves a
 * numerically singular covariance, whose Woodbury correction the tridiagonal basis cannot score exactly. α =
 * 0 is then unusable in its tallies (the eigenbasis scores it through the same nearly singular correction),
 * every other α equals the eigenbasis', and the evidence keeps its reduction: no fallback to W's eigenvectors
 * (a second d×d matrix). On a ridge large enough the two bases agree at α = 0 too. */
static void test_ridge_alpha0(void)
{
    enum { d = 48, C = 4, N = 30 };
    pft_rng_t *r = pft_rng_new(11);
    float *x = pft_alloc_array((size_t)N * d, sizeof *x);
    int32_t *y = pft_alloc_array(N, sizeof *y);
    double *ridge = pft_calloc((size_t)d * d, sizeof *ridge);
    CHECK(r && x && y && ridge);
    for (int i = 0; x && y && r && i < N; i++) {
        y[i] = i % C;
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] =
                (float)(0.1 * y[i] * (j % 3 - 1) + (0.2 + pow(0.85, j)) * pft_rng_normal(r));
    }
    /* 1e-14: W positive definite but with λ_min below 1e-12 λ_max: α = 0 is not a valid point in either basis
     * (the check, made from W's extreme eigenvalues in the tridiagonal basis, says so before any solve) */
    const double eps[] = {1e-14, 1e-9, 1e-7, 1e-5, 1e-3, 1e-1};
    int unusable = 0, agree = 0;
    for (size_t k = 0; ridge && x && y && k < sizeof eps / sizeof *eps; k++) {
        pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d), *st0 = NULL;
        for (int i = 0; i < d; i++)
            ridge[(size_t)i * d + i] = eps[k];
        CHECK(st && pft_gstat_add_rows(st, x, y, N) == 0 && pft_gstat_add_tied_scatter(st, ridge) == 0 &&
              (st0 = pft_gstat_dup(st)));
        if (!st0) {
            pft_gstat_destroy(&st);
            break;
        }
        pft_ghead_opts_t o;
        pft_ghead_opts_default(&o);
        o.seed = 3;
        pft_ghead_evidence_t ref[PFT_GHEAD_N_ALPHA], tri[PFT_GHEAD_N_ALPHA];
        pft_la_trid_t t = {0};
        int r1 = pft_ghead__evidence_basis(st, x, y, N, C, &o, 1, ref);
        int r2 = pft_ghead_evidence_keep(st, x, y, N, C, &o, tri, &t);
        CHECK_MSG(r1 == 0 && r2 == 0, "eps %g: %d %d %s", eps[k], r1, r2, pft_errmsg());
        CHECK_MSG(t.a, "eps %g: the evidence fell back to the eigenbasis", eps[k]);
        if (t.a)
            CHECK(pft_ghead_evidence_give_back(st, &t) == 0);
        CHECK_MSG(pft_gstat_equal(st, st0), "eps %g: W not given back as it was", eps[k]);
        for (int a = 0; r1 == 0 && r2 == 0 && a < PFT_GHEAD_N_ALPHA; a++) {
            if (a == 0 && tri[0].total == 0 && ref[0].total > 0) {
                unusable++; /* the one difference allowed */
                continue;
            }
            CHECK_MSG(ref[a].total == tri[a].total && ref[a].correct == tri[a].correct,
                      "eps %g, α = %g: %llu/%llu right in the eigenbasis, %llu/%llu tridiagonal", eps[k],
                      ref[a].alpha, (unsigned long long)ref[a].correct, (unsigned long long)ref[a].total,
                      (unsigned long long)tri[a].correct, (unsigned long long)tri[a].total);
            /* α = 0 scored both ways on a small ridge: losses of 1e9 nats through a correction the pivot
             * guard (GH_MIN_PIVOT2) still admits agree to 2.5e-8 (eps 1e-7); every α > 0 to 1e-9 */
            double tol = a == 0 ? 1e-6 : 1e-9;
            if (tri[a].total > 0)
                CHECK_MSG(fabs(ref[a].loss - tri[a].loss) <= tol * fabs(ref[a].loss),
                          "eps %g, α = %g: loss %.17g, %.17g", eps[k], ref[a].alpha, ref[a].loss,
                          tri[a].loss);
            agree += a == 0 && tri[0].total > 0;
        }
        fprintf(stderr, "  ridge %g: α = 0 %s\n", eps[k],
                tri[0].total   ? "scored both ways"
                : ref[0].total ? "unusable tridiagonal, scored in the eigenbasis"
                               : "unusable both ways");
        pft_gstat_destroy(&st);
        pft_gstat_destroy(&st0);
    }
    CHECK_MSG(unusable > 0, "no ridge made α = 0 unusable in the tridiagonal basis only");
    CHECK_MSG(agree > 0, "no ridge let both bases score α = 0");
    pft_free(ridge);
    pft_free(x);
    pft_free(y);
    pft_rng_destroy(&r);
}

int main(void)
{
    RUN(test_ridge_alpha0);
    RUN(test_generated);
    RUN(test_pacs_small);
    return pft_test_done();
}
