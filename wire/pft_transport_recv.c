/* pft_transport_recv: message frames, the inbound ROUTER, ACK/NACK replies and duplicate ids. */
#include "pft_transport.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_error.h"
#include "pft_transport_internal.h"

void pft_transport__make_header(uint8_t hdr[HDR_LEN], char type, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    memcpy(hdr, HDR_MAGIC, 4);
    hdr[4] = HDR_VERSION;
    hdr[5] = (uint8_t)type;
    memcpy(hdr + 6, id, PFT_TRANSPORT_ID_LEN);
}

/* Returns the type of a valid header, or 0. */
char pft_transport__parse_header(const zmq_msg_t *m, uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    if (zmq_msg_size((zmq_msg_t *)m) != HDR_LEN)
        return 0;
    const uint8_t *h = zmq_msg_data((zmq_msg_t *)m);
    if (memcmp(h, HDR_MAGIC, 4) != 0 || h[4] != HDR_VERSION)
        return 0;
    memcpy(id, h + 6, PFT_TRANSPORT_ID_LEN);
    return (char)h[5];
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

/* Replies to the sender identified by the routing frame. Failures (peer gone, HWM) are ignored: the
 * sender retransmits and gets the reply then. */
static void reply(pft_transport_t *self, zmq_msg_t *identity, char type,
                  const uint8_t id[PFT_TRANSPORT_ID_LEN], int code, const char *reason)
{
    uint8_t hdr[HDR_LEN];
    pft_transport__make_header(hdr, type, id);
    zmq_msg_t ident;
    zmq_msg_init(&ident);
    zmq_msg_copy(&ident, identity);
    if (zmq_msg_send(&ident, self->router, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ident);
        return;
    }
    if (type != T_NACK) {
        zmq_send(self->router, hdr, HDR_LEN, ZMQ_DONTWAIT);
        self->stats.last_ack_ms = pft_transport_now_ms();
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
    int called = 0; /* the callback saw it (and reports its own refusals) */
    int rc = pft_transport__id_of(self, buf, len, id);
    if (rc) {
        snprintf(reason, sizeof reason, "%s", pft_errmsg());
    } else if (memcmp(id, hid, PFT_TRANSPORT_ID_LEN) != 0) {
        rc = PFT_EFORMAT;
        snprintf(reason, sizeof reason, "transport: the id in the header does not match the message");
    } else if (!self->on_message) {
        rc = PFT_EUNSUPPORTED;
        snprintf(reason, sizeof reason, "transport: this node accepts no inbound messages");
    } else {
        called = 1;
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
    if (!called)
        pft_transport__refused(self, PFT_REFUSAL_NACK, "%s", reason);
    reply(self, identity, T_NACK, hid, rc, reason);
}

/* Reads one whole multipart message from sock into parts[0..max) (extra parts are read and dropped);
 * returns the number of parts (> max: malformed), 0 if nothing was waiting, -1 on error. */
int pft_transport__recv_parts(void *sock, zmq_msg_t *parts, int max)
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

void pft_transport__close_parts(zmq_msg_t *parts, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        zmq_msg_close(&parts[i]);
}

void pft_transport__handle_inbound(pft_transport_t *self)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[3];
        int n = pft_transport__recv_parts(self->router, parts, 3);
        if (n <= 0)
            return;
        uint8_t id[PFT_TRANSPORT_ID_LEN];
        if (n == 3 && pft_transport__parse_header(&parts[1], id) == T_BUNDLE && zmq_msg_size(&parts[2]) > 0)
            on_bundle(self, &parts[0], id, &parts[2]);
        else {
            self->stats.malformed++; /* no reply: we cannot trust what it says it is */
            pft_transport__refused(self, PFT_REFUSAL_MALFORMED,
                                   "transport: malformed inbound message (%d frame(s), not [header, body]) "
                                   "dropped",
                                   n - 1);
        }
        pft_transport__close_parts(parts, n, 3);
    }
}
