/* pft_node: one peer's run, stage by stage as the topology's plan says (DESIGN.md §2, §6).
 *
 * A stage waits for its inbound hand-offs (until their deadlines), then either refits with the run's
 * knowledge method — sampling (EM per class on the node's real features ∪ samples of every received bundle,
 * the paper's protocol) or exact (class statistics merged without loss, released through the release steps)
 * — or adopts a received complete bundle (ring or mesh lap 2), sends the result to its successors, and, in
 * the node's last stage, trains and evaluates the head. Inbound bundles are validated, written durably to
 * out/inbox/ and only then acknowledged. Sample counts come from provenance: a (node, class) already counted,
 * by the node's own data or an earlier bundle, is not counted again, so paths that rejoin (a diamond) add
 * each node's data once.
 *
 * This file holds the stage machine and pft_node_run; every wait goes through the one loop (pft_node_loop.c)
 * and what varies (method, head) through the tables chosen at setup; the files are listed in
 * pft_node_internal.h. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------- */
/* Stages. */

#ifdef PFT_TEST_HOOKS
/* The loop's condition of the after-forward hook: no send pending, or past the deadline in ctx. */
static int nothing_pending(node_t *nd, void *ctx)
{
    return pft_transport_pending(nd->hand.tp) == 0 || pft_fsio_now() > *(const double *)ctx;
}

/* Test hooks once a refit bundle is sent: retry-pending at once, after-forward once it is acknowledged (the
 * wait's bound, 300 s, only guards against a hang: on a loaded machine an ACK may take long). */
static void sent_point(node_t *nd, int rc)
{
    pft_node__crash_point("retry-pending");
    if (rc == 0 && getenv("PFT_CRASH_AT") && strcmp(getenv("PFT_CRASH_AT"), "after-forward") == 0) {
        double end = pft_fsio_now() + 300;
        (void)pft_node__loop_until(nd, nothing_pending, &end, 50);
        pft_node__crash_point("after-forward");
    }
}
#else
#define sent_point(nd, rc) ((void)0)
#endif

/* DP: an earlier run of this node sent a bundle for this stage and may have had it stored (its ACK unread):
 * the same bytes go again, never a fresh noise draw (the successor would refuse a different bundle for the
 * hand-off, and each draw spends the budget). The refit's own bundle *b is dropped; its head inputs stay
 * (they come from the node's rows). 1 when the stored bytes were sent, 0 when there are none, or an error
 * code. */
static int resend_earlier(node_t *nd, const pft_stage_t *st, pft_bundle_t **b)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!pft_node__outbox_earlier(nd, st, &buf, &len))
        return 0;
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    pft_bundle_t *stored = NULL;
    int rc = pft_bundle_decode(buf, len, &lim, &stored);
    if (rc != 0 || strcmp(pft_bundle_run_id(stored), nd->run->run) != 0 ||
        strcmp(pft_bundle_producer(stored), nd->me->id) != 0 ||
        pft_bundle_dim(stored) != pft_bundle_dim(*b) ||
        pft_bundle_flags(stored) != pft_bundle_flags(*b)) { /* not this run's, this stage's: a fresh draw */
        pft_warn("out/bundle.pftb is recorded as sent but is not this run's bundle for this stage: not used");
        pft_err_clear();
        pft_bundle_destroy(&stored);
        pft_free(buf);
        return 0;
    }
    if (rc == 0) {
        pft_warn(
            "DP: the bundle an earlier run sent (out/bundle.pftb) goes again, not a fresh noise draw; the "
            "ledger is not charged again");
        pft_node__set_status(nd, "sending", NULL);
        rc = pft_node__outbox_send(nd, st, buf, len);
    }
    if (rc == 0) {
        pft_node__loop_yield(nd);
        pft_bundle_destroy(b);
        pft_bundle_destroy(&nd->know.prov);
        nd->know.prov = pft_node__provenance_only(nd, stored);
        if (!nd->know.prov)
            nd->know.prov = stored, stored = NULL;
    }
    pft_bundle_destroy(&stored);
    pft_free(buf);
    return rc == 0 ? 1 : pft_err_wrap(rc, "sending the bundle an earlier run stored");
}

/* REFIT: a new bundle from own data and the received ones, charged to the DP ledger, signed, stored as
 * out/bundle.pftb and sent to the stage's successors; it becomes the node's knowledge. */
static int refit_stage(node_t *nd, size_t k, const pft_stage_t *st)
{
    const pft_handoff_t *h;
    pft_topo_handoffs(nd->topo, &h);
    int complete = 0;
    for (size_t j = 0; j < st->n_send; j++)
        complete |= h[st->send[j]].complete;
    pft_bundle_t *b = NULL;
    pft_info("stage %zu: refitting on own data and %zu received bundle(s)", k + 1, st->n_recv);
    int rc = nd->method->refit(nd, st, complete, &b);
    if (rc)
        return rc;
    if (nd->pipe.redraws && (rc = resend_earlier(nd, st, &b)) != 0) { /* 1: the stored bytes went */
        pft_bundle_destroy(&b);
        return rc < 0 ? rc : 0;
    }
    if (nd->pipe.noisy && (rc = pft_node__release_charge(nd)) != 0) {
        pft_bundle_destroy(&b);
        return rc;
    }
    if ((rc = pft_node__fp_stamp(nd, b)) != 0) {
        pft_bundle_destroy(&b);
        return rc;
    }
    if (nd->hand.kp && (rc = pft_keys_sign_bundle(nd->hand.kp, b)) != 0) {
        pft_bundle_destroy(&b);
        return pft_err_wrap(rc, "signing the bundle");
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    rc = pft_bundle_encode(b, &buf, &len);
    char *path = rc ? NULL : pft_fsio_join(nd->args->out_dir, "bundle.pftb");
    if (rc == 0)
        rc = path ? pft_fsio_write_atomic(path, buf, len) : PFT_ENOMEM;
    pft_free(path);
    if (rc == 0) {
        pft_node__set_status(nd, "sending", NULL);
        rc = pft_node__outbox_send(nd, st, buf, len);
    }
    if (rc == 0)
        pft_node__loop_yield(nd); /* transmit now, not after the head is trained */
    sent_point(nd, rc);
    pft_free(buf);
    pft_bundle_destroy(&nd->know.prov);
    nd->know.prov = pft_node__provenance_only(nd, b); /* sent: the encoded copy is in the outbox */
    if (nd->know.prov)
        pft_bundle_destroy(&b);
    else
        nd->know.prov = b;
    return rc;
}

/* The loop's condition while a node waits for a compute slot (ctx unused). */
static int slot_free(node_t *nd, void *ctx)
{
    (void)ctx;
    return pft_slots_try(nd->slots);
}

/* With --compute-slots: waits in the loop (answering peers) until one of the machine's slots is this node's;
 * it holds it through the stage's computation and the head (slot_give_back). */
static int slot_take(node_t *nd, size_t k)
{
    if (!nd->slots || pft_slots_held(nd->slots) >= 0)
        return 0;
    double t0 = pft_fsio_now();
    int rc = pft_slots_try(nd->slots);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        pft_node__set_status(nd, "queued", NULL);
        pft_alloc_trim(); /* a queue may be long: what the node freed need not stay resident meanwhile */
        rc = pft_node__loop_every(nd, slot_free, NULL,
                                  200 * pft_node__slot_scale(pft_topo_node_count(nd->topo)));
    } else {
        rc = 0;
    }
    if (rc == 0)
        pft_info("stage %zu: compute slot %d of %d taken after %.2fs", k + 1, pft_slots_held(nd->slots),
                 pft_slots_count(nd->slots), pft_fsio_now() - t0);
    return rc;
}

static void slot_give_back(node_t *nd, size_t k)
{
    if (!nd->slots || pft_slots_held(nd->slots) < 0)
        return;
    pft_info("stage %zu: compute slot %d given back", k + 1, pft_slots_held(nd->slots));
    pft_slots_give_back(nd->slots);
}

/* A final stage's head takes the node's knowledge (s: the complete bundle, or none) once a slot is its own. */
static int adopt_in_slot(node_t *nd, size_t k, inbound_t *s)
{
    int rc = slot_take(nd, k);
    return rc ? rc : nd->method->adopt(nd, s);
}

/* FORWARD: the complete bundle (ring or mesh lap 2), stored as out/complete.pftb and passed on unchanged to
 * every successor of the stage; in the final stage the head's rows come from it. Without it, a final stage's
 * head uses own data only, and the node's knowledge (result.json's provenance) says so. */
static int forward_stage(node_t *nd, size_t k, const pft_stage_t *st)
{
    inbound_t *s = pft_node__inbox_complete(nd, st);
    if (!s) {
        pft_warn("stage %zu: no complete bundle arrived; the head uses own data only", k + 1);
        if (!st->final)
            return 0;
        pft_bundle_destroy(&nd->know.prov);
        if (!(nd->know.prov = pft_node__own_provenance(nd)))
            return pft_err(PFT_ENOMEM, "out of memory");
        return adopt_in_slot(nd, k, &(inbound_t){.bundle = NULL});
    }
    char *path = pft_fsio_join(nd->args->out_dir, "complete.pftb");
    int rc = path ? pft_fsio_write_atomic(path, s->bytes, s->len) : PFT_ENOMEM;
    pft_free(path);
    if (rc == 0 && st->n_send)
        rc = pft_node__outbox_send(nd, st, s->bytes, s->len);
    if (rc == 0 && st->n_send)
        pft_node__loop_yield(nd);
    if (rc == 0 && st->final) /* passed on first: the next node need not wait for this one's slot */
        rc = adopt_in_slot(nd, k, s);
    if (rc == 0) {
        pft_bundle_destroy(&nd->know.prov);
        nd->know.prov = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, pft_dataset_d(nd->train));
        rc = nd->know.prov ? pft_bundle_prov_merge(nd->know.prov, s->bundle) : PFT_ENOMEM;
    }
    return rc;
}

static int run_stage(node_t *nd, size_t k, const pft_stage_t *st)
{
    int rc = pft_node__loop_until(nd, pft_node__inbox_ready, (void *)st, 200);
    if (rc == 0) /* an opener whose group lost members: the declaration and the survivors' reveals */
        rc = pft_node__loop_until(nd, pft_node__dropout_ready, (void *)st, 200);
    if (rc == 0 && st->action == PFT_WHAT_REFIT) /* a forward takes its slot once the bundle is on its way */
        rc = slot_take(nd, k);
    if (rc)
        return rc;
    nd->tally.n_real = nd->tally.n_synthetic = 0; /* result.json reports the last stage's union */
    rc = st->action == PFT_WHAT_REFIT ? refit_stage(nd, k, st) : forward_stage(nd, k, st);
    if (rc == 0 && st->action == PFT_WHAT_REFIT && st->final && nd->method->after_send)
        rc = nd->method->after_send(nd); /* the bundle is on its way: the rest is for the own head */
    pft_node__inbox_release(nd, st);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* The run. */

static int exit_for(int rc)
{
    switch (rc) {
#define PFT_X_EXIT_FOR(err, code)                                                                            \
    case err:                                                                                                \
        return code;
        PFT_NODE_EXIT_FOR_ERROR(PFT_X_EXIT_FOR)
#undef PFT_X_EXIT_FOR
    default:
        return PFT_EXIT_INTERNAL;
    }
}

/* Logs the pending error message and returns code (an exit code). */
static int fail(int code)
{
    pft_error("%s", pft_errmsg());
    return code;
}

static void node_free(node_t *nd)
{
    pft_transport_destroy(&nd->hand.tp);
    for (size_t i = 0; nd->hand.in && i < nd->hand.n_in; i++) {
        pft_bundle_destroy(&nd->hand.in[i].bundle);
        pft_free(nd->hand.in[i].bytes);
    }
    pft_free(nd->hand.in);
    for (size_t i = 0; nd->hand.out && i < nd->hand.n_out; i++)
        pft_free(nd->hand.out[i].msg);
    pft_free(nd->hand.out);
    pft_free(nd->own_counts);
    pft_free(nd->hand.inbox_dir);
    pft_node__rows_free(&nd->head.rows);
    pft_gstat_destroy(&nd->head.stats);
    PFT_FREE(nd->head.extra);
    PFT_FREE(nd->head.extra_means);
    PFT_FREE(nd->head.ev);
    PFT_FREE(nd->head.ev_against);
    pft_bundle_destroy(&nd->know.prov);
    pft_dataset_destroy(&nd->train);
    pft_dataset_destroy(&nd->test);
    PFT_FREE(nd->eval.y);
    pft_topo_destroy(&nd->topo);
    pft_topo_fp_destroy(&nd->fp);
    json_decref(nd->know.drift);
    json_decref(nd->dp.info);
    json_decref(nd->refusal.reasons);
    pft_node__floor_free(&nd->know.floor);
    pft_rng_destroy(&nd->dp.rng);
    pft_node__dropout_free(nd);
    pft_node__secagg_free(nd);
    pft_keypair_destroy(&nd->hand.kp);
    pft_free(nd->hand.keys);
    pft_free(nd->hand.open);
    pft_slots_destroy(&nd->slots);
    pft_dirlock_destroy(&nd->lock); /* releases the folder */
}

/* The out/ folder, the topology and this node in it, its data, its DP ledger, out/inbox/ and the hand-off
 * records out/acked/, out/sent/, out/missing/. Returns an exit code (the error logged). */
static int start(node_t *nd)
{
    const pft_node_args_t *args = nd->args;
    int rc = pft_node__setup_lock(nd);
    if (rc)
        return fail(rc == PFT_EUNSUPPORTED ? PFT_EXIT_LOCKED : PFT_EXIT_IO);
    pft_node__set_status(nd, "starting", NULL);
    /* the public facts only: no other node's files are opened, nor is the node's own checked here */
    rc = pft_topo_load(args->topology, PFT_TOPO_REQUIRE_RESOLVED | PFT_TOPO_SKIP_DATA_CHECK, &nd->topo);
    if (rc == 0 && !pft_topo_find(nd->topo, args->id))
        rc = pft_err(PFT_ETOPO, "%s: no node '%s'", args->topology, args->id);
    if (rc == 0)
        rc = pft_node__setup_own_files(nd); /* its command line's files, in place of its entry's */
    if (rc == 0)
        nd->me = pft_topo_find(nd->topo, args->id);
    if (rc)
        return fail(rc == PFT_ETOPO || rc == PFT_EFORMAT || rc == PFT_EIO ? PFT_EXIT_TOPOLOGY : exit_for(rc));
    nd->run = pft_topo_run(nd->topo);
    nd->my_index = nd->me->index;
    nd->turn_scale = pft_node__turn_scale(pft_topo_node_count(nd->topo));
    if ((rc = pft_node__setup_rules(nd)) != 0) /* the verdict of pftnet check and launch, in their words */
        return fail(exit_for(rc));
    nd->method = pft_node__table_method(nd->me);
    if (!(nd->head_ops = pft_node__table_head(nd->me))) {
        pft_error("node %s: head %d is not one this pftnode knows", nd->me->id, nd->me->head);
        return PFT_EXIT_TOPOLOGY;
    }
    pft_info("node %s: %s of a %s of %zu nodes, run '%s', K=%d %s", nd->me->id, pft_role_name(nd->me->role),
             pft_kind_name(pft_topo_kind(nd->topo)), pft_topo_node_count(nd->topo), nd->run->run, nd->me->k,
             pft_cov_name(nd->me->cov));
    if ((rc = pft_node__setup_data(nd)) != 0)
        return fail(rc == PFT_ENOMEM ? PFT_EXIT_INTERNAL : PFT_EXIT_DATA);
    if (pft_node__floor_init(&nd->know.floor, nd->n_classes) != 0)
        return fail(PFT_EXIT_INTERNAL);
    if ((rc = pft_node__release_setup(nd)) != 0)
        return fail(exit_for(rc));
    nd->hand.inbox_dir = pft_fsio_join(args->out_dir, "inbox");
    int dir_rc = 0;
    for (int i = 0; i < 3 && dir_rc == 0; i++) {
        char *dir = pft_fsio_join(args->out_dir, (const char *[]){"acked", "sent", "missing"}[i]);
        dir_rc = dir ? pft_fsio_mkdirs(dir) : PFT_ENOMEM;
        pft_free(dir);
    }
    if (!nd->hand.inbox_dir || dir_rc || pft_fsio_mkdirs(nd->hand.inbox_dir) != 0)
        return fail(PFT_EXIT_IO);
    if (pft_node__refusal_load(nd) != 0)
        return fail(PFT_EXIT_IO);
    if (args->slots_dir && (rc = pft_slots_open(args->slots_dir, &nd->slots)) != 0)
        return fail(exit_for(rc));
    return PFT_EXIT_OK;
}

/* The transport's inbound callback: secure aggregation's control messages to the dropout recovery, bundles to
 * the inbox. */
static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    if (!pft_secmsg_is(buf, len))
        return pft_node__inbox_on_message(ctx, buf, len, reason, rlen);
    int rc = pft_node__dropout_on_message(ctx, buf, len, reason, rlen);
    if (rc < 0 && rc != PFT_EIO && rc != PFT_ENOMEM) { /* counted and kept like a refused bundle */
        char what[PFT_TRANSPORT_MAX_REASON + 64];
        snprintf(what, sizeof what, "secagg message: %s", reason);
        pft_node__refusal(ctx, PFT_NODE_REFUSED_BUNDLE, what);
    }
    return rc;
}

/* The transport: its listening socket (bound here or handed over), keys, peers and inbound slots. Returns an
 * exit code (the error logged). */
static int open_transport(node_t *nd)
{
    const pft_node_args_t *args = nd->args;
    pft_transport_opts_t to;
    pft_transport_opts_default(&to);
    to.max_msg_size = (int64_t)nd->run->max_bundle_mb << 20; /* the one limit (WIRE.md §4) */
    to.on_refusal = pft_node__refusal_on_transport;
    to.on_refusal_ctx = nd;
    to.on_ack = pft_node__outbox_on_ack; /* out/acked/ written the moment an ACK is read */
    to.on_ack_ctx = nd;
    if (args->listen_fd >= 0 && pft_node__setup_listen_fd(args->listen_fd, nd->me->endpoint) != 0)
        return fail(PFT_EXIT_NETWORK);
    to.listen_fd = args->listen_fd;
    uint8_t cpub[PFT_KEY_CURVE_LEN], csec[PFT_KEY_CURVE_LEN];
    if (pft_node__setup_keys(nd, &to, cpub, csec) != 0)
        return fail(PFT_EXIT_TOPOLOGY);
    if (pft_node__fp_setup(nd) != 0) /* before any bundle can come in */
        return fail(PFT_EXIT_INTERNAL);
    nd->hand.tp = pft_transport_new(nd->me->endpoint, &to, on_message, nd);
    sodium_memzero(csec, sizeof csec);
    if (!nd->hand.tp) {
        pft_error("binding %s: %s", nd->me->endpoint, pft_errmsg());
        return PFT_EXIT_NETWORK;
    }
    int rc = pft_node__setup_io(nd);
    if (rc == 0)
        rc = pft_node__secagg_setup(nd); /* after the keys: masks come from them */
    if (rc == 0)
        rc = pft_node__step_setup(nd); /* after the plan: whether this node masks */
    if (rc)
        return fail(rc == PFT_ETOPO ? PFT_EXIT_TOPOLOGY : exit_for(rc));
    pft_info("listening on %s%s", pft_transport_endpoint(nd->hand.tp),
             args->listen_fd >= 0 ? " (socket handed over by the launcher)" : "");
    return PFT_EXIT_OK;
}

/* Secure aggregation's end (pft_node_dropout.c): the opener's done notices, a member's wait for them. */
static void dropout_end(node_t *nd, int failed)
{
    double until = 0;
    if (pft_node__dropout_finish(nd, failed, &until))
        (void)pft_node__loop_until(nd, pft_node__dropout_ended, &until, 200);
}

/* Every stage in order (the head trained in the final one), then every send to its end. Returns an exit code.
 */
static int run_stages(node_t *nd, json_t *res)
{
    for (size_t k = 0; k < nd->me->n_stages; k++) {
        const pft_stage_t *st = &nd->me->stages[k];
        int rc = run_stage(nd, k, st);
        if (rc == 0 && st->final)
            rc = pft_node__head_train(nd, res);
        slot_give_back(nd, k);
        pft_alloc_trim(); /* the stage's working memory is freed: its pages go back before the next wait */
        if (rc) {
            int sa = pft_node__secagg_exit(nd);
            int code = fail(sa ? sa : exit_for(rc));
            dropout_end(nd, 1); /* an opener tells the members it asks nothing more */
            return code;
        }
    }
    int rc = pft_node__loop_until(nd, pft_node__outbox_done, NULL, 200);
    if (rc && rc != PFT_EINTR)
        pft_warn("while waiting for the sends to end: %s", pft_errmsg());
    if (pft_node__outbox_report(nd, rc == PFT_EINTR) > 0)
        return PFT_EXIT_SEND;
    if (rc == 0)
        dropout_end(nd, 0); /* a member stays reachable while a declaration may come */
    return rc == PFT_EINTR ? PFT_EXIT_INTERRUPTED : PFT_EXIT_OK;
}

/* Until when a node that succeeded stays at least: --linger-ms, and resend_grace after its last ACK (both 0
 * by default). Beyond that it stays only while a predecessor has not confirmed reading its ACK (lingered()):
 * a sender busy or stopped when the ACK came reads it later (its socket keeps it) and confirms then, and one
 * killed before it recorded the ACK asks again when it restarts. Before the CONFIRM (9025095) a node stayed
 * 5 s after its last ACK whatever happened (01e528f), for a predecessor too busy to read it; the CONFIRM
 * covers that case and ends the stay a round trip after the ACK was read. */
static double linger_until(const node_t *nd)
{
    double end = pft_fsio_now() + nd->args->linger_ms / 1000.0;
    pft_transport_stats_t ts;
    pft_transport_stats(nd->hand.tp, &ts);
    if (ts.last_ack_ms > 0 && nd->run && nd->run->resend_grace > 0) {
        double after_ack = pft_fsio_now() + (double)(ts.last_ack_ms - pft_transport_now_ms()) / 1000.0 +
                           nd->run->resend_grace;
        if (after_ack > end)
            end = after_ack;
    }
    return end;
}

/* How long a finished node stays: linger_until(), then while a predecessor has not confirmed reading its ACK,
 * until hold (RELIABILITY.md §5). */
typedef struct {
    double end, hold;
    int said;
} linger_t;

/* The loop's condition of the linger: past the end, and every ACK confirmed or the hold past. */
static int lingered(node_t *nd, void *ctx)
{
    linger_t *l = ctx;
    double now = pft_fsio_now();
    int waiting = pft_node__inbox_unconfirmed(nd);
    if (now < l->end || (waiting == 0 || now >= l->hold))
        return now >= l->end;
    if (!l->said++)
        pft_info("staying reachable until the predecessors confirm reading %d acknowledgement(s) (at most "
                 "%.0f s more)",
                 waiting, l->hold - now);
    return 0;
}

/* Writes result.json and the final status; after a success keeps answering late duplicate deliveries (a lost
 * ACK) until linger_until(), counting them in result.json. Returns the exit code, PFT_EXIT_IO if result.json
 * failed. */
static int finish(node_t *nd, json_t *res, int code)
{
    if (!nd->lock) /* the folder is not this process's: write nothing there */
        return code;
    if (nd->me)
        pft_node__refusal_tick(nd, 1);
    if (nd->me && pft_node__result_write(nd, res, code) != 0) {
        pft_error("writing result.json: %s", pft_errmsg());
        if (code == PFT_EXIT_OK)
            code = PFT_EXIT_IO;
    }
    int done = code == PFT_EXIT_OK || code == PFT_EXIT_DEGRADED; /* it did its part: it lingers */
    pft_node__set_status(nd,
                         code == PFT_EXIT_OK ? "done"
                         : done              ? "degraded"
                                             : "failed",
                         pft_node_exit_text(code));
    if (nd->hand.tp && done) {
        pft_transport_stats_t before, after;
        pft_transport_stats(nd->hand.tp, &before);
        int refused = nd->refusal.rejected + nd->refusal.handshakes_denied;
        linger_t l = {.end = linger_until(nd), .hold = pft_fsio_now() + pft_node__inbox_hold_s(nd)};
        (void)pft_node__loop_until(nd, lingered, &l, 100); /* a stop request ends it early */
        if (pft_node__inbox_unconfirmed(nd) > 0)
            pft_warn("leaving with %d acknowledgement(s) not confirmed read by their sender",
                     pft_node__inbox_unconfirmed(nd));
        pft_node__refusal_tick(nd, 1);
        pft_transport_stats(nd->hand.tp, &after);
        if ((after.received != before.received ||
             refused != nd->refusal.rejected + nd->refusal.handshakes_denied) &&
            pft_node__result_write(nd, res, code) != 0)
            pft_error("writing result.json: %s", pft_errmsg());
    }
    if (done)
        pft_info("%s in %.1fs", code == PFT_EXIT_OK ? "done" : "done, degraded,",
                 pft_fsio_now() - nd->t_start);
    return code;
}

/* A completed run is degraded when the node went on without a hand-off that missed its deadline
 * (on_missing = proceed): its knowledge lacks that predecessor's, and its exit says so (docs/USAGE.md §3). */
static int degraded(const node_t *nd, int code)
{
    for (size_t i = 0; code == PFT_EXIT_OK && i < nd->hand.n_in; i++)
        if (nd->hand.in[i].missing && !nd->hand.in[i].bundle) {
            pft_warn("degraded: went on without %s's bundle (on_missing = proceed): exit %d",
                     nd->hand.in[i].from, PFT_EXIT_DEGRADED);
            return PFT_EXIT_DEGRADED;
        }
    return code;
}

int pft_node_run(const pft_node_args_t *args)
{
    node_t nd = {.args = args, .t_start = pft_fsio_now()};
    nd.know.drift = json_array();
    nd.refusal.reasons = json_array();
    json_t *res = json_object();
    int code = start(&nd);
    if (code == PFT_EXIT_OK)
        code = open_transport(&nd);
    if (code == PFT_EXIT_OK) {
        pft_node__crash_point("before-receive");
        pft_node__inbox_load(&nd);
        code = degraded(&nd, run_stages(&nd, res));
    }
    code = finish(&nd, res, code);
    json_decref(res);
    node_free(&nd);
    return code;
}
