/* Tests of pft_transport's flow control: fan-in of many senders into a busy receiver (bodies travel once),
 * a receiver that is not polling, duplicates the callback recognises, a grant withdrawn by its sender. */
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_test.h"
#include "pft_transport.h"

#define ANY "tcp://127.0.0.1:*"

/* A bound only against a hang, never a verdict: a send expected to succeed gets it as its deadline, and every
 * wait returns as soon as its condition holds, so the tests pass on a loaded machine (tests/README.md). */
#define HANG_MS 120000

typedef struct {
    int calls;
    int busy_ms; /* the callback sleeps this long per message (the receiver is busy storing/merging) */
    int rc;      /* what it returns */
    int in_call; /* re-entrancy guard */
} sink_t;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t reason_len)
{
    (void)buf;
    (void)len;
    (void)reason;
    (void)reason_len;
    sink_t *s = ctx;
    CHECK(!s->in_call);
    s->calls++;
    sleep_ms(s->busy_ms);
    return s->rc;
}

static void message(int seed, size_t size, uint8_t **buf, size_t *len)
{
    uint8_t *p = pft_alloc(size);
    CHECK(p != NULL);
    for (size_t i = 0; i < size; i++)
        p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 12));
    CHECK(pft_envelope_pack(p, size, NULL, 0, buf, len) == 0);
    pft_free(p);
}

#define N_SENDERS 30

/* N_SENDERS senders of 1-3 MB each into one receiver whose callback takes 40 ms per message, first not
 * polled at all for 1.5 s (computing): every send is ACKed, each body travels once (retries 0, body bytes =
 * payload), grants stay bounded, and what repeats is offers. */
static void test_fan_in(void)
{
    sink_t sink = {.busy_ms = 40};
    pft_transport_t *r = pft_transport_new(ANY, NULL, on_message, &sink);
    CHECK(r != NULL);
    void *ctx = zmq_ctx_new();
    pft_transport_opts_t so;
    pft_transport_opts_default(&so);
    so.zmq_context = ctx;
    pft_transport_t *s[N_SENDERS];
    int h[N_SENDERS];
    uint64_t payload = 0;
    int64_t deadline = pft_transport_now_ms() + 120000;
    for (int i = 0; i < N_SENDERS; i++) {
        s[i] = pft_transport_new(ANY, &so, NULL, NULL);
        CHECK(s[i] && pft_transport_add_peer(s[i], "r", pft_transport_endpoint(r), NULL) == 0);
        uint8_t *msg;
        size_t len;
        message(100 + i, ((size_t)1 << 20) + (size_t)i * 70000, &msg, &len); /* 1.0 .. 3.0 MB */
        h[i] = pft_transport_send(s[i], "r", msg, len, NULL, deadline);
        CHECK(h[i] >= 0);
        payload += len;
        pft_free(msg);
    }
    int64_t t0 = pft_transport_now_ms();
    for (int done = 0; !done && pft_transport_now_ms() < deadline;) {
        done = 1;
        for (int i = 0; i < N_SENDERS; i++) {
            CHECK(pft_transport_poll(s[i], 0) == 0);
            done &= pft_transport_send_state(s[i], h[i], NULL, NULL) != PFT_SEND_PENDING;
        }
        if (pft_transport_now_ms() - t0 >= 1500) /* the receiver computes for 1.5 s first */
            CHECK(pft_transport_poll(r, 2) == 0);
        else
            sleep_ms(2);
    }
    uint64_t bytes = 0, retries = 0, bodies = 0, offers = 0, offer_bytes = 0;
    int acked = 0;
    for (int i = 0; i < N_SENDERS; i++) {
        pft_transport_stats_t ss;
        pft_transport_stats(s[i], &ss);
        bytes += ss.bytes_sent;
        retries += ss.retries;
        bodies += ss.transmissions;
        offers += ss.offers;
        offer_bytes += ss.offer_bytes;
        acked += pft_transport_send_state(s[i], h[i], NULL, NULL) == PFT_SEND_ACKED;
    }
    pft_transport_stats_t rs;
    pft_transport_stats(r, &rs);
    printf("  %d senders, %.1f MB payload in %.1f s: body bytes %.1f MB (%.3fx), %llu bodies, %llu retries, "
           "%llu offers (%llu bytes), receiver: %llu grants, %llu WAIT, max %d in flight, %llu duplicates, "
           "%llu ACK probes\n",
           N_SENDERS, payload / 1e6, (pft_transport_now_ms() - t0) / 1000.0, bytes / 1e6,
           (double)bytes / payload, (unsigned long long)bodies, (unsigned long long)retries,
           (unsigned long long)offers, (unsigned long long)offer_bytes, (unsigned long long)rs.grants,
           (unsigned long long)rs.busy_replies, rs.max_in_flight, (unsigned long long)rs.duplicates,
           (unsigned long long)rs.ack_probes);
    CHECK(acked == N_SENDERS && sink.calls == N_SENDERS && rs.accepted == N_SENDERS);
    CHECK_MSG(bytes <= payload + payload / 10, "%llu body bytes on the wire for %llu of payload",
              (unsigned long long)bytes, (unsigned long long)payload);
    CHECK(retries <= N_SENDERS && bodies <= 2 * N_SENDERS);
    CHECK(rs.max_in_flight >= 1 && rs.max_in_flight <= 4 * 2); /* 2 at a time, more only past idle ones */
    CHECK(rs.busy_replies >= 1 && offers >= N_SENDERS && offer_bytes == offers * (38 + 8));
    CHECK(rs.bytes_received == bytes && rs.duplicates == 0); /* an ACK probe is no duplicate */
    for (int i = 0; i < N_SENDERS; i++)
        pft_transport_destroy(&s[i]);
    zmq_ctx_term(ctx);
    pft_transport_destroy(&r);
}

/* A callback that recognises a message it stored before (e.g. in its own store after a restart) returns
 * PFT_TRANSPORT_DUPLICATE: ACKed and counted as a duplicate, not as accepted; a later offer of the same id is
 * answered from the transport's memory without a body. */
static void test_duplicate_by_callback(void)
{
    sink_t sink = {.rc = PFT_TRANSPORT_DUPLICATE};
    pft_transport_opts_t so;
    pft_transport_opts_default(&so);
    so.eager_bytes = 0; /* every body waits for its grant (so the second send shows the body is not sent) */
    pft_transport_t *r = pft_transport_new(ANY, NULL, on_message, &sink);
    pft_transport_t *s = pft_transport_new(ANY, &so, NULL, NULL);
    CHECK(r && s && pft_transport_add_peer(s, "r", pft_transport_endpoint(r), NULL) == 0);
    uint8_t *msg;
    size_t len;
    message(7, 5000, &msg, &len);
    for (int k = 0; k < 2; k++) {
        int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
        for (int64_t end = pft_transport_now_ms() + HANG_MS;
             pft_transport_now_ms() < end &&
             pft_transport_send_state(s, h, NULL, NULL) == PFT_SEND_PENDING;) {
            pft_transport_poll(r, 5);
            pft_transport_poll(s, 5);
        }
        CHECK(pft_transport_send_state(s, h, NULL, NULL) == PFT_SEND_ACKED);
    }
    pft_transport_stats_t rs, ss;
    pft_transport_stats(r, &rs);
    pft_transport_stats(s, &ss);
    CHECK_MSG(rs.duplicates == 2 && rs.accepted == 0 && rs.received == 2 && sink.calls == 1,
              "duplicates %llu accepted %llu received %llu calls %d", (unsigned long long)rs.duplicates,
              (unsigned long long)rs.accepted, (unsigned long long)rs.received, sink.calls);
    CHECK(ss.transmissions == 1 && ss.bytes_sent == len && ss.acked == 2); /* the second: no body */
    /* any other positive return is a callback bug: NACKed, not ACKed */
    sink.rc = 2;
    uint8_t *m2;
    size_t l2;
    message(8, 100, &m2, &l2);
    int h = pft_transport_send(s, "r", m2, l2, NULL, pft_transport_now_ms() + HANG_MS);
    for (int64_t end = pft_transport_now_ms() + HANG_MS;
         pft_transport_now_ms() < end && pft_transport_send_state(s, h, NULL, NULL) == PFT_SEND_PENDING;) {
        pft_transport_poll(r, 5);
        pft_transport_poll(s, 5);
    }
    int rc = 0;
    CHECK(pft_transport_send_state(s, h, &rc, NULL) == PFT_SEND_REJECTED && rc == PFT_EINVAL);
    pft_free(msg);
    pft_free(m2);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
}

/* Polls the transports t[0..n-1] (5 ms each) until done(ctx) holds or HANG_MS passed; returns done(ctx). */
static int poll_until(pft_transport_t *const *t, int n, int (*done)(void *), void *ctx)
{
    for (int64_t end = pft_transport_now_ms() + HANG_MS; !done(ctx) && pft_transport_now_ms() < end;)
        for (int i = 0; i < n; i++)
            CHECK(pft_transport_poll(t[i], 5) == 0);
    return done(ctx);
}

typedef struct {
    pft_transport_t *t; /* the receiver or the sender asked about */
    int h;              /* a send handle, for send conditions */
    uint64_t want;      /* at least this many */
} cond_t;

static int offered(void *c)
{
    return pft_transport_send_attempts(((cond_t *)c)->t, ((cond_t *)c)->h) >= (int)((cond_t *)c)->want;
}

static int granted(void *c)
{
    pft_transport_stats_t st;
    pft_transport_stats(((cond_t *)c)->t, &st);
    return st.grants >= ((cond_t *)c)->want;
}

static int told_busy(void *c)
{
    pft_transport_stats_t st;
    pft_transport_stats(((cond_t *)c)->t, &st);
    return st.busy_replies >= ((cond_t *)c)->want;
}

static int decided(void *c)
{
    return pft_transport_send_state(((cond_t *)c)->t, ((cond_t *)c)->h, NULL, NULL) != PFT_SEND_PENDING;
}

/* A sender whose send ended (cancelled) while its offer waited answers the grant with CANCEL: the receiver
 * frees the grant at once and grants the next sender, not when the grant expires (its timeout is far longer
 * than the test's bound against a hang, so only the CANCEL can free it). Every step waits for its condition.
 */
static void test_grant_withdrawn(void)
{
    sink_t sink = {0};
    pft_transport_opts_t ro;
    pft_transport_opts_default(&ro);
    ro.max_grants = 1;
    ro.grant_timeout_ms = 10 * HANG_MS;
    pft_transport_t *r = pft_transport_new(ANY, &ro, on_message, &sink);
    pft_transport_opts_t so;
    pft_transport_opts_default(&so);
    so.eager_bytes = 0; /* small bodies would go with their offer, without a grant */
    pft_transport_t *a = pft_transport_new(ANY, &so, NULL, NULL);
    pft_transport_t *b = pft_transport_new(ANY, &so, NULL, NULL);
    CHECK(r && a && b);
    CHECK(pft_transport_add_peer(a, "r", pft_transport_endpoint(r), NULL) == 0);
    CHECK(pft_transport_add_peer(b, "r", pft_transport_endpoint(r), NULL) == 0);
    uint8_t *ma, *mb;
    size_t la, lb;
    message(21, 1000, &ma, &la);
    message(22, 1000, &mb, &lb);
    int ha = pft_transport_send(a, "r", ma, la, NULL, pft_transport_now_ms() + 10 * HANG_MS);
    /* a's offer goes out; r grants it; a does not read the grant yet */
    CHECK(poll_until(&a, 1, offered, &(cond_t){.t = a, .h = ha, .want = 1}));
    CHECK(poll_until(&r, 1, granted, &(cond_t){.t = r, .want = 1}));
    int hb = pft_transport_send(b, "r", mb, lb, NULL, pft_transport_now_ms() + 10 * HANG_MS);
    pft_transport_t *br[2] = {b, r};
    CHECK(poll_until(br, 2, told_busy, &(cond_t){.t = r, .want = 1})); /* b's offer waits behind a's grant */
    pft_transport_stats_t rs;
    pft_transport_stats(r, &rs);
    CHECK(rs.grants == 1 && pft_transport_send_state(b, hb, NULL, NULL) == PFT_SEND_PENDING);
    CHECK(pft_transport_cancel(a, ha, "given up") == 0);
    pft_transport_t *arb[3] = {a, r, b};
    CHECK(poll_until(arb, 3, decided, &(cond_t){.t = b, .h = hb}));
    CHECK(pft_transport_send_state(b, hb, NULL, NULL) == PFT_SEND_ACKED);
    pft_transport_stats_t as;
    pft_transport_stats(a, &as);
    pft_transport_stats(r, &rs);
    CHECK(as.transmissions == 0 && rs.grants == 2 && rs.grants_expired == 0 && sink.calls == 1);
    CHECK_MSG(as.cancels_sent == 1, "a sent %llu CANCELs", (unsigned long long)as.cancels_sent);
    CHECK_MSG(rs.grants_cancelled == 1, "%llu grants cancelled", (unsigned long long)rs.grants_cancelled);
    pft_free(ma);
    pft_free(mb);
    pft_transport_destroy(&a);
    pft_transport_destroy(&b);
    pft_transport_destroy(&r);
}

/* A body of at most eager_bytes goes with its first offer, without a grant: one offer, one body, no SEND; a
 * larger one waits for its grant. */
static void test_eager_small_body(void)
{
    sink_t sink = {0};
    pft_transport_t *r = pft_transport_new(ANY, NULL, on_message, &sink);
    pft_transport_t *s = pft_transport_new(ANY, NULL, NULL, NULL);
    CHECK(r && s && pft_transport_add_peer(s, "r", pft_transport_endpoint(r), NULL) == 0);
    uint8_t *small, *big;
    size_t ls, lb;
    message(31, 400 << 10, &small, &ls);
    message(32, 600 << 10, &big, &lb);
    int hs = pft_transport_send(s, "r", small, ls, NULL, pft_transport_now_ms() + HANG_MS);
    int hb = pft_transport_send(s, "r", big, lb, NULL, pft_transport_now_ms() + HANG_MS);
    for (int64_t end = pft_transport_now_ms() + HANG_MS;
         pft_transport_now_ms() < end && pft_transport_pending(s);) {
        pft_transport_poll(r, 5);
        pft_transport_poll(s, 5);
    }
    CHECK(pft_transport_send_state(s, hs, NULL, NULL) == PFT_SEND_ACKED);
    CHECK(pft_transport_send_state(s, hb, NULL, NULL) == PFT_SEND_ACKED);
    pft_transport_stats_t ss, rs;
    pft_transport_stats(s, &ss);
    pft_transport_stats(r, &rs);
    CHECK_MSG(ss.transmissions == 2 && ss.bytes_sent == ls + lb && ss.grants_received == 1 && rs.grants == 1,
              "bodies %llu, grants %llu", (unsigned long long)ss.transmissions,
              (unsigned long long)rs.grants);
    CHECK(sink.calls == 2 && rs.accepted == 2 && rs.duplicates == 0);
    CHECK_MSG(ss.eager_sends == 1, "%llu eager bodies", (unsigned long long)ss.eager_sends);
    pft_free(small);
    pft_free(big);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
}

int main(void)
{
    RUN(test_fan_in);
    RUN(test_duplicate_by_callback);
    RUN(test_grant_withdrawn);
    RUN(test_eager_small_body);
    return pft_test_done();
}
