/* pft_meannoise: Gaussian noise of a fixed scale on each released class sum (pft_meannoise.h). */
#include "pft_meannoise.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_rng.h"

#include <math.h>

/* Tag of the noise's sub-stream, so that it shares no stream with another use of the same seed. */
#define MEANNOISE_STREAM 0x6d65616e6e6f6973ULL

double pft_meannoise_sigma(double sigma, uint64_t n)
{
    return n > 0 ? sigma * sqrt((double)PFT_MEANNOISE_REF_ROWS / (double)n) : sigma;
}

int pft_meannoise_draw(uint64_t seed, int label, double sigma, int d, double *e)
{
    if (!(sigma >= 0) || !isfinite(sigma) || d < 1)
        return pft_err(PFT_EINVAL, "mean noise: sigma %g, d %d", sigma, d);
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, MEANNOISE_STREAM, (uint64_t)(uint32_t)label));
    if (!rng)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int j = 0; j < d; j++)
        e[j] = sigma * pft_rng_normal(rng);
    pft_rng_destroy(&rng);
    return 0;
}

/* Class i of st, its sum s moved to (s + e)·‖s‖/‖s + e‖, into out (TIED: with a zero scatter; the caller
 * adds W once). */
static int add_noised(pft_gstat_t *out, const pft_gstat_t *st, int i, double *e, int d)
{
    const double *mu = pft_gstat_mean(st, i);
    double n = (double)pft_gstat_count(st, i), ns = 0, nt = 0;
    for (int j = 0; j < d; j++) {
        ns += mu[j] * mu[j];
        e[j] = mu[j] + e[j] / n;
        nt += e[j] * e[j];
    }
    double k = nt > 0 ? sqrt(ns / nt) : 1.0;
    for (int j = 0; j < d; j++)
        e[j] *= k;
    return pft_gstat_add_class(out, pft_gstat_label(st, i), pft_gstat_count(st, i), e,
                               pft_gstat_scatter(st, i));
}

/* *out := st's classes with noised sums (pft_meannoise_apply), a TIED W not yet added. */
static int noised_classes(const pft_gstat_t *st, double sigma, uint64_t seed, pft_gstat_t **out)
{
    int d = pft_gstat_dim(st);
    *out = NULL;
    if (!(sigma >= 0) || !isfinite(sigma))
        return pft_err(PFT_EINVAL, "mean noise: sigma %g", sigma);
    pft_gstat_t *o = pft_gstat_new(pft_gstat_kind(st), d);
    double *e = pft_alloc_array((size_t)d, sizeof *e);
    int rc = o && e ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < pft_gstat_n_classes(st); i++) {
        rc = pft_meannoise_draw(seed, pft_gstat_label(st, i),
                                pft_meannoise_sigma(sigma, pft_gstat_count(st, i)), d, e);
        if (rc == 0)
            rc = add_noised(o, st, i, e, d);
    }
    pft_free(e);
    if (rc != 0)
        pft_gstat_destroy(&o);
    *out = o;
    return rc;
}

int pft_meannoise_apply(const pft_gstat_t *st, double sigma, uint64_t seed, pft_gstat_t **out)
{
    int rc = noised_classes(st, sigma, seed, out);
    if (rc == 0 && pft_gstat_kind(st) == PFT_GSTAT_TIED &&
        (rc = pft_gstat_add_tied_scatter(*out, pft_gstat_tied_scatter(st))))
        pft_gstat_destroy(out);
    return rc;
}

int pft_meannoise_apply_take(pft_gstat_t **st_p, double sigma, uint64_t seed)
{
    pft_gstat_t *o = NULL;
    int rc = noised_classes(*st_p, sigma, seed, &o);
    if (rc || pft_gstat_kind(*st_p) != PFT_GSTAT_TIED) {
        if (rc == 0) { /* FULL: each class's scatter went with it */
            pft_gstat_destroy(st_p);
            *st_p = o;
        }
        return rc;
    }
    double *w = pft_gstat_take_tied_scatter(*st_p);
    if ((rc = pft_gstat_set_tied_scatter(o, &w)) != 0) { /* W back where it was */
        pft_gstat_give_tied_scatter(*st_p, &w);
        pft_gstat_destroy(&o);
        return rc;
    }
    pft_gstat_destroy(st_p);
    *st_p = o;
    return 0;
}
