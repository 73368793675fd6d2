/* pft_bundle_decode_masked: a masked statistics part (docs/SECAGG.md §8): its layout, public counts, words
 * and mask, every length exact. Nothing can be checked about the words themselves (they are uniform without
 * the pair secrets); they are checked when opened (pft_fixed_decode with the mask's bound). */
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_decode_internal.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_fixed.h"

static void get_words(const msgpack_object *o, uint64_t *dst, size_t n)
{
    const uint8_t *p = (const uint8_t *)o->via.bin.ptr;
    for (size_t i = 0; i < n; i++) {
        uint64_t u = 0;
        for (int k = 7; k >= 0; k--)
            u = (u << 8) | p[8 * i + (size_t)k];
        dst[i] = u;
    }
}

/* The mask array o into m (then checked against the part's contributors). */
static int decode_mask(const ctx_t *c, const msgpack_object *o, pft_bundle__part_t *p, pft_bundle_mask_t *m)
{
    int rc = pft_bundle__want_array(c, o, "mask", PFT_BUNDLE__N_MASK_FIELDS, PFT_BUNDLE__N_MASK_FIELDS + 1,
                                    PFT_EFORMAT);
    if (rc)
        return rc;
    const msgpack_object *f = o->via.array.ptr;
    if (f[0].type != MSGPACK_OBJECT_STR || f[0].via.str.size < 1 ||
        f[0].via.str.size > PFT_BUNDLE_MASK_LABEL_MAX)
        return pft_bundle__bad(c, PFT_EFORMAT, "mask: label: expected str of 1..%d bytes",
                               PFT_BUNDLE_MASK_LABEL_MAX);
    memcpy(m->label, f[0].via.str.ptr, f[0].via.str.size);
    m->label[f[0].via.str.size] = '\0';
    if (strlen(m->label) != f[0].via.str.size)
        return pft_bundle__bad(c, PFT_EFORMAT, "mask: label holds a NUL byte");
    uint64_t fb, bound, div;
    if ((rc = pft_bundle__want_name(c, &f[1], "mask: opener", m->opener)) ||
        (rc = pft_bundle__want_uint(c, &f[2], "mask: fractional bits", PFT_FIXED_FRAC_BITS,
                                    PFT_FIXED_FRAC_BITS, PFT_EFORMAT, &fb)) ||
        (rc = pft_bundle__want_uint(c, &f[3], "mask: bound", 1, (uint64_t)PFT_FIXED_TOTAL_MAX, PFT_EFORMAT,
                                    &bound)) ||
        (rc = pft_bundle__want_uint(c, &f[4], "mask: noise divisor", 0, UINT32_MAX, PFT_EFORMAT, &div)))
        return rc;
    m->frac_bits = (int)fb;
    m->bound = bound;
    m->div = (uint32_t)div;
    if (o->via.array.size > PFT_BUNDLE__N_MASK_FIELDS) { /* double masking: encrypted shares, opaque */
        const msgpack_object *s = &f[PFT_BUNDLE__N_MASK_FIELDS];
        if (s->type != MSGPACK_OBJECT_BIN || s->via.bin.size < 1 ||
            s->via.bin.size > PFT_BUNDLE_MASK_SHARES_MAX)
            return pft_bundle__bad(c, PFT_EFORMAT, "mask: shares: expected bin of 1..%zu bytes",
                                   PFT_BUNDLE_MASK_SHARES_MAX);
        uint8_t *sh = pft_alloc(s->via.bin.size);
        if (!sh)
            return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
        memcpy(sh, s->via.bin.ptr, s->via.bin.size);
        pft_free(p->shares);
        p->shares = sh;
        m->shares = sh;
        m->shares_len = s->via.bin.size;
    }
    if ((rc = pft_bundle__mask_ok(m, p)))
        return pft_bundle__bad(c, PFT_EFORMAT, "%s", pft_errmsg());
    return 0;
}

/* Schema of the classes (array o, size checked): [label, n, sum] (tied) or [label, n, sum, s2] (full), labels
 * strictly ascending, n 0..2^48, bins of exactly 8d and 8·d(d+1)/2 bytes. */
static int masked_shapes(const ctx_t *c, const pft_bundle_t *b, pft_gstat_kind_t kind,
                         const msgpack_object *o, const msgpack_object *shared)
{
    uint64_t d = (uint64_t)b->d, tri = d * (d + 1) / 2;
    int full = kind == PFT_GSTAT_FULL;
    uint32_t nf = full ? PFT_BUNDLE__N_STAT_FIELDS_FULL : PFT_BUNDLE__N_STAT_FIELDS_TIED;
    uint64_t prev = 0;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        char field[64];
        uint64_t label, n;
        int rc = pft_bundle__class_head(c, &o->via.array.ptr[i], i, nf, 0, &prev, &label, &n);
        if (rc)
            return rc;
        const msgpack_object *f = o->via.array.ptr[i].via.array.ptr;
        snprintf(field, sizeof field, "class %u (label %d): masked sum", i, (int)label);
        if ((rc = pft_bundle__want_bin(c, &f[2], field, 8 * d)))
            return rc;
        snprintf(field, sizeof field, "class %u (label %d): masked second moment", i, (int)label);
        if (full && (rc = pft_bundle__want_bin(c, &f[3], field, 8 * tri)))
            return rc;
    }
    if (!full)
        return pft_bundle__want_bin(c, shared, "masked shared matrix", 8 * tri);
    if (shared->type != MSGPACK_OBJECT_NIL)
        return pft_bundle__bad(c, PFT_EFORMAT, "shared: expected nil for full statistics, got %s",
                               pft_bundle__type_name(shared->type));
    return 0;
}

int pft_bundle__decode_masked(ctx_t *c, pft_bundle_t *b, const pft_bundle_limits_t *lim, int pi,
                              const msgpack_object *f, uint64_t *model_total)
{
    pft_bundle__part_t *p = &b->parts[pi];
    pft_gstat_kind_t kind = (pft_gstat_kind_t)f[0].via.u64;
    int rc = masked_shapes(c, b, kind, &f[2], &f[3]);
    if (rc || (rc = decode_mask(c, &f[4], p, &p->mask)))
        return rc;
    uint32_t ncl = f[2].via.array.size;
    size_t d = (size_t)b->d, tri = d * (d + 1) / 2;
    size_t nw = pft_bundle_masked_words(kind, (int)ncl, b->d);
    uint64_t bytes = 8 * (uint64_t)nw + 12 * (uint64_t)ncl;
    if (bytes > lim->max_model_bytes - *model_total)
        return pft_bundle__bad(c, PFT_ERANGE, "decoded models would exceed the limit of %zu bytes",
                               lim->max_model_bytes);
    *model_total += bytes;
    p->masked = 1;
    p->kind = kind;
    p->labels = pft_alloc_array(ncl, sizeof *p->labels);
    p->counts = pft_alloc_array(ncl, sizeof *p->counts);
    p->words = pft_alloc_array(nw, sizeof *p->words);
    if (!p->labels || !p->counts || !p->words)
        return pft_bundle__bad(c, PFT_ENOMEM, "out of memory");
    p->n_classes = (int)ncl;
    p->n_words = nw;
    size_t o = 0;
    for (uint32_t i = 0; i < ncl; i++) {
        const msgpack_object *e = f[2].via.array.ptr[i].via.array.ptr;
        p->labels[i] = (int)e[0].via.u64;
        p->counts[i] = e[1].via.u64;
        get_words(&e[2], p->words + o, d);
        o += d;
        if (kind == PFT_GSTAT_FULL) {
            get_words(&e[3], p->words + o, tri);
            o += tri;
        }
    }
    if (kind == PFT_GSTAT_TIED)
        get_words(&f[3], p->words + o, tri);
    return 0;
}
