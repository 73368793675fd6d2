/* pft_bundle_decode_stats: the statistics parts of a bundle (docs/WIRE.md §2.1): contributors, per-class
 * counts and means, covariances (dense, or the tied part's rank-q factor plus diagonal), each checked before
 * the statistics are built. */
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_decode_internal.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_gstat_lowrank.h"

/* ---------- statistics parts ---------- */

/* Relative precision of a dtype number (the PSD check's tolerance). */
static double dtype_eps(pft_dtype_t dt)
{
    return dt == PFT_DTYPE_F16 ? 0x1p-11 : 0x1p-24;
}

/* The contributors (array o, size checked) of part pi into p: node ids strictly ascending, the part after the
 * previous one (first contributors strictly ascending). */
static int decode_contributors(ctx_t *c, const pft_bundle_t *b, int pi, const msgpack_object *o,
                               pft_bundle__part_t *p)
{
    uint32_t n = o->via.array.size;
    p->contrib = pft_calloc(n, sizeof *p->contrib);
    if (!p->contrib)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < n; j++) {
        char node[PFT_BUNDLE_MAX_NAME + 1], field[48];
        snprintf(field, sizeof field, "contributor %u", j);
        int rc = pft_bundle__want_name(c, &o->via.array.ptr[j], field, node);
        if (rc)
            return rc;
        if (j > 0 && strcmp(node, p->contrib[j - 1]) <= 0)
            return pft_bundle__bad(c, PFT_EFORMAT, "contributor '%s' not after '%s' (sorted, unique)", node,
                                   p->contrib[j - 1]);
        if (!(p->contrib[j] = pft_strdup(node)))
            return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
        p->n_contrib = (int)j + 1;
    }
    pft_bundle__part_name(p, pi, c->where, sizeof c->where);
    if (pi > 0 && strcmp(p->contrib[0], b->parts[pi - 1].contrib[0]) <= 0)
        return pft_bundle__bad(c, PFT_EFORMAT, "first contributor not after part %d's '%s' (parts sorted)",
                               pi - 1, b->parts[pi - 1].contrib[0]);
    return 0;
}

/* Schema of a tied part's shared field: a bin (the dense lower triangle; *rank = 0) or [q, psi, U] with q in
 * 1..d-1 and bins of d and d·q numbers (*rank = q). */
static int shared_shape(const ctx_t *c, const pft_bundle_t *b, const msgpack_object *shared, uint64_t *rank)
{
    uint64_t d = (uint64_t)b->d, es = pft_bundle__dtype_size(b->dtype);
    *rank = 0;
    if (shared->type != MSGPACK_OBJECT_ARRAY)
        return pft_bundle__want_bin(c, shared, "shared covariance", d * (d + 1) / 2 * es);
    int rc = pft_bundle__want_array(c, shared, "shared covariance (low rank)", 3, 3, PFT_EFORMAT);
    if (rc ||
        (rc = pft_bundle__want_uint(c, &shared->via.array.ptr[0], "shared covariance: rank", 1, d - 1,
                                    PFT_EFORMAT, rank)) ||
        (rc = pft_bundle__want_bin(c, &shared->via.array.ptr[1], "shared covariance: psi", d * es)) ||
        (rc =
             pft_bundle__want_bin(c, &shared->via.array.ptr[2], "shared covariance: factor", d * *rank * es)))
        return rc;
    return 0;
}

/* Schema of the classes (array o, size checked) and the shared field of a part of this kind: element counts,
 * labels strictly ascending, counts, bin lengths; the part's total count into *total, the shared field's
 * rank into *rank (0: dense or full). Nothing allocated. */
static int stat_shapes(const ctx_t *c, const pft_bundle_t *b, pft_gstat_kind_t kind, const msgpack_object *o,
                       const msgpack_object *shared, double *total, uint64_t *rank)
{
    *rank = 0;
    uint64_t d = (uint64_t)b->d, es = pft_bundle__dtype_size(b->dtype), tri = d * (d + 1) / 2;
    uint32_t nf = kind == PFT_GSTAT_FULL ? PFT_BUNDLE__N_STAT_FIELDS_FULL : PFT_BUNDLE__N_STAT_FIELDS_TIED;
    uint64_t prev = 0;
    *total = 0;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        char field[64];
        uint64_t label, n;
        int rc = pft_bundle__class_head(c, &o->via.array.ptr[i], i, nf, 1, &prev, &label, &n);
        if (rc)
            return rc;
        const msgpack_object *f = o->via.array.ptr[i].via.array.ptr;
        *total += (double)n;
        snprintf(field, sizeof field, "class %u (label %d): mean", i, (int)label);
        if ((rc = pft_bundle__want_bin(c, &f[2], field, d * es)))
            return rc;
        snprintf(field, sizeof field, "class %u (label %d): covariance", i, (int)label);
        if (kind == PFT_GSTAT_FULL && (rc = pft_bundle__want_bin(c, &f[3], field, tri * es)))
            return rc;
    }
    if (kind == PFT_GSTAT_TIED)
        return shared_shape(c, b, shared, rank);
    if (shared->type != MSGPACK_OBJECT_NIL)
        return pft_bundle__bad(c, PFT_EFORMAT, "shared covariance: expected nil for full statistics, got %s",
                               pft_bundle__type_name(shared->type));
    return 0;
}

/* A covariance (bin src: lower triangle row by row) into the symmetric d×d s, then checked: finite, diagonal
 * ≥ 0, positive semi-definite up to the dtype's rounding; what names it in messages. Scaled by n when valid.
 */
static int read_cov(const ctx_t *c, const uint8_t *src, size_t d, pft_dtype_t dt, const char *what, double n,
                    double *s)
{
    size_t o = 0;
    for (size_t r = 0; r < d; r++)
        for (size_t q = 0; q <= r; q++, o++) {
            double v = pft_bundle__get_value(src, o, dt);
            if (!isfinite(v))
                return pft_bundle__bad(c, PFT_ENUMERIC, "%s[%zu][%zu] = %g is not finite", what, r, q, v);
            if (q == r && v < 0)
                return pft_bundle__bad(c, PFT_ENUMERIC, "%s[%zu][%zu] = %g is negative", what, r, q, v);
            s[r * d + q] = s[q * d + r] = v;
        }
    int rc = pft_gstat_check_psd(s, (int)d, dtype_eps(dt));
    if (rc == PFT_ENOMEM)
        return pft_bundle__bad(c, rc, "out of memory");
    if (rc)
        return pft_bundle__bad(c, rc, "%s is not positive semi-definite (%s)", what, pft_errmsg());
    for (size_t i = 0; i < d * d; i++)
        s[i] *= n;
    return 0;
}

/* A low-rank shared covariance [q, psi, U] (shape checked, q = b->shared_rank) into the symmetric d×d s as
 * n·(U Uᵀ + diag psi): psi finite and ≥ +0, U finite (then positive semi-definite by construction). */
static int read_shared_lowrank(const ctx_t *c, pft_bundle_t *b, int pi, const msgpack_object *shared,
                               double n, double *s)
{
    size_t d = (size_t)b->d, q = (size_t)b->shared_rank;
    const uint8_t *pb = (const uint8_t *)shared->via.array.ptr[1].via.bin.ptr;
    const uint8_t *ub = (const uint8_t *)shared->via.array.ptr[2].via.bin.ptr;
    double *psi = pft_alloc_array(d, sizeof *psi), *u = pft_alloc_array(d * q, sizeof *u);
    int rc = psi && u ? 0 : pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    for (size_t r = 0; rc == 0 && r < d; r++) {
        psi[r] = pft_bundle__get_value(pb, r, b->dtype);
        if (!isfinite(psi[r]))
            rc =
                pft_bundle__bad(c, PFT_ENUMERIC, "shared covariance: psi[%zu] = %g is not finite", r, psi[r]);
        else if (psi[r] < 0 || signbit(psi[r]))
            rc = pft_bundle__bad(c, PFT_ENUMERIC, "shared covariance: psi[%zu] = %g is negative", r, psi[r]);
    }
    for (size_t i = 0; rc == 0 && i < d * q; i++) {
        u[i] = pft_bundle__get_value(ub, i, b->dtype);
        if (!isfinite(u[i]))
            rc = pft_bundle__bad(c, PFT_ENUMERIC, "shared covariance: factor[%zu][%zu] = %g is not finite",
                                 i / q, i % q, u[i]);
    }
    if (rc == 0) {
        pft_gstat_lowrank_expand(u, psi, (int)d, (int)q, s);
        for (size_t i = 0; i < d * d; i++)
            s[i] *= n;
        b->parts[pi].factor = u; /* kept as it travelled: pft_bundle_part_factor */
        b->parts[pi].factor_q = (int)q;
        b->parts[pi].factor_psi = psi;
        u = psi = NULL;
    }
    pft_free(psi);
    pft_free(u);
    return rc;
}

/* The values of the classes (array o, shapes checked) and shared covariance of a part (named part) into st;
 * mean and *s_p: room for d and d×d doubles (a TIED part's shared scatter is made in *s_p, which st then
 * keeps as its W: *s_p NULL). */
static int stat_values(ctx_t *c, pft_bundle_t *b, int pi, const char *part, pft_gstat_t *st,
                       const msgpack_object *o, const msgpack_object *shared, double total, double *mean,
                       double **s_p)
{
    double *s = *s_p;
    size_t d = (size_t)b->d;
    pft_gstat_kind_t kind = pft_gstat_kind(st);
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *f = o->via.array.ptr[i].via.array.ptr;
        int label = (int)f[0].via.u64;
        uint64_t n = f[1].via.u64;
        snprintf(c->where, sizeof c->where, "%s: class %u (label %d)", part, i, label);
        const uint8_t *mb = (const uint8_t *)f[2].via.bin.ptr;
        for (size_t j = 0; j < d; j++) {
            mean[j] = pft_bundle__get_value(mb, j, b->dtype);
            if (!isfinite(mean[j]))
                return pft_bundle__bad(c, PFT_ENUMERIC, "mean[%zu] = %g is not finite", j, mean[j]);
        }
        int rc = 0;
        if (kind == PFT_GSTAT_FULL)
            rc = read_cov(c, (const uint8_t *)f[3].via.bin.ptr, d, b->dtype, "covariance", (double)n, s);
        if (!rc && (rc = pft_gstat_add_class(st, label, n, mean, kind == PFT_GSTAT_FULL ? s : NULL)))
            rc = pft_err_wrap(rc, "bundle decode: %s", c->where);
        if (rc)
            return rc;
    }
    snprintf(c->where, sizeof c->where, "%s", part);
    if (kind == PFT_GSTAT_FULL)
        return 0;
    int rc = b->shared_rank > 0 ? read_shared_lowrank(c, b, pi, shared, total, s)
                                : read_cov(c, (const uint8_t *)shared->via.bin.ptr, d, b->dtype,
                                           "shared covariance", total, s);
    if (!rc && (rc = pft_gstat_set_tied_scatter(st, s_p))) /* no second d×d */
        rc = pft_err_wrap(rc, "bundle decode: %s", c->where);
    return rc;
}

/* Part pi (object o) into b->parts[pi]: schema, memory budget, values, statistics. *n_contrib: contributors
 * so far over all parts (≤ max_nodes). */
static int decode_part(pft_bundle_t *b, const pft_bundle_limits_t *lim, int pi, const msgpack_object *o,
                       uint64_t *model_total, uint64_t *n_contrib, int *rank_set)
{
    ctx_t c;
    snprintf(c.where, sizeof c.where, "part %d", pi);
    int rc = pft_bundle__want_array(&c, o, "entry", PFT_BUNDLE__N_PART_FIELDS,
                                    PFT_BUNDLE__N_MASKED_PART_FIELDS, PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *f = o->via.array.ptr;
    uint64_t kind;
    if ((rc = pft_bundle__want_uint(&c, &f[0], "kind", 0, 1, PFT_EFORMAT, &kind)))
        return rc;
    if (pi > 0 && (pft_gstat_kind_t)kind != pft_bundle__part_kind(&b->parts[0]))
        return pft_bundle__bad(&c, PFT_EFORMAT, "kind %d differs from part 0's kind %d (one kind per bundle)",
                               (int)kind, (int)pft_bundle__part_kind(&b->parts[0]));
    if ((rc = pft_bundle__want_array(&c, &f[1], "contributors", 1, lim->max_nodes, PFT_ERANGE)))
        return rc;
    *n_contrib += f[1].via.array.size;
    if (*n_contrib > lim->max_nodes)
        return pft_bundle__bad(&c, PFT_ERANGE, "more than %u contributors over all parts", lim->max_nodes);
    pft_bundle__part_t *p = &b->parts[pi];
    p->rank_cap = -1;
    b->n_parts = pi + 1;
    if ((rc = decode_contributors(&c, b, pi, &f[1], p)) ||
        (rc = pft_bundle__want_array(&c, &f[2], "classes", 1, lim->max_classes, PFT_ERANGE)))
        return rc;
    p->kind = (pft_gstat_kind_t)kind;
    if (o->via.array.size == PFT_BUNDLE__N_MASKED_PART_FIELDS)
        return pft_bundle__decode_masked(&c, b, lim, pi, f, model_total);
    double total;
    uint64_t rank;
    if ((rc = stat_shapes(&c, b, (pft_gstat_kind_t)kind, &f[2], &f[3], &total, &rank)))
        return rc;
    if (!*rank_set) { /* the first clear part sets the form */
        b->shared_rank = (int)rank;
        *rank_set = 1;
    } else if ((int)rank != b->shared_rank)
        return pft_bundle__bad(&c, PFT_EFORMAT,
                               "shared covariance of rank %d, an earlier part's has %d (one form per bundle)",
                               (int)rank, b->shared_rank);
    /* Estimated memory: means, scatters (per class for full, one for tied), a low-rank factor as it travelled
     * (kept, with its psi), and the transient d×d matrix plus the PSD check's copy (low rank: psi, no PSD
     * check). */
    uint64_t d = (uint64_t)b->d, ncl = f[2].via.array.size;
    uint64_t steady = 8 * ncl * (d + 4) + 8 * d * d * (kind == PFT_GSTAT_FULL ? ncl : 1) +
                      (rank > 0 ? 8 * d * (rank + 1) : 0);
    uint64_t transient = rank > 0 ? 8 * d * d + 8 * d : 16 * d * d + 8 * d;
    if (steady + transient > lim->max_model_bytes - *model_total)
        return pft_bundle__bad(&c, PFT_ERANGE, "decoded models would exceed the limit of %zu bytes",
                               lim->max_model_bytes);
    *model_total += steady;
    double *mean = pft_alloc_array((size_t)d, sizeof *mean), *s = pft_alloc_array((size_t)(d * d), sizeof *s);
    p->st = pft_gstat_new((pft_gstat_kind_t)kind, b->d);
    if (!mean || !s || !p->st)
        rc = pft_bundle__bad(&c, PFT_ENOMEM, "out of memory");
    char part[160];
    pft_bundle__part_name(p, pi, part, sizeof part);
    if (!rc)
        rc = stat_values(&c, b, pi, part, p->st, &f[2], &f[3], total, mean, &s);
    pft_free(mean);
    pft_free(s);
    return rc;
}

/* The parts (array o, 1..max_nodes) into b. */
int pft_bundle__decode_parts(const ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim,
                             const msgpack_object *o)
{
    int rc = pft_bundle__want_array(c, o, "parts", 1, lim->max_nodes, PFT_ERANGE);
    if (rc)
        return rc;
    b->parts = pft_calloc(o->via.array.size, sizeof *b->parts);
    if (!b->parts)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    b->cap_parts = (int)o->via.array.size;
    uint64_t model_total = 0, n_contrib = 0;
    int rank_set = 0;
    for (uint32_t i = 0; i < o->via.array.size; i++)
        if ((rc = decode_part(b, lim, (int)i, &o->via.array.ptr[i], &model_total, &n_contrib, &rank_set)))
            return rc;
    return 0;
}
