/* Tests of pft_topo_rules: the one validator of the rules between attributes. Valid topologies pass (with
 * the secure-aggregation plan handed back), each rule refuses with its name and words free of file and line,
 * the class-holder policy is decided from the topology's class sets or from the launcher's rows per class
 * (and only when every member is known), at the min_contributors boundary, and --set overrides; the
 * warnings (an exact ring without secure aggregation; a floor that keeps the rows home) where they apply and
 * nowhere else. */
#include <stdint.h>

#include "pft_test_topo.h"
#include "pft_topo_rules.h"

#define SA SIM "cov = tied; secure_agg = true; prep = l2; "

/* Loads text, checks the rules with facts; returns the code, the verdict in *v. */
static int verdict_of(const char *text, const pft_topo_facts_t *facts, pft_topo_verdict_t *v)
{
    pft_topo_t *t = NULL;
    int rc = load(text, SKIP, &t);
    CHECK_MSG(rc == 0, "load: %s", pft_errmsg());
    if (rc)
        return rc;
    rc = pft_topo_rules_check(t, facts, v, NULL);
    pft_topo_destroy(&t);
    return rc;
}

static void expect_rule(const char *text, const pft_topo_facts_t *facts, int code, const char *rule,
                        const char *needle)
{
    pft_topo_verdict_t v;
    int rc = verdict_of(text, facts, &v);
    CHECK_MSG(rc == code && v.code == code, "rc %d, verdict %d, want %d: %s", rc, v.code, code, v.text);
    CHECK_MSG(v.rule && strcmp(v.rule, rule) == 0, "rule %s, want %s", v.rule ? v.rule : "(none)", rule);
    char head[96];
    snprintf(head, sizeof head, "rule %s: ", rule);
    CHECK_MSG(strncmp(v.text, head, strlen(head)) == 0, "text: %s", v.text);
    CHECK_MSG(strstr(v.text, needle) != NULL, "text lacks '%s': %s", needle, v.text);
    CHECK_MSG(strcmp(pft_errmsg(), v.text) == 0, "message %s differs from the verdict", pft_errmsg());
    CHECK_MSG(strstr(v.text, "t.dot") == NULL, "the words name the file: %s", v.text);
}

static void test_valid(void)
{
    const char *ok[] = {
        "digraph g { " SA "s [data = false]; c1 -> s; c2 -> s; c3 -> s; }",
        "digraph g { " SA "dp_epsilon = 1; dp_delta = 0.001; s [data = false, dp_epsilon = 0]; c1 -> s; "
        "c2 -> s; c3 -> s; }",
        "digraph g { " SIM "k = 1; dp_epsilon = 1; a -> b -> c; }",
        "digraph g { " SIM "cov = tied; dp_epsilon = 1; a -> b -> c; }", /* exact: k does not matter */
        "digraph g { " SIM "a -> b -> c; }",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        pft_topo_t *t = NULL;
        pft_secplan_t *pl = NULL;
        pft_topo_verdict_t v;
        CHECK(load(ok[i], SKIP, &t) == 0);
        int rc = t ? pft_topo_rules_check(t, NULL, &v, &pl) : -1;
        CHECK_MSG(rc == 0 && v.code == 0 && v.rule == NULL, "topology %zu: %s", i, pft_errmsg());
        CHECK((pl != NULL) == (t && pft_topo_run(t)->secure_agg));
        pft_secplan_destroy(&pl);
        pft_topo_destroy(&t);
    }
}

static void test_rules(void)
{
    const char *star = "s [data = false]; c1 -> s; c2 -> s; c3 -> s; }";
    char text[1024];
    snprintf(text, sizeof text, "digraph g { %s prep = none; %s", SA, star);
    expect_rule(text, NULL, PFT_ETOPO, "secagg-prep", "prep = l2 or sqrt-l2");
    snprintf(text, sizeof text, "digraph g { %s %s", SA, star);
    expect_rule(text, &(pft_topo_facts_t){.insecure = 1}, PFT_ETOPO, "secagg-insecure", "--insecure");
    expect_rule("digraph g { " SA "a -> b -> c -> d; b -> d [fallback = true]; }", NULL, PFT_ETOPO,
                "secagg-plan", "fallback edge b -> d");
    expect_rule("digraph g { " SIM "dp_epsilon = 1; a -> b; }", NULL, PFT_ETOPO, "dp-k", "set k = 1");
    expect_rule("digraph g { " SA "dp_epsilon = 1; dp_delta = 0; s [data = false, dp_epsilon = 0]; c1 -> s; "
                "c2 -> s; }",
                NULL, PFT_ETOPO, "dp-delta", "0 < dp_delta < 1");
    expect_rule("digraph g { " SIM "cov = tied; a [dp_epsilon = 1, dp_delta = 0]; a -> b -> c; }", NULL,
                PFT_ETOPO, "dp-delta", "node 'a'");
    expect_rule("digraph g { " SA "dp_epsilon = 1; dp_delta = 0.001; s [data = false, dp_epsilon = 0]; "
                "c2 [dp_delta = 0.01]; c1 -> s; c2 -> s; }",
                NULL, PFT_ETOPO, "secagg-dp-equal", "same (dp_epsilon, dp_delta)");
    expect_rule("digraph g { " SA "dp_dropouts = 1; a -> b -> c -> d; }", NULL, PFT_ETOPO,
                "secagg-dropouts-star", "stars only");
    /* double masking's threshold: 2t >= n + 2 (n = 4: t = 3 or 4), and dp_dropouts within n - t */
    expect_rule("digraph g { " SA
                "secagg_threshold = 2; s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; }",
                NULL, PFT_ETOPO, "secagg-threshold", "use 3..4");
    expect_rule("digraph g { " SA
                "secagg_threshold = 5; s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; }",
                NULL, PFT_ETOPO, "secagg-threshold", "use 3..4");
    expect_rule("digraph g { " SA "dp_epsilon = 1; dp_delta = 0.001; dp_dropouts = 2; s [data = false, "
                "dp_epsilon = 0]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s; }",
                NULL, PFT_ETOPO, "secagg-threshold-dp", "at most 1 drop");
    pft_topo_t *t = NULL;
    pft_secplan_t *pl = NULL;
    CHECK(load("digraph g { " SA "s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; c5 -> s; }", SKIP,
               &t) == 0);
    CHECK(t && pft_topo_rules_check(t, NULL, NULL, &pl) == 0 && pl && pft_secplan_threshold(pl) == 4);
    pft_secplan_destroy(&pl);
    pft_topo_destroy(&t);
    CHECK(load("digraph g { " SA
               "secagg_threshold = 5; s [data = false]; c1 -> s; c2 -> s; c3 -> s; c4 -> s; "
               "c5 -> s; }",
               SKIP, &t) == 0);
    CHECK(t && pft_topo_rules_check(t, NULL, NULL, &pl) == 0 && pl && pft_secplan_threshold(pl) == 5);
    pft_secplan_destroy(&pl);
    pft_topo_destroy(&t);
    CHECK(pft_secplan_default_threshold(50) == 26 && pft_secplan_default_threshold(200) == 101 &&
          pft_secplan_default_threshold(5) == 4 && pft_secplan_default_threshold(2) == 2);
}

/* A chain a -> b -> c under secure_agg: a and b mask for c. Rows per class given as facts. */
static void test_holders_facts(void)
{
    const char *chain = "digraph g { " SA "a -> b -> c; }";
    uint64_t one[3 * 2] = {5, 7, 5, 0, 9, 9}; /* class 1: a only among the members (c is the opener) */
    uint64_t both[3 * 2] = {5, 7, 5, 1, 0, 0};
    expect_rule(chain, &(pft_topo_facts_t){.n_classes = 2, .class_rows = one}, PFT_EPOLICY,
                "secagg-class-holders", "class 1 is held by 1 member(s) of the group opened by 'c' (a)");
    pft_topo_verdict_t v;
    CHECK(verdict_of(chain, &(pft_topo_facts_t){.n_classes = 2, .class_rows = both}, &v) == 0);
    CHECK(verdict_of(chain, NULL, &v) == 0); /* who holds what unknown: not decided here */
    CHECK(strcmp(v.node, "") == 0 && v.rule == NULL);
    /* the boundary: min_contributors = 3 with three members: 3 holders pass, 2 do not */
    const char *star = "digraph g { " SA "min_contributors = 3; s [data = false]; a -> s; b -> s; c -> s; }";
    uint64_t three[4] = {0, 1, 1, 1}, two[4] = {0, 1, 0, 1}; /* s, a, b, c */
    CHECK(verdict_of(star, &(pft_topo_facts_t){.n_classes = 1, .class_rows = three}, &v) == 0);
    CHECK(verdict_of(star, &(pft_topo_facts_t){.n_classes = 1, .class_rows = two}, &v) == PFT_EPOLICY);
    CHECK(strcmp(v.node, "s") == 0 && strstr(v.text, "(a, c)") != NULL);
}

/* partition = labels: the topology states who holds which class; the facts are not needed. */
static void test_holders_labels(void)
{
    expect_rule("digraph g { " SA
                "start = a; partition = \"labels:0-2|0-3|4-6|3-6\"; a -> b -> c -> d -> a; }",
                NULL, PFT_EPOLICY, "secagg-class-holders",
                "class 3 is held by 1 member(s) of the group opened "
                "by 'd' (b)");
    pft_topo_verdict_t v;
    CHECK(verdict_of("digraph g { " SA "start = a; partition = \"labels:0-3|0-3|0-3|3-6\"; "
                     "a -> b -> c -> d -> a; }",
                     NULL, &v) == 0);
}

static void test_apply_sets(void)
{
    pft_topo_t *t = NULL;
    CHECK(load("digraph g { " SA "s [data = false]; c1 -> s; c2 -> s; c3 -> s; }", SKIP, &t) == 0);
    if (!t)
        return;
    const char *bad[] = {"prep"};
    CHECK(pft_topo_rules_apply_sets(t, bad, 1, NULL) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "expected NAME=VALUE") != NULL);
    CHECK(pft_topo_rules_check(t, NULL, NULL, NULL) == 0);
    const char *none[] = {"prep=none", "k=3"};
    CHECK(pft_topo_rules_apply_sets(t, none, 2, "42") == 0);
    CHECK(pft_topo_run(t)->prep == PFT_TOPO_PREP_NONE && pft_topo_run(t)->k == 3 &&
          pft_topo_run(t)->seed == 42);
    pft_topo_verdict_t v;
    CHECK(pft_topo_rules_check(t, NULL, &v, NULL) == PFT_ETOPO && strcmp(v.rule, "secagg-prep") == 0);
    const char *unknown[] = {"no_such_attribute=1"};
    CHECK(pft_topo_rules_apply_sets(t, unknown, 1, NULL) != 0);
    CHECK(pft_topo_run(t)->prep == PFT_TOPO_PREP_NONE); /* unchanged after a refused override */
    pft_topo_destroy(&t);
}

/* The one warning: a ring or mesh of exact statistics without secure_agg, some rows without DP (a node
 * subtracting its lap-1 aggregate from the lap-2 total holds the nodes' after it); not with secure_agg, nor
 * with mixtures, nor with DP everywhere, nor for a chain or a star (no second lap). */
static void test_warnings(void)
{
    static const struct {
        const char *text;
        size_t n;
    } cases[] = {
        {"digraph g { " SIM "cov = tied; start = a; a -> b -> c -> d -> a; }", 1},
        {"digraph g { " SA "start = a; a -> b -> c -> d -> a; }", 0},
        {"digraph g { " SIM "start = a; a -> b -> c -> d -> a; }", 0}, /* mixtures (cov = diag) */
        {"digraph g { " SIM "cov = tied; dp_epsilon = 1; start = a; a -> b -> c -> d -> a; }", 0},
        {"digraph g { " SIM "cov = tied; a -> b -> c -> d; }", 0},
        {"digraph g { " SIM "cov = tied; s [data = false]; c1 -> s; c2 -> s; }", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pft_topo_t *t = NULL;
        pft_topo_verdict_t w[4];
        CHECK_MSG(load(cases[i].text, SKIP, &t) == 0, "load %zu: %s", i, pft_errmsg());
        size_t n = t ? pft_topo_rules_warnings(t, NULL, w, 4) : 99;
        CHECK_MSG(n == cases[i].n, "topology %zu: %zu warning(s), want %zu", i, n, cases[i].n);
        if (n == 1 && cases[i].n == 1) {
            CHECK(strcmp(w[0].rule, "exact-lap-differencing") == 0 && w[0].code == 0);
            CHECK_MSG(strstr(w[0].text, "warning exact-lap-differencing: a ring") &&
                          strstr(w[0].text, "secure_agg = true") && strstr(w[0].text, "class sums"),
                      "text: %s", w[0].text);
        }
        pft_topo_destroy(&t);
    }
}

/* Warnings of topology text with facts (n_classes classes, rows per node in file order) into w; their number,
 * 99 if the text does not load. */
static size_t warnings_of(const char *text, size_t n_classes, const uint64_t *rows, pft_topo_verdict_t *w)
{
    pft_topo_t *t = NULL;
    CHECK_MSG(load(text, SKIP, &t) == 0, "load: %s", pft_errmsg());
    size_t n = t ? pft_topo_rules_warnings(t, &(pft_topo_facts_t){.n_classes = n_classes, .class_rows = rows},
                                           w, 4)
                 : 99;
    pft_topo_destroy(&t);
    return n;
}

/* The floor's forecast follows the node's floor (pft_node_step_floor.c) hop by hop, with known answers: chain
 * a -> b -> c, classes {3, 10}, {1, 0}, {4, 2}: a withholds class 0 (3 < 5) and releases 10 rows of class
 * 1; b withholds its one row; c withholds class 0 (4) and releases class 1 (its 2 rows with the 10 merged):
 * 8 of 20 rows kept home, b releases none of its own, c withholds the most (4 of 6). The same under the
 * sampling method; a node's own floor (min_rows = 2 at a: then b and c merge a's 3 rows of class 0 with
 * theirs, and only b's row stays home: under a tenth, nothing); nothing under secure_agg; a ring's start merges nothing in lap 1. */
static void test_floor_warning(void)
{
    static const uint64_t rows[] = {3, 10, 1, 0, 4, 2};
    pft_topo_verdict_t w[4];
    const char *exact = "digraph g { " SIM "cov = tied; a -> b -> c; }";
    CHECK(warnings_of(exact, 2, rows, w) == 1);
    CHECK(strcmp(w[0].rule, "floor-withholds") == 0 && strcmp(w[0].node, "c") == 0 && w[0].code == 0);
    CHECK_MSG(strstr(w[0].text, "warning floor-withholds: ") == w[0].text &&
                  strstr(w[0].text, "keeps 8 of the 20 training rows (40 %)") &&
                  strstr(w[0].text, "(1 of 3 nodes with rows release none of their own; 'c' withholds 4 of "
                                    "its 6 rows, its largest class 4 rows, min_rows = 5)") &&
                  strstr(w[0].text, "secure_agg = true"),
              "text: %s", w[0].text);
    CHECK(warnings_of("digraph g { " SIM "k = 1; cov = diag; a -> b -> c; }", 2, rows, w) == 1 &&
          strstr(w[0].text, "keeps 8 of the 20"));
    /* a's floor of 2 releases its 3 rows of class 0; b's 1 and c's 4 merge with them: b's 1 row of 20 is all
     * that stays home (c merging nothing would keep 5 of 20 home: a warning) */
    CHECK(warnings_of("digraph g { " SIM "cov = tied; a [min_rows = 2]; a -> b -> c; }", 2, rows, w) == 0);
    CHECK(warnings_of("digraph g { " SA "a -> b -> c; }", 2, rows, w) == 0);
    CHECK(warnings_of(exact, 2, NULL, w) == 0);
    static const uint64_t ring[] = {3, 2, 4}; /* one class: the start a merges nothing, so nothing goes on */
    CHECK(warnings_of("digraph g { " SIM "cov = tied; start = a; a -> b -> c -> a; }", 1, ring, w) == 2);
    CHECK(strcmp(w[0].rule, "exact-lap-differencing") == 0 && strcmp(w[1].rule, "floor-withholds") == 0);
    CHECK_MSG(strstr(w[1].text, "keeps 9 of the 9 training rows (100 %)") &&
                  strstr(w[1].text, "(3 of 3 nodes"), "text: %s", w[1].text);
}

int main(void)
{
    if (pft_test_topo_setup())
        return 1;
    RUN(test_valid);
    RUN(test_rules);
    RUN(test_holders_facts);
    RUN(test_holders_labels);
    RUN(test_apply_sets);
    RUN(test_warnings);
    RUN(test_floor_warning);
    pft_test_topo_cleanup();
    return pft_test_done();
}
