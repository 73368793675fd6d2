/* pft_node_inbox: inbound bundles: matched to a hand-off, validated, stored durably in out/inbox/, then
 * acknowledged. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <stdio.h>
#include <string.h>

/* Checks a decoded bundle against this node and finds its hand-off slot. Returns the slot or NULL with
 * a reason in buf. */
static inbound_t *match_bundle(node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen)
{
    if (strcmp(pft_bundle_run_id(b), nd->run->run) != 0) {
        snprintf(reason, rlen, "run id '%s' is not this run's ('%s')", pft_bundle_run_id(b), nd->run->run);
        return NULL;
    }
    if (pft_bundle_dim(b) != pft_dataset_d(nd->train)) {
        snprintf(reason, rlen, "dimension %d does not match this node's features (%d)", pft_bundle_dim(b),
                 pft_dataset_d(nd->train));
        return NULL;
    }
    int complete = (pft_bundle_flags(b) & PFT_BUNDLE_COMPLETE) != 0;
    const char *producer = pft_bundle_producer(b);
    for (size_t i = 0; i < nd->n_in; i++) {
        inbound_t *s = &nd->in[i];
        if (s->complete != complete || strcmp(s->producer, producer) != 0)
            continue;
        if (s->bundle) {
            uint8_t id[PFT_BUNDLE_ID_LEN];
            if (pft_bundle_id(b, id) == 0 && memcmp(id, s->id, sizeof id) == 0)
                return s; /* the same bundle again (e.g. we restarted and forgot its id): harmless */
            snprintf(reason, rlen, "already holds a different bundle from %s for this hand-off", producer);
            return NULL;
        }
        return s;
    }
    /* a fallback hand-off: q names this node as its fallback because q's successor p, one of our
     * predecessors, stayed unreachable; q's bundle stands in for p's */
    const pft_topo_node_t *q = pft_topo_find(nd->topo, producer);
    for (size_t k = 0; q && !complete && k < nd->me->n_fallback_preds; k++) {
        if (nd->me->fallback_preds[k] != q->index)
            continue;
        for (size_t i = 0; i < nd->n_in; i++) {
            inbound_t *s = &nd->in[i];
            const pft_topo_node_t *p = pft_topo_find(nd->topo, s->from);
            if (s->bundle || s->complete || !p || !pft_topo_edge_find(nd->topo, q->index, p->index))
                continue;
            pft_warn("fallback: bundle from %s stands in for %s's", producer, s->from);
            s->producer = q->id;
            s->via_fallback = 1;
            return s;
        }
    }
    snprintf(reason, rlen, "%s bundle from '%s' is not expected by node '%s'",
             complete ? "complete" : "partial", producer, nd->me->id);
    return NULL;
}

static char *inbox_path(node_t *nd, const inbound_t *s)
{
    char name[64];
    snprintf(name, sizeof name, "h%zu.pftb", s->handoff + 1);
    return pft_fsio_join(nd->inbox_dir, name);
}

/* Validates, stores durably and records one inbound message. store = 0 when it comes from our own disk. */
static int accept_message(node_t *nd, const uint8_t *buf, size_t len, int store, char *reason, size_t rlen)
{
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    lim.max_bytes = (size_t)nd->run->max_bundle_mb << 20;
    pft_bundle_t *b = NULL;
    int rc = pft_bundle_decode(buf, len, &lim, &b);
    if (rc) {
        snprintf(reason, rlen, "%s", pft_errmsg());
        return rc;
    }
    inbound_t *s = match_bundle(nd, b, reason, rlen);
    if (!s) {
        pft_bundle_destroy(&b);
        return PFT_EREJECT;
    }
    if (s->bundle) { /* a duplicate of what this slot holds: acknowledge, use once */
        pft_bundle_destroy(&b);
        pft_debug("duplicate of the bundle from %s acknowledged again", s->from);
        return 0;
    }
    if (nd->keys) {
        const pft_topo_node_t *prod = pft_topo_find(nd->topo, s->producer);
        if (!prod || pft_keys_verify_message(&nd->keys[prod->index], buf, len, &lim) != 0) {
            snprintf(reason, rlen, "signature of producer '%s' does not verify: %s", s->producer,
                     pft_errmsg());
            pft_bundle_destroy(&b);
            return PFT_EAUTH;
        }
    }
    uint8_t *copy = pft_alloc(len);
    if (!copy) {
        pft_bundle_destroy(&b);
        snprintf(reason, rlen, "out of memory");
        return PFT_ENOMEM;
    }
    memcpy(copy, buf, len);
    if (store) {
        char *path = inbox_path(nd, s);
        rc = path ? pft_fsio_write_atomic(path, buf, len) : PFT_ENOMEM;
        pft_free(path);
        if (rc) {
            snprintf(reason, rlen, "cannot store: %s", pft_errmsg());
            pft_free(copy);
            pft_bundle_destroy(&b);
            return PFT_EIO; /* transient: the sender retries */
        }
    }
    pft_bundle_id(b, s->id);
    s->bundle = b;
    s->bytes = copy;
    s->len = len;
    char hex[2 * PFT_BUNDLE_ID_LEN + 1];
    pft_info("%s bundle %.12s from %s (producer %s, %d classes, %d contributing nodes, %zu bytes)%s",
             s->complete ? "complete" : "received", pft_bundle_id_hex(s->id, hex), s->from,
             pft_bundle_producer(b), pft_bundle_n_classes(b), pft_bundle_prov_n_nodes(b), len,
             store ? "" : " [from disk]");
    return 0;
}

/* The transport's callback for one inbound message: 0 acknowledges it; an error refuses it with reason
 * (PFT_EIO, PFT_ENOMEM: transient, the sender retries; anything else is counted as a rejection). */
int pft_node__inbox_on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    node_t *nd = ctx;
    int rc = accept_message(nd, buf, len, 1, reason, rlen);
    if (rc && rc != PFT_EIO && rc != PFT_ENOMEM) {
        nd->rejected++;
        pft_warn("rejected an inbound bundle (%zu bytes): %s", len, reason);
        if (json_array_size(nd->refusals) < 100)
            json_array_append_new(nd->refusals, json_string(reason));
    }
    return rc;
}

/* Loads inbound bundles stored by an earlier run of this node (restart after a crash). */
void pft_node__inbox_load(node_t *nd)
{
    for (size_t i = 0; i < nd->n_in; i++) {
        char *path = inbox_path(nd, &nd->in[i]);
        uint8_t *buf = NULL;
        size_t len = 0;
        if (path && pft_fsio_exists(path) &&
            pft_fsio_read(path, (size_t)nd->run->max_bundle_mb << 20, &buf, &len) == 0) {
            char reason[256];
            if (accept_message(nd, buf, len, 0, reason, sizeof reason) != 0)
                pft_warn("ignoring stored %s: %s", path, reason);
        }
        pft_free(buf);
        pft_free(path);
    }
}

/* Waits until every inbound hand-off of the stage has arrived or passed its deadline. */
int pft_node__inbox_wait(node_t *nd, const pft_stage_t *st)
{
    char detail[256];
    for (;;) {
        size_t missing = 0, waiting = 0;
        double now = pft_fsio_now();
        const char *who = NULL;
        for (size_t j = 0; j < st->n_recv; j++)
            for (size_t i = 0; i < nd->n_in; i++) {
                inbound_t *s = &nd->in[i];
                if (s->handoff != st->recv[j] || s->bundle)
                    continue;
                if (now > s->deadline) {
                    if (!s->missing)
                        pft_warn("no bundle from %s by its deadline", s->from);
                    s->missing = 1;
                    missing++;
                } else {
                    waiting++;
                    who = s->from;
                }
            }
        if (waiting == 0) {
            if (missing && nd->run->on_missing == PFT_TOPO_MISSING_FAIL)
                return pft_err(PFT_ETIMEOUT,
                               "%zu predecessor bundle(s) missing at the deadline (on_missing=fail)",
                               missing);
            if (missing)
                pft_warn("going on without %zu missing bundle(s) (on_missing=proceed)", missing);
            return 0;
        }
        snprintf(detail, sizeof detail, "lap %d: %zu bundle(s), e.g. from %s", st->lap, waiting, who);
        pft_node__set_status(nd, "waiting", detail);
        if (pft_node__stopping())
            return pft_err(PFT_EINTR, "interrupted while waiting");
        int rc = pft_transport_poll(nd->tp, 200);
        pft_node__outbox_save_acks(nd);
        if (rc == PFT_EINTR && pft_node__stopping())
            return pft_err(PFT_EINTR, "interrupted while waiting");
        if (rc && rc != PFT_EINTR)
            return pft_err_wrap(rc, "transport");
    }
}

/* Received bundles of a stage, largest knowledge first (so counts from big bundles win ties). */
size_t pft_node__inbox_stage_bundles(node_t *nd, const pft_stage_t *st, inbound_t **list)
{
    size_t n = 0;
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->n_in; i++)
            if (nd->in[i].handoff == st->recv[j] && nd->in[i].bundle)
                list[n++] = &nd->in[i];
    for (size_t a = 1; a < n; a++) /* insertion sort by provenance size, descending; stable */
        for (size_t b = a; b > 0; b--) {
            int pa = pft_bundle_prov_n_nodes(list[b - 1]->bundle),
                pb = pft_bundle_prov_n_nodes(list[b]->bundle);
            if (pb <= pa)
                break;
            inbound_t *t = list[b];
            list[b] = list[b - 1];
            list[b - 1] = t;
        }
    return n;
}

/* The complete bundle received for a FORWARD stage (ring or mesh lap 2), or NULL if none arrived. */
inbound_t *pft_node__inbox_complete(node_t *nd, const pft_stage_t *st)
{
    inbound_t *s = NULL;
    for (size_t i = 0; i < nd->n_in; i++)
        if (st->n_recv && nd->in[i].handoff == st->recv[0] && nd->in[i].bundle)
            s = &nd->in[i];
    return s;
}
