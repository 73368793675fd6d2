/* Tests of the shrinkage evidence carried per contributor in a bundle's provenance: round
 * trip to the bit, with and without a DP guarantee beside it, the bytes it costs, survival of merges and the
 * conflict of two different tallies for one node, refusal of bad values through the API and in the bytes;
 * the shared α grid (payload element 10, with a fingerprint): the α once, each tally 8 bytes shorter, and the
 * payloads that break its rules, rebuilt with msgpack-c, refused. */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_test.h"

#include <math.h>
#include <msgpack.h>

static pft_bundle_t *small_bundle(const char *producer)
{
    pft_bundle_t *b = pft_bundle_new("run", producer, PFT_DTYPE_F32, 2);
    pft_gmm_t *g = pft_gmm_new(1, 2, PFT_COV_DIAG);
    double w[1] = {1}, mu[2] = {0.5, -0.5}, var[2] = {0.1, 0.2};
    CHECK(pft_gmm_set_params(g, w, mu, var) == 0);
    CHECK(pft_bundle_add_class(b, 0, 30, &g) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 0, 10) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 0, 20) == 0);
    return b;
}

static const pft_bundle_tally_t k_t[3] = {
    {.alpha = 0.0, .correct = 0, .total = 0, .loss = 0},
    {.alpha = 0.1, .correct = 7, .total = 10, .loss = 4.25},
    {.alpha = 0.5, .correct = 9, .total = 10, .loss = 2.5},
};

static void test_round_trip(void)
{
    pft_bundle_t *b = small_bundle("b"), *d = NULL;
    uint8_t *plain = NULL, *buf = NULL, *buf2 = NULL;
    size_t pl = 0, len = 0, len2 = 0;
    CHECK(pft_bundle_encode(b, &plain, &pl) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "b", 30, k_t, 3) == 0);
    CHECK(pft_bundle_prov_set_dp(b, "a", 1.0, 1e-5) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "a", 10, k_t + 1, 2) == 0);
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    /* b: nil + bin(8 + 96) (1 + 2 + 104 bytes, the entry's header unchanged); a: dp bin(16) (18) and
     * bin(8 + 64) (2 + 72); and the payload's own bin header grows by one byte past 255 bytes */
    CHECK_MSG(len == pl + 1 + 2 + 104 + 18 + 2 + 72 + 1, "%zu bytes with evidence, %zu without", len, pl);
    CHECK(pft_bundle_decode(buf, len, NULL, &d) == 0);
    int m = 0;
    uint64_t against = 0;
    const pft_bundle_tally_t *t = d ? pft_bundle_prov_evidence(d, 1, &m, &against) : NULL; /* "b" */
    CHECK(t && m == 3 && against == 30 && memcmp(t, k_t, sizeof k_t) == 0);
    t = d ? pft_bundle_prov_evidence(d, 0, &m, &against) : NULL; /* "a": beside its DP guarantee */
    double eps = 0, delta = 0;
    CHECK(t && m == 2 && against == 10 && t[1].correct == 9 && pft_bundle_prov_dp(d, 0, &eps, &delta) &&
          eps == 1.0);
    CHECK(d && pft_bundle_encode(d, &buf2, &len2) == 0 && len2 == len && memcmp(buf, buf2, len) == 0);
    pft_free(plain);
    pft_free(buf);
    pft_free(buf2);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&d);
}

/* The encoded bundle with "b"'s evidence, and the offset of its bin's body. */
static uint8_t *encoded(size_t *len, size_t *at)
{
    pft_bundle_t *b = small_bundle("b");
    CHECK(pft_bundle_prov_set_evidence(b, "b", 30, k_t, 3) == 0);
    uint8_t *buf = NULL;
    CHECK(pft_bundle_encode(b, &buf, len) == 0);
    pft_bundle_destroy(&b);
    *at = 0;
    for (size_t i = 0; buf && i + 2 + 104 <= *len; i++)
        if (buf[i] == 0xc4 && buf[i + 1] == 104)
            *at = i + 2;
    CHECK(*at > 0);
    return buf;
}

static void expect_refused(uint8_t *buf, size_t len, const char *what)
{
    pft_bundle_t *bad = NULL;
    int rc = pft_bundle_decode(buf, len, NULL, &bad);
    CHECK_MSG(rc == PFT_EFORMAT && bad == NULL && strstr(pft_errmsg(), "evidence"), "%s: rc %d (%s)", what,
              rc, pft_errmsg());
    pft_bundle_destroy(&bad);
}

static void test_bytes_refused(void)
{
    size_t len, at;
    struct {
        size_t off; /* from the body's start */
        double v;
        const char *what;
    } f64[] = {{8 + 32 * 1, 1.5, "alpha above 1"},
               {8 + 32 * 2, 0.05, "alpha not ascending"},
               {8 + 32 * 1 + 24, -1, "negative loss"},
               {8 + 32 * 2 + 24, NAN, "NaN loss"}};
    for (size_t k = 0; k < sizeof f64 / sizeof f64[0]; k++) {
        uint8_t *buf = encoded(&len, &at);
        memcpy(buf + at + f64[k].off, &f64[k].v, 8); /* little-endian host */
        expect_refused(buf, len, f64[k].what);
        pft_free(buf);
    }
    struct {
        size_t off;
        uint64_t v;
        const char *what;
    } u64[] = {{0, 0, "against 0 rows"},
               {8 + 32 * 1 + 8, 11, "more right than scored"},
               {8 + 32 * 2 + 16, (1ULL << 48) + 1, "scored above 2^48"}};
    for (size_t k = 0; k < sizeof u64 / sizeof u64[0]; k++) {
        uint8_t *buf = encoded(&len, &at);
        memcpy(buf + at + u64[k].off, &u64[k].v, 8);
        expect_refused(buf, len, u64[k].what);
        pft_free(buf);
    }
    uint8_t *buf = encoded(&len, &at);
    buf[at - 1] = 103; /* a length that is not 8 + 32 m: the rest no longer parses as the bundle either */
    pft_bundle_t *bad = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &bad) != 0 && bad == NULL);
    pft_free(buf);
}

static void test_merge_and_api(void)
{
    pft_bundle_t *x = small_bundle("x"), *y = small_bundle("y"), *z = small_bundle("z");
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, 3) == 0);
    CHECK(pft_bundle_prov_merge(z, x) == 0); /* the evidence travels */
    int m = 0;
    uint64_t against = 0;
    CHECK(pft_bundle_prov_evidence(z, 0, &m, &against) && m == 3 && against == 10);
    CHECK(pft_bundle_prov_merge(z, x) == 0); /* the same evidence again (a diamond) */
    CHECK(pft_bundle_prov_set_evidence(y, "a", 11, k_t, 3) == 0);
    CHECK(pft_bundle_prov_merge(z, y) == PFT_EINVAL); /* other evidence for the same node */
    CHECK(pft_bundle_prov_evidence(z, 0, &m, &against) && against == 10);
    pft_bundle_tally_t t[3];
    memcpy(t, k_t, sizeof t);
    CHECK(pft_bundle_prov_set_evidence(x, "nobody", 10, k_t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 0, k_t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, 0) == PFT_EINVAL);
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, k_t, PFT_BUNDLE_MAX_TALLIES + 1) == PFT_EINVAL);
    t[1].correct = 11;
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, t, 3) == PFT_EINVAL);
    t[1].correct = 7;
    t[2].alpha = 0.1;
    CHECK(pft_bundle_prov_set_evidence(x, "a", 10, t, 3) == PFT_EINVAL);
    CHECK(pft_bundle_prov_evidence(x, 1, &m, &against) == NULL && m == 0 && against == 0); /* "b": none */
    pft_bundle_destroy(&x);
    pft_bundle_destroy(&y);
    pft_bundle_destroy(&z);
}

/* ---------- the shared α grid ---------- */

static const pft_bundle_tally_t k_u[3] = {
    {.alpha = 0.0, .correct = 1, .total = 20, .loss = 9.5},
    {.alpha = 0.1, .correct = 15, .total = 20, .loss = 6.0},
    {.alpha = 0.5, .correct = 17, .total = 20, .loss = 3.75},
};

/* small_bundle with a fingerprint of one item, and evidence for "a" (k_u's, or its α at index 1 moved to
 * other) and "b" (k_t's). */
static pft_bundle_t *fp_bundle(double other)
{
    pft_bundle_t *b = small_bundle("b");
    uint8_t fp[PFT_BUNDLE_FP_LEN] = {1, 2, 3};
    pft_bundle_fp_item_t item = {.name = "k", .digest = {7}};
    CHECK(pft_bundle_set_fingerprint(b, fp, &item, 1) == 0);
    pft_bundle_tally_t u[3];
    memcpy(u, k_u, sizeof u);
    if (other > 0)
        u[1].alpha = other;
    CHECK(pft_bundle_prov_set_evidence(b, "a", 30, u, 3) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "b", 30, k_t, 3) == 0);
    return b;
}

/* The payload's top-level element count and the size of its bin element 10 (0: none). */
static void payload_shape(const uint8_t *buf, size_t len, uint32_t *n, size_t *grid_len)
{
    pft_envelope_t env;
    CHECK(pft_envelope_parse(buf, len, NULL, &env) == 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, (const char *)env.payload, env.payload_len, NULL) ==
          MSGPACK_UNPACK_SUCCESS);
    *n = u.data.type == MSGPACK_OBJECT_ARRAY ? u.data.via.array.size : 0;
    *grid_len = *n == 11 && u.data.via.array.ptr[10].type == MSGPACK_OBJECT_BIN
                    ? u.data.via.array.ptr[10].via.bin.size
                    : 0;
    msgpack_unpacked_destroy(&u);
}

static void test_grid_round_trip(void)
{
    pft_bundle_t *same = fp_bundle(0), *differ = fp_bundle(0.2), *d = NULL;
    uint8_t *a = NULL, *b = NULL, *a2 = NULL;
    size_t la = 0, lb = 0, la2 = 0, grid_len = 0;
    uint32_t n = 0;
    CHECK(pft_bundle_encode(same, &a, &la) == 0 && pft_bundle_encode(differ, &b, &lb) == 0);
    payload_shape(a, la, &n, &grid_len);
    CHECK_MSG(n == 11 && grid_len == 24, "shared α: %u elements, grid of %zu bytes", n, grid_len);
    payload_shape(b, lb, &n, &grid_len);
    CHECK_MSG(n == 10 && grid_len == 0, "different α: %u elements", n);
    /* two tallies' α (2 × 3 × 8 bytes) against the grid's bin(24) (2 + 24 bytes); the bins of 80 bytes and
     * their one-byte shorter header stay bin 8 */
    CHECK_MSG(lb - la == 48 - 26, "%zu bytes with the grid, %zu without", la, lb);
    CHECK(pft_bundle_decode(a, la, NULL, &d) == 0);
    int m = 0;
    uint64_t against = 0;
    const pft_bundle_tally_t *t = d ? pft_bundle_prov_evidence(d, 0, &m, &against) : NULL; /* "a" */
    CHECK(t && m == 3 && against == 30 && memcmp(t, k_u, sizeof k_u) == 0);
    t = d ? pft_bundle_prov_evidence(d, 1, &m, &against) : NULL; /* "b" */
    CHECK(t && m == 3 && memcmp(t, k_t, sizeof k_t) == 0);
    /* encoded again through the API (the kept payload dropped by a change to the same value): same bytes */
    CHECK(d && pft_bundle_prov_set_evidence(d, "b", 30, k_t, 3) == 0);
    CHECK(d && pft_bundle_encode(d, &a2, &la2) == 0 && la2 == la && memcmp(a, a2, la) == 0);
    pft_bundle_destroy(&d);
    CHECK(pft_bundle_decode(b, lb, NULL, &d) == 0); /* each its own α */
    t = d ? pft_bundle_prov_evidence(d, 0, &m, &against) : NULL;
    CHECK(t && m == 3 && t[1].alpha == 0.2 && t[2].correct == 17);
    pft_free(a);
    pft_free(a2);
    pft_free(b);
    pft_bundle_destroy(&same);
    pft_bundle_destroy(&differ);
    pft_bundle_destroy(&d);
}

typedef void (*edit_fn)(msgpack_object *top, void *ctx);

/* bundle's payload unpacked, edited by fn (the msgpack object tree; new bins may point at ctx's bytes),
 * packed again in an envelope without signature, and decoded: refused with PFT_EFORMAT and want in the
 * message. */
static void expect_edit_refused(const pft_bundle_t *bundle, edit_fn fn, void *ctx, const char *want)
{
    uint8_t *buf = NULL, *env_buf = NULL;
    size_t len = 0, env_len = 0;
    CHECK(pft_bundle_encode(bundle, &buf, &len) == 0);
    pft_envelope_t env;
    CHECK(buf && pft_envelope_parse(buf, len, NULL, &env) == 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, (const char *)env.payload, env.payload_len, NULL) ==
          MSGPACK_UNPACK_SUCCESS);
    fn(&u.data, ctx);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(msgpack_pack_object(&pk, u.data) == 0);
    CHECK(pft_envelope_pack((const uint8_t *)sb.data, sb.size, NULL, 0, &env_buf, &env_len) == 0);
    pft_bundle_t *bad = NULL;
    int rc = pft_bundle_decode(env_buf, env_len, NULL, &bad);
    CHECK_MSG(rc == PFT_EFORMAT && bad == NULL && strstr(pft_errmsg(), want), "want '%s': rc %d (%s)", want,
              rc, pft_errmsg());
    pft_bundle_destroy(&bad);
    msgpack_sbuffer_destroy(&sb);
    msgpack_unpacked_destroy(&u);
    pft_free(env_buf);
    pft_free(buf);
}

static void set_grid(msgpack_object *top, void *ctx) /* element 10's bytes replaced by ctx's 24 */
{
    top->via.array.ptr[10].via.bin.ptr = (const char *)ctx;
}

static void grid_short(msgpack_object *top, void *ctx) /* a grid of 2 for tallies of 3 */
{
    (void)ctx;
    top->via.array.ptr[10].via.bin.size = 16;
}

static void drop_grid(msgpack_object *top, void *ctx) /* the evidence of 24-byte tallies without its grid */
{
    (void)ctx;
    top->via.array.size = 10;
}

static void drop_evidence(msgpack_object *top, void *ctx) /* a grid, and no entry with evidence */
{
    (void)ctx;
    msgpack_object *prov = &top->via.array.ptr[6];
    for (uint32_t i = 0; i < prov->via.array.size; i++)
        prov->via.array.ptr[i].via.array.size = 2;
}

static void drop_one_evidence(msgpack_object *top, void *ctx) /* a grid for one entry's evidence */
{
    (void)ctx;
    top->via.array.ptr[6].via.array.ptr[0].via.array.size = 2;
}

static void add_grid(msgpack_object *top, void *ctx) /* full-form evidence that shares its α, and a grid */
{
    static msgpack_object items[11];
    memcpy(items, top->via.array.ptr, 10 * sizeof *items);
    items[10] =
        (msgpack_object){.type = MSGPACK_OBJECT_BIN, .via.bin = {.size = 24, .ptr = (const char *)ctx}};
    top->via.array.ptr = items;
    top->via.array.size = 11;
}

static void same_alpha(msgpack_object *top, void *ctx) /* entry a's α[1] (0.2) set to b's (0.1) */
{
    msgpack_object *ev = &top->via.array.ptr[6].via.array.ptr[0].via.array.ptr[3];
    uint8_t *copy = ctx;
    double v = 0.1;
    memcpy(copy, ev->via.bin.ptr, ev->via.bin.size);
    memcpy(copy + 8 + 32, &v, 8); /* little-endian host */
    ev->via.bin.ptr = (const char *)copy;
}

static void test_grid_refused(void)
{
    pft_bundle_t *same = fp_bundle(0), *differ = fp_bundle(0.2), *plain = small_bundle("b");
    double g[3] = {0, 0.1, 0.5};
    g[1] = 1.5;
    expect_edit_refused(same, set_grid, g, "evidence grid: alpha 1 = 1.5");
    g[1] = 0.6;
    expect_edit_refused(same, set_grid, g, "evidence grid: alpha 2 = 0.5");
    g[1] = NAN;
    expect_edit_refused(same, set_grid, g, "evidence grid: alpha 1");
    expect_edit_refused(same, grid_short, NULL, "expected bin of 8 + 24 x 2 bytes");
    expect_edit_refused(same, drop_grid, NULL, "expected bin of 8 + 32 x 1..64 bytes");
    expect_edit_refused(same, drop_evidence, NULL, "an evidence grid (payload element 10) for 0 evidence");
    expect_edit_refused(same, drop_one_evidence, NULL,
                        "an evidence grid (payload element 10) for 1 evidence");
    /* a grid beside tallies that carry their own α */
    g[1] = 0.1;
    expect_edit_refused(differ, add_grid, g, "expected bin of 8 + 24 x 3 bytes");
    /* non-canonical: every entry repeats the same α, where the encoder writes them once */
    uint8_t copy[8 + 32 * 3];
    expect_edit_refused(differ, same_alpha, copy, "every evidence has the same alphas");
    /* one entry's evidence: the grid would cost 2 bytes, so each tally keeps its α (10 elements) */
    uint8_t fp[PFT_BUNDLE_FP_LEN] = {1}, *buf = NULL;
    size_t len = 0, grid_len = 0;
    uint32_t n = 0;
    pft_bundle_fp_item_t item = {.name = "k", .digest = {7}};
    CHECK(pft_bundle_prov_set_evidence(plain, "b", 30, k_t, 3) == 0);
    CHECK(pft_bundle_set_fingerprint(plain, fp, &item, 1) == 0);
    CHECK(pft_bundle_encode(plain, &buf, &len) == 0);
    payload_shape(buf, len, &n, &grid_len);
    CHECK_MSG(n == 10, "one evidence: %u elements", n);
    pft_free(buf);
    pft_bundle_destroy(&same);
    pft_bundle_destroy(&differ);
    pft_bundle_destroy(&plain);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_bytes_refused);
    RUN(test_merge_and_api);
    RUN(test_grid_round_trip);
    RUN(test_grid_refused);
    return pft_test_done();
}
