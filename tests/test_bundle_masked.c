/* Tests of masked statistics parts (docs/SECAGG.md §8): round trips beside clear parts, canonical bytes,
 * the words exactly as given, API refusals, provenance checks on public counts, and hostile payloads (a mask
 * out of bounds, an opener that is a contributor, a short bin, a label with a control byte, truncations and
 * bit flips). */
#define _GNU_SOURCE /* memmem */
#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_error.h"
#include "pft_fixed.h"
#include "pft_gstat.h"
#include "pft_rng.h"
#include "pft_test.h"
#include "pft_test_bundle.h"

#include "pft_test_stats.h"

#define D 4
#define K 3
static const int LABELS[K] = {0, 1, 2};

/* Words 0x0102030405060708 · (i + 1): distinct, with every byte position used (little-endian checked). */
static uint64_t *make_words(size_t n)
{
    uint64_t *w = pft_alloc_array(n, sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = UINT64_C(0x0102030405060708) * (i + 1);
    return w;
}

static pft_bundle_mask_t make_mask(const char *label, const char *opener, uint64_t bound)
{
    pft_bundle_mask_t m = {.frac_bits = PFT_FIXED_FRAC_BITS, .bound = bound, .div = 0};
    snprintf(m.label, sizeof m.label, "%s", label);
    snprintf(m.opener, sizeof m.opener, "%s", opener);
    return m;
}

/* A tied bundle: masked part {a, b} (counts 3, 0, 2; opener "z") and clear part {c} (labels 1, 2); provenance
 * a: 0→2, 2→1; b: 0→1, 2→1; c: 1→6, 2→2. */
static pft_bundle_t *mixed_bundle(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "c", PFT_DTYPE_F32, D);
    CHECK(pft_bundle_prov_add(b, "a", 0, 2) == 0 && pft_bundle_prov_add(b, "a", 2, 1) == 0);
    CHECK(pft_bundle_prov_add(b, "b", 0, 1) == 0 && pft_bundle_prov_add(b, "b", 2, 1) == 0);
    CHECK(pft_bundle_prov_add(b, "c", 1, 6) == 0 && pft_bundle_prov_add(b, "c", 2, 2) == 0);
    pft_rng_t *r = pft_rng_new(5);
    static const int lc[] = {1, 2}, nc[] = {6, 2};
    pft_gstat_t *sc = random_stats(r, PFT_GSTAT_TIED, D, lc, nc, 2);
    const char *cc[] = {"c"}, *cab[] = {"a", "b"};
    CHECK(pft_bundle_add_part(b, cc, 1, &sc) == 0);
    size_t nw = pft_bundle_masked_words(PFT_GSTAT_TIED, K, D);
    CHECK(nw == K * D + D * (D + 1) / 2);
    uint64_t *w = make_words(nw), counts[K] = {3, 0, 2};
    pft_bundle_mask_t m = make_mask("z:tied", "z", 12);
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, counts, &w, &m) == 0 && w == NULL);
    pft_free(w);
    pft_rng_destroy(&r);
    return b;
}

static void test_round_trip(void)
{
    pft_bundle_t *b = mixed_bundle(), *o = NULL;
    CHECK(pft_bundle_n_parts(b) == 2 && pft_bundle_part_is_masked(b, 0) && !pft_bundle_part_is_masked(b, 1));
    CHECK(pft_bundle_part_stats(b, 0) == NULL && pft_bundle_part_stats(b, 1) != NULL);
    uint8_t *m1 = NULL, *m2 = NULL;
    size_t l1 = 0, l2 = 0;
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0);
    CHECK(pft_bundle_decode(m1, l1, NULL, &o) == 0);
    if (!o) {
        fprintf(stderr, "  decode: %s\n", pft_errmsg());
        goto out;
    }
    CHECK(pft_bundle_part_is_masked(o, 0) && !pft_bundle_part_is_masked(o, 1));
    CHECK(pft_bundle_part_kind(o, 0) == PFT_GSTAT_TIED && pft_bundle_part_n_classes(o, 0) == K);
    CHECK(pft_bundle_part_kind(o, 1) == PFT_GSTAT_TIED && pft_bundle_part_n_classes(o, 1) == 2);
    uint64_t want_counts[K] = {3, 0, 2};
    for (int k = 0; k < K; k++) {
        int label;
        uint64_t n;
        pft_bundle_part_class(o, 0, k, &label, &n);
        CHECK(label == LABELS[k] && n == want_counts[k]);
    }
    size_t nw = 0;
    const uint64_t *w = pft_bundle_part_words(o, 0, &nw);
    CHECK(nw == pft_bundle_masked_words(PFT_GSTAT_TIED, K, D) && w != NULL);
    uint64_t *want = make_words(nw);
    CHECK(w && memcmp(w, want, nw * sizeof *w) == 0); /* words bit for bit */
    pft_free(want);
    const pft_bundle_mask_t *m = pft_bundle_part_mask(o, 0);
    CHECK(m && strcmp(m->label, "z:tied") == 0 && strcmp(m->opener, "z") == 0 && m->bound == 12 &&
          m->frac_bits == 32 && m->div == 0);
    CHECK(pft_bundle_part_mask(o, 1) == NULL && pft_bundle_part_words(o, 1, &nw) == NULL && nw == 0);
    /* canonical: decode → encode gives the same bytes */
    CHECK(pft_bundle_encode(o, &m2, &l2) == 0);
    CHECK(l1 == l2 && m2 && memcmp(m1, m2, l1) == 0);
    printf("  tied d=%d, %d classes: %zu bytes, formula %zu\n", D, K, l1, pft_bundle_formula_bytes(b));
out:
    pft_free(m1);
    pft_free(m2);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
}

/* double masking: a one-contributor part carries its encrypted shares (opaque bytes) through a round trip
 * bit for bit, canonically; shares on a part of two contributors, or beyond the maximum, are refused */
static void test_shares(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "a", PFT_DTYPE_F32, D), *o = NULL;
    CHECK(pft_bundle_prov_add(b, "a", 0, 3) == 0);
    size_t nw = pft_bundle_masked_words(PFT_GSTAT_TIED, K, D);
    uint64_t *w = make_words(nw), counts[K] = {3, 0, 0}, counts2[K] = {5, 0, 0};
    uint8_t sh[200];
    for (int i = 0; i < 200; i++)
        sh[i] = (uint8_t)(7 * i + 1);
    pft_bundle_mask_t m = make_mask("z:tied", "z", 6);
    m.shares = sh;
    m.shares_len = sizeof sh;
    const char *ca[] = {"a"}, *cab[] = {"a", "b"};
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, counts2, &w, &m) == PFT_EINVAL &&
          w);
    CHECK(strstr(pft_errmsg(), "shares on a part of 2") != NULL);
    m.shares_len = PFT_BUNDLE_MASK_SHARES_MAX + 1;
    CHECK(pft_bundle_add_masked_part(b, ca, 1, PFT_GSTAT_TIED, K, LABELS, counts, &w, &m) == PFT_EINVAL && w);
    CHECK(strstr(pft_errmsg(), "shares of") != NULL);
    m.shares_len = sizeof sh;
    CHECK(pft_bundle_add_masked_part(b, ca, 1, PFT_GSTAT_TIED, K, LABELS, counts, &w, &m) == 0 && !w);
    sh[0] ^= 0xff; /* the part holds its own copy */
    uint8_t *m1 = NULL, *m2 = NULL;
    size_t l1 = 0, l2 = 0;
    CHECK(pft_bundle_encode(b, &m1, &l1) == 0 && pft_bundle_decode(m1, l1, NULL, &o) == 0);
    const pft_bundle_mask_t *mo = o ? pft_bundle_part_mask(o, 0) : NULL;
    sh[0] ^= 0xff;
    CHECK(mo && mo->shares_len == sizeof sh && memcmp(mo->shares, sh, sizeof sh) == 0);
    CHECK(o && pft_bundle_encode(o, &m2, &l2) == 0 && l1 == l2 && memcmp(m1, m2, l1) == 0);
    pft_free(m1);
    pft_free(m2);
    pft_free(w);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
}

static void test_full_round_trip(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "z", PFT_DTYPE_F16, D), *o = NULL;
    CHECK(pft_bundle_prov_add(b, "a", 1, 4) == 0);
    const char *ca[] = {"a"};
    size_t nw = pft_bundle_masked_words(PFT_GSTAT_FULL, 2, D);
    CHECK(nw == 2 * (D + D * (D + 1) / 2));
    uint64_t *w = make_words(nw), counts[2] = {0, 4};
    int labels[2] = {1, 7};
    CHECK(pft_bundle_prov_add(b, "a", 7, 0) != 0); /* provenance counts are ≥ 1: a class of 0 has no entry */
    pft_bundle_mask_t m = make_mask("g", "z", 4);
    /* counts disagree with the provenance (label 1 has 4 rows, not 0): refused at encode */
    CHECK(pft_bundle_add_masked_part(b, ca, 1, PFT_GSTAT_FULL, 2, labels, counts, &w, &m) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &buf, &len) == PFT_EINVAL);
    pft_free(buf);
    pft_bundle_destroy(&b);
    b = pft_bundle_new("run", "z", PFT_DTYPE_F16, D);
    CHECK(pft_bundle_prov_add(b, "a", 7, 4) == 0);
    w = make_words(nw);
    CHECK(pft_bundle_add_masked_part(b, ca, 1, PFT_GSTAT_FULL, 2, labels, counts, &w, &m) == 0);
    CHECK(pft_bundle_encode(b, &buf, &len) == 0);
    CHECK(pft_bundle_decode(buf, len, NULL, &o) == 0);
    const uint64_t *got = o ? pft_bundle_part_words(o, 0, &nw) : NULL;
    uint64_t *want = make_words(nw);
    CHECK(got && nw == 2 * (D + D * (D + 1) / 2) && memcmp(got, want, nw * 8) == 0);
    CHECK(o && pft_bundle_part_kind(o, 0) == PFT_GSTAT_FULL);
    pft_free(want);
    pft_free(buf);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&b);
}

static void test_api_refusals(void)
{
    pft_bundle_t *b = pft_bundle_new("run", "c", PFT_DTYPE_F32, D);
    const char *cab[] = {"a", "b"}, *cba[] = {"b", "a"};
    size_t nw = pft_bundle_masked_words(PFT_GSTAT_TIED, K, D);
    uint64_t *w = make_words(nw), counts[K] = {1, 1, 1}, big[K] = {1, PFT_BUNDLE_MAX_COUNT + 1, 1};
    int unsorted[K] = {0, 2, 1};
    pft_bundle_mask_t ok = make_mask("l", "z", 3);
    struct {
        const char *what;
        pft_bundle_mask_t m;
    } bad[] = {
        {"opener a contributor", make_mask("l", "a", 3)},          {"bound 0", make_mask("l", "z", 0)},
        {"bound 2^31", make_mask("l", "z", UINT64_C(1) << 31)},    {"empty label", make_mask("", "z", 3)},
        {"label with a control byte", make_mask("l\x01", "z", 3)}, {"empty opener", make_mask("l", "", 3)},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, counts, &w, &bad[i].m);
        CHECK_MSG(rc == PFT_EINVAL && w != NULL, "%s: rc %d", bad[i].what, rc);
    }
    pft_bundle_mask_t f31 = ok;
    f31.frac_bits = 31;
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, counts, &w, &f31) == PFT_EINVAL);
    CHECK(pft_bundle_add_masked_part(b, cba, 2, PFT_GSTAT_TIED, K, LABELS, counts, &w, &ok) == PFT_EINVAL);
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, unsorted, counts, &w, &ok) == PFT_EINVAL);
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, big, &w, &ok) == PFT_EINVAL);
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, 0, LABELS, counts, &w, &ok) == PFT_EINVAL);
    CHECK(pft_bundle_n_parts(b) == 0 && w != NULL);
    CHECK(pft_bundle_add_masked_part(b, cab, 2, PFT_GSTAT_TIED, K, LABELS, counts, &w, &ok) == 0 && !w);
    /* a contributor in two parts; another kind in the same bundle */
    w = make_words(nw);
    CHECK(pft_bundle_add_masked_part(b, cab, 1, PFT_GSTAT_TIED, K, LABELS, counts, &w, &ok) == PFT_EINVAL);
    pft_free(w);
    w = make_words(pft_bundle_masked_words(PFT_GSTAT_FULL, K, D));
    const char *cc[] = {"c"};
    CHECK(pft_bundle_add_masked_part(b, cc, 1, PFT_GSTAT_FULL, K, LABELS, counts, &w, &ok) == PFT_EINVAL);
    pft_free(w);
    pft_bundle_destroy(&b);
}

/* The encoded mixed bundle with `from` (n bytes, found once) replaced by `to` (m bytes); decodes it and
 * expects code with needle in the message. */
static void expect_patch(const uint8_t *msg, size_t len, const uint8_t *from, size_t n, const uint8_t *to,
                         size_t m, int code, const char *needle)
{
    const uint8_t *at = memmem(msg, len, from, n);
    CHECK_MSG(at != NULL && memmem(at + 1, len - (size_t)(at - msg) - 1, from, n) == NULL,
              "pattern for \"%s\" not found once", needle);
    if (!at)
        return;
    size_t off = (size_t)(at - msg), nl = len - n + m;
    uint8_t *p = pft_alloc(nl);
    memcpy(p, msg, off);
    memcpy(p + off, to, m);
    memcpy(p + off + m, at + n, len - off - n);
    /* the envelope [ "PFTB", 1, payload, sig ]: the payload's bin header at byte 7 (bin8/16/32) */
    if (n != m) {
        int w = p[7] == 0xc4 ? 1 : p[7] == 0xc5 ? 2 : 4;
        uint64_t pl = 0;
        for (int i = 0; i < w; i++)
            pl = pl << 8 | p[8 + i];
        pl = pl + m - n;
        for (int i = w - 1; i >= 0; i--, pl >>= 8)
            p[8 + i] = (uint8_t)pl;
    }
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(p, nl, NULL, &o);
    CHECK_MSG(rc == code && o == NULL, "%s: rc %d (%s)", needle, rc, rc ? pft_errmsg() : "decoded");
    if (rc)
        CHECK_MSG(strstr(pft_errmsg(), needle) != NULL, "message \"%s\" lacks \"%s\"", pft_errmsg(), needle);
    pft_bundle_destroy(&o);
    pft_free(p);
}

static void test_hostile(void)
{
    pft_bundle_t *b = mixed_bundle();
    uint8_t *msg = NULL;
    size_t len = 0;
    CHECK(pft_bundle_encode(b, &msg, &len) == 0);
    if (!msg)
        goto out;
    /* the mask array as encoded: [str "z:tied", str "z", 32, 12, 0] */
    static const uint8_t mask[] = {0x95, 0xa6, 'z', ':', 't', 'i', 'e', 'd', 0xa1, 'z', 0x20, 0x0c, 0x00};
    uint8_t m[sizeof mask];
    memcpy(m, mask, sizeof m), m[10] = 31;
    expect_patch(msg, len, mask, sizeof mask, m, sizeof m, PFT_EFORMAT, "mask: fractional bits");
    memcpy(m, mask, sizeof m), m[11] = 0;
    expect_patch(msg, len, mask, sizeof mask, m, sizeof m, PFT_EFORMAT, "mask: bound");
    memcpy(m, mask, sizeof m), m[9] = 'a';
    expect_patch(msg, len, mask, sizeof mask, m, sizeof m, PFT_EFORMAT, "is a contributor");
    memcpy(m, mask, sizeof m), m[3] = 0x07;
    expect_patch(msg, len, mask, sizeof mask, m, sizeof m, PFT_EFORMAT, "mask: label");
    memcpy(m, mask, sizeof m), m[0] = 0x94;
    expect_patch(msg, len, mask, sizeof mask, m, sizeof m - 1, PFT_EFORMAT, "mask");
    /* the bound as a uint64 beyond 2^31 - 1: cf 00 00 00 00 80 00 00 00 */
    static const uint8_t big[] = {0x95, 0xa6, 'z',  ':',  't', 'i', 'e', 'd', 0xa1,
                                  'z',  0x20, 0xce, 0x80, 0,   0,   0,   0x00};
    expect_patch(msg, len, mask, sizeof mask, big, sizeof big, PFT_EFORMAT, "mask: bound");
    /* class 1 of the masked part: [1, 0, bin 32] with its bin one word short */
    uint64_t w0 = UINT64_C(0x0102030405060708) * (D + 1); /* the first word of class 1 */
    uint8_t cls[6 + 8], shortc[6];
    cls[0] = 0x93, cls[1] = 0x01, cls[2] = 0x00, cls[3] = 0xc4, cls[4] = 8 * D;
    for (int i = 0; i < 8; i++)
        cls[5 + i] = (uint8_t)(w0 >> (8 * i));
    memcpy(shortc, cls, 5);
    shortc[4] = 8 * (D - 1);
    expect_patch(msg, len, cls, 13, shortc, 5, PFT_EFORMAT, "masked sum");
    /* its count raised by one: the public counts disagree with the provenance */
    memcpy(shortc, cls, 5), shortc[2] = 0x01;
    expect_patch(msg, len, cls, 5, shortc, 5, PFT_EFORMAT, "provenance");
    /* truncations and bit flips: refused cleanly or decoded to a usable bundle */
    int rej = 0;
    for (size_t n = 0; n < len; n++) {
        pft_bundle_t *o = NULL;
        if (pft_bundle_decode(msg, n, NULL, &o) != 0 && o == NULL)
            rej++;
        pft_bundle_destroy(&o);
    }
    CHECK(rej == (int)len);
    int acc, rj, bad;
    pft_test_bit_flips(msg, len, &acc, &rj, &bad);
    CHECK(bad == 0);
    printf("  %zu prefixes rejected; %zu bit flips: %d rejected, %d decoded to valid bundles\n", len, 8 * len,
           rj, acc);
out:
    pft_free(msg);
    pft_bundle_destroy(&b);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_full_round_trip);
    RUN(test_shares);
    RUN(test_api_refusals);
    RUN(test_hostile);
    return pft_test_done();
}
