/* pft_topo_attr: the topology attribute table (name, scope, type, default, bounds, help) and its value
 * parsers. */
#ifndef PFT_TOPO_ATTR_H
#define PFT_TOPO_ATTR_H

#include <stddef.h>

#include "pft_topo.h"

/* Where an attribute may be written. An attribute valid at graph and node (or edge) scope is a
 * run-wide default that a node (or edge) overrides. */
#define PFT_SCOPE_GRAPH 1u
#define PFT_SCOPE_NODE 2u
#define PFT_SCOPE_EDGE 4u

typedef enum {
    PFT_ATTR_STRING,    /* any text */
    PFT_ATTR_NAME,      /* identifier: letters, digits, '_', '-', '.' (not first), 1..64 characters */
    PFT_ATTR_INT,       /* integer within [min, max] */
    PFT_ATTR_U64,       /* unsigned 64-bit integer */
    PFT_ATTR_REAL,      /* finite number within [min, max] */
    PFT_ATTR_ENUM,      /* one of choices; stored as its index */
    PFT_ATTR_BOOL,      /* true/false, yes/no, on/off, 1/0 */
    PFT_ATTR_PATH,      /* file or folder; relative to the topology file's folder */
    PFT_ATTR_ENDPOINT,  /* tcp://host:port, ipc://path or inproc://name */
    PFT_ATTR_PARTITION, /* iid | dirichlet:<beta> | labels[:<classes>|<classes>|…] | domain */
    PFT_ATTR_CLASSES,   /* class set: "0-3", "0,2,5", "1-2,6" */
    PFT_ATTR_KEY,       /* public key: a .pub file path (as PATH) or inline "pftnet-ed25519-public …" */
} pft_attr_type_t;

/* One attribute. Offsets locate the value in pft_topo_run_t / pft_topo_node_t / pft_topo_edge_t
 * (-1: not in that scope). Int-like types are stored as int, U64 as uint64_t, REAL as double,
 * text types as an owned char * (graph or node, never both). */
typedef struct {
    const char *name;
    unsigned scopes; /* PFT_SCOPE_* */
    pft_attr_type_t type;
    const char *def;            /* default as text; NULL: unset */
    double min, max;            /* bounds of INT / REAL */
    const char *const *choices; /* ENUM: NULL-terminated names */
    const char *help;           /* one line */
    long g_off, n_off, e_off;   /* offsets, -1 where not applicable */
} pft_topo_attr_t;

/* The table, and its length in *n. */
const pft_topo_attr_t *pft_topo_attr_table(size_t *n);

/* The table entry called name, or NULL. */
const pft_topo_attr_t *pft_topo_attr_find(const char *name);

/* 1 if name is a Graphviz layout attribute accepted (and ignored) in scope (one PFT_SCOPE_* bit). */
int pft_topo_attr_is_layout(const char *name, unsigned scope);

/* The known name (table or layout) closest to name within edit distance 2, or NULL. */
const char *pft_topo_attr_suggest(const char *name);

/* Edit distance between a and b, ignoring case (SIZE_MAX when either is longer than 62 bytes). */
size_t pft_topo_attr_edit_distance(const char *a, const char *b);

/* "graph", "node", "edge", or e.g. "graph, node" for a mask; a static string. */
const char *pft_topo_attr_scope_name(unsigned scopes);

/* A short description of the accepted values ("1..1024", "full|diag|spher"). */
void pft_topo_attr_values_text(const pft_topo_attr_t *attr, char *buf, size_t cap);

/* Parses text for attr and stores the value at dst (the field located by the scope's offset); text
 * types are allocated (free with pft_topo_attr_free_value) and PATH is resolved against base_dir.
 * On error dst is unchanged and PFT_EINVAL / PFT_ERANGE is returned with a message naming the
 * attribute and value and saying what is expected; PFT_ENOMEM. */
int pft_topo_attr_parse(const pft_topo_attr_t *attr, const char *text, const char *base_dir, void *dst);

/* Frees a text value stored at dst by pft_topo_attr_parse and NULLs it; no-op for other types. */
void pft_topo_attr_free_value(const pft_topo_attr_t *attr, void *dst);

/* Parses partition text (see PFT_ATTR_PARTITION); returns 0 and fills kind, beta (dirichlet) and the
 * number of label ranges (0 for plain "labels"); PFT_EINVAL with a message otherwise. */
int pft_topo_partition_parse(const char *text, pft_topo_part_t *kind, double *beta, int *n_ranges);

/* Copies the i-th '|'-separated range of a "labels:…" partition into buf; PFT_EINVAL if absent. */
int pft_topo_partition_range(const char *text, int i, char *buf, size_t cap);

/* Checks a class set ("0-3", "0,2,5", "1-2,6"): numbers 0..65535, ranges ascending; PFT_EINVAL. */
int pft_topo_classes_check(const char *text);
/* Parses a class set ("0-3", "0,2,5", "1-2,6") into flags[0..n_classes) (flags NULL: syntax only, classes up
 * to 65535); PFT_EINVAL with a message if malformed, empty or (with flags) a class ≥ n_classes. */
int pft_topo_classes_parse(const char *text, int n_classes, unsigned char *flags);

/* Checks an endpoint (see PFT_ATTR_ENDPOINT); PFT_EINVAL with a message. */
int pft_topo_endpoint_check(const char *text);
/* 1 if endpoint text leaves the port open (tcp://HOST:0 or tcp://HOST:*): the node binds a free port of HOST
 * itself and reports it in <its output folder>/endpoint, where its predecessors read it (docs/USAGE.md). */
int pft_topo_endpoint_open(const char *text);

/* Checks an identifier (see PFT_ATTR_NAME); returns 1 if valid. */
int pft_topo_name_ok(const char *text);

#endif
