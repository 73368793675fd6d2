/* Tests of pft_baseline: ensemble and average of hand-made heads, KD on Gaussian blobs, the run's
 * destination, every launcher key (nodes without rows included), and `pftnet launch` on a two-node
 * label-shift topology. */
#include "pft_baseline.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_npy.h"
#include "pft_rng.h"
#include "pft_e2e_run.h"
#include "pft_test.h"

#include <jansson.h>
#include <sys/wait.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"

static char s_tmp[256];

/* Rows of the given blobs (5-D, class c centred at 8·e_c, unit noise), n_per each, as a dataset of 3 classes.
 */
static pft_dataset_t *blobs(const int *classes, int n_classes, int n_per, uint64_t seed)
{
    pft_dataset_t *ds = pft_dataset_new(n_classes * n_per, 5, 3);
    pft_rng_t *r = pft_rng_new(seed);
    if (!ds || !r) {
        pft_dataset_destroy(&ds);
        pft_rng_destroy(&r);
        return NULL;
    }
    float *x = pft_dataset_x_mut(ds);
    int32_t *y = pft_dataset_y_mut(ds);
    for (int c = 0; c < n_classes; c++)
        for (int i = 0; i < n_per; i++) {
            int row = c * n_per + i;
            for (int j = 0; j < 5; j++)
                x[row * 5 + j] = (float)(pft_rng_normal(r) + (j == classes[c] ? 8.0 : 0.0));
            y[row] = classes[c];
        }
    pft_rng_destroy(&r);
    return ds;
}

/* Head A: logits (x0, 0); head B: logits (0, x1). Per row the more confident head decides. */
static void test_ensemble_average(void)
{
    const float wa[2 * 3] = {1, 0, 0, 0, 0, 0}, wbb[2 * 3] = {0, 0, 0, 0, 1, 0};
    pft_head_t *a = NULL, *b = NULL, *avg = NULL, *odd = NULL;
    CHECK(pft_head_from_weights(2, 2, wa, &a) == 0 && pft_head_from_weights(2, 2, wbb, &b) == 0);
    pft_dataset_t *ds = pft_dataset_new(4, 2, 2);
    if (!a || !b || !ds)
        goto done;
    /* A: 0 (0.95), 1 (0.55), 0 (0.62), 0 (0.98); B: 1 (0.62), 1 (0.98), 1 (0.95), 1 (0.73) */
    const float x[4][2] = {{3, 0.5f}, {-0.2f, 4}, {0.5f, 3}, {4, 1}};
    const int32_t y[4] = {0, 1, 1, 1};
    memcpy(pft_dataset_x_mut(ds), x, sizeof x);
    memcpy(pft_dataset_y_mut(ds), y, sizeof y);
    const pft_head_t *both[2] = {a, b};
    double acc = -1, acc_a, acc_b;
    CHECK(pft_baseline_ensemble_accuracy(both, 2, ds, &acc) == 0);
    CHECK(pft_head_accuracy(a, &x[0][0], y, 4, &acc_a) == 0 &&
          pft_head_accuracy(b, &x[0][0], y, 4, &acc_b) == 0);
    CHECK(acc == 0.75 && acc_a == 0.5 && acc_b == 0.75); /* rows 1, 2, 3 right; row 4 goes to A, wrongly */
    CHECK(pft_baseline_ensemble_accuracy(both, 1, ds, &acc) == 0 && acc == acc_a);

    CHECK(pft_baseline_average_head(both, 2, &avg) == 0);
    if (avg) {
        const float want[6] = {0.5f, 0, 0, 0, 0.5f, 0};
        CHECK(memcmp(pft_head_weights(avg), want, sizeof want) == 0);
    }
    const float w3[3 * 3] = {0};
    CHECK(pft_head_from_weights(3, 2, w3, &odd) == 0);
    const pft_head_t *mixed[2] = {a, odd};
    pft_head_t *none = (pft_head_t *)1;
    CHECK(pft_baseline_average_head(mixed, 2, &none) == PFT_EINVAL && none == NULL);
    CHECK(pft_baseline_ensemble_accuracy(mixed, 2, ds, &acc) == PFT_EINVAL);
    CHECK(pft_baseline_ensemble_accuracy(both, 0, ds, &acc) == PFT_EINVAL);
done:
    pft_head_destroy(&a);
    pft_head_destroy(&b);
    pft_head_destroy(&avg);
    pft_head_destroy(&odd);
    pft_dataset_destroy(&ds);
}

/* The destination holds blobs 0 and 1, the teacher all three: the distilled student beats the plain local
 * head on a test set of all three blobs at some temperature; the result is deterministic for a seed. */
static void test_kd(void)
{
    const int c01[2] = {0, 1}, c012[3] = {0, 1, 2};
    pft_dataset_t *dst = blobs(c01, 2, 80, 1), *tch = blobs(c012, 3, 80, 2), *test = blobs(c012, 3, 100, 3);
    pft_head_t *teacher = NULL, *local = NULL;
    CHECK(dst && tch && test);
    if (!dst || !tch || !test)
        goto done;
    CHECK(pft_baseline_head(tch, 3, 1.0, &teacher) == 0);
    CHECK(pft_baseline_head(dst, 3, 1.0, &local) == 0);
    if (!teacher || !local)
        goto done;
    double acc_local;
    CHECK(pft_head_accuracy(local, pft_dataset_x(test), pft_dataset_y(test), 300, &acc_local) == 0);
    const pft_head_t *ts[1] = {teacher};
    pft_baseline_kd_t kd, again;
    CHECK(pft_baseline_kd(dst, ts, 1, test, 3, 1.0, 42, &kd) == 0);
    CHECK(pft_baseline_kd(dst, ts, 1, test, 3, 1.0, 42, &again) == 0);
    CHECK(memcmp(&kd, &again, sizeof kd) == 0);
    CHECK(kd.n_val == 32);
    double best = 0;
    int chosen = -1;
    for (int t = 0; t < PFT_BASELINE_KD_N_TEMPS; t++) {
        fprintf(stderr, "  T = %g: validation %.3f, test %.3f\n", pft_baseline_kd_temps[t],
                kd.val_accuracy[t], kd.test_accuracy[t]);
        CHECK(kd.val_accuracy[t] >= 0 && kd.val_accuracy[t] <= 1);
        CHECK(kd.test_accuracy[t] >= 0 && kd.test_accuracy[t] <= 1);
        best = fmax(best, kd.test_accuracy[t]);
        if (kd.temperature == pft_baseline_kd_temps[t])
            chosen = t;
    }
    CHECK(chosen >= 0 && kd.accuracy == kd.test_accuracy[chosen]);
    for (int t = 0; chosen >= 0 && t < PFT_BASELINE_KD_N_TEMPS; t++) /* the first best on validation */
        CHECK(t < chosen ? kd.val_accuracy[t] < kd.val_accuracy[chosen]
                         : kd.val_accuracy[t] <= kd.val_accuracy[chosen]);
    fprintf(stderr, "  local head %.3f, KD %.3f at T = %g\n", acc_local, kd.accuracy, kd.temperature);
    CHECK(acc_local <= 2.0 / 3.0 + 1e-12);
    CHECK(best > acc_local + 0.2);
    CHECK(pft_baseline_kd(dst, ts, 0, test, 3, 1.0, 42, &kd) == PFT_EINVAL);
done:
    pft_head_destroy(&teacher);
    pft_head_destroy(&local);
    pft_dataset_destroy(&dst);
    pft_dataset_destroy(&tch);
    pft_dataset_destroy(&test);
}

static int destination_of(const char *edges)
{
    char path[512], text[1024];
    snprintf(path, sizeof path, "%s/dest.dot", s_tmp);
    snprintf(text, sizeof text, "digraph g { dataset = \"%s\"; %s }\n", EXAMPLE_DATA, edges);
    FILE *f = fopen(path, "w");
    if (!f)
        return -2;
    fputs(text, f);
    fclose(f);
    pft_topo_t *t = NULL;
    int rc = pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t);
    CHECK_MSG(rc == 0, "%s: %s", edges, pft_errmsg());
    int d = rc ? -2 : pft_baseline_destination(t);
    pft_topo_destroy(&t);
    return d;
}

static void test_destination(void)
{
    CHECK(destination_of("a -> b -> c;") == 2);
    CHECK(destination_of("a -> c; b -> c;") == 1);  /* node index = first appearance: a, c, b */
    CHECK(destination_of("c -> a; c -> b;") == -1); /* two sinks */
    CHECK(destination_of("start = a; a -> b -> c -> a;") == -1);
}

static double jnum(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* Every key, with a node that holds no rows: it is no ensemble member, teacher or local-only entry. */
static void test_all_keys(void)
{
    const int c01[2] = {0, 1}, c2[1] = {2}, c012[3] = {0, 1, 2};
    pft_dataset_t *a = blobs(c01, 2, 40, 4), *b = blobs(c2, 1, 30, 5), *e = pft_dataset_new(0, 5, 3);
    pft_dataset_t *test = blobs(c012, 3, 50, 6);
    CHECK(a && b && e && test);
    if (!a || !b || !e || !test)
        goto done;
    const pft_baseline_node_t nodes[3] = {{"a", a}, {"b", b}, {"agg", e}};
    const long head_bytes = 3 * 6 * 4;
    /* the ensemble and the average of the two heads with rows, built here by the parts */
    pft_head_t *ha = NULL, *hb = NULL, *avg = NULL;
    double want_ens = -1, want_avg = -1;
    CHECK(pft_baseline_head(a, 3, 1.0, &ha) == 0 && pft_baseline_head(b, 3, 1.0, &hb) == 0);
    const pft_head_t *two[2] = {ha, hb};
    CHECK(ha && hb && pft_baseline_ensemble_accuracy(two, 2, test, &want_ens) == 0);
    CHECK(ha && hb && pft_baseline_average_head(two, 2, &avg) == 0);
    CHECK(avg && pft_head_accuracy(avg, pft_dataset_x(test), pft_dataset_y(test), 150, &want_avg) == 0);
    pft_head_destroy(&ha);
    pft_head_destroy(&hb);
    pft_head_destroy(&avg);
    fprintf(stderr, "  ensemble %.4f, average %.4f\n", want_ens, want_avg);
    for (int dest = -1; dest < 3; dest++) {
        json_t *o = json_object();
        int rc = pft_baseline_all(nodes, 3, test, 3, 1.0, dest, 7, o);
        CHECK_MSG(rc == 0, "dest %d: %s", dest, pft_errmsg());
        json_t *lo = json_object_get(o, "local_only");
        CHECK(json_array_size(lo) == 3);
        CHECK(json_is_null(json_object_get(json_array_get(lo, 2), "accuracy_global")));
        double la = jnum(json_array_get(lo, 0), "accuracy_global"),
               lb = jnum(json_array_get(lo, 1), "accuracy_global");
        CHECK_NEAR(la, 2.0 / 3.0, 1e-12);
        CHECK_NEAR(lb, 1.0 / 3.0, 1e-12);
        CHECK_NEAR(jnum(o, "local_only_mean"), 0.5, 1e-12);
        CHECK(jnum(o, "centralized") == 1.0 && jint(o, "centralized_n_train") == 110);
        /* without a destination the largest node (a, 80 rows) keeps its rows */
        long moved = dest == 0 ? 30 : dest == 1 ? 80 : 110 - (dest == -1 ? 80 : 0);
        CHECK(jint(o, "centralized_bytes") == moved * 5 * 4);
        CHECK(jint(o, "head_bytes") == head_bytes);
        CHECK(jint(o, "ensemble_bytes") == head_bytes && jint(o, "average_bytes") == head_bytes);
        CHECK(jnum(o, "ensemble") == want_ens && jnum(o, "average") == want_avg);
        CHECK(jnum(o, "kd_alpha") == 0.5);
        json_t *kd = json_object_get(o, "kd");
        if (dest == 0 || dest == 1) {
            CHECK(json_is_real(kd) && json_real_value(kd) > 0 && json_real_value(kd) <= 1);
            CHECK(jint(o, "kd_bytes") == head_bytes); /* one teacher: the empty node teaches nothing */
            CHECK(strcmp(json_string_value(json_object_get(o, "kd_node")), dest ? "b" : "a") == 0);
            CHECK(json_object_size(json_object_get(o, "kd_by_temperature")) == 3);
            char key[32];
            snprintf(key, sizeof key, "%g", jnum(o, "kd_temperature"));
            CHECK(jnum(json_object_get(o, "kd_by_temperature"), key) == json_real_value(kd));
        } else {
            CHECK(json_is_null(kd) && json_is_null(json_object_get(o, "kd_by_temperature")));
            CHECK(json_is_null(json_object_get(o, "kd_bytes")));
            CHECK(dest == -1 ? json_is_null(json_object_get(o, "kd_node"))
                             : strcmp(json_string_value(json_object_get(o, "kd_node")), "agg") == 0);
        }
        CHECK(jnum(o, "seconds") >= 0);
        json_decref(o);
    }
    /* no node with rows */
    const pft_baseline_node_t empty[1] = {{"agg", e}};
    json_t *o = json_object();
    CHECK(pft_baseline_all(empty, 1, test, 3, 1.0, -1, 7, o) == PFT_EINVAL);
    json_decref(o);
done:
    pft_dataset_destroy(&a);
    pft_dataset_destroy(&b);
    pft_dataset_destroy(&e);
    pft_dataset_destroy(&test);
}

/* Rows in a node's training share, as the launcher wrote it. */
static long share_rows(const char *out, const char *id)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s/data/train_y.npy", out, id);
    int32_t *y = NULL;
    int64_t n = -1;
    if (pft_npy_read_i32(p, &y, &n) != 0)
        n = -1;
    pft_free(y);
    return (long)n;
}

/* pftnet launch on a two-node label shift (src holds classes 0-3, dst 4-6): every baseline key. */
static void test_launch_two_nodes(void)
{
    char topo[300], out[300], cmd[4096];
    snprintf(topo, sizeof topo, "%s/two.dot", s_tmp);
    snprintf(out, sizeof out, "%s/two", s_tmp);
    FILE *f = fopen(topo, "w");
    if (!f)
        return;
    fprintf(f,
            "digraph two {\n  dataset = \"%s\"; partition = \"labels:0-3|4-6\"; samples = 240; k = 2; cov = "
            "diag;\n"
            "  max_iter = 30; head_draws = 2; em_draws = 2; deadline = 120; send_deadline = 60;\n"
            "  src -> dst;\n}\n",
            EXAMPLE_DATA);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "PFTNODE=%s/node/pftnode %s/node/pftnet launch %s --out %s --quiet --json > %s.stdout "
             "2> %s.stderr",
             PFT_BINARY_DIR, PFT_BINARY_DIR, topo, out, out, out);
    int st = system(cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "launch failed (status %d), see %s.stderr", st, out);
    char path[600];
    snprintf(path, sizeof path, "%s/results.json", out);
    json_error_t err;
    json_t *r = json_load_file(path, 0, &err), *bl = json_object_get(r, "baselines");
    CHECK_MSG(bl != NULL, "%s: %s", path, err.text);
    if (!bl) {
        json_decref(r);
        return;
    }
    const long head_bytes = 7 * 1281 * 4, n_src = share_rows(out, "src"), n_dst = share_rows(out, "dst");
    fprintf(stderr,
            "  src %ld rows, dst %ld rows: centralized %.4f, local %.4f / %.4f, ensemble %.4f, average %.4f, "
            "KD %.4f (T = %g)\n",
            n_src, n_dst, jnum(bl, "centralized"),
            jnum(json_array_get(json_object_get(bl, "local_only"), 0), "accuracy_global"),
            jnum(json_array_get(json_object_get(bl, "local_only"), 1), "accuracy_global"),
            jnum(bl, "ensemble"), jnum(bl, "average"), jnum(bl, "kd"), jnum(bl, "kd_temperature"));
    CHECK(n_src == 240 && n_dst == 240);
    CHECK(jint(bl, "handoffs") == 1);
    CHECK(jint(bl, "centralized_n_train") == n_src + n_dst);
    CHECK(jint(bl, "centralized_bytes") == n_src * 1280 * 4); /* dst is the destination: src's rows move */
    CHECK(jint(bl, "head_bytes") == head_bytes);
    CHECK(jint(bl, "ensemble_bytes") == head_bytes && jint(bl, "average_bytes") == head_bytes);
    CHECK(jint(bl, "kd_bytes") == head_bytes);
    const char *keys[4] = {"centralized", "ensemble", "average", "kd"};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(jnum(bl, keys[i]) > 0 && jnum(bl, keys[i]) <= 1, "%s = %g", keys[i], jnum(bl, keys[i]));
    CHECK(json_array_size(json_object_get(bl, "local_only")) == 2);
    CHECK(strcmp(json_string_value(json_object_get(bl, "kd_node")), "dst") == 0);
    CHECK(jnum(bl, "kd_alpha") == 0.5);
    json_t *by_t = json_object_get(bl, "kd_by_temperature");
    CHECK(json_object_size(by_t) == 3);
    const char *temps[3] = {"1", "5", "10"};
    for (int i = 0; i < 3; i++)
        CHECK(jnum(by_t, temps[i]) >= 0 && jnum(by_t, temps[i]) <= 1);
    char key[32];
    snprintf(key, sizeof key, "%g", jnum(bl, "kd_temperature"));
    CHECK(jnum(by_t, key) == jnum(bl, "kd"));
    json_decref(r);
}

int main(void)
{
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_baseline") != 0)
        return 1;
    RUN(test_ensemble_average);
    RUN(test_kd);
    RUN(test_destination);
    RUN(test_all_keys);
    RUN(test_launch_two_nodes);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
