/* Tests of the zero-support membership test (node/audit/pft_zerosupport): constructed non-negative rows whose
 * answer is known. Members of a class zero on a set of coordinates, non-members not: every member passes, no
 * other row does, balanced accuracy 1 (FAIL); no zeros anywhere: everyone passes, 0.5 (PASS); a GMM class
 * whose components vanish on different sets: each member passes its own component; an fp16 bundle whose mean
 * rounds a member's tiny value to 0: the member still passes (the rounding bound); the bound test of
 * statistics (a member lies under its class sum): rows with no zero at all, non-members above the members'
 * sum on one coordinate, decided exactly (the zero-support test alone would say 0.5), also by an attacker
 * assuming a large mean_noise (the sums read as exact beside the noise's readings); through pft_audit_run
 * the attack is among the attacks with its verdict. */
#include "pft_alloc.h"
#include "pft_audit.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_zerosupport.h"

#include <string.h>

#define D 32
#define NZ 12 /* members of class 0 are 0 on coordinates 0..NZ-1 */
#define M 6   /* rows per class and set */

/* Rows [from, from + n) of x (d = D) with label c: uniform in [0.1, 1], 0 on coordinates [z0, z1). */
static void fill(pft_rng_t *r, float *x, int32_t *y, int from, int n, int c, int z0, int z1)
{
    for (int i = from; i < from + n; i++) {
        y[i] = c;
        for (int j = 0; j < D; j++)
            x[(size_t)i * D + j] = j >= z0 && j < z1 ? 0.0f : (float)(0.1 + 0.9 * pft_rng_uniform(r));
    }
}

/* A TIED statistics bundle (producer "a", dtype) of the n rows x, y: one part, provenance to match. */
static pft_bundle_t *stats_bundle(const float *x, const int32_t *y, int n, pft_dtype_t dtype)
{
    pft_bundle_t *b = pft_bundle_new("run", "a", dtype, D);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, D);
    const char *who[1] = {"a"};
    CHECK(b && st && pft_gstat_add_rows(st, x, y, (size_t)n) == 0);
    for (int i = 0; i < pft_gstat_n_classes(st); i++)
        CHECK(pft_bundle_prov_add(b, "a", pft_gstat_label(st, i), pft_gstat_count(st, i)) == 0);
    CHECK(pft_bundle_add_part(b, who, 1, &st) == 0);
    pft_gstat_destroy(&st);
    return b;
}

/* b through the wire: encoded and decoded (its means rounded to its dtype). */
static pft_bundle_t *round_trip(pft_bundle_t **b)
{
    uint8_t *m = NULL;
    size_t len = 0;
    pft_bundle_t *o = NULL;
    CHECK_MSG(pft_bundle_encode(*b, &m, &len) == 0, "%s", pft_errmsg());
    CHECK_MSG(m && pft_bundle_decode(m, len, NULL, &o) == 0, "%s", pft_errmsg());
    pft_free(m);
    pft_bundle_destroy(b);
    return o;
}

static double jnum(const json_t *o, const char *path1, const char *key)
{
    const json_t *p = path1 ? json_object_get(o, path1) : o;
    return json_number_value(json_object_get(p, key));
}

static void test_passes(void)
{
    double mu[4] = {0, 0.5, 0, 0.25}, u = pft_zerosupport_unit(PFT_DTYPE_F16);
    float in[4] = {0, 1, 0, 0}, tiny[4] = {(float)(2 * u), 1, 0, 3}, out[4] = {0, 1, 0.01f, 0};
    CHECK(u > 2.98e-8 && u < 2.99e-8 && pft_zerosupport_unit(PFT_DTYPE_F32) < 1e-44);
    CHECK(pft_zerosupport_passes(in, mu, 4, 1, u));
    CHECK(!pft_zerosupport_passes(out, mu, 4, 10, u));
    CHECK(!pft_zerosupport_passes(tiny, mu, 4, 1, u)); /* 2u: not from a mean of one row rounded to 0 */
    CHECK(pft_zerosupport_passes(tiny, mu, 4, 2, u));  /* a mean of two rows may hide it */
}

/* Class 0: members 0 on coordinates 0..NZ-1, non-members nowhere 0 → 1.0; class 1: no zeros → 0.5. */
static void test_known_answers(void)
{
    pft_rng_t *r = pft_rng_new(7);
    float x[2 * M * D], h[2 * M * D];
    int32_t y[2 * M], yh[2 * M];
    fill(r, x, y, 0, M, 0, 0, NZ);
    fill(r, x, y, M, M, 1, 0, 0);
    fill(r, h, yh, 0, M, 0, 0, 0);
    fill(r, h, yh, M, M, 1, 0, 0);
    pft_bundle_t *b = stats_bundle(x, y, 2 * M, PFT_DTYPE_F32);
    b = round_trip(&b);
    pft_audit_rows_t own = {x, y, 2 * M, D}, held = {h, yh, 2 * M, D};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    CHECK(b && pft_zerosupport_attack(b, &own, &held, 0, &o, &v) == 0 && o);
    CHECK(v == PFT_VERDICT_FAIL);
    CHECK(json_is_true(json_object_get(o, "applicable")));
    CHECK_NEAR(jnum(o, NULL, "accuracy"), 1.0, 1e-12);
    CHECK(jnum(o, "worst", "label") == 0 && jnum(o, "worst", "zeros") == NZ && jnum(o, "worst", "rows") == M);
    CHECK(jnum(o, "worst", "own_pass") == M && jnum(o, "worst", "holdout_pass") == 0);
    json_t *c1 = json_array_get(json_object_get(o, "classes"), 1);
    CHECK(jnum(c1, NULL, "zeros") == 0 && jnum(c1, NULL, "holdout_pass") == M);
    CHECK_NEAR(jnum(c1, NULL, "accuracy"), 0.5, 1e-12);
    CHECK_NEAR(jnum(o, "overall", "accuracy"), 0.75, 1e-12); /* all members pass, half the others */
    json_decref(o);
    /* without held-out rows: nothing to measure, PASS */
    pft_audit_rows_t none = {NULL, NULL, 0, D};
    CHECK(pft_zerosupport_attack(b, &own, &none, 0, &o, &v) == 0 && v == PFT_VERDICT_PASS);
    CHECK(json_is_false(json_object_get(o, "applicable")) && json_is_null(json_object_get(o, "accuracy")));
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* No coordinate is 0 in any row: every row passes, accuracy 0.5, PASS. */
static void test_no_zeros(void)
{
    pft_rng_t *r = pft_rng_new(8);
    float x[M * D], h[M * D];
    int32_t y[M], yh[M];
    fill(r, x, y, 0, M, 3, 0, 0);
    fill(r, h, yh, 0, M, 3, 0, 0);
    pft_bundle_t *b = stats_bundle(x, y, M, PFT_DTYPE_F16);
    b = round_trip(&b);
    pft_audit_rows_t own = {x, y, M, D}, held = {h, yh, M, D};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_FAIL;
    CHECK(b && pft_zerosupport_attack(b, &own, &held, 0, &o, &v) == 0 && v == PFT_VERDICT_PASS);
    CHECK_NEAR(jnum(o, NULL, "accuracy"), 0.5, 1e-12);
    CHECK(jnum(o, "worst", "zeros") == 0 && jnum(o, "worst", "holdout_pass") == M);
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* fp16: a member's 1e-9 on a zero coordinate makes a mean of 1.7e-10, which rounds to 0; that member passes.
 */
static void test_fp16_rounding(void)
{
    pft_rng_t *r = pft_rng_new(9);
    float x[M * D], h[M * D];
    int32_t y[M], yh[M];
    fill(r, x, y, 0, M, 0, 0, NZ);
    fill(r, h, yh, 0, M, 0, 0, 0);
    x[0] = 1e-9f;
    pft_bundle_t *b = stats_bundle(x, y, M, PFT_DTYPE_F16);
    b = round_trip(&b);
    CHECK(b && pft_gstat_mean(pft_bundle_part_stats(b, 0), 0)[0] == 0);
    pft_audit_rows_t own = {x, y, M, D}, held = {h, yh, M, D};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    CHECK(b && pft_zerosupport_attack(b, &own, &held, 0, &o, &v) == 0);
    CHECK(jnum(o, "worst", "own_pass") == M && jnum(o, "worst", "zeros") == NZ);
    CHECK_NEAR(jnum(o, NULL, "accuracy"), 1.0, 1e-12);
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* The bound test: pft_zerosupport_bounded's arithmetic, then a class with no zero where members are small on
 * coordinate 0 (their sum there ≤ M·0.05) and non-members large (≥ 0.5): members pass, non-members fail. */
static void test_bound(void)
{
    float in[3] = {0.2f, 0.0f, 0.5f}, out[3] = {0.2f, 0.1f, 0.5f};
    double sum[3] = {0.3, 0.0, 0.5};
    CHECK(pft_zerosupport_bounded(in, sum, 3, 1, 0, 0, 0));
    CHECK(!pft_zerosupport_bounded(out, sum, 3, 1, 0, 0, 0));
    CHECK(pft_zerosupport_bounded(out, sum, 3, 1, 0, 0, 0.2)); /* a margin for the noise lets it through */
    pft_rng_t *r = pft_rng_new(12);
    float x[M * D], h[M * D];
    int32_t y[M], yh[M];
    fill(r, x, y, 0, M, 2, 0, 0);
    fill(r, h, yh, 0, M, 2, 0, 0);
    for (int i = 0; i < M; i++) {
        x[(size_t)i * D] = (float)(0.01 + 0.04 * pft_rng_uniform(r));
        h[(size_t)i * D] = (float)(0.5 + 0.5 * pft_rng_uniform(r));
    }
    pft_bundle_t *b = stats_bundle(x, y, M, PFT_DTYPE_F16);
    b = round_trip(&b);
    pft_audit_rows_t own = {x, y, M, D}, held = {h, yh, M, D};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    CHECK(b && pft_zerosupport_attack(b, &own, &held, 0, &o, &v) == 0 && v == PFT_VERDICT_FAIL);
    CHECK(jnum(o, "worst", "zeros") == 0 && jnum(o, "worst", "own_pass") == M);
    CHECK(jnum(o, "worst", "holdout_pass") == 0);
    CHECK_NEAR(jnum(o, NULL, "accuracy"), 1.0, 1e-12);
    CHECK(json_is_false(json_object_get(json_object_get(o, "worst"), "exact_reading")));
    json_decref(o);
    /* an attacker assuming mean_noise 100: read with the noise's rescaling (×30 here), the sum bounds nothing
     * and everyone passes; read as exact, as the producer sent it, it still decides */
    CHECK(pft_zerosupport_attack(b, &own, &held, 100, &o, &v) == 0 && v == PFT_VERDICT_FAIL);
    CHECK_NEAR(jnum(o, NULL, "accuracy"), 1.0, 1e-12);
    CHECK(json_is_true(json_object_get(json_object_get(o, "worst"), "exact_reading")));
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* A GMM class of two components of 4 rows each, 0 on coordinates 0..7 and 8..15: members of either pass;
 * non-members 0 on half of each set, or nowhere, pass neither. */
static void test_gmm_components(void)
{
    pft_rng_t *r = pft_rng_new(10);
    float x[8 * D], h[8 * D];
    int32_t y[8], yh[8];
    fill(r, x, y, 0, 4, 0, 0, 8);
    fill(r, x, y, 4, 4, 0, 8, 16);
    fill(r, h, yh, 0, 4, 0, 4, 12);
    fill(r, h, yh, 4, 4, 0, 0, 0);
    double w[2] = {0.5, 0.5}, mu[2 * D], var[2 * D];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int i = 4 * k; i < 4 * k + 4; i++)
                s += x[(size_t)i * D + j];
            mu[k * D + j] = s / 4;
            var[k * D + j] = 0.01;
        }
    pft_gmm_t *g = pft_gmm_new(2, D, PFT_COV_DIAG);
    pft_bundle_t *b = pft_bundle_new("run", "a", PFT_DTYPE_F16, D);
    CHECK(g && b && pft_gmm_set_params(g, w, mu, var) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 0, 8) == 0 && pft_bundle_add_class(b, 0, 8, &g) == 0);
    pft_gmm_destroy(&g);
    b = round_trip(&b);
    pft_audit_rows_t own = {x, y, 8, D}, held = {h, yh, 8, D};
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    CHECK(b && pft_zerosupport_attack(b, &own, &held, 0, &o, &v) == 0 && v == PFT_VERDICT_FAIL);
    CHECK(jnum(o, "worst", "means") == 2 && jnum(o, "worst", "zeros") == 8 && jnum(o, "worst", "rows") == 8);
    CHECK(jnum(o, "worst", "own_pass") == 8 && jnum(o, "worst", "holdout_pass") == 0);
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

/* The whole audit: the zero-support test is among its attacks, with its FAIL. */
static void test_in_audit(void)
{
    pft_rng_t *r = pft_rng_new(11);
    float x[2 * M * D], h[2 * M * D];
    int32_t y[2 * M], yh[2 * M];
    fill(r, x, y, 0, M, 0, 0, NZ);
    fill(r, x, y, M, M, 1, 0, 0);
    fill(r, h, yh, 0, M, 0, 0, 0);
    fill(r, h, yh, M, M, 1, 0, 0);
    pft_bundle_t *b = stats_bundle(x, y, 2 * M, PFT_DTYPE_F32);
    b = round_trip(&b);
    pft_audit_rows_t own = {x, y, 2 * M, D}, held = {h, yh, 2 * M, D};
    pft_audit_opts_t ao;
    pft_audit_opts_default(&ao);
    ao.n_lp = 5;
    json_t *o = NULL;
    pft_verdict_t v = PFT_VERDICT_PASS;
    CHECK_MSG(b && pft_audit_run(b, &own, &held, &ao, &o, &v) == 0, "%s", pft_errmsg());
    json_t *z = json_object_get(json_object_get(o, "attacks"), "zero_support");
    CHECK(z && strcmp(json_string_value(json_object_get(z, "verdict")), "FAIL") == 0);
    CHECK(v == PFT_VERDICT_FAIL && strcmp(json_string_value(json_object_get(o, "verdict")), "FAIL") == 0);
    json_decref(o);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

int main(void)
{
    RUN(test_passes);
    RUN(test_known_answers);
    RUN(test_no_zeros);
    RUN(test_fp16_rounding);
    RUN(test_bound);
    RUN(test_gmm_components);
    RUN(test_in_audit);
    return pft_test_done();
}
