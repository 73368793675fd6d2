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
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_head.h"
#include "pft_topo.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *train_x, *train_y, *test_x, *test_y, *cov_name, *prep_name, *dtype_name, *head_name;
    int k, rank, stats_rank, max_iter, n_init, json;
    double tol, reg, head_c;
    uint64_t seed;
    int min_rows; /* privacy floor, as a node's min_rows */
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
        if (n == 0 || n < go->min_rows) { /* the privacy floor withholds a class with fewer rows */
            PFT_FREE(xc);
            continue;
        }
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

/* Parses argv into *a, *go, *prep and *dtype; returns -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, synth_args_t *a, pft_gmm_opts_t *go, pft_prep_t *prep,
                      pft_dtype_t *dtype)
{
    const pft_opt_t opts[] = {
        {"train-features", PFT_OPT_STRING, &a->train_x, NULL, 0, -1, 1, "X.npy", "training features"},
        {"train-labels", PFT_OPT_STRING, &a->train_y, NULL, 0, -1, 1, "Y.npy", "training labels"},
        {"test-features", PFT_OPT_STRING, &a->test_x, NULL, 0, -1, 1, "X.npy", "test features"},
        {"test-labels", PFT_OPT_STRING, &a->test_y, NULL, 0, -1, 1, "Y.npy", "test labels"},
        {"k", PFT_OPT_INT, &a->k, "10", 1, 1024, 0, "K", "components per class"},
        {"cov", PFT_OPT_STRING, &a->cov_name, "diag", 0, -1, 0, "TYPE",
         "covariance: full, diag, spher, lowrank or tied (exact LDA statistics)"},
        {"rank", PFT_OPT_INT, &a->rank, "32", 1, 65535, 0, "Q",
         "lowrank: factors per component (clamped to d-1)"},
        {"stats-rank", PFT_OPT_INT, &a->stats_rank, "0", 0, 65535, 0, "Q",
         "tied: the shared covariance travels as a rank-Q factor plus its diagonal (d·Q + d numbers "
         "instead of d(d+1)/2; clamped to d-1); 0: dense"},
        {"max-iter", PFT_OPT_INT, &a->max_iter, "100", 1, 100000, 0, "N", "EM iterations at most"},
        {"tol", PFT_OPT_DOUBLE, &a->tol, "1e-3", 0, 1e3, 0, "T", "EM tolerance on the mean log-likelihood"},
        {"reg-covar", PFT_OPT_DOUBLE, &a->reg, "1e-6", 0, 1e3, 0, "R", "added to every variance"},
        {"n-init", PFT_OPT_INT, &a->n_init, "1", 1, 100, 0, "N", "EM restarts"},
        {"seed", PFT_OPT_U64, &a->seed, "0", 0, -1, 0, "S", "seed (initialisation and sampling)"},
        {"prep", PFT_OPT_STRING, &a->prep_name, "l2", 0, -1, 0, "P",
         "feature preprocessing: none, l2, sqrt-l2"},
        {"dtype", PFT_OPT_STRING, &a->dtype_name, "fp16", 0, -1, 0, "T",
         "parameter encoding the GMMs go through: fp16 or fp32"},
        {"head-c", PFT_OPT_DOUBLE, &a->head_c, "1", 1e-6, 1e6, 0, "C",
         "head inverse L2 strength (as sklearn's C)"},
        {"head", PFT_OPT_STRING, &a->head_name, "auto", 0, -1, 0, "H",
         "classifier of what would be sent: logreg (softmax head on samples) or gaussian (LDA/QDA from the "
         "class "
         "statistics, shrinkage by cross-validation over the training rows); auto: gaussian for exact "
         "statistics (cov tied, or full with k 1), logreg otherwise"},
        {"min-rows", PFT_OPT_INT, &a->min_rows, "5", 1, 1000000, 0, "N",
         "privacy floor, as a node's min_rows: every component stands for >= N rows (EM lowers K), a class "
         "with fewer rows is withheld; 1: none"},
        {"json", PFT_OPT_FLAG, &a->json, NULL, 0, -1, 0, NULL, "print one JSON object on stdout"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet synth",
        NULL,
        0,
        0,
        "Centralized FedPFT with one client (paper Fig. 7 left): fits one GMM per class on the training\n"
        "features, passes the parameters through the wire codec (fp16 by default), samples as many points "
        "per\n"
        "class as the class had, trains the softmax head on the samples and reports its test accuracy "
        "beside\n"
        "the head trained on the raw features, and the bytes the GMMs cost.",
        opts};
    int rc = pft_cli_parse(&cli, argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    pft_gmm_opts_default(go);
    if (pft_cov_parse(a->cov_name, &go->cov) != 0 || pft_prep_parse(a->prep_name, prep) != 0) {
        fprintf(stderr, "pftnet synth: %s\n", pft_errmsg());
        return 2;
    }
    int exact = pft_topo_exact(go->cov, a->k, PFT_TOPO_MERGE_EXACT); /* synth has no merge option */
    if (strcmp(a->head_name, "auto") == 0)
        a->head_name = pft_topo_head_resolve(PFT_TOPO_HEAD_AUTO, exact) == PFT_TOPO_HEAD_GAUSSIAN ? "gaussian"
                                                                                                  : "logreg";
    if (strcmp(a->head_name, "gaussian") != 0 && strcmp(a->head_name, "logreg") != 0) {
        fprintf(stderr, "pftnet synth: --head '%s': expected logreg, gaussian or auto\n", a->head_name);
        return 2;
    }
    if (go->cov == PFT_COV_TIED && strcmp(a->head_name, "gaussian") != 0) {
        fprintf(stderr, "pftnet synth: --cov tied is exact statistics: use --head gaussian\n");
        return 2;
    }
    if (a->stats_rank > 0 && go->cov != PFT_COV_TIED) {
        fprintf(stderr, "pftnet synth: --stats-rank applies to --cov tied only\n");
        return 2;
    }
    if (strcmp(a->dtype_name, "fp16") == 0)
        *dtype = PFT_DTYPE_F16;
    else if (strcmp(a->dtype_name, "fp32") == 0)
        *dtype = PFT_DTYPE_F32;
    else {
        fprintf(stderr, "pftnet synth: --dtype '%s': expected fp16 or fp32\n", a->dtype_name);
        return 2;
    }
    go->k = a->k;
    go->rank = a->rank;
    go->max_iter = a->max_iter;
    go->tol = a->tol;
    go->reg_covar = a->reg;
    go->n_init = a->n_init;
    go->seed = a->seed;
    go->min_rows = a->min_rows;
    return -1;
}

/* What one synth run produced. */
typedef struct {
    pft_dataset_t *train, *test, *syn; /* preprocessed raw splits, and the GMM samples */
    pft_bundle_t *b;                   /* the GMMs as a peer would receive them */
    double fit_s, iters;               /* summed fit seconds, mean EM iterations per class */
    double acc_raw, acc_syn;           /* test accuracy of the head on raw / synthetic features */
    double raw_s, syn_s;               /* their training seconds */
    size_t wire;                       /* bytes of the encoded bundle */
    pft_ghead_info_t ghead;            /* --head gaussian: how the head was built */
} synth_run_t;

static void run_free(synth_run_t *r)
{
    pft_dataset_destroy(&r->train);
    pft_dataset_destroy(&r->test);
    pft_dataset_destroy(&r->syn);
    pft_bundle_destroy(&r->b);
}

/* Loads both splits (same columns) and preprocesses them. */
static int load_splits(const synth_args_t *a, pft_prep_t prep, synth_run_t *r)
{
    int rc = pft_npy_load_dataset(a->train_x, a->train_y, 0, &r->train);
    if (rc == 0)
        rc = pft_npy_load_dataset(a->test_x, a->test_y, pft_dataset_n_classes(r->train), &r->test);
    if (rc == 0 && pft_dataset_d(r->test) != pft_dataset_d(r->train))
        rc = pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", a->test_x, pft_dataset_d(r->test),
                     a->train_x, pft_dataset_d(r->train));
    if (rc == 0)
        rc = pft_dataset_apply_prep(r->train, prep);
    if (rc == 0)
        rc = pft_dataset_apply_prep(r->test, prep);
    return rc;
}

/* Exact statistics of the training rows through the wire codec (one part, contributor "client"), into r->b;
 * rank > 0: a tied shared covariance travels as a rank-q factor plus diagonal (q clamped to d-1). */
static int stats_bundle(const synth_run_t *r, pft_gstat_kind_t kind, int rank, pft_dtype_t dtype,
                        pft_bundle_t **out, size_t *wire)
{
    int d = pft_dataset_d(r->train), rc = 0;
    pft_gstat_t *st = pft_gstat_new(kind, d);
    pft_bundle_t *b = pft_bundle_new("synth", "client", dtype, d);
    const char *who[1] = {"client"};
    if (!st || !b)
        rc = PFT_ENOMEM;
    if (rc == 0)
        rc = pft_gstat_add_rows(st, pft_dataset_x(r->train), pft_dataset_y(r->train),
                                (size_t)pft_dataset_n(r->train));
    for (int i = 0; rc == 0 && i < pft_gstat_n_classes(st); i++)
        rc = pft_bundle_prov_add(b, "client", pft_gstat_label(st, i), pft_gstat_count(st, i));
    if (rc == 0)
        rc = pft_bundle_add_part(b, who, 1, &st);
    if (rc == 0 && kind == PFT_GSTAT_TIED)
        rc = pft_bundle_set_shared_rank(b, rank < d ? rank : d - 1);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = pft_bundle_encode(b, &buf, &len);
    pft_bundle_destroy(&b);
    if (rc == 0)
        rc = pft_bundle_decode(buf, len, NULL, &b);
    pft_free(buf);
    pft_gstat_destroy(&st);
    *wire = len;
    *out = b;
    return rc;
}

/* The Gaussian head of what the bundle carries: its statistics, or its mixtures' moments; accuracy on test.
 */
static int gaussian_accuracy(synth_run_t *r, const synth_args_t *a, pft_gmm_opts_t const *go)
{
    int nc = pft_dataset_n_classes(r->train), rc = 0, own = pft_bundle_is_stats(r->b);
    pft_gstat_t *st = NULL;
    if (own)
        st = pft_gstat_dup(pft_bundle_part_stats(r->b, 0));
    else if ((st = pft_gstat_new(PFT_GSTAT_FULL, pft_dataset_d(r->train))))
        for (int i = 0; rc == 0 && i < pft_bundle_n_classes(r->b); i++)
            rc = pft_gstat_add_gmm(st, pft_bundle_class_gmm(r->b, i), pft_bundle_class_label(r->b, i),
                                   pft_bundle_class_count(r->b, i));
    if (!st)
        return PFT_ENOMEM;
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    o.kind = pft_gstat_kind(st) == PFT_GSTAT_FULL && own ? PFT_GHEAD_QDA : PFT_GHEAD_LDA;
    o.seed = a->seed;
    pft_ghead_t *h = NULL;
    double t0 = pft_fsio_now();
    if (rc == 0) /* own rows choose the shrinkage only where the statistics are exactly theirs */
        rc = pft_ghead_fit(st, pft_dataset_x(r->train), pft_dataset_y(r->train),
                           own ? pft_dataset_n(r->train) : 0, nc, &o, &h, &r->ghead);
    if (rc == 0)
        rc = pft_ghead_accuracy(h, pft_dataset_x(r->test), pft_dataset_y(r->test), pft_dataset_n(r->test),
                                &r->acc_syn, NULL, NULL);
    r->syn_s = pft_fsio_now() - t0;
    (void)go;
    pft_ghead_destroy(&h);
    pft_gstat_destroy(&st);
    return rc;
}

/* Fits the GMMs, samples them and trains both heads (progress on stderr unless json). */
static int run_synth(const synth_args_t *a, const pft_gmm_opts_t *go, pft_dtype_t dtype, synth_run_t *r)
{
    if (strcmp(a->head_name, "gaussian") == 0) {
        int nc = pft_dataset_n_classes(r->train), rc;
        int exact = pft_topo_exact(go->cov, a->k, PFT_TOPO_MERGE_EXACT);
        if (exact)
            rc = stats_bundle(r, go->cov == PFT_COV_TIED ? PFT_GSTAT_TIED : PFT_GSTAT_FULL, a->stats_rank,
                              dtype, &r->b, &r->wire);
        else
            rc = fit_bundle(r->train, go, dtype, &r->b, &r->fit_s, &r->iters, &r->wire);
        if (rc == 0)
            rc = pft_baseline_accuracy(r->train, r->test, nc, a->head_c, &r->acc_raw, &r->raw_s);
        if (rc == 0)
            rc = gaussian_accuracy(r, a, go);
        return rc;
    }
    int nc = pft_dataset_n_classes(r->train), d = pft_dataset_d(r->train);
    if (!a->json)
        fprintf(stderr, "fitting %s K=%d GMMs for %d classes (%d samples, d=%d)...\n", a->cov_name, a->k, nc,
                pft_dataset_n(r->train), d);
    if (!a->json && go->cov == PFT_COV_LOWRANK)
        fprintf(stderr, "lowrank: rank %d per component (d·q + 2d + 1 numbers per component)\n",
                a->rank < d ? a->rank : d - 1);
    int rc = fit_bundle(r->train, go, dtype, &r->b, &r->fit_s, &r->iters, &r->wire);
    if (rc == 0)
        rc = sample_bundle(r->b, nc, a->seed, &r->syn);
    if (rc == 0 && !a->json)
        fprintf(stderr, "training heads on raw and synthetic features...\n");
    if (rc == 0)
        rc = pft_baseline_accuracy(r->train, r->test, nc, a->head_c, &r->acc_raw, &r->raw_s);
    if (rc == 0)
        rc = pft_baseline_accuracy(r->syn, r->test, nc, a->head_c, &r->acc_syn, &r->syn_s);
    return rc;
}

/* Parameters of every GMM in the bundle (what the wire carries per number). */
static size_t bundle_params(const pft_bundle_t *b)
{
    if (pft_bundle_is_stats(b))
        return pft_bundle_formula_bytes(b) / (pft_bundle_dtype(b) == PFT_DTYPE_F16 ? 2 : 4);
    size_t params = 0;
    for (int i = 0; i < pft_bundle_n_classes(b); i++)
        params += pft_gmm_n_wire_params(pft_bundle_class_gmm(b, i));
    return params;
}

static void print_json(const synth_args_t *a, const pft_gmm_opts_t *go, const synth_run_t *r)
{
    size_t params = bundle_params(r->b);
    int nc = pft_bundle_n_classes(r->b);
    json_t *o = json_pack("{s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:s,s:i,s:s,s:s,s:f,s:f,s:f}", "acc_raw", r->acc_raw,
                          "acc_synth", r->acc_syn, "gap", r->acc_raw - r->acc_syn, "bytes_fp16",
                          (json_int_t)(params * 2), "bytes_per_class_fp16",
                          (json_int_t)(nc ? params * 2 / (size_t)nc : 0), "bytes_bundle", (json_int_t)r->wire,
                          "n_train", (json_int_t)pft_dataset_n(r->train), "cov", a->cov_name, "k", a->k,
                          "prep", a->prep_name, "dtype", a->dtype_name, "fit_seconds", r->fit_s,
                          "head_seconds", r->raw_s + r->syn_s, "em_iters_mean", r->iters);
    if (go->cov == PFT_COV_LOWRANK && nc)
        json_object_set_new(o, "rank", json_integer(pft_gmm_rank(pft_bundle_class_gmm(r->b, 0))));
    if (go->cov == PFT_COV_TIED && pft_bundle_is_stats(r->b))
        json_object_set_new(o, "stats_rank", json_integer(pft_bundle_shared_rank(r->b)));
    json_object_set_new(o, "seed", json_integer((json_int_t)a->seed));
    json_object_set_new(o, "min_rows", json_integer(a->min_rows));
    json_object_set_new(o, "head", json_string(a->head_name));
    if (strcmp(a->head_name, "gaussian") == 0) {
        json_object_set_new(o, "gaussian_kind", json_string(pft_ghead_kind_name(r->ghead.kind)));
        json_object_set_new(o, "shrinkage", json_real(r->ghead.alpha));
        json_object_set_new(o, "shrinkage_rule", json_string(r->ghead.rule));
        json_object_set_new(o, "oas_shrinkage", json_real(r->ghead.oas_alpha));
        if (r->ghead.kind == PFT_GHEAD_QDA)
            json_object_set_new(o, "qda_lambda", json_real(r->ghead.lambda));
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(8));
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static void print_text(const synth_args_t *a, const synth_run_t *r)
{
    size_t params = bundle_params(r->b);
    int nc = pft_bundle_n_classes(r->b);
    printf("acc_raw    %.4f  (head on %d raw features, %.2fs)\n", r->acc_raw, pft_dataset_n(r->train),
           r->raw_s);
    if (strcmp(a->head_name, "gaussian") == 0)
        printf("acc_synth  %.4f  (Gaussian head %s of what would be sent, shrinkage %.3g by %s, %.2fs)\n",
               r->acc_syn, pft_ghead_kind_name(r->ghead.kind), r->ghead.alpha, r->ghead.rule, r->syn_s);
    else
        printf("acc_synth  %.4f  (head on %d GMM samples, %.2fs)\n", r->acc_syn, pft_dataset_n(r->syn),
               r->syn_s);
    printf("gap        %.2f points\n", 100 * (r->acc_raw - r->acc_syn));
    printf("bytes      %zu at 16 bits (%zu per class); bundle on the wire %zu bytes (%s)\n", params * 2,
           nc ? params * 2 / (size_t)nc : 0, r->wire, a->dtype_name);
    printf("fit        %.2fs, %.1f EM iterations per class\n", r->fit_s, r->iters);
}

int pft_cmd_synth(int argc, char **argv)
{
    synth_args_t a;
    pft_gmm_opts_t go;
    pft_prep_t prep;
    pft_dtype_t dtype;
    int exit_code = parse_args(argc, argv, &a, &go, &prep, &dtype);
    if (exit_code >= 0)
        return exit_code;
    synth_run_t r = {0};
    int rc = load_splits(&a, prep, &r);
    if (rc == 0)
        rc = run_synth(&a, &go, dtype, &r);
    if (rc)
        fprintf(stderr, "pftnet synth: %s\n", pft_errmsg());
    else if (a.json)
        print_json(&a, &go, &r);
    else
        print_text(&a, &r);
    run_free(&r);
    return rc ? 1 : 0;
}
