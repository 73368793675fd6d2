/* pft_rng: xoshiro256++ (Blackman & Vigna) seeded by splitmix64; normals by the Box-Muller transform. */
#include "pft_rng.h"
#include "pft_alloc.h"

#include <math.h>

struct pft_rng_t {
    uint64_t s[4];   /* xoshiro256++ state, never all zero */
    double spare;    /* second Box-Muller draw */
    int has_spare;   /* 1 when spare is valid */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

pft_rng_t *pft_rng_new(uint64_t seed)
{
    pft_rng_t *self = pft_alloc(sizeof *self);
    if (self)
        pft_rng_seed(self, seed);
    return self;
}

void pft_rng_destroy(pft_rng_t **self_p)
{
    if (self_p && *self_p) {
        pft_free(*self_p);
        *self_p = NULL;
    }
}

void pft_rng_seed(pft_rng_t *self, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        self->s[i] = splitmix64(&x);
    self->has_spare = 0;
    self->spare = 0.0;
}

uint64_t pft_rng_derive(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (a * 0xd1342543de82ef95ULL);
    h = splitmix64(&x);
    x = h ^ (b * 0x9e3779b97f4a7c15ULL);
    return splitmix64(&x);
}

uint64_t pft_rng_u64(pft_rng_t *self)
{
    uint64_t *s = self->s;
    uint64_t result = rotl(s[0] + s[3], 23) + s[0];
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pft_rng_uniform(pft_rng_t *self)
{
    return (double)(pft_rng_u64(self) >> 11) * 0x1.0p-53;
}

uint64_t pft_rng_below(pft_rng_t *self, uint64_t n)
{
    __uint128_t m = (__uint128_t)pft_rng_u64(self) * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            m = (__uint128_t)pft_rng_u64(self) * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double pft_rng_normal(pft_rng_t *self)
{
    if (self->has_spare) {
        self->has_spare = 0;
        return self->spare;
    }
    /* u1 in (0, 1] so log is finite. */
    double u1 = 1.0 - pft_rng_uniform(self);
    double u2 = pft_rng_uniform(self);
    double r = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586476925 * u2;
    self->spare = r * sin(a);
    self->has_spare = 1;
    return r * cos(a);
}

void pft_rng_normal_fill(pft_rng_t *self, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)pft_rng_normal(self);
}

double pft_rng_gamma(pft_rng_t *self, double shape)
{
    if (shape < 1.0) {
        double u = 1.0 - pft_rng_uniform(self); /* (0, 1] */
        return pft_rng_gamma(self, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = pft_rng_normal(self);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = 1.0 - pft_rng_uniform(self);
        if (u < 1.0 - 0.0331 * x * x * x * x)
            return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

void pft_rng_shuffle(pft_rng_t *self, int32_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)pft_rng_below(self, i);
        int32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
