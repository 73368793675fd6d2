/* pft_secplan: the visibility plan of secure aggregation per topology kind (rules in pft_secplan.h). */
#include "pft_secplan.h"
#include "pft_topo_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"

/* How views are formed (pft_secplan.h, "Plans by kind"). */
typedef enum { VIEW_PREFIX = 0, VIEW_ALL = 1, VIEW_OPENER = 2 } view_rule_t;

struct pft_secplan_t {
    int m;
    size_t n, nh;
    size_t n_groups;
    pft_secplan_group_t group;
    size_t *members;
    pft_secplan_node_t *nodes;
    size_t *peers, *views; /* n × n each: node v's rows at v·n */
    pft_secplan_msg_t *msgs;
    size_t *contrib; /* nh × n */
    long *parts;     /* nh × n */
    size_t noise_div;
    size_t
        threshold; /* survivors a declaration needs and shares of a self-mask seed (0: no double masking) */
    size_t kept;   /* SIZE_MAX, or the one node whose arrays pft_secplan_keep_node kept (the rest freed) */
    size_t degree; /* member pairs per member (secagg_degree); 0: every other member */
    size_t *kept_peers, *kept_view;
};

/* What the kind-specific rule decides. */
typedef struct {
    size_t opener;
    unsigned char *masked_from; /* per node: its lap-1 bundles travel masked */
    unsigned char *in_group;    /* per node: a member of the group */
    view_rule_t views;
    size_t *pos; /* chain: position of each node in the order */
} shape_t;

static const char *topo_name(const pft_topo_t *t)
{
    return pft_topo_path(t) ? pft_topo_path(t) : "topology";
}

static int is_contrib(const pft_topo_t *t, size_t v)
{
    return pft_topo_node(t, v)->has_data;
}

static size_t count_contrib(const pft_topo_t *t)
{
    size_t k = 0;
    for (size_t v = 0; v < pft_topo_node_count(t); v++)
        k += (size_t)is_contrib(t, v);
    return k;
}

static int shape_chain(const pft_topo_t *t, int m, shape_t *s)
{
    const size_t *order;
    size_t n = pft_topo_order(t, &order), before = 0;
    for (size_t k = 0; k < n; k++)
        s->pos[order[k]] = k;
    for (size_t k = 0; k < n; k++) {
        if (before >= (size_t)m) {
            s->opener = order[k];
            for (size_t j = 0; j < k; j++) {
                s->masked_from[order[j]] = 1;
                s->in_group[order[j]] = (unsigned char)is_contrib(t, order[j]);
            }
            s->views = VIEW_PREFIX;
            return 0;
        }
        before += (size_t)is_contrib(t, order[k]);
    }
    return pft_err(
        PFT_ETOPO,
        "%s: secure aggregation: no node of the chain has min_contributors = %d contributors before "
        "it (%zu contributors in %zu nodes), so no node may open the masked sum; lower "
        "min_contributors or lengthen the chain",
        topo_name(t), m, before, n);
}

/* ring (opener: the producer) and mesh (opener: the root) */
static int shape_cycle(const pft_topo_t *t, int m, shape_t *s)
{
    size_t n = pft_topo_node_count(t), opener = SIZE_MAX;
    for (size_t v = 0; v < n; v++)
        if (pft_topo_node(t, v)->role == PFT_ROLE_PRODUCER)
            opener = v;
    if (opener == SIZE_MAX)
        return pft_err(PFT_ETOPO, "%s: secure aggregation: the %s has no producer", topo_name(t),
                       pft_kind_name(pft_topo_kind(t)));
    size_t k = count_contrib(t), others = k ? k - 1 : 0;
    if (others < (size_t)m)
        return pft_err(
            PFT_ETOPO,
            "%s: secure aggregation: every node of the %s ends with the total of its %zu contributors, "
            "so a contributor sees %zu others < min_contributors = %d; lower min_contributors or add "
            "contributors",
            topo_name(t), pft_kind_name(pft_topo_kind(t)), k, others, m);
    s->opener = opener;
    for (size_t v = 0; v < n; v++) {
        s->masked_from[v] = 1; /* lap 1 masked all the way to the opener */
        s->in_group[v] = (unsigned char)(v != opener && is_contrib(t, v));
    }
    s->views = VIEW_ALL;
    return 0;
}

static int shape_dag(const pft_topo_t *t, int m, shape_t *s)
{
    size_t n = pft_topo_node_count(t), sinks = 0, sink = SIZE_MAX;
    char names[256] = "";
    size_t used = 0;
    for (size_t v = 0; v < n; v++) {
        if (pft_topo_node(t, v)->n_succs)
            continue;
        sinks++;
        sink = v;
        if (used < sizeof names - 70) {
            int w = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                             pft_topo_node(t, v)->id);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (sinks != 1)
        return pft_err(
            PFT_ETOPO,
            "%s: secure aggregation: this graph has %zu sinks (%s); masks open at one node, so a graph "
            "of several sinks would need each contributor to mask for several openers (not "
            "supported): give it one sink",
            topo_name(t), sinks, names);
    size_t g = count_contrib(t) - (size_t)is_contrib(t, sink);
    if (g < (size_t)m)
        return pft_err(PFT_ETOPO,
                       "%s: secure aggregation: the sink %s would open the sum of %zu contributors < "
                       "min_contributors = %d; lower min_contributors or add contributors",
                       topo_name(t), pft_topo_node(t, sink)->id, g, m);
    s->opener = sink;
    for (size_t v = 0; v < n; v++) {
        s->masked_from[v] = 1;
        s->in_group[v] = (unsigned char)(v != sink && is_contrib(t, v));
    }
    s->views = VIEW_OPENER;
    return 0;
}

static int refuse_fallbacks(const pft_topo_t *t)
{
    for (size_t e = 0; e < pft_topo_edge_count(t); e++) {
        const pft_topo_edge_t *ed = pft_topo_edge(t, e);
        if (ed->fallback)
            return pft_err(
                PFT_ETOPO,
                "%s:%d: secure aggregation: fallback edge %s -> %s: a fallback successor would receive "
                "masks it cannot remove (not planned yet); remove fallback = true or secure_agg",
                topo_name(t), ed->line, pft_topo_node(t, ed->tail)->id, pft_topo_node(t, ed->head)->id);
    }
    return 0;
}

/* 1 if v sees u in its clear view. */
static int in_view(const pft_topo_t *t, const shape_t *s, size_t v, size_t u)
{
    if (!is_contrib(t, u))
        return 0;
    if (u == v)
        return 1;
    switch (s->views) {
    case VIEW_PREFIX:
        return s->pos[v] >= s->pos[s->opener] && s->pos[u] < s->pos[v];
    case VIEW_ALL:
        return 1;
    default:
        return v == s->opener;
    }
}

static uint64_t rows_of(const uint64_t *rows, const size_t *set, size_t k)
{
    uint64_t sum = 0;
    for (size_t i = 0; rows && i < k; i++) {
        if (!rows[set[i]])
            return 0;
        sum += rows[set[i]];
    }
    return rows ? sum : 0;
}

/* The group, every node's mask peers and view, noise_div; refuses a view of 1..m-1 others. */
static int fill_nodes(pft_secplan_t *p, const pft_topo_t *t, const shape_t *s, const uint64_t *rows)
{
    size_t n = p->n;
    p->group.opener = s->opener;
    for (size_t v = 0; v < n; v++)
        if (s->in_group[v])
            p->members[p->group.n_members++] = v;
    p->group.members = p->members;
    p->group.rows = rows_of(rows, p->members, p->group.n_members);
    p->n_groups = 1;
    p->noise_div = SIZE_MAX;
    for (size_t v = 0; v < n; v++) {
        pft_secplan_node_t *nd = &p->nodes[v];
        size_t *peers = p->peers + v * n, *view = p->views + v * n;
        nd->contributor = is_contrib(t, v);
        nd->mask_group = s->in_group[v] ? 0 : -1;
        nd->opens = v == s->opener ? 0 : -1;
        for (size_t u = 0; s->in_group[v] && u < n; u++)
            if (u != v && (s->in_group[u] || u == s->opener))
                peers[nd->n_mask_peers++] = u;
        for (size_t u = 0; u < n; u++)
            if (in_view(t, s, v, u))
                view[nd->n_view++] = u;
        nd->mask_peers = peers;
        nd->view = view;
        nd->view_rows = rows_of(rows, view, nd->n_view);
        size_t others = nd->n_view - (size_t)nd->contributor;
        if (others > 0 && others < (size_t)p->m)
            return pft_err(PFT_ETOPO,
                           "%s: secure aggregation: node %s would see %zu other contributors in the "
                           "clear < min_contributors = %d (plan refused)",
                           topo_name(t), pft_topo_node(t, v)->id, others, p->m);
        if (others > 0 && others < p->noise_div)
            p->noise_div = others;
    }
    return 0;
}

/* One entry per hand-off; refuses a clear bundle of fewer than m contributors. */
static int fill_msgs(pft_secplan_t *p, const pft_topo_t *t, const shape_t *s)
{
    const pft_handoff_t *h;
    size_t n = p->n;
    long *groups = pft_alloc_array(n, sizeof *groups);
    pft_topo__kgraph_t *g = NULL;
    if (!groups)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_topo__kgraph_new(t, &g);
    pft_topo_handoffs(t, &h);
    for (size_t i = 0; i < p->nh && !rc; i++) {
        pft_secplan_msg_t *msg = &p->msgs[i];
        size_t *c = p->contrib + i * n;
        long *part = p->parts + i * n;
        if (h[i].lap == 1)
            rc = pft_topo__kgraph_part_groups(g, h[i].from, groups);
        for (size_t u = 0; !rc && u < n; u++) {
            if (!is_contrib(t, u) || (h[i].lap == 1 && groups[u] < 0))
                continue;
            c[msg->n_contrib] = u;
            part[msg->n_contrib++] = h[i].lap == 1 ? groups[u] : (long)c[0]; /* lap 2: the total, one part */
        }
        msg->contrib = c;
        msg->part = part;
        msg->masked = h[i].lap == 1 && s->masked_from[h[i].from] && msg->n_contrib > 0;
        msg->group = msg->masked ? 0 : -1;
        if (!rc && !msg->masked && msg->n_contrib > 0 && msg->n_contrib < (size_t)p->m)
            rc = pft_err(PFT_ETOPO,
                         "%s: secure aggregation: hand-off %s -> %s would carry %zu contributors in the "
                         "clear < min_contributors = %d (plan refused)",
                         topo_name(t), pft_topo_node(t, h[i].from)->id, pft_topo_node(t, h[i].to)->id,
                         msg->n_contrib, p->m);
    }
    pft_free(groups);
    pft_topo__kgraph_destroy(&g);
    return rc;
}

static pft_secplan_t *plan_alloc(size_t n, size_t nh)
{
    pft_secplan_t *p = pft_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n;
    p->nh = nh;
    p->kept = SIZE_MAX;
    p->members = pft_calloc(n, sizeof *p->members);
    p->nodes = pft_calloc(n, sizeof *p->nodes);
    p->peers = pft_calloc(n * n, sizeof *p->peers);
    p->views = pft_calloc(n * n, sizeof *p->views);
    p->msgs = pft_calloc(nh ? nh : 1, sizeof *p->msgs);
    p->contrib = pft_calloc((nh ? nh : 1) * n, sizeof *p->contrib);
    p->parts = pft_calloc((nh ? nh : 1) * n, sizeof *p->parts);
    if (!p->members || !p->nodes || !p->peers || !p->views || !p->msgs || !p->contrib || !p->parts)
        pft_secplan_destroy(&p);
    return p;
}

static int shape_of(const pft_topo_t *t, int m, shape_t *s)
{
    switch (pft_topo_kind(t)) {
    case PFT_KIND_CHAIN:
        return shape_chain(t, m, s);
    case PFT_KIND_RING:
    case PFT_KIND_MESH:
        return shape_cycle(t, m, s);
    default:
        return shape_dag(t, m, s);
    }
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* secagg_degree = k (docs/SECAGG.md §4.6): each member's mask peers become the k members nearest to it in the
 * group's cyclic order of node indices (k/2 on each side) and the opener, instead of every member. That pair
 * graph on the members is the Harary graph H(k, n): k-connected, so fewer than k colluding members leave the
 * others connected and the opener still learns only their sum. Refused where dropouts are recovered (a
 * star: double masking's bound on a lying opener counts on every pair) and for an odd k; a k of n − 1 or more
 * is every member anyway. */
static int apply_degree(pft_secplan_t *p, const pft_topo_t *t)
{
    int k = pft_topo_run(t)->secagg_degree;
    size_t n = p->group.n_members;
    if (k == 0 || p->n_groups == 0)
        return 0;
    if (k < 2 || k % 2)
        return pft_err(PFT_ETOPO,
                       "%s: secagg_degree = %d: each member pairs with k/2 members on each side of it; give "
                       "an even k of at least 2 (0: every member)",
                       topo_name(t), k);
    if (pft_secplan_recoverable(p, t, 0))
        return pft_err(PFT_ETOPO,
                       "%s: secagg_degree = %d in a star: its dropout recovery and double masking count on "
                       "every member pairing with every other (a lying opener's bound, docs/SECAGG.md §5.1); "
                       "leave secagg_degree = 0 there",
                       topo_name(t), k);
    if ((size_t)k >= n - 1)
        return 0; /* every other member already */
    p->degree = (size_t)k;
    size_t h = (size_t)k / 2, *near = pft_alloc_array((size_t)k + 1, sizeof *near);
    if (!near)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t v = p->group.members[i], c = 0;
        for (size_t j = 1; j <= h; j++) { /* the h members after i and the h before, cyclically */
            near[c++] = p->group.members[(i + j) % n];
            near[c++] = p->group.members[(i + n - j) % n];
        }
        near[c++] = p->group.opener;
        qsort(near, c, sizeof *near, cmp_size); /* ascending node indices, as for every pair */
        memcpy(p->peers + v * p->n, near, c * sizeof *near);
        p->nodes[v].n_mask_peers = c;
    }
    pft_free(near);
    return 0;
}

int pft_secplan_new(const pft_topo_t *topo, int min_contributors, const uint64_t *rows, pft_secplan_t **out)
{
    *out = NULL;
    if (min_contributors < 1)
        return pft_err(PFT_EINVAL, "secure aggregation: min_contributors = %d (at least 1)",
                       min_contributors);
    int rc = refuse_fallbacks(topo);
    if (rc)
        return rc;
    const pft_handoff_t *h;
    size_t n = pft_topo_node_count(topo), nh = pft_topo_handoffs(topo, &h);
    pft_secplan_t *p = plan_alloc(n, nh);
    shape_t s = {
        .masked_from = pft_calloc(n, 1), .in_group = pft_calloc(n, 1), .pos = pft_calloc(n, sizeof *s.pos)};
    if (!p || !s.masked_from || !s.in_group || !s.pos) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    p->m = min_contributors;
    if ((rc = shape_of(topo, min_contributors, &s)) || (rc = fill_nodes(p, topo, &s, rows)) ||
        (rc = fill_msgs(p, topo, &s)) || (rc = apply_degree(p, topo)))
        goto done;
    *out = p;
    p = NULL;
done:
    pft_secplan_destroy(&p);
    pft_free(s.masked_from);
    pft_free(s.in_group);
    pft_free(s.pos);
    return rc;
}

void pft_secplan_destroy(pft_secplan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_secplan_t *p = *self_p;
    pft_free(p->members);
    pft_free(p->nodes);
    pft_free(p->peers);
    pft_free(p->views);
    pft_free(p->msgs);
    pft_free(p->contrib);
    pft_free(p->parts);
    pft_free(p->kept_peers);
    pft_free(p->kept_view);
    pft_free(p);
    *self_p = NULL;
}

/* A copy of a[0..k) (pft_alloc; one element when k = 0); NULL if out of memory. */
static size_t *copy_of(const size_t *a, size_t k)
{
    size_t *c = pft_alloc_array(k ? k : 1, sizeof *c);
    if (c && k)
        memcpy(c, a, k * sizeof *c);
    return c;
}

int pft_secplan_keep_node(pft_secplan_t *self, size_t v)
{
    if (!self || v >= self->n || self->kept != SIZE_MAX)
        return pft_err(PFT_EINVAL, "secure aggregation: no node %zu to keep, or the plan kept one already",
                       v);
    pft_secplan_node_t *me = &self->nodes[v];
    size_t *peers = copy_of(me->mask_peers, me->n_mask_peers), *view = copy_of(me->view, me->n_view);
    if (!peers || !view) {
        pft_free(peers);
        pft_free(view);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    for (size_t u = 0; u < self->n; u++) {
        self->nodes[u].mask_peers = self->nodes[u].view = NULL;
        if (u != v)
            self->nodes[u].n_mask_peers = self->nodes[u].n_view = 0;
    }
    me->mask_peers = self->kept_peers = peers;
    me->view = self->kept_view = view;
    PFT_FREE(self->peers);
    PFT_FREE(self->views);
    PFT_FREE(self->msgs);
    PFT_FREE(self->contrib);
    PFT_FREE(self->parts);
    self->nh = 0;
    self->kept = v;
    return 0;
}

int pft_secplan_min_contributors(const pft_secplan_t *self)
{
    return self->m;
}

size_t pft_secplan_group_count(const pft_secplan_t *self)
{
    return self->n_groups;
}

const pft_secplan_group_t *pft_secplan_group(const pft_secplan_t *self, size_t i)
{
    return i < self->n_groups ? &self->group : NULL;
}

const pft_secplan_node_t *pft_secplan_node(const pft_secplan_t *self, size_t i)
{
    return i < self->n ? &self->nodes[i] : NULL;
}

size_t pft_secplan_msgs(const pft_secplan_t *self, const pft_secplan_msg_t **out)
{
    *out = self->msgs;
    return self->nh;
}

size_t pft_secplan_noise_div(const pft_secplan_t *self)
{
    return self->noise_div;
}

/* Withholds every holder of class c in set[0..k) (skipping `skip`) if 1..m-1 of them remain; 1 if it did. */
static int withhold_set(const pft_secplan_t *p, const size_t *set, size_t k, size_t skip, size_t n_classes,
                        const uint64_t *class_rows, unsigned char *withhold)
{
    int changed = 0;
    for (size_t c = 0; c < n_classes; c++) {
        size_t holders = 0;
        for (size_t i = 0; i < k; i++)
            holders +=
                set[i] != skip && class_rows[set[i] * n_classes + c] && !withhold[set[i] * n_classes + c];
        if (holders == 0 || holders >= (size_t)p->m)
            continue;
        for (size_t i = 0; i < k; i++)
            if (set[i] != skip && class_rows[set[i] * n_classes + c])
                withhold[set[i] * n_classes + c] = 1;
        changed = 1;
    }
    return changed;
}

int pft_secplan_withhold(const pft_secplan_t *self, size_t n_classes, const uint64_t *class_rows, int dp,
                         unsigned char *withhold, size_t *n_withheld)
{
    if (!n_classes || !class_rows || !withhold || !n_withheld)
        return pft_err(PFT_EINVAL, "secure aggregation: no classes to check");
    if (self->kept != SIZE_MAX)
        return pft_err(PFT_EINVAL, "secure aggregation: the plan kept node %zu's part only", self->kept);
    memset(withhold, 0, self->n * n_classes);
    *n_withheld = 0;
    for (int changed = !dp; changed;) {
        changed = 0;
        for (size_t v = 0; v < self->n; v++)
            changed |= withhold_set(self, self->nodes[v].view, self->nodes[v].n_view, v, n_classes,
                                    class_rows, withhold);
        for (size_t i = 0; i < self->nh; i++)
            if (!self->msgs[i].masked)
                changed |= withhold_set(self, self->msgs[i].contrib, self->msgs[i].n_contrib, SIZE_MAX,
                                        n_classes, class_rows, withhold);
    }
    for (size_t i = 0; i < self->n * n_classes; i++)
        *n_withheld += withhold[i];
    return 0;
}

size_t pft_secplan_share_div(const pft_secplan_t *self, size_t tolerance)
{
    if (tolerance >= self->noise_div || self->noise_div - tolerance < (size_t)self->m)
        return 0;
    return self->noise_div - tolerance;
}

/* 1 if u hands off directly to o and to no one else. */
static int direct_to(const pft_topo_t *t, size_t u, size_t o)
{
    const size_t *succ;
    size_t ns = pft_topo_succs(t, u, &succ);
    return ns == 1 && succ[0] == o && pft_topo_node(t, o)->n_succs == 0;
}

int pft_secplan_recoverable(const pft_secplan_t *self, const pft_topo_t *topo, size_t group)
{
    if (!self || group >= self->n_groups)
        return 0;
    for (size_t m = 0; m < self->group.n_members; m++)
        if (!direct_to(topo, self->group.members[m], self->group.opener))
            return 0;
    return 1;
}

int pft_secplan_dropout_ok(const pft_secplan_t *self, const pft_topo_t *topo, size_t group,
                           const size_t *missing, size_t n_missing, int dp, size_t tolerance)
{
    if (group >= self->n_groups)
        return pft_err(PFT_EINVAL, "secure aggregation: no group %zu", group);
    const pft_secplan_group_t *g = &self->group;
    for (size_t i = 0; i < n_missing; i++) {
        size_t u = missing[i];
        if (u >= self->n || self->nodes[u].mask_group != (long)group)
            return pft_err(PFT_EINVAL, "secure aggregation: missing node %zu is not a member of group %zu", u,
                           group);
        for (size_t j = 0; j < i; j++)
            if (missing[j] == u)
                return pft_err(PFT_EINVAL, "secure aggregation: node %s declared missing twice",
                               pft_topo_node(topo, u)->id);
        if (!direct_to(topo, u, g->opener))
            return pft_err(PFT_ETOPO,
                           "secure aggregation: %s does not hand off directly to the opener %s: dropout "
                           "recovery is planned for stars only",
                           pft_topo_node(topo, u)->id, pft_topo_node(topo, g->opener)->id);
    }
    size_t alive = g->n_members - n_missing, need = pft_secplan_share_div(self, tolerance);
    if (self->threshold && alive < self->threshold)
        return pft_err(
            PFT_ETOPO,
            "secure aggregation: %zu members survive < secagg_threshold = %zu: the opener could not "
            "remove their self-masks (and survivors do not reveal)",
            alive, self->threshold);
    if (alive < (size_t)self->m)
        return pft_err(PFT_ETOPO,
                       "secure aggregation: %zu members survive < min_contributors = %d: the opener may "
                       "not open (survivors do not reveal)",
                       alive, self->m);
    if (dp && (need == 0 || alive < need))
        return pft_err(
            PFT_ETOPO,
            "secure aggregation: %zu members survive, fewer than the %zu whose noise shares "
            "make up sigma^2 (tolerance %zu): the opened sum would not be (eps, delta)-DP as claimed",
            alive, need, tolerance);
    return 0;
}

size_t pft_secplan_default_threshold(size_t n)
{
    size_t t = n / 2 + 1 + (n & 1); /* the least t with 2t ≥ n + 2 */
    return t < n ? t : n;
}

int pft_secplan_threshold_ok(size_t n, size_t t)
{
    return t >= 1 && t <= n && (2 * t >= n + 2 || t == n);
}

int pft_secplan_set_threshold(pft_secplan_t *self, size_t t)
{
    if (self->n_groups == 0 || !pft_secplan_threshold_ok(self->group.n_members, t))
        return pft_err(PFT_EINVAL, "secure aggregation: a threshold of %zu for a group of %zu", t,
                       self->n_groups ? self->group.n_members : 0);
    self->threshold = t;
    return 0;
}

size_t pft_secplan_threshold(const pft_secplan_t *self)
{
    return self->threshold;
}

size_t pft_secplan_degree(const pft_secplan_t *self)
{
    return self->degree;
}
