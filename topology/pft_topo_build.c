/* pft_topo_build: the model (nodes, edges, settings, plan, checks) derived from the graph; write-back. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES PFT_DOTSCAN_MAX_NODES
#define MAX_EDGES PFT_DOTSCAN_MAX_EDGES

/* qsort order of cgraph edges: by creation sequence, which is file order. */
static int cmp_seq(const void *a, const void *b)
{
    uint64_t x = AGSEQ(*(Agedge_t *const *)a), y = AGSEQ(*(Agedge_t *const *)b);
    return (x > y) - (x < y);
}

/* Edges in file order, node indices, self loops and repeated pairs refused, edge settings resolved. */
static int collect_edges(const pft_topo_t *t, pft_topo__model_t *m)
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
        const char *tn = pft_topo__node_id(m, ed->tail), *hn = pft_topo__node_id(m, ed->head);
        /* the n-th edge tail -> head in cgraph order is the n-th one written */
        size_t nth = 0;
        for (size_t j = 0; j < i; j++)
            nth += m->edges[j].tail == ed->tail && m->edges[j].head == ed->head;
        ed->line = pft_dotscan_edge_line(t->scan, tn, hn, nth);
        if (ed->tail == ed->head) {
            rc = pft_topo__fail_at(t, ed->line, PFT_ETOPO,
                                   "edge %s -> %s is a self loop: a node cannot hand off to itself", tn, hn);
        } else if (nth > 0) {
            int first = pft_dotscan_edge_line(t->scan, tn, hn, 0);
            char at[32] = "";
            if (first)
                snprintf(at, sizeof at, " (first at line %d)", first);
            rc = pft_topo__fail_at(
                t, ed->line, PFT_ETOPO,
                "edge %s -> %s appears twice%s: one edge, primary or fallback, per pair of nodes", tn, hn,
                at);
        }
    }
    pft_free(index_of);
    return rc;
}

/* Points each node at its plan data. */
static void link_nodes(pft_topo__model_t *m)
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
int pft_topo__build(const pft_topo_t *t, pft_topo__model_t *m)
{
    memset(m, 0, sizeof *m);
    int rc;
    int header = pft_dotscan_header_line(t->scan);
    if (!agisdirected(t->g)) {
        rc = pft_topo__fail_at(
            t, header, PFT_ETOPO,
            "the graph is undirected ('graph'); a topology must be a 'digraph' with edges a -> b");
        goto fail;
    }
    int nn = agnnodes(t->g);
    if (nn == 0) {
        rc = pft_topo__fail_at(t, header, PFT_ETOPO, "the graph has no nodes");
        goto fail;
    }
    if (nn > MAX_NODES) {
        rc = pft_topo__fail_at(t, header, PFT_ETOPO, "the graph has %d nodes; at most %d are supported", nn,
                               MAX_NODES);
        goto fail;
    }
    if (agnedges(t->g) > MAX_EDGES) {
        rc = pft_topo__fail_at(t, header, PFT_ETOPO, "the graph has %d edges; at most %d are supported",
                               agnedges(t->g), MAX_EDGES);
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
            rc = pft_topo__fail_at(
                t, m->nodes[v].line, PFT_ETOPO,
                "node id '%s': use 1..64 letters, digits, '_', '-' or '.' (not first '-' or '.'); ids "
                "name files and log lines",
                m->nodes[v].id);
            goto fail;
        }
    }
    if ((rc = collect_edges(t, m)) || (rc = pft_topo__check_unknown_attrs(t, m)) ||
        (rc = pft_topo__parse_graph_attrs(t, m)) || (rc = pft_topo__parse_nodes(t, m)) ||
        (rc = pft_topo__parse_edge_attrs(t, m)) || (rc = pft_topo__plan_graph(t, m)) ||
        (rc = pft_topo__check_fallbacks(t, m)) || (rc = pft_topo__check_simulation(t, m)) ||
        (rc = pft_topo__check_endpoints(t, m)) || (rc = pft_topo__check_data(t, m)) ||
        (rc = pft_topo__check_keys(t, m)) || (rc = pft_topo__check_families(t, m)))
        goto fail;
    link_nodes(m);
    return 0;
fail:
    pft_topo__model_free(m);
    return rc;
}

/* Writes resolved values back into the graph so that pft_topo_write produces a self-contained file. */
int pft_topo__normalize(pft_topo_t *t)
{
    pft_topo__model_t *m = &t->m;
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
