/* pft_bundle_decode: a wire message to a bundle, trusting nothing: the scan, the schema, then the values.
 *
 * Decoding: pft_mpscan first walks the raw bytes (every header canonical, every declared length within the
 * bytes that remain, the object count capped), and only then msgpack-c's unpacker builds the object tree,
 * whose memory is thereby bounded by max_objects; the tree is then checked field by field against the
 * schema and the limits, and values are checked before any GMM (or statistics part) is built. See
 * docs/WIRE.md §3. */
#include "pft_bundle.h"

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_decode_internal.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_mpscan.h"

#define WEIGHT_TOL 1e-6

/* ---------- limits ---------- */

void pft_bundle_limits_default(pft_bundle_limits_t *limits)
{
    limits->max_bytes = (size_t)256 << 20;
    limits->max_classes = 65536;
    limits->max_k = 1024;
    limits->max_d = 65536;
    limits->max_nodes = 4096;
    limits->max_parents = 4096;
    limits->max_objects = (size_t)1 << 21;
    limits->max_model_bytes = (size_t)4 << 30;
}

/* ---------- the envelope ---------- */

int pft_envelope_parse(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits, pft_envelope_t *out)
{
    pft_bundle_limits_t def;
    if (!limits) {
        pft_bundle_limits_default(&def);
        limits = &def;
    }
    memset(out, 0, sizeof *out);
    if (!buf && len)
        return pft_err(PFT_EINVAL, "envelope: NULL buffer");
    if (len > limits->max_bytes)
        return pft_err(PFT_ERANGE, "bundle decode: message of %zu bytes exceeds the limit of %zu", len,
                       limits->max_bytes);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    ctx_t c = {"envelope"};
    int rc = pft_mp_unpack(buf, len, 16, "bundle decode: envelope", &u);
    if (rc)
        goto done;
    const msgpack_object *o = &u.data;
    if ((rc = pft_bundle__want_array(&c, o, "top level", 4, 4, PFT_EFORMAT)))
        goto done;
    const msgpack_object *f = o->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR || f[0].via.str.size != 4 ||
        memcmp(f[0].via.str.ptr, PFT_BUNDLE_MAGIC, 4)) {
        rc = pft_bundle__bad(&c, PFT_EFORMAT, "magic is not \"%s\"", PFT_BUNDLE_MAGIC);
        goto done;
    }
    uint64_t version = 0;
    if ((rc = pft_bundle__want_uint(&c, &f[1], "version", 0, UINT64_MAX, PFT_EFORMAT, &version)))
        goto done;
    if (version != PFT_BUNDLE_VERSION) {
        rc = pft_bundle__bad(&c, PFT_EUNSUPPORTED, "version %llu not supported (this build reads %d)",
                             (unsigned long long)version, PFT_BUNDLE_VERSION);
        goto done;
    }
    if (f[2].type != MSGPACK_OBJECT_BIN) {
        rc = pft_bundle__bad(&c, PFT_EFORMAT, "payload: expected bin, got %s",
                             pft_bundle__type_name(f[2].type));
        goto done;
    }
    if (f[3].type == MSGPACK_OBJECT_BIN) {
        if (f[3].via.bin.size < 1 || f[3].via.bin.size > PFT_BUNDLE_MAX_SIG) {
            rc = pft_bundle__bad(&c, PFT_EFORMAT, "signature of %u bytes (1..%d)", f[3].via.bin.size,
                                 PFT_BUNDLE_MAX_SIG);
            goto done;
        }
        out->sig = (const uint8_t *)f[3].via.bin.ptr;
        out->sig_len = f[3].via.bin.size;
    } else if (f[3].type != MSGPACK_OBJECT_NIL) {
        rc = pft_bundle__bad(&c, PFT_EFORMAT, "signature: expected bin or nil, got %s",
                             pft_bundle__type_name(f[3].type));
        goto done;
    }
    out->payload = (const uint8_t *)f[2].via.bin.ptr;
    out->payload_len = f[2].via.bin.size;
done:
    msgpack_unpacked_destroy(&u);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

int pft_bundle_message_id(const uint8_t *msg, size_t len, const pft_bundle_limits_t *limits,
                          uint8_t id[PFT_BUNDLE_ID_LEN])
{
    pft_envelope_t env;
    int rc = pft_envelope_parse(msg, len, limits, &env);
    if (rc)
        return rc;
    pft_bundle_hash(env.payload, env.payload_len, id);
    return 0;
}

/* ---------- a class ---------- */

/* A class's header fields, checked against the schema and the limits. */
typedef struct {
    uint64_t label, n, cov, k;
    uint64_t rank; /* lowrank: q; 0 otherwise */
    uint64_t d, m; /* the bundle's dimension; covariance numbers per component on the wire */
} class_shape_t;

/* The decoded parameters of a class, in the layout pft_gmm_set_params* take. */
typedef struct {
    double *w, *mu, *cv, *fa;
    size_t cvn, nfa; /* numbers in cv (full: K·d·d, the Cholesky factors) and in fa (K·d·q) */
} class_values_t;

/* Estimated bytes a decoded GMM keeps (steady) and needs on top while it is being built (transient:
 * our temporaries and those of pft_gmm_set_params). q: lowrank rank (0 otherwise). */
static void model_bytes(pft_cov_t cov, uint64_t k, uint64_t d, uint64_t q, uint64_t *steady,
                        uint64_t *transient)
{
    uint64_t cl = pft_cov_stored(cov, (size_t)d);
    uint64_t ncov =
        pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX ? 2 : 1; /* covariances, and Cholesky factors */
    *steady = 8 * k * (d + 1) + 8 * ncov * k * cl + 8 * k * d * q;
    *transient = 8 * k * (d + 2) + 8 * (1 + ncov) * k * cl + 8 * k * d * q;
}

/* The largest covariance type a GMM class may have (the last mixture family of pft_cov.c's table). */
static uint64_t last_mixture(void)
{
    uint64_t last = 0;
    for (int i = 0; i < PFT_COV_N; i++)
        if (pft_cov_shape((pft_cov_t)i) != PFT_COV_SHAPE_NONE)
            last = (uint64_t)i;
    return last;
}

/* Schema of class ci (object o): its element count, header fields and the length of every bin, all before
 * anything is allocated for it. Names the class (and its label) in c. */
static int read_shape(ctx_t *c, const pft_bundle_t *b, const pft_bundle_limits_t *lim, int ci,
                      const msgpack_object *o, class_shape_t *s)
{
    int rc = pft_bundle__want_array(c, o, "entry", PFT_BUNDLE__N_CLASS_FIELDS,
                                    PFT_BUNDLE__N_CLASS_FIELDS_LOWRANK, PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *f = o->via.array.ptr;
    s->rank = 0;
    if ((rc = pft_bundle__want_uint(c, &f[0], "label", 0, INT32_MAX, PFT_EFORMAT, &s->label)))
        return rc;
    snprintf(c->where, sizeof c->where, "class %d (label %d)", ci, (int)s->label);
    if (ci > 0 && (int)s->label <= b->classes[ci - 1].label)
        return pft_bundle__bad(c, PFT_EFORMAT,
                               "label not greater than the previous label %d (classes sorted, unique)",
                               b->classes[ci - 1].label);
    if ((rc = pft_bundle__want_uint(c, &f[1], "n", 1, PFT_BUNDLE_MAX_COUNT, PFT_EFORMAT, &s->n)) ||
        (rc = pft_bundle__want_uint(c, &f[2], "covariance type", 0, last_mixture(), PFT_EFORMAT, &s->cov)))
        return rc;
    if (pft_cov_shape((pft_cov_t)s->cov) == PFT_COV_SHAPE_NONE)
        return pft_bundle__bad(c, PFT_EFORMAT, "covariance type %d is not a mixture family", (int)s->cov);
    uint32_t nf = pft_cov_shape(s->cov) == PFT_COV_SHAPE_FACTOR ? PFT_BUNDLE__N_CLASS_FIELDS_LOWRANK
                                                                : PFT_BUNDLE__N_CLASS_FIELDS;
    if (o->via.array.size != nf)
        return pft_bundle__bad(c, PFT_EFORMAT, "entry: %u elements, expected %u for covariance type %d",
                               o->via.array.size, nf, (int)s->cov);
    if ((rc = pft_bundle__want_uint(c, &f[3], "K", 1, lim->max_k, PFT_ERANGE, &s->k)))
        return rc;
    uint64_t k = s->k, d = (uint64_t)b->d, es = pft_bundle__dtype_size(b->dtype);
    s->d = d;
    s->m = pft_bundle__cov_len((pft_cov_t)s->cov, d);
    if ((rc = pft_bundle__want_bin(c, &f[4], "weights", 8 * k)) ||
        (rc = pft_bundle__want_bin(c, &f[5], "means", k * d * es)) ||
        (rc = pft_bundle__want_bin(c, &f[6], "covariances", k * s->m * es)))
        return rc;
    if (pft_cov_shape(s->cov) == PFT_COV_SHAPE_FACTOR &&
        ((rc = pft_bundle__want_uint(c, &f[7], "rank", 0, d - 1, PFT_EFORMAT, &s->rank)) ||
         (rc = pft_bundle__want_bin(c, &f[8], "factors", k * d * s->rank * es))))
        return rc;
    return 0;
}

/* Adds the class's estimated memory (steady) to *model_total; PFT_ERANGE if that, with the transient of
 * building it, would pass max_model_bytes. */
static int charge_model(const ctx_t *c, const pft_bundle_limits_t *lim, const class_shape_t *s,
                        uint64_t *model_total)
{
    uint64_t steady, transient;
    model_bytes((pft_cov_t)s->cov, s->k, s->d, s->rank, &steady, &transient);
    if (steady + transient > lim->max_model_bytes - *model_total)
        return pft_bundle__bad(c, PFT_ERANGE, "decoded models would exceed the limit of %zu bytes",
                               lim->max_model_bytes);
    *model_total += steady;
    return 0;
}

/* Room for the values of a class of shape s; PFT_ENOMEM (the caller frees v in any case). */
static int values_alloc(const ctx_t *c, const class_shape_t *s, class_values_t *v)
{
    v->cvn =
        pft_cov_shape(s->cov) == PFT_COV_SHAPE_MATRIX ? (size_t)(s->k * s->d * s->d) : (size_t)(s->k * s->m);
    v->nfa = (size_t)(s->k * s->d * s->rank);
    v->w = pft_alloc_array((size_t)s->k, sizeof *v->w);
    v->mu = pft_alloc_array((size_t)(s->k * s->d), sizeof *v->mu);
    v->cv = pft_alloc_array(v->cvn, sizeof *v->cv);
    v->fa = pft_alloc_array(v->nfa + 1, sizeof *v->fa);
    if (!v->w || !v->mu || !v->cv || !v->fa)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    return 0;
}

static void values_free(class_values_t *v)
{
    PFT_FREE(v->w);
    PFT_FREE(v->mu);
    PFT_FREE(v->cv);
    PFT_FREE(v->fa);
}

/* k fp64 weights from src into w: finite, ≥ 0, summing to 1 within WEIGHT_TOL; then renormalised. */
static int read_weights(const ctx_t *c, const uint8_t *src, size_t k, double *w)
{
    double sum = 0;
    for (size_t j = 0; j < k; j++) {
        w[j] = pft_bundle__get_f64(src, j);
        if (!isfinite(w[j]) || !(w[j] >= 0))
            return pft_bundle__bad(c, PFT_ENUMERIC, "weight[%zu] = %g is %s", j, w[j],
                                   isfinite(w[j]) ? "negative" : "not finite");
        sum += w[j];
    }
    if (!(fabs(sum - 1.0) <= WEIGHT_TOL))
        return pft_bundle__bad(c, PFT_ENUMERIC, "weights sum to %.17g, not 1 (tolerance %g)", sum,
                               WEIGHT_TOL);
    for (size_t j = 0; j < k; j++)
        w[j] /= sum;
    return 0;
}

/* k·d means from src into mu: finite. */
static int read_means(const ctx_t *c, const uint8_t *src, size_t k, size_t d, pft_dtype_t dt, double *mu)
{
    for (size_t j = 0; j < k * d; j++) {
        mu[j] = pft_bundle__get_value(src, j, dt);
        if (!isfinite(mu[j]))
            return pft_bundle__bad(c, PFT_ENUMERIC, "component %zu: mean[%zu] = %g is not finite", j / d,
                                   j % d, mu[j]);
    }
    return 0;
}

/* k lower triangles (row by row) from src into the k d×d factors L (upper parts 0): finite, diagonal > 0. */
static int read_chol(const ctx_t *c, const uint8_t *src, size_t k, size_t d, pft_dtype_t dt, double *L)
{
    memset(L, 0, k * d * d * sizeof *L);
    size_t o = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t r = 0; r < d; r++)
            for (size_t q = 0; q <= r; q++, o++) {
                double v = pft_bundle__get_value(src, o, dt);
                if (!isfinite(v))
                    return pft_bundle__bad(
                        c, PFT_ENUMERIC, "component %zu: cholesky[%zu][%zu] = %g is not finite", j, r, q, v);
                if (q == r && !(v > 0))
                    return pft_bundle__bad(c, PFT_ENUMERIC,
                                           "component %zu: cholesky[%zu][%zu] = %g is not positive", j, r, q,
                                           v);
                L[(j * d + r) * d + q] = v;
            }
    return 0;
}

/* k·m variances (diag, spher, lowrank's Ψ) from src into var: finite and > 0 (so -0 is rejected). */
static int read_variances(const ctx_t *c, const uint8_t *src, size_t k, size_t m, pft_dtype_t dt, double *var)
{
    for (size_t j = 0; j < k * m; j++) {
        var[j] = pft_bundle__get_value(src, j, dt);
        if (!isfinite(var[j]) || !(var[j] > 0))
            return pft_bundle__bad(c, PFT_ENUMERIC, "component %zu: variance[%zu] = %g is not %s", j / m,
                                   j % m, var[j], isfinite(var[j]) ? "positive" : "finite");
    }
    return 0;
}

/* k·d·q loadings (component, dimension, factor) from src into fa: finite. */
static int read_factors(const ctx_t *c, const uint8_t *src, size_t k, size_t d, size_t q, pft_dtype_t dt,
                        double *fa)
{
    for (size_t j = 0; j < k * d * q; j++) {
        fa[j] = pft_bundle__get_value(src, j, dt);
        if (!isfinite(fa[j]))
            return pft_bundle__bad(c, PFT_ENUMERIC, "component %zu: factor[%zu][%zu] = %g is not finite",
                                   j / (d * q), j % (d * q) / q, j % q, fa[j]);
    }
    return 0;
}

/* Every value of the class whose fields are f, into v; the first violation reported (PFT_ENUMERIC). */
static int read_values(const ctx_t *c, const class_shape_t *s, const msgpack_object *f, pft_dtype_t dt,
                       class_values_t *v)
{
    size_t k = (size_t)s->k, d = (size_t)s->d, m = (size_t)s->m;
    const uint8_t *wb = (const uint8_t *)f[4].via.bin.ptr, *mub = (const uint8_t *)f[5].via.bin.ptr,
                  *cb = (const uint8_t *)f[6].via.bin.ptr;
    int rc = read_weights(c, wb, k, v->w);
    if (!rc)
        rc = read_means(c, mub, k, d, dt, v->mu);
    if (!rc)
        rc = pft_cov_shape(s->cov) == PFT_COV_SHAPE_MATRIX ? read_chol(c, cb, k, d, dt, v->cv)
                                                           : read_variances(c, cb, k, m, dt, v->cv);
    if (!rc && pft_cov_shape(s->cov) == PFT_COV_SHAPE_FACTOR)
        rc = read_factors(c, (const uint8_t *)f[8].via.bin.ptr, k, d, (size_t)s->rank, dt, v->fa);
    return rc;
}

/* The GMM of shape s with values v into *out (pft_gmm_set_params* re-validate them). PFT_ENOMEM, or the
 * error of set_params naming the class. */
static int build_gmm(const ctx_t *c, const class_shape_t *s, const class_values_t *v, pft_gmm_t **out)
{
    pft_cov_t cov = (pft_cov_t)s->cov;
    pft_gmm_t *g = pft_cov_shape(cov) == PFT_COV_SHAPE_FACTOR
                       ? pft_gmm_new_lowrank((int)s->k, (int)s->d, (int)s->rank)
                       : pft_gmm_new((int)s->k, (int)s->d, cov);
    if (!g)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    int rc = pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX ? pft_gmm_set_params_chol(g, v->w, v->mu, v->cv)
             : pft_cov_shape(cov) == PFT_COV_SHAPE_FACTOR
                 ? pft_gmm_set_params_lowrank(g, v->w, v->mu, v->fa, v->cv)
                 : pft_gmm_set_params(g, v->w, v->mu, v->cv);
    if (rc) {
        rc = pft_err_wrap(rc, "bundle decode: %s", c->where);
        pft_gmm_destroy(&g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Checks and builds class ci from its object o into b->classes[ci]: schema, memory budget, values, GMM. */
static int decode_class(pft_bundle_t *b, const pft_bundle_limits_t *lim, int ci, const msgpack_object *o,
                        uint64_t *model_total)
{
    ctx_t c;
    snprintf(c.where, sizeof c.where, "class %d", ci);
    class_shape_t s;
    int rc = read_shape(&c, b, lim, ci, o, &s);
    if (!rc)
        rc = charge_model(&c, lim, &s, model_total);
    if (rc)
        return rc;
    class_values_t v = {0};
    pft_gmm_t *g = NULL;
    rc = values_alloc(&c, &s, &v);
    if (!rc)
        rc = read_values(&c, &s, o->via.array.ptr, b->dtype, &v);
    if (!rc)
        rc = build_gmm(&c, &s, &v, &g);
    if (!rc) {
        b->classes[ci] = (pft_bundle__class_t){.label = (int)s.label, .n = s.n, .gmm = g};
        b->n_classes = ci + 1;
    }
    values_free(&v);
    return rc;
}

/* ---------- provenance ---------- */

/* The count pairs (array o, its size already checked) of entry pe, whose pairs have room for them:
 * [label, count], labels 0..2^31-1 strictly ascending, counts 1..2^48. */
static int decode_counts(const ctx_t *c, const msgpack_object *o, pft_bundle__prov_t *pe)
{
    for (uint32_t j = 0; j < o->via.array.size; j++) {
        const msgpack_object *p = &o->via.array.ptr[j];
        char field[48];
        snprintf(field, sizeof field, "count pair %u", j);
        int rc = pft_bundle__want_array(c, p, field, 2, 2, PFT_EFORMAT);
        if (rc)
            return rc;
        uint64_t label, count;
        snprintf(field, sizeof field, "count pair %u: label", j);
        if ((rc = pft_bundle__want_uint(c, &p->via.array.ptr[0], field, 0, INT32_MAX, PFT_EFORMAT, &label)))
            return rc;
        if (j > 0 && (int)label <= pe->pairs[j - 1].label)
            return pft_bundle__bad(c, PFT_EFORMAT, "count pair %u: label %d not after %d (sorted, unique)", j,
                                   (int)label, pe->pairs[j - 1].label);
        snprintf(field, sizeof field, "count pair %u: count", j);
        if ((rc = pft_bundle__want_uint(c, &p->via.array.ptr[1], field, 1, PFT_BUNDLE_MAX_COUNT, PFT_EFORMAT,
                                        &count)))
            return rc;
        pe->pairs[j] = (pft_bundle__pair_t){.label = (int)label, .count = count};
        pe->n = (int)j + 1;
    }
    return 0;
}

/* The DP guarantee g of entry pe: bin(16), ε and δ as little-endian binary64, 0 < ε ≤ 1e6, 0 ≤ δ ≤ 1. */
static int decode_dp(const ctx_t *c, const msgpack_object *g, pft_bundle__prov_t *pe)
{
    int rc = pft_bundle__want_bin(c, g, "dp guarantee", 16);
    if (rc)
        return rc;
    double eps = pft_bundle__le_get_f64((const uint8_t *)g->via.bin.ptr),
           delta = pft_bundle__le_get_f64((const uint8_t *)g->via.bin.ptr + 8);
    if (!(eps > 0 && eps <= 1e6) || !(delta >= 0 && delta <= 1))
        return pft_bundle__bad(
            c, PFT_EFORMAT, "dp guarantee (%g, %g) outside 0 < epsilon <= 1e6, 0 <= delta <= 1", eps, delta);
    pe->dp_eps = eps;
    pe->dp_delta = delta;
    return 0;
}

static uint64_t le_u64(const uint8_t *p)
{
    double d = pft_bundle__le_get_f64(p);
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* The evidence g of entry pe: bin(8 + 32·m), 1 ≤ m ≤ PFT_BUNDLE_MAX_TALLIES (pft_bundle__tallies_ok), scored
 * against 1..2^48 rows; under the payload's shared α grid (grid, m_grid values) bin(8 + 24·m_grid), each
 * tally without its α. */
static int decode_evidence(const ctx_t *c, const msgpack_object *g, const double *grid, int m_grid,
                           pft_bundle__prov_t *pe)
{
    size_t w = grid ? 24 : 32, size = g->type == MSGPACK_OBJECT_BIN ? g->via.bin.size : 0;
    if (grid && size != 8 + 24 * (size_t)m_grid)
        return pft_bundle__bad(c, PFT_EFORMAT,
                               "evidence: expected bin of 8 + 24 x %d bytes (the payload's α grid)", m_grid);
    if (!grid && (size < 40 || (size - 8) % 32 || size > 8 + 32 * PFT_BUNDLE_MAX_TALLIES))
        return pft_bundle__bad(c, PFT_EFORMAT, "evidence: expected bin of 8 + 32 x 1..%d bytes",
                               PFT_BUNDLE_MAX_TALLIES);
    int m = (int)((size - 8) / w);
    const uint8_t *p = (const uint8_t *)g->via.bin.ptr;
    pe->ev_against = le_u64(p);
    if (pe->ev_against < 1 || pe->ev_against > PFT_BUNDLE_MAX_COUNT)
        return pft_bundle__bad(c, PFT_EFORMAT, "evidence: scored against %llu rows (1..2^48)",
                               (unsigned long long)pe->ev_against);
    p += 8;
    pe->ev = pft_alloc_array((size_t)m, sizeof *pe->ev);
    if (!pe->ev)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    for (int k = 0; k < m; k++) {
        const uint8_t *t = p + w * (size_t)k, *r = t + (w - 24);
        pe->ev[k] = (pft_bundle_tally_t){.alpha = grid ? grid[k] : pft_bundle__le_get_f64(t),
                                         .correct = le_u64(r),
                                         .total = le_u64(r + 8),
                                         .loss = pft_bundle__le_get_f64(r + 16)};
    }
    pe->n_ev = m;
    char why[256];
    if (!pft_bundle__tallies_ok(pe->ev, m, why, sizeof why))
        return pft_bundle__bad(c, PFT_EFORMAT, "evidence: %s", why);
    return 0;
}

/* The shared α grid, payload element 10: bin(8·m), 1 ≤ m ≤ PFT_BUNDLE_MAX_TALLIES, in [0, 1] strictly
 * ascending, into grid (*m values). */
static int decode_grid(const ctx_t *c, const msgpack_object *o, double grid[PFT_BUNDLE_MAX_TALLIES], int *m)
{
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size < 8 || o->via.bin.size % 8 ||
        o->via.bin.size > 8 * PFT_BUNDLE_MAX_TALLIES)
        return pft_bundle__bad(c, PFT_EFORMAT, "evidence grid: expected bin of 8 x 1..%d bytes",
                               PFT_BUNDLE_MAX_TALLIES);
    *m = (int)(o->via.bin.size / 8);
    for (int k = 0; k < *m; k++) {
        grid[k] = pft_bundle__le_get_f64((const uint8_t *)o->via.bin.ptr + 8 * k);
        if (!(grid[k] >= 0 && grid[k] <= 1) || (k > 0 && !(grid[k] > grid[k - 1])))
            return pft_bundle__bad(c, PFT_EFORMAT,
                                   "evidence grid: alpha %d = %g (in 0..1, strictly ascending)", k, grid[k]);
    }
    return 0;
}

/* The provenance (array o) into b: entries [node, counts], [node, counts, dp] or [node, counts, dp or nil,
 * evidence], node ids strictly ascending; grid: the payload's shared α grid (m_grid values), or NULL. */
static int decode_prov(pft_bundle_t *b, const pft_bundle_limits_t *lim, const msgpack_object *o,
                       const double *grid, int m_grid)
{
    ctx_t c = {"provenance"};
    int rc = pft_bundle__want_array(&c, o, "list", 0, lim->max_nodes, PFT_ERANGE);
    if (rc)
        return rc;
    uint32_t n = o->via.array.size;
    int used_grid = 0;
    if (n) {
        b->prov = pft_calloc(n, sizeof *b->prov);
        if (!b->prov)
            return pft_bundle__bad(&c, PFT_ENOMEM, "out of memory");
        b->cap_prov = (int)n;
    }
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        snprintf(c.where, sizeof c.where, "provenance entry %u", i);
        if ((rc = pft_bundle__want_array(&c, e, "entry", 2, 4, PFT_EFORMAT)))
            return rc;
        char node[PFT_BUNDLE_MAX_NAME + 1];
        if ((rc = pft_bundle__want_name(&c, &e->via.array.ptr[0], "node id", node)))
            return rc;
        snprintf(c.where, sizeof c.where, "provenance entry %u ('%s')", i, node);
        if (i > 0 && strcmp(node, b->prov[i - 1].node) <= 0)
            return pft_bundle__bad(&c, PFT_EFORMAT, "node id not after '%s' (entries sorted, unique)",
                                   b->prov[i - 1].node);
        const msgpack_object *pairs = &e->via.array.ptr[1];
        if ((rc = pft_bundle__want_array(&c, pairs, "counts", 1, lim->max_classes, PFT_ERANGE)))
            return rc;
        pft_bundle__prov_t *pe = &b->prov[i];
        pe->node = pft_strdup(node);
        pe->pairs = pft_alloc_array(pairs->via.array.size, sizeof *pe->pairs);
        b->n_prov = (int)i + 1;
        if (!pe->node || !pe->pairs)
            return pft_bundle__bad(&c, PFT_ENOMEM, "out of memory");
        pe->cap = (int)pairs->via.array.size;
        if ((rc = decode_counts(&c, pairs, pe)))
            return rc;
        const msgpack_object *dp = e->via.array.size >= 3 ? &e->via.array.ptr[2] : NULL;
        if (dp && !(e->via.array.size == 4 && dp->type == MSGPACK_OBJECT_NIL) && (rc = decode_dp(&c, dp, pe)))
            return rc;
        if (e->via.array.size == 4 && (rc = decode_evidence(&c, &e->via.array.ptr[3], grid, m_grid, pe)))
            return rc;
        used_grid += e->via.array.size == 4;
    }
    if (grid && used_grid < 2) /* canonical: a grid only where two or more evidence share it */
        return pft_bundle__bad(
            &c, PFT_EFORMAT, "an evidence grid (payload element 10) for %d evidence (2 or more)", used_grid);
    return 0;
}

/* ---------- the payload ---------- */

/* The header fields f[0..4] (run id, producer, flags, dtype, d) as a new bundle without content in *bp. */
static int decode_header(const ctx_t *c, const msgpack_object *f, const pft_bundle_limits_t *lim,
                         pft_bundle_t **bp)
{
    char run_id[PFT_BUNDLE_MAX_NAME + 1], producer[PFT_BUNDLE_MAX_NAME + 1];
    uint64_t flags, dtype, d;
    int rc;
    if ((rc = pft_bundle__want_name(c, &f[0], "run id", run_id)) ||
        (rc = pft_bundle__want_name(c, &f[1], "producer", producer)) ||
        (rc = pft_bundle__want_uint(c, &f[2], "flags", 0, UINT32_MAX, PFT_EFORMAT, &flags)))
        return rc;
    if (flags & ~(uint64_t)PFT_BUNDLE_FLAGS_KNOWN)
        return pft_bundle__bad(c, PFT_EFORMAT, "flags 0x%llx have unknown bits", (unsigned long long)flags);
    if ((rc = pft_bundle__want_uint(c, &f[3], "dtype", 0, 1, PFT_EFORMAT, &dtype)) ||
        (rc = pft_bundle__want_uint(c, &f[4], "d", 1, lim->max_d, PFT_ERANGE, &d)))
        return rc;
    pft_bundle_t *b = pft_bundle_new(run_id, producer, (pft_dtype_t)dtype, (int)d);
    if (!b)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    b->flags = (uint32_t)flags;
    *bp = b;
    return 0;
}

/* The parents (array o) into b: bin(32) ids, strictly ascending. */
static int decode_parents(const ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim,
                          const msgpack_object *o)
{
    int rc = pft_bundle__want_array(c, o, "parents", 0, lim->max_parents, PFT_ERANGE);
    if (rc)
        return rc;
    uint32_t np = o->via.array.size;
    if (np) {
        b->parents = pft_alloc_array(np, PFT_BUNDLE_ID_LEN);
        if (!b->parents)
            return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
        b->cap_parents = (int)np;
    }
    for (uint32_t i = 0; i < np; i++) {
        const msgpack_object *p = &o->via.array.ptr[i];
        char field[32];
        snprintf(field, sizeof field, "parent %u", i);
        if ((rc = pft_bundle__want_bin(c, p, field, PFT_BUNDLE_ID_LEN)))
            return rc;
        if (i > 0 && memcmp(p->via.bin.ptr, b->parents[i - 1], PFT_BUNDLE_ID_LEN) <= 0)
            return pft_bundle__bad(c, PFT_EFORMAT, "parent %u not after parent %u (sorted, unique)", i,
                                   i - 1);
        memcpy(b->parents[i], p->via.bin.ptr, PFT_BUNDLE_ID_LEN);
        b->n_parents = (int)i + 1;
    }
    return 0;
}

/* The classes (array o) into b, their decoded memory summed against max_model_bytes. */
static int decode_classes(const ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim,
                          const msgpack_object *o)
{
    int rc = pft_bundle__want_array(c, o, "classes", 0, lim->max_classes, PFT_ERANGE);
    if (rc)
        return rc;
    uint32_t nc = o->via.array.size;
    if (nc) {
        b->classes = pft_calloc(nc, sizeof *b->classes);
        if (!b->classes)
            return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
        b->cap_classes = (int)nc;
    }
    uint64_t model_total = 0;
    for (uint32_t i = 0; i < nc; i++)
        if ((rc = decode_class(b, lim, (int)i, &o->via.array.ptr[i], &model_total)))
            return rc;
    return 0;
}

/* One fingerprint item (array o, the i-th) into it: [name: str, digest: bin(8)], named after prev. */
static int decode_fp_item(const ctx_t *c, const msgpack_object *o, uint32_t i, const char *prev,
                          pft_bundle_fp_item_t *it)
{
    char field[48];
    snprintf(field, sizeof field, "fingerprint item %u", i);
    int rc = pft_bundle__want_array(c, o, field, 2, 2, PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *nm = &o->via.array.ptr[0];
    if (nm->type != MSGPACK_OBJECT_STR || !pft_bundle__fp_name_ok(nm->via.str.ptr, nm->via.str.size))
        return pft_bundle__bad(c, PFT_EFORMAT,
                               "%s: name: expected a str of 1..%d bytes without control bytes", field,
                               PFT_BUNDLE_FP_NAME_MAX);
    memcpy(it->name, nm->via.str.ptr, nm->via.str.size);
    it->name[nm->via.str.size] = '\0';
    if (prev && strcmp(prev, it->name) >= 0)
        return pft_bundle__bad(c, PFT_EFORMAT, "%s ('%s') not after item %u (sorted, unique)", field,
                               it->name, i - 1);
    if ((rc = pft_bundle__want_bin(c, &o->via.array.ptr[1], field, PFT_BUNDLE_FP_DIGEST_LEN)))
        return rc;
    memcpy(it->digest, o->via.array.ptr[1].via.bin.ptr, PFT_BUNDLE_FP_DIGEST_LEN);
    return 0;
}

/* The topology fingerprint (payload element 9, object o) into b: [bin(32), array of items]. */
static int decode_fingerprint(const ctx_t *c, pft_bundle_t *b, const msgpack_object *o)
{
    int rc = pft_bundle__want_array(c, o, "fingerprint", 2, 2, PFT_EFORMAT);
    if (rc || (rc = pft_bundle__want_bin(c, &o->via.array.ptr[0], "fingerprint", PFT_BUNDLE_FP_LEN)))
        return rc;
    const msgpack_object *items = &o->via.array.ptr[1];
    if ((rc = pft_bundle__want_array(c, items, "fingerprint items", 0, PFT_BUNDLE_FP_MAX_ITEMS, PFT_ERANGE)))
        return rc;
    uint32_t n = items->via.array.size;
    if (n && !(b->fp_items = pft_calloc(n, sizeof *b->fp_items)))
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        if ((rc = decode_fp_item(c, &items->via.array.ptr[i], i, i ? b->fp_items[i - 1].name : NULL,
                                 &b->fp_items[i])))
            return rc;
    memcpy(b->fp, o->via.array.ptr[0].via.bin.ptr, PFT_BUNDLE_FP_LEN);
    b->n_fp_items = n;
    b->has_fp = 1;
    return 0;
}

/* The payload bytes as a new bundle in *bp (without the kept payload, id and signature). */
static int decode_payload(pft_bundle_t **bp, const uint8_t *payload, size_t plen,
                          const pft_bundle_limits_t *lim)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    ctx_t c = {"payload"};
    pft_bundle_t *b = NULL;
    int rc = pft_mp_unpack(payload, plen, lim->max_objects, "bundle decode: payload", &u);
    if (rc)
        goto done;
    if ((rc = pft_bundle__want_array(&c, &u.data, "top level", PFT_BUNDLE__N_PAYLOAD_FIELDS,
                                     PFT_BUNDLE__N_PAYLOAD_FIELDS_GRID, PFT_EFORMAT)))
        goto done;
    const msgpack_object *f = u.data.via.array.ptr;
    int with_grid = u.data.via.array.size == PFT_BUNDLE__N_PAYLOAD_FIELDS_GRID, m_grid = 0;
    int with_fp = with_grid || u.data.via.array.size == PFT_BUNDLE__N_PAYLOAD_FIELDS_FP;
    double grid[PFT_BUNDLE_MAX_TALLIES];
    if (with_grid && (rc = decode_grid(&c, &f[10], grid, &m_grid)))
        goto done;
    int stats = u.data.via.array.size == PFT_BUNDLE__N_PAYLOAD_FIELDS_STATS ||
                (with_fp && f[8].type == MSGPACK_OBJECT_ARRAY && f[8].via.array.size > 0);
    if (stats && f[7].type == MSGPACK_OBJECT_ARRAY && f[7].via.array.size > 0) {
        rc = pft_bundle__bad(
            &c, PFT_EFORMAT,
            with_fp
                ? "top level: GMM classes and statistics parts together (a bundle carries one or the other)"
                : "top level: 9 elements, expected 8..8 with GMM classes (9 only for statistics parts, whose "
                  "classes array is empty)");
        goto done;
    }
    if ((rc = decode_header(&c, f, lim, &b)) || (rc = decode_parents(&c, b, lim, &f[5])) ||
        (rc = decode_prov(b, lim, &f[6], with_grid ? grid : NULL, m_grid)))
        goto done;
    if (with_fp && !with_grid && pft_bundle__shared_grid(b) >= 0) { /* canonical: the encoder's choice */
        rc = pft_bundle__bad(&c, PFT_EFORMAT,
                             "top level: 10 elements, but every evidence has the same alphas: "
                             "expected them once, as element 10");
        goto done;
    }
    if (stats) /* statistics: no GMM class, then the parts */
        rc = pft_bundle__want_array(&c, &f[7], "classes (statistics payload)", 0, 0, PFT_EFORMAT);
    if (!rc)
        rc = decode_classes(&c, b, lim, &f[7]);
    if (!rc && stats)
        rc = pft_bundle__decode_parts(&c, b, lim, &f[8]);
    else if (!rc && with_fp) /* GMM classes (or none): an empty parts array */
        rc = pft_bundle__want_array(&c, &f[8], "parts (GMM payload)", 0, 0, PFT_EFORMAT);
    if (!rc && with_fp)
        rc = decode_fingerprint(&c, b, &f[9]);
    if (rc || (rc = pft_bundle__check_counts(b, PFT_EFORMAT, "bundle decode")))
        goto done;
    *bp = b;
    b = NULL;
done:
    pft_bundle_destroy(&b);
    msgpack_unpacked_destroy(&u);
    return rc;
}

int pft_bundle_decode(const uint8_t *buf, size_t len, const pft_bundle_limits_t *limits, pft_bundle_t **out)
{
    pft_bundle_limits_t def;
    if (!limits) {
        pft_bundle_limits_default(&def);
        limits = &def;
    }
    *out = NULL;
    pft_envelope_t env;
    int rc = pft_envelope_parse(buf, len, limits, &env);
    if (rc)
        return rc;
    pft_bundle_t *b = NULL;
    rc = decode_payload(&b, env.payload, env.payload_len, limits);
    if (rc)
        return rc;
    b->payload = pft_alloc(env.payload_len);
    if (!b->payload) {
        pft_bundle_destroy(&b);
        return pft_err(PFT_ENOMEM, "bundle decode: out of memory");
    }
    memcpy(b->payload, env.payload, env.payload_len);
    b->payload_len = env.payload_len;
    pft_bundle_hash(env.payload, env.payload_len, b->id);
    if (env.sig_len)
        memcpy(b->sig, env.sig, env.sig_len);
    b->sig_len = env.sig_len;
    *out = b;
    return 0;
}
