/* pft_bundle_fp: the topology fingerprint a bundle carries (set, read, name checks); the codec files pack and
 * check it on the wire. */
#include "pft_bundle.h"

#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"

int pft_bundle__fp_name_ok(const char *s, size_t n)
{
    if (n < 1 || n > PFT_BUNDLE_FP_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* 0 if items[0..n) are valid and strictly ascending, else PFT_EINVAL naming the first bad one. */
static int items_ok(const pft_bundle_fp_item_t *items, size_t n)
{
    if (n > PFT_BUNDLE_FP_MAX_ITEMS)
        return pft_err(PFT_EINVAL, "bundle: fingerprint: %zu items, at most %d", n, PFT_BUNDLE_FP_MAX_ITEMS);
    if (n && !items)
        return pft_err(PFT_EINVAL, "bundle: fingerprint: NULL items");
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(items[i].name, PFT_BUNDLE_FP_NAME_MAX + 1);
        if (!pft_bundle__fp_name_ok(items[i].name, len))
            return pft_err(PFT_EINVAL,
                           "bundle: fingerprint: item %zu: name of 1..%d bytes without control bytes", i,
                           PFT_BUNDLE_FP_NAME_MAX);
        if (i && strcmp(items[i - 1].name, items[i].name) >= 0)
            return pft_err(PFT_EINVAL,
                           "bundle: fingerprint: item %zu ('%s') not after item %zu (sorted, unique)", i,
                           items[i].name, i - 1);
    }
    return 0;
}

int pft_bundle_set_fingerprint(pft_bundle_t *self, const uint8_t *fp, const pft_bundle_fp_item_t *items,
                               size_t n)
{
    if (!self)
        return pft_err(PFT_EINVAL, "bundle: set_fingerprint: NULL bundle");
    pft_bundle_fp_item_t *copy = NULL;
    if (fp) {
        int rc = items_ok(items, n);
        if (rc)
            return rc;
        if (self->has_fp && memcmp(self->fp, fp, PFT_BUNDLE_FP_LEN) == 0 && self->n_fp_items == n &&
            (n == 0 || memcmp(self->fp_items, items, n * sizeof *items) == 0))
            return 0; /* unchanged: the kept payload stays */
        if (n && !(copy = pft_alloc_array(n, sizeof *copy)))
            return pft_err(PFT_ENOMEM, "bundle: out of memory");
        if (n)
            memcpy(copy, items, n * sizeof *copy);
    } else if (!self->has_fp) {
        return 0;
    }
    pft_free(self->fp_items);
    self->fp_items = copy;
    self->n_fp_items = fp ? n : 0;
    self->has_fp = fp != NULL;
    if (fp)
        memcpy(self->fp, fp, PFT_BUNDLE_FP_LEN);
    PFT_FREE(self->payload); /* new bytes, a new id: sign again */
    self->payload_len = 0;
    return 0;
}

const uint8_t *pft_bundle_fingerprint(const pft_bundle_t *self, const pft_bundle_fp_item_t **items, size_t *n)
{
    if (items)
        *items = self->has_fp ? self->fp_items : NULL;
    if (n)
        *n = self->has_fp ? self->n_fp_items : 0;
    return self->has_fp ? self->fp : NULL;
}
