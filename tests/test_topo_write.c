/* Tests of topology/ resolved copies: attributes set after loading (all or nothing), pft_topo_write and the
 * copy loaded back with the same settings, node order, edge order and hand-offs. */
#include "pft_error.h"
#include "pft_plan.h"
#include "pft_test.h"
#include "pft_test_topo.h"
#include "pft_topo.h"
#include "pft_topo_fingerprint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- resolved copies ---- */

static void test_write_reload(void)
{
    char sub[300], path[400], copy[400];
    snprintf(sub, sizeof sub, "%s/nodes", s_dir);
    mkdir(sub, 0700);
    pft_topo_t *t = NULL;
    const char *text = "digraph rt { dataset=\"nowhere\"; k=7; start=b; partition=domain\n"
                       "  label=\"drawn\"; a [domain=1, shape=box]; b [domain=0, k=2]; c [domain=3]\n"
                       "  a -> b -> c -> a\n"
                       "  b -> a [fallback=true]\n}\n";
    CHECK(load(text, SKIP, &t) == 0);
    if (!t)
        return;
    for (size_t v = 0; v < pft_topo_node_count(t); v++) {
        const char *id = pft_topo_node(t, v)->id;
        char x[400], y[400], ep[400];
        snprintf(x, sizeof x, "nodes/%s_x.npy", id); /* relative: against the topology's folder */
        snprintf(y, sizeof y, "%s/%s_y.npy", sub, id);
        snprintf(ep, sizeof ep, "ipc://%s/%s.sock", s_dir, id);
        /* a simulation may be filled in one attribute at a time, or several at once */
        CHECK_MSG(pft_topo_set_node_attr(t, id, "train", x) == 0, "%s", pft_errmsg());
        const char *kv[] = {"labels", y, "endpoint", ep, NULL};
        CHECK_MSG(pft_topo_set_node_attrs(t, id, kv) == 0, "%s", pft_errmsg());
    }
    /* a failed change leaves the topology as it was */
    const char *ep_a = pft_topo_find(t, "a")->endpoint;
    char saved[400];
    snprintf(saved, sizeof saved, "%s", ep_a);
    CHECK(pft_topo_set_node_attr(t, "b", "endpoint", saved) == PFT_ETOPO &&
          strstr(pft_errmsg(), "already used"));
    /* open ports are the nodes' own choice: two nodes may both say tcp://HOST:0 */
    char ep_b[400], ep_c[400];
    snprintf(ep_b, sizeof ep_b, "%s", pft_topo_find(t, "b")->endpoint);
    snprintf(ep_c, sizeof ep_c, "%s", pft_topo_find(t, "c")->endpoint);
    CHECK_MSG(pft_topo_set_node_attr(t, "b", "endpoint", "tcp://127.0.0.1:0") == 0, "%s", pft_errmsg());
    CHECK_MSG(pft_topo_set_node_attr(t, "c", "endpoint", "tcp://127.0.0.1:0") == 0, "%s", pft_errmsg());
    CHECK(pft_topo_set_node_attr(t, "c", "endpoint", "tcp://127.0.0.1:*") == 0);
    CHECK(pft_topo_set_node_attr(t, "b", "endpoint", ep_b) == 0);
    CHECK(pft_topo_set_node_attr(t, "c", "endpoint", ep_c) == 0);
    CHECK(pft_topo_set_node_attr(t, "b", "k", "0") != 0 && pft_topo_find(t, "b")->k == 2);
    CHECK(pft_topo_set_node_attr(t, "b", "colour", "red") == PFT_EINVAL && strstr(pft_errmsg(), "colour"));
    CHECK(pft_topo_set_node_attr(t, "zz", "k", "3") == PFT_EINVAL);
    CHECK(pft_topo_set_graph_attr(t, "endpoint", "x") == PFT_EINVAL);
    CHECK(strcmp(pft_topo_find(t, "a")->endpoint, saved) == 0);
    CHECK(pft_topo_set_graph_attr(t, "seed", "99") == 0 && pft_topo_run(t)->seed == 99);
    CHECK(pft_topo_set_node_attr(t, "c", "samples", "40") == 0 && pft_topo_find(t, "c")->samples == 40);
    snprintf(path, sizeof path, "%s/nodes/a_x.npy", s_dir);
    CHECK(strcmp(pft_topo_find(t, "a")->train, path) == 0);

    /* written elsewhere, the copy is self-contained; pftnode reads it with REQUIRE_RESOLVED */
    snprintf(copy, sizeof copy, "%s/resolved.dot", sub);
    CHECK(pft_topo_write(t, copy) == 0);
    pft_topo_t *u = NULL;
    CHECK_MSG(pft_topo_load(copy, SKIP | PFT_TOPO_REQUIRE_RESOLVED, &u) == 0, "%s", pft_errmsg());
    if (u) {
        CHECK(pft_topo_kind(u) == PFT_KIND_RING && pft_topo_node_count(u) == 3);
        CHECK(pft_topo_run(u)->seed == 99 && pft_topo_run(u)->k == 7 &&
              strcmp(pft_topo_run(u)->run, "rt") == 0);
        CHECK(strcmp(pft_topo_run(u)->dataset, pft_topo_run(t)->dataset) == 0);
        for (size_t v = 0; v < 3; v++) {
            const pft_topo_node_t *x = pft_topo_node(t, v), *y = pft_topo_node(u, v);
            CHECK(strcmp(x->id, y->id) == 0 && x->k == y->k && x->cov == y->cov && x->samples == y->samples);
            CHECK(x->domain == y->domain && x->role == y->role);
            CHECK(strcmp(x->train, y->train) == 0 && strcmp(x->labels, y->labels) == 0);
            CHECK(strcmp(x->endpoint, y->endpoint) == 0);
            CHECK(x->n_fallbacks == y->n_fallbacks);
        }
        const pft_handoff_t *h1, *h2;
        size_t n1 = pft_topo_handoffs(t, &h1), n2 = pft_topo_handoffs(u, &h2);
        CHECK(n1 == 4 && n2 == 4);
        for (size_t i = 0; i < n1 && i < n2; i++)
            CHECK(h1[i].from == h2[i].from && h1[i].to == h2[i].to && h1[i].lap == h2[i].lap &&
                  h1[i].what == h2[i].what);
        pft_topo_destroy(&u);
    }
    /* the public copy: the same topology without any node's files (each node's go in its own node file) */
    char pub[600];
    snprintf(pub, sizeof pub, "%s/public.dot", sub);
    CHECK(pft_topo_write_public(t, pub) == 0);
    CHECK_MSG(pft_topo_load(pub, SKIP | PFT_TOPO_REQUIRE_RESOLVED, &u) == 0, "%s", pft_errmsg());
    if (u) {
        CHECK(pft_topo_node_count(u) == 3 && pft_topo_run(u)->seed == 99);
        pft_topo_fp_t *pa = NULL, *pb = NULL;
        CHECK(pft_topo_fp_new(t, NULL, &pa) == 0 && pft_topo_fp_new(u, NULL, &pb) == 0);
        if (pa && pb)
            CHECK(memcmp(pft_topo_fp_hash(pa), pft_topo_fp_hash(pb), PFT_TOPO_FP_LEN) == 0);
        pft_topo_fp_destroy(&pa);
        pft_topo_fp_destroy(&pb);
        for (size_t v = 0; v < 3; v++) {
            const pft_topo_node_t *y = pft_topo_node(u, v);
            CHECK(!y->train && !y->labels && !y->test && !y->test_labels && y->endpoint);
        }
        pft_topo_destroy(&u);
    }
    uint8_t *ptext = NULL;
    size_t tlen = 0;
    FILE *pf = fopen(pub, "rb");
    if (pf) {
        ptext = calloc(1, 1 << 16);
        tlen = ptext ? fread(ptext, 1, (1 << 16) - 1, pf) : 0;
        fclose(pf);
    }
    CHECK(ptext && tlen > 0 && !strstr((char *)ptext, "_x.npy") && !strstr((char *)ptext, "_y.npy"));
    free(ptext);
    /* all or nothing: the second pair is bad, so the first is rolled back too */
    const char *kv[] = {"k", "9", "cov", "wide", NULL};
    CHECK(pft_topo_set_node_attrs(t, "a", kv) == PFT_EINVAL && pft_topo_find(t, "a")->k == 7);
    CHECK(pft_topo_set_node_attrs(t, "a", (const char *[]){"k", "9", "cov", "full", NULL}) == 0);
    CHECK(pft_topo_find(t, "a")->k == 9 && pft_topo_find(t, "a")->cov == PFT_COV_FULL);
    /* the data files do not exist yet: without SKIP the copy is refused, naming them */
    CHECK(pft_topo_load(copy, PFT_TOPO_REQUIRE_RESOLVED, &u) == PFT_ETOPO);
    CHECK(strstr(pft_errmsg(), "resolved.dot"));
    /* auto-assigned endpoints are written out */
    pft_topo_destroy(&t);
    CHECK(load("digraph pb { " SIM "port_base=7600; a -> b }", SKIP, &t) == 0);
    if (t) {
        CHECK(pft_topo_write(t, copy) == 0);
        pft_topo_destroy(&t);
        CHECK(pft_topo_load(copy, SKIP, &t) == 0);
        CHECK(t && pft_topo_set_graph_attr(t, "port_base", NULL) == 0); /* endpoints stay */
        CHECK(t && strcmp(pft_topo_find(t, "b")->endpoint, "tcp://127.0.0.1:7601") == 0);
        pft_topo_destroy(&t);
    }
    /* a new port_base (pftnet launch --set port_base=N) moves the endpoints it gave, not explicit ones; a
     * refused value leaves them where they were */
    CHECK(load("digraph pb { " SIM "port_base=7600; c [endpoint=\"tcp://127.0.0.1:7999\"]; a -> b -> c }",
               SKIP, &t) == 0);
    if (t) {
        CHECK(strcmp(pft_topo_find(t, "a")->endpoint, "tcp://127.0.0.1:7601") == 0); /* c is node 0 */
        CHECK(pft_topo_set_graph_attr(t, "port_base", "9000") == 0);
        CHECK(strcmp(pft_topo_find(t, "a")->endpoint, "tcp://127.0.0.1:9001") == 0);
        CHECK(strcmp(pft_topo_find(t, "b")->endpoint, "tcp://127.0.0.1:9002") == 0);
        CHECK(strcmp(pft_topo_find(t, "c")->endpoint, "tcp://127.0.0.1:7999") == 0);
        CHECK(pft_topo_set_graph_attr(t, "port_base", "65534") == PFT_ETOPO); /* 3 nodes need up to 65536 */
        CHECK(strcmp(pft_topo_find(t, "b")->endpoint, "tcp://127.0.0.1:9002") == 0);
        CHECK(pft_topo_set_graph_attr(t, "port_base", "9100") == 0);
        CHECK(strcmp(pft_topo_find(t, "b")->endpoint, "tcp://127.0.0.1:9102") == 0);
        /* port_base=0 (launch --set port_base=0): the automatic endpoints are gone, for the launcher to pick
         */
        CHECK(pft_topo_set_graph_attr(t, "port_base", "0") == 0);
        CHECK(pft_topo_find(t, "b")->endpoint == NULL);
        CHECK(strcmp(pft_topo_find(t, "c")->endpoint, "tcp://127.0.0.1:7999") == 0);
        CHECK(pft_topo_set_graph_attr(t, "port_base", "-1") != 0 && strstr(pft_errmsg(), "port_base"));
        CHECK(strcmp(pft_topo_find(t, "c")->endpoint, "tcp://127.0.0.1:7999") == 0);
        pft_topo_destroy(&t);
    }
    snprintf(path, sizeof path, "%s/no/such/dir/x.dot", s_dir);
    CHECK(load("digraph w { " SIM " a -> b }", SKIP, &t) == 0);
    if (t) {
        CHECK(pft_topo_write(t, path) == PFT_EIO);
        pft_topo_destroy(&t);
    }
}

/* ---- resolved copies keep the node order ---- */

/* Loads text, writes it, loads the copy: same nodes (by index), edges (by index), settings and
 * hand-offs; the copy written again is the same file. Returns the copy's text (static) or "". */
static const char *check_write_order_(int line, const char *text)
{
    static char copy_text[8192];
    copy_text[0] = '\0';
    char copy[400], copy2[400];
    snprintf(copy, sizeof copy, "%s/order.dot", s_dir);
    snprintf(copy2, sizeof copy2, "%s/order2.dot", s_dir);
    pft_topo_t *t = NULL, *u = NULL, *w = NULL;
    int ok = load(text, SKIP, &t) == 0 && pft_topo_write(t, copy) == 0 &&
             pft_topo_load(copy, SKIP, &u) == 0 && pft_topo_write(u, copy2) == 0 &&
             pft_topo_load(copy2, SKIP, &w) == 0;
    if (!ok) {
        fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, line, pft_errmsg());
        pft_t_failed_checks++;
        goto done;
    }
    int same = strcmp(pft_topo_run(t)->run, pft_topo_run(u)->run) == 0 &&
               pft_topo_node_count(t) == pft_topo_node_count(u) &&
               pft_topo_edge_count(t) == pft_topo_edge_count(u) && pft_topo_kind(t) == pft_topo_kind(u);
    for (size_t v = 0; same && v < pft_topo_node_count(t); v++) {
        const pft_topo_node_t *a = pft_topo_node(t, v), *b = pft_topo_node(u, v);
        same = strcmp(a->id, b->id) == 0 && a->k == b->k && a->cov == b->cov && a->role == b->role &&
               a->samples == b->samples && (a->classes == NULL) == (b->classes == NULL) &&
               (!a->classes || strcmp(a->classes, b->classes) == 0);
    }
    for (size_t e = 0; same && e < pft_topo_edge_count(t); e++) {
        const pft_topo_edge_t *a = pft_topo_edge(t, e), *b = pft_topo_edge(u, e);
        same = a->tail == b->tail && a->head == b->head && a->fallback == b->fallback &&
               a->deadline == b->deadline;
    }
    const pft_handoff_t *h1, *h2;
    size_t n1 = pft_topo_handoffs(t, &h1), n2 = pft_topo_handoffs(u, &h2);
    same = same && n1 == n2;
    for (size_t i = 0; same && i < n1; i++)
        same = h1[i].from == h2[i].from && h1[i].to == h2[i].to && h1[i].lap == h2[i].lap;
    FILE *f1 = fopen(copy, "r"), *f2 = fopen(copy2, "r");
    size_t l1 = f1 ? fread(copy_text, 1, sizeof copy_text - 1, f1) : 0;
    copy_text[l1] = '\0';
    char other[sizeof copy_text];
    size_t l2 = f2 ? fread(other, 1, sizeof other - 1, f2) : 0;
    if (f1)
        fclose(f1);
    if (f2)
        fclose(f2);
    if (!same || l1 == 0 || l1 != l2 || memcmp(copy_text, other, l1) != 0) {
        fprintf(stderr, "  FAIL %s:%d: the written copy differs (%s); it reads:\n%s\n", __FILE__, line,
                same ? "written again, it changes" : "nodes, edges or hand-offs", copy_text);
        pft_t_failed_checks++;
    }
done:
    pft_topo_destroy(&t);
    pft_topo_destroy(&u);
    pft_topo_destroy(&w);
    return copy_text;
}
#define CHECK_WRITE_ORDER(text) check_write_order_(__LINE__, text)

/* pft_topo_write used to let agwrite put subgraphs first, so nodes first seen in a subgraph moved ahead
 * (tests/fuzz/crashes/topo/write-*): node index = file order is a node's identity (partitions,
 * port_base endpoints, hand-off order). */
static void test_write_order(void)
{
    const char *c =
        CHECK_WRITE_ORDER("digraph g {\n  dataset=\".\"; partition=\"labels:0-1|2-3|4-6\";\n"
                          "  a -> b -> c;\n  subgraph cluster_late { label=\"drawn together\"; c; b }\n}\n");
    CHECK_MSG(strstr(c, "subgraph cluster_late {") && strstr(c, "label = \"drawn together\";"), "%s", c);
    CHECK_WRITE_ORDER("digraph s { " SIM "port_base=7300\n hub -> { w x y z }\n}");
    /* a subgraph's node default applies to nodes created there; the copy keeps their values */
    CHECK_WRITE_ORDER("digraph g {\n  dataset=\".\"; k=10;\n  subgraph cluster_site2 { a; node [k=20]; b }\n"
                      "  a -> b\n}\n");
    pft_topo_t *t = NULL;
    CHECK(load("digraph g { " SIM "k=10; subgraph cluster_s { a; node [k=20]; b } a -> b }", SKIP, &t) == 0);
    CHECK(t && pft_topo_find(t, "a")->k == 10 && pft_topo_find(t, "b")->k == 20);
    pft_topo_destroy(&t);
    /* nested clusters, anonymous rank=same, HTML labels, node/edge defaults, edge attributes and keys */
    c = CHECK_WRITE_ORDER(
        "digraph rich { " SIM "label=\"top\"; node [shape=box]; edge [color=gray]\n"
        " subgraph cluster_outer { label=<<b>outer</b>>; subgraph cluster_inner { style=dashed; node [k=3]; "
        "z } y }\n"
        " { rank=same; x; w }\n"
        " w -> x [deadline=4, color=red]\n x -> y -> z\n w -> z [fallback=true, key=spare]\n}\n");
    const char *want[] = {"digraph rich {",
                          "label = top;",
                          "node [shape=box];",
                          "edge [color=gray];",
                          "\tz [k=3];",
                          "subgraph cluster_outer {",
                          "label = <<b>outer</b>>;",
                          "subgraph cluster_inner {",
                          "style = dashed;",
                          "rank = same;",
                          "w -> x [color=red, deadline=4];",
                          "w -> z [key=spare, fallback=true];"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_MSG(strstr(c, want[i]), "copy lacks \"%s\":\n%s", want[i], c);
    /* the order of the nodes in the copy is the index order: z y x w */
    const char *pz = strstr(c, "\tz "), *py = strstr(c, "\ty;"), *px = strstr(c, "\tx;"),
               *pw = strstr(c, "\tw;");
    CHECK(pz && py && px && pw && pz < py && py < px && px < pw);
    CHECK_WRITE_ORDER("strict digraph st { " SIM "subgraph cluster_a { b } a -> b -> c }");
    /* an anonymous graph's run id is the file name's stem: the copy, elsewhere, says it */
    c = CHECK_WRITE_ORDER("digraph { " SIM "subgraph { c } a -> b -> c }");
    CHECK_MSG(strstr(c, "\trun = t;\n"), "%s", c);
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_write_reload);
    RUN(test_write_order);
    pft_test_topo_cleanup();
    return pft_test_done();
}
