/* pft_topo_plan: the plan (chain/ring/dag/mesh, roles, hand-offs) of the primary edges; fallback edges. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_plan.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* After an error about node v without edges: an edge that names instead a node with no statement of its own
 * and a name close to v's (a typo: `b -> cc` for `b -> c`) is named in the message, which keeps rc. */
static void typo_hint(const pft_topo_t *t, const pft_topo__model_t *m, size_t v, int rc)
{
    const char *id = pft_topo__node_id(m, v);
    for (size_t e = 0; e < m->n_edges; e++)
        if (m->edges[e].tail == v || m->edges[e].head == v)
            return; /* v has edges: not the "no edges" error */
    for (size_t e = 0; e < m->n_edges; e++) {
        size_t ends[2] = {m->edges[e].tail, m->edges[e].head};
        for (int k = 0; k < 2; k++) {
            const char *u = pft_topo__node_id(m, ends[k]);
            size_t d = pft_topo_attr_edit_distance(u, id);
            if (d == 0 || d > 2 || (d >= strlen(id) && d >= strlen(u)) ||
                pft_dotscan_node_stmt_line(t->scan, u))
                continue;
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", pft_errmsg());
            pft_err(rc,
                    "%s; the edge %s -> %s at line %d names '%s', which no statement defines: did you mean "
                    "'%s'?",
                    msg, pft_topo__node_id(m, m->edges[e].tail), pft_topo__node_id(m, m->edges[e].head),
                    m->edges[e].line, u, id);
            return;
        }
    }
}

/* Builds a CSR list of fallback successors (reverse = 0) or predecessors (reverse = 1). */
static int fallback_lists(pft_topo__model_t *m, int reverse, size_t **off_p, size_t **list_p)
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
static int named_node(const pft_topo_t *t, const pft_topo__model_t *m, const char *attr, const char *id,
                      size_t *out)
{
    if (!id || pft_topo__find_index(m, id, out))
        return 0;
    char known[256] = "";
    size_t used = 0;
    for (size_t v = 0; v < m->n && used < sizeof known - 8; v++) {
        int w = snprintf(known + used, sizeof known - used, "%s%s", v ? ", " : "", pft_topo__node_id(m, v));
        used += w > 0 ? (size_t)w : 0;
    }
    return pft_topo__fail_at(t, pft_dotscan_graph_attr_line(t->scan, attr), PFT_ETOPO,
                             "%s=%s names no node (nodes: %s)", attr, id, known);
}

int pft_topo__plan_graph(const pft_topo_t *t, pft_topo__model_t *m)
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
        names[v] = pft_topo__node_id(m, v);
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
        rc = pft_topo__wrap_at(t, line, rc, NULL);
        if (where.node != SIZE_MAX)
            typo_hint(t, m, where.node, rc);
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

int pft_topo__check_fallbacks(const pft_topo_t *t, pft_topo__model_t *m)
{
    int rc;
    if ((rc = fallback_lists(m, 0, &m->fb_off, &m->fb)) || (rc = fallback_lists(m, 1, &m->fbp_off, &m->fbp)))
        return rc;
    for (size_t e = 0; e < m->n_edges; e++) {
        const pft_topo_edge_t *ed = &m->edges[e];
        const size_t *succ;
        if (ed->fallback && pft_plan_succs(m->plan, ed->tail, &succ) == 0)
            return pft_topo__fail_at(
                t, ed->line, PFT_ETOPO,
                "fallback edge %s -> %s: node '%s' has no primary successor to fall back from",
                pft_topo__node_id(m, ed->tail), pft_topo__node_id(m, ed->head),
                pft_topo__node_id(m, ed->tail));
    }
    if (pft_plan_kind(m->plan) == PFT_KIND_RING)
        return 0;
    /* a mesh's lap 2 bundle is complete and its lap 1 bundles go up one tree: a bundle arriving by a
     * fallback edge would match no hand-off of its receiver (the node runtime substitutes only partial
     * bundles of a predecessor's predecessor), so a mesh takes none; its idle primary edges stay unused */
    if (pft_plan_kind(m->plan) == PFT_KIND_MESH) {
        for (size_t e = 0; e < m->n_edges; e++)
            if (m->edges[e].fallback)
                return pft_topo__fail_at(
                    t, m->edges[e].line, PFT_ETOPO,
                    "fallback edge %s -> %s: a mesh (graph attribute root) takes no fallback edges; "
                    "remove fallback=true or the edge",
                    pft_topo__node_id(m, m->edges[e].tail), pft_topo__node_id(m, m->edges[e].head));
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
                             pft_topo__node_id(m, cycle[i % len]));
            used += w > 0 ? (size_t)w : 0;
        }
        size_t fe = 0; /* a fallback edge on the cycle */
        for (size_t i = 0; i < len; i++)
            for (size_t e = 0; e < m->n_edges; e++)
                if (m->edges[e].fallback && m->edges[e].tail == cycle[i] &&
                    m->edges[e].head == cycle[(i + 1) % len])
                    fe = e;
        rc = pft_topo__fail_at(
            t, m->edges[fe].line, PFT_ETOPO,
            "fallback edge %s -> %s closes the cycle %s: outside a ring, fallback edges must not "
            "create cycles",
            pft_topo__node_id(m, m->edges[fe].tail), pft_topo__node_id(m, m->edges[fe].head), text);
    } else if (rc < 0) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
    }
    pft_free(all);
    pft_free(cycle);
    return rc;
}
