/* Tests of pft_secplan: the visibility rule of secure aggregation checked by brute force (exact linear
 * algebra over every message a node receives, with the masks it can and cannot remove) on stars, chains,
 * rings, a mesh, a diamond and an in-tree, and the refusals with their messages. */
#include <stdint.h>

#include "pft_secplan.h"
#include "pft_test_topo.h"

#define P 2147483647LL /* 2^31 - 1, prime: exact elimination of small integer matrices */

/* ---- the oracle: what a viewer can compute
 * ------------------------------------------------------------------ */

/* A linear system over GF(P): rows of `cols` entries; unknown mask columns first, then contributors. */
typedef struct {
    size_t rows, cols, cap, n;
    int64_t *a;
} sys_t;

static int64_t md(int64_t x)
{
    x %= P;
    return x < 0 ? x + P : x;
}

static int64_t inv(int64_t x)
{
    int64_t r = 1, e = P - 2;
    for (x = md(x); e; e >>= 1, x = x * x % P)
        if (e & 1)
            r = r * x % P;
    return r;
}

static int64_t *sys_row(sys_t *s)
{
    if (s->rows == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->a = realloc(s->a, s->cap * s->cols * sizeof *s->a);
    }
    int64_t *r = s->a + s->rows++ * s->cols;
    memset(r, 0, s->cols * sizeof *r);
    return r;
}

/* Row echelon form in place; returns the pivot column of each row (SIZE_MAX for a zero row) in piv. */
static void echelon(sys_t *s, size_t *piv)
{
    size_t r = 0;
    for (size_t c = 0; c < s->cols && r < s->rows; c++) {
        size_t k = r;
        while (k < s->rows && s->a[k * s->cols + c] == 0)
            k++;
        if (k == s->rows)
            continue;
        for (size_t j = 0; j < s->cols; j++) {
            int64_t x = s->a[r * s->cols + j];
            s->a[r * s->cols + j] = s->a[k * s->cols + j];
            s->a[k * s->cols + j] = x;
        }
        int64_t f = inv(s->a[r * s->cols + c]);
        for (size_t j = 0; j < s->cols; j++)
            s->a[r * s->cols + j] = s->a[r * s->cols + j] * f % P;
        for (size_t i = r + 1; i < s->rows; i++) {
            int64_t g = s->a[i * s->cols + c];
            for (size_t j = c; g && j < s->cols; j++)
                s->a[i * s->cols + j] = md(s->a[i * s->cols + j] - g * s->a[r * s->cols + j]);
        }
        piv[r++] = c;
    }
    for (; r < s->rows; r++)
        piv[r] = SIZE_MAX;
}

/* 1 if the 0/1 vector on contributor columns `set` lies in the learnable space (rows r with piv[r] ≥ xoff).
 */
static int learnable(const sys_t *s, const size_t *piv, size_t xoff, const unsigned char *set)
{
    int64_t *v = calloc(s->cols, sizeof *v);
    for (size_t u = 0; u < s->n; u++)
        v[xoff + u] = set[u];
    for (size_t r = 0; r < s->rows; r++) {
        size_t c = piv[r];
        if (c == SIZE_MAX || c < xoff || v[c] == 0)
            continue;
        int64_t g = v[c];
        for (size_t j = c; j < s->cols; j++)
            v[j] = md(v[j] - g * s->a[r * s->cols + j]);
    }
    int zero = 1;
    for (size_t j = 0; j < s->cols; j++)
        zero &= v[j] == 0;
    free(v);
    return zero;
}

/* ---- the model of a plan
 * ------------------------------------------------------------------------------------ */

typedef struct {
    const pft_topo_t *t;
    const pft_secplan_t *p;
    size_t n;
    unsigned char *member; /* group 0's members and opener */
    unsigned char *pair;   /* n × n: 1 where the oracle expects a mask between the two */
    size_t opener;
} model_t;

/* The pairs the oracle expects: each member with every other member and the opener, or with secagg_degree k
 * (k < members − 1) with the k members nearest to it in the members' cyclic order and the opener. */
static void model_pairs(model_t *m, const pft_secplan_group_t *g, size_t k)
{
    size_t n = m->n, G = g->n_members;
    m->pair = calloc(n * n, 1);
    for (size_t i = 0; i < G; i++) {
        size_t a = g->members[i];
        m->pair[a * n + g->opener] = m->pair[g->opener * n + a] = 1;
        for (size_t j = 0; j < G; j++) {
            size_t dist = i > j ? i - j : j - i;
            dist = dist < G - dist ? dist : G - dist;
            if (j != i && (k == 0 || dist <= k / 2))
                m->pair[a * n + g->members[j]] = 1;
        }
    }
}

/* Adds the rows of message i (one per part) to s as seen by the coalition `known` (NULL: a wire observer):
 * mask columns: pair (a, b), a < b, at a·n + b, unknown unless a coalition node is a or b; contributor u at
 * xoff + u, dropped for the coalition's own. */
static void add_msg_known(const model_t *m, size_t i, const unsigned char *known, sys_t *s)
{
    const pft_secplan_msg_t *msg;
    pft_secplan_msgs(m->p, &msg);
    msg += i;
    size_t n = m->n, xoff = n * n;
    for (size_t k = 0; k < msg->n_contrib; k++) {
        if (k > 0 && msg->part[k - 1] == msg->part[k])
            continue; /* a part's first contributor starts its row */
        int64_t *r = sys_row(s);
        for (size_t j = k; j < msg->n_contrib; j++) {
            if (msg->part[j] != msg->part[k])
                continue;
            size_t h = msg->contrib[j];
            int kh = known && known[h];
            if (!kh)
                r[xoff + h] = md(r[xoff + h] + 1);
            for (size_t w = 0; msg->masked && w < n; w++) {
                if (w == h || !m->pair[h * n + w] || kh || (known && known[w]))
                    continue;
                size_t a = h < w ? h : w, b = h < w ? w : h;
                r[a * n + b] = md(r[a * n + b] + (h < w ? 1 : -1));
            }
        }
    }
}

/* add_msg_known for one viewer v (SIZE_MAX: a wire observer). */
static void add_msg(const model_t *m, size_t i, size_t v, sys_t *s)
{
    unsigned char *known = v < m->n ? calloc(m->n, 1) : NULL;
    if (known)
        known[v] = 1;
    add_msg_known(m, i, known, s);
    free(known);
}

/* Every nonempty set T of contributors other than v with |T| < m: none may be learnable. Enumerates sets of
 * size 1..m-1 (m ≤ 3 in these tests). */
static int leaks(const model_t *m, const sys_t *s, const size_t *piv, size_t v, int mc, size_t *found)
{
    unsigned char *set = calloc(m->n, 1);
    int leak = 0;
    for (size_t a = 0; a < m->n && !leak; a++) {
        if (a == v || !pft_topo_node(m->t, a)->has_data)
            continue;
        set[a] = 1;
        if (learnable(s, piv, m->n * m->n, set))
            leak = 1, *found = a;
        for (size_t b = a + 1; mc >= 3 && b < m->n && !leak; b++) {
            if (b == v || !pft_topo_node(m->t, b)->has_data)
                continue;
            set[b] = 1;
            if (learnable(s, piv, m->n * m->n, set))
                leak = 2, *found = a;
            set[b] = 0;
        }
        set[a] = 0;
    }
    free(set);
    return leak;
}

/* The rule for viewer v: no set of 1..m-1 others learnable from everything v receives; what it learns is at
 * most one aggregate (dimension ≤ 1), and that aggregate is the plan's view of v without v. */
static void check_viewer(const model_t *m, size_t v, const char *name)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(m->t, &h), n = m->n;
    sys_t s = {.cols = n * n + n, .n = n};
    for (size_t i = 0; i < nh; i++)
        if (h[i].to == v)
            add_msg(m, i, v, &s);
    size_t *piv = calloc(s.rows + 1, sizeof *piv), found = 0, dim = 0;
    echelon(&s, piv);
    for (size_t r = 0; r < s.rows; r++)
        dim += piv[r] != SIZE_MAX && piv[r] >= n * n;
    int mc = pft_secplan_min_contributors(m->p);
    int leak = leaks(m, &s, piv, v, mc, &found);
    CHECK_MSG(!leak, "%s: node %s can compute a set of %d contributors containing %s", name,
              pft_topo_node(m->t, v)->id, leak, pft_topo_node(m->t, found)->id);
    CHECK_MSG(dim <= 1, "%s: node %s learns %zu independent aggregates", name, pft_topo_node(m->t, v)->id,
              dim);
    const pft_secplan_node_t *nd = pft_secplan_node(m->p, v);
    unsigned char *set = calloc(n, 1);
    size_t others = 0;
    for (size_t k = 0; k < nd->n_view; k++)
        if (nd->view[k] != v)
            set[nd->view[k]] = 1, others++;
    CHECK_MSG(others == 0 || others >= (size_t)mc, "%s: view of %s", name, pft_topo_node(m->t, v)->id);
    if (others)
        CHECK_MSG(learnable(&s, piv, n * n, set), "%s: node %s cannot open its view", name,
                  pft_topo_node(m->t, v)->id);
    else
        CHECK_MSG(dim == 0, "%s: node %s learns something beyond its own rows", name,
                  pft_topo_node(m->t, v)->id);
    free(set);
    free(piv);
    free(s.a);
}

/* A wire observer of one message (no secret, no rows): no set of 1..m-1 contributors. */
static void check_wire(const model_t *m, size_t i, const char *name)
{
    sys_t s = {.cols = m->n * m->n + m->n, .n = m->n};
    add_msg(m, i, SIZE_MAX, &s);
    size_t *piv = calloc(s.rows + 1, sizeof *piv), found = 0;
    echelon(&s, piv);
    int leak = leaks(m, &s, piv, SIZE_MAX, pft_secplan_min_contributors(m->p), &found);
    CHECK_MSG(!leak, "%s: hand-off %zu shows a set of %d contributors containing %s", name, i + 1, leak,
              pft_topo_node(m->t, found)->id);
    free(piv);
    free(s.a);
}

/* Loads text, plans with m, checks every node and every hand-off; returns the plan (caller destroys both). */
static pft_secplan_t *check_all(const char *name, const char *text, int mc, pft_topo_t **tp)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(load(text, SKIP, &t) == 0, "%s: %s", name, pft_errmsg());
    pft_secplan_t *p = NULL;
    if (t)
        CHECK_MSG(pft_secplan_new(t, mc, NULL, &p) == 0, "%s: %s", name, pft_errmsg());
    *tp = t;
    if (!p)
        return NULL;
    model_t m = {.t = t, .p = p, .n = pft_topo_node_count(t)};
    m.member = calloc(m.n, 1);
    const pft_secplan_group_t *g = pft_secplan_group(p, 0);
    CHECK(pft_secplan_group_count(p) == 1 && g != NULL);
    for (size_t k = 0; k < g->n_members; k++)
        m.member[g->members[k]] = 1;
    m.member[g->opener] = 1;
    model_pairs(&m, g, pft_secplan_degree(p));
    for (size_t v = 0; v < m.n; v++) {
        /* the plan's mask peers are what the oracle assumes: the group's other members (or the secagg_degree
         * nearest) and the opener */
        const pft_secplan_node_t *nd = pft_secplan_node(p, v);
        size_t k = 0, ok = 1;
        int in = v != g->opener && m.member[v];
        CHECK_MSG((nd->mask_group == 0) == in, "%s: node %zu mask group", name, v);
        for (size_t u = 0; in && u < m.n; u++)
            if (m.pair[v * m.n + u])
                ok &= k < nd->n_mask_peers && nd->mask_peers[k++] == u;
        CHECK_MSG(ok && k == nd->n_mask_peers, "%s: node %zu mask peers", name, v);
        check_viewer(&m, v, name);
    }
    const pft_handoff_t *h;
    for (size_t i = 0; i < pft_topo_handoffs(t, &h); i++)
        check_wire(&m, i, name);
    free(m.member);
    free(m.pair);
    return p;
}

/* ---- topologies
 * ---------------------------------------------------------------------------------------------- */

static char s_text[16384];

static const char *star_text(int k)
{
    int w = snprintf(s_text, sizeof s_text, "digraph s { " SIM "\n server [data = false]\n");
    for (int i = 0; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " c%02d -> server\n", i + 1);
    snprintf(s_text + w, sizeof s_text - (size_t)w, "}\n");
    return s_text;
}

static const char *chain_text(int k)
{
    int w = snprintf(s_text, sizeof s_text, "digraph c { " SIM "\n n0");
    for (int i = 1; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n%d", i);
    snprintf(s_text + w, sizeof s_text - (size_t)w, "\n}\n");
    return s_text;
}

static const char *ring_text(int k)
{
    int w = snprintf(s_text, sizeof s_text, "digraph r { " SIM " start = n0\n n0");
    for (int i = 1; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n%d", i);
    snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n0\n}\n");
    return s_text;
}

static size_t idx(const pft_topo_t *t, const char *id)
{
    return pft_topo_find(t, id)->index;
}

static void test_star(void)
{
    int sizes[] = {5, 20, 50};
    for (int i = 0; i < 3; i++) {
        pft_topo_t *t;
        char name[32];
        snprintf(name, sizeof name, "star%d", sizes[i]);
        pft_secplan_t *p = check_all(name, star_text(sizes[i]), 2, &t);
        if (p) {
            const pft_secplan_group_t *g = pft_secplan_group(p, 0);
            CHECK(g->opener == idx(t, "server") && g->n_members == (size_t)sizes[i]);
            CHECK(pft_secplan_noise_div(p) == (size_t)sizes[i]);
            const pft_secplan_node_t *c1 = pft_secplan_node(p, idx(t, "c01"));
            CHECK(c1->n_mask_peers == (size_t)sizes[i] && c1->n_view == 1 && c1->mask_group == 0);
            CHECK(pft_secplan_node(p, idx(t, "server"))->n_view == (size_t)sizes[i]);
        }
        pft_secplan_destroy(&p);
        pft_topo_destroy(&t);
    }
    pft_topo_t *t;
    pft_secplan_t *p = check_all("star20, m = 3", star_text(20), 3, &t);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

static void test_chain(void)
{
    pft_topo_t *t;
    pft_secplan_t *p = check_all("chain3", chain_text(3), 2, &t);
    if (p) { /* n0, n1 mask; n2 opens n0 + n1 */
        CHECK(pft_secplan_group(p, 0)->opener == idx(t, "n2"));
        CHECK(pft_secplan_node(p, idx(t, "n1"))->n_view == 1);
        CHECK(pft_secplan_node(p, idx(t, "n2"))->n_view == 3 &&
              pft_secplan_node(p, idx(t, "n2"))->opens == 0);
        const pft_secplan_msg_t *msg;
        CHECK(pft_secplan_msgs(p, &msg) == 2 && msg[0].masked && msg[1].masked && msg[1].n_contrib == 2);
        CHECK(pft_secplan_noise_div(p) == 2);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    p = check_all("chain5", chain_text(5), 2, &t);
    if (p) {
        const pft_secplan_msg_t *msg;
        CHECK(pft_secplan_msgs(p, &msg) == 4 && msg[1].masked && !msg[2].masked && msg[2].n_contrib == 3);
        CHECK(pft_secplan_node(p, idx(t, "n4"))->n_view == 5);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    p = check_all("chain5, m = 3", chain_text(5), 3, &t);
    if (p)
        CHECK(pft_secplan_group(p, 0)->opener == idx(t, "n3"));
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    /* a data-less relay does not count: n0 -> n1 (no data) -> n2 -> n3: n3 opens n0 + n2 */
    p = check_all("chain with a relay", "digraph c { " SIM "\n n1 [data = false]\n n0 -> n1 -> n2 -> n3\n}",
                  2, &t);
    if (p)
        CHECK(pft_secplan_group(p, 0)->opener == idx(t, "n3") && pft_secplan_group(p, 0)->n_members == 2);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

static void test_ring_mesh(void)
{
    int sizes[] = {5, 8};
    for (int i = 0; i < 2; i++) {
        pft_topo_t *t;
        char name[32];
        snprintf(name, sizeof name, "ring%d", sizes[i]);
        pft_secplan_t *p = check_all(name, ring_text(sizes[i]), 2, &t);
        if (p) {
            char last[16];
            snprintf(last, sizeof last, "n%d", sizes[i] - 1);
            CHECK(pft_secplan_group(p, 0)->opener == idx(t, last));
            CHECK(pft_secplan_noise_div(p) == (size_t)sizes[i] - 1);
            for (size_t v = 0; v < (size_t)sizes[i]; v++)
                CHECK(pft_secplan_node(p, v)->n_view == (size_t)sizes[i]);
        }
        pft_secplan_destroy(&p);
        pft_topo_destroy(&t);
    }
    pft_topo_t *t;
    pft_secplan_t *p = check_all("ring8, m = 3", ring_text(8), 3, &t);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    p = check_all("mesh4",
                  "digraph m { " SIM " root = a\n a -> b\n a -> c\n b -> a\n b -> d\n c -> b\n c -> d\n"
                  " d -> a\n}",
                  2, &t);
    if (p)
        CHECK(pft_secplan_group(p, 0)->opener == idx(t, "a") && pft_secplan_noise_div(p) == 3);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

/* A node keeps its own part of the plan (pft_secplan_keep_node): its mask peers and view as they were, every
 * node's scalars, the group and divisors; the whole run's arrays gone, and what needs them refused. */
static void test_keep_node(void)
{
    for (size_t v = 0; v < 6; v++) {
        pft_topo_t *t = NULL;
        pft_secplan_t *p = NULL, *whole = NULL;
        CHECK(load(ring_text(6), SKIP, &t) == 0);
        CHECK(t && pft_secplan_new(t, 2, NULL, &p) == 0 && pft_secplan_new(t, 2, NULL, &whole) == 0);
        if (!p || !whole) {
            pft_secplan_destroy(&p);
            pft_secplan_destroy(&whole);
            pft_topo_destroy(&t);
            return;
        }
        CHECK(pft_secplan_keep_node(p, 6) == PFT_EINVAL); /* no such node */
        CHECK(pft_secplan_keep_node(p, v) == 0);
        CHECK(pft_secplan_keep_node(p, v) == PFT_EINVAL); /* kept already */
        const pft_secplan_node_t *a = pft_secplan_node(p, v), *b = pft_secplan_node(whole, v);
        CHECK(a->n_mask_peers == b->n_mask_peers && a->n_view == b->n_view && a->n_view == 6);
        CHECK(memcmp(a->mask_peers, b->mask_peers, a->n_mask_peers * sizeof *a->mask_peers) == 0);
        CHECK(memcmp(a->view, b->view, a->n_view * sizeof *a->view) == 0);
        for (size_t u = 0; u < 6; u++) {
            const pft_secplan_node_t *x = pft_secplan_node(p, u), *y = pft_secplan_node(whole, u);
            CHECK(x->mask_group == y->mask_group && x->opens == y->opens && x->contributor == y->contributor);
            CHECK(u == v || (x->n_view == 0 && x->n_mask_peers == 0 && !x->view && !x->mask_peers));
        }
        CHECK(pft_secplan_group(p, 0)->opener == pft_secplan_group(whole, 0)->opener);
        CHECK(pft_secplan_noise_div(p) == pft_secplan_noise_div(whole));
        const pft_secplan_msg_t *msg;
        CHECK(pft_secplan_msgs(p, &msg) == 0 && pft_secplan_msgs(whole, &msg) == 10); /* 2n − 2 */
        uint64_t cr[6] = {1, 1, 1, 1, 1, 1};
        unsigned char w[6];
        size_t nw = 0;
        CHECK(pft_secplan_withhold(p, 1, cr, 0, w, &nw) == PFT_EINVAL);
        pft_secplan_destroy(&p);
        pft_secplan_destroy(&whole);
        pft_topo_destroy(&t);
    }
}

static void test_dag(void)
{
    pft_topo_t *t;
    pft_secplan_t *p =
        check_all("diamond", "digraph d { " SIM "\n a -> b\n a -> c\n b -> d\n c -> d\n}", 2, &t);
    if (p) { /* b carries a's part apart from its own, both masked; d opens a + b + c */
        const pft_secplan_msg_t *msg;
        size_t nm = pft_secplan_msgs(p, &msg);
        int two_parts = 0;
        for (size_t i = 0; i < nm; i++) {
            CHECK(msg[i].masked);
            two_parts += msg[i].n_contrib == 2 && msg[i].part[0] != msg[i].part[1];
        }
        CHECK(two_parts == 2);
        CHECK(pft_secplan_group(p, 0)->opener == idx(t, "d") && pft_secplan_noise_div(p) == 3);
        CHECK(pft_secplan_node(p, idx(t, "b"))->n_view == 1);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    /* an in-tree of aggregators without data: clients -> {r1, r2} -> root */
    p = check_all("in-tree",
                  "digraph i { " SIM "\n node [data = false] r1 r2 root\n node [data = true]\n"
                  " {x1 x2 x3} -> r1\n {y1 y2} -> r2\n {r1 r2} -> root\n}",
                  2, &t);
    if (p)
        CHECK(pft_secplan_group(p, 0)->n_members == 5 && pft_secplan_node(p, idx(t, "r1"))->n_view == 0);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

/* 1 if the coalition coal (an opener and members that pool what they receive, their rows and their mask
 * keys) can compute contributor `victim`'s statistics alone from every bundle any of them receives. */
static int coalition_learns(const model_t *m, const unsigned char *coal, size_t victim)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(m->t, &h), n = m->n;
    sys_t s = {.cols = n * n + n, .n = n};
    for (size_t i = 0; i < nh; i++)
        if (coal[h[i].to])
            add_msg_known(m, i, coal, &s);
    size_t *piv = calloc(s.rows + 1, sizeof *piv);
    unsigned char *set = calloc(n, 1);
    echelon(&s, piv);
    set[victim] = 1;
    int got = learnable(&s, piv, n * n, set);
    free(set);
    free(piv);
    free(s.a);
    return got;
}

static const char *ring_deg_text(int k, int degree)
{
    int w = snprintf(s_text, sizeof s_text, "digraph r { " SIM " start = n0 secagg_degree = %d\n n0", degree);
    for (int i = 1; i < k; i++)
        w += snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n%d", i);
    snprintf(s_text + w, sizeof s_text - (size_t)w, " -> n0\n}\n");
    return s_text;
}

/* secagg_degree = k (sparse pairs): every viewer's guarantee as with every pair (check_all's oracle, its pair
 * graph its own), and against an opener that colludes with members: no set of k − 1 members helps it isolate
 * any other member, while the k members around one (its whole neighbourhood) do unmask it — the attack the
 * degree allows, which every pair resists. */
static void test_degree(void)
{
    pft_topo_t *t;
    pft_secplan_t *p = check_all("ring9, degree 4", ring_deg_text(9, 4), 2, &t);
    if (p) {
        CHECK(pft_secplan_degree(p) == 4);
        CHECK(pft_secplan_node(p, idx(t, "n0"))->n_mask_peers == 5); /* n1 n2 n6 n7 and the opener n8 */
        const size_t want[] = {1, 2, 6, 7, 8};
        CHECK(memcmp(pft_secplan_node(p, idx(t, "n0"))->mask_peers, want, sizeof want) == 0);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    p = check_all("ring9, degree 2", ring_deg_text(9, 2), 2, &t);
    CHECK(p && pft_secplan_degree(p) == 2 && pft_secplan_node(p, 3)->n_mask_peers == 3);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    p = check_all("ring5, degree 4 = every member", ring_deg_text(5, 4), 2, &t);
    CHECK(p && pft_secplan_degree(p) == 0 && pft_secplan_node(p, 0)->n_mask_peers == 4);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);

    /* the collusion bound: ring of 10 (members n0..n8, opener n9), degree 4 and every pair */
    for (int degree = 0; degree <= 4; degree += 4) {
        char name[48];
        snprintf(name, sizeof name, "ring10, degree %d", degree);
        p = check_all(name, ring_deg_text(10, degree), 2, &t);
        if (!p) {
            pft_topo_destroy(&t);
            return;
        }
        model_t m = {.t = t, .p = p, .n = 10};
        model_pairs(&m, pft_secplan_group(p, 0), pft_secplan_degree(p));
        unsigned char coal[10];
        size_t safe = 0, sets = 0;
        for (unsigned mask = 0; mask < (1u << 9); mask++) { /* every 3 colluding members */
            if (__builtin_popcount(mask) != 3)
                continue;
            memset(coal, 0, sizeof coal);
            coal[9] = 1;
            for (size_t u = 0; u < 9; u++)
                coal[u] = (mask >> u) & 1;
            int any = 0;
            for (size_t v = 0; v < 9; v++)
                any |= !coal[v] && coalition_learns(&m, coal, v);
            sets++;
            safe += !any;
        }
        CHECK_MSG(safe == sets, "%s: %zu of %zu sets of 3 colluding members unmask another", name,
                  sets - safe, sets);
        memset(coal, 0, sizeof coal); /* the attack: n4's four nearest members and the opener */
        coal[2] = coal[3] = coal[5] = coal[6] = coal[9] = 1;
        int unmasked = coalition_learns(&m, coal, 4);
        CHECK_MSG(unmasked == (degree == 4), "%s: the opener with n2 n3 n5 n6 %s n4", name,
                  unmasked ? "unmasks" : "does not unmask");
        free(m.member);
        free(m.pair);
        pft_secplan_destroy(&p);
        pft_topo_destroy(&t);
    }

    /* refused: an odd degree, and a star (double masking counts on every pair) */
    CHECK(load(ring_deg_text(9, 3), SKIP, &t) == 0);
    CHECK(t && pft_secplan_new(t, 2, NULL, &p) == PFT_ETOPO && strstr(pft_errmsg(), "even k"));
    pft_topo_destroy(&t);
    CHECK(load("digraph s { " SIM
               " secagg_degree = 2\n server [data = false]\n {c1 c2 c3 c4 c5 c6} -> server\n}",
               SKIP, &t) == 0);
    CHECK(t && pft_secplan_new(t, 2, NULL, &p) == PFT_ETOPO && strstr(pft_errmsg(), "in a star"));
    pft_topo_destroy(&t);
}

/* Rows: the group's and the views' row counts; unknown (0) anywhere gives 0. */
static void test_rows(void)
{
    pft_topo_t *t = NULL;
    CHECK(load(chain_text(4), SKIP, &t) == 0);
    uint64_t rows[4] = {100, 9, 50, 7};
    pft_secplan_t *p = NULL;
    CHECK(t && pft_secplan_new(t, 2, rows, &p) == 0);
    if (p) {
        CHECK(pft_secplan_group(p, 0)->rows == 109);
        CHECK(pft_secplan_node(p, 3)->view_rows == 166);
    }
    pft_secplan_destroy(&p);
    rows[1] = 0;
    CHECK(t && pft_secplan_new(t, 2, rows, &p) == 0);
    if (p)
        CHECK(pft_secplan_group(p, 0)->rows == 0 && pft_secplan_node(p, 0)->view_rows == 100);
    pft_secplan_destroy(&p);
    pft_secplan_destroy(&p); /* twice: safe */
    pft_topo_destroy(&t);
}

/* Independent check of the class rule: every view (without its viewer) and clear bundle has 0 or >= m holders
 * of every class among the rows not withheld. */
static void check_classes(const pft_secplan_t *p, size_t n, size_t nc, const uint64_t *cr,
                          const unsigned char *w)
{
    int m = pft_secplan_min_contributors(p);
    for (size_t v = 0; v < n; v++) {
        const pft_secplan_node_t *nd = pft_secplan_node(p, v);
        for (size_t c = 0; c < nc; c++) {
            size_t h = 0;
            for (size_t k = 0; k < nd->n_view; k++)
                h += nd->view[k] != v && cr[nd->view[k] * nc + c] && !w[nd->view[k] * nc + c];
            CHECK_MSG(h == 0 || h >= (size_t)m, "node %zu class %zu: %zu holders", v, c, h);
        }
    }
}

static void test_withhold(void)
{
    pft_topo_t *t = NULL;
    CHECK(load(chain_text(5), SKIP, &t) == 0);
    pft_secplan_t *p = NULL;
    CHECK(t && pft_secplan_new(t, 2, NULL, &p) == 0);
    if (!p) {
        pft_topo_destroy(&t);
        return;
    }
    /* class 0 at n0 and n3 only, class 1 everywhere, class 2 at n1 and n4 only */
    uint64_t cr[5 * 3] = {10, 5, 0, 0, 5, 7, 0, 5, 0, 9, 5, 0, 0, 5, 3};
    unsigned char w[5 * 3];
    size_t nw = 0;
    CHECK(pft_secplan_withhold(p, 3, cr, 0, w, &nw) == 0);
    /* n2 opens n0 + n1: class 0 held by n0 alone -> withheld; n4 then sees class 0 from n3 alone -> withheld;
     * class 2: n1 alone in n2's, n3's and n4's views (n4's own rows of it are its own) -> n1 withheld */
    CHECK(w[0 * 3 + 0] && w[3 * 3 + 0] && w[1 * 3 + 2] && !w[4 * 3 + 2] && nw == 3);
    for (size_t v = 0; v < 5; v++)
        CHECK(!w[v * 3 + 1]);
    check_classes(p, 5, 3, cr, w);
    CHECK(pft_secplan_withhold(p, 3, cr, 1, w, &nw) == 0 && nw == 0); /* DP: the noise shares protect */
    CHECK(pft_secplan_withhold(p, 0, cr, 0, w, &nw) == PFT_EINVAL);
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    /* star of 6: class 1 held by c01 and c02 (kept), class 2 by c03 alone (withheld) */
    CHECK(load(star_text(6), SKIP, &t) == 0);
    CHECK(t && pft_secplan_new(t, 2, NULL, &p) == 0);
    if (p) {
        size_t n = pft_topo_node_count(t);
        uint64_t *c3 = calloc(n * 3, sizeof *c3);
        unsigned char *w3 = calloc(n * 3, 1);
        for (size_t v = 0; v < n; v++)
            c3[v * 3 + 0] = pft_topo_node(t, v)->has_data ? 4 : 0;
        c3[idx(t, "c01") * 3 + 1] = c3[idx(t, "c02") * 3 + 1] = 2;
        c3[idx(t, "c03") * 3 + 2] = 6;
        CHECK(pft_secplan_withhold(p, 3, c3, 0, w3, &nw) == 0 && nw == 1 && w3[idx(t, "c03") * 3 + 2]);
        check_classes(p, n, 3, c3, w3);
        free(c3);
        free(w3);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

static void test_dropout(void)
{
    pft_topo_t *t = NULL;
    pft_secplan_t *p = NULL;
    CHECK(load(star_text(5), SKIP, &t) == 0 && pft_secplan_new(t, 2, NULL, &p) == 0);
    if (p) {
        size_t c1 = idx(t, "c01"), c2 = idx(t, "c02"), c3 = idx(t, "c03"), srv = idx(t, "server");
        size_t one[] = {c3}, three[] = {c1, c2, c3}, four[] = {c1, c2, c3, idx(t, "c04")};
        CHECK(pft_secplan_dropout_ok(p, t, 0, one, 1, 0, 0) == 0);
        CHECK(pft_secplan_dropout_ok(p, t, 0, three, 3, 0, 0) == 0); /* 2 survive: m = 2 */
        CHECK(pft_secplan_dropout_ok(p, t, 0, four, 4, 0, 0) == PFT_ETOPO);
        CHECK(strstr(pft_errmsg(), "1 members survive < min_contributors = 2") != NULL);
        /* DP: noise shares sigma^2 / 5 need all five; a tolerance of 1 (shares sigma^2 / 4) admits one
         * dropout */
        CHECK(pft_secplan_share_div(p, 0) == 5 && pft_secplan_share_div(p, 1) == 4);
        CHECK(pft_secplan_share_div(p, 4) == 0 && pft_secplan_share_div(p, 3) == 2);
        CHECK(pft_secplan_dropout_ok(p, t, 0, one, 1, 1, 0) == PFT_ETOPO);
        CHECK(strstr(pft_errmsg(), "noise shares") != NULL);
        CHECK(pft_secplan_dropout_ok(p, t, 0, one, 1, 1, 1) == 0);
        size_t two[] = {c1, c2};
        CHECK(pft_secplan_dropout_ok(p, t, 0, two, 2, 1, 1) == PFT_ETOPO);
        size_t bad[] = {srv}, dup[] = {c1, c1};
        CHECK(pft_secplan_dropout_ok(p, t, 0, bad, 1, 0, 0) == PFT_EINVAL);
        CHECK(pft_secplan_dropout_ok(p, t, 0, dup, 2, 0, 0) == PFT_EINVAL);
        CHECK(pft_secplan_dropout_ok(p, t, 1, one, 1, 0, 0) == PFT_EINVAL);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
    /* a chain's member does not hand off to the opener alone: no recovery */
    CHECK(load(chain_text(4), SKIP, &t) == 0 && pft_secplan_new(t, 2, NULL, &p) == 0);
    if (p) {
        size_t a[] = {0};
        CHECK(pft_secplan_dropout_ok(p, t, 0, a, 1, 0, 0) == PFT_ETOPO);
        CHECK(strstr(pft_errmsg(), "stars only") != NULL);
    }
    pft_secplan_destroy(&p);
    pft_topo_destroy(&t);
}

static void expect_refusal(const char *text, int mc, int code, const char *needle, const char *needle2)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(load(text, SKIP, &t) == 0, "%s", pft_errmsg());
    pft_secplan_t *p = NULL;
    int rc = t ? pft_secplan_new(t, mc, NULL, &p) : 0;
    CHECK_MSG(rc == code && p == NULL, "rc %d, expected %d", rc, code);
    CHECK_MSG(strstr(pft_errmsg(), needle) != NULL, "message lacks \"%s\": %s", needle, pft_errmsg());
    if (needle2)
        CHECK_MSG(strstr(pft_errmsg(), needle2) != NULL, "message lacks \"%s\": %s", needle2, pft_errmsg());
    pft_topo_destroy(&t);
}

static void test_refusals(void)
{
    expect_refusal(chain_text(2), 2, PFT_ETOPO, "no node of the chain has min_contributors = 2", "t.dot");
    expect_refusal(chain_text(5), 5, PFT_ETOPO, "no node of the chain", "5 contributors in 5 nodes");
    expect_refusal(ring_text(3), 3, PFT_ETOPO, "a contributor sees 2 others < min_contributors = 3", "ring");
    expect_refusal(star_text(2), 3, PFT_ETOPO, "the sink server would open the sum of 2 contributors", NULL);
    expect_refusal("digraph g { " SIM "\n a -> b\n a -> c\n}", 2, PFT_ETOPO, "2 sinks (b, c)", "one sink");
    expect_refusal("digraph f { " SIM "\n a -> b -> c -> d\n b -> d [fallback = true]\n}", 2, PFT_ETOPO,
                   "t.dot:3: secure aggregation: fallback edge b -> d", "remove fallback");
    expect_refusal(chain_text(3), 0, PFT_EINVAL, "min_contributors = 0", NULL);
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_star);
    RUN(test_chain);
    RUN(test_ring_mesh);
    RUN(test_degree);
    RUN(test_keep_node);
    RUN(test_dag);
    RUN(test_rows);
    RUN(test_withhold);
    RUN(test_dropout);
    RUN(test_refusals);
    pft_test_topo_cleanup();
    return pft_test_done();
}
