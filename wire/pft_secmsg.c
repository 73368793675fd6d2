/* pft_secmsg: secure aggregation's control messages (docs/WIRE.md §2.3): checks, canonical packing with
 * msgpack-c, strict decoding behind pft_mpscan. */
#include "pft_secmsg.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle_internal.h"
#include "pft_error.h"
#include "pft_mpscan.h"

#define TAG "secagg"
#define N_FIELDS 7
#define N_FIELDS_EXTRA 8
#define N_FIELDS_FP 9

const char *pft_secmsg_kind_name(int kind)
{
    return kind == PFT_SECMSG_MISSING      ? "missing"
           : kind == PFT_SECMSG_REVEAL     ? "reveal"
           : kind == PFT_SECMSG_DONE       ? "done"
           : kind == PFT_SECMSG_SIGN       ? "sign"
           : kind == PFT_SECMSG_SIGNATURES ? "signatures"
                                           : "?";
}

/* Bytewise order of two ids (as the wire's ascending rule). */
static int id_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* 0 if ids[0..n) are valid node ids, strictly ascending; else PFT_EINVAL naming what. */
static int ids_ok(const char *const *ids, size_t n, const char *what)
{
    if (n > PFT_SECMSG_MAX_IDS)
        return pft_err(PFT_EINVAL, "secagg message: %zu %s, at most %d", n, what, PFT_SECMSG_MAX_IDS);
    for (size_t i = 0; i < n; i++) {
        size_t l = ids[i] ? strnlen(ids[i], PFT_BUNDLE_MAX_NAME + 1) : 0;
        if (!pft_bundle__name_ok(ids[i], l))
            return pft_err(PFT_EINVAL,
                           "secagg message: %s %zu: node ids are 1..%d bytes without control bytes", what, i,
                           PFT_BUNDLE_MAX_NAME);
        if (i && id_cmp(ids[i - 1], strlen(ids[i - 1]), ids[i], l) >= 0)
            return pft_err(PFT_EINVAL, "secagg message: %s not strictly ascending at %zu ('%s')", what, i,
                           ids[i]);
    }
    return 0;
}

/* 0 if no id is in both sorted lists. */
static int disjoint(const char *const *a, size_t na, const char *const *b, size_t nb)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        int c = strcmp(a[i], b[j]);
        if (c == 0)
            return pft_err(PFT_EINVAL, "secagg message: '%s' is declared both missing and surviving", a[i]);
        c < 0 ? i++ : j++;
    }
    return 0;
}

/* The extra pairs (double masking): ids valid and ascending, bins of 1..PFT_SECMSG_EXTRA_MAX bytes. */
static int extra_ok(const pft_secmsg_t *m)
{
    if (!m->has_extra)
        return m->n_extra ? pft_err(PFT_EINVAL, "secagg message: extra pairs without the extra element") : 0;
    int rc = ids_ok(m->extra_ids, m->n_extra, "extra ids");
    for (size_t i = 0; rc == 0 && i < m->n_extra; i++)
        if (!m->extra[i] || m->extra_len[i] < 1 || m->extra_len[i] > PFT_SECMSG_EXTRA_MAX)
            rc = pft_err(PFT_EINVAL, "secagg message: extra %zu: a bin of 1..%d bytes", i,
                         PFT_SECMSG_EXTRA_MAX);
    return rc;
}

/* A consistency message: a SIGN restates a declaration (1.. survivors) with exactly its sender's signature;
 * SIGNATURES carries 1.. signatures and nothing else. Every signature a bin of PFT_SECMSG_SIG_LEN bytes. */
static int check_signatures(const pft_secmsg_t *m)
{
    int sign = m->kind == PFT_SECMSG_SIGN;
    if (m->keys || !m->has_extra || m->n_extra < 1 || (sign && (m->n_survivors < 1 || m->n_extra != 1)) ||
        (!sign && (m->n_ids || m->n_survivors)))
        return pft_err(PFT_EINVAL, "secagg message: a sign restates a declaration (1.. survivors) with one "
                                   "signature, its sender's; signatures carry 1.. [signer, signature] only");
    if (sign && strcmp(m->extra_ids[0], m->sender) != 0)
        return pft_err(PFT_EINVAL, "secagg message: a sign carries its sender's signature, not '%s''s",
                       m->extra_ids[0]);
    for (size_t i = 0; i < m->n_extra; i++)
        if (m->extra_len[i] != PFT_SECMSG_SIG_LEN)
            return pft_err(PFT_EINVAL, "secagg message: signature %zu is %zu bytes, not %d", i,
                           m->extra_len[i], PFT_SECMSG_SIG_LEN);
    return sign ? disjoint(m->ids, m->n_ids, m->survivors, m->n_survivors) : 0;
}

/* The checks of m's fields, shared by encode (PFT_EINVAL) and decode (turned into PFT_EFORMAT). */
static int check(const pft_secmsg_t *m)
{
    size_t rl = strnlen(m->run, sizeof m->run), sl = strnlen(m->sender, sizeof m->sender),
           ll = strnlen(m->label, sizeof m->label);
    if (m->kind < PFT_SECMSG_MISSING || m->kind > PFT_SECMSG_SIGNATURES)
        return pft_err(PFT_EINVAL,
                       "secagg message: kind %d is not 1 (missing), 2 (reveal), 3 (done), 4 (sign) or 5 "
                       "(signatures)",
                       m->kind);
    if (!pft_bundle__name_ok(m->run, rl) || !pft_bundle__name_ok(m->sender, sl))
        return pft_err(PFT_EINVAL, "secagg message: run and sender are 1..%d bytes without control bytes",
                       PFT_BUNDLE_MAX_NAME);
    if (!pft_bundle__label_ok(m->label, ll))
        return pft_err(PFT_EINVAL, "secagg message: label: 1..%d bytes without control bytes",
                       PFT_BUNDLE_MASK_LABEL_MAX);
    int rc = ids_ok(m->ids, m->n_ids, "ids");
    if (rc == 0)
        rc = ids_ok(m->survivors, m->n_survivors, "survivors");
    if (rc)
        return rc;
    if ((rc = extra_ok(m)) != 0)
        return rc;
    size_t min_ids = m->has_extra ? 0 : 1;
    switch (m->kind) {
    case PFT_SECMSG_MISSING:
        if (m->n_ids < min_ids || m->n_survivors < 1 || m->keys)
            return pft_err(PFT_EINVAL, "secagg message: a declaration names 1.. missing members (0.. with "
                                       "double masking) and 1.. survivors, and no keys");
        return disjoint(m->ids, m->n_ids, m->survivors, m->n_survivors);
    case PFT_SECMSG_REVEAL:
        if (m->n_ids + m->n_extra < 1 || m->n_ids < min_ids || m->n_survivors || !m->keys)
            return pft_err(PFT_EINVAL,
                           "secagg message: a reveal holds 1.. (member, key) pairs (or seed shares) and no "
                           "survivors");
        return disjoint(m->ids, m->n_ids, m->extra_ids, m->n_extra);
    case PFT_SECMSG_SIGN:
    case PFT_SECMSG_SIGNATURES:
        return check_signatures(m);
    default:
        if (m->n_ids || m->n_survivors || m->keys || m->has_extra)
            return pft_err(PFT_EINVAL, "secagg message: a done notice carries no ids and no keys");
        return 0;
    }
}

static int pack_ids(msgpack_packer *pk, const char *const *ids, size_t n)
{
    int fail = msgpack_pack_array(pk, n);
    for (size_t i = 0; !fail && i < n; i++)
        fail = msgpack_pack_str_with_body(pk, ids[i], strlen(ids[i]));
    return fail;
}

int pft_secmsg_encode(const pft_secmsg_t *m, const pft_keypair_t *kp, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int rc = check(m);
    if (rc)
        return rc;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int fail =
        msgpack_pack_array(&pk, m->has_fp      ? N_FIELDS_FP
                                : m->has_extra ? N_FIELDS_EXTRA
                                               : N_FIELDS) ||
        msgpack_pack_str_with_body(&pk, TAG, strlen(TAG)) || msgpack_pack_uint64(&pk, (uint64_t)m->kind) ||
        msgpack_pack_str_with_body(&pk, m->run, strlen(m->run)) ||
        msgpack_pack_str_with_body(&pk, m->label, strlen(m->label)) ||
        msgpack_pack_str_with_body(&pk, m->sender, strlen(m->sender)) || pack_ids(&pk, m->ids, m->n_ids);
    if (!fail && m->kind == PFT_SECMSG_REVEAL) {
        fail = msgpack_pack_array(&pk, m->n_ids);
        for (size_t i = 0; !fail && i < m->n_ids; i++)
            fail = msgpack_pack_bin_with_body(&pk, m->keys[i], PFT_SECMSG_KEY_LEN);
    } else if (!fail) {
        fail = pack_ids(&pk, m->survivors, m->n_survivors);
    }
    if (!fail && m->has_extra) {
        fail = msgpack_pack_array(&pk, m->n_extra);
        for (size_t i = 0; !fail && i < m->n_extra; i++)
            fail = msgpack_pack_array(&pk, 2) ||
                   msgpack_pack_str_with_body(&pk, m->extra_ids[i], strlen(m->extra_ids[i])) ||
                   msgpack_pack_bin_with_body(&pk, m->extra[i], m->extra_len[i]);
    } else if (!fail && m->has_fp) {
        fail = msgpack_pack_nil(&pk);
    }
    if (!fail && m->has_fp)
        fail = msgpack_pack_bin_with_body(&pk, m->fp, PFT_SECMSG_FP_LEN);
    uint8_t sig[PFT_KEY_SIG_LEN];
    if (fail)
        rc = pft_err(PFT_ENOMEM, "secagg message: out of memory");
    else if (kp && (rc = pft_keypair_sign(kp, (const uint8_t *)sb.data, sb.size, sig)) != 0)
        rc = pft_err_wrap(rc, "secagg message: signing");
    if (rc == 0)
        rc = pft_envelope_pack((const uint8_t *)sb.data, sb.size, kp ? sig : NULL, kp ? sizeof sig : 0, buf,
                               len);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

int pft_secmsg_is(const uint8_t *buf, size_t len)
{
    pft_envelope_t env;
    if (!buf || pft_envelope_parse(buf, len, NULL, &env) != 0) {
        pft_err_clear();
        return 0;
    }
    const uint8_t *p = env.payload; /* fixarray of 7 (8 with extra, 9 with fp), then fixstr "secagg" */
    return env.payload_len >= 8 &&
           (p[0] == (0x90 | N_FIELDS) || p[0] == (0x90 | N_FIELDS_EXTRA) || p[0] == (0x90 | N_FIELDS_FP)) &&
           p[1] == (0xa0 | 6) && memcmp(p + 2, TAG, 6) == 0;
}

/* Copies a str object into out (cap bytes with the NUL); 0 if it is a str that fits. */
static int str_into(const msgpack_object *o, char *out, size_t cap)
{
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= cap || memchr(o->via.str.ptr, 0, o->via.str.size))
        return -1;
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return 0;
}

/* Bytes one decoded message needs for its id strings, pointer arrays and keys (extra: room_for_extra). */
static size_t room_for(const msgpack_object *ids, const msgpack_object *tail, int reveal)
{
    size_t n = ids->via.array.size, t = tail->via.array.size;
    size_t bytes = (n + t + 2) * sizeof(char *) + (n + t) * (PFT_BUNDLE_MAX_NAME + 1);
    return bytes + (reveal ? t * PFT_SECMSG_KEY_LEN : 0);
}

/* Bytes of the extra pairs: per pair an id pointer, a bin pointer, a length, the id and the bin. */
static size_t room_for_extra(size_t n)
{
    return (n + 1) * (2 * sizeof(char *) + sizeof(size_t)) +
           n * (PFT_BUNDLE_MAX_NAME + 1 + PFT_SECMSG_EXTRA_MAX);
}

/* The extra pairs of array o (n of them) into m, in the memory at base (room_for_extra(n) bytes). */
static int fill_extra(pft_secmsg_t *m, const msgpack_object *o, char *base)
{
    size_t n = o->via.array.size;
    const char **ids = (const char **)base;
    const uint8_t **bins = (const uint8_t **)(ids + n + 1);
    size_t *lens = (size_t *)(bins + n + 1);
    char *names = (char *)(lens + n + 1);
    uint8_t *data = (uint8_t *)(names + n * (PFT_BUNDLE_MAX_NAME + 1));
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        const msgpack_object *f =
            e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size == 2 ? e->via.array.ptr : NULL;
        char *id = names + i * (PFT_BUNDLE_MAX_NAME + 1);
        if (!f || str_into(&f[0], id, PFT_BUNDLE_MAX_NAME + 1) || f[1].type != MSGPACK_OBJECT_BIN ||
            f[1].via.bin.size < 1 || f[1].via.bin.size > PFT_SECMSG_EXTRA_MAX)
            return pft_err(PFT_EFORMAT, "secagg message: extra %zu is not [id, bin of 1..%d bytes]", i,
                           PFT_SECMSG_EXTRA_MAX);
        ids[i] = id;
        bins[i] = data + i * PFT_SECMSG_EXTRA_MAX;
        memcpy(data + i * PFT_SECMSG_EXTRA_MAX, f[1].via.bin.ptr, f[1].via.bin.size);
        lens[i] = f[1].via.bin.size;
    }
    m->has_extra = 1;
    m->n_extra = n;
    m->extra_ids = ids;
    m->extra = bins;
    m->extra_len = lens;
    return 0;
}

/* The ids, survivors and keys of fields f into m's allocation (laid out as room_for counts). */
static int fill(pft_secmsg_t *m, const msgpack_object *f, int reveal)
{
    size_t n = f[5].via.array.size, t = f[6].via.array.size;
    char **ids = (char **)(m + 1), **surv = ids + n + 1;
    char *names = (char *)(surv + t + 1);
    uint8_t(*keys)[PFT_SECMSG_KEY_LEN] =
        (uint8_t(*)[PFT_SECMSG_KEY_LEN])(names + (n + t) * (PFT_BUNDLE_MAX_NAME + 1));
    for (size_t i = 0; i < n; i++, names += PFT_BUNDLE_MAX_NAME + 1) {
        ids[i] = names;
        if (str_into(&f[5].via.array.ptr[i], ids[i], PFT_BUNDLE_MAX_NAME + 1)) {
            return pft_err(PFT_EFORMAT, "secagg message: id %zu is not a node id", i);
        }
    }
    for (size_t i = 0; i < t; i++) {
        const msgpack_object *e = &f[6].via.array.ptr[i];
        if (reveal) {
            if (e->type != MSGPACK_OBJECT_BIN || e->via.bin.size != PFT_SECMSG_KEY_LEN) {
                return pft_err(PFT_EFORMAT, "secagg message: key %zu is not a bin of %d bytes", i,
                               PFT_SECMSG_KEY_LEN);
            }
            memcpy(keys[i], e->via.bin.ptr, PFT_SECMSG_KEY_LEN);
        } else {
            surv[i] = names;
            names += PFT_BUNDLE_MAX_NAME + 1;
            if (str_into(e, surv[i], PFT_BUNDLE_MAX_NAME + 1)) {
                return pft_err(PFT_EFORMAT, "secagg message: survivor %zu is not a node id", i);
            }
        }
    }
    if (reveal && t != n)
        return pft_err(PFT_EFORMAT, "secagg message: a reveal holds %zu keys for %zu members", t, n);
    m->n_ids = n;
    m->ids = (const char *const *)ids;
    m->n_survivors = reveal ? 0 : t;
    m->survivors = (const char *const *)surv;
    m->keys = reveal ? (const uint8_t(*)[PFT_SECMSG_KEY_LEN])keys : NULL;
    return 0;
}

int pft_secmsg_decode(const uint8_t *buf, size_t len, pft_secmsg_t **out)
{
    *out = NULL;
    pft_envelope_t env;
    int rc = pft_envelope_parse(buf, len, NULL, &env);
    if (rc)
        return rc;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    rc = pft_mp_unpack(env.payload, env.payload_len, 5 * (size_t)PFT_SECMSG_MAX_IDS + 16, "secagg message",
                       &u);
    if (rc) {
        msgpack_unpacked_destroy(&u);
        return rc;
    }
    const msgpack_object *o = &u.data, *f = o->via.array.ptr;
    pft_secmsg_t *m = NULL;
    size_t nf = o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size : 0;
    /* with the fingerprint (nine), the eighth element may be nil: no extra */
    int extra = nf == N_FIELDS_EXTRA || (nf == N_FIELDS_FP && f[7].type != MSGPACK_OBJECT_NIL);
    if ((nf != N_FIELDS && nf != N_FIELDS_EXTRA && nf != N_FIELDS_FP) || f[0].type != MSGPACK_OBJECT_STR ||
        f[0].via.str.size != 6 || memcmp(f[0].via.str.ptr, TAG, 6) != 0 ||
        f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER || f[1].via.u64 < 1 || f[1].via.u64 > 5 ||
        f[5].type != MSGPACK_OBJECT_ARRAY || f[6].type != MSGPACK_OBJECT_ARRAY ||
        f[5].via.array.size > PFT_SECMSG_MAX_IDS || f[6].via.array.size > PFT_SECMSG_MAX_IDS ||
        (extra && (f[7].type != MSGPACK_OBJECT_ARRAY || f[7].via.array.size > PFT_SECMSG_MAX_IDS)) ||
        (nf == N_FIELDS_FP && (f[8].type != MSGPACK_OBJECT_BIN || f[8].via.bin.size != PFT_SECMSG_FP_LEN))) {
        rc = pft_err(PFT_EFORMAT, "secagg message: not [\"secagg\", kind 1..5, run, label, sender, [ids], "
                                  "[tail], ([extra] or nil, fingerprint bin(32))]");
        goto done;
    }
    int reveal = f[1].via.u64 == PFT_SECMSG_REVEAL;
    size_t room = room_for(&f[5], &f[6], reveal), n_extra = extra ? f[7].via.array.size : 0;
    room = (room + 15) & ~(size_t)15;
    m = pft_calloc(1, sizeof *m + room + (extra ? room_for_extra(n_extra) : 0));
    if (!m) {
        rc = pft_err(PFT_ENOMEM, "secagg message: out of memory");
        goto done;
    }
    m->kind = (pft_secmsg_kind_t)f[1].via.u64;
    if (str_into(&f[2], m->run, sizeof m->run) || str_into(&f[3], m->label, sizeof m->label) ||
        str_into(&f[4], m->sender, sizeof m->sender)) {
        rc = pft_err(PFT_EFORMAT, "secagg message: run, label or sender is not a string of its size");
        goto done;
    }
    if ((rc = fill(m, f, reveal)) != 0 || (extra && (rc = fill_extra(m, &f[7], (char *)(m + 1) + room)) != 0))
        goto done;
    if (nf == N_FIELDS_FP) {
        m->has_fp = 1;
        memcpy(m->fp, f[8].via.bin.ptr, PFT_SECMSG_FP_LEN);
    }
    if ((rc = check(m)) != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", pft_errmsg());
        rc = pft_err(PFT_EFORMAT, "%s", why);
    }
done:
    msgpack_unpacked_destroy(&u);
    if (rc)
        pft_free(m);
    else
        *out = m;
    return rc;
}

void pft_secmsg_destroy(pft_secmsg_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_free(*self_p);
    *self_p = NULL;
}

/* Adds a string to h, length-prefixed (2 bytes, little-endian). */
static void hash_str(crypto_generichash_state *h, const char *s)
{
    size_t l = strlen(s);
    uint8_t len[2] = {(uint8_t)(l & 0xff), (uint8_t)(l >> 8)};
    crypto_generichash_update(h, len, sizeof len);
    crypto_generichash_update(h, (const uint8_t *)s, l);
}

int pft_secmsg_statement(const char *run, const char *label, const uint8_t fp[PFT_SECMSG_FP_LEN],
                         const char *const *survivors, size_t n, uint8_t out[PFT_SECMSG_STATEMENT_LEN])
{
    if (strnlen(run, PFT_BUNDLE_MAX_NAME + 1) > PFT_BUNDLE_MAX_NAME ||
        strnlen(label, PFT_BUNDLE_MASK_LABEL_MAX + 1) > PFT_BUNDLE_MASK_LABEL_MAX || n > PFT_SECMSG_MAX_IDS)
        return pft_err(PFT_EINVAL, "secagg statement: run, label or survivors beyond their limits");
    for (size_t i = 0; i < n; i++)
        if (strnlen(survivors[i], PFT_BUNDLE_MAX_NAME + 1) > PFT_BUNDLE_MAX_NAME)
            return pft_err(PFT_EINVAL, "secagg statement: survivor %zu is no node id", i);
    crypto_generichash_state h;
    uint8_t count[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    crypto_generichash_init(&h, NULL, 0, 32);
    hash_str(&h, run);
    hash_str(&h, label);
    crypto_generichash_update(&h, fp, PFT_SECMSG_FP_LEN);
    crypto_generichash_update(&h, count, sizeof count);
    for (size_t i = 0; i < n; i++)
        hash_str(&h, survivors[i]);
    memcpy(out, PFT_SECMSG_STATEMENT_TAG, sizeof PFT_SECMSG_STATEMENT_TAG); /* with its NUL */
    crypto_generichash_final(&h, out + sizeof PFT_SECMSG_STATEMENT_TAG, 32);
    return 0;
}
