/* Tests of pft_dataset (loading, label and shape errors, class gather, subset, concat) and pft_prep. */
#include "pft_alloc.h"
#include "pft_dataset.h"
#include "pft_error.h"
#include "pft_npy.h"
#include "pft_prep.h"
#include "pft_test.h"

#include <stdint.h>

static char s_dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int which;
    char *p = buf[which++ % 4];
    snprintf(p, 512, "%s/%s", s_dir, name);
    return p;
}

/* rc is an error whose message contains each of the (up to two) fragments. */
static void check_fails(int rc, const char *a, const char *b, int line)
{
    CHECK_MSG(rc < 0, "line %d: expected failure", line);
    CHECK_MSG(strstr(pft_errmsg(), a) != NULL, "line %d: message lacks '%s': %s", line, a, pft_errmsg());
    if (b)
        CHECK_MSG(strstr(pft_errmsg(), b) != NULL, "line %d: message lacks '%s': %s", line, b, pft_errmsg());
}
#define CHECK_FAILS(rc, a, b) check_fails((rc), (a), (b), __LINE__)

/* 6 rows × 3 features: row i = (i, 10 + i, -i); labels 2 0 1 2 2 0. */
static const int32_t s_y[6] = {2, 0, 1, 2, 2, 0};
static void fill_x(float *x)
{
    for (int i = 0; i < 6; i++) {
        x[3 * i] = (float)i;
        x[3 * i + 1] = 10.0f + (float)i;
        x[3 * i + 2] = -(float)i;
    }
}

static void write_pair(const char *xn, const char *yn, int rows, int labels, const int32_t *y)
{
    float x[18];
    fill_x(x);
    if (pft_npy_write_f32(tmp_path(xn), x, rows, 3) || pft_npy_write_i32(tmp_path(yn), y, labels))
        fprintf(stderr, "cannot write fixtures: %s\n", pft_errmsg());
}

static void test_load(void)
{
    write_pair("x.npy", "y.npy", 6, 6, s_y);
    pft_dataset_t *ds = NULL;
    CHECK(pft_npy_load_dataset(tmp_path("x.npy"), tmp_path("y.npy"), 0, &ds) == 0);
    if (!ds)
        return;
    CHECK(pft_dataset_n(ds) == 6 && pft_dataset_d(ds) == 3 && pft_dataset_n_classes(ds) == 3);
    CHECK(pft_dataset_x(ds)[3 * 4 + 1] == 14.0f && pft_dataset_y(ds)[2] == 1);
    int counts[3];
    pft_dataset_class_counts(ds, counts);
    CHECK(counts[0] == 2 && counts[1] == 1 && counts[2] == 3);
    pft_dataset_destroy(&ds);
    CHECK(ds == NULL);
    pft_dataset_destroy(&ds); /* safe twice */

    /* An explicit class count above max + 1 is kept (class 3, 4 have no rows). */
    CHECK(pft_npy_load_dataset(tmp_path("x.npy"), tmp_path("y.npy"), 5, &ds) == 0);
    CHECK(ds && pft_dataset_n_classes(ds) == 5);
    pft_dataset_destroy(&ds);
}

static void test_load_errors(void)
{
    pft_dataset_t *ds = (pft_dataset_t *)1;
    char x[512], y[512];
    snprintf(x, sizeof x, "%s", tmp_path("x.npy"));
    snprintf(y, sizeof y, "%s", tmp_path("y.npy"));
    write_pair("x.npy", "y.npy", 6, 6, s_y);
    CHECK_FAILS(pft_npy_load_dataset(x, y, 2, &ds), y, "row 0: label 2 is not below the class count 2");
    CHECK(ds == NULL);

    /* Row-count mismatch names both files. */
    write_pair("x5.npy", "y6.npy", 5, 6, s_y);
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("x5.npy"), tmp_path("y6.npy"), 0, &ds), tmp_path("x5.npy"),
                tmp_path("y6.npy"));

    int32_t neg[6] = {0, 1, -1, 0, 1, 0};
    write_pair("xn.npy", "yn.npy", 6, 6, neg);
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("xn.npy"), tmp_path("yn.npy"), 0, &ds), tmp_path("yn.npy"),
                "row 2: negative label -1");
    int32_t huge[6] = {0, 1, 2000000000, 0, 1, 0};
    write_pair("xh.npy", "yh.npy", 6, 6, huge);
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("xh.npy"), tmp_path("yh.npy"), 0, &ds), tmp_path("yh.npy"),
                "class limit");

    write_pair("x0.npy", "y0.npy", 0, 0, s_y);
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("x0.npy"), tmp_path("y0.npy"), 0, &ds), tmp_path("x0.npy"),
                "empty");

    /* Errors from the files themselves carry the file name. */
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("missing.npy"), y, 0, &ds), tmp_path("missing.npy"), NULL);
    CHECK_FAILS(pft_npy_load_dataset(x, tmp_path("missing.npy"), 0, &ds), tmp_path("missing.npy"), NULL);
    CHECK_FAILS(pft_npy_load_dataset(y, y, 0, &ds), y, "2-D"); /* labels given as features */
    CHECK_FAILS(pft_npy_load_dataset(x, x, 0, &ds), x, "labels of shape");
    float bad[18];
    fill_x(bad);
    bad[7] = NAN;
    pft_npy_write_f32(tmp_path("xnan.npy"), bad, 6, 3);
    CHECK_FAILS(pft_npy_load_dataset(tmp_path("xnan.npy"), y, 0, &ds), tmp_path("xnan.npy"),
                "row 2 column 1");
    CHECK(ds == NULL);
}

static void test_alloc_failures(void)
{
    write_pair("x.npy", "y.npy", 6, 6, s_y);
    int ok = 0;
    for (long k = 0; k < 40 && !ok; k++) {
        pft_dataset_t *ds = NULL;
        pft_alloc_fail_after(k);
        int rc = pft_npy_load_dataset(tmp_path("x.npy"), tmp_path("y.npy"), 0, &ds);
        pft_alloc_fail_after(-1);
        if (rc == 0) {
            ok = 1;
            CHECK(ds && pft_dataset_n(ds) == 6);
        } else {
            CHECK(rc == PFT_ENOMEM && ds == NULL);
        }
        pft_dataset_destroy(&ds);
    }
    CHECK(ok);
}

static pft_dataset_t *make_ds(void)
{
    float *x = pft_alloc(18 * sizeof(float));
    int32_t *y = pft_alloc(6 * sizeof(int32_t));
    fill_x(x);
    memcpy(y, s_y, sizeof s_y);
    pft_dataset_t *ds = NULL;
    CHECK(pft_dataset_wrap(&x, &y, 6, 3, 0, &ds) == 0);
    CHECK(x == NULL && y == NULL); /* ownership taken */
    return ds;
}

static void test_wrap(void)
{
    pft_dataset_t *ds = make_ds();
    CHECK(ds && pft_dataset_n_classes(ds) == 3);
    pft_dataset_destroy(&ds);

    /* On error the buffers are freed too (ASan's leak check verifies). */
    float *x = pft_alloc(18 * sizeof(float));
    int32_t *y = pft_alloc(6 * sizeof(int32_t));
    fill_x(x);
    memcpy(y, s_y, sizeof s_y);
    x[5] = INFINITY;
    CHECK_FAILS(pft_dataset_wrap(&x, &y, 6, 3, 0, &ds), "row 1 column 2", NULL);
    CHECK(x == NULL && y == NULL && ds == NULL);

    x = NULL;
    y = NULL;
    CHECK(pft_dataset_wrap(&x, &y, 0, 4, 3, &ds) == 0); /* empty dataset */
    CHECK(ds && pft_dataset_n(ds) == 0 && pft_dataset_x(ds) != NULL);
    pft_dataset_t *e = pft_dataset_new(0, 4, 1), *both = NULL;
    CHECK(pft_dataset_concat(ds, e, &both) == 0 && pft_dataset_n(both) == 0 &&
          pft_dataset_n_classes(both) == 3);
    pft_dataset_destroy(&both);
    pft_dataset_destroy(&e);
    pft_dataset_destroy(&ds);

    CHECK(pft_dataset_new(-1, 3, 2) == NULL && pft_dataset_new(3, 0, 2) == NULL &&
          pft_dataset_new(3, 3, 0) == NULL);
    ds = pft_dataset_new(2, 3, 4);
    CHECK(ds && pft_dataset_x(ds)[5] == 0.0f && pft_dataset_y(ds)[1] == 0);
    pft_dataset_destroy(&ds);
}

static void test_gather_subset_concat(void)
{
    pft_dataset_t *ds = make_ds();
    if (!ds)
        return;
    float *g = NULL;
    int m = -1;
    CHECK(pft_dataset_gather_class(ds, 2, &g, &m) == 0);
    CHECK(m == 3 && g);
    if (g) /* rows 0, 3, 4 in order */
        CHECK(g[0] == 0.0f && g[3] == 3.0f && g[4] == 13.0f && g[6] == 4.0f && g[8] == -4.0f);
    pft_free(g);
    CHECK(pft_dataset_gather_class(ds, 1, &g, &m) == 0 && m == 1 && g && g[1] == 12.0f);
    pft_free(g);
    CHECK_FAILS(pft_dataset_gather_class(ds, 3, &g, &m), "class 3", NULL);
    CHECK(g == NULL && m == 0);
    CHECK_FAILS(pft_dataset_gather_class(ds, -1, &g, &m), "class -1", NULL);

    int idx[4] = {5, 1, 1, 2};
    pft_dataset_t *sub = NULL;
    CHECK(pft_dataset_subset(ds, idx, 4, &sub) == 0);
    CHECK(sub && pft_dataset_n(sub) == 4 && pft_dataset_n_classes(sub) == 3);
    if (sub) {
        const float *x = pft_dataset_x(sub);
        const int32_t *y = pft_dataset_y(sub);
        CHECK(x[0] == 5.0f && x[3] == 1.0f && x[6] == 1.0f && x[9] == 2.0f);
        CHECK(y[0] == 0 && y[1] == 0 && y[3] == 1);
        /* Class gather from an empty class of a subset. */
        CHECK(pft_dataset_gather_class(sub, 2, &g, &m) == 0 && g == NULL && m == 0);
    }
    int bad[2] = {0, 6};
    pft_dataset_t *none = (pft_dataset_t *)1;
    CHECK_FAILS(pft_dataset_subset(ds, bad, 2, &none), "index 6", NULL);
    CHECK(none == NULL);

    pft_dataset_t *cat = NULL;
    CHECK(pft_dataset_concat(ds, sub, &cat) == 0);
    CHECK(cat && pft_dataset_n(cat) == 10 && pft_dataset_d(cat) == 3);
    if (cat) {
        CHECK(pft_dataset_x(cat)[3 * 6] == 5.0f && pft_dataset_y(cat)[6] == 0 && pft_dataset_y(cat)[0] == 2);
        int counts[3];
        pft_dataset_class_counts(cat, counts);
        CHECK(counts[0] == 5 && counts[1] == 2 && counts[2] == 3); /* labels 2 0 1 2 2 0 + 0 0 0 1 */
    }
    pft_dataset_t *other = pft_dataset_new(2, 4, 7);
    CHECK_FAILS(pft_dataset_concat(ds, other, &none), "dimension 3 and 4", NULL);
    pft_dataset_destroy(&other);
    pft_dataset_destroy(&cat);
    pft_dataset_destroy(&sub);
    pft_dataset_destroy(&ds);
}

static void test_prep(void)
{
    for (int p = 0; p < 3; p++) {
        pft_prep_t q;
        CHECK(pft_prep_parse(pft_prep_name((pft_prep_t)p), &q) == 0 && (int)q == p);
    }
    CHECK(strcmp(pft_prep_name(PFT_PREP_SQRT_L2), "sqrt-l2") == 0);
    CHECK(pft_prep_name((pft_prep_t)7) == NULL);
    pft_prep_t q;
    CHECK_FAILS(pft_prep_parse("L2", &q), "'L2'", "none, l2, sqrt-l2");

    /* rows: (3, 4), (0, 0), (-4, 9, ...) */
    float x[3][3] = {{3, 4, 0}, {0, 0, 0}, {-4, 9, 0}};
    float a[3][3];
    memcpy(a, x, sizeof x);
    CHECK(pft_prep_apply(PFT_PREP_NONE, &a[0][0], 3, 3) == 0 && memcmp(a, x, sizeof x) == 0);
    CHECK(pft_prep_apply(PFT_PREP_L2, &a[0][0], 3, 3) == 0);
    CHECK_NEAR(a[0][0], 0.6, 1e-7);
    CHECK_NEAR(a[0][1], 0.8, 1e-7);
    CHECK(a[1][0] == 0.0f && a[1][1] == 0.0f && a[1][2] == 0.0f); /* zero row stays zero */
    CHECK_NEAR(a[2][0], -4.0 / sqrt(97.0), 1e-7);
    CHECK_NEAR(a[2][1], 9.0 / sqrt(97.0), 1e-7);
    memcpy(a, x, sizeof x);
    CHECK(pft_prep_apply(PFT_PREP_SQRT_L2, &a[0][0], 3, 3) == 0);
    CHECK_NEAR(a[0][0], sqrt(3.0) / sqrt(7.0), 1e-7);
    CHECK_NEAR(a[0][1], 2.0 / sqrt(7.0), 1e-7);
    CHECK_NEAR(a[2][0], -2.0 / sqrt(13.0), 1e-7); /* signed root: (-2, 3) / sqrt(13) */
    CHECK_NEAR(a[2][1], 3.0 / sqrt(13.0), 1e-7);
    CHECK(a[1][2] == 0.0f);
    CHECK(pft_prep_apply((pft_prep_t)9, &a[0][0], 3, 3) == PFT_EINVAL);
    CHECK(pft_prep_apply(PFT_PREP_L2, &a[0][0], -1, 3) == PFT_EINVAL);

    /* Through a dataset: every row of a normalised dataset has unit norm. */
    pft_dataset_t *ds = make_ds();
    if (!ds)
        return;
    CHECK(pft_dataset_apply_prep(ds, PFT_PREP_SQRT_L2) == 0);
    const float *z = pft_dataset_x(ds);
    for (int i = 1; i < 6; i++) {
        double s = 0;
        for (int j = 0; j < 3; j++)
            s += (double)z[3 * i + j] * z[3 * i + j];
        CHECK_NEAR(s, 1.0, 1e-6);
    }
    pft_dataset_destroy(&ds);
}

/* The bundled PACS features load as PROVENANCE.md describes them: float16 on disk, 2100 x 1280, 300 rows per
 * class (and 700 test rows, 100 per class); a class gathers its own rows. */
static void test_real_pacs(void)
{
    char x[4096], y[4096];
    snprintf(x, sizeof x, "%s", pft_test_example_data("train_x.npy"));
    snprintf(y, sizeof y, "%s", pft_test_example_data("train_y.npy"));
    pft_dataset_t *ds = NULL;
    CHECK_MSG(pft_npy_load_dataset(x, y, 0, &ds) == 0, "%s", pft_errmsg());
    if (!ds)
        return;
    CHECK(pft_dataset_n(ds) == 2100 && pft_dataset_d(ds) == 1280 && pft_dataset_n_classes(ds) == 7);
    int counts[7];
    pft_dataset_class_counts(ds, counts);
    for (int c = 0; c < 7; c++)
        CHECK(counts[c] == 300);
    float *g = NULL;
    int m = 0;
    CHECK(pft_dataset_gather_class(ds, 5, &g, &m) == 0 && m == 300);
    /* the gathered rows are class 5's rows, in order: its first row is the dataset's first row of class 5 */
    int first = -1;
    for (int i = 0; i < pft_dataset_n(ds) && first < 0; i++)
        first = pft_dataset_y(ds)[i] == 5 ? i : -1;
    CHECK(g && first >= 0 && memcmp(g, pft_dataset_x(ds) + (size_t)first * 1280, 1280 * sizeof(float)) == 0);
    pft_free(g);
    pft_dataset_destroy(&ds);
    snprintf(x, sizeof x, "%s", pft_test_example_data("test_x.npy"));
    snprintf(y, sizeof y, "%s", pft_test_example_data("test_y.npy"));
    CHECK_MSG(pft_npy_load_dataset(x, y, 7, &ds) == 0, "%s", pft_errmsg());
    if (!ds)
        return;
    CHECK(pft_dataset_n(ds) == 700 && pft_dataset_d(ds) == 1280);
    pft_dataset_class_counts(ds, counts);
    for (int c = 0; c < 7; c++)
        CHECK(counts[c] == 100);
    pft_dataset_destroy(&ds);
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/pft_test_dataset_XXXXXX");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_load);
    RUN(test_load_errors);
    RUN(test_alloc_failures);
    RUN(test_wrap);
    RUN(test_gather_subset_concat);
    RUN(test_prep);
    RUN(test_real_pacs);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    return pft_test_done();
}
