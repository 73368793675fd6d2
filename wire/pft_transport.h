/* pft_transport: ZeroMQ hand-off of bundles with acknowledgement, retry with backoff, duplicate dropping. */
#ifndef PFT_TRANSPORT_H
#define PFT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

/* One object per node, single-threaded: the node calls pft_transport_poll() in its loop; no threads of
 * our own (libzmq runs its I/O thread). One inbound ROUTER socket bound at the node's endpoint; one
 * outbound DEALER per peer, connected at once (peers may start in any order; libzmq reconnects), or once its
 * endpoint is known (pft_transport_set_peer_endpoint: a peer that binds a port of its own and reports it).
 *
 * A hand-off (protocol version 2, flow-controlled): the sender offers [header("PFTM", 2, 'O', id), body
 * size]; the receiver answers at once from its poll loop: ACK (that id is stored already: no body),
 * NACK(code, reason) (too large, no callback), SEND (a grant: at most opts.max_grants bodies,
 * opts.grant_bytes bytes, are granted at a time) or WAIT(retry after ms) (busy: the offer is queued, and SEND
 * is pushed when a grant frees). On SEND the body goes, once: [header 'B', body]; the receiver checks that
 * the id matches the body (id function), hands it to the callback and replies ACK (stored) or NACK(code,
 * reason). Until then the sender repeats only its offer (a few dozen bytes) with backoff, or when WAIT said;
 * a receiver that is computing and not polling answers nothing, so senders' retries cost offers, not bodies.
 * A body of at most opts.eager_bytes goes with its first offer, without waiting for a grant. The sender
 * confirms every ACK it reads ([header 'K'], after on_ack), so that a receiver knows when it may leave
 * (pft_transport_unconfirmed); an ACK that reached the sender is read even after its connection closed.
 * docs/WIRE.md describes the frames. */

#define PFT_TRANSPORT_ID_LEN 32
#define PFT_TRANSPORT_MAX_REASON 255 /* bytes of a NACK reason, at most */

/* Computes the 32-byte id of a message body; 0 or a negative pft_err_t (message set). */
typedef int (*pft_transport_id_fn)(const uint8_t *buf, size_t len, uint8_t id[PFT_TRANSPORT_ID_LEN]);

/* What an on_message callback returns when it recognises the message as one it has stored before (e.g. in its
 * own store after a restart, which the transport's memory of ids does not reach): ACKed, the id remembered,
 * counted in stats.duplicates (not in accepted). */
#define PFT_TRANSPORT_DUPLICATE 1

/* Inbound callback: returns 0 when the message was accepted and stored (the transport then ACKs and
 * remembers the id), PFT_TRANSPORT_DUPLICATE when it was stored before (ACKed the same way, counted as a
 * duplicate), or a negative pft_err_t with a reason written to reason[reason_len] (NUL-terminated;
 * left empty, pft_strerror(code) is sent). PFT_ENOMEM, PFT_EIO, PFT_EINTR and PFT_ETIMEOUT are
 * transient: the sender keeps retrying; any other code rejects the message for good. The buffer is
 * valid only during the call. Another positive value is a bug: the message is NACKed (PFT_EINVAL). */
typedef int (*pft_transport_on_message_fn)(void *ctx, const uint8_t *buf, size_t len, char *reason,
                                           size_t reason_len);

/* What an inbound refusal the transport makes on its own (the callback's refusals are the caller's) was. */
typedef enum {
    PFT_REFUSAL_MALFORMED = 0, /* an inbound message that is not [header 'B', body]: dropped, no reply */
    PFT_REFUSAL_NACK = 1,      /* a bundle message or offer NACKed before the callback: its id unreadable or
                                  not matching the header, offered too large, or no callback */
    PFT_REFUSAL_HANDSHAKE = 2, /* an inbound connection refused: CURVE key not allowed (ZAP), a plain-text
                                  client of a CURVE server (or the reverse), a CURVE crypto error, a
                                  malformed ZAP request, a client that hung up mid-handshake (beyond the
                                  causes reported with it) */
    PFT_REFUSAL_DROPPED = 3,   /* a granted body that never came: its connection closed first (the sender
                                  stopped, or sent more than max_msg_size + CURVE's allowance, which libzmq
                                  drops with the connection) or the grant expired */
    PFT_REFUSAL_VERSION = 4,   /* a message of another protocol version (another pftnet build): NACKed in
                                  its own version's framing, PFT_EUNSUPPORTED, counted in malformed */
} pft_transport_refusal_t;

/* Refusal callback: kind and a printable, NUL-terminated reason (borrowed for the call). Called from inside
 * pft_transport_poll, once per refusal; it must not call back into the transport. */
typedef void (*pft_transport_on_refusal_fn)(void *ctx, pft_transport_refusal_t kind, const char *reason);

/* Acknowledgement callback: send handle was just acknowledged (its state is PFT_SEND_ACKED), so that the
 * caller can record it durably at once, before anything else runs. Called from inside pft_transport_poll,
 * once per acknowledged send; it must not call back into the transport. */
typedef void (*pft_transport_on_ack_fn)(void *ctx, int handle);

/* Options; pft_transport_opts_default() gives the values in brackets. */
typedef struct {
    int64_t max_msg_size;      /* largest message body, bytes [256 MiB]: the inbound socket's ZMQ_MAXMSGSIZE
                                  (plus CURVE's framing), so a peer sending more is disconnected by libzmq
                                  before the body is allocated and never reaches us; also the envelope
                                  limit of the default id function and the most pft_transport_send takes */
    int rcvhwm;                /* inbound high-water mark, messages per peer connection [64] */
    int sndhwm;                /* outbound high-water mark per peer [8] */
    int linger_ms;             /* how long destroy() waits to flush ACKs already queued [1000] */
    int retry_initial_ms;      /* first retransmission delay [200]; grows by size: + len / 50 kB per ms */
    int retry_max_ms;          /* cap of the doubling delay [5000] (at least the size-based first delay) */
    int reconnect_ivl_ms;      /* ZMQ_RECONNECT_IVL of outbound sockets [100] */
    int max_remembered;        /* accepted ids remembered for duplicate detection, oldest forgotten [4096] */
    pft_transport_id_fn id_fn; /* id of a body; NULL: the bundle id (BLAKE2b-256 of the payload inside the
                                  envelope, as pft_bundle_message_id, the envelope limited to max_msg_size) */
    void *zmq_context;         /* borrowed libzmq context (e.g. to share inproc://); NULL: one of our own */
    int listen_fd;             /* a TCP socket already bound to endpoint's address and listening, which the
                                  inbound socket takes over (ZMQ_USE_FD) instead of binding, e.g. one handed
                                  over by a launcher that holds the port until the node has it; -1: bind [-1] */
    /* CURVE security: this node's X25519 keypair, 32 bytes each (copied; pft_keypair_curve() derives it
     * from the node's Ed25519 key). Both NULL: plain text. Both set: the ROUTER is a CURVE server whose
     * ZAP handler (serviced inside pft_transport_poll, no thread) admits only client keys given to
     * pft_transport_allow_key(); every DEALER is a CURVE client with this keypair. Plain text and CURVE
     * do not mix: a plain peer cannot talk to a CURVE transport and vice versa. One CURVE transport per
     * libzmq context (the ZAP endpoint "inproc://zeromq.zap.01" is per context). */
    const uint8_t *curve_public_key;
    const uint8_t *curve_secret_key;
    pft_transport_on_refusal_fn on_refusal; /* told of every refusal the transport makes itself [NULL] */
    void *on_refusal_ctx;                   /* its ctx [NULL] */
    pft_transport_on_ack_fn on_ack;         /* told of every acknowledged send as its ACK is read [NULL] */
    void *on_ack_ctx;                       /* its ctx [NULL] */
    /* Flow control (receiver side): bodies granted at a time [2], and their total bytes [64 MiB] (one body
     * is always granted, whatever its size). A grant whose body has not come within 1 s (its sender busy,
     * not polling) stops counting against max_grants, so a slow sender does not stall the others; grants
     * never exceed 4 * max_grants nor grant_bytes. A granted body that has not come after grant_timeout_ms
     * plus 1 ms per 50 kB of it frees its grant [10000]. */
    int max_grants; /* 1..1024 */
    int64_t grant_bytes;
    int grant_timeout_ms;
    /* Sender side: a body of at most eager_bytes goes with its first offer, without waiting for a grant (a
     * round trip to a receiver that may answer late costs more than the body) [512 KiB; 0: always wait] */
    int64_t eager_bytes;
} pft_transport_opts_t;

void pft_transport_opts_default(pft_transport_opts_t *opts);

typedef struct pft_transport_t pft_transport_t;

/* Binds the inbound socket at endpoint (e.g. "tcp://127.0.0.1:5555", "tcp://127.0.0.1:*" for a free port;
 * pft_transport_endpoint() then tells which). on_message may be NULL for a send-only node (inbound
 * messages are then NACKed). opts NULL: defaults. NULL on failure (pft_errmsg() says why: bad option,
 * only one CURVE key or a public key that does not match the secret one, bind failed (address in use),
 * a ZAP handler already bound in the shared context, out of memory). */
pft_transport_t *pft_transport_new(const char *endpoint, const pft_transport_opts_t *opts,
                                   pft_transport_on_message_fn on_message, void *ctx);
/* Closes the sockets (waiting at most linger_ms for queued ACKs), frees, sets *self_p NULL; safe twice.
 * Pending sends are abandoned. */
void pft_transport_destroy(pft_transport_t **self_p);

/* The bound endpoint as libzmq reports it (ZMQ_LAST_ENDPOINT), e.g. "tcp://127.0.0.1:41234". */
const char *pft_transport_endpoint(const pft_transport_t *self);

/* Connects an outbound socket to a peer named name (1..64 bytes, unique); endpoint NULL: not known yet, the
 * peer is unreachable (its sends stay pending) until pft_transport_set_peer_endpoint gives one.
 * server_public_key: the peer's X25519 CURVE public key (32 bytes), required on a CURVE transport, NULL on a
 * plain one (mixing: PFT_EUNSUPPORTED). The peer need not be up yet. PFT_EINVAL (bad/duplicate name, bad
 * endpoint), PFT_EUNSUPPORTED, PFT_ENET, PFT_ENOMEM. */
int pft_transport_add_peer(pft_transport_t *self, const char *name, const char *endpoint,
                           const uint8_t *server_public_key);
/* Points peer name at endpoint: connects to it and drops the connection to the one before, if it differs (a
 * peer that bound a port of its own and reported it, or was restarted on another). Pending sends go on to the
 * new endpoint. 0, PFT_EINVAL (unknown peer, empty or bad endpoint), PFT_ENET, PFT_ENOMEM. */
int pft_transport_set_peer_endpoint(pft_transport_t *self, const char *name, const char *endpoint);

/* CURVE: admits clients presenting the X25519 public key `key` (32 bytes; pft_pubkey_curve() of a peer's
 * Ed25519 key) under name (1..64 bytes, used in logs and as the ZAP user id; see
 * pft_transport_sender()). May be called at any time; it applies to handshakes from then on (a
 * connection already admitted stays). Adding a key twice keeps the first name. PFT_EUNSUPPORTED on a
 * plain transport, PFT_EINVAL (bad name), PFT_ENOMEM. */
int pft_transport_allow_key(pft_transport_t *self, const uint8_t key[32], const char *name);
/* 1 if the transport uses CURVE. */
int pft_transport_is_secure(const pft_transport_t *self);
/* During an on_message callback: the name under which the sender's key was allowed (CURVE), else NULL
 * (plain text, or outside a callback). */
const char *pft_transport_sender(const pft_transport_t *self);
/* The last refused CURVE handshake, e.g. "key 3f1c…(16 hex) from 127.0.0.1 not allowed", "" if none. */
const char *pft_transport_last_denial(const pft_transport_t *self);

/* Milliseconds of a monotonic clock, the time base of deadlines. */
int64_t pft_transport_now_ms(void);

/* Queues bytes (copied) for peer; poll() transmits them. id: the id the receiver will compute with its id
 * function (NULL: computed here with ours). deadline_ms: absolute pft_transport_now_ms() time after which
 * an unacknowledged send fails with PFT_ETIMEOUT; 0 = no deadline. Time the caller spends away from the
 * transport (over 1 s between two polls: computing without yielding, stopped) moves the deadline on by as
 * much, so that a send is offered again after such a gap before it can fail. Returns a send handle ≥ 0, or
 * PFT_EINVAL (unknown peer, empty message), PFT_ERANGE (larger than max_msg_size), PFT_ENOMEM, or the id
 * function's error. */
int pft_transport_send(pft_transport_t *self, const char *peer, const uint8_t *bytes, size_t len,
                       const uint8_t id[PFT_TRANSPORT_ID_LEN], int64_t deadline_ms);

/* Services everything once: due (re)transmissions and expiries, then waits up to timeout_ms (< 0: until
 * something happens or a retransmission is due) for inbound bundles and replies and handles all that
 * arrived. 0, or PFT_EINTR (a signal interrupted the wait), PFT_ENET. */
int pft_transport_poll(pft_transport_t *self, int timeout_ms);

typedef enum {
    PFT_SEND_PENDING = 0,  /* not acknowledged yet; being (re)transmitted */
    PFT_SEND_ACKED = 1,    /* the receiver validated and stored it */
    PFT_SEND_REJECTED = 2, /* the receiver refused it (NACK); not retried */
    PFT_SEND_FAILED = 3,   /* deadline passed without acknowledgement (PFT_ETIMEOUT) */
} pft_send_state_t;

/* "pending", "acked", "rejected", "failed". */
const char *pft_send_state_name(pft_send_state_t state);

/* State of a send; rc (may be NULL) gets 0, the receiver's code (rejected) or PFT_ETIMEOUT (failed);
 * reason (may be NULL) a borrowed message ("" when none; for pending, the last transient NACK if any;
 * for failed, also the last handshake failure with that peer, e.g. our key refused, or plain text
 * talking to CURVE).
 * PFT_EINVAL for an unknown handle (returned as the state's int value is never negative). */
int pft_transport_send_state(const pft_transport_t *self, int handle, int *rc, const char **reason);
/* Transmissions of a send so far, offers and bodies (0: no connection to its peer was ever up while it was
 * pending), or PFT_EINVAL for an unknown handle. */
int pft_transport_send_attempts(const pft_transport_t *self, int handle);
/* Ends a pending send without waiting further: its state becomes PFT_SEND_FAILED with rc PFT_ETIMEOUT and
 * reason (copied); a send no longer pending is left as it is. 0, or PFT_EINVAL for an unknown handle. */
int pft_transport_cancel(pft_transport_t *self, int handle, const char *reason);
/* Tells peer that its ACK of id was read and recorded (CONFIRM), e.g. by a sender restarted after it recorded
 * the ACK (before the transport could confirm it), or one that knows the hand-off delivered otherwise. The
 * transport confirms every ACK it reads by itself, after on_ack returned. Without blocking: sent at once
 * while a connection to the peer is up, else kept (up to 16 per peer) and sent once one is. 0, or PFT_EINVAL
 * for an unknown peer. */
int pft_transport_confirm(pft_transport_t *self, const char *peer, const uint8_t id[PFT_TRANSPORT_ID_LEN]);
/* Sends still pending. */
int pft_transport_pending(const pft_transport_t *self);
/* Receiver: messages accepted (the callback stored them, or recognised them as stored) whose ACK the sender
 * has not confirmed reading yet (CONFIRM, from the sender the message came from: the same CURVE name). A node
 * stays reachable while this is > 0, within a bound of its own, so that a sender that could not read its ACK
 * yet (stopped, busy, restarted) asks again and is ACKed again. At most 256 are tracked (the oldest
 * forgotten). */
int pft_transport_unconfirmed(const pft_transport_t *self);

/* Counters since new(). Bytes count message bodies only (no frame headers, offers, ACKs or NACKs; offers have
 * their own counter). A hand-off costs one offer and one body when all goes well. */
typedef struct {
    uint64_t bytes_sent;     /* body bytes handed to libzmq, every body transmission (retries included) */
    uint64_t bytes_received; /* body bytes of every well-formed inbound bundle message (duplicates and
                                rejected ones included) */
    uint64_t transmissions;  /* body transmissions (bundle messages carrying a body) handed to libzmq */
    uint64_t retries; /* body transmissions beyond the first of a send (offers repeated: not counted) */
    uint64_t acked, rejected_by_peer, failed; /* sends that ended so */
    uint64_t received; /* inbound hand-offs decided: well-formed bundle messages, and offers answered without
                          a body (ACK: stored before; NACK: too large, no callback) */
    uint64_t accepted; /* ... that the callback accepted */
    uint64_t duplicates; /* ... ACKed as stored before: the id remembered (callback not called), or the
                            callback said PFT_TRANSPORT_DUPLICATE */
    uint64_t rejected;   /* ... NACKed (callback refused, id mismatch, too large, no callback) */
    uint64_t malformed; /* inbound messages or replies dropped as malformed, or of another protocol version */
    uint64_t zap_allowed;       /* inbound CURVE handshakes admitted (client key allowed) */
    uint64_t zap_denied;        /* inbound CURVE handshakes refused: client key not allowed (ZAP 400) */
    uint64_t handshakes_failed; /* inbound handshakes that failed otherwise: security mechanism mismatch (a
                                   plain-text client of a CURVE server or the reverse), a CURVE crypto error
                                   (client using a wrong server key), connection lost mid-handshake (one
                                   failure may count twice: the cause and the lost connection) */
    uint64_t peer_handshake_failures; /* outbound handshakes refused (our key not allowed, mismatch, ...) */
    int64_t
        last_ack_ms; /* pft_transport_now_ms() when the last ACK went out (0: none): a node stays reachable a
                        while after it, for a sender that could not read it yet (libzmq drops a reply still
                        unread on a DEALER once the connection closes) to retransmit and be ACKed again */
    /* flow control, sender side */
    uint64_t offers;          /* offers handed to libzmq (first ones and repeats) */
    uint64_t offer_bytes;     /* their bytes, frames included (HDR_LEN + 8 each) */
    uint64_t grants_received; /* SEND replies read for a pending send */
    uint64_t busy_received;   /* WAIT replies read for a pending send */
    uint64_t eager_sends;     /* bodies sent with their first offer, without a grant (at most eager_bytes) */
    uint64_t probes;          /* offers repeated after the body went (asking for an ACK not read yet) */
    uint64_t cancels_sent;    /* CANCELs sent: a grant that came for a send already ended */
    /* flow control, receiver side */
    uint64_t offers_received;  /* well-formed inbound offers */
    uint64_t grants;           /* SEND replies sent (bodies granted) */
    uint64_t busy_replies;     /* WAIT replies sent */
    uint64_t grants_expired;   /* grants freed because their body did not come in time */
    uint64_t grants_cancelled; /* grants freed by the sender's CANCEL (its send had ended) */
    uint64_t grants_lost;      /* grants freed because their connection closed first (a sender that stopped,
                                  or a body over max_msg_size + CURVE's allowance that libzmq dropped) */
    uint64_t oversize;         /* offers refused as larger than max_msg_size (NACK before any body) */
    uint64_t disconnects;      /* inbound connections that closed (failed handshakes included) */
    int max_in_flight;         /* most bodies granted at once */
    uint64_t ack_probes;       /* PROBEs (offers sent after the body) of an accepted id, ACKed again: a sender
                                  asking for an ACK it has not read yet (not counted in received/duplicates) */
    /* the end of a hand-off: the sender tells the receiver that it read the ACK (CONFIRM) */
    uint64_t confirms_sent;     /* sender: CONFIRMs handed to libzmq, one per ACK read */
    uint64_t confirms_received; /* receiver: well-formed CONFIRMs read (matching an awaited ACK or not) */
} pft_transport_stats_t;

void pft_transport_stats(const pft_transport_t *self, pft_transport_stats_t *stats);

#endif
