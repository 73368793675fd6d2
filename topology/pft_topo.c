/* pft_topo: the topology object: destroy, getters, lookups, and the file:line error messages of its parts. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- errors ---- */

/* Records "path:line: message" (or "path: message" when the line is unknown) and returns code. */
int pft_topo__fail_at(const pft_topo_t *t, int line, int code, const char *fmt, ...)
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
int pft_topo__wrap_at(const pft_topo_t *t, int line, int code, const char *who)
{
    if (line > 0)
        return who ? pft_err_wrap(code, "%s:%d: %s", t->path, line, who)
                   : pft_err_wrap(code, "%s:%d", t->path, line);
    return who ? pft_err_wrap(code, "%s: %s", t->path, who) : pft_err_wrap(code, "%s", t->path);
}

/* ---- model ---- */

void pft_topo__model_free(pft_topo__model_t *m)
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

/* Value of attribute name on obj (graph, node or edge of kind), or NULL when undeclared or empty. */
const char *pft_topo__get_value(Agraph_t *g, void *obj, int kind, const char *name)
{
    Agsym_t *sym = agattr(g, kind, (char *)name, NULL);
    if (!sym)
        return NULL;
    const char *v = agxget(obj, sym);
    return v && v[0] ? v : NULL;
}

/* Linear: node ids are few and lookups rare. */
int pft_topo__find_index(const pft_topo__model_t *m, const char *id, size_t *out)
{
    for (size_t v = 0; v < m->n; v++)
        if (strcmp(m->nodes[v].id, id) == 0) {
            *out = v;
            return 1;
        }
    return 0;
}

/* ---- public ---- */

void pft_topo_destroy(pft_topo_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_topo_t *t = *self_p;
    pft_topo__model_free(&t->m);
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
    return id && pft_topo__find_index(&self->m, id, &v) ? &self->m.nodes[v] : NULL;
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
