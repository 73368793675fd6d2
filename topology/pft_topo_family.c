/* pft_topo_family: which nodes carry exact statistics (cov, k, merge, head), checked at load, and how their
 * contributors' statistics must travel apart so that a rejoin counts each contributor once. */
#define _GNU_SOURCE /* qsort_r */
#include "pft_topo_internal.h"

#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"

int pft_topo_exact(pft_cov_t cov, int k, pft_topo_merge_t merge)
{
    return cov == PFT_COV_TIED || (cov == PFT_COV_FULL && k == 1 && merge == PFT_TOPO_MERGE_EXACT);
}

pft_topo_head_t pft_topo_head_resolve(pft_topo_head_t head, int exact)
{
    if (head != PFT_TOPO_HEAD_AUTO)
        return head;
    return exact ? PFT_TOPO_HEAD_GAUSSIAN : PFT_TOPO_HEAD_LOGREG;
}

int pft_topo_release_rank(const pft_topo_run_t *run, uint64_t rows, int d)
{
    if (rows < PFT_TOPO_RELEASE_MIN_DIAG_ROWS || run->stats_rows_per_rank < 1 || d < 2)
        return 0;
    uint64_t q = rows / (uint64_t)run->stats_rows_per_rank;
    uint64_t cap = run->stats_rank > 0 ? (uint64_t)run->stats_rank : 0;
    if (q > cap)
        q = cap;
    if (q > (uint64_t)d - 1)
        q = (uint64_t)d - 1;
    return (int)q;
}

/* Resolves each node's exactness and head. The combinations that are not built (tied with merge = sample,
 * secure_agg without cov = tied, exact and sampling nodes in one run) are rules of pft_topo_rules.c. */
int pft_topo__check_families(const pft_topo_t *t, pft_topo__model_t *m)
{
    (void)t;
    for (size_t v = 0; v < m->n; v++) {
        pft_topo_node_t *nd = &m->nodes[v];
        nd->exact = pft_topo_exact(nd->cov, nd->k, nd->merge);
        nd->head = pft_topo_head_resolve(nd->head, nd->exact);
    }
    return 0;
}

/* ---- part groups ----------------------------------------------------------------------------------------
 */

struct pft_topo__kgraph {
    size_t n;
    size_t *off, *adj;  /* predecessors in the knowledge graph: adj[off[w] .. off[w+1]) */
    unsigned char *anc; /* n×n: anc[u·n + a] = 1 if a's rows reach u (a == u included) */
};
typedef pft_topo__kgraph_t kgraph_t;

static void kgraph_free(kgraph_t *g)
{
    PFT_FREE(g->off);
    PFT_FREE(g->adj);
    PFT_FREE(g->anc);
}

/* The graph along which a node's rows travel before a complete bundle exists: lap-1 hand-offs and fallback
 * edges (a fallback carries the same bundle as the primary it replaces). */
static int kgraph_build(const pft_topo_t *t, kgraph_t *g)
{
    memset(g, 0, sizeof *g);
    size_t n = t->m.n;
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h), ne = 0;
    size_t cap = nh + t->m.n_edges;
    size_t(*e)[2] = pft_alloc_array(cap + 1, sizeof *e);
    g->n = n;
    g->off = pft_calloc(n + 1, sizeof *g->off);
    g->adj = pft_alloc_array(cap + 1, sizeof *g->adj);
    g->anc = pft_calloc(n * n, 1);
    size_t *stack = pft_alloc_array(n + 1, sizeof *stack);
    if (!e || !g->off || !g->adj || !g->anc || !stack) {
        pft_free(e);
        pft_free(stack);
        kgraph_free(g);
        return pft_err(PFT_ENOMEM, "out of memory for the part groups of %zu nodes", n);
    }
    for (size_t i = 0; i < nh; i++)
        if (h[i].lap == 1) {
            e[ne][0] = h[i].from;
            e[ne++][1] = h[i].to;
        }
    for (size_t i = 0; i < t->m.n_edges; i++)
        if (t->m.edges[i].fallback) {
            e[ne][0] = t->m.edges[i].tail;
            e[ne++][1] = t->m.edges[i].head;
        }
    for (size_t i = 0; i < ne; i++)
        g->off[e[i][1] + 1]++;
    for (size_t w = 0; w < n; w++)
        g->off[w + 1] += g->off[w];
    size_t *fill = stack; /* reuse as a cursor per node */
    for (size_t w = 0; w < n; w++)
        fill[w] = g->off[w];
    for (size_t i = 0; i < ne; i++)
        g->adj[fill[e[i][1]]++] = e[i][0];
    for (size_t u = 0; u < n; u++) { /* ancestors of u, by a search backwards */
        unsigned char *a = g->anc + u * n;
        size_t top = 0;
        a[u] = 1;
        stack[top++] = u;
        while (top) {
            size_t w = stack[--top];
            for (size_t k = g->off[w]; k < g->off[w + 1]; k++)
                if (!a[g->adj[k]]) {
                    a[g->adj[k]] = 1;
                    stack[top++] = g->adj[k];
                }
        }
    }
    pft_free(e);
    pft_free(stack);
    return 0;
}

int pft_topo__kgraph_new(const pft_topo_t *t, pft_topo__kgraph_t **out)
{
    *out = pft_calloc(1, sizeof **out);
    if (!*out)
        return pft_err(PFT_ENOMEM, "out of memory for the part groups");
    int rc = kgraph_build(t, *out);
    if (rc != 0)
        PFT_FREE(*out);
    return rc;
}

void pft_topo__kgraph_destroy(pft_topo__kgraph_t **g_p)
{
    if (!g_p || !*g_p)
        return;
    kgraph_free(*g_p);
    PFT_FREE(*g_p);
}

/* qsort context: contributors ordered by their key, then by index (the first of equal keys is the smallest)
 */
typedef struct {
    const unsigned char *key;
    size_t klen;
} keyctx_t;

static int by_key(const void *a, const void *b, void *ctx)
{
    const keyctx_t *k = ctx;
    size_t u = *(const size_t *)a, w = *(const size_t *)b;
    int c = k->klen ? memcmp(k->key + u * k->klen, k->key + w * k->klen, k->klen) : 0;
    return c ? c : (u > w) - (u < w);
}

int pft_topo__kgraph_part_groups(const pft_topo__kgraph_t *g, size_t v, long *groups)
{
    size_t n = g->n;
    /* key of contributor u: for every rejoin w below v (several predecessors), which of w's predecessors u's
     * rows reach w through; stored as one byte per (w, predecessor) */
    size_t klen = 0, n_rj = 0, n_in = 0;
    size_t *rj = pft_alloc_array(n + 1, sizeof *rj), *in = pft_alloc_array(n + 1, sizeof *in);
    for (size_t w = 0; rj && w < n; w++)
        if (w != v && g->anc[w * n + v] && g->off[w + 1] - g->off[w] >= 2) {
            rj[n_rj++] = w;
            klen += g->off[w + 1] - g->off[w];
        }
    unsigned char *key = rj && in ? pft_calloc(n * (klen ? klen : 1), 1) : NULL;
    if (!key) {
        pft_free(rj);
        pft_free(in);
        return pft_err(PFT_ENOMEM, "out of memory for the part groups");
    }
    for (size_t u = 0; u < n; u++) {
        groups[u] = g->anc[v * n + u] ? (long)u : -1;
        if (groups[u] < 0)
            continue;
        in[n_in++] = u;
        size_t at = 0;
        for (size_t r = 0; r < n_rj; r++)
            for (size_t k = g->off[rj[r]]; k < g->off[rj[r] + 1]; k++)
                key[u * klen + at++] = g->anc[g->adj[k] * n + u];
    }
    keyctx_t ctx = {key, klen};
    qsort_r(in, n_in, sizeof *in, by_key, &ctx);
    for (size_t i = 1; i < n_in; i++) /* the group id is the smallest member */
        if (klen == 0 || memcmp(key + in[i] * klen, key + in[i - 1] * klen, klen) == 0)
            groups[in[i]] = groups[in[i - 1]];
    pft_free(key);
    pft_free(rj);
    pft_free(in);
    return 0;
}

int pft_topo_part_groups(const pft_topo_t *self, size_t v, long *groups)
{
    kgraph_t g;
    int rc = kgraph_build(self, &g);
    if (rc == 0)
        rc = pft_topo__kgraph_part_groups(&g, v, groups);
    kgraph_free(&g);
    return rc;
}
