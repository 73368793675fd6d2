/* pft_plan: the shape of a topology (chain, ring, dag, mesh), each node's role and the ordered hand-offs of
 * one run. */
#ifndef PFT_PLAN_H
#define PFT_PLAN_H

#include <stddef.h>

/* Theory (DESIGN.md §6). A run moves per-class GMM bundles along the primary edges of a digraph.
 * - chain: a single path a → b → … → z; dag: any other connected acyclic digraph. Every node waits
 *   for one bundle from each predecessor, refits on its local data ∪ samples of those bundles, and
 *   sends the result to each successor: one hand-off per edge, in topological order.
 * - ring: a single simple cycle v0 → v1 → … → v(n-1) → v0 with start = v0. Lap 1 accumulates:
 *   v0 → v1 → … → v(n-1), each node refitting (n-1 hand-offs). v(n-1), the producer, now holds
 *   everyone's knowledge; its bundle is complete. Lap 2 spreads it: v(n-1) → v0, then the complete
 *   bundle is forwarded unchanged v0 → v1 → … → v(n-2), stopping before its producer (n-1 hand-offs).
 *   Together 2n-2 hand-offs, and every node ends with the complete knowledge.
 * - mesh: any other strongly connected digraph (every node reaches every other), with root = r. The
 *   ring's two laps, generalised to two BFS trees over the primary edges. Lap 1 (gather) runs up the
 *   in-tree towards r: the parent of v ≠ r is its successor on a shortest path to r (ties: the lowest
 *   node index). Each node waits for its in-tree children, refits on local data ∪ their samples and
 *   sends to its parent; r, the producer, refits on everything: its bundle is complete. Lap 2
 *   (spread) runs down the out-tree from r: the parent of v ≠ r is its predecessor on a shortest path
 *   from r (ties: the lowest index). r sends its complete bundle to its out-tree children; every other
 *   node forwards it unchanged to its own. n-1 hand-offs per lap, 2n-2 in all; a primary edge in
 *   neither tree carries nothing (it is idle). Since the in-tree merges every node's bundle exactly
 *   once, the complete bundle counts each node's data once. */

/* Shape of the primary-edge graph. */
typedef enum {
    PFT_KIND_CHAIN = 0,
    PFT_KIND_RING = 1,
    PFT_KIND_DAG = 2,
    PFT_KIND_MESH = 3,
} pft_kind_t;

/* What a node is in the run. */
typedef enum {
    PFT_ROLE_SOURCE = 0,   /* chain/dag: no predecessor, starts at once */
    PFT_ROLE_RELAY = 1,    /* chain/dag: predecessors and successors */
    PFT_ROLE_SINK = 2,     /* chain/dag: no successor */
    PFT_ROLE_START = 3,    /* ring: begins lap 1, later receives the complete bundle */
    PFT_ROLE_MEMBER = 4,   /* ring, mesh: refits in lap 1, forwards in lap 2 */
    PFT_ROLE_PRODUCER = 5, /* ring: the node before start; mesh: the root; produces the complete bundle */
} pft_role_t;

/* How the bundle of a hand-off was made, and what a stage does with what it receives. */
typedef enum {
    PFT_WHAT_REFIT = 0,   /* EM on local data ∪ samples of the received bundles; a new bundle */
    PFT_WHAT_FORWARD = 1, /* "forward-complete": the received complete bundle, passed on unchanged */
} pft_what_t;

/* One hand-off of one bundle along one edge. */
typedef struct {
    size_t seq;      /* 1-based position in the run's order */
    size_t from;     /* sender (node index) */
    size_t to;       /* receiver (node index) */
    int lap;         /* 1, or 2 for the second lap of a ring or mesh */
    pft_what_t what; /* how the sender made the bundle */
    int complete;    /* 1 if the bundle carries every node's knowledge (ring or mesh lap 2) */
} pft_handoff_t;

/* One step of a node: wait for the listed inbound hand-offs, act, send the listed outbound ones. */
typedef struct {
    int lap;            /* lap of the received bundles (1 when nothing is received) */
    pft_what_t action;  /* REFIT: fit local ∪ received; FORWARD: adopt the received complete bundle */
    size_t n_recv;      /* inbound hand-offs to wait for (0: start at once) */
    const size_t *recv; /* their indices in the hand-off list (0-based; seq = index + 1) */
    size_t n_send;      /* outbound hand-offs made after the action */
    const size_t *send; /* their indices in the hand-off list */
    int final;          /* 1 for the node's last stage: train and evaluate the head on its result */
} pft_stage_t;

/* A primary edge, by node indices. */
typedef struct {
    size_t tail, head;
} pft_plan_edge_t;

/* Where a planning error lies, for the caller to add a file line: a node, an edge, or neither (SIZE_MAX). */
typedef struct {
    size_t node;  /* a node index, or SIZE_MAX */
    size_t edge;  /* an index into the edges given, or SIZE_MAX */
    int at_start; /* 1: the start attribute itself is at fault */
    int at_root;  /* 1: the root attribute itself is at fault */
} pft_plan_where_t;

typedef struct pft_plan_t pft_plan_t;

/* Analyses n nodes (names[i] for messages) joined by n_edges primary edges; start is the ring start
 * node or SIZE_MAX, root the mesh root or SIZE_MAX. Self loops and repeated edges must have been
 * rejected by the caller. On success *out is new. Errors (PFT_ETOPO, message names the nodes; *where,
 * if not NULL, points at the culprit): fewer than 2 nodes, a node without edges, disconnected parts,
 * a cycle without start or root, start given but the graph is not a single simple cycle, root given
 * but the graph is acyclic, a ring, or not strongly connected (the message names a node that cannot
 * reach the root or cannot be reached from it). PFT_ENOMEM on allocation failure. */
int pft_plan_build(size_t n, const char *const *names, size_t n_edges, const pft_plan_edge_t *edges,
                   size_t start, size_t root, pft_plan_t **out, pft_plan_where_t *where);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_plan_destroy(pft_plan_t **self_p);

pft_kind_t pft_plan_kind(const pft_plan_t *self);
pft_role_t pft_plan_role(const pft_plan_t *self, size_t node);

/* Predecessors / successors of a node along primary edges, ascending by node index. */
size_t pft_plan_preds(const pft_plan_t *self, size_t node, const size_t **out);
size_t pft_plan_succs(const pft_plan_t *self, size_t node, const size_t **out);

/* Processing order: topological for chain/dag (ties by node index); for a ring v0 = start, v1, …; for a
 * mesh lap 1's: by distance to the root, farthest first (ties by node index), the root last. */
size_t pft_plan_order(const pft_plan_t *self, const size_t **out);

/* The run's hand-offs in order (2n-2 for a ring or mesh, one per edge otherwise). */
size_t pft_plan_handoffs(const pft_plan_t *self, const pft_handoff_t **out);

/* A node's stages in order (two for ring start and ring or mesh members, one otherwise). */
size_t pft_plan_stages(const pft_plan_t *self, size_t node, const pft_stage_t **out);

/* Looks for a directed cycle among n nodes; on finding one stores its nodes (in order, first not
 * repeated) in cycle[0..*len) (cycle must hold n) and returns 1; returns 0 if acyclic, PFT_ENOMEM. */
int pft_plan_find_cycle(size_t n, size_t n_edges, const pft_plan_edge_t *edges, size_t *cycle, size_t *len);

/* "chain" / "ring" / "dag" / "mesh"; "source" / "relay" / "sink" / "start" / "member" / "producer";
 * "refit" / "forward-complete". */
const char *pft_kind_name(pft_kind_t kind);
const char *pft_role_name(pft_role_t role);
const char *pft_what_name(pft_what_t what);

#endif
