/* pft_keys: a node's Ed25519 keypair (bundle signatures) and the X25519 keys derived from it (CURVE). */
#ifndef PFT_KEYS_H
#define PFT_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "pft_bundle.h"

/* One Ed25519 keypair per node (libsodium crypto_sign). Its public key verifies the bundles the node
 * produces; the X25519 keys of libzmq CURVE are derived from it (crypto_sign_ed25519_*_to_curve25519),
 * so one key file pair serves both. A signature is a detached Ed25519 signature over the bundle
 * payload bytes, i.e. exactly what pft_bundle_encode_payload() returns and the bundle id hashes
 * (docs/SECURITY.md).
 *
 * Files (one line each, '\n' optional at the end; nothing else is accepted):
 *   NAME.pub  "pftnet-ed25519-public " + base64(32-byte public key) [+ " " + comment]
 *   NAME.key  "pftnet-ed25519-secret " + base64(32-byte seed || 32-byte public key) [+ " " + comment]
 * base64 is the standard alphabet with padding, canonical (44 and 88 characters). A comment is
 * 1..128 printable ASCII characters (keygen writes the key's name). A secret key file must be a
 * regular file owned by the user (or root) and not accessible by group or others (mode & 077 == 0). */

#define PFT_KEY_PUBLIC_LEN 32      /* bytes of an Ed25519 public key */
#define PFT_KEY_SEED_LEN 32        /* bytes of the seed a keypair is derived from */
#define PFT_KEY_SIG_LEN 64         /* bytes of a signature */
#define PFT_KEY_CURVE_LEN 32       /* bytes of an X25519 (CURVE) public or secret key */
#define PFT_KEY_FINGERPRINT_LEN 16 /* hex characters of a fingerprint */
#define PFT_KEY_TEXT_MAX 256       /* bytes of a formatted public key line, at most (with NUL) */
#define PFT_KEY_COMMENT_MAX 128    /* characters of a comment, at most */
#define PFT_KEY_PUBLIC_PREFIX "pftnet-ed25519-public "
#define PFT_KEY_SECRET_PREFIX "pftnet-ed25519-secret "

/* A public key: a plain value (not secret), valid by construction when obtained from this module
 * (a point of the curve of large order). */
typedef struct {
    uint8_t bytes[PFT_KEY_PUBLIC_LEN];
} pft_pubkey_t;

/* A keypair; opaque, the secret part is wiped on destroy. */
typedef struct pft_keypair_t pft_keypair_t;

/* A new random keypair; NULL on failure (libsodium unusable, out of memory; pft_errmsg() says). */
pft_keypair_t *pft_keypair_generate(void);
/* The keypair of a 32-byte seed (deterministic; tests and simulations); NULL on failure. */
pft_keypair_t *pft_keypair_from_seed(const uint8_t seed[PFT_KEY_SEED_LEN]);
/* Wipes and frees *self_p and sets it to NULL; safe on NULL and twice. */
void pft_keypair_destroy(pft_keypair_t **self_p);

/* Loads a secret key file. Refuses (PFT_EAUTH, message saying what to do, like ssh) a file that is not
 * a regular file, not owned by the user or root, or accessible by group or others; PFT_EIO when it
 * cannot be read; PFT_EFORMAT for anything but the format above, or a public half that does not match
 * the seed (a corrupted file); PFT_ENOMEM. *out is new on success, NULL on error. */
int pft_keypair_load(const char *path, pft_keypair_t **out);

/* Writes the secret key file (mode 0600) and/or the public key file (mode 0644) durably (temporary
 * file, fsync, then link or rename, fsync of the folder); either path may be NULL. comment: NULL or a
 * valid comment (see above). Without force an existing file is never replaced: PFT_EIO "exists, use
 * --force" (checked for both files before anything is written); with force it is replaced atomically
 * (a symlink at the path is replaced, not followed). If the public file cannot be written after the
 * secret one was, the secret one is removed again. PFT_EINVAL (bad comment), PFT_EIO. */
int pft_keypair_save(const pft_keypair_t *self, const char *secret_path, const char *public_path,
                     const char *comment, int force);

/* The public half. */
const pft_pubkey_t *pft_keypair_public(const pft_keypair_t *self);

/* Detached Ed25519 signature of msg[len]. 0 or PFT_EINVAL (len too large for libsodium). */
int pft_keypair_sign(const pft_keypair_t *self, const uint8_t *msg, size_t len, uint8_t sig[PFT_KEY_SIG_LEN]);

/* The X25519 keypair for libzmq CURVE derived from this keypair (32 bytes each, binary, as
 * zmq_setsockopt ZMQ_CURVE_PUBLICKEY / ZMQ_CURVE_SECRETKEY accept them). 0 or PFT_EINVAL. The caller
 * should wipe curve_secret after use (sodium_memzero). */
int pft_keypair_curve(const pft_keypair_t *self, uint8_t curve_public[PFT_KEY_CURVE_LEN],
                      uint8_t curve_secret[PFT_KEY_CURVE_LEN]);

/* Parses a public key line (the .pub file's text; one trailing '\n' allowed). 0, or PFT_EFORMAT with a
 * message saying what is wrong (prefix, base64, length, comment, trailing bytes), or PFT_EINVAL when the
 * 32 bytes are not a usable Ed25519 public key (not on the curve, small order). */
int pft_pubkey_parse(const char *text, pft_pubkey_t *out);
/* Reads a .pub file (at most 4 KiB): PFT_EIO, or parse's errors with the path in the message. */
int pft_pubkey_load(const char *path, pft_pubkey_t *out);
/* A key given either inline (text starting with PFT_KEY_PUBLIC_PREFIX) or as a path to a .pub file, as
 * in the topology attribute `key`. Errors as parse / load. */
int pft_pubkey_resolve(const char *path_or_text, pft_pubkey_t *out);
/* Writes the line (without '\n'; comment may be NULL) into buf[cap]; PFT_EINVAL if it does not fit or
 * the comment is invalid. */
int pft_pubkey_format(const pft_pubkey_t *key, const char *comment, char *buf, size_t cap);
/* Short fingerprint for logs: the first 8 bytes of BLAKE2b-256(key) in hex, into out[17]; returns out. */
char *pft_pubkey_fingerprint(const pft_pubkey_t *key, char out[PFT_KEY_FINGERPRINT_LEN + 1]);
/* 1 if equal (constant time), else 0. */
int pft_pubkey_equal(const pft_pubkey_t *a, const pft_pubkey_t *b);
/* The X25519 public key derived from key (what a CURVE peer presents). 0 or PFT_EINVAL. */
int pft_pubkey_curve(const pft_pubkey_t *key, uint8_t curve_public[PFT_KEY_CURVE_LEN]);

/* Verifies a detached signature of msg[len]: 0, or PFT_EAUTH ("signature does not verify", also for a
 * signature of the wrong length). */
int pft_pubkey_verify(const pft_pubkey_t *key, const uint8_t *msg, size_t len, const uint8_t *sig,
                      size_t sig_len);

/* Bundles. */

/* Encodes the bundle's payload (once: it stays in the bundle, pft_bundle_payload), signs it and stores the
 * signature in the bundle (pft_bundle_set_signature), so that pft_bundle_encode() then carries it and
 * reuses those bytes, as pft_bundle_id() does. Errors of
 * pft_bundle_encode_payload, PFT_ENOMEM. Sign last: any later change to the bundle changes the payload
 * and invalidates the signature. */
int pft_keys_sign_bundle(const pft_keypair_t *self, pft_bundle_t *bundle);
/* Verifies a wire message (envelope) against the producer's key without decoding the payload:
 * PFT_EFORMAT etc. from pft_envelope_parse (limits NULL: defaults), PFT_EAUTH when it carries no
 * signature or one that does not verify. */
int pft_keys_verify_message(const pft_pubkey_t *producer, const uint8_t *msg, size_t len,
                            const pft_bundle_limits_t *limits);
/* Verifies a bundle (e.g. a decoded one: its payload is the one it was decoded from) against the
 * producer's key: PFT_EAUTH when unsigned or not verifying; encode_payload's errors. */
int pft_keys_verify_bundle(const pft_pubkey_t *producer, const pft_bundle_t *bundle);

#endif
