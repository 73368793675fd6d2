/* pft_node_outbox: a peer's sends: to its successors, acknowledgements recorded on disk, fallback successors.
 */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A stored send whose ACK is not read this long (s) after its receipt was found ends as delivered. */
#define RECEIPT_ACK_S 0.1

/* Two records per hand-off, each holding the bundle id (RELIABILITY.md §5): out/sent/h<seq> is written before
 * the first transmission and removed once the send failed or was refused; out/acked/h<seq> is written the
 * moment the ACK is read (or the successor's receipt found). A node restarted after a crash does not send
 * again what acked/ says its successor stored (the successor may be gone by then); what sent/ alone records
 * is sent again until it is acknowledged, its receipt appears, or send_deadline passes. */
static char *record_path(const node_t *nd, const char *dir, size_t seq)
{
    char name[64];
    snprintf(name, sizeof name, "%s/h%zu", dir, seq);
    return pft_fsio_join(nd->args->out_dir, name);
}

/* Records o's acknowledgement in out/acked/ (durably); 1 once recorded. */
static int save_ack(node_t *nd, outbound_t *o)
{
    if (o->ack_saved || !o->seq || o->acked_before)
        return 1;
    char *path = record_path(nd, "acked", o->seq);
    if (path && pft_fsio_write_atomic(path, o->id_hex, strlen(o->id_hex)) == 0)
        o->ack_saved = 1;
    else
        pft_warn("recording the acknowledgement of hand-off %zu: %s (retried)", o->seq, pft_errmsg());
    pft_free(path);
    return o->ack_saved;
}

void pft_node__outbox_on_ack(void *ctx, int handle)
{
    node_t *nd = ctx;
    pft_node__crash_point("on-ack"); /* the successor stored it; nothing recorded here yet */
    for (size_t i = 0; i < nd->hand.n_out; i++)
        if (nd->hand.out[i].handle == handle && !nd->hand.out[i].acked_before)
            save_ack(nd, &nd->hand.out[i]);
}

/* Records every acknowledged hand-off not yet recorded in out/acked/ (a retry of a failed write). */
void pft_node__outbox_save_acks(node_t *nd)
{
    for (size_t i = 0; i < nd->hand.n_out; i++) {
        outbound_t *o = &nd->hand.out[i];
        if (!o->ack_saved && o->seq && !o->acked_before &&
            pft_transport_send_state(nd->hand.tp, o->handle, NULL, NULL) == PFT_SEND_ACKED)
            save_ack(nd, o);
    }
}

/* 1 if out/<dir>/h<seq> holds bundle id id_hex (written by an earlier run). */
static int recorded(const node_t *nd, const char *dir, size_t seq, const char *id_hex)
{
    char *path = record_path(nd, dir, seq);
    uint8_t *buf = NULL;
    size_t len = 0;
    int yes = path && pft_fsio_exists(path) && pft_fsio_read(path, 256, &buf, &len) == 0 &&
              len == strlen(id_hex) && memcmp(buf, id_hex, len) == 0;
    pft_free(buf);
    pft_free(path);
    return yes;
}

/* Removes o's out/sent/ record once its send failed or was refused: a later run sends afresh. */
static void forget_sent(const node_t *nd, const outbound_t *o)
{
    char *path = o->seq ? record_path(nd, "sent", o->seq) : NULL;
    if (path && pft_fsio_exists(path) && remove(path) != 0)
        pft_warn("removing %s: %s", path, strerror(errno));
    pft_free(path);
}

static const char *state_name(int state)
{
    return state == PFT_NODE_SEND_DELIVERED ? "delivered"
           : state >= 0                     ? pft_send_state_name((pft_send_state_t)state)
                                            : "unknown";
}

/* A send's state; one acknowledged before a restart counts as acknowledged. */
static int send_state(const node_t *nd, const outbound_t *o, int *rc, const char **reason)
{
    if (o->acked_before || o->delivered) {
        if (rc)
            *rc = 0;
        if (reason)
            *reason = o->acked_before ? "acknowledged before a restart" : o->reason;
        return o->acked_before ? PFT_SEND_ACKED : PFT_NODE_SEND_DELIVERED;
    }
    return pft_transport_send_state(nd->hand.tp, o->handle, rc, reason);
}

int pft_node__outbox_earlier(const node_t *nd, const pft_stage_t *st, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    char *path = pft_fsio_join(nd->args->out_dir, "bundle.pftb");
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    uint8_t id[PFT_BUNDLE_ID_LEN];
    char hex[2 * PFT_BUNDLE_ID_LEN + 1];
    int found = 0;
    if (path && pft_fsio_exists(path) && pft_fsio_read(path, (size_t)lim.max_bytes, buf, len) == 0 &&
        pft_bundle_message_id(*buf, *len, &lim, id) == 0) {
        const pft_handoff_t *h;
        pft_topo_handoffs(nd->topo, &h);
        pft_bundle_id_hex(id, hex);
        for (size_t j = 0; !found && j < st->n_send; j++)
            found = recorded(nd, "sent", h[st->send[j]].seq, hex) ||
                    recorded(nd, "acked", h[st->send[j]].seq, hex);
    }
    pft_err_clear();
    pft_free(path);
    if (!found) {
        pft_free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return found;
}

/* Sends one stage's message to each of its successors, except where an earlier run of this node was already
 * acknowledged; keeps a copy for a fallback send. Returns 0 or an error code. */
int pft_node__outbox_send(node_t *nd, const pft_stage_t *st, const uint8_t *bytes, size_t len)
{
    const pft_handoff_t *h;
    pft_topo_handoffs(nd->topo, &h);
    for (size_t j = 0; j < st->n_send; j++) {
        const pft_handoff_t *ho = &h[st->send[j]];
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, ho->to);
        const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, ho->from, ho->to);
        double dl = e ? e->send_deadline : nd->run->send_deadline;
        uint8_t id[PFT_BUNDLE_ID_LEN];
        pft_bundle_limits_t lim;
        pft_node__limits(nd, &lim);
        int rc = pft_bundle_message_id(bytes, len, &lim, id);
        if (rc)
            return rc;
        char hex[2 * PFT_BUNDLE_ID_LEN + 1];
        pft_bundle_id_hex(id, hex);
        if (recorded(nd, "acked", ho->seq, hex)) {
            outbound_t *o = &nd->hand.out[nd->hand.n_out++];
            *o = (outbound_t){.to = peer->id,
                              .handle = -1,
                              .lap = ho->lap,
                              .bytes = len,
                              .seq = ho->seq,
                              .acked_before = 1};
            memcpy(o->id_hex, hex, sizeof hex);
            (void)pft_transport_confirm(nd->hand.tp, peer->id, id); /* it may still wait for our word */
            pft_info("hand-off %zu to %s was acknowledged before a restart: not sent again", ho->seq,
                     peer->id);
            continue;
        }
        int before = recorded(nd, "sent", ho->seq, hex);
        char *sent = before ? NULL : record_path(nd, "sent", ho->seq);
        if (!before && (!sent || pft_fsio_write_atomic(sent, hex, strlen(hex)) != 0)) {
            if (nd->pipe.redraws) { /* a restart would draw the noise again: send nothing unrecorded */
                pft_free(sent);
                return pft_err(PFT_EIO,
                               "recording hand-off %zu as sent: %s (a DP bundle is not sent unrecorded)",
                               ho->seq, pft_errmsg());
            }
            pft_warn("recording hand-off %zu as sent: %s (a restart would wait out send_deadline)", ho->seq,
                     pft_errmsg());
        }
        pft_free(sent);
        int handle = pft_transport_send(nd->hand.tp, peer->id, bytes, len, id,
                                        pft_transport_now_ms() + (int64_t)(dl * 1000));
        if (handle < 0)
            return pft_err_wrap(handle, "sending to %s", peer->id);
        outbound_t *o = &nd->hand.out[nd->hand.n_out++];
        o->seq = ho->seq;
        o->to = peer->id;
        o->handle = handle;
        o->lap = ho->lap;
        o->bytes = len;
        if (nd->me->n_fallbacks && (o->msg = pft_alloc(len)))
            memcpy(o->msg, bytes, len);
        pft_bundle_id_hex(id, o->id_hex);
        o->sent_before = before;
        o->receipt_looked = pft_fsio_now(); /* its receipt is first looked for a second from now */
        if (before)
            pft_info("hand-off %zu to %s was sent before a restart, unacknowledged: sent again until %s "
                     "acknowledges it or its receipt appears",
                     ho->seq, peer->id, peer->id);
        pft_info("sending %s bundle %.12s to %s (hand-off %zu, lap %d, %zu bytes)",
                 ho->what == PFT_WHAT_FORWARD ? "complete" : "refit", o->id_hex, peer->id, ho->seq, ho->lap,
                 len);
    }
    return 0;
}

/* A primary send that failed (its successor stayed unreachable past send_deadline) goes to every fallback
 * successor instead. Returns the number of fallback sends queued. */
static int fall_back(node_t *nd)
{
    int queued = 0;
    size_t n = nd->hand.n_out;
    for (size_t i = 0; i < n; i++) {
        outbound_t *o = &nd->hand.out[i];
        if (o->fell_back || o->instead_of || !o->msg || send_state(nd, o, NULL, NULL) != PFT_SEND_FAILED)
            continue;
        o->fell_back = 1;
        for (size_t k = 0; k < nd->me->n_fallbacks; k++) {
            const pft_topo_node_t *peer = pft_topo_node(nd->topo, nd->me->fallbacks[k]);
            const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, nd->my_index, peer->index);
            double dl = e ? e->send_deadline : nd->run->send_deadline;
            int handle = pft_transport_send(nd->hand.tp, peer->id, o->msg, o->bytes, NULL,
                                            pft_transport_now_ms() + (int64_t)(dl * 1000));
            if (handle < 0) {
                pft_error("fallback to %s: %s", peer->id, pft_errmsg());
                continue;
            }
            outbound_t *f = &nd->hand.out[nd->hand.n_out++];
            *f = (outbound_t){
                .to = peer->id, .handle = handle, .lap = o->lap, .bytes = o->bytes, .instead_of = o->to};
            memcpy(f->id_hex, o->id_hex, sizeof f->id_hex);
            pft_warn("%s stayed unreachable: sending bundle %.12s to fallback %s", o->to, o->id_hex,
                     peer->id);
            queued++;
        }
    }
    return queued;
}

/* 1 if o's successor stored the bundle: <peers_dir>/<to>/inbox/h<seq>-<id>.pftb exists (its name holds the
 * id; a receiver renames a stored bundle that fails its check, RELIABILITY.md §4). The reason says where. */
static int receipt_found(const node_t *nd, outbound_t *o)
{
    if (!o->seq || o->instead_of || !nd->args->peers_dir)
        return 0; /* a fallback is stored under the receiver's own hand-off number: no receipt to find */
    char name[256];
    snprintf(name, sizeof name, "%s/inbox/h%zu-%s.pftb", o->to, o->seq, o->id_hex);
    char *path = pft_fsio_join(nd->args->peers_dir, name);
    int yes = path && pft_fsio_exists(path);
    if (yes)
        snprintf(o->reason, sizeof o->reason, "%s stored it (%s); its acknowledgement was never read", o->to,
                 path);
    pft_free(path);
    return yes;
}

/* Sends not acknowledged (pending: a second after they were queued, then at most once a second; failed: at
 * once, before a fallback) whose receipt appeared end as delivered (a pending one only RECEIPT_ACK_S later,
 * so that an ACK already on its way is read by the loop's turns meanwhile): recorded in acked/ (a restart
 * does not send again), the transport's retransmissions cancelled. A paused sender whose successor stored and
 * left ends so, not at send_deadline. */
static void look_for_receipts(node_t *nd)
{
    double now = pft_fsio_now();
    for (size_t i = 0; i < nd->hand.n_out; i++) {
        outbound_t *o = &nd->hand.out[i];
        if (o->delivered || o->acked_before || o->fell_back || o->handle < 0)
            continue;
        int st = pft_transport_send_state(nd->hand.tp, o->handle, NULL, NULL);
        if (st != PFT_SEND_PENDING && st != PFT_SEND_FAILED)
            continue;
        if (st == PFT_SEND_PENDING && o->receipt_seen > 0) { /* stored: its ACK had its chance */
            if (now - o->receipt_seen < RECEIPT_ACK_S)
                continue;
        } else {
            if (st == PFT_SEND_PENDING && now - o->receipt_looked < 1.0)
                continue;
            o->receipt_looked = now;
            if (!receipt_found(nd, o))
                continue;
            if (st == PFT_SEND_PENDING) { /* its ACK may be on its way: the next turns read it if it is */
                o->receipt_seen = now;
                continue;
            }
        }
        o->delivered = 1;
        if (st == PFT_SEND_PENDING)
            pft_transport_cancel(nd->hand.tp, o->handle, o->reason);
        save_ack(nd, o);
        pft_info("hand-off %zu to %s delivered: %s", o->seq, o->to, o->reason);
    }
}

void pft_node__outbox_tick(node_t *nd)
{
    look_for_receipts(nd);
    if (nd->me->n_fallbacks)
        fall_back(nd);
}

int pft_node__outbox_done(node_t *nd, void *ctx)
{
    (void)ctx;
    if (pft_transport_pending(nd->hand.tp) > 0) {
        pft_node__set_status(nd, "sending", "waiting for acknowledgements");
        return 0;
    }
    return !nd->me->n_fallbacks || fall_back(nd) == 0; /* a fallback queued now: wait for it too */
}

int pft_node__outbox_report(node_t *nd, int interrupted)
{
    pft_node__outbox_save_acks(nd);
    int bad = 0;
    for (size_t i = 0; i < nd->hand.n_out; i++) {
        int rc;
        const char *reason;
        outbound_t *o = &nd->hand.out[i];
        int st = send_state(nd, o, &rc, &reason);
        int rescued = 0;
        for (size_t j = 0; o->fell_back && j < nd->hand.n_out; j++)
            rescued |=
                nd->hand.out[j].instead_of == o->to && strcmp(nd->hand.out[j].id_hex, o->id_hex) == 0 &&
                pft_transport_send_state(nd->hand.tp, nd->hand.out[j].handle, NULL, NULL) == PFT_SEND_ACKED;
        if (st == PFT_SEND_REJECTED || st == PFT_SEND_FAILED)
            forget_sent(nd, o);
        if (st == PFT_SEND_ACKED)
            pft_info("hand-off to %s%s%s acknowledged", o->to, o->instead_of ? " instead of " : "",
                     o->instead_of ? o->instead_of : "");
        else if (st == PFT_NODE_SEND_DELIVERED)
            pft_info("hand-off to %s delivered: %s", o->to, o->reason);
        else if (rescued)
            pft_warn("hand-off to %s %s; its fallback was acknowledged", o->to, state_name(st));
        else if (st == PFT_SEND_PENDING && interrupted && !o->instead_of) /* a restart resends it */
            pft_warn("hand-off to %s pending: interrupted before it was acknowledged (sent again on restart)",
                     o->to);
        else if (!o->instead_of) {
            bad++;
            pft_error("hand-off to %s %s: %s", o->to, state_name(st),
                      reason && *reason ? reason
                      : rc              ? pft_strerror(rc)
                                        : "not acknowledged");
        }
    }
    return bad;
}

json_t *pft_node__outbox_json(const node_t *nd)
{
    json_t *sends = json_array();
    for (size_t i = 0; i < nd->hand.n_out; i++) {
        int rc = 0;
        const char *reason = NULL;
        const outbound_t *o = &nd->hand.out[i];
        int st = send_state(nd, o, &rc, &reason);
        json_t *j = json_pack("{s:s,s:i,s:s,s:I,s:s,s:s,s:b}", "to", o->to, "lap", o->lap, "bundle_id",
                              o->id_hex, "bytes", (json_int_t)o->bytes, "state", state_name(st), "reason",
                              reason ? reason : "", "fell_back", o->fell_back);
        if (o->instead_of)
            json_object_set_new(j, "fallback_for", json_string(o->instead_of));
        json_array_append_new(sends, j);
    }
    return sends;
}
