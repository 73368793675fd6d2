/* pft_transport_recv: message frames, the inbound ROUTER, ACK/NACK replies and duplicate ids. */
#include "pft_transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

int pft_transport__is_accepted(const pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int i = 0; i < self->n_accepted; i++)
        if (memcmp(self->accepted[i], id, PFT_TRANSPORT_ID_LEN) == 0)
            return 1;
    return 0;
}

static void remember(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    if (pft_transport__is_accepted(self, id))
        return;
    memcpy(self->accepted[self->accepted_next], id, PFT_TRANSPORT_ID_LEN);
    self->accepted_next = (self->accepted_next + 1) % self->opts.max_remembered;
    if (self->n_accepted < self->opts.max_remembered)
        self->n_accepted++;
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

/* The callback's verdict on buf (its id already checked): 0, PFT_TRANSPORT_DUPLICATE or a negative code. */
static int call_back(pft_transport_t *self, zmq_msg_t *body, char *reason, size_t cap)
{
    self->sender = self->curve ? zmq_msg_gets(body, "User-Id") : NULL;
    if (self->sender && !self->sender[0])
        self->sender = NULL;
    int rc = self->on_message(self->cb_ctx, zmq_msg_data(body), zmq_msg_size(body), reason, cap);
    self->sender = NULL;
    reason[cap - 1] = '\0';
    if (rc > 0 && rc != PFT_TRANSPORT_DUPLICATE) {
        snprintf(reason, cap, "transport: the receiver's callback returned %d (a bug)", rc);
        rc = PFT_EINVAL; /* a callback bug: refuse rather than ACK */
    }
    return rc;
}

/* Handles one well-formed bundle message. */
static void on_bundle(pft_transport_t *self, zmq_msg_t *identity, const uint8_t hid[PFT_TRANSPORT_ID_LEN],
                      zmq_msg_t *body)
{
    const uint8_t *buf = zmq_msg_data(body), *ident = zmq_msg_data(identity);
    size_t len = zmq_msg_size(body), ident_len = zmq_msg_size(identity);
    uint64_t offered = pft_transport__flow_body(self, ident, ident_len, hid);
    self->stats.bytes_received += len;
    if (pft_transport__is_accepted(self, hid)) {
        /* Seen and stored before: re-ACK only. A forged body under a known id gains nothing but this ACK. */
        pft_transport__reack(self, ident, ident_len, hid);
        pft_transport__flow_pump(self);
        return;
    }
    self->stats.received++;
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    char reason[PFT_TRANSPORT_MAX_REASON + 1] = "";
    int called = 0; /* the callback saw it (and reports its own refusals) */
    int rc = pft_transport__id_of(self, buf, len, id);
    if (rc) {
        snprintf(reason, sizeof reason, "%s", pft_errmsg());
    } else if (memcmp(id, hid, PFT_TRANSPORT_ID_LEN) != 0) {
        rc = PFT_EFORMAT;
        snprintf(reason, sizeof reason, "transport: the id in the header does not match the message");
    } else if (offered && offered != len) {
        rc = PFT_EFORMAT;
        snprintf(reason, sizeof reason, "transport: a body of %zu bytes, offered as %llu", len,
                 (unsigned long long)offered);
    } else if (!self->on_message) {
        rc = PFT_EUNSUPPORTED;
        snprintf(reason, sizeof reason, "transport: this node accepts no inbound messages");
    } else {
        called = 1;
        rc = call_back(self, body, reason, sizeof reason);
    }
    if (rc >= 0) {
        remember(self, hid);
        if (rc == PFT_TRANSPORT_DUPLICATE)
            self->stats.duplicates++;
        else
            self->stats.accepted++;
        (void)pft_transport__reply(self, ident, ident_len, HDR_VERSION, T_ACK, hid, NULL, 0);
    } else {
        if (!reason[0])
            snprintf(reason, sizeof reason, "%s", pft_strerror(rc));
        self->stats.rejected++;
        if (!called)
            pft_transport__refused(self, PFT_REFUSAL_NACK, "%s", reason);
        pft_transport__nack(self, ident, ident_len, HDR_VERSION, hid, rc, reason);
    }
    pft_transport__flow_pump(self);
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

/* A message whose header is of another protocol version (another pftnet build): refused with a NACK framed
 * in that version's header (versions 1 and 2 frame a NACK alike), so the sender reports why; counted as
 * malformed. */
static void other_version(pft_transport_t *self, zmq_msg_t *identity, const zmq_msg_t *hdr, int version)
{
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    memcpy(id, (const uint8_t *)zmq_msg_data((zmq_msg_t *)hdr) + 6, PFT_TRANSPORT_ID_LEN);
    char reason[PFT_TRANSPORT_MAX_REASON + 1];
    snprintf(reason, sizeof reason,
             "transport: protocol version %d is not supported: this node speaks version %d (pftnet builds "
             "differ; run the same build on every node)",
             version, HDR_VERSION);
    self->stats.malformed++;
    pft_transport__refused(self, PFT_REFUSAL_VERSION, "%s", reason);
    pft_transport__nack(self, zmq_msg_data(identity), zmq_msg_size(identity), version, id, PFT_EUNSUPPORTED,
                        reason);
}

/* The body size an offer declares (8 bytes, big endian), or 0 if the frame is not 8 bytes. */
static uint64_t offer_size(zmq_msg_t *m)
{
    if (zmq_msg_size(m) != OFFER_LEN)
        return 0;
    const uint8_t *b = zmq_msg_data(m);
    uint64_t v = 0;
    for (int i = 0; i < OFFER_LEN; i++)
        v = v << 8 | b[i];
    return v;
}

/* The connection's socket as libzmq tells it (TCP, IPC), -1 if unknown (inproc). */
static int message_fd(zmq_msg_t *m)
{
    const char *fd = zmq_msg_gets(m, "__fd");
    return fd ? atoi(fd) : -1;
}

/* One inbound message from a sender: parts[0] the routing id, then [header, ...]. */
static void dispatch(pft_transport_t *self, zmq_msg_t *parts, int n)
{
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    int version = 0;
    char type = n >= 2 ? pft_transport__parse_header(&parts[1], id, &version) : 0;
    const uint8_t *ident = zmq_msg_data(&parts[0]);
    size_t ident_len = zmq_msg_size(&parts[0]);
    if (type == T_BUNDLE && n == 3 && zmq_msg_size(&parts[2]) > 0) {
        on_bundle(self, &parts[0], id, &parts[2]);
    } else if (type == T_EAGER && n == 3 && offer_size(&parts[2]) > 0) {
        pft_transport__flow_eager(self, ident, ident_len, id, offer_size(&parts[2]));
    } else if ((type == T_OFFER || type == T_PROBE) && n == 3 && offer_size(&parts[2]) > 0) {
        pft_transport__flow_offer(self, ident, ident_len, id, offer_size(&parts[2]), message_fd(&parts[1]),
                                  type == T_PROBE);
    } else if (type == T_CANCEL && n == 2) {
        pft_transport__flow_cancel(self, ident, ident_len, id);
    } else if (!type && version > 0 && version != HDR_VERSION && n <= 3) {
        other_version(self, &parts[0], &parts[1], version);
    } else {
        self->stats.malformed++; /* no reply: we cannot trust what it says it is */
        pft_transport__refused(self, PFT_REFUSAL_MALFORMED,
                               "transport: malformed inbound message (%d frame(s), not [header, body], "
                               "[header, size] or [header]) dropped",
                               n - 1);
    }
}

int pft_transport__handle_inbound(pft_transport_t *self)
{
    for (int k = 0; k < MAX_PER_POLL; k++) {
        zmq_msg_t parts[3];
        int n = pft_transport__recv_parts(self->router, parts, 3);
        if (n <= 0)
            return 1;
        dispatch(self, parts, n);
        pft_transport__close_parts(parts, n, 3);
    }
    return 0;
}
