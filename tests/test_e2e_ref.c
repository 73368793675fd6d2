/* Tests of pft_e2e_ref.h, the scikit-learn reference of the end-to-end accuracy checks: it answers on a run
 * folder it can read, and a reference script that fails is a failure of the test, never a skip (only a
 * machine without python3, numpy and scikit-learn skips). */
#include "pft_e2e_ref.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_test.h"

#include <sys/stat.h>

#define D 4
#define ROWS 40 /* per node and for the evaluation set */

static char s_tmp[256];

/* Writes <dir>/<stem>_x.npy and _y.npy: ROWS rows of two classes, N(±2, 1) in every coordinate by class. */
static void write_rows(const char *dir, const char *stem, pft_rng_t *r)
{
    float x[ROWS * D];
    int32_t y[ROWS];
    for (int i = 0; i < ROWS; i++) {
        y[i] = i % 2;
        for (int j = 0; j < D; j++)
            x[i * D + j] = (float)((y[i] ? 2.0 : -2.0) + pft_rng_normal(r));
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s_x.npy", dir, stem);
    CHECK(pft_npy_write_f32(path, x, ROWS, D) == 0);
    snprintf(path, sizeof path, "%s/%s_y.npy", dir, stem);
    CHECK(pft_npy_write_i32(path, y, ROWS) == 0);
}

/* A run folder as pftnet launch leaves it for the reference: eval_{x,y}.npy and <id>/data/train_{x,y}.npy for
 * each id of ids (NULL-terminated). */
static void make_run(const char *out, const char *const *ids)
{
    pft_rng_t *r = pft_rng_new(7);
    char dir[512];
    CHECK(r && mkdir(out, 0700) == 0);
    write_rows(out, "eval", r);
    for (int i = 0; ids[i]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", out, ids[i]);
        CHECK(mkdir(dir, 0700) == 0);
        snprintf(dir, sizeof dir, "%s/%s/data", out, ids[i]);
        CHECK(mkdir(dir, 0700) == 0);
        write_rows(dir, "train", r);
    }
    pft_rng_destroy(&r);
}

/* Two separable classes: the reference answers one accuracy per group, near 1. */
static void test_reference_answers(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/good", s_tmp);
    const char *ids[] = {"a", "b", NULL}, *groups[] = {"a", "a,b"};
    make_run(out, ids);
    double acc[2] = {-1, -1};
    int rc = pft_e2e_ref_logreg(out, groups, 2, acc);
    if (rc == PFT_E2E_REF_NONE) {
        SKIP_TEST("no python3 with numpy and scikit-learn");
        return;
    }
    CHECK_MSG(rc == 0, "reference on %s: %d", out, rc);
    fprintf(stderr, "  reference accuracies: a %.4f, a,b %.4f\n", acc[0], acc[1]);
    CHECK(acc[0] >= 0.9 && acc[0] <= 1.0 && acc[1] >= 0.9 && acc[1] <= 1.0);
}

/* A group names a node whose rows are not there: the script fails (python's FileNotFoundError). That is -1,
 * not PFT_E2E_REF_NONE, and the reporting helper records a failed check, no skip. */
static void test_failing_script_is_failure(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/broken", s_tmp);
    const char *ids[] = {"a", NULL}, *groups[] = {"a", "a,missing"};
    make_run(out, ids);
    double acc[2];
    const char *probe[] = {"a"};
    if (pft_e2e_ref_logreg(out, probe, 1, acc) == PFT_E2E_REF_NONE) {
        SKIP_TEST("no python3 with numpy and scikit-learn");
        return;
    }
    fprintf(stderr, "  (expected below: a Python traceback for node 'missing', twice, and one FAIL line from "
                    "the helper)\n");
    CHECK(pft_e2e_ref_logreg(out, groups, 2, acc) == -1);
    int failed_before = pft_t_failed_checks, skips_before = pft_t_skips;
    int ok = pft_e2e_ref_logreg_or_report(out, groups, 2, acc);
    int failed = pft_t_failed_checks - failed_before, skipped = pft_t_skips - skips_before;
    pft_t_failed_checks = failed_before; /* the one failed check was the expected outcome */
    pft_t_skips = skips_before;
    CHECK_MSG(!ok && failed == 1 && skipped == 0, "helper: ok %d, %d failed checks, %d skips", ok, failed,
              skipped);
}

int main(void)
{
    snprintf(s_tmp, sizeof s_tmp, "/tmp/pft_test_e2e_ref_XXXXXX");
    if (!mkdtemp(s_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_reference_answers);
    RUN(test_failing_script_is_failure);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_tmp);
    return pft_test_done();
}
