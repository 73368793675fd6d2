/* Tests of pft_lrop and pft_lreig: the structured leading eigenpairs against LAPACK's dsyevr on the formed
 * matrix, on a relay's statistics from the bundled real PACS features and on adversarial spectra (clustered,
 * repeated, q ≥ rank, zero diagonal, tiny d), and the release of pft_gstat_lowrank_shared (top-q dsyevr)
 * against all d eigenpairs; the release from a kept tridiagonal reduction (the evidence's) against dsyevr
 * (tolerances at check_trid).
 *
 * Tolerances (the solver's contract, pft_lreig.h, at its default tol = 1e-10):
 *  - residual ‖A v − θ v‖ ≤ 1e-9 ‖A‖ per pair, measured here on the formed A;
 *  - eigenvalues within 1e-9 ‖A‖ of LAPACK's;
 *  - projectors onto the q leading eigenvectors within 1e-6 (Frobenius) of LAPACK's where λ_q − λ_{q+1} is at
 *    least 1e-3 ‖A‖ (the subspace is defined; the angle bound is residual / gap);
 *  - single vectors within 1e-6 of LAPACK's (same sign convention) where their eigenvalue is apart from its
 *    neighbours by at least 1e-3 ‖A‖; inside a cluster only the cluster's projector is compared. */
#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_ghead.h"
#include "pft_gstat.h"
#include "pft_gstat_lowrank.h"
#include "pft_linalg.h"
#include "pft_lreig.h"
#include "pft_lrop.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_test.h"

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"

/* ‖P − P'‖_F for the projectors onto the spans of the k rows of A and of B (k×d, orthonormal rows), as
 * √2 · ‖B − (B Aᵀ) A‖_F (accurate where the cancelling form √(2k − 2‖A Bᵀ‖²) is not). */
static double projector_distance(const double *A, const double *B, int k, int d)
{
    double *m = malloc((size_t)k * k * sizeof *m), *r = malloc((size_t)k * d * sizeof *r), s = 0;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, k, d, 1.0, B, d, A, d, 0.0, m, k);
    memcpy(r, B, (size_t)k * d * sizeof *r);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, d, k, -1.0, m, k, A, d, 1.0, r, d);
    for (size_t i = 0; i < (size_t)k * d; i++)
        s += r[i] * r[i];
    free(m);
    free(r);
    return sqrt(2.0 * s);
}

/* Largest ‖A v_j − λ_j v_j‖ over the q rows of V, with A formed (d×d). */
static double max_residual(const double *A, const double *lam, const double *V, int q, int d)
{
    double *av = malloc((size_t)d * sizeof *av), worst = 0;
    for (int j = 0; j < q; j++) {
        cblas_dgemv(CblasRowMajor, CblasNoTrans, d, d, 1.0, A, d, V + (size_t)j * d, 1, 0.0, av, 1);
        double s = 0;
        for (int r = 0; r < d; r++)
            s += (av[r] - lam[j] * V[(size_t)j * d + r]) * (av[r] - lam[j] * V[(size_t)j * d + r]);
        worst = fmax(worst, sqrt(s));
    }
    free(av);
    return worst;
}

/* The checks of the header against LAPACK (all of A's top q + 1 eigenpairs from the formed matrix); returns
 * the solver's info. `label` names the case in failures. */
static pft_lreig_info_t check_against_lapack(const pft_lrop_t *op, int q, const pft_lreig_opts_t *opts,
                                             const char *label)
{
    int d = pft_lrop_dim(op), k = q < d ? q + 1 : q;
    double *A = malloc((size_t)d * d * sizeof *A), *lam = malloc((size_t)k * sizeof *lam);
    double *V = malloc((size_t)q * d * sizeof *V), *lref = malloc((size_t)k * sizeof *lref);
    double *Vref = malloc((size_t)k * d * sizeof *Vref);
    pft_lreig_info_t info = {0};
    pft_lrop_dense(op, A);
    CHECK_MSG(pft_lreig_top(op, q, opts, lam, V, &info) == 0, "%s: %s", label, pft_errmsg());
    CHECK_MSG(pft_lreig_top_dense(op, k, lref, Vref) == 0, "%s: %s", label, pft_errmsg());
    double norm = fmax(fabs(lref[0]), 1e-300);
    double res = max_residual(A, lam, V, q, d) / norm;
    CHECK_MSG(res <= 1e-9, "%s: residual %.3g of ‖A‖", label, res);
    for (int j = 0; j < q; j++)
        CHECK_MSG(fabs(lam[j] - lref[j]) <= 1e-9 * norm, "%s: λ_%d = %.17g, LAPACK %.17g", label, j, lam[j],
                  lref[j]);
    if (k > q && lref[q - 1] - lref[q] >= 1e-3 * norm) {
        double pd = projector_distance(Vref, V, q, d);
        CHECK_MSG(pd <= 1e-6, "%s: projector distance %.3g", label, pd);
    }
    for (int j = 0; j < q; j++) {
        double gap =
            fmin(j > 0 ? lref[j - 1] - lref[j] : INFINITY, j + 1 < k ? lref[j] - lref[j + 1] : INFINITY);
        if (!(gap >= 1e-3 * norm))
            continue;
        double e = 0;
        for (int r = 0; r < d; r++)
            e = fmax(e, fabs(V[(size_t)j * d + r] - Vref[(size_t)j * d + r]));
        CHECK_MSG(e <= 1e-6, "%s: vector %d differs by %.3g (gap %.3g of ‖A‖)", label, j, e, gap / norm);
    }
    free(A), free(lam), free(V), free(lref), free(Vref);
    return info;
}

/* A = diag(a) + Σ_i λ_i u_i u_iᵀ for a random orthonormal set u (k vectors of R^d, seeded): the spectrum is
 * what the test chooses (exactly when a = 0). */
static pft_lrop_t *spectrum_op(int d, int k, const double *lam, double diag_scale, uint64_t seed)
{
    pft_rng_t *rng = pft_rng_new(seed);
    double *u = malloc((size_t)d * k * sizeof *u), *a = malloc((size_t)d * sizeof *a);
    for (size_t i = 0; i < (size_t)d * k; i++)
        u[i] = pft_rng_normal(rng);
    for (int r = 0; r < d; r++)
        a[r] = diag_scale * pft_rng_uniform(rng);
    pft_lrop_t *op = pft_lrop_new(d);
    CHECK(op && pft_la_orthonormalize(u, d, k) == 0);
    for (int j = 0; op && j < k; j++) { /* column j of u with weight λ_j */
        double *col = malloc((size_t)d * sizeof *col);
        for (int r = 0; r < d; r++)
            col[r] = u[(size_t)r * k + j];
        CHECK(pft_lrop_add_factor(op, col, 1, 1, lam[j]) == 0);
        free(col);
    }
    CHECK(op && pft_lrop_add_diag(op, a, 1.0) == 0);
    free(u);
    free(a);
    pft_rng_destroy(&rng);
    return op;
}

/* The operator's product, diagonal and dense form agree; rows are centred; bad input is refused. */
static void test_lrop_basics(void)
{
    const int d = 7, n = 5;
    pft_rng_t *rng = pft_rng_new(3);
    float x[n * d];
    double c[d], L[d * 2], a[d], X[d * 3], Y[d * 3], Yd[d * 3], A[d * d], diag[d], t[(n + 2) * 3];
    for (int i = 0; i < n * d; i++)
        x[i] = (float)pft_rng_normal(rng);
    for (int i = 0; i < d; i++)
        c[i] = pft_rng_normal(rng), a[i] = pft_rng_uniform(rng);
    for (int i = 0; i < d * 2; i++)
        L[i] = pft_rng_normal(rng);
    for (int i = 0; i < d * 3; i++)
        X[i] = pft_rng_normal(rng);
    pft_lrop_t *op = pft_lrop_new(d);
    CHECK(op && pft_lrop_add_rows(op, x, n, c, 0.5) == 0 && pft_lrop_add_factor(op, L, 2, 2, -2.0) == 0 &&
          pft_lrop_add_diag(op, a, 3.0) == 0 && pft_lrop_rank(op) == n + 2);
    pft_lrop_scale(op, 2.0);
    /* the same matrix by hand */
    memset(A, 0, sizeof A);
    for (int r = 0; r < d; r++)
        for (int s = 0; s < d; s++) {
            double v = r == s ? 6.0 * a[r] : 0;
            for (int i = 0; i < n; i++)
                v += 1.0 * (x[i * d + r] - c[r]) * (x[i * d + s] - c[s]);
            for (int j = 0; j < 2; j++)
                v += -4.0 * L[r * 2 + j] * L[s * 2 + j];
            A[r * d + s] = v;
        }
    double D[d * d];
    pft_lrop_dense(op, D);
    pft_lrop_diagonal(op, diag);
    pft_lrop_apply(op, X, 3, 3, Y, 3, t);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, 3, d, 1.0, A, d, X, 3, 0.0, Yd, 3);
    for (int i = 0; i < d * d; i++)
        CHECK_NEAR(D[i], A[i], 1e-12 * (1 + fabs(A[i])));
    for (int r = 0; r < d; r++)
        CHECK_NEAR(diag[r], A[r * d + r], 1e-12 * (1 + fabs(A[r * d + r])));
    for (int i = 0; i < d * 3; i++)
        CHECK_NEAR(Y[i], Yd[i], 1e-12 * (1 + fabs(Yd[i])));
    x[3] = NAN;
    CHECK(pft_lrop_add_rows(op, x, n, c, 1.0) == PFT_EINVAL && pft_lrop_rank(op) == n + 2);
    L[1] = INFINITY;
    CHECK(pft_lrop_add_factor(op, L, 2, 2, 1.0) == PFT_EINVAL && pft_lrop_rank(op) == n + 2);
    CHECK(pft_lrop_new(0) == NULL);
    pft_lrop_destroy(&op);
    pft_lrop_destroy(&op);
    pft_rng_destroy(&rng);
}

/* A relay's scatter from the bundled PACS features (l2 rows in a fixed shuffled order): the release at rank q
 * of `nr` received rows, n_r·(U Uᵀ + diag ψ), plus `no` own rows centred at their class means, plus the
 * merge's between-part terms; *N = nr + no. NULL (and a skip) without the bundled data. */
static pft_lrop_t *pacs_relay(int nr, int no, int q, double *N)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(EXAMPLE_DATA "/train_x.npy", &x, &n, &d) ||
        pft_npy_read_i32(EXAMPLE_DATA "/train_y.npy", &y, &ny) || ny != n || nr + no > n) {
        SKIP_TEST("no bundled PACS features in " EXAMPLE_DATA " (%s)", pft_errmsg());
        pft_free(x), pft_free(y);
        return NULL;
    }
    float *xs = malloc((size_t)(nr + no) * d * sizeof *xs);
    int32_t *ys = malloc((size_t)(nr + no) * sizeof *ys);
    for (int i = 0; i < nr + no; i++) { /* the files are sorted by class: take rows (i · 7919) mod n */
        int64_t k = ((int64_t)i * 7919) % n;
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)x[k * d + j] * x[k * d + j];
        for (int64_t j = 0; j < d; j++)
            xs[(size_t)i * d + j] = (float)(x[k * d + j] / sqrt(s));
        ys[i] = y[k];
    }
    double cnt[2][16] = {{0}}, *mu[2];
    for (int p = 0; p < 2; p++) {
        mu[p] = calloc((size_t)16 * d, sizeof(double));
        for (int i = p ? nr : 0; i < (p ? nr + no : nr); i++) {
            cnt[p][ys[i]]++;
            for (int64_t j = 0; j < d; j++)
                mu[p][ys[i] * d + j] += xs[(size_t)i * d + j];
        }
        for (int c = 0; c < 16; c++)
            for (int64_t j = 0; cnt[p][c] > 0 && j < d; j++)
                mu[p][c * d + j] /= cnt[p][c];
    }
    pft_lrop_t *rec = pft_lrop_new((int)d), *op = pft_lrop_new((int)d);
    double *C = malloc((size_t)d * d * sizeof *C), *U = malloc((size_t)d * q * sizeof *U),
           *psi = malloc((size_t)d * sizeof *psi), *delta = malloc((size_t)d * sizeof *delta);
    for (int i = 0; i < nr + no; i++)
        CHECK(pft_lrop_add_rows(i < nr ? rec : op, xs + (size_t)i * d, 1, mu[i >= nr] + ys[i] * d, 1.0) == 0);
    pft_lrop_dense(rec, C);
    for (size_t i = 0; i < (size_t)d * d; i++)
        C[i] /= nr;
    CHECK(pft_gstat_lowrank_shared(C, (int)d, q, U, psi) == 0);
    CHECK(pft_lrop_add_factor(op, U, q, q, nr) == 0 && pft_lrop_add_diag(op, psi, nr) == 0);
    for (int c = 0; c < 16; c++) {
        if (cnt[0][c] == 0 || cnt[1][c] == 0)
            continue;
        for (int64_t j = 0; j < d; j++)
            delta[j] = mu[1][c * d + j] - mu[0][c * d + j];
        CHECK(pft_lrop_add_factor(op, delta, 1, 1, cnt[0][c] * cnt[1][c] / (cnt[0][c] + cnt[1][c])) == 0);
    }
    *N = nr + no;
    pft_lrop_destroy(&rec);
    free(C), free(U), free(psi), free(delta), free(xs), free(ys), free(mu[0]), free(mu[1]);
    pft_free(x), pft_free(y);
    return op;
}

/* Real statistics: a relay of 600 received rows at rank 32 and 60 own rows, its 32 leading eigenpairs. */
static void test_pacs_relay(void)
{
    double N = 0;
    pft_lrop_t *op = pacs_relay(600, 60, 32, &N);
    if (!op)
        return;
    pft_lreig_info_t info = check_against_lapack(op, 32, NULL, "pacs relay q 32");
    CHECK_MSG(!info.dense && info.cycles >= 1, "the iterative path ran (dense %d, cycles %d)", info.dense,
              info.cycles);
    info = check_against_lapack(op, 8, NULL, "pacs relay q 8");
    CHECK(!info.dense);
    pft_lrop_destroy(&op);
}

/* The release from the operator equals the release from the formed matrix: U Uᵀ + diag ψ entrywise within
 * 1e-8 of its largest entry, ψ likewise. */
static void test_pacs_release_op(void)
{
    const int q = 32;
    double N = 0;
    pft_lrop_t *op = pacs_relay(600, 60, q, &N);
    if (!op)
        return;
    int d = pft_lrop_dim(op);
    double *C = malloc((size_t)d * d * sizeof *C), *U0 = malloc((size_t)d * q * sizeof *U0),
           *U1 = malloc((size_t)d * q * sizeof *U1), *p0 = malloc((size_t)d * sizeof *p0),
           *p1 = malloc((size_t)d * sizeof *p1), *E0 = malloc((size_t)d * d * sizeof *E0),
           *E1 = malloc((size_t)d * d * sizeof *E1);
    pft_lrop_dense(op, C);
    for (size_t i = 0; i < (size_t)d * d; i++)
        C[i] /= N;
    pft_lreig_info_t info;
    CHECK(pft_gstat_lowrank_shared(C, d, q, U0, p0) == 0);
    CHECK(pft_gstat_lowrank_shared_op(op, N, q, NULL, U1, p1, &info) == 0 && !info.dense);
    pft_gstat_lowrank_expand(U0, p0, d, q, E0);
    pft_gstat_lowrank_expand(U1, p1, d, q, E1);
    double big = 0, diff = 0, pdiff = 0;
    for (size_t i = 0; i < (size_t)d * d; i++)
        big = fmax(big, fabs(E0[i])), diff = fmax(diff, fabs(E0[i] - E1[i]));
    for (int r = 0; r < d; r++)
        pdiff = fmax(pdiff, fabs(p0[r] - p1[r]));
    CHECK_MSG(diff <= 1e-8 * big, "U Uᵀ + diag ψ differ by %.3g of %.3g", diff, big);
    CHECK_MSG(pdiff <= 1e-8 * big, "ψ differs by %.3g of %.3g", pdiff, big);
    free(C), free(U0), free(U1), free(p0), free(p1), free(E0), free(E1);
    pft_lrop_destroy(&op);
}

/* pft_gstat_lowrank_shared computes only the top q eigenpairs (dsyevr RANGE = 'I'): its factor equals the one
 * made from all d eigenpairs (pft_la_eigh_fast, the earlier code), column by column (same sign rule), within
 * 1e-9 of the largest entry where the eigenvalue is apart from its neighbours, and U Uᵀ + diag ψ throughout.
 */
static void test_release_top_equals_all(void)
{
    const int q = 24;
    double N = 0;
    pft_lrop_t *op = pacs_relay(400, 100, q, &N);
    if (!op)
        return;
    int d = pft_lrop_dim(op);
    double *C = malloc((size_t)d * d * sizeof *C), *a = malloc((size_t)d * d * sizeof *a),
           *w = malloc((size_t)d * sizeof *w), *U = malloc((size_t)d * q * sizeof *U),
           *psi = malloc((size_t)d * sizeof *psi), *Ua = malloc((size_t)d * q * sizeof *Ua);
    pft_lrop_dense(op, C);
    for (size_t i = 0; i < (size_t)d * d; i++)
        C[i] /= N;
    memcpy(a, C, (size_t)d * d * sizeof *a);
    CHECK(pft_la_eigh_fast(a, d, w) == 0 && pft_gstat_lowrank_shared(C, d, q, U, psi) == 0);
    double big = 0;
    for (int j = 0; j < q; j++) { /* the factor as the earlier code made it */
        const double *v = a + (size_t)(d - 1 - j) * d;
        double s = sqrt(fmax(w[d - 1 - j], 0)), m = 0;
        int at = 0;
        for (int r = 0; r < d; r++)
            if (fabs(v[r]) > m)
                m = fabs(v[r]), at = r;
        for (int r = 0; r < d; r++)
            Ua[(size_t)r * q + j] = v[r] * (v[at] < 0 ? -s : s), big = fmax(big, fabs(Ua[(size_t)r * q + j]));
    }
    for (int j = 0; j < q; j++) {
        double gap = fmin(j ? w[d - j] - w[d - 1 - j] : INFINITY, w[d - 1 - j] - w[d - 2 - j]);
        double e = 0;
        for (int r = 0; r < d; r++)
            e = fmax(e, fabs(U[(size_t)r * q + j] - Ua[(size_t)r * q + j]));
        if (gap >= 1e-3 * w[d - 1])
            CHECK_MSG(e <= 1e-9 * big, "column %d differs by %.3g of %.3g", j, e, big);
    }
    for (int r = 0; r < d; r++) {
        double p = C[(size_t)r * d + r];
        for (int j = 0; j < q; j++)
            p -= Ua[(size_t)r * q + j] * Ua[(size_t)r * q + j];
        CHECK_NEAR(psi[r], fmax(p, 0), 1e-12);
    }
    free(C), free(a), free(w), free(U), free(psi), free(Ua);
    pft_lrop_destroy(&op);
}

/* Clustered eigenvalues: groups of 4 within 1e-9 of each other, the groups 1e-2 apart, a small diagonal; the
 * cut at q falls between groups, so the q-dimensional subspace is defined and compared. */
static void test_clustered(void)
{
    const int d = 400, k = 40;
    double lam[k];
    for (int j = 0; j < k; j++)
        lam[j] = 1.0 - 0.01 * (j / 4) + 1e-9 * (j % 4);
    pft_lrop_t *op = spectrum_op(d, k, lam, 1e-3, 11);
    pft_lreig_info_t info = check_against_lapack(op, 24, NULL, "clustered");
    CHECK(!info.dense);
    pft_lrop_destroy(&op);
}

/* Repeated eigenvalues exactly (zero diagonal): 5 (×4), 3 (×6), 2 (×10), then 1 (×10); q = 20 ends a
 * multiplet (subspace compared), q = 7 cuts through one (eigenvalues and residuals only). */
static void test_repeated(void)
{
    const int d = 300, k = 30;
    double lam[k];
    for (int j = 0; j < k; j++)
        lam[j] = j < 4 ? 5 : j < 10 ? 3 : j < 20 ? 2 : 1;
    pft_lrop_t *op = spectrum_op(d, k, lam, 0.0, 12);
    pft_lreig_info_t info = check_against_lapack(op, 20, NULL, "repeated q 20");
    CHECK(!info.dense);
    info = check_against_lapack(op, 7, NULL, "repeated q 7");
    CHECK(!info.dense);
    pft_lrop_destroy(&op);
}

/* q ≥ rank with a zero diagonal: 10 rank-one terms, q = 16; the last 6 eigenvalues are 0 and their vectors
 * any orthonormal set orthogonal to the range (residuals, orthonormality and the range's projector checked).
 */
static void test_q_above_rank(void)
{
    const int d = 200, k = 10, q = 16;
    double lam[k];
    for (int j = 0; j < k; j++)
        lam[j] = 10.0 / (j + 1);
    pft_lrop_t *op = spectrum_op(d, k, lam, 0.0, 13);
    pft_lreig_info_t info = check_against_lapack(op, q, NULL, "q above rank");
    CHECK(!info.dense);
    double *l = malloc(q * sizeof *l), *V = malloc((size_t)q * d * sizeof *V), *G = malloc(q * q * sizeof *G);
    double *lr = malloc(q * sizeof *lr), *Vr = malloc((size_t)q * d * sizeof *Vr);
    CHECK(pft_lreig_top(op, q, NULL, l, V, NULL) == 0 && pft_lreig_top_dense(op, q, lr, Vr) == 0);
    for (int j = k; j < q; j++)
        CHECK_NEAR(l[j], 0.0, 1e-9 * 10);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, q, q, d, 1.0, V, d, V, d, 0.0, G, q);
    for (int i = 0; i < q; i++)
        for (int j = 0; j < q; j++)
            CHECK_NEAR(G[i * q + j], i == j, 1e-12);
    CHECK(projector_distance(Vr, V, k, d) <= 1e-6);
    free(l), free(V), free(G), free(lr), free(Vr);
    pft_lrop_destroy(&op);
}

/* Tiny d takes the dense path and equals LAPACK exactly; q = d included. */
static void test_tiny(void)
{
    for (int d = 1; d <= 4; d++)
        for (int q = 1; q <= d; q++) {
            double lam[4] = {3, 1, 0.5, 0.25};
            pft_lrop_t *op = spectrum_op(d, d, lam, 0.1, 14 + (uint64_t)d);
            double l[4], V[16], lr[4], Vr[16];
            pft_lreig_info_t info;
            CHECK(pft_lreig_top(op, q, NULL, l, V, &info) == 0 && info.dense == 1);
            CHECK(pft_lreig_top_dense(op, q, lr, Vr) == 0);
            CHECK(memcmp(l, lr, (size_t)q * sizeof *l) == 0 && memcmp(V, Vr, (size_t)q * d * sizeof *V) == 0);
            pft_lrop_destroy(&op);
        }
    pft_lrop_t *op = pft_lrop_new(3);
    double l[4], V[12];
    CHECK(pft_lreig_top(op, 0, NULL, l, V, NULL) == PFT_EINVAL &&
          pft_lreig_top(op, 4, NULL, l, V, NULL) == PFT_EINVAL);
    pft_lrop_destroy(&op);
}

/* Without convergence in its budget the solver answers by the dense path, and says so; with the same seed it
 * is deterministic to the bit. */
static void test_fallback_and_determinism(void)
{
    const int d = 300, k = 30, q = 12;
    double lam[k];
    for (int j = 0; j < k; j++)
        lam[j] = 1.0 + 0.001 * (k - j);
    pft_lrop_t *op = spectrum_op(d, k, lam, 0.5, 15);
    pft_lreig_opts_t o;
    pft_lreig_opts_default(&o);
    o.tol = 1e-300; /* unreachable */
    o.max_cycles = 2;
    pft_lreig_info_t info;
    double *l = malloc(q * sizeof *l), *V = malloc((size_t)q * d * sizeof *V), *lr = malloc(q * sizeof *lr),
           *Vr = malloc((size_t)q * d * sizeof *Vr);
    CHECK(pft_lreig_top(op, q, &o, l, V, &info) == 0 && info.dense == 1 && info.cycles == 2);
    CHECK(pft_lreig_top_dense(op, q, lr, Vr) == 0);
    CHECK(memcmp(l, lr, q * sizeof *l) == 0 && memcmp(V, Vr, (size_t)q * d * sizeof *V) == 0);
    pft_lreig_opts_default(&o);
    CHECK(pft_lreig_top(op, q, &o, l, V, &info) == 0 && !info.dense);
    CHECK(pft_lreig_top(op, q, &o, lr, Vr, &info) == 0);
    CHECK(memcmp(l, lr, q * sizeof *l) == 0 && memcmp(V, Vr, (size_t)q * d * sizeof *V) == 0);
    free(l), free(V), free(lr), free(Vr);
    pft_lrop_destroy(&op);
}

/* A relay's scatter as an operator equals pft_gstat_merge's W: three parts of rows merged as (a + b) + c, the
 * operator from each part's rows and the merge terms of each pairwise merge in that order, within 1e-10 of
 * W's largest entry; its release (pft_gstat_lowrank_shared_op) equals the release of W / N. */
static void test_op_equals_gstat_merge(void)
{
    const int d = 200, n[3] = {90, 70, 40}, C = 4, q = 12;
    pft_rng_t *rng = pft_rng_new(21);
    pft_gstat_t *st[3], *m = NULL;
    pft_lrop_t *op = pft_lrop_new(d);
    for (int p = 0; p < 3; p++) {
        float *x = malloc((size_t)n[p] * d * sizeof *x);
        int32_t *y = malloc((size_t)n[p] * sizeof *y);
        for (int i = 0; i < n[p]; i++) { /* class and part shift the mean; correlated noise */
            y[i] = (int32_t)pft_rng_below(rng, C - (p == 2)); /* part c lacks class 3 */
            double common = pft_rng_normal(rng);
            for (int j = 0; j < d; j++)
                x[(size_t)i * d + j] = (float)(0.5 * common + pft_rng_normal(rng) / (1 + 0.05 * j) +
                                               (j % C == y[i] ? 1.0 + 0.3 * p : 0) + 2);
        }
        st[p] = pft_gstat_new(PFT_GSTAT_TIED, d);
        CHECK(st[p] && pft_gstat_add_rows(st[p], x, y, (size_t)n[p]) == 0);
        CHECK(pft_gstat_lowrank_op_add_rows(op, x, y, n[p]) == 0);
        free(x);
        free(y);
    }
    m = pft_gstat_dup(st[0]);
    CHECK(pft_gstat_lowrank_op_merge(op, m, st[1]) == 0 && pft_gstat_merge(m, st[1]) == 0);
    CHECK(pft_gstat_lowrank_op_merge(op, m, st[2]) == 0 && pft_gstat_merge(m, st[2]) == 0);
    double *A = malloc((size_t)d * d * sizeof *A), *Cm = malloc((size_t)d * d * sizeof *Cm), big = 0,
           diff = 0;
    const double *W = pft_gstat_tied_scatter(m);
    pft_lrop_dense(op, A);
    for (size_t i = 0; i < (size_t)d * d; i++)
        big = fmax(big, fabs(W[i])), diff = fmax(diff, fabs(A[i] - W[i]));
    CHECK_MSG(diff <= 1e-10 * big, "operator and merged W differ by %.3g of %.3g", diff, big);
    double N = (double)pft_gstat_total(m), *U0 = malloc((size_t)d * q * sizeof *U0),
           *U1 = malloc((size_t)d * q * sizeof *U1), p0[d], p1[d];
    for (size_t i = 0; i < (size_t)d * d; i++)
        Cm[i] = W[i] / N;
    pft_lreig_info_t info;
    CHECK(pft_gstat_lowrank_shared(Cm, d, q, U0, p0) == 0);
    CHECK(pft_gstat_lowrank_shared_op(op, N, q, NULL, U1, p1, &info) == 0 && !info.dense);
    pft_gstat_lowrank_expand(U0, p0, d, q, A);
    pft_gstat_lowrank_expand(U1, p1, d, q, Cm);
    big = diff = 0;
    for (size_t i = 0; i < (size_t)d * d; i++)
        big = fmax(big, fabs(A[i])), diff = fmax(diff, fabs(A[i] - Cm[i]));
    CHECK_MSG(diff <= 1e-8 * big, "releases differ by %.3g of %.3g", diff, big);
    int32_t bad = -1;
    float row[d];
    memset(row, 0, sizeof row);
    CHECK(pft_gstat_lowrank_op_add_rows(op, row, &bad, 1) == PFT_EINVAL);
    free(A), free(Cm), free(U0), free(U1);
    for (int p = 0; p < 3; p++)
        pft_gstat_destroy(&st[p]);
    pft_gstat_destroy(&m);
    pft_lrop_destroy(&op);
    pft_rng_destroy(&rng);
}

/* The release's eigenpairs from a kept tridiagonal reduction (pft_la_trid_top, pft_gstat_lowrank_shared_trid:
 * the evidence's dsytrd reused) against LAPACK's dsyevr on the formed matrix. Tolerances (one reduction of
 * the same matrix, two tridiagonal eigensolvers: rounding only): residual ‖A v − θ v‖ ≤ 1e-11 ‖A‖ per pair,
 * eigenvalues within 1e-11 ‖A‖, orthonormality within 1e-12; projectors within 1e-8 (Frobenius) and single
 * vectors within 1e-8 where separated by at least 1e-3 ‖A‖ (as above); with `defined` (λ_q > λ_{q+1}
 * clearly) the release U Uᵀ + diag ψ at n within 1e-10 of its largest entry of pft_gstat_lowrank_shared's of
 * A / n. Returns the q eigenpairs' largest residual relative to ‖A‖. */
static double check_trid(const pft_lrop_t *op, int q, double n, int defined, const char *label)
{
    int d = pft_lrop_dim(op), k = q < d ? q + 1 : q;
    size_t dd = (size_t)d * d;
    double *A = malloc(dd * sizeof *A), *lam = malloc((size_t)q * sizeof *lam),
           *G = malloc(q * q * sizeof *G), *V = malloc((size_t)q * d * sizeof *V),
           *lref = malloc((size_t)k * sizeof *lref), *Vref = malloc((size_t)k * d * sizeof *Vref);
    pft_la_trid_t t = {.n = d,
                       .a = malloc(dd * sizeof(double)),
                       .tau = malloc(d * sizeof(double)),
                       .td = malloc(d * sizeof(double)),
                       .te = malloc(d * sizeof(double))};
    pft_lrop_dense(op, A);
    memcpy(t.a, A, dd * sizeof *A);
    CHECK_MSG(pft_la_tridiag(t.a, d, t.td, t.te, t.tau) == 0, "%s: %s", label, pft_errmsg());
    CHECK_MSG(pft_la_trid_top(&t, q, lam, V) == 0, "%s: %s", label, pft_errmsg());
    CHECK(pft_lreig_top_dense(op, k, lref, Vref) == 0);
    double norm = fmax(fabs(lref[0]), 1e-300), res = max_residual(A, lam, V, q, d) / norm;
    CHECK_MSG(res <= 1e-11, "%s: residual %.3g of ‖A‖", label, res);
    for (int j = 0; j < q; j++)
        CHECK_MSG(fabs(lam[j] - lref[j]) <= 1e-11 * norm, "%s: λ_%d = %.17g, LAPACK %.17g", label, j, lam[j],
                  lref[j]);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, q, q, d, 1.0, V, d, V, d, 0.0, G, q);
    for (int i = 0; i < q * q; i++)
        CHECK_MSG(fabs(G[i] - (i % (q + 1) == 0)) <= 1e-12, "%s: VVᵀ − I = %.3g", label,
                  G[i] - (i % (q + 1) == 0));
    if (k > q && lref[q - 1] - lref[q] >= 1e-3 * norm)
        CHECK_MSG(projector_distance(Vref, V, q, d) <= 1e-8, "%s: projector distance %.3g", label,
                  projector_distance(Vref, V, q, d));
    for (int j = 0; j < q; j++) {
        double gap = fmin(j > 0 ? lref[j - 1] - lref[j] : INFINITY,
                          j + 1 < k ? lref[j] - lref[j + 1] : INFINITY),
               e = 0, f = 0; /* up to sign (pft_la_trid_top fixes none) */
        for (int r = 0; gap >= 1e-3 * norm && r < d; r++) {
            e = fmax(e, fabs(V[(size_t)j * d + r] - Vref[(size_t)j * d + r]));
            f = fmax(f, fabs(V[(size_t)j * d + r] + Vref[(size_t)j * d + r]));
        }
        e = fmin(e, f);
        CHECK_MSG(e <= 1e-8, "%s: vector %d differs by %.3g", label, j, e);
    }
    if (defined) { /* the release, against pft_gstat_lowrank_shared of the formed A / n */
        double *wd = malloc(d * sizeof *wd), *U0 = malloc((size_t)d * q * sizeof *U0),
               *U1 = malloc((size_t)d * q * sizeof *U1), *p0 = malloc(d * sizeof *p0),
               *p1 = malloc(d * sizeof *p1), *E0 = malloc(dd * sizeof *E0), *E1 = malloc(dd * sizeof *E1),
               big = 0, diff = 0;
        for (int r = 0; r < d; r++)
            wd[r] = A[(size_t)r * d + r];
        for (size_t i = 0; i < dd; i++)
            A[i] /= n;
        CHECK(pft_gstat_lowrank_shared(A, d, q, U0, p0) == 0);
        CHECK_MSG(pft_gstat_lowrank_shared_trid(&t, wd, n, q, U1, p1) == 0, "%s: %s", label, pft_errmsg());
        pft_gstat_lowrank_expand(U0, p0, d, q, E0);
        pft_gstat_lowrank_expand(U1, p1, d, q, E1);
        for (size_t i = 0; i < dd; i++)
            big = fmax(big, fabs(E0[i])), diff = fmax(diff, fabs(E0[i] - E1[i]));
        CHECK_MSG(diff <= 1e-10 * big, "%s: releases differ by %.3g of %.3g", label, diff, big);
        free(wd), free(U0), free(U1), free(p0), free(p1), free(E0), free(E1);
    }
    pft_la_trid_free(&t);
    free(A), free(lam), free(G), free(V), free(lref), free(Vref);
    return res;
}

/* The kept reduction on real statistics (a PACS relay at q 32 and 8) and adversarial spectra: clustered,
 * repeated (a cut at the end of a multiplet and one through it), q ≥ rank (zero eigenvalues, any orthonormal
 * completion: the range's projector compared); bad arguments refused. */
static void test_trid_release(void)
{
    double N = 0, lam[40];
    pft_lrop_t *op = pacs_relay(600, 60, 32, &N);
    if (op) {
        check_trid(op, 32, N, 1, "trid pacs relay q 32");
        check_trid(op, 8, N, 1, "trid pacs relay q 8");
        pft_lrop_destroy(&op);
    }
    for (int j = 0; j < 40; j++)
        lam[j] = 1.0 - 0.01 * (j / 4) + 1e-9 * (j % 4);
    op = spectrum_op(400, 40, lam, 1e-3, 11);
    check_trid(op, 24, 50, 1, "trid clustered");
    pft_lrop_destroy(&op);
    for (int j = 0; j < 30; j++)
        lam[j] = j < 4 ? 5 : j < 10 ? 3 : j < 20 ? 2 : 1;
    op = spectrum_op(300, 30, lam, 0.0, 12);
    check_trid(op, 20, 50, 1, "trid repeated q 20");
    check_trid(op, 7, 50, 0, "trid repeated q 7");
    pft_lrop_destroy(&op);
    const int d = 200, k = 10, q = 16;
    for (int j = 0; j < k; j++)
        lam[j] = 10.0 / (j + 1);
    op = spectrum_op(d, k, lam, 0.0, 13);
    check_trid(op, q, 50, 1, "trid q above rank");
    pft_la_trid_t t = {.n = d,
                       .a = malloc((size_t)d * d * sizeof(double)),
                       .tau = malloc(d * sizeof(double)),
                       .td = malloc(d * sizeof(double)),
                       .te = malloc(d * sizeof(double))};
    double l[16], *V = malloc((size_t)q * d * sizeof *V), *Vr = malloc((size_t)k * d * sizeof *Vr), lr[10];
    pft_lrop_dense(op, t.a);
    CHECK(pft_la_tridiag(t.a, d, t.td, t.te, t.tau) == 0 && pft_la_trid_top(&t, q, l, V) == 0);
    CHECK(pft_lreig_top_dense(op, k, lr, Vr) == 0);
    for (int j = k; j < q; j++)
        CHECK_NEAR(l[j], 0.0, 1e-11 * 10);
    CHECK(projector_distance(Vr, V, k, d) <= 1e-8);
    CHECK(pft_la_trid_top(&t, 0, l, V) == PFT_EINVAL && pft_la_trid_top(&t, d + 1, l, V) == PFT_EINVAL);
    pft_la_trid_free(&t);
    pft_la_trid_free(&t); /* safe twice */
    CHECK(pft_la_trid_top(&t, 1, l, V) == PFT_EINVAL);
    free(V), free(Vr);
    pft_lrop_destroy(&op);
}

/* pft_la_tridiag_extremes: the smallest and largest eigenvalue by bisection, against known answers (the
 * second difference matrix: 2 − 2 cos(jπ/(n + 1))) and against dsterf's full spectrum on reductions of a PACS
 * relay's W, a spectrum with zeros (q above rank) and a clustered one; what the evidence's condition check
 * reads instead of all n eigenvalues. */
static void test_trid_extremes(void)
{
    const int n = 300;
    double *td = malloc(n * sizeof *td), *te = malloc(n * sizeof *te), lo = 0, hi = 0;
    for (int i = 0; i < n; i++)
        td[i] = 2.0, te[i] = i < n - 1 ? -1.0 : 0.0;
    CHECK(pft_la_tridiag_extremes(td, te, n, &lo, &hi) == 0);
    CHECK_NEAR(lo, 2.0 - 2.0 * cos(M_PI / (n + 1)), 1e-13);
    CHECK_NEAR(hi, 2.0 - 2.0 * cos(n * M_PI / (n + 1)), 1e-13);
    CHECK(pft_la_tridiag_extremes(td, te, 1, &lo, &hi) == 0 && lo == 2.0 && hi == 2.0);
    free(td), free(te);
    double N = 0, lam[40];
    for (int j = 0; j < 40; j++)
        lam[j] = 1.0 - 0.01 * (j / 4) + 1e-9 * (j % 4);
    pft_lrop_t *ops[3] = {pacs_relay(600, 60, 32, &N), NULL, spectrum_op(400, 40, lam, 1e-3, 11)};
    for (int j = 0; j < 10; j++)
        lam[j] = 10.0 / (j + 1);
    ops[1] = spectrum_op(200, 10, lam, 0.0, 13);
    for (int k = 0; k < 3; k++) {
        if (!ops[k])
            continue;
        int d = pft_lrop_dim(ops[k]);
        double *a = malloc((size_t)d * d * sizeof *a), *w = malloc(d * sizeof *w),
               *tau = malloc(d * sizeof *tau);
        td = malloc(d * sizeof *td), te = malloc(d * sizeof *te);
        pft_lrop_dense(ops[k], a);
        CHECK(pft_la_tridiag(a, d, td, te, tau) == 0 && pft_la_tridiag_eigvals(td, te, d, w) == 0);
        CHECK(pft_la_tridiag_extremes(td, te, d, &lo, &hi) == 0);
        CHECK_MSG(fabs(lo - w[0]) <= 1e-14 * fabs(w[d - 1]) && fabs(hi - w[d - 1]) <= 1e-14 * fabs(w[d - 1]),
                  "case %d: [%.17g, %.17g] against dsterf's [%.17g, %.17g]", k, lo, hi, w[0], w[d - 1]);
        free(a), free(w), free(tau), free(td), free(te);
        pft_lrop_destroy(&ops[k]);
    }
}

/* The evidence hands over the reduction it computed its tallies in (pft_ghead_evidence_keep), made in the
 * statistics' own scatter: the same tallies as pft_ghead_evidence, the release from it equals
 * pft_gstat_lowrank_shared's of W / N (PACS rows), and W comes back bit for bit. */
static void test_evidence_keep(void)
{
    float *x = NULL;
    int32_t *y = NULL;
    int64_t n = 0, d = 0, ny = 0;
    if (pft_npy_read_f32(EXAMPLE_DATA "/train_x.npy", &x, &n, &d) ||
        pft_npy_read_i32(EXAMPLE_DATA "/train_y.npy", &y, &ny) || ny != n || n < 700) {
        SKIP_TEST("no bundled PACS features in " EXAMPLE_DATA " (%s)", pft_errmsg());
        pft_free(x), pft_free(y);
        return;
    }
    const int m = 700, own = 120, q = 40;
    float *xs = malloc((size_t)m * d * sizeof *xs);
    int32_t *ys = malloc((size_t)m * sizeof *ys);
    for (int i = 0; i < m; i++) { /* rows (i · 7919) mod n, L2-normalised, as pacs_relay */
        int64_t r = ((int64_t)i * 7919) % n;
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)x[r * d + j] * x[r * d + j];
        for (int64_t j = 0; j < d; j++)
            xs[(size_t)i * d + j] = (float)(x[r * d + j] / sqrt(s));
        ys[i] = y[r];
    }
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, (int)d);
    CHECK(st && pft_gstat_add_rows(st, xs, ys, (size_t)m) == 0);
    pft_gstat_t *st0 = pft_gstat_dup(st);
    CHECK(st0 != NULL);
    pft_ghead_opts_t o;
    pft_ghead_opts_default(&o);
    pft_ghead_evidence_t e0[PFT_GHEAD_N_ALPHA], e1[PFT_GHEAD_N_ALPHA];
    pft_la_trid_t t;
    CHECK(pft_ghead_evidence(st, xs, ys, own, 7, &o, e0) == 0);
    CHECK(pft_ghead_evidence_keep(st, xs, ys, own, 7, &o, e1, &t) == 0 && t.a && t.diag && t.n == d);
    CHECK(memcmp(e0, e1, sizeof e0) == 0);
    CHECK(pft_gstat_tied_scatter(st) == NULL); /* lent to the reduction */
    pft_la_trid_t t2;
    CHECK(pft_ghead_evidence_keep(st, xs, ys, own, 7, &o, e0, &t2) == PFT_EINVAL && !t2.a); /* lent already */
    size_t dd = (size_t)d * d;
    double N = (double)pft_gstat_total(st), *C = malloc(dd * sizeof *C),
           *U0 = malloc((size_t)d * q * sizeof *U0), *U1 = malloc((size_t)d * q * sizeof *U1),
           *p0 = malloc(d * sizeof *p0), *p1 = malloc(d * sizeof *p1), *E0 = malloc(dd * sizeof *E0),
           *E1 = malloc(dd * sizeof *E1), big = 0, diff = 0;
    const double *W = pft_gstat_tied_scatter(st0);
    for (size_t i = 0; i < dd; i++)
        C[i] = W[i] / N;
    for (int64_t r = 0; r < d; r++)
        CHECK(t.diag[r] == W[(size_t)r * d + r]);
    CHECK(pft_gstat_lowrank_shared(C, (int)d, q, U0, p0) == 0);
    CHECK(pft_gstat_lowrank_shared_trid(&t, t.diag, N, q, U1, p1) == 0);
    pft_gstat_lowrank_expand(U0, p0, (int)d, q, E0);
    pft_gstat_lowrank_expand(U1, p1, (int)d, q, E1);
    for (size_t i = 0; i < dd; i++)
        big = fmax(big, fabs(E0[i])), diff = fmax(diff, fabs(E0[i] - E1[i]));
    CHECK_MSG(diff <= 1e-10 * big, "releases differ by %.3g of %.3g", diff, big);
    CHECK(pft_ghead_evidence_give_back(st, &t) == 0 && !t.a && !t.diag);
    CHECK(pft_gstat_equal(st, st0)); /* W back bit for bit: the reduction left its other triangle alone */
    CHECK(pft_ghead_evidence_give_back(st, &t) == PFT_EINVAL && pft_gstat_equal(st, st0));
    /* every row own and W singular (60 and 150 rows): the same tallies as the copying evidence, W back bit
     * for bit */
    for (int k = 0; k < 2; k++) {
        int mk = k ? 150 : 60;
        pft_gstat_t *sk = pft_gstat_new(PFT_GSTAT_TIED, (int)d), *sk0;
        CHECK(sk && pft_gstat_add_rows(sk, xs, ys, (size_t)mk) == 0 && (sk0 = pft_gstat_dup(sk)));
        CHECK(pft_ghead_evidence(sk0, xs, ys, mk, 7, &o, e0) == 0);
        CHECK(pft_ghead_evidence_keep(sk, xs, ys, mk, 7, &o, e1, &t) == 0);
        CHECK(memcmp(e0, e1, sizeof e0) == 0);
        if (t.a)
            CHECK(pft_ghead_evidence_give_back(sk, &t) == 0);
        CHECK(pft_gstat_equal(sk, sk0));
        pft_gstat_destroy(&sk);
        pft_gstat_destroy(&sk0);
    }
    /* too few own rows: no tally, nothing kept, W never lent */
    CHECK(pft_ghead_evidence_keep(st, xs, ys, 5, 7, &o, e1, &t) == 1 && !t.a && pft_gstat_equal(st, st0));
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&st0);
    free(xs), free(ys), free(C), free(U0), free(U1), free(p0), free(p1), free(E0), free(E1);
    pft_free(x), pft_free(y);
}

int main(void)
{
    RUN(test_lrop_basics);
    RUN(test_pacs_relay);
    RUN(test_pacs_release_op);
    RUN(test_release_top_equals_all);
    RUN(test_clustered);
    RUN(test_repeated);
    RUN(test_q_above_rank);
    RUN(test_tiny);
    RUN(test_fallback_and_determinism);
    RUN(test_op_equals_gstat_merge);
    RUN(test_trid_release);
    RUN(test_trid_extremes);
    RUN(test_evidence_keep);
    return pft_test_done();
}
