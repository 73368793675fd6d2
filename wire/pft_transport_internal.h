/* pft_transport internals shared by pft_transport*.c only: constants, structs, cross-file helpers. */
#ifndef PFT_TRANSPORT_INTERNAL_H
#define PFT_TRANSPORT_INTERNAL_H

/* INTERNAL: not part of the public API (that is pft_transport.h). Include only from wire/pft_transport*.c.
 * Cross-file functions are named pft_transport__*; everything else stays static in its file.
 * Files, from the bottom up (a file calls only files above it in this list, never one below, so no two files
 * call each other):
 *   pft_transport_base.c   the clock, zmq errors, socket options, text copies, refusal reports, poll arrays
 *   pft_transport_frame.c  framing: the header, whole multipart messages, a message's id; the ROUTER's
 *                          replies (ACK, NACK) and the ids accepted
 *   pft_transport_flow.c   flow control, receiver side: offers, grants, the waiting queue
 *   pft_transport_zap.c    connections: CURVE (ZAP handler, allowed keys) and handshake monitors
 *   pft_transport_send.c   the send state machine: outbound peers, offers and bodies, retries, replies
 *   pft_transport_recv.c   the receive state machine: the inbound ROUTER's messages dispatched
 *   pft_transport.c        the façade: the object, its options, the poll loop, accessors
 * tests/e2e_layers.sh checks this order on the object files' symbols. */

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "pft_bundle.h"
#include "pft_transport.h"

#define HDR_MAGIC "PFTM"
#define HDR_VERSION 2 /* 1: bodies pushed unasked (before flow control); 2: offer, grant, then the body */
#define HDR_LEN (4 + 1 + 1 + PFT_TRANSPORT_ID_LEN)
#define T_OFFER 'O'   /* sender -> receiver: [header, body size (8 bytes, big endian)] */
#define T_BUNDLE 'B'  /* sender -> receiver: [header, body] (normally after a SEND) */
#define T_EAGER 'E'   /* sender -> receiver: [header, body size]; the body follows at once (a small one) */
#define T_PROBE 'P'   /* sender -> receiver: an offer after the body went (only asks for the ACK) */
#define T_CANCEL 'C'  /* sender -> receiver: [header]: a grant for a send that is no longer pending */
#define T_ACK 'A'     /* receiver -> sender: [header]: stored (a reply to a body, or to an offer: HAVE) */
#define T_NACK 'N'    /* receiver -> sender: [header, code (int32 big endian) + reason] */
#define T_SEND 'S'    /* receiver -> sender: [header]: a grant, send the body now */
#define T_WAIT 'W'    /* receiver -> sender: [header, retry after (uint32 ms, big endian)]: busy, queued */
#define T_CONFIRM 'K' /* sender -> receiver: [header]: the ACK of id was read (the receiver may leave) */
#define OFFER_LEN 8
#define WAIT_LEN 4
#define MAX_IDENT 255           /* bytes of a ROUTER routing id (libzmq's limit) */
#define MAX_WAITING 4096        /* offers queued for a grant; beyond that WAIT without a place in the queue */
#define SVC_MS_INITIAL 500      /* assumed time per granted body before one was measured */
#define GRANT_IDLE_MS 1000      /* a grant whose body has not come after this long lets the next one in */
#define GRANT_OVERCOMMIT 4      /* ... but grants stay at most this many times opts.max_grants */
#define MAX_REPLY 4096          /* outbound sockets never read more than this from a peer */
#define MAX_LATER_CONFIRMS 16   /* CONFIRMs per peer kept until a connection is up (pft_transport_confirm) */
#define MAX_AWAITING 256        /* ACKs whose reading the receiver awaits; the oldest forgotten beyond */
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
    int up; /* a handshake succeeded and its connection has not closed since (the DEALER's monitor): offers
               go out only then (the DEALER is not ZMQ_IMMEDIATE, so that a reply survives its connection) */
    uint8_t later[MAX_LATER_CONFIRMS]
                 [PFT_TRANSPORT_ID_LEN]; /* CONFIRMs asked for while no connection was up */
    int n_later;
} peer_t;

/* An ACK the receiver sent whose reading the sender has not confirmed yet (T_CONFIRM). */
typedef struct {
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    char user[PFT_BUNDLE_MAX_NAME + 1]; /* the sender's CURVE name ("" in plain text): only it confirms */
} awaiting_t;

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
    int attempts;      /* transmissions of any kind (offers and bodies) */
    int offers;        /* offers transmitted */
    int bodies;        /* body transmissions */
    int body_sent;     /* the body went after the last grant; offers since only ask for the ACK */
    int grant_pending; /* granted, but libzmq did not take the body yet: the timer tries it again */
    pft_send_state_t state;
    int rc;
    char reason[PFT_TRANSPORT_MAX_REASON + 1];
} send_t;

/* Receiver side of flow control (pft_transport_flow.c): an inbound offer granted or waiting for a grant. */
typedef struct {
    uint8_t ident[MAX_IDENT]; /* the sender connection's ROUTER routing id */
    size_t ident_len;
    uint8_t id[PFT_TRANSPORT_ID_LEN];
    uint64_t size;   /* body bytes the offer declared */
    int64_t since;   /* granted (grants) or queued (waiting), pft_transport_now_ms() */
    int64_t expires; /* grants: when the grant is freed if its body has not come */
    int fd;          /* the connection's socket (libzmq's "__fd" message property), -1 if unknown */
} offer_t;

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
    offer_t *grants; /* bodies granted and not arrived yet, at most opts.max_grants */
    int n_grants;
    uint64_t granted_bytes;
    offer_t *waiting; /* offers queued for a grant, oldest first (ring of MAX_WAITING) */
    int n_waiting, waiting_head;
    int64_t served_ms; /* pft_transport_now_ms() at the end of the last poll (0: none yet) */
    double svc_ms;     /* moving average of a grant's time to its body's end (for WAIT hints) */
    uint8_t (*accepted)[PFT_TRANSPORT_ID_LEN]; /* ring of accepted ids */
    int n_accepted, accepted_next;
    awaiting_t awaiting[MAX_AWAITING]; /* accepted ids whose ACK no sender confirmed yet, oldest first */
    int n_awaiting;
    pft_transport_stats_t stats;
};

/* ---- pft_transport_base.c: the clock, zmq errors, socket options, text, refusals, poll arrays ---- */

/* Sets the error message "transport: what: <zmq error>" and returns code. */
int pft_transport__zerr(int code, const char *what);
/* Sets an int socket option; 0, or PFT_ENET with the message set. */
int pft_transport__setopt_int(void *sock, int opt, int v, const char *what);
/* Copies text into dst[cap], truncating. */
void pft_transport__copy_text(char *dst, size_t cap, const char *src);
/* Tells opts.on_refusal (if set) of a refusal; the reason is a printf format. */
void pft_transport__refused(pft_transport_t *self, pft_transport_refusal_t kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Grows the poll arrays to hold the router, ZAP, router monitor and two items per peer for cap peers. */
int pft_transport__grow_items(pft_transport_t *self, int cap);

/* ---- pft_transport_frame.c: framing, a message's id, the ROUTER's replies, the ids accepted ---- */

/* Writes the HDR_LEN-byte message header (version HDR_VERSION). */
void pft_transport__make_header(uint8_t hdr[HDR_LEN], char type, const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* Returns the type of a valid header (id filled in), or 0. *version (may be NULL) gets the version byte of
 * a header that has the right length and magic (0 otherwise): a header of another version returns 0. */
char pft_transport__parse_header(const zmq_msg_t *m, uint8_t id[PFT_TRANSPORT_ID_LEN], int *version);
/* Reads one whole multipart message from sock into parts[0..max) (extra parts are read and dropped);
 * returns the number of parts (> max: malformed), 0 if nothing was waiting, -1 on error. */
int pft_transport__recv_parts(void *sock, zmq_msg_t *parts, int max);
/* Closes the parts recv_parts kept (n as it returned). */
void pft_transport__close_parts(zmq_msg_t *parts, int n, int max);
/* The message id of buf (opts.id_fn, or the bundle's own id); 0 or a negative error code. */
int pft_transport__id_of(const pft_transport_t *self, const uint8_t *buf, size_t len,
                         uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* 1 if id was accepted (stored by the callback) before. */
int pft_transport__is_accepted(const pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* Adds id to the ring of accepted ids (the oldest forgotten past opts.max_remembered). */
void pft_transport__remember(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* Sends [ident, header(version, type, id), extra (if extra_len > 0)] on the ROUTER without blocking; 0, or -1
 * (the peer is gone: EHOSTUNREACH under ZMQ_ROUTER_MANDATORY, or its queue is full). An ACK sets last_ack_ms.
 */
int pft_transport__reply(pft_transport_t *self, const uint8_t *ident, size_t ident_len, int version,
                         char type, const uint8_t id[PFT_TRANSPORT_ID_LEN], const void *extra,
                         size_t extra_len);
/* id was accepted from the sender named user (CURVE; NULL or "": plain text): its ACK awaits confirmation. */
void pft_transport__await_confirm(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN],
                                  const char *user);
/* A confirmation of id's ACK from user: ends the wait for it if user is the one it was accepted from. */
void pft_transport__confirmed(pft_transport_t *self, const uint8_t id[PFT_TRANSPORT_ID_LEN],
                              const char *user);
/* A NACK with code and reason (truncated to PFT_TRANSPORT_MAX_REASON bytes), in the given header version. */
void pft_transport__nack(pft_transport_t *self, const uint8_t *ident, size_t ident_len, int version,
                         const uint8_t id[PFT_TRANSPORT_ID_LEN], int code, const char *reason);
/* An ACK to a message or offer whose id was accepted before (counted in received and duplicates). */
void pft_transport__reack(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                          const uint8_t id[PFT_TRANSPORT_ID_LEN]);

/* ---- pft_transport_flow.c: receiver-side flow control (offers, grants, the waiting queue) ---- */

/* Allocates the grant table and the waiting queue; 0 or PFT_ENOMEM (message set). */
int pft_transport__flow_init(pft_transport_t *self);
/* Frees them. */
void pft_transport__flow_free(pft_transport_t *self);
/* Answers an inbound offer (probe: a PROBE, sent after the body, whose ACK is not counted as a duplicate) of
 * size bytes from the connection ident: ACK (already stored), NACK (too large, no callback), SEND (granted
 * now) or WAIT (queued, or its body is on its way). */
void pft_transport__flow_offer(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                               const uint8_t id[PFT_TRANSPORT_ID_LEN], uint64_t size, int fd, int probe);
/* An eager offer (its body follows at once): only a size over max_msg_size is answered (NACK "too large");
 * the body, when it comes, is handled like any (ACK, NACK, duplicate). */
void pft_transport__flow_eager(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                               const uint8_t id[PFT_TRANSPORT_ID_LEN], uint64_t size);
/* An inbound connection (socket fd) closed: frees the grants made on it (their bodies will not come: the
 * sender stopped, or libzmq dropped a body over its ZMQ_MAXMSGSIZE with the connection), counted and
 * reported. */
void pft_transport__flow_disconnected(pft_transport_t *self, int fd);
/* A body from ident arrived: ends its grant, if any. Returns the size its offer declared (0: not granted). */
uint64_t pft_transport__flow_body(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                                  const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* The sender withdrew (its send is no longer pending): drops its grant and its place in the queue. */
void pft_transport__flow_cancel(pft_transport_t *self, const uint8_t *ident, size_t ident_len,
                                const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* Grants the queue's head offers while the limits allow (after a body or a cancel freed a grant). */
void pft_transport__flow_pump(pft_transport_t *self);
/* Frees expired grants (a granted body that never came) and grants the next offers. */
void pft_transport__flow_expire(pft_transport_t *self, int64_t now);
/* Milliseconds until the next grant expires, or -1 if none. */
int64_t pft_transport__flow_next_timer(const pft_transport_t *self, int64_t now);

/* ---- pft_transport_zap.c: CURVE (ZAP handler, allowed keys) and handshake monitors ---- */

/* CURVE: binds the ZAP handler (before the ROUTER exists: with no handler bound, libzmq admits every
 * CURVE client) and makes the ROUTER a CURVE server. 0 or a negative error code (message set). */
int pft_transport__setup_curve_server(pft_transport_t *self);
/* Answers every waiting ZAP request. */
void pft_transport__handle_zap(pft_transport_t *self);
/* Starts delivering sock's events in mask to a new PAIR socket and returns it, or NULL (message set). */
void *pft_transport__monitor_new(pft_transport_t *self, void *sock, int mask);
/* Stops monitoring sock and closes *mon_p (in this order: a monitor must never send to a closed PAIR). */
void pft_transport__monitor_close(void *sock, void **mon_p);
/* Reads every waiting event of a monitor. peer: the peer the monitored DEALER belongs to, or NULL for the
 * ROUTER. */
void pft_transport__handle_monitor(pft_transport_t *self, void *mon, peer_t *peer);

/* ---- pft_transport_send.c: the send state machine (outbound peers, retries/backoff, deadlines, replies)
 * ---- */

/* Due transmissions, expiries and reconnections. */
void pft_transport__run_timers(pft_transport_t *self);
/* Milliseconds until the next timer (transmission, deadline, reconnection), or -1 if none. */
int64_t pft_transport__next_timer(const pft_transport_t *self);
/* Reads every waiting reply (ACK, NACK, SEND, WAIT) on peer pi's DEALER. */
void pft_transport__handle_replies(pft_transport_t *self, int pi);

/* ---- pft_transport_recv.c: the receive state machine (the inbound ROUTER) ---- */

/* Handles every waiting inbound message on the ROUTER (up to MAX_PER_POLL). Returns 1 if it read them all,
 * 0 if some may still be waiting. */
int pft_transport__handle_inbound(pft_transport_t *self);

#endif
