/* Tests of secure aggregation's control messages (wire/pft_secmsg, docs/WIRE.md §2.3): round trips of the
 * three kinds with their signatures, API refusals, hand-written hostile payloads, every truncation and every
 * bit flip, and the separation from bundles (neither decoder takes the other's messages). */
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_keys.h"
#include "pft_secmsg.h"
#include "pft_test.h"

static const char *MISSING[] = {"c03"};
static const char *SURVIVORS[] = {"c01", "c02", "c04"};
static const uint8_t KEYS[2][PFT_SECMSG_KEY_LEN] = {{1, 2, 3}, {9, 8, 7}};
static const char *TWO[] = {"c03", "c05"};

static pft_keypair_t *key(uint8_t b)
{
    uint8_t seed[PFT_KEY_SEED_LEN];
    memset(seed, b, sizeof seed);
    return pft_keypair_from_seed(seed);
}

static pft_secmsg_t msg(pft_secmsg_kind_t kind, const char *sender)
{
    pft_secmsg_t m = {.kind = kind};
    snprintf(m.run, sizeof m.run, "run-7");
    snprintf(m.label, sizeof m.label, "agg:tied");
    snprintf(m.sender, sizeof m.sender, "%s", sender);
    if (kind == PFT_SECMSG_MISSING) {
        m.n_ids = 1, m.ids = MISSING, m.n_survivors = 3, m.survivors = SURVIVORS;
    } else if (kind == PFT_SECMSG_REVEAL) {
        m.n_ids = 2, m.ids = TWO, m.keys = KEYS;
    }
    return m;
}

static void test_round_trips(void)
{
    pft_keypair_t *kp = key(5), *other = key(6);
    for (int kind = 1; kind <= 3; kind++) {
        pft_secmsg_t m = msg((pft_secmsg_kind_t)kind, kind == 2 ? "c01" : "agg");
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0);
        CHECK(pft_secmsg_is(buf, len));
        pft_secmsg_t *d = NULL;
        CHECK(pft_secmsg_decode(buf, len, &d) == 0);
        CHECK(d && d->kind == m.kind && strcmp(d->run, "run-7") == 0 && strcmp(d->label, "agg:tied") == 0);
        CHECK(d && strcmp(d->sender, m.sender) == 0 && d->n_ids == m.n_ids &&
              d->n_survivors == m.n_survivors);
        for (size_t i = 0; d && i < d->n_ids; i++)
            CHECK(strcmp(d->ids[i], m.ids[i]) == 0);
        for (size_t i = 0; d && i < d->n_survivors; i++)
            CHECK(strcmp(d->survivors[i], m.survivors[i]) == 0);
        CHECK(d && (kind == 2) == (d->keys != NULL));
        for (size_t i = 0; d && d->keys && i < d->n_ids; i++)
            CHECK(memcmp(d->keys[i], KEYS[i], PFT_SECMSG_KEY_LEN) == 0);
        /* signed by kp: verifies with its key, not with another's */
        CHECK(pft_keys_verify_message(pft_keypair_public(kp), buf, len, NULL) == 0);
        CHECK(pft_keys_verify_message(pft_keypair_public(other), buf, len, NULL) == PFT_EAUTH);
        /* canonical: the decoded message encodes to the same bytes */
        uint8_t *again = NULL;
        size_t alen = 0;
        CHECK(d && pft_secmsg_encode(d, kp, &again, &alen) == 0 && alen == len &&
              memcmp(again, buf, len) == 0);
        /* a bundle decoder refuses it, whatever it holds */
        pft_bundle_t *b = NULL;
        CHECK(pft_bundle_decode(buf, len, NULL, &b) != 0 && b == NULL);
        pft_free(again);
        pft_secmsg_destroy(&d);
        pft_secmsg_destroy(&d);
        pft_free(buf);
    }
    pft_keypair_destroy(&kp);
    pft_keypair_destroy(&other);
}

/* double masking's eighth element: a declaration with nobody missing and ciphertexts from survivors, a reveal
 * of seed shares only, each round trip canonical; a reveal naming one member both missing and surviving, an
 * extra bin too long, extra ids out of order, and extra on a done notice are refused */
static void test_extra(void)
{
    static const char *from[] = {"c01", "c04"}, *bad_order[] = {"c04", "c01"}, *none[] = {NULL};
    static const uint8_t b0[64] = {1}, b1[48] = {2}, big[PFT_SECMSG_EXTRA_MAX + 1] = {3};
    const uint8_t *bins[] = {b0, b1};
    size_t lens[] = {sizeof b0, sizeof b1};
    pft_keypair_t *kp = key(5);
    for (int kind = 1; kind <= 2; kind++) {
        pft_secmsg_t m = msg((pft_secmsg_kind_t)kind, "c02");
        m.n_ids = 0, m.ids = none;
        m.has_extra = 1, m.n_extra = 2, m.extra_ids = from, m.extra = bins, m.extra_len = lens;
        uint8_t *buf = NULL, *again = NULL;
        size_t len = 0, alen = 0;
        pft_secmsg_t *d = NULL;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0 && pft_secmsg_is(buf, len));
        CHECK(pft_secmsg_decode(buf, len, &d) == 0);
        CHECK(d && d->has_extra && d->n_extra == 2 && d->n_ids == 0 && strcmp(d->extra_ids[1], "c04") == 0);
        CHECK(d && d->extra_len[0] == 64 && d->extra_len[1] == 48 && memcmp(d->extra[1], b1, 48) == 0);
        CHECK(d && pft_secmsg_encode(d, kp, &again, &alen) == 0 && alen == len &&
              memcmp(again, buf, len) == 0);
        pft_free(buf);
        pft_free(again);
        pft_secmsg_destroy(&d);
        m.extra_ids = bad_order;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == PFT_EINVAL);
        m.extra_ids = from;
        lens[1] = sizeof big, bins[1] = big;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == PFT_EINVAL);
        lens[1] = sizeof b1, bins[1] = b1;
    }
    pft_secmsg_t r = msg(PFT_SECMSG_REVEAL, "c02"); /* c03 missing (a key) and surviving (a share) */
    static const char *c03[] = {"c03"};
    uint8_t *buf = NULL;
    size_t len = 0;
    r.n_ids = 1, r.ids = c03, r.has_extra = 1, r.n_extra = 1, r.extra_ids = c03, r.extra = bins,
    r.extra_len = lens;
    CHECK(pft_secmsg_encode(&r, kp, &buf, &len) == PFT_EINVAL);
    pft_secmsg_t dn = msg(PFT_SECMSG_DONE, "agg");
    dn.has_extra = 1;
    CHECK(pft_secmsg_encode(&dn, kp, &buf, &len) == PFT_EINVAL);
    pft_keypair_destroy(&kp);
}

/* The topology fingerprint (ninth element): round trips of every kind with and without extra (nil in its
 * place), byte-identical re-encoding, and a fingerprint that is not a bin of 32 refused. */
static void test_fingerprint(void)
{
    static const char *from[] = {"c01"}, *none[] = {NULL};
    static const uint8_t b0[64] = {1};
    const uint8_t *bins[] = {b0};
    size_t lens[] = {sizeof b0};
    pft_keypair_t *kp = key(5);
    for (int kind = 1; kind <= 3; kind++) {
        for (int with_extra = 0; with_extra <= (kind < 3); with_extra++) {
            pft_secmsg_t m = msg((pft_secmsg_kind_t)kind, "agg");
            if (with_extra)
                m.n_ids = 0, m.ids = none, m.has_extra = 1, m.n_extra = 1, m.extra_ids = from, m.extra = bins,
                m.extra_len = lens;
            m.has_fp = 1;
            for (int i = 0; i < PFT_SECMSG_FP_LEN; i++)
                m.fp[i] = (uint8_t)(7 * i + kind);
            uint8_t *buf = NULL, *again = NULL;
            size_t len = 0, alen = 0;
            pft_secmsg_t *d = NULL;
            CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0 && pft_secmsg_is(buf, len));
            CHECK(pft_secmsg_decode(buf, len, &d) == 0);
            CHECK_MSG(d && d->has_fp && memcmp(d->fp, m.fp, PFT_SECMSG_FP_LEN) == 0 &&
                          d->has_extra == with_extra && d->n_ids == m.n_ids,
                      "kind %d, extra %d", kind, with_extra);
            CHECK(d && pft_secmsg_encode(d, kp, &again, &alen) == 0 && alen == len &&
                  memcmp(again, buf, len) == 0);
            pft_free(buf);
            pft_free(again);
            pft_secmsg_destroy(&d);
        }
    }
    /* a message without one decodes with has_fp 0 (the receiver refuses it: pft_node_dropout.c) */
    pft_secmsg_t m = msg(PFT_SECMSG_DONE, "agg");
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_secmsg_t *d = NULL;
    CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0 && pft_secmsg_decode(buf, len, &d) == 0 && d &&
          !d->has_fp);
    pft_secmsg_destroy(&d);
    pft_free(buf);
    /* hand-written: nine elements whose last is a bin of 31 bytes, or a str */
    for (int bad = 0; bad < 2; bad++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 9);
        msgpack_pack_str_with_body(&pk, "secagg", 6);
        msgpack_pack_uint64(&pk, 3);
        msgpack_pack_str_with_body(&pk, "run-7", 5);
        msgpack_pack_str_with_body(&pk, "agg:tied", 8);
        msgpack_pack_str_with_body(&pk, "agg", 3);
        msgpack_pack_array(&pk, 0);
        msgpack_pack_array(&pk, 0);
        msgpack_pack_nil(&pk);
        static const uint8_t fp[32];
        if (bad == 0)
            msgpack_pack_bin_with_body(&pk, fp, 31);
        else
            msgpack_pack_str_with_body(&pk, "fingerprint-as-a-string-32bytes!", 32);
        uint8_t *env = NULL;
        size_t elen = 0;
        CHECK(pft_envelope_pack((const uint8_t *)sb.data, sb.size, NULL, 0, &env, &elen) == 0);
        CHECK_MSG(pft_secmsg_decode(env, elen, &d) == PFT_EFORMAT && !d &&
                      strstr(pft_errmsg(), "fingerprint"),
                  "bad %d: %s", bad, pft_errmsg());
        pft_free(env);
        msgpack_sbuffer_destroy(&sb);
    }
    pft_keypair_destroy(&kp);
}

static void test_api_refusals(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_secmsg_t m = msg(PFT_SECMSG_MISSING, "agg");
    static const char *unsorted[] = {"c02", "c01"}, *dup[] = {"c01", "c01"}, *overlap[] = {"c03", "c04"},
                      *ctrl[] = {"c\x01"};
    m.survivors = unsorted, m.n_survivors = 2;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL && !buf);
    m.survivors = dup;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m.survivors = overlap;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "both missing and surviving") != NULL);
    m.survivors = ctrl, m.n_survivors = 1;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_MISSING, "agg");
    m.n_survivors = 0;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_REVEAL, "c01");
    m.keys = NULL;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_DONE, "agg");
    m.n_ids = 1, m.ids = MISSING;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_DONE, "agg");
    m.kind = 6;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_DONE, "");
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m = msg(PFT_SECMSG_DONE, "agg");
    m.label[0] = '\0';
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    CHECK(buf == NULL);
}

/* The consistency round's messages: a SIGN (a declaration restated with its sender's signature) and
 * SIGNATURES round trip; malformed ones are refused; the signed statement changes with every field it covers
 * and with the survivor set, and only with them. */
static void test_consistency(void)
{
    static const char *surv[] = {"c01", "c02", "c04"}, *other[] = {"c01", "c02"}, *miss[] = {"c03"},
                      *signers[] = {"c01", "c02", "c04"};
    static const uint8_t sig[3][64] = {{1}, {2}, {3}};
    const uint8_t *bins[] = {sig[0], sig[1], sig[2]};
    size_t lens[] = {64, 64, 64};
    pft_secmsg_t m = msg(PFT_SECMSG_SIGN, "c02");
    m.n_ids = 1, m.ids = miss, m.n_survivors = 3, m.survivors = surv;
    m.has_extra = 1, m.n_extra = 1, m.extra_ids = signers + 1, m.extra = bins + 1, m.extra_len = lens;
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_secmsg_t *d = NULL;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == 0 && pft_secmsg_decode(buf, len, &d) == 0);
    CHECK(d && d->kind == PFT_SECMSG_SIGN && d->n_survivors == 3 && strcmp(d->survivors[2], "c04") == 0 &&
          d->n_ids == 1 && d->n_extra == 1 && memcmp(d->extra[0], sig[1], 64) == 0);
    pft_secmsg_destroy(&d);
    pft_free(buf);
    m.extra_ids = signers; /* another's signature */
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL && strstr(pft_errmsg(), "its sender's"));
    m.extra_ids = signers + 1, m.n_extra = 2;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL);
    m.n_extra = 1, lens[0] = 63;
    CHECK(pft_secmsg_encode(&m, NULL, &buf, &len) == PFT_EINVAL && strstr(pft_errmsg(), "not 64"));
    lens[0] = 64;
    pft_secmsg_t f = msg(PFT_SECMSG_SIGNATURES, "agg");
    f.has_extra = 1, f.n_extra = 3, f.extra_ids = signers, f.extra = bins, f.extra_len = lens;
    CHECK(pft_secmsg_encode(&f, NULL, &buf, &len) == 0 && pft_secmsg_decode(buf, len, &d) == 0);
    CHECK(d && d->kind == PFT_SECMSG_SIGNATURES && d->n_extra == 3 && d->n_ids == 0 && d->n_survivors == 0 &&
          memcmp(d->extra[2], sig[2], 64) == 0);
    pft_secmsg_destroy(&d);
    pft_free(buf);
    f.n_survivors = 2, f.survivors = other; /* signatures carry nothing else */
    CHECK(pft_secmsg_encode(&f, NULL, &buf, &len) == PFT_EINVAL);
    f.n_survivors = 0, f.n_extra = 0;
    CHECK(pft_secmsg_encode(&f, NULL, &buf, &len) == PFT_EINVAL);
    uint8_t fp[32] = {9}, a[PFT_SECMSG_STATEMENT_LEN], b[PFT_SECMSG_STATEMENT_LEN];
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, surv, 3, a) == 0);
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, surv, 3, b) == 0 && memcmp(a, b, sizeof a) == 0);
    CHECK(a[0] == 'p' && memcmp(a, PFT_SECMSG_STATEMENT_TAG, sizeof PFT_SECMSG_STATEMENT_TAG) == 0);
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, other, 2, b) == 0 && memcmp(a, b, sizeof a) != 0);
    CHECK(pft_secmsg_statement("run2", "agg:tied", fp, surv, 3, b) == 0 && memcmp(a, b, sizeof a) != 0);
    CHECK(pft_secmsg_statement("run", "agg:full", fp, surv, 3, b) == 0 && memcmp(a, b, sizeof a) != 0);
    fp[31] = 1;
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, surv, 3, b) == 0 && memcmp(a, b, sizeof a) != 0);
    static const char *glued[] = {"c01c02", "c04"}; /* lengths prefixed: no two lists hash alike */
    fp[31] = 0;
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, glued, 2, b) == 0 && memcmp(a, b, sizeof a) != 0);
    /* another order of the same set, or the set with a duplicate: another statement (the canonical order is
     * the caller's: the decoder's strictly ascending survivors, the opener's sorted ids) */
    static const char *swapped[] = {"c02", "c01", "c04"}, *twice[] = {"c01", "c01", "c02", "c04"};
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, swapped, 3, b) == 0 && memcmp(a, b, sizeof a) != 0);
    CHECK(pft_secmsg_statement("run", "agg:tied", fp, twice, 4, b) == 0 && memcmp(a, b, sizeof a) != 0);
    /* a run and label glued differently: lengths prefixed */
    CHECK(pft_secmsg_statement("runa", "gg:tied", fp, surv, 3, b) == 0 && memcmp(a, b, sizeof a) != 0);
    /* a statement signed verifies only as itself */
    pft_keypair_t *kp = key(3);
    uint8_t s[PFT_KEY_SIG_LEN];
    CHECK(kp && pft_keypair_sign(kp, a, sizeof a, s) == 0);
    CHECK(pft_pubkey_verify(pft_keypair_public(kp), a, sizeof a, s, sizeof s) == 0);
    CHECK(pft_pubkey_verify(pft_keypair_public(kp), b, sizeof b, s, sizeof s) != 0);
    pft_keypair_destroy(&kp);
}

/* A consistency message packed by hand (nine elements, no checks): kind, survivors surv[0..ns) (a SIGN's),
 * and n pairs [signers[i], bin of lens[i] bytes], each an array of pair_len elements (2 is the wire's). */
static int hostile_sigs(uint64_t kind, const char *const *surv, size_t ns, const char *const *signers,
                        const size_t *lens, size_t n, int pair_len, uint8_t **buf, size_t *len)
{
    static const uint8_t zeros[200], fp[32];
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 9);
    msgpack_pack_str_with_body(&pk, "secagg", 6);
    msgpack_pack_uint64(&pk, kind);
    msgpack_pack_str_with_body(&pk, "r", 1);
    msgpack_pack_str_with_body(&pk, "l", 1);
    const char *sender = kind == PFT_SECMSG_SIGN ? signers[0] : "agg"; /* a SIGN's sender is its signer */
    msgpack_pack_str_with_body(&pk, sender, strlen(sender));
    msgpack_pack_array(&pk, 0);
    msgpack_pack_array(&pk, ns);
    for (size_t i = 0; i < ns; i++)
        msgpack_pack_str_with_body(&pk, surv[i], strlen(surv[i]));
    msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n; i++) {
        msgpack_pack_array(&pk, (size_t)pair_len);
        msgpack_pack_str_with_body(&pk, signers[i], strlen(signers[i]));
        msgpack_pack_bin_with_body(&pk, zeros, lens[i]);
        for (int k = 2; k < pair_len; k++)
            msgpack_pack_nil(&pk);
    }
    msgpack_pack_bin_with_body(&pk, fp, sizeof fp);
    int rc = pft_envelope_pack((const uint8_t *)sb.data, sb.size, NULL, 0, buf, len);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Forged SIGN and SIGNATURES payloads (an opener or member that does not use the encoder): duplicate or
 * unordered signers, signatures of the wrong length, pairs of the wrong shape, a SIGN with two signatures,
 * SIGNATURES with none, a signer that is no node id; every one refused by the decoder with its reason. */
static void test_consistency_hostile(void)
{
    static const char *dup[] = {"c01", "c01", "c02"}, *desc[] = {"c02", "c01"}, *one[] = {"c01", "c02"},
                      *ctl[] = {"c\x01"}, *surv[] = {"c01", "c02"}, *empty[] = {"c01"};
    static const char *lng[] = {"c0123456789012345678901234567890123456789012345678901234567890123"};
    size_t l64[] = {64, 64, 64}, l63[] = {63}, l65[] = {65}, l129[] = {129};
    struct {
        const char *name;
        uint64_t kind;
        const char *const *surv, *const *signers;
        size_t ns, n;
        const size_t *lens;
        int pair_len;
        const char *why;
    } cases[] = {
        {"duplicate signers", 5, NULL, dup, 0, 3, l64, 2, "not strictly ascending"},
        {"signers descending", 5, NULL, desc, 0, 2, l64, 2, "not strictly ascending"},
        {"a signature of 63 bytes", 5, NULL, one, 0, 1, l63, 2, "is 63 bytes, not 64"},
        {"a signature of 65 bytes", 5, NULL, one, 0, 1, l65, 2, "is 65 bytes, not 64"},
        {"a signature of 129 bytes", 5, NULL, one, 0, 1, l129, 2, "bin of 1..128"},
        {"a pair of three", 5, NULL, one, 0, 1, l64, 3, "is not [id, bin"},
        {"no signature", 5, NULL, empty, 0, 0, l64, 2, "signatures carry 1.."},
        {"survivors in signatures", 5, surv, one, 2, 1, l64, 2, "signatures carry 1.."},
        {"a sign with two", 4, surv, one, 2, 2, l64, 2, "with one signature"},
        {"a sign without survivors", 4, NULL, one, 0, 1, l64, 2, "1.. survivors"},
        {"a signer with a control byte", 5, NULL, ctl, 0, 1, l64, 2, "without control bytes"},
        {"a signer of 65 bytes", 5, NULL, lng, 0, 1, l64, 2, "is not [id, bin"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(hostile_sigs(cases[i].kind, cases[i].surv, cases[i].ns, cases[i].signers, cases[i].lens,
                           cases[i].n, cases[i].pair_len, &buf, &len) == 0);
        pft_secmsg_t *d = NULL;
        CHECK_MSG(pft_secmsg_decode(buf, len, &d) == PFT_EFORMAT && !d, "%s: decoded", cases[i].name);
        CHECK_MSG(strstr(pft_errmsg(), cases[i].why) != NULL, "%s: %s", cases[i].name, pft_errmsg());
        pft_secmsg_destroy(&d);
        pft_free(buf);
    }
}

/* The decoder's bounds on SIGNATURES: 4096 signers (PFT_SECMSG_MAX_IDS) decode, 4097 are refused. */
static void test_consistency_bounds(void)
{
    enum { MAXN = PFT_SECMSG_MAX_IDS + 1 };
    char(*names)[8] = pft_alloc_array(MAXN, sizeof *names);
    const char **ids = pft_alloc_array(MAXN, sizeof *ids);
    size_t *lens = pft_alloc_array(MAXN, sizeof *lens);
    CHECK(names && ids && lens);
    for (size_t i = 0; names && ids && lens && i < MAXN; i++) {
        snprintf(names[i], sizeof names[i], "s%05zu", i);
        ids[i] = names[i], lens[i] = PFT_SECMSG_SIG_LEN;
    }
    for (size_t n = MAXN - 1; names && ids && lens && n <= MAXN; n++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        pft_secmsg_t *d = NULL;
        CHECK(hostile_sigs(5, NULL, 0, ids, lens, n, 2, &buf, &len) == 0);
        int rc = pft_secmsg_decode(buf, len, &d);
        CHECK_MSG(n < MAXN ? rc == 0 && d && d->n_extra == n : rc != 0 && !d, "%zu signers: %d", n, rc);
        pft_secmsg_destroy(&d);
        pft_free(buf);
    }
    pft_free(names);
    pft_free(ids);
    pft_free(lens);
}

/* An envelope around a payload packed by hand: n fields, with the given kind and tail. */
static int hostile(int n_fields, const char *tag, uint64_t kind, int tail_kind, uint8_t **buf, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, (size_t)n_fields);
    msgpack_pack_str_with_body(&pk, tag, strlen(tag));
    msgpack_pack_uint64(&pk, kind);
    msgpack_pack_str_with_body(&pk, "r", 1);
    msgpack_pack_str_with_body(&pk, "l", 1);
    msgpack_pack_str_with_body(&pk, "agg", 3);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_str_with_body(&pk, "c03", 3);
    if (tail_kind == 0) { /* a key of 31 bytes */
        msgpack_pack_array(&pk, 1);
        msgpack_pack_bin_with_body(&pk, KEYS[0], 31);
    } else if (tail_kind == 1) { /* two keys for one id */
        msgpack_pack_array(&pk, 2);
        msgpack_pack_bin_with_body(&pk, KEYS[0], 32);
        msgpack_pack_bin_with_body(&pk, KEYS[1], 32);
    } else { /* a survivor that is also missing */
        msgpack_pack_array(&pk, 1);
        msgpack_pack_str_with_body(&pk, "c03", 3);
    }
    for (int i = 7; i < n_fields; i++)
        msgpack_pack_nil(&pk);
    int rc = pft_envelope_pack((const uint8_t *)sb.data, sb.size, NULL, 0, buf, len);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void test_hostile(void)
{
    struct {
        int n;
        const char *tag;
        uint64_t kind;
        int tail;
        const char *why;
    } cases[] = {
        {7, "secagg", 2, 0, "not a bin of 32"},
        {7, "secagg", 2, 1, "2 keys for 1"},
        {7, "secagg", 1, 2, "both missing and surviving"},
        {7, "secagg", 6, 2, "kind 1..5"},
        {7, "secagg", 0, 2, "kind 1..5"},
        {8, "secagg", 1, 2, "[ids], [tail]"},
        {7, "secagh", 1, 2, "\"secagg\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(hostile(cases[i].n, cases[i].tag, cases[i].kind, cases[i].tail, &buf, &len) == 0);
        pft_secmsg_t *d = NULL;
        CHECK_MSG(pft_secmsg_decode(buf, len, &d) == PFT_EFORMAT && !d, "case %zu", i);
        CHECK_MSG(strstr(pft_errmsg(), cases[i].why) != NULL, "case %zu: %s", i, pft_errmsg());
        pft_free(buf);
    }
}

/* Every proper prefix is refused; every single bit flip either decodes to a message that passes the checks
 * again (re-encodes without error) or is refused: nothing in between, no crash (ASan). */
static void test_truncations_and_flips(void)
{
    pft_keypair_t *kp = key(5);
    for (int kind = 1; kind <= 3; kind++) {
        pft_secmsg_t m = msg((pft_secmsg_kind_t)kind, "agg");
        uint8_t *buf = NULL, *re = NULL;
        size_t len = 0, rlen = 0;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0);
        size_t prefixes_ok = 0, decoded = 0, refused = 0, bad = 0;
        for (size_t n = 0; n < len; n++) {
            pft_secmsg_t *d = NULL;
            prefixes_ok += pft_secmsg_decode(buf, n, &d) == 0;
            pft_secmsg_destroy(&d);
        }
        for (size_t bit = 0; bit < 8 * len; bit++) {
            buf[bit / 8] ^= (uint8_t)(1u << bit % 8);
            pft_secmsg_t *d = NULL;
            if (pft_secmsg_decode(buf, len, &d) == 0) {
                decoded++;
                bad += pft_secmsg_encode(d, NULL, &re, &rlen) != 0;
                pft_free(re);
                re = NULL;
            } else {
                refused++;
            }
            pft_secmsg_destroy(&d);
            buf[bit / 8] ^= (uint8_t)(1u << bit % 8);
        }
        CHECK(prefixes_ok == 0);
        CHECK(bad == 0 && refused > 0 && decoded + refused == 8 * len);
        fprintf(stderr, "  kind %d: %zu bytes, %zu prefixes refused, %zu flips: %zu refused, %zu decode\n",
                kind, len, len, 8 * len, refused, decoded);
        pft_free(buf);
    }
    pft_keypair_destroy(&kp);
}

/* A bundle is not a secagg message, and garbage is neither. */
static void test_separation(void)
{
    pft_bundle_t *b = pft_bundle_new("run-7", "agg", PFT_DTYPE_F32, 4);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(b && pft_bundle_encode(b, &buf, &len) == 0);
    CHECK(!pft_secmsg_is(buf, len));
    pft_secmsg_t *d = NULL;
    CHECK(pft_secmsg_decode(buf, len, &d) != 0 && !d);
    CHECK(!pft_secmsg_is((const uint8_t *)"garbage", 7) && !pft_secmsg_is(NULL, 0));
    pft_free(buf);
    pft_bundle_destroy(&b);
}

int main(void)
{
    RUN(test_round_trips);
    RUN(test_extra);
    RUN(test_fingerprint);
    RUN(test_api_refusals);
    RUN(test_hostile);
    RUN(test_consistency);
    RUN(test_consistency_hostile);
    RUN(test_consistency_bounds);
    RUN(test_truncations_and_flips);
    RUN(test_separation);
    return pft_test_done();
}
