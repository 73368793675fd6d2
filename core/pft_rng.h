/* pft_rng: explicit, seeded random state (xoshiro256++); the same seed gives bit-identical streams. */
#ifndef PFT_RNG_H
#define PFT_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct pft_rng_t pft_rng_t;

/* New generator seeded through splitmix64; NULL on allocation failure. */
pft_rng_t *pft_rng_new(uint64_t seed);
/* Frees *self_p and sets it to NULL; safe on NULL. */
void pft_rng_destroy(pft_rng_t **self_p);
/* Reseeds in place. */
void pft_rng_seed(pft_rng_t *self, uint64_t seed);
/* Derives a seed for an independent sub-stream from (seed, a, b), e.g. (run seed, node, class). */
uint64_t pft_rng_derive(uint64_t seed, uint64_t a, uint64_t b);

uint64_t pft_rng_u64(pft_rng_t *self);
/* Uniform double in [0, 1). */
double pft_rng_uniform(pft_rng_t *self);
/* Uniform integer in [0, n); n > 0. Unbiased (Lemire). */
uint64_t pft_rng_below(pft_rng_t *self, uint64_t n);
/* Standard normal double. */
double pft_rng_normal(pft_rng_t *self);
/* Fills out[0..n) with standard normal draws (float / double). */
void pft_rng_normal_fill(pft_rng_t *self, float *out, size_t n);
/* Gamma(shape, 1) draw, shape > 0 (Marsaglia-Tsang; shape < 1 by the boost u^(1/shape)). */
double pft_rng_gamma(pft_rng_t *self, double shape);
/* Fisher-Yates shuffle of idx[0..n). */
void pft_rng_shuffle(pft_rng_t *self, int32_t *idx, size_t n);

#endif
