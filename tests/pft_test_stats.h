/* pft_test_stats: fixtures for the statistics-bundle tests (test_bundle_stats*.c): random statistics, a
 * two-part bundle, comparisons, a rebuild through the API, and payloads built by hand with msgpack-c. */
#ifndef PFT_TEST_STATS_H
#define PFT_TEST_STATS_H

#include <math.h>
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_gstat.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_bundle.h"

/* ---------- fixtures ---------- */

/* Statistics of `n` random rows per class (labels[i], n[i]), dimension d; rows spread around class means. */
static inline pft_gstat_t *random_stats(pft_rng_t *r, pft_gstat_kind_t kind, int d, const int *labels,
                                        const int *n, int ncl)
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
static inline pft_bundle_t *two_part_bundle(uint64_t seed, pft_gstat_kind_t kind, pft_dtype_t dt, int d)
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
static inline int near_all(const double *a, const double *b, size_t n, double tol, double scale)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * scale))
            return 0;
    return 1;
}

static inline double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* Same parts (contributors exact, counts exact, means and scatters within the relative tolerance tol). */
static inline void check_same_parts(const pft_bundle_t *a, const pft_bundle_t *b, double tol)
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
static inline pft_bundle_t *rebuild(const pft_bundle_t *o)
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

/* ---------- hand-built payloads (independent of the encoder) ---------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} tbuf_t;

static inline int tbuf_write(void *data, const char *p, size_t n)
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

static inline hand_t hand_default(int kind)
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

static inline void pack_f32s(msgpack_packer *pk, const float *v, int n)
{
    msgpack_pack_bin(pk, 4 * (size_t)n);
    msgpack_pack_bin_body(pk, v, 4 * (size_t)n); /* little-endian hosts */
}

static inline int hand_decode(const hand_t *h, pft_bundle_t **out)
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

static inline void expect_hand(const hand_t *h, int code, const char *needle)
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

#endif
