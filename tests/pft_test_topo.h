/* pft_test_topo: helpers shared by the topology tests (test_topo*.c): a temporary folder, loading text,
 * expected failures, plan consistency. */
#ifndef PFT_TEST_TOPO_H
#define PFT_TEST_TOPO_H

#include "pft_error.h"
#include "pft_plan.h"
#include "pft_test.h"
#include "pft_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_dir[256]; /* a fresh temporary folder for this run */

static inline void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* Writes text to <dir>/<name> and returns the path (static buffer). */
static inline const char *put(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    write_text(path, text);
    return path;
}

/* Loads text as <dir>/t.dot. */
static inline int load(const char *text, unsigned flags, pft_topo_t **t)
{
    return pft_topo_load(put("t.dot", text), flags, t);
}

/* Expects loading to fail with every needle (NULL-terminated) in the message; the first needle
 * is usually "t.dot:<line>: ". */
static inline void expect_fail_(const char *file, int line, const char *text, unsigned flags,
                                const char *const *needles)
{
    pft_topo_t *t = NULL;
    int rc = load(text, flags, &t);
    if (rc == 0) {
        fprintf(stderr, "  FAIL %s:%d: loaded, expected an error\n", file, line);
        pft_t_failed_checks++;
        pft_topo_destroy(&t);
        return;
    }
    CHECK(t == NULL);
    const char *msg = pft_errmsg();
    for (const char *const *n = needles; *n; n++)
        if (!strstr(msg, *n)) {
            fprintf(stderr, "  FAIL %s:%d: message lacks \"%s\": %s\n", file, line, *n, msg);
            pft_t_failed_checks++;
        }
}
#define EXPECT_FAIL(text, flags, ...)                                                                        \
    expect_fail_(__FILE__, __LINE__, text, flags, (const char *const[]){__VA_ARGS__, NULL})

#define SIM "dataset=\".\"; " /* a simulation; data checks skipped with SKIP */
#define SKIP PFT_TOPO_SKIP_DATA_CHECK

/* Every hand-off is received in exactly one stage and sent in exactly one; within a node, a stage
 * sends only after it receives, and hand-offs are numbered 1..n. */
static inline void check_plan_consistent(const pft_topo_t *t)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(t, &h);
    int *recv = calloc(nh + 1, sizeof *recv), *sent = calloc(nh + 1, sizeof *sent);
    for (size_t i = 0; i < nh; i++)
        CHECK(h[i].seq == i + 1);
    for (size_t v = 0; v < pft_topo_node_count(t); v++) {
        const pft_topo_node_t *nd = pft_topo_node(t, v);
        CHECK(nd->index == v);
        CHECK(nd->n_stages >= 1);
        int finals = 0;
        for (size_t s = 0; s < nd->n_stages; s++) {
            const pft_stage_t *st = &nd->stages[s];
            finals += st->final;
            for (size_t i = 0; i < st->n_recv; i++) {
                CHECK(h[st->recv[i]].to == v);
                recv[st->recv[i]]++;
                for (size_t j = 0; j < st->n_send; j++)
                    CHECK(st->recv[i] < st->send[j]);
            }
            for (size_t j = 0; j < st->n_send; j++) {
                CHECK(h[st->send[j]].from == v);
                sent[st->send[j]]++;
            }
        }
        CHECK(finals == 1 && nd->stages[nd->n_stages - 1].final);
    }
    for (size_t i = 0; i < nh; i++)
        CHECK(recv[i] == 1 && sent[i] == 1);
    free(recv);
    free(sent);
}

/* Creates the temporary folder s_dir; returns 0, or 1 after saying why not. */
static inline int pft_test_topo_setup(void)
{
    snprintf(s_dir, sizeof s_dir, "%s/pft_topo_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    return 0;
}

/* Removes s_dir and everything in it. */
static inline void pft_test_topo_cleanup(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
}

#endif
