/* pft_node_floor: the privacy floor's record (min_rows, DESIGN.md §9): which classes a refit withheld
 * because they stand for fewer than min_rows rows, and the smallest count each released class stands for. The
 * methods decide what to withhold; this file only keeps the record, for the refit itself (a withheld class's
 * provenance does not travel) and for result.json. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_log.h"

#include <stdio.h>

int pft_node__floor_init(floor_t *f, int n_classes)
{
    *f = (floor_t){.n_classes = n_classes};
    f->min_released = pft_alloc_array((size_t)n_classes + 1, sizeof *f->min_released);
    f->withheld = pft_alloc_array((size_t)n_classes + 1, sizeof *f->withheld);
    if (!f->min_released || !f->withheld) {
        pft_node__floor_free(f);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    pft_node__floor_reset(f);
    f->started = 0;
    return 0;
}

void pft_node__floor_free(floor_t *f)
{
    PFT_FREE(f->min_released);
    PFT_FREE(f->withheld);
    f->n_withheld = f->started = 0;
}

void pft_node__floor_reset(floor_t *f)
{
    f->started = 1;
    f->n_withheld = 0;
    for (int c = 0; c < f->n_classes; c++)
        f->min_released[c] = -1.0;
}

void pft_node__floor_withhold(floor_t *f, int min_rows, int c, uint64_t rows, const char *what)
{
    pft_info("class %d withheld from the bundle: its %s stands for %llu row(s), fewer than min_rows = %d "
             "(the head still uses them)",
             c, what, (unsigned long long)rows, min_rows);
    if (f->n_withheld < f->n_classes)
        f->withheld[f->n_withheld++] = (floor_withheld_t){.cls = c, .rows = rows};
}

int pft_node__floor_is_withheld(const floor_t *f, int c)
{
    for (int i = 0; i < f->n_withheld; i++)
        if (f->withheld[i].cls == c)
            return 1;
    return 0;
}

/* Keeps the smaller of v and what the record holds for label. */
static void keep_min(floor_t *f, int label, double v)
{
    if (label >= 0 && label < f->n_classes && (f->min_released[label] < 0 || v < f->min_released[label]))
        f->min_released[label] = v;
}

void pft_node__floor_released(floor_t *f, const pft_bundle_t *b)
{
    for (int c = 0; c < f->n_classes; c++)
        f->min_released[c] = -1.0;
    if (pft_bundle_is_stats(b)) {
        for (int p = 0; p < pft_bundle_n_parts(b); p++)
            for (int j = 0; j < pft_bundle_part_n_classes(b, p); j++) {
                int label;
                uint64_t n;
                pft_bundle_part_class(b, p, j, &label, &n);
                if (n > 0) /* a masked part lists every class of the run, 0 rows for some */
                    keep_min(f, label, (double)n);
            }
        return;
    }
    for (int ci = 0; ci < pft_bundle_n_classes(b); ci++) {
        const pft_gmm_t *g = pft_bundle_class_gmm(b, ci);
        const double *w = pft_gmm_weights(g);
        double n = (double)pft_bundle_class_count(b, ci);
        for (int k = 0; k < pft_gmm_k(g); k++)
            keep_min(f, pft_bundle_class_label(b, ci), n * w[k]);
    }
}

void pft_node__floor_json(const floor_t *f, json_t *res)
{
    if (!f->started)
        return;
    json_t *min = json_object(), *withheld = json_array();
    for (int c = 0; c < f->n_classes; c++) {
        char key[16];
        snprintf(key, sizeof key, "%d", c);
        if (f->min_released[c] >= 0)
            json_object_set_new(min, key, json_real(f->min_released[c]));
    }
    for (int i = 0; i < f->n_withheld; i++)
        json_array_append_new(withheld, json_pack("{s:i,s:I}", "class", f->withheld[i].cls, "rows",
                                                  (json_int_t)f->withheld[i].rows));
    json_object_set_new(res, "min_released_rows", min);
    json_object_set_new(res, "withheld_classes", withheld);
}
