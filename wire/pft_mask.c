/* pft_mask: pairwise additive masks (X25519 pair secrets, BLAKE2b use keys, XChaCha20 keystreams). */
#include "pft_mask.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_error.h"

#define PAIR_DOMAIN "pftnet-secagg-pair-v1"
#define MASK_DOMAIN "pftnet-secagg-mask-v1"
#define SHARE_DOMAIN "pftnet-secagg-share-v1"
#define COINS_DOMAIN "pftnet-secagg-coins-v1"
#define CHUNK_BYTES 4096 /* keystream produced per call: 64 blocks of 64 bytes */

_Static_assert(PFT_MASK_KEY_LEN == crypto_stream_xchacha20_KEYBYTES, "use key is an XChaCha20 key");
_Static_assert(PFT_MASK_KEY_LEN == crypto_scalarmult_BYTES, "X25519 output size");
_Static_assert(CHUNK_BYTES % 64 == 0, "whole blocks per chunk");

static const uint8_t s_zeros[CHUNK_BYTES];

int pft_mask_sign(const pft_pubkey_t *a, const pft_pubkey_t *b)
{
    int c = memcmp(a->bytes, b->bytes, PFT_KEY_PUBLIC_LEN);
    return c < 0 ? 1 : c > 0 ? -1 : 0;
}

static int check_text(const char *what, const uint8_t *s, size_t len, size_t max)
{
    if (!s || len < 1 || len > max)
        return pft_err(PFT_EINVAL, "mask: %s of %zu bytes (1..%zu)", what, s ? len : 0, max);
    return 0;
}

/* K = BLAKE2b-256(domain ‖ len(run) ‖ run ‖ P_lo ‖ P_hi ‖ z) */
static void pair_hash(const char *run, const pft_pubkey_t *a, const pft_pubkey_t *b, const uint8_t z[32],
                      uint8_t key[PFT_MASK_KEY_LEN])
{
    const pft_pubkey_t *lo = pft_mask_sign(a, b) > 0 ? a : b, *hi = lo == a ? b : a;
    uint8_t run_len = (uint8_t)strlen(run);
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, PFT_MASK_KEY_LEN);
    crypto_generichash_update(&st, (const uint8_t *)PAIR_DOMAIN, sizeof PAIR_DOMAIN - 1);
    crypto_generichash_update(&st, &run_len, 1);
    crypto_generichash_update(&st, (const uint8_t *)run, run_len);
    crypto_generichash_update(&st, lo->bytes, PFT_KEY_PUBLIC_LEN);
    crypto_generichash_update(&st, hi->bytes, PFT_KEY_PUBLIC_LEN);
    crypto_generichash_update(&st, z, 32);
    crypto_generichash_final(&st, key, PFT_MASK_KEY_LEN);
    sodium_memzero(&st, sizeof st);
}

/* The pair secret of self (X25519 secret sk) and peer. PFT_EINVAL for a peer key without a usable X25519
 * form. */
static int pair_secret(const uint8_t sk[PFT_KEY_CURVE_LEN], const pft_pubkey_t *self_pk, const char *run,
                       const pft_pubkey_t *peer, uint8_t key[PFT_MASK_KEY_LEN])
{
    uint8_t peer_curve[PFT_KEY_CURVE_LEN], z[crypto_scalarmult_BYTES];
    char fp[PFT_KEY_FINGERPRINT_LEN + 1];
    if (crypto_sign_ed25519_pk_to_curve25519(peer_curve, peer->bytes) != 0)
        return pft_err(PFT_EINVAL, "mask: peer key %s has no X25519 form", pft_pubkey_fingerprint(peer, fp));
    if (crypto_scalarmult(z, sk, peer_curve) != 0) {
        sodium_memzero(z, sizeof z);
        return pft_err(PFT_EINVAL, "mask: peer key %s is of small order (no shared secret)",
                       pft_pubkey_fingerprint(peer, fp));
    }
    pair_hash(run, self_pk, peer, z, key);
    sodium_memzero(z, sizeof z);
    return 0;
}

/* k = BLAKE2b-256(key = K, domain ‖ label), domain MASK_DOMAIN (a use key) or SHARE_DOMAIN (a share key) */
static void use_key(const uint8_t pair[PFT_MASK_KEY_LEN], const char *domain, const uint8_t *label,
                    size_t label_len, uint8_t key[PFT_MASK_KEY_LEN])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, pair, PFT_MASK_KEY_LEN, PFT_MASK_KEY_LEN);
    crypto_generichash_update(&st, (const uint8_t *)domain, strlen(domain));
    crypto_generichash_update(&st, label, label_len);
    crypto_generichash_final(&st, key, PFT_MASK_KEY_LEN);
    sodium_memzero(&st, sizeof st);
}

/* words[i] += sign · (the i-th little-endian word of XChaCha20(k, nonce 0)) mod 2^64. */
static void add_stream(const uint8_t key[PFT_MASK_KEY_LEN], int sign, uint64_t *words, size_t n)
{
    static const uint8_t nonce[crypto_stream_xchacha20_NONCEBYTES];
    uint8_t buf[CHUNK_BYTES];
    uint64_t block = 0;
    for (size_t done = 0; done < n;) {
        size_t m = n - done < CHUNK_BYTES / 8 ? n - done : CHUNK_BYTES / 8;
        crypto_stream_xchacha20_xor_ic(buf, s_zeros, m * 8, nonce, block, key);
        block += CHUNK_BYTES / 64;
        for (size_t i = 0; i < m; i++) {
            uint64_t w = 0;
            for (int b = 7; b >= 0; b--)
                w = (w << 8) | buf[i * 8 + (size_t)b];
            words[done + i] += sign > 0 ? w : (uint64_t)0 - w;
        }
        done += m;
    }
    sodium_memzero(buf, sizeof buf);
}

static int cmp_key(const void *a, const void *b)
{
    return memcmp((*(const pft_pubkey_t *const *)a)->bytes, (*(const pft_pubkey_t *const *)b)->bytes,
                  PFT_KEY_PUBLIC_LEN);
}

/* PFT_EINVAL if a peer equals self or appears twice. */
static int check_peers(const pft_pubkey_t *self_pk, const pft_pubkey_t *peers, size_t n_peers)
{
    if (n_peers > PFT_MASK_MAX_PEERS)
        return pft_err(PFT_EINVAL, "mask: %zu peers (at most %d)", n_peers, PFT_MASK_MAX_PEERS);
    const pft_pubkey_t **sorted = pft_alloc_array(n_peers ? n_peers : 1, sizeof *sorted);
    if (!sorted)
        return pft_err(PFT_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n_peers; i++) {
        sorted[i] = &peers[i];
        if (!rc && pft_mask_sign(self_pk, &peers[i]) == 0)
            rc = pft_err(PFT_EINVAL, "mask: peer %zu is this node itself", i);
    }
    qsort(sorted, n_peers, sizeof *sorted, cmp_key);
    for (size_t i = 1; i < n_peers && !rc; i++)
        if (cmp_key(&sorted[i - 1], &sorted[i]) == 0)
            rc = pft_err(PFT_EINVAL, "mask: peer %zu is listed twice", (size_t)(sorted[i] - peers));
    pft_free(sorted);
    return rc;
}

/* The use keys (or, with domain SHARE_DOMAIN, share keys) of self with every peer (keys[32 · n_peers], wiped
 * by the caller), after every check. */
static int derive_keys(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                       const char *domain, const uint8_t *label, size_t label_len, uint8_t *keys)
{
    int rc;
    const pft_pubkey_t *pk = pft_keypair_public(self);
    if (sodium_init() < 0)
        return pft_err(PFT_EUNSUPPORTED, "mask: libsodium cannot be initialised");
    if ((rc = check_text("run id", (const uint8_t *)run, run ? strlen(run) : 0, PFT_MASK_RUN_MAX)) ||
        (rc = check_text("label", label, label_len, PFT_MASK_LABEL_MAX)) ||
        (rc = check_peers(pk, peers, n_peers)))
        return rc;
    uint8_t cpk[PFT_KEY_CURVE_LEN], csk[PFT_KEY_CURVE_LEN], pair[PFT_MASK_KEY_LEN];
    if ((rc = pft_keypair_curve(self, cpk, csk)))
        return rc;
    for (size_t i = 0; i < n_peers && !rc; i++) {
        rc = pair_secret(csk, pk, run, &peers[i], pair);
        if (!rc)
            use_key(pair, domain, label, label_len, keys + PFT_MASK_KEY_LEN * i);
    }
    sodium_memzero(csk, sizeof csk);
    sodium_memzero(pair, sizeof pair);
    return rc;
}

static int apply(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                 const uint8_t *label, size_t label_len, uint64_t *words, size_t n)
{
    size_t bytes = PFT_MASK_KEY_LEN * (n_peers ? n_peers : 1);
    uint8_t *keys = n_peers <= PFT_MASK_MAX_PEERS ? pft_alloc(bytes) : NULL;
    if (!keys)
        return n_peers > PFT_MASK_MAX_PEERS
                   ? pft_err(PFT_EINVAL, "mask: %zu peers (at most %d)", n_peers, PFT_MASK_MAX_PEERS)
                   : pft_err(PFT_ENOMEM, "out of memory");
    int rc = derive_keys(self, run, peers, n_peers, MASK_DOMAIN, label, label_len, keys);
    const pft_pubkey_t *pk = pft_keypair_public(self);
    for (size_t i = 0; i < n_peers && !rc; i++)
        add_stream(keys + PFT_MASK_KEY_LEN * i, pft_mask_sign(pk, &peers[i]), words, n);
    sodium_memzero(keys, bytes);
    pft_free(keys);
    return rc;
}

int pft_mask_add(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                 const uint8_t *label, size_t label_len, uint64_t *words, size_t n)
{
    return apply(self, run, peers, n_peers, label, label_len, words, n);
}

int pft_mask_remove(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peers, size_t n_peers,
                    const uint8_t *label, size_t label_len, uint64_t *words, size_t n)
{
    /* p added sign(p, self)·m; self's own side, sign(self, p)·m, is its negation */
    return apply(self, run, peers, n_peers, label, label_len, words, n);
}

int pft_mask_use_key(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peer,
                     const uint8_t *label, size_t label_len, uint8_t key[PFT_MASK_KEY_LEN])
{
    return derive_keys(self, run, peer, 1, MASK_DOMAIN, label, label_len, key);
}

int pft_mask_share_key(const pft_keypair_t *self, const char *run, const pft_pubkey_t *peer,
                       const uint8_t *label, size_t label_len, uint8_t key[PFT_MASK_KEY_LEN])
{
    return derive_keys(self, run, peer, 1, SHARE_DOMAIN, label, label_len, key);
}

int pft_mask_self_coins(const pft_keypair_t *self, const char *run, const uint8_t *label, size_t label_len,
                        uint8_t coins[PFT_MASK_KEY_LEN])
{
    if (sodium_init() < 0)
        return pft_err(PFT_EUNSUPPORTED, "mask: libsodium cannot be initialised");
    int rc;
    if ((rc = check_text("run id", (const uint8_t *)run, run ? strlen(run) : 0, PFT_MASK_RUN_MAX)) ||
        (rc = check_text("label", label, label_len, PFT_MASK_LABEL_MAX)))
        return rc;
    uint8_t cpk[PFT_KEY_CURVE_LEN], csk[PFT_KEY_CURVE_LEN], run_len = (uint8_t)strlen(run);
    if ((rc = pft_keypair_curve(self, cpk, csk)))
        return rc;
    crypto_generichash_state st;
    crypto_generichash_init(&st, csk, sizeof csk, PFT_MASK_KEY_LEN);
    crypto_generichash_update(&st, (const uint8_t *)COINS_DOMAIN, sizeof COINS_DOMAIN - 1);
    crypto_generichash_update(&st, &run_len, 1);
    crypto_generichash_update(&st, (const uint8_t *)run, (size_t)run_len);
    crypto_generichash_update(&st, label, (size_t)label_len);
    crypto_generichash_final(&st, coins, PFT_MASK_KEY_LEN);
    sodium_memzero(&st, sizeof st);
    sodium_memzero(csk, sizeof csk);
    return 0;
}

void pft_mask_add_self(const uint8_t seed[PFT_MASK_KEY_LEN], int sign, uint64_t *words, size_t n)
{
    add_stream(seed, sign, words, n);
}

int pft_mask_cancel_revealed(const uint8_t key[PFT_MASK_KEY_LEN], const pft_pubkey_t *survivor,
                             const pft_pubkey_t *dropped, uint64_t *words, size_t n)
{
    int s = pft_mask_sign(survivor, dropped);
    if (s == 0)
        return pft_err(PFT_EINVAL, "mask: the survivor and the dropped node have the same key");
    add_stream(key, -s, words, n); /* the survivor added s·m */
    return 0;
}
