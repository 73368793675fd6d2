/* pft_report_exp: one experiment (all runs and synth lines of one tag) summarised over seeds: the comparison
 * table (baselines and FedPFT variants), per-node figures per variant, and the synth family table.
 *
 * Baselines do not depend on the FedPFT variant: for each seed they are read from the first run of that seed
 * that has them (variants after the first are usually run with --no-baselines).
 * A FedPFT run's accuracy is the mean accuracy_global of its final nodes (the sinks of a chain or DAG; every
 * node of a ring or mesh, where all end with everyone's knowledge), its bytes the sum of bytes_sent over its
 * nodes. */
#include "pft_report_exp.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* Appends ", text" (or text when buf is empty); ends in "…" once buf is full. */
static void list_append(char *buf, size_t cap, const char *text)
{
    size_t used = strlen(buf);
    const char *ellipsis = "…";
    if (used >= cap - strlen(ellipsis) - 1 || strstr(buf, ellipsis))
        return;
    size_t need = strlen(text) + (used ? 2 : 0);
    if (used + need + strlen(ellipsis) + 1 > cap) {
        strcat(buf, ellipsis);
        return;
    }
    if (used)
        strcat(buf, ", ");
    strcat(buf, text);
}

static void list_append_ll(char *buf, size_t cap, long long v)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", v);
    list_append(buf, cap, t);
}

/* ---- baselines ------------------------------------------------------------------------------------------
 */

typedef struct {
    const char *key;       /* accuracy key in "baselines" */
    const char *bytes_key; /* bytes key, or NULL: nothing communicated (0 B) */
    const char *label;
} baseline_def_t;

static const baseline_def_t s_baselines[] = {
    {"centralized", "centralized_bytes", "Centralized"},
    /* the Gaussian (LDA) head on the same raw rows, shrinkage by cross-validation over them: the head every
     * node of an exact-statistics run should end with */
    {"centralized_gaussian", "centralized_bytes", "Centralized Gaussian (LDA)"},
    {"local_only_mean", NULL, "Local only (mean of nodes)"},
    {"ensemble", "ensemble_bytes", "Ensemble"},
    {"average", "average_bytes", "Average"},
    {"kd", "kd_bytes", "KD"},
};

/* Local-only mean of one seed: "local_only_mean", else the mean over "local_only". */
static double local_only_mean(const json_t *b)
{
    double v = jnum(b, "local_only_mean");
    if (!isnan(v))
        return v;
    pft_stats_t s = {0};
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(b, "local_only"), i, e)
    {
        pft_stats_add(&s, jnum(e, "accuracy_global"));
    }
    return pft_stats_mean(&s);
}

static int baseline_present(const json_t *b, const baseline_def_t *d)
{
    if (strcmp(d->key, "local_only_mean") == 0)
        return json_object_get(b, d->key) || json_object_get(b, "local_only");
    return json_object_get(b, d->key) != NULL;
}

/* KD's label ("KD (T=5)", per-seed choices when they differ) and the best-on-test note. */
static void kd_summary(pft_report_exp_t *e, const json_t *const *bl, size_t n, pft_report_row_t *row)
{
    char ts[64] = "";
    int same = 1;
    double first = NAN;
    for (size_t s = 0; s < n; s++) {
        double t = jnum(bl[s], "kd_temperature");
        if (isnan(t))
            continue;
        if (isnan(first))
            first = t;
        same &= t == first;
        char one[32];
        snprintf(one, sizeof one, "%g", t);
        list_append(ts, sizeof ts, one);
        if (!e->kd_node)
            e->kd_node = jstr(bl[s], "kd_node");
        const json_t *by = json_object_get(bl[s], "kd_by_temperature");
        const char *bt = NULL, *key;
        double best = NAN;
        const json_t *v;
        json_object_foreach((json_t *)by, key, v)
        {
            if (json_is_number(v) && (isnan(best) || json_number_value(v) > best ||
                                      (json_number_value(v) == best && atof(key) < atof(bt)))) {
                best = json_number_value(v);
                bt = key;
            }
        }
        if (bt) {
            pft_stats_add(&e->kd_best, best);
            list_append(e->kd_best_t, sizeof e->kd_best_t, bt);
        }
    }
    if (isnan(first))
        snprintf(row->label, sizeof row->label, "KD");
    else if (same)
        snprintf(row->label, sizeof row->label, "KD (T=%g)", first);
    else
        snprintf(row->label, sizeof row->label, "KD (T=%s by seed)", ts);
}

/* A new zeroed row at the end of e->rows, or NULL when out of memory. */
static pft_report_row_t *add_row(pft_report_exp_t *e, size_t *cap)
{
    if (e->n_rows == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        pft_report_row_t *p = pft_realloc(e->rows, nc * sizeof *p);
        if (!p)
            return NULL;
        e->rows = p;
        *cap = nc;
    }
    pft_report_row_t *row = &e->rows[e->n_rows++];
    memset(row, 0, sizeof *row);
    return row;
}

static int build_baselines(pft_report_exp_t *e, const json_t *const *bl, size_t n, size_t *cap)
{
    for (size_t d = 0; d < sizeof s_baselines / sizeof *s_baselines; d++) {
        const baseline_def_t *def = &s_baselines[d];
        int present = 0;
        for (size_t s = 0; s < n; s++)
            present |= baseline_present(bl[s], def);
        if (!present)
            continue;
        pft_report_row_t *row = add_row(e, cap);
        if (!row)
            return pft_err(PFT_ENOMEM, "out of memory");
        snprintf(row->label, sizeof row->label, "%s", def->label);
        for (size_t s = 0; s < n; s++) {
            if (!baseline_present(bl[s], def))
                continue;
            double acc = def->bytes_key ? jnum(bl[s], def->key) : local_only_mean(bl[s]);
            pft_stats_add(&row->acc, acc);
            if (!isnan(acc))
                pft_stats_add(&row->bytes, def->bytes_key ? jnum(bl[s], def->bytes_key) : 0.0);
        }
        if (strcmp(def->key, "centralized") == 0)
            e->centralized_row = (int)(e->n_rows - 1);
        if (strcmp(def->key, "centralized_gaussian") == 0) {
            e->centralized_gaussian_row = (int)(e->n_rows - 1);
            for (size_t s = 0; s < n; s++) {
                double a = jnum(bl[s], "centralized_gaussian_alpha");
                char one[32];
                snprintf(one, sizeof one, "%g", a);
                if (!isnan(a))
                    list_append(e->cg_alpha, sizeof e->cg_alpha, one);
            }
        }
        if (strcmp(def->key, "kd") == 0) {
            e->kd_row = (int)(e->n_rows - 1);
            kd_summary(e, bl, n, row);
        }
    }
    return 0;
}

/* ---- variants -------------------------------------------------------------------------------------------
 */

static int is_final(const pft_report_exp_t *e, const json_t *node)
{
    const char *role = jstr(node, "role");
    return e->final_all || (role && strcmp(role, "sink") == 0);
}

/* The last drift entry of kind ("received"/"sent"). */
static double drift_of(const json_t *node, const char *kind)
{
    double v = NAN;
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(node, "drift"), i, d)
    {
        const char *b = jstr(d, "bundle");
        if (b && strcmp(b, kind) == 0)
            v = jnum(d, "own_avg_loglik");
    }
    return v;
}

static double local_only_of(const json_t *baselines, const char *id)
{
    size_t i;
    const json_t *l;
    json_array_foreach(json_object_get(baselines, "local_only"), i, l)
    {
        const char *lid = jstr(l, "id");
        if (lid && strcmp(lid, id) == 0)
            return jnum(l, "accuracy_global");
    }
    return NAN;
}

static pft_report_node_t *find_or_add_node(pft_report_variant_t *v, size_t *cap, const char *id)
{
    for (size_t i = 0; i < v->n_nodes; i++)
        if (strcmp(v->nodes[i].id, id) == 0)
            return &v->nodes[i];
    if (v->n_nodes == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        pft_report_node_t *p = pft_realloc(v->nodes, nc * sizeof *p);
        if (!p)
            return NULL;
        v->nodes = p;
        *cap = nc;
    }
    pft_report_node_t *n = &v->nodes[v->n_nodes++];
    memset(n, 0, sizeof *n);
    n->id = id;
    n->hop = -1;
    return n;
}

static int add_run_nodes(const pft_report_exp_t *e, pft_report_variant_t *v, size_t *cap, const json_t *root,
                         const json_t *baselines)
{
    size_t i;
    const json_t *nd;
    json_array_foreach(json_object_get(root, "nodes"), i, nd)
    {
        pft_report_node_t *n = find_or_add_node(v, cap, jstr(nd, "id"));
        if (!n)
            return pft_err(PFT_ENOMEM, "out of memory");
        if (n->hop < 0) {
            const json_t *hop = json_object_get(nd, "hop");
            n->hop = json_is_integer(hop) ? (int)json_integer_value(hop) : (int)i;
            n->role = jstr(nd, "role") ? jstr(nd, "role") : "?";
        }
        const char *status = jstr(nd, "status");
        if (!status || strcmp(status, "ok") != 0) {
            n->n_failed++;
            if (!n->status)
                n->status = status ? status : "no status";
        }
        pft_stats_add(&n->acc, jnum(nd, "accuracy_global"));
        pft_stats_add(&n->local_only, local_only_of(baselines, n->id));
        const json_t *prov = json_object_get(nd, "provenance");
        pft_stats_add(&n->knowledge, json_is_array(prov) ? (double)json_array_size(prov) : NAN);
        pft_stats_add(&n->real, jnum(nd, "n_real"));
        pft_stats_add(&n->synthetic, jnum(nd, "n_synthetic"));
        pft_stats_add(&n->drift_recv, drift_of(nd, "received"));
        pft_stats_add(&n->drift_sent, drift_of(nd, "sent"));
        pft_stats_add(&n->bytes_sent, jnum(nd, "bytes_sent"));
        const json_t *gh = json_object_get(nd, "gaussian_head");
        pft_stats_add(&n->alpha, jnum(gh, "alpha"));
        if (is_final(e, nd))
            pft_stats_add(&v->final_alpha, jnum(gh, "alpha"));
        if (!v->cov)
            v->cov = jstr(nd, "cov");
        if (!v->gaussian && jstr(gh, "kind")) {
            v->gaussian = jstr(gh, "kind");
            v->alpha_rule = jstr(gh, "rule");
        }
    }
    return 0;
}

/* Sorts by hop, ties kept in order of first appearance (insertion sort: stable, n small). */
static void sort_nodes(pft_report_variant_t *v)
{
    for (size_t i = 1; i < v->n_nodes; i++) {
        pft_report_node_t t = v->nodes[i];
        size_t j = i;
        for (; j > 0 && v->nodes[j - 1].hop > t.hop; j--)
            v->nodes[j] = v->nodes[j - 1];
        v->nodes[j] = t;
    }
}

/* FedPFT's accuracy and bytes of one run. */
static void run_figures(const pft_report_exp_t *e, const json_t *root, double *acc, double *bytes)
{
    pft_stats_t a = {0};
    double b = 0;
    int any_bytes = 0;
    size_t i;
    const json_t *nd;
    json_array_foreach(json_object_get(root, "nodes"), i, nd)
    {
        if (is_final(e, nd))
            pft_stats_add(&a, jnum(nd, "accuracy_global"));
        double s = jnum(nd, "bytes_sent");
        if (!isnan(s)) {
            b += s;
            any_bytes = 1;
        }
    }
    *acc = pft_stats_mean(&a);
    *bytes = any_bytes ? b : NAN;
}

/* 1 if run b is a seed of variant v: the same variant name and the same settings (a run of the old format,
 * without settings, matches on its name). */
static int same_group(const pft_report_variant_t *v, const pft_report_run_t *b)
{
    const json_t *sb = json_object_get(b->root, "settings");
    return strcmp(v->name, b->variant) == 0 && (!v->settings || !sb || json_equal(v->settings, sb));
}

/* 1 if a node of run root did not finish (its status is neither "ok" nor "absent"). */
static int run_failed(const json_t *root)
{
    size_t i;
    const json_t *nd;
    json_array_foreach(json_object_get(root, "nodes"), i, nd)
    {
        const char *st = jstr(nd, "status");
        if (!st || (strcmp(st, "ok") != 0 && strcmp(st, "absent") != 0))
            return 1;
    }
    return 0;
}

/* v's settings that differ from those of another variant of the same name, as " (k=v, ...)" after its name;
 * the name alone when no other variant has it. */
static void distinct_name(pft_report_variant_t *v, const pft_report_variant_t *all, size_t n)
{
    int off = snprintf(v->name_buf, sizeof v->name_buf, "%s", v->name), first = 1;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v->settings, key, val)
    {
        int differs = 0;
        for (size_t j = 0; j < n && !differs; j++)
            if (&all[j] != v && strcmp(all[j].name, v->name) == 0)
                differs = !json_equal(val, json_object_get(all[j].settings, key));
        if (!differs || off <= 0 || (size_t)off >= sizeof v->name_buf)
            continue;
        char *text = json_is_string(val) ? NULL : json_dumps(val, JSON_ENCODE_ANY);
        off += snprintf(v->name_buf + off, sizeof v->name_buf - (size_t)off, "%s%s=%s", first ? " (" : ", ",
                        key, text ? text : json_string_value(val));
        free(text);
        first = 0;
    }
    if (!first && off > 0 && (size_t)off < sizeof v->name_buf)
        snprintf(v->name_buf + off, sizeof v->name_buf - (size_t)off, ")");
}

/* v->seeds: its runs' seeds in order of first appearance, a repeated one as "0 (×3)". */
static void seed_list(pft_report_variant_t *v, const pft_report_run_t *const *runs, const size_t *grp,
                      size_t vi, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        size_t times = 0, earlier = 0;
        for (size_t q = 0; q < n; q++)
            if (grp[q] == vi && runs[q]->seed == runs[r]->seed)
                times++, earlier += q < r;
        if (grp[r] != vi || earlier)
            continue;
        char t[48];
        if (times > 1)
            snprintf(t, sizeof t, "%lld (×%zu)", runs[r]->seed, times);
        else
            snprintf(t, sizeof t, "%lld", runs[r]->seed);
        list_append(v->seeds, sizeof v->seeds, t);
    }
}

/* One variant per group of runs with the same variant name and settings (grp[r]: run r's), in order of first
 * appearance. */
static int group_runs(pft_report_exp_t *e, const pft_report_run_t *const *runs, size_t n, size_t *grp,
                      size_t *row_cap)
{
    for (size_t r = 0; r < n; r++) {
        size_t q = 0;
        while (q < e->n_variants && !same_group(&e->variants[q], runs[r]))
            q++;
        if (q < e->n_variants) {
            grp[r] = q;
            if (!e->variants[q].settings) /* its first run was of the old format */
                e->variants[q].settings = json_object_get(runs[r]->root, "settings");
            continue;
        }
        pft_report_row_t *row = add_row(e, row_cap);
        if (!row)
            return pft_err(PFT_ENOMEM, "out of memory");
        row->fedpft = 1;
        grp[r] = e->n_variants;
        pft_report_variant_t *v = &e->variants[e->n_variants++];
        v->name = runs[r]->variant;
        v->settings = json_object_get(runs[r]->root, "settings");
        v->row = e->n_rows - 1;
    }
    for (size_t vi = 0; vi < e->n_variants; vi++) {
        pft_report_variant_t *v = &e->variants[vi];
        distinct_name(v, e->variants, e->n_variants);
        snprintf(e->rows[v->row].label, sizeof e->rows[v->row].label, "%s", v->name_buf);
    }
    for (size_t vi = 0; vi < e->n_variants; vi++)
        e->variants[vi].name = e->variants[vi].name_buf;
    return 0;
}

/* seed_base[r]: the baselines of run r's seed (the first run of the tag with that seed). */
static int build_variants(pft_report_exp_t *e, const pft_report_run_t *const *runs,
                          const json_t *const *seed_base, size_t n, size_t *row_cap)
{
    e->variants = pft_calloc(n, sizeof *e->variants);
    size_t *grp = pft_calloc(n ? n : 1, sizeof *grp);
    int rc = e->variants && grp ? group_runs(e, runs, n, grp, row_cap) : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t vi = 0; vi < e->n_variants && rc == 0; vi++) {
        pft_report_variant_t *v = &e->variants[vi];
        size_t cap = 0;
        seed_list(v, runs, grp, vi, n);
        for (size_t r = 0; r < n && rc == 0; r++) {
            if (grp[r] != vi)
                continue;
            v->n_runs++;
            v->n_failed_runs += run_failed(runs[r]->root);
            pft_stats_add(&v->wall, jnum(runs[r]->root, "wall_seconds"));
            double acc, bytes;
            run_figures(e, runs[r]->root, &acc, &bytes);
            pft_stats_add(&e->rows[v->row].acc, acc);
            pft_stats_add(&e->rows[v->row].bytes, bytes);
            rc = add_run_nodes(e, v, &cap, runs[r]->root, seed_base[r]);
        }
        sort_nodes(v);
    }
    pft_free(grp);
    return rc;
}

static int build_runs(pft_report_exp_t *e, const pft_report_set_t *set)
{
    const pft_report_run_t *all;
    size_t n_all = pft_report_set_runs(set, &all);
    const pft_report_run_t **runs = pft_calloc(n_all ? n_all : 1, sizeof *runs);
    const json_t **seed_base = pft_calloc(n_all ? n_all : 1, sizeof *seed_base);
    const json_t **bl = pft_calloc(n_all ? n_all : 1, sizeof *bl);
    long long *seeds = pft_calloc(n_all ? n_all : 1, sizeof *seeds);
    size_t *seed_of = pft_calloc(n_all ? n_all : 1, sizeof *seed_of); /* run -> index into seeds */
    int rc = runs && seed_base && bl && seeds && seed_of ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    size_t n = 0, row_cap = 0;
    for (size_t i = 0; i < n_all && rc == 0; i++) {
        if (strcmp(all[i].tag, e->tag) != 0)
            continue;
        const pft_report_run_t *r = &all[i];
        runs[n] = r;
        size_t s = 0;
        while (s < e->n_seeds && seeds[s] != r->seed)
            s++;
        if (s == e->n_seeds) {
            seeds[e->n_seeds++] = r->seed; /* bl[s] is NULL until below */
            list_append_ll(e->seeds, sizeof e->seeds, r->seed);
        }
        if (!bl[s]) { /* no baselines in the seed's runs so far (--no-baselines): this one's, if any */
            const json_t *b = json_object_get(r->root, "baselines");
            bl[s] = json_is_object(b) ? b : NULL;
        }
        seed_of[n++] = s;
        int nn = (int)json_array_size(json_object_get(r->root, "nodes"));
        if (nn > e->n_nodes)
            e->n_nodes = nn;
    }
    e->n_runs = n;
    for (size_t r = 0; r < n && rc == 0; r++)
        seed_base[r] = bl[seed_of[r]];
    if (rc == 0 && n > 0) {
        e->kind = jstr(runs[0]->root, "kind") ? jstr(runs[0]->root, "kind") : "?";
        e->topology = jstr(runs[0]->root, "topology");
        int has_sink = 0;
        size_t i;
        const json_t *nd;
        json_array_foreach(json_object_get(runs[0]->root, "nodes"), i, nd)
        {
            const char *role = jstr(nd, "role");
            has_sink |= role && strcmp(role, "sink") == 0;
        }
        e->final_all = strcmp(e->kind, "ring") == 0 || strcmp(e->kind, "mesh") == 0 || !has_sink;
        /* seeds without a baselines object contribute nothing to the baseline rows */
        size_t nb = 0;
        for (size_t s = 0; s < e->n_seeds; s++)
            if (bl[s])
                bl[nb++] = bl[s];
        rc = build_baselines(e, bl, nb, &row_cap);
        if (rc == 0)
            rc = build_variants(e, runs, seed_base, n, &row_cap);
    }
    pft_free(runs);
    pft_free(seed_base);
    pft_free(bl);
    pft_free(seeds);
    pft_free(seed_of);
    return rc;
}

/* ---- synth lines ----------------------------------------------------------------------------------------
 */

static int same_str(const char *a, const char *b)
{
    return strcmp(a ? a : "?", b ? b : "?") == 0;
}

static int line_rank(const json_t *o)
{
    const json_t *r = json_object_get(o, "rank");
    return json_is_integer(r) ? (int)json_integer_value(r) : -1;
}

/* Position of cov among the covs of e->synth[0..n) in order of first appearance (for sorting). */
static size_t cov_order(const char *const *covs, size_t n_covs, const char *cov)
{
    for (size_t i = 0; i < n_covs; i++)
        if (strcmp(covs[i], cov) == 0)
            return i;
    return n_covs;
}

/* Order of heads in the synth table: logreg (FedPFT's) first, then the others by name. */
static int head_cmp(const char *a, const char *b)
{
    int la = strcmp(a, "logreg") == 0, lb = strcmp(b, "logreg") == 0;
    return la != lb ? lb - la : strcmp(a, b);
}

static int build_synth(pft_report_exp_t *e, const pft_report_set_t *set)
{
    const pft_report_line_t *lines;
    size_t n = pft_report_set_lines(set, &lines);
    e->synth = pft_calloc(n ? n : 1, sizeof *e->synth);
    const char **covs = pft_calloc(n ? n : 1, sizeof *covs);
    size_t n_covs = 0;
    if (!e->synth || !covs) {
        pft_free(covs);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *o = lines[i].obj;
        if (strcmp(lines[i].tag, e->tag) != 0)
            continue;
        e->n_lines++;
        const char *cov = jstr(o, "cov"), *prep = jstr(o, "prep"), *dtype = jstr(o, "dtype");
        const char *head = jstr(o, "head") ? jstr(o, "head") : "logreg";
        int k = (int)json_integer_value(json_object_get(o, "k")), rank = line_rank(o);
        size_t g = 0;
        while (g < e->n_synth && !(strcmp(e->synth[g].cov, cov) == 0 && e->synth[g].k == k &&
                                   e->synth[g].rank == rank && strcmp(e->synth[g].head, head) == 0 &&
                                   same_str(e->synth[g].prep, prep) && same_str(e->synth[g].dtype, dtype)))
            g++;
        pft_report_synth_t *s = &e->synth[g];
        if (g == e->n_synth) {
            e->n_synth++;
            s->cov = cov;
            s->head = head;
            s->gaussian = jstr(o, "gaussian_kind");
            s->k = k;
            s->rank = rank;
            s->prep = prep ? prep : "?";
            s->dtype = dtype ? dtype : "?";
            e->synth_heads |= strcmp(head, "logreg") != 0;
            if (cov_order(covs, n_covs, cov) == n_covs)
                covs[n_covs++] = cov;
            e->synth_mixed |= !same_str(s->prep, e->synth[0].prep) || !same_str(s->dtype, e->synth[0].dtype);
        }
        pft_stats_add(&s->bytes_per_class, jnum(o, "bytes_per_class_fp16"));
        pft_stats_add(&s->bytes_bundle, jnum(o, "bytes_bundle"));
        pft_stats_add(&s->acc_synth, jnum(o, "acc_synth"));
        pft_stats_add(&s->gap, jnum(o, "gap"));
        pft_stats_add(&s->shrinkage, jnum(o, "shrinkage"));
        pft_stats_add(&e->acc_raw, jnum(o, "acc_raw"));
    }
    /* stable insertion sort by (cov order, head: logreg first, then by name, K, rank) */
    for (size_t i = 1; i < e->n_synth; i++) {
        pft_report_synth_t t = e->synth[i];
        size_t j = i, ct = cov_order(covs, n_covs, t.cov);
        for (; j > 0; j--) {
            const pft_report_synth_t *p = &e->synth[j - 1];
            size_t cp = cov_order(covs, n_covs, p->cov);
            int hc = head_cmp(p->head, t.head);
            if (cp < ct ||
                (cp == ct && (hc < 0 || (hc == 0 && (p->k < t.k || (p->k == t.k && p->rank <= t.rank))))))
                break;
            e->synth[j] = e->synth[j - 1];
        }
        e->synth[j] = t;
    }
    pft_free(covs);
    return 0;
}

int pft_report_exp_build(const pft_report_set_t *set, const char *tag, pft_report_exp_t **out)
{
    *out = NULL;
    pft_report_exp_t *e = pft_calloc(1, sizeof *e);
    if (!e)
        return pft_err(PFT_ENOMEM, "out of memory");
    e->tag = tag;
    e->centralized_row = -1;
    e->centralized_gaussian_row = -1;
    e->kd_row = -1;
    int rc = build_runs(e, set);
    if (rc == 0)
        rc = build_synth(e, set);
    if (rc == 0 && e->n_runs == 0 && e->n_lines == 0)
        rc = pft_err(PFT_EINVAL, "no run or synth line has tag '%s'", tag);
    if (rc) {
        pft_report_exp_destroy(&e);
        return rc;
    }
    *out = e;
    return 0;
}

void pft_report_exp_destroy(pft_report_exp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_report_exp_t *e = *self_p;
    for (size_t i = 0; i < e->n_variants; i++)
        pft_free(e->variants[i].nodes);
    pft_free(e->variants);
    pft_free(e->rows);
    pft_free(e->synth);
    pft_free(e);
    *self_p = NULL;
}
