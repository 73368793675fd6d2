/* pft_node_eval: the global evaluation set (--eval-features/--eval-labels), checked at setup and scored block
 * by block. In a simulation every node scores the same file: reading it in blocks through the page cache
 * the processes share keeps each node's memory at one block instead of a private copy of the whole set
 * (Fashion-MNIST's 10,000 × 1280 test rows are 51 MB; 64 copies would be 3.3 GB). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_log.h"
#include "pft_npy.h"
#include "pft_npy_rows.h"
#include "pft_prep.h"

#include <math.h>

#define EVAL_BLOCK 1024 /* rows per block: 5 MB of float32 at d = 1280 */

/* Calls fn on each block of the evaluation set, prepared as the run prepares features. */
typedef int (*block_fn)(void *ctx, const float *x, const int32_t *y, int n);

static int for_each_block(const node_t *nd, block_fn fn, void *ctx)
{
    pft_npy_rows_t *r = NULL;
    int rc = pft_npy_rows_open(nd->args->eval_features, &r);
    if (rc)
        return rc;
    int n = pft_npy_rows_n(r), d = pft_npy_rows_cols(r);
    if (n != nd->eval.n || d != nd->eval.d) {
        rc = pft_err(PFT_EFORMAT, "%s changed since the node started (%d×%d, was %d×%d)",
                     nd->args->eval_features, n, d, nd->eval.n, nd->eval.d);
        pft_npy_rows_destroy(&r);
        return rc;
    }
    float *x = pft_alloc_array((size_t)EVAL_BLOCK * (size_t)d, sizeof *x);
    if (!x)
        rc = pft_err(PFT_ENOMEM, "out of memory for %d evaluation rows", EVAL_BLOCK);
    for (int i = 0; rc == 0 && i < n; i += EVAL_BLOCK) {
        int m = n - i < EVAL_BLOCK ? n - i : EVAL_BLOCK;
        rc = pft_npy_rows_read(r, i, m, x);
        if (rc == 0)
            rc = pft_prep_apply((pft_prep_t)nd->run->prep, x, m, d);
        if (rc == 0)
            rc = fn(ctx, x, nd->eval.y + i, m);
    }
    pft_free(x);
    pft_npy_rows_destroy(&r);
    return rc;
}

static int check_block(void *ctx, const float *x, const int32_t *y, int n)
{
    (void)ctx, (void)x, (void)y, (void)n; /* pft_npy_rows_read has checked every value is finite */
    return 0;
}

int pft_node__eval_setup(node_t *nd)
{
    const char *xp = nd->args->eval_features, *yp = nd->args->eval_labels;
    if (!xp)
        return 0;
    pft_npy_rows_t *r = NULL;
    int rc = pft_npy_rows_open(xp, &r);
    if (rc)
        return rc;
    nd->eval.n = pft_npy_rows_n(r);
    nd->eval.d = pft_npy_rows_cols(r);
    pft_npy_rows_destroy(&r);
    int64_t ny = 0;
    if ((rc = pft_npy_read_i32(yp, &nd->eval.y, &ny)))
        return rc;
    if (ny != nd->eval.n)
        return pft_err(PFT_EFORMAT, "%s has %d rows but %s has %lld labels", xp, nd->eval.n, yp,
                       (long long)ny);
    nd->eval.classes = 0;
    for (int i = 0; i < nd->eval.n; i++) {
        if (nd->eval.y[i] < 0)
            return pft_err(PFT_EFORMAT, "%s: row %d: negative label %d", yp, i, nd->eval.y[i]);
        if (nd->eval.y[i] >= nd->eval.classes)
            nd->eval.classes = nd->eval.y[i] + 1;
    }
    return for_each_block(nd, check_block, NULL);
}

/* Accuracy counts of one scoring pass. */
typedef struct {
    pft_node__predictor_t predict;
    const void *model;
    int n_classes;
    int32_t *pred; /* EVAL_BLOCK predictions */
    long *correct; /* per class */
    long *total;   /* per class */
    long n, n_correct;
} tally_t;

static int tally_block(void *ctx, const float *x, const int32_t *y, int n)
{
    tally_t *t = ctx;
    int rc = t->predict(t->model, x, n, t->pred);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        int ok = t->pred[i] == y[i];
        t->n_correct += ok;
        if (y[i] < t->n_classes) {
            t->total[y[i]]++;
            t->correct[y[i]] += ok;
        }
    }
    t->n += n;
    return 0;
}

static json_t *class_acc_json(const tally_t *t)
{
    json_t *a = json_array();
    for (int c = 0; c < t->n_classes; c++)
        json_array_append_new(a, t->total[c] ? json_real((double)t->correct[c] / (double)t->total[c])
                                             : json_null());
    return a;
}

/* Scores the model on the node's test split (held in memory) or, k = 1, the evaluation set (in blocks). */
static int score_set(node_t *nd, int k, tally_t *t)
{
    if (k == 1)
        return for_each_block(nd, tally_block, t);
    const pft_dataset_t *s = nd->test;
    int n = pft_dataset_n(s), d = pft_dataset_d(s), rc = 0;
    for (int i = 0; rc == 0 && i < n; i += EVAL_BLOCK) {
        int m = n - i < EVAL_BLOCK ? n - i : EVAL_BLOCK;
        rc = tally_block(t, pft_dataset_x(s) + (size_t)i * (size_t)d, pft_dataset_y(s) + i, m);
    }
    return rc;
}

int pft_node__eval_score(node_t *nd, json_t *res, pft_node__predictor_t predict, const void *model)
{
    static const char *names[2] = {"accuracy_local", "accuracy_global"};
    static const char *pc_names[2] = {"per_class_accuracy_local", "per_class_accuracy_global"};
    int have[2] = {nd->test != NULL, nd->args->eval_features != NULL}, rc = 0;
    tally_t t = {.predict = predict, .model = model, .n_classes = nd->n_classes};
    t.pred = pft_alloc_array(EVAL_BLOCK, sizeof *t.pred);
    t.correct = pft_calloc((size_t)nd->n_classes, sizeof *t.correct);
    t.total = pft_calloc((size_t)nd->n_classes, sizeof *t.total);
    if (!t.pred || !t.correct || !t.total)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    for (int k = 0; rc == 0 && k < 2; k++) {
        if (!have[k]) {
            json_object_set_new(res, names[k], json_null());
            continue;
        }
        t.n = t.n_correct = 0;
        for (int c = 0; c < nd->n_classes; c++)
            t.correct[c] = t.total[c] = 0;
        if ((rc = score_set(nd, k, &t)))
            break;
        double a = t.n ? (double)t.n_correct / (double)t.n : 0;
        json_object_set_new(res, names[k], json_real(a));
        json_object_set_new(res, pc_names[k], class_acc_json(&t));
        pft_info("%s %.4f on %ld test rows", names[k], a, t.n);
    }
    if (rc && have[1])
        pft_err_wrap(rc, "scoring the head");
    pft_free(t.pred);
    pft_free(t.correct);
    pft_free(t.total);
    return rc;
}
