/* pft_bundle_encode: a bundle to canonical msgpack (payload, envelope), and its id (the payload's hash).
 *
 * msgpack-c's packer writes into our own growable buffer (pft_alloc); every integer, string, bin and array
 * header in its shortest form, so that a bundle has one byte string, hence one id. Statistics parts travel
 * as covariances (scatter / count), which are scale-free and so fit fp16. See docs/WIRE.md §1–2. */
#include "pft_bundle.h"

#include <math.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_gstat_lowrank.h"
#include "pft_half.h"

/* ---------- the output buffer ---------- */

/* Growable output of the packer. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
} wbuf_t;

static int wbuf_reserve(wbuf_t *w, size_t extra)
{
    if (extra <= w->cap - w->len)
        return 0;
    size_t nc = w->cap ? w->cap : 256;
    while (nc - w->len < extra) {
        if (nc > SIZE_MAX / 2)
            return -1;
        nc *= 2;
    }
    uint8_t *p = pft_realloc(w->buf, nc);
    if (!p)
        return -1;
    w->buf = p;
    w->cap = nc;
    return 0;
}

/* msgpack_packer_write callback. */
static int wbuf_write(void *data, const char *p, size_t n)
{
    wbuf_t *w = data;
    if (wbuf_reserve(w, n))
        return -1;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return 0;
}

/* ---------- numbers, little endian ---------- */

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes v at dst[i] in dtype (little endian). positive: a positive value that would round to zero is
 * sent as the smallest positive subnormal. Returns 0, or -1 if the value is not finite or overflows. */
static int put_value(uint8_t *dst, size_t i, double v, pft_dtype_t dt, int positive)
{
    if (!isfinite(v))
        return -1;
    if (dt == PFT_DTYPE_F16) {
        uint16_t h = pft_half_from_float((float)v);
        if ((h & 0x7c00u) == 0x7c00u)
            return -1;
        if (positive && v > 0 && (h & 0x7fffu) == 0)
            h = 1;
        dst[2 * i] = (uint8_t)h;
        dst[2 * i + 1] = (uint8_t)(h >> 8);
    } else {
        float f = (float)v;
        if (!isfinite(f))
            return -1;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (positive && v > 0 && (u & 0x7fffffffu) == 0)
            u = 1;
        put_le32(dst + 4 * i, u);
    }
    return 0;
}

static void put_f64(uint8_t *dst, size_t i, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    put_le32(dst + 8 * i, (uint32_t)u);
    put_le32(dst + 8 * i + 4, (uint32_t)(u >> 32));
}

static void le_put_u64(uint8_t *p, uint64_t u)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static void le_put_f64(uint8_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    le_put_u64(p, u);
}

/* A provenance entry's evidence: bin(8 + 32·m), the rows scored against (uint64), then per tally alpha
 * (binary64), correct, total (uint64), loss (binary64), little-endian; with the payload's shared α grid
 * (grid: element 10), bin(8 + 24·m), the same without alpha. */
static int put_evidence(msgpack_packer *pk, const pft_bundle__prov_t *e, int grid)
{
    uint8_t g[8 + 32 * PFT_BUNDLE_MAX_TALLIES];
    size_t w = grid ? 24 : 32;
    le_put_u64(g, e->ev_against);
    for (int k = 0; k < e->n_ev; k++) {
        uint8_t *t = g + 8 + w * (size_t)k;
        if (!grid)
            le_put_f64(t, e->ev[k].alpha);
        t += w - 24;
        le_put_u64(t, e->ev[k].correct);
        le_put_u64(t + 8, e->ev[k].total);
        le_put_f64(t + 16, e->ev[k].loss);
    }
    return msgpack_pack_bin_with_body(pk, g, 8 + w * (size_t)e->n_ev);
}

/* The shared α grid, payload element 10: bin(8·m), binary64 little-endian. */
static int put_grid(const pft_bundle_t *self, int first, msgpack_packer *pk)
{
    uint8_t g[8 * PFT_BUNDLE_MAX_TALLIES];
    const pft_bundle__prov_t *f = &self->prov[first];
    for (int k = 0; k < f->n_ev; k++)
        le_put_f64(g + 8 * k, f->ev[k].alpha);
    return msgpack_pack_bin_with_body(pk, g, 8 * (size_t)f->n_ev);
}

/* ---------- the payload ---------- */

static int range_err(const pft_bundle_t *self, int ci, int comp, const char *what, double v)
{
    return pft_err(PFT_ERANGE, "bundle encode: class %d (label %d): component %d: %s = %g does not fit %s",
                   ci, self->classes[ci].label, comp, what, v,
                   self->dtype == PFT_DTYPE_F16 ? "fp16" : "fp32");
}

/* Class ci's covariances (m numbers per component): full's Cholesky factors (lower triangle, row by row),
 * else the stored variances. 0, PFT_ENOMEM or the range error of a value dtype cannot hold. */
static int encode_covars(const pft_bundle_t *self, int ci, msgpack_packer *pk, wbuf_t *w,
                         pft_cov_shape_t shape, size_t m)
{
    const pft_gmm_t *g = self->classes[ci].gmm;
    pft_dtype_t dt = self->dtype;
    size_t k = (size_t)pft_gmm_k(g), d = (size_t)self->d, es = pft_bundle__dtype_size(dt);
    if (msgpack_pack_bin(pk, k * m * es) || wbuf_reserve(w, k * m * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    uint8_t *dst = w->buf + w->len;
    if (shape == PFT_COV_SHAPE_MATRIX) {
        const double *L = pft_gmm_chol(g);
        size_t o = 0;
        for (size_t j = 0; j < k; j++) {
            for (size_t r = 0; r < d; r++) {
                for (size_t q = 0; q <= r; q++, o++) {
                    double v = L[(j * d + r) * d + q];
                    if (put_value(dst, o, v, dt, q == r)) {
                        char what[64];
                        snprintf(what, sizeof what, "cholesky[%zu][%zu]", r, q);
                        return range_err(self, ci, (int)j, what, v);
                    }
                }
            }
        }
    } else {
        const double *var = pft_gmm_covars(g);
        for (size_t j = 0; j < k * m; j++) {
            if (put_value(dst, j, var[j], dt, 1)) {
                char what[48];
                snprintf(what, sizeof what, "variance[%zu]", j % m);
                return range_err(self, ci, (int)(j / m), what, var[j]);
            }
        }
    }
    w->len += k * m * es;
    return 0;
}

/* Writes one class: [label, n, cov, k, weights, means, covs] (lowrank: [..., Ψ, q, W]). */
static int encode_class(const pft_bundle_t *self, int ci, msgpack_packer *pk, wbuf_t *w)
{
    const pft_bundle__class_t *c = &self->classes[ci];
    const pft_gmm_t *g = c->gmm;
    pft_dtype_t dt = self->dtype;
    size_t k = (size_t)pft_gmm_k(g), d = (size_t)self->d, es = pft_bundle__dtype_size(dt);
    pft_cov_t cov = pft_gmm_cov(g);
    pft_cov_shape_t shape = pft_cov_shape(cov);
    size_t m = pft_bundle__cov_len(cov, d);
    int fail = msgpack_pack_array(pk, shape == PFT_COV_SHAPE_FACTOR ? PFT_BUNDLE__N_CLASS_FIELDS_LOWRANK
                                                                    : PFT_BUNDLE__N_CLASS_FIELDS) ||
               msgpack_pack_int64(pk, c->label) || msgpack_pack_uint64(pk, c->n) ||
               msgpack_pack_uint64(pk, (uint64_t)cov) || msgpack_pack_uint64(pk, k);
    /* weights: fp64 */
    const double *wt = pft_gmm_weights(g);
    fail = fail || msgpack_pack_bin(pk, 8 * k) || wbuf_reserve(w, 8 * k);
    if (fail)
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t j = 0; j < k; j++)
        put_f64(w->buf + w->len, j, wt[j]);
    w->len += 8 * k;
    /* means */
    const double *mu = pft_gmm_means(g);
    if (msgpack_pack_bin(pk, k * d * es) || wbuf_reserve(w, k * d * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t j = 0; j < k * d; j++) {
        if (put_value(w->buf + w->len, j, mu[j], dt, 0)) {
            char what[48];
            snprintf(what, sizeof what, "mean[%zu]", j % d);
            return range_err(self, ci, (int)(j / d), what, mu[j]);
        }
    }
    w->len += k * d * es;
    /* covariances */
    int rc = encode_covars(self, ci, pk, w, shape, m);
    if (rc)
        return rc;
    if (shape != PFT_COV_SHAPE_FACTOR)
        return 0;
    /* lowrank: q, then W (K×d×q, row-major: component, dimension, factor) */
    size_t q = (size_t)pft_gmm_rank(g);
    const double *W = pft_gmm_factors(g);
    if (msgpack_pack_uint64(pk, q) || msgpack_pack_bin(pk, k * d * q * es) || wbuf_reserve(w, k * d * q * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    uint8_t *dst = w->buf + w->len;
    for (size_t j = 0; j < k * d * q; j++) {
        if (put_value(dst, j, W[j], dt, 0)) {
            char what[64];
            snprintf(what, sizeof what, "factor[%zu][%zu]", j % (d * q) / q, j % q);
            return range_err(self, ci, (int)(j / (d * q)), what, W[j]);
        }
    }
    w->len += k * d * q * es;
    return 0;
}

/* ---------- statistics parts ---------- */

static int part_range_err(const pft_bundle_t *self, int pi, int ci, const char *what, double v)
{
    char name[160];
    pft_bundle__part_name(&self->parts[pi], pi, name, sizeof name);
    const pft_gstat_t *st = self->parts[pi].st;
    const char *dt = self->dtype == PFT_DTYPE_F16 ? "fp16" : "fp32";
    if (ci < 0)
        return pft_err(PFT_ERANGE, "bundle encode: %s: %s = %g does not fit %s", name, what, v, dt);
    return pft_err(PFT_ERANGE, "bundle encode: %s: class %d (label %d): %s = %g does not fit %s", name, ci,
                   pft_gstat_label(st, ci), what, v, dt);
}

/* Writes the covariance s/n (s: d×d scatter) as a bin of its lower triangle, row by row, in dtype. */
static int put_cov(const pft_bundle_t *self, int pi, int ci, const double *s, double n, msgpack_packer *pk,
                   wbuf_t *w)
{
    size_t d = (size_t)self->d, m = d * (d + 1) / 2, es = pft_bundle__dtype_size(self->dtype);
    if (msgpack_pack_bin(pk, m * es) || wbuf_reserve(w, m * es))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    size_t o = 0;
    for (size_t r = 0; r < d; r++)
        for (size_t q = 0; q <= r; q++, o++) {
            double v = s[r * d + q] / n;
            if (put_value(w->buf + w->len, o, v, self->dtype, 0)) {
                char what[64];
                snprintf(what, sizeof what, "%scovariance[%zu][%zu]", ci < 0 ? "shared " : "", r, q);
                return part_range_err(self, pi, ci, what, v);
            }
        }
    w->len += m * es;
    return 0;
}

/* The rank-qe factor of c = wsc / n (wsc: the d×d scatter) in the first qe of q columns of u (d×q, row-major;
 * the others zero). qe = 0 (a cap of 0): no factor and an isotropic psi, every entry tr(c)/d (which
 * coordinates a handful of rows never vary on is not sent). */
static int capped_factor(const double *wsc, double n, size_t d, size_t q, size_t qe, double *u, double *psi)
{
    double *ue = qe < q ? pft_alloc_array(d * qe + 1, sizeof *ue) : u;
    if (!ue)
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    int rc = pft_gstat_lowrank_shared_scatter(wsc, (int)d, n, (int)qe, ue, psi);
    double tr = 0;
    for (size_t r = 0; rc == 0 && qe == 0 && r < d; r++)
        tr += psi[r];
    for (size_t r = 0; rc == 0 && qe == 0 && r < d; r++)
        psi[r] = tr / (double)d;
    if (ue != u) {
        for (size_t r = 0; r < d; r++)
            for (size_t j = 0; j < q; j++)
                u[r * q + j] = j < qe ? ue[r * qe + j] : 0.0;
        pft_free(ue);
    }
    return rc;
}

/* Whether the caller set part pi's release at the rank it sends (pft_bundle_set_part_release). */
static int released(const pft_bundle_t *self, int pi)
{
    const pft_bundle__part_t *p = &self->parts[pi];
    return self->shared_rank > 0 && p->rel_u && p->rel_q == pft_bundle_part_sent_rank(self, pi);
}

/* Writes the shared covariance w/n (w: d×d scatter) in low-rank form [q, psi, U]: the rank-q factor U (d×q,
 * row-major) and the diagonal psi of pft_gstat_lowrank_shared (or the caller's, set at that rank), in dtype;
 * a part with a rank cap below q sends only that many eigenpairs (the other columns zero, its psi the rest of
 * the diagonal). */
static int put_shared_lowrank(const pft_bundle_t *self, int pi, const double *wsc, double n,
                              msgpack_packer *pk, wbuf_t *w)
{
    size_t d = (size_t)self->d, q = (size_t)self->shared_rank, es = pft_bundle__dtype_size(self->dtype);
    const pft_bundle__part_t *p = &self->parts[pi];
    size_t qe = (size_t)pft_bundle_part_sent_rank(self, pi);
    int given = released(self, pi); /* the caller's release (pft_bundle_set_part_release) */
    double *u = pft_alloc_array(d * q, sizeof *u), *psi = pft_alloc_array(d, sizeof *psi);
    int rc = u && psi ? 0 : pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t r = 0; rc == 0 && given && r < d; r++)
        for (size_t j = 0; j < q; j++)
            u[r * q + j] = j < qe ? p->rel_u[r * qe + j] : 0.0;
    if (rc == 0 && given)
        memcpy(psi, p->rel_psi, d * sizeof *psi);
    if (rc == 0 && !given && (rc = capped_factor(wsc, n, d, q, qe, u, psi))) {
        char name[160];
        pft_bundle__part_name(&self->parts[pi], pi, name, sizeof name);
        rc = pft_err_wrap(rc, "bundle encode: %s: shared covariance of rank %zu", name, qe);
    }
    if (rc == 0 && (msgpack_pack_array(pk, 3) || msgpack_pack_uint64(pk, q) || msgpack_pack_bin(pk, d * es) ||
                    wbuf_reserve(w, d * es)))
        rc = pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    for (size_t r = 0; rc == 0 && r < d; r++)
        if (put_value(w->buf + w->len, r, psi[r], self->dtype, 1)) {
            char what[48];
            snprintf(what, sizeof what, "shared psi[%zu]", r);
            rc = part_range_err(self, pi, -1, what, psi[r]);
        }
    if (rc == 0) {
        w->len += d * es;
        if (msgpack_pack_bin(pk, d * q * es) || wbuf_reserve(w, d * q * es))
            rc = pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    }
    for (size_t i = 0; rc == 0 && i < d * q; i++)
        if (put_value(w->buf + w->len, i, u[i], self->dtype, 0)) {
            char what[64];
            snprintf(what, sizeof what, "shared factor[%zu][%zu]", i / q, i % q);
            rc = part_range_err(self, pi, -1, what, u[i]);
        }
    if (rc == 0)
        w->len += d * q * es;
    pft_free(u);
    pft_free(psi);
    return rc;
}

/* n words from src as a bin of 8n little-endian bytes. */
static int put_words(const uint64_t *src, size_t n, msgpack_packer *pk, wbuf_t *w)
{
    if (msgpack_pack_bin(pk, 8 * n) || wbuf_reserve(w, 8 * n))
        return 1;
    for (size_t i = 0; i < n; i++)
        le_put_u64(w->buf + w->len + 8 * i, src[i]);
    w->len += 8 * n;
    return 0;
}

/* Writes masked part pi (docs/SECAGG.md §8): [kind, contributors, classes ([label, n, sum] tied, [label, n,
 * sum, s2] full; words), shared (tied: words; full: nil), [label, opener, f, bound, div]]. */
static int encode_masked_part(const pft_bundle_t *self, int pi, msgpack_packer *pk, wbuf_t *w)
{
    const pft_bundle__part_t *p = &self->parts[pi];
    size_t d = (size_t)self->d, tri = d * (d + 1) / 2;
    int full = p->kind == PFT_GSTAT_FULL;
    int fail = msgpack_pack_array(pk, PFT_BUNDLE__N_MASKED_PART_FIELDS) ||
               msgpack_pack_uint64(pk, (uint64_t)p->kind) || msgpack_pack_array(pk, (size_t)p->n_contrib);
    for (int j = 0; !fail && j < p->n_contrib; j++)
        fail = msgpack_pack_str_with_body(pk, p->contrib[j], strlen(p->contrib[j]));
    fail = fail || msgpack_pack_array(pk, (size_t)p->n_classes);
    size_t o = 0;
    for (int c = 0; !fail && c < p->n_classes; c++) {
        fail =
            msgpack_pack_array(pk, full ? PFT_BUNDLE__N_STAT_FIELDS_FULL : PFT_BUNDLE__N_STAT_FIELDS_TIED) ||
            msgpack_pack_int64(pk, p->labels[c]) || msgpack_pack_uint64(pk, p->counts[c]) ||
            put_words(p->words + o, d, pk, w);
        o += d;
        if (!fail && full) {
            fail = put_words(p->words + o, tri, pk, w);
            o += tri;
        }
    }
    fail = fail || (full ? msgpack_pack_nil(pk) : put_words(p->words + o, tri, pk, w));
    const pft_bundle_mask_t *m = &p->mask;
    fail = fail || msgpack_pack_array(pk, PFT_BUNDLE__N_MASK_FIELDS + (m->shares_len > 0)) ||
           msgpack_pack_str_with_body(pk, m->label, strlen(m->label)) ||
           msgpack_pack_str_with_body(pk, m->opener, strlen(m->opener)) ||
           msgpack_pack_uint64(pk, (uint64_t)m->frac_bits) || msgpack_pack_uint64(pk, m->bound) ||
           msgpack_pack_uint64(pk, m->div);
    if (!fail && m->shares_len) /* double masking: the contributor's encrypted shares (opaque) */
        fail = msgpack_pack_bin_with_body(pk, m->shares, m->shares_len);
    return fail ? pft_err(PFT_ENOMEM, "bundle encode: out of memory") : 0;
}

/* Writes part pi: [kind, contributors, classes ([label, n, mean, cov] or [label, n, mean]), shared] (shared:
 * nil, the dense lower triangle, or [q, psi, U] with a shared rank q > 0). */
static int encode_part(const pft_bundle_t *self, int pi, msgpack_packer *pk, wbuf_t *w)
{
    const pft_bundle__part_t *p = &self->parts[pi];
    if (p->masked)
        return encode_masked_part(self, pi, pk, w);
    if (p->taken)
        return pft_err(PFT_EINVAL, "bundle encode: part %d's statistics were handed over", pi);
    const pft_gstat_t *st = p->st;
    pft_gstat_kind_t kind = pft_gstat_kind(st);
    size_t d = (size_t)self->d, es = pft_bundle__dtype_size(self->dtype);
    int ncl = pft_gstat_n_classes(st);
    int fail = msgpack_pack_array(pk, PFT_BUNDLE__N_PART_FIELDS) || msgpack_pack_uint64(pk, (uint64_t)kind) ||
               msgpack_pack_array(pk, (size_t)p->n_contrib);
    for (int j = 0; !fail && j < p->n_contrib; j++)
        fail = msgpack_pack_str_with_body(pk, p->contrib[j], strlen(p->contrib[j]));
    fail = fail || msgpack_pack_array(pk, (size_t)ncl);
    for (int c = 0; !fail && c < ncl; c++) {
        const double *mu = pft_gstat_mean(st, c);
        fail = msgpack_pack_array(pk, kind == PFT_GSTAT_FULL ? PFT_BUNDLE__N_STAT_FIELDS_FULL
                                                             : PFT_BUNDLE__N_STAT_FIELDS_TIED) ||
               msgpack_pack_int64(pk, pft_gstat_label(st, c)) ||
               msgpack_pack_uint64(pk, pft_gstat_count(st, c)) || msgpack_pack_bin(pk, d * es) ||
               wbuf_reserve(w, d * es);
        if (fail)
            break;
        for (size_t j = 0; j < d; j++)
            if (put_value(w->buf + w->len, j, mu[j], self->dtype, 0)) {
                char what[48];
                snprintf(what, sizeof what, "mean[%zu]", j);
                return part_range_err(self, pi, c, what, mu[j]);
            }
        w->len += d * es;
        if (kind == PFT_GSTAT_FULL) {
            int rc = put_cov(self, pi, c, pft_gstat_scatter(st, c), (double)pft_gstat_count(st, c), pk, w);
            if (rc)
                return rc;
        }
    }
    if (fail)
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    if (kind == PFT_GSTAT_FULL)
        return msgpack_pack_nil(pk) ? pft_err(PFT_ENOMEM, "bundle encode: out of memory") : 0;
    if (!pft_gstat_tied_scatter(st) && !released(self, pi)) { /* pft_bundle_take_part_scatter, no release */
        char name[160];
        pft_bundle__part_name(p, pi, name, sizeof name);
        return pft_err(PFT_EINVAL, "bundle encode: %s: its scatter was handed over and no release was set", name);
    }
    if (self->shared_rank > 0)
        return put_shared_lowrank(self, pi, pft_gstat_tied_scatter(st), (double)pft_gstat_total(st), pk, w);
    return put_cov(self, pi, -1, pft_gstat_tied_scatter(st), (double)pft_gstat_total(st), pk, w);
}

/* The provenance, payload element 6: per node [node, counts] (+ dp, + evidence; without its α under a shared
 * grid); nonzero if out of memory. */
static int put_provenance(const pft_bundle_t *self, int grid, msgpack_packer *pk)
{
    int fail = msgpack_pack_array(pk, (size_t)self->n_prov);
    for (int i = 0; !fail && i < self->n_prov; i++) {
        const pft_bundle__prov_t *e = &self->prov[i];
        fail = msgpack_pack_array(pk, e->ev           ? 4
                                      : e->dp_eps > 0 ? 3
                                                      : 2) ||
               msgpack_pack_str_with_body(pk, e->node, strlen(e->node)) ||
               msgpack_pack_array(pk, (size_t)e->n);
        for (int j = 0; !fail && j < e->n; j++)
            fail = msgpack_pack_array(pk, 2) || msgpack_pack_int64(pk, e->pairs[j].label) ||
                   msgpack_pack_uint64(pk, e->pairs[j].count);
        if (!fail && e->dp_eps > 0) { /* DP guarantee: 16 bytes, eps and delta as little-endian binary64 */
            uint8_t g[16];
            le_put_f64(g, e->dp_eps);
            le_put_f64(g + 8, e->dp_delta);
            fail = msgpack_pack_bin_with_body(pk, g, sizeof g);
        } else if (!fail && e->ev) {
            fail = msgpack_pack_nil(pk);
        }
        if (!fail && e->ev)
            fail = put_evidence(pk, e, grid);
    }
    return fail;
}

/* The topology fingerprint, payload element 9: [fp: bin(32), items: array of [name: str, digest: bin(8)]]. */
static int put_fingerprint(const pft_bundle_t *self, msgpack_packer *pk)
{
    int fail = msgpack_pack_array(pk, 2) || msgpack_pack_bin_with_body(pk, self->fp, PFT_BUNDLE_FP_LEN) ||
               msgpack_pack_array(pk, self->n_fp_items);
    for (size_t i = 0; !fail && i < self->n_fp_items; i++) {
        const pft_bundle_fp_item_t *it = &self->fp_items[i];
        fail = msgpack_pack_array(pk, 2) || msgpack_pack_str_with_body(pk, it->name, strlen(it->name)) ||
               msgpack_pack_bin_with_body(pk, it->digest, PFT_BUNDLE_FP_DIGEST_LEN);
    }
    return fail;
}

int pft_bundle_encode_payload(const pft_bundle_t *self, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (self->payload) {
        uint8_t *copy = pft_alloc(self->payload_len);
        if (!copy)
            return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
        memcpy(copy, self->payload, self->payload_len);
        *buf = copy;
        *len = self->payload_len;
        return 0;
    }
    int rc = pft_bundle__check_counts(self, PFT_EINVAL, "bundle encode");
    if (rc)
        return rc;
    wbuf_t w = {0};
    if (wbuf_reserve(&w, pft_bundle_formula_bytes(self) + 1024 + (size_t)self->n_prov * 96 +
                             (size_t)self->n_parents * 34 + (size_t)self->n_classes * 128 +
                             self->n_fp_items * (PFT_BUNDLE_FP_NAME_MAX + 16)))
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
    int grid = self->has_fp ? pft_bundle__shared_grid(self) : -1; /* the α once, not once per contributor */
    int fail = msgpack_pack_array(&pk, grid >= 0       ? PFT_BUNDLE__N_PAYLOAD_FIELDS_GRID
                                       : self->has_fp  ? PFT_BUNDLE__N_PAYLOAD_FIELDS_FP
                                       : self->n_parts ? PFT_BUNDLE__N_PAYLOAD_FIELDS_STATS
                                                       : PFT_BUNDLE__N_PAYLOAD_FIELDS) ||
               msgpack_pack_str_with_body(&pk, self->run_id, strlen(self->run_id)) ||
               msgpack_pack_str_with_body(&pk, self->producer, strlen(self->producer)) ||
               msgpack_pack_uint64(&pk, self->flags) || msgpack_pack_uint64(&pk, (uint64_t)self->dtype) ||
               msgpack_pack_uint64(&pk, (uint64_t)self->d) ||
               msgpack_pack_array(&pk, (size_t)self->n_parents);
    for (int i = 0; !fail && i < self->n_parents; i++)
        fail = msgpack_pack_bin_with_body(&pk, self->parents[i], PFT_BUNDLE_ID_LEN);
    fail = fail || put_provenance(self, grid >= 0, &pk);
    fail = fail || msgpack_pack_array(&pk, (size_t)self->n_classes);
    if (fail) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    }
    for (int i = 0; i < self->n_classes; i++) {
        rc = encode_class(self, i, &pk, &w);
        if (rc) {
            pft_free(w.buf);
            return rc;
        }
    }
    if ((self->n_parts || self->has_fp) && msgpack_pack_array(&pk, (size_t)self->n_parts)) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    }
    for (int i = 0; i < self->n_parts; i++) {
        rc = encode_part(self, i, &pk, &w);
        if (rc) {
            pft_free(w.buf);
            return rc;
        }
    }
    if ((self->has_fp && put_fingerprint(self, &pk)) || (grid >= 0 && put_grid(self, grid, &pk))) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "bundle encode: out of memory");
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

/* ---------- the envelope ---------- */

int pft_envelope_pack(const uint8_t *payload, size_t payload_len, const uint8_t *sig, size_t sig_len,
                      uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (sig_len > PFT_BUNDLE_MAX_SIG || (sig_len && !sig) || (payload_len && !payload))
        return pft_err(PFT_EINVAL, "envelope: bad arguments (signature %zu bytes, at most %d)", sig_len,
                       PFT_BUNDLE_MAX_SIG);
    wbuf_t w = {0};
    if (wbuf_reserve(&w, payload_len + sig_len + 32))
        return pft_err(PFT_ENOMEM, "envelope: out of memory");
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
    int fail = msgpack_pack_array(&pk, 4) || msgpack_pack_str_with_body(&pk, PFT_BUNDLE_MAGIC, 4) ||
               msgpack_pack_uint64(&pk, PFT_BUNDLE_VERSION) ||
               msgpack_pack_bin_with_body(&pk, payload, payload_len) ||
               (sig_len ? msgpack_pack_bin_with_body(&pk, sig, sig_len) : msgpack_pack_nil(&pk));
    if (fail) {
        pft_free(w.buf);
        return pft_err(PFT_ENOMEM, "envelope: out of memory");
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

int pft_bundle_payload(pft_bundle_t *self, const uint8_t **payload, size_t *len)
{
    *payload = NULL;
    *len = 0;
    if (!self->payload) {
        uint8_t *buf = NULL;
        size_t n = 0;
        int rc = pft_bundle_encode_payload(self, &buf, &n);
        if (rc)
            return rc;
        self->payload = buf;
        self->payload_len = n;
        pft_bundle_hash(buf, n, self->id);
    }
    *payload = self->payload;
    *len = self->payload_len;
    return 0;
}

int pft_bundle_encode(const pft_bundle_t *self, uint8_t **buf, size_t *len)
{
    if (self->payload)
        return pft_envelope_pack(self->payload, self->payload_len, self->sig_len ? self->sig : NULL,
                                 self->sig_len, buf, len);
    uint8_t *payload = NULL;
    size_t plen = 0;
    int rc = pft_bundle_encode_payload(self, &payload, &plen);
    if (rc)
        return rc;
    rc = pft_envelope_pack(payload, plen, self->sig_len ? self->sig : NULL, self->sig_len, buf, len);
    pft_free(payload);
    return rc;
}

/* ---------- ids ---------- */

void pft_bundle_hash(const uint8_t *payload, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    crypto_generichash(id, PFT_BUNDLE_ID_LEN, payload, len, NULL, 0);
}

int pft_bundle_id(const pft_bundle_t *self, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    if (self->payload) {
        memcpy(id, self->id, PFT_BUNDLE_ID_LEN);
        return 0;
    }
    uint8_t *payload = NULL;
    size_t plen = 0;
    int rc = pft_bundle_encode_payload(self, &payload, &plen);
    if (rc)
        return rc;
    pft_bundle_hash(payload, plen, id);
    pft_free(payload);
    return 0;
}

char *pft_bundle_id_hex(const uint8_t id[PFT_BUNDLE_ID_LEN], char out[2 * PFT_BUNDLE_ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < PFT_BUNDLE_ID_LEN; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    out[2 * PFT_BUNDLE_ID_LEN] = '\0';
    return out;
}
