/* pft_mask: pairwise additive masks mod 2^64 from X25519 key agreement between a topology's nodes. */
#ifndef PFT_MASK_H
#define PFT_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "pft_keys.h"

/* Theory (docs/SECAGG.md §3; Bonawitz et al., CCS 2017, without the self-masks and secret sharing).
 *
 * Pair secret. Nodes i and j hold Ed25519 keys; pft_keypair_curve / pft_pubkey_curve give their X25519 keys
 * (the ones CURVE uses). Each computes the X25519 shared point z = X25519(sk_i, PK_j) = X25519(sk_j, PK_i)
 * (libsodium crypto_scalarmult; an all-zero result, from a small-order key, is refused), and the pair secret
 *     K_ij = BLAKE2b-256("pftnet-secagg-pair-v1" ‖ len ‖ run ‖ P_lo ‖ P_hi ‖ z)
 * where P_lo < P_hi are the two Ed25519 public keys in bytewise order and len is the run id's length (one
 * byte). K_ij is the same on both sides, differs per run, and is never stored: computed, used, wiped.
 *
 * Per use. A label names one use (e.g. "handoff:3:sums", "agg:server:s2"): the use key
 *     k = BLAKE2b-256(key = K_ij, "pftnet-secagg-mask-v1" ‖ label)
 * keys crypto_stream_xchacha20 (nonce zero: k is used for this one label only), whose keystream, read as
 * little-endian 64-bit words, is the mask m_ij(label) of n words. Masks of different labels, pairs or runs
 * are independent (BLAKE2b as a PRF, XChaCha20 as a PRG).
 *
 * Signs. Node i adds +m_ij when its Ed25519 public key sorts before j's (bytewise), -m_ij otherwise, so j
 * adds the opposite: over any set of nodes that holds both ends of every pair, the masks cancel exactly
 * mod 2^64 (Σ_i Σ_{j ∈ S, j ≠ i} ±m_ij = 0).
 *
 * Removal by an opener. If a masked its vector with its pair shared with c (a added s_ac·m_ac, s = ±1), then
 * c adding its own side (s_ca·m_ac = -s_ac·m_ac) removes it: pft_mask_remove is the same arithmetic as
 * pft_mask_add, named for what it does (a chain's opener c removes a's and b's masks with {a, b}).
 *
 * Dropout (a star's client x never delivers). Each survivor s reveals its use key k_sx for the label
 * (pft_mask_use_key, 32 bytes; not K_sx: other labels stay secret); the aggregator cancels s's term with
 * pft_mask_cancel_revealed. After that x's masked bundle would open to the aggregator, so it must refuse
 * x's late bundle for good (docs/SECAGG.md §5 says what this does and does not protect). */

#define PFT_MASK_KEY_LEN 32      /* bytes of a pair secret and of a use key */
#define PFT_MASK_LABEL_MAX 256   /* bytes of a label at most */
#define PFT_MASK_RUN_MAX 64      /* bytes of a run id at most (as the wire's) */
#define PFT_MASK_MAX_PEERS 65536 /* peers of one call at most */

/* words[0..n) += Σ over peers p of sign(self, p) · m(self, p, label) mod 2^64, sign +1 when self's public
 * key sorts before p's. run: the run id (1..PFT_MASK_RUN_MAX bytes); label: 1..PFT_MASK_LABEL_MAX bytes.
 * 0, or PFT_EINVAL (a peer equal to self or listed twice, a peer key without X25519 form or of small order,
 * an empty or too long run id or label, too many peers), PFT_EUNSUPPORTED (libsodium unusable); words is
 * unchanged on error. Every secret is wiped (sodium_memzero) before returning. */
int pft_mask_add(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                 const uint8_t *label, size_t label_len, uint64_t *words, size_t n);

/* Removes from words[0..n) the masks that each listed peer p added with its pair secret shared with self
 * for this label (p added sign(p, self)·m; this adds sign(self, p)·m = -sign(p, self)·m). Same arithmetic and
 * errors as pft_mask_add. */
int pft_mask_remove(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                    const uint8_t *label, size_t label_len, uint64_t *words, size_t n);

/* The use key of the pair (self, peer) for label (what a survivor reveals about a dropped peer): 0 or the
 * errors of pft_mask_add. The caller wipes it after sending. */
int pft_mask_use_key(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peer,
                     const uint8_t *label, size_t label_len, uint8_t key[PFT_MASK_KEY_LEN]);

/* Cancels in words[0..n) the term that `survivor` added for its pair with `dropped` (sign(survivor, dropped)
 * · m), given the use key the survivor revealed. 0, or PFT_EINVAL (survivor equal to dropped). */
int pft_mask_cancel_revealed(const uint8_t key[PFT_MASK_KEY_LEN], const pft_pubkey_t *survivor,
                             const pft_pubkey_t *dropped, uint64_t *words, size_t n);

/* Double masking (docs/SECAGG.md §5). The key that seals the shares of self-mask seeds between self and peer
 * for label: BLAKE2b-256(key = K_ij, "pftnet-secagg-share-v1" ‖ label) (independent of the use key, which a
 * survivor may reveal). Same errors as pft_mask_use_key; the caller wipes it. */
int pft_mask_share_key(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peer,
                       const uint8_t *label, size_t label_len, uint8_t key[PFT_MASK_KEY_LEN]);

/* The coins of self's self-mask seed for (run, label): BLAKE2b-256(key = self's X25519 secret,
 * "pftnet-secagg-coins-v1" ‖ len(run) ‖ run ‖ label): secret to self, fresh per run and label, and the same
 * after a restart (a masked bundle is rebuilt bit for bit). 0 or PFT_EINVAL (run or label out of limits),
 * PFT_EUNSUPPORTED; the caller wipes them. */
int pft_mask_self_coins(const pft_keypair_t *self, const char *run, const uint8_t *label, size_t label_len,
                        uint8_t coins[PFT_MASK_KEY_LEN]);

/* words[0..n) += sign · PRG(seed) mod 2^64 (sign +1 adds a self-mask, -1 removes it): the keystream of
 * XChaCha20 keyed by seed, nonce 0, as little-endian words. */
void pft_mask_add_self(const uint8_t seed[PFT_MASK_KEY_LEN], int sign, uint64_t *words, size_t n);

/* +1 if a's public key sorts before b's (bytewise), -1 if after, 0 if equal. */
int pft_mask_sign(const pft_pubkey_t *a, const pft_pubkey_t *b);

#endif
