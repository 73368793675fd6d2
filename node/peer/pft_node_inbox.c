/* pft_node_inbox: inbound bundles: matched to a hand-off, validated, stored durably in out/inbox/, then
 * acknowledged. A stored bundle's file name holds its id (h<hand-off>-<id hex>.pftb); a restarted node loads
 * it only if the bytes still hash to that id and validate as on arrival (DESIGN.md §10, RELIABILITY.md §4).
 */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <dirent.h>
#include <errno.h>
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
    for (size_t i = 0; i < nd->hand.n_in; i++) {
        inbound_t *s = &nd->hand.in[i];
        if (s->complete != complete || strcmp(s->producer, producer) != 0)
            continue;
        if (s->gone_on) {
            snprintf(reason, rlen,
                     "arrived after the deadline of hand-off %zu: node '%s' went on without it (on_missing = "
                     "proceed)%s",
                     s->handoff + 1, nd->me->id,
                     nd->sec.recover && nd->drop.missing ? "; the survivors revealed their masks with it"
                                                         : "");
            return NULL;
        }
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
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            inbound_t *s = &nd->hand.in[i];
            const pft_topo_node_t *p = pft_topo_find(nd->topo, s->from);
            if (s->bundle || s->complete || s->gone_on || !p ||
                !pft_topo_edge_find(nd->topo, q->index, p->index))
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

/* out/inbox/h<hand-off>-<id hex>.pftb: where slot s's bundle with id id is stored. */
static char *inbox_path(node_t *nd, const inbound_t *s, const uint8_t id[PFT_BUNDLE_ID_LEN])
{
    char name[128], hex[2 * PFT_BUNDLE_ID_LEN + 1];
    snprintf(name, sizeof name, "h%zu-%s.pftb", s->handoff + 1, pft_bundle_id_hex(id, hex));
    return pft_fsio_join(nd->hand.inbox_dir, name);
}

/* Stores an accepted message durably; 0 or PFT_EIO / PFT_ENOMEM (message set: the path and errno text). */
static int store(node_t *nd, const inbound_t *s, const uint8_t id[PFT_BUNDLE_ID_LEN], const uint8_t *buf,
                 size_t len)
{
    char *path = inbox_path(nd, s, id);
    int rc = path ? pft_fsio_write_atomic(path, buf, len) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0 && pft_node__test_hook(nd, "PFT_TEST_STORE_FAIL")) {
        remove(path);
        rc = pft_err(PFT_EIO, "%s: write failed: %s (test hook PFT_TEST_STORE_FAIL)", path, strerror(ENOSPC));
    }
    pft_free(path);
    return rc;
}

/* 1 when slot s's bundle is the only one its stage waits for: the stage runs as soon as it is in, so its
 * statistics stay decoded for it (taken by pft_node_exact.c's take_received) instead of being decoded again
 * from the bytes: a chain's relay decodes its bundle once. A stage that waits for several keeps them light
 * (one decoded at a time when it runs), and so do bundles loaded from disk at a restart, and every bundle of
 * a node that must first queue for a compute slot (--compute-slots): the queue may be long, and a decoded
 * bundle of statistics holds a dense d×d matrix (13 MB at d = 1280) — a thousand-node graph's lap 2 queued
 * 691 nodes holding the total, and ran out of memory. */
static int used_alone(const node_t *nd, const inbound_t *s)
{
    if (nd->slots && pft_slots_held(nd->slots) < 0)
        return 0;
    for (size_t k = 0; k < nd->me->n_stages; k++) {
        const pft_stage_t *st = &nd->me->stages[k];
        for (size_t j = 0; j < st->n_recv; j++)
            if (st->recv[j] == s->handoff)
                return st->n_recv == 1;
    }
    return 0;
}

/* Validates, stores durably and records one inbound message. store = 0 when it comes from our own disk. */
static int accept_message(node_t *nd, const uint8_t *buf, size_t len, int store_it, char *reason, size_t rlen)
{
    if (pft_secmsg_is(buf, len)) { /* secure aggregation's control messages go elsewhere (pft_node.c) */
        snprintf(reason, rlen, "a secagg control message, not a bundle");
        return PFT_EREJECT;
    }
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    pft_bundle_t *b = NULL;
    int rc = pft_bundle_decode(buf, len, &lim, &b);
    if (rc) {
        snprintf(reason, rlen, "%s", pft_errmsg());
        return rc;
    }
    if (!pft_node__fp_check(nd, b, reason, rlen)) { /* first: a different topology explains what follows */
        pft_bundle_destroy(&b);
        return PFT_ETOPO;
    }
    inbound_t *s = match_bundle(nd, b, reason, rlen);
    if (!s) {
        pft_bundle_destroy(&b);
        return PFT_EREJECT;
    }
    if (s->bundle) { /* a duplicate of what this slot holds: acknowledge, use once */
        pft_bundle_destroy(&b);
        pft_debug("duplicate of the bundle from %s acknowledged again", s->from);
        return store_it ? PFT_TRANSPORT_DUPLICATE : 0; /* counted in duplicates_dropped */
    }
    if (nd->hand.keys) {
        const pft_topo_node_t *prod = pft_topo_find(nd->topo, s->producer);
        if (!prod || pft_keys_verify_message(&nd->hand.keys[prod->index], buf, len, &lim) != 0) {
            snprintf(reason, rlen, "signature of producer '%s' does not verify: %s", s->producer,
                     pft_errmsg());
            pft_bundle_destroy(&b);
            return PFT_EAUTH;
        }
    }
    if (!pft_node__plausible(nd, b, reason, rlen)) {
        pft_bundle_destroy(&b);
        return PFT_EREJECT;
    }
    uint8_t *copy = pft_alloc(len);
    if (!copy) {
        pft_bundle_destroy(&b);
        snprintf(reason, rlen, "out of memory");
        return PFT_ENOMEM;
    }
    memcpy(copy, buf, len);
    uint8_t id[PFT_BUNDLE_ID_LEN];
    if ((rc = pft_bundle_id(b, id)) == 0 && store_it)
        rc = store(nd, s, id, buf, len);
    if (rc) {
        snprintf(reason, rlen, "cannot store: %s", pft_errmsg());
        pft_free(copy);
        pft_bundle_destroy(&b);
        return rc == PFT_ENOMEM ? rc : PFT_EIO; /* transient for the sender; fatal here (on_message) */
    }
    memcpy(s->id, id, sizeof id);
    s->bundle = b;
    s->bytes = copy;
    s->len = len;
    char hex[2 * PFT_BUNDLE_ID_LEN + 1];
    pft_info("%s bundle %.12s from %s (producer %s, %d classes, %d contributing nodes, %zu bytes)%s",
             s->complete ? "complete" : "received", pft_bundle_id_hex(s->id, hex), s->from,
             pft_bundle_producer(b), pft_bundle_n_classes(b), pft_bundle_prov_n_nodes(b), len,
             store_it ? "" : " [from disk]");
    if (pft_bundle_is_stats(b) && !(store_it && used_alone(nd, s))) { /* memory: decoded again when used */
        pft_bundle_t *light = pft_node__provenance_only(nd, b);
        if (light) {
            pft_bundle_destroy(&s->bundle);
            s->bundle = light;
            s->light = 1;
        }
    }
    return 0;
}

/* The transport's callback for one inbound message: 0 acknowledges it; an error refuses it with reason.
 * A bundle that cannot be stored (disk full, EIO) is NACKed as transient (the sender keeps it) and ends this
 * node's run (nd->fatal: PFT_EXIT_IO at the next loop turn); ENOMEM is transient; anything else is a refusal
 * (pft_node__refusal). */
int pft_node__inbox_on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    node_t *nd = ctx;
    int rc = accept_message(nd, buf, len, 1, reason, rlen);
    if (rc == PFT_EIO) {
        if (!nd->fatal)
            pft_error("cannot store an inbound bundle (%zu bytes): %s", len, pft_errmsg());
        nd->fatal = PFT_EIO;
        snprintf(nd->fatal_msg, sizeof nd->fatal_msg, "inbox: %s", pft_errmsg());
    } else if (rc == PFT_ENOMEM) {
        pft_warn("inbound bundle (%zu bytes) NACKed for now: %s", len, reason);
    } else if (rc < 0) {
        char what[PFT_TRANSPORT_MAX_REASON + 64];
        snprintf(what, sizeof what, "%s (%zu bytes)", reason, len);
        pft_node__refusal(nd, PFT_NODE_REFUSED_BUNDLE, what);
    }
    return rc;
}

/* 1 if name is "h<handoff>-<64 hex>.pftb"; the id into id. */
static int stored_name(const char *name, size_t handoff, uint8_t id[PFT_BUNDLE_ID_LEN])
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "h%zu-", handoff);
    size_t len = strlen(name);
    if (strncmp(name, prefix, (size_t)n) != 0 || len != (size_t)n + 2 * PFT_BUNDLE_ID_LEN + 5 ||
        strcmp(name + len - 5, ".pftb") != 0)
        return 0;
    for (int i = 0; i < PFT_BUNDLE_ID_LEN; i++) {
        unsigned v;
        if (sscanf(name + n + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdef", name[n + 2 * i]) ||
            !strchr("0123456789abcdef", name[n + 2 * i + 1]))
            return 0;
        id[i] = (uint8_t)v;
    }
    return 1;
}

/* A stored bundle that does not hash to the id in its name or fails validation: counted and logged as a
 * refusal, renamed to <name>.corrupt (kept for inspection, never loaded again); its slot stays empty. */
static void refuse_stored(node_t *nd, const char *path, const char *why)
{
    char what[PFT_TRANSPORT_MAX_REASON + 600];
    snprintf(what, sizeof what, "%s: %s; not used (renamed to .corrupt)", path, why);
    pft_node__refusal(nd, PFT_NODE_REFUSED_STORED, what);
    char *bad = pft_alloc(strlen(path) + 9);
    if (bad) {
        sprintf(bad, "%s.corrupt", path);
        if (rename(path, bad) != 0)
            pft_error("renaming %s: %s", path, strerror(errno));
    }
    pft_free(bad);
}

/* Loads one stored file of slot s (its name holds the id it must hash to). */
static void load_stored(node_t *nd, inbound_t *s, const char *path, const uint8_t want[PFT_BUNDLE_ID_LEN])
{
    uint8_t *buf = NULL, id[PFT_BUNDLE_ID_LEN];
    size_t len = 0;
    char why[PFT_TRANSPORT_MAX_REASON + 128], hex[2 * PFT_BUNDLE_ID_LEN + 1];
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    if (pft_fsio_read(path, (size_t)nd->run->max_bundle_mb << 20, &buf, &len) != 0)
        snprintf(why, sizeof why, "unreadable: %s", pft_errmsg());
    else if (pft_bundle_message_id(buf, len, &lim, id) != 0)
        snprintf(why, sizeof why, "corrupt: %s", pft_errmsg());
    else if (memcmp(id, want, sizeof id) != 0)
        snprintf(why, sizeof why, "corrupt: its content hashes to %.12s..., not to the id in its name",
                 pft_bundle_id_hex(id, hex));
    else if (s->bundle)
        snprintf(why, sizeof why, "a second bundle for hand-off %zu", s->handoff + 1);
    else {
        char reason[PFT_TRANSPORT_MAX_REASON + 1];
        if (accept_message(nd, buf, len, 0, reason, sizeof reason) == 0) {
            s->stored_before = s->bundle != NULL; /* its bytes count in bytes_received (result.json) */
            pft_free(buf);
            return;
        }
        snprintf(why, sizeof why, "does not validate: %s", reason);
    }
    pft_free(buf);
    refuse_stored(nd, path, why);
}

/* out/missing/h<hand-off>: the record that the node went on without slot s's bundle (its sender's id). */
static char *missing_path(const node_t *nd, const inbound_t *s)
{
    char name[64];
    snprintf(name, sizeof name, "missing/h%zu", s->handoff + 1);
    return pft_fsio_join(nd->args->out_dir, name);
}

/* The node goes on without slot s's bundle: recorded durably first, so that neither this run (a late bundle
 * is refused) nor a restart (which does not wait for it again, nor use one stored later) can use it. 0 or
 * PFT_EIO / PFT_ENOMEM (message set). */
static int go_on_without(node_t *nd, inbound_t *s)
{
    if (s->gone_on)
        return 0;
    char *path = missing_path(nd, s);
    int rc =
        path ? pft_fsio_write_atomic(path, s->from, strlen(s->from)) : pft_err(PFT_ENOMEM, "out of memory");
    pft_free(path);
    if (rc)
        return pft_err_wrap(rc, "recording hand-off %zu as missing", s->handoff + 1);
    s->gone_on = 1;
    return 0;
}

/* Marks the slots an earlier run of this node went on without (out/missing/). */
static void load_gone_on(node_t *nd)
{
    for (size_t i = 0; i < nd->hand.n_in; i++) {
        inbound_t *s = &nd->hand.in[i];
        char *path = missing_path(nd, s);
        if (path && pft_fsio_exists(path)) {
            s->gone_on = s->missing = 1;
            pft_info(
                "hand-off %zu from %s: this node went on without it before a restart (%s); a late bundle "
                "is refused",
                s->handoff + 1, s->from, path);
        }
        pft_free(path);
    }
}

/* Loads inbound bundles stored by an earlier run of this node (restart after a crash), each only if it still
 * hashes to the id in its name and validates (signature included) as it did on arrival; none for a hand-off
 * the earlier run went on without (out/missing/). */
void pft_node__inbox_load(node_t *nd)
{
    load_gone_on(nd);
    DIR *dir = opendir(nd->hand.inbox_dir);
    if (!dir) {
        pft_error("%s: cannot list: %s", nd->hand.inbox_dir, strerror(errno));
        return;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            uint8_t want[PFT_BUNDLE_ID_LEN];
            if (!stored_name(e->d_name, nd->hand.in[i].handoff + 1, want))
                continue;
            if (nd->hand.in[i].gone_on) {
                pft_warn("%s/%s: not used: this node went on without hand-off %zu before a restart",
                         nd->hand.inbox_dir, e->d_name, nd->hand.in[i].handoff + 1);
                continue;
            }
            char *path = pft_fsio_join(nd->hand.inbox_dir, e->d_name);
            if (path)
                load_stored(nd, &nd->hand.in[i], path, want);
            pft_free(path);
        }
    }
    closedir(dir);
}

/* The stage's inbound hand-offs that passed their deadline without a bundle: recorded as gone on without
 * (a late one is then refused), or the run fails (on_missing = fail). */
static int settle_missing(node_t *nd, const pft_stage_t *st, size_t missing)
{
    if (missing && nd->run->on_missing == PFT_TOPO_MISSING_FAIL)
        return pft_err(PFT_ETIMEOUT, "%zu predecessor bundle(s) missing at the deadline (on_missing=fail)",
                       missing);
    for (size_t j = 0; missing && j < st->n_recv; j++)
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            inbound_t *s = &nd->hand.in[i];
            int rc = s->handoff == st->recv[j] && s->missing && !s->bundle ? go_on_without(nd, s) : 0;
            if (rc)
                return rc;
        }
    if (missing)
        pft_warn("going on without %zu missing bundle(s) (on_missing=proceed); late ones are refused",
                 missing);
    return 1;
}

/* Test hook: PFT_TEST_GONE=<id>[@<lap>][,...]: the hand-off of a listed predecessor (in every lap, or in lap
 * <lap> only) that has not delivered is past its deadline as soon as no other hand-off of the stage is still
 * waiting. A test of a predecessor that never comes then waits for the others' bundles (a condition), not for
 * the deadline's seconds, which must stay long enough for the others on a loaded machine. 1 when the listed
 * ones are due now. */
static int gone_early(const node_t *nd, const pft_stage_t *st, double now)
{
#ifndef PFT_TEST_HOOKS
    (void)nd, (void)st, (void)now;
    return 0; /* a release pays nothing for it */
#endif
    int listed = 0;
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            const inbound_t *s = &nd->hand.in[i];
            if (s->handoff != st->recv[j] || s->bundle || now > s->deadline || s->gone_on)
                continue;
            char in_lap[256]; /* an id too long for it never matches */
            snprintf(in_lap, sizeof in_lap, "%s@%d", s->from, st->lap);
            if (!pft_node__test_listed("PFT_TEST_GONE", s->from) &&
                !pft_node__test_listed("PFT_TEST_GONE", in_lap))
                return 0;
            listed = 1;
        }
    return listed;
}

int pft_node__inbox_ready(node_t *nd, void *stage)
{
    const pft_stage_t *st = stage;
    size_t missing = 0, waiting = 0;
    double now = pft_fsio_now();
    const char *who = NULL;
    int early = gone_early(nd, st, now);
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            inbound_t *s = &nd->hand.in[i];
            if (s->handoff != st->recv[j] || s->bundle)
                continue;
            if (now > s->deadline || s->gone_on || early) {
                if (early && !s->missing)
                    pft_warn("test hook: %s counts as past its deadline (PFT_TEST_GONE)", s->from);
                if (!s->missing)
                    pft_warn("no bundle from %s by its deadline", s->from);
                s->missing = 1;
                missing++;
            } else {
                waiting++;
                who = s->from;
            }
        }
    if (waiting == 0)
        return settle_missing(nd, st, missing);
    char detail[256];
    snprintf(detail, sizeof detail, "lap %d: %zu bundle(s), e.g. from %s", st->lap, waiting, who);
    pft_node__set_status(nd, "waiting", detail);
    return 0;
}

/* Received bundles of a stage, largest knowledge first (so counts from big bundles win ties). */
size_t pft_node__inbox_stage_bundles(node_t *nd, const pft_stage_t *st, inbound_t **list)
{
    size_t n = 0;
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->hand.n_in; i++)
            if (nd->hand.in[i].handoff == st->recv[j] && nd->hand.in[i].bundle)
                list[n++] = &nd->hand.in[i];
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
    for (size_t i = 0; i < nd->hand.n_in; i++)
        if (st->n_recv && nd->hand.in[i].handoff == st->recv[0] && nd->hand.in[i].bundle)
            s = &nd->hand.in[i];
    return s;
}

void pft_node__inbox_release(node_t *nd, const pft_stage_t *st)
{
    for (size_t i = 0; i < nd->hand.n_in; i++)
        for (size_t j = 0; j < st->n_recv; j++) {
            inbound_t *s = &nd->hand.in[i];
            if (s->handoff != st->recv[j] || !s->bundle)
                continue;
            pft_bundle_t *light = pft_node__provenance_only(nd, s->bundle);
            if (light) {
                pft_bundle_destroy(&s->bundle);
                s->bundle = light;
            }
            /* used: a masked part's 6.6 MB (d = 1280, ten classes) need not wait with the node for lap 2 */
            PFT_FREE(s->bytes);
        }
}

void pft_node__inbox_json(const node_t *nd, json_t *recv, json_t *missing)
{
    for (size_t i = 0; i < nd->hand.n_in; i++) {
        const inbound_t *s = &nd->hand.in[i];
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

/* The end of a hand-off (RELIABILITY.md §5): a finished node stays reachable while a predecessor has not
 * confirmed reading the ACK of a bundle this node stored (the transport's CONFIRM), so that a predecessor
 * that could not read it yet (busy, or killed and restarted) asks again and is ACKed again instead of waiting
 * out send_deadline; at most as long as the longest send_deadline of its inbound edges (a sender waits that
 * long for an ACK; the receiver waits as long for the sender to read it). A sender stopped past that still
 * reads the ACK it received before this node left (the transport keeps it). */
double pft_node__inbox_hold_s(const node_t *nd)
{
    double hold = 0;
    for (size_t i = 0; i < pft_topo_edge_count(nd->topo); i++) {
        const pft_topo_edge_t *e = pft_topo_edge(nd->topo, i);
        if (e->head == nd->my_index && e->send_deadline > hold)
            hold = e->send_deadline;
    }
    return hold;
}

int pft_node__inbox_unconfirmed(const node_t *nd)
{
    return nd->hand.tp ? pft_transport_unconfirmed(nd->hand.tp) : 0;
}
