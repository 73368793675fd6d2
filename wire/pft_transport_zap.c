/* pft_transport_zap: CURVE security (the ZAP handler, allowed keys) and handshake-event monitors. */
#include "pft_transport.h"

#include <errno.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

/* Starts delivering sock's events in mask to a new PAIR socket and returns it, or NULL (message set). The
 * PAIR has no receive limit: libzmq's monitor sends block when the pipe is full, and its events come from
 * the I/O thread, which must never stall (the events are few: one per handshake). */
void *pft_transport__monitor_new(pft_transport_t *self, void *sock, int mask)
{
    static atomic_uint seq;
    char ep[128];
    snprintf(ep, sizeof ep, "inproc://pft-transport-monitor-%p-%u", (void *)self, atomic_fetch_add(&seq, 1u));
    if (zmq_socket_monitor(sock, ep, mask) != 0) {
        pft_transport__zerr(PFT_ENET, "zmq_socket_monitor");
        return NULL;
    }
    void *pair = zmq_socket(self->ctx, ZMQ_PAIR);
    if (!pair) {
        pft_transport__zerr(PFT_ENET, "zmq_socket(PAIR)");
    } else if (pft_transport__setopt_int(pair, ZMQ_RCVHWM, 0, "ZMQ_RCVHWM") ||
               pft_transport__setopt_int(pair, ZMQ_LINGER, 0, "ZMQ_LINGER")) {
        zmq_close(pair);
        pair = NULL;
    } else if (zmq_connect(pair, ep) != 0) {
        pft_transport__zerr(PFT_ENET, "connecting the monitor");
        zmq_close(pair);
        pair = NULL;
    }
    if (!pair)
        zmq_socket_monitor(sock, NULL, 0);
    return pair;
}

/* Stops monitoring sock and closes *mon_p (in this order: a monitor must never send to a closed PAIR). */
void pft_transport__monitor_close(void *sock, void **mon_p)
{
    if (!*mon_p)
        return;
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(*mon_p);
    *mon_p = NULL;
}

/* CURVE: binds the ZAP handler (before the ROUTER exists: with no handler bound, libzmq admits every
 * CURVE client) and makes the ROUTER a CURVE server. */
int pft_transport__setup_curve_server(pft_transport_t *self)
{
    self->zap = zmq_socket(self->ctx, ZMQ_REP);
    if (!self->zap)
        return pft_transport__zerr(PFT_ENET, "zmq_socket(REP) for ZAP");
    int rc = pft_transport__setopt_int(self->zap, ZMQ_LINGER, 0, "ZMQ_LINGER");
    if (rc)
        return rc;
    if (zmq_bind(self->zap, ZAP_ENDPOINT) != 0) {
        if (zmq_errno() == EADDRINUSE)
            return pft_err(PFT_EINVAL,
                           "transport: a ZAP handler is already bound in this libzmq context (one "
                           "CURVE transport per context)");
        return pft_transport__zerr(PFT_ENET, "binding the ZAP handler");
    }
    if ((rc = pft_transport__setopt_int(self->router, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")))
        return rc;
    if (zmq_setsockopt(self->router, ZMQ_CURVE_SECRETKEY, self->curve_secret, KEY_LEN) != 0)
        return pft_transport__zerr(PFT_ENET, "ZMQ_CURVE_SECRETKEY");
    if (zmq_setsockopt(self->router, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0)
        return pft_transport__zerr(PFT_ENET, "ZMQ_ZAP_DOMAIN");
    return 0;
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
void pft_transport__handle_zap(pft_transport_t *self)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[8];
        int n = pft_transport__recv_parts(self->zap, parts, 8);
        if (n <= 0)
            return;
        int ok = n == 7 && frame_is(&parts[0], "1.0") && frame_is(&parts[2], ZAP_DOMAIN) &&
                 frame_is(&parts[5], "CURVE") && zmq_msg_size(&parts[6]) == KEY_LEN &&
                 zmq_msg_size(&parts[1]) <= 255;
        if (!ok) {
            self->stats.handshakes_failed++;
            snprintf(self->last_denial, sizeof self->last_denial, "malformed ZAP request refused");
            pft_transport__refused(self, PFT_REFUSAL_HANDSHAKE, "handshake: malformed ZAP request refused");
            zap_reply(self, n >= 2 && n <= 8 ? &parts[1] : NULL, "400", "malformed ZAP request", "");
            pft_transport__close_parts(parts, n, 8);
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
            pft_transport__refused(self, PFT_REFUSAL_HANDSHAKE, "handshake: %s", self->last_denial);
            zap_reply(self, &parts[1], "400", "client key not allowed", "");
        }
        pft_transport__close_parts(parts, n, 8);
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
void pft_transport__handle_monitor(pft_transport_t *self, void *mon, peer_t *peer)
{
    /* inbound: one refused handshake may show up as its cause and a lost connection, or as a lost connection
     * alone (the client hung up first: a plain-text client of a CURVE server often does); lost connections
     * beyond the causes seen in the same batch are reported as refusals of their own */
    int causes = 0, lost = 0;
    char lost_at[72] = "", lost_err[64] = "";
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[2];
        int n = pft_transport__recv_parts(mon, parts, 2);
        if (n <= 0)
            break;
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
                    pft_transport__copy_text(peer->hs_error, sizeof peer->hs_error, what);
                    peer->hs_specific = specific;
                }
                if (specific) { /* libzmq may not retry these */
                    peer->reconnect_delay =
                        peer->reconnect_delay ? 2 * peer->reconnect_delay : RECONNECT_MIN_MS;
                    if (peer->reconnect_delay > RECONNECT_MAX_MS)
                        peer->reconnect_delay = RECONNECT_MAX_MS;
                    peer->reconnect_at = pft_transport_now_ms() + peer->reconnect_delay;
                }
            } else if (peer && event == ZMQ_EVENT_DISCONNECTED) {
                peer->up = 0;
            } else if (peer && event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
                peer->up = 1;
                peer->hs_error[0] = '\0';
                peer->hs_specific = 0;
                peer->reconnect_delay = 0;
            } else if (!peer && event == ZMQ_EVENT_DISCONNECTED) {
                pft_transport__flow_disconnected(self, (int)value);
            } else if (!peer && failed) {
                int al = (int)(zmq_msg_size(&parts[1]) < 64 ? zmq_msg_size(&parts[1]) : 64);
                const char *at = zmq_msg_data(&parts[1]);
                causes += specific;
                if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
                    /* ZAP refusals are counted and reported by the handler */
                } else if (specific) {
                    self->stats.handshakes_failed++;
                    pft_transport__refused(self, PFT_REFUSAL_HANDSHAKE,
                                           "handshake: inbound connection to %.*s refused: %s", al, at, what);
                } else {
                    self->stats.handshakes_failed++;
                    lost++;
                    snprintf(lost_at, sizeof lost_at, "%.*s", al, at);
                    snprintf(lost_err, sizeof lost_err, "%s", zmq_strerror((int)value));
                }
            }
        }
        pft_transport__close_parts(parts, n, 2);
    }
    for (int i = causes; i < lost; i++)
        pft_transport__refused(self, PFT_REFUSAL_HANDSHAKE,
                               "handshake: inbound connection to %s failed: the client hung up during the "
                               "handshake (%s)%s",
                               lost_at, lost_err,
                               self->curve ? "; a client in plain text, or one using a wrong server key?"
                                           : "; a CURVE client of this plain-text node?");
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
