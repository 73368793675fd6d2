/* pft_topo: a topology file (Graphviz DOT) -> validated graph, effective per-node settings and the run's
 * plan. */
#ifndef PFT_TOPO_H
#define PFT_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "pft_gmm.h"  /* pft_cov_t */
#include "pft_plan.h" /* kinds, roles, hand-offs, stages */

/* A topology is a `digraph` parsed with libcgraph. Graph attributes are run-wide settings, node
 * attributes a node's endpoint, data and overrides, each edge a hand-off (DESIGN.md §6). The
 * attributes are a table (pft_topo_attr.h; `pftnet check --attributes` prints it). Graphviz layout
 * attributes (label, shape, color, …) are accepted and ignored, so the file renders with `dot -Tsvg`.
 * Relative paths resolve against the topology file's folder; after loading every path is absolute.
 * Errors name the file, the line (found by a pre-scan of the text), the node or edge and the fault.
 * libcgraph keeps global state: load, set and write topologies from one thread at a time.
 *
 * Choices worth knowing:
 * - Node index = order of first appearance in the file; `labels:<r0>|<r1>|…` gives node i range ri.
 * - Rows per node are `samples` (not `size`, which is Graphviz's drawing size); the low-rank
 *   covariance rank is `cov_rank` (not `rank`, Graphviz's rank=same); nodes may mix families.
 * - DOT bare numbers have no exponent: write tol="1e-4" (1e-4 unquoted is refused, naming the line).
 * - The file holds public facts (ids, edges, endpoints, public keys, settings, public row counts); a node's
 *   data files are private: its own command line names them (pftnode --train, --node-file), or, for a
 *   local simulation, its entry, which only that node reads. Without `dataset` every node needs an
 *   endpoint (explicit or port_base) and every node a key or none, unless a launcher loads the file
 *   (PFT_TOPO_LAUNCH: it assigns endpoints and makes keys, and needs every node's train and labels); with
 *   `dataset` (a simulation) the launcher fills them in and writes the public copy (pft_topo_write_public)
 *   and one private file per node.
 * - Fallback edges are validated and exposed but take no part in kind, roles or hand-offs; outside
 *   a ring they must not close a cycle, and a mesh has none. An edge `deadline` is how long its head
 *   waits for it.
 * - A mesh (graph attribute root) uses only the primary edges of two BFS trees; its other primary
 *   edges carry no hand-off (pft_plan.h). */

typedef struct pft_topo_t pft_topo_t;

/* Load flags. */
enum {
    /* Do not check that data files exist (the dataset folder, node train/labels/test files);
     * for a launcher that creates them after validating, or a check without the data. */
    PFT_TOPO_SKIP_DATA_CHECK = 1u << 0,
    /* Require the public facts a node process needs of every node: an endpoint, and every node's key or
     * none, also in a simulation (pftnode loads its topology with this flag). No node's data is required:
     * a node's own files come from its command line. */
    PFT_TOPO_REQUIRE_RESOLVED = 1u << 1,
    /* A launcher's load: endpoints and keys may be missing (it assigns and makes them); without dataset,
     * every node with data must name its train and labels (the launcher runs every node). */
    PFT_TOPO_LAUNCH = 1u << 2,
};

typedef enum { PFT_TOPO_FP16 = 0, PFT_TOPO_FP32 = 1 } pft_topo_dtype_t;
typedef enum { PFT_TOPO_PREP_NONE = 0, PFT_TOPO_PREP_L2 = 1, PFT_TOPO_PREP_SQRT_L2 = 2 } pft_topo_prep_t;
/* How a node with cov=full, k=1 merges what it receives (attribute merge). */
typedef enum { PFT_TOPO_MERGE_EXACT = 0, PFT_TOPO_MERGE_SAMPLE = 1 } pft_topo_merge_t;
/* The node's classifier (attribute head), one X(NAME, "name") each, in the order of their values: pftnode's
 * head table (node/peer/pft_node_table.c) has an entry for every head but AUTO, which is resolved at load:
 * GAUSSIAN for exact statistics, else LOGREG. docs/USAGE.md says what each one is. */
#define PFT_TOPO_HEADS(X)                                                                                    \
    X(AUTO, "auto")                                                                                          \
    X(LOGREG, "logreg")                                                                                      \
    X(GAUSSIAN, "gaussian")                                                                                  \
    X(NCM, "ncm")
typedef enum {
#define PFT_X_HEAD(name, text) PFT_TOPO_HEAD_##name,
    PFT_TOPO_HEADS(PFT_X_HEAD)
#undef PFT_X_HEAD
} pft_topo_head_t;
/* "auto", "logreg", ...; NULL for a value that is not a head. */
const char *pft_topo_head_name(int head);
/* 1 if a node with these settings carries exact statistics (DESIGN §8): cov = tied, or cov = full with k = 1
 * and merge = exact; 0 if it samples mixtures. The one home of the rule (pft_topo_family.c). */
int pft_topo_exact(pft_cov_t cov, int k, pft_topo_merge_t merge);
/* What head resolves to: AUTO gives GAUSSIAN for exact statistics (exact = pft_topo_exact(...)), else LOGREG;
 * any other head is returned unchanged. */
pft_topo_head_t pft_topo_head_resolve(pft_topo_head_t head, int exact);
/* What a node does when a predecessor's bundle has not arrived by the deadline. */
typedef enum { PFT_TOPO_MISSING_PROCEED = 0, PFT_TOPO_MISSING_FAIL = 1 } pft_topo_missing_t;
/* What a tied statistics part's shared scatter travels as (DESIGN.md §8, SECURITY.md §9): lowrank, its
 * leading eigenpairs (at most one per stats_rows_per_rank rows the part stands for, and stats_rank) plus
 * the diagonal; full_scatter, the exact dense matrix (research only: its span holds every row). */
typedef enum { PFT_TOPO_RELEASE_LOWRANK = 0, PFT_TOPO_RELEASE_FULL_SCATTER = 1 } pft_topo_release_t;
/* A part standing for fewer rows than this sends its shared scatter as its isotropic variance only, whatever
 * stats_rows_per_rank says: the exact diagonal of a handful of rows shows the coordinates they all leave at
 * zero, a subspace that holds them (SECURITY.md §9). */
#define PFT_TOPO_RELEASE_MIN_DIAG_ROWS 20
/* Simulation partitions (node/launch/pft_partition.c splits the dataset by them). */
typedef enum {
    PFT_TOPO_PART_IID = 0,       /* shuffle, equal shares */
    PFT_TOPO_PART_DIRICHLET = 1, /* per class, node shares ~ Dirichlet(beta) (Hsu et al. 2019) */
    PFT_TOPO_PART_LABELS = 2,    /* node i gets the classes of its range; nodes sharing a class split it */
    PFT_TOPO_PART_DOMAIN = 3,    /* node gets the rows of its domain; nodes sharing a domain split it */
} pft_topo_part_t;

/* Run-wide settings (graph attributes), defaults applied. Strings are owned by the topology. */
typedef struct {
    const char *name;       /* graph name; NULL for an anonymous graph */
    const char *run;        /* run id: attribute run, else the graph name, else the file name stem */
    int k;                  /* GMM components per class, default for nodes */
    pft_cov_t cov;          /* covariance family, default for nodes */
    int cov_rank;           /* cov=lowrank: factors per component, default for nodes (fit clamps to d-1) */
    int samples;            /* simulation: training rows per node (0: all of its share), default */
    uint64_t seed;          /* run seed */
    pft_topo_dtype_t dtype; /* parameter encoding on the wire */
    pft_topo_dtype_t stats_dtype; /* encoding of exact statistics on the wire */
    int stats_release;            /* pft_topo_release_t: lowrank (default) or full_scatter */
    int stats_rank;               /* stats_release=lowrank: eigenpairs per part at most (0: diagonal only) */
    int stats_rows_per_rank;      /* stats_release=lowrank: rows a part stands for per eigenpair it sends */
    int secure_agg;       /* 1: exact statistics travel masked until the plan opens them (docs/SECAGG.md) */
    int min_contributors; /* secure_agg: fewest other contributors of a clear aggregate */
    int dp_dropouts; /* secure_agg with DP: members of a star that may drop (noise shares σ²/(D − t)) */
    int secagg_threshold; /* secure_agg in a star: survivors and self-mask shares needed (0: the default) */
    int secagg_degree;    /* secure_agg: mask peers per member among the others (0: every member) */
    int merge;            /* pft_topo_merge_t default for nodes */
    int head;             /* pft_topo_head_t default for nodes */
    pft_topo_prep_t prep; /* feature preprocessing, identical on every node */
    double deadline;      /* seconds a node waits for all its predecessors (edges may override) */
    double send_deadline; /* seconds a sender retries one hand-off (edges may override) */
    double resend_grace;  /* seconds a finished node stays after its last ACK, confirmed or not [0] */
    pft_topo_missing_t on_missing; /* policy when a predecessor never arrives */
    int max_iter;                  /* EM iterations at most */
    double tol;                    /* EM convergence tolerance */
    double reg_covar;              /* added to covariance diagonals */
    int n_init;                    /* EM restarts */
    double head_c;                 /* head: inverse L2 strength (scikit-learn's C) */
    int head_draws;                /* head: synthetic draws per represented row, up to mc_budget per class */
    int em_draws;          /* EM refit: synthetic draws per represented row, up to mc_budget per class */
    int mc_budget;         /* most synthetic draws per class (0: no bound), each weighted (DESIGN.md §4) */
    int min_rows;          /* privacy floor: rows every released component / statistic stands for, default */
    double mean_noise;     /* exact release: noise std on each own class sum released in the clear, default */
    double dp_epsilon;     /* DP-FedPFT epsilon per release, default for nodes (0: off) */
    double dp_delta;       /* DP delta (default 1e-5; 0 < delta < 1 where DP is on: rule dp-delta) */
    int dp_mech;           /* pft_dp_mech_t: 0 thm41, 1 b3 */
    double dp_budget;      /* total epsilon a node may release (0: unlimited) */
    int max_bundle_mb;     /* largest bundle a node accepts, MiB */
    const char *dataset;   /* simulation: absolute dataset folder; NULL: every node brings its data */
    const char *partition; /* simulation: partition text as written ("iid" by default) */
    pft_topo_part_t part_kind; /* parsed partition */
    double part_beta;          /* dirichlet:<beta> */
    int part_ranges;           /* labels:<r>|<r>|…: number of ranges (0: nodes give classes) */
    int port_base;             /* first TCP port of auto-assigned endpoints; 0: none */
    const char *start_id;      /* ring start node id; NULL unless a ring */
    size_t start;              /* its node index; SIZE_MAX unless a ring */
    const char *root_id;       /* mesh root node id; NULL unless a mesh */
    size_t root;               /* its node index; SIZE_MAX unless a mesh */
} pft_topo_run_t;
/* The release rule's rank (DESIGN.md §8): how many leading eigenpairs of its shared scatter a tied part
 * standing for `rows` rows sends at dimension d: min(rows / stats_rows_per_rank, stats_rank, d - 1), and 0
 * (the isotropic variance only) below PFT_TOPO_RELEASE_MIN_DIAG_ROWS rows. The one home of the rule (the
 * node's clear release and its masked release both use it; pft_topo_family.c). */
int pft_topo_release_rank(const pft_topo_run_t *run, uint64_t rows, int d);

/* One node: identity, effective settings (graph defaults + node overrides) and its place in the plan. */
typedef struct {
    const char *id;  /* node id: letters, digits, '_', '-', '.' (not first), at most 64 */
    size_t index;    /* position in file order (order of first appearance) */
    int line;        /* line of first appearance; 0 if unknown */
    pft_role_t role; /* role in the plan */
    const char
        *endpoint;      /* ZeroMQ endpoint (tcp://host:port, ipc://path, inproc://name); NULL: not yet set */
    const char *train;  /* absolute path of the training features .npy; NULL: not given */
    const char *labels; /* training labels .npy */
    const char *test;   /* test features .npy; NULL: not given (test and test_labels go together) */
    const char *test_labels; /* test labels .npy */
    const char *key;         /* public key: absolute path of a .pub file, or the inline key line (starts with
                                "pftnet-ed25519-public "); NULL: none given. Parse with pft_pubkey_resolve() */
    int k;                   /* effective GMM components per class */
    pft_cov_t cov;           /* effective covariance family */
    int cov_rank;            /* effective lowrank rank (meaningful for cov=lowrank only) */
    int merge;               /* pft_topo_merge_t as written */
    int head;                /* pft_topo_head_t, resolved: never AUTO after loading */
    int exact;    /* 1: the node carries exact statistics (cov=tied, or full with k=1 and merge=exact) */
    int samples;  /* simulation: effective rows for this node (0: all of its share) */
    int rows;     /* public count of training rows the node stands for (0: not given, no cap) */
    int has_data; /* 0 (attribute data = false): no training rows of its own, e.g. an aggregator */
    int domain;   /* simulation, partition=domain: domain id; -1: none */
    const char *classes; /* simulation, partition=labels: class set ("0-3", "0,2,5"); NULL: none */
    double dp_epsilon;   /* effective DP-FedPFT epsilon (0: off) */
    double dp_delta;     /* effective delta (0 < delta < 1 where DP is on: rule dp-delta) */
    int dp_mech;         /* effective mechanism (pft_dp_mech_t) */
    double dp_budget;    /* effective total epsilon budget (0: unlimited) */
    int min_rows;        /* effective privacy floor (1: none, the paper's protocol) */
    double mean_noise;   /* effective noise std on each own class sum of an exact release (0: exact sums) */
    size_t n_preds;      /* primary predecessors (node indices, ascending) */
    const size_t *preds;
    size_t n_succs; /* primary successors */
    const size_t *succs;
    size_t n_fallbacks; /* fallback successors: used only when the primary stays unreachable */
    const size_t *fallbacks;
    size_t n_fallback_preds; /* nodes that name this one as their fallback */
    const size_t *fallback_preds;
    size_t n_stages; /* what the node does, in order (pft_plan.h) */
    const pft_stage_t *stages;
} pft_topo_node_t;

/* One edge (primary or fallback). */
typedef struct {
    size_t tail, head;    /* node indices */
    int line;             /* line where written; 0 if unknown */
    int fallback;         /* 1: used only if tail's primary successor stays unreachable past send_deadline */
    double deadline;      /* effective: seconds head waits for this bundle (edge, else graph deadline) */
    double send_deadline; /* effective: seconds tail retries this hand-off */
} pft_topo_edge_t;

/* Reads and validates the topology at path (flags: PFT_TOPO_*). On success *out is new.
 * Errors: PFT_EIO (cannot read), PFT_EFORMAT (not DOT / not text), PFT_ETOPO (invalid topology:
 * the message names file, line, node or edge and the fault), PFT_ENOMEM. *out stays NULL on error. */
int pft_topo_load(const char *path, unsigned flags, pft_topo_t **out);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_topo_destroy(pft_topo_t **self_p);

/* The path as given to pft_topo_load. */
const char *pft_topo_path(const pft_topo_t *self);

pft_kind_t pft_topo_kind(const pft_topo_t *self);
const pft_topo_run_t *pft_topo_run(const pft_topo_t *self);
/* 1 if the topology is a simulation (graph attribute dataset). */
int pft_topo_is_simulation(const pft_topo_t *self);

size_t pft_topo_node_count(const pft_topo_t *self);
/* Node i in file order (i < count), or NULL. */
const pft_topo_node_t *pft_topo_node(const pft_topo_t *self, size_t i);
/* Node by id, or NULL. */
const pft_topo_node_t *pft_topo_find(const pft_topo_t *self, const char *id);

/* Primary predecessors / successors of node i as node indices; returns the count. */
size_t pft_topo_preds(const pft_topo_t *self, size_t i, const size_t **out);
size_t pft_topo_succs(const pft_topo_t *self, size_t i, const size_t **out);

/* Edges in file order (primary and fallback), and the edge tail -> head (either kind) or NULL. */
size_t pft_topo_edge_count(const pft_topo_t *self);
const pft_topo_edge_t *pft_topo_edge(const pft_topo_t *self, size_t i);
const pft_topo_edge_t *pft_topo_edge_find(const pft_topo_t *self, size_t tail, size_t head);

/* Processing order (topological for chain/dag; start, … for a ring; lap 1's for a mesh); returns n. */
size_t pft_topo_order(const pft_topo_t *self, const size_t **out);
/* The run's hand-offs in order; returns their number (2n-2 for a ring or mesh). */
size_t pft_topo_handoffs(const pft_topo_t *self, const pft_handoff_t **out);

/* Sets (value non-empty) or clears (value NULL or "") attributes on node id or on the graph, then
 * validates the whole topology again, once: kv holds name, value, name, value, …, NULL, so that
 * attributes that go together (train and labels) change together. Each name must be in the table
 * for that scope, or a Graphviz layout attribute. Relative paths resolve against the topology file's folder.
 * On error the topology is unchanged and PFT_EINVAL / PFT_ETOPO / PFT_ENOMEM is returned with a
 * message. On success every pointer obtained from this topology before (nodes, edges, run,
 * hand-offs, stages) is stale: fetch them again. */
int pft_topo_set_node_attrs(pft_topo_t *self, const char *id, const char *const *kv);
int pft_topo_set_graph_attrs(pft_topo_t *self, const char *const *kv);
/* The same for one attribute. */
int pft_topo_set_node_attr(pft_topo_t *self, const char *id, const char *name, const char *value);
int pft_topo_set_graph_attr(pft_topo_t *self, const char *name, const char *value);

/* Writes the resolved topology as DOT to path (atomically: a temporary file, then rename): data paths
 * absolute, auto-assigned endpoints written out, layout attributes and subgraphs (clusters) kept,
 * comments dropped. Every node is declared first, in index order, and edges follow in index order, so
 * it loads back to the same settings, node indices and edge order. PFT_EIO with a message on failure. */
int pft_topo_write(const pft_topo_t *self, const char *path);
/* The same without any node's private files (the node-scope paths: train, labels, test, test_labels): the
 * public topology organisations share, and a launch's DIR/topology.dot (each node's files go in its own
 * node file). */
int pft_topo_write_public(const pft_topo_t *self, const char *path);

/* Exact statistics travel as parts, each summing a group of contributors (DESIGN.md §8). For node v, fills
 * groups[u] (node_count entries) for every node u: -1 if u's rows never reach v (along lap-1 hand-offs and
 * fallback edges; u = v reaches itself), else the id of u's part at v, the smallest node index of its group.
 * Two contributors share a part iff every rejoin after v (a node with several such predecessors) receives
 * both through the same predecessors; so a rejoin can take each part whole from the first of its arrived
 * predecessors that carries it, and counts every contributor exactly once. Chains and rings: one group.
 * PFT_ENOMEM. */
int pft_topo_part_groups(const pft_topo_t *self, size_t v, long *groups);

#endif
