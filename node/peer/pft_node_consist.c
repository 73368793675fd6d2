/* pft_node_consist: the consistency round of double masking (docs/SECAGG.md §5.1; Bonawitz et al., CCS 2017,
 * ConsistencyCheck). Before it reveals anything, each survivor signs (its Ed25519 node key) the statement of
 * the declaration it accepted — run, label, topology fingerprint, survivor set (pft_secmsg_statement) — and
 * sends the signature to the opener; the opener forwards every signature it collected to every survivor; a
 * survivor reveals only once it holds at least t valid signatures of ITS survivor set from distinct survivors
 * of that set, its own among them. Each honest member signs one declaration per run, so an opener that sent
 * different survivor sets to different survivors cannot show t signatures of each to both sides unless
 * enough members collude (the bound is in SECAGG §5.1). */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

int pft_node__consist_setup(node_t *nd)
{
    nd->cons.sign = -1;
    if (!nd->dm.t || nd->sec.me->opens < 0)
        return 0;
    size_t n = pft_topo_node_count(nd->topo);
    nd->cons.sig = pft_calloc(n, sizeof *nd->cons.sig);
    nd->cons.have = pft_calloc(n, 1);
    return nd->cons.sig && nd->cons.have ? 0 : pft_err(PFT_ENOMEM, "out of memory");
}

void pft_node__consist_free(node_t *nd)
{
    PFT_FREE(nd->cons.sig);
    PFT_FREE(nd->cons.have);
}

/* The statement of survivors[0..n) in this run and group. */
static int statement(const node_t *nd, const char *const *survivors, size_t n,
                     uint8_t out[PFT_SECMSG_STATEMENT_LEN])
{
    return pft_secmsg_statement(nd->run->run, nd->sec.label, pft_topo_fp_hash(nd->fp), survivors, n, out);
}

/* A message's extra of k [id, signature] pairs: the memory pft_node__dmask_extra_free frees (mem[0] the
 * signatures, mem[1] the ids, mem[2] the bins, mem[3] the lengths); NULL if out of memory. */
static void **pairs_new(size_t k)
{
    void **mem = pft_calloc(5, sizeof *mem);
    if (mem) {
        mem[0] = pft_alloc_array(k + 1, PFT_SECMSG_SIG_LEN);
        mem[1] = pft_alloc_array(k + 1, sizeof(char *));
        mem[2] = pft_alloc_array(k + 1, sizeof(uint8_t *));
        mem[3] = pft_alloc_array(k + 1, sizeof(size_t));
    }
    void *any = mem;
    if (mem && (!mem[0] || !mem[1] || !mem[2] || !mem[3]))
        pft_node__dmask_extra_free(&any);
    return any;
}

static void pairs_set(void **mem, pft_secmsg_t *r, size_t k)
{
    r->has_extra = 1, r->n_extra = k;
    r->extra_ids = mem[1], r->extra = mem[2], r->extra_len = mem[3];
}

void *pft_node__consist_sign(node_t *nd, const pft_secmsg_t *d, pft_secmsg_t *r)
{
    uint8_t st[PFT_SECMSG_STATEMENT_LEN];
    void **mem = pairs_new(1);
    int rc = mem ? statement(nd, d->survivors, d->n_survivors, st) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0)
        rc = pft_keypair_sign(nd->hand.kp, st, sizeof st, mem[0]);
    if (rc) {
        void *any = mem;
        pft_node__dmask_extra_free(&any);
        return NULL;
    }
    ((const char **)mem[1])[0] = nd->me->id;
    ((const uint8_t **)mem[2])[0] = mem[0];
    ((size_t *)mem[3])[0] = PFT_SECMSG_SIG_LEN;
    r->kind = PFT_SECMSG_SIGN;
    r->n_ids = d->n_ids, r->ids = d->ids;
    r->n_survivors = d->n_survivors, r->survivors = d->survivors;
    pairs_set(mem, r, 1);
    return mem;
}

/* 1 if the sorted lists a[0..na) and b[0..nb) are the same ids. */
static int same_ids(const char *const *a, size_t na, const char *const *b, size_t nb)
{
    for (size_t i = 0; na == nb && i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return na == nb;
}

int pft_node__consist_take(node_t *nd, size_t v, const pft_secmsg_t *m, const char *const *survivors,
                           size_t ns, char *reason, size_t rlen)
{
    uint8_t st[PFT_SECMSG_STATEMENT_LEN];
    if (!nd->cons.have)
        snprintf(reason, rlen, "this opener runs no consistency round");
    else if (!same_ids(m->survivors, m->n_survivors, survivors, ns))
        snprintf(reason, rlen,
                 "the signed survivor set (%zu survivors) is not the one declared to '%s' (%zu)",
                 m->n_survivors, m->sender, ns);
    else if (statement(nd, survivors, ns, st) != 0 ||
             pft_pubkey_verify(&nd->hand.keys[v], st, sizeof st, m->extra[0], m->extra_len[0]) != 0)
        snprintf(reason, rlen, "the signature of '%s' does not verify over its declaration", m->sender);
    else {
        memcpy(nd->cons.sig[v], m->extra[0], PFT_SECMSG_SIG_LEN);
        nd->cons.have[v] = 1;
        return 0;
    }
    return PFT_EREJECT;
}

int pft_node__survivor_took(node_t *nd, size_t v)
{
    const char *why = NULL;
    int st = nd->drop.notice[v] >= 0 ? pft_transport_send_state(nd->hand.tp, nd->drop.notice[v], NULL, &why)
                                     : PFT_SEND_FAILED;
    if (st != PFT_SEND_REJECTED && st != PFT_SEND_FAILED)
        return 0;
    return pft_err(PFT_EREJECT,
                   "secure aggregation: survivor %s %s the declaration (%s): the sum stays masked",
                   pft_topo_node(nd->topo, v)->id, st == PFT_SEND_REJECTED ? "refused" : "never took",
                   why && why[0] ? why : "no reason");
}

int pft_node__consist_signed(node_t *nd, const size_t *surv, size_t ns, double until)
{
    int all = 1;
    for (size_t i = 0; i < ns; i++) {
        size_t v = surv[i];
        if (nd->cons.have[v] || nd->drop.have[v]) /* signed, or revealed already (an earlier run) */
            continue;
        all = 0;
        int rc = pft_node__survivor_took(nd, v);
        if (rc)
            return rc;
        if (pft_fsio_now() > until)
            return pft_err(PFT_ETIMEOUT,
                           "secure aggregation: survivor %s took the declaration but sent no signature of "
                           "it within send_deadline: the sum stays masked",
                           pft_topo_node(nd->topo, v)->id);
    }
    return all;
}

void *pft_node__consist_forward(node_t *nd, pft_secmsg_t *r)
{
    size_t n = pft_topo_node_count(nd->topo), k = 0;
    for (size_t v = 0; v < n; v++)
        k += nd->cons.have[v] != 0;
    void **mem = pairs_new(k);
    if (!mem)
        return NULL;
    const char **ids = mem[1];
    const uint8_t **bins = mem[2];
    size_t *lens = mem[3], j = 0;
    uint8_t *sigs = mem[0];
    for (size_t v = 0; v < n; v++) { /* ids ascending (the wire's rule): insertion by id */
        if (!nd->cons.have[v])
            continue;
        const char *id = pft_topo_node(nd->topo, v)->id;
        size_t i = j++;
        for (; i > 0 && strcmp(ids[i - 1], id) > 0; i--)
            ids[i] = ids[i - 1],
            memcpy(sigs + i * PFT_SECMSG_SIG_LEN, sigs + (i - 1) * PFT_SECMSG_SIG_LEN, PFT_SECMSG_SIG_LEN);
        ids[i] = id;
        memcpy(sigs + i * PFT_SECMSG_SIG_LEN, nd->cons.sig[v], PFT_SECMSG_SIG_LEN);
    }
    for (size_t i = 0; i < k; i++)
        bins[i] = sigs + i * PFT_SECMSG_SIG_LEN, lens[i] = PFT_SECMSG_SIG_LEN;
    r->kind = PFT_SECMSG_SIGNATURES;
    pairs_set(mem, r, k);
    nd->cons.n_forwarded = k;
    return mem;
}

/* 1 if id is among d's survivors. */
static int declared_survivor(const pft_secmsg_t *d, const char *id)
{
    for (size_t i = 0; i < d->n_survivors; i++)
        if (strcmp(d->survivors[i], id) == 0)
            return 1;
    return 0;
}

int pft_node__consist_check(node_t *nd, const pft_secmsg_t *d, const pft_secmsg_t *s, char *reason,
                            size_t rlen)
{
    uint8_t st[PFT_SECMSG_STATEMENT_LEN];
    if (!d || statement(nd, d->survivors, d->n_survivors, st) != 0) {
        snprintf(reason, rlen, "signatures from %s before any declaration this node accepted", s->sender);
        return PFT_EREJECT;
    }
    size_t valid = 0, other = 0;
    int own = 0;
    char others[256] = "";
    for (size_t i = 0; i < s->n_extra; i++) { /* ids strictly ascending: distinct signers */
        const pft_topo_node_t *u = pft_topo_find(nd->topo, s->extra_ids[i]);
        int ok =
            u && declared_survivor(d, u->id) &&
            pft_pubkey_verify(&nd->hand.keys[u->index], st, sizeof st, s->extra[i], s->extra_len[i]) == 0;
        valid += ok != 0;
        own |= ok && u->index == nd->my_index;
        if (!ok && other++ < 8)
            snprintf(others + strlen(others), sizeof others - strlen(others), "%s%s", other > 1 ? ", " : "",
                     s->extra_ids[i]);
    }
    if (own && valid >= nd->dm.t) {
        nd->cons.agreed = 1;
        pft_info("secure aggregation: %zu signatures of the survivor set declared here (threshold %zu): "
                 "revealing",
                 valid, nd->dm.t);
        return 0;
    }
    char lack[64] = "none of them this node's own";
    if (own)
        snprintf(lack, sizeof lack, "fewer than the threshold %zu", nd->dm.t);
    char diff[400] = "";
    if (other)
        snprintf(
            diff, sizeof diff,
            "; %zu signature(s) are of another survivor set or not a survivor's (%s): it declared different "
            "survivors to different members",
            other, others);
    snprintf(
        nd->cons.refused, sizeof nd->cons.refused,
        "the opener %s forwarded %zu valid signature(s) of the survivor set it declared to this node (%zu "
        "survivors, e.g. %s), %s%s; this node reveals nothing",
        s->sender, valid, d->n_survivors, d->survivors[0], lack, diff);
    pft_warn("secure aggregation: %s", nd->cons.refused);
    snprintf(reason, rlen, "%s", nd->cons.refused);
    return PFT_EREJECT;
}

void pft_node__consist_json(const node_t *nd, json_t *sec)
{
    if (!nd->dm.t)
        return;
    if (nd->cons.have)
        json_object_set_new(sec, "signatures_forwarded", json_integer((json_int_t)nd->cons.n_forwarded));
    else
        json_object_set_new(sec, "consistency",
                            json_string(nd->cons.agreed       ? "agreed"
                                        : nd->cons.refused[0] ? nd->cons.refused
                                                              : "not checked"));
}
