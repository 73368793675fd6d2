/* pft_dotscan: a light DOT pre-scanner that remembers on which line each node, edge and attribute appears. */
#ifndef PFT_DOTSCAN_H
#define PFT_DOTSCAN_H

#include <stddef.h>

/* Graphviz cgraph parses the file for real but keeps no line numbers; this scanner reads the same
 * text once more, tolerantly, so that error messages can say "file:line". Its records never reject a
 * file: where it cannot follow the text it stops and later queries answer 0 ("line unknown").
 * Separately it checks the whole text at the level of libcgraph 2.42's lexer (lib/cgraph/scan.l) for
 * what would leave that lexer's global state dirty and break the next parse in the process: a quoted
 * string, HTML string or comment still open at the end, or text after the first graph's closing brace
 * (pft_dotscan_fault). */

typedef struct pft_dotscan_t pft_dotscan_t;

/* The scanner follows at most this many distinct nodes and edges, the most a topology may have (beyond, a
 * file is refused before libcgraph parses it, whose parse grows faster than linearly with the nodes). */
#define PFT_DOTSCAN_MAX_NODES 4096
#define PFT_DOTSCAN_MAX_EDGES 16384

/* Which kind of object an attribute assignment is about. */
typedef enum {
    PFT_DOT_GRAPH = 0,
    PFT_DOT_NODE = 1,
    PFT_DOT_EDGE = 2,
} pft_dot_scope_t;

/* One attribute assignment as written in the file. */
typedef struct {
    pft_dot_scope_t scope; /* what it applies to */
    const char *name;      /* attribute name (unescaped) */
    const char *value;     /* value (unescaped; "true" for a bare name) */
    const char *node;      /* node statement: the node id; otherwise NULL */
    size_t edge_first;     /* edge statement: first of the edges it applies to (in file order) */
    size_t edge_count;     /* edge statement: how many; otherwise 0 */
    int is_default;        /* from `graph/node/edge [...]` or a `name=value` statement */
    int in_subgraph;       /* written inside a subgraph */
    int line;              /* 1-based line of the name */
} pft_dotscan_attr_t;

/* Scans text (len bytes, need not be NUL-terminated). *out is new on success; PFT_ENOMEM otherwise. */
int pft_dotscan_new(const char *text, size_t len, pft_dotscan_t **out);

/* Frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_dotscan_destroy(pft_dotscan_t **self_p);

/* Line of the first graph's `graph`/`digraph` keyword; 0 if none was found. */
int pft_dotscan_header_line(const pft_dotscan_t *self);

/* Number of top-level graphs in the text, and the line of the second one (0 if fewer than two). */
size_t pft_dotscan_graph_count(const pft_dotscan_t *self);
int pft_dotscan_second_graph_line(const pft_dotscan_t *self);

/* The first lexical fault: a quoted string ("), HTML string (<) or block comment left open at the end
 * of the text, or anything but blanks and comments after the closing '}' of the first graph (a second
 * `graph`/`digraph` counts: see pft_dotscan_graph_count). Returns a message without file or line, and
 * sets *line to the line where the string or comment opened, or where the extra text starts; NULL
 * (and *line 0) if there is none, i.e. the text is safe to hand to libcgraph. */
const char *pft_dotscan_fault(const pft_dotscan_t *self, int *line);

/* 1 if the text holds more than PFT_DOTSCAN_MAX_NODES distinct nodes or more than PFT_DOTSCAN_MAX_EDGES
 * edges (the scan stopped there): *what gets "nodes" or "edges", *line the line of the first one too many. */
int pft_dotscan_too_big(const pft_dotscan_t *self, const char **what, int *line);

/* Line of node id's first own statement (`id;` or `id [...]`, not an edge end); 0 if it has none. */
int pft_dotscan_node_stmt_line(const pft_dotscan_t *self, const char *id);

/* An attribute given two different values in a node's own statements (`a [k=5]; a [k=7]`: libcgraph keeps
 * the last, silently). Returns 1 with the node, the attribute, both values and their lines (first, then
 * second); 0 if there is none. */
int pft_dotscan_node_attr_twice(const pft_dotscan_t *self, const pft_dotscan_attr_t **first,
                                const pft_dotscan_attr_t **second);

/* Line where node id first appears (as a node or an edge end); 0 if never seen. */
int pft_dotscan_node_line(const pft_dotscan_t *self, const char *id);

/* Line of the nth (0-based) edge tail -> head written in the file; 0 if there are fewer. */
int pft_dotscan_edge_line(const pft_dotscan_t *self, const char *tail, const char *head, size_t nth);

/* Attribute assignments in file order. */
size_t pft_dotscan_attr_count(const pft_dotscan_t *self);
const pft_dotscan_attr_t *pft_dotscan_attr(const pft_dotscan_t *self, size_t i);

/* Line where attribute name was given a value for node id: its own node statement if any, else the
 * first `node [name=...]` default; 0 if neither is found. */
int pft_dotscan_node_attr_line(const pft_dotscan_t *self, const char *id, const char *name);

/* Same for the edge tail -> head: its edge statement, else the first `edge [name=...]` default. */
int pft_dotscan_edge_attr_line(const pft_dotscan_t *self, const char *tail, const char *head,
                               const char *name);

/* Line of a top-level (not in a subgraph) graph attribute assignment; 0 if not found. */
int pft_dotscan_graph_attr_line(const pft_dotscan_t *self, const char *name);

#endif
