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

/* ---------- fixtures ---------- */

/* Statistics of `n` random rows per class (labels[i], n[i]), dimension d; rows spread around class means. */
static pft_gstat_t *random_stats(pft_rng_t *r, pft_gstat_kind_t kind, int d, const int *labels, const int *n,
                                 int ncl)
{
    pft_gstat_t *st = pft_gstat_new(kind, d);
    CHECK(st != NULL);
    for (int c = 0; c < ncl; c++) {
        float *x = pft_alloc_array((size_t)n[c] * (size_t)d, sizeof *x);
        int32_t *y = pft_alloc_array((size_t)n[c], sizeof *y);
        for (int i = 0; i < n[c]; i++) {
            y[i] = labels[c];
            for (int j = 0; j < d; j++)
                x[(size_t)i * d + j] = (float)(labels[c] + 0.5 * j + (1.0 + 0.3 * j) * pft_rng_normal(r));
        }
        CHECK(pft_gstat_add_rows(st, x, y, (size_t)n[c]) == 0);
        pft_free(x);
        pft_free(y);
    }
    return st;
}

/* A stats bundle with two parts: {a, b} (labels 0 and 2) and {c} (labels 1 and 2), provenance to match:
 * a: 0→3, 2→4; b: 0→5; c: 1→6, 2→2. */
static pft_bundle_t *two_part_bundle(uint64_t seed, pft_gstat_kind_t kind, pft_dtype_t dt, int d)
{
    pft_rng_t *r = pft_rng_new(seed);
    pft_bundle_t *b = pft_bundle_new("run", "c", dt, d);
    CHECK(pft_bundle_prov_add(b, "a", 0, 3) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 2, 4) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 0, 5) == 0);
    CHECK(pft_bundle_prov_add(b, "c", 1, 6) == 0);
    CHECK(pft_bundle_prov_add(b, "c", 2, 2) == 0);
    static const int la[] = {0, 2}, na[] = {8, 4}, lc[] = {1, 2}, nc[] = {6, 2};
    pft_gstat_t *sc = random_stats(r, kind, d, lc, nc, 2), *sa = random_stats(r, kind, d, la, na, 2);
    const char *ca[] = {"a", "b"}, *cc[] = {"c"};
    CHECK(pft_bundle_add_part(b, cc, 1, &sc) == 0 && sc == NULL); /* out of order: kept sorted */
    CHECK(pft_bundle_add_part(b, ca, 2, &sa) == 0 && sa == NULL);
    pft_rng_destroy(&r);
    return b;
}

/* |a - b| ≤ tol · scale for every element. */
static int near_all(const double *a, const double *b, size_t n, double tol, double scale)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * scale))
            return 0;
    return 1;
}

static double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* Same parts (contributors exact, counts exact, means and scatters within the relative tolerance tol). */
static void check_same_parts(const pft_bundle_t *a, const pft_bundle_t *b, double tol)
{
    CHECK(pft_bundle_is_stats(b) && pft_bundle_n_classes(b) == 0);
    CHECK(pft_bundle_n_parts(a) == pft_bundle_n_parts(b));
    for (int i = 0; i < pft_bundle_n_parts(a) && i < pft_bundle_n_parts(b); i++) {
        CHECK(pft_bundle_part_n_contributors(a, i) == pft_bundle_part_n_contributors(b, i));
        for (int j = 0; j < pft_bundle_part_n_contributors(a, i); j++)
            CHECK(strcmp(pft_bundle_part_contributor(a, i, j), pft_bundle_part_contributor(b, i, j)) == 0);
        const pft_gstat_t *sa = pft_bundle_part_stats(a, i), *sb = pft_bundle_part_stats(b, i);
        int d = pft_gstat_dim(sa);
        size_t dd = (size_t)d * d;
        CHECK(pft_gstat_kind(sa) == pft_gstat_kind(sb) && pft_gstat_dim(sb) == d);
        CHECK(pft_gstat_n_classes(sa) == pft_gstat_n_classes(sb));
        for (int c = 0; c < pft_gstat_n_classes(sa); c++) {
            CHECK(pft_gstat_label(sa, c) == pft_gstat_label(sb, c));
            CHECK(pft_gstat_count(sa, c) == pft_gstat_count(sb, c));
            const double *ma = pft_gstat_mean(sa, c), *mb = pft_gstat_mean(sb, c);
            CHECK_MSG(near_all(ma, mb, (size_t)d, tol, fmax(1.0, max_abs(ma, (size_t)d))),
                      "part %d class %d mean", i, c);
            if (pft_gstat_kind(sa) == PFT_GSTAT_FULL) {
                const double *xa = pft_gstat_scatter(sa, c), *xb = pft_gstat_scatter(sb, c);
                CHECK_MSG(near_all(xa, xb, dd, tol, max_abs(xa, dd)), "part %d class %d scatter", i, c);
            }
        }
        if (pft_gstat_kind(sa) == PFT_GSTAT_TIED) {
            const double *xa = pft_gstat_tied_scatter(sa), *xb = pft_gstat_tied_scatter(sb);
            CHECK_MSG(near_all(xa, xb, dd, tol, max_abs(xa, dd)), "part %d shared scatter", i);
        }
    }
}

/* The same bundle rebuilt through the public API (parts added in reverse order, statistics duplicated). */
static pft_bundle_t *rebuild(const pft_bundle_t *o)
{
    pft_bundle_t *re =
        pft_bundle_new(pft_bundle_run_id(o), pft_bundle_producer(o), pft_bundle_dtype(o), pft_bundle_dim(o));
    for (int i = pft_bundle_n_parts(o) - 1; i >= 0; i--) {
        const char *ids[16];
        int n = pft_bundle_part_n_contributors(o, i);
        for (int j = 0; j < n && j < 16; j++)
            ids[j] = pft_bundle_part_contributor(o, i, j);
        pft_gstat_t *st = pft_gstat_dup(pft_bundle_part_stats(o, i));
        CHECK(pft_bundle_add_part(re, ids, n, &st) == 0);
    }
    CHECK(pft_bundle_prov_merge(re, o) == 0);
    return re;
}

/* ---------- round trips and canonical bytes ---------- */

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

/* ---------- hand-built payloads (independent of the encoder) ---------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} tbuf_t;

static int tbuf_write(void *data, const char *p, size_t n)
{
    tbuf_t *t = data;
    if (t->len + n > t->cap) {
        t->cap = 2 * (t->len + n);
        t->buf = pft_realloc(t->buf, t->cap);
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
    return 0;
}

/* One d = 2, fp32 statistics payload: provenance [["a", [[0, prov]]]], one part of `kind` with contributor
 * "a" and class [0, n, mean, cov] (tied: [0, n, mean], then shared = cov). Knobs for breaking rules. */
typedef struct {
    int kind;
    uint64_t n, prov;
    float mean[2], cov[3];
    int classes_nonempty; /* a GMM class entry in element 7 */
    int shared_bad;       /* full: a bin where nil belongs; tied: nil where the bin belongs */
    int n_payload;        /* 9; 8 (no parts) or 10 (a trailing nil) */
    int lr;               /* tied: shared = [lr_q, psi, u] (low rank) instead of the dense bin */
    uint64_t lr_q;        /* rank written (1 is the only valid one at d = 2) */
    int lr_n;             /* elements of the low-rank array (3) */
    int lr_psi_len;       /* numbers in psi (2) */
    float psi[2], u[2];   /* U Uᵀ + diag psi = cov by default */
    int dense_second;     /* a second part {b} (label 0, count 4) with a dense shared covariance */
} hand_t;

static hand_t hand_default(int kind)
{
    return (hand_t){.kind = kind,
                    .n = 4,
                    .prov = 4,
                    .mean = {1, -2},
                    .cov = {2, 0.5f, 1},
                    .n_payload = 9,
                    .lr_q = 1,
                    .lr_n = 3,
                    .lr_psi_len = 2,
                    .psi = {1, 0.75f},
                    .u = {1, 0.5f}};
}

static void pack_f32s(msgpack_packer *pk, const float *v, int n)
{
    msgpack_pack_bin(pk, 4 * (size_t)n);
    msgpack_pack_bin_body(pk, v, 4 * (size_t)n); /* little-endian hosts */
}

static int hand_decode(const hand_t *h, pft_bundle_t **out)
{
    tbuf_t t = {0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &t, tbuf_write);
    msgpack_pack_array(&pk, (size_t)h->n_payload);
    msgpack_pack_str_with_body(&pk, "r", 1);
    msgpack_pack_str_with_body(&pk, "a", 1);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_uint64(&pk, PFT_DTYPE_F32);
    msgpack_pack_uint64(&pk, 2);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_array(&pk, h->dense_second ? 2 : 1); /* provenance */
    for (int p = 0; p < (h->dense_second ? 2 : 1); p++) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_str_with_body(&pk, p ? "b" : "a", 1);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, p ? 4 : h->prov);
    }
    if (h->classes_nonempty) { /* a diag class, label 0 */
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 7);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, h->n);
        msgpack_pack_uint64(&pk, PFT_COV_DIAG);
        msgpack_pack_uint64(&pk, 1);
        double w = 1;
        msgpack_pack_bin(&pk, 8);
        msgpack_pack_bin_body(&pk, &w, 8);
        float var[2] = {1, 1};
        pack_f32s(&pk, h->mean, 2);
        pack_f32s(&pk, var, 2);
    } else {
        msgpack_pack_array(&pk, 0);
    }
    if (h->n_payload >= 9) {
        msgpack_pack_array(&pk, h->dense_second ? 2 : 1); /* parts */
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint64(&pk, (uint64_t)h->kind);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_str_with_body(&pk, "a", 1);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, h->kind == PFT_GSTAT_FULL ? 4 : 3);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, h->n);
        pack_f32s(&pk, h->mean, 2);
        if (h->kind == PFT_GSTAT_FULL) {
            pack_f32s(&pk, h->cov, 3);
            if (h->shared_bad)
                pack_f32s(&pk, h->cov, 3);
            else
                msgpack_pack_nil(&pk);
        } else if (h->shared_bad) {
            msgpack_pack_nil(&pk);
        } else if (h->lr) {
            msgpack_pack_array(&pk, (size_t)h->lr_n);
            msgpack_pack_uint64(&pk, h->lr_q);
            pack_f32s(&pk, h->psi, h->lr_psi_len);
            if (h->lr_n > 2)
                pack_f32s(&pk, h->u, 2);
        } else {
            pack_f32s(&pk, h->cov, 3);
        }
        if (h->dense_second) { /* part {b}: one class, dense shared covariance */
            msgpack_pack_array(&pk, 4);
            msgpack_pack_uint64(&pk, (uint64_t)h->kind);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_str_with_body(&pk, "b", 1);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_array(&pk, 3);
            msgpack_pack_uint64(&pk, 0);
            msgpack_pack_uint64(&pk, 4);
            pack_f32s(&pk, h->mean, 2);
            pack_f32s(&pk, h->cov, 3);
        }
    }
    if (h->n_payload == 10)
        msgpack_pack_nil(&pk);
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_envelope_pack(t.buf, t.len, NULL, 0, &msg, &len) == 0);
    pft_free(t.buf);
    *out = NULL;
    int rc = pft_bundle_decode(msg, len, NULL, out);
    pft_free(msg);
    return rc;
}

static void expect_hand(const hand_t *h, int code, const char *needle)
{
    pft_bundle_t *o = NULL;
    int rc = hand_decode(h, &o);
    CHECK_MSG(rc == code, "decode rc %d, expected %d (%s)", rc, code, rc ? pft_errmsg() : "");
    if (rc && needle)
        CHECK_MSG(strstr(pft_errmsg(), needle) != NULL, "message \"%s\" lacks \"%s\"", pft_errmsg(), needle);
    CHECK(rc != 0 || o != NULL);
    if (rc)
        CHECK(o == NULL);
    pft_bundle_destroy(&o);
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
    h.n_payload = 10;
    expect_hand(&h, PFT_EFORMAT, "top level");
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

/* Every tied part of o holds N·(U Uᵀ + diag psi) for the rank-q form of b's part (within tol of the largest
 * entry), the classes as b's. */
static void check_lowrank_parts(const pft_bundle_t *b, const pft_bundle_t *o, int q, double tol)
{
    CHECK(pft_bundle_n_parts(o) == pft_bundle_n_parts(b));
    for (int i = 0; i < pft_bundle_n_parts(b) && i < pft_bundle_n_parts(o); i++) {
        const pft_gstat_t *sb = pft_bundle_part_stats(b, i), *so = pft_bundle_part_stats(o, i);
        int d = pft_gstat_dim(sb);
        size_t dd = (size_t)d * d;
        double n = (double)pft_gstat_total(sb);
        CHECK(pft_gstat_total(so) == pft_gstat_total(sb) &&
              pft_gstat_n_classes(so) == pft_gstat_n_classes(sb));
        for (int c = 0; c < pft_gstat_n_classes(sb) && c < pft_gstat_n_classes(so); c++)
            CHECK(near_all(pft_gstat_mean(sb, c), pft_gstat_mean(so, c), (size_t)d, tol,
                           fmax(1.0, max_abs(pft_gstat_mean(sb, c), (size_t)d))));
        double *cv = pft_alloc_array(dd, sizeof *cv), *u = pft_alloc_array((size_t)d * q + 1, sizeof *u),
               *psi = pft_alloc_array((size_t)d, sizeof *psi);
        for (size_t j = 0; j < dd; j++)
            cv[j] = pft_gstat_tied_scatter(sb)[j] / n;
        CHECK(pft_gstat_lowrank_shared(cv, d, q, u, psi) == 0);
        pft_gstat_lowrank_expand(u, psi, d, q, cv);
        for (size_t j = 0; j < dd; j++)
            cv[j] *= n;
        const double *got = pft_gstat_tied_scatter(so);
        CHECK_MSG(near_all(got, cv, dd, tol, max_abs(cv, dd)), "part %d: low-rank scatter", i);
        for (int r = 0; r < d; r++) /* the diagonal is kept */
            CHECK(fabs(got[(size_t)r * d + r] - pft_gstat_tied_scatter(sb)[(size_t)r * d + r]) <=
                  tol * max_abs(cv, dd));
        pft_free(cv);
        pft_free(u);
        pft_free(psi);
    }
}

static void lowrank_round_trip(pft_dtype_t dt, int d, int q)
{
    pft_bundle_t *b = two_part_bundle(31 + (uint64_t)q, PFT_GSTAT_TIED, dt, d);
    CHECK(pft_bundle_shared_rank(b) == 0);
    CHECK(pft_bundle_set_shared_rank(b, q) == 0 && pft_bundle_shared_rank(b) == q);
    uint8_t *m1 = NULL, *m2 = NULL, *p1 = NULL, *p2 = NULL, *m3 = NULL, *m4 = NULL;
    size_t l1 = 0, l2 = 0, q1 = 0, q2 = 0, l3 = 0, l4 = 0;
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0);
    CHECK(pft_bundle_encode(b, &m2, &l2) == 0);
    CHECK(l1 == l2 && memcmp(m1, m2, l1) == 0);
    size_t es = dt == PFT_DTYPE_F32 ? 4 : 2, fb = pft_bundle_formula_bytes(b);
    CHECK(fb == es * (4 * (1 + (size_t)d) + 2 * ((size_t)d * q + d)));
    CHECK(l1 > fb && l1 < fb + 200);
    pft_bundle_t *o = NULL, *o2 = NULL, *re = NULL;
    CHECK(pft_bundle_decode(m1, l1, NULL, &o) == 0);
    if (!o) {
        fprintf(stderr, "  decode: %s\n", pft_errmsg());
        goto out;
    }
    CHECK(pft_bundle_shared_rank(o) == q);
    CHECK(pft_bundle_formula_bytes(o) == fb);
    check_lowrank_parts(b, o, q, dt == PFT_DTYPE_F32 ? 1e-5 : 3e-3);
    /* decode → encode gives the payload back; setting the same rank keeps it */
    CHECK(pft_bundle_set_shared_rank(o, q) == 0);
    CHECK(pft_bundle_encode_payload(b, &p1, &q1) == 0);
    CHECK(pft_bundle_encode_payload(o, &p2, &q2) == 0);
    CHECK(q1 == q2 && memcmp(p1, p2, q1) == 0);
    /* rebuilt through the API at the same rank: canonical (deterministic, decodes, same rank, same content up
     * to the rounding of a second factorisation) */
    re = rebuild(o);
    CHECK(pft_bundle_set_shared_rank(re, q) == 0);
    CHECK(pft_bundle_encode(re, &m3, &l3) == 0);
    CHECK(pft_bundle_encode(re, &m4, &l4) == 0);
    CHECK(l3 == l4 && l3 == l1 && memcmp(m3, m4, l3) == 0);
    CHECK(pft_bundle_decode(m3, l3, NULL, &o2) == 0);
    if (o2) {
        CHECK(pft_bundle_shared_rank(o2) == q);
        check_lowrank_parts(o, o2, q, dt == PFT_DTYPE_F32 ? 1e-5 : 3e-3);
    }
    /* back to dense: the kept payload is dropped, the dense encoding comes back */
    pft_free(m4);
    m4 = NULL;
    CHECK(pft_bundle_set_shared_rank(o, 0) == 0 && pft_bundle_shared_rank(o) == 0);
    CHECK(pft_bundle_encode(o, &m4, &l4) == 0);
    CHECK(l4 != l1 || memcmp(m4, m1, l1) != 0);
    printf("  tied %s d=%d q=%d: %zu bytes encoded, formula %zu (dense %zu)\n",
           dt == PFT_DTYPE_F32 ? "fp32" : "fp16", d, q, l1, fb, l4);
out:
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&o2);
    pft_bundle_destroy(&re);
    pft_bundle_destroy(&b);
    pft_free(m1);
    pft_free(m2);
    pft_free(m3);
    pft_free(m4);
    pft_free(p1);
    pft_free(p2);
}

/* Exact where rank(C) ≤ q: part {c} has 8 rows of 2 classes, so its W has rank ≤ 6. */
static void lowrank_exact(void)
{
    pft_bundle_t *b = two_part_bundle(41, PFT_GSTAT_TIED, PFT_DTYPE_F32, 9);
    CHECK(pft_bundle_set_shared_rank(b, 6) == 0);
    uint8_t *m = NULL;
    size_t l = 0;
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_decode(m, l, NULL, &o) == 0);
    if (o) {
        const double *w = pft_gstat_tied_scatter(pft_bundle_part_stats(b, 1)); /* part {c} */
        const double *g = pft_gstat_tied_scatter(pft_bundle_part_stats(o, 1));
        CHECK(strcmp(pft_bundle_part_contributor(o, 1, 0), "c") == 0);
        CHECK_MSG(near_all(g, w, 81, 1e-5, max_abs(w, 81)), "rank-6 scatter not reproduced at q = 6");
    }
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_free(m);
}

static void test_lowrank(void)
{
    lowrank_round_trip(PFT_DTYPE_F32, 8, 1);
    lowrank_round_trip(PFT_DTYPE_F32, 8, 3);
    lowrank_round_trip(PFT_DTYPE_F32, 8, 7);
    lowrank_round_trip(PFT_DTYPE_F16, 8, 3);
    lowrank_round_trip(PFT_DTYPE_F32, 2, 1);
    lowrank_exact();
    /* API: 0..d-1; a FULL bundle ignores it (dense per-class covariances) and decodes as rank 0 */
    pft_bundle_t *b = two_part_bundle(5, PFT_GSTAT_FULL, PFT_DTYPE_F32, 4);
    CHECK(pft_bundle_set_shared_rank(b, -1) == PFT_EINVAL);
    CHECK(pft_bundle_set_shared_rank(b, 4) == PFT_EINVAL);
    CHECK(pft_bundle_shared_rank(b) == 0);
    size_t dense = pft_bundle_formula_bytes(b);
    CHECK(pft_bundle_set_shared_rank(b, 3) == 0 && pft_bundle_formula_bytes(b) == dense);
    uint8_t *m = NULL;
    size_t l = 0;
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_decode(m, l, NULL, &o) == 0);
    CHECK(o && pft_bundle_shared_rank(o) == 0);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_free(m);
    pft_bundle_t *one = pft_bundle_new("r", "p", PFT_DTYPE_F32, 1);
    CHECK(pft_bundle_set_shared_rank(one, 1) == PFT_EINVAL && pft_bundle_set_shared_rank(one, 0) == 0);
    pft_bundle_destroy(&one);
}

/* Hand-built low-rank shared fields: W = N·(U Uᵀ + diag psi) exactly; each rule refused. */
static void test_lowrank_hand_built(void)
{
    hand_t h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    pft_bundle_t *o = NULL;
    CHECK(hand_decode(&h, &o) == 0);
    if (o) {
        const double *m = pft_gstat_tied_scatter(pft_bundle_part_stats(o, 0));
        CHECK(m[0] == 8 && m[1] == 2 && m[2] == 2 && m[3] == 4);
        CHECK(pft_bundle_shared_rank(o) == 1);
    }
    pft_bundle_destroy(&o);
    h.psi[1] = -0.5f;
    expect_hand(&h, PFT_ENUMERIC, "part 0 (contributors a): shared covariance: psi[1] = -0.5 is negative");
    h.psi[1] = -0.0f;
    expect_hand(&h, PFT_ENUMERIC, "psi[1] = -0 is negative");
    h.psi[1] = NAN;
    expect_hand(&h, PFT_ENUMERIC, "psi[1] = nan is not finite");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.u[1] = INFINITY;
    expect_hand(&h, PFT_ENUMERIC, "factor[1][0] = inf is not finite");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_q = 0;
    expect_hand(&h, PFT_EFORMAT, "shared covariance: rank = 0 outside 1..1");
    h.lr_q = 2; /* q ≥ d: the dense form is the smaller one */
    expect_hand(&h, PFT_EFORMAT, "shared covariance: rank = 2 outside 1..1");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_psi_len = 1;
    expect_hand(&h, PFT_EFORMAT, "shared covariance: psi: 4 bytes, expected 8");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_n = 2;
    expect_hand(&h, PFT_EFORMAT, "shared covariance (low rank): 2 elements");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.dense_second = 1; /* one form per bundle */
    expect_hand(&h, PFT_EFORMAT, "part 1 (contributors b): shared covariance of rank 0, part 0's has 1");
    h.lr = 0; /* both dense: fine */
    expect_hand(&h, 0, NULL);
    h = hand_default(PFT_GSTAT_FULL);
    h.lr = 1; /* full parts: shared stays nil */
    h.shared_bad = 0;
    expect_hand(&h, 0, NULL);
}

/* Truncations, bit flips and allocation failures of a low-rank bundle (d = 2, q = 1). */
static void test_lowrank_hostile(void)
{
    pft_bundle_t *b = two_part_bundle(23, PFT_GSTAT_TIED, PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_set_shared_rank(b, 1) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    int failures = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = pft_alloc(n);
        memcpy(copy, buf, n);
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(copy, n, NULL, &o) == 0 || o != NULL)
            failures++;
        pft_free(copy);
        pft_bundle_destroy(&o);
    }
    CHECK_MSG(failures == 0, "%d prefixes decoded", failures);
    int accepted, rejected, bad;
    pft_test_bit_flips(buf, len, &accepted, &rejected, &bad);
    CHECK(bad == 0 && rejected > 0);
    printf("  tied rank 1: %zu prefixes rejected; %zu bit flips: %d rejected, %d decoded to valid bundles\n",
           len, len * 8, rejected, accepted);
    int dec_at = -1, enc_at = -1;
    for (long n = 0; n < 400 && dec_at < 0; n++) {
        pft_alloc_fail_after(n);
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(buf, len, NULL, &o);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc < 0 && o == NULL));
        if (rc == 0)
            dec_at = (int)n;
        pft_bundle_destroy(&o);
    }
    for (long n = 0; n < 400 && enc_at < 0; n++) {
        uint8_t *m = NULL;
        size_t l = 0;
        pft_alloc_fail_after(n);
        int rc = pft_bundle_encode(b, &m, &l);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc == PFT_ENOMEM && m == NULL));
        if (rc == 0) {
            enc_at = (int)n;
            CHECK(l == len && memcmp(m, buf, len) == 0);
        }
        pft_free(m);
    }
    CHECK(dec_at > 0 && enc_at > 0);
    pft_free(buf);
    pft_bundle_destroy(&b);
}

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
    RUN(test_lowrank);
    RUN(test_lowrank_hand_built);
    RUN(test_lowrank_hostile);
    return pft_test_done();
}
