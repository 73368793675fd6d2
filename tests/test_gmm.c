/* Tests of pft_gmm's model object, validation, scoring against scikit-learn fixtures (with a fit of the same
 * data) and sampling. EM fits: test_gmm_em.c; the lowrank family: test_gmm_lowrank.c. */
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_gmm.h"

/* ---------------------------------------------------------------------------------------------- */
/* Helpers */

/* Reads the numbers after "key" on its line of an expect file; returns how many were read. */
static size_t expect_read(const char *file, const char *key, double *out, size_t max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PFT_FIXTURES_DIR, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char word[256];
    size_t got = 0;
    while (fscanf(f, "%255s", word) == 1) {
        if (word[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF)
                ;
            continue;
        }
        if (strcmp(word, key) != 0)
            continue;
        int ch;
        while (got < max) {
            while ((ch = fgetc(f)) == ' ')
                ;
            if (ch == '\n' || ch == EOF)
                break;
            ungetc(ch, f);
            if (fscanf(f, "%lf", &out[got]) != 1)
                break;
            got++;
        }
        break;
    }
    fclose(f);
    return got;
}

/* ---------------------------------------------------------------------------------------------- */
/* Model object */

static void test_cov_names(void)
{
    pft_cov_t c;
    CHECK(strcmp(pft_cov_name(PFT_COV_FULL), "full") == 0);
    CHECK(strcmp(pft_cov_name(PFT_COV_DIAG), "diag") == 0);
    CHECK(strcmp(pft_cov_name(PFT_COV_SPHER), "spher") == 0);
    CHECK(pft_cov_name((pft_cov_t)7) == NULL);
    CHECK(pft_cov_parse("full", &c) == 0 && c == PFT_COV_FULL);
    CHECK(pft_cov_parse("diag", &c) == 0 && c == PFT_COV_DIAG);
    CHECK(pft_cov_parse("spher", &c) == 0 && c == PFT_COV_SPHER);
    CHECK(pft_cov_parse("spherical", &c) == 0 && c == PFT_COV_SPHER);
    /* tied names exact LDA statistics (pft_gstat), not a mixture: parsed, but no GMM has it */
    CHECK(pft_cov_parse("tied", &c) == 0 && c == PFT_COV_TIED);
    CHECK(strcmp(pft_cov_name(PFT_COV_TIED), "tied") == 0);
    CHECK(pft_gmm_new(1, 4, PFT_COV_TIED) == NULL);
    CHECK(pft_cov_parse("banded", &c) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "banded") != NULL);
    CHECK(pft_cov_parse(NULL, &c) == PFT_EINVAL);
}

static void test_new_dup_destroy(void)
{
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    CHECK(o.k == 10 && o.cov == PFT_COV_DIAG && o.max_iter == 100 && o.tol == 1e-3 && o.reg_covar == 1e-6 &&
          o.n_init == 1 && o.kmeans_iter == 10 && o.seed == 0);
    CHECK(pft_gmm_new(0, 3, PFT_COV_DIAG) == NULL);
    CHECK(pft_gmm_new(2, 0, PFT_COV_DIAG) == NULL);
    CHECK(pft_gmm_new(2, 3, (pft_cov_t)9) == NULL);
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    for (int t = 0; t < 3; t++) {
        pft_gmm_t *g = pft_gmm_new(4, 3, covs[t]);
        CHECK(g != NULL);
        if (!g)
            continue;
        CHECK(pft_gmm_k(g) == 4 && pft_gmm_dim(g) == 3 && pft_gmm_cov(g) == covs[t]);
        for (int c = 0; c < 4; c++)
            CHECK(pft_gmm_weights(g)[c] == 0.25);
        for (int i = 0; i < 12; i++)
            CHECK(pft_gmm_means(g)[i] == 0.0);
        const double *cv = pft_gmm_covars(g);
        if (covs[t] == PFT_COV_FULL) {
            CHECK(cv[0] == 1 && cv[1] == 0 && cv[4] == 1 && cv[9 + 8] == 1);
            CHECK(pft_gmm_chol(g) != NULL && pft_gmm_chol(g)[4] == 1 && pft_gmm_chol(g)[3] == 0);
        } else {
            CHECK(pft_gmm_chol(g) == NULL);
            CHECK(cv[0] == 1 && cv[cov_len(covs[t], 3) * 4 - 1] == 1);
        }
        pft_gmm_t *h = pft_gmm_dup(g);
        CHECK(h != NULL && h != g && pft_gmm_means(h) != pft_gmm_means(g));
        CHECK(memcmp(pft_gmm_covars(h), pft_gmm_covars(g), 4 * cov_len(covs[t], 3) * sizeof(double)) == 0);
        pft_gmm_destroy(&h);
        pft_gmm_destroy(&g);
        CHECK(g == NULL);
        pft_gmm_destroy(&g); /* safe twice */
    }
    pft_gmm_destroy(NULL);
    CHECK(pft_gmm_dup(NULL) == NULL);
}

static void test_set_params_validation(void)
{
    double w[2] = {0.3, 0.7}, mu[4] = {0, 1, 2, 3}, var[4] = {1, 2, 3, 4};
    pft_gmm_t *g = pft_gmm_new(2, 2, PFT_COV_DIAG);
    CHECK(pft_gmm_set_params(g, w, mu, var) == 0);
    CHECK(pft_gmm_weights(g)[1] == 0.7 && pft_gmm_covars(g)[3] == 4);
    double bad_w1[2] = {-0.1, 1.1}, bad_w2[2] = {0.3, 0.6}, bad_w3[2] = {NAN, 1},
           near_w[2] = {0.3, 0.7000005};
    double bad_mu[4] = {0, INFINITY, 0, 0}, bad_v1[4] = {1, 0, 1, 1}, bad_v2[4] = {1, -1, 1, 1},
           bad_v3[4] = {1, NAN, 1, 1};
    double mu2[4] = {9, 9, 9, 9};
    CHECK(pft_gmm_set_params(g, bad_w1, mu2, var) == PFT_EINVAL);
    CHECK(pft_gmm_set_params(g, bad_w2, mu2, var) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "sum") != NULL);
    CHECK(pft_gmm_set_params(g, bad_w3, mu2, var) == PFT_EINVAL);
    CHECK(pft_gmm_set_params(g, w, bad_mu, var) == PFT_EINVAL);
    CHECK(pft_gmm_set_params(g, w, mu2, bad_v1) == PFT_ENUMERIC);
    CHECK(pft_gmm_set_params(g, w, mu2, bad_v2) == PFT_ENUMERIC);
    CHECK(pft_gmm_set_params(g, w, mu2, bad_v3) == PFT_ENUMERIC);
    double sub_v[4] = {1, 1e-310, 1, 1}; /* subnormal: 1/σ² would overflow */
    CHECK(pft_gmm_set_params(g, w, mu2, sub_v) == PFT_ENUMERIC);
    /* Unaltered after every failure. */
    CHECK(pft_gmm_means(g)[0] == 0 && pft_gmm_covars(g)[1] == 2 && pft_gmm_weights(g)[0] == 0.3);
    /* Within 1e-6: accepted and renormalised. */
    CHECK(pft_gmm_set_params(g, near_w, mu, var) == 0);
    CHECK_NEAR(pft_gmm_weights(g)[0] + pft_gmm_weights(g)[1], 1.0, 1e-15);
    CHECK(pft_gmm_set_params_chol(g, w, mu, var) == PFT_EINVAL); /* not full */
    CHECK(pft_gmm_set_params(g, NULL, mu, var) == PFT_EINVAL);
    pft_gmm_destroy(&g);

    /* Full: not PD, not symmetric, negative diagonal. */
    pft_gmm_t *f = pft_gmm_new(1, 2, PFT_COV_FULL);
    double w1[1] = {1}, m1[2] = {0, 0};
    double notpd[4] = {1, 2, 2, 1}, asym[4] = {2, 0.5, 0.1, 2}, negd[4] = {-1, 0, 0, 1},
           ok[4] = {2, 0.5, 0.5, 1};
    CHECK(pft_gmm_set_params(f, w1, m1, notpd) == PFT_ENUMERIC);
    CHECK(strstr(pft_errmsg(), "positive definite") != NULL);
    CHECK(pft_gmm_set_params(f, w1, m1, asym) == PFT_EINVAL);
    CHECK(pft_gmm_set_params(f, w1, m1, negd) == PFT_ENUMERIC);
    CHECK(pft_gmm_covars(f)[0] == 1 && pft_gmm_covars(f)[1] == 0); /* unaltered */
    CHECK(pft_gmm_set_params(f, w1, m1, ok) == 0);
    double badl[4] = {1, 0, 0.5, -1}, nanl[4] = {1, 0, NAN, 1};
    CHECK(pft_gmm_set_params_chol(f, w1, m1, badl) == PFT_ENUMERIC);
    CHECK(pft_gmm_set_params_chol(f, w1, m1, nanl) == PFT_ENUMERIC);
    CHECK(pft_gmm_covars(f)[0] == 2 && pft_gmm_covars(f)[1] == 0.5);
    pft_gmm_destroy(&f);
}

static void test_chol_round_trip(void)
{
    const int d = 5, k = 2;
    pft_rng_t *r = pft_rng_new(3);
    double l[2 * 25], w[2] = {0.4, 0.6}, mu[10] = {0};
    for (int c = 0; c < k; c++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                l[c * 25 + i * d + j] = j < i    ? pft_rng_normal(r)
                                        : j == i ? 0.5 + pft_rng_uniform(r)
                                                 : 123.0 /* ignored */;
    pft_gmm_t *g = pft_gmm_new(k, d, PFT_COV_FULL);
    CHECK(pft_gmm_set_params_chol(g, w, mu, l) == 0);
    const double *L = pft_gmm_chol(g), *S = pft_gmm_covars(g);
    double maxerr = 0;
    for (int c = 0; c < k; c++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) {
                double e = j <= i ? l[c * 25 + i * d + j] : 0.0;
                CHECK(L[c * 25 + i * d + j] == e); /* kept exactly, upper part zeroed */
                double s = 0;
                for (int q = 0; q < d; q++)
                    s += (q <= i ? l[c * 25 + i * d + q] : 0) * (q <= j ? l[c * 25 + j * d + q] : 0);
                double err = fabs(S[c * 25 + i * d + j] - s);
                maxerr = err > maxerr ? err : maxerr;
                CHECK(S[c * 25 + i * d + j] == S[c * 25 + j * d + i]); /* exactly symmetric */
            }
    CHECK(maxerr < 1e-12);
    /* And back: set_params(Σ) recomputes the same factor. */
    double sigma[50];
    memcpy(sigma, S, sizeof sigma);
    pft_gmm_t *h = pft_gmm_new(k, d, PFT_COV_FULL);
    CHECK(pft_gmm_set_params(h, w, mu, sigma) == 0);
    maxerr = 0;
    for (int i = 0; i < 50; i++) {
        double e = fabs(pft_gmm_chol(h)[i] - L[i]);
        maxerr = e > maxerr ? e : maxerr;
    }
    CHECK_MSG(maxerr < 1e-10, "chol error %g", maxerr);
    pft_gmm_destroy(&g);
    pft_gmm_destroy(&h);
    pft_rng_destroy(&r);
}

static void test_param_counts(void)
{
    struct {
        pft_cov_t cov;
        int k, d;
        size_t wire, free_;
    } cases[] = {
        /* Paper: full (2d + (d²-d)/2 + 1)K, diag (2d+1)K, spher (d+2)K. */
        {PFT_COV_FULL, 10, 1280, (size_t)(2 * 1280 + (1280 * 1280 - 1280) / 2 + 1) * 10,
         9 + 10 * 1280 + (size_t)10 * 1280 * 1281 / 2},
        {PFT_COV_DIAG, 10, 1280, 25610, 9 + 12800 + 12800},
        {PFT_COV_SPHER, 10, 1280, 12820, 9 + 12800 + 10},
        {PFT_COV_FULL, 1, 1280, 821121, 1280 + 1280 * 1281 / 2},
        {PFT_COV_DIAG, 50, 1280, 128050, 49 + 64000 + 64000},
        {PFT_COV_SPHER, 3, 2, 12, 2 + 6 + 3},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        pft_gmm_t *g = pft_gmm_new(cases[t].k, cases[t].d, cases[t].cov);
        CHECK(g != NULL);
        if (!g)
            continue;
        CHECK_MSG(pft_gmm_n_wire_params(g) == cases[t].wire, "case %zu: %zu vs %zu", t,
                  pft_gmm_n_wire_params(g), cases[t].wire);
        CHECK_MSG(pft_gmm_n_free_params(g) == cases[t].free_, "case %zu: %zu vs %zu", t,
                  pft_gmm_n_free_params(g), cases[t].free_);
        pft_gmm_destroy(&g);
    }
    CHECK(821121 == 2 * 1280 + (1280 * 1280 - 1280) / 2 + 1);
}

/* ---------------------------------------------------------------------------------------------- */
/* Scoring */

/* log p(x) computed naively in double (independent of the library's expansion and centring). */
static double naive_logp(const pft_gmm_t *g, const float *x)
{
    int k = pft_gmm_k(g), d = pft_gmm_dim(g);
    pft_cov_t cov = pft_gmm_cov(g);
    double terms[64], mx = -INFINITY;
    for (int c = 0; c < k && c < 64; c++) {
        const double *mu = pft_gmm_means(g) + (size_t)c * d;
        double maha = 0, logdet = 0;
        if (cov == PFT_COV_FULL) {
            const double *L = pft_gmm_chol(g) + (size_t)c * d * d;
            double y[64];
            for (int i = 0; i < d; i++) { /* forward substitution */
                double s = x[i] - mu[i];
                for (int j = 0; j < i; j++)
                    s -= L[i * d + j] * y[j];
                y[i] = s / L[i * d + i];
                maha += y[i] * y[i];
                logdet += 2 * log(L[i * d + i]);
            }
        } else {
            for (int j = 0; j < d; j++) {
                double v = cov == PFT_COV_DIAG ? pft_gmm_covars(g)[(size_t)c * d + j] : pft_gmm_covars(g)[c];
                maha += (x[j] - mu[j]) * (x[j] - mu[j]) / v;
                logdet += log(v);
            }
        }
        terms[c] = log(pft_gmm_weights(g)[c]) - 0.5 * (maha + logdet + d * log(2 * M_PI));
        mx = terms[c] > mx ? terms[c] : mx;
    }
    double s = 0;
    for (int c = 0; c < k; c++)
        s += exp(terms[c] - mx);
    return mx + log(s);
}

static void test_score_matches_naive(void)
{
    const int n = 200, d = 6, k = 3;
    pft_rng_t *r = pft_rng_new(11);
    float *x = malloc(sizeof(float) * n * d);
    for (int i = 0; i < n * d; i++)
        x[i] = (float)(3 * pft_rng_normal(r) + 100); /* offset: centring must cope */
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    for (int t = 0; t < 3; t++) {
        double w[3] = {0.2, 0.5, 0.3}, mu[18], cv[3 * 36];
        for (int i = 0; i < k * d; i++)
            mu[i] = 100 + 2 * pft_rng_normal(r);
        size_t cl = cov_len(covs[t], d);
        for (int c = 0; c < k; c++) {
            if (covs[t] == PFT_COV_FULL) {
                double a[36];
                for (int i = 0; i < 36; i++)
                    a[i] = pft_rng_normal(r);
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++) {
                        double s = i == j ? 0.5 : 0;
                        for (int q = 0; q < d; q++)
                            s += a[i * d + q] * a[j * d + q];
                        cv[c * cl + i * d + j] = s;
                    }
            } else {
                for (size_t j = 0; j < cl; j++)
                    cv[c * cl + j] = 0.5 + 4 * pft_rng_uniform(r);
            }
        }
        pft_gmm_t *g = make_model(k, d, covs[t], w, mu, cv);
        CHECK(g != NULL);
        double *ll = malloc(sizeof(double) * n), maxrel = 0, avg = 0, sum = 0;
        CHECK(pft_gmm_score_samples(g, x, n, ll) == 0);
        for (int i = 0; i < n; i++) {
            double e = naive_logp(g, x + (size_t)i * d);
            double rel = fabs(ll[i] - e) / fabs(e);
            maxrel = rel > maxrel ? rel : maxrel;
            sum += ll[i];
        }
        CHECK_MSG(maxrel < 1e-10, "%s: max rel err %g", pft_cov_name(covs[t]), maxrel);
        CHECK(pft_gmm_score(g, x, n, &avg) == 0);
        CHECK_NEAR(avg, sum / n, 1e-9 * fabs(avg));
        /* One row alone scores the same as inside the batch (different centring). */
        double one;
        CHECK(pft_gmm_score_samples(g, x + 7 * d, 1, &one) == 0);
        CHECK_NEAR(one, ll[7], 1e-9 * fabs(one));
        free(ll);
        pft_gmm_destroy(&g);
    }
    pft_gmm_t *g = pft_gmm_new(2, d, PFT_COV_DIAG);
    double out;
    CHECK(pft_gmm_score_samples(g, x, 0, &out) == PFT_EINVAL);
    x[3] = NAN;
    CHECK(pft_gmm_score_samples(g, x, 1, &out) == PFT_EINVAL);
    pft_gmm_destroy(&g);
    free(x);
    pft_rng_destroy(&r);
}

/* scikit-learn 1.2.1 fitted parameters scored by us: per-sample log-likelihood, score and BIC. */
static void check_sklearn_set(const char *set, const char *cov_name)
{
    char data[128], exp_file[128];
    snprintf(data, sizeof data, "gmm_%s_data.txt", set);
    snprintf(exp_file, sizeof exp_file, "gmm_%s_%s_expect.txt", set, cov_name);
    int n = 0, d = 0;
    float *x = load_data(data, &n, &d);
    CHECK_MSG(x != NULL, "missing fixture %s (run tests/fixtures/make_gmm_fixtures.py)", data);
    if (!x)
        return;
    pft_cov_t cov;
    CHECK(pft_cov_parse(cov_name, &cov) == 0);
    double kd, avg_e, bic_e;
    CHECK(expect_read(exp_file, "k", &kd, 1) == 1);
    int k = (int)kd;
    size_t cl = cov_len(cov, d);
    double *w = malloc(sizeof(double) * k), *mu = malloc(sizeof(double) * k * d),
           *cv = malloc(sizeof(double) * k * cl), *ss = malloc(sizeof(double) * n),
           *ll = malloc(sizeof(double) * n);
    CHECK(expect_read(exp_file, "weights", w, (size_t)k) == (size_t)k);
    CHECK(expect_read(exp_file, "means", mu, (size_t)k * d) == (size_t)k * d);
    CHECK(expect_read(exp_file, "covars", cv, (size_t)k * cl) == (size_t)k * cl);
    CHECK(expect_read(exp_file, "score_samples", ss, (size_t)n) == (size_t)n);
    CHECK(expect_read(exp_file, "avg_loglik", &avg_e, 1) == 1);
    CHECK(expect_read(exp_file, "bic", &bic_e, 1) == 1);
    pft_gmm_t *g = make_model(k, d, cov, w, mu, cv);
    CHECK(g != NULL);
    if (g) {
        double maxrel = 0, avg, bic;
        CHECK(pft_gmm_score_samples(g, x, n, ll) == 0);
        for (int i = 0; i < n; i++) {
            double rel = fabs(ll[i] - ss[i]) / fmax(1.0, fabs(ss[i]));
            maxrel = rel > maxrel ? rel : maxrel;
        }
        CHECK_MSG(maxrel < 1e-6, "%s/%s: score_samples max rel err %g", set, cov_name, maxrel);
        CHECK(pft_gmm_score(g, x, n, &avg) == 0);
        CHECK_NEAR(avg, avg_e, 1e-6 * fmax(1.0, fabs(avg_e)));
        CHECK(pft_gmm_bic(g, x, n, &bic) == 0);
        CHECK_NEAR(bic, bic_e, 1e-6 * fabs(bic_e));

        /* Our own fit: at least as good as scikit-learn's (same K, reg_covar, n_init, tolerance). */
        pft_gmm_opts_t o;
        pft_gmm_opts_default(&o);
        o.k = k;
        o.cov = cov;
        o.tol = 1e-6;
        o.max_iter = 1000;
        o.n_init = 5;
        pft_gmm_t *fit = NULL;
        pft_gmm_info_t info;
        CHECK(pft_gmm_fit(x, n, d, &o, &fit, &info) == 0);
        if (fit) {
            double ours;
            CHECK(pft_gmm_score(fit, x, n, &ours) == 0);
            CHECK_NEAR(ours, info.avg_loglik, 1e-12 * fabs(ours));
            CHECK_MSG(ours >= avg_e - 1e-3, "%s/%s: our fit %.6f < scikit-learn %.6f", set, cov_name, ours,
                      avg_e);
            fprintf(stderr, "    %s/%s: ours %.6f (iters %d) sklearn %.6f\n", set, cov_name, ours, info.iters,
                    avg_e);
            check_model_sane(fit, 1e-6);
            pft_gmm_destroy(&fit);
        }
        pft_gmm_destroy(&g);
    }
    free(w);
    free(mu);
    free(cv);
    free(ss);
    free(ll);
    free(x);
}

static void test_sklearn_fixtures(void)
{
    const char *sets[] = {"blobs", "relu"}, *covs[] = {"full", "diag", "spher"};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++)
            check_sklearn_set(sets[s], covs[c]);
}

static void test_bic_formula(void)
{
    int n = 0, d = 0;
    float *x = load_data("gmm_blobs_data.txt", &n, &d);
    CHECK(x != NULL);
    if (!x)
        return;
    pft_gmm_opts_t o;
    pft_gmm_opts_default(&o);
    o.k = 3;
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    size_t params[] = {2 + 15 + 3 * 15, 2 + 15 + 15, 2 + 15 + 3};
    for (int t = 0; t < 3; t++) {
        o.cov = covs[t];
        pft_gmm_t *g = NULL;
        CHECK(pft_gmm_fit(x, n, d, &o, &g, NULL) == 0);
        if (!g)
            continue;
        CHECK(pft_gmm_n_free_params(g) == params[t]);
        double avg, bic;
        CHECK(pft_gmm_score(g, x, n, &avg) == 0);
        CHECK(pft_gmm_bic(g, x, n, &bic) == 0);
        CHECK_NEAR(bic, -2.0 * avg * n + (double)params[t] * log((double)n), 1e-9 * fabs(bic));
        pft_gmm_destroy(&g);
    }
    free(x);
}

/* ---------------------------------------------------------------------------------------------- */
/* Sampling */

/* Mixture mean and covariance (d×d) of a model, analytically. */
static void mixture_moments(const pft_gmm_t *g, double *mean, double *cov)
{
    int k = pft_gmm_k(g), d = pft_gmm_dim(g);
    pft_cov_t ct = pft_gmm_cov(g);
    memset(mean, 0, sizeof(double) * d);
    memset(cov, 0, sizeof(double) * d * d);
    for (int c = 0; c < k; c++) {
        double w = pft_gmm_weights(g)[c];
        const double *mu = pft_gmm_means(g) + (size_t)c * d;
        for (int i = 0; i < d; i++) {
            mean[i] += w * mu[i];
            for (int j = 0; j < d; j++) {
                double s = ct == PFT_COV_FULL   ? pft_gmm_covars(g)[(size_t)c * d * d + i * d + j]
                           : i != j             ? 0.0
                           : ct == PFT_COV_DIAG ? pft_gmm_covars(g)[(size_t)c * d + i]
                                                : pft_gmm_covars(g)[c];
                cov[i * d + j] += w * (s + mu[i] * mu[j]);
            }
        }
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            cov[i * d + j] -= mean[i] * mean[j];
}

static void test_sample_moments(void)
{
    const int d = 3, k = 2, n = 200000;
    double w[2] = {0.3, 0.7}, mu[6] = {-2, 0, 1, 3, 1, -1};
    double full[18] = {2, 0.6, -0.3, 0.6, 1, 0.2, -0.3, 0.2, 0.5, 1, -0.4, 0, -0.4, 1.5, 0.3, 0, 0.3, 0.8};
    double diag[6] = {2, 1, 0.5, 1, 1.5, 0.8}, spher[2] = {0.7, 1.9};
    const double *cvs[] = {full, diag, spher};
    pft_cov_t covs[] = {PFT_COV_FULL, PFT_COV_DIAG, PFT_COV_SPHER};
    float *x = malloc(sizeof(float) * n * d);
    for (int t = 0; t < 3; t++) {
        pft_gmm_t *g = make_model(k, d, covs[t], w, mu, cvs[t]);
        CHECK(g != NULL);
        if (!g)
            continue;
        pft_rng_t *r = pft_rng_new(100 + t);
        CHECK(pft_gmm_sample(g, r, n, x) == 0);
        double em[3], ec[9], sm[3] = {0}, sc[9] = {0};
        mixture_moments(g, em, ec);
        for (int i = 0; i < n; i++)
            for (int a = 0; a < d; a++)
                sm[a] += x[i * d + a] / (double)n;
        for (int i = 0; i < n; i++)
            for (int a = 0; a < d; a++)
                for (int b = 0; b < d; b++)
                    sc[a * d + b] += (x[i * d + a] - sm[a]) * (x[i * d + b] - sm[b]) / (double)n;
        for (int a = 0; a < d; a++) {
            CHECK_NEAR(sm[a], em[a], 0.02);
            for (int b = 0; b < d; b++)
                CHECK_NEAR(sc[a * d + b], ec[a * d + b], 0.04);
        }
        /* Rows are grouped by component: the first component's block has its mean. */
        int n0 = 0;
        double m0 = 0;
        for (int i = 0; i < n && n0 < 1000; i++, n0++)
            m0 += x[i * d];
        CHECK_NEAR(m0 / n0, -2.0, 0.2);
        /* Same seed, same samples; n = 0 is fine. */
        float *y = malloc(sizeof(float) * 100 * d), *z = malloc(sizeof(float) * 100 * d);
        pft_rng_seed(r, 5);
        CHECK(pft_gmm_sample(g, r, 100, y) == 0);
        pft_rng_seed(r, 5);
        CHECK(pft_gmm_sample(g, r, 100, z) == 0);
        CHECK(memcmp(y, z, sizeof(float) * 100 * d) == 0);
        CHECK(pft_gmm_sample(g, r, 0, NULL) == 0);
        CHECK(pft_gmm_sample(g, r, -1, y) == PFT_EINVAL);
        free(y);
        free(z);
        pft_rng_destroy(&r);
        pft_gmm_destroy(&g);
    }
    free(x);
}

/* Multinomial counts: a component with weight 0 never gets a sample. */
static void test_sample_zero_weight(void)
{
    double w[3] = {0.5, 0.0, 0.5}, mu[3] = {-100, 0, 100}, v[3] = {1, 1, 1};
    pft_gmm_t *g = make_model(3, 1, PFT_COV_SPHER, w, mu, v);
    pft_rng_t *r = pft_rng_new(1);
    float x[2000];
    CHECK(pft_gmm_sample(g, r, 2000, x) == 0);
    int near0 = 0, lo = 0;
    for (int i = 0; i < 2000; i++) {
        near0 += fabsf(x[i]) < 50;
        lo += x[i] < 0;
    }
    CHECK(near0 == 0);
    CHECK(lo > 900 && lo < 1100);
    pft_rng_destroy(&r);
    pft_gmm_destroy(&g);
}

int main(void)
{
    RUN(test_cov_names);
    RUN(test_new_dup_destroy);
    RUN(test_set_params_validation);
    RUN(test_chol_round_trip);
    RUN(test_param_counts);
    RUN(test_score_matches_naive);
    RUN(test_sklearn_fixtures);
    RUN(test_bic_formula);
    RUN(test_sample_moments);
    RUN(test_sample_zero_weight);
    return pft_test_done();
}
