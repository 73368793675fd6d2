/* pft_transport: ROUTER inbound / DEALER-per-peer outbound over libzmq, ACK/NACK, backoff, duplicate ids. */
#include "pft_transport.h"

#include <errno.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"

#define HDR_MAGIC "PFTM"
#define HDR_VERSION 1
#define HDR_LEN (4 + 1 + 1 + PFT_TRANSPORT_ID_LEN)
#define T_BUNDLE 'B'
#define T_ACK 'A'
#define T_NACK 'N'
#define MAX_REPLY 4096          /* outbound sockets never read more than this from a peer */
#define MAX_PER_POLL 256        /* inbound messages handled per poll, so replies are not starved */
#define SIZE_BYTES_PER_MS 50000 /* assumed throughput for the size-based first retry delay */
#define KEY_LEN 32              /* bytes of a CURVE (X25519) key */
#define CURVE_FRAME_OVERHEAD 64 /* allowance for CURVE's per-message framing (33 bytes in libzmq 4.3.4) */
#define ZAP_ENDPOINT "inproc://zeromq.zap.01" /* ZMQ RFC 27: fixed, one per libzmq context */
#define ZAP_DOMAIN "pftnet"                   /* our ROUTER's ZMQ_ZAP_DOMAIN; other domains are refused */
#define MAX_HS_ERROR 200                      /* bytes of a handshake failure description */
#define RECONNECT_MIN_MS 1000 /* first reconnection after a refused handshake (libzmq gives up on those) */
#define RECONNECT_MAX_MS 16000
#define MON_HS_FAILED                                                                                        \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |                            \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

typedef struct {
    char name[PFT_BUNDLE_MAX_NAME + 1];
    char *endpoint;
    void *sock;                      /* DEALER */
    void *mon;                       /* PAIR receiving the DEALER's handshake events */
    char hs_error[MAX_HS_ERROR + 1]; /* last handshake failure, "" after a success */
    int hs_specific;                 /* hs_error names the cause (authentication, mismatch) */
    int64_t reconnect_at;            /* when to reconnect after a refused handshake; 0: not planned */
    int reconnect_delay;             /* ms, doubles per refusal up to RECONNECT_MAX_MS */
} peer_t;

typedef struct {
    uint8_t key[KEY_LEN];
    char name[PFT_BUNDLE_MAX_NAME + 1];
} allowed_t;

/* What a poll item is. */
typedef enum { ITEM_ROUTER, ITEM_ZAP, ITEM_ROUTER_MON, ITEM_PEER, ITEM_PEER_MON } item_kind_t;

typedef struct {
    int peer;
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    zmq_msg_t body; /* open while pending */
    size_t len;
    int64_t deadline, next_attempt;
    int interval, base_interval, max_interval;
    int attempts;
    pft_send_state_t state;
    int rc;
    char reason[PFT_TRANSPORT_MAX_REASON + 1];
} send_t;

struct pft_transport_t {
    pft_transport_opts_t opts;
    void *ctx;
    int own_ctx;
    void *router;
    char endpoint[256];
    pft_transport_on_message_fn on_message;
    void *cb_ctx;
    peer_t *peers;
    int n_peers, cap_peers;
    send_t *sends;
    int n_sends, cap_sends;
    int n_pending;
    zmq_pollitem_t *items; /* router, zap, router monitor, then two per peer (cap 3 + 2 * cap_peers) */
    item_kind_t *item_kind;
    int *item_peer;
    int curve;                     /* 1: CURVE server and clients */
    uint8_t curve_public[KEY_LEN]; /* our X25519 keypair (copied; wiped on destroy) */
    uint8_t curve_secret[KEY_LEN];
    void *zap;        /* REP bound at ZAP_ENDPOINT (CURVE only) */
    void *router_mon; /* PAIR receiving the ROUTER's handshake failure events */
    int n_monitors;   /* monitor endpoints made, for unique names */
    allowed_t *allowed;
    int n_allowed, cap_allowed;
    const char *sender; /* during on_message: the sender's allowed name (CURVE) */
    char last_denial[160];
    uint8_t (*accepted)[PFT_TRANSPORT_ID_LEN]; /* ring of accepted ids */
    int n_accepted, accepted_next;
    pft_transport_stats_t stats;
};

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
}

int64_t pft_transport_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static int zerr(int code, const char *what)
{
    return pft_err(code, "transport: %s: %s", what, zmq_strerror(zmq_errno()));
}

static int setopt_int(void *sock, int opt, int v, const char *what)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return zerr(PFT_ENET, what);
    return 0;
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
        o->max_remembered < 1)
        return pft_err(PFT_EINVAL,
                       "transport: option out of range (sizes, high-water marks, delays must be >= 1, "
                       "retry_max_ms >= retry_initial_ms)");
    return 0;
}

/* Starts delivering sock's events in mask to a new PAIR socket and returns it, or NULL (message set). The
 * PAIR has no receive limit: libzmq's monitor sends block when the pipe is full, and its events come from
 * the I/O thread, which must never stall (the events are few: one per handshake). */
static void *monitor_new(pft_transport_t *self, void *sock, int mask)
{
    static atomic_uint seq;
    char ep[128];
    snprintf(ep, sizeof ep, "inproc://pft-transport-monitor-%p-%u", (void *)self, atomic_fetch_add(&seq, 1u));
    if (zmq_socket_monitor(sock, ep, mask) != 0) {
        zerr(PFT_ENET, "zmq_socket_monitor");
        return NULL;
    }
    void *pair = zmq_socket(self->ctx, ZMQ_PAIR);
    if (!pair) {
        zerr(PFT_ENET, "zmq_socket(PAIR)");
    } else if (setopt_int(pair, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM") ||
               setopt_int(pair, ZMQ_LINGER, 0, "ZMQ_LINGER")) {
        zmq_close(pair);
        pair = NULL;
    } else if (zmq_connect(pair, ep) != 0) {
        zerr(PFT_ENET, "connecting the monitor");
        zmq_close(pair);
        pair = NULL;
    }
    if (!pair)
        zmq_socket_monitor(sock, NULL, 0);
    return pair;
}

/* Stops monitoring sock and closes *mon_p (in this order: a monitor must never send to a closed PAIR). */
static void monitor_close(void *sock, void **mon_p)
{
    if (!*mon_p)
        return;
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(*mon_p);
    *mon_p = NULL;
}

/* Grows the poll arrays to hold the router, ZAP, router monitor and two items per peer for cap peers. */
static int grow_items(pft_transport_t *self, int cap)
{
    size_t n = 3 + 2 * (size_t)cap;
    zmq_pollitem_t *it = pft_realloc(self->items, n * sizeof *it);
    if (it)
        self->items = it;
    item_kind_t *k = it ? pft_realloc(self->item_kind, n * sizeof *k) : NULL;
    if (k)
        self->item_kind = k;
    int *pi = k ? pft_realloc(self->item_peer, n * sizeof *pi) : NULL;
    if (pi)
        self->item_peer = pi;
    return pi ? 0 : pft_err(PFT_ENOMEM, "transport: out of memory");
}

/* CURVE: binds the ZAP handler (before the ROUTER exists: with no handler bound, libzmq admits every
 * CURVE client) and makes the ROUTER a CURVE server. */
static int setup_curve_server(pft_transport_t *self)
{
    self->zap = zmq_socket(self->ctx, ZMQ_REP);
    if (!self->zap)
        return zerr(PFT_ENET, "zmq_socket(REP) for ZAP");
    int rc = setopt_int(self->zap, ZMQ_LINGER, 0, "ZMQ_LINGER");
    if (rc)
        return rc;
    if (zmq_bind(self->zap, ZAP_ENDPOINT) != 0) {
        if (zmq_errno() == EADDRINUSE)
            return pft_err(PFT_EINVAL,
                           "transport: a ZAP handler is already bound in this libzmq context (one "
                           "CURVE transport per context)");
        return zerr(PFT_ENET, "binding the ZAP handler");
    }
    if ((rc = setopt_int(self->router, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")))
        return rc;
    if (zmq_setsockopt(self->router, ZMQ_CURVE_SECRETKEY, self->curve_secret, KEY_LEN) != 0)
        return zerr(PFT_ENET, "ZMQ_CURVE_SECRETKEY");
    if (zmq_setsockopt(self->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0)
        return zerr(PFT_ENET, "ZMQ_ZAP_DOMAIN");
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
    if (grow_items(self, 0))
        goto fail;
    if (opts->zmq_context) {
        self->ctx = opts->zmq_context;
    } else {
        self->ctx = zmq_ctx_new();
        self->own_ctx = 1;
        if (!self->ctx) {
            zerr(PFT_ENET, "zmq_ctx_new");
            goto fail;
        }
    }
    self->router = zmq_socket(self->ctx, ZMQ_ROUTER);
    if (!self->router) {
        zerr(PFT_ENET, "zmq_socket(ROUTER)");
        goto fail;
    }
    /* CURVE frames carry 33 bytes more than the message (command name, nonce, MAC, flags), and libzmq checks
     * the limit on the frame as it arrives */
    int64_t maxmsg = opts->max_msg_size;
    if (self->curve && maxmsg <= INT64_MAX - CURVE_FRAME_OVERHEAD)
        maxmsg += CURVE_FRAME_OVERHEAD;
    if (zmq_setsockopt(self->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0) {
        zerr(PFT_ENET, "ZMQ_MAXMSGSIZE");
        goto fail;
    }
    if (setopt_int(self->router, ZMQ_RCVHWM, opts->rcvhwm, "ZMQ_RCVHWM") ||
        setopt_int(self->router, ZMQ_SNDHWM, 1000, "ZMQ_SNDHWM") ||
        setopt_int(self->router, ZMQ_LINGER, opts->linger_ms, "ZMQ_LINGER") ||
        setopt_int(self->router, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY"))
        goto fail;
    if (self->curve && setup_curve_server(self))
        goto fail;
    if (!(self->router_mon = monitor_new(self, self->router, MON_HS_FAILED)))
        goto fail;
    if (opts->listen_fd >= 0 && setopt_int(self->router, ZMQ_USE_FD, opts->listen_fd, "ZMQ_USE_FD"))
        goto fail;
    if (zmq_bind(self->router, endpoint) != 0) {
        pft_err(PFT_ENET, "transport: cannot bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
        goto fail;
    }
    size_t elen = sizeof self->endpoint;
    if (zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, self->endpoint, &elen) != 0) {
        zerr(PFT_ENET, "ZMQ_LAST_ENDPOINT");
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
        monitor_close(self->peers[i].sock, &self->peers[i].mon);
        if (self->peers[i].sock)
            zmq_close(self->peers[i].sock);
        pft_free(self->peers[i].endpoint);
    }
    pft_free(self->peers);
    if (self->router) {
        monitor_close(self->router, &self->router_mon);
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
    sodium_memzero(self, sizeof *self);
    pft_free(self);
    *self_p = NULL;
}

const char *pft_transport_endpoint(const pft_transport_t *self)
{
    return self->endpoint;
}

static int find_peer(const pft_transport_t *self, const char *name)
{
    for (int i = 0; i < self->n_peers; i++)
        if (strcmp(self->peers[i].name, name) == 0)
            return i;
    return -1;
}

int pft_transport_add_peer(pft_transport_t *self, const char *name, const char *endpoint,
                           const uint8_t *server_public_key)
{
    if (!name || !endpoint || strlen(name) < 1 || strlen(name) > PFT_BUNDLE_MAX_NAME)
        return pft_err(PFT_EINVAL, "transport: peer name must be 1..%d bytes", PFT_BUNDLE_MAX_NAME);
    if (self->curve && !server_public_key)
        return pft_err(
            PFT_EUNSUPPORTED,
            "transport: peer '%s': this transport uses CURVE; the peer's server public key is needed "
            "(plain text and CURVE do not mix)",
            name);
    if (!self->curve && server_public_key)
        return pft_err(
            PFT_EUNSUPPORTED,
            "transport: peer '%s': a server public key was given but this transport is plain text (no "
            "keypair in its options); plain text and CURVE do not mix",
            name);
    if (find_peer(self, name) >= 0)
        return pft_err(PFT_EINVAL, "transport: peer '%s' added twice", name);
    if (self->n_peers == self->cap_peers) {
        int nc = self->cap_peers ? 2 * self->cap_peers : 4;
        peer_t *p = pft_realloc(self->peers, (size_t)nc * sizeof *p);
        if (!p)
            return pft_err(PFT_ENOMEM, "transport: out of memory");
        self->peers = p;
        if (grow_items(self, nc))
            return PFT_ENOMEM;
        self->cap_peers = nc;
    }
    peer_t *p = &self->peers[self->n_peers];
    memset(p, 0, sizeof *p);
    int rc = PFT_ENET;
    p->endpoint = pft_strdup(endpoint);
    if (!p->endpoint) {
        rc = pft_err(PFT_ENOMEM, "transport: out of memory");
        goto fail;
    }
    p->sock = zmq_socket(self->ctx, ZMQ_DEALER);
    if (!p->sock) {
        rc = zerr(PFT_ENET, "zmq_socket(DEALER)");
        goto fail;
    }
    int64_t maxreply = MAX_REPLY;
    if (zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &maxreply, sizeof maxreply) != 0) {
        rc = zerr(PFT_ENET, "ZMQ_MAXMSGSIZE");
        goto fail;
    }
    /* IMMEDIATE: queue only on a completed connection, so a peer that is down costs a retry, not a pile of
     * copies delivered at once when it comes up. LINGER 0: an unacknowledged send has failed anyway. */
    if ((rc = setopt_int(p->sock, ZMQ_IMMEDIATE, 1, "ZMQ_IMMEDIATE")) ||
        (rc = setopt_int(p->sock, ZMQ_SNDHWM, self->opts.sndhwm, "ZMQ_SNDHWM")) ||
        (rc = setopt_int(p->sock, ZMQ_RCVHWM, 1000, "ZMQ_RCVHWM")) ||
        (rc = setopt_int(p->sock, ZMQ_LINGER, 0, "ZMQ_LINGER")) ||
        (rc = setopt_int(p->sock, ZMQ_RECONNECT_IVL, self->opts.reconnect_ivl_ms, "ZMQ_RECONNECT_IVL")) ||
        (rc = setopt_int(p->sock, ZMQ_RECONNECT_IVL_MAX, 10 * self->opts.reconnect_ivl_ms,
                         "ZMQ_RECONNECT_IVL_MAX")))
        goto fail;
    if (self->curve && (zmq_setsockopt(p->sock, ZMQ_CURVE_SERVERKEY, server_public_key, KEY_LEN) != 0 ||
                        zmq_setsockopt(p->sock, ZMQ_CURVE_PUBLICKEY, self->curve_public, KEY_LEN) != 0 ||
                        zmq_setsockopt(p->sock, ZMQ_CURVE_SECRETKEY, self->curve_secret, KEY_LEN) != 0)) {
        rc = zerr(PFT_ENET, "CURVE client keys");
        goto fail;
    }
    if (!(p->mon = monitor_new(self, p->sock, MON_HS_FAILED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED))) {
        rc = PFT_ENET;
        goto fail;
    }
    if (zmq_connect(p->sock, endpoint) != 0) {
        rc = pft_err(zmq_errno() == EINVAL || zmq_errno() == EPROTONOSUPPORT ? PFT_EINVAL : PFT_ENET,
                     "transport: peer '%s': cannot connect to %s: %s", name, endpoint,
                     zmq_strerror(zmq_errno()));
        goto fail;
    }
    memcpy(p->name, name, strlen(name) + 1);
    self->n_peers++;
    return 0;
fail:
    if (p->sock) {
        monitor_close(p->sock, &p->mon);
        zmq_close(p->sock);
    }
    pft_free(p->endpoint);
    memset(p, 0, sizeof *p);
    return rc;
}

static int id_of(const pft_transport_t *self, const uint8_t *buf, size_t len,
                 uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    return self->opts.id_fn ? self->opts.id_fn(buf, len, id) : pft_bundle_message_id(buf, len, id);
}

int pft_transport_send(pft_transport_t *self, const char *peer, const uint8_t *bytes, size_t len,
                       const uint8_t id[PFT_TRANSPORT_ID_LEN], int64_t deadline_ms)
{
    int pi = peer ? find_peer(self, peer) : -1;
    if (pi < 0)
        return pft_err(PFT_EINVAL, "transport: unknown peer '%s'", peer ? peer : "(null)");
    if (!bytes || len == 0)
        return pft_err(PFT_EINVAL, "transport: empty message for peer '%s'", peer);
    if ((uint64_t)len > (uint64_t)self->opts.max_msg_size)
        return pft_err(PFT_ERANGE, "transport: message of %zu bytes for peer '%s' exceeds max_msg_size %lld",
                       len, peer, (long long)self->opts.max_msg_size);
    if (self->n_sends == INT32_MAX)
        return pft_err(PFT_ERANGE, "transport: too many sends");
    uint8_t computed[PFT_TRANSPORT_ID_LEN];
    if (!id) {
        int rc = id_of(self, bytes, len, computed);
        if (rc)
            return pft_err_wrap(rc, "transport: send to '%s'", peer);
        id = computed;
    }
    if (self->n_sends == self->cap_sends) {
        int nc = self->cap_sends ? 2 * self->cap_sends : 8;
        send_t *s = pft_realloc(self->sends, (size_t)nc * sizeof *s);
        if (!s)
            return pft_err(PFT_ENOMEM, "transport: out of memory");
        self->sends = s;
        self->cap_sends = nc;
    }
    send_t *s = &self->sends[self->n_sends];
    memset(s, 0, sizeof *s);
    if (zmq_msg_init_size(&s->body, len) != 0)
        return pft_err(PFT_ENOMEM, "transport: out of memory for a %zu-byte message", len);
    memcpy(zmq_msg_data(&s->body), bytes, len);
    s->peer = pi;
    memcpy(s->id, id, PFT_TRANSPORT_ID_LEN);
    s->len = len;
    s->deadline = deadline_ms;
    s->next_attempt = pft_transport_now_ms();
    int64_t base = self->opts.retry_initial_ms + (int64_t)(len / SIZE_BYTES_PER_MS);
    s->base_interval = base > INT32_MAX / 4 ? INT32_MAX / 4 : (int)base;
    s->interval = s->base_interval;
    s->max_interval = s->base_interval > self->opts.retry_max_ms ? s->base_interval : self->opts.retry_max_ms;
    s->state = PFT_SEND_PENDING;
    self->n_pending++;
    return self->n_sends++;
}

static void make_header(uint8_t hdr[HDR_LEN], char type, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    memcpy(hdr, HDR_MAGIC, 4);
    hdr[4] = HDR_VERSION;
    hdr[5] = (uint8_t)type;
    memcpy(hdr + 6, id, PFT_TRANSPORT_ID_LEN);
}

/* Returns the type of a valid header, or 0. */
static char parse_header(const zmq_msg_t *m, uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    if (zmq_msg_size((zmq_msg_t *)m) != HDR_LEN)
        return 0;
    const uint8_t *h = zmq_msg_data((zmq_msg_t *)m);
    if (memcmp(h, HDR_MAGIC, 4) != 0 || h[4] != HDR_VERSION)
        return 0;
    memcpy(id, h + 6, PFT_TRANSPORT_ID_LEN);
    return (char)h[5];
}

/* Copies text into dst[cap], truncating. */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memmove(dst, src, n);
    dst[n] = '\0';
}

static void finish(pft_transport_t *self, send_t *s, pft_send_state_t state, int rc, const char *reason)
{
    s->state = state;
    s->rc = rc;
    copy_text(s->reason, sizeof s->reason, reason ? reason : "");
    zmq_msg_close(&s->body);
    self->n_pending--;
    if (state == PFT_SEND_ACKED)
        self->stats.acked++;
    else if (state == PFT_SEND_REJECTED)
        self->stats.rejected_by_peer++;
    else
        self->stats.failed++;
}

/* One transmission of s; 1 if it went out, 0 if libzmq could not take it now (no connection, HWM). */
static int transmit(pft_transport_t *self, send_t *s)
{
    void *sock = self->peers[s->peer].sock;
    uint8_t hdr[HDR_LEN];
    make_header(hdr, T_BUNDLE, s->id);
    if (zmq_send(sock, hdr, HDR_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) != HDR_LEN)
        return 0;
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, &s->body); /* shares the buffer (reference counted) */
    if (zmq_msg_send(&copy, sock, ZMQ_DONTWAIT) < 0) {
        /* Cannot happen once the first part was accepted (libzmq sends multipart messages atomically). */
        zmq_msg_close(&copy);
        return 0;
    }
    return 1;
}

/* libzmq ends a connection whose handshake was refused (authentication, security mismatch) for good; we
 * connect again after a backoff, so that a key allowed later, or a peer restarted with the right
 * configuration, is reached. */
static void run_reconnects(pft_transport_t *self, int64_t now)
{
    for (int i = 0; i < self->n_peers; i++) {
        peer_t *p = &self->peers[i];
        if (!p->reconnect_at || now < p->reconnect_at)
            continue;
        p->reconnect_at = 0;
        zmq_disconnect(p->sock, p->endpoint); /* ENOENT when libzmq already dropped it: fine */
        zmq_connect(p->sock, p->endpoint);    /* it worked once with this endpoint */
    }
}

/* Due transmissions and expiries. */
static void run_timers(pft_transport_t *self)
{
    int64_t now = pft_transport_now_ms();
    run_reconnects(self, now);
    for (int i = 0; i < self->n_sends; i++) {
        send_t *s = &self->sends[i];
        if (s->state != PFT_SEND_PENDING)
            continue;
        if (s->deadline > 0 && now >= s->deadline) {
            char why[1024];
            const peer_t *p = &self->peers[s->peer];
            snprintf(why, sizeof why,
                     "no acknowledgement from peer '%.64s' (%.100s) before the deadline, %d "
                     "transmissions%s%.200s%s%.200s",
                     p->name, p->endpoint, s->attempts, s->reason[0] ? "; last: " : "", s->reason,
                     p->hs_error[0] ? "; handshake failed: " : "", p->hs_error);
            finish(self, s, PFT_SEND_FAILED, PFT_ETIMEOUT, why);
            continue;
        }
        if (now < s->next_attempt)
            continue;
        if (transmit(self, s)) {
            if (s->attempts > 0)
                self->stats.retries++;
            s->attempts++;
            self->stats.transmissions++;
            self->stats.bytes_sent += s->len;
            s->next_attempt = now + s->interval;
            s->interval = s->interval > s->max_interval / 2 ? s->max_interval : 2 * s->interval;
        } else {
            s->next_attempt = now + self->opts.retry_initial_ms; /* not connected yet: try again soon */
        }
    }
}

/* Milliseconds until the next timer (transmission, deadline, reconnection), or -1 if none. */
static int64_t next_timer(const pft_transport_t *self)
{
    int64_t now = pft_transport_now_ms(), best = -1;
    for (int i = 0; i < self->n_peers; i++) {
        int64_t t = self->peers[i].reconnect_at;
        if (t) {
            int64_t dt = t > now ? t - now : 0;
            if (best < 0 || dt < best)
                best = dt;
        }
    }
    for (int i = 0; i < self->n_sends; i++) {
        const send_t *s = &self->sends[i];
        if (s->state != PFT_SEND_PENDING)
            continue;
        int64_t t = s->next_attempt;
        if (s->deadline > 0 && s->deadline < t)
            t = s->deadline;
        int64_t dt = t > now ? t - now : 0;
        if (best < 0 || dt < best)
            best = dt;
    }
    return best;
}

static int is_accepted(const pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int i = 0; i < self->n_accepted; i++)
        if (memcmp(self->accepted[i], id, PFT_TRANSPORT_ID_LEN) == 0)
            return 1;
    return 0;
}

static void remember(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    memcpy(self->accepted[self->accepted_next], id, PFT_TRANSPORT_ID_LEN);
    self->accepted_next = (self->accepted_next + 1) % self->opts.max_remembered;
    if (self->n_accepted < self->opts.max_remembered)
        self->n_accepted++;
}

static int is_transient(int code)
{
    return code == PFT_ENOMEM || code == PFT_EIO || code == PFT_EINTR || code == PFT_ETIMEOUT;
}

/* Replies to the sender identified by the routing frame. Failures (peer gone, HWM) are ignored: the
 * sender retransmits and gets the reply then. */
static void reply(pft_transport_t *self, zmq_msg_t *identity, char type,
                  const uint8_t id[PFT_TRANSPORT_ID_LEN], int code, const char *reason)
{
    uint8_t hdr[HDR_LEN];
    make_header(hdr, type, id);
    zmq_msg_t ident;
    zmq_msg_init(&ident);
    zmq_msg_copy(&ident, identity);
    if (zmq_msg_send(&ident, self->router, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ident);
        return;
    }
    if (type != T_NACK) {
        zmq_send(self->router, hdr, HDR_LEN, ZMQ_DONTWAIT);
        return;
    }
    uint8_t body[4 + PFT_TRANSPORT_MAX_REASON];
    uint32_t c = (uint32_t)(int32_t)code;
    for (int i = 0; i < 4; i++)
        body[i] = (uint8_t)(c >> (24 - 8 * i));
    size_t rl = strlen(reason);
    if (rl > PFT_TRANSPORT_MAX_REASON)
        rl = PFT_TRANSPORT_MAX_REASON;
    memcpy(body + 4, reason, rl);
    zmq_send(self->router, hdr, HDR_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->router, body, 4 + rl, ZMQ_DONTWAIT);
}

/* Handles one well-formed bundle message. */
static void on_bundle(pft_transport_t *self, zmq_msg_t *identity, const uint8_t hid[PFT_TRANSPORT_ID_LEN],
                      zmq_msg_t *body)
{
    const uint8_t *buf = zmq_msg_data(body);
    size_t len = zmq_msg_size(body);
    self->stats.received++;
    self->stats.bytes_received += len;
    if (is_accepted(self, hid)) {
        /* Seen and stored before: re-ACK only. A forged body under a known id gains nothing but this ACK. */
        self->stats.duplicates++;
        reply(self, identity, T_ACK, hid, 0, "");
        return;
    }
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    char reason[PFT_TRANSPORT_MAX_REASON + 1] = "";
    int rc = id_of(self, buf, len, id);
    if (rc) {
        snprintf(reason, sizeof reason, "%s", pft_errmsg());
    } else if (memcmp(id, hid, PFT_TRANSPORT_ID_LEN) != 0) {
        rc = PFT_EFORMAT;
        snprintf(reason, sizeof reason, "transport: the id in the header does not match the message");
    } else if (!self->on_message) {
        rc = PFT_EUNSUPPORTED;
        snprintf(reason, sizeof reason, "transport: this node accepts no inbound messages");
    } else {
        self->sender = self->curve ? zmq_msg_gets(body, "User-Id") : NULL;
        if (self->sender && !self->sender[0])
            self->sender = NULL;
        rc = self->on_message(self->cb_ctx, buf, len, reason, sizeof reason);
        self->sender = NULL;
        reason[sizeof reason - 1] = '\0';
        if (rc > 0)
            rc = PFT_EINVAL; /* a callback bug: refuse rather than ACK */
    }
    if (rc == 0) {
        remember(self, hid);
        self->stats.accepted++;
        reply(self, identity, T_ACK, hid, 0, "");
        return;
    }
    if (!reason[0])
        snprintf(reason, sizeof reason, "%s", pft_strerror(rc));
    self->stats.rejected++;
    reply(self, identity, T_NACK, hid, rc, reason);
}

/* Reads one whole multipart message from sock into parts[0..max) (extra parts are read and dropped);
 * returns the number of parts (> max: malformed), 0 if nothing was waiting, -1 on error. */
static int recv_parts(void *sock, zmq_msg_t *parts, int max)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < n && i < max; i++)
                zmq_msg_close(&parts[i]);
            return n == 0 && zmq_errno() == EAGAIN ? 0 : -1;
        }
        more = zmq_msg_more(&m);
        if (n < max)
            parts[n] = m;
        else
            zmq_msg_close(&m);
        n++;
    }
    return n;
}

static void close_parts(zmq_msg_t *parts, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        zmq_msg_close(&parts[i]);
}

static void handle_inbound(pft_transport_t *self)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[3];
        int n = recv_parts(self->router, parts, 3);
        if (n <= 0)
            return;
        uint8_t id[PFT_TRANSPORT_ID_LEN];
        if (n == 3 && parse_header(&parts[1], id) == T_BUNDLE && zmq_msg_size(&parts[2]) > 0)
            on_bundle(self, &parts[0], id, &parts[2]);
        else
            self->stats.malformed++; /* no reply: we cannot trust what it says it is */
        close_parts(parts, n, 3);
    }
}

static void on_reply(pft_transport_t *self, int pi, char type, const uint8_t id[PFT_TRANSPORT_ID_LEN],
                     int code, const char *reason)
{
    for (int i = 0; i < self->n_sends; i++) {
        send_t *s = &self->sends[i];
        if (s->state != PFT_SEND_PENDING || s->peer != pi || memcmp(s->id, id, PFT_TRANSPORT_ID_LEN) != 0)
            continue;
        if (type == T_ACK) {
            finish(self, s, PFT_SEND_ACKED, 0, "");
        } else if (is_transient(code)) {
            copy_text(s->reason, sizeof s->reason, reason);
        } else {
            finish(self, s, PFT_SEND_REJECTED, code, reason);
        }
    }
}

static void handle_replies(pft_transport_t *self, int pi)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[2];
        int n = recv_parts(self->peers[pi].sock, parts, 2);
        if (n <= 0)
            return;
        uint8_t id[PFT_TRANSPORT_ID_LEN];
        char type = n <= 2 ? parse_header(&parts[0], id) : 0;
        if (type == T_ACK && n == 1) {
            on_reply(self, pi, T_ACK, id, 0, "");
        } else if (type == T_NACK && n == 2 && zmq_msg_size(&parts[1]) >= 4 &&
                   zmq_msg_size(&parts[1]) <= 4 + PFT_TRANSPORT_MAX_REASON) {
            const uint8_t *b = zmq_msg_data(&parts[1]);
            int32_t code =
                (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
            char reason[PFT_TRANSPORT_MAX_REASON + 1];
            size_t rl = zmq_msg_size(&parts[1]) - 4;
            memcpy(reason, b + 4, rl);
            reason[rl] = '\0';
            for (size_t i = 0; i < rl; i++) /* a peer's text goes into our logs: keep it printable */
                if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
                    reason[i] = '?';
            if (code >= 0 || code < -1000)
                code = PFT_EREJECT;
            on_reply(self, pi, T_NACK, id, code, reason);
        } else {
            self->stats.malformed++;
        }
        close_parts(parts, n, 2);
    }
}

/* ---- CURVE: the ZAP handler (ZMQ RFC 27) ---- */

static const allowed_t *find_allowed(const pft_transport_t *self, const uint8_t key[KEY_LEN])
{
    for (int i = 0; i < self->n_allowed; i++)
        if (memcmp(self->allowed[i].key, key, KEY_LEN) == 0)
            return &self->allowed[i];
    return NULL;
}

static int frame_is(zmq_msg_t *m, const char *text)
{
    size_t n = strlen(text);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data(m), text, n) == 0;
}

/* Sends the 6-frame ZAP reply: version, request id (echoed), status code, status text, user id, metadata. */
static void zap_reply(pft_transport_t *self, zmq_msg_t *request_id, const char *status, const char *text,
                      const char *user)
{
    zmq_send(self->zap, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (request_id) {
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        zmq_msg_copy(&copy, request_id);
        if (zmq_msg_send(&copy, self->zap, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
            zmq_msg_close(&copy);
    } else {
        zmq_send(self->zap, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    }
    zmq_send(self->zap, status, strlen(status), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->zap, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->zap, user, strlen(user), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(self->zap, "", 0, ZMQ_DONTWAIT);
}

/* Answers every waiting ZAP request: 200 for an allowed client key, 400 otherwise. A request that is not
 * a well-formed CURVE request of our domain is refused too (libzmq sends well-formed ones; be strict). */
static void handle_zap(pft_transport_t *self)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[8];
        int n = recv_parts(self->zap, parts, 8);
        if (n <= 0)
            return;
        int ok = n == 7 && frame_is(&parts[0], "1.0") && frame_is(&parts[2], ZAP_DOMAIN) &&
                 frame_is(&parts[5], "CURVE") && zmq_msg_size(&parts[6]) == KEY_LEN &&
                 zmq_msg_size(&parts[1]) <= 255;
        if (!ok) {
            self->stats.handshakes_failed++;
            snprintf(self->last_denial, sizeof self->last_denial, "malformed ZAP request refused");
            zap_reply(self, n >= 2 && n <= 8 ? &parts[1] : NULL, "400", "malformed ZAP request", "");
            close_parts(parts, n, 8);
            continue;
        }
        const uint8_t *key = zmq_msg_data(&parts[6]);
        const allowed_t *a = find_allowed(self, key);
        if (a) {
            self->stats.zap_allowed++;
            zap_reply(self, &parts[1], "200", "OK", a->name);
        } else {
            self->stats.zap_denied++;
            char hex[17], addr[64];
            sodium_bin2hex(hex, sizeof hex, key, 8);
            size_t al = zmq_msg_size(&parts[3]);
            if (al >= sizeof addr)
                al = sizeof addr - 1;
            memcpy(addr, zmq_msg_data(&parts[3]), al);
            addr[al] = '\0';
            for (size_t i = 0; i < al; i++) /* from the network: keep it printable for logs */
                if ((unsigned char)addr[i] < 0x20 || (unsigned char)addr[i] > 0x7e)
                    addr[i] = '?';
            snprintf(self->last_denial, sizeof self->last_denial, "CURVE key %s... from %s is not allowed",
                     hex, al ? addr : "?");
            zap_reply(self, &parts[1], "400", "client key not allowed", "");
        }
        close_parts(parts, n, 8);
    }
}

/* ---- handshake events (socket monitors) ---- */

/* Describes a handshake failure event into buf; returns 0 for events that are not failures. */
static int describe_event(uint16_t event, uint32_t value, int curve, char *buf, size_t cap)
{
    switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        if (value == 400)
            snprintf(buf, cap,
                     "the peer refused our key (CURVE, ZAP status 400): is this node's public key listed "
                     "for it in the peer's topology?");
        else
            snprintf(buf, cap, "authentication failed (ZAP status %u)", (unsigned)value);
        return 1;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            snprintf(buf, cap,
                     "security mismatch: one side uses CURVE, the other plain text (--insecure on one "
                     "node only?)");
        else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            snprintf(buf, cap, "CURVE cryptographic error (wrong server key?)");
        else
            snprintf(buf, cap, "protocol error 0x%08x", (unsigned)value);
        return 1;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        snprintf(buf, cap, "the connection was lost during the handshake (%s)%s", zmq_strerror((int)value),
                 curve ? "; is the peer's server key right, and does the peer use CURVE too?"
                       : "; a CURVE peer refuses plain-text clients so");
        return 1;
    default:
        return 0;
    }
}

/* Reads every waiting event of a monitor: the event frame (uint16 event, uint32 value, native byte order)
 * and the endpoint frame. peer: the peer the monitored DEALER belongs to, or NULL for the ROUTER. */
static void handle_monitor(pft_transport_t *self, void *mon, peer_t *peer)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[2];
        int n = recv_parts(mon, parts, 2);
        if (n <= 0)
            return;
        if (n == 2 && zmq_msg_size(&parts[0]) == 6) {
            uint16_t event;
            uint32_t value;
            const uint8_t *d = zmq_msg_data(&parts[0]);
            memcpy(&event, d, 2);
            memcpy(&value, d + 2, 4);
            char what[MAX_HS_ERROR + 1];
            int failed = describe_event(event, value, self->curve, what, sizeof what);
            int specific = event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
            if (peer && failed) {
                /* One refusal shows up as the cause and, racing with it, a closed connection ("broken pipe"):
                 * the cause is kept until a handshake succeeds. */
                self->stats.peer_handshake_failures += specific;
                if (specific || !peer->hs_specific) {
                    copy_text(peer->hs_error, sizeof peer->hs_error, what);
                    peer->hs_specific = specific;
                }
                if (specific) { /* libzmq may not retry these */
                    peer->reconnect_delay =
                        peer->reconnect_delay ? 2 * peer->reconnect_delay : RECONNECT_MIN_MS;
                    if (peer->reconnect_delay > RECONNECT_MAX_MS)
                        peer->reconnect_delay = RECONNECT_MAX_MS;
                    peer->reconnect_at = pft_transport_now_ms() + peer->reconnect_delay;
                }
            } else if (peer && event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
                peer->hs_error[0] = '\0';
                peer->hs_specific = 0;
                peer->reconnect_delay = 0;
            } else if (!peer && failed && event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
                self->stats.handshakes_failed++; /* ZAP refusals are counted by the handler */
            }
        }
        close_parts(parts, n, 2);
    }
}

/* ---- poll ---- */

static int add_item(pft_transport_t *self, int n, void *sock, item_kind_t kind, int peer)
{
    self->items[n] = (zmq_pollitem_t){.socket = sock, .events = ZMQ_POLLIN};
    self->item_kind[n] = kind;
    self->item_peer[n] = peer;
    return n + 1;
}

int pft_transport_poll(pft_transport_t *self, int timeout_ms)
{
    /* replies first, timers after: an ACK that arrived while the caller was busy must not be answered by a
     * needless retransmission (an overdue timer makes the wait 0, so this costs no latency) */
    int64_t next = next_timer(self);
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
    int rc = zmq_poll(self->items, n_items, wait);
    if (rc < 0) {
        if (zmq_errno() == EINTR)
            return pft_err(PFT_EINTR, "transport: poll interrupted");
        return zerr(PFT_ENET, "zmq_poll");
    }
    for (int i = 0; i < n_items; i++) {
        if (!(self->items[i].revents & ZMQ_POLLIN))
            continue;
        int pi = self->item_peer[i];
        switch (self->item_kind[i]) {
        case ITEM_ROUTER:
            handle_inbound(self);
            break;
        case ITEM_ZAP:
            handle_zap(self);
            break;
        case ITEM_ROUTER_MON:
            handle_monitor(self, self->router_mon, NULL);
            break;
        case ITEM_PEER:
            handle_replies(self, pi);
            break;
        case ITEM_PEER_MON:
            handle_monitor(self, self->peers[pi].mon, &self->peers[pi]);
            break;
        }
    }
    run_timers(self);
    return 0;
}

int pft_transport_allow_key(pft_transport_t *self, const uint8_t key[KEY_LEN], const char *name)
{
    if (!self->curve)
        return pft_err(PFT_EUNSUPPORTED,
                       "transport: allowing a key needs CURVE (this transport is plain text)");
    if (!key || !name || strlen(name) < 1 || strlen(name) > PFT_BUNDLE_MAX_NAME)
        return pft_err(PFT_EINVAL, "transport: an allowed key needs a name of 1..%d bytes",
                       PFT_BUNDLE_MAX_NAME);
    if (find_allowed(self, key))
        return 0;
    if (self->n_allowed == self->cap_allowed) {
        int nc = self->cap_allowed ? 2 * self->cap_allowed : 4;
        allowed_t *a = pft_realloc(self->allowed, (size_t)nc * sizeof *a);
        if (!a)
            return pft_err(PFT_ENOMEM, "transport: out of memory");
        self->allowed = a;
        self->cap_allowed = nc;
    }
    allowed_t *a = &self->allowed[self->n_allowed++];
    memcpy(a->key, key, KEY_LEN);
    memcpy(a->name, name, strlen(name) + 1);
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

int pft_transport_send_state(const pft_transport_t *self, int handle, int *rc, const char **reason)
{
    if (handle < 0 || handle >= self->n_sends)
        return pft_err(PFT_EINVAL, "transport: unknown send handle %d", handle);
    const send_t *s = &self->sends[handle];
    if (rc)
        *rc = s->rc;
    if (reason)
        *reason = s->reason;
    return (int)s->state;
}

int pft_transport_pending(const pft_transport_t *self)
{
    return self->n_pending;
}

void pft_transport_stats(const pft_transport_t *self, pft_transport_stats_t *stats)
{
    *stats = self->stats;
}
