/* pft_kmeans: k-means++ seeding and Lloyd iterations on row-major float32 data (GMM initialisation).
 *
 * Squared distances come from the SIMD kernel pft_la_sqdist on padded rows (the caller's when they already
 * are, as EM's working copy is, else a padded copy): Σ (x - c)² without expanding the square, so a point's
 * distance to itself is exactly 0 and nothing cancels. On PACS-sized inputs this is several times faster
 * than an SGEMM expansion, whose cost is dominated by packing the data matrix. Centres are accumulated in
 * double. Row weights (pft_kmeans_weighted) enter the draws, the potential, the centres and the inertia. */
#include "pft_kmeans.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

/* Scratch shared by seeding and Lloyd. */
typedef struct {
    size_t n, d, k;
    size_t dp, nr;      /* padded row stride; rows rounded up to PFT_LA_ROWS (of g) */
    const float *x;     /* the caller's rows, n×d */
    const double *w;    /* n row weights, or NULL (all 1) */
    const float *xp;    /* nb×dp padded rows for the distance kernel: x itself when it is already padded */
    size_t nb;          /* rows of xp read in blocks (a multiple of PFT_LA_ROWS); rows [nb, n) are in tail */
    float *copy, *tail; /* the padded copy of x (or NULL); PFT_LA_ROWS×dp last rows (or NULL) */
    float *cf;          /* max(k, trials)×dp centres or candidates, zero padded */
    float *g;           /* nr×max(k, trials) squared distances */
} km_ws_t;

/* g (nr×m) := squared distances of every row to the m rows of ws->cf. */
static void dists(km_ws_t *ws, size_t m)
{
    pft_la_sqdist(ws->xp, ws->nb, ws->dp, NULL, ws->cf, m, ws->g);
    if (ws->nb < ws->n)
        pft_la_sqdist(ws->tail, PFT_LA_ROWS, ws->dp, NULL, ws->cf, m, ws->g + ws->nb * m);
}

/* Data row i into row c of ws->cf. */
static void put_row(km_ws_t *ws, size_t c, size_t i)
{
    const float *src = i < ws->nb ? ws->xp + i * ws->dp : ws->tail + (i - ws->nb) * ws->dp;
    memcpy(ws->cf + c * ws->dp, src, ws->dp * sizeof(float));
}

/* ws->xp: x itself when its rows are already padded for the kernel (EM's working copy: saves a copy of the
 * data), with the last n mod PFT_LA_ROWS rows in a small zero-padded block; else a padded copy. */
static int setup_rows(km_ws_t *ws)
{
    size_t n = ws->n, d = ws->d, dp = ws->dp;
    if (d == dp && (uintptr_t)ws->x % 64 == 0) {
        ws->xp = ws->x;
        ws->nb = n / PFT_LA_ROWS * PFT_LA_ROWS;
        if (ws->nb < n) {
            ws->tail = pft_alloc_aligned(PFT_LA_ROWS * dp * sizeof(float));
            if (!ws->tail)
                return PFT_ENOMEM;
            memset(ws->tail, 0, PFT_LA_ROWS * dp * sizeof(float));
            memcpy(ws->tail, ws->x + ws->nb * d, (n - ws->nb) * d * sizeof(float));
        }
        return 0;
    }
    ws->copy = pft_alloc_aligned(ws->nr * dp * sizeof(float));
    if (!ws->copy)
        return PFT_ENOMEM;
    memset(ws->copy, 0, ws->nr * dp * sizeof(float));
    for (size_t i = 0; i < n; i++)
        memcpy(ws->copy + i * dp, ws->x + i * d, d * sizeof(float));
    ws->xp = ws->copy;
    ws->nb = ws->nr;
    return 0;
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

/* Weight of row i. */
static inline double row_w(const km_ws_t *ws, size_t i)
{
    return ws->w ? ws->w[i] : 1.0;
}

/* Index of the first entry of the cumulative sum of v·w (n; w NULL: v) that exceeds target. */
static size_t pick_weighted(const double *v, const double *w, size_t n, double target)
{
    double acc = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        double p = w ? w[i] * v[i] : v[i];
        if (p > 0.0) {
            acc += p;
            last = i;
            if (target < acc)
                return i;
        }
    }
    return last;
}

/* The first centre: a row drawn with probability ∝ w. Unweighted, or with integer weights, by an integer
 * draw below Σw (the rows repeated w times draw the same row); otherwise by a uniform draw of Σw. */
static size_t pick_first(const km_ws_t *ws, pft_rng_t *rng)
{
    if (!ws->w)
        return (size_t)pft_rng_below(rng, ws->n);
    double total = 0.0;
    int integral = 1;
    for (size_t i = 0; i < ws->n; i++) {
        total += ws->w[i];
        integral &= ws->w[i] == floor(ws->w[i]);
    }
    if (integral && total < 0x1p53) {
        double t = (double)pft_rng_below(rng, (uint64_t)total), acc = 0.0;
        for (size_t i = 0; i < ws->n; i++) {
            acc += ws->w[i];
            if (t < acc)
                return i;
        }
        return ws->n - 1;
    }
    return pick_weighted(ws->w, NULL, ws->n, pft_rng_uniform(rng) * total);
}

/* Greedy k-means++ (as in scikit-learn): each new centre is the best of `trials` candidates drawn ∝ w·D²,
 * best meaning the smallest resulting potential Σ w·D². Writes centre row indices to chosen[k]. */
static void seed_plusplus(km_ws_t *ws, pft_rng_t *rng, size_t trials, size_t *chosen, double *closest,
                          double *cand_d)
{
    size_t n = ws->n, k = ws->k;
    chosen[0] = pick_first(ws, rng);
    put_row(ws, 0, chosen[0]);
    dists(ws, 1);
    double pot = 0.0;
    for (size_t i = 0; i < n; i++) {
        closest[i] = ws->g[i];
        pot += row_w(ws, i) * closest[i];
    }
    size_t cand[64];
    if (trials > 64)
        trials = 64;
    for (size_t c = 1; c < k; c++) {
        for (size_t s = 0; s < trials; s++) {
            cand[s] = pot > 0.0 ? pick_weighted(closest, ws->w, n, pft_rng_uniform(rng) * pot)
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
                p += row_w(ws, i) * cand_d[s * n + i];
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

/* Recomputes centres as weighted label means; an empty cluster is re-seeded at the row farthest from its
 * centre (that row then moves to it). count (k weights) and members (k rows) are scratch. Returns the number
 * of re-seeded clusters. */
static int update(km_ws_t *ws, double *centers, int *labels, double *dist, double *count, size_t *members)
{
    size_t n = ws->n, d = ws->d, k = ws->k;
    int reseeded = 0;
    memset(centers, 0, k * d * sizeof(double));
    memset(count, 0, k * sizeof(double));
    memset(members, 0, k * sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)labels[i];
        double wi = row_w(ws, i);
        count[c] += wi;
        members[c]++;
        pft_la_axpy_f(d, wi, ws->x + i * d, centers + c * d);
    }
    for (size_t c = 0; c < k; c++) {
        if (members[c] > 0)
            continue;
        /* Farthest row whose own cluster keeps at least one other member. */
        size_t far = n;
        double fv = -1.0;
        for (size_t i = 0; i < n; i++)
            if (members[labels[i]] > 1 && dist[i] > fv) {
                fv = dist[i];
                far = i;
            }
        if (far == n)
            continue; /* cannot happen for k ≤ n; left empty rather than stealing a singleton */
        size_t old = (size_t)labels[far];
        const float *xf = ws->x + far * d;
        double wf = row_w(ws, far);
        for (size_t j = 0; j < d; j++) {
            centers[old * d + j] -= wf * xf[j];
            centers[c * d + j] = xf[j];
        }
        count[old] -= wf;
        count[c] = wf;
        members[old]--;
        members[c] = 1;
        labels[far] = (int)c;
        dist[far] = 0.0;
        reseeded++;
    }
    for (size_t c = 0; c < k; c++)
        if (members[c] > 0) /* an empty cluster (none left to re-seed it from) keeps the centre 0 */
            for (size_t j = 0; j < d; j++)
                centers[c * d + j] /= count[c];
    return reseeded;
}

int pft_kmeans(const float *x, int n, int d, int k, int max_iter, pft_rng_t *rng, double *centers,
               int *labels, pft_kmeans_info_t *info)
{
    return pft_kmeans_weighted(x, NULL, n, d, k, max_iter, rng, centers, labels, info);
}

int pft_kmeans_weighted(const float *x, const double *w, int n, int d, int k, int max_iter, pft_rng_t *rng,
                        double *centers, int *labels, pft_kmeans_info_t *info)
{
    if (!x || !rng || !centers || !labels || n < 1 || d < 1 || k < 1 || k > n || max_iter < 0)
        return pft_err(PFT_EINVAL, "kmeans: bad arguments (n %d, d %d, k %d, max_iter %d)", n, d, k,
                       max_iter);
    size_t N = (size_t)n, D = (size_t)d, K = (size_t)k;
    size_t trials = 2 + (size_t)log((double)k);
    trials = trials > 64 ? 64 : trials;
    size_t m = K > trials ? K : trials;
    int rc = 0;
    km_ws_t ws = {.n = N, .d = D, .k = K, .x = x, .w = w};
    ws.dp = (D + PFT_LA_PAD - 1) / PFT_LA_PAD * PFT_LA_PAD;
    ws.nr = (N + PFT_LA_ROWS - 1) / PFT_LA_ROWS * PFT_LA_ROWS;
    ws.cf = pft_alloc_aligned(m * ws.dp * sizeof(float));
    ws.g = pft_alloc_array(ws.nr * m, sizeof(float));
    size_t *chosen = pft_alloc_array(K, sizeof(size_t));
    double *closest = pft_alloc_array(N, sizeof(double));
    double *cand_d = pft_alloc_array(N * trials, sizeof(double));
    double *count = pft_alloc_array(K, sizeof(double));
    size_t *members = pft_alloc_array(K, sizeof(size_t));
    if (!ws.cf || !ws.g || !chosen || !closest || !cand_d || !count || !members || setup_rows(&ws) < 0) {
        rc = pft_err(PFT_ENOMEM, "kmeans: out of memory");
        goto done;
    }
    memset(ws.cf, 0, m * ws.dp * sizeof(float));
    seed_plusplus(&ws, rng, trials, chosen, closest, cand_d);
    for (size_t c = 0; c < K; c++)
        for (size_t j = 0; j < D; j++)
            centers[c * D + j] = x[chosen[c] * D + j];
    for (size_t i = 0; i < N; i++)
        labels[i] = -1;
    assign(&ws, centers, labels, closest);
    int iters = 0, reseeded = 0;
    for (int it = 0; it < max_iter; it++) {
        reseeded += update(&ws, centers, labels, closest, count, members);
        iters++;
        if (assign(&ws, centers, labels, closest) == 0)
            break;
    }
    if (info) {
        double inertia = 0.0;
        for (size_t i = 0; i < N; i++)
            inertia += row_w(&ws, i) * dist_exact(&ws, i, centers + (size_t)labels[i] * D);
        info->iters = iters;
        info->reseeded = reseeded;
        info->inertia = inertia;
    }
done:
    pft_free(ws.copy);
    pft_free(ws.tail);
    pft_free(ws.cf);
    pft_free(ws.g);
    pft_free(chosen);
    pft_free(closest);
    pft_free(cand_d);
    pft_free(count);
    pft_free(members);
    return rc;
}
