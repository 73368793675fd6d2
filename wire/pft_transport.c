/* pft_transport: the façade: the transport object, its options, the poll loop and accessors. */
#include "pft_transport.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

void pft_transport_opts_default(pft_transport_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->max_msg_size = (int64_t)256 << 20;
    opts->rcvhwm = 64;
    opts->sndhwm = 8;
    opts->linger_ms = 1000;
    opts->retry_initial_ms = 200;
    opts->retry_max_ms = 5000;
    opts->reconnect_ivl_ms = 100;
    opts->max_remembered = 4096;
    opts->listen_fd = -1;
    opts->max_grants = 2;
    opts->grant_bytes = (int64_t)64 << 20;
    opts->grant_timeout_ms = 10000;
    opts->eager_bytes = 512 << 10;
}

const char *pft_send_state_name(pft_send_state_t state)
{
    switch (state) {
    case PFT_SEND_PENDING:
        return "pending";
    case PFT_SEND_ACKED:
        return "acked";
    case PFT_SEND_REJECTED:
        return "rejected";
    case PFT_SEND_FAILED:
        return "failed";
    }
    return "?";
}

static int check_opts(const pft_transport_opts_t *o)
{
    if (!o->curve_public_key != !o->curve_secret_key)
        return pft_err(PFT_EINVAL,
                       "transport: CURVE needs both curve_public_key and curve_secret_key (or neither "
                       "for plain text)");
    if (o->curve_public_key) {
        uint8_t derived[KEY_LEN];
        if (sodium_init() < 0)
            return pft_err(PFT_EUNSUPPORTED, "transport: libsodium cannot be initialised");
        if (crypto_scalarmult_base(derived, o->curve_secret_key) != 0 ||
            sodium_memcmp(derived, o->curve_public_key, KEY_LEN) != 0)
            return pft_err(PFT_EINVAL,
                           "transport: CURVE keys: curve_public_key does not belong to curve_secret_key");
    }
    if (o->max_msg_size < 1 || o->rcvhwm < 1 || o->sndhwm < 1 || o->linger_ms < 0 ||
        o->retry_initial_ms < 1 || o->retry_max_ms < o->retry_initial_ms || o->reconnect_ivl_ms < 1 ||
        o->max_remembered < 1 || o->max_grants < 1 || o->max_grants > 1024 || o->grant_bytes < 1 ||
        o->grant_timeout_ms < 1 || o->eager_bytes < 0)
        return pft_err(
            PFT_EINVAL,
            "transport: option out of range (sizes, high-water marks, delays, grants must be >= 1, "
            "retry_max_ms >= retry_initial_ms)");
    return 0;
}

/* The ROUTER's options: message size (with CURVE's frame overhead), water marks, linger, mandatory routing,
 * CURVE server, the handshake monitor and a socket handed over (listen_fd). 0, or -1 with the message set. */
static int router_options(pft_transport_t *self, const pft_transport_opts_t *opts)
{
    /* CURVE frames carry 33 bytes more than the message (command name, nonce, MAC, flags), and libzmq checks
     * the limit on the frame as it arrives */
    int64_t maxmsg = opts->max_msg_size;
    if (self->curve && maxmsg <= INT64_MAX - CURVE_FRAME_OVERHEAD)
        maxmsg += CURVE_FRAME_OVERHEAD;
    if (zmq_setsockopt(self->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0) {
        pft_transport__zerr(PFT_ENET, "ZMQ_MAXMSGSIZE");
        return -1;
    }
    if (pft_transport__setopt_int(self->router, ZMQ_RCVHWM, opts->rcvhwm, "ZMQ_RCVHWM") ||
        pft_transport__setopt_int(self->router, ZMQ_SNDHWM, 1000, "ZMQ_SNDHWM") ||
        pft_transport__setopt_int(self->router, ZMQ_LINGER, opts->linger_ms, "ZMQ_LINGER") ||
        pft_transport__setopt_int(self->router, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY"))
        return -1;
    if (self->curve && pft_transport__setup_curve_server(self))
        return -1;
    if (!(self->router_mon =
              pft_transport__monitor_new(self, self->router, MON_HS_FAILED | ZMQ_EVENT_DISCONNECTED)))
        return -1;
    if (opts->listen_fd >= 0 &&
        pft_transport__setopt_int(self->router, ZMQ_USE_FD, opts->listen_fd, "ZMQ_USE_FD"))
        return -1;
    return 0;
}

pft_transport_t *pft_transport_new(const char *endpoint, const pft_transport_opts_t *opts,
                                   pft_transport_on_message_fn on_message, void *ctx)
{
    pft_transport_opts_t def;
    if (!opts) {
        pft_transport_opts_default(&def);
        opts = &def;
    }
    if (!endpoint || check_opts(opts)) {
        if (!endpoint)
            pft_err(PFT_EINVAL, "transport: NULL endpoint");
        return NULL;
    }
    pft_transport_t *self = pft_calloc(1, sizeof *self);
    if (!self) {
        pft_err(PFT_ENOMEM, "transport: out of memory");
        return NULL;
    }
    self->opts = *opts;
    self->on_message = on_message;
    self->cb_ctx = ctx;
    if (opts->curve_public_key) {
        self->curve = 1;
        memcpy(self->curve_public, opts->curve_public_key, KEY_LEN);
        memcpy(self->curve_secret, opts->curve_secret_key, KEY_LEN);
    }
    self->opts.curve_public_key = self->opts.curve_secret_key = NULL; /* borrowed: not kept */
    self->accepted = pft_alloc_array((size_t)opts->max_remembered, PFT_TRANSPORT_ID_LEN);
    if (!self->accepted) {
        pft_err(PFT_ENOMEM, "transport: out of memory");
        goto fail;
    }
    if (pft_transport__grow_items(self, 0) || pft_transport__flow_init(self))
        goto fail;
    if (opts->zmq_context) {
        self->ctx = opts->zmq_context;
    } else {
        self->ctx = zmq_ctx_new();
        self->own_ctx = 1;
        if (!self->ctx) {
            pft_transport__zerr(PFT_ENET, "zmq_ctx_new");
            goto fail;
        }
    }
    self->router = zmq_socket(self->ctx, ZMQ_ROUTER);
    if (!self->router) {
        pft_transport__zerr(PFT_ENET, "zmq_socket(ROUTER)");
        goto fail;
    }
    if (router_options(self, opts))
        goto fail;
    if (zmq_bind(self->router, endpoint) != 0) {
        pft_err(PFT_ENET, "transport: cannot bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
        goto fail;
    }
    size_t elen = sizeof self->endpoint;
    if (zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, self->endpoint, &elen) != 0) {
        pft_transport__zerr(PFT_ENET, "ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    self->endpoint[sizeof self->endpoint - 1] = '\0';
    return self;
fail:
    pft_transport_destroy(&self);
    return NULL;
}

void pft_transport_destroy(pft_transport_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_transport_t *self = *self_p;
    for (int i = 0; i < self->n_sends; i++)
        if (self->sends[i].state == PFT_SEND_PENDING)
            zmq_msg_close(&self->sends[i].body);
    pft_free(self->sends);
    for (int i = 0; i < self->n_peers; i++) {
        pft_transport__monitor_close(self->peers[i].sock, &self->peers[i].mon);
        if (self->peers[i].sock)
            zmq_close(self->peers[i].sock);
        pft_free(self->peers[i].endpoint);
    }
    pft_free(self->peers);
    if (self->router) {
        pft_transport__monitor_close(self->router, &self->router_mon);
        zmq_close(self->router);
    }
    if (self->zap)
        zmq_close(self->zap); /* after the ROUTER: never a CURVE server without its handler */
    if (self->own_ctx && self->ctx)
        zmq_ctx_term(self->ctx);
    pft_free(self->items);
    pft_free(self->item_kind);
    pft_free(self->item_peer);
    pft_free(self->accepted);
    pft_free(self->allowed);
    pft_transport__flow_free(self);
    sodium_memzero(self, sizeof *self);
    pft_free(self);
    *self_p = NULL;
}

const char *pft_transport_endpoint(const pft_transport_t *self)
{
    return self->endpoint;
}

/* ---- poll ---- */

static int add_item(pft_transport_t *self, int n, void *sock, item_kind_t kind, int peer)
{
    self->items[n] = (zmq_pollitem_t){.socket = sock, .events = ZMQ_POLLIN};
    self->item_kind[n] = kind;
    self->item_peer[n] = peer;
    return n + 1;
}

/* Time the caller spent away from the transport (computing, stopped) does not count against its sends'
 * deadlines: a gap of more than AWAY_MS since the last poll moves every pending send's deadline on by the
 * gap, so that a send whose receiver restarted meanwhile is offered again before it can fail. */
#define AWAY_MS 1000
static void credit_time_away(pft_transport_t *self)
{
    int64_t now = pft_transport_now_ms(), gap = self->served_ms ? now - self->served_ms : 0;
    if (gap <= AWAY_MS)
        return;
    for (int i = 0; i < self->n_sends; i++)
        if (self->sends[i].state == PFT_SEND_PENDING && self->sends[i].deadline > 0)
            self->sends[i].deadline += gap;
}

int pft_transport_poll(pft_transport_t *self, int timeout_ms)
{
    credit_time_away(self);
    /* replies first, timers after: an ACK that arrived while the caller was busy must not be answered by a
     * needless retransmission (an overdue timer makes the wait 0, so this costs no latency) */
    int64_t next = pft_transport__next_timer(self);
    long wait = timeout_ms;
    if (next >= 0 && (wait < 0 || next < wait))
        wait = (long)next;
    int n_items = add_item(self, 0, self->router, ITEM_ROUTER, -1);
    if (self->zap) /* ZAP requests arrive while we wait: they wake the poll like bundles do */
        n_items = add_item(self, n_items, self->zap, ITEM_ZAP, -1);
    if (self->router_mon)
        n_items = add_item(self, n_items, self->router_mon, ITEM_ROUTER_MON, -1);
    for (int i = 0; i < self->n_peers; i++) {
        n_items = add_item(self, n_items, self->peers[i].sock, ITEM_PEER, i);
        if (self->peers[i].mon)
            n_items = add_item(self, n_items, self->peers[i].mon, ITEM_PEER_MON, i);
    }
    int rc = zmq_poll(self->items, n_items, wait), drained = 1;
    if (rc < 0) {
        if (zmq_errno() == EINTR)
            return pft_err(PFT_EINTR, "transport: poll interrupted");
        return pft_transport__zerr(PFT_ENET, "zmq_poll");
    }
    for (int i = 0; i < n_items; i++) {
        if (!(self->items[i].revents & ZMQ_POLLIN))
            continue;
        int pi = self->item_peer[i];
        switch (self->item_kind[i]) {
        case ITEM_ROUTER:
            drained = pft_transport__handle_inbound(self);
            break;
        case ITEM_ZAP:
            pft_transport__handle_zap(self);
            break;
        case ITEM_ROUTER_MON:
            pft_transport__handle_monitor(self, self->router_mon, NULL);
            break;
        case ITEM_PEER:
            pft_transport__handle_replies(self, pi);
            break;
        case ITEM_PEER_MON:
            pft_transport__handle_monitor(self, self->peers[pi].mon, &self->peers[pi]);
            break;
        }
    }
    pft_transport__run_timers(self);
    if (drained) /* a granted body may still wait behind unread offers: expire grants only once all is read */
        pft_transport__flow_expire(self, pft_transport_now_ms());
    self->served_ms = pft_transport_now_ms();
    return 0;
}

int pft_transport_is_secure(const pft_transport_t *self)
{
    return self->curve;
}

const char *pft_transport_sender(const pft_transport_t *self)
{
    return self->sender;
}

const char *pft_transport_last_denial(const pft_transport_t *self)
{
    return self->last_denial;
}

int pft_transport_unconfirmed(const pft_transport_t *self)
{
    return self->n_awaiting;
}

void pft_transport_stats(const pft_transport_t *self, pft_transport_stats_t *stats)
{
    *stats = self->stats;
}
