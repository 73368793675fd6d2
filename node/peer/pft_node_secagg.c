/* pft_node_secagg: secure aggregation in the peer (docs/SECAGG.md): the plan of who masks and who opens, this
 * node's own statistics masked in fixed point with its group's pairwise masks, and a group's masked sum
 * opened by its opener into exact statistics that the exact method then merges like any clear part. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fixed.h"
#include "pft_gstat_dp.h"
#include "pft_rng.h"
#include "pft_log.h"
#include "pft_mask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decode bound of a contribution of `rows` unit-norm rows: every entry of its class sums and of its
 * release-rule matrix R is at most rows·(1 + 1/d) ≤ 2·rows in absolute value (docs/SECAGG.md §2, §6: R's
 * diagonal is Σ x_j² ≤ rows with the diagonal kept exactly, at most rows/d more when it is isotropic). */
static double contribution_limit(uint64_t rows, double noise_sd)
{
    return pft_fixed_limit(2 * rows, noise_sd);
}

/* The group's label, opener and members from the plan (every plan of pft_secplan has one group). */
static int find_group(node_t *nd)
{
    const pft_secplan_t *pl = nd->sec.plan;
    if (pft_secplan_group_count(pl) == 0)
        return 0;
    const pft_secplan_group_t *g = pft_secplan_group(pl, 0);
    nd->sec.opener = pft_topo_node(nd->topo, g->opener)->id;
    nd->sec.members = (size_t *)g->members;
    nd->sec.n_members = g->n_members;
    snprintf(nd->sec.label, sizeof nd->sec.label, "%s:tied", nd->sec.opener);
    return 0;
}

/* Node ids of idx[0..n) as a JSON array. */
static json_t *ids_json(const node_t *nd, const size_t *idx, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(pft_topo_node(nd->topo, idx[i])->id));
    return a;
}

/* DP noise paid once (docs/SECAGG.md §7): each member adds a share N(0, σ²/D) to every masked entry, D the
 * plan's noise divisor, so that every aggregate a node can open holds at least σ² of noise it does not know.
 * The rules between DP and the group (one (ε, δ) for every member, δ explicit, an opener without rows, enough
 * noise shares, no DP node outside a group) are topology rules (pft_topo_rules.c), checked before the node
 * starts; what is left here are their consequences. */
static int dp_setup(node_t *nd)
{
    if (nd->sec.n_members == 0)
        return 0;
    const pft_topo_node_t *first = pft_topo_node(nd->topo, nd->sec.members[0]);
    if (!(first->dp_epsilon > 0))
        return 0;
    nd->sec.div =
        (uint32_t)(nd->run->dp_dropouts ? pft_secplan_share_div(nd->sec.plan, (size_t)nd->run->dp_dropouts)
                                        : pft_secplan_noise_div(nd->sec.plan));
    nd->sec.sigma = pft_gstat_dp_sigma(first->dp_epsilon, first->dp_delta);
    if (nd->sec.div < 1 || !(nd->sec.sigma > 0)) /* the rules secagg-dp-dropouts and dp-delta */
        return pft_err(PFT_ETOPO, "secure_agg = true with DP: no noise divisor (%u) or sigma (%g)",
                       nd->sec.div, nd->sec.sigma);
    nd->sec.share_sd = nd->sec.sigma / sqrt((double)nd->sec.div);
    return 0;
}

int pft_node__secagg_setup(node_t *nd)
{
    if (!nd->run->secure_agg)
        return 0;
    /* keys, prep, the plan and its one group are topology rules (pft_topo_rules.c), checked at start, which
     * handed nd->sec.plan over */
    if (!nd->sec.plan || !nd->hand.kp || !nd->hand.keys)
        return pft_err(PFT_ETOPO,
                       "secure_agg = on: no plan or no keys (the topology rules were not checked)");
    int rc = pft_secplan_keep_node(nd->sec.plan, nd->my_index); /* the whole run's plan: O(n²) */
    if (rc == 0)
        rc = find_group(nd);
    if (rc == 0)
        rc = dp_setup(nd);
    if (rc != 0)
        return rc;
    const pft_secplan_node_t *me = nd->sec.me = pft_secplan_node(nd->sec.plan, nd->my_index);
    nd->sec.info = json_object();
    if (!me || !nd->sec.info)
        return pft_err(PFT_ENOMEM, "out of memory");
    if ((rc = pft_node__dropout_setup(nd)) != 0)
        return rc;
    json_object_set_new(nd->sec.info, "min_contributors", json_integer(nd->run->min_contributors));
    json_object_set_new(nd->sec.info, "masks_own", json_boolean(me->mask_group >= 0));
    json_object_set_new(nd->sec.info, "mask_peers", ids_json(nd, me->mask_peers, me->n_mask_peers));
    json_object_set_new(nd->sec.info, "opens",
                        me->opens >= 0 ? ids_json(nd, nd->sec.members, nd->sec.n_members) : json_null());
    json_object_set_new(nd->sec.info, "view", ids_json(nd, me->view, me->n_view));
    json_object_set_new(nd->sec.info, "label", nd->sec.opener ? json_string(nd->sec.label) : json_null());
    json_object_set_new(nd->sec.info, "dp",
                        nd->sec.div
                            ? json_pack("{s:f,s:f,s:f,s:i,s:f,s:i}", "epsilon",
                                        pft_topo_node(nd->topo, nd->sec.members[0])->dp_epsilon, "delta",
                                        pft_topo_node(nd->topo, nd->sec.members[0])->dp_delta, "sigma",
                                        nd->sec.sigma, "noise_div", (int)nd->sec.div, "share_sd",
                                        nd->sec.share_sd, "dp_dropouts", nd->run->dp_dropouts)
                            : json_null());
    pft_info("secure aggregation: %s%s%s; the head sees %zu contributor(s)",
             me->mask_group >= 0 ? "masks its rows for " : "adds its rows in the clear",
             me->mask_group >= 0 ? nd->sec.opener : "", me->opens >= 0 ? ", opens the group's sum" : "",
             me->n_view);
    return 0;
}

void pft_node__secagg_free(node_t *nd)
{
    pft_secplan_destroy(&nd->sec.plan);
    json_decref(nd->sec.info);
    nd->sec.info = NULL;
}

int pft_node__secagg_masks_own(const node_t *nd)
{
    return nd->sec.plan && nd->sec.me->mask_group >= 0;
}

int pft_node__secagg_exit(const node_t *nd)
{
    return nd->drop.unrevealed ? PFT_EXIT_UNREVEALED : nd->sec.unopened ? PFT_EXIT_UNOPENED : 0;
}

/* The public keys of nodes idx[0..n) into a new array (NULL if out of memory). */
static pft_pubkey_t *keys_of(const node_t *nd, const size_t *idx, size_t n)
{
    pft_pubkey_t *k = pft_alloc_array(n + 1, sizeof *k);
    for (size_t i = 0; k && i < n; i++)
        k[i] = nd->hand.keys[idx[i]];
    return k;
}

/* The clear values of a masked part of st into v (ps->n_words): class sums of classes 0..K-1, then R's lower
 * triangle row by row. */
static int masked_values(const node_t *nd, const pft_gstat_t *st, double *v)
{
    int d = pft_gstat_dim(st), K = nd->n_classes;
    size_t dd = (size_t)d * d, o = (size_t)K * d;
    double *r = pft_calloc(dd, sizeof *r);
    if (!r)
        return pft_err(PFT_ENOMEM, "out of memory");
    memset(v, 0, o * sizeof *v);
    for (int k = 0; k < pft_gstat_n_classes(st); k++) {
        int c = pft_gstat_label(st, k);
        const double *mu = pft_gstat_mean(st, k);
        for (int j = 0; c < K && j < d; j++)
            v[(size_t)c * d + j] = (double)pft_gstat_count(st, k) * mu[j];
    }
    int rc = pft_node__rule_matrix(nd, st, r);
    for (int a = 0; rc == 0 && a < d; a++)
        for (int b = 0; b <= a; b++)
            v[o++] = r[(size_t)a * d + b];
    pft_free(r);
    return rc;
}

/* DP: the clear values of this node's masked part with its noise share (class sums of classes 0..K-1, every
 * class noisy whether held or not, then the second moment S2's lower triangle, noisy: pft_gstat_dp_raw at
 * σ/√D). */
static int masked_values_dp(node_t *nd, double *v)
{
    int d = pft_dataset_d(nd->train), K = nd->n_classes;
    pft_gstat_dp_raw_t *raw = NULL;
    int rc = pft_gstat_dp_raw(PFT_GSTAT_TIED, pft_dataset_x(nd->train), pft_dataset_y(nd->train),
                              (size_t)pft_dataset_n(nd->train), d, nd->sec.share_sd, nd->dp.rng, &raw);
    if (rc)
        return pft_err_wrap(rc, "the noise share of own statistics");
    for (int c = 0; c < K; c++)
        for (int j = 0; j < d; j++)
            v[(size_t)c * d + j] = nd->sec.share_sd * pft_rng_normal(nd->dp.rng); /* a class not held */
    for (int k = 0; k < raw->n_classes; k++)
        if (raw->labels[k] < K)
            memcpy(v + (size_t)raw->labels[k] * d, raw->sums + (size_t)k * d, (size_t)d * sizeof *v);
    size_t o = (size_t)K * d;
    for (int a = 0; a < d; a++)
        for (int b = 0; b <= a; b++)
            v[o++] = raw->s2[(size_t)a * d + b];
    pft_node__release_share(nd, nd->sec.share_sd, nd->sec.sigma, nd->sec.div, raw->clipped);
    pft_gstat_dp_raw_destroy(&raw);
    return 0;
}

/* Test hook (test-hook builds): PFT_TEST_SCALE_SUMS=<id> makes member <id> multiply its class sums by 20 in
 * fixed point before masking (a member lying about its rows: the opener must refuse the opening). */
static void scale_sums_hook(const node_t *nd, uint64_t *w)
{
    if (!pft_node__test_hook(nd, "PFT_TEST_SCALE_SUMS"))
        return;
    pft_warn("test hook: class sums x20 before masking");
    for (size_t i = 0; i < (size_t)nd->n_classes * pft_dataset_d(nd->train); i++)
        w[i] *= 20;
}

int pft_node__secagg_take_own(node_t *nd, parts_t *ps, const pft_gstat_t *st)
{
    const pft_secplan_node_t *me = nd->sec.me;
    int K = nd->n_classes;
    uint64_t N = pft_gstat_total(st), *counts = pft_calloc((size_t)K + 1, sizeof *counts);
    double *v = pft_alloc_array(ps->n_words, sizeof *v);
    uint64_t *w = pft_alloc_array(ps->n_words, sizeof *w);
    pft_pubkey_t *peers = keys_of(nd, me->mask_peers, me->n_mask_peers);
    int rc = counts && v && w && peers ? 0 : pft_err(PFT_ENOMEM, "out of memory for a masked part");
    for (int k = 0; rc == 0 && k < pft_gstat_n_classes(st); k++)
        if (pft_gstat_label(st, k) < K)
            counts[pft_gstat_label(st, k)] = pft_gstat_count(st, k);
    if (rc == 0)
        rc = nd->sec.div ? masked_values_dp(nd, v) : masked_values(nd, st, v);
    double lim = contribution_limit(N, nd->sec.share_sd);
    if (rc == 0 && (rc = pft_fixed_encode(v, ps->n_words, lim, w)) != 0)
        rc = pft_err_wrap(rc, "encoding own statistics in fixed point (are the rows of norm ≤ 1?)");
    if (rc == 0)
        scale_sums_hook(nd, w);
    if (rc == 0)
        rc = pft_mask_add(nd->hand.kp, nd->run->run, peers, me->n_mask_peers, (const uint8_t *)nd->sec.label,
                          strlen(nd->sec.label), w, ps->n_words);
    if (rc == 0)
        rc = pft_node__dmask_member_add(nd, w, ps->n_words); /* double masking: the self-mask, its shares */
    if (rc == 0)
        rc = pft_node__parts_take_masked(nd, ps, &nd->my_index, 1, NULL, w, counts, lim, nd->me->id);
    if (rc == 0) {
        ps->p[ps->n - 1].exact_rows = 1; /* the head reads the node's rows themselves */
        pft_info("secure aggregation: own statistics (%llu rows) masked with %zu peer(s) for '%s'",
                 (unsigned long long)N, me->n_mask_peers, nd->sec.opener);
    }
    pft_free(counts);
    pft_free(v);
    pft_free(w);
    pft_free(peers);
    return rc == 1 ? 0 : rc;
}

/* 0 if the masked parts taken are members of the group, each once; the members absent from them into
 * missing[0..*n_missing) and the present ones into present[0..*n_present) (node indices). Else PFT_EINVAL
 * naming the first stranger. */
static int check_members(const node_t *nd, const parts_t *ps, size_t *missing, size_t *n_missing,
                         size_t *present, size_t *n_present)
{
    unsigned char *in = pft_calloc(ps->n_nodes, 1);
    if (!in)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < ps->n; i++)
        for (int w = 0; ps->p[i].masked && !ps->p[i].merged && w < ps->p[i].n_who; w++)
            in[ps->p[i].who[w]] = 1;
    *n_missing = *n_present = 0;
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        size_t v = nd->sec.members[m];
        if (in[v])
            present[(*n_present)++] = v;
        else
            missing[(*n_missing)++] = v;
        in[v] = 0;
    }
    for (size_t v = 0; rc == 0 && v < ps->n_nodes; v++)
        if (in[v])
            rc = pft_err(PFT_EINVAL,
                         "secure aggregation: a masked part counts '%s', not a member of the group",
                         pft_topo_node(nd->topo, v)->id);
    pft_free(in);
    return rc;
}

/* The rule per class (docs/SECAGG.md §4.4), checked before anything is unmasked: every class is held by none
 * or at least min_contributors members (counts are public: one holder's class sum is its class mean). */
static int check_holders(const node_t *nd, const parts_t *ps)
{
    for (int c = 0; c < nd->n_classes; c++) {
        int holders = 0;
        for (int i = 0; i < ps->n; i++) {
            const part_t *p = &ps->p[i];
            for (int w = 0; p->masked && !p->merged && w < p->n_who; w++)
                holders += p->b ? pft_bundle_prov_count(p->b, pft_topo_node(nd->topo, p->who[w])->id, c) > 0
                                : nd->own_counts[c] > 0;
        }
        if (holders > 0 && holders < nd->run->min_contributors)
            return pft_err(
                PFT_EPOLICY,
                "secure aggregation: class %d is held by %d member(s) of the group, fewer "
                "than min_contributors = %d: opening would show their class sum, so the sum stays "
                "masked (docs/SECAGG.md §4.4); give that class to more members (partition) or lower "
                "min_contributors",
                c, holders, nd->run->min_contributors);
    }
    return 0;
}

/* Statistics from the opened values v (class sums, then ΣR's lower triangle) and the counts: W = ΣR − Σ_c
 * s_c s_cᵀ / n_c. */
static int opened_stats(const node_t *nd, const double *v, const uint64_t *counts, pft_gstat_t **out)
{
    int d = pft_dataset_d(nd->train), K = nd->n_classes;
    size_t dd = (size_t)d * d, o = (size_t)K * d;
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d);
    double *w = pft_calloc(dd, sizeof *w), *mu = pft_alloc_array((size_t)d, sizeof *mu);
    int rc = st && w && mu ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (int a = 0; rc == 0 && a < d; a++)
        for (int b = 0; b <= a; b++)
            w[(size_t)a * d + b] = w[(size_t)b * d + a] = v[o++];
    for (int c = 0; rc == 0 && c < K; c++) {
        if (counts[c] == 0)
            continue;
        double n = (double)counts[c];
        for (int j = 0; j < d; j++)
            mu[j] = v[(size_t)c * d + j] / n;
        for (int a = 0; a < d; a++)
            for (int b = 0; b < d; b++)
                w[(size_t)a * d + b] -= n * mu[a] * mu[b];
        rc = pft_gstat_add_class(st, c, counts[c], mu, NULL);
    }
    if (rc == 0)
        rc = pft_gstat_add_tied_scatter(st, w);
    pft_free(w);
    pft_free(mu);
    if (rc == 0)
        *out = st;
    else
        pft_gstat_destroy(&st);
    return rc;
}

/* DP: statistics from the opened noisy values v (class sums, then S2's lower triangle; counts public) by
 * pft_gstat_dp's post-processing: means s/n, W = S2 − Σ n μ μᵀ projected onto the PSD cone. */
static int opened_stats_dp(const node_t *nd, const double *v, const uint64_t *counts, size_t n_present,
                           pft_gstat_t **out)
{
    int d = pft_dataset_d(nd->train), K = nd->n_classes, m = 0;
    size_t o = (size_t)K * d;
    pft_gstat_dp_raw_t raw = {.kind = PFT_GSTAT_TIED, .d = d};
    raw.labels = pft_alloc_array((size_t)K, sizeof *raw.labels);
    raw.counts = pft_alloc_array((size_t)K, sizeof *raw.counts);
    raw.sums = pft_alloc_array((size_t)K * d, sizeof *raw.sums);
    raw.s2 = pft_alloc_array((size_t)d * d, sizeof *raw.s2);
    int rc = raw.labels && raw.counts && raw.sums && raw.s2 ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (int c = 0; rc == 0 && c < K; c++)
        if (counts[c] > 0) { /* a class nobody holds: its noisy sum is dropped */
            raw.labels[m] = c;
            raw.counts[m] = counts[c];
            memcpy(raw.sums + (size_t)m * d, v + (size_t)c * d, (size_t)d * sizeof *raw.sums);
            m++;
        }
    raw.n_classes = m;
    for (int a = 0; rc == 0 && a < d; a++)
        for (int b = 0; b <= a; b++)
            raw.s2[(size_t)a * d + b] = raw.s2[(size_t)b * d + a] = v[o++];
    int floored = 0;
    if (rc == 0 && (rc = pft_gstat_dp_finish(&raw, out, &floored)) != 0)
        rc = pft_err_wrap(rc, "secure aggregation: post-processing the opened noisy statistics");
    if (rc == 0)
        pft_info(
            "secure aggregation: opened noisy statistics (sigma %.4g per entry), %d eigenvalue(s) clamped",
            nd->sec.sigma * sqrt((double)n_present / nd->sec.div), floored);
    pft_free(raw.labels);
    pft_free(raw.counts);
    pft_free(raw.sums);
    pft_free(raw.s2);
    return rc;
}

/* The bound the group's sum obeys, from its public counts (the wire's bound is not trusted). */
static double group_limit(const node_t *nd, const parts_t *ps)
{
    double lim = 0;
    for (int i = 0; i < ps->n; i++) {
        const part_t *p = &ps->p[i];
        for (int w = 0; p->masked && !p->merged && w < p->n_who; w++) {
            uint64_t rows = 0;
            for (int c = 0; c < nd->n_classes; c++)
                rows += p->b ? pft_bundle_prov_count(p->b, pft_topo_node(nd->topo, p->who[w])->id, c)
                             : (uint64_t)nd->own_counts[c];
            lim += contribution_limit(rows, nd->sec.share_sd);
        }
    }
    return lim;
}

/* Removes the present members' masks from sum (after cancelling the survivors' masks with missing ones) and
 * decodes it into v with the bound lim. */
static int unmask(node_t *nd, uint64_t *sum, size_t n_words, const size_t *missing, size_t n_missing,
                  const size_t *present, size_t n_present, double lim, double *v)
{
    int rc = n_missing ? pft_node__dropout_cancel(nd, missing, n_missing, sum, n_words) : 0;
    pft_pubkey_t *peers = keys_of(nd, present, n_present);
    if (rc == 0 && !peers)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_mask_remove(nd->hand.kp, nd->run->run, peers, n_present, (const uint8_t *)nd->sec.label,
                             strlen(nd->sec.label), sum, n_words);
    if (rc == 0)
        rc = pft_node__dmask_remove(nd, present, n_present, sum, n_words); /* the survivors' self-masks */
    if (rc == 0 && (rc = pft_fixed_decode(sum, n_words, lim, v)) != 0)
        rc =
            pft_err_wrap(rc, "secure aggregation: the group's sum does not open (a mask did not cancel, or a "
                             "part was forged)");
    pft_free(peers);
    return rc;
}

/* The opening refused (rc, the pending error): the group named (opener, members) in the error, the log and
 * result.json's secure_agg.open_refused, and the node's exit (PFT_EXIT_UNOPENED). Returns rc. */
static int refuse_open(node_t *nd, const size_t *present, size_t n_present, int rc)
{
    json_t *m = ids_json(nd, present, n_present);
    char *who = m ? json_dumps(m, JSON_COMPACT) : NULL;
    rc = pft_err_wrap(rc,
                      "secure aggregation: the group opened by '%s' (members %s) could not be opened, "
                      "and its sum is not used",
                      nd->sec.opener, who ? who : "?");
    json_object_set_new(nd->sec.info, "open_refused",
                        json_pack("{s:s,s:o,s:s}", "opener", nd->sec.opener, "members", m ? m : json_array(),
                                  "reason", pft_errmsg()));
    nd->sec.unopened = 1;
    free(who);
    return rc;
}

/* The opened sum st checked as a clear part would be (pft_node__plausible_opened): PFT_EPOLICY naming the
 * claim its members' rows cannot hold, else 0. */
static int check_opened(const node_t *nd, const pft_gstat_t *st, const size_t *present, size_t n_present)
{
    char reason[512];
    double sd = nd->sec.div ? nd->sec.sigma * sqrt((double)n_present / nd->sec.div) : 0;
    if (!pft_node__plausible_opened(nd, st, present, n_present, sd * sd, reason, sizeof reason))
        return 0;
    return pft_err(PFT_EPOLICY, "%s (a member sent statistics its rows cannot hold)", reason);
}

int pft_node__secagg_open(node_t *nd, parts_t *ps)
{
    if (!nd->sec.plan || nd->sec.me->opens < 0)
        return 0;
    size_t n_missing = 0, n_present = 0, *missing = pft_alloc_array(nd->sec.n_members + 1, sizeof *missing),
           *present = pft_alloc_array(nd->sec.n_members + 1, sizeof *present);
    int K = nd->n_classes, rc = missing && present ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = check_members(nd, ps, missing, &n_missing, present, &n_present);
    if (rc == 0)
        rc = check_holders(nd, ps);
    long g0 = -1;
    uint64_t *sum = pft_calloc(ps->n_words, sizeof *sum), *counts = pft_calloc((size_t)K + 1, sizeof *counts);
    double *v = pft_alloc_array(ps->n_words, sizeof *v), lim = group_limit(nd, ps);
    if (rc == 0 && !(sum && counts && v))
        rc = pft_err(PFT_ENOMEM, "out of memory to open the masked sum");
    for (size_t g = 0; rc == 0 && g < ps->n_nodes; g++) {
        if (!ps->mw[g])
            continue;
        pft_fixed_add(sum, ps->mw[g], ps->n_words);
        for (int c = 0; c < K; c++)
            counts[c] += ps->mcount[g * (size_t)K + c];
        g0 = g0 < 0 ? (long)g : g0;
        PFT_FREE(ps->mw[g]);
    }
    int opening = rc == 0;
    if (rc == 0)
        rc = unmask(nd, sum, ps->n_words, missing, n_missing, present, n_present, lim, v);
    pft_gstat_t *st = NULL;
    if (rc == 0)
        rc = nd->sec.div ? opened_stats_dp(nd, v, counts, n_present, &st) : opened_stats(nd, v, counts, &st);
    if (rc == 0)
        rc = check_opened(nd, st, present, n_present);
    if (rc != 0 && rc != PFT_ENOMEM && opening)
        rc = refuse_open(nd, present, n_present, rc);
    if (rc == 0 && g0 >= 0)
        rc = ps->acc[g0] ? pft_gstat_merge(ps->acc[g0], st) : (ps->acc[g0] = st, st = NULL, 0);
    for (int i = 0; rc == 0 && i < ps->n; i++)
        if (ps->p[i].masked && !ps->p[i].merged) {
            ps->p[i].merged = 1;
            ps->p[i].group = g0;
            ps->p[i].exact_rows = 0;
        }
    if (rc == 0) {
        double sd = nd->sec.div ? nd->sec.sigma * sqrt((double)n_present / nd->sec.div) : 0;
        json_object_set_new(nd->sec.info, "opened_rows",
                            json_integer((json_int_t)pft_gstat_total(ps->acc[g0])));
        json_object_set_new(nd->sec.info, "opened_sigma", nd->sec.div ? json_real(sd) : json_null());
        pft_info("secure aggregation: opened the sum of %zu member(s), %llu rows", n_present,
                 (unsigned long long)pft_gstat_total(ps->acc[g0]));
    }
    pft_gstat_destroy(&st);
    pft_free(sum);
    pft_free(counts);
    pft_free(v);
    pft_free(missing);
    pft_free(present);
    return rc;
}

int pft_node__secagg_check_view(node_t *nd, const parts_t *ps)
{
    if (!nd->sec.plan)
        return 0;
    unsigned char *in = pft_calloc(ps->n_nodes, 1);
    if (!in)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (int i = 0; i < ps->n; i++) {
        const part_t *p = &ps->p[i];
        for (int w = 0; (!p->masked || p->merged || p->exact_rows) && w < p->n_who; w++)
            in[p->who[w]] = 1; /* in the clear for this node's head */
    }
    for (size_t k = 0; k < nd->sec.me->n_view; k++)
        in[nd->sec.me->view[k]] = 0;
    int rc = 0;
    for (size_t v = 0; rc == 0 && v < ps->n_nodes; v++)
        if (in[v])
            rc = pft_err(PFT_EINVAL,
                         "secure aggregation: this node would train on statistics of '%s' in the "
                         "clear, outside its view in the plan",
                         pft_topo_node(nd->topo, v)->id);
    pft_free(in);
    return rc;
}

void pft_node__secagg_json(const node_t *nd, json_t *res)
{
    pft_node__dropout_json(nd, nd->sec.info);
    if (nd->sec.info)
        json_object_set(res, "secure_agg", nd->sec.info);
}
