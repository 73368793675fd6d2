/* pft_kmeans: k-means++ seeding and Lloyd iterations on row-major float32 data (GMM initialisation).
 *
 * Squared distances come from the SIMD kernel pft_la_sqdist on a padded copy of the data: Σ (x - c)²
 * without expanding the square, so a point's distance to itself is exactly 0 and nothing cancels. On
 * PACS-sized inputs this is several times faster than an SGEMM expansion, whose cost is dominated by
 * packing the data matrix. Centres are accumulated in double. */
#include "pft_kmeans.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

/* Scratch shared by seeding and Lloyd. */
typedef struct {
    size_t n, d, k;
    size_t dp, nr;  /* padded row stride and row count of xp */
    const float *x; /* the caller's rows, n×d */
    float *xp;      /* nr×dp zero-padded copy for the distance kernel */
    float *cf;      /* max(k, trials)×dp centres or candidates, zero padded */
    float *g;       /* nr×max(k, trials) squared distances */
} km_ws_t;

/* g (nr×m) := squared distances of every row to the m rows of ws->cf. */
static void dists(km_ws_t *ws, size_t m)
{
    pft_la_sqdist(ws->xp, ws->nr, ws->dp, NULL, ws->cf, m, ws->g);
}

/* Data row i into row c of ws->cf. */
static void put_row(km_ws_t *ws, size_t c, size_t i)
{
    memcpy(ws->cf + c * ws->dp, ws->xp + i * ws->dp, ws->dp * sizeof(float));
}

/* Exact squared distance of row i to the double centre c. */
static double dist_exact(const km_ws_t *ws, size_t i, const double *c)
{
    double s = 0.0;
    const float *xi = ws->x + i * ws->d;
    for (size_t j = 0; j < ws->d; j++) {
        double t = (double)xi[j] - c[j];
        s += t * t;
    }
    return s;
}

/* Index of the first entry of the cumulative sum of w (n) that exceeds target. */
static size_t pick_weighted(const double *w, size_t n, double target)
{
    double acc = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] > 0.0) {
            acc += w[i];
            last = i;
            if (target < acc)
                return i;
        }
    }
    return last;
}

/* Greedy k-means++ (as in scikit-learn): each new centre is the best of `trials` D²-weighted candidates,
 * best meaning the smallest resulting potential. Writes centre row indices to chosen[k]. */
static void seed_plusplus(km_ws_t *ws, pft_rng_t *rng, size_t trials, size_t *chosen, double *closest,
                          double *cand_d)
{
    size_t n = ws->n, k = ws->k;
    chosen[0] = (size_t)pft_rng_below(rng, n);
    put_row(ws, 0, chosen[0]);
    dists(ws, 1);
    double pot = 0.0;
    for (size_t i = 0; i < n; i++) {
        closest[i] = ws->g[i];
        pot += closest[i];
    }
    size_t cand[64];
    if (trials > 64)
        trials = 64;
    for (size_t c = 1; c < k; c++) {
        for (size_t s = 0; s < trials; s++) {
            cand[s] = pot > 0.0 ? pick_weighted(closest, n, pft_rng_uniform(rng) * pot)
                                : (size_t)pft_rng_below(rng, n);
            put_row(ws, s, cand[s]);
        }
        dists(ws, trials);
        size_t best = 0;
        double best_pot = INFINITY;
        for (size_t s = 0; s < trials; s++) {
            double p = 0.0;
            for (size_t i = 0; i < n; i++) {
                double v = ws->g[i * trials + s];
                cand_d[s * n + i] = v < closest[i] ? v : closest[i];
                p += cand_d[s * n + i];
            }
            if (p < best_pot) {
                best_pot = p;
                best = s;
            }
        }
        chosen[c] = cand[best];
        memcpy(closest, cand_d + best * n, n * sizeof(double));
        pot = best_pot;
    }
}

/* Assigns every row to its nearest centre; returns the number of changed labels and writes the squared
 * distance to the assigned centre into dist. Ties keep the current label. */
static size_t assign(km_ws_t *ws, const double *centers, int *labels, double *dist)
{
    size_t n = ws->n, d = ws->d, dp = ws->dp, k = ws->k, changed = 0;
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < d; j++)
            ws->cf[c * dp + j] = (float)centers[c * d + j];
    dists(ws, k);
    for (size_t i = 0; i < n; i++) {
        const float *g = ws->g + i * k;
        size_t best = 0;
        for (size_t c = 1; c < k; c++)
            if (g[c] < g[best])
                best = c;
        if (labels[i] >= 0 && g[labels[i]] <= g[best])
            best = (size_t)labels[i]; /* duplicates stay where re-seeding put them */
        dist[i] = g[best];
        if (labels[i] != (int)best) {
            labels[i] = (int)best;
            changed++;
        }
    }
    return changed;
}

/* Recomputes centres as label means; an empty cluster is re-seeded at the row farthest from its centre
 * (that row then moves to it). Returns the number of re-seeded clusters. */
static int update(km_ws_t *ws, double *centers, int *labels, double *dist, double *count)
{
    size_t n = ws->n, d = ws->d, k = ws->k;
    int reseeded = 0;
    memset(centers, 0, k * d * sizeof(double));
    memset(count, 0, k * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)labels[i];
        count[c] += 1.0;
        const float *xi = ws->x + i * d;
        for (size_t j = 0; j < d; j++)
            centers[c * d + j] += xi[j];
    }
    for (size_t c = 0; c < k; c++) {
        if (count[c] > 0.0)
            continue;
        /* Farthest row whose own cluster keeps at least one other member. */
        size_t far = n;
        double fv = -1.0;
        for (size_t i = 0; i < n; i++)
            if (count[labels[i]] > 1.0 && dist[i] > fv) {
                fv = dist[i];
                far = i;
            }
        if (far == n)
            continue; /* cannot happen for k ≤ n; left empty rather than stealing a singleton */
        size_t old = (size_t)labels[far];
        const float *xf = ws->x + far * d;
        for (size_t j = 0; j < d; j++) {
            centers[old * d + j] -= xf[j];
            centers[c * d + j] = xf[j];
        }
        count[old] -= 1.0;
        count[c] = 1.0;
        labels[far] = (int)c;
        dist[far] = 0.0;
        reseeded++;
    }
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < d; j++)
            centers[c * d + j] /= count[c] > 0.0 ? count[c] : 1.0;
    return reseeded;
}

int pft_kmeans(const float *x, int n, int d, int k, int max_iter, pft_rng_t *rng, double *centers,
               int *labels, pft_kmeans_info_t *info)
{
    if (!x || !rng || !centers || !labels || n < 1 || d < 1 || k < 1 || k > n || max_iter < 0)
        return pft_err(PFT_EINVAL, "kmeans: bad arguments (n %d, d %d, k %d, max_iter %d)", n, d, k,
                       max_iter);
    size_t N = (size_t)n, D = (size_t)d, K = (size_t)k;
    size_t trials = 2 + (size_t)log((double)k);
    trials = trials > 64 ? 64 : trials;
    size_t m = K > trials ? K : trials;
    int rc = 0;
    km_ws_t ws = {.n = N, .d = D, .k = K, .x = x};
    ws.dp = (D + PFT_LA_PAD - 1) / PFT_LA_PAD * PFT_LA_PAD;
    ws.nr = (N + PFT_LA_ROWS - 1) / PFT_LA_ROWS * PFT_LA_ROWS;
    ws.xp = pft_alloc_aligned(ws.nr * ws.dp * sizeof(float));
    ws.cf = pft_alloc_aligned(m * ws.dp * sizeof(float));
    ws.g = pft_alloc_array(ws.nr * m, sizeof(float));
    size_t *chosen = pft_alloc_array(K, sizeof(size_t));
    double *closest = pft_alloc_array(N, sizeof(double));
    double *cand_d = pft_alloc_array(N * trials, sizeof(double));
    double *count = pft_alloc_array(K, sizeof(double));
    if (!ws.xp || !ws.cf || !ws.g || !chosen || !closest || !cand_d || !count) {
        rc = pft_err(PFT_ENOMEM, "kmeans: out of memory");
        goto done;
    }
    memset(ws.xp, 0, ws.nr * ws.dp * sizeof(float));
    memset(ws.cf, 0, m * ws.dp * sizeof(float));
    for (size_t i = 0; i < N; i++)
        memcpy(ws.xp + i * ws.dp, x + i * D, D * sizeof(float));
    seed_plusplus(&ws, rng, trials, chosen, closest, cand_d);
    for (size_t c = 0; c < K; c++)
        for (size_t j = 0; j < D; j++)
            centers[c * D + j] = x[chosen[c] * D + j];
    for (size_t i = 0; i < N; i++)
        labels[i] = -1;
    assign(&ws, centers, labels, closest);
    int iters = 0, reseeded = 0;
    for (int it = 0; it < max_iter; it++) {
        reseeded += update(&ws, centers, labels, closest, count);
        iters++;
        if (assign(&ws, centers, labels, closest) == 0)
            break;
    }
    if (info) {
        double inertia = 0.0;
        for (size_t i = 0; i < N; i++)
            inertia += dist_exact(&ws, i, centers + (size_t)labels[i] * D);
        info->iters = iters;
        info->reseeded = reseeded;
        info->inertia = inertia;
    }
done:
    pft_free(ws.xp);
    pft_free(ws.cf);
    pft_free(ws.g);
    pft_free(chosen);
    pft_free(closest);
    pft_free(cand_d);
    pft_free(count);
    return rc;
}
