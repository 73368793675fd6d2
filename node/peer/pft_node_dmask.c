/* pft_node_dmask: double masking in a recoverable group (docs/SECAGG.md §5; Bonawitz et al., CCS 2017): each
 * member adds a self-mask PRG(b_u) to its masked words and shares b_u t-of-n over the group (pft_shamir),
 * each share sealed for its member under a key from their pair secret and carried in the member's masked
 * part to the opener; the opener hands each survivor the shares addressed to it inside its declaration; a
 * survivor reveals, per member, its share of b_u (u surviving) or its use key with u (u missing), never both;
 * the opener rebuilds every survivor's b_u from t shares and removes the self-masks. An opener that keeps a
 * member's bundle and declares it missing gets its pair masks off and still faces its self-mask. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_log.h"
#include "pft_mask.h"
#include "pft_shamir.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEALED (PFT_SHAMIR_SHARE_LEN + crypto_secretbox_MACBYTES) /* one member's slot of a blob */

_Static_assert(PFT_MASK_KEY_LEN == crypto_secretbox_KEYBYTES, "share keys are secretbox keys");
_Static_assert(SEALED <= PFT_SECMSG_EXTRA_MAX, "a sealed share travels as one extra bin");

/* The position of node v in the group, or -1. */
static long pos_of(const node_t *nd, size_t v)
{
    for (size_t m = 0; m < nd->sec.n_members; m++)
        if (nd->sec.members[m] == v)
            return (long)m;
    return -1;
}

static const uint8_t *label_of(const node_t *nd, size_t *len)
{
    *len = strlen(nd->sec.label);
    return (const uint8_t *)nd->sec.label;
}

/* The nonce of a share sealed by `from` for `to`: its first byte says the direction (the pair's key seals one
 * share each way per run and label). */
static void nonce_of(const node_t *nd, size_t from, size_t to, uint8_t nonce[crypto_secretbox_NONCEBYTES])
{
    memset(nonce, 0, crypto_secretbox_NONCEBYTES);
    nonce[0] = pft_mask_sign(&nd->hand.keys[from], &nd->hand.keys[to]) > 0 ? 1 : 2;
}

/* tests: PFT_TEST_LIAR_OPENER=<this opener> and PFT_TEST_LIAR_VICTIM=<member> make this opener lie. */
static void liar_setup(node_t *nd)
{
#ifdef PFT_TEST_HOOKS
    const char *v = getenv("PFT_TEST_LIAR_VICTIM");
    const pft_topo_node_t *u = v ? pft_topo_find(nd->topo, v) : NULL;
    if (pft_node__test_hook(nd, "PFT_TEST_LIAR_OPENER") && u && pos_of(nd, u->index) >= 0) {
        nd->dm.victim = (long)u->index + 1;
        pft_warn("test hook: this opener keeps %s's bundle aside and declares it missing", u->id);
    }
#else
    (void)nd;
#endif
}

int pft_node__dmask_setup(node_t *nd)
{
    if (!nd->sec.recover || nd->sec.n_members < 2) /* a group of one opens to its opener anyway */
        return 0;
    size_t n = nd->sec.n_members, t = pft_secplan_threshold(nd->sec.plan);
    nd->dm.t = t ? t : pft_secplan_default_threshold(n); /* the rules set it; a plan made without them too */
    long me = pos_of(nd, nd->my_index);
    nd->dm.my_pos = me >= 0 ? (size_t)me : 0;
    if (nd->sec.me->opens < 0)
        return 0;
    liar_setup(nd);
    nd->dm.blobs = pft_calloc(n, sizeof *nd->dm.blobs);
    nd->dm.shares = pft_calloc(n * n, sizeof *nd->dm.shares);
    nd->dm.have = pft_calloc(n * n, 1);
    return nd->dm.blobs && nd->dm.shares && nd->dm.have ? 0 : pft_err(PFT_ENOMEM, "out of memory");
}

void pft_node__dmask_free(node_t *nd)
{
    size_t n = nd->sec.n_members;
    for (size_t m = 0; nd->dm.blobs && m < n; m++)
        pft_free(nd->dm.blobs[m]);
    PFT_FREE(nd->dm.blobs);
    if (nd->dm.shares)
        sodium_memzero(nd->dm.shares, n * n * sizeof *nd->dm.shares);
    PFT_FREE(nd->dm.shares);
    PFT_FREE(nd->dm.have);
    PFT_FREE(nd->dm.blob);
    PFT_FREE(nd->dm.victim_words);
}

/* This member's split of b_u (secret and the shares of every member), rebuilt from its coins. */
static int own_split(const node_t *nd, pft_shamir_secret_t *secret, uint8_t (*shares)[PFT_SHAMIR_SHARE_LEN])
{
    uint8_t coins[PFT_MASK_KEY_LEN];
    size_t ll;
    const uint8_t *label = label_of(nd, &ll);
    int rc = pft_mask_self_coins(nd->hand.kp, nd->run->run, label, ll, coins);
    if (rc == 0)
        rc = pft_shamir_split(coins, nd->dm.t, nd->sec.n_members, secret, shares);
    sodium_memzero(coins, sizeof coins);
    return rc;
}

/* Seals share for member v (from this node) into out[SEALED]. */
static int seal_for(const node_t *nd, size_t v, const uint8_t *share, uint8_t *out)
{
    uint8_t key[PFT_MASK_KEY_LEN], nonce[crypto_secretbox_NONCEBYTES];
    size_t ll;
    const uint8_t *label = label_of(nd, &ll);
    int rc = pft_mask_share_key(nd->hand.kp, nd->run->run, &nd->hand.keys[v], label, ll, key);
    nonce_of(nd, nd->my_index, v, nonce);
    if (rc == 0 && crypto_secretbox_easy(out, share, PFT_SHAMIR_SHARE_LEN, nonce, key) != 0)
        rc = pft_err(PFT_EUNSUPPORTED, "sealing a share");
    sodium_memzero(key, sizeof key);
    return rc;
}

/* Opens the share member v sealed for this node: PFT_EREJECT when it does not open (forged, or sealed for
 * another) or is not at this node's share point. */
static int open_from(const node_t *nd, size_t v, const uint8_t *ct, size_t len, uint8_t *share)
{
    uint8_t key[PFT_MASK_KEY_LEN], nonce[crypto_secretbox_NONCEBYTES];
    size_t ll;
    const uint8_t *label = label_of(nd, &ll);
    int rc = pft_mask_share_key(nd->hand.kp, nd->run->run, &nd->hand.keys[v], label, ll, key);
    nonce_of(nd, v, nd->my_index, nonce);
    if (rc == 0 && (len != SEALED || crypto_secretbox_open_easy(share, ct, len, nonce, key) != 0))
        rc = pft_err(PFT_EREJECT, "the share from '%s' does not open with this node's pair key",
                     pft_topo_node(nd->topo, v)->id);
    if (rc == 0 && pft_shamir_share_x(share) != nd->dm.my_pos + 1)
        rc = pft_err(PFT_EREJECT, "the share from '%s' is not at this node's point",
                     pft_topo_node(nd->topo, v)->id);
    sodium_memzero(key, sizeof key);
    return rc;
}

int pft_node__dmask_member_add(node_t *nd, uint64_t *words, size_t n_words)
{
    if (!nd->dm.t)
        return 0;
    size_t n = nd->sec.n_members;
    uint8_t(*shares)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(n, sizeof *shares);
    uint8_t seed[PFT_SHAMIR_SEED_LEN], *blob = pft_calloc(n, SEALED);
    pft_shamir_secret_t secret;
    int rc = shares && blob ? own_split(nd, &secret, shares) : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t m = 0; rc == 0 && m < n; m++)
        if (m != nd->dm.my_pos)
            rc = seal_for(nd, nd->sec.members[m], shares[m], blob + m * SEALED);
    if (rc == 0) {
        pft_shamir_seed(&secret, seed);
        pft_mask_add_self(seed, +1, words, n_words);
        pft_free(nd->dm.blob);
        nd->dm.blob = blob, blob = NULL;
        nd->dm.blob_len = n * SEALED;
    }
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(&secret, sizeof secret);
    if (shares)
        sodium_memzero(shares, n * sizeof *shares);
    pft_free(shares);
    pft_free(blob);
    return rc ? pft_err_wrap(rc, "secure aggregation: the self-mask and its shares") : 0;
}

/* ---------- the opener ---------- */

int pft_node__dmask_take_blob(node_t *nd, size_t v, const inbound_t *in)
{
    long u = pos_of(nd, v);
    if (!nd->dm.t || u < 0)
        return 0;
    pft_bundle_t *full = NULL; /* a light bundle keeps the provenance only: its parts decoded again */
    pft_bundle_limits_t lim;
    pft_node__limits(nd, &lim);
    if (in->light && pft_bundle_decode(in->bytes, in->len, &lim, &full) != 0)
        return pft_err_wrap(PFT_EINVAL, "secure aggregation: %s's bundle decodes no more",
                            pft_topo_node(nd->topo, v)->id);
    const pft_bundle_t *b = full ? full : in->bundle;
    const pft_bundle_mask_t *m = NULL;
    for (int i = 0; !m && i < pft_bundle_n_parts(b); i++)
        if (pft_bundle_part_is_masked(b, i))
            m = pft_bundle_part_mask(b, i);
    uint8_t *copy = m && m->shares_len == nd->sec.n_members * SEALED ? pft_alloc(m->shares_len) : NULL;
    int rc =
        copy ? 0
             : pft_err(PFT_EINVAL,
                       "secure aggregation: %s's masked part carries %zu bytes of self-mask shares, not %zu: "
                       "its self-mask could not be removed",
                       pft_topo_node(nd->topo, v)->id, m ? m->shares_len : 0, nd->sec.n_members * SEALED);
    if (copy) {
        memcpy(copy, m->shares, m->shares_len);
        pft_free(nd->dm.blobs[u]);
        nd->dm.blobs[u] = copy;
    }
    pft_bundle_destroy(&full);
    return rc;
}

/* Indices surv[0..ns) sorted by node id (the wire's order), in place. */
static void sort_by_id(const node_t *nd, size_t *surv, size_t ns)
{
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j > 0 && strcmp(pft_topo_node(nd->topo, surv[j - 1])->id,
                                           pft_topo_node(nd->topo, surv[j])->id) > 0;
             j--) {
            size_t tmp = surv[j];
            surv[j] = surv[j - 1], surv[j - 1] = tmp;
        }
}

void *pft_node__dmask_declaration_extra(node_t *nd, size_t s, const size_t *surv, size_t ns, pft_secmsg_t *d)
{
    if (!nd->dm.t)
        return NULL;
    size_t *idx = pft_alloc_array(ns + 1, sizeof *idx);
    const char **ids = pft_alloc_array(ns + 1, sizeof *ids);
    const uint8_t **bins = pft_alloc_array(ns + 1, sizeof *bins);
    size_t *lens = pft_alloc_array(ns + 1, sizeof *lens), k = 0;
    void **mem = pft_alloc_array(5, sizeof *mem);
    long sp = pos_of(nd, s);
    if (!idx || !ids || !bins || !lens || !mem || sp < 0) {
        pft_free(idx), pft_free(ids), pft_free(bins), pft_free(lens), pft_free(mem);
        return NULL;
    }
    memcpy(idx, surv, ns * sizeof *idx);
    sort_by_id(nd, idx, ns);
    for (size_t i = 0; i < ns; i++) {
        long u = pos_of(nd, idx[i]);
        if (idx[i] == s || u < 0 || !nd->dm.blobs[u])
            continue;
        ids[k] = pft_topo_node(nd->topo, idx[i])->id;
        bins[k] = nd->dm.blobs[u] + (size_t)sp * SEALED;
        lens[k++] = SEALED;
    }
    d->has_extra = 1, d->n_extra = k, d->extra_ids = ids, d->extra = bins, d->extra_len = lens;
    mem[0] = idx, mem[1] = ids, mem[2] = bins, mem[3] = lens, mem[4] = NULL;
    return mem;
}

void pft_node__dmask_extra_free(void **mem_p)
{
    void **mem = *mem_p;
    if (mem && mem[4]) /* a reveal's shares: wiped */
        sodium_memzero(mem[0], *(const size_t *)mem[4]);
    for (int i = 0; mem && i < 5; i++)
        pft_free(mem[i]);
    pft_free(mem);
    *mem_p = NULL;
}

int pft_node__dmask_take_reveal(node_t *nd, size_t s, const pft_secmsg_t *m, const unsigned char *surviving)
{
    if (!nd->dm.t)
        return 0;
    size_t n = nd->sec.n_members, ns = 0;
    long sp = pos_of(nd, s);
    for (size_t u = 0; u < n; u++)
        ns += surviving[nd->sec.members[u]] != 0;
    if (!m->has_extra || m->n_extra != ns || sp < 0)
        return pft_err(PFT_EREJECT, "the reveal holds %zu self-mask share(s), not one per survivor (%zu)",
                       m->n_extra, ns);
    for (size_t i = 0; i < m->n_extra; i++) {
        const pft_topo_node_t *u = pft_topo_find(nd->topo, m->extra_ids[i]);
        long up = u ? pos_of(nd, u->index) : -1;
        if (up < 0 || !surviving[u->index] || m->extra_len[i] != PFT_SHAMIR_SHARE_LEN ||
            pft_shamir_share_x(m->extra[i]) != (uint64_t)sp + 1)
            return pft_err(PFT_EREJECT,
                           "the reveal's share of '%s''s self-mask seed is not a survivor's, or "
                           "not at the sender's point",
                           m->extra_ids[i]);
    }
    for (size_t i = 0; i < m->n_extra; i++) {
        size_t up = (size_t)pos_of(nd, pft_topo_find(nd->topo, m->extra_ids[i])->index);
        memcpy(nd->dm.shares[up * n + (size_t)sp], m->extra[i], PFT_SHAMIR_SHARE_LEN);
        nd->dm.have[up * n + (size_t)sp] = 1;
    }
    return 0;
}

int pft_node__dmask_remove(node_t *nd, const size_t *present, size_t n_present, uint64_t *sum, size_t n_words)
{
    if (!nd->dm.t)
        return 0;
    size_t n = nd->sec.n_members;
    uint8_t(*got)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(n, sizeof *got), seed[PFT_SHAMIR_SEED_LEN];
    int rc = got ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n_present; i++) {
        long u = pos_of(nd, present[i]);
        size_t k = 0;
        for (size_t s = 0; u >= 0 && s < n; s++)
            if (nd->dm.have[(size_t)u * n + s])
                memcpy(got[k++], nd->dm.shares[(size_t)u * n + s], PFT_SHAMIR_SHARE_LEN);
        pft_shamir_secret_t secret;
        rc = u < 0 ? PFT_EINVAL
                   : pft_shamir_combine((const uint8_t(*)[PFT_SHAMIR_SHARE_LEN])got, k, nd->dm.t, &secret);
        if (rc) {
            rc = pft_err(rc, "secure aggregation: %zu share(s) of %s's self-mask seed (threshold %zu): %s", k,
                         pft_topo_node(nd->topo, present[i])->id, nd->dm.t, pft_errmsg());
            break;
        }
        pft_shamir_seed(&secret, seed);
        pft_mask_add_self(seed, -1, sum, n_words);
        sodium_memzero(&secret, sizeof secret);
    }
    sodium_memzero(seed, sizeof seed);
    if (got)
        sodium_memzero(got, n * sizeof *got);
    pft_free(got);
    if (rc == 0)
        pft_info("secure aggregation: removed %zu self-mask(s), each rebuilt from %zu-of-%zu shares",
                 n_present, nd->dm.t, n);
    return rc;
}

/* ---------- a survivor ---------- */

int pft_node__dmask_check_declaration(node_t *nd, const pft_secmsg_t *m, char *reason, size_t rlen)
{
    if (!nd->dm.t)
        return 0;
    uint8_t share[PFT_SHAMIR_SHARE_LEN];
    int rc = m->has_extra ? 0 : pft_err(PFT_EREJECT, "the declaration carries no self-mask shares");
    for (size_t i = 0; rc == 0 && i < m->n_survivors; i++) {
        const pft_topo_node_t *u = pft_topo_find(nd->topo, m->survivors[i]);
        if (!u || u->index == nd->my_index)
            continue;
        size_t j = 0;
        while (j < m->n_extra && strcmp(m->extra_ids[j], u->id) != 0)
            j++;
        rc = j == m->n_extra ? pft_err(PFT_EREJECT, "no share from survivor '%s' for this node", u->id)
                             : open_from(nd, u->index, m->extra[j], m->extra_len[j], share);
    }
    if (rc == 0 && m->n_extra + 1 != m->n_survivors)
        rc = pft_err(PFT_EREJECT, "%zu shares for %zu other survivors", m->n_extra, m->n_survivors - 1);
    sodium_memzero(share, sizeof share);
    if (rc)
        snprintf(reason, rlen, "double masking: %s", pft_errmsg());
    return rc ? PFT_EREJECT : 0;
}

void *pft_node__dmask_reveal_extra(node_t *nd, const pft_secmsg_t *m, pft_secmsg_t *r)
{
    if (!nd->dm.t)
        return NULL;
    size_t n = nd->sec.n_members, ns = m->n_survivors;
    uint8_t(*mine)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(n, sizeof *mine);
    uint8_t(*sh)[PFT_SHAMIR_SHARE_LEN] = pft_alloc_array(ns + 1, sizeof *sh);
    const uint8_t **bins = pft_alloc_array(ns + 1, sizeof *bins);
    size_t *lens = pft_alloc_array(ns + 1, sizeof *lens);
    void **mem = pft_alloc_array(5, sizeof *mem);
    size_t *bytes = pft_alloc(sizeof *bytes);
    pft_shamir_secret_t secret;
    int rc = mine && sh && bins && lens && mem && bytes ? own_split(nd, &secret, mine) : PFT_ENOMEM;
    sodium_memzero(&secret, sizeof secret);
    for (size_t i = 0; rc == 0 && i < ns; i++) { /* survivors ascending: the extra's order */
        const pft_topo_node_t *u = pft_topo_find(nd->topo, m->survivors[i]);
        size_t j = 0;
        while (u->index != nd->my_index && strcmp(m->extra_ids[j], u->id) != 0)
            j++; /* there: the declaration was checked */
        rc = u->index == nd->my_index ? (memcpy(sh[i], mine[nd->dm.my_pos], sizeof sh[i]), 0)
                                      : open_from(nd, u->index, m->extra[j], m->extra_len[j], sh[i]);
        bins[i] = sh[i], lens[i] = PFT_SHAMIR_SHARE_LEN;
    }
    if (mine)
        sodium_memzero(mine, n * sizeof *mine);
    pft_free(mine);
    if (rc) {
        if (sh)
            sodium_memzero(sh, (ns + 1) * sizeof *sh);
        pft_free(sh), pft_free(bins), pft_free(lens), pft_free(mem), pft_free(bytes);
        return NULL;
    }
    r->has_extra = 1, r->n_extra = ns, r->extra_ids = m->survivors, r->extra = bins, r->extra_len = lens;
    *bytes = (ns + 1) * sizeof *sh;
    mem[0] = sh, mem[1] = bins, mem[2] = lens, mem[3] = NULL, mem[4] = bytes;
    return mem;
}
