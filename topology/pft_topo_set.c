/* pft_topo_set: attributes set or cleared after loading; the model is rebuilt, or left as it was on error. */
#include "pft_topo.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <string.h>

/* 0 if name may be set at scope (table or Graphviz layout attribute), else PFT_EINVAL. */
static int check_settable(const char *name, unsigned scope, const char *what)
{
    const pft_topo_attr_t *a = pft_topo_attr_find(name);
    if ((a && (a->scopes & scope)) || pft_topo_attr_is_layout(name, scope))
        return 0;
    const char *sugg = a ? NULL : pft_topo_attr_suggest(name);
    if (a)
        return pft_err(PFT_EINVAL, "'%s' is not a %s attribute (it is a %s attribute)", name, what,
                       pft_topo_attr_scope_name(a->scopes));
    if (sugg)
        return pft_err(PFT_EINVAL, "'%s' is not a %s attribute; did you mean '%s'?", name, what, sugg);
    return pft_err(PFT_EINVAL, "'%s' is not a %s attribute (`pftnet check --attributes` lists them)", name,
                   what);
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
    pft_topo__model_t fresh;
    if ((rc = pft_topo__build(t, &fresh))) {
        for (size_t v = 0; ep_old && v < t->m.n; v++)
            if (ep_old[v])
                agxset(t->m.agn[v], ep_sym, ep_old[v]);
    }
    for (size_t v = 0; ep_old && v < t->m.n; v++)
        pft_free(ep_old[v]);
    pft_free(ep_old);
    if (rc)
        goto done;
    pft_topo__model_free(&t->m);
    t->m = fresh;
    set = 0; /* keep the new values */
    rc = pft_topo__normalize(t);
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
    if (!pft_topo__find_index(&self->m, id, &v))
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
