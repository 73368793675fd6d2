/* pft_node_head_logreg: the head `logreg`: multinomial logistic regression (the paper's linear softmax head)
 * trained by L-BFGS on the weighted rows the method prepared (own rows ∪ draws standing for the received
 * knowledge); head.npy holds its [W | b]. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_head.h"
#include "pft_log.h"
#include "pft_npy.h"

typedef struct {
    pft_head_t *head;
    pft_head_info_t info;
    int rows; /* rows it was trained on */
} logreg_t;

static void destroy(void **model)
{
    logreg_t *m = *model;
    if (m)
        pft_head_destroy(&m->head);
    pft_free(m);
    *model = NULL;
}

/* Trains on nd->head.rows (freed once trained: the node may stay up a while, for acknowledgements). */
static int fit(node_t *nd, void **model)
{
    int d = pft_dataset_d(nd->train);
    rows_t *r = &nd->head.rows;
    if (r->n == 0)
        return pft_err(PFT_EINVAL, "no training rows for the head");
    logreg_t *m = pft_calloc(1, sizeof *m);
    if (!m)
        return pft_err(PFT_ENOMEM, "out of memory");
    pft_head_opts_t ho;
    pft_head_opts_default(&ho);
    ho.l2 = 1.0 / (nd->run->head_c * r->weight); /* the represented rows: the rows' weights */
    ho.on_iter = pft_node__loop_yield;
    ho.on_iter_ctx = nd;
    pft_node__loop_yield(nd); /* an ACK that arrived while the rows were drawn: read it before the fit */
    double t0 = pft_fsio_now();
    int rc = pft_head_fit_weighted(r->x, r->y, pft_node__rows_all_unit(r) ? NULL : r->w, r->n, d,
                                   nd->n_classes, &ho, &m->head, &m->info);
    nd->tally.head_seconds = pft_fsio_now() - t0;
    m->rows = r->n;
    pft_node__rows_free(r);
    if (rc) {
        int rows = m->rows;
        destroy((void **)&m);
        return pft_err_wrap(rc, "training the head on %d rows", rows);
    }
    pft_info("head trained on %d rows (%d real, %d synthetic) in %.2fs, %d L-BFGS iterations", m->rows,
             nd->tally.n_real, nd->tally.n_synthetic, nd->tally.head_seconds, m->info.iters);
    *model = m;
    return 0;
}

static int predict(const void *model, const float *x, int n, int32_t *pred)
{
    return pft_head_predict(((const logreg_t *)model)->head, x, n, pred);
}

static int write(const node_t *nd, const void *model)
{
    char *path = pft_fsio_join(nd->args->out_dir, "head.npy");
    if (!path)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_npy_write_f32(path, pft_head_weights(((const logreg_t *)model)->head), nd->n_classes,
                               pft_dataset_d(nd->train) + 1);
    pft_free(path);
    return rc;
}

static void describe(const node_t *nd, const void *model, json_t *res)
{
    (void)nd;
    const logreg_t *m = model;
    json_object_set_new(res, "head_iters", json_integer(m->info.iters));
    json_object_set_new(res, "head_rows", json_integer(m->rows));
}

const pft_node_head_t pft_node__head_logreg = {
    .name = "logreg",
    .wants_stats = 0,
    .fit = fit,
    .predict = predict,
    .write = write,
    .describe = describe,
    .destroy = destroy,
};
