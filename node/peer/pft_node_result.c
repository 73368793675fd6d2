/* pft_node_result: the head (trained on the last stage's union, evaluated) and result.json. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_head.h"
#include "pft_log.h"
#include "pft_npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Serves the transport between steps of a long computation (the head's L-BFGS iterations), so that an
 * acknowledgement arriving meanwhile is read and retransmissions go out while the successor is still up.
 * libzmq drops a reply still queued on a DEALER (ZMQ_IMMEDIATE) once its peer disconnects: a node that polled
 * only after training lost the ACK of a successor that finished first, and waited out send_deadline. */
void pft_node__result_serve(void *ctx)
{
    node_t *nd = ctx;
    if (!nd->tp)
        return;
    (void)pft_transport_poll(nd->tp, 0); /* a failure here shows again in finish_sends */
    pft_node__outbox_save_acks(nd);
}

#ifdef PFT_TEST_HOOKS
/* Test hook: PFT_TEST_BUSY=<id>:<ms>[:deaf] makes node <id> busy for ms before training its head, serving the
 * transport as training does (to test a successor that finishes first), or with :deaf not serving it (a node
 * whose computation leaves no chance to read an ACK: its successor must stay reachable for a retransmission).
 */
static void busy_point(node_t *nd)
{
    const char *v = getenv("PFT_TEST_BUSY");
    size_t n = strlen(nd->me->id);
    if (!v || strncmp(v, nd->me->id, n) != 0 || v[n] != ':')
        return;
    int deaf = strstr(v + n + 1, ":deaf") != NULL;
    pft_warn("test hook: busy for %g ms%s", atof(v + n + 1), deaf ? " without serving the transport" : "");
    for (double end = pft_fsio_now() + atof(v + n + 1) / 1000; pft_fsio_now() < end;) {
        usleep(50000);
        if (!deaf)
            pft_node__result_serve(nd);
    }
}
#else
#define busy_point(nd) ((void)0)
#endif

/* The softmax head's predictions (pft_node__result_evaluate's predictor). */
static int head_predict(const void *model, const float *x, int n, int32_t *pred)
{
    return pft_head_predict(model, x, n, pred);
}

/* Trains the head on head_rows, evaluates it, writes head.npy; fills result fields. */
int pft_node__result_train_head(node_t *nd, json_t *res)
{
    if (nd->me->head == PFT_TOPO_HEAD_GAUSSIAN)
        return pft_node__stats_train_head(nd, res);
    pft_node__set_status(nd, "training", NULL);
    int d = pft_dataset_d(nd->train);
    if (nd->head_rows.n == 0)
        return pft_err(PFT_EINVAL, "no training rows for the head");
    pft_head_opts_t ho;
    pft_head_opts_default(&ho);
    ho.l2 = 1.0 / (nd->run->head_c * nd->head_rows.weight); /* the represented rows: the rows' weights */
    ho.on_iter = pft_node__result_serve;
    ho.on_iter_ctx = nd;
    pft_head_t *head = NULL;
    pft_head_info_t info;
    busy_point(nd);
    pft_node__result_serve(nd); /* an ACK that arrived while the rows were drawn: read it before the fit */
    double t0 = pft_fsio_now();
    int rc = pft_head_fit_weighted(nd->head_rows.x, nd->head_rows.y,
                                   pft_node__rows_all_unit(&nd->head_rows) ? NULL : nd->head_rows.w,
                                   nd->head_rows.n, d, nd->n_classes, &ho, &head, &info);
    nd->head_seconds = pft_fsio_now() - t0;
    int head_rows = nd->head_rows.n;
    pft_node__rows_free(&nd->head_rows); /* memory: the node may stay up a while (acknowledgements, linger) */
    if (rc)
        return pft_err_wrap(rc, "training the head on %d rows", head_rows);
    pft_info("head trained on %d rows (%d real, %d synthetic) in %.2fs, %d L-BFGS iterations",
             head_rows, nd->n_real, nd->n_synthetic, nd->head_seconds, info.iters);
    char *path = pft_fsio_join(nd->args->out_dir, "head.npy");
    if (!path) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    rc = pft_npy_write_f32(path, pft_head_weights(head), nd->n_classes, d + 1);
    if (rc)
        goto done;
    rc = pft_node__result_evaluate(nd, res, head_predict, head);
    if (rc)
        goto done;
    json_object_set_new(res, "head_iters", json_integer(info.iters));
    json_object_set_new(res, "head_rows", json_integer(head_rows));
done:
    pft_free(path);
    pft_head_destroy(&head);
    return rc;
}

static json_t *provenance_json(const pft_bundle_t *b)
{
    json_t *arr = json_array();
    for (int i = 0; b && i < pft_bundle_prov_n_nodes(b); i++) {
        json_t *counts = json_object();
        for (int j = 0; j < pft_bundle_prov_n_labels(b, i); j++) {
            int label;
            uint64_t count;
            char key[16];
            pft_bundle_prov_entry(b, i, j, &label, &count);
            snprintf(key, sizeof key, "%d", label);
            json_object_set_new(counts, key, json_integer((json_int_t)count));
        }
        json_t *e = json_pack("{s:s,s:o}", "node", pft_bundle_prov_node(b, i), "counts", counts);
        double eps, delta;
        if (pft_bundle_prov_dp(b, i, &eps, &delta))
            json_object_set_new(e, "dp", json_pack("{s:f,s:f}", "epsilon", eps, "delta", delta));
        json_array_append_new(arr, e);
    }
    return arr;
}

/* What the node's output guarantees each contributor: its data entered under (ε, δ)-DP (post-processing keeps
 * it), or without DP. "all_dp" is true when every contributor's data is protected. */
static json_t *privacy_json(const pft_bundle_t *b)
{
    json_t *per = json_object();
    int all = b && pft_bundle_prov_n_nodes(b) > 0;
    double worst_eps = 0, worst_delta = 0;
    for (int i = 0; b && i < pft_bundle_prov_n_nodes(b); i++) {
        double eps, delta;
        if (pft_bundle_prov_dp(b, i, &eps, &delta)) {
            json_object_set_new(per, pft_bundle_prov_node(b, i),
                                json_pack("{s:f,s:f}", "epsilon", eps, "delta", delta));
            worst_eps = eps > worst_eps ? eps : worst_eps;
            worst_delta = delta > worst_delta ? delta : worst_delta;
        } else {
            json_object_set_new(per, pft_bundle_prov_node(b, i), json_null());
            all = 0;
        }
    }
    json_t *o = json_pack("{s:b,s:o}", "all_dp", all, "per_node", per);
    if (all)
        json_object_set_new(o, "worst", json_pack("{s:f,s:f}", "epsilon", worst_eps, "delta", worst_delta));
    return o;
}

/* This process's peak resident memory (VmHWM), kB; 0 if unknown. */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* The sends, as result.json lists them. */
static json_t *sends_json(const node_t *nd)
{
    json_t *sends = json_array();
    for (size_t i = 0; i < nd->n_out; i++) {
        int rc = 0;
        const char *reason = NULL;
        int st = pft_node__outbox_state(nd, &nd->out[i], &rc, &reason);
        json_t *o = json_pack("{s:s,s:i,s:s,s:I,s:s,s:s,s:b}", "to", nd->out[i].to, "lap", nd->out[i].lap,
                              "bundle_id", nd->out[i].id_hex, "bytes", (json_int_t)nd->out[i].bytes, "state",
                              pft_node__outbox_state_name(st), "reason", reason ? reason : "", "fell_back",
                              nd->out[i].fell_back);
        if (nd->out[i].instead_of)
            json_object_set_new(o, "fallback_for", json_string(nd->out[i].instead_of));
        json_array_append_new(sends, o);
    }
    return sends;
}

/* The inbound hand-offs: what arrived into recv, whose bundle never did into missing. */
static void inbound_json(const node_t *nd, json_t *recv, json_t *missing)
{
    for (size_t i = 0; i < nd->n_in; i++) {
        const inbound_t *s = &nd->in[i];
        if (s->bundle) {
            char hex[2 * PFT_BUNDLE_ID_LEN + 1];
            json_array_append_new(recv, json_pack("{s:s,s:s,s:b,s:s,s:I,s:b}", "from", s->from, "producer",
                                                  s->producer, "complete", s->complete, "bundle_id",
                                                  pft_bundle_id_hex(s->id, hex), "bytes", (json_int_t)s->len,
                                                  "via_fallback", s->via_fallback));
        } else if (s->missing) {
            json_array_append_new(missing, json_string(s->from));
        }
    }
}

/* Completes nd->dp (what the releases were) with the clipped rows and the ledger. */
static void dp_json(node_t *nd)
{
    json_object_set_new(nd->dp, "clipped_rows", json_integer(nd->dp_clipped));
    json_object_set_new(nd->dp, "budget",
                        json_pack("{s:f,s:f,s:i}", "eps_spent", nd->budget.eps_spent, "delta_spent",
                                  nd->budget.delta_spent, "releases", nd->budget.releases));
    if (isfinite(nd->budget.eps_total))
        json_object_set_new(json_object_get(nd->dp, "budget"), "eps_total", json_real(nd->budget.eps_total));
}

int pft_node__result_floor_reset(node_t *nd)
{
    json_decref(nd->floor);
    nd->floor = json_pack("{s:o,s:o}", "min_released_rows", json_object(), "withheld_classes", json_array());
    return nd->floor ? 0 : pft_err(PFT_ENOMEM, "out of memory");
}

void pft_node__result_withhold(node_t *nd, int c, uint64_t rows, const char *what)
{
    pft_info("class %d withheld from the bundle: its %s stands for %llu row(s), fewer than min_rows = %d "
             "(the head still uses them)",
             c, what, (unsigned long long)rows, nd->me->min_rows);
    json_t *w = nd->floor ? json_object_get(nd->floor, "withheld_classes") : NULL;
    if (w)
        json_array_append_new(w, json_pack("{s:i,s:I}", "class", c, "rows", (json_int_t)rows));
}

int pft_node__result_is_withheld(const node_t *nd, int c)
{
    json_t *w = nd->floor ? json_object_get(nd->floor, "withheld_classes") : NULL, *e;
    size_t i;
    json_array_foreach(w, i, e)
    {
        if (json_integer_value(json_object_get(e, "class")) == c)
            return 1;
    }
    return 0;
}

/* Keeps the smaller of v and what o holds for label. */
static void keep_min(json_t *o, int label, double v)
{
    char key[16];
    snprintf(key, sizeof key, "%d", label);
    json_t *old = json_object_get(o, key);
    if (!old || v < json_number_value(old))
        json_object_set_new(o, key, json_real(v));
}

void pft_node__result_released(node_t *nd, const pft_bundle_t *b)
{
    json_t *o = nd->floor ? json_object_get(nd->floor, "min_released_rows") : NULL;
    if (!o)
        return;
    json_object_clear(o);
    if (pft_bundle_is_stats(b)) {
        for (int p = 0; p < pft_bundle_n_parts(b); p++) {
            const pft_gstat_t *st = pft_bundle_part_stats(b, p);
            for (int j = 0; j < pft_gstat_n_classes(st); j++)
                keep_min(o, pft_gstat_label(st, j), (double)pft_gstat_count(st, j));
        }
        return;
    }
    for (int ci = 0; ci < pft_bundle_n_classes(b); ci++) {
        const pft_gmm_t *g = pft_bundle_class_gmm(b, ci);
        const double *w = pft_gmm_weights(g);
        double n = (double)pft_bundle_class_count(b, ci);
        for (int k = 0; k < pft_gmm_k(g); k++)
            keep_min(o, pft_bundle_class_label(b, ci), n * w[k]);
    }
}

/* Fills res with the run's outcome and writes it to out/result.json (atomically). Returns 0 or an error code.
 */
int pft_node__result_write(node_t *nd, json_t *res, int exit_code)
{
    pft_transport_stats_t ts = {0};
    if (nd->tp)
        pft_transport_stats(nd->tp, &ts);
    json_t *sends = sends_json(nd), *recv = json_array(), *missing = json_array();
    inbound_json(nd, recv, missing);
    json_object_set_new(res, "id", json_string(nd->me->id));
    json_object_set_new(res, "role", json_string(pft_role_name(nd->me->role)));
    json_object_set_new(res, "kind", json_string(pft_kind_name(pft_topo_kind(nd->topo))));
    json_object_set_new(res, "run", json_string(nd->run->run));
    json_object_set_new(res, "exit_code", json_integer(exit_code));
    json_object_set_new(res, "status", json_string(exit_code == 0 ? "ok" : pft_node_exit_text(exit_code)));
    json_object_set_new(res, "k", json_integer(nd->me->k));
    json_object_set_new(res, "cov", json_string(pft_cov_name(nd->me->cov)));
    if (nd->me->cov == PFT_COV_LOWRANK)
        json_object_set_new(res, "cov_rank", json_integer(nd->me->cov_rank));
    json_object_set_new(res, "n_classes", json_integer(nd->n_classes));
    json_object_set_new(res, "n_real", json_integer(nd->n_real));
    json_object_set_new(res, "n_synthetic", json_integer(nd->n_synthetic));
    json_object_set_new(res, "bytes_sent", json_integer((json_int_t)ts.bytes_sent));
    json_object_set_new(res, "bytes_received", json_integer((json_int_t)ts.bytes_received));
    json_object_set_new(res, "retries", json_integer((json_int_t)ts.retries));
    json_object_set_new(res, "duplicates_dropped", json_integer((json_int_t)ts.duplicates));
    json_object_set_new(res, "rejected", json_integer(nd->rejected)); /* pft_node_refusal.c */
    json_object_set_new(res, "refusals", json_incref(nd->refusals));
    json_object_set_new(res, "secure", json_boolean(nd->keys != NULL));
    json_object_set_new(res, "handshakes_denied", json_integer(nd->handshakes_denied));
    json_object_set_new(res, "em_iters_mean",
                        json_real(nd->em_fits ? (double)nd->em_iters / nd->em_fits : 0));
    json_object_set_new(res, "em_seconds", json_real(nd->em_seconds));
    json_object_set_new(res, "em_rows_max", json_integer(nd->em_rows_max));
    json_object_set_new(res, "head_seconds", json_real(nd->head_seconds));
    json_object_set_new(res, "wall_seconds", json_real(pft_fsio_now() - nd->t_start));
    json_object_set_new(res, "peak_rss_kb", json_integer(peak_rss_kb()));
    json_object_set_new(res, "provenance", provenance_json(nd->knowledge));
    json_object_set_new(res, "privacy", privacy_json(nd->knowledge));
    json_object_set_new(res, "sent", sends);
    json_object_set_new(res, "received", recv);
    json_object_set_new(res, "missing", missing);
    json_object_set_new(res, "drift", json_incref(nd->drift));
    json_object_set_new(res, "min_rows", json_integer(nd->me->min_rows));
    if (nd->floor) {
        json_object_set(res, "min_released_rows", json_object_get(nd->floor, "min_released_rows"));
        json_object_set(res, "withheld_classes", json_object_get(nd->floor, "withheld_classes"));
    }
    json_t *noise =
        nd->dp ? json_object_get(nd->dp, "noise") : NULL; /* exact statistics (pft_node_stats.c) */
    if (noise) {
        json_object_set(res, "dp_noise", noise);
        json_object_del(nd->dp, "noise");
    }
    if (nd->me->dp_epsilon > 0 && nd->dp) {
        dp_json(nd);
        json_object_set_new(res, "dp", json_incref(nd->dp));
    }
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    char *path = pft_fsio_join(nd->args->out_dir, "result.json");
    int rc = text && path ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    free(text);
    pft_free(path);
    return rc;
}
