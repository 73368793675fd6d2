/* pft_node: one peer's run, stage by stage as the topology's plan says (DESIGN.md §2, §6).
 *
 * A stage waits for its inbound hand-offs (until their deadlines), then either refits (EM per class on the
 * node's real features ∪ samples of every received bundle) or adopts a received complete bundle (ring
 * or mesh lap 2), sends the result to its successors, and, in the node's last stage, trains and evaluates the head.
 * Inbound bundles are validated, written durably to out/inbox/ and only then acknowledged. Sample counts
 * come from provenance: a (node, class) already counted, by the node's own data or an earlier bundle, is
 * not counted again, so paths that rejoin (a diamond) add each node's data once. */
#include "pft_node.h"

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_dataset.h"
#include "pft_dp.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_gmm.h"
#include "pft_head.h"
#include "pft_keys.h"
#include "pft_log.h"
#include "pft_npy.h"
#include "pft_topo.h"
#include "pft_transport.h"

#include <jansson.h>
#include <sodium.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static volatile sig_atomic_t s_stop;

/* Fault injection for the crash/restart tests: with PFT_TEST_HOOKS compiled in, PFT_CRASH_AT=<point> in the
 * environment kills the node with SIGKILL at that point. Release builds compile the hook to nothing. */
#ifdef PFT_TEST_HOOKS
static void crash_point(const char *point)
{
    const char *at = getenv("PFT_CRASH_AT");
    if (at && strcmp(at, point) == 0) {
        pft_warn("test hook: SIGKILL at %s", point);
        raise(SIGKILL);
    }
}
#else
#define crash_point(point) ((void)0)
#endif

void pft_node_request_stop(void)
{
    s_stop = 1;
}

const char *pft_node_exit_text(int code)
{
    switch (code) {
#define PFT_X_TEXT(name, value, text) \
    case value:                       \
        return text;
        PFT_NODE_EXIT_TABLE(PFT_X_TEXT)
#undef PFT_X_TEXT
    default:
        return "unknown exit code";
    }
}

/* One inbound hand-off addressed to this node. */
typedef struct {
    size_t handoff;            /* index in the run's hand-off list */
    const char *from;          /* sender id */
    const char *producer;      /* expected producer id of the bundle */
    int complete;              /* 1: the complete bundle (ring or mesh lap 2) */
    double deadline;           /* absolute pft_fsio_now() time */
    pft_bundle_t *bundle;      /* decoded and validated; NULL until it arrives */
    uint8_t *bytes;            /* the message as received (forwarded unchanged for FORWARD) */
    size_t len;
    uint8_t id[PFT_BUNDLE_ID_LEN];
    int missing;               /* 1: its deadline passed without it */
    int via_fallback;          /* 1: filled by a fallback predecessor's bundle instead of `from`'s */
} inbound_t;

/* One send this node made. */
typedef struct {
    const char *to;
    int handle;
    int lap;
    size_t bytes;
    char id_hex[2 * PFT_BUNDLE_ID_LEN + 1];
    uint8_t *msg;           /* the message, kept for a fallback send */
    const char *instead_of; /* fallback send: the primary successor that stayed unreachable; else NULL */
    int fell_back;          /* 1: this send failed and its bundle went to the fallback successor(s) */
    size_t seq;             /* hand-off number (0 for a fallback send) */
    int acked_before;       /* 1: acknowledged in an earlier run of this node (recorded on disk): not resent */
    int ack_saved;          /* 1: its acknowledgement is recorded on disk */
} outbound_t;

/* Rows for EM or the head, grown as classes are added. */
typedef struct {
    float *x;
    int32_t *y;
    int n, cap, d;
} rows_t;

typedef struct {
    const pft_node_args_t *args;
    pft_topo_t *topo;
    const pft_topo_run_t *run;
    const pft_topo_node_t *me;
    size_t my_index;
    const char *complete_producer; /* producer of the complete bundle (ring: the producer; mesh: the root, whose
                                    * role is also PFT_ROLE_PRODUCER); NULL for a chain or dag */
    pft_dataset_t *train, *test, *eval;
    int n_classes;
    int *own_counts;             /* real training rows per class (n_classes) */
    pft_transport_t *tp;
    inbound_t *in;
    size_t n_in;
    outbound_t *out;
    size_t n_out;
    double t_start;
    char *inbox_dir;
    /* results */
    rows_t head_rows;            /* what the head trains on */
    int n_real, n_synthetic;
    double em_seconds, head_seconds;
    long em_iters;
    int em_fits;
    pft_bundle_t *knowledge;     /* provenance the node ended with */
    json_t *drift;               /* per received bundle: mean log-lik of own features under it */
    int rejected;                /* inbound bundles refused by validation */
    json_t *refusals;            /* their reasons */
    /* security (unless --insecure) */
    pft_keypair_t *kp;           /* this node's keypair */
    pft_pubkey_t *keys;          /* every node's public key, by node index */
    /* DP-FedPFT (dp_epsilon > 0) */
    pft_rng_t *dp_rng;           /* noise generator, seeded from the OS (never from the run seed) */
    pft_dp_budget_t budget;      /* ledger, persisted in out/dp_ledger.json */
    json_t *dp;                  /* what the releases were, for result.json */
    double dp_delta_max;         /* largest delta over this bundle's classes */
    int dp_clipped;              /* rows clipped to norm 1 */
} node_t;

static void save_acks(node_t *nd);

/* ---------------------------------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void set_status(node_t *nd, const char *state, const char *detail)
{
    char *path = pft_fsio_join(nd->args->out_dir, "status");
    if (!path)
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s %s\n", state, detail ? detail : "");
    pft_fsio_write_atomic(path, buf, (size_t)n);
    pft_free(path);
}

static int rows_reserve(rows_t *r, int extra)
{
    if (r->n + extra <= r->cap)
        return 0;
    int cap = r->cap ? r->cap : 1024;
    while (cap < r->n + extra)
        cap *= 2;
    float *x = pft_realloc(r->x, (size_t)cap * (size_t)r->d * sizeof *x);
    if (!x)
        return PFT_ENOMEM;
    r->x = x;
    int32_t *y = pft_realloc(r->y, (size_t)cap * sizeof *y);
    if (!y)
        return PFT_ENOMEM;
    r->y = y;
    r->cap = cap;
    return 0;
}

static int rows_append(rows_t *r, const float *x, int n, int label)
{
    if (n <= 0)
        return 0;
    if (rows_reserve(r, n) != 0)
        return pft_err(PFT_ENOMEM, "out of memory for %d more rows", n);
    memcpy(r->x + (size_t)r->n * r->d, x, (size_t)n * r->d * sizeof(float));
    for (int i = 0; i < n; i++)
        r->y[r->n + i] = label;
    r->n += n;
    return 0;
}

static void rows_free(rows_t *r)
{
    PFT_FREE(r->x);
    PFT_FREE(r->y);
    r->n = r->cap = 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Inbound: validation, durable storage, matching to a hand-off. */

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
    /* a fallback hand-off: q names this node as its fallback because q's successor p, one of our predecessors,
     * stayed unreachable; q's bundle stands in for p's */
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
    snprintf(reason, rlen, "%s bundle from '%s' is not expected by node '%s'", complete ? "complete" : "partial",
             producer, nd->me->id);
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
            snprintf(reason, rlen, "signature of producer '%s' does not verify: %s", s->producer, pft_errmsg());
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
             s->complete ? "complete" : "received", pft_bundle_id_hex(s->id, hex), s->from, pft_bundle_producer(b),
             pft_bundle_n_classes(b), pft_bundle_prov_n_nodes(b), len, store ? "" : " [from disk]");
    return 0;
}

static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
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
static void load_stored_inbox(node_t *nd)
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

/* ---------------------------------------------------------------------------------------------- */
/* Setup. */

static int load_data(node_t *nd)
{
    pft_prep_t prep = (pft_prep_t)nd->run->prep;
    int rc = nd->me->has_data ? pft_npy_load_dataset(nd->me->train, nd->me->labels, 0, &nd->train) : 0;
    if (rc == 0 && nd->me->test)
        rc = pft_npy_load_dataset(nd->me->test, nd->me->test_labels, 0, &nd->test);
    if (rc == 0 && nd->args->eval_features)
        rc = pft_npy_load_dataset(nd->args->eval_features, nd->args->eval_labels, 0, &nd->eval);
    if (rc)
        return rc;
    if (!nd->me->has_data) { /* an aggregator: no rows of its own; the test data tells the feature dimension */
        const pft_dataset_t *ref = nd->test ? nd->test : nd->eval;
        if (!ref)
            return pft_err(PFT_EINVAL, "node '%s' has data = false: it needs a test set (test, test_labels) or "
                                       "--eval-features to know the feature dimension and to evaluate its head",
                           nd->me->id);
        nd->train = pft_dataset_new(0, pft_dataset_d(ref), pft_dataset_n_classes(ref));
        if (!nd->train)
            return pft_err(PFT_ENOMEM, "out of memory");
    }
    int d = pft_dataset_d(nd->train);
    if (nd->test && pft_dataset_d(nd->test) != d)
        return pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", nd->me->test, pft_dataset_d(nd->test),
                       nd->me->train, d);
    if (nd->eval && pft_dataset_d(nd->eval) != d)
        return pft_err(PFT_EINVAL, "%s has %d columns but %s has %d", nd->args->eval_features,
                       pft_dataset_d(nd->eval), nd->me->train, d);
    rc = pft_dataset_apply_prep(nd->train, prep);
    if (rc == 0 && nd->test)
        rc = pft_dataset_apply_prep(nd->test, prep);
    if (rc == 0 && nd->eval)
        rc = pft_dataset_apply_prep(nd->eval, prep);
    if (rc)
        return rc;
    nd->n_classes = pft_dataset_n_classes(nd->train);
    if (nd->test && pft_dataset_n_classes(nd->test) > nd->n_classes)
        nd->n_classes = pft_dataset_n_classes(nd->test);
    if (nd->eval && pft_dataset_n_classes(nd->eval) > nd->n_classes)
        nd->n_classes = pft_dataset_n_classes(nd->eval);
    nd->own_counts = pft_calloc((size_t)nd->n_classes, sizeof *nd->own_counts);
    if (!nd->own_counts)
        return pft_err(PFT_ENOMEM, "out of memory");
    int *tmp = pft_calloc((size_t)pft_dataset_n_classes(nd->train), sizeof *tmp);
    if (!tmp)
        return pft_err(PFT_ENOMEM, "out of memory");
    pft_dataset_class_counts(nd->train, tmp);
    for (int c = 0; c < pft_dataset_n_classes(nd->train); c++)
        nd->own_counts[c] = tmp[c];
    pft_free(tmp);
    nd->head_rows.d = d;
    pft_info("data: %d training rows, %d classes, d=%d, prep %s%s%s", pft_dataset_n(nd->train),
             pft_dataset_n_classes(nd->train), d, pft_prep_name(prep), nd->test ? ", own test split" : "",
             nd->eval ? ", global test set" : "");
    return 0;
}

/* Inbound slots (one per hand-off to this node) and outbound peers. */
static int plan_io(node_t *nd)
{
    const pft_handoff_t *h;
    size_t nh = pft_topo_handoffs(nd->topo, &h);
    for (size_t i = 0; i < pft_topo_node_count(nd->topo); i++)
        if (pft_topo_node(nd->topo, i)->role == PFT_ROLE_PRODUCER)
            nd->complete_producer = pft_topo_node(nd->topo, i)->id;
    nd->in = pft_calloc(nh + 1, sizeof *nd->in);
    nd->out = pft_calloc((nh + 1) * (nd->me->n_fallbacks + 1), sizeof *nd->out);
    if (!nd->in || !nd->out)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nh; i++) {
        if (h[i].to != nd->my_index)
            continue;
        inbound_t *s = &nd->in[nd->n_in++];
        s->handoff = i;
        s->from = pft_topo_node(nd->topo, h[i].from)->id;
        s->complete = h[i].complete;
        s->producer = h[i].complete && nd->complete_producer ? nd->complete_producer : s->from;
        const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, h[i].from, h[i].to);
        s->deadline = nd->t_start + (e ? e->deadline : nd->run->deadline);
        if (nd->keys) { /* only predecessors may connect (ZAP) */
            uint8_t curve[PFT_KEY_CURVE_LEN];
            pft_pubkey_curve(&nd->keys[h[i].from], curve);
            int rc = pft_transport_allow_key(nd->tp, curve, s->from);
            if (rc)
                return pft_err_wrap(rc, "allowing %s's key", s->from);
        }
    }
    for (size_t i = 0; i < nh; i++) {
        if (h[i].from != nd->my_index)
            continue;
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, h[i].to);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        if (nd->keys)
            pft_pubkey_curve(&nd->keys[peer->index], curve);
        int rc = pft_transport_add_peer(nd->tp, peer->id, peer->endpoint, nd->keys ? curve : NULL);
        if (rc && rc != PFT_EINVAL) /* EINVAL: already added (a ring or mesh may send on both laps to one node) */
            return pft_err_wrap(rc, "connecting to %s at %s", peer->id, peer->endpoint);
    }
    for (size_t i = 0; i < nd->me->n_fallbacks; i++) { /* used only if a primary successor stays unreachable */
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, nd->me->fallbacks[i]);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        if (nd->keys)
            pft_pubkey_curve(&nd->keys[peer->index], curve);
        int rc = pft_transport_add_peer(nd->tp, peer->id, peer->endpoint, nd->keys ? curve : NULL);
        if (rc && rc != PFT_EINVAL)
            return pft_err_wrap(rc, "connecting to fallback %s at %s", peer->id, peer->endpoint);
    }
    for (size_t i = 0; nd->keys && i < nd->me->n_fallback_preds; i++) {
        const pft_topo_node_t *q = pft_topo_node(nd->topo, nd->me->fallback_preds[i]);
        uint8_t curve[PFT_KEY_CURVE_LEN];
        pft_pubkey_curve(&nd->keys[q->index], curve);
        int rc = pft_transport_allow_key(nd->tp, curve, q->id);
        if (rc)
            return pft_err_wrap(rc, "allowing %s's key", q->id);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Stages. */

/* Waits until every inbound hand-off of the stage has arrived or passed its deadline. */
static int wait_for(node_t *nd, const pft_stage_t *st)
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
                return pft_err(PFT_ETIMEOUT, "%zu predecessor bundle(s) missing at the deadline (on_missing=fail)",
                               missing);
            if (missing)
                pft_warn("going on without %zu missing bundle(s) (on_missing=proceed)", missing);
            return 0;
        }
        snprintf(detail, sizeof detail, "lap %d: %zu bundle(s), e.g. from %s", st->lap, waiting, who);
        set_status(nd, "waiting", detail);
        if (s_stop)
            return pft_err(PFT_EINTR, "interrupted while waiting");
        int rc = pft_transport_poll(nd->tp, 200);
        save_acks(nd);
        if (rc == PFT_EINTR && s_stop)
            return pft_err(PFT_EINTR, "interrupted while waiting");
        if (rc && rc != PFT_EINTR)
            return pft_err_wrap(rc, "transport");
    }
}

/* Received bundles of a stage, largest knowledge first (so counts from big bundles win ties). */
static size_t stage_bundles(node_t *nd, const pft_stage_t *st, inbound_t **list)
{
    size_t n = 0;
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->n_in; i++)
            if (nd->in[i].handoff == st->recv[j] && nd->in[i].bundle)
                list[n++] = &nd->in[i];
    for (size_t a = 1; a < n; a++) /* insertion sort by provenance size, descending; stable */
        for (size_t b = a; b > 0; b--) {
            int pa = pft_bundle_prov_n_nodes(list[b - 1]->bundle), pb = pft_bundle_prov_n_nodes(list[b]->bundle);
            if (pb <= pa)
                break;
            inbound_t *t = list[b];
            list[b] = list[b - 1];
            list[b - 1] = t;
        }
    return n;
}

/* Rows of knowledge in bundle b for class label that `counted` does not hold yet. */
static uint64_t new_count(const pft_bundle_t *b, int ci, const pft_bundle_t *counted)
{
    int label = pft_bundle_class_label(b, ci);
    uint64_t n = 0, in_prov = 0;
    for (int p = 0; p < pft_bundle_prov_n_nodes(b); p++) {
        const char *node = pft_bundle_prov_node(b, p);
        uint64_t c = pft_bundle_prov_count(b, node, label);
        in_prov += c;
        if (pft_bundle_prov_count(counted, node, label) == 0)
            n += c;
    }
    if (pft_bundle_prov_n_nodes(b) == 0 || in_prov == 0)
        return pft_bundle_class_count(b, ci); /* no provenance for the class: trust the count */
    return n;
}

/* Draws n samples of class ci of b into out (n×d). */
static int sample_class(node_t *nd, const pft_bundle_t *b, int ci, int n, float *out, uint64_t salt)
{
    pft_rng_t *rng = pft_rng_new(pft_rng_derive(nd->run->seed, fnv1a(nd->me->id) ^ salt,
                                                (uint64_t)pft_bundle_class_label(b, ci)));
    if (!rng)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = pft_gmm_sample(pft_bundle_class_gmm(b, ci), rng, n, out);
    pft_rng_destroy(&rng);
    return rc;
}

/* Appends m samples of class ci of b to the head's rows. */
static int add_samples(node_t *nd, const pft_bundle_t *b, int ci, uint64_t m, uint64_t salt)
{
    int d = pft_dataset_d(nd->train);
    if (m > INT32_MAX / 4 || rows_reserve(&nd->head_rows, (int)m) != 0)
        return pft_err(PFT_ENOMEM, "class %d: cannot hold %llu samples", pft_bundle_class_label(b, ci),
                       (unsigned long long)m);
    int rc = sample_class(nd, b, ci, (int)m, nd->head_rows.x + (size_t)nd->head_rows.n * d, salt);
    if (rc)
        return rc;
    for (uint64_t j = 0; j < m; j++)
        nd->head_rows.y[nd->head_rows.n + (int)j] = pft_bundle_class_label(b, ci);
    nd->head_rows.n += (int)m;
    return 0;
}

/* Mean log-likelihood of this node's real features of each class under bundle b (the drift meter). */
static void record_drift(node_t *nd, const char *what, const pft_bundle_t *b)
{
    double total = 0;
    long n_total = 0;
    for (int ci = 0; ci < pft_bundle_n_classes(b); ci++) {
        int label = pft_bundle_class_label(b, ci), n;
        float *xc = NULL;
        if (label >= pft_dataset_n_classes(nd->train) || pft_dataset_gather_class(nd->train, label, &xc, &n) || !n) {
            pft_free(xc);
            continue;
        }
        double ll;
        if (pft_gmm_score(pft_bundle_class_gmm(b, ci), xc, n, &ll) == 0 && isfinite(ll)) {
            total += ll * n;
            n_total += n;
        }
        pft_free(xc);
    }
    if (n_total)
        json_array_append_new(nd->drift, json_pack("{s:s,s:s,s:f,s:i}", "bundle", what, "producer",
                                                   pft_bundle_producer(b), "own_avg_loglik", total / n_total,
                                                   "own_rows", (int)n_total));
}

/* The head's rows for class c: the real rows and, per received bundle, m·head_draws fresh samples for the
 * m rows it stands for; real rows are repeated head_draws times so that every represented row weighs the
 * same. More draws only lower the Monte Carlo noise of the synthetic set; the objective stays the same
 * (the head's L2 strength follows the represented count, not the row count). */
static int head_rows_add(node_t *nd, int c, const float *own, int n_own, inbound_t **recv, const uint64_t *take,
                         size_t nr)
{
    int f = nd->run->head_draws, rc = 0;
    for (int rep = 0; rep < f && rc == 0; rep++)
        rc = rows_append(&nd->head_rows, own, n_own, c);
    for (size_t r = 0; r < nr && rc == 0; r++) {
        uint64_t m = take ? take[r * (size_t)nd->n_classes + (size_t)c] : 0;
        int ci = pft_bundle_find_class(recv[r]->bundle, c);
        if (!m || ci < 0)
            continue;
        rc = add_samples(nd, recv[r]->bundle, ci, m * (uint64_t)f, 0x4eadULL + r);
    }
    return rc;
}

/* DP-FedPFT (paper §4.3): a K = 1 Gaussian of the class's union, clipped to norm ≤ 1, released with Gaussian noise
 * (pft_dp). The union itself is left untouched (the head still trains on it). */
static int dp_release(node_t *nd, int c, const float *x, int n, pft_gmm_t **out)
{
    int d = pft_dataset_d(nd->train);
    float *xc = pft_alloc_array((size_t)n * (size_t)d, sizeof *xc);
    if (!xc)
        return pft_err(PFT_ENOMEM, "out of memory");
    memcpy(xc, x, (size_t)n * (size_t)d * sizeof *xc);
    nd->dp_clipped += pft_dp_clip(xc, n, d);
    pft_dp_info_t info;
    double delta = nd->me->dp_delta > 0 ? nd->me->dp_delta : PFT_DP_DELTA_AUTO;
    int rc = pft_dp_fit(xc, n, d, nd->me->cov, nd->me->dp_epsilon, delta, (pft_dp_mech_t)nd->me->dp_mech,
                        nd->run->reg_covar, nd->dp_rng, out, &info);
    pft_free(xc);
    if (rc)
        return rc;
    if (info.delta > nd->dp_delta_max)
        nd->dp_delta_max = info.delta;
    json_array_append_new(json_object_get(nd->dp, "per_class"),
                          json_pack("{s:i,s:i,s:f,s:f,s:f,s:b,s:i}", "class", c, "n", n, "epsilon", info.eps, "delta",
                                    info.delta, "sigma", info.sigma, "sigma_raised", info.sigma_raised, "n_floored",
                                    info.n_floored));
    return 0;
}

/* Charges the release of one bundle (classes are disjoint: parallel composition, so (ε, max δ)) to the ledger
 * and persists it before anything is sent. PFT_EBUDGET when the node's total would be exceeded. */
static int dp_charge(node_t *nd)
{
    int rc = pft_dp_budget_charge(&nd->budget, nd->me->dp_epsilon, nd->dp_delta_max);
    if (rc)
        return rc;
    char *path = pft_fsio_join(nd->args->out_dir, "dp_ledger.json");
    json_t *o = json_pack("{s:f,s:f,s:i}", "eps_spent", nd->budget.eps_spent, "delta_spent", nd->budget.delta_spent,
                          "releases", nd->budget.releases);
    char *text = o ? json_dumps(o, JSON_REAL_PRECISION(17)) : NULL;
    rc = path && text ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    free(text);
    json_decref(o);
    pft_free(path);
    return rc;
}

/* DP setup: K must be 1, the ledger is loaded, the noise generator seeded from the OS. */
static int dp_setup(node_t *nd)
{
    nd->dp = json_object();
    if (!(nd->me->dp_epsilon > 0))
        return 0;
    if (nd->me->k != 1)
        return pft_err(PFT_ETOPO, "node '%s': DP-FedPFT releases one Gaussian per class: set k = 1 (it has k = %d)",
                       nd->me->id, nd->me->k);
    double total = nd->me->dp_budget > 0 ? nd->me->dp_budget : INFINITY;
    pft_dp_budget_init(&nd->budget, total, 1.0);
    char *path = pft_fsio_join(nd->args->out_dir, "dp_ledger.json");
    json_error_t err;
    json_t *l = path && pft_fsio_exists(path) ? json_load_file(path, 0, &err) : NULL;
    if (l) {
        nd->budget.eps_spent = json_number_value(json_object_get(l, "eps_spent"));
        nd->budget.delta_spent = json_number_value(json_object_get(l, "delta_spent"));
        nd->budget.releases = (int)json_integer_value(json_object_get(l, "releases"));
        json_decref(l);
    }
    pft_free(path);
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        return pft_err(PFT_EIO, "getrandom failed: cannot seed the DP noise");
#ifdef PFT_TEST_HOOKS
    if (getenv("PFT_DP_SEED")) {
        seed = strtoull(getenv("PFT_DP_SEED"), NULL, 10);
        pft_warn("test hook: DP noise seeded from PFT_DP_SEED (not private)");
    }
#endif
    nd->dp_rng = pft_rng_new(seed);
    if (!nd->dp_rng)
        return pft_err(PFT_ENOMEM, "out of memory");
    json_object_set_new(nd->dp, "mechanism", json_string(pft_dp_mech_name((pft_dp_mech_t)nd->me->dp_mech)));
    json_object_set_new(nd->dp, "epsilon", json_real(nd->me->dp_epsilon));
    json_object_set_new(nd->dp, "per_class", json_array());
    pft_info("DP-FedPFT: epsilon %g per release, delta %s, mechanism %s, budget %s (spent %g in %d releases)",
             nd->me->dp_epsilon, nd->me->dp_delta > 0 ? "given" : "1/n", pft_dp_mech_name((pft_dp_mech_t)nd->me->dp_mech),
             isfinite(total) ? "limited" : "unlimited", nd->budget.eps_spent, nd->budget.releases);
    return 0;
}

/* Rows per represented row in the EM union: real rows repeated, synthetic ones drawn that many times over,
 * so that every represented row keeps its weight while the Monte Carlo noise of the samples shrinks.
 * DP releases use the plain union (their sensitivity is per row). */
static int em_draws(const node_t *nd)
{
    if (nd->me->dp_epsilon > 0)
        return 1;
    return nd->run->em_draws;
}

/* EM on own rows ∪ samples of the received bundles, per class; builds the outbound bundle. */
static int refit(node_t *nd, const pft_stage_t *st, int complete, pft_bundle_t **out)
{
    int d = pft_dataset_d(nd->train), rc = PFT_ENOMEM;
    inbound_t **recv = pft_calloc(st->n_recv + 1, sizeof *recv);
    size_t nr = recv ? stage_bundles(nd, st, recv) : 0;
    pft_bundle_t *b = pft_bundle_new(nd->run->run, nd->me->id, (pft_dtype_t)nd->run->dtype, d);
    pft_bundle_t *counted = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, d);
    uint64_t *take = pft_calloc(nr * (size_t)nd->n_classes + 1, sizeof *take);
    rows_t cls = {.d = d};
    float *xc = NULL;
    pft_gmm_t *g = NULL;
    if (!recv || !b || !counted || !take)
        goto done;
    /* counts: own data first, then each bundle's not-yet-counted contributors */
    for (int c = 0; c < nd->n_classes; c++)
        if (nd->own_counts[c] && (rc = pft_bundle_prov_add(counted, nd->me->id, c, (uint64_t)nd->own_counts[c])))
            goto done;
    for (size_t r = 0; r < nr; r++) {
        const pft_bundle_t *rb = recv[r]->bundle;
        for (int ci = 0; ci < pft_bundle_n_classes(rb); ci++) {
            int label = pft_bundle_class_label(rb, ci);
            if (label >= nd->n_classes) {
                rc = pft_err(PFT_EINVAL, "bundle from %s has class %d; this run has %d classes",
                             pft_bundle_producer(rb), label, nd->n_classes);
                goto done;
            }
            take[r * (size_t)nd->n_classes + (size_t)label] = new_count(rb, ci, counted);
        }
        if ((rc = pft_bundle_prov_merge(counted, rb)))
            goto done;
        record_drift(nd, "received", rb);
        pft_bundle_add_parent(b, recv[r]->id);
    }
    pft_gmm_opts_t go;
    pft_gmm_opts_default(&go);
    go.k = nd->me->k;
    go.cov = nd->me->cov;
    go.rank = nd->me->cov_rank;
    go.max_iter = nd->run->max_iter;
    go.tol = nd->run->tol;
    go.reg_covar = nd->run->reg_covar;
    go.n_init = nd->run->n_init;
    for (int c = 0; c < nd->n_classes; c++) {
        cls.n = 0;
        int n_own = 0;
        if (c < pft_dataset_n_classes(nd->train) && (rc = pft_dataset_gather_class(nd->train, c, &xc, &n_own)))
            goto done;
        if ((rc = rows_append(&cls, xc, n_own, c)))
            goto done;
        PFT_FREE(xc);
        int f = em_draws(nd), represented = n_own;
        if (f > 1 && n_own > 0 && (rc = rows_reserve(&cls, n_own * (f - 1)))) /* before copying from cls.x */
            goto done;
        for (int rep = 1; rep < f; rep++)
            if ((rc = rows_append(&cls, cls.x, n_own, c)))
                goto done;
        for (size_t r = 0; r < nr; r++) {
            uint64_t m = take[r * (size_t)nd->n_classes + (size_t)c];
            int ci = pft_bundle_find_class(recv[r]->bundle, c);
            if (!m || ci < 0)
                continue;
            represented += (int)m;
            nd->n_synthetic += (int)m;
            m *= (uint64_t)f;
            if (m > INT32_MAX / 2 || (rc = rows_reserve(&cls, (int)m))) {
                rc = pft_err(PFT_ENOMEM, "class %d: cannot hold %llu samples", c, (unsigned long long)m);
                goto done;
            }
            if ((rc = sample_class(nd, recv[r]->bundle, ci, (int)m, cls.x + (size_t)cls.n * d, (uint64_t)r)))
                goto done;
            for (uint64_t j = 0; j < m; j++)
                cls.y[cls.n + (int)j] = c;
            cls.n += (int)m;
        }
        nd->n_real += n_own;
        if (cls.n == 0)
            continue;
        set_status(nd, "fitting", NULL);
        go.seed = pft_rng_derive(nd->run->seed, fnv1a(nd->me->id), (uint64_t)c);
        pft_gmm_info_t info = {.iters = 1, .k_used = 1};
        double t0 = pft_fsio_now();
        rc = nd->me->dp_epsilon > 0 ? dp_release(nd, c, cls.x, cls.n, &g) : pft_gmm_fit(cls.x, cls.n, d, &go, &g, &info);
        double dt = pft_fsio_now() - t0;
        if (rc) {
            pft_err_wrap(rc, "%s for class %d (%d rows)", nd->me->dp_epsilon > 0 ? "DP release" : "EM", c, cls.n);
            goto done;
        }
        nd->em_seconds += dt;
        nd->em_iters += info.iters;
        nd->em_fits++;
        pft_debug("class %d: %d real + %d synthetic rows, K=%d, %d EM iterations, %.2fs", c, n_own, cls.n - n_own,
                  info.k_used, info.iters, dt);
        if ((rc = pft_bundle_add_class(b, c, (uint64_t)represented, &g)))
            goto done;
        if (nd->em_fits == 2)
            crash_point("mid-em");
        if (st->final && (rc = head_rows_add(nd, c, cls.x, n_own, recv, take, nr)))
            goto done;
    }
    if ((rc = pft_bundle_prov_merge(b, counted)))
        goto done;
    if (nd->me->dp_epsilon > 0 && pft_bundle_prov_contains(b, nd->me->id) &&
        (rc = pft_bundle_prov_set_dp(b, nd->me->id, nd->me->dp_epsilon, nd->dp_delta_max)))
        goto done;
    if (complete && (rc = pft_bundle_set_flags(b, PFT_BUNDLE_COMPLETE)))
        goto done;
    record_drift(nd, "sent", b);
    *out = b;
    b = NULL;
    rc = 0;
done:
    if (rc == PFT_ENOMEM && !strstr(pft_errmsg(), "memory"))
        pft_err(rc, "out of memory while refitting");
    pft_free(xc);
    pft_free(take);
    pft_free(recv);
    rows_free(&cls);
    pft_gmm_destroy(&g);
    pft_bundle_destroy(&counted);
    pft_bundle_destroy(&b);
    return rc;
}

/* Head rows for an adopted complete bundle: own rows ∪ samples standing for everyone else's data
 * (the bundle's count minus what this node itself contributed to it), head_draws times as above. */
static int adopt(node_t *nd, const inbound_t *s)
{
    int rc = 0, f = nd->run->head_draws;
    const pft_bundle_t *b = s->bundle;
    float *xc = NULL;
    if (b)
        record_drift(nd, "received", b);
    for (int c = 0; c < nd->n_classes && rc == 0; c++) {
        int n_own = 0;
        if (c < pft_dataset_n_classes(nd->train) && (rc = pft_dataset_gather_class(nd->train, c, &xc, &n_own)))
            break;
        for (int rep = 0; rep < f && rc == 0; rep++)
            rc = rows_append(&nd->head_rows, xc, n_own, c);
        PFT_FREE(xc);
        nd->n_real += n_own;
        int ci = b ? pft_bundle_find_class(b, c) : -1;
        if (rc || ci < 0)
            continue;
        uint64_t total = pft_bundle_class_count(b, ci), mine = pft_bundle_prov_count(b, nd->me->id, c);
        uint64_t m = total > mine ? total - mine : 0;
        nd->n_synthetic += (int)m;
        if (m)
            rc = add_samples(nd, b, ci, m * (uint64_t)f, 0xc0);
    }
    return rc;
}

/* Acknowledged hand-offs are recorded in out/acked/h<seq> (the bundle id), so that a node restarted after a
 * crash does not send again what its successor already stored (the successor may be gone by then). */
static char *ack_path(const node_t *nd, size_t seq)
{
    char name[64];
    snprintf(name, sizeof name, "acked/h%zu", seq);
    return pft_fsio_join(nd->args->out_dir, name);
}

static void save_acks(node_t *nd)
{
    for (size_t i = 0; i < nd->n_out; i++) {
        outbound_t *o = &nd->out[i];
        if (o->ack_saved || !o->seq || o->acked_before ||
            pft_transport_send_state(nd->tp, o->handle, NULL, NULL) != PFT_SEND_ACKED)
            continue;
        char *path = ack_path(nd, o->seq);
        if (path && pft_fsio_write_atomic(path, o->id_hex, strlen(o->id_hex)) == 0)
            o->ack_saved = 1;
        pft_free(path);
    }
}

/* 1 if hand-off seq was acknowledged for bundle id_hex in an earlier run. */
static int acked_earlier(const node_t *nd, size_t seq, const char *id_hex)
{
    char *path = ack_path(nd, seq);
    uint8_t *buf = NULL;
    size_t len = 0;
    int yes = path && pft_fsio_exists(path) && pft_fsio_read(path, 256, &buf, &len) == 0 &&
              len == strlen(id_hex) && memcmp(buf, id_hex, len) == 0;
    pft_free(buf);
    pft_free(path);
    return yes;
}

/* A send's state; one acknowledged before a restart counts as acknowledged. */
static int out_state(const node_t *nd, const outbound_t *o, int *rc, const char **reason)
{
    if (o->acked_before) {
        if (rc)
            *rc = 0;
        if (reason)
            *reason = "acknowledged before a restart";
        return PFT_SEND_ACKED;
    }
    return pft_transport_send_state(nd->tp, o->handle, rc, reason);
}

static int send_bundle(node_t *nd, const pft_stage_t *st, const uint8_t *bytes, size_t len)
{
    const pft_handoff_t *h;
    pft_topo_handoffs(nd->topo, &h);
    for (size_t j = 0; j < st->n_send; j++) {
        const pft_handoff_t *ho = &h[st->send[j]];
        const pft_topo_node_t *peer = pft_topo_node(nd->topo, ho->to);
        const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, ho->from, ho->to);
        double dl = e ? e->send_deadline : nd->run->send_deadline;
        uint8_t id[PFT_BUNDLE_ID_LEN];
        int rc = pft_bundle_message_id(bytes, len, id);
        if (rc)
            return rc;
        char hex[2 * PFT_BUNDLE_ID_LEN + 1];
        pft_bundle_id_hex(id, hex);
        if (acked_earlier(nd, ho->seq, hex)) {
            outbound_t *o = &nd->out[nd->n_out++];
            *o = (outbound_t){.to = peer->id, .handle = -1, .lap = ho->lap, .bytes = len, .seq = ho->seq,
                              .acked_before = 1};
            memcpy(o->id_hex, hex, sizeof hex);
            pft_info("hand-off %zu to %s was acknowledged before a restart: not sent again", ho->seq, peer->id);
            continue;
        }
        int handle = pft_transport_send(nd->tp, peer->id, bytes, len, id,
                                        pft_transport_now_ms() + (int64_t)(dl * 1000));
        if (handle < 0)
            return pft_err_wrap(handle, "sending to %s", peer->id);
        outbound_t *o = &nd->out[nd->n_out++];
        o->seq = ho->seq;
        o->to = peer->id;
        o->handle = handle;
        o->lap = ho->lap;
        o->bytes = len;
        if (nd->me->n_fallbacks && (o->msg = pft_alloc(len)))
            memcpy(o->msg, bytes, len);
        pft_bundle_id_hex(id, o->id_hex);
        pft_info("sending %s bundle %.12s to %s (hand-off %zu, lap %d, %zu bytes)",
                 ho->what == PFT_WHAT_FORWARD ? "complete" : "refit", o->id_hex, peer->id, ho->seq, ho->lap, len);
    }
    return 0;
}

static int run_stage(node_t *nd, size_t k, const pft_stage_t *st)
{
    int rc = wait_for(nd, st);
    if (rc)
        return rc;
    nd->n_real = nd->n_synthetic = 0; /* result.json reports the last stage's union */
    if (st->action == PFT_WHAT_REFIT) {
        const pft_handoff_t *h;
        pft_topo_handoffs(nd->topo, &h);
        int complete = 0;
        for (size_t j = 0; j < st->n_send; j++)
            complete |= h[st->send[j]].complete;
        pft_bundle_t *b = NULL;
        pft_info("stage %zu: refitting on own data and %zu received bundle(s)", k + 1, st->n_recv);
        rc = refit(nd, st, complete, &b);
        if (rc)
            return rc;
        if (nd->me->dp_epsilon > 0 && (rc = dp_charge(nd)) != 0) {
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
            set_status(nd, "sending", NULL);
            rc = send_bundle(nd, st, buf, len);
        }
        if (rc == 0)
            (void)pft_transport_poll(nd->tp, 0); /* transmit now, not after the head is trained */
#ifdef PFT_TEST_HOOKS
        crash_point("retry-pending");
        if (rc == 0 && getenv("PFT_CRASH_AT") && strcmp(getenv("PFT_CRASH_AT"), "after-forward") == 0) {
            for (int i = 0; i < 600 && pft_transport_pending(nd->tp) > 0; i++)
                pft_transport_poll(nd->tp, 50);
            save_acks(nd);
            crash_point("after-forward");
        }
#endif
        pft_free(buf);
        pft_bundle_destroy(&nd->knowledge);
        nd->knowledge = b;
        return rc;
    }
    /* FORWARD: the complete bundle (ring or mesh lap 2), passed on unchanged to every successor of the stage */
    inbound_t *s = NULL;
    for (size_t i = 0; i < nd->n_in; i++)
        if (st->n_recv && nd->in[i].handoff == st->recv[0] && nd->in[i].bundle)
            s = &nd->in[i];
    if (!s) {
        pft_warn("stage %zu: no complete bundle arrived; the head uses own data only", k + 1);
        if (st->final)
            return adopt(nd, &(inbound_t){.bundle = NULL});
        return 0;
    }
    char *path = pft_fsio_join(nd->args->out_dir, "complete.pftb");
    rc = path ? pft_fsio_write_atomic(path, s->bytes, s->len) : PFT_ENOMEM;
    pft_free(path);
    if (rc == 0 && st->n_send)
        rc = send_bundle(nd, st, s->bytes, s->len);
    if (rc == 0 && st->n_send)
        (void)pft_transport_poll(nd->tp, 0);
    if (rc == 0 && st->final)
        rc = adopt(nd, s);
    if (rc == 0) {
        pft_bundle_destroy(&nd->knowledge);
        nd->knowledge = pft_bundle_new(nd->run->run, nd->me->id, PFT_DTYPE_F32, pft_dataset_d(nd->train));
        rc = nd->knowledge ? pft_bundle_prov_merge(nd->knowledge, s->bundle) : PFT_ENOMEM;
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Head, results. */

static json_t *class_acc_json(const double *acc, int n)
{
    json_t *a = json_array();
    for (int c = 0; c < n; c++)
        json_array_append_new(a, isnan(acc[c]) ? json_null() : json_real(acc[c]));
    return a;
}

/* Serves the transport between steps of a long computation (the head's L-BFGS iterations), so that an
 * acknowledgement arriving meanwhile is read and retransmissions go out while the successor is still up.
 * libzmq drops a reply still queued on a DEALER (ZMQ_IMMEDIATE) once its peer disconnects: a node that polled
 * only after training lost the ACK of a successor that finished first, and waited out send_deadline. */
static void serve_while_busy(void *ctx)
{
    node_t *nd = ctx;
    if (!nd->tp)
        return;
    (void)pft_transport_poll(nd->tp, 0); /* a failure here shows again in finish_sends */
    save_acks(nd);
}

#ifdef PFT_TEST_HOOKS
/* Test hook: PFT_TEST_BUSY=<id>:<ms> makes node <id> busy for ms before training its head (serving the
 * transport as training does), to test a successor that finishes first. */
static void busy_point(node_t *nd)
{
    const char *v = getenv("PFT_TEST_BUSY");
    size_t n = strlen(nd->me->id);
    if (!v || strncmp(v, nd->me->id, n) != 0 || v[n] != ':')
        return;
    pft_warn("test hook: busy for %s ms", v + n + 1);
    for (double end = pft_fsio_now() + atof(v + n + 1) / 1000; pft_fsio_now() < end;) {
        usleep(50000);
        serve_while_busy(nd);
    }
}
#else
#define busy_point(nd) ((void)0)
#endif

/* Trains the head on head_rows, evaluates it, writes head.npy; fills result fields. */
static int train_head(node_t *nd, json_t *res)
{
    set_status(nd, "training", NULL);
    int d = pft_dataset_d(nd->train);
    if (nd->head_rows.n == 0)
        return pft_err(PFT_EINVAL, "no training rows for the head");
    pft_head_opts_t ho;
    pft_head_opts_default(&ho);
    ho.l2 = 1.0 / (nd->run->head_c * (nd->n_real + nd->n_synthetic)); /* represented rows */
    ho.on_iter = serve_while_busy;
    ho.on_iter_ctx = nd;
    pft_head_t *head = NULL;
    pft_head_info_t info;
    busy_point(nd);
    double t0 = pft_fsio_now();
    int rc = pft_head_fit(nd->head_rows.x, nd->head_rows.y, nd->head_rows.n, d, nd->n_classes, &ho, &head, &info);
    nd->head_seconds = pft_fsio_now() - t0;
    if (rc)
        return pft_err_wrap(rc, "training the head on %d rows", nd->head_rows.n);
    pft_info("head trained on %d rows (%d real, %d synthetic) in %.2fs, %d L-BFGS iterations", nd->head_rows.n,
             nd->n_real, nd->n_synthetic, nd->head_seconds, info.iters);
    double *acc = pft_calloc((size_t)nd->n_classes, sizeof *acc);
    char *path = pft_fsio_join(nd->args->out_dir, "head.npy");
    if (!acc || !path) {
        rc = pft_err(PFT_ENOMEM, "out of memory");
        goto done;
    }
    rc = pft_npy_write_f32(path, pft_head_weights(head), nd->n_classes, d + 1);
    if (rc)
        goto done;
    const pft_dataset_t *sets[2] = {nd->test, nd->eval};
    const char *names[2] = {"accuracy_local", "accuracy_global"};
    const char *pc_names[2] = {"per_class_accuracy_local", "per_class_accuracy_global"};
    for (int k = 0; k < 2; k++) {
        if (!sets[k]) {
            json_object_set_new(res, names[k], json_null());
            continue;
        }
        double a;
        rc = pft_head_accuracy(head, pft_dataset_x(sets[k]), pft_dataset_y(sets[k]), pft_dataset_n(sets[k]), &a);
        if (rc == 0)
            rc = pft_head_class_accuracy(head, pft_dataset_x(sets[k]), pft_dataset_y(sets[k]),
                                         pft_dataset_n(sets[k]), acc, NULL);
        if (rc)
            goto done;
        json_object_set_new(res, names[k], json_real(a));
        json_object_set_new(res, pc_names[k], class_acc_json(acc, nd->n_classes));
        pft_info("%s %.4f on %d test rows", names[k], a, pft_dataset_n(sets[k]));
    }
    json_object_set_new(res, "head_iters", json_integer(info.iters));
done:
    pft_free(acc);
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
            json_object_set_new(per, pft_bundle_prov_node(b, i), json_pack("{s:f,s:f}", "epsilon", eps, "delta", delta));
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

/* Waits for every send to end (acked, rejected or failed); returns how many did not succeed. */
/* A primary send that failed (its successor stayed unreachable past send_deadline) goes to every fallback
 * successor instead. Returns the number of fallback sends queued. */
static int fall_back(node_t *nd)
{
    int queued = 0;
    size_t n = nd->n_out;
    for (size_t i = 0; i < n; i++) {
        outbound_t *o = &nd->out[i];
        if (o->fell_back || o->instead_of || !o->msg || out_state(nd, o, NULL, NULL) != PFT_SEND_FAILED)
            continue;
        o->fell_back = 1;
        for (size_t k = 0; k < nd->me->n_fallbacks; k++) {
            const pft_topo_node_t *peer = pft_topo_node(nd->topo, nd->me->fallbacks[k]);
            const pft_topo_edge_t *e = pft_topo_edge_find(nd->topo, nd->my_index, peer->index);
            double dl = e ? e->send_deadline : nd->run->send_deadline;
            int handle = pft_transport_send(nd->tp, peer->id, o->msg, o->bytes, NULL,
                                            pft_transport_now_ms() + (int64_t)(dl * 1000));
            if (handle < 0) {
                pft_error("fallback to %s: %s", peer->id, pft_errmsg());
                continue;
            }
            outbound_t *f = &nd->out[nd->n_out++];
            *f = (outbound_t){.to = peer->id, .handle = handle, .lap = o->lap, .bytes = o->bytes, .instead_of = o->to};
            memcpy(f->id_hex, o->id_hex, sizeof f->id_hex);
            pft_warn("%s stayed unreachable: sending bundle %.12s to fallback %s", o->to, o->id_hex, peer->id);
            queued++;
        }
    }
    return queued;
}

/* Waits for every send to end (acked, rejected or failed, falling back where the topology says); returns how
 * many hand-offs did not reach anyone. */
static int finish_sends(node_t *nd, int *interrupted)
{
    for (;;) {
        while (pft_transport_pending(nd->tp) > 0) {
            if (s_stop) {
                *interrupted = 1;
                break;
            }
            set_status(nd, "sending", "waiting for acknowledgements");
            int rc = pft_transport_poll(nd->tp, 200);
            save_acks(nd);
            if (rc && rc != PFT_EINTR)
                break;
            if (nd->me->n_fallbacks)
                fall_back(nd);
        }
        if (*interrupted || !nd->me->n_fallbacks || fall_back(nd) == 0)
            break;
    }
    save_acks(nd);
    int bad = 0;
    for (size_t i = 0; i < nd->n_out; i++) {
        int rc;
        const char *reason;
        outbound_t *o = &nd->out[i];
        int st = out_state(nd, o, &rc, &reason);
        int rescued = 0;
        for (size_t j = 0; o->fell_back && j < nd->n_out; j++)
            rescued |= nd->out[j].instead_of == o->to && strcmp(nd->out[j].id_hex, o->id_hex) == 0 &&
                       pft_transport_send_state(nd->tp, nd->out[j].handle, NULL, NULL) == PFT_SEND_ACKED;
        if (st == PFT_SEND_ACKED)
            pft_info("hand-off to %s%s%s acknowledged", o->to, o->instead_of ? " instead of " : "",
                     o->instead_of ? o->instead_of : "");
        else if (rescued)
            pft_warn("hand-off to %s %s; its fallback was acknowledged", o->to, pft_send_state_name((pft_send_state_t)st));
        else if (!o->instead_of) {
            bad++;
            pft_error("hand-off to %s %s: %s", o->to, pft_send_state_name((pft_send_state_t)st),
                      reason && *reason              ? reason
                      : st == PFT_SEND_PENDING && *interrupted ? "interrupted before it was acknowledged"
                      : rc                           ? pft_strerror(rc)
                                                     : "not acknowledged");
        }
    }
    return bad;
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

static int write_result(node_t *nd, json_t *res, int exit_code)
{
    pft_transport_stats_t ts = {0};
    if (nd->tp)
        pft_transport_stats(nd->tp, &ts);
    json_t *sends = json_array(), *recv = json_array(), *missing = json_array();
    for (size_t i = 0; i < nd->n_out; i++) {
        int rc = 0;
        const char *reason = NULL;
        int st = out_state(nd, &nd->out[i], &rc, &reason);
        json_t *o = json_pack("{s:s,s:i,s:s,s:I,s:s,s:s,s:b}", "to", nd->out[i].to, "lap", nd->out[i].lap,
                              "bundle_id", nd->out[i].id_hex, "bytes", (json_int_t)nd->out[i].bytes, "state",
                              st >= 0 ? pft_send_state_name((pft_send_state_t)st) : "unknown", "reason",
                              reason ? reason : "", "fell_back", nd->out[i].fell_back);
        if (nd->out[i].instead_of)
            json_object_set_new(o, "fallback_for", json_string(nd->out[i].instead_of));
        json_array_append_new(sends, o);
    }
    for (size_t i = 0; i < nd->n_in; i++) {
        inbound_t *s = &nd->in[i];
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
    json_object_set_new(res, "rejected", json_integer((json_int_t)ts.rejected));
    json_object_set_new(res, "refusals", json_incref(nd->refusals));
    json_object_set_new(res, "secure", json_boolean(nd->keys != NULL));
    json_object_set_new(res, "handshakes_denied", json_integer((json_int_t)ts.zap_denied));
    json_object_set_new(res, "em_iters_mean", json_real(nd->em_fits ? (double)nd->em_iters / nd->em_fits : 0));
    json_object_set_new(res, "em_seconds", json_real(nd->em_seconds));
    json_object_set_new(res, "head_seconds", json_real(nd->head_seconds));
    json_object_set_new(res, "wall_seconds", json_real(pft_fsio_now() - nd->t_start));
    json_object_set_new(res, "peak_rss_kb", json_integer(peak_rss_kb()));
    json_object_set_new(res, "provenance", provenance_json(nd->knowledge));
    json_object_set_new(res, "privacy", privacy_json(nd->knowledge));
    json_object_set_new(res, "sent", sends);
    json_object_set_new(res, "received", recv);
    json_object_set_new(res, "missing", missing);
    json_object_set_new(res, "drift", json_incref(nd->drift));
    if (nd->me->dp_epsilon > 0 && nd->dp) {
        json_object_set_new(nd->dp, "clipped_rows", json_integer(nd->dp_clipped));
        json_object_set_new(nd->dp, "budget",
                            json_pack("{s:f,s:f,s:i}", "eps_spent", nd->budget.eps_spent, "delta_spent",
                                      nd->budget.delta_spent, "releases", nd->budget.releases));
        if (isfinite(nd->budget.eps_total))
            json_object_set_new(json_object_get(nd->dp, "budget"), "eps_total", json_real(nd->budget.eps_total));
        json_object_set_new(res, "dp", json_incref(nd->dp));
    }
    char *text = json_dumps(res, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    char *path = pft_fsio_join(nd->args->out_dir, "result.json");
    int rc = text && path ? pft_fsio_write_atomic(path, text, strlen(text)) : PFT_ENOMEM;
    free(text);
    pft_free(path);
    return rc;
}

/* Keys: this node's keypair and every node's public key; CURVE keys for the transport. Without keys in the
 * topology the node runs only with --insecure (plain text, unsigned bundles), and says so. */
/* A socket handed over with --listen-fd must be a listening TCP socket on the port of the node's endpoint. */
static int check_listen_fd(int fd, const char *endpoint)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int listening = 0, port = -1;
    socklen_t ol = sizeof listening;
    const char *colon = endpoint ? strrchr(endpoint, ':') : NULL;
    if (colon)
        port = atoi(colon + 1);
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0 || a.sin_family != AF_INET)
        return pft_err(PFT_ENET, "--listen-fd %d: not an IPv4 socket (%s)", fd, strerror(errno));
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening)
        return pft_err(PFT_ENET, "--listen-fd %d: the socket is not listening", fd);
    if (ntohs(a.sin_port) != port)
        return pft_err(PFT_ENET, "--listen-fd %d: the socket is bound to port %d, the endpoint %s says %d", fd,
                       ntohs(a.sin_port), endpoint ? endpoint : "(none)", port);
    return 0;
}

static int setup_keys(node_t *nd, pft_transport_opts_t *to, uint8_t cpub[PFT_KEY_CURVE_LEN],
                      uint8_t csec[PFT_KEY_CURVE_LEN])
{
    if (nd->args->insecure) {
        pft_warn("--insecure: connections are plain text and bundles are neither signed nor verified");
        return 0;
    }
    if (!nd->me->key)
        return pft_err(PFT_EAUTH, "the topology names no key for node '%s'; give every node a key (pftnet keygen) "
                                  "or run with --insecure",
                       nd->me->id);
    size_t nn = pft_topo_node_count(nd->topo);
    nd->keys = pft_calloc(nn, sizeof *nd->keys);
    if (!nd->keys)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nn; i++) {
        const pft_topo_node_t *n = pft_topo_node(nd->topo, i);
        int rc = n->key ? pft_pubkey_resolve(n->key, &nd->keys[i]) : pft_err(PFT_EAUTH, "no key");
        if (rc)
            return pft_err_wrap(PFT_EAUTH, "public key of node '%s'", n->id);
    }
    char *secret = NULL;
    if (nd->args->key)
        secret = pft_strdup(nd->args->key);
    else {
        size_t len = strlen(nd->me->key);
        if (len > 4 && strcmp(nd->me->key + len - 4, ".pub") == 0 && (secret = pft_strdup(nd->me->key)))
            strcpy(secret + len - 4, ".key");
    }
    if (!secret)
        return pft_err(PFT_EAUTH, "no secret key: give --key FILE");
    int rc = pft_keypair_load(secret, &nd->kp);
    pft_free(secret);
    if (rc)
        return rc;
    if (!pft_pubkey_equal(pft_keypair_public(nd->kp), &nd->keys[nd->my_index])) {
        char a[PFT_KEY_FINGERPRINT_LEN + 1], b[PFT_KEY_FINGERPRINT_LEN + 1];
        return pft_err(PFT_EAUTH, "the secret key (%s) does not belong to node '%s''s public key (%s)",
                       pft_pubkey_fingerprint(pft_keypair_public(nd->kp), a), nd->me->id,
                       pft_pubkey_fingerprint(&nd->keys[nd->my_index], b));
    }
    if ((rc = pft_keypair_curve(nd->kp, cpub, csec)))
        return rc;
    to->curve_public_key = cpub;
    to->curve_secret_key = csec;
    char fp[PFT_KEY_FINGERPRINT_LEN + 1];
    pft_info("key %s: CURVE-encrypted connections, signed bundles",
             pft_pubkey_fingerprint(pft_keypair_public(nd->kp), fp));
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */

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
    rows_free(&nd->head_rows);
    pft_bundle_destroy(&nd->knowledge);
    pft_dataset_destroy(&nd->train);
    pft_dataset_destroy(&nd->test);
    pft_dataset_destroy(&nd->eval);
    pft_topo_destroy(&nd->topo);
    json_decref(nd->drift);
    json_decref(nd->dp);
    json_decref(nd->refusals);
    pft_rng_destroy(&nd->dp_rng);
    pft_keypair_destroy(&nd->kp);
    pft_free(nd->keys);
}

int pft_node_run(const pft_node_args_t *args)
{
    node_t nd = {.args = args, .t_start = pft_fsio_now()};
    nd.drift = json_array();
    nd.refusals = json_array();
    json_t *res = json_object();
    int code = PFT_EXIT_OK, rc;

    if ((rc = pft_fsio_mkdirs(args->out_dir)) != 0) {
        pft_error("%s", pft_errmsg());
        code = PFT_EXIT_IO;
        goto out;
    }
    set_status(&nd, "starting", NULL);
    rc = pft_topo_load(args->topology, PFT_TOPO_REQUIRE_RESOLVED, &nd.topo);
    if (rc == 0 && !(nd.me = pft_topo_find(nd.topo, args->id)))
        rc = pft_err(PFT_ETOPO, "%s: no node '%s'", args->topology, args->id);
    if (rc) {
        pft_error("%s", pft_errmsg());
        code = rc == PFT_ETOPO || rc == PFT_EFORMAT || rc == PFT_EIO ? PFT_EXIT_TOPOLOGY : exit_for(rc);
        goto out;
    }
    nd.run = pft_topo_run(nd.topo);
    nd.my_index = nd.me->index;
    pft_info("node %s: %s of a %s of %zu nodes, run '%s', K=%d %s", nd.me->id, pft_role_name(nd.me->role),
             pft_kind_name(pft_topo_kind(nd.topo)), pft_topo_node_count(nd.topo), nd.run->run, nd.me->k,
             pft_cov_name(nd.me->cov));
    if ((rc = load_data(&nd)) != 0) {
        pft_error("%s", pft_errmsg());
        code = rc == PFT_ENOMEM ? PFT_EXIT_NUMERIC : PFT_EXIT_DATA;
        goto out;
    }
    if ((rc = dp_setup(&nd)) != 0) {
        pft_error("%s", pft_errmsg());
        code = exit_for(rc);
        goto out;
    }
    nd.inbox_dir = pft_fsio_join(args->out_dir, "inbox");
    char *acked_dir = pft_fsio_join(args->out_dir, "acked");
    int dir_rc = acked_dir ? pft_fsio_mkdirs(acked_dir) : PFT_ENOMEM;
    pft_free(acked_dir);
    if (!nd.inbox_dir || dir_rc || pft_fsio_mkdirs(nd.inbox_dir) != 0) {
        pft_error("%s", pft_errmsg());
        code = PFT_EXIT_IO;
        goto out;
    }
    pft_transport_opts_t to;
    pft_transport_opts_default(&to);
    to.max_msg_size = (int64_t)nd.run->max_bundle_mb << 20;
    if (args->listen_fd >= 0 && (rc = check_listen_fd(args->listen_fd, nd.me->endpoint)) != 0) {
        pft_error("%s", pft_errmsg());
        code = PFT_EXIT_NETWORK;
        goto out;
    }
    to.listen_fd = args->listen_fd;
    uint8_t cpub[PFT_KEY_CURVE_LEN], csec[PFT_KEY_CURVE_LEN];
    if ((rc = setup_keys(&nd, &to, cpub, csec)) != 0) {
        pft_error("%s", pft_errmsg());
        code = PFT_EXIT_TOPOLOGY;
        goto out;
    }
    nd.tp = pft_transport_new(nd.me->endpoint, &to, on_message, &nd);
    sodium_memzero(csec, sizeof csec);
    if (!nd.tp) {
        pft_error("binding %s: %s", nd.me->endpoint, pft_errmsg());
        code = PFT_EXIT_NETWORK;
        goto out;
    }
    if ((rc = plan_io(&nd)) != 0) {
        pft_error("%s", pft_errmsg());
        code = exit_for(rc);
        goto out;
    }
    pft_info("listening on %s%s", pft_transport_endpoint(nd.tp),
             args->listen_fd >= 0 ? " (socket handed over by the launcher)" : "");
    crash_point("before-receive");
    load_stored_inbox(&nd);

    for (size_t k = 0; k < nd.me->n_stages; k++) {
        const pft_stage_t *st = &nd.me->stages[k];
        rc = run_stage(&nd, k, st);
        if (rc == 0 && st->final)
            rc = train_head(&nd, res);
        if (rc) {
            pft_error("%s", pft_errmsg());
            code = exit_for(rc);
            goto out;
        }
    }
    int interrupted = 0;
    if (finish_sends(&nd, &interrupted) > 0)
        code = PFT_EXIT_SEND;
    if (interrupted)
        code = PFT_EXIT_INTERRUPTED;
out:
    if (nd.me && write_result(&nd, res, code) != 0) {
        pft_error("writing result.json: %s", pft_errmsg());
        if (code == PFT_EXIT_OK)
            code = PFT_EXIT_IO;
    }
    set_status(&nd, code == PFT_EXIT_OK ? "done" : "failed", pft_node_exit_text(code));
    /* keep answering late duplicate deliveries (a lost ACK) for a little while; count them in result.json */
    if (nd.tp && code == PFT_EXIT_OK) {
        pft_transport_stats_t before, after;
        pft_transport_stats(nd.tp, &before);
        for (double end = pft_fsio_now() + args->linger_ms / 1000.0; !s_stop && pft_fsio_now() < end;)
            pft_transport_poll(nd.tp, 100);
        pft_transport_stats(nd.tp, &after);
        if (after.received != before.received && write_result(&nd, res, code) != 0)
            pft_error("writing result.json: %s", pft_errmsg());
    }
    if (code == PFT_EXIT_OK)
        pft_info("done in %.1fs", pft_fsio_now() - nd.t_start);
    json_decref(res);
    node_free(&nd);
    return code;
}
