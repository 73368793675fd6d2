/* pftnet gmm: fits one GMM per class and reports the mean log-likelihood, iterations and time. */
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_npy.h"
#include "pft_alloc.h"

#include <jansson.h>
#include <stdio.h>

/* What the per-class fits add up to. */
typedef struct {
    double total_ll, seconds; /* log-likelihood summed over the samples; fitting seconds */
    long total_iters;         /* EM iterations summed over the classes */
    int fitted, n_total;      /* classes fitted; their samples */
    int q_used;               /* lowrank: the rank used */
    size_t wire_params;       /* numbers on the wire, all classes */
} gmm_sums_t;

/* Fits and scores one GMM per non-empty class of ds: a line per class on stderr unless quiet, an object per
 * class appended to classes, the totals in *sum. 0, or an error code with the message. */
static int fit_classes(const pft_dataset_t *ds, const pft_gmm_opts_t *go, int quiet, json_t *classes,
                       gmm_sums_t *sum)
{
    float *xc = NULL;
    pft_gmm_t *g = NULL;
    int rc = 0;
    for (int c = 0; rc == 0 && c < pft_dataset_n_classes(ds); c++) {
        int n;
        rc = pft_dataset_gather_class(ds, c, &xc, &n);
        if (rc || n == 0)
            continue;
        pft_gmm_info_t info;
        double t0 = pft_fsio_now();
        rc = pft_gmm_fit(xc, n, pft_dataset_d(ds), go, &g, &info);
        double dt = pft_fsio_now() - t0;
        if (rc) {
            pft_err_wrap(rc, "class %d (%d samples)", c, n);
            break;
        }
        double ll;
        rc = pft_gmm_score(g, xc, n, &ll);
        if (rc)
            break;
        sum->seconds += dt;
        sum->q_used = pft_gmm_rank(g);
        sum->wire_params += pft_gmm_n_wire_params(g);
        sum->total_ll += ll * n;
        sum->total_iters += info.iters;
        sum->n_total += n;
        sum->fitted++;
        if (!quiet)
            fprintf(stderr, "class %d: n=%d k=%d iters=%d%s avg_loglik=%.4f %.3fs\n", c, n, info.k_used,
                    info.iters, info.converged ? "" : " (not converged)", ll, dt);
        json_array_append_new(classes, json_pack("{s:i,s:i,s:i,s:i,s:b,s:f,s:f}", "class", c, "n", n, "k",
                                                 info.k_used, "iters", info.iters, "converged",
                                                 info.converged, "avg_loglik", ll, "seconds", dt));
        pft_gmm_destroy(&g);
        PFT_FREE(xc);
    }
    pft_gmm_destroy(&g);
    pft_free(xc);
    return rc;
}

/* The result on stdout: one JSON object (taking classes) or one line (classes freed). */
static void print_result(const gmm_sums_t *sum, int json, const char *cov_name, int k, int lowrank,
                         json_t *classes)
{
    double avg = sum->total_ll / (sum->n_total ? sum->n_total : 1);
    double iters = sum->fitted ? (double)sum->total_iters / sum->fitted : 0.0;
    if (json) {
        json_t *o =
            json_pack("{s:i,s:i,s:f,s:f,s:f,s:s,s:i,s:I,s:o}", "classes", sum->fitted, "n", sum->n_total,
                      "avg_loglik", avg, "iters", iters, "seconds", sum->seconds, "cov", cov_name, "k", k,
                      "wire_params", (json_int_t)sum->wire_params, "per_class", classes);
        if (lowrank)
            json_object_set_new(o, "rank", json_integer(sum->q_used));
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf(
            "classes %d  samples %d  avg_loglik %.6f  mean iters %.1f  fit seconds %.3f  wire numbers %zu\n",
            sum->fitted, sum->n_total, avg, iters, sum->seconds, sum->wire_params);
        json_decref(classes);
    }
}

int pft_cmd_gmm(int argc, char **argv)
{
    const char *features, *labels, *cov_name, *prep_name;
    int k, rank, max_iter, n_init, json, quiet;
    double tol, reg;
    uint64_t seed;
    const pft_opt_t opts[] = {
        {"features", PFT_OPT_STRING, &features, NULL, 0, -1, 1, "X.npy",
         "features, n×d (.npy, float16/32/64)"},
        {"labels", PFT_OPT_STRING, &labels, NULL, 0, -1, 1, "Y.npy", "labels, n (.npy, int32/int64)"},
        {"k", PFT_OPT_INT, &k, "10", 1, 1024, 0, "K", "components per class"},
        {"cov", PFT_OPT_STRING, &cov_name, "diag", 0, -1, 0, "TYPE",
         "covariance: full, diag, spher or lowrank"},
        {"rank", PFT_OPT_INT, &rank, "32", 1, 65535, 0, "Q",
         "lowrank: factors per component (clamped to d-1)"},
        {"max-iter", PFT_OPT_INT, &max_iter, "100", 1, 100000, 0, "N", "EM iterations at most"},
        {"tol", PFT_OPT_DOUBLE, &tol, "1e-3", 0, 1e3, 0, "T",
         "stop when the mean log-likelihood changes less (0: run max-iter)"},
        {"reg-covar", PFT_OPT_DOUBLE, &reg, "1e-6", 0, 1e3, 0, "R", "added to every variance"},
        {"n-init", PFT_OPT_INT, &n_init, "1", 1, 100, 0, "N", "EM restarts; the best is kept"},
        {"seed", PFT_OPT_U64, &seed, "0", 0, -1, 0, "S", "seed of the k-means++ initialisation"},
        {"prep", PFT_OPT_STRING, &prep_name, "none", 0, -1, 0, "P",
         "feature preprocessing: none, l2, sqrt-l2"},
        {"json", PFT_OPT_FLAG, &json, NULL, 0, -1, 0, NULL, "print one JSON object on stdout"},
        {"quiet", PFT_OPT_FLAG, &quiet, NULL, 0, -1, 0, NULL, "no per-class lines on stderr"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet gmm",
        NULL,
        0,
        0,
        "Fits one Gaussian mixture per class by EM (k-means++ initialisation) and reports the mean\n"
        "log-likelihood of every sample under its class's mixture (natural log, comparable with\n"
        "scikit-learn's GaussianMixture.score), EM iterations and fitting time.",
        opts};
    int rc = pft_cli_parse(&cli, argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;

    pft_gmm_opts_t go;
    pft_gmm_opts_default(&go);
    pft_prep_t prep;
    if (pft_cov_parse(cov_name, &go.cov) != 0 || pft_prep_parse(prep_name, &prep) != 0) {
        fprintf(stderr, "pftnet gmm: %s\n", pft_errmsg());
        return 2;
    }
    go.k = k;
    go.rank = rank;
    go.max_iter = max_iter;
    go.tol = tol;
    go.reg_covar = reg;
    go.n_init = n_init;
    go.seed = seed;

    pft_dataset_t *ds = NULL;
    json_t *classes = json_array();
    gmm_sums_t sum = {0};
    rc = pft_npy_load_dataset(features, labels, 0, &ds);
    if (rc == 0)
        rc = pft_dataset_apply_prep(ds, prep);
    if (rc == 0)
        rc = fit_classes(ds, &go, quiet, classes, &sum);
    if (rc) {
        fprintf(stderr, "pftnet gmm: %s\n", pft_errmsg());
        json_decref(classes);
        pft_dataset_destroy(&ds);
        return 1;
    }
    print_result(&sum, json, cov_name, k, go.cov == PFT_COV_LOWRANK, classes);
    pft_dataset_destroy(&ds);
    return 0;
}
