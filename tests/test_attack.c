/* Tests of the audit's attacks (node/audit): the subspace membership test on rows in a known low-dimensional
 * span (accuracy 1, residuals 0) against full-rank and rank + diagonal releases (no subspace), the vertex
 * attack recovering planted sparse non-negative rows (and not applying to negative rows or full rank), the
 * AUC and best-threshold accuracy on score lists worked out by hand, and the verdict thresholds. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_membership.h"
#include "pft_nearest.h"
#include "pft_rng.h"
#include "pft_subspace.h"
#include "pft_test.h"
#include "pft_vertex.h"

#include <string.h>

/* n Gaussian rows (d) with labels 0..C-1 in turn; non-negative (|·|) with about half the entries zeroed when
 * sparse. */
static void rows(int n, int d, int C, int sparse, uint64_t seed, float *x, int32_t *y)
{
    pft_rng_t *r = pft_rng_new(seed);
    for (int i = 0; i < n; i++) {
        y[i] = i % C;
        for (int j = 0; j < d; j++) {
            double v = pft_rng_normal(r);
            x[(size_t)i * d + j] = (float)(sparse ? (pft_rng_uniform(r) < 0.5 ? 0 : fabs(v)) : v);
        }
    }
    pft_rng_destroy(&r);
}

/* The TIED statistics' subspace of n rows x (labels y): scatter and class means. */
static pft_subspace_t *subspace_of(const float *x, const int32_t *y, int n, int d)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    CHECK(st && pft_gstat_add_rows(st, x, y, (size_t)n) == 0);
    int nc = pft_gstat_n_classes(st);
    double *mu = pft_alloc_array((size_t)nc * d, sizeof *mu);
    for (int i = 0; i < nc; i++)
        memcpy(mu + (size_t)i * d, pft_gstat_mean(st, i), (size_t)d * sizeof *mu);
    pft_subspace_t *s = pft_subspace_new(pft_gstat_tied_scatter(st), d, mu, nc);
    pft_free(mu);
    pft_gstat_destroy(&st);
    return s;
}

/* 12 rows of 3 classes in d = 40: W has rank 12 − 3 = 9, the span 12 dimensions; every member residual is 0
 * (to rounding), fresh rows are far out, and the best threshold separates them exactly. */
static void test_subspace_members(void)
{
    enum { N = 12, D = 40, C = 3, H = 30 };
    float x[N * D], xh[H * D];
    int32_t y[N], yh[H];
    rows(N, D, C, 0, 1, x, y);
    rows(H, D, C, 0, 2, xh, yh);
    pft_subspace_t *s = subspace_of(x, y, N, D);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(pft_subspace_proper(s));
    CHECK_MSG(pft_subspace_rank(s) == N - C, "rank %d", pft_subspace_rank(s));
    CHECK_MSG(pft_subspace_dim(s) == N, "dim %d", pft_subspace_dim(s));
    CHECK(pft_subspace_gap(s) > 1e8);
    double rm[N], rh[H], minus_m[N], minus_h[H], acc, cut, auc;
    CHECK(pft_subspace_residuals(s, x, N, rm) == 0 && pft_subspace_residuals(s, xh, H, rh) == 0);
    for (int i = 0; i < N; i++) {
        CHECK_MSG(rm[i] < 1e-6, "member %d residual %g", i, rm[i]);
        minus_m[i] = -rm[i];
    }
    for (int i = 0; i < H; i++) { /* a fresh row keeps about sqrt((D − N) / D) of its norm */
        CHECK_MSG(rh[i] > 0.5, "held-out %d residual %g", i, rh[i]);
        minus_h[i] = -rh[i];
    }
    CHECK(pft_membership_best_accuracy(minus_m, N, minus_h, H, &acc, &cut) == 0);
    CHECK_NEAR(acc, 1.0, 0);
    CHECK(cut > -0.5 && cut < -1e-6);
    CHECK(pft_membership_auc(minus_m, N, minus_h, H, &auc) == 0);
    CHECK_NEAR(auc, 1.0, 0);
    CHECK(pft_membership_accuracy_verdict(acc) == PFT_VERDICT_FAIL);
    pft_subspace_destroy(&s);
    pft_subspace_destroy(&s); /* safe twice */
}

/* More rows than dimensions: W has full rank, there is no gap, every residual is 0 and the vertex attack
 * does not apply. */
static void test_subspace_full_rank(void)
{
    enum { N = 200, D = 20, C = 4 };
    float *x = pft_alloc_array(N * D, sizeof *x);
    int32_t y[N];
    rows(N, D, C, 1, 3, x, y);
    pft_subspace_t *s = subspace_of(x, y, N, D);
    CHECK(s && !pft_subspace_proper(s) && pft_subspace_dim(s) == D && pft_subspace_basis(s) == NULL);
    CHECK(s && pft_subspace_gap(s) < PFT_SUBSPACE_GAP);
    double r[4] = {1, 1, 1, 1};
    CHECK(s && pft_subspace_residuals(s, x, 4, r) == 0 && r[0] == 0 && r[3] == 0);
    pft_vertex_result_t v;
    CHECK(s && pft_vertex_attack(s, x, N, 10, 1, &v) == 0);
    CHECK(!v.applicable && v.reason && pft_vertex_verdict(&v) == PFT_VERDICT_PASS);
    pft_subspace_destroy(&s);
    pft_free(x);
}

/* A rank-q + diagonal matrix (what stats_rank sends) has full rank: no gap, no subspace; the same matrix
 * without its diagonal has the rank-q gap. */
static void test_subspace_rank_diag(void)
{
    enum { D = 50, Q = 8 };
    double *w = pft_calloc(D * D, sizeof *w), u[D * Q];
    pft_rng_t *r = pft_rng_new(4);
    for (int i = 0; i < D * Q; i++)
        u[i] = pft_rng_normal(r);
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++)
            for (int k = 0; k < Q; k++)
                w[i * D + j] += u[i * Q + k] * u[j * Q + k];
    pft_subspace_t *s = pft_subspace_new(w, D, NULL, 0);
    CHECK(s && pft_subspace_proper(s) && pft_subspace_rank(s) == Q && pft_subspace_dim(s) == Q);
    pft_subspace_destroy(&s);
    for (int i = 0; i < D; i++)
        w[i * D + i] += 1e-3 * (1 + pft_rng_uniform(r));
    s = pft_subspace_new(w, D, NULL, 0);
    CHECK(s && !pft_subspace_proper(s) && pft_subspace_dim(s) == D);
    pft_subspace_destroy(&s);
    s = pft_subspace_new(NULL, D, u, 1); /* w = 0: the span of the one vector */
    CHECK(s && pft_subspace_proper(s) && pft_subspace_rank(s) == 0 && pft_subspace_dim(s) == 1);
    pft_subspace_destroy(&s);
    w[7] = NAN;
    CHECK(pft_subspace_new(w, D, NULL, 0) == NULL);
    pft_rng_destroy(&r);
    pft_free(w);
}

/* 8 sparse non-negative rows in d = 30 (about 15 zeros each) span an 8-dimensional subspace; each is a vertex
 * of {x in it, x ≥ 0, Σx = d}: the programs find them, to rounding, and the data-free zero count singles them
 * out. Rows with negative entries make the attack inapplicable. */
static void test_vertex_planted(void)
{
    enum { N = 8, D = 30 };
    float x[N * D];
    int32_t y[N];
    rows(N, D, 1, 1, 5, x, y);
    pft_subspace_t *s = subspace_of(x, y, N, D);
    CHECK(s && pft_subspace_proper(s) && pft_subspace_dim(s) == N);
    pft_vertex_result_t v;
    CHECK(s && pft_vertex_attack(s, x, N, 2 * D, 7, &v) == 0);
    fprintf(stderr,
            "  %d programs, %d vertices, %d rows recovered (max error %.2g), %d row-like of which %d rows\n",
            v.lps, v.vertices, v.rows_recovered, v.max_err, v.rowlike, v.rowlike_rows);
    CHECK(v.applicable && v.lps + v.lps_failed == 2 * D && v.lps >= D);
    CHECK_MSG(v.rows_recovered >= N / 2, "%d of %d rows recovered", v.rows_recovered, N);
    CHECK(v.max_err < 1e-6 && v.rows_recovered <= v.vertices && v.rows_exact == v.rows_recovered);
    CHECK(v.rowlike_zeros == (int)ceil(PFT_VERTEX_ROWLIKE * (N - 1)));
    CHECK(v.rowlike == v.rowlike_rows && v.rowlike >= N / 2); /* every row-like vertex is a row */
    CHECK(v.zeros_other_max < v.zeros_row_min);
    CHECK(pft_vertex_verdict(&v) == PFT_VERDICT_FAIL);
    float fresh[N * D]; /* rows outside the span: no vertex can be one of them */
    int32_t yf[N];
    rows(N, D, 1, 1, 6, fresh, yf);
    CHECK(s && pft_vertex_attack(s, fresh, N, 5, 7, &v) == 0 && !v.applicable && v.reason && v.lps == 0);
    x[3] = -0.5f; /* the oracle rows are no longer non-negative */
    CHECK(s && pft_vertex_attack(s, x, N, 5, 7, &v) == 0 && !v.applicable && v.reason);
    CHECK(pft_vertex_verdict(&v) == PFT_VERDICT_PASS);
    CHECK(s && pft_vertex_attack(s, x, N, 0, 7, &v) == PFT_EINVAL);
    pft_subspace_destroy(&s);
}

/* AUC and best threshold on lists worked out by hand. */
static void test_membership_scores(void)
{
    double m[3] = {3, 4, 5}, o[3] = {1, 2, 3}, auc, acc, cut;
    /* pairs (member > other): 3 > 1, 2 and ties 3 (½); 4 and 5 beat all three: (2.5 + 3 + 3) / 9 */
    CHECK(pft_membership_auc(m, 3, o, 3, &auc) == 0);
    CHECK_NEAR(auc, 8.5 / 9, 1e-12);
    CHECK(pft_membership_auc(o, 3, m, 3, &auc) == 0);
    CHECK_NEAR(auc, 0.5 / 9, 1e-12);
    /* best cut: above 2.5 (TPR 1, TNR 2/3) or above 3.5 (TPR 2/3, TNR 1): 5/6; the first found is kept */
    CHECK(pft_membership_best_accuracy(m, 3, o, 3, &acc, &cut) == 0);
    CHECK_NEAR(acc, 5.0 / 6, 1e-12);
    CHECK_NEAR(cut, 2.5, 1e-12);
    double same[4] = {1, 1, 1, 1};
    CHECK(pft_membership_auc(same, 2, same + 2, 2, &auc) == 0);
    CHECK_NEAR(auc, 0.5, 0);
    CHECK(pft_membership_best_accuracy(same, 2, same + 2, 2, &acc, &cut) == 0);
    CHECK_NEAR(acc, 0.5, 0);
    double unb_m[1] = {10}, unb_o[4] = {1, 2, 3, 4}; /* balanced accuracy: 1 despite 1 vs 4 rows */
    CHECK(pft_membership_best_accuracy(unb_m, 1, unb_o, 4, &acc, &cut) == 0);
    CHECK_NEAR(acc, 1.0, 0);
    CHECK(pft_membership_auc(m, 0, o, 3, &auc) == PFT_EINVAL);
    double nan_s[1] = {NAN};
    CHECK(pft_membership_auc(nan_s, 1, o, 3, &auc) == PFT_EINVAL);
}

/* The documented thresholds, at and around their edges. */
static void test_verdicts(void)
{
    CHECK(pft_membership_accuracy_verdict(0.9) == PFT_VERDICT_FAIL);
    CHECK(pft_membership_accuracy_verdict(0.6) == PFT_VERDICT_PASS);
    CHECK(pft_membership_accuracy_verdict(0.61) == PFT_VERDICT_WARN);
    CHECK(pft_membership_auc_verdict(0.9) == PFT_VERDICT_FAIL);
    CHECK(pft_membership_auc_verdict(0.6) == PFT_VERDICT_WARN);
    CHECK(pft_membership_auc_verdict(0.59) == PFT_VERDICT_PASS);
    CHECK(pft_nearest_verdict(0.05) == PFT_VERDICT_FAIL && pft_nearest_verdict(0.2) == PFT_VERDICT_WARN);
    CHECK(pft_nearest_verdict(0.5) == PFT_VERDICT_PASS && pft_nearest_verdict(NAN) == PFT_VERDICT_PASS);
    CHECK(pft_verdict_worst(PFT_VERDICT_WARN, PFT_VERDICT_FAIL) == PFT_VERDICT_FAIL);
    pft_verdict_t v;
    CHECK(pft_verdict_parse("warn", &v) == 0 && v == PFT_VERDICT_WARN && pft_verdict_parse("x", &v) != 0);
}

/* A mean equal to a row is at distance 0; the spacing of rows 0, 1, 3 on a line is the median of 1, 1, 2. */
static void test_nearest(void)
{
    float x[3 * 2] = {0, 0, 1, 0, 3, 0};
    double mu[2] = {3, 0}, mid[2] = {2, 0};
    int who = -1;
    CHECK_NEAR(pft_nearest_row(x, 3, 2, mu, &who), 0, 0);
    CHECK(who == 2);
    CHECK_NEAR(pft_nearest_row(x, 3, 2, mid, NULL), 1, 1e-12);
    CHECK_NEAR(pft_nearest_spacing(x, 3, 2), 1, 1e-12);
    CHECK(isnan(pft_nearest_spacing(x, 1, 2)) && isnan(pft_nearest_row(x, 0, 2, mu, NULL)));
}

int main(void)
{
    RUN(test_subspace_members);
    RUN(test_subspace_full_rank);
    RUN(test_subspace_rank_diag);
    RUN(test_vertex_planted);
    RUN(test_membership_scores);
    RUN(test_verdicts);
    RUN(test_nearest);
    return pft_test_done();
}
