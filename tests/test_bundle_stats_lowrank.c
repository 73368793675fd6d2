/* Tests of the low-rank-plus-diagonal form of a tied part's shared covariance (stats_rank): round trips
 * within the tolerance of the rank-q reconstruction, the exact case, bytes = formula, hand-built and hostile
 * payloads. docs/WIRE.md §2.1. */
#include <math.h>

#include "pft_gstat_lowrank.h"
#include "pft_test_stats.h"

/* Every tied part of o holds N·(U Uᵀ + diag psi) for the rank-q form of b's part (within tol of the largest
 * entry), the classes as b's. */
static void check_lowrank_parts(const pft_bundle_t *b, const pft_bundle_t *o, int q, double tol)
{
    CHECK(pft_bundle_n_parts(o) == pft_bundle_n_parts(b));
    for (int i = 0; i < pft_bundle_n_parts(b) && i < pft_bundle_n_parts(o); i++) {
        const pft_gstat_t *sb = pft_bundle_part_stats(b, i), *so = pft_bundle_part_stats(o, i);
        int d = pft_gstat_dim(sb);
        size_t dd = (size_t)d * d;
        double n = (double)pft_gstat_total(sb);
        CHECK(pft_gstat_total(so) == pft_gstat_total(sb) &&
              pft_gstat_n_classes(so) == pft_gstat_n_classes(sb));
        for (int c = 0; c < pft_gstat_n_classes(sb) && c < pft_gstat_n_classes(so); c++)
            CHECK(near_all(pft_gstat_mean(sb, c), pft_gstat_mean(so, c), (size_t)d, tol,
                           fmax(1.0, max_abs(pft_gstat_mean(sb, c), (size_t)d))));
        double *cv = pft_alloc_array(dd, sizeof *cv), *u = pft_alloc_array((size_t)d * q + 1, sizeof *u),
               *psi = pft_alloc_array((size_t)d, sizeof *psi);
        for (size_t j = 0; j < dd; j++)
            cv[j] = pft_gstat_tied_scatter(sb)[j] / n;
        CHECK(pft_gstat_lowrank_shared(cv, d, q, u, psi) == 0);
        pft_gstat_lowrank_expand(u, psi, d, q, cv);
        for (size_t j = 0; j < dd; j++)
            cv[j] *= n;
        const double *got = pft_gstat_tied_scatter(so);
        CHECK_MSG(near_all(got, cv, dd, tol, max_abs(cv, dd)), "part %d: low-rank scatter", i);
        for (int r = 0; r < d; r++) /* the diagonal is kept */
            CHECK(fabs(got[(size_t)r * d + r] - pft_gstat_tied_scatter(sb)[(size_t)r * d + r]) <=
                  tol * max_abs(cv, dd));
        pft_free(cv);
        pft_free(u);
        pft_free(psi);
    }
}

static void lowrank_round_trip(pft_dtype_t dt, int d, int q)
{
    pft_bundle_t *b = two_part_bundle(31 + (uint64_t)q, PFT_GSTAT_TIED, dt, d);
    CHECK(pft_bundle_shared_rank(b) == 0);
    CHECK(pft_bundle_set_shared_rank(b, q) == 0 && pft_bundle_shared_rank(b) == q);
    uint8_t *m1 = NULL, *m2 = NULL, *p1 = NULL, *p2 = NULL, *m3 = NULL, *m4 = NULL;
    size_t l1 = 0, l2 = 0, q1 = 0, q2 = 0, l3 = 0, l4 = 0;
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0);
    CHECK(pft_bundle_encode(b, &m2, &l2) == 0);
    CHECK(l1 == l2 && memcmp(m1, m2, l1) == 0);
    size_t es = dt == PFT_DTYPE_F32 ? 4 : 2, fb = pft_bundle_formula_bytes(b);
    CHECK(fb == es * (4 * (1 + (size_t)d) + 2 * ((size_t)d * q + d)));
    CHECK(l1 > fb && l1 < fb + 200);
    pft_bundle_t *o = NULL, *o2 = NULL, *re = NULL;
    CHECK(pft_bundle_decode(m1, l1, NULL, &o) == 0);
    if (!o) {
        fprintf(stderr, "  decode: %s\n", pft_errmsg());
        goto out;
    }
    CHECK(pft_bundle_shared_rank(o) == q);
    CHECK(pft_bundle_formula_bytes(o) == fb);
    check_lowrank_parts(b, o, q, dt == PFT_DTYPE_F32 ? 1e-5 : 3e-3);
    /* decode → encode gives the payload back; setting the same rank keeps it */
    CHECK(pft_bundle_set_shared_rank(o, q) == 0);
    CHECK(pft_bundle_encode_payload(b, &p1, &q1) == 0);
    CHECK(pft_bundle_encode_payload(o, &p2, &q2) == 0);
    CHECK(q1 == q2 && memcmp(p1, p2, q1) == 0);
    /* rebuilt through the API at the same rank: canonical (deterministic, decodes, same rank, same content up
     * to the rounding of a second factorisation) */
    re = rebuild(o);
    CHECK(pft_bundle_set_shared_rank(re, q) == 0);
    CHECK(pft_bundle_encode(re, &m3, &l3) == 0);
    CHECK(pft_bundle_encode(re, &m4, &l4) == 0);
    CHECK(l3 == l4 && l3 == l1 && memcmp(m3, m4, l3) == 0);
    CHECK(pft_bundle_decode(m3, l3, NULL, &o2) == 0);
    if (o2) {
        CHECK(pft_bundle_shared_rank(o2) == q);
        check_lowrank_parts(o, o2, q, dt == PFT_DTYPE_F32 ? 1e-5 : 3e-3);
    }
    /* back to dense: the kept payload is dropped, the dense encoding comes back */
    pft_free(m4);
    m4 = NULL;
    CHECK(pft_bundle_set_shared_rank(o, 0) == 0 && pft_bundle_shared_rank(o) == 0);
    CHECK(pft_bundle_encode(o, &m4, &l4) == 0);
    CHECK(l4 != l1 || memcmp(m4, m1, l1) != 0);
    printf("  tied %s d=%d q=%d: %zu bytes encoded, formula %zu (dense %zu)\n",
           dt == PFT_DTYPE_F32 ? "fp32" : "fp16", d, q, l1, fb, l4);
out:
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&o2);
    pft_bundle_destroy(&re);
    pft_bundle_destroy(&b);
    pft_free(m1);
    pft_free(m2);
    pft_free(m3);
    pft_free(m4);
    pft_free(p1);
    pft_free(p2);
}

/* Exact where rank(C) ≤ q: part {c} has 8 rows of 2 classes, so its W has rank ≤ 6. */
static void lowrank_exact(void)
{
    pft_bundle_t *b = two_part_bundle(41, PFT_GSTAT_TIED, PFT_DTYPE_F32, 9);
    CHECK(pft_bundle_set_shared_rank(b, 6) == 0);
    uint8_t *m = NULL;
    size_t l = 0;
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_decode(m, l, NULL, &o) == 0);
    if (o) {
        const double *w = pft_gstat_tied_scatter(pft_bundle_part_stats(b, 1)); /* part {c} */
        const double *g = pft_gstat_tied_scatter(pft_bundle_part_stats(o, 1));
        CHECK(strcmp(pft_bundle_part_contributor(o, 1, 0), "c") == 0);
        CHECK_MSG(near_all(g, w, 81, 1e-5, max_abs(w, 81)), "rank-6 scatter not reproduced at q = 6");
    }
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_free(m);
}

static void test_lowrank(void)
{
    lowrank_round_trip(PFT_DTYPE_F32, 8, 1);
    lowrank_round_trip(PFT_DTYPE_F32, 8, 3);
    lowrank_round_trip(PFT_DTYPE_F32, 8, 7);
    lowrank_round_trip(PFT_DTYPE_F16, 8, 3);
    lowrank_round_trip(PFT_DTYPE_F32, 2, 1);
    lowrank_exact();
    /* API: 0..d-1; a FULL bundle ignores it (dense per-class covariances) and decodes as rank 0 */
    pft_bundle_t *b = two_part_bundle(5, PFT_GSTAT_FULL, PFT_DTYPE_F32, 4);
    CHECK(pft_bundle_set_shared_rank(b, -1) == PFT_EINVAL);
    CHECK(pft_bundle_set_shared_rank(b, 4) == PFT_EINVAL);
    CHECK(pft_bundle_shared_rank(b) == 0);
    size_t dense = pft_bundle_formula_bytes(b);
    CHECK(pft_bundle_set_shared_rank(b, 3) == 0 && pft_bundle_formula_bytes(b) == dense);
    uint8_t *m = NULL;
    size_t l = 0;
    pft_bundle_t *o = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_decode(m, l, NULL, &o) == 0);
    CHECK(o && pft_bundle_shared_rank(o) == 0);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_free(m);
    pft_bundle_t *one = pft_bundle_new("r", "p", PFT_DTYPE_F32, 1);
    CHECK(pft_bundle_set_shared_rank(one, 1) == PFT_EINVAL && pft_bundle_set_shared_rank(one, 0) == 0);
    pft_bundle_destroy(&one);
}

/* Per-part rank caps (the release rule): in a bundle of shared rank 3, part 0 capped at 0 travels as its
 * isotropic variance (every psi entry tr(C)/d, the factor zero) and part 1 capped at 1 as its leading
 * eigenpair plus the rest of its diagonal (columns 2 and 3 zero); the decoder keeps each factor as it
 * travelled. The oracle is each part's own C (its rank-1 form by pft_gstat_lowrank_shared, which
 * test_gstat checks against numpy). */
static void test_rank_caps(void)
{
    const int d = 8, q = 3;
    pft_bundle_t *b = two_part_bundle(11, PFT_GSTAT_TIED, PFT_DTYPE_F32, d), *o = NULL;
    CHECK(pft_bundle_set_shared_rank(b, q) == 0);
    CHECK(pft_bundle_set_part_rank_cap(b, 0, 0) == 0 && pft_bundle_set_part_rank_cap(b, 1, 1) == 0);
    CHECK(pft_bundle_set_part_rank_cap(b, 2, 1) == PFT_EINVAL &&
          pft_bundle_set_part_rank_cap(b, 0, d) == PFT_EINVAL);
    uint8_t *m = NULL;
    size_t l = 0;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_decode(m, l, NULL, &o) == 0);
    for (int i = 0; o && i < 2; i++) {
        const pft_gstat_t *sb = pft_bundle_part_stats(b, i), *so = pft_bundle_part_stats(o, i);
        double n = (double)pft_gstat_total(sb), tr = 0, err = 0, scale = 0;
        size_t dd = (size_t)d * d;
        double *c = pft_alloc_array(dd, sizeof *c), *u1 = pft_alloc_array((size_t)d, sizeof *u1),
               *psi = pft_alloc_array((size_t)d, sizeof *psi), *want = pft_alloc_array(dd, sizeof *want);
        for (size_t j = 0; j < dd; j++)
            c[j] = pft_gstat_tied_scatter(sb)[j] / n;
        for (int r = 0; r < d; r++)
            tr += c[(size_t)r * d + r];
        if (i == 0) {
            for (size_t j = 0; j < dd; j++)
                want[j] = j % (size_t)(d + 1) == 0 ? tr / d : 0.0;
        } else {
            CHECK(pft_gstat_lowrank_shared(c, d, 1, u1, psi) == 0);
            pft_gstat_lowrank_expand(u1, psi, d, 1, want);
        }
        for (size_t j = 0; j < dd; j++) {
            err = fmax(err, fabs(pft_gstat_tied_scatter(so)[j] / n - want[j]));
            scale = fmax(scale, fabs(want[j]));
        }
        CHECK_MSG(err <= 1e-6 * scale, "part %d (cap %d): decoded covariance off by %.3g (scale %.3g)", i, i,
                  err, scale);
        int fq = -1;
        const double *f = pft_bundle_part_factor(o, i, &fq);
        CHECK(f && fq == q);
        for (int r = 0; f && r < d; r++)
            for (int j = 0; j < q; j++)
                if (j >= i) /* beyond the cap: zero */
                    CHECK(f[(size_t)r * q + (size_t)j] == 0.0);
        pft_free(c);
        pft_free(u1);
        pft_free(psi);
        pft_free(want);
    }
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_free(m);
}

/* A release given by the caller (pft_bundle_set_part_release) is what the encoder sends at its rank: the one
 * pft_gstat_lowrank_shared computes gives the same bytes as the encoder's own; a different one travels as
 * given (its factor decoded back); at another rank (a cap changed after it was set) it is ignored; bad values
 * and shapes are refused. */
static void test_part_release(void)
{
    const int d = 10, q = 3;
    pft_bundle_t *b = two_part_bundle(21, PFT_GSTAT_TIED, PFT_DTYPE_F32, d), *o = NULL;
    CHECK(pft_bundle_set_shared_rank(b, q) == 0);
    const pft_gstat_t *st = pft_bundle_part_stats(b, 0);
    size_t dd = (size_t)d * d;
    double n = (double)pft_gstat_total(st), *c = pft_alloc_array(dd, sizeof *c),
           *u = pft_alloc_array((size_t)d * q, sizeof *u), *psi = pft_alloc_array((size_t)d, sizeof *psi);
    for (size_t j = 0; j < dd; j++)
        c[j] = pft_gstat_tied_scatter(st)[j] / n;
    CHECK(pft_gstat_lowrank_shared(c, d, q, u, psi) == 0);
    uint8_t *m0 = NULL, *m1 = NULL, *m2 = NULL, *m3 = NULL;
    size_t l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    CHECK(pft_bundle_encode(b, &m0, &l0) == 0);
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, q) == 0);
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0);
    CHECK(l0 == l1 && memcmp(m0, m1, l0) == 0);
    for (size_t j = 0; j < (size_t)d * q; j++) /* another factor: it is the one sent */
        u[j] *= 0.5;
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, q) == 0);
    CHECK(pft_bundle_encode(b, &m2, &l2) == 0 && pft_bundle_decode(m2, l2, NULL, &o) == 0);
    int fq = 0;
    const double *f = o ? pft_bundle_part_factor(o, 0, &fq) : NULL;
    CHECK(f && fq == q);
    for (size_t j = 0; f && j < (size_t)d * q; j++)
        CHECK_NEAR(f[j], u[j], 1e-6 * fabs(u[j]) + 1e-30);
    CHECK(pft_bundle_set_part_rank_cap(b, 0, 1) == 0 && pft_bundle_encode(b, &m3, &l3) == 0);
    pft_bundle_t *ref = two_part_bundle(21, PFT_GSTAT_TIED, PFT_DTYPE_F32, d); /* capped, nothing given */
    uint8_t *mr = NULL;
    size_t lr = 0;
    CHECK(pft_bundle_set_shared_rank(ref, q) == 0 && pft_bundle_set_part_rank_cap(ref, 0, 1) == 0);
    CHECK(pft_bundle_encode(ref, &mr, &lr) == 0 && lr == l3 && memcmp(mr, m3, lr) == 0);
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, 0) == PFT_EINVAL);
    CHECK(pft_bundle_set_part_release(b, 2, u, psi, q) == PFT_EINVAL);
    psi[1] = -1e-9;
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, q) == PFT_EINVAL);
    psi[1] = 0;
    u[2] = NAN;
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, q) == PFT_EINVAL);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&ref);
    pft_free(c), pft_free(u), pft_free(psi), pft_free(m0), pft_free(m1), pft_free(m2), pft_free(m3),
        pft_free(mr);
}

/* A part's scatter handed over (pft_bundle_take_part_scatter, a relay whose evidence holds the same W): the
 * W handed is the part's, bit for bit; the bundle is refused by the encoder until the part's release is set,
 * then encodes to the bytes of the same bundle that kept its W, and so it does with its W given back; what
 * may not be taken is refused (dense form, a cap of 0, FULL or no such part, twice); a part whose statistics
 * were taken (pft_bundle_take_part_stats) stops the encoder. */
static void test_take_part_scatter(void)
{
    const int d = 10, q = 3;
    pft_bundle_t *b = two_part_bundle(23, PFT_GSTAT_TIED, PFT_DTYPE_F32, d),
                 *ref = two_part_bundle(23, PFT_GSTAT_TIED, PFT_DTYPE_F32, d);
    size_t dd = (size_t)d * d;
    double *w = NULL, *c = pft_alloc_array(dd, sizeof *c), *u = pft_alloc_array((size_t)d * q, sizeof *u),
           *psi = pft_alloc_array((size_t)d, sizeof *psi);
    CHECK(pft_bundle_take_part_scatter(b, 0, &w) == PFT_EINVAL && !w); /* dense form: the encoder needs W */
    CHECK(pft_bundle_set_shared_rank(b, q) == 0 && pft_bundle_set_shared_rank(ref, q) == 0);
    CHECK(pft_bundle_set_part_rank_cap(b, 1, 0) == 0 && pft_bundle_set_part_rank_cap(ref, 1, 0) == 0);
    CHECK(pft_bundle_take_part_scatter(b, 1, &w) == PFT_EINVAL && !w); /* cap 0: psi is made from W */
    CHECK(pft_bundle_take_part_scatter(b, 2, &w) == PFT_EINVAL && !w);
    CHECK(pft_bundle_take_part_scatter(b, 0, &w) == 0 && w);
    const double *wr = pft_gstat_tied_scatter(pft_bundle_part_stats(ref, 0));
    CHECK(w && memcmp(w, wr, dd * sizeof *w) == 0);
    CHECK(pft_gstat_tied_scatter(pft_bundle_part_stats(b, 0)) == NULL);
    double *w2 = NULL;
    CHECK(pft_bundle_take_part_scatter(b, 0, &w2) == PFT_EINVAL && !w2);
    uint8_t *m = NULL, *mr = NULL;
    size_t l = 0, lr = 0;
    CHECK(pft_bundle_encode(b, &m, &l) == PFT_EINVAL && !m);
    CHECK(strstr(pft_errmsg(), "scatter was handed over and no release was set") != NULL);
    double n = (double)pft_gstat_total(pft_bundle_part_stats(ref, 0));
    for (size_t j = 0; j < dd; j++)
        c[j] = wr[j] / n;
    CHECK(pft_gstat_lowrank_shared(c, d, q, u, psi) == 0);
    /* the release computed in the handed-over W itself (the node's release_in_place): the same numbers */
    double *u2 = pft_alloc_array((size_t)d * q, sizeof *u2), *psi2 = pft_alloc_array((size_t)d, sizeof *psi2);
    /* ... and in W given back as it was (the node's release before its head reads the same W) */
    CHECK(w && pft_gstat_lowrank_shared_scatter_keep(w, d, n, q, u2, psi2) == 0);
    CHECK(memcmp(u, u2, (size_t)d * q * sizeof *u) == 0 && memcmp(psi, psi2, (size_t)d * sizeof *psi) == 0);
    CHECK(w && memcmp(w, wr, dd * sizeof *w) == 0);
    CHECK(w && pft_gstat_lowrank_shared_scatter_keep(w, d, -1.0, q, u2, psi2) == PFT_EINVAL);
    if (w) { /* a non-finite entry (both triangles): refused, and W still as it was */
        w[3] = w[3 * (size_t)d] = NAN;
        CHECK(pft_gstat_lowrank_shared_scatter_keep(w, d, n, q, u2, psi2) == PFT_EINVAL);
        CHECK(isnan(w[3]) && isnan(w[3 * (size_t)d]));
        w[3] = wr[3], w[3 * (size_t)d] = wr[3 * (size_t)d];
        CHECK(memcmp(w, wr, dd * sizeof *w) == 0);
    }
    CHECK(w && pft_gstat_lowrank_shared_scatter_inplace(w, d, n, q, u2, psi2) == 0);
    CHECK(memcmp(u, u2, (size_t)d * q * sizeof *u) == 0 && memcmp(psi, psi2, (size_t)d * sizeof *psi) == 0);
    CHECK(pft_gstat_lowrank_shared_scatter_inplace(w, d, 0.0, q, u2, psi2) == PFT_EINVAL); /* n must be > 0 */
    pft_free(u2), pft_free(psi2);
    CHECK(pft_bundle_set_part_release(b, 0, u, psi, q) == 0);
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_encode(ref, &mr, &lr) == 0);
    CHECK(m && mr && l == lr && memcmp(m, mr, l) == 0);
    double *wb = pft_alloc_array(dd, sizeof *wb); /* W given back: the bytes of the bundle that kept it */
    memcpy(wb, wr, dd * sizeof *wb);
    CHECK(pft_bundle_give_part_scatter(b, 0, &wb) == 0 && !wb);
    CHECK(pft_bundle_give_part_scatter(b, 0, &wb) == PFT_EINVAL); /* it holds one */
    CHECK(pft_bundle_set_shared_rank(b, 2) == 0 &&
          pft_bundle_set_shared_rank(ref, 2) == 0); /* release unused */
    pft_free(m), pft_free(mr), m = mr = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == 0 && pft_bundle_encode(ref, &mr, &lr) == 0);
    CHECK(m && mr && l == lr && memcmp(m, mr, l) == 0);
    pft_gstat_t *st = NULL; /* the statistics handed over: the bundle is not encoded any more */
    CHECK(pft_bundle_take_part_stats(b, 0, &st) == 0 && st && pft_gstat_total(st) > 0);
    pft_gstat_t *st2 = NULL;
    CHECK(pft_bundle_part_stats(b, 0) == NULL && pft_bundle_take_part_stats(b, 0, &st2) == PFT_EINVAL &&
          !st2);
    pft_free(m), m = NULL;
    CHECK(pft_bundle_encode(b, &m, &l) == PFT_EINVAL && !m);
    pft_gstat_destroy(&st);
    pft_bundle_t *full = two_part_bundle(23, PFT_GSTAT_FULL, PFT_DTYPE_F32, d);
    CHECK(pft_bundle_set_shared_rank(full, q) == 0);
    CHECK(pft_bundle_take_part_scatter(full, 0, &w2) == PFT_EINVAL && !w2);
    pft_bundle_destroy(&full);
    pft_bundle_destroy(&b);
    pft_bundle_destroy(&ref);
    pft_free(w), pft_free(c), pft_free(u), pft_free(psi), pft_free(m), pft_free(mr);
}

/* Hand-built low-rank shared fields: W = N·(U Uᵀ + diag psi) exactly; each rule refused. */
static void test_lowrank_hand_built(void)
{
    hand_t h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    pft_bundle_t *o = NULL;
    CHECK(hand_decode(&h, &o) == 0);
    if (o) {
        const double *m = pft_gstat_tied_scatter(pft_bundle_part_stats(o, 0));
        CHECK(m[0] == 8 && m[1] == 2 && m[2] == 2 && m[3] == 4);
        CHECK(pft_bundle_shared_rank(o) == 1);
    }
    pft_bundle_destroy(&o);
    h.psi[1] = -0.5f;
    expect_hand(&h, PFT_ENUMERIC, "part 0 (contributors a): shared covariance: psi[1] = -0.5 is negative");
    h.psi[1] = -0.0f;
    expect_hand(&h, PFT_ENUMERIC, "psi[1] = -0 is negative");
    h.psi[1] = NAN;
    expect_hand(&h, PFT_ENUMERIC, "psi[1] = nan is not finite");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.u[1] = INFINITY;
    expect_hand(&h, PFT_ENUMERIC, "factor[1][0] = inf is not finite");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_q = 0;
    expect_hand(&h, PFT_EFORMAT, "shared covariance: rank = 0 outside 1..1");
    h.lr_q = 2; /* q ≥ d: the dense form is the smaller one */
    expect_hand(&h, PFT_EFORMAT, "shared covariance: rank = 2 outside 1..1");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_psi_len = 1;
    expect_hand(&h, PFT_EFORMAT, "shared covariance: psi: 4 bytes, expected 8");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.lr_n = 2;
    expect_hand(&h, PFT_EFORMAT, "shared covariance (low rank): 2 elements");
    h = hand_default(PFT_GSTAT_TIED);
    h.lr = 1;
    h.dense_second = 1; /* one form per bundle */
    expect_hand(&h, PFT_EFORMAT,
                "part 1 (contributors b): shared covariance of rank 0, an earlier part's has 1");
    h.lr = 0; /* both dense: fine */
    expect_hand(&h, 0, NULL);
    h = hand_default(PFT_GSTAT_FULL);
    h.lr = 1; /* full parts: shared stays nil */
    h.shared_bad = 0;
    expect_hand(&h, 0, NULL);
}

/* Truncations, bit flips and allocation failures of a low-rank bundle (d = 2, q = 1). */
static void test_lowrank_hostile(void)
{
    pft_bundle_t *b = two_part_bundle(23, PFT_GSTAT_TIED, PFT_DTYPE_F16, 2);
    CHECK(pft_bundle_set_shared_rank(b, 1) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    int failures = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = pft_alloc(n);
        memcpy(copy, buf, n);
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(copy, n, NULL, &o) == 0 || o != NULL)
            failures++;
        pft_free(copy);
        pft_bundle_destroy(&o);
    }
    CHECK_MSG(failures == 0, "%d prefixes decoded", failures);
    int accepted, rejected, bad;
    pft_test_bit_flips(buf, len, &accepted, &rejected, &bad);
    CHECK(bad == 0 && rejected > 0);
    printf("  tied rank 1: %zu prefixes rejected; %zu bit flips: %d rejected, %d decoded to valid bundles\n",
           len, len * 8, rejected, accepted);
    int dec_at = -1, enc_at = -1;
    for (long n = 0; n < 400 && dec_at < 0; n++) {
        pft_alloc_fail_after(n);
        pft_bundle_t *o = NULL;
        int rc = pft_bundle_decode(buf, len, NULL, &o);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc < 0 && o == NULL));
        if (rc == 0)
            dec_at = (int)n;
        pft_bundle_destroy(&o);
    }
    for (long n = 0; n < 400 && enc_at < 0; n++) {
        uint8_t *m = NULL;
        size_t l = 0;
        pft_alloc_fail_after(n);
        int rc = pft_bundle_encode(b, &m, &l);
        pft_alloc_fail_after(-1);
        CHECK(rc == 0 || (rc == PFT_ENOMEM && m == NULL));
        if (rc == 0) {
            enc_at = (int)n;
            CHECK(l == len && memcmp(m, buf, len) == 0);
        }
        pft_free(m);
    }
    CHECK(dec_at > 0 && enc_at > 0);
    pft_free(buf);
    pft_bundle_destroy(&b);
}

int main(void)
{
    RUN(test_lowrank);
    RUN(test_rank_caps);
    RUN(test_part_release);
    RUN(test_take_part_scatter);
    RUN(test_lowrank_hand_built);
    RUN(test_lowrank_hostile);
    return pft_test_done();
}
