/* Tests of a relay's hop without W's reduction (DESIGN.md §8, "The relay's hop"):
 *  - pft_ghead_evidence_heldout (own rows against a received release, Woodbury in q dimensions) against the
 *    same tallies from Σ_α formed densely and factored by Cholesky: rows right and scored equal, the loss to
 *    1e-9 relative; generated rows (every α of the grid, a ψ with a zero: α = 0 unusable) and the bundled
 *    PACS features (two α); the cases without evidence (too few rows, one class, no row of a held class);
 *  - pft_gstat_lowrank_shared_factor (the same from the merge's terms, a Gram matrix of r×r, checked by a
 *    probe of W: a term missing or counted twice refused) and
 *  - pft_gstat_lowrank_shared_span (the merged W's release in the span of the received factor, the class
 *    means and the own rows) against pft_gstat_lowrank_shared of the formed W − n_r·diag ψ_r: U Uᵀ + diag ψ
 *    entrywise within 1e-9 of its largest entry, W's diagonal kept exactly; the merge made by pft_gstat_merge
 *    on the bundled PACS features; a W the span does not hold (DP-like noise) and a span of d vectors refused
 *    (1). */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_gstat_lowrank.h"
#include "pft_linalg.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_test.h"

#include <float.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"

/* The tallies of rows (x, y, n) against r at α, by Σ_α formed and factored: the reference. ok 0: Σ_α not
 * positive definite. */
static int dense_tally(const pft_ghead_lowrank_t *r, const float *x, const int32_t *y, int n, double alpha,
                       pft_ghead_evidence_t *e)
{
    int d = r->d, q = r->q, S = r->S;
    double *A = calloc((size_t)d * d, sizeof *A), *v = malloc((size_t)d * sizeof *v),
           *s = malloc((size_t)S * sizeof *s), tr = 0;
    uint64_t N = 0;
    for (int c = 0; c < S; c++)
        N += r->count[c];
    for (int j = 0; j < d; j++)
        tr += r->psi[j];
    for (int k = 0; k < d * q; k++)
        tr += r->U[k] * r->U[k];
    for (int i = 0; i < d; i++)
        for (int j = 0; j <= i; j++) {
            double w = 0;
            for (int k = 0; k < q; k++)
                w += r->U[i * q + k] * r->U[j * q + k];
            A[i * d + j] = (1 - alpha) * (w + (i == j ? r->psi[i] : 0)) + (i == j ? alpha * tr / d : 0);
        }
    int ok = pft_la_chol_lower(A, d) == 0;
    *e = (pft_ghead_evidence_t){.alpha = alpha};
    for (int i = 0; ok && i < n; i++) {
        int truth = -1;
        for (int c = 0; c < S; c++)
            truth = r->label[c] == y[i] ? c : truth;
        if (truth < 0)
            continue;
        int best = 0;
        for (int c = 0; c < S; c++) {
            for (int j = 0; j < d; j++)
                v[j] = x[(size_t)i * d + j] - r->mean[(size_t)c * d + j];
            cblas_dtrsv(CblasRowMajor, CblasLower, CblasNoTrans, CblasNonUnit, d, A, d, v, 1);
            s[c] = log((double)r->count[c] / (double)N) - 0.5 * cblas_ddot(d, v, 1, v, 1);
            best = s[c] > s[best] ? c : best;
        }
        double z = 0;
        for (int c = 0; c < S; c++)
            z += exp(s[c] - s[best]);
        e->correct += best == truth;
        e->total++;
        e->loss += s[best] + log(z) - s[truth];
    }
    free(A), free(v), free(s);
    return ok;
}

/* Every α of ev (or only those listed) against dense_tally. */
static void compare_heldout(const pft_ghead_lowrank_t *r, const float *x, const int32_t *y, int n,
                            const pft_ghead_evidence_t *ev, const int *which, int nw, const char *what)
{
    double worst = 0;
    for (int k = 0; k < (which ? nw : PFT_GHEAD_N_ALPHA); k++) {
        int a = which ? which[k] : k;
        pft_ghead_evidence_t ref;
        int ok = dense_tally(r, x, y, n, ev[a].alpha, &ref);
        CHECK_MSG(ev[a].alpha == pft_ghead_alpha_grid(a), "%s: α %d", what, a);
        if (!ok) {
            CHECK_MSG(ev[a].total == 0, "%s: α = %g scored where Σ_α is singular", what, ev[a].alpha);
            continue;
        }
        CHECK_MSG(ev[a].total == ref.total && ev[a].correct == ref.correct,
                  "%s: α = %g: %llu/%llu right, dense %llu/%llu", what, ev[a].alpha,
                  (unsigned long long)ev[a].correct, (unsigned long long)ev[a].total,
                  (unsigned long long)ref.correct, (unsigned long long)ref.total);
        double rel = fabs(ev[a].loss - ref.loss) / (ref.loss > 1e-300 ? ref.loss : 1.0);
        worst = rel > worst ? rel : worst;
    }
    CHECK_MSG(worst <= 1e-9, "%s: loss differs from the dense reference by %.3g relative", what, worst);
    fprintf(stderr, "  %s: tallies equal, loss within %.2g relative\n", what, worst);
}

/* Generated: 4 classes in d = 40, a received release of rank 5, 60 own rows; every α of the grid. */
static void test_heldout_generated(void)
{
    enum { d = 40, q = 5, S = 4, n = 60 };
    pft_rng_t *rng = pft_rng_new(11);
    int32_t label[S] = {0, 2, 3, 5}, y[n];
    uint64_t count[S] = {30, 25, 40, 12};
    double mean[S * d], U[d * q], psi[d];
    float x[n * d];
    for (int i = 0; i < S * d; i++)
        mean[i] = pft_rng_normal(rng) * 0.5;
    for (int i = 0; i < d * q; i++)
        U[i] = pft_rng_normal(rng) * 0.4;
    for (int j = 0; j < d; j++)
        psi[j] = 0.05 + 0.2 * pft_rng_uniform(rng);
    for (int i = 0; i < n; i++) {
        int c = i % S;
        y[i] = label[c];
        for (int j = 0; j < d; j++)
            x[i * d + j] = (float)(mean[c * d + j] + pft_rng_normal(rng) * 0.6);
    }
    y[7] = 4; /* a row of a class the release does not hold: not scored */
    pft_ghead_lowrank_t r = {
        .d = d, .S = S, .q = q, .label = label, .count = count, .mean = mean, .U = U, .psi = psi};
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    pft_ghead_evidence_t ev[PFT_GHEAD_N_ALPHA];
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 6, &o, ev) == 0);
    CHECK_MSG(ev[0].total == n - 1, "%llu rows scored, expected %d", (unsigned long long)ev[0].total, n - 1);
    compare_heldout(&r, x, y, n, ev, NULL, 0, "generated");
    psi[3] = 0; /* a coordinate no row varies on beyond the factor: Σ_0 singular there */
    for (int k = 0; k < q; k++)
        U[3 * q + k] = 0;
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 6, &o, ev) == 0);
    CHECK_MSG(ev[0].total == 0 && ev[1].total > 0, "α = 0 unusable (%llu), α = 0.001 usable (%llu)",
              (unsigned long long)ev[0].total, (unsigned long long)ev[1].total);
    compare_heldout(&r, x, y, n, ev, NULL, 0, "generated, psi with a zero");
    /* no evidence: too few rows, one class held, no row of a held class */
    pft_ghead_evidence_t keep = ev[5];
    CHECK(pft_ghead_evidence_heldout(&r, x, y, 9, 6, &o, ev) == 1);
    r.S = 1;
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 6, &o, ev) == 1);
    r.S = S;
    int32_t other[n];
    for (int i = 0; i < n; i++)
        other[i] = 1;
    CHECK(pft_ghead_evidence_heldout(&r, x, other, n, 6, &o, ev) == 1);
    CHECK(ev[5].total == keep.total && ev[5].loss == keep.loss); /* untouched */
    /* refused: a label beyond the classes, ψ negative, an unsorted label */
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 5, &o, ev) == PFT_EINVAL);
    psi[3] = -1e-3;
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 6, &o, ev) == PFT_EINVAL);
    psi[3] = 0.1;
    label[1] = 0;
    CHECK(pft_ghead_evidence_heldout(&r, x, y, n, 6, &o, ev) == PFT_EINVAL);
    pft_rng_destroy(&rng);
}

/* The bundled PACS rows (L2-normalised) taken as the files are sorted by class: rows (i · 7919) mod n. */
static int pacs(int want, float **xs, int32_t **ys, int64_t *d)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, ny = 0;
    if (pft_npy_read_f32(EXAMPLE_DATA "/train_x.npy", &x, &n, d) ||
        pft_npy_read_i32(EXAMPLE_DATA "/train_y.npy", &y, &ny) || ny != n || want > n) {
        SKIP_TEST("no bundled PACS features in " EXAMPLE_DATA " (%s)", pft_errmsg());
        pft_free(x), pft_free(y);
        return 0;
    }
    *xs = malloc((size_t)want * *d * sizeof **xs);
    *ys = malloc((size_t)want * sizeof **ys);
    for (int i = 0; i < want; i++) {
        int64_t k = ((int64_t)i * 7919) % n;
        double s = 0;
        for (int64_t j = 0; j < *d; j++)
            s += (double)x[k * *d + j] * x[k * *d + j];
        for (int64_t j = 0; j < *d; j++)
            (*xs)[(size_t)i * *d + j] = (float)(x[k * *d + j] / sqrt(s));
        (*ys)[i] = y[k];
    }
    pft_free(x), pft_free(y);
    return 1;
}

/* A relay on real features: nr received rows released at rank q (as a producer releases them), no own rows;
 * the received statistics as the decoder makes them (n_r·(U Uᵀ + diag ψ)) into *recv, the factor into U, psi.
 */
static pft_gstat_t *received(const float *x, const int32_t *y, int nr, int d, int q, double *U, double *psi)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d), *out = NULL;
    CHECK(st && pft_gstat_add_rows(st, x, y, (size_t)nr) == 0);
    double *C = malloc((size_t)d * d * sizeof *C), *w = pft_alloc_array((size_t)d * d, sizeof *w);
    for (size_t i = 0; i < (size_t)d * d; i++)
        C[i] = pft_gstat_tied_scatter(st)[i] / nr;
    CHECK(pft_gstat_lowrank_shared(C, d, q, U, psi) == 0);
    pft_gstat_lowrank_expand(U, psi, d, q, w);
    for (size_t i = 0; i < (size_t)d * d; i++)
        w[i] *= nr;
    CHECK(pft_gstat_classes_with(st, &w, &out) == 0);
    pft_gstat_destroy(&st);
    free(C);
    return out;
}

/* PACS: 600 received rows at rank 32, 60 own rows; the held-out evidence at two α against the dense one. */
static void test_heldout_pacs(void)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t d = 0;
    enum { nr = 600, no = 60, q = 32 };
    if (!pacs(nr + no, &x, &y, &d))
        return;
    double *U = malloc((size_t)d * q * sizeof *U), *psi = malloc((size_t)d * sizeof *psi);
    pft_gstat_t *rec = received(x, y, nr, (int)d, q, U, psi);
    int S = pft_gstat_n_classes(rec);
    int32_t label[16];
    uint64_t count[16];
    double *mean = malloc((size_t)S * d * sizeof *mean);
    for (int c = 0; c < S; c++) {
        label[c] = pft_gstat_label(rec, c);
        count[c] = pft_gstat_count(rec, c);
        memcpy(mean + (size_t)c * d, pft_gstat_mean(rec, c), (size_t)d * sizeof *mean);
    }
    pft_ghead_lowrank_t r = {
        .d = (int)d, .S = S, .q = q, .label = label, .count = count, .mean = mean, .U = U, .psi = psi};
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    pft_ghead_evidence_t ev[PFT_GHEAD_N_ALPHA];
    CHECK(pft_ghead_evidence_heldout(&r, x + (size_t)nr * d, y + nr, no, 7, &o, ev) == 0);
    int which[] = {3, 11};
    compare_heldout(&r, x + (size_t)nr * d, y + nr, no, ev, which, 2, "pacs relay");
    const pft_ghead_evidence_t *e1[1] = {ev};
    CHECK(pft_ghead_evidence_alpha(e1, NULL, 1) >= 0);
    pft_gstat_destroy(&rec);
    free(U), free(psi), free(mean), free(x), free(y);
}

static void compare_release(const double *W, const double *dg, int d, double N, const double *S,
                            const double *fw, int r, int q);

/* The release in the span against the release of the formed W − diag(dg): U Uᵀ + diag ψ entrywise within
 * 1e-9 of its largest entry; ψ from W's exact diagonal. */
static void compare_span(const double *W, const double *dg, int d, double N, const double *S, int r, int q)
{
    compare_release(W, dg, d, N, S, NULL, r, q);
}

/* The same for the release from the terms F (r×d, weights fw) of W less dg. */
static void compare_factor(const double *W, const double *dg, int d, double N, const double *F,
                           const double *fw, int r, int q)
{
    compare_release(W, dg, d, N, F, fw, r, q);
}

static void compare_release(const double *W, const double *dg, int d, double N, const double *S,
                            const double *fw, int r, int q)
{
    double *U = malloc((size_t)d * q * sizeof *U), *psi = malloc((size_t)d * sizeof *psi),
           *Ur = malloc((size_t)d * q * sizeof *Ur), *pr = malloc((size_t)d * sizeof *pr),
           *L = malloc((size_t)d * d * sizeof *L), *A = malloc((size_t)d * d * sizeof *A),
           *B = malloc((size_t)d * d * sizeof *B);
    if (fw)
        CHECK(pft_gstat_lowrank_shared_factor(W, dg, d, N, S, fw, r, q, U, psi) == 0);
    else
        CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, r, q, U, psi) == 0);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            L[i * d + j] = (W[i * d + j] - (i == j ? dg[i] : 0)) / N;
    CHECK(pft_gstat_lowrank_shared(L, d, q, Ur, pr) == 0);
    for (int i = 0; i < d; i++) { /* the reference's ψ from W's diagonal, as the release keeps it */
        double p = W[i * d + i] / N;
        for (int c = 0; c < q; c++)
            p -= Ur[i * q + c] * Ur[i * q + c];
        pr[i] = p > 0 ? p : 0;
    }
    pft_gstat_lowrank_expand(U, psi, d, q, A);
    pft_gstat_lowrank_expand(Ur, pr, d, q, B);
    double big = 0, diff = 0, dd = 0;
    for (size_t i = 0; i < (size_t)d * d; i++) {
        big = fabs(B[i]) > big ? fabs(B[i]) : big;
        diff = fabs(A[i] - B[i]) > diff ? fabs(A[i] - B[i]) : diff;
    }
    for (int i = 0; i < d; i++)
        dd = fmax(dd, fabs(A[i * d + i] - W[i * d + i] / N) / (W[i * d + i] / N + DBL_MIN));
    CHECK_MSG(diff <= 1e-9 * big, "U Uᵀ + diag ψ differs from the dense release by %.3g of %.3g", diff, big);
    CHECK_MSG(dd <= 1e-12, "W's diagonal not kept (%.3g relative)", dd);
    fprintf(stderr, "  %s of %d: U Uᵀ + diag ψ within %.2g of the dense release's largest entry\n",
            fw ? "terms" : "span", r, diff / big);
    free(U), free(psi), free(Ur), free(pr), free(L), free(A), free(B);
}

/* PACS: 600 received rows at rank 32 merged (pft_gstat_merge) with 60 own rows; the merged W's release in the
 * span of the factor, both parts' class means and the own rows. */
static void test_span_pacs(void)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t d64 = 0;
    enum { nr = 600, no = 60, q = 32 };
    if (!pacs(nr + no, &x, &y, &d64))
        return;
    int d = (int)d64;
    double *U = malloc((size_t)d * q * sizeof *U), *psi = malloc((size_t)d * sizeof *psi);
    pft_gstat_t *rec = received(x, y, nr, d, q, U, psi), *own = pft_gstat_new(PFT_GSTAT_TIED, d),
                *m = pft_gstat_dup(rec);
    CHECK(own && m && pft_gstat_add_rows(own, x + (size_t)nr * d, y + nr, no) == 0 &&
          pft_gstat_merge(m, own) == 0);
    int Sr = pft_gstat_n_classes(rec), Sm = pft_gstat_n_classes(m), r = q + Sr + Sm + no;
    double *S = malloc((size_t)(r + d) * d * sizeof *S), *o = S, *dg = malloc((size_t)d * sizeof *dg);
    for (int k = 0; k < q; k++, o += d)
        for (int j = 0; j < d; j++)
            o[j] = U[j * q + k];
    for (int c = 0; c < Sr; c++, o += d)
        memcpy(o, pft_gstat_mean(rec, c), (size_t)d * sizeof *o);
    for (int c = 0; c < Sm; c++, o += d)
        memcpy(o, pft_gstat_mean(m, c), (size_t)d * sizeof *o);
    for (int i = 0; i < no * d; i++)
        o[i] = x[(size_t)nr * d + i];
    for (int j = 0; j < d; j++)
        dg[j] = nr * psi[j];
    const double *W = pft_gstat_tied_scatter(m);
    double N = (double)pft_gstat_total(m);
    compare_span(W, dg, d, N, S, r, 64);
    compare_span(W, dg, d, N, S, r, 8);
    /* the merge's terms: the factor (weight n_r), own rows about their means, per shared class the means'
     * difference (weight n_r,c n_o,c / n_c) */
    int rf = 0;
    double *F = malloc((size_t)(q + no + Sr) * d * sizeof *F),
           *fw = malloc((size_t)(q + no + Sr) * sizeof *fw);
    for (int k = 0; k < q; k++, rf++) {
        for (int j = 0; j < d; j++)
            F[(size_t)rf * d + j] = U[j * q + k];
        fw[rf] = nr;
    }
    for (int i = 0; i < no; i++, rf++) {
        int c = pft_gstat_find(own, y[nr + i]);
        for (int j = 0; j < d; j++)
            F[(size_t)rf * d + j] = x[(size_t)(nr + i) * d + j] - pft_gstat_mean(own, c)[j];
        fw[rf] = 1;
    }
    for (int c = 0; c < pft_gstat_n_classes(own); c++) {
        int cr = pft_gstat_find(rec, pft_gstat_label(own, c));
        if (cr < 0)
            continue;
        double a = (double)pft_gstat_count(rec, cr), b = (double)pft_gstat_count(own, c);
        for (int j = 0; j < d; j++)
            F[(size_t)rf * d + j] = pft_gstat_mean(own, c)[j] - pft_gstat_mean(rec, cr)[j];
        fw[rf++] = a * b / (a + b);
    }
    compare_factor(W, dg, d, N, F, fw, rf, 64);
    compare_factor(W, dg, d, N, F, fw, rf, 8);
    double *U3 = malloc((size_t)d * 64 * sizeof *U3), *p3 = malloc((size_t)d * sizeof *p3);
    CHECK(pft_gstat_lowrank_shared_factor(W, dg, d, N, F, fw, rf - 1, 64, U3, p3) == 1); /* a term missing */
    fw[q] = 2; /* an own row counted twice */
    CHECK(pft_gstat_lowrank_shared_factor(W, dg, d, N, F, fw, rf, 64, U3, p3) == 1);
    fw[q] = -1;
    CHECK(pft_gstat_lowrank_shared_factor(W, dg, d, N, F, fw, rf, 64, U3, p3) == PFT_EINVAL);
    fw[q] = 1;
    free(F), free(fw), free(U3), free(p3);
    /* the span holds less than W − diag dg (the own rows left out): refused, the caller reduces W */
    double *U2 = malloc((size_t)d * 64 * sizeof *U2), *p2 = malloc((size_t)d * sizeof *p2);
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, r - no, 64, U2, p2) == 1);
    /* a diagonal that is not the received one (DP-like noise on W's diagonal): refused */
    dg[5] *= 0.5;
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, r, 64, U2, p2) == 1);
    dg[5] *= 2;
    /* no smaller problem: a span of d vectors or none */
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, d, 64, U2, p2) == 1);
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, 0, 64, U2, p2) == 1);
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, N, S, r, 0, U2, p2) == PFT_EINVAL);
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, -1, S, r, 64, U2, p2) == PFT_EINVAL);
    pft_gstat_destroy(&rec), pft_gstat_destroy(&own), pft_gstat_destroy(&m);
    free(U), free(psi), free(S), free(dg), free(U2), free(p2), free(x), free(y);
}

/* q above the span's dimension: the columns beyond it are zero (+0), ψ holds the rest of the diagonal. */
static void test_span_q_above(void)
{
    enum { d = 30, r = 4, q = 6 };
    pft_rng_t *rng = pft_rng_new(5);
    double S[r * d], W[d * d] = {0}, dg[d], U[d * q], psi[d];
    for (int i = 0; i < r * d; i++)
        S[i] = pft_rng_normal(rng);
    for (int k = 0; k < r; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                W[i * d + j] += S[k * d + i] * S[k * d + j] * (k + 1);
    for (int j = 0; j < d; j++)
        W[j * d + j] += (dg[j] = 0.1 + 0.01 * j);
    CHECK(pft_gstat_lowrank_shared_span(W, dg, d, 3.0, S, r, q, U, psi) == 0);
    int zero = 1;
    for (int i = 0; i < d; i++)
        for (int k = r; k < q; k++)
            zero = zero && U[i * q + k] == 0 && !signbit(U[i * q + k]);
    CHECK_MSG(zero, "columns beyond the span's dimension are +0");
    compare_span(W, dg, d, 3.0, S, r, q);
    pft_rng_destroy(&rng);
}

int main(void)
{
    RUN(test_heldout_generated);
    RUN(test_heldout_pacs);
    RUN(test_span_pacs);
    RUN(test_span_q_above);
    return pft_test_done();
}
