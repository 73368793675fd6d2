/* pft_bundle_masked: masked statistics parts (docs/SECAGG.md §8): their layout, the mask's checks, adding one
 * to a bundle. */
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_fixed.h"

size_t pft_bundle_masked_words(pft_gstat_kind_t kind, int n_classes, int d)
{
    size_t k = (size_t)n_classes, dd = (size_t)d, tri = dd * (dd + 1) / 2;
    return kind == PFT_GSTAT_FULL ? k * (dd + tri) : k * dd + tri;
}

/* ---------- the mask ---------- */

int pft_bundle__label_ok(const char *s, size_t n)
{
    if (n < 1 || n > PFT_BUNDLE_MASK_LABEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

int pft_bundle__mask_ok(const pft_bundle_mask_t *m, const pft_bundle__part_t *p)
{
    if (!pft_bundle__label_ok(m->label, strnlen(m->label, PFT_BUNDLE_MASK_LABEL_MAX + 1)))
        return pft_err(PFT_EINVAL, "mask: label: 1..%d bytes without control bytes",
                       PFT_BUNDLE_MASK_LABEL_MAX);
    size_t on = strnlen(m->opener, PFT_BUNDLE_MAX_NAME + 1);
    if (!pft_bundle__name_ok(m->opener, on))
        return pft_err(PFT_EINVAL, "mask: opener: node ids are 1..%d bytes without control characters",
                       PFT_BUNDLE_MAX_NAME);
    if (pft_bundle__part_find(p, m->opener) >= 0)
        return pft_err(PFT_EINVAL, "mask: opener '%s' is a contributor of the part it opens", m->opener);
    if (m->frac_bits != PFT_FIXED_FRAC_BITS)
        return pft_err(PFT_EINVAL, "mask: %d fractional bits, only %d is defined", m->frac_bits,
                       PFT_FIXED_FRAC_BITS);
    if (m->bound < 1 || (double)m->bound > PFT_FIXED_TOTAL_MAX)
        return pft_err(PFT_EINVAL, "mask: bound %llu outside 1..2^31 - 1", (unsigned long long)m->bound);
    if (m->shares_len > PFT_BUNDLE_MASK_SHARES_MAX || (m->shares_len > 0) != (m->shares != NULL))
        return pft_err(PFT_EINVAL, "mask: shares of %zu bytes (at most %zu)", m->shares_len,
                       PFT_BUNDLE_MASK_SHARES_MAX);
    if (m->shares_len && p->n_contrib != 1)
        return pft_err(PFT_EINVAL, "mask: shares on a part of %d contributors (one contributor's only)",
                       p->n_contrib);
    return 0;
}

/* ---------- adding ---------- */

/* The layout of a masked part: 1..65536 classes, labels ≥ 0 strictly ascending, counts ≤ 2^48. */
static int layout_ok(int n_classes, const int *labels, const uint64_t *counts)
{
    if (n_classes < 1 || n_classes > 65536 || !labels || !counts)
        return pft_err(PFT_EINVAL, "bundle: add_masked_part: %d classes, expected 1..65536", n_classes);
    for (int c = 0; c < n_classes; c++) {
        if (labels[c] < 0 || (c > 0 && labels[c] <= labels[c - 1]))
            return pft_err(PFT_EINVAL,
                           "bundle: add_masked_part: class %d: label %d (≥ 0, strictly ascending)", c,
                           labels[c]);
        if (counts[c] > PFT_BUNDLE_MAX_COUNT)
            return pft_err(PFT_EINVAL,
                           "bundle: add_masked_part: class %d (label %d): count %llu exceeds 2^48", c,
                           labels[c], (unsigned long long)counts[c]);
    }
    return 0;
}

int pft_bundle_add_masked_part(pft_bundle_t *self, const char *const *contributors, int n_contrib,
                               pft_gstat_kind_t kind, int n_classes, const int *labels,
                               const uint64_t *counts, uint64_t **words_p, const pft_bundle_mask_t *mask)
{
    if (!self || !words_p || !*words_p || !mask || (kind != PFT_GSTAT_FULL && kind != PFT_GSTAT_TIED))
        return pft_err(PFT_EINVAL, "bundle: add_masked_part: NULL argument or unknown kind");
    int rc = layout_ok(n_classes, labels, counts);
    if (rc || (rc = pft_bundle__part_args_ok(self, contributors, n_contrib, kind)))
        return rc;
    pft_bundle__part_t p = {.rank_cap = -1,
                            .masked = 1,
                            .kind = kind,
                            .n_classes = n_classes,
                            .n_words = pft_bundle_masked_words(kind, n_classes, self->d),
                            .mask = *mask};
    /* the opener check needs the contributors: a temporary view of them */
    p.contrib = (char **)contributors;
    p.n_contrib = n_contrib;
    rc = pft_bundle__mask_ok(mask, &p);
    p.contrib = NULL;
    p.n_contrib = 0;
    if (rc)
        return pft_err_wrap(rc, "bundle: add_masked_part");
    p.labels = pft_alloc_array((size_t)n_classes, sizeof *p.labels);
    p.counts = pft_alloc_array((size_t)n_classes, sizeof *p.counts);
    p.shares = mask->shares_len ? pft_alloc(mask->shares_len) : NULL;
    p.mask.shares = p.shares;
    if (!p.labels || !p.counts || (mask->shares_len && !p.shares))
        rc = pft_err(PFT_ENOMEM, "bundle: out of memory");
    else {
        if (p.shares)
            memcpy(p.shares, mask->shares, mask->shares_len);
        memcpy(p.labels, labels, (size_t)n_classes * sizeof *labels);
        memcpy(p.counts, counts, (size_t)n_classes * sizeof *counts);
        p.words = *words_p;
        rc = pft_bundle__part_insert(self, contributors, n_contrib, &p);
    }
    if (rc) {
        pft_free(p.labels);
        pft_free(p.counts);
        pft_free(p.shares);
        return rc;
    }
    *words_p = NULL;
    return 0;
}

/* ---------- accessors ---------- */

int pft_bundle_part_is_masked(const pft_bundle_t *self, int i)
{
    return self->parts[i].masked;
}

const pft_bundle_mask_t *pft_bundle_part_mask(const pft_bundle_t *self, int i)
{
    return self->parts[i].masked ? &self->parts[i].mask : NULL;
}

const uint64_t *pft_bundle_part_words(const pft_bundle_t *self, int i, size_t *n)
{
    *n = self->parts[i].masked ? self->parts[i].n_words : 0;
    return self->parts[i].masked ? self->parts[i].words : NULL;
}

pft_gstat_kind_t pft_bundle_part_kind(const pft_bundle_t *self, int i)
{
    return pft_bundle__part_kind(&self->parts[i]);
}

int pft_bundle_part_n_classes(const pft_bundle_t *self, int i)
{
    return pft_bundle__part_n_classes(&self->parts[i]);
}

void pft_bundle_part_class(const pft_bundle_t *self, int i, int k, int *label, uint64_t *count)
{
    *label = pft_bundle__part_label(&self->parts[i], k);
    *count = pft_bundle__part_count(&self->parts[i], k);
}
