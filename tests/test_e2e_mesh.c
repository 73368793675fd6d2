/* End-to-end: a mesh (strongly connected, not a ring, graph attribute root) run by pftnet launch as real
 * pftnode processes over ZeroMQ TCP on loopback, on the bundled PACS example data. Lap 1 gathers up the BFS
 * in-tree to the root, lap 2 spreads the complete bundle down the out-tree: every node exits 0 and ends with
 * everyone's knowledge, 2n-2 hand-offs, none on the idle edges; `pftnet check` names the kind and the idle
 * edges. */
#include "pft_e2e_ref.h"
#include "pft_e2e_run.h"
#include "pft_test.h"

#include <jansson.h>
#include <sys/wait.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"
#define ROWS 60 /* training rows per node */

static char s_tmp[256];

/* Six nodes: the cycle a -> … -> f -> a with chords a -> d, c -> a, e -> b, f -> c, root a. Lap 1 goes up the
 * in-tree b -> c -> a, d -> e -> f -> a; lap 2 down the out-tree a -> b -> c, a -> d -> e -> f; the edges
 * c -> d, e -> b and f -> c are in neither tree (idle). */
static const char *const s_body = "  root = a;\n"
                                  "  a -> b -> c -> d -> e -> f -> a;\n"
                                  "  a -> d; c -> a; e -> b; f -> c;\n";

static void write_topo(const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.dot", s_tmp, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f,
            "digraph %s {\n  dataset = \"%s\"; partition = iid; samples = %d; k = 2; cov = diag;\n"
            "  max_iter = 30; head_draws = 1; em_draws = 1; deadline = 120; send_deadline = 60;\n%s}\n",
            name, EXAMPLE_DATA, ROWS, s_body);
    fclose(f);
}

/* Runs cmd and parses its stdout as JSON (NULL on failure); *code gets the exit status. */
static json_t *run_json(const char *cmd, int *code)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    json_error_t err;
    json_t *j = json_loadf(p, 0, &err);
    int st = pclose(p);
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return j;
}

/* `pftnet check --json`: kind mesh, root a, 10 hand-offs, the three idle edges, none of them carrying one. */
static void test_check(void)
{
    char topo[512], cmd[1024];
    write_topo("mesh6", topo, sizeof topo);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet check --json %s", PFT_BINARY_DIR, topo);
    int code = -1;
    json_t *j = run_json(cmd, &code);
    CHECK(code == 0 && j);
    if (!j)
        return;
    CHECK(strcmp(json_string_value(json_object_get(j, "kind")), "mesh") == 0);
    CHECK(strcmp(json_string_value(json_object_get(j, "root")), "a") == 0);
    CHECK(json_array_size(json_object_get(j, "handoffs")) == 10);
    json_t *idle = json_object_get(j, "idle_edges");
    static const char *const want[][2] = {{"c", "d"}, {"e", "b"}, {"f", "c"}};
    CHECK_MSG(json_array_size(idle) == 3, "%zu idle edges", json_array_size(idle));
    for (size_t w = 0; w < 3 && json_array_size(idle) == 3; w++) {
        json_t *e = json_array_get(idle, w);
        CHECK(strcmp(json_string_value(json_object_get(e, "from")), want[w][0]) == 0 &&
              strcmp(json_string_value(json_object_get(e, "to")), want[w][1]) == 0);
    }
    size_t i;
    json_t *e;
    json_array_foreach(idle, i, e)
    {
        const char *from = json_string_value(json_object_get(e, "from")),
                   *to = json_string_value(json_object_get(e, "to"));
        size_t k;
        json_t *h;
        json_array_foreach(json_object_get(j, "handoffs"), k, h)
        {
            CHECK_MSG(strcmp(json_string_value(json_object_get(h, "from")), from) != 0 ||
                          strcmp(json_string_value(json_object_get(h, "to")), to) != 0,
                      "idle edge %s -> %s carries hand-off %ld", from, to, pft_e2e_jint(h, "seq"));
        }
    }
    json_t *a = pft_e2e_find_id(json_object_get(j, "nodes"), "a");
    CHECK(a && strcmp(json_string_value(json_object_get(a, "role")), "producer") == 0);
    json_t *b = pft_e2e_find_id(json_object_get(j, "nodes"), "b");
    CHECK(b && strcmp(json_string_value(json_object_get(b, "role")), "member") == 0);
    json_decref(j);
}

static void test_mesh6_run(void)
{
    char topo[512], out[512], cmd[4096];
    write_topo("mesh6", topo, sizeof topo);
    snprintf(out, sizeof out, "%s/mesh6", s_tmp);
    snprintf(cmd, sizeof cmd,
             "PFTNODE=%s/node/pftnode %s/node/pftnet launch %s --out %s --quiet --no-baselines > %s.stdout "
             "2> %s.stderr",
             PFT_BINARY_DIR, PFT_BINARY_DIR, topo, out, out, out);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECK_MSG(code == 0, "launch exit %d (see %s.stderr, %s/*/node.log)", code, out, out);
    char path[600];
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t err;
    json_t *r = json_load_file(path, 0, &err);
    CHECK(r != NULL);
    if (!r)
        return;
    const int n_nodes = 6;
    CHECK(strcmp(json_string_value(json_object_get(r, "kind")), "mesh") == 0);
    CHECK(pft_e2e_jint(json_object_get(r, "baselines"), "handoffs") == 2 * n_nodes - 2);
    size_t i;
    json_t *n;
    int sends = 0;
    json_array_foreach(json_object_get(r, "nodes"), i, n)
    {
        const char *id = json_string_value(json_object_get(n, "id"));
        CHECK_MSG(strcmp(json_string_value(json_object_get(n, "status")), "ok") == 0, "node %s: %s", id,
                  json_string_value(json_object_get(n, "status")));
        CHECK(strcmp(json_string_value(json_object_get(n, "role")),
                     strcmp(id, "a") == 0 ? "producer" : "member") == 0);
        /* everyone's knowledge, each node's data counted once */
        CHECK_MSG(json_array_size(json_object_get(n, "provenance")) == (size_t)n_nodes,
                  "node %s: %zu provenance nodes", id, json_array_size(json_object_get(n, "provenance")));
        CHECK_MSG(pft_e2e_prov_total(n) == ROWS * n_nodes, "node %s: provenance counts %ld", id, pft_e2e_prov_total(n));
        CHECK_MSG(pft_e2e_jint(n, "n_real") + pft_e2e_jint(n, "n_synthetic") == ROWS * n_nodes,
                  "node %s: head on %ld + %ld rows", id, pft_e2e_jint(n, "n_real"), pft_e2e_jint(n, "n_synthetic"));
        double acc = json_real_value(json_object_get(n, "accuracy_global"));
        pft_e2e_ref_check_knowledge(out, id, "a,b,c,d,e,f", acc, 0.05);
        size_t j;
        json_t *s;
        json_array_foreach(json_object_get(n, "sent"), j, s)
        {
            CHECK(strcmp(json_string_value(json_object_get(s, "state")), "acked") == 0);
            sends++;
        }
    }
    CHECK_MSG(sends == 2 * n_nodes - 2, "%d hand-offs", sends);
    json_decref(r);
}

int main(void)
{
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_e2e_mesh") != 0)
        return 1;
    RUN(test_check);
    RUN(test_mesh6_run);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
