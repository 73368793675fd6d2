/* pft_plan: classifies a topology graph (chain, ring, dag, mesh) and derives roles, order, hand-offs and
 * stages. */
#include "pft_plan.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adjacency in compressed form: the neighbours of v are nb[off[v] .. off[v+1]), ascending. */
typedef struct {
    size_t *off;
    size_t *nb;
} adj_t;

struct pft_plan_t {
    size_t n;
    pft_kind_t kind;
    pft_role_t *role;
    adj_t pred, succ;
    size_t *order;
    pft_handoff_t *hand;
    size_t n_hand;
    pft_stage_t *stages; /* node v: stages[stage_off[v] .. stage_off[v+1]) */
    size_t *stage_off;
    size_t *idx; /* recv/send index lists the stages point into */
    size_t n_idx;
    adj_t by_from, by_to; /* hand-off indices by sender / receiver, ascending (stage_list's index) */
};

static void adj_free(adj_t *a)
{
    PFT_FREE(a->off);
    PFT_FREE(a->nb);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Builds successor (reverse = 0) or predecessor (reverse = 1) lists. */
static int adj_build(adj_t *a, size_t n, size_t m, const pft_plan_edge_t *e, int reverse)
{
    a->off = pft_calloc(n + 1, sizeof *a->off);
    a->nb = pft_alloc_array(m ? m : 1, sizeof *a->nb);
    size_t *fill = pft_calloc(n + 1, sizeof *fill);
    if (!a->off || !a->nb || !fill) {
        pft_free(fill);
        adj_free(a);
        return PFT_ENOMEM;
    }
    for (size_t i = 0; i < m; i++)
        a->off[(reverse ? e[i].head : e[i].tail) + 1]++;
    for (size_t v = 0; v < n; v++)
        a->off[v + 1] += a->off[v];
    for (size_t i = 0; i < m; i++) {
        size_t v = reverse ? e[i].head : e[i].tail;
        a->nb[a->off[v] + fill[v]++] = reverse ? e[i].tail : e[i].head;
    }
    for (size_t v = 0; v < n; v++)
        qsort(a->nb + a->off[v], a->off[v + 1] - a->off[v], sizeof *a->nb, cmp_size);
    pft_free(fill);
    return 0;
}

static size_t deg(const adj_t *a, size_t v)
{
    return a->off[v + 1] - a->off[v];
}

static size_t find_edge(size_t m, const pft_plan_edge_t *e, size_t tail, size_t head)
{
    for (size_t i = 0; i < m; i++)
        if (e[i].tail == tail && e[i].head == head)
            return i;
    return SIZE_MAX;
}

/* ---- cycle search: iterative DFS, colours 0 white / 1 on stack / 2 done ---- */

static int find_cycle_adj(size_t n, const adj_t *succ, size_t *cycle, size_t *len)
{
    unsigned char *colour = pft_calloc(n ? n : 1, 1);
    size_t *parent = pft_alloc_array(n ? n : 1, sizeof *parent);
    size_t *stack = pft_alloc_array(n ? n : 1, sizeof *stack);
    size_t *pos = pft_alloc_array(n ? n : 1, sizeof *pos); /* next neighbour to visit */
    int found = 0;
    if (!colour || !parent || !stack || !pos) {
        found = PFT_ENOMEM;
        goto done;
    }
    for (size_t root = 0; root < n && !found; root++) {
        if (colour[root])
            continue;
        size_t top = 0;
        stack[top++] = root;
        colour[root] = 1;
        parent[root] = SIZE_MAX;
        pos[root] = succ->off[root];
        while (top && !found) {
            size_t v = stack[top - 1];
            if (pos[v] == succ->off[v + 1]) {
                colour[v] = 2;
                top--;
                continue;
            }
            size_t w = succ->nb[pos[v]++];
            if (colour[w] == 0) {
                colour[w] = 1;
                parent[w] = v;
                pos[w] = succ->off[w];
                stack[top++] = w;
            } else if (colour[w] == 1) {
                /* back edge v -> w: the cycle is w … v */
                size_t k = 0;
                for (size_t u = v; u != w; u = parent[u])
                    cycle[k++] = u;
                cycle[k++] = w;
                for (size_t i = 0; i < k / 2; i++) {
                    size_t t = cycle[i];
                    cycle[i] = cycle[k - 1 - i];
                    cycle[k - 1 - i] = t;
                }
                *len = k;
                found = 1;
            }
        }
    }
done:
    pft_free(colour);
    pft_free(parent);
    pft_free(stack);
    pft_free(pos);
    return found;
}

int pft_plan_find_cycle(size_t n, size_t n_edges, const pft_plan_edge_t *edges, size_t *cycle, size_t *len)
{
    adj_t succ = {0};
    if (adj_build(&succ, n, n_edges, edges, 0))
        return PFT_ENOMEM;
    int rc = find_cycle_adj(n, &succ, cycle, len);
    adj_free(&succ);
    return rc;
}

/* Writes "a -> b -> c -> a" into buf. */
static void cycle_text(char *buf, size_t cap, const char *const *names, const size_t *cycle, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i <= len && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? " -> " : "", names[cycle[i % len]]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used >= cap && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

/* Lists names of nb[0..k) as "b, c" into buf. */
static void names_text(char *buf, size_t cap, const char *const *names, const size_t *nb, size_t k)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < k && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[nb[i]]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Marks every node weakly connected to node 0 in seen[]; returns how many. */
static size_t weak_component(const pft_plan_t *p, unsigned char *seen, size_t *queue)
{
    size_t head = 0, tail = 0, count = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        size_t v = queue[head++];
        count++;
        const adj_t *both[2] = {&p->succ, &p->pred};
        for (int s = 0; s < 2; s++)
            for (size_t i = both[s]->off[v]; i < both[s]->off[v + 1]; i++) {
                size_t w = both[s]->nb[i];
                if (!seen[w]) {
                    seen[w] = 1;
                    queue[tail++] = w;
                }
            }
    }
    return count;
}

/* Breadth-first distances from root along a (succ: from root; pred: to root) into dist; SIZE_MAX where
 * unreached. queue holds n. */
static void bfs_dist(const adj_t *a, size_t n, size_t root, size_t *dist, size_t *queue)
{
    for (size_t v = 0; v < n; v++)
        dist[v] = SIZE_MAX;
    size_t head = 0, tail = 0;
    dist[root] = 0;
    queue[tail++] = root;
    while (head < tail) {
        size_t v = queue[head++];
        for (size_t i = a->off[v]; i < a->off[v + 1]; i++)
            if (dist[a->nb[i]] == SIZE_MAX) {
                dist[a->nb[i]] = dist[v] + 1;
                queue[tail++] = a->nb[i];
            }
    }
}

/* 1 if every node reaches ref and is reached from it; 0 with *bad = the lowest-index node that fails
 * and *no_path_to = 1 if it cannot reach ref (0: ref cannot reach it); PFT_ENOMEM. */
static int strongly_connected(const pft_plan_t *p, size_t ref, size_t *bad, int *no_path_to)
{
    size_t n = p->n, *to = pft_alloc_array(n, sizeof *to), *from = pft_alloc_array(n, sizeof *from);
    size_t *queue = pft_alloc_array(n, sizeof *queue);
    int rc = PFT_ENOMEM;
    if (to && from && queue) {
        bfs_dist(&p->pred, n, ref, to, queue);
        bfs_dist(&p->succ, n, ref, from, queue);
        rc = 1;
        for (size_t v = 0; v < n && rc == 1; v++)
            if (to[v] == SIZE_MAX || from[v] == SIZE_MAX) {
                *bad = v;
                *no_path_to = to[v] == SIZE_MAX;
                rc = 0;
            }
    }
    pft_free(to);
    pft_free(from);
    pft_free(queue);
    return rc;
}

/* ---- shape checks ---- */

static int check_connected(pft_plan_t *p, const char *const *names, pft_plan_where_t *where)
{
    for (size_t v = 0; v < p->n; v++)
        if (deg(&p->succ, v) + deg(&p->pred, v) == 0) {
            where->node = v;
            return pft_err(PFT_ETOPO, "node '%s' has no edges: it can neither receive nor send knowledge",
                           names[v]);
        }
    unsigned char *seen = pft_calloc(p->n, 1);
    size_t *queue = pft_alloc_array(p->n, sizeof *queue);
    int rc = 0;
    if (!seen || !queue) {
        rc = PFT_ENOMEM;
    } else if (weak_component(p, seen, queue) < p->n) {
        size_t v = 0;
        while (seen[v])
            v++;
        where->node = v;
        rc =
            pft_err(PFT_ETOPO,
                    "node '%s' is unreachable from node '%s' and cannot reach it: the graph falls apart into "
                    "separate parts, so their knowledge never meets",
                    names[v], names[0]);
    }
    pft_free(seen);
    pft_free(queue);
    return rc;
}

/* 1 if every node has exactly one predecessor and one successor (with the graph weakly connected: one
 * simple cycle through every node). */
static int ring_shaped(const pft_plan_t *p)
{
    for (size_t v = 0; v < p->n; v++)
        if (deg(&p->succ, v) != 1 || deg(&p->pred, v) != 1)
            return 0;
    return 1;
}

/* start given: the graph must be one simple cycle through every node. */
static int classify_ring(pft_plan_t *p, const char *const *names, int found, size_t start,
                         pft_plan_where_t *where)
{
    char text[512];
    if (!found) {
        where->node = start;
        where->at_start = 1;
        return pft_err(
            PFT_ETOPO,
            "start=%s but the graph has no cycle: 'start' is only for rings; remove it for a chain or dag",
            names[start]);
    }
    for (size_t v = 0; v < p->n; v++) {
        size_t so = deg(&p->succ, v), pr = deg(&p->pred, v);
        if (so == 1 && pr == 1)
            continue;
        where->node = v;
        const adj_t *a = so != 1 ? &p->succ : &p->pred;
        names_text(text, sizeof text, names, a->nb + a->off[v], deg(a, v));
        return pft_err(PFT_ETOPO,
                       "start=%s but the graph is not a single simple cycle: node '%s' has %zu %s%s%s%s "
                       "(every ring node needs exactly one predecessor and one successor; a strongly "
                       "connected graph of another shape is a mesh: give root=<node id> instead of start)",
                       names[start], names[v], deg(a, v),
                       so != 1 ? (deg(a, v) == 1 ? "successor" : "successors")
                               : (deg(a, v) == 1 ? "predecessor" : "predecessors"),
                       deg(a, v) ? " (" : "", text, deg(a, v) ? ")" : "");
    }
    /* in = out = 1 everywhere and weakly connected: one simple cycle through every node */
    p->kind = PFT_KIND_RING;
    return 0;
}

/* root given: the graph must be strongly connected and not a ring. */
static int classify_mesh(pft_plan_t *p, const char *const *names, int found, size_t root,
                         pft_plan_where_t *where)
{
    if (!found) {
        where->at_root = 1;
        return pft_err(PFT_ETOPO,
                       "root=%s but the graph has no cycle: 'root' is only for meshes (strongly connected "
                       "graphs); a chain or dag needs no root, remove it",
                       names[root]);
    }
    if (ring_shaped(p)) {
        where->at_root = 1;
        return pft_err(
            PFT_ETOPO,
            "root=%s but the graph is a ring (one simple cycle through every node): a ring names "
            "the node that begins its first lap with start=<node id>; use start=%s instead of root",
            names[root], names[root]);
    }
    size_t bad = 0;
    int no_path_to = 0, rc = strongly_connected(p, root, &bad, &no_path_to);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        where->node = bad;
        return pft_err(PFT_ETOPO,
                       "root=%s but node '%s' %s the root along primary edges: a mesh must be strongly "
                       "connected (a path from every node to every other), or %s",
                       names[root], names[bad], no_path_to ? "has no path to" : "cannot be reached from",
                       no_path_to ? "its knowledge never reaches the root"
                                  : "the complete bundle never reaches it");
    }
    p->kind = PFT_KIND_MESH;
    return 0;
}

/* Chooses the kind: with start a ring, with root a mesh, otherwise a chain or dag (acyclic). */
static int classify(pft_plan_t *p, const char *const *names, size_t m, const pft_plan_edge_t *e, size_t start,
                    size_t root, pft_plan_where_t *where)
{
    size_t *cycle = pft_alloc_array(p->n, sizeof *cycle), len = 0;
    if (!cycle)
        return PFT_ENOMEM;
    int found = find_cycle_adj(p->n, &p->succ, cycle, &len);
    int rc = 0;
    char text[512];
    if (found < 0) {
        rc = found;
    } else if (start != SIZE_MAX) {
        rc = classify_ring(p, names, found, start, where);
        if (rc == 0 && root != SIZE_MAX)
            rc = classify_mesh(p, names, found, root, where); /* a ring: says to drop root */
    } else if (root != SIZE_MAX) {
        rc = classify_mesh(p, names, found, root, where);
    } else if (found) {
        cycle_text(text, sizeof text, names, cycle, len);
        where->edge = find_edge(m, e, cycle[len - 1], cycle[0]);
        size_t bad = 0;
        int no_path_to = 0, strong = ring_shaped(p) ? 0 : strongly_connected(p, cycle[0], &bad, &no_path_to);
        if (strong < 0)
            rc = strong;
        else if (ring_shaped(p))
            rc = pft_err(PFT_ETOPO,
                         "cycle %s but no graph attribute 'start': a ring needs start=<node id>, the node "
                         "that begins the first lap",
                         text);
        else if (strong)
            rc = pft_err(PFT_ETOPO,
                         "cycle %s but no graph attribute 'root': a strongly connected graph that is not a "
                         "ring runs as a mesh and needs root=<node id>, the node that gathers everyone's "
                         "knowledge and spreads it back",
                         text);
        else
            rc = pft_err(PFT_ETOPO,
                         "cycle %s: only a ring (one simple cycle through every node, with graph attribute "
                         "start=<node id>) or a mesh (strongly connected, with graph attribute root=<node "
                         "id>) may contain a cycle, and node '%s' %s node '%s'",
                         text, names[bad], no_path_to ? "has no path to" : "cannot be reached from",
                         names[cycle[0]]);
    } else {
        int path = 1;
        for (size_t v = 0; v < p->n; v++)
            path &= deg(&p->succ, v) <= 1 && deg(&p->pred, v) <= 1;
        p->kind = path ? PFT_KIND_CHAIN : PFT_KIND_DAG;
    }
    pft_free(cycle);
    return rc;
}

/* ---- order ---- */

/* Kahn's algorithm; the ready node with the smallest index goes first (a binary min-heap). */
static int topo_order(pft_plan_t *p)
{
    size_t n = p->n, *indeg = pft_alloc_array(n, sizeof *indeg), *heap = pft_alloc_array(n, sizeof *heap);
    if (!indeg || !heap) {
        pft_free(indeg);
        pft_free(heap);
        return PFT_ENOMEM;
    }
    size_t hn = 0, k = 0;
    for (size_t v = 0; v < n; v++) {
        indeg[v] = deg(&p->pred, v);
        if (!indeg[v])
            heap[hn++] = v; /* ascending, already a heap */
    }
    while (hn) {
        size_t v = heap[0];
        heap[0] = heap[--hn];
        for (size_t i = 0;;) { /* sift down */
            size_t l = 2 * i + 1, r = l + 1, s = i;
            if (l < hn && heap[l] < heap[s])
                s = l;
            if (r < hn && heap[r] < heap[s])
                s = r;
            if (s == i)
                break;
            size_t t = heap[i];
            heap[i] = heap[s];
            heap[s] = t;
            i = s;
        }
        p->order[k++] = v;
        for (size_t j = p->succ.off[v]; j < p->succ.off[v + 1]; j++) {
            size_t w = p->succ.nb[j];
            if (--indeg[w] == 0) {
                size_t i = hn++; /* sift up */
                heap[i] = w;
                while (i && heap[(i - 1) / 2] > heap[i]) {
                    size_t t = heap[i];
                    heap[i] = heap[(i - 1) / 2];
                    heap[(i - 1) / 2] = t;
                    i = (i - 1) / 2;
                }
            }
        }
    }
    pft_free(indeg);
    pft_free(heap);
    return k == n ? 0 : PFT_ETOPO; /* acyclic was checked before */
}

/* ---- hand-offs and stages ---- */

static pft_stage_t *add_stage(pft_plan_t *p, size_t *ns, int lap, pft_what_t action, int final)
{
    pft_stage_t *s = &p->stages[(*ns)++];
    *s = (pft_stage_t){.lap = lap, .action = action, .final = final};
    return s;
}

/* by_from and by_to from the complete hand-off list: each node's hand-offs in ascending order (a counting
 * sort), so that listing a node's stages costs its own hand-offs, not all of them. 0 or PFT_ENOMEM. */
static int hand_index(pft_plan_t *p)
{
    for (int send = 0; send < 2; send++) {
        adj_t *a = send ? &p->by_from : &p->by_to;
        a->off = pft_calloc(p->n + 1, sizeof *a->off);
        a->nb = pft_calloc(p->n_hand + 1, sizeof *a->nb);
        if (!a->off || !a->nb)
            return PFT_ENOMEM;
        for (size_t h = 0; h < p->n_hand; h++)
            a->off[(send ? p->hand[h].from : p->hand[h].to) + 1]++;
        for (size_t v = 0; v < p->n; v++)
            a->off[v + 1] += a->off[v];
        for (size_t h = 0; h < p->n_hand; h++) { /* ascending h: each list stays in hand-off order */
            size_t v = send ? p->hand[h].from : p->hand[h].to;
            a->nb[a->off[v]++] = h;
        }
        for (size_t v = p->n; v > 0; v--) /* off[v] ran to the end of v's list: shift back */
            a->off[v] = a->off[v - 1];
        a->off[0] = 0;
    }
    return 0;
}

/* Appends index list entries: recv (to == v) or send (from == v) hand-offs matching lap (0: any). */
static void stage_list(pft_plan_t *p, pft_stage_t *s, size_t v, int lap, int send)
{
    const size_t *first = p->idx + p->n_idx;
    const adj_t *a = send ? &p->by_from : &p->by_to;
    size_t k = 0;
    for (size_t j = a->off[v]; j < a->off[v + 1]; j++) {
        size_t h = a->nb[j];
        if (!lap || p->hand[h].lap == lap) {
            p->idx[p->n_idx++] = h;
            k++;
        }
    }
    if (send) {
        s->send = first;
        s->n_send = k;
    } else {
        s->recv = first;
        s->n_recv = k;
    }
}

static void plan_dag(pft_plan_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        size_t v = p->order[i];
        for (size_t j = p->succ.off[v]; j < p->succ.off[v + 1]; j++)
            p->hand[p->n_hand++] = (pft_handoff_t){0, v, p->succ.nb[j], 1, PFT_WHAT_REFIT, 0};
        p->role[v] = deg(&p->pred, v) == 0   ? PFT_ROLE_SOURCE
                     : deg(&p->succ, v) == 0 ? PFT_ROLE_SINK
                                             : PFT_ROLE_RELAY;
    }
}

/* Stages of a DAG plan: one per node, all its received and sent hand-offs. */
static void dag_stages(pft_plan_t *p)
{
    size_t ns = 0;
    for (size_t v = 0; v < p->n; v++) {
        p->stage_off[v] = ns;
        pft_stage_t *s = add_stage(p, &ns, 1, PFT_WHAT_REFIT, 1);
        stage_list(p, s, v, 0, 0);
        stage_list(p, s, v, 0, 1);
    }
    p->stage_off[p->n] = ns;
}

/* Stages of a two-lap plan (ring, mesh), stored by node index: the producer refits once on lap 1 and sends
 * the complete bundle that opens lap 2; every other node refits on lap 1, then forwards the complete bundle
 * on lap 2 and trains its head on it. */
static void two_lap_stages(pft_plan_t *p)
{
    size_t ns = 0;
    for (size_t u = 0; u < p->n; u++) {
        p->stage_off[u] = ns;
        pft_stage_t *s;
        if (p->role[u] == PFT_ROLE_PRODUCER) {
            s = add_stage(p, &ns, 1, PFT_WHAT_REFIT, 1);
            stage_list(p, s, u, 1, 0);
            stage_list(p, s, u, 2, 1);
            continue;
        }
        s = add_stage(p, &ns, 1, PFT_WHAT_REFIT, 0);
        stage_list(p, s, u, 1, 0);
        stage_list(p, s, u, 1, 1);
        s = add_stage(p, &ns, 2, PFT_WHAT_FORWARD, 1);
        stage_list(p, s, u, 2, 0);
        stage_list(p, s, u, 2, 1);
    }
    p->stage_off[p->n] = ns;
}

static void plan_ring(pft_plan_t *p, size_t start)
{
    size_t n = p->n, *v = p->order;
    v[0] = start;
    for (size_t i = 1; i < n; i++)
        v[i] = p->succ.nb[p->succ.off[v[i - 1]]];
    /* lap 1: v0 -> … -> v(n-1), each refits */
    for (size_t i = 0; i + 1 < n; i++)
        p->hand[p->n_hand++] = (pft_handoff_t){0, v[i], v[i + 1], 1, PFT_WHAT_REFIT, 0};
    /* lap 2: the producer's complete bundle to start, then forwarded unchanged up to v(n-2) */
    p->hand[p->n_hand++] = (pft_handoff_t){0, v[n - 1], v[0], 2, PFT_WHAT_REFIT, 1};
    for (size_t i = 0; i + 2 < n; i++)
        p->hand[p->n_hand++] = (pft_handoff_t){0, v[i], v[i + 1], 2, PFT_WHAT_FORWARD, 1};
    for (size_t i = 0; i < n; i++)
        p->role[v[i]] = i == 0 ? PFT_ROLE_START : i == n - 1 ? PFT_ROLE_PRODUCER : PFT_ROLE_MEMBER;
}

/* Writes the nodes with a finite dist into out, by dist (descending if far_first, else ascending), ties by
 * index; returns how many. */
static size_t by_distance(const size_t *dist, size_t n, int far_first, size_t *out)
{
    size_t max = 0, k = 0;
    for (size_t v = 0; v < n; v++)
        if (dist[v] != SIZE_MAX && dist[v] > max)
            max = dist[v];
    for (size_t i = 0; i <= max; i++)
        for (size_t v = 0; v < n; v++)
            if (dist[v] == (far_first ? max - i : i))
                out[k++] = v;
    return k;
}

/* The tree parent of v: its first neighbour in a (ascending) one step closer to the root by dist. */
static size_t tree_parent(const adj_t *a, const size_t *dist, size_t v)
{
    for (size_t i = a->off[v]; i < a->off[v + 1]; i++)
        if (dist[a->nb[i]] + 1 == dist[v])
            return a->nb[i];
    return SIZE_MAX; /* the root */
}

/* Mesh (DESIGN.md §6; pft_plan.h): lap 1 up the BFS in-tree to root, lap 2 down the BFS out-tree from it.
 * The graph is strongly connected (checked), so every distance is finite. */
static int plan_mesh(pft_plan_t *p, size_t root)
{
    size_t n = p->n, *to = pft_alloc_array(n, sizeof *to), *from = pft_alloc_array(n, sizeof *from);
    size_t *seq = pft_alloc_array(n, sizeof *seq);
    if (!to || !from || !seq) {
        pft_free(to);
        pft_free(from);
        pft_free(seq);
        return PFT_ENOMEM;
    }
    bfs_dist(&p->pred, n, root, to, seq);   /* to[v]: hops from v to the root */
    bfs_dist(&p->succ, n, root, from, seq); /* from[v]: hops from the root to v */
    /* lap 1: farthest from the root first, so a node's children have sent before it does */
    by_distance(to, n, 1, p->order);
    for (size_t i = 0; i + 1 < n; i++) {
        size_t v = p->order[i];
        p->hand[p->n_hand++] = (pft_handoff_t){0, v, tree_parent(&p->succ, to, v), 1, PFT_WHAT_REFIT, 0};
    }
    /* lap 2: nearest to the root first; the root's sends are its refit (complete), the others forward it */
    by_distance(from, n, 0, seq);
    for (size_t i = 0; i < n; i++) {
        size_t u = seq[i];
        for (size_t j = p->succ.off[u]; j < p->succ.off[u + 1]; j++) {
            size_t w = p->succ.nb[j];
            if (w != root && tree_parent(&p->pred, from, w) == u)
                p->hand[p->n_hand++] =
                    (pft_handoff_t){0, u, w, 2, u == root ? PFT_WHAT_REFIT : PFT_WHAT_FORWARD, 1};
        }
    }
    for (size_t v = 0; v < n; v++)
        p->role[v] = v == root ? PFT_ROLE_PRODUCER : PFT_ROLE_MEMBER;
    pft_free(to);
    pft_free(from);
    pft_free(seq);
    return 0;
}

int pft_plan_build(size_t n, const char *const *names, size_t n_edges, const pft_plan_edge_t *edges,
                   size_t start, size_t root, pft_plan_t **out, pft_plan_where_t *where)
{
    pft_plan_where_t dummy;
    if (!where)
        where = &dummy;
    where->node = where->edge = SIZE_MAX;
    where->at_start = where->at_root = 0;
    *out = NULL;
    if (n < 2)
        return pft_err(PFT_ETOPO, "a topology needs at least 2 nodes (it has %zu)", n);
    for (size_t i = 0; i < n_edges; i++)
        if (edges[i].tail >= n || edges[i].head >= n || edges[i].tail == edges[i].head) {
            where->edge = i;
            return pft_err(PFT_EINVAL, "plan: edge %zu is a self loop or names no node", i);
        }
    if (start != SIZE_MAX && start >= n)
        return pft_err(PFT_EINVAL, "plan: start %zu is not a node", start);
    if (root != SIZE_MAX && root >= n)
        return pft_err(PFT_EINVAL, "plan: root %zu is not a node", root);

    pft_plan_t *p = pft_calloc(1, sizeof *p);
    if (!p)
        return PFT_ENOMEM;
    p->n = n;
    int rc = PFT_ENOMEM;
    if (adj_build(&p->succ, n, n_edges, edges, 0) || adj_build(&p->pred, n, n_edges, edges, 1))
        goto fail;
    for (size_t v = 0; v < n; v++)
        for (size_t j = p->succ.off[v]; j + 1 < p->succ.off[v + 1]; j++)
            if (p->succ.nb[j] == p->succ.nb[j + 1]) {
                where->edge = find_edge(n_edges, edges, v, p->succ.nb[j]);
                rc = pft_err(PFT_EINVAL, "plan: edge %s -> %s appears twice", names[v], names[p->succ.nb[j]]);
                goto fail;
            }
    if ((rc = check_connected(p, names, where)) ||
        (rc = classify(p, names, n_edges, edges, start, root, where)))
        goto fail;
    int two_laps = p->kind == PFT_KIND_RING || p->kind == PFT_KIND_MESH;
    size_t n_hand = two_laps ? 2 * n - 2 : n_edges;
    size_t n_stages = two_laps ? 2 * n - 1 : n;
    rc = PFT_ENOMEM;
    p->role = pft_calloc(n, sizeof *p->role);
    p->order = pft_calloc(n, sizeof *p->order);
    p->hand = pft_calloc(n_hand, sizeof *p->hand);
    p->stages = pft_calloc(n_stages, sizeof *p->stages);
    p->stage_off = pft_calloc(n + 1, sizeof *p->stage_off);
    p->idx = pft_calloc(2 * n_hand, sizeof *p->idx);
    if (!p->role || !p->order || !p->hand || !p->stages || !p->stage_off || !p->idx)
        goto fail;
    if (p->kind == PFT_KIND_RING) {
        plan_ring(p, start);
    } else if (p->kind == PFT_KIND_MESH) {
        if ((rc = plan_mesh(p, root)))
            goto fail;
    } else {
        if ((rc = topo_order(p)))
            goto fail;
        plan_dag(p);
    }
    rc = PFT_ENOMEM;
    if (hand_index(p))
        goto fail;
    if (two_laps)
        two_lap_stages(p);
    else
        dag_stages(p);
    for (size_t h = 0; h < p->n_hand; h++)
        p->hand[h].seq = h + 1;
    *out = p;
    return 0;
fail:
    pft_plan_destroy(&p);
    return rc == PFT_ENOMEM ? pft_err(PFT_ENOMEM, "planning the topology: out of memory") : rc;
}

void pft_plan_destroy(pft_plan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_plan_t *p = *self_p;
    adj_free(&p->succ);
    adj_free(&p->pred);
    pft_free(p->role);
    pft_free(p->order);
    pft_free(p->hand);
    pft_free(p->stages);
    pft_free(p->stage_off);
    pft_free(p->idx);
    adj_free(&p->by_from);
    adj_free(&p->by_to);
    pft_free(p);
    *self_p = NULL;
}

pft_kind_t pft_plan_kind(const pft_plan_t *self)
{
    return self->kind;
}

pft_role_t pft_plan_role(const pft_plan_t *self, size_t node)
{
    return self->role[node];
}

size_t pft_plan_preds(const pft_plan_t *self, size_t node, const size_t **out)
{
    *out = self->pred.nb + self->pred.off[node];
    return deg(&self->pred, node);
}

size_t pft_plan_succs(const pft_plan_t *self, size_t node, const size_t **out)
{
    *out = self->succ.nb + self->succ.off[node];
    return deg(&self->succ, node);
}

size_t pft_plan_order(const pft_plan_t *self, const size_t **out)
{
    *out = self->order;
    return self->n;
}

size_t pft_plan_handoffs(const pft_plan_t *self, const pft_handoff_t **out)
{
    *out = self->hand;
    return self->n_hand;
}

size_t pft_plan_stages(const pft_plan_t *self, size_t node, const pft_stage_t **out)
{
    *out = self->stages + self->stage_off[node];
    return self->stage_off[node + 1] - self->stage_off[node];
}

const char *pft_kind_name(pft_kind_t kind)
{
    switch (kind) {
    case PFT_KIND_CHAIN:
        return "chain";
    case PFT_KIND_RING:
        return "ring";
    case PFT_KIND_DAG:
        return "dag";
    case PFT_KIND_MESH:
        return "mesh";
    }
    return "?";
}

const char *pft_role_name(pft_role_t role)
{
    static const char *const names[] = {"source", "relay", "sink", "start", "member", "producer"};
    return (unsigned)role < sizeof names / sizeof *names ? names[role] : "?";
}

const char *pft_what_name(pft_what_t what)
{
    return what == PFT_WHAT_REFIT ? "refit" : what == PFT_WHAT_FORWARD ? "forward-complete" : "?";
}
