/* pft_node_dropout: a star's members that never deliver (docs/SECAGG.md §5). At its deadline the opener
 * declares the missing members to the survivors (a signed MISSING message); each survivor checks the
 * declaration against the plan and reveals its use keys with the missing members for the group's label (a
 * signed REVEAL, 32 bytes per pair); the opener cancels the survivors' masks with them and opens the sum of
 * the survivors. The missing members' late bundles are refused from the declaration on (the inbox records the
 * hand-off as gone on without, durably, before anything is declared). The opener ends with a DONE notice to
 * the members that delivered, who wait for it: they must stay reachable while a declaration may come. */
#include "pft_node_internal.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_log.h"
#include "pft_mask.h"
#include "pft_topo_fingerprint.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOTICE_WAIT_S 30.0  /* the opener's wait for acknowledgements of its done notices, at most */
#define MEMBER_GRACE_S 60.0 /* a member waits this much beyond the opener's deadline and send_deadline */
#define RESEND_EVERY_S 1.0  /* a member whose reveal was refused or timed out sends it again this often */
#define REVEAL_LATE_S 20.0  /* tests (PFT_TEST_REVEAL_LATE=<id>): that member holds its reveal this long */

/* Writes the reason of a refusal and returns its code. */
static int refuse(char *reason, size_t rlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *reason, size_t rlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, rlen, fmt, ap);
    va_end(ap);
    return code;
}

static int is_member(const node_t *nd, size_t v)
{
    for (size_t m = 0; m < nd->sec.n_members; m++)
        if (nd->sec.members[m] == v)
            return 1;
    return 0;
}

static int am_opener(const node_t *nd)
{
    return nd->sec.plan && nd->sec.me->opens >= 0;
}

static int am_member(const node_t *nd)
{
    return nd->sec.plan && nd->sec.me->mask_group >= 0;
}

/* out/secagg/<name>: where the opener keeps the reveals it accepted and a member the declaration it answered.
 */
static char *record_path(const node_t *nd, const char *name)
{
    char rel[PFT_BUNDLE_MAX_NAME + 32];
    snprintf(rel, sizeof rel, "secagg/%s", name);
    return pft_fsio_join(nd->args->out_dir, rel);
}

static void load_record(node_t *nd, const char *name);

int pft_node__dropout_setup(node_t *nd)
{
    nd->drop.reveal = -1;
    nd->chore = pft_node__dropout_tick; /* the loop calls it (it sits below this file) */
    if (!nd->sec.plan || !nd->sec.opener)
        return 0;
    nd->sec.recover = pft_secplan_recoverable(nd->sec.plan, nd->topo, 0); /* dp_dropouts needs it: a rule */
    if (!nd->sec.recover || !(am_opener(nd) || am_member(nd)))
        return 0;
    int rc0 = pft_node__dmask_setup(nd);
    if (rc0 == 0)
        rc0 = pft_node__consist_setup(nd);
    if (rc0)
        return rc0;
    char *dir = pft_fsio_join(nd->args->out_dir, "secagg");
    int rc = dir ? pft_fsio_mkdirs(dir) : pft_err(PFT_ENOMEM, "out of memory");
    pft_free(dir);
    if (rc)
        return pft_err_wrap(rc, "creating out/secagg");
    uint8_t curve[PFT_KEY_CURVE_LEN];
    if (am_member(nd)) { /* the opener will talk back: a declaration, a done notice */
        const pft_topo_node_t *op = pft_topo_find(nd->topo, nd->sec.opener);
        pft_pubkey_curve(&nd->hand.keys[op->index], curve);
        rc = pft_transport_allow_key(nd->hand.tp, curve, op->id);
        if (rc)
            return pft_err_wrap(rc, "allowing the opener %s's key", op->id);
        load_record(nd, "declaration"); /* an earlier run of this node accepted them */
        load_record(nd, "signatures");
        load_record(nd, "done");
        return 0;
    }
    size_t n = pft_topo_node_count(nd->topo);
    nd->drop.have = pft_calloc(n, 1);
    nd->drop.notice = pft_alloc_array(n, sizeof *nd->drop.notice);
    if (!nd->drop.have || !nd->drop.notice)
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t v = 0; v < n; v++)
        nd->drop.notice[v] = -1;
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        const pft_topo_node_t *u = pft_topo_node(nd->topo, nd->sec.members[m]);
        pft_pubkey_curve(&nd->hand.keys[u->index], curve);
        rc = pft_node__endpoint_add_peer(nd, u, curve);
        if (rc && rc != PFT_EINVAL)
            return pft_err_wrap(rc, "connecting to member %s at %s (to declare dropouts)", u->id,
                                u->endpoint);
    }
    return 0;
}

void pft_node__dropout_free(node_t *nd)
{
    PFT_FREE(nd->drop.missing);
    PFT_FREE(nd->drop.have);
    PFT_FREE(nd->drop.notice);
    if (nd->drop.keys)
        sodium_memzero(nd->drop.keys, nd->drop.n_keys * sizeof *nd->drop.keys);
    PFT_FREE(nd->drop.keys);
    pft_secmsg_destroy(&nd->drop.asked);
    json_decref(nd->drop.revealed);
    nd->drop.revealed = NULL;
    pft_node__dmask_free(nd);
    pft_node__consist_free(nd);
}

/* ---------- messages ---------- */

/* Signs and queues m to node id `to`; the transport handle or an error code. */
static int send_msg(node_t *nd, const pft_secmsg_t *m, const char *to)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    pft_secmsg_t stamped = *m; /* every message carries this node's topology fingerprint */
    stamped.has_fp = 1;
    memcpy(stamped.fp, pft_topo_fp_hash(nd->fp), PFT_SECMSG_FP_LEN);
    int rc = pft_secmsg_encode(&stamped, nd->hand.kp, &buf, &len);
    if (rc == 0) {
        int64_t dl = pft_transport_now_ms() + (int64_t)(nd->run->send_deadline * 1000);
        rc = pft_transport_send(nd->hand.tp, to, buf, len, NULL, dl);
    }
    pft_free(buf);
    return rc < 0 ? pft_err_wrap(rc, "sending a secagg %s message to %s", pft_secmsg_kind_name(m->kind), to)
                  : rc;
}

static pft_secmsg_t header(const node_t *nd, pft_secmsg_kind_t kind)
{
    pft_secmsg_t m = {.kind = kind};
    snprintf(m.run, sizeof m.run, "%s", nd->run->run);
    snprintf(m.label, sizeof m.label, "%s", nd->sec.label);
    snprintf(m.sender, sizeof m.sender, "%s", nd->me->id);
    return m;
}

/* Node ids of idx[0..n), sorted bytewise as the wire wants (a new array of borrowed strings). */
static const char **sorted_ids(const node_t *nd, const size_t *idx, size_t n)
{
    const char **ids = pft_alloc_array(n + 1, sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) {
        const char *id = pft_topo_node(nd->topo, idx[i])->id;
        size_t j = i;
        for (; j > 0 && strcmp(ids[j - 1], id) > 0; j--)
            ids[j] = ids[j - 1];
        ids[j] = id;
    }
    return ids;
}

/* ---------- inbound ---------- */

/* 0 if the declaration m (from the opener, signature checked) names exactly the group's members, this node
 * among the survivors, and a dropout the plan allows; else PFT_EREJECT with the reason. */
static int check_declaration(node_t *nd, const pft_secmsg_t *m, char *reason, size_t rlen)
{
    size_t *missing = pft_alloc_array(m->n_ids + 1, sizeof *missing);
    int me_in = 0, rc = missing ? 0 : PFT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < m->n_ids; i++) {
        const pft_topo_node_t *u = pft_topo_find(nd->topo, m->ids[i]);
        if (!u || !is_member(nd, u->index))
            rc = refuse(reason, rlen, PFT_EREJECT, "declares '%s' missing, not a member of the group",
                        m->ids[i]);
        else
            missing[i] = u->index;
    }
    for (size_t i = 0; rc == 0 && i < m->n_survivors; i++) {
        const pft_topo_node_t *u = pft_topo_find(nd->topo, m->survivors[i]);
        me_in |= u && u->index == nd->my_index;
        if (!u || !is_member(nd, u->index))
            rc = refuse(reason, rlen, PFT_EREJECT, "names '%s' a survivor, not a member", m->survivors[i]);
    }
    if (rc == 0 && (!me_in || m->n_ids + m->n_survivors != nd->sec.n_members))
        rc = refuse(reason, rlen, PFT_EREJECT,
                    "the declaration does not split the group's %zu members into missing and "
                    "survivors with this node a survivor",
                    nd->sec.n_members);
    if (rc == 0 && pft_secplan_dropout_ok(nd->sec.plan, nd->topo, 0, missing, m->n_ids, nd->sec.div > 0,
                                          (size_t)nd->run->dp_dropouts) != 0)
        rc = refuse(reason, rlen, PFT_EREJECT, "the plan refuses the dropout: %s", pft_errmsg());
    if (rc == 0)
        rc = pft_node__dmask_check_declaration(nd, m, reason, rlen);
    pft_free(missing);
    return rc;
}

/* The declaration this node answered before (out/secagg/answered: the missing ids, one per line), or "" */
static void answered_before(const node_t *nd, char *buf, size_t cap)
{
    char *path = record_path(nd, "answered");
    uint8_t *text = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (path && pft_fsio_exists(path) && pft_fsio_read(path, cap - 1, &text, &len) == 0)
        snprintf(buf, cap, "%.*s", (int)len, (const char *)text);
    pft_free(text);
    pft_free(path);
}

/* The record of a declaration: its run, label and the hex BLAKE2b-256 of its sorted missing ids. */
static void joined_ids(const pft_secmsg_t *m, char *buf, size_t cap)
{
    crypto_generichash_state h;
    uint8_t d[32];
    char hex[65];
    crypto_generichash_init(&h, NULL, 0, sizeof d);
    for (size_t i = 0; i < m->n_ids; i++)
        crypto_generichash_update(&h, (const uint8_t *)m->ids[i], strlen(m->ids[i]) + 1);
    crypto_generichash_final(&h, d, sizeof d);
    sodium_bin2hex(hex, sizeof hex, d, sizeof d);
    snprintf(buf, cap, "%s\n%s\n%zu %s\n", m->run, m->label, m->n_ids, hex);
}

/* A member: a declaration or the done notice from its opener. */
static int member_takes(node_t *nd, pft_secmsg_t **mp, const uint8_t *buf, size_t len, char *reason,
                        size_t rlen)
{
    pft_secmsg_t *m = *mp;
    char *path = record_path(nd, m->kind == PFT_SECMSG_DONE ? "done" : "declaration");
    if (m->kind == PFT_SECMSG_DONE) {
        if (!nd->drop.told)
            pft_info("secure aggregation: the opener %s is done with the group", m->sender);
        nd->drop.told = 1;
        if (path && pft_fsio_write_atomic(path, buf, len) != 0)
            pft_warn("recording the done notice: %s", pft_errmsg()); /* a restart waits for another */
        pft_free(path);
        return 0;
    }
    pft_free(path);
    if (m->kind == PFT_SECMSG_SIGNATURES &&
        nd->dm.t) { /* the consistency round: kept, a restart checks again */
        int rc = pft_node__consist_check(nd, nd->drop.asked, m, reason, rlen);
        path = rc ? NULL : record_path(nd, "signatures");
        if (path && pft_fsio_write_atomic(path, buf, len) != 0)
            pft_warn("recording the signatures: %s", pft_errmsg()); /* a restart signs and waits again */
        pft_free(path);
        return rc;
    }
    if (m->kind != PFT_SECMSG_MISSING)
        return refuse(reason, rlen, PFT_EREJECT,
                      "a member takes declarations, signatures and done notices only");
    path = record_path(nd, "declaration");
    int rc = check_declaration(nd, m, reason, rlen);
    char before[8192], now[8192];
    nd->drop.asked ? joined_ids(nd->drop.asked, before, sizeof before) /* taken, maybe not yet signed */
                   : answered_before(nd, before, sizeof before);
    joined_ids(m, now, sizeof now);
    if (rc == 0 && before[0] && strcmp(before, now) != 0)
        rc = refuse(reason, rlen, PFT_EREJECT,
                    "this node took another declaration before (out/secagg/answered, or one it is about "
                    "to sign): it answers one declaration per run");
    if (rc == 0 && (!path || pft_fsio_write_atomic(path, buf, len) != 0)) /* a restart answers it too */
        rc = refuse(reason, rlen, PFT_EIO, "cannot record the declaration: %s", pft_errmsg());
    pft_free(path);
    if (rc == 0 && !nd->drop.asked) {
        nd->drop.asked = m; /* answered in the next chore (not from inside the transport's callback) */
        nd->drop.asked_at = pft_fsio_now();
        *mp = NULL;
    }
    return rc;
}

/* The survivors of the opener's declaration (every member not declared missing), node indices in the group's
 * order, into surv (room for the group); how many. */
static size_t declared_survivors(const node_t *nd, size_t *surv)
{
    size_t ns = 0;
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        int missing = 0;
        for (size_t j = 0; j < nd->drop.n_missing; j++)
            missing |= nd->drop.missing[j] == nd->sec.members[m];
        if (!missing)
            surv[ns++] = nd->sec.members[m];
    }
    return ns;
}

/* The opener: a survivor's signature of its declaration (the consistency round), kept durably
 * (out/secagg/sign-<id>) before it is acknowledged. */
static int opener_takes_sign(node_t *nd, const pft_secmsg_t *m, const uint8_t *buf, size_t len, size_t v,
                             char *reason, size_t rlen)
{
    if (!nd->drop.missing || !is_member(nd, v))
        return refuse(reason, rlen, PFT_EREJECT, "a signature before any declaration, or from a non-member");
    size_t *surv = pft_alloc_array(nd->sec.n_members, sizeof *surv),
           ns = surv ? declared_survivors(nd, surv) : 0;
    int survives = 0;
    for (size_t i = 0; i < ns; i++)
        survives |= surv[i] == v;
    const char **sids = surv ? sorted_ids(nd, surv, ns) : NULL;
    int rc = !sids       ? refuse(reason, rlen, PFT_ENOMEM, "out of memory")
             : !survives ? refuse(reason, rlen, PFT_EREJECT, "a signature from a member declared missing")
                         : pft_node__consist_take(nd, v, m, sids, ns, reason, rlen);
    pft_free(sids);
    pft_free(surv);
    if (rc)
        return rc;
    char name[PFT_BUNDLE_MAX_NAME + 16];
    snprintf(name, sizeof name, "sign-%s", m->sender);
    char *path = record_path(nd, name);
    rc = path ? pft_fsio_write_atomic(path, buf, len) : PFT_ENOMEM;
    pft_free(path);
    return rc ? refuse(reason, rlen, PFT_EIO, "cannot store the signature: %s", pft_errmsg()) : 0;
}

/* The opener: a survivor's reveal, kept durably (out/secagg/reveal-<id>) before it is acknowledged. */
static int opener_takes(node_t *nd, pft_secmsg_t *m, const uint8_t *buf, size_t len, size_t v, char *reason,
                        size_t rlen)
{
    if (m->kind == PFT_SECMSG_SIGN)
        return opener_takes_sign(nd, m, buf, len, v, reason, rlen);
    if (m->kind != PFT_SECMSG_REVEAL)
        return refuse(reason, rlen, PFT_EREJECT, "the opener takes reveals and signatures only");
    if (!nd->drop.missing || !is_member(nd, v))
        return refuse(reason, rlen, PFT_EREJECT, "a reveal before any declaration, or from a non-member");
    const char **want = sorted_ids(nd, nd->drop.missing, nd->drop.n_missing);
    int same = want && m->n_ids == nd->drop.n_missing;
    for (size_t i = 0; same && i < m->n_ids; i++)
        same = strcmp(m->ids[i], want[i]) == 0;
    pft_free(want);
    if (!same)
        return refuse(reason, rlen, PFT_EREJECT, "the reveal's members are not the ones declared missing");
    for (size_t v2 = 0; v2 < nd->drop.n_missing; v2++)
        if (nd->drop.missing[v2] == v)
            return refuse(reason, rlen, PFT_EREJECT, "a reveal from a member declared missing");
    unsigned char *surviving = pft_calloc(pft_topo_node_count(nd->topo), 1);
    if (!surviving)
        return refuse(reason, rlen, PFT_ENOMEM, "out of memory");
    for (size_t i = 0; i < nd->sec.n_members; i++)
        surviving[nd->sec.members[i]] = 1;
    for (size_t j = 0; j < nd->drop.n_missing; j++)
        surviving[nd->drop.missing[j]] = 0;
    int drc = pft_node__dmask_take_reveal(nd, v, m, surviving);
    pft_free(surviving);
    if (drc)
        return refuse(reason, rlen, PFT_EREJECT, "double masking: %s", pft_errmsg());
    char name[PFT_BUNDLE_MAX_NAME + 16];
    snprintf(name, sizeof name, "reveal-%s", m->sender);
    char *path = record_path(nd, name);
    int rc = path ? pft_fsio_write_atomic(path, buf, len) : PFT_ENOMEM;
    pft_free(path);
    if (rc)
        return refuse(reason, rlen, PFT_EIO, "cannot store the reveal: %s", pft_errmsg());
    for (size_t i = 0; i < m->n_ids; i++) { /* ids sorted; keys in that order, stored by missing index */
        const pft_topo_node_t *x = pft_topo_find(nd->topo, m->ids[i]);
        for (size_t j = 0; j < nd->drop.n_missing; j++)
            if (nd->drop.missing[j] == x->index)
                memcpy(nd->drop.keys[v * nd->drop.n_missing + j], m->keys[i], 32);
    }
    nd->drop.have[v] = 1;
    pft_info("secure aggregation: %s revealed its use keys with %zu missing member(s)", m->sender, m->n_ids);
    return 0;
}

int pft_node__dropout_on_message(node_t *nd, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    pft_secmsg_t *m = NULL;
    if (!nd->sec.plan || !nd->sec.recover)
        return refuse(reason, rlen, PFT_EREJECT,
                      "a secagg message, but this node recovers no dropouts (secure_agg off or not "
                      "a star)");
    if (pft_secmsg_decode(buf, len, &m) != 0)
        return refuse(reason, rlen, PFT_EFORMAT, "%s", pft_errmsg());
    const pft_topo_node_t *from = pft_topo_find(nd->topo, m->sender);
    int rc = 0;
    if (strcmp(m->run, nd->run->run) != 0 || strcmp(m->label, nd->sec.label) != 0)
        rc = refuse(reason, rlen, PFT_EREJECT,
                    "secagg %s from '%s': run '%s' or label '%s' is not this run's group's",
                    pft_secmsg_kind_name(m->kind), m->sender, m->run, m->label);
    else if (!from || pft_keys_verify_message(&nd->hand.keys[from->index], buf, len, NULL) != 0)
        rc = refuse(reason, rlen, PFT_EAUTH, "secagg %s: the signature of '%s' does not verify",
                    pft_secmsg_kind_name(m->kind), m->sender);
    else if (!m->has_fp)
        rc = refuse(reason, rlen, PFT_EREJECT,
                    "secagg %s from '%s' carries no topology fingerprint (every pftnode message has one)",
                    pft_secmsg_kind_name(m->kind), m->sender);
    else if (memcmp(m->fp, pft_topo_fp_hash(nd->fp), PFT_SECMSG_FP_LEN) != 0)
        rc =
            refuse(reason, rlen, PFT_EREJECT,
                   "secagg %s from '%s': topology differs from the one of '%s' (fingerprint %02x%02x%02x%02x "
                   "here, %02x%02x%02x%02x there): the same run needs the same public topology",
                   pft_secmsg_kind_name(m->kind), m->sender, m->sender, pft_topo_fp_hash(nd->fp)[0],
                   pft_topo_fp_hash(nd->fp)[1], pft_topo_fp_hash(nd->fp)[2], pft_topo_fp_hash(nd->fp)[3],
                   m->fp[0], m->fp[1], m->fp[2], m->fp[3]);
    else if (am_member(nd) && strcmp(m->sender, nd->sec.opener) == 0)
        rc = member_takes(nd, &m, buf, len, reason, rlen);
    else if (am_opener(nd))
        rc = opener_takes(nd, m, buf, len, from->index, reason, rlen);
    else
        rc = refuse(reason, rlen, PFT_EREJECT, "secagg %s from '%s': not expected by this node",
                    pft_secmsg_kind_name(m->kind), m->sender);
    pft_secmsg_destroy(&m);
    return rc;
}

/* Takes out/secagg/<name> again as if it had just arrived (checked again). */
static void load_record(node_t *nd, const char *name)
{
    char *path = record_path(nd, name), reason[512];
    uint8_t *buf = NULL;
    size_t len = 0;
    if (path && pft_fsio_exists(path) && pft_fsio_read(path, 1 << 20, &buf, &len) == 0 &&
        pft_node__dropout_on_message(nd, buf, len, reason, sizeof reason) != 0)
        pft_warn("%s: not used: %s", path, reason);
    pft_free(buf);
    pft_free(path);
}

/* ---------- a member answers ---------- */

/* Records the declaration m this node answers (out/secagg/answered), before its signature or any key leaves.
 */
static int record_answer(const node_t *nd, const pft_secmsg_t *m)
{
    char ids[8192];
    joined_ids(m, ids, sizeof ids);
    char *path = record_path(nd, "answered");
    int rc = path ? pft_fsio_write_atomic(path, ids, strlen(ids)) : PFT_ENOMEM;
    pft_free(path);
    return rc;
}

/* Test hook: PFT_TEST_REVEAL_LATE=<id> holds member <id>'s reveal REVEAL_LATE_S after the declaration came;
 * PFT_TEST_REVEAL_LATE=<id>:until=<path> holds it until the file path exists (a test ends the hold on a
 * condition, e.g. once a late bundle was refused), at most 20 minutes. */
static int reveal_held(const node_t *nd)
{
#ifdef PFT_TEST_HOOKS
    const char *a = pft_node__test_arg(nd, "PFT_TEST_REVEAL_LATE");
    if (!a)
        return 0;
    double since = pft_fsio_now() - nd->drop.asked_at;
    if (strncmp(a, ":until=", 7) == 0)
        return since < 1200.0 && access(a + 7, F_OK) != 0;
    return since < REVEAL_LATE_S;
#else
    (void)nd;
    return 0;
#endif
}

/* The consistency round, a member's side: signs its declaration m and sends the signature to the opener
 * (again when that send ended refused or unacknowledged: the opener restarted), then waits for the
 * signatures the opener forwards (pft_node__consist_check). */
static void sign_declaration(node_t *nd, const pft_secmsg_t *m)
{
    if (nd->cons.sign >= 0) {
        int st = pft_transport_send_state(nd->hand.tp, nd->cons.sign, NULL, NULL);
        if ((st != PFT_SEND_REJECTED && st != PFT_SEND_FAILED) ||
            pft_fsio_now() < nd->cons.signed_at + RESEND_EVERY_S)
            return;
        nd->cons.sign = -1;
    }
    pft_secmsg_t r = header(nd, PFT_SECMSG_SIGN);
    void *mem = record_answer(nd, m) == 0 ? pft_node__consist_sign(nd, m, &r) : NULL;
    int h = mem ? send_msg(nd, &r, nd->sec.opener) : -1;
    pft_node__dmask_extra_free(&mem);
    if (h < 0) { /* signed nothing: the opener stays unable to open, which is safe */
        pft_error("secure aggregation: signing %s's declaration: %s", nd->sec.opener, pft_errmsg());
        pft_secmsg_destroy(&nd->drop.asked);
        return;
    }
    if (nd->cons.signed_at == 0)
        pft_info("secure aggregation: signed the survivor set %s declared (%zu survivors); revealing once "
                 "%zu survivors' signatures of the same set are in",
                 nd->sec.opener, m->n_survivors, nd->dm.t);
    nd->cons.sign = h;
    nd->cons.signed_at = pft_fsio_now();
}

void pft_node__dropout_tick(node_t *nd)
{
    pft_secmsg_t *m = nd->drop.asked;
    if (!m || nd->drop.told)
        return;
    if (nd->dm.t && !nd->cons.agreed) { /* double masking: the consistency round first */
        sign_declaration(nd, m);
        return;
    }
    if (nd->drop.reveal >= 0) { /* sent: again only if it ended without an ACK (the opener restarted, or took
                                   it before it had declared again), the same keys to the same opener */
        int st = pft_transport_send_state(nd->hand.tp, nd->drop.reveal, NULL, NULL);
        if ((st != PFT_SEND_REJECTED && st != PFT_SEND_FAILED) ||
            pft_fsio_now() < nd->drop.revealed_at + RESEND_EVERY_S)
            return;
        nd->drop.reveal = -1;
    }
    if (reveal_held(nd))
        return; /* tests: the opener waits, a late bundle can knock meanwhile */
    pft_node__crash_point("before-reveal");
    int rc = record_answer(nd, m); /* before any key leaves */
    uint8_t(*keys)[32] = pft_alloc_array(m->n_ids + 1, sizeof *keys);
    rc = rc ? rc : keys ? 0 : PFT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < m->n_ids; i++) {
        const pft_topo_node_t *x = pft_topo_find(nd->topo, m->ids[i]);
        rc = pft_mask_use_key(nd->hand.kp, nd->run->run, &nd->hand.keys[x->index],
                              (const uint8_t *)nd->sec.label, strlen(nd->sec.label), keys[i]);
    }
    pft_secmsg_t r = header(nd, PFT_SECMSG_REVEAL);
    r.n_ids = m->n_ids;
    r.ids = m->ids;
    r.keys = (const uint8_t(*)[32])keys;
    void *extra = rc == 0 ? pft_node__dmask_reveal_extra(nd, m, &r) : NULL; /* shares of survivors' seeds */
    if (rc == 0 && nd->dm.t && !extra)
        rc = pft_err(PFT_ENOMEM, "the shares of the survivors' self-mask seeds: %s", pft_errmsg());
    int h = rc == 0 ? send_msg(nd, &r, nd->sec.opener) : rc;
    pft_node__dmask_extra_free(&extra);
    if (keys)
        sodium_memzero(keys, m->n_ids * sizeof *keys);
    pft_free(keys);
    if (h < 0) { /* answered nothing: the opener stays unable to open, which is safe */
        pft_error("secure aggregation: answering %s's declaration: %s", nd->sec.opener, pft_errmsg());
        pft_secmsg_destroy(&nd->drop.asked);
        return;
    }
    nd->drop.reveal = h;
    nd->drop.revealed_at = pft_fsio_now();
    if (nd->drop.revealed)
        return; /* sent again */
    nd->drop.revealed = json_array();
    for (size_t i = 0; nd->drop.revealed && i < m->n_ids; i++)
        json_array_append_new(nd->drop.revealed, json_string(m->ids[i]));
    pft_warn(
        "secure aggregation: %s declared %zu member(s) missing%s%s%s: revealed this node's use keys with "
        "them%s for '%s'",
        nd->sec.opener, m->n_ids, m->n_ids ? " (e.g. " : "", m->n_ids ? m->ids[0] : "", m->n_ids ? ")" : "",
        nd->dm.t ? " and its shares of the survivors' self-mask seeds" : "", nd->sec.label);
}

/* ---------- the opener recovers ---------- */

/* Takes the reveals an earlier run of this opener accepted (out/secagg/reveal-<id>), checked again. */
static void load_reveals(node_t *nd)
{
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        const pft_topo_node_t *u = pft_topo_node(nd->topo, nd->sec.members[m]);
        char name[PFT_BUNDLE_MAX_NAME + 16];
        snprintf(name, sizeof name, "reveal-%s", u->id);
        load_record(nd, name);
        snprintf(name, sizeof name, "sign-%s", u->id);
        load_record(nd, name);
    }
}

/* The loop's condition while the opener waits for reveals: 1 when every survivor's is in; an error when a
 * survivor refused the declaration or never took it, or past the time in ctx. */
static int reveals_in(node_t *nd, void *ctx)
{
    int all = 1;
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        size_t v = nd->sec.members[m];
        int missing = 0;
        for (size_t j = 0; j < nd->drop.n_missing; j++)
            missing |= nd->drop.missing[j] == v;
        if (missing || nd->drop.have[v])
            continue;
        all = 0;
        int rc = pft_node__survivor_took(nd, v);
        if (rc)
            return rc;
        if (pft_fsio_now() > *(const double *)ctx)
            return pft_err(PFT_ETIMEOUT,
                           "secure aggregation: survivor %s took the declaration but revealed "
                           "nothing within send_deadline: the sum stays masked",
                           pft_topo_node(nd->topo, v)->id);
    }
    return all;
}

/* Sends the declaration of nd->drop.missing to every survivor whose reveal is not in yet. */
static int declare(node_t *nd)
{
    size_t n = nd->drop.n_missing, *surv = pft_alloc_array(nd->sec.n_members, sizeof *surv);
    if (!surv)
        return pft_err(PFT_ENOMEM, "out of memory");
    size_t ns = declared_survivors(nd, surv);
    pft_secmsg_t d = header(nd, PFT_SECMSG_MISSING);
    const char **ids = sorted_ids(nd, nd->drop.missing, n), **sids = sorted_ids(nd, surv, ns);
    d.n_ids = n, d.ids = ids, d.n_survivors = ns, d.survivors = sids;
    int rc = ids && sids ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        if (nd->drop.have[surv[i]]) /* its reveal is in already (kept by an earlier run of this opener) */
            continue;
        void *extra = pft_node__dmask_declaration_extra(nd, surv[i], surv, ns, &d); /* shares sealed for it */
        int h = nd->dm.t && !extra ? pft_err(PFT_ENOMEM, "out of memory")
                                   : send_msg(nd, &d, pft_topo_node(nd->topo, surv[i])->id);
        pft_node__dmask_extra_free(&extra);
        rc = h < 0 ? h : 0;
        nd->drop.notice[surv[i]] = h < 0 ? -1 : h;
    }
    if (rc == 0 && n)
        pft_warn(
            "secure aggregation: declared %zu member(s) missing (e.g. %s) to %zu survivor(s); their late "
            "bundles are refused from now on",
            n, ids[0], ns);
    else if (rc == 0)
        pft_info("secure aggregation: declared nobody missing to %zu survivor(s) (double masking: their "
                 "shares of the self-mask seeds)",
                 ns);
    pft_free(ids);
    pft_free(sids);
    pft_free(surv);
    return rc;
}

/* The members of the group whose bundle did not come in stage st into missing[0..*n) (node indices, the
 * group's order): 1, or 0 when none of the group hands off in st, or an error. */
static int stage_missing(node_t *nd, const pft_stage_t *st, size_t *missing, size_t *n)
{
    inbound_t **recv = pft_calloc(st->n_recv + 1, sizeof *recv);
    if (!recv)
        return pft_err(PFT_ENOMEM, "out of memory");
    size_t nr = pft_node__inbox_stage_bundles(nd, st, recv);
    int any = 0;
    for (size_t j = 0; j < st->n_recv; j++)
        for (size_t i = 0; i < nd->hand.n_in; i++) {
            const pft_topo_node_t *u = pft_topo_find(nd->topo, nd->hand.in[i].from);
            any |= nd->hand.in[i].handoff == st->recv[j] && u && is_member(nd, u->index);
        }
    *n = 0;
    int rc = 0;
    for (size_t m = 0; rc == 0 && any && m < nd->sec.n_members; m++) {
        const char *id = pft_topo_node(nd->topo, nd->sec.members[m])->id;
        long in = -1;
        for (size_t r = 0; r < nr && in < 0; r++)
            in = pft_bundle_prov_contains(recv[r]->bundle, id) ? (long)r : -1;
        if (in < 0 || (long)nd->sec.members[m] + 1 == nd->dm.victim) /* tests: a lying opener's victim */
            missing[(*n)++] = nd->sec.members[m];
        else
            rc = pft_node__dmask_take_blob(nd, nd->sec.members[m], recv[in]);
    }
    pft_free(recv);
    return rc ? rc : any;
}

/* The opener once its stage's hand-offs are in or gone on without: declares the members missing (refused
 * unless the plan allows it) to the survivors. 2: none of the group hands off in st; 1: nobody is missing;
 * 0: declared; or an error. */
static int declare_missing(node_t *nd, const pft_stage_t *st)
{
    size_t n = 0, *missing = pft_alloc_array(nd->sec.n_members + 1, sizeof *missing);
    int rc = missing ? stage_missing(nd, st, missing, &n) : pft_err(PFT_ENOMEM, "out of memory");
    rc = rc < 0 ? rc : rc == 0 ? 2 : n == 0 && !nd->dm.t ? 1 : 0; /* double masking: recovery always runs */
    if (rc == 0) {
        const char *x = n ? pft_topo_node(nd->topo, missing[0])->id : "-";
        rc = pft_secplan_dropout_ok(nd->sec.plan, nd->topo, 0, missing, n, nd->sec.div > 0,
                                    (size_t)nd->run->dp_dropouts);
        if (rc)
            rc = pft_err_wrap(rc, "secure aggregation: %zu member(s) never delivered (e.g. '%s')", n, x);
    }
    size_t nn = pft_topo_node_count(nd->topo);
    if (rc == 0) {
        nd->drop.keys = pft_calloc(nn * n + 1, sizeof *nd->drop.keys);
        nd->drop.n_keys = nd->drop.keys ? nn * n : 0;
        rc = nd->drop.keys ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    }
    if (rc == 0) {
        nd->drop.missing = missing, missing = NULL;
        nd->drop.n_missing = n;
        load_reveals(nd);
        rc = declare(nd);
    }
    pft_free(missing);
    return rc;
}

/* The consistency round, the opener's side: 1 once every survivor's signature of its declaration is in and
 * they all went out to every survivor whose reveal is not in; 0 while waiting; an error when a survivor
 * refused or never took its declaration, or past send_deadline. */
static int signatures_in(node_t *nd)
{
    size_t *surv = pft_alloc_array(nd->sec.n_members, sizeof *surv),
           ns = surv ? declared_survivors(nd, surv) : 0;
    int c =
        surv ? pft_node__consist_signed(nd, surv, ns, nd->drop.until) : pft_err(PFT_ENOMEM, "out of memory");
    pft_secmsg_t r = header(nd, PFT_SECMSG_SIGNATURES);
    void *mem = c == 1 ? pft_node__consist_forward(nd, &r) : NULL;
    c = c == 1 && !mem ? pft_err(PFT_ENOMEM, "out of memory") : c;
    for (size_t i = 0; c == 1 && i < ns; i++) {
        if (nd->drop.have[surv[i]]) /* revealed already (kept by an earlier run of this opener) */
            continue;
        int h = send_msg(nd, &r, pft_topo_node(nd->topo, surv[i])->id);
        c = h < 0 ? h : 1;
        nd->drop.notice[surv[i]] = h < 0 ? -1 : h; /* a survivor that refuses them refuses to reveal */
    }
    if (c == 1)
        pft_info("secure aggregation: forwarded %zu signatures of the declarations to %zu survivor(s)",
                 nd->cons.n_forwarded, ns);
    pft_node__dmask_extra_free(&mem);
    pft_free(surv);
    return c;
}

int pft_node__dropout_ready(node_t *nd, void *stage)
{
    const pft_stage_t *st = stage;
    if (nd->drop.phase == DROP_OPENABLE || !am_opener(nd) || !nd->sec.recover || st->action != PFT_WHAT_REFIT)
        return 1;
    if (nd->drop.phase == DROP_IDLE) {
        int rc = declare_missing(nd, st);
        if (rc == 2 || rc < 0) /* not the group's stage; or an error */
            return rc < 0 ? rc : 1;
        nd->drop.phase = rc == 1 ? DROP_OPENABLE : DROP_DECLARED;
        nd->drop.until = pft_fsio_now() + nd->run->send_deadline;
        return rc; /* 0: the loop's next turn sends the declarations */
    }
    if (nd->drop.phase == DROP_DECLARED) {
        pft_node__crash_point("after-declare"); /* tests: a restart declares again; reveals come again */
        pft_node__set_status(nd, "waiting",
                             nd->dm.t ? "secure aggregation: the survivors' signatures of their declarations"
                                      : "secure aggregation: the survivors' reveals");
        nd->drop.phase = nd->dm.t ? DROP_SIGNING : DROP_REVEALING;
    }
    if (nd->drop.phase == DROP_SIGNING) {
        int c = signatures_in(nd);
        nd->drop.unrevealed = c == PFT_EREJECT || c == PFT_ETIMEOUT;
        if (c != 1)
            return c;
        pft_node__set_status(nd, "waiting", "secure aggregation: the survivors' reveals");
        nd->drop.phase = DROP_REVEALING;
        return 0; /* the loop's next turn sends the signatures */
    }
    int c = reveals_in(nd, &nd->drop.until);
    if (c == 1)
        nd->drop.phase = DROP_OPENABLE;
    nd->drop.unrevealed = c == PFT_EREJECT || c == PFT_ETIMEOUT; /* a survivor refused or never answered */
    return c;
}

/* tests (PFT_TEST_LIAR_*): what a lying opener computes for the member x whose bundle it kept aside and
 * declared missing: x's words less every pair mask the survivors' reveals (their use keys with x) and its own
 * key remove, read as fixed point without a bound, into out/secagg/liar-victim.f64 (little-endian doubles:
 * the class sums of classes 0..K-1, then the second moment's lower triangle). With single masking this is x's
 * statistics exactly; with double masking x's self-mask is still on. */
static void liar_attack(node_t *nd, size_t n_words)
{
    if (!nd->dm.victim || !nd->dm.victim_words)
        return;
    size_t x = (size_t)nd->dm.victim - 1, n = nd->drop.n_missing, j = 0;
    while (j < n && nd->drop.missing[j] != x)
        j++;
    uint64_t *w = nd->dm.victim_words;
    double *v = pft_alloc_array(n_words, sizeof *v);
    int rc = v && j < n ? 0 : PFT_EINVAL;
    for (size_t m = 0; rc == 0 && m < nd->sec.n_members; m++) {
        size_t s = nd->sec.members[m];
        if (nd->drop.have[s])
            rc = pft_mask_cancel_revealed(nd->drop.keys[s * n + j], &nd->hand.keys[x], &nd->hand.keys[s], w,
                                          n_words);
    }
    if (rc == 0)
        rc = pft_mask_remove(nd->hand.kp, nd->run->run, &nd->hand.keys[x], 1, (const uint8_t *)nd->sec.label,
                             strlen(nd->sec.label), w, n_words);
    for (size_t i = 0; rc == 0 && i < n_words; i++)
        v[i] = (double)(int64_t)w[i] / 4294967296.0;
    char *path = record_path(nd, "liar-victim.f64");
    if (rc == 0 && path)
        rc = pft_fsio_write_atomic(path, v, n_words * sizeof *v);
    pft_warn("test hook: the lying opener's view of %s written (%s)", pft_topo_node(nd->topo, x)->id,
             rc ? pft_errmsg() : "out/secagg/liar-victim.f64");
    pft_free(path);
    pft_free(v);
}

int pft_node__dropout_cancel(node_t *nd, const size_t *missing, size_t n, uint64_t *sum, size_t n_words)
{
    const char *x = pft_topo_node(nd->topo, missing[0])->id;
    if (!nd->sec.recover)
        return pft_err(
            PFT_EINVAL,
            "secure aggregation: the masked sum lacks member '%s' of the group: its masks "
            "cannot be removed (it never arrived?), and this topology is not a star whose survivors "
            "could reveal them",
            x);
    int same = nd->drop.phase == DROP_OPENABLE && n == nd->drop.n_missing;
    for (size_t i = 0; same && i < n; i++) {
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= nd->drop.missing[j] == missing[i];
        same = found;
    }
    if (!same)
        return pft_err(PFT_EINVAL,
                       "secure aggregation: the masked sum lacks %zu member(s) (e.g. '%s'), not the ones "
                       "declared missing before the opening: the sum stays masked",
                       n, x);
    size_t nn = pft_topo_node_count(nd->topo);
    int rc = 0;
    for (size_t m = 0; rc == 0 && m < nd->sec.n_members; m++) {
        size_t s = nd->sec.members[m];
        for (size_t j = 0; rc == 0 && nd->drop.have[s] && j < n; j++)
            rc = pft_mask_cancel_revealed(nd->drop.keys[s * n + j], &nd->hand.keys[s],
                                          &nd->hand.keys[nd->drop.missing[j]], sum, n_words);
    }
    liar_attack(nd, n_words);
    sodium_memzero(nd->drop.keys, nn * n * sizeof *nd->drop.keys); /* used once */
    if (rc == 0)
        pft_info("secure aggregation: cancelled the survivors' masks with %zu missing member(s)", n);
    return rc;
}

/* ---------- the end ---------- */

int pft_node__dropout_ended(node_t *nd, void *until)
{
    if (pft_fsio_now() > *(const double *)until) {
        if (am_member(nd) && !nd->drop.told)
            pft_warn("secure aggregation: no done notice from %s by this node's deadline; stopping (nothing "
                     "was revealed after this point)",
                     nd->sec.opener);
        return 1;
    }
    if (am_member(nd))
        return nd->drop.told;
    for (size_t m = 0; m < nd->sec.n_members; m++) {
        int h = nd->drop.notice[nd->sec.members[m]];
        if (h >= 0 && pft_transport_send_state(nd->hand.tp, h, NULL, NULL) == PFT_SEND_PENDING)
            return 0;
    }
    return 1;
}

/* 1 when member v's hand-off to this opener passed its deadline without a bundle (declared missing or not:
 * an opener that refused to open without it declared nothing). */
static int never_delivered(const node_t *nd, size_t v)
{
    const char *id = pft_topo_node(nd->topo, v)->id;
    for (size_t i = 0; i < nd->hand.n_in; i++)
        if (nd->hand.in[i].missing && strcmp(nd->hand.in[i].from, id) == 0)
            return 1;
    return 0;
}

int pft_node__dropout_finish(node_t *nd, int failed, double *until)
{
    if (!nd->sec.plan || !nd->sec.recover || !nd->hand.tp || !(am_opener(nd) || (am_member(nd) && !failed)))
        return 0;
    if (am_opener(nd)) {
        if (nd->drop.done_sent)
            return 0;
        nd->drop.done_sent = 1;
        pft_secmsg_t d = header(nd, PFT_SECMSG_DONE);
        for (size_t m = 0; m < nd->sec.n_members; m++) {
            size_t v = nd->sec.members[m];
            int missing = never_delivered(nd, v); /* nobody waits there: a notice would wait out NOTICE_WAIT_S */
            for (size_t j = 0; j < nd->drop.n_missing; j++)
                missing |= nd->drop.missing[j] == v;
            int h = missing ? -1 : send_msg(nd, &d, pft_topo_node(nd->topo, v)->id);
            nd->drop.notice[v] = h >= 0 ? h : -1;
        }
        *until = pft_fsio_now() + NOTICE_WAIT_S;
        return 1;
    }
    const pft_topo_edge_t *e =
        pft_topo_edge_find(nd->topo, nd->my_index, pft_topo_find(nd->topo, nd->sec.opener)->index);
    double dl = e && e->deadline > nd->run->deadline ? e->deadline : nd->run->deadline;
    *until = nd->t_start + dl + (e ? e->send_deadline : nd->run->send_deadline) + MEMBER_GRACE_S;
    if (!nd->drop.told)
        pft_node__set_status(nd, "waiting",
                             "secure aggregation: the opener's done notice (or a declaration)");
    return 1;
}

void pft_node__dropout_json(const node_t *nd, json_t *sec)
{
    if (!sec || !nd->sec.plan)
        return;
    json_object_set_new(sec, "recover_dropouts", json_boolean(nd->sec.recover));
    if (am_opener(nd)) {
        json_t *a = json_array();
        for (size_t j = 0; a && j < nd->drop.n_missing; j++)
            json_array_append_new(a, json_string(pft_topo_node(nd->topo, nd->drop.missing[j])->id));
        json_object_set_new(sec, "declared_missing", a);
    }
    if (am_member(nd)) {
        json_object_set_new(sec, "revealed_with",
                            nd->drop.revealed ? json_incref(nd->drop.revealed) : json_array());
        json_object_set_new(sec, "done_notice", json_boolean(nd->drop.told));
    }
    pft_node__consist_json(nd, sec);
}
