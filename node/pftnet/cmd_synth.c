/* pftnet synth: one-client FedPFT (paper Fig. 7 left): head on GMM samples vs head on the raw features. */
#include "pft_alloc.h"
#include "pft_baseline.h"
#include "pft_bundle.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_npy.h"
#include "pft_head.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *train_x, *train_y, *test_x, *test_y, *cov_name, *prep_name, *dtype_name;
    int k, rank, max_iter, n_init, json;
    double tol, reg, head_c;
    uint64_t seed;
} synth_args_t;

/* Fits per-class GMMs to train, carries them through the wire codec (quantised like a real hand-off), and
 * fills *bundle_out. Also returns the summed fit seconds and mean EM iterations. */
static int fit_bundle(const pft_dataset_t *train, const pft_gmm_opts_t *go, pft_dtype_t dtype,
                      pft_bundle_t **bundle_out, double *fit_seconds, double *mean_iters, size_t *wire_bytes)
{
    int rc = PFT_ENOMEM, d = pft_dataset_d(train), fitted = 0;
    long iters = 0;
    float *xc = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_gmm_t *g = NULL;
    pft_bundle_t *b = pft_bundle_new("synth", "synth", dtype, d);
    if (!b)
        return pft_err(PFT_ENOMEM, "out of memory");
    *fit_seconds = 0;
    for (int c = 0; c < pft_dataset_n_classes(train); c++) {
        int n;
        rc = pft_dataset_gather_class(train, c, &xc, &n);
        if (rc)
            goto done;
        if (n == 0)
            continue;
        pft_gmm_info_t info;
        double t0 = pft_fsio_now();
        rc = pft_gmm_fit(xc, n, d, go, &g, &info);
        *fit_seconds += pft_fsio_now() - t0;
        PFT_FREE(xc);
        if (rc) {
            pft_err_wrap(rc, "fitting class %d (%d samples)", c, n);
            goto done;
        }
        iters += info.iters;
        fitted++;
        rc = pft_bundle_add_class(b, c, (uint64_t)n, &g);
        if (rc == 0)
            rc = pft_bundle_prov_add(b, "synth", c, (uint64_t)n);
        if (rc)
            goto done;
    }
    rc = pft_bundle_encode(b, &buf, &len);
    if (rc)
        goto done;
    pft_bundle_destroy(&b);
    rc = pft_bundle_decode(buf, len, NULL, &b); /* what a peer would receive */
    if (rc)
        goto done;
    *wire_bytes = len;
    *mean_iters = fitted ? (double)iters / fitted : 0;
    *bundle_out = b;
    b = NULL;
done:
    pft_free(xc);
    pft_free(buf);
    pft_gmm_destroy(&g);
    pft_bundle_destroy(&b);
    return rc;
}

/* Samples as many points per class as the class had, into a new dataset. */
static int sample_bundle(const pft_bundle_t *b, int n_classes, uint64_t seed, pft_dataset_t **out)
{
    int n = 0, d = pft_bundle_dim(b);
    for (int i = 0; i < pft_bundle_n_classes(b); i++)
        n += (int)pft_bundle_class_count(b, i);
    pft_dataset_t *ds = pft_dataset_new(n, d, n_classes);
    if (!ds)
        return pft_err(PFT_ENOMEM, "out of memory for %d synthetic samples", n);
    float *x = pft_dataset_x_mut(ds);
    int32_t *y = pft_dataset_y_mut(ds);
    int row = 0;
    for (int i = 0; i < pft_bundle_n_classes(b); i++) {
        int m = (int)pft_bundle_class_count(b, i), label = pft_bundle_class_label(b, i);
        pft_rng_t *rng = pft_rng_new(pft_rng_derive(seed, 0x73796e7468ULL, (uint64_t)label));
        int rc = rng ? pft_gmm_sample(pft_bundle_class_gmm(b, i), rng, m, x + (size_t)row * d) : PFT_ENOMEM;
        pft_rng_destroy(&rng);
        if (rc) {
            pft_dataset_destroy(&ds);
            return pft_err_wrap(rc, "sampling class %d", label);
        }
        for (int j = 0; j < m; j++)
            y[row + j] = label;
        row += m;
    }
    *out = ds;
    return 0;
}

int pft_cmd_synth(int argc, char **argv)
{
    synth_args_t a;
    const pft_opt_t opts[] = {
        {"train-features", PFT_OPT_STRING, &a.train_x, NULL, 0, -1, 1, "X.npy", "training features"},
        {"train-labels", PFT_OPT_STRING, &a.train_y, NULL, 0, -1, 1, "Y.npy", "training labels"},
        {"test-features", PFT_OPT_STRING, &a.test_x, NULL, 0, -1, 1, "X.npy", "test features"},
        {"test-labels", PFT_OPT_STRING, &a.test_y, NULL, 0, -1, 1, "Y.npy", "test labels"},
        {"k", PFT_OPT_INT, &a.k, "10", 1, 1024, 0, "K", "components per class"},
        {"cov", PFT_OPT_STRING, &a.cov_name, "diag", 0, -1, 0, "TYPE", "covariance: full, diag, spher or lowrank"},
        {"rank", PFT_OPT_INT, &a.rank, "32", 1, 65535, 0, "Q", "lowrank: factors per component (clamped to d-1)"},
        {"max-iter", PFT_OPT_INT, &a.max_iter, "100", 1, 100000, 0, "N", "EM iterations at most"},
        {"tol", PFT_OPT_DOUBLE, &a.tol, "1e-3", 0, 1e3, 0, "T", "EM tolerance on the mean log-likelihood"},
        {"reg-covar", PFT_OPT_DOUBLE, &a.reg, "1e-6", 0, 1e3, 0, "R", "added to every variance"},
        {"n-init", PFT_OPT_INT, &a.n_init, "1", 1, 100, 0, "N", "EM restarts"},
        {"seed", PFT_OPT_U64, &a.seed, "0", 0, -1, 0, "S", "seed (initialisation and sampling)"},
        {"prep", PFT_OPT_STRING, &a.prep_name, "l2", 0, -1, 0, "P", "feature preprocessing: none, l2, sqrt-l2"},
        {"dtype", PFT_OPT_STRING, &a.dtype_name, "fp16", 0, -1, 0, "T",
         "parameter encoding the GMMs go through: fp16 or fp32"},
        {"head-c", PFT_OPT_DOUBLE, &a.head_c, "1", 1e-6, 1e6, 0, "C", "head inverse L2 strength (as sklearn's C)"},
        {"json", PFT_OPT_FLAG, &a.json, NULL, 0, -1, 0, NULL, "print one JSON object on stdout"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet synth", NULL, 0, 0,
        "Centralized FedPFT with one client (paper Fig. 7 left): fits one GMM per class on the training\n"
        "features, passes the parameters through the wire codec (fp16 by default), samples as many points per\n"
        "class as the class had, trains the softmax head on the samples and reports its test accuracy beside\n"
        "the head trained on the raw features, and the bytes the GMMs cost.",
        opts};
    int rc = pft_cli_parse(&cli, argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    pft_gmm_opts_t go;
    pft_gmm_opts_default(&go);
    pft_prep_t prep;
    pft_dtype_t dtype;
    if (pft_cov_parse(a.cov_name, &go.cov) != 0 || pft_prep_parse(a.prep_name, &prep) != 0) {
        fprintf(stderr, "pftnet synth: %s\n", pft_errmsg());
        return 2;
    }
    if (strcmp(a.dtype_name, "fp16") == 0)
        dtype = PFT_DTYPE_F16;
    else if (strcmp(a.dtype_name, "fp32") == 0)
        dtype = PFT_DTYPE_F32;
    else {
        fprintf(stderr, "pftnet synth: --dtype '%s': expected fp16 or fp32\n", a.dtype_name);
        return 2;
    }
    go.k = a.k;
    go.rank = a.rank;
    go.max_iter = a.max_iter;
    go.tol = a.tol;
    go.reg_covar = a.reg;
    go.n_init = a.n_init;
    go.seed = a.seed;

    pft_dataset_t *train = NULL, *test = NULL, *syn = NULL;
    pft_bundle_t *b = NULL;
    double fit_s = 0, iters = 0, acc_raw = 0, acc_syn = 0, raw_s = 0, syn_s = 0;
    size_t wire = 0;
    rc = pft_npy_load_dataset(a.train_x, a.train_y, 0, &train);
    if (rc == 0)
        rc = pft_npy_load_dataset(a.test_x, a.test_y, pft_dataset_n_classes(train), &test);
    if (rc == 0 && pft_dataset_d(test) != pft_dataset_d(train))
        rc = pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", a.test_x, pft_dataset_d(test), a.train_x,
                     pft_dataset_d(train));
    if (rc == 0)
        rc = pft_dataset_apply_prep(train, prep);
    if (rc == 0)
        rc = pft_dataset_apply_prep(test, prep);
    if (rc == 0 && !a.json)
        fprintf(stderr, "fitting %s K=%d GMMs for %d classes (%d samples, d=%d)...\n", a.cov_name, a.k,
                pft_dataset_n_classes(train), pft_dataset_n(train), pft_dataset_d(train));
    if (rc == 0 && !a.json && go.cov == PFT_COV_LOWRANK)
        fprintf(stderr, "lowrank: rank %d per component (d·q + 2d + 1 numbers per component)\n",
                a.rank < pft_dataset_d(train) ? a.rank : pft_dataset_d(train) - 1);
    if (rc == 0)
        rc = fit_bundle(train, &go, dtype, &b, &fit_s, &iters, &wire);
    if (rc == 0)
        rc = sample_bundle(b, pft_dataset_n_classes(train), a.seed, &syn);
    if (rc == 0 && !a.json)
        fprintf(stderr, "training heads on raw and synthetic features...\n");
    if (rc == 0)
        rc = pft_baseline_accuracy(train, test, pft_dataset_n_classes(train), a.head_c, &acc_raw, &raw_s);
    if (rc == 0)
        rc = pft_baseline_accuracy(syn, test, pft_dataset_n_classes(train), a.head_c, &acc_syn, &syn_s);
    if (rc) {
        fprintf(stderr, "pftnet synth: %s\n", pft_errmsg());
        pft_dataset_destroy(&train);
        pft_dataset_destroy(&test);
        pft_dataset_destroy(&syn);
        pft_bundle_destroy(&b);
        return 1;
    }
    size_t params = 0;
    for (int i = 0; i < pft_bundle_n_classes(b); i++)
        params += pft_gmm_n_wire_params(pft_bundle_class_gmm(b, i));
    int nc = pft_bundle_n_classes(b);
    if (a.json) {
        json_t *o = json_pack("{s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:s,s:i,s:s,s:s,s:f,s:f,s:f}", "acc_raw", acc_raw,
                              "acc_synth", acc_syn, "gap", acc_raw - acc_syn, "bytes_fp16", (json_int_t)(params * 2),
                              "bytes_per_class_fp16", (json_int_t)(nc ? params * 2 / (size_t)nc : 0), "bytes_bundle",
                              (json_int_t)wire, "n_train", (json_int_t)pft_dataset_n(train), "cov", a.cov_name, "k",
                              a.k, "prep", a.prep_name, "dtype", a.dtype_name, "fit_seconds", fit_s,
                              "head_seconds", raw_s + syn_s, "em_iters_mean", iters);
        if (go.cov == PFT_COV_LOWRANK && nc)
            json_object_set_new(o, "rank", json_integer(pft_gmm_rank(pft_bundle_class_gmm(b, 0))));
        json_object_set_new(o, "seed", json_integer((json_int_t)a.seed));
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("acc_raw    %.4f  (head on %d raw features, %.2fs)\n", acc_raw, pft_dataset_n(train), raw_s);
        printf("acc_synth  %.4f  (head on %d GMM samples, %.2fs)\n", acc_syn, pft_dataset_n(syn), syn_s);
        printf("gap        %.2f points\n", 100 * (acc_raw - acc_syn));
        printf("bytes      %zu at 16 bits (%zu per class); bundle on the wire %zu bytes (%s)\n", params * 2,
               nc ? params * 2 / (size_t)nc : 0, wire, a.dtype_name);
        printf("fit        %.2fs, %.1f EM iterations per class\n", fit_s, iters);
    }
    pft_dataset_destroy(&train);
    pft_dataset_destroy(&test);
    pft_dataset_destroy(&syn);
    pft_bundle_destroy(&b);
    return 0;
}
