/* Tests of pft_keys: Ed25519 keypairs, key files (formats, permissions, no overwrite), signatures over
 * bundle payloads, and the X25519 keys derived for CURVE. */
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_keys.h"
#include "pft_test.h"
#include "pft_test_stats.h"
#include "pft_topo.h"

static char s_dir[256];

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", s_dir, name);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    CHECK(chmod(path, mode) == 0);
}

static int from_hex(const char *hex, uint8_t *out, size_t n)
{
    size_t got = 0;
    return sodium_hex2bin(out, n, hex, strlen(hex), NULL, &got, NULL) == 0 && got == n;
}

/* RFC 8032 section 7.1, test 1 (empty message): we really do Ed25519. */
static void test_rfc8032_vector(void)
{
    uint8_t seed[32], pk[32], sig[64], mine[64];
    CHECK(from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", seed, 32));
    CHECK(from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", pk, 32));
    CHECK(from_hex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b4"
        "6bd25bf5f0595bbe24655141438e7a100b",
        sig, 64));
    pft_keypair_t *kp = pft_keypair_from_seed(seed);
    CHECK(kp != NULL);
    CHECK(memcmp(pft_keypair_public(kp)->bytes, pk, 32) == 0);
    CHECK(pft_keypair_sign(kp, (const uint8_t *)"", 0, mine) == 0);
    CHECK(memcmp(mine, sig, 64) == 0);
    CHECK(pft_pubkey_verify(pft_keypair_public(kp), (const uint8_t *)"", 0, sig, 64) == 0);
    pft_keypair_destroy(&kp);
    CHECK(kp == NULL);
    pft_keypair_destroy(&kp); /* safe twice */
}

/* Sign/verify; every single-bit flip of the message or of the signature fails; so does another key. */
static void test_sign_verify_bit_flips(void)
{
    pft_keypair_t *a = pft_keypair_generate(), *b = pft_keypair_generate();
    CHECK(a && b);
    CHECK(!pft_pubkey_equal(pft_keypair_public(a), pft_keypair_public(b)));
    uint8_t msg[48], sig[64];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 37 + 5);
    CHECK(pft_keypair_sign(a, msg, sizeof msg, sig) == 0);
    const pft_pubkey_t *pa = pft_keypair_public(a);
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg, sig, sizeof sig) == 0);
    int accepted = 0;
    for (size_t bit = 0; bit < 8 * sizeof msg; bit++) {
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted += pft_pubkey_verify(pa, msg, sizeof msg, sig, sizeof sig) != PFT_EAUTH;
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    for (size_t bit = 0; bit < 8 * sizeof sig; bit++) {
        sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        accepted += pft_pubkey_verify(pa, msg, sizeof msg, sig, sizeof sig) != PFT_EAUTH;
        sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK_MSG(accepted == 0, "%d flipped inputs were not refused", accepted);
    CHECK(pft_pubkey_verify(pft_keypair_public(b), msg, sizeof msg, sig, sizeof sig) == PFT_EAUTH);
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg - 1, sig, sizeof sig) == PFT_EAUTH);
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg, sig, 63) == PFT_EAUTH);
    /* an Ed25519 signature is exactly 64 bytes (RFC 8032 §5.1.6): a valid one with a byte appended is
     * refused, else one message would have many accepted signature fields (trailing bytes never checked) */
    uint8_t longer[65];
    memcpy(longer, sig, sizeof sig);
    longer[64] = 0x5a;
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg, longer, sizeof longer) == PFT_EAUTH);
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg, NULL, 0) == PFT_EAUTH);
    CHECK(pft_pubkey_verify(pa, msg, sizeof msg, sig, sizeof sig) == 0);
    pft_keypair_destroy(&a);
    pft_keypair_destroy(&b);
}

/* The X25519 keys derived for CURVE are a keypair (scalarmult_base(secret) = public), the public one is
 * what a peer derives from our Ed25519 public key, and two derived keypairs agree on a shared secret. */
static void test_curve_derivation(void)
{
    for (int t = 0; t < 20; t++) {
        pft_keypair_t *a = pft_keypair_generate(), *b = pft_keypair_generate();
        uint8_t apk[32], ask[32], bpk[32], bsk[32], check[32], from_pub[32];
        CHECK(pft_keypair_curve(a, apk, ask) == 0 && pft_keypair_curve(b, bpk, bsk) == 0);
        CHECK(crypto_scalarmult_base(check, ask) == 0 && memcmp(check, apk, 32) == 0);
        CHECK(pft_pubkey_curve(pft_keypair_public(a), from_pub) == 0 && memcmp(from_pub, apk, 32) == 0);
        uint8_t s1[32], s2[32];
        CHECK(crypto_scalarmult(s1, ask, bpk) == 0 && crypto_scalarmult(s2, bsk, apk) == 0);
        CHECK(memcmp(s1, s2, 32) == 0);
        CHECK(memcmp(apk, pft_keypair_public(a)->bytes, 32) != 0); /* a different encoding of another curve */
        pft_keypair_destroy(&a);
        pft_keypair_destroy(&b);
    }
}

static void test_fingerprint_and_text(void)
{
    uint8_t seed[32] = {1};
    pft_keypair_t *a = pft_keypair_from_seed(seed), *a2 = pft_keypair_from_seed(seed);
    seed[0] = 2;
    pft_keypair_t *b = pft_keypair_from_seed(seed);
    char fa[17], fa2[17], fb[17];
    pft_pubkey_fingerprint(pft_keypair_public(a), fa);
    pft_pubkey_fingerprint(pft_keypair_public(a2), fa2);
    pft_pubkey_fingerprint(pft_keypair_public(b), fb);
    CHECK(strlen(fa) == 16 && strspn(fa, "0123456789abcdef") == 16);
    CHECK(strcmp(fa, fa2) == 0 && strcmp(fa, fb) != 0);
    char text[PFT_KEY_TEXT_MAX];
    CHECK(pft_pubkey_format(pft_keypair_public(a), "node-a", text, sizeof text) == 0);
    CHECK(strncmp(text, PFT_KEY_PUBLIC_PREFIX, strlen(PFT_KEY_PUBLIC_PREFIX)) == 0);
    CHECK(strlen(text) == strlen(PFT_KEY_PUBLIC_PREFIX) + 44 + 1 + 6);
    pft_pubkey_t k;
    CHECK(pft_pubkey_parse(text, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(a)));
    CHECK(pft_pubkey_resolve(text, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(a)));
    CHECK(pft_pubkey_format(pft_keypair_public(a), NULL, text, sizeof text) == 0);
    CHECK(pft_pubkey_parse(text, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(a)));
    CHECK(pft_pubkey_format(pft_keypair_public(a), NULL, text, 20) == PFT_EINVAL);
    CHECK(pft_pubkey_format(pft_keypair_public(a), "bad\ncomment", text, sizeof text) == PFT_EINVAL);
    CHECK(pft_pubkey_format(pft_keypair_public(a), "", text, sizeof text) == PFT_EINVAL);
    pft_keypair_destroy(&a);
    pft_keypair_destroy(&a2);
    pft_keypair_destroy(&b);
}

/* keygen's files: round trip, modes, no overwrite without force, atomic replace with force. */
static void test_file_round_trip(void)
{
    char sec[300], pub[300];
    path_in(sec, sizeof sec, "a.key");
    path_in(pub, sizeof pub, "a.pub");
    mode_t old = umask(022);
    pft_keypair_t *kp = pft_keypair_generate();
    CHECK(pft_keypair_save(kp, sec, pub, "a", 0) == 0);
    struct stat st;
    CHECK(stat(sec, &st) == 0 && (st.st_mode & 07777) == 0600);
    CHECK(stat(pub, &st) == 0 && (st.st_mode & 07777) == 0644);
    pft_keypair_t *back = NULL;
    CHECK_MSG(pft_keypair_load(sec, &back) == 0, "%s", pft_errmsg());
    CHECK(back && pft_pubkey_equal(pft_keypair_public(back), pft_keypair_public(kp)));
    uint8_t m[3] = {1, 2, 3}, s1[64], s2[64];
    if (back) {
        CHECK(pft_keypair_sign(kp, m, 3, s1) == 0 && pft_keypair_sign(back, m, 3, s2) == 0);
        CHECK(memcmp(s1, s2, 64) == 0); /* the same secret */
    }
    pft_pubkey_t k;
    CHECK(pft_pubkey_load(pub, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(kp)));
    CHECK(pft_pubkey_resolve(pub, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(kp)));

    /* no overwrite without force: both files untouched */
    pft_keypair_t *other = pft_keypair_generate();
    CHECK(pft_keypair_save(other, sec, pub, "a", 0) == PFT_EIO);
    CHECK(strstr(pft_errmsg(), "exists") && strstr(pft_errmsg(), "--force"));
    char pub2[300];
    path_in(pub2, sizeof pub2, "fresh.pub");
    CHECK(pft_keypair_save(other, sec, pub2, NULL, 0) == PFT_EIO); /* secret exists: nothing written */
    CHECK(access(pub2, F_OK) != 0);
    pft_keypair_destroy(&back);
    CHECK(pft_keypair_load(sec, &back) == 0 &&
          pft_pubkey_equal(pft_keypair_public(back), pft_keypair_public(kp)));
    pft_keypair_destroy(&back);

    /* force replaces both, atomically, with the right modes; no temporary file left behind */
    CHECK(chmod(sec, 0400) == 0);
    CHECK(pft_keypair_save(other, sec, pub, "a", 1) == 0);
    CHECK(stat(sec, &st) == 0 && (st.st_mode & 07777) == 0600);
    CHECK(pft_keypair_load(sec, &back) == 0 &&
          pft_pubkey_equal(pft_keypair_public(back), pft_keypair_public(other)));
    CHECK(pft_pubkey_load(pub, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(other)));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", s_dir);
    FILE *p = popen(cmd, "r");
    int n_tmp = -1;
    if (p) {
        CHECK(fscanf(p, "%d", &n_tmp) == 1);
        pclose(p);
    }
    CHECK(n_tmp == 0);

    /* a public file only */
    CHECK(pft_keypair_save(kp, NULL, pub2, NULL, 0) == 0 && pft_pubkey_load(pub2, &k) == 0);
    CHECK(pft_keypair_save(kp, NULL, pub2, "bad\tcomment", 1) == PFT_EINVAL);
    pft_keypair_destroy(&back);
    pft_keypair_destroy(&other);
    pft_keypair_destroy(&kp);
    umask(old);
}

/* A secret key file readable or writable by group or others is refused, with ssh-like advice. */
static void test_secret_permissions(void)
{
    char sec[300];
    path_in(sec, sizeof sec, "perm.key");
    pft_keypair_t *kp = pft_keypair_generate(), *back = NULL;
    CHECK(pft_keypair_save(kp, sec, NULL, NULL, 0) == 0);
    const mode_t bad[] = {0644, 0640, 0604, 0660, 0602, 0610};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(chmod(sec, bad[i]) == 0);
        CHECK(pft_keypair_load(sec, &back) == PFT_EAUTH && back == NULL);
        CHECK_MSG(strstr(pft_errmsg(), "too open") && strstr(pft_errmsg(), "chmod 600"), "%s", pft_errmsg());
    }
    char want[32];
    CHECK(chmod(sec, 0644) == 0);
    pft_keypair_load(sec, &back);
    snprintf(want, sizeof want, "permissions 0644");
    CHECK_MSG(strstr(pft_errmsg(), want) != NULL, "%s", pft_errmsg());
    const mode_t good[] = {0600, 0400};
    for (size_t i = 0; i < 2; i++) {
        CHECK(chmod(sec, good[i]) == 0);
        CHECK(pft_keypair_load(sec, &back) == 0 && back);
        pft_keypair_destroy(&back);
    }
    /* not a regular file, missing */
    CHECK(pft_keypair_load(s_dir, &back) == PFT_EIO);
    char missing[300];
    path_in(missing, sizeof missing, "missing.key");
    CHECK(pft_keypair_load(missing, &back) == PFT_EIO);
    pft_keypair_destroy(&kp);
}

/* Public key lines that must be refused, and why. */
static void test_public_formats(void)
{
    uint8_t seed[32] = {7};
    pft_keypair_t *kp = pft_keypair_from_seed(seed);
    char good[PFT_KEY_TEXT_MAX], line[600];
    CHECK(pft_pubkey_format(pft_keypair_public(kp), NULL, good, sizeof good) == 0);
    const char *b64 = good + strlen(PFT_KEY_PUBLIC_PREFIX);
    pft_pubkey_t k;
    struct {
        const char *fmt;
        int rc;
    } cases[] = {
        {"", PFT_EFORMAT},
        {"%s\n", 0},                                /* one trailing newline */
        {"%s\n\n", PFT_EFORMAT},                    /* a second line */
        {"%s\r\n", PFT_EFORMAT},                    /* CR */
        {"%s ", PFT_EFORMAT},                       /* a space and no comment */
        {"%s  two", PFT_EFORMAT},                   /* two spaces */
        {"%s a comment with spaces", 0},            /* a comment */
        {"%s a\tb", PFT_EFORMAT},                   /* control byte in the comment */
        {" %s", PFT_EFORMAT},                       /* leading space */
        {"pftnet-ed25519-secret %s", PFT_EFORMAT},  /* the other kind */
        {"PFTNET-ED25519-PUBLIC %s", PFT_EFORMAT},  /* case matters */
        {"pftnet-ed25519-public  %s", PFT_EFORMAT}, /* two spaces after the prefix */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *arg = i >= 9 ? b64 : good;
        snprintf(line, sizeof line, cases[i].fmt, arg);
        int rc = pft_pubkey_parse(line, &k);
        CHECK_MSG(rc == cases[i].rc, "case %zu '%s': rc %d (%s)", i, line, rc, pft_errmsg());
    }
    /* base64 body faults */
    char body[64];
    const char *bodies[] = {
        "AAAA",                                             /* too short */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", /* 48: too long */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA*",     /* bad character */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",     /* 44 characters without padding: 33 bytes */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",     /* 31 bytes */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        snprintf(line, sizeof line, "%s%s", PFT_KEY_PUBLIC_PREFIX, bodies[i]);
        CHECK_MSG(pft_pubkey_parse(line, &k) == PFT_EFORMAT, "body %zu", i);
    }
    /* non-canonical: the character before '=' carries 2 bits of the last byte and 4 that must be 0 */
    snprintf(body, sizeof body, "%.44s", b64);
    CHECK(body[43] == '=');
    const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int v = (int)(strchr(alpha, body[42]) - alpha);
    body[42] = alpha[v ^ 1];
    snprintf(line, sizeof line, "%s%s", PFT_KEY_PUBLIC_PREFIX, body);
    CHECK(pft_pubkey_parse(line, &k) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "canonical") != NULL);
    /* 32 bytes that are no usable key: the identity point (small order), and a y with no x */
    uint8_t raw[32] = {1};
    char enc[64];
    sodium_bin2base64(enc, sizeof enc, raw, 32, sodium_base64_VARIANT_ORIGINAL);
    snprintf(line, sizeof line, "%s%s", PFT_KEY_PUBLIC_PREFIX, enc);
    CHECK(pft_pubkey_parse(line, &k) == PFT_EINVAL);
    CHECK(strstr(pft_errmsg(), "not a usable") != NULL);
    int found_off_curve = 0;
    for (int y = 2; y < 200 && !found_off_curve; y++) {
        memset(raw, 0, 32);
        raw[0] = (uint8_t)y;
        uint8_t x[32];
        if (crypto_sign_ed25519_pk_to_curve25519(x, raw) == 0)
            continue;
        sodium_bin2base64(enc, sizeof enc, raw, 32, sodium_base64_VARIANT_ORIGINAL);
        snprintf(line, sizeof line, "%s%s", PFT_KEY_PUBLIC_PREFIX, enc);
        CHECK(pft_pubkey_parse(line, &k) == PFT_EINVAL);
        found_off_curve = 1;
    }
    CHECK(found_off_curve);
    /* files: the same rules, plus size and NUL bytes */
    char path[300];
    path_in(path, sizeof path, "bad.pub");
    snprintf(line, sizeof line, "%s\n", good);
    write_text(path, line, 0644);
    CHECK(pft_pubkey_load(path, &k) == 0 && pft_pubkey_equal(&k, pft_keypair_public(kp)));
    CHECK(pft_pubkey_resolve("", &k) == PFT_EINVAL);
    write_text(path, "pftnet-ed25519-public\n", 0644);
    CHECK(pft_pubkey_load(path, &k) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), path) != NULL);
    FILE *f = fopen(path, "wb");
    fwrite(good, 1, strlen(good), f);
    fputc('\0', f);
    fclose(f);
    CHECK(pft_pubkey_load(path, &k) == PFT_EFORMAT);
    f = fopen(path, "wb");
    for (int i = 0; i < 5000; i++)
        fputc('A', f);
    fclose(f);
    CHECK(pft_pubkey_load(path, &k) == PFT_EFORMAT);
    CHECK(pft_pubkey_load(s_dir, &k) == PFT_EIO);
    char missing[300];
    path_in(missing, sizeof missing, "nope.pub");
    CHECK(pft_pubkey_resolve(missing, &k) == PFT_EIO);
    pft_keypair_destroy(&kp);
}

/* Secret key files: the public prefix, a corrupted public half, bad base64 are refused. */
static void test_secret_formats(void)
{
    uint8_t seed[32] = {9};
    pft_keypair_t *kp = pft_keypair_from_seed(seed), *back = NULL;
    char sec[300], text[400];
    path_in(sec, sizeof sec, "fmt.key");
    CHECK(pft_keypair_save(kp, sec, NULL, "x", 0) == 0);
    FILE *f = fopen(sec, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    CHECK(n > strlen(PFT_KEY_SECRET_PREFIX) &&
          memcmp(text, PFT_KEY_SECRET_PREFIX, strlen(PFT_KEY_SECRET_PREFIX)) == 0);
    CHECK(n == strlen(PFT_KEY_SECRET_PREFIX) + 88 + 2 + 1);
    /* flip one base64 character of the public half (chars 44..85 of the body): "corrupted" */
    char bad[400];
    snprintf(bad, sizeof bad, "%s", text);
    char *c = bad + strlen(PFT_KEY_SECRET_PREFIX) + 60;
    *c = *c == 'A' ? 'B' : 'A';
    write_text(sec, bad, 0600);
    CHECK(pft_keypair_load(sec, &back) == PFT_EFORMAT && back == NULL);
    CHECK_MSG(strstr(pft_errmsg(), "corrupted") != NULL, "%s", pft_errmsg());
    /* a public key file given as secret key */
    char pubtext[PFT_KEY_TEXT_MAX];
    CHECK(pft_pubkey_format(pft_keypair_public(kp), NULL, pubtext, sizeof pubtext) == 0);
    write_text(sec, pubtext, 0600);
    CHECK(pft_keypair_load(sec, &back) == PFT_EFORMAT);
    CHECK(strstr(pft_errmsg(), "does not start with") != NULL);
    /* truncated body */
    snprintf(bad, sizeof bad, "%.*s\n", (int)strlen(PFT_KEY_SECRET_PREFIX) + 87, text);
    write_text(sec, bad, 0600);
    CHECK(pft_keypair_load(sec, &back) == PFT_EFORMAT);
    /* the original loads again; messages never print key material */
    write_text(sec, text, 0600);
    CHECK(pft_keypair_load(sec, &back) == 0 && back);
    CHECK(pft_pubkey_equal(pft_keypair_public(back), pft_keypair_public(kp)));
    pft_keypair_destroy(&back);
    pft_keypair_destroy(&kp);
}

static pft_bundle_t *small_bundle(const char *producer, uint64_t n)
{
    pft_bundle_t *b = pft_bundle_new("run1", producer, PFT_DTYPE_F16, 3);
    pft_gmm_t *g = pft_gmm_new(1, 3, PFT_COV_DIAG);
    double w = 1, mu[3] = {0.5, -1, 2}, var[3] = {1, 0.25, 4};
    CHECK(b && g && pft_gmm_set_params(g, &w, mu, var) == 0);
    CHECK(pft_bundle_add_class(b, 0, n, &g) == 0);
    CHECK(pft_bundle_prov_add(b, producer, 0, n) == 0);
    uint8_t parent[PFT_BUNDLE_ID_LEN] = {42};
    CHECK(pft_bundle_add_parent(b, parent) == 0);
    return b;
}

/* Signing a bundle: the message verifies against the producer's key, survives decode and unchanged
 * re-encoding (the ring's forwarding), and fails for another key, any tampering, or a change after
 * signing. */
static void test_bundle_signatures(void)
{
    pft_keypair_t *a = pft_keypair_generate(), *b = pft_keypair_generate();
    const pft_pubkey_t *pa = pft_keypair_public(a), *pb = pft_keypair_public(b);
    pft_bundle_t *bd = small_bundle("a", 12);
    uint8_t *msg = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    CHECK(pft_bundle_encode(bd, &msg, &len) == 0);
    CHECK(pft_keys_verify_message(pa, msg, len, NULL) == PFT_EAUTH); /* unsigned */
    CHECK(strstr(pft_errmsg(), "not signed") != NULL);
    CHECK(pft_keys_verify_bundle(pa, bd) == PFT_EAUTH);
    PFT_FREE(msg);
    uint8_t id_before[PFT_BUNDLE_ID_LEN], id_after[PFT_BUNDLE_ID_LEN];
    CHECK(pft_bundle_id(bd, id_before) == 0);
    CHECK(pft_keys_sign_bundle(a, bd) == 0);
    CHECK(pft_bundle_id(bd, id_after) == 0 && memcmp(id_before, id_after, sizeof id_after) == 0);
    size_t sl = 0;
    CHECK(pft_bundle_signature(bd, &sl) != NULL && sl == PFT_KEY_SIG_LEN);
    CHECK(pft_bundle_encode(bd, &msg, &len) == 0);
    CHECK(pft_keys_verify_message(pa, msg, len, NULL) == 0);
    CHECK(pft_keys_verify_bundle(pa, bd) == 0);
    CHECK(pft_keys_verify_message(pb, msg, len, NULL) == PFT_EAUTH);
    CHECK(pft_keys_verify_bundle(pb, bd) == PFT_EAUTH);

    /* forwarded unchanged: decode, encode again -> identical bytes, still verifies */
    pft_bundle_t *fw = NULL;
    CHECK(pft_bundle_decode(msg, len, NULL, &fw) == 0);
    CHECK(fw && pft_keys_verify_bundle(pa, fw) == 0);
    CHECK(pft_bundle_encode(fw, &again, &len2) == 0);
    CHECK(len2 == len && memcmp(again, msg, len) == 0);
    CHECK(pft_keys_verify_message(pa, again, len2, NULL) == 0);

    /* every single-bit flip of the message: refused by the envelope parser or the signature */
    int passed = 0;
    for (size_t bit = 0; bit < 8 * len; bit++) {
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        passed += pft_keys_verify_message(pa, msg, len, NULL) == 0;
        msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK_MSG(passed == 0, "%d of %zu bit flips verified", passed, 8 * len);

    /* a change after signing (e.g. marking it complete, or another parent) invalidates the signature */
    CHECK(pft_bundle_set_flags(fw, PFT_BUNDLE_COMPLETE) == 0);
    CHECK(pft_keys_verify_bundle(pa, fw) == PFT_EAUTH);
    PFT_FREE(again);
    CHECK(pft_bundle_encode(fw, &again, &len2) == 0);
    CHECK(pft_keys_verify_message(pa, again, len2, NULL) == PFT_EAUTH);
    /* a producer forging the signature slot with someone else's signature of another payload */
    pft_bundle_t *forged = small_bundle("a", 13);
    size_t siglen = 0;
    const uint8_t *sig = pft_bundle_signature(bd, &siglen);
    CHECK(pft_bundle_set_signature(forged, sig, siglen) == 0);
    CHECK(pft_keys_verify_bundle(pa, forged) == PFT_EAUTH);
    /* garbage is a format error, not a crash */
    CHECK(pft_keys_verify_message(pa, (const uint8_t *)"xyz", 3, NULL) == PFT_EFORMAT);

    pft_bundle_destroy(&forged);
    pft_bundle_destroy(&fw);
    pft_bundle_destroy(&bd);
    pft_free(msg);
    pft_free(again);
    pft_keypair_destroy(&a);
    pft_keypair_destroy(&b);
}

/* The hop's bundle (statistics, a rank-q shared covariance, evidence) built twice the same way. */
static pft_bundle_t *hop_bundle(void)
{
    pft_bundle_t *b = two_part_bundle(7, PFT_GSTAT_TIED, PFT_DTYPE_F16, 10);
    pft_bundle_tally_t t[2] = {{.alpha = 0.25, .correct = 5, .total = 8},
                               {.alpha = 0.5, .correct = 6, .total = 8}};
    CHECK(pft_bundle_set_shared_rank(b, 3) == 0);
    CHECK(pft_bundle_prov_set_evidence(b, "c", 8, t, 2) == 0);
    return b;
}

/* Payload of b (kept) equals a fresh encoding of twin, and so do their ids. */
static void check_kept_is_fresh(pft_bundle_t *b, const pft_bundle_t *twin, const char *after)
{
    const uint8_t *kept = NULL;
    uint8_t *fresh = NULL, ib[PFT_BUNDLE_ID_LEN], it[PFT_BUNDLE_ID_LEN];
    size_t lk = 0, lf = 0;
    CHECK(pft_bundle_payload(b, &kept, &lk) == 0 && pft_bundle_encode_payload(twin, &fresh, &lf) == 0);
    CHECK_MSG(kept && fresh && lk == lf && memcmp(kept, fresh, lf) == 0, "kept payload stale after %s",
              after);
    CHECK(pft_bundle_id(b, ib) == 0 && pft_bundle_id(twin, it) == 0);
    CHECK_MSG(memcmp(ib, it, sizeof ib) == 0, "kept id stale after %s", after);
    pft_free(fresh);
}

/* Signing keeps the payload it signed: the wire message is byte for byte the one the old path built (encode,
 * sign, encode again), encoding reuses the kept bytes, and every change after signing drops them. */
static void test_sign_once(void)
{
    pft_keypair_t *kp = pft_keypair_generate();
    pft_bundle_t *nw = hop_bundle(), *old = hop_bundle();
    uint8_t *m_new = NULL, *m_old = NULL, *p_old = NULL, sig[PFT_KEY_SIG_LEN];
    size_t l_new = 0, l_old = 0, lp = 0;
    /* the old path, spelled out: a payload to sign, then the message encoded afresh */
    CHECK(pft_bundle_encode_payload(old, &p_old, &lp) == 0 && pft_keypair_sign(kp, p_old, lp, sig) == 0);
    CHECK(pft_bundle_set_signature(old, sig, sizeof sig) == 0 && pft_bundle_encode(old, &m_old, &l_old) == 0);
    CHECK(pft_keys_sign_bundle(kp, nw) == 0 && pft_bundle_encode(nw, &m_new, &l_new) == 0);
    CHECK_MSG(l_new == l_old && memcmp(m_new, m_old, l_old) == 0,
              "signed message differs from the old path's");
    CHECK(pft_keys_verify_message(pft_keypair_public(kp), m_new, l_new, NULL) == 0);
    const uint8_t *k1 = NULL, *k2 = NULL;
    size_t l1 = 0, l2 = 0;
    CHECK(pft_bundle_payload(nw, &k1, &l1) == 0 && pft_bundle_payload(nw, &k2, &l2) == 0);
    CHECK(k1 == k2 && l1 == lp && memcmp(k1, p_old, lp) == 0); /* kept, not encoded again */
    /* each change after signing: the kept bytes follow it (the signature is no longer valid) */
    uint8_t parent[PFT_BUNDLE_ID_LEN] = {9};
    pft_bundle_tally_t t = {.alpha = 0.75, .correct = 7, .total = 8};
    pft_bundle_t *twin = hop_bundle();
    CHECK(pft_bundle_add_parent(nw, parent) == 0 && pft_bundle_add_parent(twin, parent) == 0);
    check_kept_is_fresh(nw, twin, "add_parent");
    CHECK(pft_bundle_set_flags(nw, PFT_BUNDLE_COMPLETE) == 0 &&
          pft_bundle_set_flags(twin, PFT_BUNDLE_COMPLETE) == 0);
    check_kept_is_fresh(nw, twin, "set_flags");
    CHECK(pft_bundle_set_part_rank_cap(nw, 0, 2) == 0 && pft_bundle_set_part_rank_cap(twin, 0, 2) == 0);
    check_kept_is_fresh(nw, twin, "set_part_rank_cap");
    CHECK(pft_bundle_set_shared_rank(nw, 4) == 0 && pft_bundle_set_shared_rank(twin, 4) == 0);
    check_kept_is_fresh(nw, twin, "set_shared_rank");
    CHECK(pft_bundle_prov_set_evidence(nw, "a", 8, &t, 1) == 0 &&
          pft_bundle_prov_set_evidence(twin, "a", 8, &t, 1) == 0);
    check_kept_is_fresh(nw, twin, "prov_set_evidence");
    CHECK(pft_bundle_prov_set_dp(nw, "b", 1.0, 1e-5) == 0 &&
          pft_bundle_prov_set_dp(twin, "b", 1.0, 1e-5) == 0);
    check_kept_is_fresh(nw, twin, "prov_set_dp");
    CHECK(pft_keys_verify_bundle(pft_keypair_public(kp), nw) == PFT_EAUTH);
    pft_bundle_destroy(&twin);
    pft_bundle_destroy(&nw);
    pft_bundle_destroy(&old);
    pft_free(m_new);
    pft_free(m_old);
    pft_free(p_old);
    pft_keypair_destroy(&kp);
}

/* Allocation failure while making a keypair or loading one leaves nothing behind. */
static void test_alloc_failure(void)
{
    char sec[300];
    path_in(sec, sizeof sec, "oom.key");
    pft_keypair_t *kp = pft_keypair_generate();
    CHECK(pft_keypair_save(kp, sec, NULL, NULL, 0) == 0);
    pft_alloc_fail_after(0);
    pft_keypair_t *x = pft_keypair_generate(), *y = NULL;
    int rc = pft_keypair_load(sec, &y);
    pft_alloc_fail_after(-1);
    CHECK(x == NULL && y == NULL && rc == PFT_ENOMEM);
    pft_keypair_destroy(&kp);
}

/* Loads topology text written to s_dir/name; returns the rc, *out on success. */
static int load_topo(const char *name, const char *text, pft_topo_t **out)
{
    char path[300];
    path_in(path, sizeof path, name);
    write_text(path, text, 0644);
    return pft_topo_load(path, 0, out);
}

/* The topology's node attribute `key`: a .pub path (made absolute) or the inline line; every node or none;
 * no key twice; files must exist; the inline shape is checked; the resolved copy keeps the keys. */
static void test_topology_keys(void)
{
    char a_pub[300], b_pub[300], x[300], y[300], text[2000], inline_b[PFT_KEY_TEXT_MAX];
    path_in(a_pub, sizeof a_pub, "ta.pub");
    path_in(b_pub, sizeof b_pub, "tb.pub");
    path_in(x, sizeof x, "x.npy");
    path_in(y, sizeof y, "y.npy");
    write_text(x, "", 0644); /* the loader only checks that data files exist */
    write_text(y, "", 0644);
    pft_keypair_t *a = pft_keypair_generate(), *b = pft_keypair_generate();
    CHECK(pft_keypair_save(a, NULL, a_pub, "a", 1) == 0 && pft_keypair_save(b, NULL, b_pub, "b", 1) == 0);
    CHECK(pft_pubkey_format(pft_keypair_public(b), "node b", inline_b, sizeof inline_b) == 0);
#define NODES "digraph t { port_base=7100; node [train=\"x.npy\", labels=\"y.npy\"]\n"
    snprintf(text, sizeof text, NODES " a [key=\"./ta.pub\"]\n b [key=\"%s\"]\n a -> b\n}\n", inline_b);
    pft_topo_t *t = NULL;
    CHECK_MSG(load_topo("keys.dot", text, &t) == 0, "%s", pft_errmsg());
    if (t) {
        const pft_topo_node_t *na = pft_topo_find(t, "a"), *nb = pft_topo_find(t, "b");
        CHECK(na && na->key && strcmp(na->key, a_pub) == 0);
        CHECK(nb && nb->key && strcmp(nb->key, inline_b) == 0);
        pft_pubkey_t ka, kb;
        CHECK(na && pft_pubkey_resolve(na->key, &ka) == 0 && pft_pubkey_equal(&ka, pft_keypair_public(a)));
        CHECK(nb && pft_pubkey_resolve(nb->key, &kb) == 0 && pft_pubkey_equal(&kb, pft_keypair_public(b)));
        char out[300];
        path_in(out, sizeof out, "resolved.dot");
        CHECK(pft_topo_write(t, out) == 0);
        pft_topo_t *t2 = NULL;
        CHECK_MSG(pft_topo_load(out, 0, &t2) == 0, "%s", pft_errmsg());
        if (t2) {
            CHECK(strcmp(pft_topo_find(t2, "a")->key, a_pub) == 0);
            CHECK(strcmp(pft_topo_find(t2, "b")->key, inline_b) == 0);
        }
        pft_topo_destroy(&t2);
        pft_topo_destroy(&t);
    }
    /* no keys at all is fine (plain text or a simulation whose launcher makes them) */
    CHECK(load_topo("nokeys.dot", NODES " a -> b\n}\n", &t) == 0 && pft_topo_find(t, "a")->key == NULL);
    pft_topo_destroy(&t);
    struct {
        const char *body, *want;
    } bad[] = {
        {" a [key=\"ta.pub\"]\n a -> b\n}\n", "node 'b' has no 'key' while node 'a' has one"},
        {" a [key=\"ta.pub\"]\n b [key=\"./ta.pub\"]\n a -> b\n}\n", "same key as node 'a'"},
        {" a [key=\"ta.pub\"]\n b [key=\"missing.pub\"]\n a -> b\n}\n", "key file"},
        {" a [key=\"ta.pub\"]\n b [key=\".\"]\n a -> b\n}\n", "not a regular file"},
        {" a [key=\"ta.pub\"]\n b [key=\"pftnet-ed25519-public abc\"]\n a -> b\n}\n", "inline key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, NODES "%s", bad[i].body);
        int rc = load_topo("bad.dot", text, &t);
        CHECK_MSG((rc == PFT_ETOPO || rc == PFT_EINVAL) && strstr(pft_errmsg(), bad[i].want),
                  "case %zu: rc %d: %s", i, rc, pft_errmsg());
        pft_topo_destroy(&t);
    }
    /* a simulation may name some keys (the launcher makes the others), its resolved copy may not */
    char sim[300];
    path_in(sim, sizeof sim, "sim.dot");
    write_text(sim, "digraph s { dataset=\".\"; port_base=7200; a [key=\"ta.pub\"]\n a -> b\n}\n", 0644);
    CHECK_MSG(pft_topo_load(sim, PFT_TOPO_SKIP_DATA_CHECK, &t) == 0, "%s", pft_errmsg());
    pft_topo_destroy(&t);
    write_text(sim,
               "digraph s { dataset=\".\"; port_base=7200; node [train=\"x.npy\", labels=\"y.npy\"]\n"
               " a [key=\"ta.pub\"]\n a -> b\n}\n",
               0644);
    int rc = pft_topo_load(sim, PFT_TOPO_SKIP_DATA_CHECK | PFT_TOPO_REQUIRE_RESOLVED, &t);
    CHECK_MSG(rc == PFT_ETOPO && strstr(pft_errmsg(), "node 'b' has no 'key'"), "rc %d: %s", rc,
              pft_errmsg());
    pft_topo_destroy(&t);
#undef NODES
    pft_keypair_destroy(&a);
    pft_keypair_destroy(&b);
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/pft_test_keys.XXXXXX");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_rfc8032_vector);
    RUN(test_sign_verify_bit_flips);
    RUN(test_curve_derivation);
    RUN(test_fingerprint_and_text);
    RUN(test_file_round_trip);
    RUN(test_secret_permissions);
    RUN(test_public_formats);
    RUN(test_secret_formats);
    RUN(test_bundle_signatures);
    RUN(test_sign_once);
    RUN(test_alloc_failure);
    RUN(test_topology_keys);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    return pft_test_done();
}
