/* pft_launch_collect: step 4 of a launch: every node's result.json, the fallback hand-offs and the baselines
 * into DIR/results.json, the table and the summary of failures. */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_baseline.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every node's result.json in file order (a stub naming its status when it has none), with max_rss_kb. */
static json_t *collect_nodes(const pft_launch_t *self)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        char *p = pft_fsio_join(c->dir, "result.json");
        json_error_t err;
        json_t *r = p ? json_load_file(p, 0, &err) : NULL;
        if (!r)
            r = json_pack("{s:s,s:s}", "id", c->id, "status", c->absent ? "absent" : "no result.json");
        /* the node's own VmHWM when it reported one: wait4's figure includes the launcher's size at fork */
        json_t *own = json_object_get(r, "peak_rss_kb");
        json_object_set_new(r, "max_rss_kb",
                            json_integer(json_is_integer(own) && json_integer_value(own) > 0
                                             ? json_integer_value(own)
                                             : c->max_rss_kb));
        if (c->host[0]) /* the Slurm task's host */
            json_object_set_new(r, "host", json_string(c->host));
        json_array_append_new(nodes, r);
        pft_free(p);
    }
    return nodes;
}

json_t *pft_launch__fallbacks(json_t *nodes, int show)
{
    json_t *fallbacks = json_array();
    size_t ni;
    json_t *nr;
    json_array_foreach(nodes, ni, nr)
    {
        size_t si;
        json_t *sv;
        json_array_foreach(json_object_get(nr, "sent"), si, sv)
        {
            json_t *ff = json_object_get(sv, "fallback_for");
            if (!ff)
                continue;
            json_array_append_new(fallbacks, json_pack("{s:O,s:O,s:O,s:O}", "from", json_object_get(nr, "id"),
                                                       "to", json_object_get(sv, "to"), "instead_of", ff,
                                                       "state", json_object_get(sv, "state")));
            if (show)
                fprintf(stderr, "fallback: %s -> %s instead of %s (%s)\n",
                        json_string_value(json_object_get(nr, "id")),
                        json_string_value(json_object_get(sv, "to")), json_string_value(ff),
                        json_string_value(json_object_get(sv, "state")));
        }
    }
    return fallbacks;
}

/* The baselines on the union of all test splits into out, after the nodes so they do not compete for the
 * CPU. Preprocesses eval and the nodes' rows in place. */
static int run_baselines(pft_launch_t *self, json_t *out)
{
    const pft_topo_run_t *br = pft_topo_run(self->topo);
    pft_baseline_node_t *bn = pft_calloc(self->nn, sizeof *bn);
    if (!self->o.quiet && !self->o.json)
        fprintf(stderr, "computing baselines (centralized, local-only, ensemble, average, KD)...\n");
    int rc =
        bn ? pft_dataset_apply_prep(self->eval, (pft_prep_t)br->prep) : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < self->nn && rc == 0; i++) {
        pft_launch_child_t *c = &self->ch[i];
        bn[i] = (pft_baseline_node_t){.id = c->id, .train = c->train};
        if (c->train)
            rc = pft_dataset_apply_prep(c->train, (pft_prep_t)br->prep);
    }
    if (rc == 0)
        rc = pft_baseline_all(bn, (int)self->nn, self->eval, pft_dataset_n_classes(self->eval), br->head_c,
                              pft_baseline_destination(self->topo), br->seed, out);
    pft_free(bn);
    return rc;
}

static const char *cov_name(int c)
{
    const char *name = pft_cov_name((pft_cov_t)c);
    return name ? name : "?";
}

/* The run's defaults carry exact statistics (topology's rule). */
static int run_exact(const pft_topo_run_t *r)
{
    return pft_topo_exact(r->cov, r->k, r->merge);
}

static const char *head_name(const pft_topo_run_t *r)
{
    return pft_topo_head_name(pft_topo_head_resolve(r->head, run_exact(r)));
}

/* The method label of a run: "FedPFT <cov> K=<k>" (+ rank, DP) from the run's defaults. */
static void default_variant(const pft_topo_t *topo, char *buf, size_t cap)
{
    const pft_topo_run_t *r = pft_topo_run(topo);
    int c = (int)r->cov;
    if (run_exact(r)) {
        int off = snprintf(buf, cap, "Exact %s (%s head)", c == PFT_COV_TIED ? "tied" : "full", head_name(r));
        if (r->dp_epsilon > 0 && off > 0 && (size_t)off < cap)
            snprintf(buf + off, cap - (size_t)off, ", DP eps=%g delta=%g", r->dp_epsilon, r->dp_delta);
        return;
    }
    int off = snprintf(buf, cap, "FedPFT %s", cov_name(c));
    if (c == 3 && off > 0 && (size_t)off < cap)
        off += snprintf(buf + off, cap - (size_t)off, " q=%d", r->cov_rank);
    if (off > 0 && (size_t)off < cap)
        off += snprintf(buf + off, cap - (size_t)off, " K=%d", r->k);
    if (r->dp_epsilon > 0 && off > 0 && (size_t)off < cap)
        snprintf(buf + off, cap - (size_t)off, ", DP eps=%g delta=%g", r->dp_epsilon, r->dp_delta);
}

/* The run's settings as results.json records them. */
static json_t *settings_json(const pft_topo_run_t *run)
{
    const char *prep = run->prep == PFT_TOPO_PREP_NONE ? "none"
                       : run->prep == PFT_TOPO_PREP_L2 ? "l2"
                                                       : "sqrt-l2";
    json_t *o =
        json_pack("{s:i,s:s,s:s,s:s,s:i,s:i,s:f,s:s,s:i}", "k", run->k, "cov", cov_name((int)run->cov),
                  "dtype", run->dtype == PFT_TOPO_FP32 ? "fp32" : "fp16", "prep", prep, "em_draws",
                  run->em_draws, "head_draws", run->head_draws, "dp_epsilon", run->dp_epsilon, "partition",
                  run->partition ? run->partition : "", "samples", run->samples);
    if (o) {
        json_object_set_new(o, "mc_budget", json_integer(run->mc_budget));
        json_object_set_new(o, "dp_delta", run->dp_epsilon > 0 ? json_real(run->dp_delta) : json_null());
        json_object_set_new(o, "head", json_string(head_name(run)));
        json_object_set_new(o, "merge",
                            json_string(run->merge == PFT_TOPO_MERGE_SAMPLE ? "sample" : "exact"));
        json_object_set_new(o, "exact", json_boolean(run_exact(run)));
        json_object_set_new(o, "stats_dtype",
                            json_string(run->stats_dtype == PFT_TOPO_FP16 ? "fp16" : "fp32"));
        json_object_set_new(o, "stats_rank", json_integer(run->stats_rank));
        json_object_set_new(o, "stats_rows_per_rank", json_integer(run->stats_rows_per_rank));
        json_object_set_new(o, "stats_release", json_string(run->stats_release ? "full_scatter" : "lowrank"));
        json_object_set_new(o, "min_rows", json_integer(run->min_rows));
        json_object_set_new(o, "secure_agg", json_boolean(run->secure_agg));
    }
    return o;
}

/* The whole of results.json; takes fallbacks, borrows nodes and baselines. */
static json_t *results_json(const pft_launch_results_t *r, json_t *nodes, json_t *baselines,
                            json_t *fallbacks)
{
    const pft_topo_run_t *run = pft_topo_run(r->topo);
    char variant[160];
    default_variant(r->topo, variant, sizeof variant);
    const char *tag = r->tag ? r->tag : run->name ? run->name : run->run;
    return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:i,s:f,s:o,s:O,s:O,s:o}", "topology", r->topo_path, "run",
                     run->run ? run->run : "", "tag", tag, "variant", r->variant ? r->variant : variant,
                     "seed", (json_int_t)run->seed, "kind", pft_kind_name(pft_topo_kind(r->topo)), "n_nodes",
                     (int)json_array_size(nodes), "wall_seconds", r->wall, "settings", settings_json(run),
                     "nodes", nodes, "baselines", baselines, "fallbacks", fallbacks);
}

json_t *pft_launch__results_json(const pft_launch_results_t *r, json_t *nodes, json_t *baselines,
                                 json_t *fallbacks, int *lost)
{
    const size_t *order;
    size_t n_order = pft_topo_order(r->topo, &order);
    for (size_t h = 0; h < n_order; h++)
        json_object_set_new(json_array_get(nodes, order[h]), "hop", json_integer((json_int_t)h));
    json_t *handoffs = NULL;
    *lost = pft_launch_reconcile(nodes, &handoffs, !r->json);
    json_t *res = results_json(r, nodes, baselines, fallbacks);
    json_object_set_new(res, "handoffs", handoffs);
    return res;
}

static double jnum(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* v with prec decimals, or "-" where the node has none (it failed or was stopped). */
static const char *cell(char *buf, size_t cap, int prec, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.*f", prec, v);
    return buf;
}

#define TABLE_ROWS 20 /* nodes printed at most; the full table goes to DIR/table.txt */

static void table_row(FILE *f, json_t *n)
{
    json_t *id = json_object_get(n, "id"), *role = json_object_get(n, "role");
    if (!role)
        role = json_object_get(n, "status");
    char c[8][40];
    fprintf(f, "%-12s %-9s %9s %9s %7s %7s %11s %11s %6s %7s\n", json_string_value(id),
            role ? json_string_value(role) : "?", cell(c[0], 40, 4, jnum(n, "accuracy_local")),
            cell(c[1], 40, 4, jnum(n, "accuracy_global")), cell(c[2], 40, 0, jnum(n, "n_real")),
            cell(c[3], 40, 0, jnum(n, "n_synthetic")), cell(c[4], 40, 0, jnum(n, "bytes_sent")),
            cell(c[5], 40, 0, jnum(n, "bytes_received")), cell(c[6], 40, 1, jnum(n, "em_iters_mean")),
            cell(c[7], 40, 2, jnum(n, "em_seconds")));
}

/* Marks in pick the k nodes with the lowest (sign 1) or highest (sign -1) value of key; NaN counts as worst.
 */
static void pick_extremes(json_t *nodes, const char *key, int sign, int k, unsigned char *pick)
{
    size_t nn = json_array_size(nodes);
    for (int r = 0; r < k; r++) {
        size_t best = nn;
        double bv = 0;
        for (size_t i = 0; i < nn; i++) {
            double v = jnum(json_array_get(nodes, i), key);
            v = isnan(v) ? -INFINITY * sign : v * sign;
            if (pick[i] & 2)
                continue;
            if (best == nn || v < bv)
                best = i, bv = v;
        }
        if (best < nn)
            pick[best] |= 3; /* 1: shown, 2: taken in this ranking */
    }
    for (size_t i = 0; i < nn; i++)
        pick[i] &= 1;
}

/* The table of nodes into f; with limit, at most about TABLE_ROWS of them: the first and last five, the five
 * least accurate and the five with the slowest heads, in file order. Returns how many were left out. */
static size_t print_nodes(FILE *f, json_t *nodes, int limit)
{
    size_t nn = json_array_size(nodes), left = 0;
    unsigned char *pick = calloc(nn ? nn : 1, 1);
    fprintf(f, "%-12s %-9s %9s %9s %7s %7s %11s %11s %6s %7s\n", "node", "role", "acc_local", "acc_glob",
            "n_real", "n_synth", "bytes_sent", "bytes_recv", "em_it", "em_s");
    for (size_t i = 0; i < nn; i++)
        if (pick)
            pick[i] = !limit || nn <= TABLE_ROWS || i < 5 || i + 5 >= nn;
    if (pick && limit && nn > TABLE_ROWS) {
        pick_extremes(nodes, "accuracy_global", 1, 5, pick);
        pick_extremes(nodes, "head_seconds", -1, 5, pick);
    }
    for (size_t i = 0; i < nn; i++) {
        if (pick && !pick[i]) {
            left++;
            continue;
        }
        table_row(f, json_array_get(nodes, i));
    }
    free(pick);
    return left;
}

static void print_table(const pft_launch_results_t *r, json_t *nodes, json_t *baselines)
{
    size_t left = print_nodes(stdout, nodes, 1);
    char *tp = pft_fsio_join(r->out_dir, "table.txt");
    FILE *f = tp ? fopen(tp, "w") : NULL;
    if (f) {
        print_nodes(f, nodes, 0);
        fclose(f);
    }
    if (left)
        printf("... %zu more nodes (the first and last five, the five least accurate and the five slowest "
               "heads are "
               "shown); every node: %s\n",
               left, tp ? tp : "table.txt");
    pft_free(tp);
    if (baselines && json_object_get(baselines, "centralized")) {
        printf("baselines on the union of test splits: centralized %.4f, local-only mean %.4f",
               jnum(baselines, "centralized"), jnum(baselines, "local_only_mean"));
        if (json_is_number(json_object_get(baselines, "centralized_gaussian")))
            printf(", centralized gaussian %.4f", jnum(baselines, "centralized_gaussian"));
        if (json_is_number(json_object_get(baselines, "ensemble")))
            printf(", ensemble %.4f, average %.4f", jnum(baselines, "ensemble"), jnum(baselines, "average"));
        if (json_is_number(json_object_get(baselines, "kd")))
            printf(", KD %.4f (T=%g, into %s)", jnum(baselines, "kd"), jnum(baselines, "kd_temperature"),
                   json_string_value(json_object_get(baselines, "kd_node")) ?: "?");
        printf("\n");
    }
}

int pft_launch__write_results(const pft_launch_results_t *r, json_t *res)
{
    json_t *nodes = json_object_get(res, "nodes"), *baselines = json_object_get(res, "baselines");
    char *rp = pft_fsio_join(r->out_dir, "results.json");
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    int rc =
        rp && text ? pft_fsio_write_atomic(rp, text, strlen(text)) : pft_err(PFT_ENOMEM, "out of memory");
    if (r->json)
        printf("%s\n", text ? text : "{}");
    else
        print_table(r, nodes, baselines);
    if (!r->quiet && !r->json)
        fprintf(stderr, "results: %s (%.1fs)\n", rp ? rp : "?", r->wall);
    free(text);
    pft_free(rp);
    return rc;
}

/* The last line: why nodes did not finish, if any did not. */
static void print_summary(const pft_launch_t *self)
{
    size_t nn = self->nn, n_absent = 0;
    for (size_t i = 0; i < nn; i++)
        n_absent += self->ch[i].absent != 0;
    if (self->stop_cause)
        fprintf(stderr, "pftnet launch: stopped (%s); %d of %zu started nodes did not finish\n",
                self->stop_cause, self->failed, nn - n_absent);
    else if (self->failed && self->n_stopped)
        fprintf(stderr, "pftnet launch: %d of %zu nodes failed; %d more stopped by the launcher\n",
                self->failed - self->n_stopped, nn, self->n_stopped);
    else if (self->failed)
        fprintf(stderr, "pftnet launch: %d of %zu nodes failed\n", self->failed, nn);
}

/* 1 if id is one of --absent's nodes. */
static int is_absent(const pft_launch_t *self, const char *id)
{
    for (size_t i = 0; i < self->nn; i++)
        if (self->ch[i].absent && strcmp(self->ch[i].id, id) == 0)
            return 1;
    return 0;
}

/* Names every degraded node (status "degraded": it went on without a predecessor, on_missing = proceed) and
 * what it went on without; returns how many of them went on without a node that was not --absent. */
static int report_degraded(const pft_launch_t *self, json_t *nodes)
{
    int unexpected = 0;
    size_t i, j;
    json_t *r, *m;
    json_array_foreach(nodes, i, r)
    {
        const char *st = json_string_value(json_object_get(r, "status"));
        if (!st || strcmp(st, "degraded") != 0)
            continue;
        int asked = 1;
        fprintf(stderr, "pftnet launch: node %s is degraded: it went on without",
                json_string_value(json_object_get(r, "id")));
        json_array_foreach(json_object_get(r, "missing"), j, m)
        {
            const char *id = json_string_value(m);
            fprintf(stderr, "%s %s", j ? "," : "", id ? id : "?");
            asked &= id && is_absent(self, id);
        }
        fprintf(stderr, "%s\n", asked ? " (--absent)" : " (on_missing = proceed; results.json \"missing\")");
        unexpected += !asked;
    }
    return unexpected;
}

/* After a failure: the command that continues the run from what its nodes stored. */
static void suggest_resume(const pft_launch_t *self)
{
    fprintf(stderr,
            "pftnet launch: the nodes' saved state is kept; to continue: pftnet launch %s --out %s --resume",
            self->o.topo_path, self->o.out_dir);
    for (int i = 0; i < self->o.set.n; i++)
        fprintf(stderr, " --set %s", self->o.set.v[i]);
    if (self->o.seed)
        fprintf(stderr, " --seed %s", self->o.seed);
    fprintf(stderr, "\n");
}

int pft_launch_collect(pft_launch_t *self, int *exit_code)
{
    json_t *nodes = collect_nodes(self), *baselines = json_object();
    json_t *fallbacks = pft_launch__fallbacks(nodes, !self->o.quiet && !self->o.json);
    json_object_set_new(baselines, "handoffs",
                        json_integer((json_int_t)pft_topo_handoffs(self->topo, &(const pft_handoff_t *){0})));
    int rc = 0;
    if (!self->o.no_baselines && self->eval && self->failed < (int)self->nn)
        rc = run_baselines(self, baselines);
    if (rc) {
        json_decref(nodes);
        json_decref(baselines);
        json_decref(fallbacks);
        return rc;
    }
    const pft_launch_results_t r = {.topo = self->topo,
                                    .topo_path = self->o.topo_path,
                                    .out_dir = self->o.out_dir,
                                    .tag = self->o.tag,
                                    .variant = self->o.variant,
                                    .wall = self->wall,
                                    .json = self->o.json,
                                    .quiet = self->o.quiet};
    int lost;
    json_t *res = pft_launch__results_json(&r, nodes, baselines, fallbacks, &lost);
    pft_launch__write_results(&r, res);
    json_decref(res);
    json_decref(baselines);
    print_summary(self);
    if (lost)
        fprintf(stderr, "pftnet launch: %d hand-off%s not completed (above; results.json handoffs)\n", lost,
                lost == 1 ? "" : "s");
    int degraded = self->degraded ? report_degraded(self, nodes) : 0;
    if (degraded && !self->o.allow_degraded)
        fprintf(stderr, "pftnet launch: %d node%s degraded (exit 1; --allow-degraded accepts it)\n", degraded,
                degraded == 1 ? "" : "s");
    json_decref(nodes);
    *exit_code = self->failed || lost || (degraded && !self->o.allow_degraded) ? 1 : 0;
    if ((self->failed || lost) && !self->o.json)
        suggest_resume(self);
    return 0;
}
