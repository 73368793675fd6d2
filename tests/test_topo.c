/* Tests of topology/ loading: DOT line scanner, attribute table, validation errors (with lines), settings,
 * libcgraph's lexer state, allocation failures, truncated input, and the shipped configs. */
#include "pft_alloc.h"
#include "pft_dotscan.h"
#include "pft_error.h"
#include "pft_plan.h"
#include "pft_test.h"
#include "pft_test_topo.h"
#include "pft_topo.h"
#include "pft_topo_attr.h"

#include <cgraph.h>

#include <stdint.h>
#include <sys/stat.h>

/* flex's reset of libcgraph's lexer, exported by libcgraph 2.42 without a declaration (pft_topo_load.c) */
extern int aaglex_destroy(void) __attribute__((weak));

/* A valid topology loads as written, twice in a row (text a previous load left in libcgraph's lexer
 * would spoil the first, a final comment that ran into the next file the second). */
static void expect_next_loads_(int line, const char *after)
{
    for (int i = 0; i < 2; i++) {
        pft_topo_t *t = NULL;
        int rc = pft_topo_load(put("probe.dot", "digraph probe { " SIM "a -> b -> c }\n"), SKIP, &t);
        if (rc != 0 || !t || pft_topo_node_count(t) != 3 || strcmp(pft_topo_node(t, 0)->id, "a") != 0 ||
            strcmp(pft_topo_run(t)->run, "probe") != 0) {
            fprintf(stderr, "  FAIL %s:%d: load %d of a valid topology after \"%.60s\" fails: %s\n", __FILE__,
                    line, i + 1, after, rc ? pft_errmsg() : "wrong content");
            pft_t_failed_checks++;
        }
        pft_topo_destroy(&t);
    }
}
#define EXPECT_NEXT_LOADS(after) expect_next_loads_(__LINE__, after)

/* ---- the line scanner ---- */

static void test_dotscan_lines(void)
{
    const char *text = "# preprocessor line\n"
                       "digraph g { // comment a -> z\n"
                       "  /* b -> y\n"
                       "     */ k = 4;\n"
                       "  a [label=\"multi\n"
                       "line\"];\n"
                       "  a -> { b c } -> d [fallback=true];\n"
                       "  subgraph cluster_x { rank=same; node [k=3]; e; f [cov=full] }\n"
                       "  \"e\" -> \"f\"\n"
                       "  f:n -> a:s:w\n"
                       "}\n";
    pft_dotscan_t *s = NULL;
    CHECK(pft_dotscan_new(text, strlen(text), &s) == 0);
    CHECK(pft_dotscan_header_line(s) == 2);
    CHECK(pft_dotscan_graph_count(s) == 1);
    CHECK(pft_dotscan_node_line(s, "a") == 5);
    CHECK(pft_dotscan_node_line(s, "b") == 7);
    CHECK(pft_dotscan_node_line(s, "e") == 8);
    CHECK(pft_dotscan_node_line(s, "z") == 0);
    CHECK(pft_dotscan_node_line(s, "y") == 0);
    CHECK(pft_dotscan_edge_line(s, "a", "c", 0) == 7);
    CHECK(pft_dotscan_edge_line(s, "c", "d", 0) == 7);
    CHECK(pft_dotscan_edge_line(s, "a", "d", 0) == 0);
    CHECK(pft_dotscan_edge_line(s, "e", "f", 0) == 9);
    CHECK(pft_dotscan_edge_line(s, "f", "a", 0) == 10);
    CHECK(pft_dotscan_edge_line(s, "f", "a", 1) == 0);
    CHECK(pft_dotscan_graph_attr_line(s, "k") == 4);
    CHECK(pft_dotscan_graph_attr_line(s, "rank") == 0); /* only inside a subgraph */
    CHECK(pft_dotscan_node_attr_line(s, "f", "cov") == 8);
    CHECK(pft_dotscan_node_attr_line(s, "e", "k") == 8); /* from the node [k=3] default */
    CHECK(pft_dotscan_edge_attr_line(s, "b", "d", "fallback") == 7);
    int sub_rank = 0;
    for (size_t i = 0; i < pft_dotscan_attr_count(s); i++) {
        const pft_dotscan_attr_t *a = pft_dotscan_attr(s, i);
        if (strcmp(a->name, "rank") == 0)
            sub_rank = a->in_subgraph && a->scope == PFT_DOT_GRAPH && strcmp(a->value, "same") == 0;
    }
    CHECK(sub_rank);
    int fl = -1;
    CHECK(pft_dotscan_fault(s, &fl) == NULL && fl == 0);
    pft_dotscan_destroy(&s);
    CHECK(s == NULL);
    pft_dotscan_destroy(&s);

    /* cgraph's lexer: \\ is a pair, so "x\\" is closed; '#' comments anywhere; block comment after
     * the graph is fine */
    const char *t2 = "digraph g { a [label=\"x\\\\\"] # b \"\n"
                     "  c -> d }  /* done */\n";
    CHECK(pft_dotscan_new(t2, strlen(t2), &s) == 0);
    CHECK(pft_dotscan_node_line(s, "b") == 0 && pft_dotscan_node_line(s, "c") == 2);
    CHECK(pft_dotscan_edge_line(s, "c", "d", 0) == 2);
    CHECK(pft_dotscan_fault(s, &fl) == NULL && fl == 0);
    pft_dotscan_destroy(&s);
    /* faults, with the line where the string or comment opened, or where extra text starts */
    const struct {
        const char *text, *needle;
        int line;
    } faults[] = {
        {"\"", "quoted string", 1},
        {"digraph g {\n a [label=\"x\\\"]\n}\n", "quoted string", 2}, /* \" does not close it */
        {"digraph g {\n a\n /* b\n}\n", "'/*' comment", 3},
        {"\n\n<<<", "HTML string", 3},
        {"digraph g {\n a [label=<<b>x</b>]\n}\n", "HTML string", 2},
        {"digraph g { a }\n\n x", "closing '}' (line 1)", 3},
        {"digraph g { a { b } }}", "closing '}'", 1},
        {"digraph g { a }\f", "closing '}'", 1},
        {"digraph g { a } @", "closing '}'", 1},
        {"digraph g { a } /", "closing '}'", 1},
        {"digraph g { a } \"x", "closing '}'", 1}, /* the earliest fault */
    };
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) {
        CHECK(pft_dotscan_new(faults[i].text, strlen(faults[i].text), &s) == 0);
        const char *msg = s ? pft_dotscan_fault(s, &fl) : NULL;
        CHECK_MSG(msg && strstr(msg, faults[i].needle) && fl == faults[i].line, "case %zu: line %d: %s", i,
                  fl, msg ? msg : "no fault");
        pft_dotscan_destroy(&s);
    }
}

/* ---- the attribute table ---- */

static void test_attr_table(void)
{
    size_t n;
    const pft_topo_attr_t *tab = pft_topo_attr_table(&n);
    CHECK(n >= 25);
    for (size_t i = 0; i < n; i++) {
        const pft_topo_attr_t *a = &tab[i];
        CHECK_MSG(a->help && a->help[0], "%s has no help", a->name);
        CHECK_MSG(pft_topo_attr_find(a->name) == a, "%s is not unique", a->name);
        CHECK_MSG(!pft_topo_attr_is_layout(a->name, a->scopes), "%s is also a layout name", a->name);
        CHECK((a->g_off >= 0) == !!(a->scopes & PFT_SCOPE_GRAPH));
        CHECK((a->n_off >= 0) == !!(a->scopes & PFT_SCOPE_NODE));
        CHECK((a->e_off >= 0) == !!(a->scopes & PFT_SCOPE_EDGE));
        if (a->def) { /* every default parses */
            union {
                int i;
                double d;
                uint64_t u;
                char *s;
            } v;
            memset(&v, 0, sizeof v);
            CHECK_MSG(pft_topo_attr_parse(a, a->def, "/", &v) == 0, "%s default: %s", a->name, pft_errmsg());
            pft_topo_attr_free_value(a, &v);
        }
    }
    int k = 0;
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("k"), "1024", "/", &k) == 0 && k == 1024);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("k"), "1025", "/", &k) == PFT_ERANGE && k == 1024);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("k"), "5x", "/", &k) == PFT_EINVAL);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("k"), " 5", "/", &k) == PFT_EINVAL);
    uint64_t seed = 0;
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("seed"), "18446744073709551615", "/", &seed) == 0 &&
          seed == UINT64_MAX);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("seed"), "18446744073709551616", "/", &seed) == PFT_EINVAL);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("seed"), "-1", "/", &seed) == PFT_EINVAL);
    int b = 0;
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("fallback"), "YES", "/", &b) == 0 && b == 1);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("fallback"), "maybe", "/", &b) == PFT_EINVAL);
    char *p = NULL;
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("train"), "../x/./y/../z.npy", "/a/b", &p) == 0);
    CHECK(p && strcmp(p, "/a/x/z.npy") == 0);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("train"), "/abs/../q.npy", "/a/b", &p) == 0);
    CHECK(p && strcmp(p, "/q.npy") == 0);
    CHECK(pft_topo_attr_parse(pft_topo_attr_find("train"), "../../../r.npy", "/a", &p) == 0);
    CHECK(p && strcmp(p, "/r.npy") == 0);
    pft_topo_attr_free_value(pft_topo_attr_find("train"), &p);
    CHECK(p == NULL);
    /* endpoints, partitions, class sets */
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1:7100") == 0);
    CHECK(pft_topo_endpoint_check("tcp://[::1]:7100") == 0);
    CHECK(pft_topo_endpoint_check("ipc:///tmp/pft-a") == 0);
    CHECK(pft_topo_endpoint_check("inproc://a") == 0);
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1") != 0);
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1:0") == 0); /* open: the node binds a port itself */
    CHECK(pft_topo_endpoint_check("tcp://10.0.0.2:*") == 0);
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1:-1") != 0);
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1:x") != 0);
    CHECK(pft_topo_endpoint_check("tcp://*:*") != 0);
    CHECK(pft_topo_endpoint_open("tcp://127.0.0.1:0") && pft_topo_endpoint_open("tcp://10.0.0.2:*"));
    CHECK(!pft_topo_endpoint_open("tcp://127.0.0.1:7100") && !pft_topo_endpoint_open("tcp://127.0.0.1:00") &&
          !pft_topo_endpoint_open("ipc:///tmp/x:0") && !pft_topo_endpoint_open(NULL));
    CHECK(pft_topo_endpoint_check("tcp://127.0.0.1:65536") != 0);
    CHECK(pft_topo_endpoint_check("tcp://*:7100") != 0);
    CHECK(pft_topo_endpoint_check("udp://x:1") != 0);
    pft_topo_part_t kind;
    double beta;
    int nr;
    CHECK(pft_topo_partition_parse("dirichlet:0.5", &kind, &beta, &nr) == 0 &&
          kind == PFT_TOPO_PART_DIRICHLET && beta == 0.5);
    CHECK(pft_topo_partition_parse("labels:0-3|4,6|5", &kind, &beta, &nr) == 0 &&
          kind == PFT_TOPO_PART_LABELS && nr == 3);
    char r[32];
    CHECK(pft_topo_partition_range("labels:0-3|4,6|5", 1, r, sizeof r) == 0 && strcmp(r, "4,6") == 0);
    CHECK(pft_topo_partition_range("labels:0-3|4,6|5", 3, r, sizeof r) != 0);
    CHECK(pft_topo_partition_parse("labels", &kind, &beta, &nr) == 0 && nr == 0);
    CHECK(pft_topo_partition_parse("dirichlet:0", &kind, &beta, &nr) != 0);
    CHECK(pft_topo_partition_parse("labels:0-3||5", &kind, &beta, &nr) != 0);
    CHECK(pft_topo_partition_parse("random", &kind, &beta, &nr) != 0);
    CHECK(pft_topo_classes_check("0-2, 5") == 0);
    CHECK(pft_topo_classes_check("3-1") != 0);
    CHECK(pft_topo_classes_check("a") != 0);
    CHECK(pft_topo_classes_check("") != 0);
    CHECK(pft_topo_name_ok("node_1.x-y") && !pft_topo_name_ok(".hidden") && !pft_topo_name_ok("a b") &&
          !pft_topo_name_ok("") && !pft_topo_name_ok("-a"));
    CHECK(pft_topo_attr_suggest("colour") && strcmp(pft_topo_attr_suggest("colour"), "color") == 0);
    CHECK(pft_topo_attr_suggest("endpont") && strcmp(pft_topo_attr_suggest("endpont"), "endpoint") == 0);
    CHECK(pft_topo_attr_suggest("zzzzzzzz") == NULL);
    CHECK(pft_topo_attr_is_layout("shape", PFT_SCOPE_NODE) &&
          !pft_topo_attr_is_layout("shape", PFT_SCOPE_EDGE));
}

/* ---- validation errors: each names the file, line and the node or edge ---- */

static void test_errors_attributes(void)
{
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b [colour=red]\n}", SKIP, "t.dot:3: ", "node 'b'",
                "unknown node attribute 'colour'", "did you mean 'color'");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b -> c [fallbak=true]\n}", SKIP, "t.dot:3: ", "edge b -> c",
                "'fallbak'", "'fallback'");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b [k=3]\n}", SKIP, "t.dot:2: ", "edge a -> b",
                "'k' is not an edge attribute");
    EXPECT_FAIL("digraph g { " SIM "\n frobnicate=1\n a -> b\n}", SKIP,
                "t.dot:2: ", "unknown graph attribute 'frobnicate'");
    EXPECT_FAIL("digraph g { " SIM "\n node [qq=1]\n a -> b\n}", SKIP,
                "t.dot:2: ", "unknown node attribute 'qq'");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b [shape=box]\n}", SKIP, "t.dot:2: ", "'shape' is not an edge");
    /* bad values */
    EXPECT_FAIL("digraph g { " SIM "\n k=0\n a -> b\n}", SKIP, "t.dot:2: ", "k=0", "1..1024");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b [cov=foo]\n}", SKIP, "t.dot:3: ", "node 'b'", "cov=foo",
                "full|diag|spher");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b [deadline=-1]\n}", SKIP, "t.dot:2: ", "edge a -> b",
                "deadline=-1");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b [fallback=maybe]\n}", SKIP, "t.dot:2: ", "fallback=maybe");
    EXPECT_FAIL("digraph g { " SIM "\n seed=-3\n a -> b\n}", SKIP, "t.dot:2: ", "seed=-3");
    EXPECT_FAIL("digraph g { " SIM "\n a [endpoint=\"tcp://host\"]\n a -> b\n}", SKIP,
                "t.dot:2: ", "node 'a'", "tcp://HOST:PORT");
    EXPECT_FAIL("digraph g { " SIM "\n partition=\"dirichlet:-1\"\n a -> b\n}", SKIP,
                "t.dot:2: ", "Dirichlet beta");
    EXPECT_FAIL("digraph g { " SIM "partition=labels\n a [classes=\"3-1\"]\n b [classes=1]\n a -> b\n}", SKIP,
                "t.dot:2: ", "node 'a'", "runs backwards");
    EXPECT_FAIL("digraph g { " SIM "\n dtype=fp64\n a -> b\n}", SKIP, "t.dot:2: ", "fp16|fp32");
    EXPECT_FAIL("digraph g { " SIM "\n prep=l1\n a -> b\n}", SKIP, "t.dot:2: ", "none|l2|sqrt-l2");
    EXPECT_FAIL("digraph g { " SIM "\n on_missing=ignore\n a -> b\n}", SKIP, "t.dot:2: ", "proceed|fail");
    EXPECT_FAIL("digraph g { " SIM "\n subgraph cluster_a { k=4; a }\n a -> b\n}", SKIP,
                "t.dot:2: ", "'k' inside a subgraph");
    EXPECT_FAIL("digraph g { " SIM "\n \"a b\" -> c\n}", SKIP, "t.dot:2: ", "node id 'a b'");
    EXPECT_FAIL("digraph \"my run\" { " SIM "\n a -> b\n}", SKIP, "t.dot:1: ", "graph name 'my run'", "run=");
}

static void test_errors_structure(void)
{
    EXPECT_FAIL("\ngraph g { " SIM " a -- b }", SKIP, "t.dot:2: ", "undirected", "digraph");
    EXPECT_FAIL("digraph g { " SIM " }", SKIP, "t.dot:1: ", "no nodes");
    EXPECT_FAIL("digraph g { " SIM " a }", SKIP, "at least 2 nodes");
    EXPECT_FAIL("digraph g {\n a -> b\n a -> ;\n}", SKIP, "t.dot:3: ", "not valid DOT", "syntax error");
    EXPECT_FAIL("digraph g { a -> b }\n\ndigraph h { c -> d }\n", SKIP, "t.dot:3: ", "second graph");
    EXPECT_FAIL("", SKIP, "t.dot", "no graph");
    EXPECT_FAIL("digrap g { a -> b }", SKIP, "t.dot", "no graph");
    EXPECT_FAIL("digraph g { " SIM "\n tol=1e-4\n a -> b\n}", SKIP, "t.dot:2: ", "'1e'", "tol=\"1e-4\"");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b -> b\n}", SKIP, "t.dot:3: ", "edge b -> b", "self loop");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b -> c\n a -> b\n}", SKIP, "t.dot:4: ", "edge a -> b",
                "appears twice", "first at line 2");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n a -> b [fallback=true]\n}", SKIP,
                "t.dot:3: ", "appears twice");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n c -> d\n}", SKIP, "t.dot:3: ", "node 'c'", "unreachable");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n c\n}", SKIP, "t.dot:3: ", "node 'c' has no edges");
    /* cycles */
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b -> c\n c -> a\n}", SKIP,
                "t.dot:4: ", "cycle a -> b -> c -> a", "start=");
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n b -> c\n c -> b\n}", SKIP, "t.dot:4: ", "cycle b -> c -> b",
                "only a ring", "or a mesh", "node 'a' cannot be reached from node 'b'");
    EXPECT_FAIL("digraph g { " SIM "\n start=zz\n a -> b -> a\n}", SKIP,
                "t.dot:2: ", "start=zz names no node", "a, b");
    EXPECT_FAIL("digraph g { " SIM "\n start=a\n a -> b\n}", SKIP, "t.dot:2: ", "has no cycle");
    EXPECT_FAIL("digraph g { " SIM " start=a\n a -> b\n b -> c\n c -> a\n a -> c\n}", SKIP,
                "t.dot:2: ", "not a single simple cycle", "node 'a' has 2 successors (b, c)");
    EXPECT_FAIL("digraph g { " SIM " start=a\n a -> b -> a\n x -> a\n}", SKIP, "not a single simple cycle",
                "node 'a' has 2 predecessors");
    /* fallback edges */
    EXPECT_FAIL("digraph g { " SIM "\n a -> b -> c\n b -> a [fallback=true]\n}", SKIP,
                "t.dot:3: ", "fallback edge b -> a closes the cycle a -> b -> a");
    EXPECT_FAIL("digraph g { " SIM "\n c -> a\n a -> b\n b -> c [fallback=true]\n}", SKIP,
                "t.dot:4: ", "node 'b' has no primary successor");
}

static void test_errors_endpoints_and_data(void)
{
    EXPECT_FAIL("digraph g { " SIM
                "\n a [endpoint=\"tcp://127.0.0.1:7000\"]\n b [endpoint=\"tcp://127.0.0.1:7000\"]\n"
                " a -> b\n}",
                SKIP, "t.dot:3: ", "node 'b'", "tcp://127.0.0.1:7000", "node 'a' (line 2)");
    EXPECT_FAIL("digraph g { " SIM "port_base=7000\n a -> b\n b [endpoint=\"tcp://127.0.0.1:7000\"]\n}", SKIP,
                "t.dot:3: ", "node 'b'", "node 'a'", "port_base");
    EXPECT_FAIL("digraph g { " SIM "\n port_base=65535\n a -> b\n}", SKIP, "t.dot:2: ", "65536");
    /* without dataset every node has an endpoint; its data is its own, so only a launcher, which runs every
     * node, needs every node's files named */
    EXPECT_FAIL("digraph g { port_base=7000\n a -> b\n}", SKIP | PFT_TOPO_LAUNCH,
                "t.dot:2: ", "node 'a' has no 'train'", "pftnet launch runs every node");
    EXPECT_FAIL("digraph g { port_base=7000\n a [train=\"x.npy\"]\n a -> b\n}", SKIP,
                "t.dot:2: ", "node 'a' has no 'labels'");
    EXPECT_FAIL("digraph g { node [train=\"x.npy\", labels=\"y.npy\"]\n a -> b\n}", SKIP,
                "t.dot:2: ", "node 'a' has no endpoint");
    EXPECT_FAIL("digraph g { port_base=7000; node [train=\"x.npy\", labels=\"y.npy\"]\n a -> b\n b "
                "[test=\"t.npy\"]\n}",
                SKIP, "t.dot:3: ", "node 'b'", "'test' and 'test_labels'");
    put("x.npy", "not really npy");
    put("y.npy", "not really npy");
    EXPECT_FAIL(
        "digraph g { port_base=7000; node [labels=\"y.npy\"]\n a [train=\"x.npy\"]\n b [train=\"nope.npy\"]\n"
        " a -> b\n}",
        0, "t.dot:3: ", "node 'b'", "train file", "nope.npy", "No such file");
    EXPECT_FAIL(
        "digraph g { port_base=7000; node [labels=\"y.npy\", train=\"x.npy\"]\n a -> b\n b [labels=\".\"]\n}",
        0, "t.dot:3: ", "node 'b'", "not a regular file");
    /* simulation-only attributes, partitions */
    EXPECT_FAIL(
        "digraph g { port_base=7000; node [train=\"x.npy\", labels=\"y.npy\"]\n samples=5\n a -> b\n}", 0,
        "t.dot:2: ", "'samples' only applies to simulations");
    EXPECT_FAIL(
        "digraph g { port_base=7000; node [train=\"x.npy\", labels=\"y.npy\"]\n a -> b\n b [domain=1]\n}", 0,
        "t.dot:3: ", "node 'b'", "'domain' only applies to simulations");
    EXPECT_FAIL("digraph g { " SIM "\n partition=domain\n a [domain=2]\n a -> b\n}", SKIP,
                "node 'b' has no 'domain'");
    EXPECT_FAIL("digraph g { " SIM "\n a [domain=2]\n a -> b\n}", SKIP, "t.dot:2: ", "node 'a'",
                "needs graph attribute partition=domain");
    EXPECT_FAIL("digraph g { " SIM "\n partition=\"labels:0-3|4-6\"\n a -> b -> c\n}", SKIP,
                "t.dot:2: ", "lists 2 class ranges", "3 nodes");
    EXPECT_FAIL("digraph g { " SIM "partition=labels\n a [classes=1]\n a -> b\n}", SKIP,
                "node 'b' has no 'classes'");
    EXPECT_FAIL("digraph g { dataset=\"nothere\"\n a -> b\n}", 0, "t.dot:1: ", "nothere", "train_x.npy");
    /* what pftnode needs, also in a simulation */
    EXPECT_FAIL("digraph g { " SIM "\n a -> b\n}", SKIP | PFT_TOPO_REQUIRE_RESOLVED,
                "t.dot:2: ", "node 'a' has no endpoint");

    EXPECT_FAIL("digraph g { " SIM
                "port_base=7000; node [train=\"x.npy\"]\n a -> b\n b [labels=\"y.npy\"]\n}",
                SKIP | PFT_TOPO_REQUIRE_RESOLVED, "t.dot:2: ", "node 'a' has no 'labels'");
    EXPECT_FAIL("digraph g { " SIM "port_base=7000; node [train=\"x.npy\", labels=\"y.npy\"]\n a -> b\n"
                " b [test=\"x.npy\"]\n}",
                SKIP | PFT_TOPO_REQUIRE_RESOLVED, "t.dot:3: ", "node 'b'", "'test' and 'test_labels'");
    /* the public topology organisations share names no one's files: pftnet check and pftnode load it */
    pft_topo_t *t = NULL;
    char path[300];
    const char *pub =
        "digraph g { a [endpoint=\"tcp://10.0.0.1:7101\"]; b [endpoint=\"tcp://10.0.0.2:7101\"]\n"
        " a -> b\n}";
    CHECK_MSG(pft_topo_load(put("pub.dot", pub), 0, &t) == 0, "%s", pft_errmsg());
    CHECK(t && pft_topo_find(t, "a")->train == NULL);
    pft_topo_destroy(&t);
    CHECK_MSG(pft_topo_load(put("pub.dot", pub), SKIP | PFT_TOPO_REQUIRE_RESOLVED, &t) == 0, "%s",
              pft_errmsg());
    pft_topo_destroy(&t);
    /* pftnode's load (SKIP | REQUIRE_RESOLVED) opens no node's files, another's that is not here included */
    const char *other = "digraph g { port_base=7000; a [train=\"a/x.npy\", labels=\"a/y.npy\"]\n"
                        " b [train=\"not/on/this/machine.npy\", labels=\"not/here.npy\"]\n a -> b\n}";
    CHECK_MSG(pft_topo_load(put("other.dot", other), SKIP | PFT_TOPO_REQUIRE_RESOLVED, &t) == 0, "%s",
              pft_errmsg());
    pft_topo_destroy(&t);
    EXPECT_FAIL(other, 0, "t.dot:1: ", "node 'a'", "train file");
    /* a launcher assigns endpoints and makes the missing keys: neither is required of its file */
    CHECK_MSG(pft_topo_load(put("launch.dot", "digraph g { node [train=\"x.npy\", labels=\"y.npy\"]\n"
                                              " a [key=\"ka.pub\"]\n a -> b\n}"),
                            SKIP | PFT_TOPO_LAUNCH, &t) == 0,
              "%s", pft_errmsg());
    pft_topo_destroy(&t);
    /* file-level */
    snprintf(path, sizeof path, "%s/absent.dot", s_dir);
    CHECK(pft_topo_load(path, 0, &t) == PFT_EIO && strstr(pft_errmsg(), "absent.dot"));
    CHECK(pft_topo_load(s_dir, 0, &t) == PFT_EIO && t == NULL);
    snprintf(path, sizeof path, "%s/nul.dot", s_dir);
    FILE *f = fopen(path, "wb");
    fwrite("digraph g {\n a -> b\0 }", 1, 23, f);
    fclose(f);
    CHECK(pft_topo_load(path, 0, &t) == PFT_EFORMAT && strstr(pft_errmsg(), "nul.dot:2: ") &&
          strstr(pft_errmsg(), "NUL"));
}

/* ---- settings ---- */

static void test_overrides(void)
{
    mkdir(strcat(strcpy((char[512]){0}, s_dir), "/data"), 0700);
    pft_topo_t *t = NULL;
    const char *text =
        "digraph ov {\n"
        "  k=5; cov=full; samples=50; seed=18446744073709551615; deadline=30; send_deadline=7\n"
        "  dtype=fp32; prep=\"sqrt-l2\"; on_missing=fail; max_iter=20; tol=0; reg_covar=\"1e-4\"\n"
        "  n_init=3; head_c=0.5; max_bundle_mb=64; port_base=7500\n"
        "  dataset=\"data\"; partition=\"labels:0-1|2,3|4-6\"\n"
        "  a [k=3, samples=0]\n"
        "  subgraph cluster_x { node [cov=spher]; b; c [classes=\"6\"] }\n"
        "  a -> b [deadline=90]\n"
        "  b -> c\n"
        "}\n";
    CHECK(load(text, SKIP, &t) == 0);
    if (!t)
        return;
    const pft_topo_run_t *r = pft_topo_run(t);
    CHECK(r->k == 5 && r->cov == PFT_COV_FULL && r->samples == 50 && r->seed == UINT64_MAX);
    CHECK(r->deadline == 30 && r->send_deadline == 7 && r->dtype == PFT_TOPO_FP32 &&
          r->prep == PFT_TOPO_PREP_SQRT_L2);
    CHECK(r->on_missing == PFT_TOPO_MISSING_FAIL && r->max_iter == 20 && r->tol == 0 && r->reg_covar == 1e-4);
    CHECK(r->n_init == 3 && r->head_c == 0.5 && r->max_bundle_mb == 64 && r->port_base == 7500);
    CHECK(strcmp(r->run, "ov") == 0 && strcmp(r->name, "ov") == 0);
    CHECK(r->part_kind == PFT_TOPO_PART_LABELS && r->part_ranges == 3);
    char want[600];
    snprintf(want, sizeof want, "%s/data", s_dir);
    CHECK(pft_topo_is_simulation(t) && strcmp(r->dataset, want) == 0);
    const pft_topo_node_t *a = pft_topo_find(t, "a"), *b = pft_topo_find(t, "b"), *c = pft_topo_find(t, "c");
    CHECK(a->k == 3 && a->cov == PFT_COV_FULL && a->samples == 0);
    CHECK(b->k == 5 && b->cov == PFT_COV_SPHER && b->samples == 50);
    CHECK(c->cov == PFT_COV_SPHER);
    CHECK(strcmp(a->classes, "0-1") == 0 && strcmp(b->classes, "2,3") == 0 && strcmp(c->classes, "6") == 0);
    CHECK(a->domain == -1);
    CHECK(strcmp(a->endpoint, "tcp://127.0.0.1:7500") == 0 &&
          strcmp(c->endpoint, "tcp://127.0.0.1:7502") == 0);
    CHECK(a->train == NULL && a->test == NULL);
    CHECK(pft_topo_edge_find(t, a->index, b->index)->deadline == 90);
    CHECK(pft_topo_edge_find(t, b->index, c->index)->deadline == 30);
    CHECK(pft_topo_edge_find(t, b->index, c->index)->send_deadline == 7);
    CHECK(pft_topo_edge_find(t, c->index, a->index) == NULL);
    pft_topo_destroy(&t);

    /* anonymous graph: the run id is the file name; explicit run wins */
    CHECK(pft_topo_load(put("anon-1.dot", "digraph { " SIM " a -> b }"), SKIP, &t) == 0);
    if (t) {
        CHECK(pft_topo_run(t)->name == NULL && strcmp(pft_topo_run(t)->run, "anon-1") == 0);
        pft_topo_destroy(&t);
    }
    CHECK(load("digraph g { " SIM " run=\"exp_7\"; a -> b }", SKIP, &t) == 0);
    if (t) {
        CHECK(strcmp(pft_topo_run(t)->run, "exp_7") == 0);
        CHECK(pft_topo_run(t)->k == 10 && pft_topo_run(t)->cov == PFT_COV_DIAG); /* defaults */
        CHECK(pft_topo_run(t)->prep == PFT_TOPO_PREP_L2 && pft_topo_run(t)->dtype == PFT_TOPO_FP16);
        CHECK(pft_topo_run(t)->deadline == 600 && pft_topo_run(t)->send_deadline == 300);
        CHECK(pft_topo_run(t)->part_kind == PFT_TOPO_PART_IID &&
              strcmp(pft_topo_run(t)->partition, "iid") == 0);
        CHECK(pft_topo_find(t, "a")->endpoint == NULL); /* simulation: the launcher assigns */
        pft_topo_destroy(&t);
    }
    /* layout attributes are accepted, and strict digraphs merge repeated edges */
    CHECK(load("strict digraph g { " SIM " rankdir=LR; label=\"x\"; node [shape=box, color=red];\n"
               " a [pos=\"1,2\", xlabel=<<b>a</b>>] a -> b [color=blue, penwidth=2]; a -> b }",
               SKIP, &t) == 0);
    CHECK_MSG(t != NULL, "%s", pft_errmsg());
    pft_topo_destroy(&t);
}

/* ---- libcgraph's lexer keeps state from one parse to the next ---- */

static int quiet_cgraph(char *msg)
{
    return 0;
}

/* Text that would leave cgraph's lexer inside a string or comment, or with text in its buffer, is
 * refused before cgraph sees it (tests/fuzz/crashes/topo/ *-breaks-later-loads), naming the line; the
 * next loads work. Blanks and comments after the graph are fine, with or without a final newline. */
static void test_lexer_state(void)
{
    EXPECT_FAIL("\"", SKIP, "t.dot:1: ", "quoted string opened on this line is never closed");
    EXPECT_NEXT_LOADS("\"");
    EXPECT_FAIL("/*", SKIP, "t.dot:1: ", "'/*' comment opened on this line is never closed");
    EXPECT_NEXT_LOADS("/*");
    EXPECT_FAIL("<<<", SKIP, "t.dot:1: ", "HTML string '<...>' opened on this line is never closed");
    EXPECT_NEXT_LOADS("<<<");
    const char *trailing = "digraph c5 { dataset=\".\"; \n c -> d -> e\n a -> b -> c\n}endpoint";
    EXPECT_FAIL(trailing, SKIP, "t.dot:4: ", "text after the graph's closing '}' (line 4)");
    EXPECT_NEXT_LOADS(trailing);
    static const char *const refused[] = {
        "digraph g { " SIM "\n a [label=\"x]\n a -> b\n}\n",
        "digraph g { " SIM "a -> b\n a [label=<<b>x</b>]\n}\n", /* the -> would close it */
        "digraph g { " SIM "a -> b }\n/* open\n",
        "digraph g { " SIM "a -> b }\n\n x -> y",
        "digraph g { " SIM "a -> b }}",
        "digraph g { " SIM "a -> b }\f",
        "digraph g { " SIM "a -> b }@",
        "digraph g { " SIM "a -> b }<",
        "digraph g { " SIM "a -> b @ \"",
    };
    static const int refused_line[] = {2, 2, 2, 3, 1, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char at[32];
        snprintf(at, sizeof at, "t.dot:%d: ", refused_line[i]);
        pft_topo_t *t = NULL;
        CHECK_MSG(load(refused[i], SKIP, &t) == PFT_EFORMAT && !t && strstr(pft_errmsg(), at), "case %zu: %s",
                  i, pft_errmsg());
        pft_topo_destroy(&t);
        EXPECT_NEXT_LOADS(refused[i]);
    }
    static const char *const fine[] = {
        "digraph g { " SIM "a -> b } // trailing comment, no newline",
        "digraph g { " SIM "a -> b } # shell comment, no newline",
        "digraph g { " SIM "a -> b }\n/* c */ \t\r\n\n",
        "digraph g { " SIM "a [label=\"back\\\\\"] # a comment with a quote \"\n a -> b }",
        "digraph g { " SIM "a [label=<<i>x</i>>]; a -> b }",
    };
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        pft_topo_t *t = NULL;
        CHECK_MSG(load(fine[i], SKIP, &t) == 0 && t && pft_topo_node_count(t) == 2, "case %zu: %s", i,
                  pft_errmsg());
        pft_topo_destroy(&t);
        EXPECT_NEXT_LOADS(fine[i]);
    }
    EXPECT_FAIL("digraph g { a -> b }\n\ndigraph h { c -> d }\n", SKIP, "t.dot:3: ", "second graph");
    EXPECT_NEXT_LOADS("a second graph");
    /* another cgraph user left the lexer inside a quoted string: pft_topo_load resets it first */
    if (aaglex_destroy) {
        agusererrf prev = agseterrf(quiet_cgraph);
        Agraph_t *g = agmemread("\"");
        agseterrf(prev);
        CHECK(g == NULL);
        EXPECT_NEXT_LOADS("agmemread of a lone quote");
    } else {
        fprintf(stderr, "  (libcgraph exports no aaglex_destroy: lexer reset not tested)\n");
    }
}

/* ---- robustness ---- */

static void test_alloc_failures(void)
{
    const char *text = "digraph af { " SIM "start=a; partition=\"labels:0|1|2\"; port_base=7700\n"
                       " a -> b [deadline=5]\n b -> c\n c -> a\n a -> c [fallback=true]\n}\n";
    const char *path = put("af.dot", text);
    int ok = 0, nomem = 0;
    for (long n = 0; n < 400 && !ok; n++) {
        pft_topo_t *t = NULL;
        pft_alloc_fail_after(n);
        int rc = pft_topo_load(path, SKIP, &t);
        pft_alloc_fail_after(-1);
        if (rc == 0) {
            ok = 1;
            CHECK(pft_topo_handoffs(t, &(const pft_handoff_t *){0}) == 4);
            pft_topo_destroy(&t);
        } else {
            CHECK_MSG(rc == PFT_ENOMEM, "after %ld allocations: %s", n, pft_errmsg());
            CHECK(t == NULL);
            nomem++;
        }
    }
    CHECK(ok && nomem > 20);
}

/* Every prefix of a valid file, and a few mutations, load or fail cleanly (ASan watches). */
static void test_truncated_and_mutated(void)
{
    const char *text = "digraph tr { dataset=\".\"; start=\"a\"; k=3 // c\n"
                       " a [label=<<i>x</i>>, samples=4]; /* b */ b -> c -> a\n a -> b [deadline=2]\n}\n";
    size_t n = strlen(text);
    char buf[512];
    int loaded = 0;
    for (size_t len = 0; len <= n; len++) {
        memcpy(buf, text, len);
        buf[len] = '\0';
        pft_topo_t *t = NULL;
        int rc = load(buf, SKIP, &t);
        CHECK((rc == 0) == (t != NULL));
        loaded += rc == 0;
        pft_topo_destroy(&t);
        EXPECT_NEXT_LOADS(buf); /* no prefix spoils a later load (open strings, comments) */
    }
    CHECK(loaded >= 1);
    const char junk[] = "{}[];=,:\"<>-/\\#\n+x";
    for (size_t i = 0; i < n; i++) {
        memcpy(buf, text, n + 1);
        buf[i] = junk[i % (sizeof junk - 1)];
        pft_topo_t *t = NULL;
        int rc = load(buf, SKIP, &t);
        CHECK((rc == 0) == (t != NULL));
        pft_topo_destroy(&t);
        EXPECT_NEXT_LOADS(buf);
    }
}

/* ---- the shipped configs ---- */

/* The config at path, its dataset pointed at the bundled example features (the configs name the full data set
 * beside the repository, which a clone does not have), passes the data check: partitions, domains and sample
 * counts fit real data files. */
static void check_config_data(const char *path)
{
    FILE *f = fopen(path, "r");
    char text[8192], line[1024];
    size_t len = 0;
    int replaced = 0;
    CHECK(f != NULL);
    if (!f)
        return;
    while (fgets(line, sizeof line, f) && len + 2 * sizeof line < sizeof text) {
        const char *ds = strstr(line, "dataset = \"");
        if (ds && !replaced) {
            const char *end = strchr(ds + 11, '"');
            len += (size_t)snprintf(text + len, sizeof text - len,
                                    "%.*sdataset = \"%s/examples/data/pacs-small\"%s", (int)(ds - line), line,
                                    PFT_SOURCE_DIR, end ? end + 1 : "\n");
            replaced = 1;
        } else {
            len += (size_t)snprintf(text + len, sizeof text - len, "%s", line);
        }
    }
    fclose(f);
    CHECK_MSG(replaced, "%s: no dataset line", path);
    pft_topo_t *t = NULL;
    CHECK_MSG(pft_topo_load(put("config_data.dot", text), 0, &t) == 0, "%s with the example data: %s", path,
              pft_errmsg());
    pft_topo_destroy(&t);
}

static void test_configs(void)
{
    struct {
        const char *file;
        pft_kind_t kind;
        size_t nodes, handoffs;
    } cfg[] = {
        {"chain5.dot", PFT_KIND_CHAIN, 5, 4}, {"ring5.dot", PFT_KIND_RING, 5, 8},
        {"diamond.dot", PFT_KIND_DAG, 4, 4},  {"pacs_covshift.dot", PFT_KIND_CHAIN, 2, 1},
        {"mesh6.dot", PFT_KIND_MESH, 6, 10},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/configs/%s", PFT_SOURCE_DIR, cfg[i].file);
        check_config_data(path);
        pft_topo_t *t = NULL;
        CHECK_MSG(pft_topo_load(path, SKIP, &t) == 0, "%s", pft_errmsg());
        if (!t)
            continue;
        const pft_handoff_t *h;
        CHECK(pft_topo_kind(t) == cfg[i].kind && pft_topo_node_count(t) == cfg[i].nodes);
        CHECK(pft_topo_handoffs(t, &h) == cfg[i].handoffs);
        CHECK(pft_topo_is_simulation(t) && strstr(pft_topo_run(t)->dataset, "/shared/data/pacs-mobilenetv2"));
        for (size_t v = 0; v < pft_topo_node_count(t); v++)
            CHECK(pft_topo_node(t, v)->endpoint != NULL);
        check_plan_consistent(t);
        if (cfg[i].kind == PFT_KIND_CHAIN && cfg[i].nodes == 2) {
            CHECK(pft_topo_find(t, "photo")->domain == 2 && pft_topo_find(t, "sketch")->domain == 3);
            CHECK(pft_topo_run(t)->part_kind == PFT_TOPO_PART_DOMAIN);
        } else {
            CHECK(pft_topo_node(t, 0)->samples == 100 && pft_topo_run(t)->part_kind == PFT_TOPO_PART_IID);
        }
        pft_topo_destroy(&t);
    }
}

/* A file that went through Graphviz (positions, xdot drawing operations) is still a topology. */
static void test_layouted_fixture(void)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(pft_topo_load(PFT_FIXTURES_DIR "/topo_ring5_xdot.dot", SKIP, &t) == 0, "%s", pft_errmsg());
    if (!t)
        return;
    const pft_handoff_t *h;
    CHECK(pft_topo_kind(t) == PFT_KIND_RING && pft_topo_handoffs(t, &h) == 8);
    CHECK(strcmp(pft_topo_run(t)->start_id, "a") == 0 && pft_topo_find(t, "a")->line > 1);
    pft_topo_destroy(&t);
}

/* The exact/auto rule (DESIGN §8), case by case: exact statistics only for tied, or full with K = 1 merged
 * exactly; auto picks the Gaussian head for those, logistic regression otherwise; a chosen head stays. */
static void test_exact_rule(void)
{
    CHECK(pft_topo_exact(PFT_COV_TIED, 1, PFT_TOPO_MERGE_EXACT) == 1);
    CHECK(pft_topo_exact(PFT_COV_TIED, 5, PFT_TOPO_MERGE_SAMPLE) == 1);
    CHECK(pft_topo_exact(PFT_COV_FULL, 1, PFT_TOPO_MERGE_EXACT) == 1);
    CHECK(pft_topo_exact(PFT_COV_FULL, 1, PFT_TOPO_MERGE_SAMPLE) == 0);
    CHECK(pft_topo_exact(PFT_COV_FULL, 2, PFT_TOPO_MERGE_EXACT) == 0);
    CHECK(pft_topo_exact(PFT_COV_DIAG, 1, PFT_TOPO_MERGE_EXACT) == 0);
    CHECK(pft_topo_exact(PFT_COV_SPHER, 1, PFT_TOPO_MERGE_EXACT) == 0);
    CHECK(pft_topo_exact(PFT_COV_LOWRANK, 1, PFT_TOPO_MERGE_EXACT) == 0);
    CHECK(pft_topo_head_resolve(PFT_TOPO_HEAD_AUTO, 1) == PFT_TOPO_HEAD_GAUSSIAN);
    CHECK(pft_topo_head_resolve(PFT_TOPO_HEAD_AUTO, 0) == PFT_TOPO_HEAD_LOGREG);
    CHECK(pft_topo_head_resolve(PFT_TOPO_HEAD_LOGREG, 1) == PFT_TOPO_HEAD_LOGREG);
    CHECK(pft_topo_head_resolve(PFT_TOPO_HEAD_GAUSSIAN, 0) == PFT_TOPO_HEAD_GAUSSIAN);
}

/* The release rule's rank (DESIGN §8), case by case against hand-computed values: one eigenpair per
 * stats_rows_per_rank rows (default 15), at most stats_rank (64) and d - 1, none below 20 rows. */
static void test_release_rank(void)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(load("digraph g { " SIM " a -> b; }", SKIP, &t) == 0 && t, "%s", pft_errmsg());
    if (!t)
        return;
    pft_topo_run_t r = *pft_topo_run(t);
    CHECK_MSG(r.stats_rows_per_rank == 15 && r.stats_rank == 64, "defaults %d, %d", r.stats_rows_per_rank,
              r.stats_rank);
    CHECK(pft_topo_release_rank(&r, 0, 1280) == 0);
    CHECK(pft_topo_release_rank(&r, 19, 1280) == 0); /* 19 / 15 = 1, but under 20 rows */
    CHECK(pft_topo_release_rank(&r, 20, 1280) == 1);
    CHECK(pft_topo_release_rank(&r, 60, 1280) == 4);
    CHECK(pft_topo_release_rank(&r, 100, 1280) == 6);
    CHECK(pft_topo_release_rank(&r, 974, 1280) == 64);
    CHECK(pft_topo_release_rank(&r, 975, 1280) == 64); /* 65, capped */
    CHECK(pft_topo_release_rank(&r, UINT64_MAX, 1280) == 64);
    CHECK(pft_topo_release_rank(&r, 600, 10) == 9); /* d - 1 */
    CHECK(pft_topo_release_rank(&r, 600, 1) == 0);
    r.stats_rows_per_rank = 1;
    CHECK(pft_topo_release_rank(&r, 19, 1280) == 0 && pft_topo_release_rank(&r, 20, 1280) == 20);
    r.stats_rank = 0;
    CHECK(pft_topo_release_rank(&r, 5000, 1280) == 0);
    pft_topo_destroy(&t);
}

/* Mistakes a parse would pass silently or name badly: a node given an attribute twice (libcgraph keeps the
 * last), an edge to a typo of a node's id (the node then "has no edges"), and a file far over the node limit,
 * refused before libcgraph parses it (a parse that grows faster than linearly: 64k nodes took 9-14 s, a 10 MB
 * chain of 486k nodes over 300 s). */
static void test_parser_mistakes(void)
{
    EXPECT_FAIL("digraph g { " SIM "\n a [k=5]\n a [k=7]\n a -> b\n}", SKIP, "t.dot:3: ", "node 'a'",
                "k=7 here, but k=5 at line 2", "defined once");
    pft_topo_t *t = NULL; /* the same value twice is harmless */
    CHECK_MSG(load("digraph g { " SIM "\n a [k=5]\n a [k=5]\n a -> b\n}", SKIP, &t) == 0, "%s", pft_errmsg());
    /* --set NAME=VALUE with a typo gets the suggestion the file's own attributes get */
    const char *kk[] = {"kk", "3", NULL}, *ep[] = {"endpoint", "tcp://127.0.0.1:0", NULL};
    CHECK(t && pft_topo_set_graph_attrs(t, kk) == PFT_EINVAL);
    CHECK_MSG(strstr(pft_errmsg(), "'kk' is not a graph attribute; did you mean 'k'?"), "%s", pft_errmsg());
    CHECK(t && pft_topo_set_graph_attrs(t, ep) == PFT_EINVAL);
    CHECK_MSG(strstr(pft_errmsg(), "(it is a node attribute)"), "%s", pft_errmsg());
    pft_topo_destroy(&t);
    EXPECT_FAIL("digraph g { " SIM "\n a; b; c\n a -> b\n b -> cc\n}", SKIP,
                "t.dot:2: ", "node 'c' has no edges", "the edge b -> cc at line 4 names 'cc'",
                "did you mean 'c'?");
    EXPECT_FAIL("digraph g { " SIM "\n relay1; relay2\n relay1 -> relya2\n}", SKIP,
                "node 'relay2' has no edges", "did you mean 'relay2'?");
    /* a 486k-node chain of 10 MB, under the 16 MB file limit */
    size_t n = 486000, cap = 32 * n + 64, len = 0;
    char *text = pft_alloc(cap);
    CHECK(text != NULL);
    if (!text)
        return;
    len += (size_t)snprintf(text + len, cap - len, "digraph big {\n");
    for (size_t i = 0; i + 1 < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "  n%zu -> n%zu;\n", i, i + 1);
    snprintf(text + len, cap - len, "}\n");
    EXPECT_FAIL(text, SKIP, "t.dot:4097: ", "more than 4096 nodes", "at most 4096");
    pft_free(text);
    EXPECT_NEXT_LOADS("a refused 486k-node chain");
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_dotscan_lines);
    RUN(test_attr_table);
    RUN(test_errors_attributes);
    RUN(test_errors_structure);
    RUN(test_parser_mistakes);
    RUN(test_errors_endpoints_and_data);
    RUN(test_overrides);
    RUN(test_lexer_state);
    RUN(test_alloc_failures);
    RUN(test_truncated_and_mutated);
    RUN(test_configs);
    RUN(test_layouted_fixture);
    RUN(test_exact_rule);
    RUN(test_release_rank);
    pft_test_topo_cleanup();
    return pft_test_done();
}
