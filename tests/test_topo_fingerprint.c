/* Tests of pft_topo_fingerprint: the same public topology written differently (reformatted, reordered, other
 * private paths, a key inline or in a file, other endpoints) has one fingerprint; a changed setting, node
 * setting, key or edge changes it, and the diff names what changed. */
#include <stdint.h>

#include "pft_test_topo.h"
#include "pft_topo_fingerprint.h"

#define BASE "digraph g { port_base = 7000; k = 10; cov = diag; "

/* Loads text (data checks skipped) and fingerprints it with keys (NULL: none); NULL on failure. */
static pft_topo_fp_t *fp_of(const char *text, const uint8_t *const *keys)
{
    pft_topo_t *t = NULL;
    int rc = load(text, SKIP, &t);
    CHECK_MSG(rc == 0, "load: %s", pft_errmsg());
    pft_topo_fp_t *fp = NULL;
    if (t)
        CHECK(pft_topo_fp_new(t, keys, &fp) == 0);
    pft_topo_destroy(&t);
    return fp;
}

static int same(const pft_topo_fp_t *a, const pft_topo_fp_t *b)
{
    return a && b && memcmp(pft_topo_fp_hash(a), pft_topo_fp_hash(b), PFT_TOPO_FP_LEN) == 0;
}

/* The diff of b's items against a (what a says about b's bundle), into buf; returns the count. */
static size_t diff(const pft_topo_fp_t *a, const pft_topo_fp_t *b, char *buf, size_t cap)
{
    const pft_topo_fp_item_t *it;
    size_t n = pft_topo_fp_items(b, &it);
    return pft_topo_fp_diff(a, it, n, buf, cap);
}

static const char *s_chain =
    BASE "a [train = \"a.npy\", labels = \"al.npy\", endpoint = \"tcp://127.0.0.1:7001\"]; "
         "b [train = \"b.npy\", labels = \"bl.npy\", endpoint = \"tcp://127.0.0.1:0\"]; "
         "a -> b; }";

static void test_same(void)
{
    pft_topo_fp_t *a = fp_of(s_chain, NULL);
    /* reformatted, nodes and attributes reordered, other private paths and endpoints, a comment, layout */
    pft_topo_fp_t *b =
        fp_of("// another organisation's copy\ndigraph g {\n  cov=diag\n  k=10\n"
              "  b [labels=\"/x/bl.npy\", train=\"/x/b.npy\", endpoint=\"tcp://10.0.0.2:9000\", "
              "color=red];\n  a [labels=\"q.npy\" train=\"p.npy\" endpoint=\"tcp://127.0.0.1:0\"];\n"
              "  a -> b\n}\n",
              NULL);
    /* the defaults written out */
    pft_topo_fp_t *c = fp_of(BASE "min_rows = 5; prep = l2; a [train = \"a.npy\", labels = \"al.npy\"]; "
                                  "b [k = 10, train = \"b.npy\", labels = \"bl.npy\"]; a -> b; }",
                             NULL);
    CHECK(same(a, b));
    CHECK(same(a, c));
    char buf[256];
    CHECK(diff(a, b, buf, sizeof buf) == 0 && buf[0] == '\0');
    char text[PFT_TOPO_FP_TEXT_LEN];
    pft_topo_fp_text(pft_topo_fp_hash(a), text);
    CHECK_MSG(strlen(text) == 79 && text[4] == ' ' && text[74] == ' ', "text %s", text);
    pft_topo_fp_destroy(&a);
    pft_topo_fp_destroy(&b);
    pft_topo_fp_destroy(&c);
    pft_topo_fp_destroy(&c); /* safe twice */
}

/* Expects text to fingerprint differently from s_chain, the diff (seen from s_chain's side) holding needle.
 */
static void expect_diff(const char *text, const uint8_t *const *keys_here, const uint8_t *const *keys_there,
                        const char *needle)
{
    pft_topo_fp_t *here = fp_of(s_chain, keys_here), *there = fp_of(text, keys_there);
    CHECK_MSG(here && there && !same(here, there), "same fingerprint for %s", text);
    char buf[256];
    size_t n = here && there ? diff(here, there, buf, sizeof buf) : 0;
    CHECK_MSG(n >= 1 && strstr(buf, needle), "diff (%zu) '%s' lacks '%s'", n, n ? buf : "", needle);
    pft_topo_fp_destroy(&here);
    pft_topo_fp_destroy(&there);
}

static void test_differs(void)
{
    expect_diff(
        "digraph g { port_base = 7100; k = 3; cov = diag; a [train = \"a.npy\", labels = \"al.npy\"]; "
        "b [train = \"b.npy\", labels = \"bl.npy\"]; a -> b; }",
        NULL, NULL, "k (10 here)");
    expect_diff(
        "digraph g { port_base = 7200; k = 10; cov = spher; a [train = \"a.npy\", labels = \"al.npy\"]; "
        "b [train = \"b.npy\", labels = \"bl.npy\"]; a -> b; }",
        NULL, NULL, "cov (diag here)");
    expect_diff(
        BASE "a [train = \"a.npy\", labels = \"al.npy\"]; b [k = 3, train = \"b.npy\", labels = \"bl.npy\"]; "
             "a -> b; }",
        NULL, NULL, "settings of node b");
    expect_diff(BASE
                "a [train = \"a.npy\", labels = \"al.npy\"]; b [train = \"b.npy\", labels = \"bl.npy\"]; "
                "b -> a; }",
                NULL, NULL, "edges (here: a->b)");
    expect_diff(BASE
                "a [train = \"a.npy\", labels = \"al.npy\"]; b [train = \"b.npy\", labels = \"bl.npy\"]; "
                "c [train = \"c.npy\", labels = \"cl.npy\"]; a -> b -> c; }",
                NULL, NULL, "node c (not here)");
    uint8_t k1[32], k2[32], k3[32];
    memset(k1, 1, sizeof k1);
    memset(k2, 2, sizeof k2);
    memset(k3, 3, sizeof k3);
    const uint8_t *here[] = {k1, k2}, *there[] = {k3, k2};
    expect_diff(s_chain, here, there, "key of node a");
    pft_topo_fp_t *a = fp_of(s_chain, here), *b = fp_of(s_chain, here), *c = fp_of(s_chain, NULL);
    CHECK(same(a, b) && !same(a, c));
    pft_topo_fp_destroy(&a);
    pft_topo_fp_destroy(&b);
    pft_topo_fp_destroy(&c);
}

/* An inline key and a .pub file of the same key: the caller resolves both to the same bytes, so the
 * topology's way of giving the key does not matter; the key's path is private. */
static void test_key_forms(void)
{
    uint8_t k1[32], k2[32];
    memset(k1, 7, sizeof k1);
    memset(k2, 9, sizeof k2);
    const uint8_t *keys[] = {k1, k2};
    pft_topo_fp_t *a = fp_of(BASE "a [key = \"/org/a/a.pub\", train = \"a.npy\", labels = \"al.npy\"]; "
                                  "b [key = \"/b.pub\", train = \"b.npy\", labels = \"bl.npy\"]; a -> b; }",
                             keys);
    pft_topo_fp_t *b =
        fp_of(BASE "a [key = \"elsewhere/a.pub\", train = \"a.npy\", labels = \"al.npy\"]; "
                   "b [key = \"/other/b.pub\", train = \"b.npy\", labels = \"bl.npy\"]; a -> b; }",
              keys);
    CHECK(same(a, b));
    pft_topo_fp_destroy(&a);
    pft_topo_fp_destroy(&b);
}

/* Many differences: the text is cut with "…" within the buffer, the count is exact. */
static void test_truncated(void)
{
    pft_topo_fp_t *a = fp_of(s_chain, NULL);
    pft_topo_fp_t *b = fp_of(
        "digraph g { port_base = 7300; k = 3; cov = full; seed = 5; tol = \"0.5\"; max_iter = 7; n_init = 3; "
        "head_c = 2; em_draws = 3; head_draws = 4; mc_budget = 9; min_rows = 2; "
        "a [train = \"a.npy\", labels = \"al.npy\"]; b [train = \"b.npy\", labels = \"bl.npy\"]; "
        "a -> b; }",
        NULL);
    char buf[64];
    size_t n = a && b ? diff(a, b, buf, sizeof buf) : 0;
    CHECK_MSG(n >= 11 && strlen(buf) < sizeof buf && strstr(buf, "\xe2\x80\xa6"), "%zu: %s", n, buf);
    pft_topo_fp_destroy(&a);
    pft_topo_fp_destroy(&b);
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_same);
    RUN(test_differs);
    RUN(test_key_forms);
    RUN(test_truncated);
    pft_test_topo_cleanup();
    return pft_test_done();
}
