/* pft_transport_flow: receiver-side flow control: offers answered, bodies granted a few at a time, a queue.
 */
#include "pft_transport.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_transport_internal.h"

/* Why: a receiver merging one bundle at a time while fifty senders push theirs makes each sender retransmit
 * its whole body on every backoff step (star50, exact statistics: 3-4x the payload on the wire). Here a
 * sender offers first; the receiver grants at most opts.max_grants bodies (opts.grant_bytes bytes) at a time,
 * queues the other offers in arrival order, and pushes SEND to the queue's head whenever a grant frees (its
 * body handled, cancelled, expired or its connection closed). Bodies thus travel once; what repeats is
 * offers. */

int pft_transport__flow_init(pft_transport_t *self)
{
    /* idle grants let others in: up to GRANT_OVERCOMMIT * max_grants at once (can_grant) */
    self->grants = pft_calloc((size_t)GRANT_OVERCOMMIT * (size_t)self->opts.max_grants, sizeof *self->grants);
    self->waiting = self->grants ? pft_calloc(MAX_WAITING, sizeof *self->waiting) : NULL;
    self->svc_ms = SVC_MS_INITIAL;
    return self->waiting ? 0 : pft_err(PFT_ENOMEM, "transport: out of memory");
}

void pft_transport__flow_free(pft_transport_t *self)
{
    pft_free(self->grants);
    pft_free(self->waiting);
}

static int same(const offer_t *o, const uint8_t *ident, size_t ident_len,
                const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    return o->ident_len == ident_len && memcmp(o->ident, ident, ident_len) == 0 &&
           memcmp(o->id, id, PFT_TRANSPORT_ID_LEN) == 0;
}

static offer_t *waiting_at(pft_transport_t *self, int k)
{
    return &self->waiting[(self->waiting_head + k) % MAX_WAITING];
}

/* Position of (ident, id) in the queue, or -1. */
static int find_waiting(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                        const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int k = 0; k < self->n_waiting; k++)
        if (same(waiting_at(self, k), ident, ident_len, id))
            return k;
    return -1;
}

static void remove_waiting(pft_transport_t *self, int k)
{
    for (int j = k; j + 1 < self->n_waiting; j++)
        *waiting_at(self, j) = *waiting_at(self, j + 1);
    self->n_waiting--;
}

static int find_grant(const pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                      const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    for (int g = 0; g < self->n_grants; g++)
        if (same(&self->grants[g], ident, ident_len, id))
            return g;
    return -1;
}

static void remove_grant(pft_transport_t *self, int g)
{
    self->granted_bytes -= self->grants[g].size;
    self->grants[g] = self->grants[--self->n_grants];
}

/* A grant of size bytes fits now: none outstanding, or below both limits. Grants idle for GRANT_IDLE_MS
 * (their sender, busy computing, has not read SEND yet) stop counting against max_grants, so one slow sender
 * does not stall the queue; they still hold their bytes, and all grants together stay under GRANT_OVERCOMMIT
 * times max_grants. */
static int can_grant(const pft_transport_t *self, uint64_t size)
{
    if (self->n_grants == 0)
        return 1;
    if (self->n_grants >= GRANT_OVERCOMMIT * self->opts.max_grants ||
        self->granted_bytes + size > (uint64_t)self->opts.grant_bytes)
        return 0;
    int64_t now = pft_transport_now_ms();
    int active = 0;
    for (int g = 0; g < self->n_grants; g++)
        active += now - self->grants[g].since < GRANT_IDLE_MS;
    return active < self->opts.max_grants;
}

/* Sends SEND for o and records the grant; 0, or -1 if the sender's connection is gone. */
static int grant(pft_transport_t *self, const offer_t *o)
{
    if (pft_transport__reply(self, o->ident, o->ident_len, HDR_VERSION, T_SEND, o->id, NULL, 0) != 0)
        return -1;
    offer_t *g = &self->grants[self->n_grants++];
    *g = *o;
    g->since = pft_transport_now_ms();
    int64_t t = (int64_t)self->opts.grant_timeout_ms + (int64_t)(o->size / SIZE_BYTES_PER_MS);
    g->expires = g->since + t;
    self->granted_bytes += o->size;
    self->stats.grants++;
    if (self->n_grants > self->stats.max_in_flight)
        self->stats.max_in_flight = self->n_grants;
    return 0;
}

/* When a sender k places behind the queue's head should offer again (a keepalive: SEND is pushed). */
static uint32_t wait_hint(const pft_transport_t *self, int k)
{
    double ms = (k + 1.0) * self->svc_ms;
    if (ms < self->opts.retry_initial_ms)
        ms = self->opts.retry_initial_ms;
    if (ms > self->opts.retry_max_ms)
        ms = self->opts.retry_max_ms;
    return (uint32_t)ms;
}

static void reply_wait(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                       const uint8_t id[PFT_TRANSPORT_ID_LEN], uint32_t ms)
{
    uint8_t b[WAIT_LEN] = {(uint8_t)(ms >> 24), (uint8_t)(ms >> 16), (uint8_t)(ms >> 8), (uint8_t)ms};
    if (pft_transport__reply(self, ident, ident_len, HDR_VERSION, T_WAIT, id, b, sizeof b) == 0)
        self->stats.busy_replies++;
}

/* An offer refused before any body: counted like a refused message (received, rejected). */
static void refuse_offer(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                         const uint8_t id[PFT_TRANSPORT_ID_LEN], int code, const char *reason)
{
    self->stats.received++;
    self->stats.rejected++;
    pft_transport__refused(self, PFT_REFUSAL_NACK, "offer refused: %s", reason);
    pft_transport__nack(self, ident, ident_len, HDR_VERSION, id, code, reason);
}

void pft_transport__flow_offer(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                               const uint8_t id[PFT_TRANSPORT_ID_LEN], uint64_t size, int fd, int probe)
{
    self->stats.offers_received++;
    if (probe && pft_transport__is_accepted(self, id)) {
        /* the sender of that body asks for its ACK again (slow to come, or lost): not a duplicate */
        self->stats.ack_probes++;
        (void)pft_transport__reply(self, ident, ident_len, HDR_VERSION, T_ACK, id, NULL, 0);
        return;
    }
    if (pft_transport__is_accepted(self, id)) { /* HAVE: stored before, no body needed */
        pft_transport__reack(self, ident, ident_len, id);
        return;
    }
    char reason[PFT_TRANSPORT_MAX_REASON + 1];
    if (!self->on_message) {
        refuse_offer(self, ident, ident_len, id, PFT_EUNSUPPORTED,
                     "transport: this node accepts no inbound messages");
        return;
    }
    if (size == 0 || size > (uint64_t)self->opts.max_msg_size) {
        self->stats.oversize += size > 0;
        snprintf(reason, sizeof reason, "transport: too large: %llu bytes > max %lld (max_msg_size)",
                 (unsigned long long)size, (long long)self->opts.max_msg_size);
        refuse_offer(self, ident, ident_len, id, size ? PFT_ERANGE : PFT_EFORMAT,
                     size ? reason : "transport: an offer of 0 bytes");
        return;
    }
    int g = find_grant(self, ident, ident_len, id);
    if (g >= 0) { /* granted: the body is on its way (it precedes any later offer on the connection) */
        reply_wait(self, ident, ident_len, id, wait_hint(self, 0));
        return;
    }
    int k = find_waiting(self, ident, ident_len, id);
    if (k < 0 && self->n_waiting == 0 && can_grant(self, size)) {
        offer_t o = {.ident_len = ident_len, .size = size, .fd = fd};
        memcpy(o.ident, ident, ident_len);
        memcpy(o.id, id, PFT_TRANSPORT_ID_LEN);
        (void)grant(self, &o); /* a vanished sender offers again on its new connection */
        return;
    }
    if (k < 0 && self->n_waiting < MAX_WAITING) {
        k = self->n_waiting++;
        offer_t *o = waiting_at(self, k);
        memset(o, 0, sizeof *o);
        memcpy(o->ident, ident, ident_len);
        o->ident_len = ident_len;
        memcpy(o->id, id, PFT_TRANSPORT_ID_LEN);
        o->size = size;
        o->since = pft_transport_now_ms();
        o->fd = fd;
    }
    reply_wait(self, ident, ident_len, id, wait_hint(self, k < 0 ? self->n_waiting : k));
}

/* A small body sent without a grant: the size is the one thing to refuse before it; the rest is the body's.
 */
void pft_transport__flow_eager(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                               const uint8_t id[PFT_TRANSPORT_ID_LEN], uint64_t size)
{
    self->stats.offers_received++;
    if (size <= (uint64_t)self->opts.max_msg_size)
        return;
    char reason[PFT_TRANSPORT_MAX_REASON + 1];
    self->stats.oversize++;
    snprintf(reason, sizeof reason, "transport: too large: %llu bytes > max %lld (max_msg_size)",
             (unsigned long long)size, (long long)self->opts.max_msg_size);
    refuse_offer(self, ident, ident_len, id, PFT_ERANGE, reason);
}

void pft_transport__flow_pump(pft_transport_t *self)
{
    while (self->n_waiting > 0) {
        offer_t o = *waiting_at(self, 0);
        if (!pft_transport__is_accepted(self, o.id) && !can_grant(self, o.size))
            return;
        self->waiting_head = (self->waiting_head + 1) % MAX_WAITING;
        self->n_waiting--;
        if (pft_transport__is_accepted(self, o.id)) /* the same bundle came along another path meanwhile */
            pft_transport__reack(self, o.ident, o.ident_len, o.id);
        else
            (void)grant(self, &o); /* -1: that sender's connection is gone; the next one */
    }
}

uint64_t pft_transport__flow_body(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                                  const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    int g = find_grant(self, ident, ident_len, id);
    if (g < 0)
        return 0;
    uint64_t size = self->grants[g].size;
    double ms = (double)(pft_transport_now_ms() - self->grants[g].since);
    self->svc_ms = 0.75 * self->svc_ms + 0.25 * (ms < 1 ? 1 : ms);
    remove_grant(self, g);
    return size;
}

void pft_transport__flow_cancel(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                                const uint8_t id[PFT_TRANSPORT_ID_LEN])
{
    int g = find_grant(self, ident, ident_len, id);
    if (g >= 0) {
        remove_grant(self, g);
        self->stats.grants_cancelled++;
    }
    int k = find_waiting(self, ident, ident_len, id);
    if (k >= 0)
        remove_waiting(self, k);
    pft_transport__flow_pump(self);
}

void pft_transport__flow_expire(pft_transport_t *self, int64_t now)
{
    int freed = self->n_waiting > 0; /* a grant may have gone idle: the queue's head may fit now */
    for (int g = 0; g < self->n_grants;) {
        const offer_t *o = &self->grants[g];
        if (now < o->expires) {
            g++;
            continue;
        }
        self->stats.grants_expired++;
        pft_transport__refused(
            self, PFT_REFUSAL_DROPPED,
            "transport: a granted body of %llu bytes did not come within %lld ms; grant freed",
            (unsigned long long)o->size, (long long)(now - o->since));
        remove_grant(self, g);
        freed = 1;
    }
    if (freed)
        pft_transport__flow_pump(self);
}

void pft_transport__flow_disconnected(pft_transport_t *self, int fd)
{
    self->stats.disconnects++;
    int freed = 0;
    for (int g = 0; fd >= 0 && g < self->n_grants;) {
        const offer_t *o = &self->grants[g];
        if (o->fd != fd) {
            g++;
            continue;
        }
        self->stats.grants_lost++;
        pft_transport__refused(
            self, PFT_REFUSAL_DROPPED,
            "transport: the connection of a sender closed before its granted body of %llu "
            "bytes came (it stopped, or sent more than max_msg_size %lld: libzmq drops such a "
            "message with the connection); grant freed",
            (unsigned long long)o->size, (long long)self->opts.max_msg_size);
        remove_grant(self, g);
        freed = 1;
    }
    if (freed)
        pft_transport__flow_pump(self);
}

int64_t pft_transport__flow_next_timer(const pft_transport_t *self, int64_t now)
{
    int64_t best = -1;
    for (int g = 0; g < self->n_grants; g++) {
        int64_t t = self->grants[g].expires;
        if (self->n_waiting > 0 && now - self->grants[g].since < GRANT_IDLE_MS)
            t = self->grants[g].since + GRANT_IDLE_MS; /* when it goes idle and may let the next one in */
        int64_t dt = t > now ? t - now : 0;
        if (best < 0 || dt < best)
            best = dt;
    }
    return best;
}
