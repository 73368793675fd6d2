/* pft_node_rows: weighted rows for EM and the head, and the Monte Carlo budget that bounds how many synthetic
 * rows stand for a received class.
 *
 * A received GMM that stands for m rows is not made of m rows: any number D of draws represents it, each
 * weighing m/D, and D only sets the Monte Carlo noise. So a node draws f·m rows (f = em_draws or head_draws)
 * for small m, but never more than mc_budget per class whatever stands behind its bundles: a node's EM and
 * head cost stop growing with the rows upstream. Real rows go in once with weight 1. With mc_budget = 0 and
 * f = 1 every draw weighs 1: the paper's protocol (one synthetic row per represented row). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gmm.h"

#include <limits.h>
#include <math.h>
#include <string.h>

int pft_node__rows_reserve(rows_t *r, int extra)
{
    if (extra < 0 || r->n > INT_MAX / 2 - extra)
        return pft_err(PFT_ENOMEM, "cannot hold %d more rows", extra);
    if (r->n + extra <= r->cap)
        return 0;
    int cap = r->cap ? r->cap : 1024;
    while (cap < r->n + extra)
        cap *= 2;
    float *x = pft_realloc(r->x, (size_t)cap * (size_t)r->d * sizeof *x);
    if (!x)
        return PFT_ENOMEM;
    r->x = x;
    int32_t *y = pft_realloc(r->y, (size_t)cap * sizeof *y);
    if (!y)
        return PFT_ENOMEM;
    r->y = y;
    double *w = pft_realloc(r->w, (size_t)cap * sizeof *w);
    if (!w)
        return PFT_ENOMEM;
    r->w = w;
    r->cap = cap;
    return 0;
}

/* Labels and weights of rows [r->n, r->n + n), then counts them in. */
static void rows_commit(rows_t *r, int n, int label, double weight)
{
    for (int i = 0; i < n; i++) {
        r->y[r->n + i] = label;
        r->w[r->n + i] = weight;
    }
    r->n += n;
    r->weight += weight * n;
}

int pft_node__rows_append(rows_t *r, const float *x, int n, int label, double weight)
{
    if (n <= 0)
        return 0;
    if (pft_node__rows_reserve(r, n) != 0)
        return pft_err(PFT_ENOMEM, "out of memory for %d more rows", n);
    memmove(r->x + (size_t)r->n * r->d, x, (size_t)n * r->d * sizeof(float));
    rows_commit(r, n, label, weight);
    return 0;
}

int pft_node__rows_sample(rows_t *r, const pft_gmm_t *g, pft_rng_t *rng, int n, int label, double weight)
{
    if (n <= 0)
        return 0;
    if (pft_node__rows_reserve(r, n) != 0)
        return pft_err(PFT_ENOMEM, "class %d: cannot hold %d more samples", label, n);
    int rc = pft_gmm_sample(g, rng, n, r->x + (size_t)r->n * r->d);
    if (rc)
        return pft_err_wrap(rc, "drawing %d samples of class %d", n, label);
    rows_commit(r, n, label, weight);
    return 0;
}

int pft_node__rows_all_unit(const rows_t *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->w[i] != 1.0)
            return 0;
    return 1;
}

void pft_node__rows_free(rows_t *r)
{
    PFT_FREE(r->x);
    PFT_FREE(r->y);
    PFT_FREE(r->w);
    r->n = r->cap = 0;
    r->weight = 0;
}

int pft_node__mc_draws(const node_t *nd, int f, const uint64_t *m, size_t nr, int *draws)
{
    uint64_t total = 0;
    for (size_t r = 0; r < nr; r++)
        total += m[r];
    uint64_t budget = (uint64_t)nd->run->mc_budget, want = total * (uint64_t)f;
    if (nd->pipe.per_row) /* the release's sensitivity is per row of an unweighted union */
        budget = 0, want = total;
    uint64_t cap = budget && want > budget ? budget : want;
    if (cap > INT_MAX / 4)
        return pft_err(PFT_ENOMEM, "%llu synthetic rows for one class (set mc_budget to bound them)",
                       (unsigned long long)cap);
    for (size_t r = 0; r < nr; r++) {
        if (!m[r]) {
            draws[r] = 0;
            continue;
        }
        /* each bundle's share of the class's draws, by the rows it stands for; at least one draw */
        double share = (double)cap * (double)m[r] / (double)total;
        draws[r] = share < 1 ? 1 : (int)llround(share);
    }
    return 0;
}
