/* pft_node: one peer's run, stage by stage as the topology's plan says (DESIGN.md §2, §6).
 *
 * A stage waits for its inbound hand-offs (until their deadlines), then either refits (EM per class on the
 * node's real features ∪ samples of every received bundle) or adopts a received complete bundle (ring
 * or mesh lap 2), sends the result to its successors, and, in the node's last stage, trains and evaluates the
 * head. Inbound bundles are validated, written durably to out/inbox/ and only then acknowledged. Sample
 * counts come from provenance: a (node, class) already counted, by the node's own data or an earlier bundle,
 * is not counted again, so paths that rejoin (a diamond) add each node's data once.
 *
 * This file holds the stage machine and the run loop; the nouns it drives (inbox, refit, releases, outbox,
 * result) live in pft_node_*.c, listed in pft_node_internal.h. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <sodium.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t s_stop;

/* Fault injection for the crash/restart tests: with PFT_TEST_HOOKS compiled in, PFT_CRASH_AT=<point> in the
 * environment kills the node with SIGKILL at that point. Release builds compile the hook to nothing. */
#ifdef PFT_TEST_HOOKS
void pft_node__crash_point(const char *point)
{
    const char *at = getenv("PFT_CRASH_AT");
    if (at && strcmp(at, point) == 0) {
        pft_warn("test hook: SIGKILL at %s", point);
        raise(SIGKILL);
    }
}

int pft_node__test_hook(const node_t *nd, const char *var)
{
    const char *v = getenv(var);
    return v && nd->me && strcmp(v, nd->me->id) == 0;
}
#endif

void pft_node__limits(const node_t *nd, pft_bundle_limits_t *lim)
{
    pft_bundle_limits_default(lim);
    lim->max_bytes = (size_t)nd->run->max_bundle_mb << 20;
}

int pft_node__message_id(const node_t *nd, const uint8_t *msg, size_t len, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    pft_envelope_t env;
    int rc = pft_envelope_parse(msg, len, &lim, &env);
    if (rc == 0)
        pft_bundle_hash(env.payload, env.payload_len, id);
    return rc;
}

void pft_node_request_stop(void)
{
    s_stop = 1;
}

int pft_node__stopping(void)
{
    return s_stop != 0;
}

const char *pft_node_exit_text(int code)
{
    switch (code) {
#define PFT_X_TEXT(name, value, text)                                                                        \
    case value:                                                                                              \
        return text;
        PFT_NODE_EXIT_TABLE(PFT_X_TEXT)
#undef PFT_X_TEXT
    default:
        return "unknown exit code";
    }
}

void pft_node__set_status(node_t *nd, const char *state, const char *detail)
{
    char buf[sizeof nd->status];
    int n = snprintf(buf, sizeof buf, "%s %s\n", state, detail ? detail : "");
    if (n < 0 || strcmp(buf, nd->status) == 0)
        return; /* written when it changes: a waiting node writes nothing */
    if (n >= (int)sizeof buf)
        n = (int)sizeof buf - 1;
    char *path = pft_fsio_join(nd->args->out_dir, "status");
    /* without fsync: the file only reports (the launcher's progress) */
    if (path && pft_fsio_write_replace(path, buf, (size_t)n) == 0)
        memcpy(nd->status, buf, sizeof buf);
    pft_free(path);
}

/* ---------------------------------------------------------------------------------------------- */
/* Stages. */

#ifdef PFT_TEST_HOOKS
/* Test hooks once a refit bundle is sent: retry-pending at once, after-forward once it is acknowledged. */
static void sent_point(node_t *nd, int rc)
{
    pft_node__crash_point("retry-pending");
    if (rc == 0 && getenv("PFT_CRASH_AT") && strcmp(getenv("PFT_CRASH_AT"), "after-forward") == 0) {
        for (int i = 0; i < 600 && pft_transport_pending(nd->tp) > 0; i++)
            pft_transport_poll(nd->tp, 50);
        pft_node__outbox_save_acks(nd);
        pft_node__crash_point("after-forward");
    }
}
#else
#define sent_point(nd, rc) ((void)0)
#endif

pft_bundle_t *pft_node__provenance_only(const node_t *nd, const pft_bundle_t *b)
{
    pft_bundle_t *p = pft_bundle_new(nd->run->run, pft_bundle_producer(b), PFT_DTYPE_F32, pft_bundle_dim(b));
    if (p && pft_bundle_prov_merge(p, b) != 0)
        pft_bundle_destroy(&p);
    return p;
}

/* After a stage: its received bundles are kept for their provenance only (the slot stays filled, so a
 * retransmission is still recognised by its id). */
static void release_models(node_t *nd, const pft_stage_t *st)
{
    for (size_t i = 0; i < nd->n_in; i++)
        for (size_t j = 0; j < st->n_recv; j++) {
            inbound_t *s = &nd->in[i];
            if (s->handoff != st->recv[j] || !s->bundle)
                continue;
            pft_bundle_t *light = pft_node__provenance_only(nd, s->bundle);
            if (light) {
                pft_bundle_destroy(&s->bundle);
                s->bundle = light;
            }
        }
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
    int rc = pft_node__refit(nd, st, complete, &b);
    if (rc)
        return rc;
    if (nd->me->dp_epsilon > 0 && (rc = pft_node__release_charge(nd)) != 0) {
        pft_bundle_destroy(&b);
        return rc;
    }
    if (nd->kp && (rc = pft_keys_sign_bundle(nd->kp, b)) != 0) {
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
        (void)pft_transport_poll(nd->tp, 0); /* transmit now, not after the head is trained */
    sent_point(nd, rc);
    pft_free(buf);
    pft_bundle_destroy(&nd->knowledge);
    nd->knowledge = pft_node__provenance_only(nd, b); /* sent: the encoded copy is in the outbox */
    if (nd->knowledge)
        pft_bundle_destroy(&b);
    else
        nd->knowledge = b;
    return rc;
}

/* The provenance of this node's own rows only (what a head trained on own data alone used); NULL if out of
 * memory. */
static pft_bundle_t *own_provenance(const node_t *nd)
{
    pft_bundle_t *p = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, pft_dataset_d(nd->train));
    for (int c = 0; p && c < nd->n_classes; c++)
        if (nd->own_counts[c] > 0 && pft_bundle_prov_add(p, nd->me->id, c, (uint64_t)nd->own_counts[c]) != 0)
            pft_bundle_destroy(&p);
    return p;
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
        pft_bundle_destroy(&nd->knowledge);
        if (!(nd->knowledge = own_provenance(nd)))
            return pft_err(PFT_ENOMEM, "out of memory");
        return pft_node__refit_adopt(nd, &(inbound_t){.bundle = NULL});
    }
    char *path = pft_fsio_join(nd->args->out_dir, "complete.pftb");
    int rc = path ? pft_fsio_write_atomic(path, s->bytes, s->len) : PFT_ENOMEM;
    pft_free(path);
    if (rc == 0 && st->n_send)
        rc = pft_node__outbox_send(nd, st, s->bytes, s->len);
    if (rc == 0 && st->n_send)
        (void)pft_transport_poll(nd->tp, 0);
    if (rc == 0 && st->final)
        rc = pft_node__refit_adopt(nd, s);
    if (rc == 0) {
        pft_bundle_destroy(&nd->knowledge);
        nd->knowledge = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, pft_dataset_d(nd->train));
        rc = nd->knowledge ? pft_bundle_prov_merge(nd->knowledge, s->bundle) : PFT_ENOMEM;
    }
    return rc;
}

static int run_stage(node_t *nd, size_t k, const pft_stage_t *st)
{
    int rc = pft_node__inbox_wait(nd, st);
    if (rc)
        return rc;
    nd->n_real = nd->n_synthetic = 0; /* result.json reports the last stage's union */
    rc = st->action == PFT_WHAT_REFIT ? refit_stage(nd, k, st) : forward_stage(nd, k, st);
    release_models(nd, st);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* The run. */

static int exit_for(int rc)
{
    switch (rc) {
    case PFT_ETOPO:
        return PFT_EXIT_TOPOLOGY;
    case PFT_ETIMEOUT:
        return PFT_EXIT_MISSING;
    case PFT_EINTR:
        return PFT_EXIT_INTERRUPTED;
    case PFT_ENUMERIC:
        return PFT_EXIT_NUMERIC;
    case PFT_ENET:
        return PFT_EXIT_NETWORK;
    case PFT_EIO:
        return PFT_EXIT_IO;
    case PFT_EBUDGET:
        return PFT_EXIT_BUDGET;
    default:
        return PFT_EXIT_NUMERIC;
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
    pft_transport_destroy(&nd->tp);
    for (size_t i = 0; nd->in && i < nd->n_in; i++) {
        pft_bundle_destroy(&nd->in[i].bundle);
        pft_free(nd->in[i].bytes);
    }
    pft_free(nd->in);
    for (size_t i = 0; nd->out && i < nd->n_out; i++)
        pft_free(nd->out[i].msg);
    pft_free(nd->out);
    pft_free(nd->own_counts);
    pft_free(nd->inbox_dir);
    pft_node__rows_free(&nd->head_rows);
    pft_gstat_destroy(&nd->head_stats);
    pft_bundle_destroy(&nd->knowledge);
    pft_dataset_destroy(&nd->train);
    pft_dataset_destroy(&nd->test);
    PFT_FREE(nd->eval_y);
    pft_topo_destroy(&nd->topo);
    json_decref(nd->drift);
    json_decref(nd->dp);
    json_decref(nd->refusals);
    json_decref(nd->floor);
    pft_rng_destroy(&nd->dp_rng);
    pft_keypair_destroy(&nd->kp);
    pft_free(nd->keys);
}

/* The out/ folder, the topology and this node in it, its data, its DP ledger, out/inbox/ and the hand-off
 * records out/acked/, out/sent/, out/missing/. Returns an exit code (the error logged). */
static int start(node_t *nd)
{
    const pft_node_args_t *args = nd->args;
    if (pft_fsio_mkdirs(args->out_dir) != 0)
        return fail(PFT_EXIT_IO);
    pft_node__set_status(nd, "starting", NULL);
    int rc = pft_topo_load(args->topology, PFT_TOPO_REQUIRE_RESOLVED, &nd->topo);
    if (rc == 0 && !(nd->me = pft_topo_find(nd->topo, args->id)))
        rc = pft_err(PFT_ETOPO, "%s: no node '%s'", args->topology, args->id);
    if (rc)
        return fail(rc == PFT_ETOPO || rc == PFT_EFORMAT || rc == PFT_EIO ? PFT_EXIT_TOPOLOGY : exit_for(rc));
    nd->run = pft_topo_run(nd->topo);
    nd->my_index = nd->me->index;
    pft_info("node %s: %s of a %s of %zu nodes, run '%s', K=%d %s", nd->me->id, pft_role_name(nd->me->role),
             pft_kind_name(pft_topo_kind(nd->topo)), pft_topo_node_count(nd->topo), nd->run->run, nd->me->k,
             pft_cov_name(nd->me->cov));
    if ((rc = pft_node__setup_data(nd)) != 0)
        return fail(rc == PFT_ENOMEM ? PFT_EXIT_NUMERIC : PFT_EXIT_DATA);
    if ((rc = pft_node__release_setup(nd)) != 0)
        return fail(exit_for(rc));
    nd->inbox_dir = pft_fsio_join(args->out_dir, "inbox");
    int dir_rc = 0;
    for (int i = 0; i < 3 && dir_rc == 0; i++) {
        char *dir = pft_fsio_join(args->out_dir, (const char *[]){"acked", "sent", "missing"}[i]);
        dir_rc = dir ? pft_fsio_mkdirs(dir) : PFT_ENOMEM;
        pft_free(dir);
    }
    if (!nd->inbox_dir || dir_rc || pft_fsio_mkdirs(nd->inbox_dir) != 0)
        return fail(PFT_EXIT_IO);
    if (pft_node__refusal_load(nd) != 0)
        return fail(PFT_EXIT_IO);
    return PFT_EXIT_OK;
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
    nd->tp = pft_transport_new(nd->me->endpoint, &to, pft_node__inbox_on_message, nd);
    sodium_memzero(csec, sizeof csec);
    if (!nd->tp) {
        pft_error("binding %s: %s", nd->me->endpoint, pft_errmsg());
        return PFT_EXIT_NETWORK;
    }
    int rc = pft_node__setup_io(nd);
    if (rc)
        return fail(exit_for(rc));
    pft_info("listening on %s%s", pft_transport_endpoint(nd->tp),
             args->listen_fd >= 0 ? " (socket handed over by the launcher)" : "");
    return PFT_EXIT_OK;
}

/* Every stage in order (the head trained in the final one), then every send to its end. Returns an exit code.
 */
static int run_stages(node_t *nd, json_t *res)
{
    for (size_t k = 0; k < nd->me->n_stages; k++) {
        const pft_stage_t *st = &nd->me->stages[k];
        int rc = run_stage(nd, k, st);
        if (rc == 0 && st->final)
            rc = pft_node__result_train_head(nd, res);
        if (rc)
            return fail(exit_for(rc));
    }
    int interrupted = 0, code = PFT_EXIT_OK;
    if (pft_node__outbox_finish(nd, &interrupted) > 0)
        code = PFT_EXIT_SEND;
    if (interrupted)
        code = PFT_EXIT_INTERRUPTED;
    return code;
}

/* Until when a node that succeeded keeps answering: linger_ms, and at least resend_grace after its last ACK.
 * A predecessor busy computing (its head) when the ACK arrived has not read it, and libzmq drops an unread
 * reply once the connection closes: the predecessor then retransmits when it polls again, and must find this
 * node up to be ACKed again (else it waits out send_deadline and fails; seen in a 256-node ring, 70 heads at
 * once). */
static double linger_until(const node_t *nd)
{
    double end = pft_fsio_now() + nd->args->linger_ms / 1000.0;
    pft_transport_stats_t ts;
    pft_transport_stats(nd->tp, &ts);
    if (ts.last_ack_ms > 0 && nd->run) {
        double after_ack = pft_fsio_now() + (double)(ts.last_ack_ms - pft_transport_now_ms()) / 1000.0 +
                           nd->run->resend_grace;
        if (after_ack > end)
            end = after_ack;
    }
    return end;
}

/* Writes result.json and the final status; after a success keeps answering late duplicate deliveries (a lost
 * ACK) until linger_until(), counting them in result.json. Returns the exit code, PFT_EXIT_IO if result.json
 * failed. */
static int finish(node_t *nd, json_t *res, int code)
{
    if (nd->me)
        pft_node__refusal_tick(nd, 1);
    if (nd->me && pft_node__result_write(nd, res, code) != 0) {
        pft_error("writing result.json: %s", pft_errmsg());
        if (code == PFT_EXIT_OK)
            code = PFT_EXIT_IO;
    }
    pft_node__set_status(nd, code == PFT_EXIT_OK ? "done" : "failed", pft_node_exit_text(code));
    if (nd->tp && code == PFT_EXIT_OK) {
        pft_transport_stats_t before, after;
        pft_transport_stats(nd->tp, &before);
        int refused = nd->rejected + nd->handshakes_denied;
        for (double end = linger_until(nd); !s_stop && pft_fsio_now() < end;) {
            pft_transport_poll(nd->tp, 100);
            pft_node__refusal_tick(nd, 0);
        }
        pft_node__refusal_tick(nd, 1);
        pft_transport_stats(nd->tp, &after);
        if ((after.received != before.received || refused != nd->rejected + nd->handshakes_denied) &&
            pft_node__result_write(nd, res, code) != 0)
            pft_error("writing result.json: %s", pft_errmsg());
    }
    if (code == PFT_EXIT_OK)
        pft_info("done in %.1fs", pft_fsio_now() - nd->t_start);
    return code;
}

int pft_node_run(const pft_node_args_t *args)
{
    node_t nd = {.args = args, .t_start = pft_fsio_now()};
    nd.drift = json_array();
    nd.refusals = json_array();
    json_t *res = json_object();
    int code = start(&nd);
    if (code == PFT_EXIT_OK)
        code = open_transport(&nd);
    if (code == PFT_EXIT_OK) {
        pft_node__crash_point("before-receive");
        pft_node__inbox_load(&nd);
        code = run_stages(&nd, res);
    }
    code = finish(&nd, res, code);
    json_decref(res);
    node_free(&nd);
    return code;
}
