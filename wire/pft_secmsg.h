/* pft_secmsg: the control messages of secure aggregation's dropout recovery (docs/SECAGG.md §5, docs/WIRE.md
 * §2.3): the opener's declaration of missing members, a survivor's reveal of its use keys with them, and the
 * opener's notice that the sum is open (members may stop waiting). */
#ifndef PFT_SECMSG_H
#define PFT_SECMSG_H

#include <stddef.h>
#include <stdint.h>

#include "pft_bundle.h"
#include "pft_keys.h"

/* Wire form: the envelope of a bundle (WIRE.md §1: "PFTB", 1, payload, Ed25519 signature of the sender over
 * the payload), so the transport's id and duplicate handling apply unchanged, with a payload no bundle has: a
 * msgpack array of SEVEN elements ["secagg", kind, run, label, sender, ids, tail]:
 *   kind 1 MISSING: ids = the members the opener declares missing, tail = the survivors (arrays of str);
 *   kind 2 REVEAL:  ids = the missing members the sender reveals its use keys with, tail = one bin(32) key
 *                   per id, in the same order;
 *   kind 3 DONE:    ids = tail = [] (the opener is done with the group: it asks nothing more, and members
 *                   waiting for a declaration may stop).
 * run and sender: 1..64 bytes without control bytes; label: 1..256 bytes without control bytes; ids and
 * survivors strictly ascending (bytewise), 1..4096 of them (0 for DONE), no id in both.
 *
 * Double masking (docs/SECAGG.md §5) adds an EIGHTH element, extra: an array of [id, bin] pairs, ids strictly
 * ascending, bins of 1..PFT_SECMSG_EXTRA_MAX bytes, 0..4096 pairs (a message without it keeps seven
 * elements):
 *   MISSING: the encrypted shares addressed to the receiver, [u, ciphertext] per survivor u that sent one
 *            (every id a survivor); with extra, ids (the missing members) may be empty: recovery always runs;
 *   REVEAL:  [u, share] per survivor u: the sender's share of u's self-mask seed; with extra, ids (the
 *            missing members the keys are with) may be empty; never an id in both lists (a member is either
 *            missing or surviving);
 *   DONE:    no extra.
 *
 * The consistency round (docs/SECAGG.md §5.1; Bonawitz et al., CCS 2017, ConsistencyCheck) adds two kinds:
 *   kind 4 SIGN:       a survivor's signature of the declaration it was sent: ids = its missing members, tail
 *                      = its survivors (as in that MISSING), extra = exactly one pair [sender, bin(64)], the
 *                      sender's Ed25519 signature of pft_secmsg_statement over those survivors;
 *   kind 5 SIGNATURES: the opener forwards the signatures it collected: ids = tail = [], extra = 1..4096
 *                      pairs [signer, bin(64)].
 * A survivor reveals only after it holds at least t valid signatures, from distinct survivors of its own
 * declaration (its own among them), over the same survivor set.
 *
 * The topology fingerprint (topology/pft_topo_fingerprint.h, as a bundle carries it: WIRE.md §2.4) is a NINTH
 * element, fp: bin(32), the hash of the sender's canonical public topology; a message with it has nine
 * elements, its eighth the extra array or nil (no extra). pftnode stamps every message and refuses one
 * without it or with another topology's. */

#define PFT_SECMSG_MAX_IDS 4096
#define PFT_SECMSG_KEY_LEN 32
#define PFT_SECMSG_EXTRA_MAX 128 /* bytes of one extra bin at most */
#define PFT_SECMSG_FP_LEN 32     /* bytes of the topology fingerprint (PFT_TOPO_FP_LEN) */

typedef enum {
    PFT_SECMSG_MISSING = 1,
    PFT_SECMSG_REVEAL = 2,
    PFT_SECMSG_DONE = 3,
    PFT_SECMSG_SIGN = 4,
    PFT_SECMSG_SIGNATURES = 5,
} pft_secmsg_kind_t;

#define PFT_SECMSG_SIG_LEN 64 /* bytes of a consistency signature (Ed25519, detached) */
#define PFT_SECMSG_STATEMENT_TAG "pftnet-secagg-consistency-v1"
/* bytes of the statement a survivor signs: the tag, its NUL, a 32-byte digest */
#define PFT_SECMSG_STATEMENT_LEN (sizeof PFT_SECMSG_STATEMENT_TAG + 32)

/* A message; decode fills one (every pointer inside the one allocation freed by pft_secmsg_destroy). */
typedef struct {
    pft_secmsg_kind_t kind;
    char run[PFT_BUNDLE_MAX_NAME + 1];
    char label[PFT_BUNDLE_MASK_LABEL_MAX + 1];
    char sender[PFT_BUNDLE_MAX_NAME + 1];
    size_t n_ids;
    const char *const *ids; /* MISSING: missing members; REVEAL: the members the keys are with */
    size_t n_survivors;
    const char *const *survivors;              /* MISSING only */
    const uint8_t (*keys)[PFT_SECMSG_KEY_LEN]; /* REVEAL only: n_ids use keys */
    int has_extra;                             /* 1: the eighth element is present (double masking) */
    size_t n_extra;
    const char *const *extra_ids;  /* MISSING: senders of the ciphertexts; REVEAL: whose seed shares */
    const uint8_t *const *extra;   /* n_extra bins */
    const size_t *extra_len;       /* their lengths, 1..PFT_SECMSG_EXTRA_MAX */
    int has_fp;                    /* 1: the ninth element is present */
    uint8_t fp[PFT_SECMSG_FP_LEN]; /* the sender's topology fingerprint */
} pft_secmsg_t;

/* 1 if buf is an envelope whose payload is a secagg message (its first element "secagg" in a 7-, 8- or
 * 9-array), so that a receiver dispatches it here and not to the bundle decoder; 0 otherwise (any bytes). */
int pft_secmsg_is(const uint8_t *buf, size_t len);

/* Checks m, packs its payload, signs it with kp (NULL: unsigned, for tests) and wraps it in an envelope;
 * *buf is freed by the caller with pft_free. 0, PFT_EINVAL (a field out of its limits: the message says
 * which), PFT_ENOMEM. */
int pft_secmsg_encode(const pft_secmsg_t *m, const pft_keypair_t *kp, uint8_t **buf, size_t *len);

/* Decodes a message (the envelope's signature is NOT checked here: pft_keys_verify_message with the sender's
 * key does). *out is new on success. PFT_EFORMAT (not this form, or a field out of its limits: the message
 * names it), PFT_ERANGE (too large), PFT_ENOMEM. */
int pft_secmsg_decode(const uint8_t *buf, size_t len, pft_secmsg_t **out);

/* Frees a decoded message and sets *self_p NULL; safe on NULL and twice. */
void pft_secmsg_destroy(pft_secmsg_t **self_p);

/* The statement a survivor signs in the consistency round: the tag "pftnet-secagg-consistency-v1", a NUL,
 * then BLAKE2b-256 of (run, label, the topology fingerprint fp, the survivors[0..n) in the given order), each
 * string length-prefixed. The tag's first byte is no msgpack array, so a statement never reads as the
 * payload of a message or bundle the same key signs. 0, or PFT_EINVAL (a name too long, n too large). */
int pft_secmsg_statement(const char *run, const char *label, const uint8_t fp[PFT_SECMSG_FP_LEN],
                         const char *const *survivors, size_t n, uint8_t out[PFT_SECMSG_STATEMENT_LEN]);

/* "missing", "reveal", "done", "sign", "signatures", "?" */
const char *pft_secmsg_kind_name(int kind);

#endif
