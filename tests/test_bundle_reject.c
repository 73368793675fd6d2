/* Tests of pft_bundle_decode on hostile bytes: every prefix, every bit flip and random edits of a valid
 * message; hand-built payloads breaking one rule of docs/WIRE.md at a time; raw envelope attacks; allocation
 * failures. */
#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_half.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_bundle.h"

/* ---------- hostile bytes ---------- */

/* A small mixed bundle (diag, full, spher, lowrank classes) for exhaustive mutation. */
static void small_message(uint8_t **buf, size_t *len)
{
    pft_rng_t *r = pft_rng_new(5);
    pft_bundle_t *b = pft_bundle_new("r", "p", PFT_DTYPE_F16, 3);
    pft_cov_t covs[4] = {PFT_COV_DIAG, PFT_COV_FULL, PFT_COV_SPHER, PFT_COV_LOWRANK};
    for (int c = 0; c < 4; c++) {
        pft_gmm_t *g = make_gmm(r, 2, 3, covs[c], 0);
        CHECK(pft_bundle_add_class(b, c, 4, &g) == 0);
        CHECK(pft_bundle_prov_add(b, "p", c, 4) == 0);
    }
    CHECK(pft_bundle_encode(b, buf, len) == 0);
    pft_bundle_destroy(&b);
    pft_rng_destroy(&r);
}

static void test_truncation(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
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
    printf("  %zu prefixes of a %zu-byte bundle all rejected\n", len, len);
    pft_free(buf);
}

static void test_bit_flips(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    int accepted, rejected, bad;
    pft_test_bit_flips(buf, len, &accepted, &rejected, &bad);
    CHECK(bad == 0);
    CHECK(rejected > 0);
    printf("  %zu single-bit flips: %d rejected, %d decoded to valid bundles\n", len * 8, rejected, accepted);
    pft_free(buf);
}

/* Random garbage and random edits of a valid message. */
static void test_random_mutations(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    pft_rng_t *r = pft_rng_new(99);
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        size_t n = t % 2 ? len : (size_t)pft_rng_below(r, 2 * len);
        uint8_t *m = pft_alloc(n);
        if (t % 2) {
            memcpy(m, buf, len);
            int edits = 1 + (int)pft_rng_below(r, 4);
            for (int e = 0; e < edits; e++)
                m[pft_rng_below(r, len)] = (uint8_t)pft_rng_u64(r);
        } else {
            for (size_t i = 0; i < n; i++)
                m[i] = (uint8_t)pft_rng_u64(r);
            if (n > 2) { /* often a plausible start: fixarray(4) "PFTB" */
                m[0] = 0x94;
                m[1] = 0xa4;
            }
        }
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(m, n, NULL, &o) == 0 && !pft_test_usable(o))
            bad++;
        pft_bundle_destroy(&o);
        pft_free(m);
    }
    CHECK(bad == 0);
    pft_rng_destroy(&r);
    pft_free(buf);
}

/* ---------- hand-built payloads, following docs/WIRE.md (independent of the encoder) ---------- */

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

/* One class of the hand-built bundle; the fields can be broken one at a time. */
typedef struct {
    int d;      /* dimension written in the header */
    int d_data; /* dimension the arrays are built for */
    int dtype;  /* 0 f16, 1 f32 */
    int cov;    /* 0 full, 1 diag, 2 spher */
    int k;
    int n_classes;
    double w[4];   /* weights of every class */
    int bad_class; /* class whose values are broken below */
    int bad_comp;
    int set_mean; /* replace mean[bad_comp][1] of bad_class by mean_val */
    double mean_val;
    int set_var; /* replace variance / Cholesky diagonal [bad_comp][2] of bad_class by var_val */
    double var_val;
    int d_as_str;        /* write d as a string */
    int extra_field;     /* 9 payload fields */
    uint64_t n_override; /* if not 0: class count */
    int q;               /* cov 3 (lowrank): rank written */
    int q_data;          /* cov 3: rank the loadings are built for */
    int set_factor;      /* cov 3: replace factor[bad_comp][1][0] of bad_class by factor_val */
    double factor_val;
    int class_fields; /* if not 0: fields written per class (the schema wants 7, or 9 for lowrank) */
} spec_t;

static spec_t good_spec(void)
{
    spec_t s = {.d = 3,
                .d_data = 3,
                .dtype = 1,
                .cov = 1,
                .k = 2,
                .n_classes = 4,
                .w = {0.25, 0.75},
                .bad_class = 3,
                .bad_comp = 1,
                .q = 1,
                .q_data = 1};
    return s;
}

static void put_num(uint8_t *dst, size_t i, double v, int dtype)
{
    if (dtype == 0) {
        uint16_t h = pft_half_from_float((float)v);
        dst[2 * i] = (uint8_t)h;
        dst[2 * i + 1] = (uint8_t)(h >> 8);
    } else {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int b = 0; b < 4; b++)
            dst[4 * i + b] = (uint8_t)(u >> (8 * b));
    }
}

static void build_payload(const spec_t *s, tbuf_t *t)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, t, tbuf_write);
    msgpack_pack_array(&pk, s->extra_field ? 9 : 8);
    msgpack_pack_str_with_body(&pk, "run", 3);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_uint64(&pk, (uint64_t)s->dtype);
    if (s->d_as_str)
        msgpack_pack_str_with_body(&pk, "3", 1);
    else
        msgpack_pack_uint64(&pk, (uint64_t)s->d);
    msgpack_pack_array(&pk, 0); /* parents */
    msgpack_pack_array(&pk, 1); /* provenance: node "p" has everything */
    msgpack_pack_array(&pk, 2);
    msgpack_pack_str_with_body(&pk, "p", 1);
    msgpack_pack_array(&pk, (size_t)s->n_classes);
    for (int c = 0; c < s->n_classes; c++) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, (uint64_t)c);
        msgpack_pack_uint64(&pk, 10);
    }
    msgpack_pack_array(&pk, (size_t)s->n_classes);
    size_t d = (size_t)s->d_data, k = (size_t)s->k, es = s->dtype ? 4 : 2;
    size_t m = s->cov == 0 ? d * (d + 1) / 2 : s->cov == 2 ? 1 : d;
    uint8_t *tmp = pft_calloc(k * d * d + 8, 8);
    for (int c = 0; c < s->n_classes; c++) {
        int bad = c == s->bad_class;
        int fields = s->class_fields ? s->class_fields : s->cov == 3 ? 9 : 7;
        msgpack_pack_array(&pk, (size_t)fields);
        msgpack_pack_uint64(&pk, (uint64_t)c);
        msgpack_pack_uint64(&pk, s->n_override && bad ? s->n_override : 10);
        msgpack_pack_uint64(&pk, (uint64_t)s->cov);
        msgpack_pack_uint64(&pk, k);
        for (size_t j = 0; j < k; j++) {
            uint64_t u;
            memcpy(&u, &s->w[j], 8);
            for (int b = 0; b < 8; b++)
                tmp[8 * j + (size_t)b] = (uint8_t)(u >> (8 * b));
        }
        msgpack_pack_bin_with_body(&pk, tmp, 8 * k);
        for (size_t i = 0; i < k * d; i++)
            put_num(tmp, i, bad && s->set_mean && i == (size_t)s->bad_comp * d + 1 ? s->mean_val : 0.5,
                    s->dtype);
        msgpack_pack_bin_with_body(&pk, tmp, k * d * es);
        size_t o = 0;
        for (size_t j = 0; j < k; j++) {
            if (s->cov == 0) {
                for (size_t r = 0; r < d; r++)
                    for (size_t q = 0; q <= r; q++, o++) {
                        double v = r == q ? 1.0 : 0.1;
                        if (bad && s->set_var && j == (size_t)s->bad_comp && r == 2 && q == 2)
                            v = s->var_val;
                        put_num(tmp, o, v, s->dtype);
                    }
            } else {
                for (size_t i = 0; i < m; i++, o++) {
                    double v = 1.0;
                    if (bad && s->set_var && j == (size_t)s->bad_comp && i == (s->cov == 2 ? 0u : 2u))
                        v = s->var_val;
                    put_num(tmp, o, v, s->dtype);
                }
            }
        }
        msgpack_pack_bin_with_body(&pk, tmp, k * m * es);
        if (fields >= 9) { /* rank, then loadings K×d×q */
            size_t q = (size_t)s->q_data;
            msgpack_pack_uint64(&pk, (uint64_t)s->q);
            for (size_t i = 0; i < k * d * q; i++) {
                double v = 0.25 * (double)(i % 5) - 0.5;
                if (bad && s->set_factor && i == (size_t)s->bad_comp * d * q + q)
                    v = s->factor_val;
                put_num(tmp, i, v, s->dtype);
            }
            msgpack_pack_bin_with_body(&pk, tmp, k * d * q * es);
        }
        for (int f = fields >= 9 ? 9 : 7; f < fields; f++) /* padding of a wrong field count */
            msgpack_pack_nil(&pk);
    }
    if (s->extra_field)
        msgpack_pack_nil(&pk);
    pft_free(tmp);
}

/* Decodes the envelope around the payload of spec; returns rc, message in pft_errmsg(). */
static int decode_spec(const spec_t *s, const pft_bundle_limits_t *lim)
{
    tbuf_t t = {0};
    build_payload(s, &t);
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_envelope_pack(t.buf, t.len, NULL, 0, &msg, &len) == 0);
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(msg, len, lim, &o);
    CHECK(rc == 0 || o == NULL);
    pft_bundle_destroy(&o);
    pft_free(msg);
    pft_free(t.buf);
    return rc;
}

#define EXPECT_REJECT(spec, lim, code, text)                                                                 \
    do {                                                                                                     \
        int rc_ = decode_spec(&(spec), (lim));                                                               \
        CHECK_MSG(rc_ == (code), "rc %s, expected %s (%s)", pft_errname(rc_), pft_errname(code),             \
                  pft_errmsg());                                                                             \
        CHECK_MSG(strstr(pft_errmsg(), (text)) != NULL, "message '%s' lacks '%s'", pft_errmsg(), (text));    \
    } while (0)

/* The hand-built payload decodes (every family, both dtypes); values that break a rule: PFT_ENUMERIC. */
static void test_schema_values(void)
{
    spec_t s = good_spec();
    CHECK_MSG(decode_spec(&s, NULL) == 0, "the hand-built payload must decode: %s", pft_errmsg());
    for (int cov = 0; cov < 4; cov++)
        for (int dt = 0; dt < 2; dt++) {
            s = good_spec();
            s.cov = cov;
            s.dtype = dt;
            CHECK_MSG(decode_spec(&s, NULL) == 0, "cov %d dtype %d: %s", cov, dt, pft_errmsg());
        }

    s = good_spec();
    s.set_mean = 1;
    s.mean_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: mean[1] = nan is not finite");
    s = good_spec();
    s.set_mean = 1;
    s.mean_val = INFINITY;
    s.dtype = 0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "mean[1] = inf is not finite");
    s = good_spec();
    s.set_var = 1;
    s.var_val = -0.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -0 is not positive");
    s.var_val = -2.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -2 is not positive");
    s = good_spec();
    s.cov = 2;
    s.set_var = 1;
    s.var_val = -1e-3;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "component 1: variance[0] = -0.001 is not positive");
    s = good_spec();
    s.dtype = 0;
    s.set_var = 1;
    s.var_val = 1e-10; /* rounds to +0 in fp16 */
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "variance[2] = 0 is not positive");
    s = good_spec();
    s.cov = 0;
    s.set_var = 1;
    s.var_val = -0.5;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "component 1: cholesky[2][2] = -0.5 is not positive");
    s = good_spec();
    s.cov = 0;
    s.set_var = 1;
    s.var_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "cholesky[2][2] = nan is not finite");
    s = good_spec();
    s.w[0] = 0.3;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 0 (label 0): weights sum to 1.05");
    s = good_spec();
    s.w[0] = -0.25;
    s.w[1] = 1.25;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "weight[0] = -0.25 is negative");
    s = good_spec();
    s.w[0] = 0.25 + 1e-9; /* within tolerance: accepted and renormalised */
    CHECK(decode_spec(&s, NULL) == 0);
}

/* Structure (PFT_EFORMAT) and limits (PFT_ERANGE). */
static void test_schema_structure(void)
{
    spec_t s = good_spec();
    s.d = 4; /* header says 4, arrays built for 3 */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): means: 24 bytes, expected 32");
    s = good_spec();
    s.d_as_str = 1;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "d: expected non-negative integer, got str");
    s = good_spec();
    s.extra_field = 1;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "top level: 9 elements, expected 8..8");
    s = good_spec();
    s.n_override = 11;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 3 (label 3): n = 11 but provenance counts sum to 10");
    s = good_spec();
    s.k = 3;
    s.w[0] = 0.25, s.w[1] = 0.25, s.w[2] = 0.5;
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    lim.max_k = 2;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "K = 3 outside 1..2");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_classes = 3;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "counts: 4 elements, expected 1..3");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_d = 2;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "d = 3 outside 1..2");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_model_bytes = 200;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "decoded models would exceed");
    s = good_spec();
    pft_bundle_limits_default(&lim);
    lim.max_bytes = 100;
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "exceeds the limit of 100");
}

/* The low-rank family (cov 3): [..., Ψ, q, W], its field count, rank, loadings and memory estimate. */
static void test_schema_lowrank(void)
{
    spec_t s = good_spec();
    pft_bundle_limits_t lim;
    s.cov = 3;
    s.q = s.q_data = 2;
    CHECK_MSG(decode_spec(&s, NULL) == 0, "lowrank rank 2: %s", pft_errmsg());
    s.q = s.q_data = 0; /* rank 0: no loadings, a diagonal model */
    CHECK_MSG(decode_spec(&s, NULL) == 0, "lowrank rank 0: %s", pft_errmsg());
    s = good_spec();
    s.cov = 3;
    s.class_fields = 7;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT,
                  "class 0 (label 0): entry: 7 elements, expected 9 for covariance type 3");
    s = good_spec();
    s.class_fields = 9; /* a diag class with 9 fields */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 9 elements, expected 7 for covariance type 1");
    s = good_spec();
    s.class_fields = 8;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 8 elements, expected 7 for covariance type 1");
    s = good_spec();
    s.class_fields = 10;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "entry: 10 elements, expected 7..9");
    s = good_spec();
    s.cov = 4;
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "covariance type = 4 outside 0..3");
    s = good_spec();
    s.cov = 3;
    s.q = s.q_data = 3; /* q = d */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): rank = 3 outside 0..2");
    s = good_spec();
    s.cov = 3;
    s.q = 2; /* loadings built for rank 1 */
    EXPECT_REJECT(s, NULL, PFT_EFORMAT, "class 0 (label 0): factors: 24 bytes, expected 48");
    s = good_spec();
    s.cov = 3;
    s.q = s.q_data = 2;
    s.set_factor = 1;
    s.factor_val = NAN;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: factor[1][0] = nan is not finite");
    s.dtype = 0;
    s.factor_val = 1e6; /* fp16 overflows to inf */
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "factor[1][0] = inf is not finite");
    s = good_spec();
    s.cov = 3;
    s.set_var = 1;
    s.var_val = -0.0;
    EXPECT_REJECT(s, NULL, PFT_ENUMERIC, "class 3 (label 3): component 1: variance[2] = -0 is not positive");
    s = good_spec();
    s.cov = 3;
    pft_bundle_limits_default(&lim);
    lim.max_model_bytes = 700; /* the diag classes fit (624 bytes with the last one's transient), the
                                * loadings do not */
    EXPECT_REJECT(s, &lim, PFT_ERANGE, "decoded models would exceed");
    s.cov = 1;
    CHECK(decode_spec(&s, &lim) == 0);
}

static int decode_raw(const uint8_t *b, size_t n)
{
    uint8_t *copy = pft_alloc(n);
    memcpy(copy, b, n);
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(copy, n, NULL, &o);
    pft_bundle_destroy(&o);
    pft_free(copy);
    return rc;
}

/* Envelope-level and encoding-level attacks, hand-crafted bytes. */
static void test_raw_rejections(void)
{
    /* [ "PFTB", 1, bin32 of 0xfffffff0 bytes (absent), nil ]: no 4 GB allocation, a clear message */
    const uint8_t huge_bin[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc6, 0xff, 0xff, 0xff, 0xf0, 0xc0};
    CHECK(decode_raw(huge_bin, sizeof huge_bin) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "declared length 4294967280 exceeds") != NULL);
    /* an array32 of 2^32-1 elements in 5 bytes: msgpack-c alone would allocate ~100 GB for it */
    const uint8_t huge_arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0};
    CHECK(decode_raw(huge_arr, sizeof huge_arr) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "declared length 4294967295 exceeds") != NULL);
    /* the same inside a payload */
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_envelope_pack(huge_arr, sizeof huge_arr, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "payload") != NULL);
    PFT_FREE(msg);
    /* many tiny objects: capped before msgpack-c allocates its tree */
    size_t n = 3000000;
    uint8_t *many = pft_alloc(n + 5);
    many[0] = 0xdd;
    many[1] = (uint8_t)(n >> 24), many[2] = (uint8_t)(n >> 16), many[3] = (uint8_t)(n >> 8),
    many[4] = (uint8_t)n;
    memset(many + 5, 0x01, n);
    CHECK(pft_envelope_pack(many, n + 5, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_ERANGE);
    CHECK(strstr(pft_errmsg(), "more than 2097152 msgpack objects") != NULL);
    PFT_FREE(msg);
    pft_free(many);
    /* wrong magic, wrong version, payload of the wrong type, map, float, non-canonical int, trailing byte */
    const uint8_t magic[] = {0x94, 0xa4, 'P', 'F', 'T', 'X', 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(magic, sizeof magic) == PFT_EFORMAT && strstr(pft_errmsg(), "magic"));
    const uint8_t version[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x02, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(version, sizeof version) == PFT_EUNSUPPORTED && strstr(pft_errmsg(), "version 2"));
    const uint8_t payload_str[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xa1, 'x', 0xc0};
    CHECK(decode_raw(payload_str, sizeof payload_str) == PFT_EFORMAT &&
          strstr(pft_errmsg(), "payload: expected bin, got str"));
    const uint8_t map[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0x80, 0xc0};
    CHECK(decode_raw(map, sizeof map) == PFT_EFORMAT && strstr(pft_errmsg(), "map not allowed"));
    const uint8_t flt[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0xca, 0, 0, 0x80, 0x3f, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(flt, sizeof flt) == PFT_EFORMAT && strstr(pft_errmsg(), "float not allowed"));
    const uint8_t noncanon[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0xcc, 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(noncanon, sizeof noncanon) == PFT_EFORMAT && strstr(pft_errmsg(), "shortest form"));
    const uint8_t trailing[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc4, 0x00, 0xc0, 0x00};
    CHECK(decode_raw(trailing, sizeof trailing) == PFT_EFORMAT && strstr(pft_errmsg(), "trailing"));
    const uint8_t empty_payload[] = {0x94, 0xa4, 'P', 'F', 'T', 'B', 0x01, 0xc4, 0x00, 0xc0};
    CHECK(decode_raw(empty_payload, sizeof empty_payload) == PFT_EFORMAT);
    /* deep nesting: rejected by msgpack-c's stack limit, no recursion of ours */
    uint8_t deep[200];
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0xc0;
    CHECK(pft_envelope_pack(deep, sizeof deep, NULL, 0, &msg, &len) == 0);
    CHECK(decode_raw(msg, len) == PFT_EFORMAT && strstr(pft_errmsg(), "nested deeper than 8"));
    PFT_FREE(msg);
    CHECK(decode_raw((const uint8_t *)"", 0) == PFT_EFORMAT);
}

/* Allocation failures at every point of a decode: an error, never a crash or a leak. */
static void test_alloc_failures(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    small_message(&buf, &len);
    int ok_at = -1;
    for (long n = 0; n < 200; n++) {
        pft_alloc_fail_after(n);
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(buf, len, NULL, &o);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc < 0 && o == NULL));
        pft_bundle_destroy(&o);
        if (rc == 0) {
            ok_at = (int)n;
            break;
        }
    }
    CHECK(ok_at > 0);
    pft_free(buf);
}

int main(void)
{
    RUN(test_truncation);
    RUN(test_bit_flips);
    RUN(test_random_mutations);
    RUN(test_schema_values);
    RUN(test_schema_structure);
    RUN(test_schema_lowrank);
    RUN(test_raw_rejections);
    RUN(test_alloc_failures);
    return pft_test_done();
}
