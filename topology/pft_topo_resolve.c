/* pft_topo_resolve: graph, node and edge attributes checked against the table and parsed into settings. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* 1 if values of type are strings the model owns (never shared between the run and a node). */
static int is_text_type(pft_attr_type_t type)
{
    return type == PFT_ATTR_STRING || type == PFT_ATTR_NAME || type == PFT_ATTR_PATH ||
           type == PFT_ATTR_ENDPOINT || type == PFT_ATTR_PARTITION || type == PFT_ATTR_CLASSES ||
           type == PFT_ATTR_KEY;
}

/* Bytes of a value of a non-text type. */
static size_t value_size(pft_attr_type_t type)
{
    return type == PFT_ATTR_U64 ? sizeof(uint64_t) : type == PFT_ATTR_REAL ? sizeof(double) : sizeof(int);
}

/* Line where edge e was written; 0 if unknown. */
static int edge_line(const pft_topo_t *t, const pft_topo__model_t *m, size_t e)
{
    return m->edges[e].line;
}

int pft_topo__check_unknown_attrs(const pft_topo_t *t, pft_topo__model_t *m)
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
                        snprintf(who, sizeof who, "node '%s': ", pft_topo__node_id(m, v));
                        line = pft_dotscan_node_attr_line(t->scan, pft_topo__node_id(m, v), name);
                    }
            } else if (kinds[k] == AGEDGE) {
                for (size_t e = 0; e < m->n_edges && !who[0]; e++)
                    if (agxget(m->age[e], sym)[0]) {
                        const char *a_t = pft_topo__node_id(m, m->edges[e].tail),
                                   *a_h = pft_topo__node_id(m, m->edges[e].head);
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
                return pft_topo__fail_at(
                    t, line, PFT_ETOPO, "%s'%s' is not a%s %s attribute (it is a %s attribute)", who, name,
                    k == 2 ? "n" : "", what[k], a ? pft_topo_attr_scope_name(a->scopes) : "Graphviz layout");
            if (sugg)
                return pft_topo__fail_at(t, line, PFT_ETOPO,
                                         "%sunknown %s attribute '%s'; did you mean '%s'?", who, what[k],
                                         name, sugg);
            return pft_topo__fail_at(
                t, line, PFT_ETOPO,
                "%sunknown %s attribute '%s' (`pftnet check --attributes` lists the known ones)", who,
                what[k], name);
        }
    }
    /* run-wide attributes written inside a subgraph would silently do nothing */
    for (size_t i = 0; i < pft_dotscan_attr_count(t->scan); i++) {
        const pft_dotscan_attr_t *r = pft_dotscan_attr(t->scan, i);
        const pft_topo_attr_t *a = r->scope == PFT_DOT_GRAPH ? pft_topo_attr_find(r->name) : NULL;
        if (a && r->in_subgraph && (a->scopes & PFT_SCOPE_GRAPH))
            return pft_topo__fail_at(
                t, r->line, PFT_ETOPO,
                "graph attribute '%s' inside a subgraph has no effect: set run-wide attributes at the "
                "top level%s",
                r->name, (a->scopes & PFT_SCOPE_NODE) ? ", or `node [...]` inside the subgraph" : "");
    }
    return 0;
}

int pft_topo__parse_graph_attrs(const pft_topo_t *t, pft_topo__model_t *m)
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
        const char *v = pft_topo__get_value(t->g, t->g, AGRAPH, tab[i].name);
        if (v && (rc = pft_topo_attr_parse(&tab[i], v, t->dir, dst)))
            return pft_topo__wrap_at(t, pft_dotscan_graph_attr_line(t->scan, tab[i].name), rc, NULL);
    }
    const char *gname = agnameof(t->g);
    run->name = gname && gname[0] && gname[0] != '%' ? gname : NULL; /* cgraph names anonymous graphs %N */
    if (!run->run) {
        const char *id = run->name ? run->name : t->stem;
        if (!pft_topo_name_ok(id))
            return pft_topo__fail_at(
                t, pft_dotscan_header_line(t->scan), PFT_ETOPO,
                "%s '%s' cannot serve as run id (letters, digits, '_', '-', '.'); set graph "
                "attribute run=<id>",
                run->name ? "graph name" : "file name", id);
        run->run = pft_strdup(id);
        if (!run->run)
            return pft_err(PFT_ENOMEM, "out of memory");
    }
    int rc = pft_topo_partition_parse(run->partition, &run->part_kind, &run->part_beta, &run->part_ranges);
    return rc ? pft_topo__wrap_at(t, pft_dotscan_graph_attr_line(t->scan, "partition"), rc, NULL) : 0;
}

/* Nodes in file order, ids checked, settings = graph defaults + node attributes. */
int pft_topo__parse_nodes(const pft_topo_t *t, pft_topo__model_t *m)
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
            const char *val = pft_topo__get_value(t->g, m->agn[v], AGNODE, tab[i].name);
            int rc;
            if (val && (rc = pft_topo_attr_parse(&tab[i], val, t->dir, dst))) {
                char who[128];
                snprintf(who, sizeof who, "node '%s'", nd->id);
                return pft_topo__wrap_at(t, pft_dotscan_node_attr_line(t->scan, nd->id, tab[i].name), rc,
                                         who);
            }
        }
    }
    return 0;
}

/* Edge settings: graph defaults + edge attributes. */
int pft_topo__parse_edge_attrs(const pft_topo_t *t, pft_topo__model_t *m)
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
            const char *val = pft_topo__get_value(t->g, m->age[i], AGEDGE, tab[a].name);
            if (val && (rc = pft_topo_attr_parse(&tab[a], val, t->dir, dst))) {
                const char *tn = pft_topo__node_id(m, ed->tail), *hn = pft_topo__node_id(m, ed->head);
                char who[300];
                snprintf(who, sizeof who, "edge %s -> %s", tn, hn);
                int line = pft_dotscan_edge_attr_line(t->scan, tn, hn, tab[a].name);
                return pft_topo__wrap_at(t, line ? line : ed->line, rc, who);
            }
        }
    }
    return 0;
}
