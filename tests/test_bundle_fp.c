/* Tests of the topology fingerprint a bundle carries (payload element 9): round trips of a GMM, an empty and
 * a statistics bundle, canonical bytes, a bundle without one unchanged (8 or 9 elements), the fingerprint
 * under the signature, refusals through the API and in the bytes, every prefix refused, allocation failures.
 */
#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_gmm.h"
#include "pft_keys.h"
#include "pft_test.h"
#include "pft_test_stats.h"
#include "pft_topo.h"
#include "pft_topo_fingerprint.h"

#include <stdlib.h>
#include <unistd.h>

static pft_bundle_t *gmm_bundle(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "a", PFT_DTYPE_F32, 2);
    pft_gmm_t *g = pft_gmm_new(1, 2, PFT_COV_DIAG);
    double w[1] = {1}, mu[2] = {0.5, -0.5}, var[2] = {0.1, 0.2};
    CHECK(pft_gmm_set_params(g, w, mu, var) == 0);
    CHECK(pft_bundle_add_class(b, 0, 10, &g) == 0);
    CHECK(pft_bundle_prov_add(b, "a", 0, 10) == 0);
    return b;
}

static const uint8_t k_fp[PFT_BUNDLE_FP_LEN] = {0xf1, 0x2b, 3,  4,  5,  6,  7,  8,  9,  10,  11,
                                                12,   13,   14, 15, 16, 17, 18, 19, 20, 21,  22,
                                                23,   24,   25, 26, 27, 28, 29, 30, 31, 0xee};
static const pft_bundle_fp_item_t k_items[3] = {
    {"cov", {1, 2, 3, 4, 5, 6, 7, 8}},
    {"k", {9, 9, 9, 9, 9, 9, 9, 9}},
    {"node:a", {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}},
};

static uint8_t *encode(const pft_bundle_t *b, size_t *len)
{
    uint8_t *buf = NULL;
    CHECK(pft_bundle_encode(b, &buf, len) == 0);
    return buf;
}

/* Encodes b with the fingerprint, decodes it, checks the fingerprint and the bytes of a re-encoding. */
static void round_trip(pft_bundle_t *b, const char *what)
{
    CHECK(pft_bundle_set_fingerprint(b, k_fp, k_items, 3) == 0);
    size_t len = 0, len2 = 0;
    uint8_t *buf = encode(b, &len);
    pft_bundle_t *d = NULL;
    CHECK_MSG(buf && pft_bundle_decode(buf, len, NULL, &d) == 0, "%s: %s", what, pft_errmsg());
    const pft_bundle_fp_item_t *items = NULL;
    size_t n = 0;
    const uint8_t *fp = d ? pft_bundle_fingerprint(d, &items, &n) : NULL;
    CHECK_MSG(fp && memcmp(fp, k_fp, sizeof k_fp) == 0 && n == 3, "%s", what);
    for (size_t i = 0; fp && i < n; i++)
        CHECK(strcmp(items[i].name, k_items[i].name) == 0 &&
              memcmp(items[i].digest, k_items[i].digest, 8) == 0);
    uint8_t *buf2 = d ? encode(d, &len2) : NULL;
    CHECK(buf2 && len2 == len && memcmp(buf, buf2, len) == 0);
    pft_free(buf2);
    if (d) { /* rebuilt through the API: the same bytes (canonical) */
        CHECK(pft_bundle_set_fingerprint(d, NULL, NULL, 0) == 0 && !pft_bundle_fingerprint(d, NULL, NULL));
        CHECK(pft_bundle_set_fingerprint(d, k_fp, k_items, 3) == 0);
        buf2 = encode(d, &len2);
        CHECK_MSG(buf2 && len2 == len && memcmp(buf, buf2, len) == 0, "%s: not canonical", what);
        pft_free(buf2);
    }
    pft_free(buf);
    pft_bundle_destroy(&d);
}

static void test_round_trips(void)
{
    pft_bundle_t *g = gmm_bundle(), *e = pft_bundle_new("run", "a", PFT_DTYPE_F16, 3);
    pft_bundle_t *s = two_part_bundle(7, PFT_GSTAT_FULL, PFT_DTYPE_F32, 3);
    round_trip(g, "gmm");
    round_trip(e, "empty");
    if (s)
        round_trip(s, "statistics");
    pft_bundle_destroy(&g);
    pft_bundle_destroy(&e);
    pft_bundle_destroy(&s);
}

/* Without a fingerprint a bundle keeps its bytes (8 elements); with one the payload has 10 and costs the
 * field's bytes. */
static void test_without(void)
{
    pft_bundle_t *b = gmm_bundle();
    uint8_t *p0 = NULL, *p1 = NULL;
    size_t l0 = 0, l1 = 0;
    CHECK(pft_bundle_encode_payload(b, &p0, &l0) == 0);
    CHECK(p0 && p0[0] == 0x98); /* fixarray of 8 */
    CHECK(pft_bundle_set_fingerprint(b, k_fp, k_items, 3) == 0);
    CHECK(pft_bundle_encode_payload(b, &p1, &l1) == 0);
    CHECK(p1 && p1[0] == 0x9a); /* fixarray of 10 */
    /* parts [] (1) + [fp, items] (1 + 34 + 1) + 3 items of [str, bin(8)] (1 + 1 + name + 10) */
    size_t field = 1 + 1 + 34 + 1 + 3 * 12 + 3 + 1 + 6;
    CHECK_MSG(l1 == l0 + field, "%zu bytes, %zu without, expected +%zu", l1, l0, field);
    pft_free(p0);
    pft_free(p1);
    pft_bundle_destroy(&b);
}

/* The fingerprint is in the signed payload: changing it after signing breaks the signature. */
static void test_signed(void)
{
    uint8_t seed[PFT_KEY_SEED_LEN] = {1};
    pft_keypair_t *kp = pft_keypair_from_seed(seed);
    pft_bundle_t *b = gmm_bundle();
    CHECK(pft_bundle_set_fingerprint(b, k_fp, k_items, 3) == 0);
    CHECK(kp && pft_keys_sign_bundle(kp, b) == 0);
    size_t len = 0;
    uint8_t *buf = encode(b, &len);
    CHECK(buf && pft_keys_verify_message(pft_keypair_public(kp), buf, len, NULL) == 0);
    size_t at = 0; /* the fingerprint's bin(32) body: 0xc4 0x20 then k_fp */
    for (size_t i = 0; buf && i + 2 + 32 <= len; i++)
        if (buf[i] == 0xc4 && buf[i + 1] == 32 && buf[i + 2] == 0xf1 && buf[i + 3] == 0x2b)
            at = i + 2;
    CHECK(at > 0);
    if (at) {
        buf[at + 5] ^= 1;
        CHECK(pft_keys_verify_message(pft_keypair_public(kp), buf, len, NULL) == PFT_EAUTH);
        pft_bundle_t *d = NULL; /* still a well-formed bundle: the signature is what refuses it */
        CHECK(pft_bundle_decode(buf, len, NULL, &d) == 0);
        pft_bundle_destroy(&d);
    }
    pft_free(buf);
    pft_bundle_destroy(&b);
    pft_keypair_destroy(&kp);
}

static void test_api_refusals(void)
{
    pft_bundle_t *b = gmm_bundle();
    pft_bundle_fp_item_t bad[2] = {k_items[1], k_items[0]};
    CHECK(pft_bundle_set_fingerprint(b, k_fp, bad, 2) == PFT_EINVAL && strstr(pft_errmsg(), "not after"));
    bad[0] = k_items[0];
    bad[1] = k_items[0];
    CHECK(pft_bundle_set_fingerprint(b, k_fp, bad, 2) == PFT_EINVAL);
    bad[1].name[0] = '\0';
    CHECK(pft_bundle_set_fingerprint(b, k_fp, bad, 2) == PFT_EINVAL && strstr(pft_errmsg(), "item 1"));
    bad[1] = k_items[1];
    bad[1].name[0] = '\n';
    CHECK(pft_bundle_set_fingerprint(b, k_fp, bad, 2) == PFT_EINVAL);
    CHECK(pft_bundle_set_fingerprint(b, k_fp, NULL, 2) == PFT_EINVAL);
    CHECK(!pft_bundle_fingerprint(b, NULL, NULL)); /* unaltered */
    CHECK(pft_bundle_set_fingerprint(b, k_fp, NULL, 0) == 0 && pft_bundle_fingerprint(b, NULL, NULL));
    pft_bundle_destroy(&b);
}

/* Bytes of the GMM bundle with the fingerprint, and the offset of pattern (len plen) in them. */
static uint8_t *with_fp(size_t *len, const uint8_t *pat, size_t plen, size_t *at)
{
    pft_bundle_t *b = gmm_bundle();
    CHECK(pft_bundle_set_fingerprint(b, k_fp, k_items, 3) == 0);
    uint8_t *buf = encode(b, len);
    pft_bundle_destroy(&b);
    *at = 0;
    for (size_t i = 0; buf && plen && i + plen <= *len; i++)
        if (memcmp(buf + i, pat, plen) == 0)
            *at = i;
    return buf;
}

static void expect_refused(uint8_t *buf, size_t len, const char *needle)
{
    pft_bundle_t *d = NULL;
    int rc = pft_bundle_decode(buf, len, NULL, &d);
    CHECK_MSG(rc != 0 && d == NULL && strstr(pft_errmsg(), needle), "rc %d: %s (want %s)", rc, pft_errmsg(),
              needle);
    pft_bundle_destroy(&d);
}

static void test_bytes_refused(void)
{
    size_t len, at;
    uint8_t *buf =
        with_fp(&len, (const uint8_t *)"\xa1k", 2, &at); /* item "k": rename it "c", before "cov" */
    CHECK(at > 0);
    buf[at + 1] = 'c';
    expect_refused(buf, len, "fingerprint item 1 ('c') not after item 0");
    pft_free(buf);
    buf = with_fp(&len,
                  (const uint8_t *)"\xa3"
                                   "cov",
                  4, &at); /* a control byte in a name */
    buf[at + 1] = 0x01;
    expect_refused(buf, len, "fingerprint item 0: name");
    pft_free(buf);
    buf = with_fp(&len, (const uint8_t *)"\xc4\x08\x01\x02", 4, &at); /* a digest of 7 bytes + 1 spare */
    buf[at + 1] = 7;
    pft_bundle_t *d = NULL;
    CHECK(pft_bundle_decode(buf, len, NULL, &d) != 0 && d == NULL);
    pft_free(buf);
    buf = with_fp(&len, (const uint8_t *)"\xc4\x20\xf1\x2b", 4, &at); /* the fingerprint as 31 bytes + 1 */
    buf[at + 1] = 31;
    CHECK(pft_bundle_decode(buf, len, NULL, &d) != 0 && d == NULL);
    pft_free(buf);
    buf = with_fp(&len, (const uint8_t *)"\x90\x92\xc4\x20", 4, &at); /* parts [] -> nil */
    buf[at] = 0xc0;
    expect_refused(buf, len, "parts (GMM payload)");
    for (size_t cut = 0; cut < len; cut++) { /* every prefix: refused, no crash */
        CHECK(pft_bundle_decode(buf, cut, NULL, &d) != 0 && d == NULL);
        pft_bundle_destroy(&d);
    }
    pft_free(buf);
}

static void test_alloc_failures(void)
{
    size_t len, at;
    uint8_t *buf = with_fp(&len, NULL, 0, &at);
    int done = 0;
    for (long n = 0; buf && n < 200 && !done; n++) {
        pft_bundle_t *d = NULL;
        pft_alloc_fail_after(n);
        int rc = pft_bundle_decode(buf, len, NULL, &d);
        pft_alloc_fail_after(-1);
        CHECK_MSG(rc == 0 || (rc == PFT_ENOMEM && d == NULL), "n %ld: rc %d", n, rc);
        done = rc == 0;
        pft_bundle_destroy(&d);
    }
    CHECK(done);
    pft_free(buf);
}

/* The field's size for a 1000-node chain n0 -> … -> n999 with keys: per item [str, bin(8)] = 12 bytes + the
 * name (names under 32 bytes), plus the fingerprint and the array headers; printed for docs/WIRE.md. */
static void test_size_1000(void)
{
    char dir[] = "/tmp/pft_fp1000_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/chain.dot", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "digraph c { port_base = 20000;\n");
    for (int i = 0; i < 1000; i++)
        fprintf(f, "n%d [train = \"x.npy\", labels = \"y.npy\"];\n", i);
    for (int i = 0; i + 1 < 1000; i++)
        fprintf(f, "n%d -> n%d;\n", i, i + 1);
    fprintf(f, "}\n");
    fclose(f);
    pft_topo_t *t = NULL;
    CHECK(pft_topo_load(path, PFT_TOPO_SKIP_DATA_CHECK, &t) == 0);
    uint8_t(*keys)[32] = calloc(1000, 32);
    const uint8_t **ptr = calloc(1000, sizeof *ptr);
    for (int i = 0; keys && ptr && i < 1000; i++) {
        memset(keys[i], i & 0xff, 32);
        keys[i][0] = (uint8_t)(i >> 8);
        ptr[i] = keys[i];
    }
    pft_topo_fp_t *fp = NULL;
    CHECK(t && ptr && pft_topo_fp_new(t, ptr, &fp) == 0);
    const pft_topo_fp_item_t *it = NULL;
    size_t n = fp ? pft_topo_fp_items(fp, &it) : 0;
    pft_bundle_fp_item_t *items = calloc(n ? n : 1, sizeof *items);
    size_t expect = 1 + 1 + 34 + 3; /* parts [], [fp, items]: array16 header of the items */
    for (size_t i = 0; items && i < n; i++) {
        snprintf(items[i].name, sizeof items[i].name, "%s", it[i].name);
        memcpy(items[i].digest, it[i].digest, 8);
        expect += 12 + strlen(it[i].name);
    }
    pft_bundle_t *b = gmm_bundle();
    uint8_t *p0 = NULL, *p1 = NULL;
    size_t l0 = 0, l1 = 0;
    CHECK(pft_bundle_encode_payload(b, &p0, &l0) == 0);
    CHECK(items && fp && pft_bundle_set_fingerprint(b, pft_topo_fp_hash(fp), items, n) == 0);
    CHECK(pft_bundle_encode_payload(b, &p1, &l1) == 0);
    CHECK_MSG(n > 1001, "%zu items", n); /* a node item each, the edges, the run-wide settings */
    CHECK_MSG(l1 - l0 == expect, "1000 nodes: %zu items, %zu bytes, expected %zu", n, l1 - l0, expect);
    printf("  1000-node chain: %zu items, the field costs %zu bytes\n", n, l1 - l0);
    pft_free(p0);
    pft_free(p1);
    free(items);
    free(keys);
    free(ptr);
    pft_bundle_destroy(&b);
    pft_topo_fp_destroy(&fp);
    pft_topo_destroy(&t);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_round_trips);
    RUN(test_without);
    RUN(test_signed);
    RUN(test_api_refusals);
    RUN(test_bytes_refused);
    RUN(test_alloc_failures);
    RUN(test_size_1000);
    return pft_test_done();
}
