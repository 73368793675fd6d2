/* Benchmark helper: fits one VLFeat vl_gmm (diagonal) per class and reports time and avg log-likelihood. */

/*
 * Standalone program (links only libvl and libm), not part of pftnet.
 *
 *   gmm_vlfeat --features X.npy --labels Y.npy [--k 10] [--max-iter 100] [--seed 0]
 *              [--lower-bound 1e-6] [--threads 0] [--force-iters] [--json]
 *
 * Per class c: vl_gmm_new(VL_TYPE_FLOAT, d, K); initialisation VlGMMKMeans with VLFeat's default k-means
 * object (ANN, 5 iterations, random-selection seeding, seeded through vl_rand_seed(vl_get_rand(), seed + c));
 * then vl_gmm_em with max_num_iterations = N.  VLFeat's EM loop performs exactly N M-steps unless its
 * hard-coded relative log-likelihood test (|ΔLL/LL| < 1e-5, not configurable) stops it earlier; the number of
 * M-steps actually done is counted from VLFeat's own verbose messages (captured through vl_set_printf_func,
 * never printed).  With --force-iters the program calls vl_gmm_em again on the current parameters until N
 * M-steps are done.  Each resumed call repeats one E-step; the program then times one VLFeat E-step per class
 * (vl_get_gmm_data_posteriors_f on the final parameters) and reports seconds_adjusted = seconds minus resumed
 * calls × that time (likewise cpu_seconds_adjusted for process CPU time), an estimate of what N uninterrupted
 * iterations would cost.
 *
 * The average log-likelihood is recomputed here in double precision from the returned priors, means and
 * diagonal covariances: mean over all samples of log p(x | its class's GMM), natural log, full Gaussian
 * constant (the quantity scikit-learn's score() returns).  VLFeat's own value (vl_gmm_em's return: the SUM
 * over the class's samples, float accumulation per sample) is reported divided by N as vlfeat_avg_loglik.
 *
 * Features are used as given (float32 C-order .npy); preprocessing is done by the calling script.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vl/generic.h>
#include <vl/gmm.h>
#include <vl/random.h>

typedef struct {
    char *data;  /* raw array bytes */
    size_t rows; /* shape[0] */
    size_t cols; /* shape[1], 1 for a vector */
    char kind;   /* 'f' or 'i' */
    int itemsize;
} npy_t;

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall clock. */
static double now_seconds(void)
{
    return clock_seconds(CLOCK_MONOTONIC);
}

/* CPU time of the whole process (all threads). */
static double cpu_seconds(void)
{
    return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

/* Reads a little-endian, C-order .npy of '<f4', '<i4' or '<i8' with 1 or 2 dimensions. Returns 0 or -1
 * (message on stderr). */
static int npy_read(const char *path, npy_t *out)
{
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    char *hdr = NULL;
    size_t hlen, count, nbytes;
    int rc = -1;
    const char *p;

    memset(out, 0, sizeof *out);
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "%s: not a .npy file\n", path);
        goto done;
    }
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
    } else {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) {
            fprintf(stderr, "%s: truncated header\n", path);
            goto done;
        }
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)b[0] << 16) | ((size_t)b[1] << 24);
    }
    hdr = calloc(hlen + 1, 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
        fprintf(stderr, "%s: truncated header\n", path);
        goto done;
    }
    if (strstr(hdr, "'fortran_order': True")) {
        fprintf(stderr, "%s: Fortran order not supported\n", path);
        goto done;
    }
    if (strstr(hdr, "'<f4'")) {
        out->kind = 'f';
        out->itemsize = 4;
    } else if (strstr(hdr, "'<i4'")) {
        out->kind = 'i';
        out->itemsize = 4;
    } else if (strstr(hdr, "'<i8'")) {
        out->kind = 'i';
        out->itemsize = 8;
    } else {
        fprintf(stderr, "%s: dtype must be <f4, <i4 or <i8\n", path);
        goto done;
    }
    p = strstr(hdr, "'shape': (");
    if (!p) {
        fprintf(stderr, "%s: no shape in header\n", path);
        goto done;
    }
    p += strlen("'shape': (");
    out->rows = strtoull(p, (char **)&p, 10);
    out->cols = 1;
    if (*p == ',') {
        p++;
        while (*p == ' ')
            p++;
        if (*p != ')')
            out->cols = strtoull(p, (char **)&p, 10);
    }
    count = out->rows * out->cols;
    nbytes = count * (size_t)out->itemsize;
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data || fread(out->data, 1, nbytes, f) != nbytes) {
        fprintf(stderr, "%s: truncated data (%zu x %zu expected)\n", path, out->rows, out->cols);
        goto done;
    }
    rc = 0;
done:
    free(hdr);
    fclose(f);
    if (rc != 0) {
        free(out->data);
        out->data = NULL;
    }
    return rc;
}

/* VLFeat's verbose messages are swallowed; the EM iteration lines are counted. */
static long g_estep_lines; /* "gmm: em: iteration %d" lines = E-steps */
static long g_converged;   /* "fully converged" lines */
static int g_echo;         /* --verbose: pass VLFeat's messages to stderr */

static int count_printf(char const *format, ...)
{
    if (strncmp(format, "gmm: em: iteration", 18) == 0)
        g_estep_lines++;
    else if (strstr(format, "fully converged"))
        g_converged++;
    if (g_echo) {
        va_list ap;
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
    }
    return 0;
}

/* log p(x) under a diagonal GMM, double precision; logw_scratch[k + c] holds log π_c - ½(d log 2π +
 * log|Σ_c|). */
static double diag_gmm_loglik(const float *x, size_t d, size_t k, const float *means, const float *covs,
                              double *logw_scratch)
{
    double mx = -INFINITY, s = 0.0;
    for (size_t c = 0; c < k; c++) {
        double q = 0.0;
        const float *mu = means + c * d, *var = covs + c * d;
        for (size_t j = 0; j < d; j++) {
            double diff = (double)x[j] - (double)mu[j];
            q += diff * diff / (double)var[j];
        }
        logw_scratch[c] = logw_scratch[k + c] - 0.5 * q;
        if (logw_scratch[c] > mx)
            mx = logw_scratch[c];
    }
    for (size_t c = 0; c < k; c++)
        s += exp(logw_scratch[c] - mx);
    return mx + log(s);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gmm_vlfeat --features X.npy --labels Y.npy [--k 10] [--max-iter 100] [--seed 0]\n"
            "                  [--lower-bound 1e-6] [--threads 0] [--force-iters] [--json] [--verbose]\n");
}

/* Command-line options. */
typedef struct {
    const char *xpath, *ypath; /* --features, --labels */
    long k, max_iter, threads; /* --k, --max-iter, --threads (0: VLFeat's default) */
    unsigned long seed;        /* --seed: class c uses seed + c */
    double lower_bound;        /* --lower-bound on the variances */
    int json, force;           /* --json, --force-iters */
} args_t;

/* What the per-class fits add up to, reported at the end. */
typedef struct {
    double t_init, t_em;         /* wall seconds in k-means initialisation and in EM */
    double t_extra_e, c_extra_e; /* estimated wall / CPU seconds of the E-steps repeated by resumed calls */
    double ll_sum, vl_ll_sum;    /* sums of log-likelihoods: recomputed here, and VLFeat's own */
    double cpu;                  /* process CPU seconds in initialisation and EM */
    long it_min, it_max;         /* M-steps per class, smallest and largest (-1: none yet) */
    long n_conv, n_resumed;      /* classes stopped by VLFeat's convergence test; resumed vl_gmm_em calls */
    long n_at_bound, n_var;      /* variances at the lower bound, of all variances */
} totals_t;

/* Parses argv into *a (g_echo for --verbose). Returns 0, or 2 after printing the usage. */
static int parse_args(int argc, char **argv, args_t *a)
{
    *a = (args_t){.k = 10, .max_iter = 100, .lower_bound = 1e-6};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (!strcmp(o, "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(o, "--force-iters")) {
            a->force = 1;
            continue;
        }
        if (!strcmp(o, "--verbose")) {
            g_echo = 1;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(o, "--features"))
            a->xpath = v;
        else if (!strcmp(o, "--labels"))
            a->ypath = v;
        else if (!strcmp(o, "--k"))
            a->k = strtol(v, NULL, 10);
        else if (!strcmp(o, "--max-iter"))
            a->max_iter = strtol(v, NULL, 10);
        else if (!strcmp(o, "--seed"))
            a->seed = strtoul(v, NULL, 10);
        else if (!strcmp(o, "--lower-bound"))
            a->lower_bound = strtod(v, NULL);
        else if (!strcmp(o, "--threads"))
            a->threads = strtol(v, NULL, 10);
        else {
            usage();
            return 2;
        }
    }
    if (!a->xpath || !a->ypath || a->k < 1 || a->max_iter < 0 || a->threads < 0) {
        usage();
        return 2;
    }
    return 0;
}

/* Reads the features X (float32 n x d) and labels Y (int n). Returns 0, or -1 (message on stderr; nothing
 * left allocated). */
static int load_inputs(const args_t *a, npy_t *X, npy_t *Y)
{
    if (npy_read(a->xpath, X) != 0)
        return -1;
    if (npy_read(a->ypath, Y) != 0) {
        free(X->data);
        return -1;
    }
    if (X->kind != 'f' || X->cols < 1 || Y->kind != 'i' || Y->cols != 1 || Y->rows != X->rows) {
        fprintf(stderr, "features must be float32 n x d and labels int n (got %zu x %zu, %zu)\n", X->rows,
                X->cols, Y->rows);
        free(X->data);
        free(Y->data);
        return -1;
    }
    return 0;
}

/* Converts the labels to lab[0..n) and counts the classes (largest label + 1). Returns 0, or -1 for a label
 * out of range (message on stderr). */
static int read_labels(const npy_t *Y, long *lab, long *ncls)
{
    *ncls = 0;
    for (size_t i = 0; i < Y->rows; i++) {
        lab[i] = Y->itemsize == 4 ? (long)((int32_t *)Y->data)[i] : (long)((int64_t *)Y->data)[i];
        if (lab[i] < 0 || lab[i] > 100000) {
            fprintf(stderr, "label %ld out of range at row %zu\n", lab[i], i);
            return -1;
        }
        if (lab[i] + 1 > *ncls)
            *ncls = lab[i] + 1;
    }
    return 0;
}

/* Runs vl_gmm_em on buf[0..nc) (and, with --force-iters, again until max_iter M-steps are done). Returns
 * VLFeat's log-likelihood of the last call; *msteps and *resumed get the M-steps done and the resumed calls.
 */
static double run_em(const args_t *a, VlGMM *gmm, const float *buf, size_t nc, long *msteps, long *resumed,
                     totals_t *t)
{
    double vl_ll;
    vl_gmm_set_verbosity(gmm, 1); /* EM lines are counted, not printed */
    g_estep_lines = 0;
    g_converged = 0;
    vl_ll = vl_gmm_em(gmm, buf, nc);
    *msteps = g_estep_lines - 1;
    *resumed = 0;
    if (g_converged)
        t->n_conv++;
    while (a->force && *msteps < a->max_iter) {
        long before = g_estep_lines;
        vl_gmm_set_max_num_iterations(gmm, (vl_size)(a->max_iter - *msteps));
        vl_ll = vl_gmm_em(gmm, buf, nc);
        *msteps += g_estep_lines - before - 1;
        (*resumed)++;
    }
    return vl_ll;
}

/* Each resumed call repeated one E-step; times one E-step on this class (VLFeat's own exported E-step, the
 * final parameters) so that the cost of the repeats can be subtracted. Returns 0, or -1 out of memory. */
static int time_repeated_esteps(VlGMM *gmm, const float *buf, size_t nc, size_t d, long k, long resumed,
                                totals_t *t)
{
    float *post = malloc(nc * (size_t)k * sizeof *post);
    double te, ce;
    if (!post) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    ce = cpu_seconds();
    te = now_seconds();
    vl_get_gmm_data_posteriors_f(post, (vl_size)k, nc, vl_gmm_get_priors(gmm), vl_gmm_get_means(gmm), d,
                                 vl_gmm_get_covariances(gmm), buf);
    t->t_extra_e += (double)resumed * (now_seconds() - te);
    t->c_extra_e += (double)resumed * (cpu_seconds() - ce);
    free(post);
    return 0;
}

/* Adds the log-likelihood of buf[0..nc) under the fitted model (double precision) and counts the variances
 * at the lower bound. scratch holds 2 k doubles. */
static void score_class(const args_t *a, const VlGMM *gmm, const float *buf, size_t nc, size_t d,
                        double *scratch, totals_t *t)
{
    const long k = a->k;
    const float *pri = vl_gmm_get_priors(gmm);
    const float *mu = vl_gmm_get_means(gmm);
    const float *cov = vl_gmm_get_covariances(gmm);
    t->n_var += k * (long)d;
    for (long j = 0; j < k; j++) {
        double logdet = 0.0;
        for (size_t u = 0; u < d; u++) {
            logdet += log((double)cov[(size_t)j * d + u]);
            t->n_at_bound += (double)cov[(size_t)j * d + u] <= (double)(float)a->lower_bound * (1.0 + 1e-6);
        }
        scratch[k + j] = log((double)pri[j]) - 0.5 * ((double)d * log(2.0 * 3.14159265358979323846) + logdet);
    }
    for (size_t i = 0; i < nc; i++)
        t->ll_sum += diag_gmm_loglik(buf + i * d, d, (size_t)k, mu, cov, scratch);
}

/* Fits class c's GMM on its nc samples buf[0..nc) and adds its times, iterations and log-likelihoods to *t.
 * Returns 0, or -1 (message on stderr). */
static int fit_class(const args_t *a, long c, const float *buf, size_t nc, size_t d, double *scratch,
                     totals_t *t)
{
    VlGMM *gmm = vl_gmm_new(VL_TYPE_FLOAT, d, (vl_size)a->k);
    double t0, t1, t2, c0, vl_ll;
    long msteps, resumed;
    if (!gmm) {
        fprintf(stderr, "vl_gmm_new failed\n");
        return -1;
    }
    vl_gmm_set_max_num_iterations(gmm, (vl_size)a->max_iter);
    vl_gmm_set_initialization(gmm, VlGMMKMeans);
    vl_gmm_set_covariance_lower_bound(gmm, a->lower_bound);
    vl_rand_seed(vl_get_rand(), (vl_uint32)(a->seed + (unsigned long)c));

    c0 = cpu_seconds();
    t0 = now_seconds();
    vl_gmm_set_verbosity(gmm, 0); /* the default k-means object copies this verbosity */
    vl_gmm_init_with_kmeans(gmm, buf, nc, NULL);
    t1 = now_seconds();
    vl_ll = run_em(a, gmm, buf, nc, &msteps, &resumed, t);
    t2 = now_seconds();
    t->cpu += cpu_seconds() - c0;
    t->t_init += t1 - t0;
    t->t_em += t2 - t1;
    t->n_resumed += resumed;
    if (resumed > 0 && time_repeated_esteps(gmm, buf, nc, d, a->k, resumed, t) != 0) {
        vl_gmm_delete(gmm);
        return -1;
    }
    if (t->it_min < 0 || msteps < t->it_min)
        t->it_min = msteps;
    if (msteps > t->it_max)
        t->it_max = msteps;
    t->vl_ll_sum += vl_ll;
    score_class(a, gmm, buf, nc, d, scratch, t);
    vl_gmm_delete(gmm);
    return 0;
}

/* Fits one GMM per class of lab[0..n) on the rows of x (n x d), classes 0..ncls-1 in order (classes without
 * samples skipped). Returns 0, or -1 (message on stderr). */
static int fit_classes(const args_t *a, const float *x, size_t n, size_t d, const long *lab, long ncls,
                       float *buf, double *scratch, totals_t *t)
{
    for (long c = 0; c < ncls; c++) {
        size_t nc = 0;
        for (size_t i = 0; i < n; i++)
            if (lab[i] == c)
                memcpy(buf + (nc++) * d, x + i * d, d * sizeof(float));
        if (nc == 0)
            continue;
        if (nc < (size_t)a->k) {
            fprintf(stderr, "class %ld has %zu samples < K=%ld\n", c, nc, a->k);
            return -1;
        }
        if (fit_class(a, c, buf, nc, d, scratch, t) != 0)
            return -1;
    }
    return 0;
}

/* Prints the totals: one JSON line (--json) or a few lines of text. */
static void report(const args_t *a, const totals_t *t, long ncls, size_t used, size_t d)
{
    if (a->json) {
        printf("{\"tool\":\"vlfeat\",\"version\":\"%s\",\"classes\":%ld,\"n\":%zu,\"d\":%zu,\"k\":%ld,",
               vl_get_version_string(), ncls, used, d, a->k);
        printf("\"cov\":\"diag\",\"avg_loglik\":%.6f,\"vlfeat_avg_loglik\":%.6f,", t->ll_sum / (double)used,
               t->vl_ll_sum / (double)used);
        printf("\"iters\":%ld,\"iters_min\":%ld,\"classes_converged_early\":%ld,\"resumed_calls\":%ld,",
               t->it_max, t->it_min, t->n_conv, t->n_resumed);
        printf("\"seconds\":%.6f,\"init_seconds\":%.6f,\"em_seconds\":%.6f,", t->t_init + t->t_em, t->t_init,
               t->t_em);
        printf("\"repeated_estep_seconds\":%.6f,\"seconds_adjusted\":%.6f,", t->t_extra_e,
               t->t_init + t->t_em - t->t_extra_e);
        printf("\"variances_at_lower_bound\":%.6f,", (double)t->n_at_bound / (double)t->n_var);
        printf("\"cpu_seconds\":%.6f,\"cpu_seconds_adjusted\":%.6f,\"threads\":%zu}\n", t->cpu,
               t->cpu - t->c_extra_e, (size_t)vl_get_max_threads());
        return;
    }
    printf("vlfeat %s: %ld classes, n=%zu d=%zu K=%ld threads=%zu\n", vl_get_version_string(), ncls, used, d,
           a->k, (size_t)vl_get_max_threads());
    printf("  avg_loglik %.6f (VLFeat's own, /n: %.6f)\n", t->ll_sum / (double)used,
           t->vl_ll_sum / (double)used);
    printf("  M-steps per class %ld..%ld, %ld classes stopped by VLFeat's 1e-5 test, %ld resumes\n",
           t->it_min, t->it_max, t->n_conv, t->n_resumed);
    printf("  seconds %.3f (k-means init %.3f + EM %.3f); minus repeated E-steps (est. %.3f): "
           "%.3f\n",
           t->t_init + t->t_em, t->t_init, t->t_em, t->t_extra_e, t->t_init + t->t_em - t->t_extra_e);
    printf("  variances clamped at the lower bound %g: %.2f%%\n", a->lower_bound,
           100.0 * (double)t->n_at_bound / (double)t->n_var);
    printf("  cpu seconds %.3f; minus repeated E-steps (est. %.3f): %.3f\n", t->cpu, t->c_extra_e,
           t->cpu - t->c_extra_e);
}

int main(int argc, char **argv)
{
    args_t a;
    npy_t X, Y;
    totals_t t = {.it_min = -1, .it_max = -1};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc;
    if (load_inputs(&a, &X, &Y) != 0)
        return 1;

    const size_t n = X.rows, d = X.cols;
    long *lab = malloc(n * sizeof *lab);
    float *buf = malloc(n * d * sizeof *buf);
    double *scratch = malloc(2 * (size_t)a.k * sizeof *scratch);
    long ncls = 0;
    rc = 1;
    if (!lab || !buf || !scratch) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    int ok = read_labels(&Y, lab, &ncls) == 0;
    if (a.threads > 0)
        vl_set_num_threads((vl_size)a.threads);
    vl_set_printf_func(count_printf);
    if (ok && fit_classes(&a, (const float *)X.data, n, d, lab, ncls, buf, scratch, &t) == 0) {
        report(&a, &t, ncls, n, d);
        rc = 0;
    }
out:
    free(lab);
    free(buf);
    free(scratch);
    free(X.data);
    free(Y.data);
    return rc;
}
