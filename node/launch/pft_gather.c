/* pft_gather: `pftnet collect`: the result.json of nodes run apart, checked against the topology, gathered
 * into one results.json with the launcher's own code (pft_launch__results_json: hops, fallbacks,
 * reconciliation). A node result is a file another party hands over: it is read bounded and checked field by
 * field before use. */
#include "pft_gather.h"

#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Largest result.json read: a node's is a few kB (a large mesh's some hundreds). */
#define MAX_RESULT_BYTES ((size_t)64 << 20)

typedef struct {
    const pft_gather_opts_t *o;
    pft_topo_t *topo;
    size_t nn;    /* nodes of the topology */
    json_t **res; /* per node in file order: its result.json, or NULL (none given) */
    char **file;  /* per node: the file it was read from, or NULL */
} gather_t;

/* The result.json that arg names: arg itself, or arg/result.json when arg is a folder. */
static int result_path(const char *arg, char **file)
{
    struct stat st;
    if (stat(arg, &st) != 0)
        return pft_err(PFT_EINVAL, "%s: %s", arg, strerror(errno));
    int dir = S_ISDIR(st.st_mode);
    *file = dir ? pft_fsio_join(arg, "result.json") : pft_strdup(arg);
    if (!*file)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (dir && !pft_fsio_exists(*file))
        return pft_err(PFT_EINVAL,
                       "%s: no result.json there (a node writes it into its --out folder when it ends; give "
                       "that folder, or the file)",
                       arg);
    return 0;
}

/* The JSON object in file into *out (new). */
static int load_result(const char *file, json_t **out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = pft_fsio_read(file, MAX_RESULT_BYTES, &buf, &len);
    if (rc)
        return pft_err_wrap(rc, "reading a node's result");
    json_error_t e;
    json_t *r = json_loadb((const char *)buf, len, 0, &e);
    pft_free(buf);
    if (!json_is_object(r)) {
        rc =
            pft_err(PFT_EFORMAT, "%s: not a node's result.json (%s)", file, r ? "not a JSON object" : e.text);
        json_decref(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* The node of the topology that result r (read from file) is of, refusing another run, an unknown node or one
 * already given. */
static int check_identity(const gather_t *g, const char *file, json_t *r, const pft_topo_node_t **node)
{
    const pft_topo_run_t *run = pft_topo_run(g->topo);
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *rid = json_string_value(json_object_get(r, "run"));
    if (!id || !rid)
        return pft_err(PFT_EFORMAT, "%s: not a node's result.json (no \"id\" or \"run\")", file);
    if (strcmp(rid, run->run) != 0)
        return pft_err(PFT_EINVAL, "%s: a result of run '%s', and %s is run '%s': refused", file, rid,
                       g->o->topo_path, run->run);
    const pft_topo_node_t *n = pft_topo_find(g->topo, id);
    if (!n)
        return pft_err(PFT_EINVAL, "%s: node '%s' is not a node of %s: refused", file, id, g->o->topo_path);
    if (g->res[n->index])
        return pft_err(PFT_EINVAL, "%s and %s both hold node '%s': give each node once", g->file[n->index],
                       file, id);
    *node = n;
    return 0;
}

/* PFT_EINVAL: node id's `what` is `got` in file and `want` in the topology. */
static int mismatch(const gather_t *g, const char *file, const char *id, const char *what, const char *got,
                    const char *want)
{
    return pft_err(PFT_EINVAL,
                   "%s: node '%s' has %s %s there, and %s gives it %s: a result of another topology, "
                   "refused",
                   file, id, what, got, g->o->topo_path, want);
}

/* Refuses a result whose kind, role, k or family is not what the topology gives node n. */
static int check_settings(const gather_t *g, const char *file, json_t *r, const pft_topo_node_t *n)
{
    const char *kind = json_string_value(json_object_get(r, "kind"));
    const char *role = json_string_value(json_object_get(r, "role"));
    const char *cov = json_string_value(json_object_get(r, "cov"));
    const char *want_kind = pft_kind_name(pft_topo_kind(g->topo)), *want_role = pft_role_name(n->role);
    const char *want_cov = pft_cov_name(n->cov);
    json_t *k = json_object_get(r, "k");
    if (!kind || strcmp(kind, want_kind) != 0)
        return mismatch(g, file, n->id, "kind", kind ? kind : "(none)", want_kind);
    if (!role || strcmp(role, want_role) != 0)
        return mismatch(g, file, n->id, "role", role ? role : "(none)", want_role);
    if (cov && want_cov && strcmp(cov, want_cov) != 0)
        return mismatch(g, file, n->id, "cov", cov, want_cov);
    if (json_is_integer(k) && json_integer_value(k) != n->k) {
        char got[32], want[32];
        snprintf(got, sizeof got, "%lld", (long long)json_integer_value(k));
        snprintf(want, sizeof want, "%d", n->k);
        return mismatch(g, file, n->id, "k", got, want);
    }
    return 0;
}

/* Refuses a result of node n whose list (`sent` with key "to", or `received` with key "from") names a peer
 * that no edge of the topology joins to n in that direction. */
static int check_peers(const gather_t *g, const char *file, json_t *r, const pft_topo_node_t *n, int sent)
{
    json_t *list = json_object_get(r, sent ? "sent" : "received");
    if (list && !json_is_array(list))
        return pft_err(PFT_EFORMAT, "%s: \"%s\" is not an array", file, sent ? "sent" : "received");
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *peer = json_string_value(json_object_get(e, sent ? "to" : "from"));
        const pft_topo_node_t *p = peer ? pft_topo_find(g->topo, peer) : NULL;
        if (!peer || !json_is_string(json_object_get(e, "bundle_id")))
            return pft_err(PFT_EFORMAT, "%s: %s[%zu] has no \"%s\" or no \"bundle_id\"", file,
                           sent ? "sent" : "received", i, sent ? "to" : "from");
        if (!p || !pft_topo_edge_find(g->topo, sent ? n->index : p->index, sent ? p->index : n->index))
            return pft_err(
                PFT_EINVAL,
                "%s: node '%s' %s '%s', and %s has no edge %s -> %s: a result of another topology, "
                "refused",
                file, n->id, sent ? "sent a bundle to" : "received a bundle from", peer, g->o->topo_path,
                sent ? n->id : peer, sent ? peer : n->id);
    }
    return 0;
}

/* Reads and checks every path's result into g->res and g->file. */
static int read_all(gather_t *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->o->n_paths && rc == 0; i++) {
        char *file = NULL;
        json_t *r = NULL;
        const pft_topo_node_t *n = NULL;
        rc = result_path(g->o->paths[i], &file);
        if (rc == 0)
            rc = load_result(file, &r);
        if (rc == 0)
            rc = check_identity(g, file, r, &n);
        if (rc == 0)
            rc = check_settings(g, file, r, n);
        if (rc == 0)
            rc = check_peers(g, file, r, n, 1);
        if (rc == 0)
            rc = check_peers(g, file, r, n, 0);
        if (rc == 0) {
            g->res[n->index] = r;
            g->file[n->index] = file;
        } else {
            json_decref(r);
            pft_free(file);
        }
    }
    return rc;
}

/* Every node's result in file order (a stub for one without), each with max_rss_kb where it gave its peak;
 * *wall gets the longest of their wall_seconds. */
static json_t *nodes_json(const gather_t *g, double *wall)
{
    json_t *nodes = json_array();
    *wall = 0;
    for (size_t i = 0; i < g->nn && nodes; i++) {
        json_t *r = g->res[i];
        if (!r) {
            json_array_append_new(nodes, json_pack("{s:s,s:s}", "id", pft_topo_node(g->topo, i)->id, "status",
                                                   "no result.json"));
            continue;
        }
        json_t *rss = json_object_get(r, "peak_rss_kb"), *w = json_object_get(r, "wall_seconds");
        if (json_is_integer(rss) && json_integer_value(rss) > 0)
            json_object_set(r, "max_rss_kb", rss);
        if (json_is_number(w) && json_number_value(w) > *wall)
            *wall = json_number_value(w);
        json_array_append(nodes, r);
    }
    return nodes;
}

/* The hand-offs of the topology whose sender left no result, appended to handoffs as "unverified" (the
 * reconciliation of pft_launch_reconcile starts from what senders say they sent); each shown with show. */
static void add_unverified_senders(const gather_t *g, json_t *handoffs, int show)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(g->topo, &h);
    for (size_t i = 0; i < nh; i++) {
        if (g->res[h[i].from])
            continue;
        const char *from = pft_topo_node(g->topo, h[i].from)->id, *to = pft_topo_node(g->topo, h[i].to)->id;
        json_array_append_new(handoffs, json_pack("{s:s,s:s,s:n,s:n,s:s}", "from", from, "to", to,
                                                  "bundle_id", "sender_state", "verdict", "unverified"));
        if (show)
            fprintf(stderr, "hand-off %s -> %s: unverified: the sender left no result.json\n", from, to);
    }
}

/* Makes out_dir, refusing (without force) a results.json there that `pftnet collect` did not write. */
static int prepare_out(const pft_gather_opts_t *o)
{
    int rc = pft_fsio_mkdirs(o->out_dir);
    char *path = rc ? NULL : pft_fsio_join(o->out_dir, "results.json");
    if (rc == 0 && !path)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0 && !o->force && pft_fsio_exists(path)) {
        json_t *old = json_load_file(path, 0, NULL);
        if (!json_object_get(old, "collected_from"))
            rc = pft_err(
                PFT_EINVAL,
                "%s holds a results.json that pftnet collect did not write (a launch's?): give another "
                "--out, or --force to replace it",
                o->out_dir);
        json_decref(old);
    }
    pft_free(path);
    return rc;
}

/* {id: file} for every node given. */
static json_t *collected_from(const gather_t *g)
{
    json_t *o = json_object();
    for (size_t i = 0; i < g->nn && o; i++)
        if (g->file[i])
            json_object_set_new(o, pft_topo_node(g->topo, i)->id, json_string(g->file[i]));
    return o;
}

/* The lines after the table: nodes not ok, nodes without a result, lost hand-offs. Returns the exit code. */
static int summary(const gather_t *g, int lost)
{
    size_t missing = 0, failed = 0;
    for (size_t i = 0; i < g->nn; i++) {
        const char *status = json_string_value(json_object_get(g->res[i], "status"));
        int degraded = status && strcmp(status, "degraded") == 0;
        if (g->res[i] && degraded) { /* it went on without a predecessor (on_missing = proceed) */
            failed += !g->o->allow_degraded;
            fprintf(stderr, "pftnet collect: node %s is degraded: it went on without",
                    pft_topo_node(g->topo, i)->id);
            size_t j;
            json_t *m;
            json_array_foreach(json_object_get(g->res[i], "missing"), j, m)
                fprintf(stderr, "%s %s", j ? "," : "", json_string_value(m) ? json_string_value(m) : "?");
            fprintf(stderr, " (%s)%s\n", g->file[i],
                    g->o->allow_degraded ? "" : "; --allow-degraded accepts it");
        } else if (g->res[i] && (!status || strcmp(status, "ok") != 0) && ++failed)
            fprintf(stderr, "pftnet collect: node %s did not end ok (status: %s; %s)\n",
                    pft_topo_node(g->topo, i)->id, status ? status : "none", g->file[i]);
    }
    for (size_t i = 0; i < g->nn; i++)
        if (!g->res[i])
            fprintf(stderr, "%s%s", missing++ ? ", " : "pftnet collect: no result.json for ",
                    pft_topo_node(g->topo, i)->id);
    if (missing)
        fprintf(stderr,
                " (%zu of %zu nodes): the hand-offs to and from %s cannot be verified from both ends\n",
                missing, g->nn, missing == 1 ? "it" : "them");
    if (lost)
        fprintf(stderr,
                "pftnet collect: %d hand-off(s) lost or contradicted (above; results.json handoffs)\n", lost);
    return failed || lost ? PFT_GATHER_EXIT_FAULT : missing ? PFT_GATHER_EXIT_MISSING : PFT_GATHER_EXIT_OK;
}

/* results.json from the results read, written and shown; *exit_code as pft_gather_run says. */
static int gather_write(gather_t *g, int *exit_code)
{
    const pft_gather_opts_t *o = g->o;
    double wall;
    json_t *nodes = nodes_json(g, &wall), *baselines = json_object();
    json_t *fallbacks = nodes ? pft_launch__fallbacks(nodes, !o->quiet && !o->json) : NULL;
    json_object_set_new(baselines, "handoffs",
                        json_integer((json_int_t)pft_topo_handoffs(g->topo, &(const pft_handoff_t *){0})));
    const pft_launch_results_t r = {.topo = g->topo,
                                    .topo_path = o->topo_path,
                                    .out_dir = o->out_dir,
                                    .tag = o->tag,
                                    .variant = o->variant,
                                    .wall = wall,
                                    .json = o->json,
                                    .quiet = 1};
    int lost = 0;
    json_t *res = nodes && baselines && fallbacks
                      ? pft_launch__results_json(&r, nodes, baselines, json_incref(fallbacks), &lost)
                      : NULL;
    json_decref(fallbacks);
    json_decref(baselines);
    json_decref(nodes);
    if (!res || json_object_set_new(res, "collected_from", collected_from(g)) != 0) {
        json_decref(res);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    add_unverified_senders(g, json_object_get(res, "handoffs"), !o->json);
    int rc = pft_launch__write_results(&r, res);
    json_decref(res);
    if (rc)
        return rc;
    if (!o->quiet && !o->json)
        fprintf(stderr, "results: %s/results.json\n", o->out_dir);
    *exit_code = summary(g, lost);
    return 0;
}

int pft_gather_run(const pft_gather_opts_t *o, int *exit_code)
{
    gather_t g = {.o = o};
    *exit_code = PFT_GATHER_EXIT_BADARG;
    int rc = pft_topo_load(o->topo_path, PFT_TOPO_SKIP_DATA_CHECK, &g.topo);
    if (rc == 0) {
        g.nn = pft_topo_node_count(g.topo);
        g.res = pft_calloc(g.nn, sizeof *g.res);
        g.file = pft_calloc(g.nn, sizeof *g.file);
        if (!g.res || !g.file)
            rc = pft_err(PFT_ENOMEM, "out of memory");
    }
    if (rc == 0)
        rc = read_all(&g);
    if (rc == 0)
        rc = prepare_out(o);
    if (rc == 0)
        rc = gather_write(&g, exit_code);
    for (size_t i = 0; i < g.nn; i++) {
        json_decref(g.res ? g.res[i] : NULL);
        pft_free(g.file ? g.file[i] : NULL);
    }
    pft_free(g.res);
    pft_free(g.file);
    pft_topo_destroy(&g.topo);
    return rc;
}
