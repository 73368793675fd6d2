/* cmd_check: `pftnet check TOPO.dot [--json]` validates a topology and prints kind, roles, settings and
 * hand-offs; `pftnet check --attributes [--markdown]` lists the topology attributes. */
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_launch.h"
#include "pft_node.h"
#include "pft_error.h"
#include "pft_secplan.h"
#include "pft_topo.h"
#include "pft_alloc.h"
#include "pft_keys.h"
#include "pft_topo_attr.h"
#include "pft_topo_fingerprint.h"
#include "pft_topo_rules.h"
#include "pft_dp.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *const s_dtype_names[] = {"fp16", "fp32"};
static const char *const s_prep_names[] = {"none", "l2", "sqrt-l2"};
static const char *const s_missing_names[] = {"proceed", "fail"};

static const char *cov_name(pft_cov_t c)
{
    const char *n = pft_cov_name(c);
    return n ? n : "?";
}

/* "b, c" or "-" */
static void id_list(const pft_topo_t *t, const size_t *v, size_t n, char *buf, size_t cap)
{
    size_t used = 0;
    snprintf(buf, cap, "-");
    for (size_t i = 0; i < n && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? "," : "", pft_topo_node(t, v[i])->id);
        used += w > 0 ? (size_t)w : 0;
    }
}

/* 1 if the primary edge e carries no hand-off in the plan (a mesh's edges outside its two trees). */
static int edge_idle(const pft_topo_t *t, const pft_topo_edge_t *e)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h);
    if (e->fallback)
        return 0;
    for (size_t i = 0; i < nh; i++)
        if (h[i].from == e->tail && h[i].to == e->head)
            return 0;
    return 1;
}

static void print_attributes(void)
{
    size_t n;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&n);
    printf("Topology attributes (Graphviz layout attributes such as label, shape, color are also "
           "accepted):\n\n");
    printf("%-14s %-17s %-9s %-28s %s\n", "name", "scope", "default", "values", "meaning");
    for (size_t i = 0; i < n; i++) {
        char vals[128];
        pft_topo_attr_values_text(&tab[i], vals, sizeof vals);
        printf("%-14s %-17s %-9s %-28s %s\n", tab[i].name, pft_topo_attr_scope_name(tab[i].scopes),
               tab[i].def ? tab[i].def : "-", vals, tab[i].help);
    }
}

/* Writes text to stdout with the characters Markdown would read as markup escaped; in a code span
 * (code = 1) only '|', which GitHub's tables split cells on even there. */
static void md_cell(const char *text, int code)
{
    for (const char *p = text; *p; p++) {
        if (*p == '|' || (!code && strchr("\\`*[]<>", *p)))
            putchar('\\');
        putchar(*p);
    }
}

/* The attribute table as a Markdown table (docs/USAGE.md holds this output between marker comments;
 * tests/e2e_docs.sh checks that the two agree). */
static void print_attributes_markdown(void)
{
    size_t n;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&n);
    printf("| name | scope | default | values | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        char vals[128];
        pft_topo_attr_values_text(&tab[i], vals, sizeof vals);
        printf("| `%s` | %s | ", tab[i].name, pft_topo_attr_scope_name(tab[i].scopes));
        if (tab[i].def) {
            printf("`");
            md_cell(tab[i].def, 1);
            printf("`");
        } else {
            printf("–");
        }
        printf(" | `");
        md_cell(vals, 1);
        printf("` | ");
        md_cell(tab[i].help, 0);
        printf(" |\n");
    }
}

/* The text report's data section: each node's files, or its share of the simulation's dataset. */
static void print_data(const pft_topo_t *t)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    size_t n = pft_topo_node_count(t);
    printf("\ndata:\n");
    for (size_t v = 0; v < n; v++) {
        const pft_topo_node_t *nd = pft_topo_node(t, v);
        printf("  %-12s", nd->id);
        if (nd->train)
            printf(" train=%s labels=%s", nd->train, nd->labels);
        if (nd->test)
            printf(" test=%s test_labels=%s", nd->test, nd->test_labels);
        if (!nd->has_data)
            printf(" no data (data = false)");
        else if (!nd->train && !r->dataset)
            printf(" its own files (not in this file: the node's command line or node file names them)");
        if (nd->rows)
            printf(" rows=%d", nd->rows);
        if (r->dataset) {
            printf(" share=%s", r->partition);
            if (nd->samples)
                printf(" samples=%d", nd->samples);
            if (nd->domain >= 0)
                printf(" domain=%d", nd->domain);
            if (nd->classes)
                printf(" classes=%s", nd->classes);
        }
        printf("\n");
    }
}

/* The text report's last section: each node's stages (wait -> act -> send), h being the run's hand-offs. */
static void print_stages(const pft_topo_t *t, const pft_handoff_t *h)
{
    size_t n = pft_topo_node_count(t);
    printf("\nper node (wait -> act -> send):\n");
    for (size_t v = 0; v < n; v++) {
        const pft_topo_node_t *nd = pft_topo_node(t, v);
        for (size_t s = 0; s < nd->n_stages; s++) {
            const pft_stage_t *st = &nd->stages[s];
            printf("  %-12s lap %d: ", s == 0 ? nd->id : "", st->lap);
            if (!st->n_recv)
                printf("start at once");
            for (size_t i = 0; i < st->n_recv; i++)
                printf("%s#%zu from %s", i ? ", " : "wait ", h[st->recv[i]].seq,
                       pft_topo_node(t, h[st->recv[i]].from)->id);
            printf(" -> %s", pft_what_name(st->action));
            for (size_t i = 0; i < st->n_send; i++)
                printf("%s#%zu to %s", i ? ", " : " -> send ", h[st->send[i]].seq,
                       pft_topo_node(t, h[st->send[i]].to)->id);
            printf("%s\n", st->final ? " -> head" : "");
        }
    }
}

/* The secure-aggregation plan (secure_agg = true): each group's members and opener, the DP noise divisor, and
 * per node what it masks, opens and sees (docs/SECAGG.md §4). */
static void print_secagg(const pft_topo_t *t, const pft_secplan_t *pl)
{
    char buf[512];
    int t_drop = pft_topo_run(t)->dp_dropouts;
    printf("\nsecure aggregation (min_contributors = %d, DP noise divisor %zu):\n",
           pft_secplan_min_contributors(pl),
           t_drop ? pft_secplan_share_div(pl, (size_t)t_drop) : pft_secplan_noise_div(pl));
    for (size_t g = 0; g < pft_secplan_group_count(pl); g++) {
        const pft_secplan_group_t *gr = pft_secplan_group(pl, g);
        int star = pft_secplan_recoverable(pl, t, g);
        id_list(t, gr->members, gr->n_members, buf, sizeof buf);
        printf("  group %zu: members %s; opened by %s\n", g, buf, pft_topo_node(t, gr->opener)->id);
        size_t th = pft_secplan_threshold(pl), need = th > (size_t)pft_secplan_min_contributors(pl)
                                                          ? th
                                                          : (size_t)pft_secplan_min_contributors(pl);
        if (star)
            printf("  dropouts: recovered (every member hands off to %s: the survivors reveal their masks "
                   "with a member missing at the deadline, as long as %zu survive%s)\n",
                   pft_topo_node(t, gr->opener)->id, need,
                   t_drop ? "; under DP at most dp_dropouts of them"
                          : "; under DP none unless dp_dropouts > 0");
        if (star && th)
            printf("  double masking: secagg_threshold = %zu of %zu (each member's self-mask seed is shared "
                   "%zu-of-%zu; a lying opener alone cannot unmask a member, an opener with %zu colluding "
                   "member(s) can)\n",
                   th, gr->n_members, th, gr->n_members, th - 1);
        if (!star)
            printf("  dropouts: not recovered (a missing member stops %s; docs/SECAGG.md §5)\n",
                   pft_topo_node(t, gr->opener)->id);
        if (pft_secplan_degree(pl))
            printf(
                "  sparse masking: secagg_degree = %zu (each member pairs with %zu of the other %zu members "
                "and the opener; an opener with %zu colluding members around one member can unmask it, "
                "with fewer it learns only sums; docs/SECAGG.md §4.6)\n",
                pft_secplan_degree(pl), pft_secplan_degree(pl), gr->n_members - 1, pft_secplan_degree(pl));
        else if (gr->n_members > 2)
            printf("  masking: every member pairs with every other member and the opener (%zu keystreams "
                   "each; secagg_degree = k makes it k + 1)\n",
                   gr->n_members);
    }
    for (size_t v = 0; v < pft_topo_node_count(t); v++) {
        const pft_secplan_node_t *me = pft_secplan_node(pl, v);
        id_list(t, me->view, me->n_view, buf, sizeof buf);
        printf("  %-12s %-28s %-14s head sees %s\n", pft_topo_node(t, v)->id,
               me->mask_group >= 0 ? "masks its rows"
               : me->contributor   ? "adds its rows in the clear"
                                   : "no rows",
               me->opens >= 0 ? "opens the sum" : "", buf);
    }
}

/* What node v releases, in one line (the release pipeline it sets up: form, floor, DP, mask; DESIGN §8,
 * SECURITY.md): the text report and the JSON's "release". pl: the secure-aggregation plan or NULL. */
static void release_text(const pft_topo_t *t, const pft_secplan_t *pl, size_t v, char *buf, size_t cap)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    const pft_topo_node_t *nd = pft_topo_node(t, v);
    size_t used = 0;
#define PUT(...)                                                                                             \
    do {                                                                                                     \
        int w_ = used < cap ? snprintf(buf + used, cap - used, __VA_ARGS__) : 0;                             \
        used += w_ > 0 ? (size_t)w_ : 0;                                                                     \
    } while (0)
    buf[0] = '\0';
    int sends = 0;
    for (size_t k = 0; k < nd->n_stages; k++)
        sends |= nd->stages[k].n_send > 0;
    if (!sends) {
        PUT("sends nothing (its head only)");
        return;
    }
    if (nd->exact && nd->cov == PFT_COV_TIED && nd->dp_epsilon > 0)
        PUT("tied statistics with DP noise (SECURITY.md §6)");
    else if (nd->exact && nd->cov == PFT_COV_TIED && r->stats_release == PFT_TOPO_RELEASE_FULL_SCATTER)
        PUT("tied statistics, dense scatter (stats_release = full_scatter: research only)");
    else if (nd->exact && nd->cov == PFT_COV_TIED)
        PUT("tied statistics, scatter as <= min(rows/%d, %d) eigenpairs + diagonal (isotropic below %d rows)",
            r->stats_rows_per_rank, r->stats_rank, PFT_TOPO_RELEASE_MIN_DIAG_ROWS);
    else if (nd->exact)
        PUT("exact per-class Gaussians (cov = %s, k = 1)", cov_name(nd->cov));
    else
        PUT("mixtures k=%d cov=%s as %s", nd->k, cov_name(nd->cov), s_dtype_names[r->dtype]);
    if (nd->min_rows > 1)
        PUT("; floor %d rows", nd->min_rows);
    if (nd->dp_epsilon > 0) {
        PUT("; DP eps=%g delta=%g", nd->dp_epsilon, nd->dp_delta);
        if (!nd->exact)
            PUT(" (%s)", pft_dp_mech_name((pft_dp_mech_t)nd->dp_mech));
    }
    const pft_secplan_node_t *me = pl ? pft_secplan_node(pl, v) : NULL;
    if (me && me->mask_group >= 0)
        PUT("; own rows masked for %s",
            pft_topo_node(t, pft_secplan_group(pl, (size_t)me->mask_group)->opener)->id);
    else if (pl)
        PUT("; in the clear");
#undef PUT
}

/* The text report's release section: per node what it sends (release_text). */
static void print_release(const pft_topo_t *t, const pft_secplan_t *pl)
{
    char buf[512];
    printf("\nrelease (what each node sends):\n");
    for (size_t v = 0; v < pft_topo_node_count(t); v++) {
        release_text(t, pl, v, buf, sizeof buf);
        printf("  %-12s %s\n", pft_topo_node(t, v)->id, buf);
    }
}

static void print_text(const pft_topo_t *t, const pft_secplan_t *pl)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h), n = pft_topo_node_count(t);
    printf("%s: valid %s, %zu nodes, %zu hand-off%s, run '%s'\n", pft_topo_path(t),
           pft_kind_name(pft_topo_kind(t)), n, nh, nh == 1 ? "" : "s", r->run);
    if (r->start_id)
        printf("start: %s\n", r->start_id);
    if (r->root_id)
        printf("root: %s\n", r->root_id);
    printf("settings: k=%d cov=%s dtype=%s prep=%s seed=%llu deadline=%gs send_deadline=%gs on_missing=%s\n"
           "          max_iter=%d tol=%g reg_covar=%g n_init=%d head_c=%g em_draws=%d head_draws=%d "
           "mc_budget=%d max_bundle_mb=%d\n",
           r->k, cov_name(r->cov), s_dtype_names[r->dtype], s_prep_names[r->prep],
           (unsigned long long)r->seed, r->deadline, r->send_deadline, s_missing_names[r->on_missing],
           r->max_iter, r->tol, r->reg_covar, r->n_init, r->head_c, r->em_draws, r->head_draws, r->mc_budget,
           r->max_bundle_mb);
    if (r->dataset)
        printf("simulation: dataset=%s partition=%s samples=%d%s\n", r->dataset, r->partition, r->samples,
               r->samples ? " per node" : " (all of each share)");
    printf("\n%-12s %-9s %-26s %4s %-6s %-14s %-14s %s\n", "node", "role", "endpoint", "k", "cov", "preds",
           "succs", "fallback");
    for (size_t v = 0; v < n; v++) {
        const pft_topo_node_t *nd = pft_topo_node(t, v);
        char p[256], s[256], f[256];
        id_list(t, nd->preds, nd->n_preds, p, sizeof p);
        id_list(t, nd->succs, nd->n_succs, s, sizeof s);
        id_list(t, nd->fallbacks, nd->n_fallbacks, f, sizeof f);
        printf("%-12s %-9s %-26s %4d %-6s %-14s %-14s %s\n", nd->id, pft_role_name(nd->role),
               nd->endpoint ? nd->endpoint : "(launcher)", nd->k, cov_name(nd->cov), p, s, f);
    }
    print_data(t);
    printf("\nhand-offs:\n");
    for (size_t i = 0; i < nh; i++)
        printf("  %3zu. %s -> %s  lap %d  %s%s\n", h[i].seq, pft_topo_node(t, h[i].from)->id,
               pft_topo_node(t, h[i].to)->id, h[i].lap, pft_what_name(h[i].what),
               h[i].complete && h[i].what == PFT_WHAT_REFIT ? " (the complete bundle)" : "");
    size_t n_idle = 0;
    for (size_t e = 0; e < pft_topo_edge_count(t); e++) {
        const pft_topo_edge_t *ed = pft_topo_edge(t, e);
        if (!edge_idle(t, ed))
            continue;
        if (n_idle++ == 0)
            printf("\nidle edges (primary edges outside the %s's trees: no hand-off this run):\n",
                   pft_kind_name(pft_topo_kind(t)));
        printf("  %s -> %s (line %d)\n", pft_topo_node(t, ed->tail)->id, pft_topo_node(t, ed->head)->id,
               ed->line);
    }
    print_stages(t, h);
    print_release(t, pl);
    if (pl)
        print_secagg(t, pl);
}

static json_t *json_ids(const pft_topo_t *t, const size_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(pft_topo_node(t, v[i])->id));
    return a;
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *json_seqs(const pft_handoff_t *h, const size_t *idx, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)h[idx[i]].seq));
    return a;
}

/* The run's settings as a JSON object. */
static json_t *json_settings(const pft_topo_run_t *r)
{
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
    json_t *s = json_object();
    json_object_set_new(s, "k", json_integer(r->k));
    json_object_set_new(s, "cov", json_string(cov_name(r->cov)));
    json_object_set_new(s, "seed", json_string(seed)); /* a string: JSON numbers lose 64-bit precision */
    json_object_set_new(s, "dtype", json_string(s_dtype_names[r->dtype]));
    json_object_set_new(s, "prep", json_string(s_prep_names[r->prep]));
    json_object_set_new(s, "deadline", json_real(r->deadline));
    json_object_set_new(s, "send_deadline", json_real(r->send_deadline));
    json_object_set_new(s, "on_missing", json_string(s_missing_names[r->on_missing]));
    json_object_set_new(s, "max_iter", json_integer(r->max_iter));
    json_object_set_new(s, "tol", json_real(r->tol));
    json_object_set_new(s, "reg_covar", json_real(r->reg_covar));
    json_object_set_new(s, "n_init", json_integer(r->n_init));
    json_object_set_new(s, "head_c", json_real(r->head_c));
    json_object_set_new(s, "head_draws", json_integer(r->head_draws));
    json_object_set_new(s, "em_draws", json_integer(r->em_draws));
    json_object_set_new(s, "mc_budget", json_integer(r->mc_budget));
    json_object_set_new(s, "max_bundle_mb", json_integer(r->max_bundle_mb));
    json_object_set_new(s, "dataset", json_str_or_null(r->dataset));
    json_object_set_new(s, "partition", r->dataset ? json_string(r->partition) : json_null());
    json_object_set_new(s, "samples", json_integer(r->samples));
    json_object_set_new(s, "port_base", r->port_base ? json_integer(r->port_base) : json_null());
    return s;
}

/* Every node as a JSON object (its settings, neighbours and stages; h: the run's hand-offs), in file order.
 */
static json_t *json_nodes(const pft_topo_t *t, const pft_handoff_t *h, const pft_secplan_t *pl)
{
    size_t n = pft_topo_node_count(t);
    json_t *nodes = json_array();
    for (size_t v = 0; v < n; v++) {
        const pft_topo_node_t *nd = pft_topo_node(t, v);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(nd->id));
        json_object_set_new(o, "line", json_integer(nd->line));
        json_object_set_new(o, "role", json_string(pft_role_name(nd->role)));
        json_object_set_new(o, "endpoint", json_str_or_null(nd->endpoint));
        json_object_set_new(o, "k", json_integer(nd->k));
        json_object_set_new(o, "cov", json_string(cov_name(nd->cov)));
        json_object_set_new(o, "samples", json_integer(nd->samples));
        json_object_set_new(o, "domain", nd->domain >= 0 ? json_integer(nd->domain) : json_null());
        json_object_set_new(o, "classes", json_str_or_null(nd->classes));
        json_object_set_new(o, "train", json_str_or_null(nd->train));
        json_object_set_new(o, "labels", json_str_or_null(nd->labels));
        json_object_set_new(o, "test", json_str_or_null(nd->test));
        json_object_set_new(o, "test_labels", json_str_or_null(nd->test_labels));
        json_object_set_new(o, "preds", json_ids(t, nd->preds, nd->n_preds));
        json_object_set_new(o, "succs", json_ids(t, nd->succs, nd->n_succs));
        json_object_set_new(o, "fallback_succs", json_ids(t, nd->fallbacks, nd->n_fallbacks));
        json_object_set_new(o, "fallback_preds", json_ids(t, nd->fallback_preds, nd->n_fallback_preds));
        json_t *stages = json_array();
        for (size_t i = 0; i < nd->n_stages; i++) {
            const pft_stage_t *st = &nd->stages[i];
            json_t *so = json_object();
            json_object_set_new(so, "lap", json_integer(st->lap));
            json_object_set_new(so, "receive", json_seqs(h, st->recv, st->n_recv));
            json_object_set_new(so, "action", json_string(pft_what_name(st->action)));
            json_object_set_new(so, "send", json_seqs(h, st->send, st->n_send));
            json_object_set_new(so, "final", json_boolean(st->final));
            json_array_append_new(stages, so);
        }
        json_object_set_new(o, "stages", stages);
        char rel[512];
        release_text(t, pl, v, rel, sizeof rel);
        json_object_set_new(o, "release", json_string(rel));
        json_array_append_new(nodes, o);
    }
    return nodes;
}

static json_t *build_json(const pft_topo_t *t, const pft_secplan_t *pl)
{
    const pft_topo_run_t *r = pft_topo_run(t);
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h);
    json_t *root = json_object();
    json_object_set_new(root, "file", json_string(pft_topo_path(t)));
    json_object_set_new(root, "valid", json_true());
    json_object_set_new(root, "kind", json_string(pft_kind_name(pft_topo_kind(t))));
    json_object_set_new(root, "run", json_string(r->run));
    json_object_set_new(root, "start", json_str_or_null(r->start_id));
    json_object_set_new(root, "root", json_str_or_null(r->root_id));
    json_object_set_new(root, "settings", json_settings(r));
    json_object_set_new(root, "nodes", json_nodes(t, h, pl));
    json_t *hs = json_array();
    for (size_t i = 0; i < nh; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "seq", json_integer((json_int_t)h[i].seq));
        json_object_set_new(o, "from", json_string(pft_topo_node(t, h[i].from)->id));
        json_object_set_new(o, "to", json_string(pft_topo_node(t, h[i].to)->id));
        json_object_set_new(o, "lap", json_integer(h[i].lap));
        json_object_set_new(o, "what", json_string(pft_what_name(h[i].what)));
        json_object_set_new(o, "complete", json_boolean(h[i].complete));
        json_array_append_new(hs, o);
    }
    json_object_set_new(root, "handoffs", hs);
    json_t *idle = json_array(); /* primary edges without a hand-off (a mesh's edges outside its trees) */
    for (size_t e = 0; e < pft_topo_edge_count(t); e++) {
        const pft_topo_edge_t *ed = pft_topo_edge(t, e);
        if (edge_idle(t, ed))
            json_array_append_new(idle, json_pack("{s:s,s:s,s:i}", "from", pft_topo_node(t, ed->tail)->id,
                                                  "to", pft_topo_node(t, ed->head)->id, "line", ed->line));
    }
    json_object_set_new(root, "idle_edges", idle);
    return root;
}

static int emit_json(json_t *root)
{
    char *text =
        root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(root);
    if (!text) {
        fprintf(stderr, "pftnet check: out of memory\n");
        return 2;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

/* The topology's fingerprint as pftnode computes it (every node's key resolved) into out[cap]: 16 groups of 4
 * hex digits; 0, or an error (a key that cannot be read, ENOMEM) with out holding the reason. */
static int fingerprint_text(const pft_topo_t *t, char *out, size_t cap)
{
    size_t n = pft_topo_node_count(t);
    pft_pubkey_t *keys = pft_calloc(n ? n : 1, sizeof *keys);
    const uint8_t **ptr = pft_calloc(n ? n : 1, sizeof *ptr);
    int rc = keys && ptr ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (nd->key && (rc = pft_pubkey_resolve(nd->key, &keys[i])) != 0)
            pft_err_wrap(rc, "public key of node '%s'", nd->id);
        ptr[i] = nd->key ? keys[i].bytes : NULL;
    }
    pft_topo_fp_t *fp = NULL;
    if (!rc)
        rc = pft_topo_fp_new(t, ptr, &fp);
    char text[PFT_TOPO_FP_TEXT_LEN];
    snprintf(out, cap, "%s", rc ? pft_errmsg() : pft_topo_fp_text(pft_topo_fp_hash(fp), text));
    pft_topo_fp_destroy(&fp);
    pft_free(keys);
    pft_free(ptr);
    return rc;
}

/* Reports a topology that is not valid (file: the path given; msg: the reason; rule: the broken rule or
 * NULL) on stderr and, with --json, as {"valid": false, ...} on stdout. Returns the exit status: 2, or
 * PFT_EXIT_POLICY for a policy refusal (code PFT_EPOLICY), as pftnet launch does. */
static int report_invalid(const char *file, int json, int code, const char *rule)
{
    fprintf(stderr, "pftnet check: %s\n", pft_errmsg());
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(file));
        json_object_set_new(o, "valid", json_false());
        json_t *msg = json_string(pft_errmsg()); /* NULL if the message is not UTF-8 */
        json_object_set_new(o, "error", msg ? msg : json_string("(message is not UTF-8; see stderr)"));
        json_object_set_new(o, "rule", rule ? json_string(rule) : json_null());
        json_object_set_new(o, "policy", json_boolean(code == PFT_EPOLICY));
        emit_json(o);
    }
    return code == PFT_EPOLICY ? PFT_EXIT_POLICY : 2;
}

/* Loads the topology at path with --set/--seed applied and checks its rules (pft_topo_rules: the verdict
 * pftnet launch and pftnode give); *t and *pl (the secure-aggregation plan, or NULL) are new on success, and
 * *rows (new, or NULL: no data check, or a node's files not here) every node's training rows per class, *nc
 * classes each. Returns 0 or the exit status, the reason reported. */
static int load_checked(const char *path, unsigned flags, const pft_opt_list_t *set, const char *seed,
                        int json, pft_topo_t **t, pft_secplan_t **pl, uint64_t **rows, size_t *nc)
{
    *rows = NULL, *nc = 0;
    int rc = pft_topo_load(path, flags, t);
    if (rc == 0)
        rc = pft_topo_rules_apply_sets(*t, set->v, set->n, seed);
    if (rc) {
        pft_topo_destroy(t);
        return report_invalid(path, json, rc, NULL);
    }
    pft_topo_verdict_t v;
    rc = pft_topo_rules_check(*t, NULL, &v, pl);
    if (rc) {
        pft_err_wrap(rc, "%s", path);
        pft_topo_destroy(t);
        return report_invalid(path, json, rc, v.rule);
    }
    if (!(flags & PFT_TOPO_SKIP_DATA_CHECK) &&
        (rc = pft_launch_check_data(*t, rows, nc)) != 0) { /* as a launch loads */
        pft_secplan_destroy(pl);
        pft_topo_destroy(t);
        return report_invalid(path, json, rc, NULL);
    }
    return 0;
}

int pft_cmd_check(int argc, char **argv)
{
    int json = 0, no_data = 0, resolved = 0, attributes = 0, markdown = 0;
    pft_opt_list_t set = {0};
    const char *seed = NULL;
    const pft_opt_t opts[] = {
        {"json", PFT_OPT_FLAG, &json, NULL, 1, 0, 0, NULL, "print the result as JSON on stdout"},
        {"no-data-check", PFT_OPT_FLAG, &no_data, NULL, 1, 0, 0, NULL,
         "do not check that the dataset and data files exist"},
        {"resolved", PFT_OPT_FLAG, &resolved, NULL, 1, 0, 0, NULL,
         "require an endpoint on every node and every node's key or none (what pftnode needs of the others)"},
        {"attributes", PFT_OPT_FLAG, &attributes, NULL, 1, 0, 0, NULL,
         "list the topology attributes (name, scope, default, values, meaning) and exit"},
        {"markdown", PFT_OPT_FLAG, &markdown, NULL, 1, 0, 0, NULL,
         "with --attributes: print them as a Markdown table (the one in docs/USAGE.md)"},
        {"set", PFT_OPT_LIST, &set, NULL, 0, -1, 0, "NAME=VALUE",
         "override a graph attribute as pftnet launch --set does (nodes' own values still win)"},
        {"seed", PFT_OPT_STRING, &seed, NULL, 0, -1, 0, "N", "run seed (same as --set seed=N)"},
        {NULL, 0, NULL, NULL, 0, 0, 0, NULL, NULL},
    };
    const pft_cli_t cli = {
        .prog = "pftnet check",
        .positional = "TOPO.dot",
        .min_pos = 0,
        .max_pos = 1,
        .summary =
            "Validates a topology file (Graphviz DOT digraph) and prints its kind (chain, ring, dag, mesh),\n"
            "each node's role, predecessors, successors and effective settings, the numbered order of\n"
            "hand-offs and the idle edges (a mesh's primary edges that carry none), what each node releases\n"
            "and, with secure_agg, the plan. The rules between attributes are those pftnet launch and\n"
            "pftnode check, in the same words; what a valid run leaves open or loses (an exact ring's lap-2\n"
            "differencing, the rows the privacy floor would keep home, forecast from the data) is printed as\n"
            "warnings on stderr. Exit status 0 if valid, 2 with the reason on stderr if not,\n"
            "14 for a policy refusal (a class held by fewer than min_contributors members). `pftnet check\n"
            "--attributes` lists every attribute a topology may set instead (add --markdown for the table\n"
            "in docs/USAGE.md).",
        .opts = opts,
    };
    const char *pos[1] = {NULL};
    int n_pos = 0;
    int rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc == 1)
        return 0;
    if (rc)
        return 2;
    if (markdown && !attributes) {
        fprintf(stderr, "pftnet check: --markdown goes with --attributes (see --help)\n");
        return 2;
    }
    if (attributes) {
        if (markdown)
            print_attributes_markdown();
        else
            print_attributes();
        return 0;
    }
    if (n_pos < 1) {
        fprintf(stderr, "pftnet check: missing TOPO.dot (see --help)\n");
        return 2;
    }
    unsigned flags = (no_data ? PFT_TOPO_SKIP_DATA_CHECK : 0) | (resolved ? PFT_TOPO_REQUIRE_RESOLVED : 0);
    pft_topo_t *t = NULL;
    pft_secplan_t *pl = NULL;
    uint64_t *rows = NULL;
    size_t nc = 0;
    if ((rc = load_checked(pos[0], flags, &set, seed, json, &t, &pl, &rows, &nc)) != 0)
        return rc;
    char fp[512];
    int fp_rc = fingerprint_text(t, fp, sizeof fp);
    pft_topo_verdict_t warn[4];
    const pft_topo_facts_t facts = {.n_classes = nc, .class_rows = rows};
    size_t n_warn = pft_topo_rules_warnings(t, &facts, warn, 4);
    pft_free(rows);
    for (size_t i = 0; i < n_warn; i++) /* on stderr, where a valid topology prints nothing else */
        fprintf(stderr, "pftnet check: %s\n", warn[i].text);
    if (json) {
        json_t *root = build_json(t, pl), *wa = json_array();
        for (size_t i = 0; wa && i < n_warn; i++)
            json_array_append_new(wa, json_pack("{s:s,s:s,s:s}", "rule", warn[i].rule, "node", warn[i].node,
                                                "text", warn[i].text));
        if (root) {
            json_object_set_new(root, "fingerprint", fp_rc ? json_null() : json_string(fp));
            if (fp_rc)
                json_object_set_new(root, "fingerprint_error", json_string(fp));
            json_object_set_new(root, "warnings", wa ? wa : json_array());
        } else
            json_decref(wa);
        rc = emit_json(root);
    } else {
        print_text(t, pl);
        printf("\nfingerprint: %s%s%s\n", fp_rc ? "unavailable (" : "", fp, fp_rc ? ")" : "");
    }
    pft_secplan_destroy(&pl);
    pft_topo_destroy(&t);
    return rc;
}
