/* pft_kmeans: k-means++ seeding and Lloyd iterations on row-major float32 data (GMM initialisation). */
#ifndef PFT_KMEANS_H
#define PFT_KMEANS_H

#include "pft_rng.h"

/* What a k-means run did. */
typedef struct {
    int iters;      /* Lloyd iterations run */
    int reseeded;   /* empty clusters re-seeded at a far point */
    double inertia; /* Σ_i min_k ‖x_i - c_k‖² of the final assignment */
} pft_kmeans_info_t;

/* Clusters x (n×d row-major float32) into k ≤ n clusters: greedy k-means++ seeding (2 + ln k local
 * trials per centre, drawn from rng), then up to max_iter Lloyd iterations (0: seeding only; stops
 * early when no label changes). centers (k×d, double) and labels (n) receive the result; info may be
 * NULL. Empty clusters are re-seeded at the point farthest from its centre. Deterministic for a given
 * rng state. Errors: PFT_EINVAL (bad sizes, k > n), PFT_ENOMEM. */
int pft_kmeans(const float *x, int n, int d, int k, int max_iter, pft_rng_t *rng, double *centers,
               int *labels, pft_kmeans_info_t *info);

/* As pft_kmeans with a weight w[i] > 0 per row (the caller validates them; NULL: every row weighs 1, and the
 * result is pft_kmeans's bit for bit). A row of weight w counts as w rows: seeding draws with probability
 * ∝ w (first centre) and ∝ w·D² (the others), centres are weighted means, inertia is weighted. With integer
 * weights the first draw is an integer below Σw, so the seeds are those of the rows repeated w times
 * (consecutively, in order) up to rounding ties. */
int pft_kmeans_weighted(const float *x, const double *w, int n, int d, int k, int max_iter, pft_rng_t *rng,
                        double *centers, int *labels, pft_kmeans_info_t *info);

#endif
