/* pft_transport_recv: the receive state machine: the inbound ROUTER's messages dispatched (offers, bodies,
 * probes, cancels), bodies handed to the callback and answered. */
#include "pft_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "pft_error.h"
#include "pft_transport_internal.h"

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
        pft_transport__remember(self, hid);
        pft_transport__await_confirm(self, hid, self->curve ? zmq_msg_gets(body, "User-Id") : NULL);
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
    } else if (type == T_CONFIRM && n == 2) {
        pft_transport__confirmed(self, id, self->curve ? zmq_msg_gets(&parts[1], "User-Id") : NULL);
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
