/* End-to-end: the Monte Carlo budget (mc_budget) bounds the rows a node's EM and head work on whatever stands
 * behind its bundles, while the rows of knowledge (n_synthetic, provenance) stay exact; with mc_budget = 0
 * and one draw per row (the paper's protocol) every represented row is one unweighted row. Real pftnode
 * processes over loopback on the bundled PACS example data. */
#include "pft_e2e_own.h"
#include "pft_e2e_ref.h"
#include "pft_e2e_run.h"
#include "pft_test.h"

#include <glob.h>
#include <sys/wait.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"
#define NODES 6
#define ROWS 60   /* training rows per node */
#define CLASSES 7 /* PACS */
#define BUDGET 40 /* mc_budget of the bounded run */

static char s_tmp[256];

/* Runs a NODES-chain with the given extra settings; returns results.json (caller decrefs) or NULL. */
static json_t *run_chain(const char *name, const char *settings)
{
    char topo[300], out[300], cmd[4096];
    snprintf(topo, sizeof topo, "%s/%s.dot", s_tmp, name);
    snprintf(out, sizeof out, "%s/%s", s_tmp, name);
    FILE *f = fopen(topo, "w");
    if (!f)
        return NULL;
    fprintf(f,
            "digraph %s {\n  dataset = \"%s\"; partition = iid; samples = %d; k = 1; cov = diag;\n"
            "  max_iter = 20; min_rows = 1; deadline = 120; send_deadline = 60; %s\n  ",
            name, EXAMPLE_DATA, ROWS, settings);
    for (int i = 0; i < NODES; i++)
        fprintf(f, "%sn%d", i ? " -> " : "", i);
    fprintf(f, ";\n}\n");
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s/node/pftnet launch %s --out %s --quiet --no-baselines > %s.stdout 2> %s.stderr || "
             "{ tail -5 %s.stderr; tail -3 %s/*/node.log; } >&2",
             PFT_BINARY_DIR, topo, out, out, out, out, out);
    int st = system(cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: launch failed", name);
    char path[400];
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t err;
    return json_load_file(path, 0, &err);
}

/* The rows node `id`'s EM and head must have seen, recomputed from its own data file and the bundle in its
 * inbox (what it received), not from result.json: per class c, own_c real rows and, for a received class
 * standing for m_c rows (its provenance), draws·m_c synthetic rows, at most `budget` (0: no bound). *head =
 * Σ_c (own_c + head draws), *em = max_c (own_c + EM draws). -1 when the files cannot be read. */
static int expected_rows(const char *out, const char *id, int draws_em, int draws_head, int budget,
                         long *head, long *em)
{
    pft_e2e_own_t own;
    if (pft_e2e_own_load(out, id, &own) != 0)
        return -1;
    char pat[400];
    snprintf(pat, sizeof pat, "%s/%s/inbox/*.pftb", out, id);
    glob_t g = {0};
    pft_bundle_t *b = NULL;
    int rc = 0;
    if (glob(pat, 0, NULL, &g) == 0) { /* one bundle a stage in a chain */
        rc = g.gl_pathc == 1 && (b = pft_e2e_read_bundle(g.gl_pathv[0])) != NULL ? 0 : -1;
    }
    globfree(&g);
    *head = 0;
    *em = 0;
    for (int c = 0; c < PFT_E2E_OWN_MAX_CLASSES && rc == 0; c++) {
        long m = 0;
        for (int i = 0; b && i < pft_bundle_prov_n_nodes(b); i++)
            m += (long)pft_bundle_prov_count(b, pft_bundle_prov_node(b, i), c);
        long de = (long)draws_em * m, dh = (long)draws_head * m;
        if (budget > 0) {
            de = de < budget ? de : budget;
            dh = dh < budget ? dh : budget;
        }
        *head += own.count[c] + dh;
        *em = own.count[c] + de > *em ? own.count[c] + de : *em;
    }
    pft_bundle_destroy(&b);
    pft_e2e_own_free(&own);
    return rc;
}

/* Every node: knowledge exact (n_synthetic = ROWS per node upstream; provenance complete), and the rows its
 * EM and head saw within (bounded) or equal to (paper) what the settings allow. */
static void check_nodes(const char *name, json_t *r, int bounded)
{
    char out[300];
    snprintf(out, sizeof out, "%s/%s", s_tmp, name);
    json_t *nodes = json_object_get(r, "nodes");
    CHECK(json_array_size(nodes) == NODES);
    for (int i = 0; i < NODES; i++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        json_t *n = pft_e2e_find_id(nodes, id);
        CHECK_MSG(n != NULL, "no result for %s", id);
        if (!n)
            continue;
        long real = pft_e2e_jint(n, "n_real"), synth = pft_e2e_jint(n, "n_synthetic");
        long head = pft_e2e_jint(n, "head_rows"), em = pft_e2e_jint(n, "em_rows_max");
        CHECK_MSG(real == ROWS && synth == (long)ROWS * i, "%s: %ld real, %ld synthetic", id, real, synth);
        CHECK_MSG(pft_e2e_prov_total(n) == (long)ROWS * (i + 1), "%s: provenance %ld rows", id,
                  pft_e2e_prov_total(n));
        long want_head = -1, want_em = -1;
        CHECK_MSG(expected_rows(out, id, bounded ? 10 : 1, bounded ? 10 : 1, bounded ? BUDGET : 0, &want_head,
                                &want_em) == 0,
                  "%s: its data file or inbox could not be read", id);
        CHECK_MSG(head == want_head && em == want_em,
                  "%s: head on %ld rows, EM on %ld at most; its data and inbox give %ld and %ld", id, head,
                  em, want_head, want_em);
        if (bounded) {
            /* one bundle per stage: each received class is min(BUDGET, 10·m) draws */
            CHECK_MSG(head <= ROWS + CLASSES * BUDGET, "%s: head on %ld rows", id, head);
            CHECK_MSG(em <= ROWS + BUDGET, "%s: EM on %ld rows", id, em);
            if (i >= 3) /* ≥ 180 rows upstream: every class is past the budget */
                CHECK_MSG(head == ROWS + CLASSES * BUDGET, "%s: head on %ld rows", id, head);
        } else {
            CHECK_MSG(head == real + synth, "%s: head on %ld rows for %ld represented", id, head,
                      real + synth);
        }
    }
    json_t *last = pft_e2e_find_id(nodes, "n5");
    double acc = json_real_value(json_object_get(last, "accuracy_global"));
    /* the last node stands for every node's rows */
    pft_e2e_ref_check_knowledge(out, "n5", "n0,n1,n2,n3,n4,n5", acc, 0.05);
    printf("  last node: accuracy %.4f, head on %ld rows, EM on %ld rows at most\n", acc,
           pft_e2e_jint(last, "head_rows"), pft_e2e_jint(last, "em_rows_max"));
}

static void test_budget_bounds_rows(void)
{
    json_t *r = run_chain("bounded", "em_draws = 10; head_draws = 10; mc_budget = 40;");
    CHECK(r != NULL);
    if (r)
        check_nodes("bounded", r, 1);
    json_decref(r);
}

static void test_paper_protocol_unweighted(void)
{
    json_t *r = run_chain("paper", "em_draws = 1; head_draws = 1; mc_budget = 0;");
    CHECK(r != NULL);
    if (r)
        check_nodes("paper", r, 0);
    json_decref(r);
}

int main(void)
{
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_budget") != 0)
        return 1;
    RUN(test_budget_bounds_rows);
    RUN(test_paper_protocol_unweighted);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
