/* pft_kmeans: k-means++ seeding and Lloyd iterations on row-major float32 data (GMM initialisation).
 *
 * Squared distances come from one SGEMM per step, ‖x‖² - 2 x·c + ‖c‖², clamped at 0; callers pass
 * centred data so the expansion does not cancel badly. Centres are accumulated in double. */
#include "pft_kmeans.h"

#include <math.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_linalg.h"

/* Scratch shared by seeding and Lloyd. */
typedef struct {
    size_t n, d, k;
    const float *x;
    double *xnorm; /* n: ‖x_i‖² */
    float *cf;     /* max(k, trials)×d: centres / candidates in float for the GEMM */
    float *g;      /* n×max(k, trials): GEMM output */
    double *cnorm; /* k: ‖c‖² */
} km_ws_t;

/* g (n×m) := X · Cᵀ for the m float rows in ws->cf. */
static void cross(km_ws_t *ws, size_t m)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ws->n, (int)m, (int)ws->d, 1.0f, ws->x, (int)ws->d,
                ws->cf, (int)ws->d, 0.0f, ws->g, (int)m);
}

static double sqnorm_f(const float *v, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += (double)v[j] * v[j];
    return s;
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
static void seed_plusplus(km_ws_t *ws, pft_rng_t *rng, size_t *chosen, double *closest, double *cand_d)
{
    size_t n = ws->n, d = ws->d, k = ws->k;
    size_t trials = 2 + (size_t)log((double)k);
    chosen[0] = (size_t)pft_rng_below(rng, n);
    for (size_t i = 0; i < n; i++)
        closest[i] = 0.0;
    /* Distances to the first centre. */
    memcpy(ws->cf, ws->x + chosen[0] * d, d * sizeof(float));
    cross(ws, 1);
    double cn = ws->xnorm[chosen[0]], pot = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = ws->xnorm[i] - 2.0 * ws->g[i] + cn;
        closest[i] = (v > 0.0 && i != chosen[0]) ? v : 0.0;
        pot += closest[i];
    }
    for (size_t c = 1; c < k; c++) {
        size_t cand[64];
        size_t t = trials < 64 ? trials : 64;
        for (size_t s = 0; s < t; s++) {
            cand[s] = pot > 0.0 ? pick_weighted(closest, n, pft_rng_uniform(rng) * pot)
                                : (size_t)pft_rng_below(rng, n);
            memcpy(ws->cf + s * d, ws->x + cand[s] * d, d * sizeof(float));
        }
        cross(ws, t);
        size_t best = 0;
        double best_pot = INFINITY;
        for (size_t s = 0; s < t; s++) {
            double p = 0.0, nc = ws->xnorm[cand[s]];
            for (size_t i = 0; i < n; i++) {
                double v = ws->xnorm[i] - 2.0 * ws->g[i * t + s] + nc;
                v = (v > 0.0 && i != cand[s]) ? v : 0.0;
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

/* Assigns every row to its nearest centre (float GEMM expansion); returns the number of changed labels
 * and writes the (approximate) squared distance to the assigned centre into dist. */
static size_t assign(km_ws_t *ws, const double *centers, int *labels, double *dist)
{
    size_t n = ws->n, d = ws->d, k = ws->k, changed = 0;
    double *cnorm = ws->cnorm;
    for (size_t c = 0; c < k; c++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++) {
            ws->cf[c * d + j] = (float)centers[c * d + j];
            s += centers[c * d + j] * centers[c * d + j];
        }
        cnorm[c] = s;
    }
    cross(ws, k);
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        double bv = INFINITY;
        for (size_t c = 0; c < k; c++) {
            double v = cnorm[c] - 2.0 * ws->g[i * k + c];
            if (v < bv) {
                bv = v;
                best = c;
            }
        }
        double dv = ws->xnorm[i] + bv;
        dist[i] = dv > 0.0 ? dv : 0.0;
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

int pft_kmeans(const float *x, int n, int d, int k, int max_iter, pft_rng_t *rng, double *centers, int *labels,
               pft_kmeans_info_t *info)
{
    if (!x || !rng || !centers || !labels || n < 1 || d < 1 || k < 1 || k > n || max_iter < 0)
        return pft_err(PFT_EINVAL, "kmeans: bad arguments (n %d, d %d, k %d, max_iter %d)", n, d, k, max_iter);
    size_t N = (size_t)n, D = (size_t)d, K = (size_t)k;
    size_t trials = 2 + (size_t)log((double)k), m = K > trials ? K : trials;
    int rc = 0;
    km_ws_t ws = {.n = N, .d = D, .k = K, .x = x};
    ws.xnorm = pft_alloc_array(N, sizeof(double));
    ws.cf = pft_alloc_array(m * D, sizeof(float));
    ws.g = pft_alloc_array(N * m, sizeof(float));
    ws.cnorm = pft_alloc_array(K, sizeof(double));
    size_t *chosen = pft_alloc_array(K, sizeof(size_t));
    double *closest = pft_alloc_array(N, sizeof(double));
    double *cand_d = pft_alloc_array(N * trials, sizeof(double));
    double *count = pft_alloc_array(K, sizeof(double));
    if (!ws.xnorm || !ws.cf || !ws.g || !ws.cnorm || !chosen || !closest || !cand_d || !count) {
        rc = pft_err(PFT_ENOMEM, "kmeans: out of memory");
        goto done;
    }
    for (size_t i = 0; i < N; i++)
        ws.xnorm[i] = sqnorm_f(x + i * D, D);
    seed_plusplus(&ws, rng, chosen, closest, cand_d);
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
    pft_free(ws.xnorm);
    pft_free(ws.cf);
    pft_free(ws.g);
    pft_free(ws.cnorm);
    pft_free(chosen);
    pft_free(closest);
    pft_free(cand_d);
    pft_free(count);
    return rc;
}
