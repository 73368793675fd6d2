/* pft_topo_rules: the one validator of the rules between attributes (secure aggregation, DP groups, the
 * release, the plan) that pftnet check, pftnet launch and pftnode call alike. */
#include "pft_topo_rules.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat_dp.h"
#include "pft_topo_attr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CLASS_MAX 65536 /* class sets name classes 0..65535 (pft_topo_classes_parse) */

/* Records the verdict (code, rule, node, "rule NAME: text") in v and as the error message; returns code. */
static int refuse(pft_topo_verdict_t *v, int code, const char *rule, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int refuse(pft_topo_verdict_t *v, int code, const char *rule, const char *node, const char *fmt, ...)
{
    int w = snprintf(v->text, sizeof v->text, "rule %s: ", rule);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->text + w, sizeof v->text - (size_t)w, fmt, ap);
    va_end(ap);
    v->code = code;
    v->rule = rule;
    snprintf(v->node, sizeof v->node, "%s", node ? node : "");
    return pft_err(code, "%s", v->text);
}

/* msg without the "PATH:" or "PATH:LINE:" prefix pft_secplan puts first: the words must not depend on which
 * file (the user's, the launcher's resolved copy) the topology was read from. */
static const char *without_path(const pft_topo_t *t, const char *msg)
{
    const char *path = pft_topo_path(t);
    size_t n = path ? strlen(path) : 0;
    if (!n || strncmp(msg, path, n) != 0 || msg[n] != ':')
        return msg;
    msg += n + 1;
    const char *p = msg;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p > msg && *p == ':')
        msg = p + 1;
    return msg + (*msg == ' ');
}

/* The model families a run can combine: cov = tied is exact (no merge = sample), and a run either carries
 * exact statistics on every node or samples mixtures on every node. */
static int check_families(const pft_topo_t *t, pft_topo_verdict_t *v)
{
    size_t n = pft_topo_node_count(t), n_exact = 0;
    for (size_t i = 0; i < n; i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (nd->cov == PFT_COV_TIED && nd->merge == PFT_TOPO_MERGE_SAMPLE)
            return refuse(v, PFT_ETOPO, "family-tied-sample", nd->id,
                          "node '%s': cov = tied is exact statistics; merge = sample applies to cov = full "
                          "with k = 1 (use cov = full, k = 1, merge = sample for the paper's protocol)",
                          nd->id);
        n_exact += nd->exact != 0;
    }
    for (size_t i = 0; n_exact > 0 && n_exact < n && i < n; i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (!nd->exact)
            return refuse(v, PFT_ETOPO, "family-mixed", nd->id,
                          "node '%s' samples mixtures (cov = %s) while other nodes carry exact statistics: a "
                          "run uses one or the other",
                          nd->id, pft_cov_name(nd->cov));
    }
    return 0;
}

/* Rules that hold without secure aggregation: DP on mixtures releases one Gaussian per class. */
static int check_dp_k(const pft_topo_t *t, pft_topo_verdict_t *v)
{
    for (size_t i = 0; i < pft_topo_node_count(t); i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (nd->dp_epsilon > 0 && !nd->exact && nd->k != 1)
            return refuse(v, PFT_ETOPO, "dp-k", nd->id,
                          "node '%s': DP-FedPFT releases one Gaussian per class: set k = 1 (it has k = %d)",
                          nd->id, nd->k);
    }
    return 0;
}

/* The group's DP (docs/SECAGG.md §7): one (ε, δ) for every member, δ explicit, an opener without rows, and
 * enough noise shares for dp_dropouts. A node with DP outside any group is refused when no member masks with
 * DP (its rows would go on in the clear). */
static int check_group_dp(const pft_topo_t *t, const pft_secplan_t *pl, pft_topo_verdict_t *v)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    const pft_secplan_group_t *g = pft_secplan_group_count(pl) ? pft_secplan_group(pl, 0) : NULL;
    const pft_topo_node_t *first = NULL;
    int any = 0;
    for (size_t m = 0; g && m < g->n_members; m++)
        any |= pft_topo_node(t, g->members[m])->dp_epsilon > 0;
    for (size_t i = 0; !any && i < pft_topo_node_count(t); i++)
        if (pft_topo_node(t, i)->dp_epsilon > 0)
            return refuse(
                v, PFT_ETOPO, "secagg-dp-nonmember", pft_topo_node(t, i)->id,
                "secure_agg = true: node '%s' asks for DP but masks nothing (it is in no group: its "
                "rows go on in the clear); give the group's members DP, or set dp_epsilon = 0 on it",
                pft_topo_node(t, i)->id);
    if (!any)
        return 0;
    for (size_t m = 0; m < g->n_members; m++) {
        const pft_topo_node_t *u = pft_topo_node(t, g->members[m]);
        first = first ? first : u;
        if (!(u->dp_epsilon > 0) || u->dp_epsilon != first->dp_epsilon || u->dp_delta != first->dp_delta)
            return refuse(v, PFT_ETOPO, "secagg-dp-equal", u->id,
                          "secure_agg = true with DP: every member of the group must ask for the same "
                          "(dp_epsilon, dp_delta); '%s' has (%g, %g), '%s' (%g, %g)",
                          first->id, first->dp_epsilon, first->dp_delta, u->id, u->dp_epsilon, u->dp_delta);
    }
    const pft_topo_node_t *op = pft_topo_node(t, g->opener);
    if (op->has_data)
        return refuse(v, PFT_ETOPO, "secagg-dp-opener", op->id,
                      "secure_agg = true with DP: the opener '%s' has rows of its own, which would go on "
                      "without noise after the opening; give it data = false (an aggregator)",
                      op->id);
    size_t div =
        r->dp_dropouts ? pft_secplan_share_div(pl, (size_t)r->dp_dropouts) : pft_secplan_noise_div(pl);
    if (div < 1)
        return refuse(v, PFT_ETOPO, "secagg-dp-dropouts", NULL,
                      "secure_agg with DP: dp_dropouts = %d leaves fewer than min_contributors = %d noise "
                      "shares of the %zu members; lower dp_dropouts or min_contributors, or add members",
                      r->dp_dropouts, r->min_contributors, g->n_members);
    return 0;
}

/* Double masking where dropouts are recovered (docs/SECAGG.md §5): the threshold t of the self-mask seeds'
 * sharing, the default or one a lone lying opener cannot beat (2t ≥ n + 2, or t = n), set on the plan; under
 * DP, dp_dropouts within the n − t members that may drop. */
static int check_threshold(const pft_topo_t *t, pft_secplan_t *pl, pft_topo_verdict_t *v)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    if (pft_secplan_group_count(pl) != 1 || !pft_secplan_recoverable(pl, t, 0))
        return 0;
    size_t n = pft_secplan_group(pl, 0)->n_members;
    if (n < 2) /* a group of one opens to its opener anyway (min_contributors = 1): nothing to share */
        return 0;
    size_t th = r->secagg_threshold ? (size_t)r->secagg_threshold : pft_secplan_default_threshold(n);
    if (!pft_secplan_threshold_ok(n, th))
        return refuse(
            v, PFT_ETOPO, "secagg-threshold", NULL,
            "secagg_threshold = %zu for a group of %zu members: %s; use %zu..%zu (2t >= n + 2, or t = n; "
            "docs/SECAGG.md §5)",
            th, n,
            th > n ? "more shares than members"
                   : "a lying opener could gather that many shares of a member's self-mask seed while every "
                     "pair key of it is revealed",
            pft_secplan_default_threshold(n), n);
    if (r->dp_dropouts > 0 && (size_t)r->dp_dropouts > n - th)
        return refuse(
            v, PFT_ETOPO, "secagg-threshold-dp", NULL,
            "dp_dropouts = %d but secagg_threshold = %zu of %zu members lets at most %zu drop; lower "
            "dp_dropouts or secagg_threshold",
            r->dp_dropouts, th, n, n - th);
    return pft_secplan_set_threshold(pl, th);
}

/* Secure aggregation's rules beyond the plan itself: one group, its DP, where dropouts may be tolerated. */
static int check_secagg_plan(const pft_topo_t *t, pft_secplan_t *pl, pft_topo_verdict_t *v)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    if (pft_secplan_group_count(pl) > 1)
        return refuse(v, PFT_ETOPO, "secagg-groups", NULL,
                      "the secure-aggregation plan has %zu groups; pftnode handles one",
                      pft_secplan_group_count(pl));
    int rc = check_group_dp(t, pl, v);
    if (rc)
        return rc;
    if (pft_secplan_group_count(pl) == 1 && r->dp_dropouts > 0 && !pft_secplan_recoverable(pl, t, 0)) {
        const char *op = pft_topo_node(t, pft_secplan_group(pl, 0)->opener)->id;
        return refuse(v, PFT_ETOPO, "secagg-dropouts-star", op,
                      "secure_agg with dp_dropouts = %d: dropout recovery is planned for stars only (every "
                      "member handing off to the opener '%s'); set dp_dropouts = 0 or make the group a star",
                      r->dp_dropouts, op);
    }
    return check_threshold(t, pl, v);
}

/* holders[c] += 1 for every class c member u holds: by the topology's class set (partition = labels), else by
 * facts. Returns 1 if u's classes are known, 0 if not, PFT_EINVAL for a class set that does not parse. */
static int add_holdings(const pft_topo_t *t, size_t u, const pft_topo_facts_t *f, unsigned char *flags,
                        int *holders)
{
    const pft_topo_node_t *nd = pft_topo_node(t, u);
    if (pft_topo_run(t)->part_kind == PFT_TOPO_PART_LABELS && pft_topo_run(t)->dataset && nd->classes) {
        memset(flags, 0, CLASS_MAX);
        if (pft_topo_classes_parse(nd->classes, CLASS_MAX, flags) != 0)
            return PFT_EINVAL;
        for (size_t c = 0; c < CLASS_MAX; c++)
            holders[c] += flags[c];
        return 1;
    }
    if (!f || !f->class_rows || !f->n_classes)
        return 0;
    for (size_t c = 0; c < f->n_classes && c < CLASS_MAX; c++)
        holders[c] += f->class_rows[u * f->n_classes + c] > 0;
    return 1;
}

/* 1 if member u holds class c, by the same sources as add_holdings (0 when unknown). */
static int holds_class(const pft_topo_t *t, size_t u, size_t c, const pft_topo_facts_t *f,
                       unsigned char *flags)
{
    const pft_topo_node_t *nd = pft_topo_node(t, u);
    if (pft_topo_run(t)->part_kind == PFT_TOPO_PART_LABELS && pft_topo_run(t)->dataset && nd->classes) {
        memset(flags, 0, CLASS_MAX);
        return pft_topo_classes_parse(nd->classes, CLASS_MAX, flags) == 0 && flags[c];
    }
    return f && f->class_rows && c < f->n_classes && f->class_rows[u * f->n_classes + c] > 0;
}

/* The policy per class (docs/SECAGG.md §4.4; counts are public, so one holder's opened class sum is its class
 * mean): every class is held by no member of the group or by at least min_contributors of them. Decided only
 * when every member's classes are known (the opener refuses at opening otherwise). */
static int check_class_holders(const pft_topo_t *t, const pft_secplan_t *pl, const pft_topo_facts_t *f,
                               pft_topo_verdict_t *v)
{
    if (pft_secplan_group_count(pl) != 1)
        return 0;
    const pft_secplan_group_t *g = pft_secplan_group(pl, 0);
    int m = pft_topo_run(t)->min_contributors, known = 1, rc = 0;
    unsigned char *flags = pft_alloc(CLASS_MAX);
    int *holders = pft_calloc(CLASS_MAX, sizeof *holders);
    if (!flags || !holders)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && known && i < g->n_members; i++) {
        int r = add_holdings(t, g->members[i], f, flags, holders);
        known = r == 1;
    }
    for (size_t c = 0; rc == 0 && known && c < CLASS_MAX; c++) {
        if (holders[c] == 0 || holders[c] >= m)
            continue;
        char names[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < g->n_members && used < sizeof names; i++)
            if (holds_class(t, g->members[i], c, f, flags)) {
                int w = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                 pft_topo_node(t, g->members[i])->id);
                used += w > 0 ? (size_t)w : 0;
            }
        const char *op = pft_topo_node(t, g->opener)->id;
        rc = refuse(v, PFT_EPOLICY, "secagg-class-holders", op,
                    "class %zu is held by %d member(s) of the group opened by '%s' (%s), fewer than "
                    "min_contributors = %d: opening would show their class sum, so '%s' would refuse to open "
                    "it (docs/SECAGG.md §4.4); give class %zu to at least %d members or to none, or lower "
                    "min_contributors",
                    c, holders[c], op, names, m, op, c, m);
    }
    pft_free(flags);
    pft_free(holders);
    return rc;
}

/* Secure aggregation: keys, rows of norm 1, a plan that protects the topology, then the plan's own rules. */
static int check_secagg(const pft_topo_t *t, const pft_topo_facts_t *f, pft_topo_verdict_t *v,
                        pft_secplan_t **plan)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    for (size_t i = 0; i < pft_topo_node_count(t); i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (nd->cov != PFT_COV_TIED)
            return refuse(v, PFT_ETOPO, "secagg-cov", nd->id,
                          "node '%s': secure_agg = on masks exact tied statistics (cov = tied), not cov = %s "
                          "(docs/SECAGG.md)",
                          nd->id, pft_cov_name(nd->cov));
    }
    if (f && f->insecure)
        return refuse(v, PFT_ETOPO, "secagg-insecure", NULL,
                      "secure_agg = true: the masks come from key agreement between the nodes' keys, so the "
                      "run cannot be --insecure");
    if (r->prep != PFT_TOPO_PREP_L2 && r->prep != PFT_TOPO_PREP_SQRT_L2)
        return refuse(
            v, PFT_ETOPO, "secagg-prep", NULL,
            "secure_agg = true needs rows of norm 1 (prep = l2 or sqrt-l2): fixed point bounds every "
            "statistic by the rows it sums (docs/SECAGG.md §2)");
    int rc = pft_secplan_new(t, r->min_contributors, NULL, plan);
    if (rc == PFT_ENOMEM)
        return rc;
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", without_path(t, pft_errmsg()));
        return refuse(v, PFT_ETOPO, "secagg-plan", NULL, "%s", msg);
    }
    return check_secagg_plan(t, *plan, v);
}

/* dp-delta: every node with DP gives 0 < dp_delta < 1 (the default is 1e-5; δ is never derived from a node's
 * or a class's rows: 1/n of a 9-row class is 0.11, a guarantee in name only). */
static int check_dp_delta(const pft_topo_t *t, pft_topo_verdict_t *v)
{
    for (size_t i = 0; i < pft_topo_node_count(t); i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (nd->dp_epsilon > 0 && !(nd->dp_delta > 0 && nd->dp_delta < 1))
            return refuse(v, PFT_ETOPO, "dp-delta", nd->id,
                          "node '%s': DP with dp_delta = %g; give 0 < dp_delta < 1, far below 1 / its rows "
                          "(the default 1e-5; delta is never derived from the rows, SECURITY.md §6)",
                          nd->id, nd->dp_delta);
    }
    return 0;
}

int pft_topo_rules_check(const pft_topo_t *t, const pft_topo_facts_t *facts, pft_topo_verdict_t *verdict,
                         pft_secplan_t **plan)
{
    pft_topo_verdict_t local;
    pft_topo_verdict_t *v = verdict ? verdict : &local;
    pft_secplan_t *pl = NULL;
    *v = (pft_topo_verdict_t){0};
    if (plan)
        *plan = NULL;
    int rc = check_families(t, v);
    if (rc == 0)
        rc = check_dp_delta(t, v);
    if (rc == 0 && pft_topo_run(t)->secure_agg)
        rc = check_secagg(t, facts, v, &pl);
    if (rc == 0)
        rc = check_dp_k(t, v);
    if (rc == 0 && pl)
        rc = check_class_holders(t, pl, facts, v);
    if (rc == PFT_ENOMEM)
        v->code = rc;
    if (rc == 0 && plan)
        *plan = pl;
    else
        pft_secplan_destroy(&pl);
    return rc;
}

/* Warning exact-lap-differencing into *w: 1 if written, else 0. */
static size_t lap_warning(const pft_topo_t *t, pft_topo_verdict_t *w)
{
    pft_kind_t kind = pft_topo_kind(t);
    if (pft_topo_run(t)->secure_agg || (kind != PFT_KIND_RING && kind != PFT_KIND_MESH))
        return 0;
    const char *clear = NULL; /* a node whose rows go round exact, without DP */
    for (size_t i = 0; i < pft_topo_node_count(t); i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (!nd->exact)
            return 0; /* mixtures (family-mixed: every node or none) */
        if (nd->has_data && !(nd->dp_epsilon > 0) && !clear)
            clear = nd->id;
    }
    if (!clear)
        return 0;
    *w = (pft_topo_verdict_t){.rule = "exact-lap-differencing"};
    snprintf(w->node, sizeof w->node, "%s", clear);
    snprintf(
        w->text, sizeof w->text,
        "warning exact-lap-differencing: a %s of exact statistics without secure_agg: in lap 2 every node "
        "receives the exact total and holds the aggregate it sent in lap 1, so a node that subtracts it "
        "(and its own rows) holds the exact class sums and per-coordinate sums of squares of the nodes "
        "after it, alone for the node just before the one that completes lap 1 ('%s' releases without DP); "
        "set secure_agg = true (lap 1 travels masked to the producer, docs/SECAGG.md §4.2), or DP",
        pft_kind_name(kind), clear);
    return 1;
}

/* The floor's forecast: what a node of lap 1's order releases of class c, given what its predecessors released
 * (merged) and its own rows (own), and whether its own rows go with it (pft_node_step_floor.c: exact
 * statistics keep a class whose own and merged rows reach min_rows, received rows going on regardless; the
 * sampling method withholds the whole model of a class that stands for fewer). */
static uint64_t floor_release(const pft_topo_node_t *nd, uint64_t merged, uint64_t own, int *kept)
{
    *kept = own == 0 || merged + own >= (uint64_t)nd->min_rows;
    if (nd->exact)
        return merged + (*kept ? own : 0);
    return merged + own >= (uint64_t)nd->min_rows ? merged + own : 0;
}

/* What the forecast found: rows withheld of all, nodes that release none of their own rows, and the node
 * that withholds the most (its rows, withheld rows and largest class). */
typedef struct {
    uint64_t total, withheld, ex_rows, ex_withheld, ex_largest;
    size_t silent, holders, ex;
} floor_cast_t;

/* One node of the forecast: its releases into rel[v·nc ..], its tallies into fc. */
static void floor_node(const pft_topo_t *t, const pft_topo_facts_t *f, size_t v, const unsigned char *done,
                       uint64_t *rel, floor_cast_t *fc)
{
    size_t nc = f->n_classes;
    const size_t *preds;
    size_t np = pft_topo_preds(t, v, &preds);
    const pft_topo_node_t *nd = pft_topo_node(t, v);
    uint64_t rows = 0, withheld = 0, largest = 0;
    for (size_t c = 0; c < nc; c++) {
        uint64_t merged = 0, own = f->class_rows[v * nc + c];
        for (size_t i = 0; i < np; i++) /* a predecessor later in lap 1's order (a ring's start) sends nothing */
            merged += done[preds[i]] ? rel[preds[i] * nc + c] : 0;
        int kept;
        rel[v * nc + c] = floor_release(nd, merged, own, &kept);
        rows += own;
        withheld += kept ? 0 : own;
        largest = own > largest ? own : largest;
    }
    fc->total += rows;
    fc->withheld += withheld;
    fc->holders += rows > 0;
    fc->silent += rows > 0 && withheld == rows;
    if (withheld > fc->ex_withheld)
        fc->ex = v, fc->ex_rows = rows, fc->ex_withheld = withheld, fc->ex_largest = largest;
}

/* Warning floor-withholds into *w when the privacy floor would keep a tenth or more of the training rows home
 * (the run would share little; the 1000-node ring of 12 rows per node shared none): 1 if written, else 0.
 * Needs every node's rows per class (facts); not under secure_agg (a member has no floor: it applies where
 * the group's sum opens). Lap 1's order, each node merging what its earlier predecessors released: exact for
 * chains, stars, trees and rings; about for a DAG whose rows reach a node twice. */
static size_t floor_warning(const pft_topo_t *t, const pft_topo_facts_t *f, pft_topo_verdict_t *w)
{
    if (!f || !f->class_rows || !f->n_classes || pft_topo_run(t)->secure_agg)
        return 0;
    size_t nn = pft_topo_node_count(t), nc = f->n_classes;
    const size_t *order;
    size_t no = pft_topo_order(t, &order);
    uint64_t *rel = pft_calloc(nn * nc, sizeof *rel);
    unsigned char *done = pft_calloc(nn, 1);
    floor_cast_t fc = {0}; /* out of memory: no forecast, no warning */
    for (size_t k = 0; rel && done && k < no; k++) {
        floor_node(t, f, order[k], done, rel, &fc);
        done[order[k]] = 1;
    }
    pft_free(rel);
    pft_free(done);
    if (fc.withheld == 0 || fc.withheld * 10 < fc.total)
        return 0;
    const pft_topo_node_t *ex = pft_topo_node(t, fc.ex);
    *w = (pft_topo_verdict_t){.rule = "floor-withholds"};
    snprintf(w->node, sizeof w->node, "%s", ex->id);
    snprintf(w->text, sizeof w->text,
             "warning floor-withholds: by the nodes' rows per class, the privacy floor keeps %llu of the %llu "
             "training rows (%.0f %%) from leaving their nodes (%zu of %zu nodes with rows release none of "
             "their own; '%s' withholds %llu of its %llu rows, its largest class %llu rows, min_rows = %d): a "
             "class goes on only with min_rows rows, its own and those it merges with; give the nodes more rows "
             "(samples), lower min_rows, or, for exact statistics, set secure_agg = true (the floor then applies "
             "where a group's sum opens)",
             (unsigned long long)fc.withheld, (unsigned long long)fc.total,
             100.0 * (double)fc.withheld / (double)fc.total, fc.silent, fc.holders, ex->id,
             (unsigned long long)fc.ex_withheld, (unsigned long long)fc.ex_rows,
             (unsigned long long)fc.ex_largest, ex->min_rows);
    return 1;
}

size_t pft_topo_rules_warnings(const pft_topo_t *t, const pft_topo_facts_t *facts, pft_topo_verdict_t *w,
                               size_t max)
{
    size_t n = 0;
    if (n < max)
        n += lap_warning(t, w + n);
    if (n < max)
        n += floor_warning(t, facts, w + n);
    return n;
}

int pft_topo_rules_apply_sets(pft_topo_t *t, const char *const *set, int n, const char *seed)
{
    const char **kv = pft_calloc(2 * (size_t)n + 3, sizeof *kv);
    char **names = pft_calloc((size_t)n + 1, sizeof *names);
    int rc = kv && names ? 0 : pft_err(PFT_ENOMEM, "out of memory"), m = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        const char *eq = strchr(set[i], '=');
        if (!eq || eq == set[i]) {
            rc = pft_err(PFT_EINVAL, "--set '%s': expected NAME=VALUE", set[i]);
            break;
        }
        if (!(names[i] = pft_strdup(set[i]))) {
            rc = pft_err(PFT_ENOMEM, "out of memory");
            break;
        }
        names[i][eq - set[i]] = '\0';
        kv[m++] = names[i];
        kv[m++] = eq + 1;
    }
    if (rc == 0 && seed) {
        kv[m++] = "seed";
        kv[m++] = seed;
    }
    if (rc == 0 && m && (rc = pft_topo_set_graph_attrs(t, kv)) != 0)
        pft_err_wrap(rc, "--set/--seed"); /* the message names the file */
    for (int i = 0; names && i < n; i++)
        pft_free(names[i]);
    pft_free(names);
    pft_free(kv);
    return rc;
}
