/* pft_topo: loads a DOT topology with libcgraph, validates it against the attribute table, resolves settings.
 */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_topo_attr.h"

#include <cgraph.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_BYTES (16u << 20) /* topology files are small; anything larger is refused */
#define MAX_NODES 4096
#define MAX_EDGES 16384

/* Everything derived from the cgraph graph; rebuilt whole after each attribute change. */
typedef struct {
    pft_topo_run_t run;
    size_t n;
    pft_topo_node_t *nodes;
    Agnode_t **agn; /* cgraph node of nodes[i] */
    size_t n_edges;
    pft_topo_edge_t *edges;
    Agedge_t **age; /* cgraph edge of edges[i] */
    pft_plan_t *plan;
    size_t *fb_off, *fb;    /* fallback successors of node v: fb[fb_off[v] .. fb_off[v+1]) */
    size_t *fbp_off, *fbp;  /* fallback predecessors */
    unsigned char *auto_ep; /* node i's endpoint came from port_base */
} model_t;

struct pft_topo_t {
    char *path; /* as given */
    char *dir;  /* absolute folder of the file */
    char *stem; /* file name without extension */
    unsigned flags;
    Agraph_t *g;
    pft_dotscan_t *scan;
    model_t m;
    unsigned char *ep_auto; /* node v's endpoint was derived from port_base (normalize writes it into the graph) */
};

/* ---- errors ---- */

static int fail_at(const pft_topo_t *t, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records "path:line: message" (or "path: message" when the line is unknown) and returns code. */
static int fail_at(const pft_topo_t *t, int line, int code, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        return pft_err(code, "%s:%d: %s", t->path, line, msg);
    return pft_err(code, "%s: %s", t->path, msg);
}

/* Prefixes the current message (from a parser) with "path:line: " and who (NULL: nobody). */
static int wrap_at(const pft_topo_t *t, int line, int code, const char *who)
{
    if (line > 0)
        return who ? pft_err_wrap(code, "%s:%d: %s", t->path, line, who)
                   : pft_err_wrap(code, "%s:%d", t->path, line);
    return who ? pft_err_wrap(code, "%s: %s", t->path, who) : pft_err_wrap(code, "%s", t->path);
}

/* ---- cgraph error capture (cgraph reports through a global callback) ---- */

static char s_cg_msg[1024];
static size_t s_cg_len;

static int cg_errf(char *msg)
{
    size_t n = strlen(msg);
    if (s_cg_len + n >= sizeof s_cg_msg)
        n = sizeof s_cg_msg - 1 - s_cg_len;
    memcpy(s_cg_msg + s_cg_len, msg, n);
    s_cg_len += n;
    s_cg_msg[s_cg_len] = '\0';
    return 0;
}

/* The captured text without "Error: " and trailing blanks. */
static const char *cg_message(void)
{
    char *m = s_cg_msg;
    while (s_cg_len && (m[s_cg_len - 1] == '\n' || m[s_cg_len - 1] == ' '))
        m[--s_cg_len] = '\0';
    if (strncmp(m, "Error: ", 7) == 0)
        m += 7;
    for (char *p = m; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return *m ? m : "syntax error";
}

/* ---- cgraph's lexer between parses ----
 * libcgraph 2.42 parses with a non-reentrant flex lexer (lib/cgraph/scan.l) whose static state outlives
 * a parse: its start condition, when a file ends inside a quoted string, HTML string or block comment,
 * and the text left in its buffer after a graph's closing brace (cgraph stops there, so that agread can
 * read the next graph of a stream). Both carry over into the next agmemread, which then fails or reads
 * the wrong text (tests/fuzz/crashes/topo/ *-breaks-later-loads). cgraph declares no reset. Defences:
 * 1. pft_dotscan_fault refuses such text with a message naming the line before cgraph sees it, and the
 *    text handed to cgraph ends with a newline, so that a final '//' or '#' comment cannot run into
 *    the next file read into the same buffer;
 * 2. before and after every parse cg_lexer_reset() calls aaglex_destroy(), flex's full reset of the
 *    lexer's globals (start condition INITIAL, buffers freed; the next parse sets up new ones), which
 *    libcgraph 2.42 exports though no header declares it. Before: whatever another cgraph user in the
 *    process left behind cannot spoil this parse (so do not interleave loads with agread of a stream of
 *    several graphs). It is declared weak: a libcgraph without it still links and runs, relying on
 *    defence 1 and the check below;
 * 3. after a failed parse it checks that a tiny graph parses, twice at most (a failed parse flushes the
 *    buffer); if that still fails the error message says later loads may fail. */
extern int aaglex_destroy(void) __attribute__((weak));

static int cg_quiet(char *msg)
{
    return 0;
}

/* Puts cgraph's lexer back to its initial state; with verify, checks that a tiny graph then parses.
 * Returns 0, or -1 if the check failed. Leaves cgraph's error callback as it was. */
static int cg_lexer_reset(int verify)
{
    if (aaglex_destroy)
        aaglex_destroy();
    int ok = !verify;
    for (int attempt = 0; attempt < 2 && !ok; attempt++) {
        agusererrf prev = agseterrf(cg_quiet);
        Agraph_t *g = agmemread("digraph{}\n");
        agseterrf(prev);
        ok = g != NULL;
        if (g)
            agclose(g);
        if (aaglex_destroy)
            aaglex_destroy();
    }
    return ok ? 0 : -1;
}

/* ---- model ---- */

static void model_free(model_t *m)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    for (size_t i = 0; i < na; i++) {
        if (tab[i].g_off >= 0)
            pft_topo_attr_free_value(&tab[i], (char *)&m->run + tab[i].g_off);
        for (size_t v = 0; tab[i].n_off >= 0 && v < m->n && m->nodes; v++)
            pft_topo_attr_free_value(&tab[i], (char *)&m->nodes[v] + tab[i].n_off);
        for (size_t e = 0; tab[i].e_off >= 0 && e < m->n_edges && m->edges; e++)
            pft_topo_attr_free_value(&tab[i], (char *)&m->edges[e] + tab[i].e_off);
    }
    pft_free(m->nodes);
    pft_free(m->agn);
    pft_free(m->edges);
    pft_free(m->age);
    pft_plan_destroy(&m->plan);
    pft_free(m->fb_off);
    pft_free(m->fb);
    pft_free(m->fbp_off);
    pft_free(m->fbp);
    pft_free(m->auto_ep);
    memset(m, 0, sizeof *m);
}

static int is_text_type(pft_attr_type_t type)
{
    return type == PFT_ATTR_STRING || type == PFT_ATTR_NAME || type == PFT_ATTR_PATH ||
           type == PFT_ATTR_ENDPOINT || type == PFT_ATTR_PARTITION || type == PFT_ATTR_CLASSES ||
           type == PFT_ATTR_KEY;
}

static size_t value_size(pft_attr_type_t type)
{
    return type == PFT_ATTR_U64 ? sizeof(uint64_t) : type == PFT_ATTR_REAL ? sizeof(double) : sizeof(int);
}

static const char *node_id(const model_t *m, size_t v)
{
    return m->nodes[v].id;
}

/* Value of attribute name on obj (graph, node or edge of kind), or NULL when undeclared or empty. */
static const char *get_value(Agraph_t *g, void *obj, int kind, const char *name)
{
    Agsym_t *sym = agattr(g, kind, (char *)name, NULL);
    if (!sym)
        return NULL;
    const char *v = agxget(obj, sym);
    return v && v[0] ? v : NULL;
}

static int edge_line(const pft_topo_t *t, const model_t *m, size_t e)
{
    return m->edges[e].line;
}

/* ---- checks ---- */

static int check_unknown_attrs(const pft_topo_t *t, model_t *m)
{
    static const int kinds[3] = {AGRAPH, AGNODE, AGEDGE};
    static const unsigned scopes[3] = {PFT_SCOPE_GRAPH, PFT_SCOPE_NODE, PFT_SCOPE_EDGE};
    static const char *const what[3] = {"graph", "node", "edge"};
    for (int k = 0; k < 3; k++) {
        for (Agsym_t *sym = agnxtattr(t->g, kinds[k], NULL); sym; sym = agnxtattr(t->g, kinds[k], sym)) {
            const char *name = sym->name;
            const pft_topo_attr_t *a = pft_topo_attr_find(name);
            if ((a && (a->scopes & scopes[k])) || pft_topo_attr_is_layout(name, scopes[k]))
                continue;
            /* find who carries it, and where */
            char who[300] = "";
            int line = 0;
            if (kinds[k] == AGNODE) {
                for (size_t v = 0; v < m->n && !who[0]; v++)
                    if (agxget(m->agn[v], sym)[0]) {
                        snprintf(who, sizeof who, "node '%s': ", node_id(m, v));
                        line = pft_dotscan_node_attr_line(t->scan, node_id(m, v), name);
                    }
            } else if (kinds[k] == AGEDGE) {
                for (size_t e = 0; e < m->n_edges && !who[0]; e++)
                    if (agxget(m->age[e], sym)[0]) {
                        const char *a_t = node_id(m, m->edges[e].tail), *a_h = node_id(m, m->edges[e].head);
                        snprintf(who, sizeof who, "edge %s -> %s: ", a_t, a_h);
                        line = pft_dotscan_edge_attr_line(t->scan, a_t, a_h, name);
                        if (!line)
                            line = edge_line(t, m, e);
                    }
            }
            for (size_t i = 0; !line && i < pft_dotscan_attr_count(t->scan); i++) {
                const pft_dotscan_attr_t *r = pft_dotscan_attr(t->scan, i);
                if ((int)r->scope == k && strcmp(r->name, name) == 0)
                    line = r->line;
            }
            const char *sugg = pft_topo_attr_suggest(name);
            if (a || pft_topo_attr_is_layout(name, PFT_SCOPE_GRAPH | PFT_SCOPE_NODE | PFT_SCOPE_EDGE))
                return fail_at(t, line, PFT_ETOPO, "%s'%s' is not a%s %s attribute (it is a %s attribute)",
                               who, name, k == 2 ? "n" : "", what[k],
                               a ? pft_topo_attr_scope_name(a->scopes) : "Graphviz layout");
            if (sugg)
                return fail_at(t, line, PFT_ETOPO, "%sunknown %s attribute '%s'; did you mean '%s'?", who,
                               what[k], name, sugg);
            return fail_at(t, line, PFT_ETOPO,
                           "%sunknown %s attribute '%s' (`pftnet check --attributes` lists the known ones)",
                           who, what[k], name);
        }
    }
    /* run-wide attributes written inside a subgraph would silently do nothing */
    for (size_t i = 0; i < pft_dotscan_attr_count(t->scan); i++) {
        const pft_dotscan_attr_t *r = pft_dotscan_attr(t->scan, i);
        const pft_topo_attr_t *a = r->scope == PFT_DOT_GRAPH ? pft_topo_attr_find(r->name) : NULL;
        if (a && r->in_subgraph && (a->scopes & PFT_SCOPE_GRAPH))
            return fail_at(
                t, r->line, PFT_ETOPO,
                "graph attribute '%s' inside a subgraph has no effect: set run-wide attributes at the "
                "top level%s",
                r->name, (a->scopes & PFT_SCOPE_NODE) ? ", or `node [...]` inside the subgraph" : "");
    }
    return 0;
}

static int parse_graph_attrs(const pft_topo_t *t, model_t *m)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    pft_topo_run_t *run = &m->run;
    run->start = SIZE_MAX;
    run->root = SIZE_MAX;
    for (size_t i = 0; i < na; i++) {
        if (tab[i].g_off < 0)
            continue;
        void *dst = (char *)run + tab[i].g_off;
        int rc;
        if (tab[i].def && (rc = pft_topo_attr_parse(&tab[i], tab[i].def, t->dir, dst)))
            return rc; /* a bad default is a programming error; tests parse them all */
        const char *v = get_value(t->g, t->g, AGRAPH, tab[i].name);
        if (v && (rc = pft_topo_attr_parse(&tab[i], v, t->dir, dst)))
            return wrap_at(t, pft_dotscan_graph_attr_line(t->scan, tab[i].name), rc, NULL);
    }
    const char *gname = agnameof(t->g);
    run->name = gname && gname[0] && gname[0] != '%' ? gname : NULL; /* cgraph names anonymous graphs %N */
    if (!run->run) {
        const char *id = run->name ? run->name : t->stem;
        if (!pft_topo_name_ok(id))
            return fail_at(t, pft_dotscan_header_line(t->scan), PFT_ETOPO,
                           "%s '%s' cannot serve as run id (letters, digits, '_', '-', '.'); set graph "
                           "attribute run=<id>",
                           run->name ? "graph name" : "file name", id);
        run->run = pft_strdup(id);
        if (!run->run)
            return pft_err(PFT_ENOMEM, "out of memory");
    }
    int rc = pft_topo_partition_parse(run->partition, &run->part_kind, &run->part_beta, &run->part_ranges);
    return rc ? wrap_at(t, pft_dotscan_graph_attr_line(t->scan, "partition"), rc, NULL) : 0;
}

/* Nodes in file order, ids checked, settings = graph defaults + node attributes. */
static int parse_nodes(const pft_topo_t *t, model_t *m)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        nd->domain = -1;
        nd->has_data = 1;
        for (size_t i = 0; i < na; i++) {
            if (tab[i].n_off < 0)
                continue;
            void *dst = (char *)nd + tab[i].n_off;
            if (tab[i].g_off >= 0) {
                /* an override: start from the run-wide value (text types are never shared) */
                if (is_text_type(tab[i].type))
                    return pft_err(PFT_EINVAL, "attribute table: '%s' is text at graph and node scope",
                                   tab[i].name);
                memcpy(dst, (char *)&m->run + tab[i].g_off, value_size(tab[i].type));
            }
            const char *val = get_value(t->g, m->agn[v], AGNODE, tab[i].name);
            int rc;
            if (val && (rc = pft_topo_attr_parse(&tab[i], val, t->dir, dst))) {
                char who[128];
                snprintf(who, sizeof who, "node '%s'", nd->id);
                return wrap_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, tab[i].name), rc, who);
            }
        }
    }
    return 0;
}

static int cmp_seq(const void *a, const void *b)
{
    uint64_t x = AGSEQ(*(Agedge_t *const *)a), y = AGSEQ(*(Agedge_t *const *)b);
    return (x > y) - (x < y);
}

/* Edges in file order, node indices, self loops and repeated pairs refused, edge settings resolved. */
static int collect_edges(const pft_topo_t *t, model_t *m)
{
    size_t ne = (size_t)agnedges(t->g);
    m->edges = pft_calloc(ne ? ne : 1, sizeof *m->edges);
    m->age = pft_calloc(ne ? ne : 1, sizeof *m->age);
    uint64_t max_seq = 0;
    for (size_t v = 0; v < m->n; v++)
        max_seq = AGSEQ(m->agn[v]) > max_seq ? AGSEQ(m->agn[v]) : max_seq;
    size_t *index_of = pft_alloc_array(max_seq + 1, sizeof *index_of);
    if (!m->edges || !m->age || !index_of) {
        pft_free(index_of);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t v = 0; v < m->n; v++)
        index_of[AGSEQ(m->agn[v])] = v;
    size_t k = 0;
    for (size_t v = 0; v < m->n; v++)
        for (Agedge_t *e = agfstout(t->g, m->agn[v]); e && k < ne; e = agnxtout(t->g, e))
            m->age[k++] = e;
    m->n_edges = k;
    qsort(m->age, k, sizeof *m->age, cmp_seq);

    int rc = 0;
    for (size_t i = 0; i < k && !rc; i++) {
        pft_topo_edge_t *ed = &m->edges[i];
        ed->tail = index_of[AGSEQ(agtail(m->age[i]))];
        ed->head = index_of[AGSEQ(aghead(m->age[i]))];
        const char *tn = node_id(m, ed->tail), *hn = node_id(m, ed->head);
        /* the n-th edge tail -> head in cgraph order is the n-th one written */
        size_t nth = 0;
        for (size_t j = 0; j < i; j++)
            nth += m->edges[j].tail == ed->tail && m->edges[j].head == ed->head;
        ed->line = pft_dotscan_edge_line(t->scan, tn, hn, nth);
        if (ed->tail == ed->head) {
            rc = fail_at(t, ed->line, PFT_ETOPO,
                         "edge %s -> %s is a self loop: a node cannot hand off to itself", tn, hn);
        } else if (nth > 0) {
            int first = pft_dotscan_edge_line(t->scan, tn, hn, 0);
            char at[32] = "";
            if (first)
                snprintf(at, sizeof at, " (first at line %d)", first);
            rc = fail_at(t, ed->line, PFT_ETOPO,
                         "edge %s -> %s appears twice%s: one edge, primary or fallback, per pair of nodes",
                         tn, hn, at);
        }
    }
    pft_free(index_of);
    return rc;
}

/* Edge settings: graph defaults + edge attributes. */
static int parse_edge_attrs(const pft_topo_t *t, model_t *m)
{
    size_t na;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&na);
    for (size_t i = 0; i < m->n_edges; i++) {
        pft_topo_edge_t *ed = &m->edges[i];
        for (size_t a = 0; a < na; a++) {
            if (tab[a].e_off < 0)
                continue;
            void *dst = (char *)ed + tab[a].e_off;
            int rc;
            if (tab[a].g_off >= 0)
                memcpy(dst, (char *)&m->run + tab[a].g_off, value_size(tab[a].type));
            else if (tab[a].def && (rc = pft_topo_attr_parse(&tab[a], tab[a].def, t->dir, dst)))
                return rc;
            const char *val = get_value(t->g, m->age[i], AGEDGE, tab[a].name);
            if (val && (rc = pft_topo_attr_parse(&tab[a], val, t->dir, dst))) {
                const char *tn = node_id(m, ed->tail), *hn = node_id(m, ed->head);
                char who[300];
                snprintf(who, sizeof who, "edge %s -> %s", tn, hn);
                int line = pft_dotscan_edge_attr_line(t->scan, tn, hn, tab[a].name);
                return wrap_at(t, line ? line : ed->line, rc, who);
            }
        }
    }
    return 0;
}

static int find_index(const model_t *m, const char *id, size_t *out)
{
    for (size_t v = 0; v < m->n; v++)
        if (strcmp(m->nodes[v].id, id) == 0) {
            *out = v;
            return 1;
        }
    return 0;
}

/* Builds a CSR list of fallback successors (reverse = 0) or predecessors (reverse = 1). */
static int fallback_lists(model_t *m, int reverse, size_t **off_p, size_t **list_p)
{
    size_t *off = pft_calloc(m->n + 1, sizeof *off), *list = pft_calloc(m->n_edges + 1, sizeof *list);
    if (!off || !list) {
        pft_free(off);
        pft_free(list);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t e = 0; e < m->n_edges; e++)
        if (m->edges[e].fallback)
            off[(reverse ? m->edges[e].head : m->edges[e].tail) + 1]++;
    for (size_t v = 0; v < m->n; v++)
        off[v + 1] += off[v];
    size_t *fill = pft_calloc(m->n + 1, sizeof *fill);
    if (!fill) {
        pft_free(off);
        pft_free(list);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t v = 0; v < m->n; v++) /* ascending by node index, like the primary lists */
        for (size_t e = 0; e < m->n_edges; e++) {
            const pft_topo_edge_t *ed = &m->edges[e];
            if (!ed->fallback)
                continue;
            size_t from = reverse ? ed->head : ed->tail, to = reverse ? ed->tail : ed->head;
            (void)to;
            if (from == v)
                list[off[v] + fill[v]++] = reverse ? ed->tail : ed->head;
        }
    for (size_t v = 0; v < m->n; v++) {
        size_t *a = list + off[v], cnt = off[v + 1] - off[v];
        for (size_t i = 1; i < cnt; i++) /* insertion sort: these lists are short */
            for (size_t j = i; j > 0 && a[j - 1] > a[j]; j--) {
                size_t x = a[j];
                a[j] = a[j - 1];
                a[j - 1] = x;
            }
    }
    pft_free(fill);
    *off_p = off;
    *list_p = list;
    return 0;
}

/* Finds the node a graph attribute (start, root) names; PFT_ETOPO at the attribute's line if none. */
static int named_node(const pft_topo_t *t, const model_t *m, const char *attr, const char *id, size_t *out)
{
    if (!id || find_index(m, id, out))
        return 0;
    char known[256] = "";
    size_t used = 0;
    for (size_t v = 0; v < m->n && used < sizeof known - 8; v++) {
        int w = snprintf(known + used, sizeof known - used, "%s%s", v ? ", " : "", node_id(m, v));
        used += w > 0 ? (size_t)w : 0;
    }
    return fail_at(t, pft_dotscan_graph_attr_line(t->scan, attr), PFT_ETOPO,
                   "%s=%s names no node (nodes: %s)", attr, id, known);
}

static int plan_graph(const pft_topo_t *t, model_t *m)
{
    pft_topo_run_t *run = &m->run;
    int rc;
    if ((rc = named_node(t, m, "start", run->start_id, &run->start)) ||
        (rc = named_node(t, m, "root", run->root_id, &run->root)))
        return rc;
    const char **names = pft_alloc_array(m->n, sizeof *names);
    pft_plan_edge_t *pe = pft_alloc_array(m->n_edges ? m->n_edges : 1, sizeof *pe);
    size_t *pe_edge = pft_alloc_array(m->n_edges ? m->n_edges : 1, sizeof *pe_edge);
    if (!names || !pe || !pe_edge) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < m->n; v++)
        names[v] = node_id(m, v);
    size_t np = 0;
    for (size_t e = 0; e < m->n_edges; e++)
        if (!m->edges[e].fallback) {
            pe[np] = (pft_plan_edge_t){m->edges[e].tail, m->edges[e].head};
            pe_edge[np++] = e;
        }
    pft_plan_where_t where;
    rc = pft_plan_build(m->n, names, np, pe, run->start, run->root, &m->plan, &where);
    if (rc == PFT_ENOMEM)
        goto done;
    if (rc) {
        int line = where.node != SIZE_MAX   ? m->nodes[where.node].line
                   : where.edge != SIZE_MAX ? m->edges[pe_edge[where.edge]].line
                                            : pft_dotscan_header_line(t->scan);
        if (where.at_start)
            line = pft_dotscan_graph_attr_line(t->scan, "start");
        if (where.at_root)
            line = pft_dotscan_graph_attr_line(t->scan, "root");
        rc = wrap_at(t, line, rc, NULL);
        goto done;
    }
    if (m->plan && pft_plan_kind(m->plan) != PFT_KIND_RING)
        run->start = SIZE_MAX;
    if (m->plan && pft_plan_kind(m->plan) != PFT_KIND_MESH)
        run->root = SIZE_MAX;
done:
    pft_free(names);
    pft_free(pe);
    pft_free(pe_edge);
    return rc;
}

static int check_fallbacks(const pft_topo_t *t, model_t *m)
{
    int rc;
    if ((rc = fallback_lists(m, 0, &m->fb_off, &m->fb)) || (rc = fallback_lists(m, 1, &m->fbp_off, &m->fbp)))
        return rc;
    for (size_t e = 0; e < m->n_edges; e++) {
        const pft_topo_edge_t *ed = &m->edges[e];
        const size_t *succ;
        if (ed->fallback && pft_plan_succs(m->plan, ed->tail, &succ) == 0)
            return fail_at(t, ed->line, PFT_ETOPO,
                           "fallback edge %s -> %s: node '%s' has no primary successor to fall back from",
                           node_id(m, ed->tail), node_id(m, ed->head), node_id(m, ed->tail));
    }
    if (pft_plan_kind(m->plan) == PFT_KIND_RING)
        return 0;
    /* a mesh's lap 2 bundle is complete and its lap 1 bundles go up one tree: a bundle arriving by a
     * fallback edge would match no hand-off of its receiver (the node runtime substitutes only partial
     * bundles of a predecessor's predecessor), so a mesh takes none; its idle primary edges stay unused */
    if (pft_plan_kind(m->plan) == PFT_KIND_MESH) {
        for (size_t e = 0; e < m->n_edges; e++)
            if (m->edges[e].fallback)
                return fail_at(
                    t, m->edges[e].line, PFT_ETOPO,
                    "fallback edge %s -> %s: a mesh (graph attribute root) takes no fallback edges; "
                    "remove fallback=true or the edge",
                    node_id(m, m->edges[e].tail), node_id(m, m->edges[e].head));
        return 0;
    }
    /* outside a ring a fallback must not let a bundle come back to where it has been */
    pft_plan_edge_t *all = pft_alloc_array(m->n_edges ? m->n_edges : 1, sizeof *all);
    size_t *cycle = pft_alloc_array(m->n, sizeof *cycle), len = 0;
    if (!all || !cycle) {
        pft_free(all);
        pft_free(cycle);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t e = 0; e < m->n_edges; e++)
        all[e] = (pft_plan_edge_t){m->edges[e].tail, m->edges[e].head};
    rc = pft_plan_find_cycle(m->n, m->n_edges, all, cycle, &len);
    if (rc == 1) {
        char text[400] = "";
        size_t used = 0;
        for (size_t i = 0; i <= len && used < sizeof text - 8; i++) {
            int w = snprintf(text + used, sizeof text - used, "%s%s", i ? " -> " : "",
                             node_id(m, cycle[i % len]));
            used += w > 0 ? (size_t)w : 0;
        }
        size_t fe = 0; /* a fallback edge on the cycle */
        for (size_t i = 0; i < len; i++)
            for (size_t e = 0; e < m->n_edges; e++)
                if (m->edges[e].fallback && m->edges[e].tail == cycle[i] &&
                    m->edges[e].head == cycle[(i + 1) % len])
                    fe = e;
        rc = fail_at(t, m->edges[fe].line, PFT_ETOPO,
                     "fallback edge %s -> %s closes the cycle %s: outside a ring, fallback edges must not "
                     "create cycles",
                     node_id(m, m->edges[fe].tail), node_id(m, m->edges[fe].head), text);
    } else if (rc < 0) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
    }
    pft_free(all);
    pft_free(cycle);
    return rc;
}

/* Simulation attributes: only with dataset, consistent with the partition. */
static int check_simulation(const pft_topo_t *t, model_t *m)
{
    pft_topo_run_t *run = &m->run;
    static const char *const graph_only_sim[] = {"partition", "samples"};
    static const char *const node_only_sim[] = {"samples", "domain", "classes"};
    if (!run->dataset) {
        for (size_t i = 0; i < 2; i++)
            if (get_value(t->g, t->g, AGRAPH, graph_only_sim[i]))
                return fail_at(
                    t, pft_dotscan_graph_attr_line(t->scan, graph_only_sim[i]), PFT_ETOPO,
                    "graph attribute '%s' only applies to simulations (set graph attribute dataset)",
                    graph_only_sim[i]);
        for (size_t v = 0; v < m->n; v++)
            for (size_t i = 0; i < 3; i++)
                if (get_value(t->g, m->agn[v], AGNODE, node_only_sim[i]))
                    return fail_at(
                        t, pft_dotscan_node_attr_line(t->scan, node_id(m, v), node_only_sim[i]), PFT_ETOPO,
                        "node '%s': '%s' only applies to simulations (set graph attribute dataset)",
                        node_id(m, v), node_only_sim[i]);
        return 0;
    }
    int part_line = pft_dotscan_graph_attr_line(t->scan, "partition");
    size_t n_data = 0;
    for (size_t v = 0; v < m->n; v++)
        n_data += m->nodes[v].has_data != 0;
    if (n_data == 0)
        return fail_at(t, part_line, PFT_ETOPO, "every node has data = false: there is nothing to partition");
    if (run->part_kind == PFT_TOPO_PART_LABELS && run->part_ranges && (size_t)run->part_ranges != n_data)
        return fail_at(
            t, part_line, PFT_ETOPO,
            "partition=%s lists %d class ranges but the graph has %zu nodes with data (node i, in file order, "
            "takes the i-th)",
            run->partition, run->part_ranges, n_data);
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        int line_d = pft_dotscan_node_attr_line(t->scan, nd->id, "domain");
        int line_c = pft_dotscan_node_attr_line(t->scan, nd->id, "classes");
        if (nd->domain >= 0 && run->part_kind != PFT_TOPO_PART_DOMAIN)
            return fail_at(t, line_d, PFT_ETOPO, "node '%s': 'domain' needs graph attribute partition=domain",
                           nd->id);
        if (nd->classes && run->part_kind != PFT_TOPO_PART_LABELS)
            return fail_at(t, line_c, PFT_ETOPO,
                           "node '%s': 'classes' needs graph attribute partition=labels", nd->id);
        if (run->part_kind == PFT_TOPO_PART_DOMAIN && nd->domain < 0)
            return fail_at(t, nd->line, PFT_ETOPO, "node '%s' has no 'domain' (partition=domain)", nd->id);
        if (run->part_kind == PFT_TOPO_PART_LABELS && !nd->classes) {
            char range[256];
            if (!run->part_ranges)
                return fail_at(t, nd->line, PFT_ETOPO,
                               "node '%s' has no 'classes' (partition=labels without ranges)", nd->id);
            if (pft_topo_partition_range(run->partition, (int)v, range, sizeof range) ||
                !(nd->classes = pft_strdup(range)))
                return pft_err(PFT_ENOMEM, "out of memory");
        }
    }
    if (t->flags & PFT_TOPO_SKIP_DATA_CHECK)
        return 0;
    static const char *const files[] = {"train_x.npy", "train_y.npy",      "test_x.npy",
                                        "test_y.npy",  "train_domain.npy", "test_domain.npy"};
    size_t nf = run->part_kind == PFT_TOPO_PART_DOMAIN ? 6 : 4;
    for (size_t i = 0; i < nf; i++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/%s", run->dataset, files[i]);
        if (access(p, R_OK) != 0)
            return fail_at(t, pft_dotscan_graph_attr_line(t->scan, "dataset"), PFT_ETOPO,
                           "dataset %s: cannot read %s (%s)%s", run->dataset, files[i], strerror(errno),
                           i >= 4 ? "; partition=domain needs it" : "");
    }
    return 0;
}

static int check_endpoints(const pft_topo_t *t, model_t *m)
{
    pft_topo_run_t *run = &m->run;
    m->auto_ep = pft_calloc(m->n, 1);
    if (!m->auto_ep)
        return pft_err(PFT_ENOMEM, "out of memory");
    if (run->port_base && (size_t)run->port_base + m->n - 1 > 65535)
        return fail_at(t, pft_dotscan_graph_attr_line(t->scan, "port_base"), PFT_ETOPO,
                       "port_base=%d: %zu nodes need ports up to %zu, beyond 65535", run->port_base, m->n,
                       (size_t)run->port_base + m->n - 1);
    int required = !run->dataset || (t->flags & PFT_TOPO_REQUIRE_RESOLVED);
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->endpoint && run->port_base) {
            char ep[64];
            snprintf(ep, sizeof ep, "tcp://127.0.0.1:%zu", (size_t)run->port_base + v);
            if (!(nd->endpoint = pft_strdup(ep)))
                return pft_err(PFT_ENOMEM, "out of memory");
            m->auto_ep[v] = 1;
        }
        if (!nd->endpoint && required)
            return fail_at(
                t, nd->line, PFT_ETOPO,
                "node '%s' has no endpoint: set endpoint=\"tcp://HOST:PORT\" on it, or graph attribute "
                "port_base",
                nd->id);
    }
    for (size_t v = 0; v < m->n; v++)
        for (size_t w = 0; w < v; w++) {
            const char *a = m->nodes[v].endpoint, *b = m->nodes[w].endpoint;
            if (!a || !b || strcmp(a, b) != 0)
                continue;
            int line = m->auto_ep[v] ? m->nodes[v].line
                                     : pft_dotscan_node_attr_line(t->scan, node_id(m, v), "endpoint");
            char at[32] = "";
            int wline = m->auto_ep[w] ? m->nodes[w].line
                                      : pft_dotscan_node_attr_line(t->scan, node_id(m, w), "endpoint");
            if (wline)
                snprintf(at, sizeof at, " (line %d)", wline);
            return fail_at(t, line, PFT_ETOPO, "node '%s': endpoint %s is already used by node '%s'%s%s",
                           node_id(m, v), a, node_id(m, w), at,
                           m->auto_ep[v] || m->auto_ep[w] ? "; port_base gives node i the port port_base + i"
                                                          : "");
        }
    return 0;
}

/* Node data files: required (and paired) unless a simulation that the launcher is still filling in. */
static int check_data(const pft_topo_t *t, model_t *m)
{
    int required = !m->run.dataset || (t->flags & PFT_TOPO_REQUIRE_RESOLVED);
    for (size_t v = 0; v < m->n; v++) {
        const pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->has_data && (nd->train || nd->labels))
            return fail_at(t, nd->line, PFT_ETOPO, "node '%s' has data = false but names a '%s' file", nd->id,
                           nd->train ? "train" : "labels");
        if (required && nd->has_data && (!nd->train || !nd->labels))
            return fail_at(
                t, nd->line, PFT_ETOPO, "node '%s' has no %s%s", nd->id,
                !nd->train ? "'train' (features .npy)" : "'labels' (labels .npy)",
                m->run.dataset ? "" : ": without graph attribute dataset every node brings its own data");
        if (required && !nd->test != !nd->test_labels) {
            int line = pft_dotscan_node_attr_line(t->scan, nd->id, nd->test ? "test" : "test_labels");
            return fail_at(t, line ? line : nd->line, PFT_ETOPO,
                           "node '%s': 'test' and 'test_labels' go together", nd->id);
        }
        if (t->flags & PFT_TOPO_SKIP_DATA_CHECK)
            continue;
        const char *names[4] = {"train", "labels", "test", "test_labels"};
        const char *paths[4] = {nd->train, nd->labels, nd->test, nd->test_labels};
        for (int i = 0; i < 4; i++) {
            struct stat st;
            if (!paths[i])
                continue;
            if (stat(paths[i], &st) != 0 || access(paths[i], R_OK) != 0)
                return fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, names[i]), PFT_ETOPO,
                               "node '%s': %s file %s: %s", nd->id, names[i], paths[i], strerror(errno));
            if (!S_ISREG(st.st_mode))
                return fail_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, names[i]), PFT_ETOPO,
                               "node '%s': %s file %s is not a regular file", nd->id, names[i], paths[i]);
        }
    }
    return 0;
}

/* Node keys: every node or none (a secure run needs the keys of every neighbour and of the ring's
 * producer; in a simulation the launcher generates the missing ones, so there this holds only for the
 * resolved copy, PFT_TOPO_REQUIRE_RESOLVED), no key shared by two nodes, key files present (unless
 * PFT_TOPO_SKIP_DATA_CHECK). The key itself is the node's to check (pft_pubkey_resolve); the topology
 * knows no cryptography. */
static int check_keys(const pft_topo_t *t, model_t *m)
{
    size_t with = 0, first = SIZE_MAX, missing = SIZE_MAX;
    for (size_t v = 0; v < m->n; v++) {
        if (m->nodes[v].key) {
            with++;
            first = first == SIZE_MAX ? v : first;
        } else if (missing == SIZE_MAX) {
            missing = v;
        }
    }
    int required = !m->run.dataset || (t->flags & PFT_TOPO_REQUIRE_RESOLVED);
    if (required && with > 0 && with < m->n)
        return fail_at(
            t, m->nodes[missing].line, PFT_ETOPO,
            "node '%s' has no 'key' while node '%s' has one: give every node its public key (or none: "
            "a simulation's launcher then generates them)",
            m->nodes[missing].id, m->nodes[first].id);
    for (size_t v = 0; v < m->n && with; v++) {
        const pft_topo_node_t *nd = &m->nodes[v];
        if (!nd->key)
            continue;
        int line = pft_dotscan_node_attr_line(t->scan, nd->id, "key");
        for (size_t w = 0; w < v; w++)
            if (m->nodes[w].key && strcmp(m->nodes[w].key, nd->key) == 0)
                return fail_at(t, line ? line : nd->line, PFT_ETOPO,
                               "node '%s' has the same key as node '%s': every node needs its own keypair",
                               nd->id, m->nodes[w].id);
        if ((t->flags & PFT_TOPO_SKIP_DATA_CHECK) || strncmp(nd->key, "pftnet-ed25519-public ", 22) == 0)
            continue;
        struct stat st;
        if (stat(nd->key, &st) != 0 || access(nd->key, R_OK) != 0)
            return fail_at(t, line ? line : nd->line, PFT_ETOPO, "node '%s': key file %s: %s", nd->id,
                           nd->key, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return fail_at(t, line ? line : nd->line, PFT_ETOPO,
                           "node '%s': key file %s is not a regular file", nd->id, nd->key);
    }
    return 0;
}

/* Points each node at its plan data. */
static void link_nodes(model_t *m)
{
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        nd->role = pft_plan_role(m->plan, v);
        nd->n_preds = pft_plan_preds(m->plan, v, &nd->preds);
        nd->n_succs = pft_plan_succs(m->plan, v, &nd->succs);
        nd->n_stages = pft_plan_stages(m->plan, v, &nd->stages);
        nd->fallbacks = m->fb + m->fb_off[v];
        nd->n_fallbacks = m->fb_off[v + 1] - m->fb_off[v];
        nd->fallback_preds = m->fbp + m->fbp_off[v];
        nd->n_fallback_preds = m->fbp_off[v + 1] - m->fbp_off[v];
    }
}

/* Derives the whole model from t->g; on error m is freed and the message says what is wrong. */
static int build(const pft_topo_t *t, model_t *m)
{
    memset(m, 0, sizeof *m);
    int rc;
    int header = pft_dotscan_header_line(t->scan);
    if (!agisdirected(t->g)) {
        rc = fail_at(t, header, PFT_ETOPO,
                     "the graph is undirected ('graph'); a topology must be a 'digraph' with edges a -> b");
        goto fail;
    }
    int nn = agnnodes(t->g);
    if (nn == 0) {
        rc = fail_at(t, header, PFT_ETOPO, "the graph has no nodes");
        goto fail;
    }
    if (nn > MAX_NODES) {
        rc = fail_at(t, header, PFT_ETOPO, "the graph has %d nodes; at most %d are supported", nn, MAX_NODES);
        goto fail;
    }
    if (agnedges(t->g) > MAX_EDGES) {
        rc = fail_at(t, header, PFT_ETOPO, "the graph has %d edges; at most %d are supported", agnedges(t->g),
                     MAX_EDGES);
        goto fail;
    }
    m->n = (size_t)nn;
    m->nodes = pft_calloc(m->n, sizeof *m->nodes);
    m->agn = pft_calloc(m->n, sizeof *m->agn);
    if (!m->nodes || !m->agn) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto fail;
    }
    size_t v = 0;
    for (Agnode_t *n = agfstnode(t->g); n && v < m->n; n = agnxtnode(t->g, n), v++) {
        m->agn[v] = n;
        m->nodes[v].id = agnameof(n);
        m->nodes[v].index = v;
        m->nodes[v].line = pft_dotscan_node_line(t->scan, m->nodes[v].id);
        if (!pft_topo_name_ok(m->nodes[v].id)) {
            rc = fail_at(
                t, m->nodes[v].line, PFT_ETOPO,
                "node id '%s': use 1..64 letters, digits, '_', '-' or '.' (not first '-' or '.'); ids "
                "name files and log lines",
                m->nodes[v].id);
            goto fail;
        }
    }
    if ((rc = collect_edges(t, m)) || (rc = check_unknown_attrs(t, m)) || (rc = parse_graph_attrs(t, m)) ||
        (rc = parse_nodes(t, m)) || (rc = parse_edge_attrs(t, m)) || (rc = plan_graph(t, m)) ||
        (rc = check_fallbacks(t, m)) || (rc = check_simulation(t, m)) || (rc = check_endpoints(t, m)) ||
        (rc = check_data(t, m)) || (rc = check_keys(t, m)))
        goto fail;
    link_nodes(m);
    return 0;
fail:
    model_free(m);
    return rc;
}

/* Writes resolved values back into the graph so that pft_topo_write produces a self-contained file. */
static int normalize(pft_topo_t *t)
{
    model_t *m = &t->m;
    Agsym_t *sym;
    if (m->run.dataset && (sym = agattr(t->g, AGRAPH, "dataset", NULL)))
        agxset(t->g, sym, (char *)m->run.dataset);
    /* an inline key is stored as written, so only a key path changes here (made absolute) */
    static const char *const paths[] = {"train", "labels", "test", "test_labels", "key"};
    const long offs[] = {(long)offsetof(pft_topo_node_t, train), (long)offsetof(pft_topo_node_t, labels),
                         (long)offsetof(pft_topo_node_t, test), (long)offsetof(pft_topo_node_t, test_labels),
                         (long)offsetof(pft_topo_node_t, key)};
    for (size_t i = 0; i < 5; i++) {
        sym = agattr(t->g, AGNODE, (char *)paths[i], NULL);
        for (size_t v = 0; sym && v < m->n; v++) {
            const char *p = *(const char **)((char *)&m->nodes[v] + offs[i]);
            if (p && strcmp(agxget(m->agn[v], sym), p) != 0)
                agxset(m->agn[v], sym, (char *)p);
        }
    }
    if (!t->ep_auto && !(t->ep_auto = pft_calloc(m->n ? m->n : 1, 1)))
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t v = 0; v < m->n; v++) {
        if (!m->auto_ep[v])
            continue;
        t->ep_auto[v] = 1; /* node count never changes after load */
        sym = agattr(t->g, AGNODE, "endpoint", NULL);
        if (!sym && !(sym = agattr(t->g, AGNODE, "endpoint", "")))
            return pft_err(PFT_ENOMEM, "out of memory");
        agxset(m->agn[v], sym, (char *)m->nodes[v].endpoint);
        m->auto_ep[v] = 0;
    }
    return 0;
}

/* ---- public ---- */

/* Reads path into *out (NUL-terminated, one spare byte after the NUL), its length in *len. */
static int read_text(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    char *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = pft_err(PFT_EIO, "%s: not a regular file", path);
        goto done;
    }
    if ((uintmax_t)st.st_size > MAX_FILE_BYTES) {
        rc = pft_err(PFT_EFORMAT, "%s: %jd bytes; a topology file may have at most %u", path,
                     (intmax_t)st.st_size, MAX_FILE_BYTES);
        goto done;
    }
    size_t n = (size_t)st.st_size;
    buf = pft_alloc(n + 2); /* room for a newline pft_topo_load may append */
    if (!buf) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    if (fread(buf, 1, n, f) != n) {
        rc = pft_err(PFT_EIO, "%s: read error", path);
        goto done;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        int line = 1;
        for (const char *p = buf; *p; p++)
            line += *p == '\n';
        rc = pft_err(PFT_EFORMAT, "%s:%d: a NUL byte: not a text file", path, line);
        goto done;
    }
    *out = buf;
    *len = n;
    buf = NULL;
done:
    pft_free(buf);
    fclose(f);
    return rc;
}

/* Absolute folder of path and the file name without extension. */
static int split_path(const char *path, char **dir, char **stem)
{
    char *abs = realpath(path, NULL); /* libc allocation, released with free() */
    if (!abs)
        return pft_err(PFT_EIO, "%s: %s", path, strerror(errno));
    char *slash = strrchr(abs, '/');
    const char *base = slash + 1;
    size_t lb = strlen(base);
    const char *dot = strrchr(base, '.');
    size_t ls = dot && dot != base ? (size_t)(dot - base) : lb;
    *stem = pft_alloc(ls + 1);
    *dir = pft_alloc((size_t)(slash - abs) + 2);
    if (!*stem || !*dir) {
        free(abs);
        PFT_FREE(*stem);
        PFT_FREE(*dir);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    memcpy(*stem, base, ls);
    (*stem)[ls] = '\0';
    if (slash == abs) {
        strcpy(*dir, "/");
    } else {
        memcpy(*dir, abs, (size_t)(slash - abs));
        (*dir)[slash - abs] = '\0';
    }
    free(abs);
    return 0;
}

int pft_topo_load(const char *path, unsigned flags, pft_topo_t **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    pft_topo_t *t = pft_calloc(1, sizeof *t);
    if (!t)
        return pft_err(PFT_ENOMEM, "out of memory");
    t->flags = flags;
    int rc;
    if (!(t->path = pft_strdup(path))) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = read_text(path, &text, &len)) || (rc = split_path(path, &t->dir, &t->stem)) ||
        (rc = pft_dotscan_new(text, len, &t->scan)))
        goto fail;
    if (pft_dotscan_graph_count(t->scan) > 1) {
        rc = fail_at(t, pft_dotscan_second_graph_line(t->scan), PFT_EFORMAT,
                     "a second graph: a topology file holds exactly one digraph");
        goto fail;
    }
    int fault_line;
    const char *fault = pft_dotscan_fault(t->scan, &fault_line);
    if (fault) { /* cgraph never sees text that would break its next parse (see cg_lexer_reset) */
        rc = fail_at(t, fault_line, PFT_EFORMAT, "%s", fault);
        goto fail;
    }
    if (len == 0 || text[len - 1] != '\n') { /* read_text left room */
        text[len] = '\n';
        text[len + 1] = '\0';
    }
    s_cg_len = 0;
    s_cg_msg[0] = '\0';
    (void)cg_lexer_reset(0);
    agusererrf prev = agseterrf(cg_errf);
    agreseterrors();
    t->g = agmemread(text);
    agseterrf(prev);
    const char *bad = strstr(s_cg_msg, "badly delimited number");
    const char *stuck =
        cg_lexer_reset(!t->g) == 0
            ? ""
            : " (and libcgraph's parser stays confused: later loads in this process may fail)";
    if (!t->g || bad) {
        char msg[sizeof s_cg_msg];
        snprintf(msg, sizeof msg, "%s", bad ? bad : cg_message());
        char *at = strstr(msg, " in line ");
        int line = 0;
        if (at) { /* move "in line N" into the file:line prefix */
            char *end = at + 9;
            line = (int)strtol(end, &end, 10);
            memmove(at, end, strlen(end) + 1);
        }
        if (bad) {
            /* cgraph splits 1e-4 into 1, e, -4 and carries on: refuse instead */
            char *q = strchr(msg, '\''), *q2 = q ? strchr(q + 1, '\'') : NULL;
            rc = fail_at(
                t, line, PFT_EFORMAT,
                "badly delimited number %.*s: a bare DOT number has no exponent; quote the value, e.g. "
                "tol=\"1e-4\"%s",
                q && q2 ? (int)(q2 - q + 1) : 0, q ? q : "", stuck);
        } else if (pft_dotscan_graph_count(t->scan) == 0) {
            rc = fail_at(t, 0, PFT_EFORMAT, "no graph found (expected: digraph NAME { a -> b; ... })%s",
                         stuck);
        } else {
            rc = fail_at(t, line, PFT_EFORMAT, "not valid DOT: %s%s", msg, stuck);
        }
        goto fail;
    }
    if ((rc = build(t, &t->m)) || (rc = normalize(t)))
        goto fail;
    pft_free(text);
    *out = t;
    return 0;
fail:
    pft_free(text);
    pft_topo_destroy(&t);
    return rc;
}

void pft_topo_destroy(pft_topo_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_topo_t *t = *self_p;
    model_free(&t->m);
    if (t->g)
        agclose(t->g);
    pft_dotscan_destroy(&t->scan);
    pft_free(t->path);
    pft_free(t->dir);
    pft_free(t->stem);
    pft_free(t->ep_auto);
    pft_free(t);
    *self_p = NULL;
}

const char *pft_topo_path(const pft_topo_t *self)
{
    return self->path;
}

const char *pft_topo_dir(const pft_topo_t *self)
{
    return self->dir;
}

pft_kind_t pft_topo_kind(const pft_topo_t *self)
{
    return pft_plan_kind(self->m.plan);
}

const pft_topo_run_t *pft_topo_run(const pft_topo_t *self)
{
    return &self->m.run;
}

int pft_topo_is_simulation(const pft_topo_t *self)
{
    return self->m.run.dataset != NULL;
}

size_t pft_topo_node_count(const pft_topo_t *self)
{
    return self->m.n;
}

const pft_topo_node_t *pft_topo_node(const pft_topo_t *self, size_t i)
{
    return i < self->m.n ? &self->m.nodes[i] : NULL;
}

const pft_topo_node_t *pft_topo_find(const pft_topo_t *self, const char *id)
{
    size_t v;
    return id && find_index(&self->m, id, &v) ? &self->m.nodes[v] : NULL;
}

size_t pft_topo_preds(const pft_topo_t *self, size_t i, const size_t **out)
{
    return pft_plan_preds(self->m.plan, i, out);
}

size_t pft_topo_succs(const pft_topo_t *self, size_t i, const size_t **out)
{
    return pft_plan_succs(self->m.plan, i, out);
}

size_t pft_topo_edge_count(const pft_topo_t *self)
{
    return self->m.n_edges;
}

const pft_topo_edge_t *pft_topo_edge(const pft_topo_t *self, size_t i)
{
    return i < self->m.n_edges ? &self->m.edges[i] : NULL;
}

const pft_topo_edge_t *pft_topo_edge_find(const pft_topo_t *self, size_t tail, size_t head)
{
    for (size_t e = 0; e < self->m.n_edges; e++)
        if (self->m.edges[e].tail == tail && self->m.edges[e].head == head)
            return &self->m.edges[e];
    return NULL;
}

size_t pft_topo_order(const pft_topo_t *self, const size_t **out)
{
    return pft_plan_order(self->m.plan, out);
}

size_t pft_topo_handoffs(const pft_topo_t *self, const pft_handoff_t **out)
{
    return pft_plan_handoffs(self->m.plan, out);
}

static int check_settable(const char *name, unsigned scope, const char *what)
{
    const pft_topo_attr_t *a = pft_topo_attr_find(name);
    if ((a && (a->scopes & scope)) || pft_topo_attr_is_layout(name, scope))
        return 0;
    return pft_err(PFT_EINVAL, "'%s' is not a %s attribute", name, what);
}

/* Sets the name/value pairs kv (NULL-terminated) on obj, rebuilds once, and restores every old
 * value if the result is invalid. */
static int set_attrs(pft_topo_t *t, void *obj, int kind, const char *const *kv)
{
    size_t n = 0;
    while (kv[2 * n])
        n++;
    Agsym_t **sym = pft_calloc(n ? n : 1, sizeof *sym);
    char **old = pft_calloc(n ? n : 1, sizeof *old);
    int rc = 0;
    size_t set = 0;
    if (!sym || !old) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        sym[i] = agattr(t->g, kind, (char *)kv[2 * i], NULL);
        if (!sym[i] && !(sym[i] = agattr(t->g, kind, (char *)kv[2 * i], "")))
            rc = pft_err(PFT_ENOMEM, "out of memory");
        if (rc || !(old[i] = pft_strdup(agxget(obj, sym[i])))) {
            rc = pft_err(PFT_ENOMEM, "out of memory");
            goto done;
        }
    }
    for (; set < n; set++)
        agxset(obj, sym[set], (char *)(kv[2 * set + 1] ? kv[2 * set + 1] : ""));
    /* a new port_base moves the endpoints it gave: clear them so that the build derives them again */
    int rebase = 0;
    for (size_t i = 0; kind == AGRAPH && i < n; i++)
        rebase |= strcmp(kv[2 * i], "port_base") == 0;
    Agsym_t *ep_sym = rebase ? agattr(t->g, AGNODE, "endpoint", NULL) : NULL;
    char **ep_old = ep_sym && t->ep_auto ? pft_calloc(t->m.n ? t->m.n : 1, sizeof *ep_old) : NULL;
    for (size_t v = 0; ep_old && v < t->m.n; v++)
        if (t->ep_auto[v] && (ep_old[v] = pft_strdup(agxget(t->m.agn[v], ep_sym))))
            agxset(t->m.agn[v], ep_sym, "");
    model_t fresh;
    if ((rc = build(t, &fresh))) {
        for (size_t v = 0; ep_old && v < t->m.n; v++)
            if (ep_old[v])
                agxset(t->m.agn[v], ep_sym, ep_old[v]);
    }
    for (size_t v = 0; ep_old && v < t->m.n; v++)
        pft_free(ep_old[v]);
    pft_free(ep_old);
    if (rc)
        goto done;
    model_free(&t->m);
    t->m = fresh;
    set = 0; /* keep the new values */
    rc = normalize(t);
done:
    while (set > 0) { /* newest first, so a name given twice gets its original back */
        set--;
        agxset(obj, sym[set], old[set]);
    }
    for (size_t i = 0; old && i < n; i++)
        pft_free(old[i]);
    pft_free(old);
    pft_free(sym);
    return rc;
}

int pft_topo_set_node_attrs(pft_topo_t *self, const char *id, const char *const *kv)
{
    size_t v;
    if (!find_index(&self->m, id, &v))
        return pft_err(PFT_EINVAL, "%s: no node '%s'", self->path, id);
    for (size_t i = 0; kv[2 * i]; i++) {
        int rc = check_settable(kv[2 * i], PFT_SCOPE_NODE, "node");
        if (rc)
            return pft_err_wrap(rc, "%s: node '%s'", self->path, id);
    }
    return set_attrs(self, self->m.agn[v], AGNODE, kv);
}

int pft_topo_set_graph_attrs(pft_topo_t *self, const char *const *kv)
{
    for (size_t i = 0; kv[2 * i]; i++) {
        int rc = check_settable(kv[2 * i], PFT_SCOPE_GRAPH, "graph");
        if (rc)
            return pft_err_wrap(rc, "%s", self->path);
    }
    return set_attrs(self, self->g, AGRAPH, kv);
}

int pft_topo_set_node_attr(pft_topo_t *self, const char *id, const char *name, const char *value)
{
    const char *kv[3] = {name, value, NULL};
    return pft_topo_set_node_attrs(self, id, kv);
}

int pft_topo_set_graph_attr(pft_topo_t *self, const char *name, const char *value)
{
    const char *kv[3] = {name, value, NULL};
    return pft_topo_set_graph_attrs(self, kv);
}

/* ---- writing ---- */

/* Writes s as a DOT id: quoted where needed, an HTML string as <...>. s must be a cgraph string (a
 * name or attribute value: agcanonStr looks at its header) and not an anonymous "%N" name. */
static void put_id(FILE *f, char *s)
{
    fputs(agcanonStr(s), f); /* its own buffer, valid until the next call */
}

static void put_indent(FILE *f, int depth)
{
    for (int i = 0; i < depth && i < 8; i++)
        fputc('\t', f);
}

static int is_anonymous(const char *name)
{
    return !name || !name[0] || name[0] == '%'; /* cgraph names anonymous graphs %N */
}

/* 1 if obj's value of sym is not its default (text or kind: an HTML string is not a quoted one). */
static int non_default(void *obj, Agsym_t *sym)
{
    char *v = agxget(obj, sym);
    return strcmp(v, sym->defval) != 0 || !aghtmlstr(v) != !aghtmlstr(sym->defval);
}

/* " [name=value, ...]" for every attribute of obj (AGNODE or AGEDGE) whose value differs from the
 * default written at the top, and an edge's key if it has one; nothing when there is nothing. */
static void put_obj_attrs(FILE *f, Agraph_t *g, void *obj, int kind)
{
    char *key = kind == AGEDGE ? agnameof(obj) : NULL;
    int total = !is_anonymous(key);
    for (Agsym_t *sym = agnxtattr(g, kind, NULL); sym; sym = agnxtattr(g, kind, sym))
        total += non_default(obj, sym);
    if (total == 0)
        return;
    const char *sep = total > 3 ? ",\n\t\t" : ", "; /* one per line when there are many */
    fputs(total > 3 ? " [\n\t\t" : " [", f);
    int n = 0;
    if (!is_anonymous(key)) {
        fputs("key=", f);
        put_id(f, key);
        n++;
    }
    for (Agsym_t *sym = agnxtattr(g, kind, NULL); sym; sym = agnxtattr(g, kind, sym)) {
        if (!non_default(obj, sym))
            continue;
        if (n++)
            fputs(sep, f);
        put_id(f, sym->name);
        fputc('=', f);
        put_id(f, agxget(obj, sym));
    }
    fputs(total > 3 ? "\n\t]" : "]", f);
}

/* `node [...]` / `edge [...]` with the non-empty defaults of kind. */
static void put_defaults(FILE *f, Agraph_t *g, int kind, const char *what)
{
    int n = 0;
    for (Agsym_t *sym = agnxtattr(g, kind, NULL); sym; sym = agnxtattr(g, kind, sym)) {
        if (!sym->defval[0])
            continue;
        fprintf(f, n++ ? ", " : "\t%s [", what);
        put_id(f, sym->name);
        fputc('=', f);
        put_id(f, sym->defval);
    }
    if (n)
        fputs("];\n", f);
}

/* The subgraphs of parent, nested: each with the graph attributes set on it (cgraph keeps those as its
 * own definitions; inherited values are not repeated) and its member nodes, declared by then. Node
 * and edge attributes are all written on the nodes and edges themselves, so subgraph defaults and
 * subgraph edges are not repeated (an edge written again would be a second edge). */
static void put_subgraphs(FILE *f, Agraph_t *root, Agraph_t *parent, int depth)
{
    for (Agraph_t *s = agfstsubg(parent); s; s = agnxtsubg(s)) {
        char *name = agnameof(s);
        put_indent(f, depth);
        if (is_anonymous(name)) {
            fputs("{\n", f);
        } else {
            fputs("subgraph ", f);
            put_id(f, name);
            fputs(" {\n", f);
        }
        for (Agsym_t *sym = agnxtattr(root, AGRAPH, NULL); sym; sym = agnxtattr(root, AGRAPH, sym)) {
            if (agattr(s, AGRAPH, sym->name, NULL) == agattr(parent, AGRAPH, sym->name, NULL))
                continue; /* not set on this subgraph */
            put_indent(f, depth + 1);
            put_id(f, sym->name);
            fputs(" = ", f);
            put_id(f, agxget(s, sym));
            fputs(";\n", f);
        }
        for (Agnode_t *n = agfstnode(s); n; n = agnxtnode(s, n)) {
            put_indent(f, depth + 1);
            put_id(f, agnameof(n));
            fputs(";\n", f);
        }
        put_subgraphs(f, root, s, depth + 1);
        put_indent(f, depth);
        fputs("}\n", f);
    }
}

/* The topology as DOT, in an order that loads back to the same node and edge indices: graph attributes,
 * node and edge defaults, every node in index order with its own attributes, subgraphs, then every
 * edge in index order with its own attributes. (agwrite writes subgraphs first, so a node first
 * mentioned in a subgraph would move ahead: tests/fuzz/crashes/topo/write-reorders-nodes-*.) */
static void put_topology(FILE *f, const pft_topo_t *t)
{
    Agraph_t *g = t->g;
    const model_t *m = &t->m;
    const int directed = agisdirected(g);
    fputs("// written by pftnet (pft_topo_write): data paths absolute, assigned endpoints written out\n", f);
    fprintf(f, "%s%s ", agisstrict(g) ? "strict " : "", directed ? "digraph" : "graph");
    if (!is_anonymous(agnameof(g))) {
        put_id(f, agnameof(g));
        fputc(' ', f);
    }
    fputs("{\n", f);
    for (Agsym_t *sym = agnxtattr(g, AGRAPH, NULL); sym; sym = agnxtattr(g, AGRAPH, sym)) {
        char *v = agxget(g, sym);
        if (!v[0])
            continue;
        fputc('\t', f);
        put_id(f, sym->name);
        fputs(" = ", f);
        put_id(f, v);
        fputs(";\n", f);
    }
    if (is_anonymous(agnameof(g)) && !get_value(g, g, AGRAPH, "run")) {
        /* the run id came from the file name, which the copy need not share */
        fputs("\trun = ", f);
        fputs(agcanon((char *)m->run.run, 0),
              f); /* not a cgraph string: agcanonStr would look at its header */
        fputs(";\n", f);
    }
    put_defaults(f, g, AGNODE, "node");
    put_defaults(f, g, AGEDGE, "edge");
    for (size_t v = 0; v < m->n; v++) {
        fputc('\t', f);
        put_id(f, agnameof(m->agn[v]));
        put_obj_attrs(f, g, m->agn[v], AGNODE);
        fputs(";\n", f);
    }
    put_subgraphs(f, g, g, 1);
    for (size_t e = 0; e < m->n_edges; e++) {
        fputc('\t', f);
        put_id(f, agnameof(m->agn[m->edges[e].tail]));
        fputs(directed ? " -> " : " -- ", f);
        put_id(f, agnameof(m->agn[m->edges[e].head]));
        put_obj_attrs(f, g, m->age[e], AGEDGE);
        fputs(";\n", f);
    }
    fputs("}\n", f);
}

int pft_topo_write(const pft_topo_t *self, const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return pft_err(PFT_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return pft_err(PFT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    errno = 0;
    put_topology(f, self);
    int bad = ferror(f);
    bad |= fflush(f) != 0 || ferror(f);
    int err = errno;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        return pft_err(PFT_EIO, "%s: write failed: %s", tmp, strerror(err ? err : EIO));
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        return pft_err(PFT_EIO, "%s: cannot rename %s into place: %s", path, tmp, strerror(err));
    }
    return 0;
}
