/* Tests of pft_transport with CURVE: allowed keys deliver, unknown keys and plain-text peers cannot, keys
 * allowed after start, wrong server keys, API misuse; a recording TCP relay shows what travels encrypted. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <zmq.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_keys.h"
#include "pft_test.h"
#include "pft_transport.h"

#define ANY "tcp://127.0.0.1:*"

/* A bound only against a hang, never a verdict: a send expected to succeed gets it as its deadline, and every
 * wait returns as soon as its condition holds, so the tests pass on a loaded machine (tests/README.md). */
#define HANG_MS 120000

/* A node's keys as the transport wants them. */
typedef struct {
    pft_keypair_t *kp;
    uint8_t pub[32], sec[32];
} keys_t;

static void keys_make(keys_t *k)
{
    k->kp = pft_keypair_generate();
    CHECK(k->kp && pft_keypair_curve(k->kp, k->pub, k->sec) == 0);
}

static void keys_free(keys_t *k)
{
    sodium_memzero(k->sec, sizeof k->sec);
    pft_keypair_destroy(&k->kp);
}

static pft_transport_t *curve_transport(const keys_t *k, pft_transport_on_message_fn fn, void *ctx)
{
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = k->pub;
    o.curve_secret_key = k->sec;
    pft_transport_t *t = pft_transport_new(ANY, &o, fn, ctx);
    CHECK_MSG(t != NULL, "%s", pft_errmsg());
    return t;
}

typedef struct {
    pft_transport_t *t; /* the receiving transport, to ask who sent */
    int calls;
    char sender[80];
} sink_t;

static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t reason_len)
{
    sink_t *s = ctx;
    s->calls++;
    const char *who = s->t ? pft_transport_sender(s->t) : NULL;
    snprintf(s->sender, sizeof s->sender, "%s", who ? who : "(none)");
    return 0;
}

static void message(int seed, size_t size, uint8_t **buf, size_t *len)
{
    uint8_t *p = pft_alloc(size);
    for (size_t i = 0; i < size; i++)
        p[i] = (uint8_t)(seed * 31 + i * 7);
    CHECK(pft_envelope_pack(p, size, NULL, 0, buf, len) == 0);
    pft_free(p);
}

/* ---- a recording TCP relay (client -> relay -> server), serviced from the pump loop ---- */

typedef struct {
    int lfd, cfd, sfd; /* listening, client side, server side */
    int server_port;
    int port;      /* where clients connect */
    uint8_t *seen; /* bytes client -> server */
    size_t n_seen, cap_seen;
} relay_t;

static int relay_open(relay_t *r, const char *server_endpoint)
{
    memset(r, 0, sizeof *r);
    r->cfd = r->sfd = -1;
    const char *colon = strrchr(server_endpoint, ':');
    r->server_port = atoi(colon + 1);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(r->lfd, 4) != 0 ||
        getsockname(r->lfd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    fcntl(r->lfd, F_SETFL, O_NONBLOCK);
    r->port = ntohs(a.sin_port);
    r->cap_seen = 1 << 20;
    r->seen = pft_alloc(r->cap_seen);
    return r->seen ? 0 : -1;
}

static void relay_close(relay_t *r)
{
    if (r->cfd >= 0)
        close(r->cfd);
    if (r->sfd >= 0)
        close(r->sfd);
    if (r->lfd >= 0)
        close(r->lfd);
    pft_free(r->seen);
}

/* Copies what is readable from `from` to `to` (blocking writes; small volumes). 0 on EOF/error. */
static int relay_copy(relay_t *r, int from, int to, int record)
{
    uint8_t buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && errno == EAGAIN;
    if (record) {
        size_t k = (size_t)n < r->cap_seen - r->n_seen ? (size_t)n : r->cap_seen - r->n_seen;
        memcpy(r->seen + r->n_seen, buf, k);
        r->n_seen += k;
    }
    for (ssize_t done = 0; done < n;) {
        ssize_t w = write(to, buf + done, (size_t)(n - done));
        if (w < 0 && errno == EAGAIN)
            continue;
        if (w <= 0)
            return 0;
        done += w;
    }
    return 1;
}

static void relay_step(relay_t *r)
{
    if (r->cfd < 0) {
        int c = accept(r->lfd, NULL, NULL);
        if (c < 0)
            return;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)r->server_port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
            close(c);
            close(s);
            return;
        }
        fcntl(c, F_SETFL, O_NONBLOCK);
        fcntl(s, F_SETFL, O_NONBLOCK);
        r->cfd = c;
        r->sfd = s;
    }
    struct pollfd p[2] = {{.fd = r->cfd, .events = POLLIN}, {.fd = r->sfd, .events = POLLIN}};
    if (poll(p, 2, 0) <= 0)
        return;
    int ok = 1;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
        ok &= relay_copy(r, r->cfd, r->sfd, 1);
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
        ok &= relay_copy(r, r->sfd, r->cfd, 0);
    if (!ok) { /* one side closed: drop both, the client reconnects */
        close(r->cfd);
        close(r->sfd);
        r->cfd = r->sfd = -1;
    }
}

/* Polls a and b (either may be NULL) and the relay until the send leaves "pending" or ms pass. */
static int pump(pft_transport_t *a, pft_transport_t *b, relay_t *relay, pft_transport_t *sender, int handle,
                int ms)
{
    int64_t end = pft_transport_now_ms() + ms;
    while (pft_transport_now_ms() < end) {
        if (a)
            CHECK(pft_transport_poll(a, 5) == 0);
        if (b)
            CHECK(pft_transport_poll(b, 5) == 0);
        if (relay)
            relay_step(relay);
        if (handle >= 0 && pft_transport_send_state(sender, handle, NULL, NULL) != PFT_SEND_PENDING)
            break;
    }
    return handle >= 0 ? pft_transport_send_state(sender, handle, NULL, NULL) : 0;
}

static int contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return 1;
    return 0;
}

/* ---- tests ---- */

/* An allowed client delivers and gets its ACK; the receiver learns the allowed name of the sender. */
static void test_allowed_client_delivers(void)
{
    keys_t rk, sk;
    keys_make(&rk);
    keys_make(&sk);
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *s = curve_transport(&sk, NULL, NULL);
    sink.t = r;
    CHECK(r && s && pft_transport_is_secure(r) && pft_transport_is_secure(s));
    CHECK(pft_transport_allow_key(r, sk.pub, "node-s") == 0);
    CHECK(pft_transport_allow_key(r, sk.pub, "again") == 0); /* twice: the first name stays */
    CHECK(pft_transport_add_peer(s, "r", pft_transport_endpoint(r), rk.pub) == 0);
    uint8_t *msg;
    size_t len;
    message(1, 2000, &msg, &len);
    for (int i = 0; i < 3; i++) {   /* three bundles over the one connection */
        msg[len - 10] = (uint8_t)i; /* a payload byte: a new id */
        int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
        CHECK(h >= 0);
        CHECK(pump(r, s, NULL, s, h, HANG_MS) == PFT_SEND_ACKED);
    }
    CHECK(sink.calls == 3);
    CHECK_MSG(strcmp(sink.sender, "node-s") == 0, "sender '%s'", sink.sender);
    pft_transport_stats_t rs, ss;
    pft_transport_stats(r, &rs);
    pft_transport_stats(s, &ss);
    CHECK(rs.accepted == 3 && ss.acked == 3);
    CHECK(rs.zap_allowed == 1 && rs.zap_denied == 0 && rs.handshakes_failed == 0);
    CHECK(ss.peer_handshake_failures == 0);
    CHECK(pft_transport_last_denial(r)[0] == '\0');
    pft_free(msg);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
    keys_free(&rk);
    keys_free(&sk);
}

/* A CONFIRM ends the receiver's wait only for the sender the message came from: m, another admitted peer,
 * offers the same bundle a sent (HAVE), reads its ACK and confirms it; the receiver still waits for a, which
 * has not read its ACK yet (a predecessor must not be able to make the receiver leave before another has read
 * its ACK), and stops waiting once a confirms. */
static void test_confirm_only_by_its_sender(void)
{
    keys_t rk, ak, mk;
    keys_make(&rk);
    keys_make(&ak);
    keys_make(&mk);
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *a = curve_transport(&ak, NULL, NULL);
    pft_transport_t *m = curve_transport(&mk, NULL, NULL);
    CHECK(r && a && m && pft_transport_allow_key(r, ak.pub, "a") == 0 &&
          pft_transport_allow_key(r, mk.pub, "m") == 0);
    CHECK(pft_transport_add_peer(a, "r", pft_transport_endpoint(r), rk.pub) == 0 &&
          pft_transport_add_peer(m, "r", pft_transport_endpoint(r), rk.pub) == 0);
    uint8_t *msg;
    size_t len;
    message(7, 500, &msg, &len);
    int ha = pft_transport_send(a, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
    for (int64_t end = pft_transport_now_ms() + HANG_MS; /* a transmits, then reads nothing */
         pft_transport_now_ms() < end && sink.calls < 1;) {
        CHECK(pft_transport_poll(r, 5) == 0);
        if (pft_transport_send_attempts(a, ha) < 1)
            CHECK(pft_transport_poll(a, 5) == 0);
    }
    CHECK(sink.calls == 1 && pft_transport_unconfirmed(r) == 1);
    int hm = pft_transport_send(m, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
    CHECK(pump(r, m, NULL, m, hm, HANG_MS) == PFT_SEND_ACKED); /* HAVE: stored before */
    pft_transport_stats_t rs;
    for (int64_t end = pft_transport_now_ms() + HANG_MS; pft_transport_now_ms() < end;) {
        pft_transport_stats(r, &rs);
        if (rs.confirms_received >= 1)
            break;
        CHECK(pft_transport_poll(r, 5) == 0);
        CHECK(pft_transport_poll(m, 0) == 0);
    }
    pft_transport_stats(r, &rs);
    CHECK(rs.confirms_received >= 1);
    CHECK_MSG(pft_transport_unconfirmed(r) == 1, "m's confirmation ended the wait for a's");
    CHECK(pump(r, a, NULL, a, ha, HANG_MS) == PFT_SEND_ACKED);
    for (int64_t end = pft_transport_now_ms() + HANG_MS;
         pft_transport_now_ms() < end && pft_transport_unconfirmed(r) > 0;) {
        CHECK(pft_transport_poll(r, 5) == 0);
        CHECK(pft_transport_poll(a, 0) == 0);
    }
    CHECK(pft_transport_unconfirmed(r) == 0 && sink.calls == 1);
    pft_free(msg);
    pft_transport_destroy(&m);
    pft_transport_destroy(&a);
    pft_transport_destroy(&r);
    keys_free(&mk);
    keys_free(&ak);
    keys_free(&rk);
}

/* A client whose key is not allowed never delivers: its send fails at the deadline with a clear reason,
 * the callback is never called, and the receiver counts the ZAP denial. */
static void test_unknown_key_refused(void)
{
    keys_t rk, ok, bad;
    keys_make(&rk);
    keys_make(&ok);
    keys_make(&bad);
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *u = curve_transport(&bad, NULL, NULL);
    sink.t = r;
    CHECK(pft_transport_allow_key(r, ok.pub, "ok") == 0);
    CHECK(pft_transport_add_peer(u, "r", pft_transport_endpoint(r), rk.pub) == 0);
    uint8_t *msg;
    size_t len;
    message(2, 500, &msg, &len);
    int64_t t0 = pft_transport_now_ms();
    int h = pft_transport_send(u, "r", msg, len, NULL, t0 + 1500);
    CHECK(pump(r, u, NULL, u, h, HANG_MS) == PFT_SEND_FAILED);
    CHECK(pft_transport_now_ms() - t0 >= 1500); /* at its deadline, not before */
    int rc = 0;
    const char *reason = NULL;
    pft_transport_send_state(u, h, &rc, &reason);
    CHECK(rc == PFT_ETIMEOUT);
    CHECK_MSG(reason && strstr(reason, "refused our key"), "reason '%s'", reason ? reason : "(null)");
    CHECK(sink.calls == 0);
    pft_transport_stats_t rs, us;
    pft_transport_stats(r, &rs);
    pft_transport_stats(u, &us);
    CHECK_MSG(rs.zap_denied >= 1 && rs.zap_allowed == 0, "denied %llu allowed %llu",
              (unsigned long long)rs.zap_denied, (unsigned long long)rs.zap_allowed);
    CHECK(rs.received == 0 && rs.bytes_received == 0);
    CHECK(us.peer_handshake_failures >= 1 && us.transmissions == 0 && us.failed == 1);
    char hex[17];
    sodium_bin2hex(hex, sizeof hex, bad.pub, 8);
    CHECK_MSG(strstr(pft_transport_last_denial(r), hex) &&
                  strstr(pft_transport_last_denial(r), "not allowed"),
              "last denial '%s'", pft_transport_last_denial(r));
    pft_free(msg);
    pft_transport_destroy(&u);
    pft_transport_destroy(&r);
    keys_free(&rk);
    keys_free(&ok);
    keys_free(&bad);
}

/* Plain text and CURVE cannot talk, in either direction; both sides say why. */
static void test_plain_and_curve_do_not_mix(void)
{
    keys_t rk, ck;
    keys_make(&rk);
    keys_make(&ck);
    uint8_t *msg;
    size_t len;
    message(3, 300, &msg, &len);

    /* a plain client of a CURVE server */
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *p = pft_transport_new(ANY, NULL, NULL, NULL);
    CHECK(pft_transport_add_peer(p, "r", pft_transport_endpoint(r), NULL) == 0);
    int h = pft_transport_send(p, "r", msg, len, NULL, pft_transport_now_ms() + 2000);
    CHECK(pump(r, p, NULL, p, h, HANG_MS) == PFT_SEND_FAILED);
    const char *reason = NULL;
    pft_transport_send_state(p, h, NULL, &reason);
    /* who sees the mismatch first is a race: the client either reads it or finds the connection closed */
    CHECK_MSG(reason && (strstr(reason, "one side uses CURVE, the other plain text") ||
                         strstr(reason, "a CURVE peer refuses plain-text clients")),
              "reason '%s'", reason ? reason : "(null)");
    pft_transport_stats_t rs;
    pft_transport_stats(r, &rs);
    CHECK(sink.calls == 0 && rs.received == 0);
    CHECK(rs.handshakes_failed >= 1);
    pft_transport_destroy(&p);
    pft_transport_destroy(&r);

    /* a CURVE client of a plain server */
    sink_t plain_sink = {0};
    pft_transport_t *ps = pft_transport_new(ANY, NULL, on_message, &plain_sink);
    pft_transport_t *c = curve_transport(&ck, NULL, NULL);
    CHECK(pft_transport_add_peer(c, "ps", pft_transport_endpoint(ps), rk.pub) == 0);
    h = pft_transport_send(c, "ps", msg, len, NULL, pft_transport_now_ms() + 2000);
    CHECK(pump(ps, c, NULL, c, h, HANG_MS) == PFT_SEND_FAILED);
    pft_transport_send_state(c, h, NULL, &reason);
    CHECK_MSG(reason && (strstr(reason, "plain text") || strstr(reason, "does the peer use CURVE too")),
              "reason '%s'", reason ? reason : "(null)");
    pft_transport_stats_t pss;
    pft_transport_stats(ps, &pss);
    CHECK(plain_sink.calls == 0 && pss.received == 0 && pss.handshakes_failed >= 1);
    pft_transport_destroy(&c);
    pft_transport_destroy(&ps);
    pft_free(msg);
    keys_free(&rk);
    keys_free(&ck);
}

/* A key allowed while the client is already retrying: the next handshake is admitted. */
static void test_allow_after_start(void)
{
    keys_t rk, sk;
    keys_make(&rk);
    keys_make(&sk);
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *s = curve_transport(&sk, NULL, NULL);
    sink.t = r;
    CHECK(pft_transport_add_peer(s, "r", pft_transport_endpoint(r), rk.pub) == 0);
    uint8_t *msg;
    size_t len;
    message(4, 400, &msg, &len);
    int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
    CHECK(pump(r, s, NULL, s, h, 800) == PFT_SEND_PENDING);
    pft_transport_stats_t rs;
    pft_transport_stats(r, &rs);
    CHECK(rs.zap_denied >= 1 && sink.calls == 0);
    CHECK(pft_transport_allow_key(r, sk.pub, "late") == 0);
    CHECK(pump(r, s, NULL, s, h, HANG_MS) == PFT_SEND_ACKED);
    CHECK(sink.calls == 1 && strcmp(sink.sender, "late") == 0);
    pft_transport_stats(r, &rs);
    CHECK(rs.zap_allowed == 1);
    pft_free(msg);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
    keys_free(&rk);
    keys_free(&sk);
}

/* A client that expects another server key (an impostor at the endpoint, or a wrong topology) never
 * completes the handshake and so never hands over its bundle. */
static void test_wrong_server_key(void)
{
    keys_t rk, sk, other;
    keys_make(&rk);
    keys_make(&sk);
    keys_make(&other);
    sink_t sink = {0};
    pft_transport_t *r = curve_transport(&rk, on_message, &sink);
    pft_transport_t *s = curve_transport(&sk, NULL, NULL);
    CHECK(pft_transport_allow_key(r, sk.pub, "s") == 0);
    CHECK(pft_transport_add_peer(s, "r", pft_transport_endpoint(r), other.pub) == 0);
    uint8_t *msg;
    size_t len;
    message(5, 300, &msg, &len);
    int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + 1200);
    CHECK(pump(r, s, NULL, s, h, HANG_MS) == PFT_SEND_FAILED);
    pft_transport_stats_t rs, ss;
    pft_transport_stats(r, &rs);
    pft_transport_stats(s, &ss);
    CHECK(sink.calls == 0 && rs.received == 0 && rs.zap_allowed == 0 && ss.transmissions == 0);
    CHECK_MSG(rs.handshakes_failed >= 1, "server counted %llu failed handshakes",
              (unsigned long long)rs.handshakes_failed);
    const char *reason = NULL;
    pft_transport_send_state(s, h, NULL, &reason);
    CHECK_MSG(reason && strstr(reason, "during the handshake") && strstr(reason, "server key"), "reason '%s'",
              reason ? reason : "(null)");
    pft_free(msg);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
    keys_free(&rk);
    keys_free(&sk);
    keys_free(&other);
}

/* Through a relay that records the bytes: plain text shows the bundle, CURVE does not. */
static void test_bytes_on_the_wire(void)
{
    uint8_t marker[64];
    for (size_t i = 0; i < sizeof marker; i++)
        marker[i] = (uint8_t)("PFTNET-SECRET-MARKER-"[i % 21]);
    uint8_t *msg;
    size_t len;
    CHECK(pft_envelope_pack(marker, sizeof marker, NULL, 0, &msg, &len) == 0);
    for (int secure = 0; secure < 2; secure++) {
        keys_t rk, sk;
        keys_make(&rk);
        keys_make(&sk);
        sink_t sink = {0};
        pft_transport_t *r = secure ? curve_transport(&rk, on_message, &sink)
                                    : pft_transport_new(ANY, NULL, on_message, &sink);
        pft_transport_t *s =
            secure ? curve_transport(&sk, NULL, NULL) : pft_transport_new(ANY, NULL, NULL, NULL);
        if (secure)
            CHECK(pft_transport_allow_key(r, sk.pub, "s") == 0);
        relay_t relay;
        CHECK(relay_open(&relay, pft_transport_endpoint(r)) == 0);
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", relay.port);
        CHECK(pft_transport_add_peer(s, "r", ep, secure ? rk.pub : NULL) == 0);
        int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
        CHECK(pump(r, s, &relay, s, h, HANG_MS) == PFT_SEND_ACKED);
        CHECK(sink.calls == 1);
        CHECK(relay.n_seen > len);
        int seen = contains(relay.seen, relay.n_seen, marker, 21);
        CHECK_MSG(seen == !secure, "%s: marker %s in %zu relayed bytes", secure ? "CURVE" : "plain",
                  seen ? "found" : "not found", relay.n_seen);
        pft_transport_destroy(&s);
        pft_transport_destroy(&r);
        relay_close(&relay);
        keys_free(&rk);
        keys_free(&sk);
    }
    pft_free(msg);
}

static void test_api(void)
{
    keys_t k, k2;
    keys_make(&k);
    keys_make(&k2);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = k.pub; /* one key only */
    CHECK(pft_transport_new(ANY, &o, NULL, NULL) == NULL);
    CHECK(strstr(pft_errmsg(), "both") != NULL);
    o.curve_secret_key = k2.sec; /* not a pair */
    CHECK(pft_transport_new(ANY, &o, NULL, NULL) == NULL);
    CHECK(strstr(pft_errmsg(), "does not belong") != NULL);

    pft_transport_t *c = curve_transport(&k, NULL, NULL);
    pft_transport_t *p = pft_transport_new(ANY, NULL, NULL, NULL);
    CHECK(!pft_transport_is_secure(p));
    CHECK(pft_transport_add_peer(c, "x", "tcp://127.0.0.1:1", NULL) == PFT_EUNSUPPORTED);
    CHECK(strstr(pft_errmsg(), "do not mix") != NULL);
    CHECK(pft_transport_add_peer(p, "x", "tcp://127.0.0.1:1", k2.pub) == PFT_EUNSUPPORTED);
    CHECK(pft_transport_allow_key(p, k2.pub, "x") == PFT_EUNSUPPORTED);
    CHECK(pft_transport_allow_key(c, k2.pub, "") == PFT_EINVAL);
    char longname[80];
    memset(longname, 'n', 65);
    longname[65] = '\0';
    CHECK(pft_transport_allow_key(c, k2.pub, longname) == PFT_EINVAL);
    CHECK(pft_transport_add_peer(c, "x", "tcp://127.0.0.1:1", k2.pub) == 0);
    CHECK(pft_transport_sender(c) == NULL);
    for (int i = 0; i < 40; i++) { /* grows the allow list */
        uint8_t key[32];
        memset(key, i, sizeof key);
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        CHECK(pft_transport_allow_key(c, key, name) == 0);
    }

    /* one CURVE transport per libzmq context: the ZAP endpoint is per context */
    void *ctx = zmq_ctx_new();
    pft_transport_opts_default(&o);
    o.zmq_context = ctx;
    o.curve_public_key = k.pub;
    o.curve_secret_key = k.sec;
    pft_transport_t *a = pft_transport_new(ANY, &o, NULL, NULL);
    CHECK(a != NULL);
    o.curve_public_key = k2.pub;
    o.curve_secret_key = k2.sec;
    CHECK(pft_transport_new(ANY, &o, NULL, NULL) == NULL);
    CHECK_MSG(strstr(pft_errmsg(), "one CURVE transport per context") != NULL, "%s", pft_errmsg());
    o.curve_public_key = o.curve_secret_key = NULL; /* a plain one beside it is fine */
    pft_transport_t *b = pft_transport_new(ANY, &o, NULL, NULL);
    CHECK(b != NULL);
    pft_transport_destroy(&b);
    pft_transport_destroy(&a);
    zmq_ctx_term(ctx);

    pft_transport_destroy(&c);
    pft_transport_destroy(&p);
    keys_free(&k);
    keys_free(&k2);
}

/* Two CURVE transports sharing one context cannot both be servers; but a server and its clients in
 * separate contexts of one process work both ways (each allows the other). */
static void test_both_directions(void)
{
    keys_t ak, bk;
    keys_make(&ak);
    keys_make(&bk);
    sink_t sa = {0}, sb = {0};
    pft_transport_t *a = curve_transport(&ak, on_message, &sa);
    pft_transport_t *b = curve_transport(&bk, on_message, &sb);
    sa.t = a;
    sb.t = b;
    CHECK(pft_transport_allow_key(a, bk.pub, "b") == 0 && pft_transport_allow_key(b, ak.pub, "a") == 0);
    CHECK(pft_transport_add_peer(a, "b", pft_transport_endpoint(b), bk.pub) == 0);
    CHECK(pft_transport_add_peer(b, "a", pft_transport_endpoint(a), ak.pub) == 0);
    uint8_t *m1, *m2;
    size_t l1, l2;
    message(6, 100, &m1, &l1);
    message(7, 100, &m2, &l2);
    int h1 = pft_transport_send(a, "b", m1, l1, NULL, pft_transport_now_ms() + HANG_MS);
    int h2 = pft_transport_send(b, "a", m2, l2, NULL, pft_transport_now_ms() + HANG_MS);
    CHECK(pump(a, b, NULL, a, h1, HANG_MS) == PFT_SEND_ACKED);
    CHECK(pump(a, b, NULL, b, h2, HANG_MS) == PFT_SEND_ACKED);
    CHECK(sa.calls == 1 && sb.calls == 1 && strcmp(sa.sender, "b") == 0 && strcmp(sb.sender, "a") == 0);
    pft_free(m1);
    pft_free(m2);
    pft_transport_destroy(&a);
    pft_transport_destroy(&b);
    keys_free(&ak);
    keys_free(&bk);
}

/* A message of exactly max_msg_size bytes passes under CURVE too (its frames are larger on the wire). */
static void test_size_limit(void)
{
    keys_t rk, sk;
    keys_make(&rk);
    keys_make(&sk);
    uint8_t *msg;
    size_t len;
    message(8, 100000, &msg, &len);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.max_msg_size = (int64_t)len;
    o.curve_public_key = rk.pub;
    o.curve_secret_key = rk.sec;
    sink_t sink = {0};
    pft_transport_t *r = pft_transport_new(ANY, &o, on_message, &sink);
    o.curve_public_key = sk.pub;
    o.curve_secret_key = sk.sec;
    pft_transport_t *s = pft_transport_new(ANY, &o, NULL, NULL);
    CHECK(r && s && pft_transport_allow_key(r, sk.pub, "s") == 0);
    CHECK(pft_transport_add_peer(s, "r", pft_transport_endpoint(r), rk.pub) == 0);
    CHECK(pft_transport_send(s, "r", msg, len + 1, NULL, 0) == PFT_ERANGE);
    int h = pft_transport_send(s, "r", msg, len, NULL, pft_transport_now_ms() + HANG_MS);
    CHECK(pump(r, s, NULL, s, h, HANG_MS) == PFT_SEND_ACKED);
    CHECK(sink.calls == 1);
    pft_free(msg);
    pft_transport_destroy(&s);
    pft_transport_destroy(&r);
    keys_free(&rk);
    keys_free(&sk);
}

int main(void)
{
    if (!zmq_has("curve")) {
        printf("libzmq without CURVE: skipped\n");
        return PFT_TEST_SKIP;
    }
    RUN(test_allowed_client_delivers);
    RUN(test_confirm_only_by_its_sender);
    RUN(test_unknown_key_refused);
    RUN(test_plain_and_curve_do_not_mix);
    RUN(test_allow_after_start);
    RUN(test_wrong_server_key);
    RUN(test_bytes_on_the_wire);
    RUN(test_api);
    RUN(test_both_directions);
    RUN(test_size_limit);
    return pft_test_done();
}
