/* test_node_parts: the peer's exact-statistics parts (node/peer/pft_node_parts.c) count every contributor's
 * rows exactly once: a part wholly counted already is skipped, one that overlaps what is counted without
 * being contained in it is refused (taking it would count rows twice), and the merge of what was taken has
 * the counts and means of the union of the contributors' rows, computed here row by row. */
#include "pft_test.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_gstat.h"
#include "pft_node_internal.h"

#define N_CONTRIB 4
#define D 3
#define C 3
#define ROWS 7 /* per contributor */

/* Contributor k's rows: row r has label (r + k) % C and values that differ by contributor and row. */
static void contrib_rows(int k, float *x, int32_t *y)
{
    for (int r = 0; r < ROWS; r++) {
        y[r] = (r + k) % C;
        for (int j = 0; j < D; j++)
            x[r * D + j] = (float)(0.25 * k - 0.5 * r + j + 0.125 * (r * j % 5));
    }
}

/* The statistics of contributors who[0..n) together. */
static pft_gstat_t *part_of(const size_t *who, int n)
{
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_FULL, D);
    float x[ROWS * D];
    int32_t y[ROWS];
    for (int i = 0; st && i < n; i++) {
        contrib_rows((int)who[i], x, y);
        CHECK(pft_gstat_add_rows(st, x, y, ROWS) == 0);
    }
    return st;
}

/* Takes a new part of contributors who[0..n): its return code; the part is freed unless it was taken. */
static int take(parts_t *ps, const size_t *who, int n)
{
    pft_gstat_t *st = part_of(who, n);
    int rc = pft_node__parts_take(ps, &st, NULL, who, n, NULL, "test");
    CHECK_MSG((rc == 0) == (st == NULL), "rc %d: the part %s owned by the caller", rc,
              st ? "is still" : "is not");
    pft_gstat_destroy(&st);
    return rc;
}

/* The merge of every taken part against the rows of contributors 0..N_CONTRIB-1, each counted once. */
static void check_union(const parts_t *ps)
{
    pft_gstat_t *t = pft_gstat_new(PFT_GSTAT_FULL, D);
    for (int i = 0; i < ps->n; i++)
        CHECK(pft_gstat_merge(t, pft_node__parts_stats(&ps->p[i])) == 0);
    double sum[C][D] = {{0}};
    uint64_t cnt[C] = {0};
    float x[ROWS * D];
    int32_t y[ROWS];
    for (int k = 0; k < N_CONTRIB; k++) {
        contrib_rows(k, x, y);
        for (int r = 0; r < ROWS; r++) {
            cnt[y[r]]++;
            for (int j = 0; j < D; j++)
                sum[y[r]][j] += x[r * D + j];
        }
    }
    CHECK(pft_gstat_n_classes(t) == C);
    for (int c = 0; c < C; c++) {
        int at = pft_gstat_find(t, c);
        CHECK(at >= 0);
        if (at < 0)
            continue;
        CHECK_MSG(pft_gstat_count(t, at) == cnt[c], "class %d: %llu rows merged, %llu rows exist", c,
                  (unsigned long long)pft_gstat_count(t, at), (unsigned long long)cnt[c]);
        for (int j = 0; j < D; j++)
            CHECK_NEAR(pft_gstat_mean(t, at)[j], sum[c][j] / (double)cnt[c], 1e-12);
    }
    pft_gstat_destroy(&t);
}

static void test_each_contributor_once(void)
{
    parts_t ps = {0};
    ps.n_nodes = N_CONTRIB;
    ps.covered = pft_calloc(N_CONTRIB, 1);
    ps.grp = pft_calloc(N_CONTRIB, sizeof *ps.grp);
    ps.acc = pft_calloc(N_CONTRIB, sizeof *ps.acc);
    CHECK(ps.covered && ps.grp && ps.acc);
    const size_t ab[] = {0, 1}, b[] = {1}, bc[] = {1, 2}, c[] = {2}, d[] = {3};
    CHECK(take(&ps, ab, 2) == 0);
    CHECK(ps.n == 1);
    CHECK_MSG(take(&ps, ab, 2) == 1, "the same part again is not skipped"); /* a duplicate: skipped */
    CHECK_MSG(take(&ps, b, 1) == 1, "a part of one counted contributor is not skipped");
    CHECK(ps.n == 1);
    int rc = take(&ps, bc, 2); /* b counted, c not: it cannot be split */
    CHECK_MSG(rc == PFT_EINVAL, "a part overlapping the counted contributors: %d, not refused", rc);
    CHECK(rc != PFT_EINVAL || strstr(pft_errmsg(), "count rows twice") != NULL);
    CHECK(ps.n == 1 && ps.covered[2] == 0);
    CHECK(take(&ps, c, 1) == 0);
    pft_gstat_t *view = part_of(d, 1); /* borrowed, as a received bundle's part */
    CHECK(pft_node__parts_take(&ps, NULL, view, d, 1, NULL, "test") == 0);
    CHECK(ps.n == 3 && pft_node__parts_stats(&ps.p[2]) == view);
    check_union(&ps);
    pft_node__parts_free(&ps);
    pft_gstat_destroy(&view);
}

/* The event loop's waits: as given up to 64 nodes (every test's topology), then longer, at most 25 times; a
 * compute slot's polling at most 5 times. */
static void test_turn_scale(void)
{
    CHECK(pft_node__turn_scale(2) == 1 && pft_node__turn_scale(64) == 1);
    CHECK(pft_node__turn_scale(65) == 2 && pft_node__turn_scale(128) == 2 && pft_node__turn_scale(129) == 3);
    CHECK(pft_node__turn_scale(256) == 4 && pft_node__turn_scale(1000) == 16 &&
          pft_node__turn_scale(4096) == 25);
    CHECK(pft_node__slot_scale(64) == 1 && pft_node__slot_scale(256) == 4 && pft_node__slot_scale(1000) == 5);
}

int main(void)
{
    RUN(test_each_contributor_once);
    RUN(test_turn_scale);
    return pft_test_done();
}
