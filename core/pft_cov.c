/* pft_cov: the covariance families as one table (nng's transports, VLFeat's families): per family its name,
 * its shape (how a component's covariance is parameterised) and whether DP-FedPFT releases it. Code reads the
 * row, and code whose work depends on the parameters switches on the shape, so a family of an existing shape
 * is a value in pft_gmm.h, a name and a row here, its EM file pft_em_<family>.c and its line in
 * pft_gmm_em.c's s_em (docs/DESIGN.md, "How to add a covariance family"). At the bottom of core's gmm files:
 * it calls none of them. */
#include "pft_gmm.h"

#include <stdio.h>
#include <string.h>

#include "pft_error.h"

const char *const pft_cov_names[PFT_COV_N + 1] = {
    [PFT_COV_FULL] = "full",       [PFT_COV_DIAG] = "diag", [PFT_COV_SPHER] = "spher",
    [PFT_COV_LOWRANK] = "lowrank", [PFT_COV_TIED] = "tied", [PFT_COV_N] = NULL,
};

static const pft_cov_family_t s_families[PFT_COV_N] = {
    [PFT_COV_FULL] = {.shape = PFT_COV_SHAPE_MATRIX, .dp = 1},
    [PFT_COV_DIAG] = {.shape = PFT_COV_SHAPE_VECTOR, .dp = 1},
    [PFT_COV_SPHER] = {.shape = PFT_COV_SHAPE_SCALAR, .dp = 1},
    [PFT_COV_LOWRANK] = {.shape = PFT_COV_SHAPE_FACTOR},
    [PFT_COV_TIED] = {.shape = PFT_COV_SHAPE_NONE}, /* exact statistics (pft_gstat) */
};

const pft_cov_family_t *pft_cov_family(pft_cov_t cov)
{
    return (int)cov >= 0 && (int)cov < PFT_COV_N ? &s_families[cov] : NULL;
}

pft_cov_shape_t pft_cov_shape(pft_cov_t cov)
{
    const pft_cov_family_t *f = pft_cov_family(cov);
    return f ? f->shape : PFT_COV_SHAPE_NONE;
}

size_t pft_cov_stored(pft_cov_t cov, size_t d)
{
    switch (pft_cov_shape(cov)) {
    case PFT_COV_SHAPE_MATRIX:
        return d * d;
    case PFT_COV_SHAPE_VECTOR:
    case PFT_COV_SHAPE_FACTOR:
        return d;
    case PFT_COV_SHAPE_SCALAR:
        return 1;
    case PFT_COV_SHAPE_NONE:
        break;
    }
    return 0;
}

size_t pft_cov_wire(pft_cov_t cov, size_t d)
{
    return pft_cov_shape(cov) == PFT_COV_SHAPE_MATRIX ? d * (d + 1) / 2 : pft_cov_stored(cov, d);
}

size_t pft_cov_free(pft_cov_t cov, size_t d, size_t q)
{
    switch (pft_cov_shape(cov)) {
    case PFT_COV_SHAPE_MATRIX:
        return d * (d + 1) / 2;
    case PFT_COV_SHAPE_VECTOR:
        return d;
    case PFT_COV_SHAPE_FACTOR:
        return d * q + d - (q ? q * (q - 1) / 2 : 0); /* W up to a q×q rotation */
    case PFT_COV_SHAPE_SCALAR:
    case PFT_COV_SHAPE_NONE:
        break;
    }
    return 1;
}

const char *pft_cov_name(pft_cov_t cov)
{
    return (int)cov >= 0 && (int)cov < PFT_COV_N ? pft_cov_names[cov] : NULL;
}

int pft_cov_parse(const char *name, pft_cov_t *out)
{
    if (!name || !out)
        return pft_err(PFT_EINVAL, "covariance type: missing name");
    for (int i = 0; i < PFT_COV_N; i++)
        if (strcmp(name, pft_cov_names[i]) == 0) {
            *out = (pft_cov_t)i;
            return 0;
        }
    if (strcmp(name, "spherical") == 0) { /* scikit-learn's spelling */
        *out = PFT_COV_SPHER;
        return 0;
    }
    char all[128];
    size_t at = 0;
    for (int i = 0; i < PFT_COV_N && at < sizeof all; i++)
        at += (size_t)snprintf(all + at, sizeof all - at, "%s%s",
                               i == 0               ? ""
                               : i == PFT_COV_N - 1 ? " or "
                                                    : ", ",
                               pft_cov_names[i]);
    return pft_err(PFT_EINVAL, "unknown covariance type '%s' (expected %s)", name, all);
}
