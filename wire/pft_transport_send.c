/* pft_transport_send: the send state machine: outbound peers (DEALERs), offers and bodies, retries/backoff,
 * deadlines, the receivers' replies. */
#include "pft_transport.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

static int find_peer(const pft_transport_t *self, const char *name)
{
    for (int i = 0; i < self->n_peers; i++)
        if (strcmp(self->peers[i].name, name) == 0)
            return i;
    return -1;
}

/* Refuses a peer that cannot be added (bad name, CURVE and plain text mixed, a name added twice), then makes
 * room for one more. 0 or an error code with the message. */
static int check_new_peer(pft_transport_t *self, const char *name, const char *endpoint,
                          const uint8_t *server_public_key)
{
    (void)endpoint; /* NULL: not known yet (pft_transport_set_peer_endpoint) */
    if (!name || strlen(name) < 1 || strlen(name) > PFT_BUNDLE_MAX_NAME)
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
        if (pft_transport__grow_items(self, nc))
            return PFT_ENOMEM;
        self->cap_peers = nc;
    }
    return 0;
}

int pft_transport_add_peer(pft_transport_t *self, const char *name, const char *endpoint,
                           const uint8_t *server_public_key)
{
    int rc = check_new_peer(self, name, endpoint, server_public_key);
    if (rc)
        return rc;
    peer_t *p = &self->peers[self->n_peers];
    memset(p, 0, sizeof *p);
    rc = PFT_ENET;
    p->endpoint = pft_strdup(endpoint ? endpoint : "");
    if (!p->endpoint) {
        rc = pft_err(PFT_ENOMEM, "transport: out of memory");
        goto fail;
    }
    p->sock = zmq_socket(self->ctx, ZMQ_DEALER);
    if (!p->sock) {
        rc = pft_transport__zerr(PFT_ENET, "zmq_socket(DEALER)");
        goto fail;
    }
    int64_t maxreply = MAX_REPLY;
    if (zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &maxreply, sizeof maxreply) != 0) {
        rc = pft_transport__zerr(PFT_ENET, "ZMQ_MAXMSGSIZE");
        goto fail;
    }
    /* Not IMMEDIATE: with it, libzmq drops the replies a peer sent and we had not read yet when the
     * connection closes (an ACK read by a sender that was stopped or busy until its receiver left). We still
     * transmit only on a completed connection (peer_t.up, from the monitor), so a peer that is down costs a
     * retry, not a pile of copies delivered at once when it comes up. LINGER 0: an unacknowledged send has
     * failed anyway. */
    if ((rc = pft_transport__setopt_int(p->sock, ZMQ_IMMEDIATE, 0, "ZMQ_IMMEDIATE")) ||
        (rc = pft_transport__setopt_int(p->sock, ZMQ_SNDHWM, self->opts.sndhwm, "ZMQ_SNDHWM")) ||
        (rc = pft_transport__setopt_int(p->sock, ZMQ_RCVHWM, 1000, "ZMQ_RCVHWM")) ||
        (rc = pft_transport__setopt_int(p->sock, ZMQ_LINGER, 0, "ZMQ_LINGER")) ||
        (rc = pft_transport__setopt_int(p->sock, ZMQ_RECONNECT_IVL, self->opts.reconnect_ivl_ms,
                                        "ZMQ_RECONNECT_IVL")) ||
        (rc = pft_transport__setopt_int(p->sock, ZMQ_RECONNECT_IVL_MAX, 10 * self->opts.reconnect_ivl_ms,
                                        "ZMQ_RECONNECT_IVL_MAX")))
        goto fail;
    if (self->curve && (zmq_setsockopt(p->sock, ZMQ_CURVE_SERVERKEY, server_public_key, KEY_LEN) != 0 ||
                        zmq_setsockopt(p->sock, ZMQ_CURVE_PUBLICKEY, self->curve_public, KEY_LEN) != 0 ||
                        zmq_setsockopt(p->sock, ZMQ_CURVE_SECRETKEY, self->curve_secret, KEY_LEN) != 0)) {
        rc = pft_transport__zerr(PFT_ENET, "CURVE client keys");
        goto fail;
    }
    if (!(p->mon = pft_transport__monitor_new(
              self, p->sock, MON_HS_FAILED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED))) {
        rc = PFT_ENET;
        goto fail;
    }
    if (endpoint && zmq_connect(p->sock, endpoint) != 0) {
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
        pft_transport__monitor_close(p->sock, &p->mon);
        zmq_close(p->sock);
    }
    pft_free(p->endpoint);
    memset(p, 0, sizeof *p);
    return rc;
}

int pft_transport_set_peer_endpoint(pft_transport_t *self, const char *name, const char *endpoint)
{
    int pi = name && endpoint && *endpoint ? find_peer(self, name) : -1;
    if (pi < 0)
        return pft_err(PFT_EINVAL, "transport: no peer '%s' or no endpoint", name ? name : "(null)");
    peer_t *p = &self->peers[pi];
    if (strcmp(p->endpoint, endpoint) == 0)
        return 0;
    char *copy = pft_strdup(endpoint);
    if (!copy)
        return pft_err(PFT_ENOMEM, "transport: out of memory");
    if (zmq_connect(p->sock, endpoint) != 0) {
        int rc = pft_err(zmq_errno() == EINVAL || zmq_errno() == EPROTONOSUPPORT ? PFT_EINVAL : PFT_ENET,
                         "transport: peer '%s': cannot connect to %s: %s", name, endpoint,
                         zmq_strerror(zmq_errno()));
        pft_free(copy);
        return rc;
    }
    if (p->endpoint[0])
        zmq_disconnect(p->sock, p->endpoint); /* ENOENT when libzmq already dropped it: fine */
    pft_free(p->endpoint);
    p->endpoint = copy;
    return 0;
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
        int rc = pft_transport__id_of(self, bytes, len, computed);
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
    /* offers are small: they repeat after retry_initial_ms, doubling; once the body went, the wait for its
     * ACK starts longer, as the body is transferred, validated and stored first */
    int64_t base = self->opts.retry_initial_ms + (int64_t)(len / SIZE_BYTES_PER_MS);
    s->base_interval = base > INT32_MAX / 4 ? INT32_MAX / 4 : (int)base;
    s->interval = self->opts.retry_initial_ms;
    s->max_interval = s->base_interval > self->opts.retry_max_ms ? s->base_interval : self->opts.retry_max_ms;
    s->state = PFT_SEND_PENDING;
    self->n_pending++;
    return self->n_sends++;
}

static void finish(pft_transport_t *self, send_t *s, pft_send_state_t state, int rc, const char *reason)
{
    s->state = state;
    s->rc = rc;
    pft_transport__copy_text(s->reason, sizeof s->reason, reason ? reason : "");
    zmq_msg_close(&s->body);
    self->n_pending--;
    if (state == PFT_SEND_ACKED)
        self->stats.acked++;
    else if (state == PFT_SEND_REJECTED)
        self->stats.rejected_by_peer++;
    else
        self->stats.failed++;
}

static int transmit_body(pft_transport_t *self, send_t *s);

/* One offer of s: [header 'O', body size], or 'P' once the body went (a probe for the ACK), or 'E' followed
 * by the body for a first offer of at most opts.eager_bytes; 1 if it went out, 0 if libzmq could not take it
 * now (no connection: peer_t.up; or the HWM). */
static int transmit_offer(pft_transport_t *self, send_t *s)
{
    void *sock = self->peers[s->peer].sock;
    if (!self->peers[s->peer].up)
        return 0;
    uint8_t hdr[HDR_LEN], size[OFFER_LEN];
    int eager = !s->body_sent && s->bodies == 0 && (int64_t)s->len <= self->opts.eager_bytes;
    pft_transport__make_header(hdr, eager ? T_EAGER : s->body_sent ? T_PROBE : T_OFFER, s->id);
    for (int i = 0; i < OFFER_LEN; i++)
        size[i] = (uint8_t)((uint64_t)s->len >> (56 - 8 * i));
    if (zmq_send(sock, hdr, HDR_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) != HDR_LEN)
        return 0;
    zmq_send(sock, size, OFFER_LEN, ZMQ_DONTWAIT); /* cannot fail once the first part was taken */
    s->attempts++;
    s->offers++;
    self->stats.offers++;
    self->stats.offer_bytes += HDR_LEN + OFFER_LEN;
    if (!eager && s->body_sent)
        self->stats.probes++;
    if (eager && transmit_body(self, s)) {
        s->body_sent = 1; /* repeats are probes; the receiver grants again only if the body never came */
        self->stats.eager_sends++;
    }
    return 1;
}

/* The body of s, granted: [header 'B', body]; 1 if it went out, 0 if not (as transmit_offer). */
static int transmit_body(pft_transport_t *self, send_t *s)
{
    void *sock = self->peers[s->peer].sock;
    uint8_t hdr[HDR_LEN];
    pft_transport__make_header(hdr, T_BUNDLE, s->id);
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
    s->attempts++;
    if (s->bodies++ > 0)
        self->stats.retries++;
    self->stats.transmissions++;
    self->stats.bytes_sent += s->len;
    return 1;
}

/* libzmq ends a connection whose handshake was refused (authentication, security mismatch) for good; we
 * connect again after a backoff, so that a key allowed later, or a peer restarted with the right
 * configuration, is reached. */
static void run_reconnects(pft_transport_t *self, int64_t now)
{
    for (int i = 0; i < self->n_peers; i++) {
        peer_t *p = &self->peers[i];
        if (!p->reconnect_at || now < p->reconnect_at || !p->endpoint[0])
            continue;
        p->reconnect_at = 0;
        zmq_disconnect(p->sock, p->endpoint); /* ENOENT when libzmq already dropped it: fine */
        zmq_connect(p->sock, p->endpoint);    /* it worked once with this endpoint */
    }
}

static void on_send(pft_transport_t *self, send_t *s, int64_t now);
static void confirm_ack(pft_transport_t *self, int pi, const uint8_t id[PFT_TRANSPORT_ID_LEN]);

/* CONFIRMs asked for while a peer had no connection up go out once it has one. */
static void send_later_confirms(pft_transport_t *self)
{
    for (int i = 0; i < self->n_peers; i++) {
        peer_t *p = &self->peers[i];
        for (int k = 0; p->up && k < p->n_later; k++)
            confirm_ack(self, i, p->later[k]);
        if (p->up)
            p->n_later = 0;
    }
}

/* Due transmissions and expiries. */
void pft_transport__run_timers(pft_transport_t *self)
{
    int64_t now = pft_transport_now_ms();
    run_reconnects(self, now);
    send_later_confirms(self);
    for (int i = 0; i < self->n_sends; i++) {
        send_t *s = &self->sends[i];
        if (s->state != PFT_SEND_PENDING)
            continue;
        if (s->deadline > 0 && now >= s->deadline) {
            char why[1024];
            const peer_t *p = &self->peers[s->peer];
            snprintf(why, sizeof why,
                     "no acknowledgement from peer '%.64s' (%.100s) before the deadline, %d offers, %d "
                     "body transmissions%s%.200s%s%.200s",
                     p->name, p->endpoint[0] ? p->endpoint : "endpoint never known", s->offers, s->bodies,
                     s->reason[0] ? "; last: " : "", s->reason, p->hs_error[0] ? "; handshake failed: " : "",
                     p->hs_error);
            finish(self, s, PFT_SEND_FAILED, PFT_ETIMEOUT, why);
            continue;
        }
        if (now < s->next_attempt)
            continue;
        if (s->grant_pending) { /* granted, but the body could not be handed to libzmq then */
            on_send(self, s, now);
            continue;
        }
        if (transmit_offer(self, s)) {
            s->next_attempt = now + s->interval;
            s->interval = s->interval > s->max_interval / 2 ? s->max_interval : 2 * s->interval;
        } else {
            s->next_attempt = now + self->opts.retry_initial_ms; /* not connected yet: try again soon */
        }
    }
}

/* Milliseconds until the next timer (transmission, deadline, reconnection), or -1 if none. */
int64_t pft_transport__next_timer(const pft_transport_t *self)
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
    int64_t g = pft_transport__flow_next_timer(self, now);
    if (g >= 0 && (best < 0 || g < best))
        best = g;
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

static int is_transient(int code)
{
    return code == PFT_ENOMEM || code == PFT_EIO || code == PFT_EINTR || code == PFT_ETIMEOUT;
}

/* A grant for s: the body goes now, once; then offers only ask for the ACK, less often. If libzmq cannot take
 * the body now (its queue full of our offers), it is tried again every 10 ms: the grant stands meanwhile and
 * the receiver answers later offers with WAIT. */
static void on_send(pft_transport_t *self, send_t *s, int64_t now)
{
    if (!transmit_body(self, s)) {
        s->grant_pending = 1; /* not taken now (HWM): the timer tries the body again, soon */
        s->next_attempt = now + 10;
        return;
    }
    s->grant_pending = 0;
    s->body_sent = 1;
    s->interval = 2 * s->base_interval > 2000 ? 2 * s->base_interval : 2000;
    s->next_attempt = now + s->interval;
}

/* Tells the receiver we no longer want a grant it gave (the send ended meanwhile): it frees it at once. */
static void cancel_grant(pft_transport_t *self, int pi, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    uint8_t hdr[HDR_LEN];
    pft_transport__make_header(hdr, T_CANCEL, id);
    if (zmq_send(self->peers[pi].sock, hdr, HDR_LEN, ZMQ_DONTWAIT) == HDR_LEN)
        self->stats.cancels_sent++;
}

/* Tells peer pi that its ACK of id was read (CONFIRM), so that it need not stay reachable for us; a failure
 * (the peer gone, the HWM) only costs the receiver its bounded wait. */
static void confirm_ack(pft_transport_t *self, int pi, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    uint8_t hdr[HDR_LEN];
    pft_transport__make_header(hdr, T_CONFIRM, id);
    if (zmq_send(self->peers[pi].sock, hdr, HDR_LEN, ZMQ_DONTWAIT) == HDR_LEN)
        self->stats.confirms_sent++;
}

static void on_reply(pft_transport_t *self, int pi, char type, const uint8_t id[PFT_TRANSPORT_ID_LEN],
                     int code, const char *reason, uint32_t wait_ms)
{
    int64_t now = pft_transport_now_ms();
    int matched = 0;
    for (int i = 0; i < self->n_sends; i++) {
        send_t *s = &self->sends[i];
        if (s->state != PFT_SEND_PENDING || s->peer != pi || memcmp(s->id, id, PFT_TRANSPORT_ID_LEN) != 0)
            continue;
        matched = 1;
        if (type == T_ACK) {
            finish(self, s, PFT_SEND_ACKED, 0, "");
            if (self->opts.on_ack) /* recorded by the caller before the receiver is told it may leave */
                self->opts.on_ack(self->opts.on_ack_ctx, i);
        } else if (type == T_SEND) {
            self->stats.grants_received++;
            on_send(self, s, now);
            return; /* one body per grant, even if the same bytes are queued twice for this peer */
        } else if (type == T_WAIT) {
            self->stats.busy_received++;
            s->next_attempt = now + wait_ms;
        } else if (is_transient(code)) {
            pft_transport__copy_text(s->reason, sizeof s->reason, reason);
            s->body_sent = s->grant_pending = 0;
            s->next_attempt = now + s->interval;
            s->interval = s->interval > s->max_interval / 2 ? s->max_interval : 2 * s->interval;
        } else {
            finish(self, s, PFT_SEND_REJECTED, code, reason);
        }
    }
    if (type == T_SEND && !matched)
        cancel_grant(self, pi, id);
    if (type == T_ACK)
        confirm_ack(self, pi, id);
}

/* Decodes a NACK's code and reason (made printable) from its second frame. */
static int32_t nack_body(zmq_msg_t *m, char reason[PFT_TRANSPORT_MAX_REASON + 1])
{
    const uint8_t *b = zmq_msg_data(m);
    int32_t code = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    size_t rl = zmq_msg_size(m) - 4;
    memcpy(reason, b + 4, rl);
    reason[rl] = '\0';
    for (size_t i = 0; i < rl; i++) /* a peer's text goes into our logs: keep it printable */
        if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
            reason[i] = '?';
    return code >= 0 || code < -1000 ? PFT_EREJECT : code;
}

void pft_transport__handle_replies(pft_transport_t *self, int pi)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[2];
        int n = pft_transport__recv_parts(self->peers[pi].sock, parts, 2);
        if (n <= 0)
            return;
        uint8_t id[PFT_TRANSPORT_ID_LEN];
        char type = n <= 2 ? pft_transport__parse_header(&parts[0], id, NULL) : 0;
        size_t extra = n == 2 ? zmq_msg_size(&parts[1]) : 0;
        if ((type == T_ACK || type == T_SEND) && n == 1) {
            on_reply(self, pi, type, id, 0, "", 0);
        } else if (type == T_WAIT && n == 2 && extra == WAIT_LEN) {
            const uint8_t *b = zmq_msg_data(&parts[1]);
            uint32_t ms = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
            if (ms > (uint32_t)self->opts.retry_max_ms) /* a hint, bounded by ours (never a busy loop) */
                ms = (uint32_t)self->opts.retry_max_ms;
            if (ms < (uint32_t)self->opts.retry_initial_ms)
                ms = (uint32_t)self->opts.retry_initial_ms;
            on_reply(self, pi, T_WAIT, id, 0, "", ms);
        } else if (type == T_NACK && n == 2 && extra >= 4 && extra <= 4 + PFT_TRANSPORT_MAX_REASON) {
            char reason[PFT_TRANSPORT_MAX_REASON + 1];
            int32_t code = nack_body(&parts[1], reason);
            on_reply(self, pi, T_NACK, id, code, reason, 0);
        } else {
            self->stats.malformed++;
        }
        pft_transport__close_parts(parts, n, 2);
    }
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

int pft_transport_send_attempts(const pft_transport_t *self, int handle)
{
    if (handle < 0 || handle >= self->n_sends)
        return pft_err(PFT_EINVAL, "transport: unknown send handle %d", handle);
    return self->sends[handle].attempts;
}

int pft_transport_cancel(pft_transport_t *self, int handle, const char *reason)
{
    if (handle < 0 || handle >= self->n_sends)
        return pft_err(PFT_EINVAL, "transport: unknown send handle %d", handle);
    send_t *s = &self->sends[handle];
    if (s->state == PFT_SEND_PENDING)
        finish(self, s, PFT_SEND_FAILED, PFT_ETIMEOUT, reason);
    return 0;
}

int pft_transport_confirm(pft_transport_t *self, const char *peer, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int i = 0; peer && i < self->n_peers; i++) {
        peer_t *p = &self->peers[i];
        if (strcmp(p->name, peer) != 0)
            continue;
        if (p->up)
            confirm_ack(self, i, id);
        else if (p->n_later < MAX_LATER_CONFIRMS) /* sent once a connection is up (send_later_confirms) */
            memcpy(p->later[p->n_later++], id, PFT_TRANSPORT_ID_LEN);
        return 0;
    }
    return pft_err(PFT_EINVAL, "transport: unknown peer '%s'", peer ? peer : "(null)");
}

int pft_transport_pending(const pft_transport_t *self)
{
    return self->n_pending;
}
