/* pft_keys: Ed25519 keypairs, key files, signatures over bundle payloads, X25519 keys for CURVE. */
#include "pft_keys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pft_alloc.h"
#include "pft_error.h"

#define PUB_B64_LEN 44      /* base64 characters of 32 bytes */
#define SEC_B64_LEN 88      /* base64 characters of 64 bytes */
#define MAX_FILE_BYTES 4096 /* a key file is one short line */
#define B64 sodium_base64_VARIANT_ORIGINAL

_Static_assert(PFT_KEY_PUBLIC_LEN == crypto_sign_PUBLICKEYBYTES, "public key size");
_Static_assert(PFT_KEY_SEED_LEN == crypto_sign_SEEDBYTES, "seed size");
_Static_assert(PFT_KEY_SIG_LEN == crypto_sign_BYTES, "signature size");
_Static_assert(PFT_KEY_CURVE_LEN == crypto_box_PUBLICKEYBYTES &&
                   PFT_KEY_CURVE_LEN == crypto_box_SECRETKEYBYTES,
               "X25519 key size");
_Static_assert(PFT_KEY_SIG_LEN <= PFT_BUNDLE_MAX_SIG, "a signature fits the envelope");

struct pft_keypair_t {
    uint8_t sk[crypto_sign_SECRETKEYBYTES]; /* libsodium's form: seed || public key */
    pft_pubkey_t pk;
};

static int sodium_ready(void)
{
    if (sodium_init() < 0)
        return pft_err(PFT_EUNSUPPORTED, "keys: libsodium cannot be initialised");
    return 0;
}

/* ---- keypairs ---- */

pft_keypair_t *pft_keypair_from_seed(const uint8_t seed[PFT_KEY_SEED_LEN])
{
    if (sodium_ready())
        return NULL;
    pft_keypair_t *self = pft_calloc(1, sizeof *self);
    if (!self) {
        pft_err(PFT_ENOMEM, "keys: out of memory");
        return NULL;
    }
    crypto_sign_seed_keypair(self->pk.bytes, self->sk, seed);
    return self;
}

pft_keypair_t *pft_keypair_generate(void)
{
    if (sodium_ready())
        return NULL;
    uint8_t seed[PFT_KEY_SEED_LEN];
    randombytes_buf(seed, sizeof seed);
    pft_keypair_t *self = pft_keypair_from_seed(seed);
    sodium_memzero(seed, sizeof seed);
    return self;
}

void pft_keypair_destroy(pft_keypair_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sodium_memzero(*self_p, sizeof **self_p);
    pft_free(*self_p);
    *self_p = NULL;
}

const pft_pubkey_t *pft_keypair_public(const pft_keypair_t *self)
{
    return &self->pk;
}

int pft_keypair_sign(const pft_keypair_t *self, const uint8_t *msg, size_t len, uint8_t sig[PFT_KEY_SIG_LEN])
{
    if ((uint64_t)len > (uint64_t)crypto_sign_MESSAGEBYTES_MAX)
        return pft_err(PFT_EINVAL, "keys: message of %zu bytes is too long to sign", len);
    crypto_sign_detached(sig, NULL, msg, (unsigned long long)len, self->sk);
    return 0;
}

int pft_keypair_curve(const pft_keypair_t *self, uint8_t curve_public[PFT_KEY_CURVE_LEN],
                      uint8_t curve_secret[PFT_KEY_CURVE_LEN])
{
    if (crypto_sign_ed25519_pk_to_curve25519(curve_public, self->pk.bytes) != 0 ||
        crypto_sign_ed25519_sk_to_curve25519(curve_secret, self->sk) != 0)
        return pft_err(PFT_EINVAL, "keys: cannot derive the CURVE keys of this keypair");
    return 0;
}

/* ---- text form ---- */

static int comment_ok(const char *c, size_t n)
{
    if (n < 1 || n > PFT_KEY_COMMENT_MAX || c[0] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] < 0x20 || c[i] > 0x7e)
            return 0;
    return 1;
}

/* Parses "<prefix><base64 of bin_len bytes>[ <comment>][\n]" of text[len] (what names the thing in
 * messages); *bin gets the bytes. PFT_EFORMAT with a message. */
static int parse_line(const char *text, size_t len, const char *prefix, size_t b64_len, uint8_t *bin,
                      size_t bin_len, const char *what)
{
    if (len > 0 && text[len - 1] == '\n')
        len--;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            return pft_err(PFT_EFORMAT,
                           "%s: a control byte (0x%02x) at offset %zu: expected one line \"%s<base64>\"",
                           what, (unsigned char)text[i], i, prefix);
    size_t lp = strlen(prefix);
    if (len < lp || memcmp(text, prefix, lp) != 0)
        return pft_err(PFT_EFORMAT, "%s: does not start with \"%s\"", what, prefix);
    const char *tok = text + lp;
    size_t rest = len - lp, lt = 0;
    while (lt < rest && tok[lt] != ' ')
        lt++;
    if (lt != b64_len)
        return pft_err(PFT_EFORMAT, "%s: the key is %zu base64 characters, expected %zu", what, lt, b64_len);
    size_t got = 0;
    const char *end = NULL;
    if (sodium_base642bin(bin, bin_len, tok, lt, NULL, &got, &end, B64) != 0 || end != tok + lt ||
        got != bin_len) {
        sodium_memzero(bin, bin_len);
        return pft_err(PFT_EFORMAT, "%s: the key is not canonical base64 of %zu bytes", what, bin_len);
    }
    if (lt < rest && !comment_ok(tok + lt + 1, rest - lt - 1)) {
        sodium_memzero(bin, bin_len);
        return pft_err(PFT_EFORMAT,
                       "%s: after the key, expected one space and a comment of 1..%d printable "
                       "characters",
                       what, PFT_KEY_COMMENT_MAX);
    }
    return 0;
}

int pft_pubkey_parse(const char *text, pft_pubkey_t *out)
{
    pft_pubkey_t k;
    int rc = parse_line(text, strlen(text), PFT_KEY_PUBLIC_PREFIX, PUB_B64_LEN, k.bytes, sizeof k.bytes,
                        "public key");
    if (rc)
        return rc;
    uint8_t x[PFT_KEY_CURVE_LEN];
    if (sodium_ready() || crypto_sign_ed25519_pk_to_curve25519(x, k.bytes) != 0)
        return pft_err(PFT_EINVAL,
                       "public key: not a usable Ed25519 public key (not on the curve or of small "
                       "order)");
    *out = k;
    return 0;
}

int pft_pubkey_format(const pft_pubkey_t *key, const char *comment, char *buf, size_t cap)
{
    char b64[PUB_B64_LEN + 1];
    if (comment && !comment_ok(comment, strlen(comment)))
        return pft_err(PFT_EINVAL,
                       "key comment '%.40s': expected 1..%d printable characters, not starting with "
                       "a space",
                       comment, PFT_KEY_COMMENT_MAX);
    sodium_bin2base64(b64, sizeof b64, key->bytes, sizeof key->bytes, B64);
    int n = snprintf(buf, cap, "%s%s%s%s", PFT_KEY_PUBLIC_PREFIX, b64, comment ? " " : "",
                     comment ? comment : "");
    if (n < 0 || (size_t)n >= cap)
        return pft_err(PFT_EINVAL, "public key text does not fit in %zu bytes", cap);
    return 0;
}

char *pft_pubkey_fingerprint(const pft_pubkey_t *key, char out[PFT_KEY_FINGERPRINT_LEN + 1])
{
    uint8_t h[32];
    crypto_generichash(h, sizeof h, key->bytes, sizeof key->bytes, NULL, 0);
    sodium_bin2hex(out, PFT_KEY_FINGERPRINT_LEN + 1, h, PFT_KEY_FINGERPRINT_LEN / 2);
    return out;
}

int pft_pubkey_equal(const pft_pubkey_t *a, const pft_pubkey_t *b)
{
    return sodium_memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

int pft_pubkey_curve(const pft_pubkey_t *key, uint8_t curve_public[PFT_KEY_CURVE_LEN])
{
    if (sodium_ready() || crypto_sign_ed25519_pk_to_curve25519(curve_public, key->bytes) != 0)
        return pft_err(PFT_EINVAL, "keys: not a usable Ed25519 public key");
    return 0;
}

int pft_pubkey_verify(const pft_pubkey_t *key, const uint8_t *msg, size_t len, const uint8_t *sig,
                      size_t sig_len)
{
    if (sodium_ready())
        return PFT_EUNSUPPORTED;
    if (!sig || sig_len != PFT_KEY_SIG_LEN)
        return pft_err(PFT_EAUTH, "signature of %zu bytes: an Ed25519 signature has %d", sig_len,
                       PFT_KEY_SIG_LEN);
    if (crypto_sign_verify_detached(sig, msg, (unsigned long long)len, key->bytes) != 0)
        return pft_err(PFT_EAUTH, "signature does not verify");
    return 0;
}

/* ---- files ---- */

/* Reads a whole small file from an open descriptor into buf[cap] (NUL-terminated); *st gets its status. */
static int read_fd(int fd, const char *path, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return pft_err(PFT_EIO, "%s: read error: %s", path, strerror(errno));
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap - 1)
            return pft_err(PFT_EFORMAT, "%s: longer than %zu bytes: not a key file", path, cap - 2);
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n))
        return pft_err(PFT_EFORMAT, "%s: a NUL byte: not a key file", path);
    *len = n;
    return 0;
}

static int open_regular(const char *path, struct stat *st, int *fd_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return pft_err(PFT_EIO, "%s: not a regular file", path);
    }
    *fd_out = fd;
    return 0;
}

int pft_pubkey_load(const char *path, pft_pubkey_t *out)
{
    struct stat st;
    int fd = -1;
    int rc = open_regular(path, &st, &fd);
    if (rc)
        return rc;
    char buf[MAX_FILE_BYTES + 2];
    size_t len = 0;
    rc = read_fd(fd, path, buf, sizeof buf, &len);
    close(fd);
    if (rc)
        return rc;
    pft_pubkey_t k;
    rc = parse_line(buf, len, PFT_KEY_PUBLIC_PREFIX, PUB_B64_LEN, k.bytes, sizeof k.bytes, path);
    if (rc)
        return rc;
    uint8_t x[PFT_KEY_CURVE_LEN];
    if (sodium_ready() || crypto_sign_ed25519_pk_to_curve25519(x, k.bytes) != 0)
        return pft_err(PFT_EINVAL, "%s: not a usable Ed25519 public key (not on the curve or of small order)",
                       path);
    *out = k;
    return 0;
}

int pft_pubkey_resolve(const char *path_or_text, pft_pubkey_t *out)
{
    if (!path_or_text || !path_or_text[0])
        return pft_err(PFT_EINVAL, "public key: empty");
    if (strncmp(path_or_text, PFT_KEY_PUBLIC_PREFIX, strlen(PFT_KEY_PUBLIC_PREFIX)) == 0)
        return pft_pubkey_parse(path_or_text, out);
    return pft_pubkey_load(path_or_text, out);
}

int pft_keypair_load(const char *path, pft_keypair_t **out)
{
    *out = NULL;
    int rc = sodium_ready();
    if (rc)
        return rc;
    struct stat st;
    int fd = -1;
    if ((rc = open_regular(path, &st, &fd)))
        return rc;
    if (st.st_mode & 077) {
        close(fd);
        return pft_err(
            PFT_EAUTH,
            "%s: permissions %04o are too open: a secret key file must not be accessible by group or "
            "others; run chmod 600 %s",
            path, (unsigned)(st.st_mode & 07777), path);
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        close(fd);
        return pft_err(PFT_EAUTH, "%s: owned by uid %u, not by this user (uid %u) or root", path,
                       (unsigned)st.st_uid, (unsigned)geteuid());
    }
    char buf[MAX_FILE_BYTES + 2];
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    size_t len = 0;
    rc = read_fd(fd, path, buf, sizeof buf, &len);
    close(fd);
    if (rc == 0)
        rc = parse_line(buf, len, PFT_KEY_SECRET_PREFIX, SEC_B64_LEN, sk, sizeof sk, path);
    sodium_memzero(buf, sizeof buf);
    if (rc)
        return rc;
    pft_keypair_t *kp = pft_keypair_from_seed(sk); /* the seed is the first half */
    if (!kp) {
        sodium_memzero(sk, sizeof sk);
        return PFT_ENOMEM;
    }
    if (sodium_memcmp(kp->pk.bytes, sk + PFT_KEY_SEED_LEN, PFT_KEY_PUBLIC_LEN) != 0) {
        sodium_memzero(sk, sizeof sk);
        pft_keypair_destroy(&kp);
        return pft_err(PFT_EFORMAT, "%s: the public half does not match the seed: the file is corrupted",
                       path);
    }
    sodium_memzero(sk, sizeof sk);
    *out = kp;
    return 0;
}

/* Folder of path (for the fsync after creating a file in it) into buf. */
static void dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, cap, ".");
    } else if (slash == path) {
        snprintf(buf, cap, "/");
    } else {
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
    }
}

static int write_all(int fd, const char *path, const char *text, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return pft_err(PFT_EIO, "%s: write error: %s", path, strerror(errno));
        done += (size_t)w;
    }
    if (fsync(fd) != 0)
        return pft_err(PFT_EIO, "%s: fsync: %s", path, strerror(errno));
    return 0;
}

static void sync_dir(const char *path)
{
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some file systems refuse fsync on folders */
        close(dfd);
    }
}

/* Creates path with mode and the text. Without force: O_EXCL (an existing file or symlink is an error).
 * With force: a temporary file beside it, renamed over it. */
static int write_key_file(const char *path, const char *text, mode_t mode, int force)
{
    if (!force) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
            return pft_err(PFT_EIO, "%s: cannot create: %s%s", path, strerror(errno),
                           errno == EEXIST ? " (use --force to replace it)" : "");
        int rc = fchmod(fd, mode) == 0 ? 0 : pft_err(PFT_EIO, "%s: chmod: %s", path, strerror(errno));
        if (rc == 0)
            rc = write_all(fd, path, text, strlen(text));
        close(fd);
        if (rc) {
            unlink(path);
            return rc;
        }
        sync_dir(path);
        return 0;
    }
    size_t lp = strlen(path);
    char *tmp = pft_alloc(lp + 16);
    if (!tmp)
        return pft_err(PFT_ENOMEM, "out of memory");
    snprintf(tmp, lp + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp); /* mode 0600 */
    if (fd < 0) {
        int rc = pft_err(PFT_EIO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        pft_free(tmp);
        return rc;
    }
    int rc = fchmod(fd, mode) == 0 ? 0 : pft_err(PFT_EIO, "%s: chmod: %s", tmp, strerror(errno));
    if (rc == 0)
        rc = write_all(fd, tmp, text, strlen(text));
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = pft_err(PFT_EIO, "%s: cannot replace: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    else
        sync_dir(path);
    pft_free(tmp);
    return rc;
}

int pft_keypair_save(const pft_keypair_t *self, const char *secret_path, const char *public_path,
                     const char *comment, int force)
{
    if (comment && !comment_ok(comment, strlen(comment)))
        return pft_err(PFT_EINVAL,
                       "key comment '%.40s': expected 1..%d printable characters, not starting with "
                       "a space",
                       comment, PFT_KEY_COMMENT_MAX);
    struct stat st;
    const char *paths[2] = {secret_path, public_path};
    for (int i = 0; i < 2 && !force; i++)
        if (paths[i] && lstat(paths[i], &st) == 0)
            return pft_err(PFT_EIO, "%s exists; refusing to overwrite a key (use --force to replace it)",
                           paths[i]);
    char pub[PFT_KEY_TEXT_MAX + 1];
    int rc = pft_pubkey_format(&self->pk, comment, pub, sizeof pub - 1);
    if (rc)
        return rc;
    strcat(pub, "\n");
    if (secret_path) {
        char b64[SEC_B64_LEN + 1];
        char line[sizeof PFT_KEY_SECRET_PREFIX + SEC_B64_LEN + PFT_KEY_COMMENT_MAX + 4];
        sodium_bin2base64(b64, sizeof b64, self->sk, sizeof self->sk, B64);
        snprintf(line, sizeof line, "%s%s%s%s\n", PFT_KEY_SECRET_PREFIX, b64, comment ? " " : "",
                 comment ? comment : "");
        rc = write_key_file(secret_path, line, 0600, force);
        sodium_memzero(b64, sizeof b64);
        sodium_memzero(line, sizeof line);
        if (rc)
            return rc;
    }
    if (public_path && (rc = write_key_file(public_path, pub, 0644, force))) {
        if (secret_path && !force)
            unlink(secret_path); /* no half pair */
        return rc;
    }
    return 0;
}

/* ---- bundles ---- */

int pft_keys_sign_bundle(const pft_keypair_t *self, pft_bundle_t *bundle)
{
    const uint8_t *payload = NULL; /* kept in the bundle: the id and the wire message reuse it */
    size_t len = 0;
    int rc = pft_bundle_payload(bundle, &payload, &len);
    if (rc)
        return pft_err_wrap(rc, "signing bundle");
    uint8_t sig[PFT_KEY_SIG_LEN];
    rc = pft_keypair_sign(self, payload, len, sig);
    if (rc == 0)
        rc = pft_bundle_set_signature(bundle, sig, sizeof sig);
    return rc;
}

int pft_keys_verify_message(const pft_pubkey_t *producer, const uint8_t *msg, size_t len,
                            const pft_bundle_limits_t *limits)
{
    pft_envelope_t env;
    int rc = pft_envelope_parse(msg, len, limits, &env);
    if (rc)
        return rc;
    if (!env.sig)
        return pft_err(PFT_EAUTH, "bundle is not signed");
    rc = pft_pubkey_verify(producer, env.payload, env.payload_len, env.sig, env.sig_len);
    return rc ? pft_err_wrap(rc, "bundle") : 0;
}

int pft_keys_verify_bundle(const pft_pubkey_t *producer, const pft_bundle_t *bundle)
{
    size_t sig_len = 0;
    const uint8_t *sig = pft_bundle_signature(bundle, &sig_len);
    if (!sig)
        return pft_err(PFT_EAUTH, "bundle is not signed");
    uint8_t *payload = NULL;
    size_t len = 0;
    int rc = pft_bundle_encode_payload(bundle, &payload, &len);
    if (rc)
        return pft_err_wrap(rc, "verifying bundle");
    rc = pft_pubkey_verify(producer, payload, len, sig, sig_len);
    pft_free(payload);
    return rc ? pft_err_wrap(rc, "bundle") : 0;
}
