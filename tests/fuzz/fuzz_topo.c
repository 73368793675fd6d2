/* fuzz_topo: libFuzzer harness for topology files (DOT line scanner, libcgraph parse, attribute table,
 * validation, plan) with a write-and-reload invariant; also built without libFuzzer as the ctest corpus
 * replay (replay_main.c). */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphviz/cgraph.h>

#include "pft_error.h"
#include "pft_topo.h"
#include "pft_topo_attr.h"

/* The input is written to <tmpdir>/t.dot (libcgraph and pft_topo_load read files) and loaded with
 * PFT_TOPO_SKIP_DATA_CHECK, so no data file is looked at. Invariants (a violation aborts):
 * - load fails with a negative code, a message and *out NULL, or gives a consistent topology: node
 *   indices, ids and lookups agree; predecessor, successor and edge indices are in range; the order is a
 *   permutation; hand-offs join nodes joined by an edge (or a ring's closing edge); every INT / REAL / ENUM
 *   setting (run, node, edge) lies within the bounds of the attribute table;
 * - pft_topo_write of a loaded topology loads back (same flags) to the same settings, nodes, edges and
 *   hand-offs (the contract of pft_topo_write);
 * - after every input a fixed valid topology still loads (libcgraph's lexer is global state). */

#define FAIL(...)                                                                                            \
    do {                                                                                                     \
        fprintf(stderr, "fuzz_topo: invariant violated: " __VA_ARGS__);                                      \
        fprintf(stderr, "\n");                                                                               \
        cleanup(); /* no temporary file left behind */                                                       \
        abort();                                                                                             \
    } while (0)

static char s_dir[64];    /* per-process temporary folder */
static char s_path[128];  /* <s_dir>/t.dot */
static char s_probe[128]; /* <s_dir>/probe.dot: a valid topology loaded after every input */
/* Findings 1-2 of README.md (fixed), which a campaign on older code may step over: environment
 * FUZZ_TOPO_KNOWN, a comma-separated list of
 * - reorder:  pft_topo_write may change the node order (accept it, compare the rest by node id);
 * - lexer:    libcgraph's lexer keeps state from one parse to the next: text after the graph breaks the
 *             next load (one failed load clears it); a quoted or HTML string or a comment left open at the
 *             end of a file that raised no syntax error ('"', '<<<' or '/' '*' alone) breaks every later
 *             load (parsing '>'s, the comment's end, then a lone '"' clears it); accept that, clear it,
 *             then require a load to succeed.
 * Unset (as in ctest's replay): every invariant is strict. */
static int s_allow_reorder, s_allow_lexer;

static void cleanup(void)
{
    if (s_path[0])
        unlink(s_path);
    if (s_probe[0])
        unlink(s_probe);
    if (s_dir[0])
        rmdir(s_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (s_dir[0])
        return 0;
    snprintf(s_dir, sizeof s_dir, "%s/pft-fuzz-topo-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(s_dir)) {
        perror(s_dir);
        abort();
    }
    snprintf(s_path, sizeof s_path, "%s/t.dot", s_dir);
    atexit(cleanup);
    snprintf(s_probe, sizeof s_probe, "%s/probe.dot", s_dir);
    FILE *f = fopen(s_probe, "w");
    if (!f || fputs("digraph probe { dataset=\".\"; a -> b -> c }\n", f) < 0 || fclose(f) != 0) {
        perror(s_probe);
        abort();
    }
    const char *env = getenv("FUZZ_TOPO_KNOWN");
    s_allow_reorder = env && strstr(env, "reorder");
    s_allow_lexer = env && strstr(env, "lexer");
    return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
    int fd = open(s_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(s_path);
        abort();
    }
    for (size_t off = 0; off < size;) {
        ssize_t k = write(fd, data + off, size - off);
        if (k <= 0) {
            perror(s_path);
            abort();
        }
        off += (size_t)k;
    }
    close(fd);
}

/* ---- consistency of one loaded topology ---- */

static size_t count_choices(const char *const *c)
{
    size_t n = 0;
    while (c && c[n])
        n++;
    return n;
}

/* Values at offset off of base have the table's type; checks INT, REAL and ENUM against the bounds.
 * Attributes without a default may hold their unset value (0 or -1). */
static void check_bounds(const void *base, long off, const pft_topo_attr_t *a, const char *where)
{
    if (off < 0)
        return;
    const char *p = (const char *)base + off;
    if (a->type == PFT_ATTR_INT) {
        int v;
        memcpy(&v, p, sizeof v);
        if (!a->def && (v == 0 || v == -1))
            return;
        if (v < a->min || v > a->max)
            FAIL("%s: %s = %d outside [%g, %g]", where, a->name, v, a->min, a->max);
    } else if (a->type == PFT_ATTR_REAL) {
        double v;
        memcpy(&v, p, sizeof v);
        if (!isfinite(v) || v < a->min || v > a->max)
            FAIL("%s: %s = %g outside [%g, %g]", where, a->name, v, a->min, a->max);
    } else if (a->type == PFT_ATTR_ENUM) {
        int v;
        memcpy(&v, p, sizeof v);
        if (v < 0 || (size_t)v >= count_choices(a->choices))
            FAIL("%s: %s = %d is not a choice", where, a->name, v);
    }
}

static void check_index_list(const size_t *v, size_t n, size_t limit, const char *what, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] >= limit || (i > 0 && v[i] <= v[i - 1]))
            FAIL("node '%s': %s list not ascending within range", id, what);
}

static void check_topo(const pft_topo_t *t)
{
    size_t n = pft_topo_node_count(t), ne = pft_topo_edge_count(t);
    const pft_topo_run_t *run = pft_topo_run(t);
    if (n < 2 || !run || !run->run || !run->run[0])
        FAIL("loaded topology with %zu nodes or without a run id", n);
    if (pft_topo_kind(t) != PFT_KIND_CHAIN && pft_topo_kind(t) != PFT_KIND_RING &&
        pft_topo_kind(t) != PFT_KIND_DAG && pft_topo_kind(t) != PFT_KIND_MESH)
        FAIL("bad kind %d", (int)pft_topo_kind(t));
    if ((pft_topo_kind(t) == PFT_KIND_MESH) != (run->root != SIZE_MAX) || (run->root != SIZE_MAX && run->root >= n))
        FAIL("mesh root %zu inconsistent", run->root);
    if ((pft_topo_kind(t) == PFT_KIND_RING) != (run->start != SIZE_MAX) ||
        (run->start != SIZE_MAX && run->start >= n))
        FAIL("ring start %zu inconsistent", run->start);
    if (pft_topo_node(t, n) != NULL)
        FAIL("node(count) is not NULL");
    size_t na = 0;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    for (size_t j = 0; j < na; j++)
        check_bounds(run, tab[j].g_off, &tab[j], "graph");
    for (size_t i = 0; i < n; i++) {
        const pft_topo_node_t *nd = pft_topo_node(t, i);
        if (!nd || nd->index != i || !nd->id || pft_topo_find(t, nd->id) != nd)
            FAIL("node %zu: index or lookup inconsistent", i);
        const size_t *p, *s;
        if (pft_topo_preds(t, i, &p) != nd->n_preds || pft_topo_succs(t, i, &s) != nd->n_succs)
            FAIL("node '%s': preds/succs counts disagree", nd->id);
        check_index_list(nd->preds, nd->n_preds, n, "preds", nd->id);
        check_index_list(nd->succs, nd->n_succs, n, "succs", nd->id);
        check_index_list(nd->fallbacks, nd->n_fallbacks, n, "fallbacks", nd->id);
        check_index_list(nd->fallback_preds, nd->n_fallback_preds, n, "fallback preds", nd->id);
        for (size_t k = 0; k < nd->n_succs; k++)
            if (!pft_topo_edge_find(t, i, nd->succs[k]))
                FAIL("node '%s': successor without an edge", nd->id);
        if (nd->n_stages < 1 || !nd->stages)
            FAIL("node '%s': no stages", nd->id);
        for (size_t j = 0; j < na; j++)
            check_bounds(nd, tab[j].n_off, &tab[j], nd->id);
    }
    for (size_t e = 0; e < ne; e++) {
        const pft_topo_edge_t *ed = pft_topo_edge(t, e);
        if (!ed || ed->tail >= n || ed->head >= n || ed->tail == ed->head)
            FAIL("edge %zu out of range", e);
        if (pft_topo_edge_find(t, ed->tail, ed->head) == NULL)
            FAIL("edge %zu not found by edge_find", e);
        for (size_t j = 0; j < na; j++)
            check_bounds(ed, tab[j].e_off, &tab[j], "edge");
    }
    const size_t *order;
    if (pft_topo_order(t, &order) != n)
        FAIL("order has the wrong length");
    unsigned char *seen = calloc(n, 1);
    if (!seen)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (order[i] >= n || seen[order[i]])
            FAIL("order is not a permutation");
        seen[order[i]] = 1;
    }
    free(seen);
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h);
    for (size_t i = 0; i < nh; i++) {
        if (h[i].seq != i + 1 || h[i].from >= n || h[i].to >= n || (h[i].lap != 1 && h[i].lap != 2))
            FAIL("hand-off %zu malformed", i);
        const pft_topo_edge_t *ed = pft_topo_edge_find(t, h[i].from, h[i].to);
        if (!ed || ed->fallback)
            FAIL("hand-off %zu (%zu -> %zu) has no primary edge", i, h[i].from, h[i].to);
    }
}

/* ---- write and reload ---- */

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_same(const pft_topo_t *a, const pft_topo_t *b)
{
    const pft_topo_run_t *x = pft_topo_run(a), *y = pft_topo_run(b);
    if (pft_topo_kind(a) != pft_topo_kind(b) || pft_topo_node_count(a) != pft_topo_node_count(b) ||
        pft_topo_edge_count(a) != pft_topo_edge_count(b) ||
        pft_topo_is_simulation(a) != pft_topo_is_simulation(b))
        FAIL("reloaded topology has another shape");
    if (!same_str(x->run, y->run) || x->k != y->k || x->cov != y->cov || x->samples != y->samples ||
        x->seed != y->seed || x->dtype != y->dtype || x->prep != y->prep || x->deadline != y->deadline ||
        x->send_deadline != y->send_deadline || x->on_missing != y->on_missing ||
        x->max_iter != y->max_iter || x->tol != y->tol || x->reg_covar != y->reg_covar ||
        x->n_init != y->n_init || x->head_c != y->head_c || x->head_draws != y->head_draws || x->mc_budget != y->mc_budget ||
        x->max_bundle_mb != y->max_bundle_mb || !same_str(x->dataset, y->dataset) ||
        !same_str(x->partition, y->partition) || x->part_kind != y->part_kind ||
        x->part_beta != y->part_beta || x->part_ranges != y->part_ranges ||
        !same_str(x->start_id, y->start_id) || x->start != y->start)
        FAIL("reloaded run settings differ (run '%s' vs '%s')", x->run, y->run);
    /* Node i of a is node map[i] of b (matched by id). Strict: the same index (file order is a node's
     * identity for partitions, port_base endpoints and hand-off order). */
    size_t n = pft_topo_node_count(a);
    size_t *map = calloc(n, sizeof *map);
    if (!map)
        abort();
    for (size_t i = 0; i < n; i++) {
        const pft_topo_node_t *p = pft_topo_node(a, i), *q = pft_topo_find(b, p->id);
        if (!q)
            FAIL("node '%s' missing after reload", p->id);
        map[i] = q->index;
        if (q->index != i && !s_allow_reorder)
            FAIL("node '%s' has index %zu but %zu after write and reload (node order not preserved)", p->id,
                 i, q->index);
        const char *diff = p->role != q->role                          ? "role"
                           : !same_str(p->endpoint, q->endpoint)       ? "endpoint"
                           : !same_str(p->train, q->train)             ? "train"
                           : !same_str(p->labels, q->labels)           ? "labels"
                           : !same_str(p->test, q->test)               ? "test"
                           : !same_str(p->test_labels, q->test_labels) ? "test_labels"
                           : p->k != q->k                              ? "k"
                           : p->cov != q->cov                          ? "cov"
                           : p->samples != q->samples                  ? "samples"
                           : p->domain != q->domain                    ? "domain"
                           : p->n_preds != q->n_preds                  ? "n_preds"
                           : p->n_succs != q->n_succs                  ? "n_succs"
                           : p->n_fallbacks != q->n_fallbacks          ? "n_fallbacks"
                           : p->n_stages != q->n_stages                ? "n_stages"
                                                                       : NULL;
        if (!diff && q->index == i && !same_str(p->classes, q->classes)) /* derived from the index */
            diff = "classes";
        if (diff)
            FAIL("reloaded node %zu ('%s') differs in %s", i, p->id, diff);
    }
    for (size_t e = 0; e < pft_topo_edge_count(a); e++) {
        const pft_topo_edge_t *p = pft_topo_edge(a, e);
        const pft_topo_edge_t *q = pft_topo_edge_find(b, map[p->tail], map[p->head]);
        if (!q || q->fallback != p->fallback || q->deadline != p->deadline ||
            q->send_deadline != p->send_deadline)
            FAIL("reloaded edge %zu -> %zu differs", p->tail, p->head);
    }
    const pft_handoff_t *h1, *h2;
    size_t n1 = pft_topo_handoffs(a, &h1), n2 = pft_topo_handoffs(b, &h2);
    if (n1 != n2)
        FAIL("reloaded hand-off count differs");
    for (size_t i = 0; i < n1 && !s_allow_reorder; i++)
        if (h1[i].from != h2[i].from || h1[i].to != h2[i].to || h1[i].lap != h2[i].lap ||
            h1[i].what != h2[i].what || h1[i].complete != h2[i].complete)
            FAIL("reloaded hand-off %zu differs", i);
    free(map);
}

/* Loads the probe topology; 0 if it loads as written. */
static int probe_loads(void)
{
    pft_topo_t *p = NULL;
    int ok = pft_topo_load(s_probe, PFT_TOPO_SKIP_DATA_CHECK, &p) == 0 && p && pft_topo_node_count(p) == 3 &&
             strcmp(pft_topo_node(p, 0)->id, "a") == 0 && pft_topo_kind(p) == PFT_KIND_CHAIN &&
             strcmp(pft_topo_run(p)->run, "probe") == 0;
    pft_topo_destroy(&p);
    return ok ? 0 : -1;
}

static int quiet(char *msg)
{
    return 0;
}

/* A load must leave nothing behind that changes the next load (libcgraph keeps lexer state). */
static void check_next_load(void)
{
    if (probe_loads() == 0)
        return;
    if (!s_allow_lexer)
        FAIL("a valid topology loaded after this input fails: %s", pft_errmsg());
    if (probe_loads() == 0) /* the failed load flushed what was left over */
        return;
    /* stuck inside an HTML string (<<< at the end of a file), a comment or a quoted string: close it */
    static char closers[3][16386];
    memset(closers[0], '>', sizeof closers[0] - 1);
    memcpy(closers[1], "*/", 2);
    closers[2][0] = '"';
    for (int i = 0; i < 3; i++) {
        agusererrf prev = agseterrf(quiet);
        Agraph_t *g = agmemread(closers[i]);
        agseterrf(prev);
        if (g)
            agclose(g);
        if (probe_loads() == 0)
            return;
    }
    FAIL("a valid topology keeps failing to load after this input: %s", pft_errmsg());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_dir[0])
        LLVMFuzzerInitialize(NULL, NULL);
    write_file(data, size);
    pft_topo_t *t = NULL;
    int rc = pft_topo_load(s_path, PFT_TOPO_SKIP_DATA_CHECK, &t);
    if (rc != 0) {
        if (rc > 0 || t || pft_errmsg()[0] == '\0')
            FAIL("load failed with rc %d, out %p, message \"%s\"", rc, (void *)t, pft_errmsg());
        check_next_load();
        return 0;
    }
    if (!t)
        FAIL("load succeeded without a topology");
    check_next_load();
    check_topo(t);
    if (pft_topo_write(t, s_path) != 0)
        FAIL("write of a loaded topology fails: %s", pft_errmsg());
    pft_topo_t *u = NULL;
    if (pft_topo_load(s_path, PFT_TOPO_SKIP_DATA_CHECK, &u) != 0 || !u)
        FAIL("written topology does not load back: %s", pft_errmsg());
    check_topo(u);
    check_same(t, u);
    check_next_load();
    pft_topo_destroy(&u);
    pft_topo_destroy(&t);
    pft_topo_destroy(&t); /* safe twice */
    return 0;
}
