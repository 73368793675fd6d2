/* pft_topo_write: the resolved topology written as DOT (atomically), in an order that loads back the same. */
#include "pft_topo.h"

#include "pft_error.h"
#include "pft_topo_attr.h"
#include "pft_topo_internal.h"

#include <cgraph.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* 1 if sym names a node's private file (a node-scope path: train, labels, test, test_labels). */
static int is_private(Agsym_t *sym, int kind)
{
    const pft_topo_attr_t *a = kind == AGNODE ? pft_topo_attr_find(sym->name) : NULL;
    return a && a->type == PFT_ATTR_PATH && (a->scopes & PFT_SCOPE_NODE);
}

/* 1 if obj's value of sym is written: not its default, and not private when public. */
static int written(void *obj, Agsym_t *sym, int kind, int public)
{
    return non_default(obj, sym) && !(public && is_private(sym, kind));
}

/* " [name=value, ...]" for every attribute of obj (AGNODE or AGEDGE) whose value differs from the
 * default written at the top (private files left out when public), and an edge's key if it has one;
 * nothing when there is nothing. */
static void put_obj_attrs(FILE *f, Agraph_t *g, void *obj, int kind, int public)
{
    char *key = kind == AGEDGE ? agnameof(obj) : NULL;
    int total = !is_anonymous(key);
    for (Agsym_t *sym = agnxtattr(g, kind, NULL); sym; sym = agnxtattr(g, kind, sym))
        total += written(obj, sym, kind, public);
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
        if (!written(obj, sym, kind, public))
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
static void put_defaults(FILE *f, Agraph_t *g, int kind, const char *what, int public)
{
    int n = 0;
    for (Agsym_t *sym = agnxtattr(g, kind, NULL); sym; sym = agnxtattr(g, kind, sym)) {
        if (!sym->defval[0] || (public && is_private(sym, kind)))
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
static void put_topology(FILE *f, const pft_topo_t *t, int public)
{
    Agraph_t *g = t->g;
    const pft_topo__model_t *m = &t->m;
    const int directed = agisdirected(g);
    fputs(
        public
            ? "// written by pftnet (pft_topo_write_public): public facts only; each node's files are its "
              "own\n"
            : "// written by pftnet (pft_topo_write): data paths absolute, assigned endpoints written out\n",
        f);
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
    if (is_anonymous(agnameof(g)) && !pft_topo__get_value(g, g, AGRAPH, "run")) {
        /* the run id came from the file name, which the copy need not share */
        fputs("\trun = ", f);
        fputs(agcanon((char *)m->run.run, 0),
              f); /* not a cgraph string: agcanonStr would look at its header */
        fputs(";\n", f);
    }
    put_defaults(f, g, AGNODE, "node", public);
    put_defaults(f, g, AGEDGE, "edge", public);
    for (size_t v = 0; v < m->n; v++) {
        fputc('\t', f);
        put_id(f, agnameof(m->agn[v]));
        put_obj_attrs(f, g, m->agn[v], AGNODE, public);
        fputs(";\n", f);
    }
    put_subgraphs(f, g, g, 1);
    for (size_t e = 0; e < m->n_edges; e++) {
        fputc('\t', f);
        put_id(f, agnameof(m->agn[m->edges[e].tail]));
        fputs(directed ? " -> " : " -- ", f);
        put_id(f, agnameof(m->agn[m->edges[e].head]));
        put_obj_attrs(f, g, m->age[e], AGEDGE, public);
        fputs(";\n", f);
    }
    fputs("}\n", f);
}

static int write_file(const pft_topo_t *self, const char *path, int public)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return pft_err(PFT_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return pft_err(PFT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    errno = 0;
    put_topology(f, self, public);
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

int pft_topo_write(const pft_topo_t *self, const char *path)
{
    return write_file(self, path, 0);
}

int pft_topo_write_public(const pft_topo_t *self, const char *path)
{
    return write_file(self, path, 1);
}
