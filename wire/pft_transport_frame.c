/* pft_transport_frame: the framing of the protocol (the message header, whole multipart messages, a message's
 * id) and the receiver's replies on the ROUTER (ACK, NACK, duplicates, the ids accepted). */
#include "pft_transport.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

void pft_transport__make_header(uint8_t hdr[HDR_LEN], char type, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    memcpy(hdr, HDR_MAGIC, 4);
    hdr[4] = HDR_VERSION;
    hdr[5] = (uint8_t)type;
    memcpy(hdr + 6, id, PFT_TRANSPORT_ID_LEN);
}

char pft_transport__parse_header(const zmq_msg_t *m, uint8_t id[PFT_TRANSPORT_ID_LEN], int *version)
{
    if (version)
        *version = 0;
    if (zmq_msg_size((zmq_msg_t *)m) != HDR_LEN)
        return 0;
    const uint8_t *h = zmq_msg_data((zmq_msg_t *)m);
    if (memcmp(h, HDR_MAGIC, 4) != 0)
        return 0;
    if (version)
        *version = h[4];
    if (h[4] != HDR_VERSION)
        return 0;
    memcpy(id, h + 6, PFT_TRANSPORT_ID_LEN);
    return (char)h[5];
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

int pft_transport__is_accepted(const pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int i = 0; i < self->n_accepted; i++)
        if (memcmp(self->accepted[i], id, PFT_TRANSPORT_ID_LEN) == 0)
            return 1;
    return 0;
}

void pft_transport__remember(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    if (pft_transport__is_accepted(self, id))
        return;
    memcpy(self->accepted[self->accepted_next], id, PFT_TRANSPORT_ID_LEN);
    self->accepted_next = (self->accepted_next + 1) % self->opts.max_remembered;
    if (self->n_accepted < self->opts.max_remembered)
        self->n_accepted++;
}

void pft_transport__await_confirm(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN],
                                  const char *user)
{
    if (!user)
        user = "";
    for (int i = 0; i < self->n_awaiting; i++)
        if (memcmp(self->awaiting[i].id, id, PFT_TRANSPORT_ID_LEN) == 0 &&
            strcmp(self->awaiting[i].user, user) == 0)
            return;
    if (self->n_awaiting ==
        MAX_AWAITING) { /* forget the oldest: bounded memory, the node waits a little less */
        memmove(self->awaiting, self->awaiting + 1, (MAX_AWAITING - 1) * sizeof self->awaiting[0]);
        self->n_awaiting--;
    }
    awaiting_t *a = &self->awaiting[self->n_awaiting++];
    memcpy(a->id, id, PFT_TRANSPORT_ID_LEN);
    snprintf(a->user, sizeof a->user, "%s", user);
}

void pft_transport__confirmed(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN], const char *user)
{
    if (!user)
        user = "";
    self->stats.confirms_received++;
    for (int i = 0; i < self->n_awaiting; i++) {
        if (memcmp(self->awaiting[i].id, id, PFT_TRANSPORT_ID_LEN) != 0 ||
            strcmp(self->awaiting[i].user, user) != 0)
            continue;
        memmove(self->awaiting + i, self->awaiting + i + 1,
                (size_t)(self->n_awaiting - i - 1) * sizeof self->awaiting[0]);
        self->n_awaiting--;
        return;
    }
}

/* Replies go without blocking; a failure (peer gone, HWM) is the caller's to handle or ignore: a sender
 * repeats its offer and gets the reply then. */
int pft_transport__reply(pft_transport_t *self, const uint8_t *ident, size_t ident_len, int version,
                         char type, const uint8_t id[PFT_TRANSPORT_ID_LEN], const void *extra,
                         size_t extra_len)
{
    uint8_t hdr[HDR_LEN];
    pft_transport__make_header(hdr, type, id);
    hdr[4] = (uint8_t)version;
    if (zmq_send(self->router, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    /* once the routing frame is accepted, the rest of the message is too (libzmq: multipart is atomic) */
    if (zmq_send(self->router, hdr, HDR_LEN, (extra_len ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
        return -1;
    if (extra_len && zmq_send(self->router, extra, extra_len, ZMQ_DONTWAIT) < 0)
        return -1;
    if (type == T_ACK)
        self->stats.last_ack_ms = pft_transport_now_ms();
    return 0;
}

void pft_transport__nack(pft_transport_t *self, const uint8_t *ident, size_t ident_len, int version,
                         const uint8_t id[PFT_TRANSPORT_ID_LEN], int code, const char *reason)
{
    uint8_t body[4 + PFT_TRANSPORT_MAX_REASON];
    uint32_t c = (uint32_t)(int32_t)code;
    for (int i = 0; i < 4; i++)
        body[i] = (uint8_t)(c >> (24 - 8 * i));
    size_t rl = strlen(reason);
    if (rl > PFT_TRANSPORT_MAX_REASON)
        rl = PFT_TRANSPORT_MAX_REASON;
    memcpy(body + 4, reason, rl);
    (void)pft_transport__reply(self, ident, ident_len, version, T_NACK, id, body, 4 + rl);
}

void pft_transport__reack(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                          const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    self->stats.received++;
    self->stats.duplicates++;
    (void)pft_transport__reply(self, ident, ident_len, HDR_VERSION, T_ACK, id, NULL, 0);
}

int pft_transport__id_of(const pft_transport_t *self, const uint8_t *buf, size_t len,
                         uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    if (self->opts.id_fn)
        return self->opts.id_fn(buf, len, id);
    /* the bundle id, the envelope limited to max_msg_size (one limit: libzmq's, this one, the decoder's) */
    pft_bundle_limits_t lim;
    pft_bundle_limits_default(&lim);
    lim.max_bytes = (size_t)self->opts.max_msg_size;
    pft_envelope_t env;
    int rc = pft_envelope_parse(buf, len, &lim, &env);
    if (rc == 0)
        pft_bundle_hash(env.payload, env.payload_len, id);
    return rc;
}
