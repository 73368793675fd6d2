/* fuzz_bundle: libFuzzer harness for the bundle codec (envelope parse, payload decode) with round-trip
 * invariants; also built without libFuzzer as the ctest corpus replay (replay_main.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_secmsg.h"
#include "pft_gstat.h"
#include "pft_error.h"
#include "pft_gmm.h"

/* Invariants checked on every input (a violation aborts, so libFuzzer saves the input):
 * - decode fails with a negative code, a message and *out NULL, or succeeds with a bundle;
 * - a decoded bundle re-encodes to the very message it came from (the decoder accepts only the canonical
 *   form, and keeps the payload), its id is the message's id, and the envelope parses to that payload;
 * - a bundle rebuilt through the public API from the decoded one (new, add_class with a copy of each
 *   GMM, prov_add, prov_merge of the original, add_parent, flags, fingerprint, signature) encodes (what the
 *   decoder accepts the encoder accepts) to a message of the same length, which decodes to the same contents
 *   (weights within 1e-12: the decoder renormalises them; everything else bit for bit). */

#define FAIL(...)                                                                                            \
    do {                                                                                                     \
        fprintf(stderr, "fuzz_bundle: invariant violated: " __VA_ARGS__);                                    \
        fprintf(stderr, "\n");                                                                               \
        abort();                                                                                             \
    } while (0)

#define WEIGHT_TOL 1e-12

static size_t cov_len(const pft_gmm_t *g)
{
    size_t d = (size_t)pft_gmm_dim(g);
    pft_cov_t c = pft_gmm_cov(g);
    return c == PFT_COV_FULL ? d * d : c == PFT_COV_DIAG ? d : 1;
}

/* Same model: structure, weights within tol, means and covariances (and Cholesky factors) bit for bit. */
static void check_same_gmm(const pft_gmm_t *a, const pft_gmm_t *b, int cls)
{
    if (pft_gmm_k(a) != pft_gmm_k(b) || pft_gmm_dim(a) != pft_gmm_dim(b) || pft_gmm_cov(a) != pft_gmm_cov(b))
        FAIL("class %d: GMM shape differs", cls);
    size_t k = (size_t)pft_gmm_k(a), d = (size_t)pft_gmm_dim(a), cl = cov_len(a);
    for (size_t j = 0; j < k; j++)
        if (!(fabs(pft_gmm_weights(a)[j] - pft_gmm_weights(b)[j]) <= WEIGHT_TOL))
            FAIL("class %d: weight %zu: %.17g vs %.17g", cls, j, pft_gmm_weights(a)[j],
                 pft_gmm_weights(b)[j]);
    if (memcmp(pft_gmm_means(a), pft_gmm_means(b), k * d * sizeof(double)) != 0)
        FAIL("class %d: means differ", cls);
    if (memcmp(pft_gmm_covars(a), pft_gmm_covars(b), k * cl * sizeof(double)) != 0)
        FAIL("class %d: covariances differ", cls);
    if (pft_gmm_cov(a) == PFT_COV_FULL &&
        memcmp(pft_gmm_chol(a), pft_gmm_chol(b), k * cl * sizeof(double)) != 0)
        FAIL("class %d: Cholesky factors differ", cls);
}

/* Same bundle contents (header, classes, provenance, parents, signature). */
static void check_same_bundle(const pft_bundle_t *a, const pft_bundle_t *b)
{
    if (strcmp(pft_bundle_run_id(a), pft_bundle_run_id(b)) != 0 ||
        strcmp(pft_bundle_producer(a), pft_bundle_producer(b)) != 0)
        FAIL("run id or producer differs");
    if (pft_bundle_flags(a) != pft_bundle_flags(b) || pft_bundle_dtype(a) != pft_bundle_dtype(b) ||
        pft_bundle_dim(a) != pft_bundle_dim(b))
        FAIL("flags, dtype or dimension differs");
    int nc = pft_bundle_n_classes(a);
    if (nc != pft_bundle_n_classes(b))
        FAIL("class count differs: %d vs %d", nc, pft_bundle_n_classes(b));
    for (int i = 0; i < nc; i++) {
        if (pft_bundle_class_label(a, i) != pft_bundle_class_label(b, i) ||
            pft_bundle_class_count(a, i) != pft_bundle_class_count(b, i))
            FAIL("class %d: label or count differs", i);
        if (pft_bundle_find_class(b, pft_bundle_class_label(a, i)) != i)
            FAIL("class %d: find_class disagrees", i);
        check_same_gmm(pft_bundle_class_gmm(a, i), pft_bundle_class_gmm(b, i), i);
    }
    int nn = pft_bundle_prov_n_nodes(a);
    if (nn != pft_bundle_prov_n_nodes(b))
        FAIL("provenance node count differs");
    for (int i = 0; i < nn; i++) {
        if (strcmp(pft_bundle_prov_node(a, i), pft_bundle_prov_node(b, i)) != 0)
            FAIL("provenance node %d differs", i);
        int nl = pft_bundle_prov_n_labels(a, i);
        if (nl != pft_bundle_prov_n_labels(b, i))
            FAIL("provenance node %d: label count differs", i);
        for (int j = 0; j < nl; j++) {
            int la, lb;
            uint64_t ca, cb;
            pft_bundle_prov_entry(a, i, j, &la, &ca);
            pft_bundle_prov_entry(b, i, j, &lb, &cb);
            if (la != lb || ca != cb)
                FAIL("provenance node %d entry %d differs", i, j);
        }
    }
    int np = pft_bundle_n_parents(a);
    if (np != pft_bundle_n_parents(b))
        FAIL("parent count differs");
    for (int i = 0; i < np; i++)
        if (memcmp(pft_bundle_parent(a, i), pft_bundle_parent(b, i), PFT_BUNDLE_ID_LEN) != 0)
            FAIL("parent %d differs", i);
    size_t sa = 0, sb = 0;
    const uint8_t *ga = pft_bundle_signature(a, &sa), *gb = pft_bundle_signature(b, &sb);
    if (sa != sb || (sa && memcmp(ga, gb, sa) != 0))
        FAIL("signature differs");
}

/* Masked part i of o added to re through the public API (aborts where it refuses what the decoder accepted). */
static void rebuild_masked(pft_bundle_t *re, const pft_bundle_t *o, int i, const char *const *who, int nw)
{
    int nc = pft_bundle_part_n_classes(o, i);
    size_t n = 0;
    const uint64_t *w = pft_bundle_part_words(o, i, &n);
    int *labels = malloc(((size_t)nc + 1) * sizeof *labels);
    uint64_t *counts = malloc(((size_t)nc + 1) * sizeof *counts), *words = pft_alloc_array(n + 1, sizeof *words);
    if (!labels || !counts || !words || !w)
        FAIL("masked part %d: out of memory or no words", i);
    for (int k = 0; k < nc; k++)
        pft_bundle_part_class(o, i, k, &labels[k], &counts[k]);
    memcpy(words, w, n * sizeof *words);
    if (n != pft_bundle_masked_words(pft_bundle_part_kind(o, i), nc, pft_bundle_dim(o)))
        FAIL("masked part %d: %zu words for its layout", i, n);
    if (pft_bundle_add_masked_part(re, who, nw, pft_bundle_part_kind(o, i), nc, labels, counts, &words,
                                   pft_bundle_part_mask(o, i)) != 0)
        FAIL("add_masked_part refuses decoded part %d: %s", i, pft_errmsg());
    free(labels);
    free(counts);
}

/* A bundle rebuilt from o through the public API; aborts where the API refuses what the decoder accepted. */
static pft_bundle_t *rebuild(const pft_bundle_t *o)
{
    pft_bundle_t *re =
        pft_bundle_new(pft_bundle_run_id(o), pft_bundle_producer(o), pft_bundle_dtype(o), pft_bundle_dim(o));
    if (!re)
        FAIL("bundle_new refuses decoded header: %s", pft_errmsg());
    for (int i = 0; i < pft_bundle_n_parts(o); i++) { /* statistics parts, in their (canonical) order */
        int nw = pft_bundle_part_n_contributors(o, i);
        const char *who[4096];
        for (int j = 0; j < nw && j < 4096; j++)
            who[j] = pft_bundle_part_contributor(o, i, j);
        if (nw > 4096)
            FAIL("part %d: %d contributors", i, nw);
        if (pft_bundle_part_is_masked(o, i)) { /* masked: its layout, counts, words and mask as decoded */
            rebuild_masked(re, o, i, who, nw);
            continue;
        }
        pft_gstat_t *st = pft_gstat_dup(pft_bundle_part_stats(o, i));
        if (!st || pft_bundle_add_part(re, who, nw, &st) != 0)
            FAIL("add_part refuses decoded part %d: %s", i, pft_errmsg());
    }
    for (int i = 0; i < pft_bundle_n_classes(o); i++) {
        pft_gmm_t *g = pft_gmm_dup(pft_bundle_class_gmm(o, i));
        if (!g)
            FAIL("gmm_dup failed: %s", pft_errmsg());
        if (pft_bundle_add_class(re, pft_bundle_class_label(o, i), pft_bundle_class_count(o, i), &g) != 0)
            FAIL("add_class refuses decoded class %d: %s", i, pft_errmsg());
    }
    for (int i = 0; i < pft_bundle_prov_n_nodes(o); i++)
        for (int j = 0; j < pft_bundle_prov_n_labels(o, i); j++) {
            int label;
            uint64_t count;
            pft_bundle_prov_entry(o, i, j, &label, &count);
            if (pft_bundle_prov_add(re, pft_bundle_prov_node(o, i), label, count) != 0)
                FAIL("prov_add refuses decoded entry: %s", pft_errmsg());
            if (pft_bundle_prov_count(re, pft_bundle_prov_node(o, i), label) != count ||
                !pft_bundle_prov_contains(re, pft_bundle_prov_node(o, i)))
                FAIL("prov_count disagrees after prov_add");
        }
    if (pft_bundle_prov_merge(re, o) != 0) /* the same entries again: a no-op */
        FAIL("prov_merge of identical provenance fails: %s", pft_errmsg());
    for (int i = 0; i < pft_bundle_n_parents(o); i++)
        if (pft_bundle_add_parent(re, pft_bundle_parent(o, i)) != 0)
            FAIL("add_parent refuses decoded parent: %s", pft_errmsg());
    if (pft_bundle_set_flags(re, pft_bundle_flags(o)) != 0)
        FAIL("set_flags refuses decoded flags");
    const pft_bundle_fp_item_t *items;
    size_t n_items;
    const uint8_t *fp = pft_bundle_fingerprint(o, &items, &n_items);
    if (fp && pft_bundle_set_fingerprint(re, fp, items, n_items) != 0)
        FAIL("set_fingerprint refuses the decoded fingerprint: %s", pft_errmsg());
    size_t sl = 0;
    const uint8_t *sig = pft_bundle_signature(o, &sl);
    if (pft_bundle_set_signature(re, sig, sl) != 0)
        FAIL("set_signature refuses decoded signature");
    return re;
}

static void check_decoded(const uint8_t *data, size_t size, const pft_bundle_t *o)
{
    pft_envelope_t env;
    if (pft_envelope_parse(data, size, NULL, &env) != 0)
        FAIL("decoded, but envelope_parse fails: %s", pft_errmsg());
    uint8_t *pay = NULL, *msg = NULL, *msg2 = NULL;
    size_t pay_len = 0, msg_len = 0, msg2_len = 0;
    if (pft_bundle_encode_payload(o, &pay, &pay_len) != 0)
        FAIL("decoded bundle does not encode: %s", pft_errmsg());
    if (pay_len != env.payload_len || memcmp(pay, env.payload, pay_len) != 0)
        FAIL("re-encoded payload differs from the decoded one (%zu vs %zu bytes)", pay_len, env.payload_len);
    uint8_t id1[PFT_BUNDLE_ID_LEN], id2[PFT_BUNDLE_ID_LEN], id3[PFT_BUNDLE_ID_LEN];
    if (pft_bundle_id(o, id1) != 0 || pft_bundle_message_id(data, size, NULL, id2) != 0)
        FAIL("id of a decoded bundle fails: %s", pft_errmsg());
    pft_bundle_hash(env.payload, env.payload_len, id3);
    if (memcmp(id1, id2, sizeof id1) != 0 || memcmp(id1, id3, sizeof id1) != 0)
        FAIL("bundle id differs from message id");
    if (pft_bundle_encode(o, &msg, &msg_len) != 0)
        FAIL("decoded bundle does not encode: %s", pft_errmsg());
    if (msg_len != size || memcmp(msg, data, size) != 0)
        FAIL("accepted message is not canonical: re-encodes to %zu bytes, input %zu", msg_len, size);
    (void)pft_bundle_formula_bytes(o);

    pft_bundle_t *re = rebuild(o), *o2 = NULL;
    if (pft_bundle_encode(re, &msg2, &msg2_len) != 0)
        FAIL("rebuilt bundle does not encode: %s", pft_errmsg());
    if (msg2_len != size)
        FAIL("rebuilt bundle encodes to %zu bytes, input %zu", msg2_len, size);
    if (pft_bundle_decode(msg2, msg2_len, NULL, &o2) != 0 || !o2)
        FAIL("re-encoding of a rebuilt bundle does not decode: %s", pft_errmsg());
    check_same_bundle(o, o2);
    check_same_bundle(o, re);
    pft_bundle_destroy(&o2);
    pft_bundle_destroy(&re);
    pft_free(pay);
    pft_free(msg);
    pft_free(msg2);
}

/* The same bytes as a secure-aggregation control message (WIRE.md §2.3): a decoded one is never also a bundle,
 * passes its own checks again (re-encodes) and is recognised by pft_secmsg_is; a failure leaves a message. */
static void check_secmsg(const uint8_t *data, size_t size)
{
    pft_secmsg_t *m = NULL;
    int rc = pft_secmsg_decode(data, size, &m);
    if (rc != 0) {
        if (rc > 0 || m != NULL || pft_errmsg()[0] == '\0')
            FAIL("secmsg decode failed with rc %d, out %p, message \"%s\"", rc, (void *)m, pft_errmsg());
        return;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!pft_secmsg_is(data, size))
        FAIL("a decoded secagg message is not recognised as one");
    if (pft_secmsg_encode(m, NULL, &buf, &len) != 0)
        FAIL("a decoded secagg message does not encode again: %s", pft_errmsg());
    pft_bundle_t *b = NULL;
    if (pft_bundle_decode(data, size, NULL, &b) == 0)
        FAIL("bytes that decode as a secagg message decode as a bundle too");
    pft_free(buf);
    pft_secmsg_destroy(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pft_envelope_t env;
    int erc = pft_envelope_parse(data, size, NULL, &env);
    if (erc == 0 && (env.payload < data || env.payload + env.payload_len > data + size ||
                     (env.sig && (env.sig < data || env.sig + env.sig_len > data + size))))
        FAIL("envelope pointers outside the message");
    check_secmsg(data, size);
    pft_bundle_t *o = NULL;
    int rc = pft_bundle_decode(data, size, NULL, &o);
    if (rc != 0) {
        if (rc > 0 || o != NULL || pft_errmsg()[0] == '\0')
            FAIL("decode failed with rc %d, out %p, message \"%s\"", rc, (void *)o, pft_errmsg());
        return 0;
    }
    if (!o)
        FAIL("decode succeeded without a bundle");
    if (erc != 0)
        FAIL("decode succeeded but envelope_parse fails");
    check_decoded(data, size, o);
    pft_bundle_destroy(&o);
    pft_bundle_destroy(&o); /* safe twice */
    return 0;
}
