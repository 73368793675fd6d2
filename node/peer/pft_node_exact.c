/* pft_node_exact: the knowledge method `exact` (DESIGN.md §8): a node merges its own rows' statistics with
 * the received parts, each contributor counted once, and sends one part per group of the plan; the head's
 * input is the merge of everything it holds (or, for a rows head, rows drawn from its class Gaussians). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_ghead.h"
#include "pft_gstat_lowrank.h"
#include "pft_linalg.h"
#include "pft_log.h"

#include <string.h>

/* The statistics the inbox kept decoded for slot s (a bundle its stage uses alone: pft_node_inbox.c), taken
 * out of it: the slot keeps the provenance (s->light), the caller owns what is returned. NULL: none kept (s
 * light, not statistics, or no memory for the provenance: then s->bundle serves as it is). */
static pft_bundle_t *kept_decoded(node_t *nd, inbound_t *s)
{
    if (s->light || !s->bundle || !pft_bundle_is_stats(s->bundle))
        return NULL;
    pft_bundle_t *light = pft_node__provenance_only(nd, s->bundle), *full = s->bundle;
    if (!light)
        return NULL;
    s->bundle = light;
    s->light = 1;
    return full;
}

/* What a relay's hop keeps of the one part it received (DESIGN.md §8, "The relay's hop"): the part's classes
 * and the release it travelled as (its scatter is n·(U Uᵀ + diag ψ)), copied before the part is merged, for
 * the held-out evidence (pft_ghead_evidence_heldout) and the release of the merged W in the span
 * (pft_gstat_lowrank_shared_span). ok: exactly one received part, clear, tied, in low-rank form, without this
 * node among its contributors. */
typedef struct {
    int ok, parts;
    uint64_t n;
    pft_ghead_lowrank_t r;
    int32_t *label;
    uint64_t *count;
    double *mean, *U, *psi;
} hop_recv_t;

static void hop_recv_free(hop_recv_t *h)
{
    PFT_FREE(h->label);
    PFT_FREE(h->count);
    PFT_FREE(h->mean);
    PFT_FREE(h->U);
    PFT_FREE(h->psi);
    h->ok = 0;
}

/* Part i of received bundle b copied into h when it is of the form the hop uses (else h->ok stays 0). 0, or
 * PFT_ENOMEM. */
static int hop_recv_copy(const node_t *nd, const pft_bundle_t *b, int i, hop_recv_t *h)
{
    const pft_gstat_t *st = pft_bundle_part_stats(b, i);
    int q = 0, d = pft_bundle_dim(b);
    const double *U = st ? pft_bundle_part_factor(b, i, &q) : NULL, *psi = pft_bundle_part_factor_psi(b, i);
    if (!U || !psi || pft_gstat_kind(st) != PFT_GSTAT_TIED)
        return 0;
    for (int j = 0; j < pft_bundle_part_n_contributors(b, i); j++)
        if (strcmp(pft_bundle_part_contributor(b, i, j), nd->me->id) == 0)
            return 0;
    int S = pft_gstat_n_classes(st);
    h->label = pft_alloc_array((size_t)S + 1, sizeof *h->label);
    h->count = pft_alloc_array((size_t)S + 1, sizeof *h->count);
    h->mean = pft_alloc_array((size_t)S * d + 1, sizeof *h->mean);
    h->U = pft_alloc_array((size_t)d * q + 1, sizeof *h->U);
    h->psi = pft_alloc_array((size_t)d, sizeof *h->psi);
    if (!h->label || !h->count || !h->mean || !h->U || !h->psi) {
        hop_recv_free(h);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (int c = 0; c < S; c++) {
        h->label[c] = pft_gstat_label(st, c);
        h->count[c] = pft_gstat_count(st, c);
        memcpy(h->mean + (size_t)c * d, pft_gstat_mean(st, c), (size_t)d * sizeof *h->mean);
    }
    memcpy(h->U, U, (size_t)d * q * sizeof *h->U);
    memcpy(h->psi, psi, (size_t)d * sizeof *h->psi);
    h->n = pft_gstat_total(st);
    h->r = (pft_ghead_lowrank_t){.d = d,
                                 .S = S,
                                 .q = q,
                                 .label = h->label,
                                 .count = h->count,
                                 .mean = h->mean,
                                 .U = h->U,
                                 .psi = h->psi};
    h->ok = 1;
    return 0;
}

/* The parts of b counted into h (NULL: none kept): the one part's copy, or none once there are two. */
static int hop_recv_see(const node_t *nd, const pft_bundle_t *b, hop_recv_t *h)
{
    if (!h || !pft_bundle_is_stats(b))
        return 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < pft_bundle_n_parts(b); i++) {
        hop_recv_free(h);
        rc = ++h->parts == 1 && !pft_bundle_part_is_masked(b, i) ? hop_recv_copy(nd, b, i, h) : 0;
    }
    return rc;
}

/* Takes the parts of received bundle s: its statistics from full (owned: kept_decoded's), else decoded again
 * from the stored bytes when the inbox kept only its provenance (s->light), folded into the group
 * accumulators, and freed. complete: s is a complete bundle, used for the head only (its contributors need
 * not reach this node along lap 1). */
static int take_received(node_t *nd, parts_t *ps, const inbound_t *s, pft_bundle_t *full, int complete,
                         hop_recv_t *hop)
{
    if (!full && s->light) {
        pft_bundle_limits_t lim;
        pft_node__limits(nd, &lim);
        int rc = pft_bundle_decode(s->bytes, s->len, &lim, &full);
        if (rc != 0)
            return pft_err_wrap(rc, "decoding the bundle from %s again", s->from);
        pft_info("the bundle from %s decoded again from its %zu bytes (kept light until used)", s->from,
                 s->len);
    }
    /* provenance is read from the kept (light) bundle, which outlives this call */
    int rc = hop_recv_see(nd, full ? full : s->bundle, hop);
    if (rc == 0)
        rc = pft_node__parts_take_bundle(nd, ps, full ? full : s->bundle, full, s->bundle);
    if (rc == 0)
        rc = pft_node__parts_fold(nd, ps, complete);
    pft_bundle_destroy(&full);
    return rc;
}

/* A softmax head on exact statistics (head = logreg): its rows are the node's own (weight 1), and per class
 * draws from the Gaussian N(μ_c, Σ) of the statistics standing for the class's rows beyond the node's own
 * (Σ = W/N for tied statistics, M_c/n_c for full ones, reg_covar added): head_draws per row up to mc_budget,
 * each weighted, as the sampling path does (pft_node__mc_draws). Fills nd->head.rows and the row counters;
 * the statistics are freed. */
static int logreg_rows(node_t *nd)
{
    const pft_gstat_t *st = nd->head.stats;
    int d = pft_gstat_dim(st), f = nd->run->head_draws, rc = 0;
    size_t dd = (size_t)d * d;
    double N = (double)pft_gstat_total(st), one = 1.0;
    double *cov = pft_alloc_array(dd, sizeof *cov);
    float *xc = NULL;
    nd->tally.n_real = nd->tally.n_synthetic = 0;
    if (!cov)
        return pft_err(PFT_ENOMEM, "out of memory for a %d×%d covariance", d, d);
    for (int c = 0; rc == 0 && c < nd->n_classes; c++) {
        int n_own = 0;
        if (c < pft_dataset_n_classes(nd->train) &&
            (rc = pft_dataset_gather_class(nd->train, c, &xc, &n_own)))
            break;
        rc = pft_node__rows_append(&nd->head.rows, xc, n_own, c, 1.0);
        PFT_FREE(xc);
        nd->tally.n_real += n_own;
        int i = pft_gstat_find(st, c);
        uint64_t n_c = i >= 0 ? pft_gstat_count(st, i) : 0;
        uint64_t m = n_c > (uint64_t)n_own ? n_c - (uint64_t)n_own : 0;
        if (rc || m == 0)
            continue;
        int take = 0;
        if ((rc = pft_node__mc_draws(nd, f, &m, 1, &take)))
            break;
        const double *S =
            pft_gstat_kind(st) == PFT_GSTAT_TIED ? pft_gstat_tied_scatter(st) : pft_gstat_scatter(st, i);
        double div = pft_gstat_kind(st) == PFT_GSTAT_TIED ? N : (double)n_c;
        for (size_t k = 0; k < dd; k++)
            cov[k] = S[k] / div;
        for (int j = 0; j < d; j++)
            cov[(size_t)j * d + j] += nd->run->reg_covar;
        pft_gmm_t *g = pft_gmm_new(1, d, PFT_COV_FULL);
        pft_rng_t *rng = pft_rng_new(pft_rng_derive(nd->run->seed, 0x6c6f67ULL ^ nd->my_index, (uint64_t)c));
        rc = g && rng ? pft_gmm_set_params(g, &one, pft_gstat_mean(st, i), cov) : PFT_ENOMEM;
        if (rc == 0)
            rc = pft_node__rows_sample(&nd->head.rows, g, rng, take, c, (double)m / take);
        if (rc == 0) {
            nd->tally.n_synthetic += (int)m;
        } else {
            pft_err_wrap(rc, "drawing the head's rows of class %d from its Gaussian", c);
        }
        pft_gmm_destroy(&g);
        pft_rng_destroy(&rng);
    }
    pft_free(cov);
    pft_gstat_destroy(&nd->head.stats);
    return rc;
}

/* Per class, the rows of the taken parts that travel in this node's own group (merged with its own rows).
 * NULL if out of memory. */
static uint64_t *own_group_rows(node_t *nd, const parts_t *ps)
{
    uint64_t *rows = pft_calloc((size_t)nd->n_classes + 1, sizeof *rows);
    long g = ps->grp[nd->my_index];
    for (int i = -1; rows && i < ps->n; i++) {
        const pft_gstat_t *s = i < 0 ? ps->acc[g] : ps->p[i].merged ? NULL : pft_node__parts_stats(&ps->p[i]);
        if (!s || (i >= 0 && ps->grp[ps->p[i].who[0]] != g))
            continue;
        for (int k = 0; k < pft_gstat_n_classes(s); k++)
            if (pft_gstat_label(s, k) < nd->n_classes)
                rows[pft_gstat_label(s, k)] += pft_gstat_count(s, k);
    }
    return rows;
}

/* The statistics the evidence scores against (of: the head's, or tmp when made for the purpose), the parts of
 * the outbound bundle that equal them bit for bit (same[i]; checked before the evidence lends of's scatter),
 * and the tridiagonal reduction of their W it was computed in (t.a NULL: none), kept for a release of the
 * same W and then given back to of. */
typedef struct {
    pft_gstat_t *of;
    pft_gstat_t *tmp;
    pft_la_trid_t t;
    char *same;
    int late;       /* of made after the outbound part's release, from its W (late_statistics) */
    int late_final; /* late: of becomes the head's statistics (a final stage), else tmp */
    int released;   /* late: part 0's release is set, its W gone into of */
    int heldout;    /* a relay's hop (hop_recv_t): held-out evidence, the release in the span, no reduction */
    const hop_recv_t *hop;
} reduced_t;

static void reduced_free(reduced_t *r)
{
    if (r->t.a && r->of) /* an error between the evidence and the release: of's scatter back first */
        pft_ghead_evidence_give_back(r->of, &r->t);
    pft_la_trid_free(&r->t);
    pft_gstat_destroy(&r->tmp);
    PFT_FREE(r->same);
    r->of = NULL;
}

/* What this node's shrinkage evidence scores against: everything it holds (the head's statistics when final,
 * else their merge made for the purpose, before the outbound parts take the accumulators). */
static int evidence_input(node_t *nd, parts_t *ps, int final, reduced_t *red)
{
    if (red->late)
        return 0; /* made by late_statistics */
    int rc = final || !nd->head_ops->wants_stats ? 0 : pft_node__parts_total_take(nd, ps, &red->tmp);
    red->of = final ? nd->head.stats : red->tmp;
    return rc;
}

/* Where what the head holds is the outbound part plus own rows the floor withheld (pft_node__parts_rows_
 * apart, red->late): the part's release first, computed in its own W and W given back as it was
 * (pft_gstat_lowrank_shared_scatter_keep: the encoder's numbers), then that W with the part's classes plus
 * the withheld rows are the statistics the evidence scores against (the head's, when final): one d×d scatter
 * at a time instead of the part's and the head's copy of it. A part sent dense (or at rank 0) keeps its W:
 * the statistics are then a merge of it plus the rows, as pft_node__parts_total makes them. */
static int late_statistics(node_t *nd, pft_bundle_t *b, reduced_t *red)
{
    int n = pft_bundle_n_parts(b), d = pft_bundle_dim(b), rc = 0;
    if (n > 1)
        return pft_err(PFT_EINVAL, "the outbound bundle holds %d parts where the plan made one", n);
    const pft_gstat_t *st = n == 1 ? pft_bundle_part_stats(b, 0) : NULL;
    int q = st ? pft_bundle_part_sent_rank(b, 0) : 0;
    pft_gstat_t *of = NULL;
    double *w = NULL, *u = NULL, *psi = NULL;
    if (st && q >= 1 && pft_gstat_kind(st) == PFT_GSTAT_TIED && pft_gstat_tied_scatter(st)) {
        u = pft_alloc_array((size_t)d * q, sizeof *u);
        psi = pft_alloc_array((size_t)d, sizeof *psi);
        rc = u && psi ? pft_bundle_take_part_scatter(b, 0, &w)
                      : pft_err(PFT_ENOMEM, "out of memory for a release of rank %d", q);
        if (rc == 0)
            rc = pft_gstat_lowrank_shared_scatter_keep(w, d, (double)pft_gstat_total(st), q, u, psi);
        if (rc == 0)
            rc = pft_bundle_set_part_release(b, 0, u, psi, q);
        if (rc == 0)
            rc = pft_gstat_classes_with(st, &w, &of);
        red->released = rc == 0;
        if (rc == 0)
            pft_debug("release: part 0 at rank %d in its own scatter, which the head's statistics then take",
                      q);
        else if (w) /* the part's W back: the encoder would need it */
            pft_bundle_give_part_scatter(b, 0, &w);
    } else {
        of = pft_gstat_new(pft_node__parts_kind(nd), pft_dataset_d(nd->train));
        rc = !of ? pft_err(PFT_ENOMEM, "out of memory") : st ? pft_gstat_merge(of, st) : 0;
    }
    if (rc == 0)
        rc = pft_node__parts_add_withheld(nd, of);
    pft_free(w);
    pft_free(u);
    pft_free(psi);
    if (rc) {
        pft_gstat_destroy(&of);
        return pft_err_wrap(rc, "the statistics of the head");
    }
    if (red->late_final) {
        pft_gstat_destroy(&nd->head.stats);
        nd->head.stats = of;
    } else {
        red->tmp = of;
    }
    red->of = of;
    return 0;
}

/* red->same: which clear tied parts of b are, bit for bit, the statistics the evidence scores against (a
 * chain's relay sends all it holds as one part); a part without W is one whose W those statistics took
 * (pft_node__parts_total_take): its classes equal theirs. */
static int same_parts(const pft_bundle_t *b, reduced_t *red)
{
    int n = pft_bundle_n_parts(b);
    red->same = pft_calloc((size_t)n + 1, 1);
    if (!red->same)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; red->of && !red->late && i < n; i++) { /* late: of holds rows no part holds */
        const pft_gstat_t *st = pft_bundle_part_stats(b, i);
        red->same[i] =
            st && pft_gstat_kind(st) == PFT_GSTAT_TIED &&
            (pft_gstat_tied_scatter(st) ? pft_gstat_equal(st, red->of) : pft_gstat_same_classes(st, red->of));
    }
    return 0;
}

/* Each part of b equal to the evidence's statistics (red->same) that sends eigenpairs gives up its scatter W:
 * the evidence's statistics hold the same W bit for bit, and the part's release is computed from theirs
 * (release_from_evidence). A relay then holds one d×d scatter, not two, while its evidence runs. */
static int hand_over_same(pft_bundle_t *b, const reduced_t *red)
{
    int rc = 0;
    for (int i = 0; rc == 0 && red->of && i < pft_bundle_n_parts(b); i++) {
        if (!red->same[i] || pft_bundle_part_sent_rank(b, i) < 1 ||
            !pft_gstat_tied_scatter(pft_bundle_part_stats(b, i)))
            continue;
        double *w = NULL;
        rc = pft_bundle_take_part_scatter(b, i, &w);
        pft_free(w);
    }
    return rc;
}

/* The rows spanning everything in the merged W of `of` but the received diagonal (n_r·ψ_r): the received
 * factor's columns, the received and merged class means, the own rows (r×d into *S; NULL when r ≥ d). */
static int span_rows(const node_t *nd, const reduced_t *red, const pft_gstat_t *of, double **S, int *r)
{
    const hop_recv_t *h = red->hop;
    int d = h->r.d, q = h->r.q, C = pft_gstat_n_classes(of), n = pft_dataset_n(nd->train);
    *S = NULL;
    *r = q + h->r.S + C + n;
    if (*r >= d)
        return 0;
    double *s = pft_alloc_array((size_t)*r * d, sizeof *s), *o = s;
    if (!s)
        return pft_err(PFT_ENOMEM, "out of memory for a span of %d vectors", *r);
    for (int k = 0; k < q; k++, o += d)
        for (int j = 0; j < d; j++)
            o[j] = h->r.U[(size_t)j * q + k];
    memcpy(o, h->r.mean, (size_t)h->r.S * d * sizeof *o);
    o += (size_t)h->r.S * d;
    for (int c = 0; c < C; c++, o += d)
        memcpy(o, pft_gstat_mean(of, c), (size_t)d * sizeof *o);
    const float *x = pft_dataset_x(nd->train);
    for (size_t i = 0; i < (size_t)n * d; i++)
        o[i] = x[i];
    *S = s;
    return 0;
}

/* The terms of the merged W beside the received diagonal, as the merge added them (pft_gstat_merge): the
 * received factor's columns (weight n_r), the own rows about their class means (weight 1) and, per class
 * both hold, the difference of the two parts' means (weight n_r,c·n_o,c / n_c): r×d into *F, weights into *w.
 * The own part's mean is the one it was merged with, read from the merged statistics `of` (μ̃_o − μ_r =
 * n_c (μ_c − μ_r) / n_o,c): under mean_noise it is the noised mean, while its scatter, and so the own rows'
 * term, is about the rows' own mean. */
static int factor_rows(const node_t *nd, const hop_recv_t *h, const pft_gstat_t *of, double **F, double **w,
                       int *r)
{
    int d = h->r.d, q = h->r.q, n = pft_dataset_n(nd->train), C = nd->n_classes, rc = 0;
    const float *x = pft_dataset_x(nd->train);
    const int32_t *y = pft_dataset_y(nd->train);
    double *mu = pft_calloc((size_t)C * d + 1, sizeof *mu), *cnt = pft_calloc((size_t)C + 1, sizeof *cnt);
    *F = pft_alloc_array((size_t)(q + n + h->r.S) * d + 1, sizeof **F);
    *w = pft_alloc_array((size_t)(q + n + h->r.S) + 1, sizeof **w);
    if (!mu || !cnt || !*F || !*w)
        rc = pft_err(PFT_ENOMEM, "out of memory for the release's terms");
    for (int i = 0; rc == 0 && i < n; i++) {
        if (y[i] < 0 || y[i] >= C)
            rc = pft_err(PFT_EINVAL, "own row %d: label %d outside 0..%d", i, (int)y[i], C - 1);
        for (int j = 0; rc == 0 && j < d; j++)
            mu[(size_t)y[i] * d + j] += x[(size_t)i * d + j];
        cnt[rc == 0 ? y[i] : 0] += rc == 0;
    }
    for (int c = 0; rc == 0 && c < C; c++)
        for (int j = 0; cnt[c] > 0 && j < d; j++)
            mu[(size_t)c * d + j] /= cnt[c];
    int m = 0;
    double *o = rc == 0 ? *F : NULL;
    for (int k = 0; o && k < q; k++, o += d) {
        for (int j = 0; j < d; j++)
            o[j] = h->r.U[(size_t)j * q + k];
        (*w)[m++] = (double)h->n;
    }
    for (int i = 0; o && i < n; i++, o += d) {
        for (int j = 0; j < d; j++)
            o[j] = x[(size_t)i * d + j] - mu[(size_t)y[i] * d + j];
        (*w)[m++] = 1.0;
    }
    for (int c = 0; o && c < h->r.S; c++) {
        int l = h->r.label[c], i = pft_gstat_find(of, l);
        double nr = (double)h->r.count[c], no = l < C ? cnt[l] : 0;
        if (no == 0 || i < 0)
            continue;
        const double *mc = pft_gstat_mean(of, i), *mr = h->r.mean + (size_t)c * d;
        double k = (double)pft_gstat_count(of, i) / no;
        for (int j = 0; j < d; j++)
            o[j] = k * (mc[j] - mr[j]);
        (*w)[m++] = nr * no / (nr + no);
        o += d;
    }
    *r = m;
    pft_free(mu);
    pft_free(cnt);
    if (rc) {
        PFT_FREE(*F);
        PFT_FREE(*w);
    }
    return rc;
}

/* A relay's release of W / n, W the merged scatter of `of` (the evidence's statistics, or the outbound part
 * where mean_noise made its means differ from them), from the terms the merge added
 * (pft_gstat_lowrank_shared_factor), else in the span of what it received and holds
 * (pft_gstat_lowrank_shared_span), else (neither holds W less the received diagonal, or the span is not
 * smaller than d) as the encoder would. */
static int release_in_span(const node_t *nd, const reduced_t *red, const pft_gstat_t *of, const double *W,
                           int d, double n, int qe, double *u, double *psi)
{
    double *S = NULL, *F = NULL, *fw = NULL, *dg = pft_alloc_array((size_t)d, sizeof *dg);
    int r = 0, rc = dg ? factor_rows(nd, red->hop, of, &F, &fw, &r) : pft_err(PFT_ENOMEM, "out of memory");
    for (int j = 0; rc == 0 && j < d; j++)
        dg[j] = (double)red->hop->n * red->hop->r.psi[j];
    if (rc == 0 && (rc = pft_gstat_lowrank_shared_factor(W, dg, d, n, F, fw, r, qe, u, psi)) == 0)
        pft_info("release: rank %d from the %d terms of the merge (received factor, own rows, means)", qe, r);
    if (rc == 1 && (rc = span_rows(nd, red, of, &S, &r)) == 0)
        rc = S ? pft_gstat_lowrank_shared_span(W, dg, d, n, S, r, qe, u, psi) : 1;
    if (rc == 0 && S)
        pft_debug("release: rank %d in the span of %d vectors (received factor, means, own rows)", qe, r);
    if (rc == 1) {
        pft_info("release: the merged scatter is not the received release plus a span of %d vectors; "
                 "reduced whole",
                 r);
        rc = pft_gstat_lowrank_shared_scatter(W, d, n, qe, u, psi);
    }
    pft_free(S);
    pft_free(F);
    pft_free(fw);
    pft_free(dg);
    return rc;
}

/* The release of every part of b that equals the evidence's statistics (red->same): its leading eigenpairs
 * from the evidence's reduction (pft_gstat_lowrank_shared_trid), so that the encoder does not reduce the same
 * W again; where the evidence made no reduction (it used W's eigenbasis), from the statistics' W as the
 * encoder computes it (pft_gstat_lowrank_shared_scatter: the same numbers). */
static int release_from_evidence(const node_t *nd, pft_bundle_t *b, const reduced_t *red)
{
    int d = pft_bundle_dim(b), rc = 0;
    for (int i = 0; rc == 0 && i < pft_bundle_n_parts(b); i++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, i);
        int qe = pft_bundle_part_sent_rank(b, i);
        if (!red->same[i] || qe < 1)
            continue;
        double n = (double)pft_gstat_total(st);
        double *u = pft_alloc_array((size_t)d * qe, sizeof *u),
               *psi = pft_alloc_array((size_t)d, sizeof *psi);
        rc = u && psi ? 0 : pft_err(PFT_ENOMEM, "out of memory for a release of rank %d", qe);
        if (rc == 0 && red->t.a) /* red->t.diag: W's diagonal (the part's, which equals it) */
            rc = pft_gstat_lowrank_shared_trid(&red->t, red->t.diag, n, qe, u, psi);
        else if (rc == 0 && red->heldout)
            rc = release_in_span(nd, red, red->of, pft_gstat_tied_scatter(red->of), d, n, qe, u, psi);
        else if (rc == 0) /* as the encoder would (the same numbers) */
            rc = pft_gstat_lowrank_shared_scatter(pft_gstat_tied_scatter(red->of), d, n, qe, u, psi);
        if (rc == 0)
            rc = pft_bundle_set_part_release(b, i, u, psi, qe);
        if (rc == 0)
            pft_debug("release: part %d at rank %d from the evidence's %s", i, qe,
                      red->t.a       ? "tridiagonal reduction"
                      : red->heldout ? "span"
                                     : "statistics");
        pft_free(u);
        pft_free(psi);
    }
    return rc;
}

/* A part of b without W (its W taken by the evidence's statistics: pft_node__parts_total_take) that the
 * evidence's release did not serve (a rank of 0 or a dense form: the encoder computes them from W) gets a
 * copy of those statistics' W, which equals it. */
static int scatter_back(pft_bundle_t *b, const reduced_t *red)
{
    int rc = 0;
    size_t dd = (size_t)pft_bundle_dim(b) * pft_bundle_dim(b);
    for (int i = 0; rc == 0 && i < pft_bundle_n_parts(b); i++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, i);
        if (!st || pft_gstat_kind(st) != PFT_GSTAT_TIED || pft_gstat_tied_scatter(st) ||
            (red->same[i] && pft_bundle_part_sent_rank(b, i) >= 1) || (i == 0 && red->released))
            continue;
        const double *w = red->of ? pft_gstat_tied_scatter(red->of) : NULL;
        double *c = w && red->same[i] ? pft_alloc_array(dd, sizeof *c) : NULL;
        if (!w || !red->same[i])
            rc = pft_err(PFT_EINVAL, "part %d of the outbound bundle lost its scatter", i);
        else if (!c)
            rc = pft_err(PFT_ENOMEM, "out of memory");
        if (rc == 0) {
            memcpy(c, w, dd * sizeof *c);
            rc = pft_bundle_give_part_scatter(b, i, &c);
        }
        pft_free(c);
    }
    return rc;
}

/* Every clear tied part of b that the evidence's release did not serve (not equal to the evidence's
 * statistics: a floor kept the own part apart, parts travel apart, mean_noise moved the own means) and that
 * sends eigenpairs gives up its scatter W, and its release is computed in W's own storage
 * (pft_gstat_lowrank_shared_scatter_inplace: the numbers the encoder would compute in a copy of W); a relay's
 * hop (red->heldout: the one part is the received release merged with the own rows) from the merge's terms
 * instead (release_in_span). One d×d fewer while the bundle is encoded; b's W is not read again. */
static int release_in_place(const node_t *nd, pft_bundle_t *b, const reduced_t *red)
{
    int d = pft_bundle_dim(b), rc = 0;
    for (int i = 0; rc == 0 && i < pft_bundle_n_parts(b); i++) {
        const pft_gstat_t *st = pft_bundle_part_stats(b, i);
        int qe = pft_bundle_part_sent_rank(b, i);
        if (red->same[i] || qe < 1 || !st || pft_gstat_kind(st) != PFT_GSTAT_TIED ||
            !pft_gstat_tied_scatter(st))
            continue;
        double n = (double)pft_gstat_total(st), *w = NULL;
        double *u = pft_alloc_array((size_t)d * qe, sizeof *u),
               *psi = pft_alloc_array((size_t)d, sizeof *psi);
        rc = u && psi ? 0 : pft_err(PFT_ENOMEM, "out of memory for a release of rank %d", qe);
        if (rc == 0)
            rc = pft_bundle_take_part_scatter(b, i, &w);
        if (rc == 0 && red->heldout && pft_bundle_n_parts(b) == 1)
            rc = release_in_span(nd, red, st, w, d, n, qe, u, psi);
        else if (rc == 0)
            rc = pft_gstat_lowrank_shared_scatter_inplace(w, d, n, qe, u, psi);
        if (rc == 0)
            rc = pft_bundle_set_part_release(b, i, u, psi, qe);
        if (rc == 0)
            pft_debug("release: part %d at rank %d in its own scatter", i, qe);
        pft_free(w);
        pft_free(u);
        pft_free(psi);
    }
    return rc;
}

/* Merge: every received part of the stage taken and folded into its group (b records the bundles as
 * parents); the opener of a masked group opens its sum, in the clear. */
static int merge(node_t *nd, const pft_stage_t *st, parts_t *ps, pft_bundle_t *b, hop_recv_t *hop)
{
    inbound_t **recv = pft_calloc(st->n_recv + 1, sizeof *recv);
    int rc = recv ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    size_t nr = rc == 0 ? pft_node__inbox_stage_bundles(nd, st, recv) : 0;
    for (size_t r = 0; rc == 0 && r < nr; r++) {
        rc = take_received(nd, ps, recv[r], kept_decoded(nd, recv[r]), 0, hop);
        if (rc == 0)
            rc = pft_bundle_add_parent(b, recv[r]->id);
    }
    pft_free(recv);
    if (rc == 0 && ps->covered[nd->my_index])
        rc = pft_err(PFT_EINVAL, "a received part already counts this node's own rows");
    return rc ? rc : pft_node__secagg_open(nd, ps);
}

/* Own rows into ps through the release steps (floor, noise, mask as this node's table says). */
static int own_part(node_t *nd, parts_t *ps)
{
    uint64_t *merged = own_group_rows(nd, ps);
    int rc = merged ? pft_node__step_own(nd, ps, merged) : pft_err(PFT_ENOMEM, "out of memory");
    pft_free(merged);
    return rc;
}

/* A final stage's head statistics (everything held, own rows exactly), checked against the plan's view, and
 * its noisy components; before the outbound parts take the accumulators (no copy of them); late: made by
 * late_statistics instead. */
static int head_input(node_t *nd, parts_t *ps, int late)
{
    pft_gstat_destroy(&nd->head.stats);
    int rc = late ? 0 : pft_node__parts_total_take(nd, ps, &nd->head.stats);
    nd->head.has_own = 1;
    if (rc == 0)
        rc = pft_node__secagg_check_view(nd, ps);
    return rc ? rc : pft_node__parts_noisy(nd, ps, NULL);
}

/* The outbound bundle b: one part per group, the release steps on it; then this node's evidence, computed in
 * the evidence statistics' own scatter, which a part equal to them releases from before it is given back;
 * the evidence in b's provenance, the complete flag. */
static int outbound(node_t *nd, parts_t *ps, pft_bundle_t *b, int complete, reduced_t *red)
{
    int rc = pft_node__parts_add_groups(nd, ps, b, 1);
    if (rc == 0)
        rc = pft_node__step_bundle(nd, b);
    if (rc == 0 && red->late)
        rc = late_statistics(nd, b, red);
    if (rc == 0)
        rc = same_parts(b, red);
    if (rc == 0)
        rc = hand_over_same(b, red);
    if (rc == 0 && red->of)
        rc = red->heldout ? pft_node__evidence_own_heldout(nd, &red->hop->r, red->hop->n)
                          : pft_node__evidence_own_keep(nd, red->of, &red->t);
    if (rc == 0)
        rc = release_from_evidence(nd, b, red);
    if (rc == 0 && red->t.a)
        rc = pft_ghead_evidence_give_back(red->of, &red->t);
    if (rc == 0)
        rc = scatter_back(b, red);
    if (rc == 0)
        rc = release_in_place(nd, b, red);
    for (int i = 0; rc == 0 && i < pft_bundle_prov_n_nodes(b); i++)
        if (strcmp(pft_bundle_prov_node(b, i), nd->me->id) == 0)
            rc = pft_node__evidence_set(nd, b, nd->me->id);
    return rc == 0 && complete ? pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE) : rc;
}

/* merge → own part (release steps; folded into its group where it can be) → [final: head statistics] →
 * outbound bundle (release steps on it) with own evidence (it travels); a final stage then gathers every
 * contributor's evidence and its noise record. */
static int refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out)
{
    pft_node__set_status(nd, "merging", NULL);
    double t0 = pft_fsio_now();
    parts_t ps;
    int rc = pft_node__parts_init(nd, &ps);
    pft_dtype_t dt = nd->run->stats_dtype == PFT_TOPO_FP16 ? PFT_DTYPE_F16 : PFT_DTYPE_F32;
    pft_bundle_t *b = pft_bundle_new(nd->run->run, nd->me->id, dt, pft_dataset_d(nd->train));
    if (rc == 0 && !b)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    hop_recv_t hop = {0};
    if (rc == 0)
        rc = merge(nd, st, &ps, b, &hop);
    if (rc == 0)
        rc = own_part(nd, &ps);
    if (rc == 0)
        rc = pft_node__parts_fold_own(nd, &ps);
    reduced_t red = {0};
    if (rc == 0) { /* the head's statistics after the outbound part's release, from its W */
        red.late = (st->final || nd->head_ops->wants_stats) && pft_node__parts_rows_apart(nd, &ps);
        red.late_final = st->final;
        red.heldout = hop.ok && st->n_send > 0 && !red.late;
        red.hop = &hop;
    }
    if (rc == 0 && st->final)
        rc = head_input(nd, &ps, red.late);
    if (rc == 0)
        rc = evidence_input(nd, &ps, st->final, &red);
    if (rc == 0)
        rc = outbound(nd, &ps, b, complete, &red);
    reduced_free(&red);
    hop_recv_free(&hop);
    if (rc == 0 && st->final)
        rc = pft_node__evidence_gather(nd, b);
    if (rc == 0 && st->final)
        pft_node__noise_json(nd, &ps);
    if (rc == 0) {
        nd->tally.n_real = pft_dataset_n(nd->train);
        nd->tally.n_synthetic = 0; /* a rows head's draws: after the send (after_send) */
        nd->tally.em_seconds += pft_fsio_now() - t0;
        pft_info("merged own statistics with %d received part(s) into %d part(s) in %.2fs",
                 ps.n - (nd->tally.n_real > 0), pft_bundle_n_parts(b), pft_fsio_now() - t0);
        nd->tally.em_fits++;
        pft_node__floor_released(&nd->know.floor, b);
        *out = b;
        b = NULL;
    }
    pft_node__parts_free(&ps);
    pft_bundle_destroy(&b);
    return rc;
}

static int adopt(node_t *nd, const inbound_t *s)
{
    parts_t ps;
    int rc = pft_node__parts_init(nd, &ps);
    if (rc == 0 && s->bundle)
        rc = take_received(nd, &ps, s, NULL, 1, NULL);
    nd->head.has_own = ps.covered && ps.covered[nd->my_index];
    if (rc == 0 && !nd->head.has_own) /* no complete bundle, or one without this node: add own rows */
        rc = pft_node__step_exact(nd, &ps);
    nd->head.has_own = 1;
    if (rc == 0) {
        pft_gstat_destroy(&nd->head.stats);
        rc = pft_node__parts_total(nd, &ps, &nd->head.stats);
    }
    int own_inside = 0;
    if (rc == 0)
        rc = pft_node__secagg_check_view(nd, &ps);
    if (rc == 0)
        rc = pft_node__parts_noisy(nd, &ps, &own_inside);
    if (rc == 0 &&
        own_inside) /* own rows were inside a noisy part, taken out of it: the head has them exactly */
        rc = pft_gstat_add_rows(nd->head.stats, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                                (size_t)pft_dataset_n(nd->train));
    if (rc == 0 && !(ps.covered && ps.covered[nd->my_index])) /* own rows added here: their evidence too */
        rc = pft_node__evidence_own(nd, nd->head.stats);
    if (rc == 0)
        rc = pft_node__evidence_gather(nd, s->bundle);
    if (rc == 0)
        pft_node__noise_json(nd, &ps);
    nd->tally.n_real = pft_dataset_n(nd->train);
    if (rc == 0 && !nd->head_ops->wants_stats)
        rc = logreg_rows(nd);
    pft_node__parts_free(&ps);
    return rc;
}

/* A final refit's rows head, after the send: its rows drawn from the head's statistics (nothing sent holds
 * them). */
static int after_send(node_t *nd)
{
    if (nd->head_ops->wants_stats)
        return 0;
    double t0 = pft_fsio_now();
    int rc = logreg_rows(nd);
    nd->tally.n_real = pft_dataset_n(nd->train);
    nd->tally.em_seconds += pft_fsio_now() - t0;
    return rc;
}

const pft_node_method_t pft_node__method_exact = {
    .name = "exact",
    .refit = refit,
    .adopt = adopt,
    .after_send = after_send,
};
