/* pft_node_fp: the topology fingerprint (topology/pft_topo_fingerprint.h): computed once at setup, stamped on
 * every bundle this node makes, compared on every bundle it receives before the ACK. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_log.h"
#include "pft_topo_fingerprint.h"

#include <stdio.h>
#include <string.h>

_Static_assert(PFT_TOPO_FP_LEN == PFT_BUNDLE_FP_LEN && PFT_TOPO_FP_DIGEST_LEN == PFT_BUNDLE_FP_DIGEST_LEN &&
                   PFT_TOPO_FP_NAME_MAX <= PFT_BUNDLE_FP_NAME_MAX,
               "the wire carries the topology's fingerprint as it is");

int pft_node__fp_setup(node_t *nd)
{
    size_t n = pft_topo_node_count(nd->topo);
    const uint8_t **keys = nd->hand.keys ? pft_calloc(n, sizeof *keys) : NULL;
    if (nd->hand.keys && !keys)
        return pft_err(PFT_ENOMEM, "topology fingerprint: out of memory");
    for (size_t i = 0; keys && i < n; i++)
        keys[i] = nd->hand.keys[i].bytes;
    int rc = pft_topo_fp_new(nd->topo, keys, &nd->fp);
    pft_free(keys);
    if (rc == 0) {
        char text[PFT_TOPO_FP_TEXT_LEN];
        pft_info("topology fingerprint: %s", pft_topo_fp_text(pft_topo_fp_hash(nd->fp), text));
    }
    return rc;
}

int pft_node__fp_stamp(const node_t *nd, pft_bundle_t *b)
{
    const pft_topo_fp_item_t *mine;
    size_t n = pft_topo_fp_items(nd->fp, &mine);
    pft_bundle_fp_item_t *items = pft_calloc(n ? n : 1, sizeof *items);
    if (!items)
        return pft_err(PFT_ENOMEM, "topology fingerprint: out of memory");
    for (size_t i = 0; i < n; i++) {
        snprintf(items[i].name, sizeof items[i].name, "%s", mine[i].name);
        memcpy(items[i].digest, mine[i].digest, PFT_BUNDLE_FP_DIGEST_LEN);
    }
    int rc = pft_bundle_set_fingerprint(b, pft_topo_fp_hash(nd->fp), items, n);
    pft_free(items);
    return rc;
}

/* "1a2b3c4d": the first 4 bytes of a fingerprint in hex. */
static void short_hex(const uint8_t *fp, char out[9])
{
    snprintf(out, 9, "%02x%02x%02x%02x", fp[0], fp[1], fp[2], fp[3]);
}

int pft_node__fp_check(const node_t *nd, const pft_bundle_t *b, char *reason, size_t rlen)
{
    const pft_bundle_fp_item_t *theirs;
    size_t n;
    const uint8_t *fp = pft_bundle_fingerprint(b, &theirs, &n);
    if (!fp) {
        snprintf(reason, rlen,
                 "bundle of '%s' carries no topology fingerprint (every pftnode bundle has one: another "
                 "build or tool made it)",
                 pft_bundle_producer(b));
        return 0;
    }
    if (memcmp(fp, pft_topo_fp_hash(nd->fp), PFT_TOPO_FP_LEN) == 0)
        return 1;
    char here[9], there[9];
    short_hex(pft_topo_fp_hash(nd->fp), here);
    short_hex(fp, there);
    int w = snprintf(reason, rlen, "topology differs from the one of '%s' (fingerprint %s here, %s there): ",
                     pft_bundle_producer(b), here, there);
    size_t used = w > 0 && (size_t)w < rlen ? (size_t)w : rlen;
    pft_topo_fp_item_t *items = pft_calloc(n ? n : 1, sizeof *items);
    size_t differ = 0;
    for (size_t i = 0; items && i < n; i++) {
        snprintf(items[i].name, sizeof items[i].name, "%.*s", PFT_TOPO_FP_NAME_MAX, theirs[i].name);
        memcpy(items[i].digest, theirs[i].digest, PFT_TOPO_FP_DIGEST_LEN);
    }
    if (items && used < rlen) /* the names fill what is left, cut whole with "…" */
        differ = pft_topo_fp_diff(nd->fp, items, n, reason + used, rlen - used);
    pft_free(items);
    if (!differ && used < rlen)
        snprintf(reason + used, rlen - used, "items not comparable");
    return 0;
}
