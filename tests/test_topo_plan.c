/* Tests of topology/ plans: chains, rings, dags and stars, meshes and their errors, fallback edges, and the
 * planner alone; every plan's hand-offs and stages checked for consistency. */
#include "pft_error.h"
#include "pft_plan.h"
#include "pft_test.h"
#include "pft_test_topo.h"
#include "pft_topo.h"
#include "pft_topo_attr.h"

#include <stdint.h>

/* ---- plans ---- */

static const char *id_of(const pft_topo_t *t, size_t v)
{
    return pft_topo_node(t, v)->id;
}

static void test_plan_chain(void)
{
    pft_topo_t *t = NULL;
    CHECK(load("digraph c5 { " SIM "\n c -> d -> e\n a -> b -> c\n}", SKIP, &t) == 0);
    if (!t)
        return;
    CHECK(pft_topo_kind(t) == PFT_KIND_CHAIN);
    CHECK(pft_topo_node_count(t) == 5);
    CHECK(strcmp(id_of(t, 0), "c") == 0 && strcmp(id_of(t, 3), "a") == 0); /* file order */
    const size_t *order;
    CHECK(pft_topo_order(t, &order) == 5);
    const char *want[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        CHECK(strcmp(id_of(t, order[i]), want[i]) == 0);
    const pft_handoff_t *h;
    CHECK(pft_topo_handoffs(t, &h) == 4);
    for (int i = 0; i < 4; i++) {
        CHECK(strcmp(id_of(t, h[i].from), want[i]) == 0 && strcmp(id_of(t, h[i].to), want[i + 1]) == 0);
        CHECK(h[i].lap == 1 && h[i].what == PFT_WHAT_REFIT && !h[i].complete);
    }
    CHECK(pft_topo_find(t, "a")->role == PFT_ROLE_SOURCE);
    CHECK(pft_topo_find(t, "c")->role == PFT_ROLE_RELAY);
    CHECK(pft_topo_find(t, "e")->role == PFT_ROLE_SINK);
    const pft_topo_node_t *a = pft_topo_find(t, "a");
    CHECK(a->n_stages == 1 && a->stages[0].n_recv == 0 && a->stages[0].n_send == 1);
    CHECK(pft_topo_find(t, "nobody") == NULL);
    CHECK(pft_topo_run(t)->start == SIZE_MAX && pft_topo_run(t)->start_id == NULL);
    check_plan_consistent(t);
    pft_topo_destroy(&t);
    CHECK(t == NULL);
    pft_topo_destroy(&t);
}

static void test_plan_ring(void)
{
    for (size_t n = 2; n <= 7; n++) {
        char text[512] = "digraph r { " SIM "start=n2;\n";
        for (size_t i = 0; i < n; i++) /* ring n0 -> n1 -> … -> n0, start n2 (n0 when n = 2) */
            snprintf(text + strlen(text), sizeof text - strlen(text), " n%zu -> n%zu\n", i, (i + 1) % n);
        strcat(text, "}\n");
        if (n == 2)
            memcpy(strstr(text, "start=n2"), "start=n0", 8);
        pft_topo_t *t = NULL;
        CHECK_MSG(load(text, SKIP, &t) == 0, "ring %zu: %s", n, pft_errmsg());
        if (!t)
            continue;
        CHECK(pft_topo_kind(t) == PFT_KIND_RING);
        size_t s = pft_topo_run(t)->start;
        CHECK(strcmp(id_of(t, s), n == 2 ? "n0" : "n2") == 0);
        const size_t *v;
        CHECK(pft_topo_order(t, &v) == n);
        CHECK(v[0] == s);
        const pft_handoff_t *h;
        size_t nh = pft_topo_handoffs(t, &h);
        CHECK_MSG(nh == 2 * n - 2, "ring of %zu: %zu hand-offs", n, nh);
        for (size_t i = 0; i + 1 < n; i++) { /* lap 1: v0 -> … -> v(n-1), refits */
            CHECK(h[i].from == v[i] && h[i].to == v[i + 1]);
            CHECK(h[i].lap == 1 && h[i].what == PFT_WHAT_REFIT && !h[i].complete);
        }
        /* lap 2: the producer hands the complete bundle to start, then it is forwarded up to v(n-2) */
        CHECK(h[n - 1].from == v[n - 1] && h[n - 1].to == v[0]);
        CHECK(h[n - 1].lap == 2 && h[n - 1].what == PFT_WHAT_REFIT && h[n - 1].complete);
        for (size_t i = 0; i + 2 < n; i++) {
            const pft_handoff_t *x = &h[n + i];
            CHECK(x->from == v[i] && x->to == v[i + 1]);
            CHECK(x->lap == 2 && x->what == PFT_WHAT_FORWARD && x->complete);
            CHECK(x->to != v[n - 1]); /* never back to the producer */
        }
        CHECK(pft_topo_node(t, v[0])->role == PFT_ROLE_START);
        CHECK(pft_topo_node(t, v[n - 1])->role == PFT_ROLE_PRODUCER);
        for (size_t i = 1; i + 1 < n; i++)
            CHECK(pft_topo_node(t, v[i])->role == PFT_ROLE_MEMBER);
        /* every node's last stage holds the complete knowledge */
        for (size_t i = 0; i < n; i++) {
            const pft_topo_node_t *nd = pft_topo_node(t, v[i]);
            const pft_stage_t *last = &nd->stages[nd->n_stages - 1];
            CHECK(nd->n_stages == (i == n - 1 ? 1u : 2u));
            if (i == n - 1) /* the producer completes it by refitting */
                CHECK(last->action == PFT_WHAT_REFIT && last->n_recv == 1 && h[last->send[0]].complete);
            else
                CHECK(last->action == PFT_WHAT_FORWARD && last->n_recv == 1 && h[last->recv[0]].complete);
            if (i < n - 1) {
                const pft_stage_t *first = &nd->stages[0];
                CHECK(first->lap == 1 && first->action == PFT_WHAT_REFIT && first->n_send == 1);
                CHECK(first->n_recv == (i == 0 ? 0u : 1u));
            }
        }
        check_plan_consistent(t);
        pft_topo_destroy(&t);
    }
}

static void test_plan_diamond_and_stars(void)
{
    pft_topo_t *t = NULL;
    CHECK(load("digraph d { " SIM "\n a -> b\n a -> c\n b -> d\n c -> d\n}", SKIP, &t) == 0);
    if (t) {
        CHECK(pft_topo_kind(t) == PFT_KIND_DAG);
        const pft_topo_node_t *d = pft_topo_find(t, "d");
        CHECK(d->n_preds == 2 && d->role == PFT_ROLE_SINK);
        CHECK(strcmp(id_of(t, d->preds[0]), "b") == 0 && strcmp(id_of(t, d->preds[1]), "c") == 0);
        CHECK(d->n_stages == 1 && d->stages[0].n_recv == 2 && d->stages[0].n_send == 0);
        const pft_topo_node_t *a = pft_topo_find(t, "a");
        CHECK(a->role == PFT_ROLE_SOURCE && a->n_succs == 2 && a->stages[0].n_send == 2);
        CHECK(pft_topo_find(t, "b")->role == PFT_ROLE_RELAY);
        const pft_handoff_t *h;
        CHECK(pft_topo_handoffs(t, &h) == 4);
        CHECK(strcmp(id_of(t, h[0].from), "a") == 0 && strcmp(id_of(t, h[3].to), "d") == 0);
        const size_t *order;
        pft_topo_order(t, &order);
        CHECK(strcmp(id_of(t, order[0]), "a") == 0 && strcmp(id_of(t, order[3]), "d") == 0);
        check_plan_consistent(t);
        pft_topo_destroy(&t);
    }
    /* out-star: one source, four sinks; in-star: four sources merged by one sink */
    CHECK(load("digraph s { " SIM "\n hub -> { w x y z }\n}", SKIP, &t) == 0);
    if (t) {
        CHECK(pft_topo_kind(t) == PFT_KIND_DAG);
        CHECK(pft_topo_find(t, "hub")->role == PFT_ROLE_SOURCE && pft_topo_find(t, "hub")->n_succs == 4);
        CHECK(pft_topo_find(t, "y")->role == PFT_ROLE_SINK);
        const pft_handoff_t *h;
        CHECK(pft_topo_handoffs(t, &h) == 4);
        check_plan_consistent(t);
        pft_topo_destroy(&t);
    }
    CHECK(load("digraph s { " SIM "\n { w x y z } -> hub\n}", SKIP, &t) == 0);
    if (t) {
        const pft_topo_node_t *hub = pft_topo_find(t, "hub");
        CHECK(hub->role == PFT_ROLE_SINK && hub->n_preds == 4 && hub->stages[0].n_recv == 4);
        check_plan_consistent(t);
        pft_topo_destroy(&t);
    }
    /* a fallback edge is exposed but not planned */
    CHECK(load("digraph f { " SIM "\n a -> b -> c\n a -> c [fallback=true, send_deadline=20]\n}", SKIP, &t) ==
          0);
    if (t) {
        CHECK(pft_topo_kind(t) == PFT_KIND_CHAIN);
        const pft_topo_node_t *a = pft_topo_find(t, "a"), *c = pft_topo_find(t, "c");
        CHECK(a->n_succs == 1 && a->n_fallbacks == 1 && a->fallbacks[0] == c->index);
        CHECK(c->n_preds == 1 && c->n_fallback_preds == 1 && c->fallback_preds[0] == a->index);
        const pft_topo_edge_t *e = pft_topo_edge_find(t, a->index, c->index);
        CHECK(e && e->fallback && e->send_deadline == 20 && e->deadline == 600 && e->line == 3);
        CHECK(pft_topo_edge_count(t) == 3);
        const pft_handoff_t *h;
        CHECK(pft_topo_handoffs(t, &h) == 2);
        pft_topo_destroy(&t);
    }
}

static void test_plan_direct(void)
{
    /* the planner alone, on a 6-node layered dag with ties broken by index */
    const char *names[] = {"a", "b", "c", "d", "e", "f"};
    pft_plan_edge_t e[] = {{5, 1}, {0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}};
    pft_plan_t *p = NULL;
    pft_plan_where_t w;
    CHECK(pft_plan_build(6, names, 6, e, SIZE_MAX, SIZE_MAX, &p, &w) == 0);
    if (p) {
        const size_t *o;
        pft_plan_order(p, &o);
        size_t want[] = {0, 2, 5, 1, 3, 4};
        for (int i = 0; i < 6; i++)
            CHECK(o[i] == want[i]);
        CHECK(pft_plan_kind(p) == PFT_KIND_DAG);
        pft_plan_destroy(&p);
    }
    size_t cyc[4], len = 0;
    pft_plan_edge_t c[] = {{0, 1}, {1, 2}, {2, 3}, {3, 1}};
    CHECK(pft_plan_find_cycle(4, 4, c, cyc, &len) == 1 && len == 3);
    CHECK(pft_plan_find_cycle(4, 3, c, cyc, &len) == 0);
    CHECK(pft_plan_build(4, names, 4, c, SIZE_MAX, SIZE_MAX, &p, &w) == PFT_ETOPO && w.edge == 3 &&
          p == NULL);
    CHECK(strcmp(pft_kind_name(PFT_KIND_RING), "ring") == 0 &&
          strcmp(pft_role_name(PFT_ROLE_PRODUCER), "producer") == 0);
    CHECK(strcmp(pft_what_name(PFT_WHAT_FORWARD), "forward-complete") == 0);
}

/* The 4-node mesh of test_plan_mesh: a -> b -> a, a -> c -> b, b -> d -> a and the chord c -> d. */
#define MESH4 "root = a\n a -> b\n a -> c\n b -> a\n b -> d\n c -> b\n c -> d\n d -> a\n"

/* Stage of node v: lap, action, final, received and sent hand-off seqs (0-terminated lists). */
static void check_stage_(int line, const pft_stage_t *st, int lap, pft_what_t action, int final,
                         const size_t *recv, const size_t *send)
{
    size_t nr = 0, ns = 0;
    while (recv[nr])
        nr++;
    while (send[ns])
        ns++;
    int ok =
        st->lap == lap && st->action == action && st->final == final && st->n_recv == nr && st->n_send == ns;
    for (size_t i = 0; ok && i < nr; i++)
        ok = st->recv[i] + 1 == recv[i];
    for (size_t i = 0; ok && i < ns; i++)
        ok = st->send[i] + 1 == send[i];
    if (!ok) {
        fprintf(stderr, "  FAIL %s:%d: stage differs (lap %d, %zu received, %zu sent)\n", __FILE__, line,
                st->lap, st->n_recv, st->n_send);
        pft_t_failed_checks++;
    }
}
#define CHECK_STAGE(st, lap, action, final, recv, send)                                                      \
    check_stage_(__LINE__, st, lap, action, final, (const size_t[])recv, (const size_t[])send)
#define SEQS(...)                                                                                            \
    {                                                                                                        \
        __VA_ARGS__, 0                                                                                       \
    }

static void test_plan_mesh(void)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(load("digraph m4 { " SIM MESH4 "}", SKIP, &t) == 0, "%s", pft_errmsg());
    if (!t)
        return;
    CHECK(pft_topo_kind(t) == PFT_KIND_MESH && strcmp(pft_kind_name(PFT_KIND_MESH), "mesh") == 0);
    const pft_topo_run_t *run = pft_topo_run(t);
    CHECK(strcmp(run->root_id, "a") == 0 && run->root == 0 && run->start == SIZE_MAX && !run->start_id);
    /* lap 1 in-tree (to a): b -> a, d -> a, c -> b (c's successors b and d are both 1 hop from a: b, the
     * lower index, wins); lap 2 out-tree (from a): a -> b, a -> c, b -> d (d's predecessors b and c are
     * both 1 hop from a: b wins); c -> d is in neither tree */
    static const struct {
        const char *from, *to;
        int lap;
        pft_what_t what;
        int complete;
    } want[] = {
        {"c", "b", 1, PFT_WHAT_REFIT, 0}, {"b", "a", 1, PFT_WHAT_REFIT, 0},
        {"d", "a", 1, PFT_WHAT_REFIT, 0}, {"a", "b", 2, PFT_WHAT_REFIT, 1},
        {"a", "c", 2, PFT_WHAT_REFIT, 1}, {"b", "d", 2, PFT_WHAT_FORWARD, 1},
    };
    const pft_handoff_t *h;
    CHECK(pft_topo_handoffs(t, &h) == 6);
    for (size_t i = 0; i < 6; i++)
        CHECK_MSG(strcmp(id_of(t, h[i].from), want[i].from) == 0 &&
                      strcmp(id_of(t, h[i].to), want[i].to) == 0 && h[i].lap == want[i].lap &&
                      h[i].what == want[i].what && h[i].complete == want[i].complete,
                  "hand-off %zu: %s -> %s lap %d", i + 1, id_of(t, h[i].from), id_of(t, h[i].to), h[i].lap);
    const size_t *order;
    CHECK(pft_topo_order(t, &order) == 4);
    const char *want_order[] = {"c", "b", "d", "a"}; /* farthest from the root first, ties by index */
    for (int i = 0; i < 4; i++)
        CHECK(strcmp(id_of(t, order[i]), want_order[i]) == 0);
    const pft_topo_node_t *a = pft_topo_find(t, "a"), *b = pft_topo_find(t, "b"), *c = pft_topo_find(t, "c"),
                          *d = pft_topo_find(t, "d");
    CHECK(a->role == PFT_ROLE_PRODUCER && b->role == PFT_ROLE_MEMBER && c->role == PFT_ROLE_MEMBER &&
          d->role == PFT_ROLE_MEMBER);
    CHECK(a->n_stages == 1 && b->n_stages == 2 && c->n_stages == 2 && d->n_stages == 2);
    /* the root refits on everything once and opens lap 2 with the complete bundle */
    CHECK_STAGE(&a->stages[0], 1, PFT_WHAT_REFIT, 1, SEQS(2, 3), SEQS(4, 5));
    CHECK_STAGE(&b->stages[0], 1, PFT_WHAT_REFIT, 0, SEQS(1), SEQS(2));
    CHECK_STAGE(&b->stages[1], 2, PFT_WHAT_FORWARD, 1, SEQS(4), SEQS(6));
    CHECK_STAGE(&c->stages[0], 1, PFT_WHAT_REFIT, 0, {0}, SEQS(1));
    CHECK_STAGE(&c->stages[1], 2, PFT_WHAT_FORWARD, 1, SEQS(5), {0});
    CHECK_STAGE(&d->stages[0], 1, PFT_WHAT_REFIT, 0, {0}, SEQS(3));
    CHECK_STAGE(&d->stages[1], 2, PFT_WHAT_FORWARD, 1, SEQS(6), {0});
    CHECK(c->n_succs == 2 && d->n_preds == 2); /* the idle edge c -> d is still a primary edge */
    check_plan_consistent(t);
    pft_topo_destroy(&t);

    /* the planner alone: a larger mesh, each node in each tree once, the complete bundle reaches all */
    const char *names[] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"};
    pft_plan_edge_t e[] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 8},
                           {8, 9}, {9, 0}, {0, 5}, {5, 2}, {7, 3}, {9, 4}, {2, 8}, {6, 1}};
    pft_plan_t *p = NULL;
    CHECK(pft_plan_build(10, names, 16, e, SIZE_MAX, 3, &p, NULL) == 0);
    if (!p)
        return;
    CHECK(pft_plan_kind(p) == PFT_KIND_MESH && pft_plan_role(p, 3) == PFT_ROLE_PRODUCER);
    const pft_handoff_t *ph;
    size_t nh = pft_plan_handoffs(p, &ph);
    CHECK(nh == 18);
    int sent1[10] = {0}, got2[10] = {0};
    for (size_t i = 0; i < nh; i++) {
        CHECK(ph[i].lap == (i < 9 ? 1 : 2) && ph[i].complete == (ph[i].lap == 2));
        CHECK(ph[i].what == (ph[i].lap == 2 && ph[i].from != 3 ? PFT_WHAT_FORWARD : PFT_WHAT_REFIT));
        int edge = 0;
        for (size_t j = 0; j < 16; j++)
            edge |= e[j].tail == ph[i].from && e[j].head == ph[i].to;
        CHECK(edge);
        if (ph[i].lap == 1)
            sent1[ph[i].from]++;
        else
            got2[ph[i].to]++;
    }
    for (size_t v = 0; v < 10; v++) {
        CHECK(sent1[v] == (v != 3) && got2[v] == (v != 3)); /* one parent in each tree, the root none */
        const pft_stage_t *st;
        CHECK(pft_plan_stages(p, v, &st) == (v == 3 ? 1u : 2u));
    }
    pft_plan_destroy(&p);
}

/* ---- part groups ---- */

/* pft_topo_part_groups of every node against its definition, computed here naively (DESIGN.md §8): u's rows
 * reach v along lap-1 hand-offs and fallback edges, and two such contributors share a part iff every rejoin w
 * below v (w != v, reached by v's rows, two or more predecessors) receives both through the same
 * predecessors; the part's id is its smallest member. */
static size_t check_part_groups(const pft_topo_t *t, const char *what)
{
    size_t n = pft_topo_node_count(t), ne = 0;
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h), nedge = pft_topo_edge_count(t);
    size_t *from = calloc(nh + nedge + 1, sizeof *from), *to = calloc(nh + nedge + 1, sizeof *to);
    unsigned char *r = calloc(n * n, 1); /* r[u·n + a]: a's rows reach u */
    long *got = calloc(n, sizeof *got);
    size_t *indeg = calloc(n, sizeof *indeg);
    for (size_t i = 0; i < nh; i++)
        if (h[i].lap == 1)
            from[ne] = h[i].from, to[ne++] = h[i].to;
    for (size_t i = 0; i < nedge; i++)
        if (pft_topo_edge(t, i)->fallback)
            from[ne] = pft_topo_edge(t, i)->tail, to[ne++] = pft_topo_edge(t, i)->head;
    for (size_t i = 0; i < ne; i++)
        indeg[to[i]]++;
    for (size_t u = 0; u < n; u++)
        r[u * n + u] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < ne; i++)
            for (size_t a = 0; a < n; a++)
                if (r[from[i] * n + a] && !r[to[i] * n + a])
                    r[to[i] * n + a] = 1, changed = 1;
    }
    size_t wrong = 0, apart = 0; /* apart: nodes at which contributors travel in two parts or more */
    for (size_t v = 0; v < n; v++) {
        CHECK(pft_topo_part_groups(t, v, got) == 0);
        size_t parts = 0;
        for (size_t u = 0; u < n; u++) {
            long want = -1;
            for (size_t a = 0; want < 0 && a <= u && r[v * n + u]; a++) {
                int same = r[v * n + a];
                for (size_t i = 0; same && i < ne; i++) {
                    size_t w = to[i];
                    if (w != v && r[w * n + v] && indeg[w] >= 2)
                        same = r[from[i] * n + a] == r[from[i] * n + u];
                }
                if (same)
                    want = (long)a;
            }
            wrong += got[u] != want;
            parts += want == (long)u;
        }
        apart += parts >= 2;
    }
    CHECK_MSG(wrong == 0, "%s: %zu of %zu part groups differ from their definition", what, wrong, n * n);
    free(from), free(to), free(r), free(got), free(indeg);
    return apart;
}

/* Random dags (a chain with forward chords: rejoins everywhere, fallback edges among them) and meshes (a
 * random cycle with chords, root n0): the groups of every node as their definition says. */
static void test_part_groups_random(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t apart = 0;
    for (int trial = 0; trial < 24; trial++) {
        int n = 4 + trial % 13, mesh = trial % 3 == 2;
        char *text = calloc(1, 16384);
        size_t len =
            (size_t)snprintf(text, 16384, "digraph g%d { " SIM "%s\n", trial, mesh ? "root = n0;" : "");
        int *perm = calloc((size_t)n, sizeof *perm);
        for (int i = 0; i < n; i++)
            perm[i] = i;
        for (int i = n - 1; mesh && i > 1; i--) { /* n0 stays first: any cycle through all nodes */
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int j = 1 + (int)((x >> 33) % (uint64_t)i), tmp = perm[i];
            perm[i] = perm[j], perm[j] = tmp;
        }
        for (int i = 0; i + 1 < n || (mesh && i < n); i++)
            len += (size_t)snprintf(text + len, 16384 - len, " n%d -> n%d\n", perm[i], perm[(i + 1) % n]);
        for (int a = 0; a < n; a++)
            for (int b = a + 2; b < n; b++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                int pick = (int)((x >> 33) % 100);
                if (pick < 30 && !(mesh && a == 0 && b == n - 1)) /* a mesh's n-1 -> 0 is the cycle's */
                    len += (size_t)snprintf(text + len, 16384 - len, " n%d -> n%d%s\n", mesh ? perm[b] : a,
                                            mesh ? perm[a] : b, !mesh && pick < 6 ? " [fallback=true]" : "");
            }
        snprintf(text + len, 16384 - len, "}\n");
        pft_topo_t *t = NULL;
        int rc = load(text, SKIP, &t);
        CHECK_MSG(rc == 0, "trial %d: %s\n%s", trial, pft_errmsg(), text);
        char what[32];
        snprintf(what, sizeof what, "%s %d (%d nodes)", mesh ? "mesh" : "dag", trial, n);
        if (t)
            apart += check_part_groups(t, what);
        pft_topo_destroy(&t);
        free(perm);
        free(text);
    }
    CHECK_MSG(apart >= 10, "only %zu nodes receive their contributors in two parts or more", apart);
}

static void test_errors_mesh(void)
{
    /* a strongly connected graph that is not a ring needs root */
    EXPECT_FAIL("digraph g { " SIM "\n a -> b -> c -> a\n a -> c\n}", SKIP,
                "t.dot:2: ", "no graph attribute 'root'", "root=<node id>");
    EXPECT_FAIL("digraph g { " SIM "\n root = zz\n a -> b -> a\n}", SKIP,
                "t.dot:2: ", "root=zz names no node", "a, b");
    EXPECT_FAIL("digraph g { " SIM "\n root = a\n a -> b\n b -> c\n}", SKIP, "t.dot:2: ", "root=a",
                "no cycle", "'root' is only for meshes");
    EXPECT_FAIL("digraph g { " SIM "\n root = b\n a -> b -> c -> a\n}", SKIP, "t.dot:2: ", "root=b",
                "is a ring", "use start=b instead of root");
    EXPECT_FAIL("digraph g { " SIM " start = a\n root = a\n a -> b -> a\n}", SKIP, "t.dot:2: ", "is a ring");
    EXPECT_FAIL("digraph g { " SIM " start = a\n" MESH4 "}", SKIP, "not a single simple cycle",
                "give root=<node id> instead of start");
    /* not strongly connected: a node without a path to the root, a node the root cannot reach */
    EXPECT_FAIL("digraph g { " SIM "\n root = a\n a -> b\n b -> c\n c -> b\n}", SKIP, "t.dot:3: ", "root=a",
                "node 'b' has no path to the root", "strongly connected");
    EXPECT_FAIL("digraph g { " SIM "\n root = b\n a -> b\n b -> c\n c -> b\n}", SKIP, "t.dot:3: ", "root=b",
                "node 'a' cannot be reached from the root");
    /* fallback edges */
    EXPECT_FAIL("digraph g { " SIM MESH4 " d -> c [fallback = true]\n}", SKIP,
                "t.dot:9: ", "fallback edge d -> c", "a mesh", "takes no fallback edges");
    /* the attribute table knows root, for the graph only */
    const pft_topo_attr_t *r = pft_topo_attr_find("root");
    CHECK(r && r->scopes == PFT_SCOPE_GRAPH && r->type == PFT_ATTR_NAME && strstr(r->help, "mesh"));
    EXPECT_FAIL("digraph g { " SIM "\n a -> b -> c -> a\n a -> c\n b [root = a]\n}", SKIP,
                "t.dot:4: ", "root");
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_plan_chain);
    RUN(test_plan_ring);
    RUN(test_plan_diamond_and_stars);
    RUN(test_plan_direct);
    RUN(test_plan_mesh);
    RUN(test_errors_mesh);
    RUN(test_part_groups_random);
    pft_test_topo_cleanup();
    return pft_test_done();
}
