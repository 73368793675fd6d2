/* Tests of statistics bundles (exact Gaussian statistics parts instead of GMMs): round trips in both kinds
 * and dtypes, canonical bytes, API refusals, provenance consistency on both sides, hostile payloads
 * (hand-built, truncated, bit-flipped). docs/WIRE.md §2–3. */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_gstat.h"
#include "pft_gstat_lowrank.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_bundle.h"

#include "pft_test_stats.h"

static void round_trip(pft_gstat_kind_t kind, pft_dtype_t dt)
{
    int d = 5;
    pft_bundle_t *b = two_part_bundle(11 + (uint64_t)kind, kind, dt, d);
    CHECK(pft_bundle_is_stats(b) && pft_bundle_n_parts(b) == 2);
    CHECK(strcmp(pft_bundle_part_contributor(b, 0, 0), "a") == 0); /* sorted by first contributor */
    uint8_t *m1 = NULL, *m2 = NULL, *p1 = NULL, *p2 = NULL, *m3 = NULL;
    size_t l1 = 0, l2 = 0, q1 = 0, q2 = 0, l3 = 0;
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0);
    CHECK(pft_bundle_encode(b, &m2, &l2) == 0);
    CHECK(l1 == l2 && memcmp(m1, m2, l1) == 0);
    pft_bundle_t *o = NULL, *o2 = NULL;
    CHECK(pft_bundle_decode(m1, l1, NULL, &o) == 0);
    if (!o) {
        fprintf(stderr, "  decode: %s\n", pft_errmsg());
        goto out;
    }
    check_same_parts(b, o, dt == PFT_DTYPE_F32 ? 1e-6 : 2e-3);
    CHECK(pft_bundle_prov_count(o, "a", 2) == 4 && pft_bundle_prov_n_nodes(o) == 3);
    /* decode → encode gives the payload back */
    CHECK(pft_bundle_encode_payload(b, &p1, &q1) == 0);
    CHECK(pft_bundle_encode_payload(o, &p2, &q2) == 0);
    CHECK(q1 == q2 && memcmp(p1, p2, q1) == 0);
    /* a bundle rebuilt from the decoded statistics (parts added in another order) gives the same bytes */
    pft_bundle_t *re = rebuild(o);
    CHECK(pft_bundle_encode(re, &m3, &l3) == 0);
    CHECK_MSG(l3 == l1 && memcmp(m3, m1, l1) == 0, "rebuilt: %zu vs %zu bytes", l3, l1);
    CHECK(pft_bundle_decode(m3, l3, NULL, &o2) == 0);
    if (o2)
        check_same_parts(o, o2, 0);
    pft_bundle_destroy(&re);
    size_t fb = pft_bundle_formula_bytes(b), es = dt == PFT_DTYPE_F32 ? 4 : 2, tri = (size_t)d * (d + 1) / 2;
    size_t want = kind == PFT_GSTAT_FULL ? 4 * (1 + (size_t)d + tri) : 4 * (1 + (size_t)d) + 2 * tri;
    CHECK(fb == want * es);
    printf("  %s %s d=%d: %zu bytes encoded, formula %zu\n", pft_gstat_kind_name(kind),
           dt == PFT_DTYPE_F32 ? "fp32" : "fp16", d, l1, fb);
out:
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&o2);
    pft_bundle_destroy(&b);
    pft_free(m1);
    pft_free(m2);
    pft_free(m3);
    pft_free(p1);
    pft_free(p2);
}

static void test_round_trips(void)
{
    round_trip(PFT_GSTAT_FULL, PFT_DTYPE_F32);
    round_trip(PFT_GSTAT_FULL, PFT_DTYPE_F16);
    round_trip(PFT_GSTAT_TIED, PFT_DTYPE_F32);
    round_trip(PFT_GSTAT_TIED, PFT_DTYPE_F16);
}

/* A GMM bundle keeps 8 payload elements; an empty bundle too. */
static void test_gmm_unchanged(void)
{
    pft_bundle_t *b = pft_bundle_new("r", "p", PFT_DTYPE_F16, 2);
    uint8_t *p = NULL;
    size_t n = 0;
    CHECK(pft_bundle_encode_payload(b, &p, &n) == 0);
    CHECK(n > 0 && p[0] == 0x98);
    CHECK(!pft_bundle_is_stats(b) && pft_bundle_n_parts(b) == 0);
    pft_free(p);
    pft_bundle_destroy(&b);
    b = two_part_bundle(3, PFT_GSTAT_FULL, PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_encode_payload(b, &p, &n) == 0);
    CHECK(n > 0 && p[0] == 0x99);
    pft_free(p);
    pft_bundle_destroy(&b);
}

/* ---------- API refusals ---------- */

static pft_gstat_t *one_class(pft_gstat_kind_t kind, int d, int label, uint64_t n)
{
    pft_gstat_t *st = pft_gstat_new(kind, d);
    double mean[8] = {0};
    CHECK(pft_gstat_add_class(st, label, n, mean, NULL) == 0);
    return st;
}

static void test_api_refusals(void)
{
    pft_bundle_t *b = pft_bundle_new("r", "p", PFT_DTYPE_F32, 2);
    const char *ab[] = {"a", "b"}, *ba[] = {"b", "a"}, *aa[] = {"a", "a"}, *bc[] = {"b", "c"}, *c1[] = {"c"},
               *bad_id[] = {"x\n"}, *empty_id[] = {""}, *d1[] = {"d"};
    pft_gstat_t *st = one_class(PFT_GSTAT_FULL, 2, 0, 1);
    CHECK(pft_bundle_add_part(b, ba, 2, &st) == PFT_EINVAL && st); /* unsorted */
    CHECK(pft_bundle_add_part(b, aa, 2, &st) == PFT_EINVAL && st); /* duplicate */
    CHECK(pft_bundle_add_part(b, ab, 0, &st) == PFT_EINVAL && st); /* no contributor */
    CHECK(pft_bundle_add_part(b, bad_id, 1, &st) == PFT_EINVAL && st);
    CHECK(pft_bundle_add_part(b, empty_id, 1, &st) == PFT_EINVAL && st);
    CHECK(pft_bundle_add_part(b, ab, 2, &st) == 0 && !st);
    CHECK(pft_bundle_is_stats(b));
    st = one_class(PFT_GSTAT_FULL, 2, 1, 1);
    CHECK(pft_bundle_add_part(b, bc, 2, &st) == PFT_EINVAL && st); /* b already in part 0 */
    CHECK(strstr(pft_errmsg(), "'b'") != NULL);
    pft_gstat_destroy(&st);
    st = one_class(PFT_GSTAT_TIED, 2, 1, 1);
    CHECK(pft_bundle_add_part(b, c1, 1, &st) == PFT_EINVAL && st); /* kind mix */
    pft_gstat_destroy(&st);
    st = one_class(PFT_GSTAT_FULL, 3, 1, 1);
    CHECK(pft_bundle_add_part(b, c1, 1, &st) == PFT_EINVAL && st); /* d mismatch */
    pft_gstat_destroy(&st);
    st = pft_gstat_new(PFT_GSTAT_FULL, 2);
    CHECK(pft_bundle_add_part(b, c1, 1, &st) == PFT_EINVAL && st); /* no class */
    pft_gstat_destroy(&st);
    st = one_class(PFT_GSTAT_FULL, 2, 1, PFT_BUNDLE_MAX_COUNT + 1);
    CHECK(pft_bundle_add_part(b, c1, 1, &st) == PFT_EINVAL && st); /* count beyond 2^48 */
    pft_gstat_destroy(&st);
    st = one_class(PFT_GSTAT_FULL, 2, 1, 1);
    CHECK(pft_bundle_add_part(b, d1, 1, &st) == 0);
    CHECK(pft_bundle_n_parts(b) == 2 && pft_bundle_part_n_contributors(b, 1) == 1);
    /* classes and parts never together */
    pft_gmm_t *g = pft_gmm_new(1, 2, PFT_COV_DIAG);
    double w = 1, mu[2] = {0, 0}, var[2] = {1, 1};
    CHECK(pft_gmm_set_params(g, &w, mu, var) == 0);
    CHECK(pft_bundle_add_class(b, 5, 1, &g) == PFT_EINVAL && g);
    pft_bundle_t *gb = pft_bundle_new("r", "p", PFT_DTYPE_F32, 2);
    CHECK(pft_bundle_add_class(gb, 5, 1, &g) == 0);
    st = one_class(PFT_GSTAT_FULL, 2, 1, 1);
    CHECK(pft_bundle_add_part(gb, c1, 1, &st) == PFT_EINVAL && st);
    pft_gstat_destroy(&st);
    pft_bundle_destroy(&gb);
    pft_bundle_destroy(&b);
}

/* ---------- provenance consistency (encoder) ---------- */

static void expect_encode(pft_bundle_t *b, int code, const char *needle)
{
    uint8_t *m = NULL;
    size_t l = 0;
    int rc = pft_bundle_encode(b, &m, &l);
    CHECK_MSG(rc == code, "encode rc %d, expected %d (%s)", rc, code, pft_errmsg());
    if (needle)
        CHECK_MSG(strstr(pft_errmsg(), needle) != NULL, "message \"%s\" lacks \"%s\"", pft_errmsg(), needle);
    pft_free(m);
}

static void test_encoder_counts(void)
{
    pft_bundle_t *b = two_part_bundle(5, PFT_GSTAT_FULL, PFT_DTYPE_F32, 3);
    CHECK(pft_bundle_prov_add(b, "b", 0, 1) == 0); /* part 0 class 0 has n = 8, provenance now 9 */
    expect_encode(b, PFT_EINVAL, "part 0 (contributors a,b): class 0 (label 0)");
    pft_bundle_destroy(&b);
    b = two_part_bundle(5, PFT_GSTAT_FULL, PFT_DTYPE_F32, 3);
    CHECK(pft_bundle_prov_add(b, "z", 1, 1) == 0); /* a node of no part */
    expect_encode(b, PFT_EINVAL, "'z'");
    pft_bundle_destroy(&b);
    b = two_part_bundle(5, PFT_GSTAT_FULL, PFT_DTYPE_F32, 3);
    CHECK(pft_bundle_prov_add(b, "b", 1, 1) == 0); /* label 1 has no class in part 0 */
    expect_encode(b, PFT_EINVAL, "label 1 has no class in part 0");
    pft_bundle_destroy(&b);
    b = pft_bundle_new("r", "p", PFT_DTYPE_F32, 2); /* a contributor without provenance */
    const char *ab[] = {"a", "b"};
    pft_gstat_t *st = one_class(PFT_GSTAT_FULL, 2, 0, 2);
    CHECK(pft_bundle_add_part(b, ab, 2, &st) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 0, 2) == 0);
    expect_encode(b, PFT_EINVAL, "contributor 'b' is not a provenance node");
    CHECK(pft_bundle_prov_add(b, "b", 0, 1) == 0);
    expect_encode(b, PFT_EINVAL, "n = 2");
    pft_bundle_destroy(&b);
    /* fp16 overflow of a mean names the part and class */
    b = pft_bundle_new("r", "p", PFT_DTYPE_F16, 2);
    st = pft_gstat_new(PFT_GSTAT_FULL, 2);
    double mean[2] = {1e5, 0};
    CHECK(pft_gstat_add_class(st, 3, 1, mean, NULL) == 0);
    const char *a1[] = {"a"};
    CHECK(pft_bundle_add_part(b, a1, 1, &st) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 3, 1) == 0);
    expect_encode(b, PFT_ERANGE, "part 0 (contributors a): class 0 (label 3): mean[0]");
    pft_bundle_destroy(&b);
}

static void test_hand_built(void)
{
    for (int kind = 0; kind < 2; kind++) {
        hand_t h = hand_default(kind);
        pft_bundle_t *o = NULL;
        CHECK(hand_decode(&h, &o) == 0);
        if (o) { /* M = n·C (full) or W = N·C (tied), exactly */
            const pft_gstat_t *st = pft_bundle_part_stats(o, 0);
            const double *m = kind == PFT_GSTAT_FULL ? pft_gstat_scatter(st, 0) : pft_gstat_tied_scatter(st);
            CHECK(m[0] == 8 && m[1] == 2 && m[2] == 2 && m[3] == 4);
            CHECK(pft_gstat_mean(st, 0)[1] == -2);
        }
        pft_bundle_destroy(&o);
        const char *cls = kind == PFT_GSTAT_FULL ? "class 0 (label 0): covariance" : "shared covariance";
        h.prov = 5; /* counts disagree with provenance */
        expect_hand(&h, PFT_EFORMAT, "part 0 (contributors a): class 0 (label 0): n = 4");
        h = hand_default(kind);
        h.cov[1] = 3; /* |C10| > sqrt(C00 C11): indefinite */
        expect_hand(&h, PFT_ENUMERIC, "not positive semi-definite");
        expect_hand(&h, PFT_ENUMERIC, cls);
        h = hand_default(kind);
        h.cov[2] = -0.5f;
        expect_hand(&h, PFT_ENUMERIC, "is negative");
        h = hand_default(kind);
        h.cov[1] = NAN;
        expect_hand(&h, PFT_ENUMERIC, "not finite");
        h = hand_default(kind);
        h.mean[0] = INFINITY;
        expect_hand(&h, PFT_ENUMERIC, "mean[0]");
        h = hand_default(kind);
        h.mean[1] = NAN;
        expect_hand(&h, PFT_ENUMERIC, "mean[1] = nan");
        h = hand_default(kind);
        h.shared_bad = 1;
        expect_hand(&h, PFT_EFORMAT, "shared covariance");
        h = hand_default(kind);
        h.classes_nonempty = 1; /* classes and parts together */
        expect_hand(&h, PFT_EFORMAT, "classes");
        h = hand_default(kind);
        h.n = 0;
        h.prov = 1;
        expect_hand(&h, PFT_EFORMAT, "n = 0");
        h = hand_default(kind);
        h.kind = 2;
        expect_hand(&h, PFT_EFORMAT, "kind = 2");
    }
    hand_t h = hand_default(0);
    h.n_payload = 10; /* a tenth element is the topology fingerprint (WIRE.md §2.4): a nil is refused */
    expect_hand(&h, PFT_EFORMAT, "fingerprint: expected array, got nil");
    h.n_payload = 8; /* 8 elements, no classes, provenance: the old rules (label 0 has no class) */
    expect_hand(&h, PFT_EFORMAT, "has no class");
}

/* A covariance set to an indefinite matrix through the API (pft_gstat does not check PSD) encodes, and the
 * decoder refuses it. */
static void test_indefinite_via_api(void)
{
    for (int kind = 0; kind < 2; kind++)
        for (int dt = 0; dt < 2; dt++) {
            pft_bundle_t *b = pft_bundle_new("r", "a", (pft_dtype_t)dt, 2);
            pft_gstat_t *st = pft_gstat_new((pft_gstat_kind_t)kind, 2);
            double mean[2] = {0.5, 1}, s[4] = {4, 8, 8, 4}; /* eigenvalues 12, -4 */
            CHECK(pft_gstat_add_class(st, 5, 4, mean, kind == PFT_GSTAT_FULL ? s : NULL) == 0);
            if (kind == PFT_GSTAT_TIED)
                CHECK(pft_gstat_add_tied_scatter(st, s) == 0);
            const char *a[] = {"a"};
            CHECK(pft_bundle_add_part(b, a, 1, &st) == 0);
            CHECK(pft_bundle_prov_add(b, "a", 5, 4) == 0);
            uint8_t *m = NULL;
            size_t l = 0;
            CHECK(pft_bundle_encode(b, &m, &l) == 0);
            pft_bundle_t *o = NULL;
            CHECK(pft_bundle_decode(m, l, NULL, &o) == PFT_ENUMERIC && !o);
            CHECK_MSG(strstr(pft_errmsg(), kind == PFT_GSTAT_FULL
                                               ? "part 0 (contributors a): class 0 (label 5): "
                                                 "covariance is not positive semi-definite"
                                               : "part 0 (contributors a): shared covariance "
                                                 "is not positive semi-definite") != NULL,
                      "%s", pft_errmsg());
            pft_free(m);
            pft_bundle_destroy(&b);
        }
}

/* The memory budget counts the decoded statistics. */
static void test_model_budget(void)
{
    pft_bundle_t *b = two_part_bundle(9, PFT_GSTAT_FULL, PFT_DTYPE_F16, 16);
    uint8_t *m = NULL;
    size_t l = 0;
    CHECK(pft_bundle_encode(b, &m, &l) == 0);
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    lim.max_model_bytes = 8 * 16 * 16 * 3; /* less than two scatters plus the transient */
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_decode(m, l, &lim, &o) == PFT_ERANGE && !o);
    pft_bundle_limits_default(&lim);
    lim.max_nodes = 2; /* three contributors over all parts */
    CHECK(pft_bundle_decode(m, l, &lim, &o) == PFT_ERANGE && !o);
    pft_free(m);
    pft_bundle_destroy(&b);
}

/* ---------- hostile bytes ---------- */

static void small_message(pft_gstat_kind_t kind, uint8_t **buf, size_t *len)
{
    pft_bundle_t *b = two_part_bundle(21, kind, PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_encode(b, buf, len) == 0);
    pft_bundle_destroy(&b);
}

static void test_truncation(void)
{
    for (int kind = 0; kind < 2; kind++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        small_message((pft_gstat_kind_t)kind, &buf, &len);
        int failures = 0;
        for (size_t n = 0; n < len; n++) {
            uint8_t *copy = pft_alloc(n); /* exact size: ASan sees any read past it */
            memcpy(copy, buf, n);
            pft_bundle_t *o = NULL;
            if (pft_bundle_decode(copy, n, NULL, &o) == 0 || o != NULL)
                failures++;
            pft_free(copy);
            pft_bundle_destroy(&o);
        }
        CHECK_MSG(failures == 0, "%d prefixes decoded", failures);
        printf("  %s: %zu prefixes of a %zu-byte bundle all rejected\n", pft_gstat_kind_name(kind), len, len);
        pft_free(buf);
    }
}

static void test_bit_flips(void)
{
    for (int kind = 0; kind < 2; kind++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        small_message((pft_gstat_kind_t)kind, &buf, &len);
        int accepted, rejected, bad;
        pft_test_bit_flips(buf, len, &accepted, &rejected, &bad);
        CHECK(bad == 0);
        CHECK(rejected > 0);
        printf("  %s: %zu single-bit flips: %d rejected, %d decoded to valid bundles\n",
               pft_gstat_kind_name(kind), len * 8, rejected, accepted);
        pft_free(buf);
    }
}

/* Allocation failure at every allocation of a decode, an encode and add_part: a clean error or success. */
static void test_alloc_failures(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(PFT_GSTAT_FULL, &buf, &len);
    pft_bundle_t *ok = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &ok) == 0);
    int dec_at = -1, enc_at = -1;
    for (long n = 0; n < 400 && dec_at < 0; n++) {
        pft_alloc_fail_after(n);
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(buf, len, NULL, &o);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc < 0 && o == NULL));
        if (rc == 0) {
            dec_at = (int)n;
            CHECK(pft_test_usable(o));
        }
        pft_bundle_destroy(&o);
    }
    pft_bundle_t *b = two_part_bundle(21, PFT_GSTAT_TIED, PFT_DTYPE_F16, 2);
    for (long n = 0; n < 400 && enc_at < 0; n++) {
        uint8_t *m = NULL;
        size_t l = 0;
        pft_alloc_fail_after(n);
        int rc = pft_bundle_encode(b, &m, &l);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc == PFT_ENOMEM && m == NULL));
        if (rc == 0)
            enc_at = (int)n;
        pft_free(m);
    }
    for (long n = 0; n < 20; n++) {
        pft_bundle_t *e = pft_bundle_new("r", "p", PFT_DTYPE_F16, 2);
        pft_gstat_t *st = one_class(PFT_GSTAT_FULL, 2, 0, 1);
        const char *ab[] = {"a", "b"};
        pft_alloc_fail_after(n);
        int rc = pft_bundle_add_part(e, ab, 2, &st);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 ? st == NULL && pft_bundle_n_parts(e) == 1
                      : rc == PFT_ENOMEM && st && !pft_bundle_n_parts(e));
        pft_gstat_destroy(&st);
        pft_bundle_destroy(&e);
    }
    CHECK(dec_at > 0 && enc_at > 0);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&ok);
    pft_free(buf);
}

/* ---------- low-rank shared covariance (tied parts) ---------- */

int main(void)
{
    RUN(test_round_trips);
    RUN(test_gmm_unchanged);
    RUN(test_api_refusals);
    RUN(test_encoder_counts);
    RUN(test_hand_built);
    RUN(test_indefinite_via_api);
    RUN(test_model_budget);
    RUN(test_truncation);
    RUN(test_bit_flips);
    RUN(test_alloc_failures);
    return pft_test_done();
}
