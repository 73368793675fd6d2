/* pft_node_release: DP-FedPFT releases (paper §4.3): one noisy Gaussian per class; DP releases of exact
 * statistics (pft_gstat_dp); the privacy ledger, its setup. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gstat_dp.h"
#include "pft_log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* DP-FedPFT (paper §4.3): a K = 1 Gaussian of the class's union, clipped to norm ≤ 1, released with Gaussian
 * noise (pft_dp). The union itself is left untouched (the head still trains on it). */
int pft_node__release_fit(node_t *nd, int c, const float *x, int n, pft_gmm_t **out)
{
    int d = pft_dataset_d(nd->train);
    float *xc = pft_alloc_array((size_t)n * (size_t)d, sizeof *xc);
    if (!xc)
        return pft_err(PFT_ENOMEM, "out of memory");
    memcpy(xc, x, (size_t)n * (size_t)d * sizeof *xc);
    nd->dp.clipped += pft_dp_clip(xc, n, d);
    pft_dp_info_t info;
    double delta = nd->me->dp_delta; /* 0 < δ < 1, never from the rows (the topology's rule dp-delta) */
    int rc = pft_dp_fit(xc, n, d, nd->me->cov, nd->me->dp_epsilon, delta, (pft_dp_mech_t)nd->me->dp_mech,
                        nd->run->reg_covar, nd->dp.rng, out, &info);
    pft_free(xc);
    if (rc)
        return rc;
    if (info.delta > nd->dp.delta_max)
        nd->dp.delta_max = info.delta;
    json_array_append_new(json_object_get(nd->dp.info, "per_class"),
                          json_pack("{s:i,s:i,s:f,s:f,s:f,s:b,s:i}", "class", c, "n", n, "epsilon", info.eps,
                                    "delta", info.delta, "sigma", info.sigma, "sigma_raised",
                                    info.sigma_raised, "n_floored", info.n_floored));
    return 0;
}

/* The DP release of exact statistics (pft_gstat_dp): the node's own rows once per bundle, its noisy sums
 * (TIED: nothing else, the whole budget on them) or noisy sums and second moments (FULL), post-processed. The
 * node's head keeps using its exact rows (pft_node_exact.c). */
int pft_node__release_stats(node_t *nd, const pft_dataset_t *set, pft_gstat_kind_t kind, pft_gstat_t **out)
{
    double delta = nd->me->dp_delta; /* 0 < δ < 1, never from the rows (the topology's rule dp-delta) */
    pft_gstat_dp_info_t info;
    int sums = kind == PFT_GSTAT_TIED; /* TIED: the sums alone (pft_gstat_dp.h, SECURITY.md §6) */
    int rc =
        sums
            ? pft_gstat_dp_release_sums(pft_dataset_x(set), pft_dataset_y(set), (size_t)pft_dataset_n(set),
                                        pft_dataset_d(set), nd->me->dp_epsilon, delta, nd->dp.rng, out, &info)
            : pft_gstat_dp_release(kind, pft_dataset_x(set), pft_dataset_y(set), (size_t)pft_dataset_n(set),
                                   pft_dataset_d(set), nd->me->dp_epsilon, delta, nd->dp.rng, out, &info);
    if (rc)
        return pft_err_wrap(rc, "DP release of the exact statistics");
    nd->dp.delta_max = info.delta;
    nd->dp.clipped = info.clipped; /* the same rows at every release */
    json_object_set_new(
        nd->dp.info, "release",
        json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:f,s:s,s:i,s:i,s:I}", "kind", pft_gstat_kind_name(kind), "form",
                  sums ? "sums" : "sums_and_second_moments", "rows", (json_int_t)info.n, "epsilon", info.eps,
                  "delta", info.delta, "sensitivity", info.sens, "sigma", info.sigma, "calibration",
                  "analytic", "clipped_rows", info.clipped, "n_floored", info.n_floored, "noisy_elements",
                  (json_int_t)info.noisy_elems));
    pft_info("DP release of %zu rows' %s statistics: epsilon %g, delta %g, sigma %.4g (sensitivity %.4f), %d "
             "rows clipped, %d eigenvalues clamped",
             info.n, pft_gstat_kind_name(kind), info.eps, info.delta, info.sigma, info.sens, info.clipped,
             info.n_floored);
    return 0;
}

/* Charges the release of one bundle (classes are disjoint: parallel composition, so (ε, max δ)) to the ledger
 * and persists it before anything is sent. A node without rows (an aggregator) releases none of its own and
 * spends nothing. PFT_EBUDGET when the node's total would be exceeded. */
int pft_node__release_charge(node_t *nd)
{
    if (pft_dataset_n(nd->train) == 0)
        return 0;
    int rc = pft_dp_budget_charge(&nd->dp.budget, nd->me->dp_epsilon, nd->dp.delta_max);
    if (rc)
        return rc;
    char *path = pft_fsio_join(nd->args->out_dir, "dp_ledger.json");
    json_t *o = json_pack("{s:f,s:f,s:i}", "eps_spent", nd->dp.budget.eps_spent, "delta_spent",
                          nd->dp.budget.delta_spent, "releases", nd->dp.budget.releases);
    char *text = o ? json_dumps(o, JSON_REAL_PRECISION(17)) : NULL;
    rc = path && text ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    free(text);
    json_decref(o);
    pft_free(path);
    return rc;
}

void pft_node__release_share(node_t *nd, double share_sd, double sigma, uint32_t div, int clipped)
{
    nd->dp.delta_max = nd->me->dp_delta;
    nd->dp.clipped = clipped;
    json_object_set_new(nd->dp.info, "release",
                        json_pack("{s:s,s:s,s:I,s:f,s:f,s:f,s:f,s:i,s:i}", "kind", "tied", "form",
                                  "secure aggregation share (sums and second moment)", "rows",
                                  (json_int_t)pft_dataset_n(nd->train), "epsilon", nd->me->dp_epsilon,
                                  "delta", nd->dp.delta_max, "sigma_share", share_sd, "sigma_opened", sigma,
                                  "noise_div", (int)div, "clipped_rows", clipped));
}

int pft_node__release_guarantee(const node_t *nd, double *eps, double *delta)
{
    if (!(nd->me->dp_epsilon > 0))
        return 0;
    *eps = nd->me->dp_epsilon;
    *delta = nd->dp.delta_max;
    return 1;
}

/* DP setup: the ledger is loaded, the noise generator seeded from the OS. */
int pft_node__release_setup(node_t *nd)
{
    nd->dp.info = json_object();
    if (!(nd->me->dp_epsilon > 0))
        return 0;
    /* k = 1 for mixture families: the topology rule dp-k, checked at start */
    double total = nd->me->dp_budget > 0 ? nd->me->dp_budget : INFINITY;
    pft_dp_budget_init(&nd->dp.budget, total, 1.0);
    char *path = pft_fsio_join(nd->args->out_dir, "dp_ledger.json");
    json_error_t err;
    json_t *l = path && pft_fsio_exists(path) ? json_load_file(path, 0, &err) : NULL;
    if (l) {
        nd->dp.budget.eps_spent = json_number_value(json_object_get(l, "eps_spent"));
        nd->dp.budget.delta_spent = json_number_value(json_object_get(l, "delta_spent"));
        nd->dp.budget.releases = (int)json_integer_value(json_object_get(l, "releases"));
        json_decref(l);
    }
    pft_free(path);
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        return pft_err(PFT_EIO, "getrandom failed: cannot seed the DP noise");
#ifdef PFT_TEST_HOOKS
    if (getenv("PFT_DP_SEED")) {
        /* the run's seed and this node's id: reproducible, and each node's noise its own (one seed for every
         * node would draw the same noise at every member of a masked group, which then adds up coherently) */
        seed = strtoull(getenv("PFT_DP_SEED"), NULL, 10);
        for (const char *c = nd->me->id; *c; c++)
            seed = (seed ^ (uint64_t)(unsigned char)*c) * 1099511628211ULL;
        pft_warn("test hook: DP noise seeded from PFT_DP_SEED and the node's id (not private)");
    }
#endif
    nd->dp.rng = pft_rng_new(seed);
    if (!nd->dp.rng)
        return pft_err(PFT_ENOMEM, "out of memory");
    const char *mech = nd->me->exact ? "exact_stats" : pft_dp_mech_name((pft_dp_mech_t)nd->me->dp_mech);
    json_object_set_new(nd->dp.info, "mechanism", json_string(mech));
    json_object_set_new(nd->dp.info, "epsilon", json_real(nd->me->dp_epsilon));
    json_object_set_new(nd->dp.info, "delta", json_real(nd->me->dp_delta));
    if (!nd->me->exact)
        json_object_set_new(nd->dp.info, "per_class", json_array());
    pft_info("%s: epsilon %g per release, delta %g, mechanism %s, budget %s (spent %g in %d releases)",
             nd->me->exact ? "DP for exact statistics" : "DP-FedPFT", nd->me->dp_epsilon, nd->me->dp_delta,
             mech, isfinite(total) ? "limited" : "unlimited", nd->dp.budget.eps_spent,
             nd->dp.budget.releases);
    return 0;
}

void pft_node__release_json(node_t *nd, json_t *res)
{
    json_t *noise = nd->dp.info ? json_object_get(nd->dp.info, "noise") : NULL; /* pft_node_noise.c */
    if (noise) {
        json_object_set(res, "dp_noise", noise);
        json_object_del(nd->dp.info, "noise");
    }
    if (!(nd->me->dp_epsilon > 0) || !nd->dp.info)
        return;
    json_object_set_new(nd->dp.info, "clipped_rows", json_integer(nd->dp.clipped));
    json_object_set_new(nd->dp.info, "budget",
                        json_pack("{s:f,s:f,s:i}", "eps_spent", nd->dp.budget.eps_spent, "delta_spent",
                                  nd->dp.budget.delta_spent, "releases", nd->dp.budget.releases));
    if (isfinite(nd->dp.budget.eps_total))
        json_object_set_new(json_object_get(nd->dp.info, "budget"), "eps_total",
                            json_real(nd->dp.budget.eps_total));
    json_object_set_new(res, "dp", json_incref(nd->dp.info));
}
