/* pft_topo_internal: INTERNAL to topology/pft_topo*.c: the topology object, its model and the steps that
 * build it. Not installed, not included outside topology/; names carry a double underscore (pft_topo__). */
#ifndef PFT_TOPO_INTERNAL_H
#define PFT_TOPO_INTERNAL_H

#include "pft_dotscan.h"
#include "pft_plan.h"
#include "pft_topo.h"

#include <cgraph.h>

#include <stddef.h>

/* How a topology is built from its cgraph graph (pft_topo__build runs the steps in this order, each
 * file owning its steps):
 *   pft_topo_load.c      read the file, pre-scan it (pft_dotscan), parse it with cgraph;
 *   pft_topo_build.c     nodes and edges in file order, limits, then the steps below, then normalize;
 *   pft_topo_resolve.c   attribute names checked, graph, node and edge settings parsed (pft_topo_attr);
 *   pft_topo_plan.c      the plan (kind, roles, hand-offs: pft_plan) and the fallback edges;
 *   pft_topo_validate.c  simulation attributes, endpoints, data files and keys;
 *   pft_topo_set.c       attributes changed after loading (rebuilds the model);
 *   pft_topo_write.c     the resolved copy written as DOT;
 *   pft_topo.c           the object: destroy, getters, and the file:line error messages. */

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
} pft_topo__model_t;

struct pft_topo_t {
    char *path; /* as given */
    char *dir;  /* absolute folder of the file */
    char *stem; /* file name without extension */
    unsigned flags;
    Agraph_t *g;
    pft_dotscan_t *scan;
    pft_topo__model_t m;
    unsigned char
        *ep_auto; /* node v's endpoint was derived from port_base (normalize writes it into the graph) */
};

/* ---- pft_topo.c: errors and model helpers ---- */

/* Records "path:line: message" (or "path: message" when the line is unknown) and returns code. */
int pft_topo__fail_at(const pft_topo_t *t, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prefixes the current message (from a parser) with "path:line: " and who (NULL: nobody); returns code. */
int pft_topo__wrap_at(const pft_topo_t *t, int line, int code, const char *who);

/* Frees everything m owns and zeroes it; safe on a zeroed or partly built model. */
void pft_topo__model_free(pft_topo__model_t *m);
/* Value of attribute name on obj (graph, node or edge of kind), or NULL when undeclared or empty. */
const char *pft_topo__get_value(Agraph_t *g, void *obj, int kind, const char *name);
/* 1 and *out = the index of node id, or 0 if there is none. */
int pft_topo__find_index(const pft_topo__model_t *m, const char *id, size_t *out);

static inline const char *pft_topo__node_id(const pft_topo__model_t *m, size_t v)
{
    return m->nodes[v].id;
}

/* ---- pft_topo_build.c ---- */

/* Derives the whole model from t->g; on error m is freed and the message says what is wrong. */
int pft_topo__build(const pft_topo_t *t, pft_topo__model_t *m);
/* Writes resolved values back into the graph so that pft_topo_write produces a self-contained file. */
int pft_topo__normalize(pft_topo_t *t);

/* ---- pft_topo_resolve.c: build steps; each returns 0 or an error with a file:line message ---- */

/* Every graph, node and edge attribute is in the table for its scope or a Graphviz layout attribute;
 * no run-wide attribute inside a subgraph. */
int pft_topo__check_unknown_attrs(const pft_topo_t *t, pft_topo__model_t *m);
/* Run-wide settings: table defaults + graph attributes, run id, partition. */
int pft_topo__parse_graph_attrs(const pft_topo_t *t, pft_topo__model_t *m);
/* Node settings = graph defaults + node attributes. */
int pft_topo__parse_nodes(const pft_topo_t *t, pft_topo__model_t *m);
/* Edge settings = graph defaults + edge attributes. */
int pft_topo__parse_edge_attrs(const pft_topo_t *t, pft_topo__model_t *m);

/* ---- pft_topo_plan.c ---- */

/* Resolves start / root and builds m->plan from the primary edges (pft_plan_build). */
int pft_topo__plan_graph(const pft_topo_t *t, pft_topo__model_t *m);
/* Builds the fallback lists and checks every fallback edge against the plan's kind. */
int pft_topo__check_fallbacks(const pft_topo_t *t, pft_topo__model_t *m);

/* ---- pft_topo_validate.c ---- */

/* Simulation attributes: only with dataset, consistent with the partition, dataset files present. */
int pft_topo__check_simulation(const pft_topo_t *t, pft_topo__model_t *m);
/* Endpoints: derived from port_base where missing, required where needed, unique. */
int pft_topo__check_endpoints(const pft_topo_t *t, pft_topo__model_t *m);
/* Node data files (private): paired, present; required only of a launcher without dataset. */
int pft_topo__check_data(const pft_topo_t *t, pft_topo__model_t *m);
/* 1 if every node's endpoint and key (or none) must be in the file (not a launcher's, not a simulation). */
int pft_topo__need_public(const pft_topo_t *t, const pft_topo__model_t *m);
/* Node keys: every node or none, none shared, key files present. */
int pft_topo__check_keys(const pft_topo_t *t, pft_topo__model_t *m);
/* pft_topo_family.c: resolves each node's `exact` and `head`, refuses combinations that are not built. */
int pft_topo__check_families(const pft_topo_t *t, pft_topo__model_t *m);
/* The knowledge graph along which rows travel (lap-1 hand-offs and fallback edges) and who reaches whom:
 * built once (O(n²) bytes) for pft_topo_part_groups of many nodes (the secure-aggregation plan asks it for
 * every hand-off's sender). */
typedef struct pft_topo__kgraph pft_topo__kgraph_t;
int pft_topo__kgraph_new(const pft_topo_t *t, pft_topo__kgraph_t **out);
void pft_topo__kgraph_destroy(pft_topo__kgraph_t **g_p);
/* pft_topo_part_groups of node v from g: the same groups. */
int pft_topo__kgraph_part_groups(const pft_topo__kgraph_t *g, size_t v, long *groups);

#endif
