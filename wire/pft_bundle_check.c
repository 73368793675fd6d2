/* pft_bundle_check: the consistency of a bundle's counts and provenance, checked before encoding and after
 * decoding (pft_bundle_internal.h). */
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"

/* ---------- consistency of counts and provenance ---------- */

/* Statistics bundle: each provenance node owned by exactly one part (owner[], -1 for none), every part
 * contributor a provenance node. */
static int check_owners(const pft_bundle_t *self, int rc_code, const char *who, int *owner)
{
    char name[160];
    for (int p = 0; p < self->n_prov; p++)
        owner[p] = -1;
    for (int i = 0; i < self->n_parts; i++) {
        const pft_bundle__part_t *pt = &self->parts[i];
        for (int j = 0; j < pt->n_contrib; j++) {
            int p = pft_bundle__prov_find(self, pt->contrib[j]);
            pft_bundle__part_name(pt, i, name, sizeof name);
            if (p < 0)
                return pft_err(rc_code, "%s: %s: contributor '%s' is not a provenance node", who, name,
                               pt->contrib[j]);
            if (owner[p] >= 0)
                return pft_err(rc_code, "%s: %s: contributor '%s' is also a contributor of part %d", who,
                               name, pt->contrib[j], owner[p]);
            owner[p] = i;
        }
    }
    for (int p = 0; p < self->n_prov; p++)
        if (owner[p] < 0)
            return pft_err(rc_code, "%s: provenance node '%s' is the contributor of no part", who,
                           self->prov[p].node);
    return 0;
}

/* Statistics bundle: part i's class counts against its contributors' provenance (sums: room for its classes).
 */
static int check_part_counts(const pft_bundle_t *self, int rc_code, const char *who, int i, uint64_t *sums)
{
    const pft_bundle__part_t *pt = &self->parts[i];
    int ncl = pft_bundle__part_n_classes(pt);
    char name[160];
    pft_bundle__part_name(pt, i, name, sizeof name);
    memset(sums, 0, (size_t)ncl * sizeof *sums);
    for (int j = 0; j < pt->n_contrib; j++) {
        const pft_bundle__prov_t *e = &self->prov[pft_bundle__prov_find(self, pt->contrib[j])];
        for (int k = 0; k < e->n; k++) {
            int c = pft_bundle__part_find_label(pt, e->pairs[k].label);
            if (c < 0)
                return pft_err(rc_code, "%s: provenance node '%s': label %d has no class in %s", who, e->node,
                               e->pairs[k].label, name);
            sums[c] += e->pairs[k].count; /* ≤ 4096 · 2^48: no overflow */
        }
    }
    for (int c = 0; c < ncl; c++)
        if (sums[c] != pft_bundle__part_count(pt, c))
            return pft_err(
                rc_code,
                "%s: %s: class %d (label %d): n = %llu but its contributors' provenance counts sum "
                "to %llu",
                who, name, c, pft_bundle__part_label(pt, c),
                (unsigned long long)pft_bundle__part_count(pt, c), (unsigned long long)sums[c]);
    return 0;
}

static int check_parts(const pft_bundle_t *self, int rc_code, const char *who)
{
    int max_cl = 1;
    for (int i = 0; i < self->n_parts; i++)
        if (pft_bundle__part_n_classes(&self->parts[i]) > max_cl)
            max_cl = pft_bundle__part_n_classes(&self->parts[i]);
    int *owner = pft_alloc_array((size_t)self->n_prov + 1, sizeof *owner);
    uint64_t *sums = pft_alloc_array((size_t)max_cl, sizeof *sums);
    int rc = !owner || !sums ? pft_err(PFT_ENOMEM, "%s: out of memory", who)
                             : check_owners(self, rc_code, who, owner);
    for (int i = 0; !rc && i < self->n_parts; i++)
        rc = check_part_counts(self, rc_code, who, i, sums);
    pft_free(owner);
    pft_free(sums);
    return rc;
}

int pft_bundle__check_counts(const pft_bundle_t *self, int rc_code, const char *who)
{
    if (self->n_parts > 0)
        return check_parts(self, rc_code, who);
    for (int i = 0; i < self->n_classes; i++) {
        uint64_t sum = 0;
        for (int p = 0; p < self->n_prov; p++) {
            const pft_bundle__pair_t *pp =
                pft_bundle__pair_find(&self->prov[p], self->classes[i].label, NULL);
            if (pp)
                sum += pp->count; /* ≤ 4096 · 2^48: no overflow */
        }
        if (sum != self->classes[i].n)
            return pft_err(rc_code, "%s: class %d (label %d): n = %llu but provenance counts sum to %llu",
                           who, i, self->classes[i].label, (unsigned long long)self->classes[i].n,
                           (unsigned long long)sum);
    }
    for (int p = 0; p < self->n_prov; p++)
        for (int j = 0; j < self->prov[p].n; j++)
            if (pft_bundle_find_class(self, self->prov[p].pairs[j].label) < 0)
                return pft_err(rc_code, "%s: provenance node '%s': label %d has no class", who,
                               self->prov[p].node, self->prov[p].pairs[j].label);
    return 0;
}
