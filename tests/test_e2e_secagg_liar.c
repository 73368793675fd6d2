/* test_e2e_secagg_liar: a lying opener of secure aggregation's dropout recovery (docs/SECAGG.md §5). A real
 * pftnode m1, member of a star m1, m2, m3, m4 -> s (secure_agg, double masking with the default threshold
 * t = 3, prepared by pftnet launch --prepare-only), sends its masked part to s, played by this test with s's
 * own keys. The test then sends m1 declarations it must refuse, each with its reason, revealing nothing: one
 * signed with another node's key, one declaring m1 itself missing, one leaving a single survivor (fewer than
 * min_contributors = 2), one leaving two (fewer than the threshold 3), one naming a node outside the group,
 * one of another run, one without the survivors' sealed shares, one with forged shares, a reveal (not a
 * member's to take). Then the honest declaration (m4 missing, with the shares m2 and m3 sealed for m1,
 * computed here as they would): m1 reveals, signed, exactly its use key with m4 (checked against the key m4's
 * side derives: an oracle from the other end of the pair) and its shares of m1's, m2's and m3's self-mask
 * seeds (checked against their splits), and nothing else — but only after the consistency round: m1 first
 * signs the survivor set it was declared, and refuses signatures that are not 3 valid ones of that set with
 * its own among them (two, one of another set, one of a member declared missing, none its own); a second,
 * different declaration is refused (one declaration per run); the done notice ends m1's wait, exit 0,
 * result.json saying it revealed with m4 only. Attacks on the round itself, each refused with nothing
 * revealed: signatures before any declaration; two declarations back to back (the second refused although
 * m1 has not signed the first yet); another declaration once m1 signed (its answer is on disk
 * before its signature leaves), and again after m1 is killed and restarted between signing and revealing
 * (it signs the same set again, byte for byte); co-signers' real signatures replayed from another run,
 * another group's label, another topology, the same set in another order or with a duplicate; the opener's
 * own signature, an outsider's, m1's own forged; refused signatures are not kept on disk.
 */
#include "pft_e2e.h"
#include "pft_e2e_run.h"
#include "pft_fsio.h"
#include "pft_mask.h"
#include "pft_secmsg.h"
#include "pft_shamir.h"
#include "pft_test.h"
#include "pft_topo.h"

#include <jansson.h>
#include <sodium.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tmp[256];
static char s_dir[300];  /* the prepared run: m1's out directory is s_dir/m1 */
static pid_t s_pid = -1; /* m1's process (a restart changes it) */

/* What s (this test) received: m1's bundle, and the secagg messages. */
typedef struct {
    int bundles;
    uint8_t *msg[8];
    size_t len[8];
    int n_msg;
} inbox_t;

static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    inbox_t *in = ctx;
    (void)reason, (void)rlen;
    if (!pft_secmsg_is(buf, len)) {
        in->bundles++;
        return 0;
    }
    if (in->n_msg < 8 && (in->msg[in->n_msg] = pft_alloc(len)) != NULL) {
        memcpy(in->msg[in->n_msg], buf, len);
        in->len[in->n_msg++] = len;
    }
    return 0;
}

static pid_t start_m1(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        char node[512], topo[512], key[512], ex[512], ey[512], out[512], log[600];
        snprintf(node, sizeof node, "%s/node/pftnode", PFT_BINARY_DIR);
        snprintf(topo, sizeof topo, "%s/topology.dot", dir);
        snprintf(key, sizeof key, "%s/keys/m1.key", dir);
        snprintf(ex, sizeof ex, "%s/eval_x.npy", dir);
        snprintf(ey, sizeof ey, "%s/eval_y.npy", dir);
        snprintf(out, sizeof out, "%s/m1", dir);
        snprintf(log, sizeof log, "%s/m1.log", dir);
        if (!freopen(log, "a", stderr))
            _exit(126);
        execl(node, node, "--topology", topo, "--id", "m1", "--out", out, "--key", key, "--eval-features", ex,
              "--eval-labels", ey, "--linger-ms", "300", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pft_keypair_t *load_key(const char *dir, const char *id)
{
    char path[400];
    snprintf(path, sizeof path, "%s/keys/%s.key", dir, id);
    pft_keypair_t *kp = NULL;
    return pft_keypair_load(path, &kp) == 0 ? kp : NULL;
}

/* m1's bound endpoint (m1/endpoint), waited for up to 120 s. */
static int m1_endpoint(const char *dir, char *ep, size_t cap)
{
    char path[400];
    snprintf(path, sizeof path, "%s/m1/endpoint", dir);
    return pft_e2e_wait_endpoint(path, ep, cap);
}

#define T 3 /* the default threshold of a group of four */
#define N 4

/* The share of from's self-mask seed for member `to` at group position to_pos (x = to_pos + 1), as `from`
 * splits and seals it (an oracle written from docs/SECAGG.md §5): sealed into ct, in the clear into share. */
static void sealed_share(const pft_keypair_t *from, const pft_keypair_t *to, int to_pos, const char *run,
                         uint8_t ct[PFT_SHAMIR_SHARE_LEN + 16], uint8_t share[PFT_SHAMIR_SHARE_LEN])
{
    uint8_t coins[32], key[32], nonce[crypto_secretbox_NONCEBYTES] = {0}, sh[N][PFT_SHAMIR_SHARE_LEN];
    pft_shamir_secret_t sec;
    CHECK(pft_mask_self_coins(from, run, (const uint8_t *)"s:tied", 6, coins) == 0);
    CHECK(pft_shamir_split(coins, T, N, &sec, sh) == 0);
    memcpy(share, sh[to_pos], PFT_SHAMIR_SHARE_LEN);
    if (from == to)
        return;
    CHECK(pft_mask_share_key(from, run, pft_keypair_public(to), (const uint8_t *)"s:tied", 6, key) == 0);
    nonce[0] = pft_mask_sign(pft_keypair_public(from), pft_keypair_public(to)) > 0 ? 1 : 2;
    CHECK(crypto_secretbox_easy(ct, share, PFT_SHAMIR_SHARE_LEN, nonce, key) == 0);
}

/* What a declaration carries for m1 besides its ids: the other survivors' sealed shares (n_extra of them, -1:
 * no extra element at all). */
typedef struct {
    int n_extra;
    const char *ids[N];
    const uint8_t *bins[N];
    size_t lens[N];
} extra_t;

/* The topology fingerprint declare() stamps: 0 m1's (pft_e2e_fp), 1 none, 2 another topology's. */
static int s_fp_mode;

/* Sends a declaration (or another kind) from "s" signed with kp to m1; the send's final state and its reason.
 */
static int declare(pft_transport_t *t, const pft_keypair_t *kp, pft_secmsg_kind_t kind, const char *run,
                   const char *const *ids, size_t n, const char *const *surv, size_t ns, const extra_t *x,
                   const char **reason)
{
    static const uint8_t keys[4][32];
    pft_secmsg_t m = {.kind = kind, .n_ids = n, .ids = ids, .n_survivors = ns, .survivors = surv};
    if (kind == PFT_SECMSG_REVEAL)
        m.keys = keys, m.n_survivors = 0;
    if (x && x->n_extra >= 0)
        m.has_extra = 1, m.n_extra = (size_t)x->n_extra, m.extra_ids = x->ids, m.extra = x->bins,
        m.extra_len = x->lens;
    snprintf(m.run, sizeof m.run, "%s", run);
    snprintf(m.label, sizeof m.label, "s:tied");
    snprintf(m.sender, sizeof m.sender, "s");
    if (s_fp_mode != 1 && pft_e2e_fp) {
        m.has_fp = 1;
        memcpy(m.fp, pft_topo_fp_hash(pft_e2e_fp), PFT_SECMSG_FP_LEN);
        m.fp[0] ^= s_fp_mode == 2 ? 0x5a : 0;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0);
    int h = pft_transport_send(t, "m1", buf, len, NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
    pft_free(buf);
    int st = pft_e2e_settle(t, h, PFT_E2E_HANG_MS);
    pft_transport_send_state(t, h, NULL, reason);
    return st;
}

/* The declarations a[0] and a[1] sent back to back, the second before the first is acknowledged (an opener
 * that pipelines them, so that m1 may take both before it signs either); their final states, reasons. */
static void declare_both(pft_transport_t *t, const pft_keypair_t *kp, const char *run, const pft_secmsg_t *a,
                         int st[2], const char *reason[2])
{
    int h[2];
    for (int i = 0; i < 2; i++) {
        pft_secmsg_t m = a[i];
        snprintf(m.run, sizeof m.run, "%s", run);
        snprintf(m.label, sizeof m.label, "s:tied");
        snprintf(m.sender, sizeof m.sender, "s");
        m.has_fp = 1;
        memcpy(m.fp, pft_topo_fp_hash(pft_e2e_fp), PFT_SECMSG_FP_LEN);
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0);
        h[i] = pft_transport_send(t, "m1", buf, len, NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
        pft_free(buf);
    }
    for (int i = 0; i < 2; i++) {
        st[i] = pft_e2e_settle(t, h[i], PFT_E2E_HANG_MS);
        pft_transport_send_state(t, h[i], NULL, &reason[i]);
    }
}

/* The forgeries: each must be NACKed with its needle, and m1 must send nothing. */
static void refuse_lies(pft_transport_t *t, const pft_keypair_t *s_kp, const pft_keypair_t *m2_kp,
                        const extra_t *good, const char *run, inbox_t *in)
{
    static const char *m1[] = {"m1"}, *m2m3m4[] = {"m2", "m3", "m4"}, *m4[] = {"m4"}, *zz[] = {"zz"},
                      *m1m2m3[] = {"m1", "m2", "m3"}, *m2[] = {"m2"}, *m3m4[] = {"m3", "m4"},
                      *m1m2[] = {"m1", "m2"};
    static const uint8_t junk[64] = {1, 2, 3};
    extra_t none = {.n_extra = -1}, forged = *good;
    forged.bins[0] = junk;
    struct {
        const char *name, *needle, *run;
        const pft_keypair_t *kp;
        pft_secmsg_kind_t kind;
        const char *const *ids, *const *surv;
        size_t n, ns;
        const extra_t *x;
    } lies[] = {
        {"signed by m2", "does not verify", run, m2_kp, PFT_SECMSG_MISSING, m4, m1m2m3, 1, 3, good},
        {"m1 declared missing", "with this node a survivor", run, s_kp, PFT_SECMSG_MISSING, m1, m2m3m4, 1, 3,
         good},
        {"one survivor", "plan refuses the dropout", run, s_kp, PFT_SECMSG_MISSING, m2m3m4, m1, 3, 1, good},
        {"two survivors, below the threshold", "secagg_threshold", run, s_kp, PFT_SECMSG_MISSING, m3m4, m1m2,
         2, 2, good},
        {"outsider missing", "not a member", run, s_kp, PFT_SECMSG_MISSING, zz, m1m2m3, 1, 3, good},
        {"another run", "is not this run's", "other-run", s_kp, PFT_SECMSG_MISSING, m4, m1m2m3, 1, 3, good},
        {"no shares", "carries no self-mask shares", run, s_kp, PFT_SECMSG_MISSING, m4, m1m2m3, 1, 3, &none},
        {"a forged share", "does not open", run, s_kp, PFT_SECMSG_MISSING, m4, m1m2m3, 1, 3, &forged},
        {"a reveal", "done notices only", run, s_kp, PFT_SECMSG_REVEAL, m2, NULL, 1, 0, NULL},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        const char *reason = NULL;
        int st = declare(t, lies[i].kp, lies[i].kind, lies[i].run, lies[i].ids, lies[i].n, lies[i].surv,
                         lies[i].ns, lies[i].x, &reason);
        CHECK_MSG(st == PFT_SEND_REJECTED && reason && strstr(reason, lies[i].needle),
                  "%s: state %d, reason '%s'", lies[i].name, st, reason ? reason : "");
        fprintf(stderr, "  %s: %s\n", lies[i].name, reason ? reason : "");
    }
    /* the honest declaration, but without a fingerprint, then from another topology: refused before m1
     * records it (it still answers the honest one below) */
    static const char *const needles[] = {"carries no topology fingerprint", "topology differs"};
    for (int mode = 1; mode <= 2; mode++) {
        const char *reason = NULL;
        s_fp_mode = mode;
        int st = declare(t, s_kp, PFT_SECMSG_MISSING, run, m4, 1, m1m2m3, 3, good, &reason);
        s_fp_mode = 0;
        CHECK_MSG(st == PFT_SEND_REJECTED && reason && strstr(reason, needles[mode - 1]),
                  "fingerprint mode %d: state %d, reason '%s'", mode, st, reason ? reason : "");
        fprintf(stderr, "  fingerprint mode %d: %s\n", mode, reason ? reason : "");
    }
    for (int i = 0; i < 20; i++) /* a reveal, had one gone out, would have arrived by now */
        pft_transport_poll(t, 50);
    CHECK_MSG(in->n_msg == 0, "m1 sent %d message(s) to a lying opener", in->n_msg);
}

/* Sends m1 the signatures sigs[0..n) of signers ids[0..n) (ascending) as s; the final state and reason. */
static int send_signatures(pft_transport_t *t, const pft_keypair_t *s_kp, const char *run, const char **ids,
                           const uint8_t **sigs, size_t n, const char **reason)
{
    size_t lens[4] = {PFT_SECMSG_SIG_LEN, PFT_SECMSG_SIG_LEN, PFT_SECMSG_SIG_LEN, PFT_SECMSG_SIG_LEN};
    pft_secmsg_t m = {.kind = PFT_SECMSG_SIGNATURES,
                      .has_extra = 1,
                      .n_extra = n,
                      .extra_ids = ids,
                      .extra = sigs,
                      .extra_len = lens,
                      .has_fp = 1};
    snprintf(m.run, sizeof m.run, "%s", run);
    snprintf(m.label, sizeof m.label, "s:tied");
    snprintf(m.sender, sizeof m.sender, "s");
    memcpy(m.fp, pft_topo_fp_hash(pft_e2e_fp), PFT_SECMSG_FP_LEN);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_secmsg_encode(&m, s_kp, &buf, &len) == 0);
    int h = pft_transport_send(t, "m1", buf, len, NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
    pft_free(buf);
    int st = pft_e2e_settle(t, h, PFT_E2E_HANG_MS);
    pft_transport_send_state(t, h, NULL, reason);
    return st;
}

/* m2's and m3's signatures of the statement of surv[0..ns) in run, label and fingerprint fp. */
static void cosign(pft_keypair_t *const *m, const char *run, const char *label, const uint8_t *fp,
                   const char *const *surv, size_t ns, uint8_t s2[64], uint8_t s3[64])
{
    uint8_t st[PFT_SECMSG_STATEMENT_LEN];
    CHECK(pft_secmsg_statement(run, label, fp, surv, ns, st) == 0);
    CHECK(pft_keypair_sign(m[1], st, sizeof st, s2) == 0 && pft_keypair_sign(m[2], st, sizeof st, s3) == 0);
}

/* Signatures that are real but not of m1's statement: m2's and m3's replayed from another run, another
 * group's label, another topology, the same set in another order or with a duplicate; the opener's own;
 * an outsider's; m1's own forged. Each refused with its reason, nothing revealed (m1's own s1 beside them).
 */
static void replays(pft_transport_t *t, const pft_keypair_t *s_kp, pft_keypair_t *const *m, const char *run,
                    const uint8_t *s1)
{
    static const char *m1m2m3[] = {"m1", "m2", "m3"}, *swapped[] = {"m2", "m1", "m3"},
                      *twice[] = {"m1", "m1", "m2", "m3"}, *m1m2s[] = {"m1", "m2", "s"},
                      *m1m2zz[] = {"m1", "m2", "zz"};
    static const uint8_t junk[64] = {7};
    uint8_t fp[PFT_SECMSG_FP_LEN], sg[6][2][64], ss[64], st[PFT_SECMSG_STATEMENT_LEN];
    memcpy(fp, pft_topo_fp_hash(pft_e2e_fp), sizeof fp);
    cosign(m, "other-run", "s:tied", fp, m1m2m3, 3, sg[0][0], sg[0][1]);
    cosign(m, run, "x:tied", fp, m1m2m3, 3, sg[1][0], sg[1][1]);
    cosign(m, run, "s:tied", fp, swapped, 3, sg[2][0], sg[2][1]);
    cosign(m, run, "s:tied", fp, twice, 4, sg[3][0], sg[3][1]);
    cosign(m, run, "s:tied", fp, m1m2m3, 3, sg[5][0], sg[5][1]); /* m1's statement */
    CHECK(pft_secmsg_statement(run, "s:tied", fp, m1m2m3, 3, st) == 0 &&
          pft_keypair_sign(s_kp, st, sizeof st, ss) == 0);
    fp[0] ^= 0x5a;
    cosign(m, run, "s:tied", fp, m1m2m3, 3, sg[4][0], sg[4][1]);
    struct {
        const char *name, *needle, **ids;
        const uint8_t *sigs[3];
    } lies[] = {
        {"replayed from another run", "not a survivor's (m2, m3)", m1m2m3, {s1, sg[0][0], sg[0][1]}},
        {"another group's label", "not a survivor's (m2, m3)", m1m2m3, {s1, sg[1][0], sg[1][1]}},
        {"the set in another order", "not a survivor's (m2, m3)", m1m2m3, {s1, sg[2][0], sg[2][1]}},
        {"the set with a duplicate", "not a survivor's (m2, m3)", m1m2m3, {s1, sg[3][0], sg[3][1]}},
        {"another topology", "not a survivor's (m2, m3)", m1m2m3, {s1, sg[4][0], sg[4][1]}},
        {"the opener's own", "not a survivor's (s)", m1m2s, {s1, sg[5][0], ss}},
        {"an outsider's", "not a survivor's (zz)", m1m2zz, {s1, sg[5][0], junk}},
        {"m1's own forged", "none of them this node's own", m1m2m3, {junk, sg[5][0], sg[5][1]}},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        const char *reason = NULL;
        int state = send_signatures(t, s_kp, run, lies[i].ids, lies[i].sigs, 3, &reason);
        CHECK_MSG(state == PFT_SEND_REJECTED && reason && strstr(reason, lies[i].needle),
                  "%s: state %d, reason '%s'", lies[i].name, state, reason ? reason : "");
        fprintf(stderr, "  signatures, %s: %s\n", lies[i].name, reason ? reason : "");
    }
}

/* How many times m1's log says it signed a survivor set, or (negative) that its recorded declaration was not
 * used after a restart: it will not sign again. */
static int signed_lines(void)
{
    char path[400], line[1024];
    snprintf(path, sizeof path, "%s/m1.log", s_dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n >= 0 && fgets(line, sizeof line, f))
        n = strstr(line, "secagg/declaration: not used")
                ? -1
                : n + (strstr(line, "signed the survivor set") != NULL);
    if (f)
        fclose(f);
    return n;
}

/* Kills m1 after it signed and before any reveal, and starts it again: from its records it signs the same
 * survivor set again (the same bytes: the transport takes the SIGN as the duplicate of the first and does not
 * deliver it again) and still refuses another declaration. */
static void restart_m1(pft_transport_t *t, const pft_keypair_t *s_kp, const char *run, const extra_t *second,
                       inbox_t *in)
{
    static const char *m3[] = {"m3"}, *m1m2m4[] = {"m1", "m2", "m4"};
    char path[400], ep[300];
    snprintf(path, sizeof path, "%s/m1/endpoint", s_dir);
    int before = signed_lines();
    kill(s_pid, SIGKILL);
    waitpid(s_pid, NULL, 0);
    unlink(path);
    s_pid = start_m1(s_dir);
    CHECK(s_pid > 0 && pft_e2e_wait_endpoint(path, ep, sizeof ep) == 0 &&
          pft_transport_set_peer_endpoint(t, "m1", ep) == 0);
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         signed_lines() == before && pft_transport_now_ms() < end;)
        pft_transport_poll(t, 100);
    CHECK_MSG(signed_lines() > before, "restarted, m1 did not sign its declaration again (log %s/m1.log)",
              s_dir);
    for (int i = 0; i < 10; i++) /* a SIGN of anything else would be delivered */
        pft_transport_poll(t, 50);
    CHECK_MSG(in->n_msg == 1, "restarted, m1 sent %d new message(s)", in->n_msg - 1);
    const char *why = NULL;
    CHECK(declare(t, s_kp, PFT_SECMSG_MISSING, run, m3, 1, m1m2m4, 3, second, &why) == PFT_SEND_REJECTED);
    CHECK_MSG(why && strstr(why, "another declaration"), "after a restart, another declaration: '%s'",
              why ? why : "");
    fprintf(stderr, "  m1 restarted after signing: signed the same set again; another declaration: %s\n",
            why ? why : "");
}

/* The consistency round after the honest declaration: m1 signed exactly the survivor set {m1, m2, m3} it was
 * declared (its signature checked here); signatures that do not make t = 3 valid ones of that set, m1's own
 * among them, are refused with the reason and nothing revealed; the three survivors' are taken. */
static void agree(pft_transport_t *t, const pft_keypair_t *s_kp, pft_keypair_t *const *m, const char *run,
                  const extra_t *second, inbox_t *in)
{
    static const char *m1m2m3[] = {"m1", "m2", "m3"}, *m1m2m4[] = {"m1", "m2", "m4"}, *m1m2[] = {"m1", "m2"},
                      *m2m3[] = {"m2", "m3"};
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         in->n_msg == 0 && pft_transport_now_ms() < end;)
        pft_transport_poll(t, 100);
    pft_secmsg_t *r = NULL;
    CHECK(in->n_msg == 1 && pft_secmsg_decode(in->msg[0], in->len[0], &r) == 0);
    uint8_t st[PFT_SECMSG_STATEMENT_LEN], other[PFT_SECMSG_STATEMENT_LEN], s2[64], s3[64], s3o[64], s4[64];
    const uint8_t *fp = pft_topo_fp_hash(pft_e2e_fp);
    CHECK(pft_secmsg_statement(run, "s:tied", fp, m1m2m3, 3, st) == 0);
    CHECK(pft_secmsg_statement(run, "s:tied", fp, m1m2m4, 3, other) == 0);
    CHECK(r && r->kind == PFT_SECMSG_SIGN && strcmp(r->sender, "m1") == 0 && r->n_survivors == 3 &&
          r->n_ids == 1 && strcmp(r->ids[0], "m4") == 0 && r->n_extra == 1 &&
          pft_pubkey_verify(pft_keypair_public(m[0]), st, sizeof st, r->extra[0], r->extra_len[0]) == 0);
    if (!r)
        return;
    const uint8_t *s1 = r->extra[0];
    char path[400];
    snprintf(path, sizeof path, "%s/m1/secagg/answered", s_dir); /* recorded before the signature left */
    CHECK_MSG(pft_fsio_exists(path), "m1 signed before it recorded the declaration it answers");
    static const char *m3[] = {"m3"}, *m1m2m4x[] = {"m1", "m2", "m4"};
    const char *why = NULL; /* signed: another declaration is refused, before any reveal as after */
    CHECK(declare(t, s_kp, PFT_SECMSG_MISSING, run, m3, 1, m1m2m4x, 3, second, &why) == PFT_SEND_REJECTED);
    CHECK_MSG(why && strstr(why, "another declaration"), "a second declaration after signing: '%s'",
              why ? why : "");
    fprintf(stderr, "  a second declaration after signing: %s\n", why ? why : "");
    restart_m1(t, s_kp, run, second, in);
    replays(t, s_kp, m, run, s1);
    CHECK(pft_keypair_sign(m[1], st, sizeof st, s2) == 0 && pft_keypair_sign(m[2], st, sizeof st, s3) == 0 &&
          pft_keypair_sign(m[2], other, sizeof other, s3o) == 0 &&
          pft_keypair_sign(m[3], st, sizeof st, s4) == 0);
    struct {
        const char *name, *needle, **ids;
        const uint8_t *sigs[3];
        size_t n;
    } lies[] = {
        {"two of the set", "fewer than the threshold 3", m1m2, {s1, s2}, 2},
        {"m3's of another set", "another survivor set or not a survivor's (m3)", m1m2m3, {s1, s2, s3o}, 3},
        {"m4's, declared missing", "not a survivor's (m4)", m1m2m4, {s1, s2, s4}, 3},
        {"without m1's own", "none of them this node's own", m2m3, {s2, s3}, 2},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        const char *reason = NULL;
        int state = send_signatures(t, s_kp, run, lies[i].ids, lies[i].sigs, lies[i].n, &reason);
        CHECK_MSG(state == PFT_SEND_REJECTED && reason && strstr(reason, lies[i].needle),
                  "%s: state %d, reason '%s'", lies[i].name, state, reason ? reason : "");
        fprintf(stderr, "  signatures, %s: %s\n", lies[i].name, reason ? reason : "");
    }
    CHECK_MSG(in->n_msg == 1, "m1 sent %d message(s) after refused signatures", in->n_msg);
    snprintf(path, sizeof path, "%s/m1/secagg/signatures", s_dir); /* nothing refused is kept */
    CHECK_MSG(!pft_fsio_exists(path), "m1 recorded signatures it refused");
    const uint8_t *good[] = {s1, s2, s3};
    const char *reason = NULL;
    CHECK(send_signatures(t, s_kp, run, m1m2m3, good, 3, &reason) == PFT_SEND_ACKED);
    pft_secmsg_destroy(&r);
}

/* The honest declaration: m1 reveals exactly its use key with m4 (the key m4 derives for the pair) and its
 * shares of m1's, m2's and m3's seeds (as their splits give them). */
static void honest(pft_transport_t *t, const pft_keypair_t *s_kp, pft_keypair_t *const *m,
                   const extra_t *good, const extra_t *other, const char *run, inbox_t *in)
{
    static const char *m4[] = {"m4"}, *m1m2m3[] = {"m1", "m2", "m3"}, *m3[] = {"m3"},
                      *m1m2m4[] = {"m1", "m2", "m4"};
    const char *reason = NULL;
    const pft_keypair_t *m1_kp = m[0], *m4_kp = m[3];
    static const uint8_t junk[64] = {5};
    const uint8_t *early[] = {junk, junk, junk};
    CHECK(send_signatures(t, s_kp, run, m1m2m3, early, 3, &reason) == PFT_SEND_REJECTED);
    CHECK_MSG(reason && strstr(reason, "before any declaration"), "signatures before a declaration: '%s'",
              reason ? reason : "");
    fprintf(stderr, "  signatures before any declaration: %s\n", reason ? reason : "");
    pft_secmsg_t both[2] = {
        {.kind = PFT_SECMSG_MISSING, .n_ids = 1, .ids = m4, .n_survivors = 3, .survivors = m1m2m3},
        {.kind = PFT_SECMSG_MISSING, .n_ids = 1, .ids = m3, .n_survivors = 3, .survivors = m1m2m4}};
    const extra_t *bx[2] = {good, other};
    for (int i = 0; i < 2; i++)
        both[i].has_extra = 1, both[i].n_extra = (size_t)bx[i]->n_extra, both[i].extra_ids = bx[i]->ids,
        both[i].extra = bx[i]->bins, both[i].extra_len = bx[i]->lens;
    int bst[2];
    const char *bwhy[2] = {NULL, NULL};
    declare_both(t, s_kp, run, both, bst, bwhy);
    CHECK_MSG(bst[0] == PFT_SEND_ACKED && bst[1] == PFT_SEND_REJECTED && bwhy[1] &&
                  strstr(bwhy[1], "another declaration"),
              "two declarations back to back: states %d, %d, the second's reason '%s'", bst[0], bst[1],
              bwhy[1] ? bwhy[1] : "");
    fprintf(stderr, "  two declarations back to back: the second %s\n", bwhy[1] ? bwhy[1] : "taken");
    agree(t, s_kp, m, run, other, in);
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         in->n_msg < 2 && pft_transport_now_ms() < end;)
        pft_transport_poll(t, 100);
    CHECK(in->n_msg == 2);
    pft_secmsg_t *r = NULL;
    CHECK(in->n_msg >= 2 && pft_secmsg_decode(in->msg[1], in->len[1], &r) == 0);
    CHECK(in->n_msg >= 2 &&
          pft_keys_verify_message(pft_keypair_public(m1_kp), in->msg[1], in->len[1], NULL) == 0);
    uint8_t want[PFT_MASK_KEY_LEN], ct[64], share[PFT_SHAMIR_SHARE_LEN];
    CHECK(pft_mask_use_key(m4_kp, run, pft_keypair_public(m1_kp), (const uint8_t *)"s:tied", 6, want) == 0);
    CHECK(r && r->kind == PFT_SECMSG_REVEAL && strcmp(r->sender, "m1") == 0 && r->n_ids == 1 &&
          strcmp(r->ids[0], "m4") == 0 && memcmp(r->keys[0], want, sizeof want) == 0);
    CHECK(r && r->has_extra && r->n_extra == 3);
    for (size_t i = 0; r && i < r->n_extra && i < 3; i++) { /* m1, m2, m3: each one's share at m1's point */
        sealed_share(m[i], m1_kp, 0, run, ct, share);
        CHECK(strcmp(r->extra_ids[i], m1m2m3[i]) == 0 && r->extra_len[i] == sizeof share &&
              memcmp(r->extra[i], share, sizeof share) == 0);
    }
    fprintf(stderr, "  honest declaration: m1 revealed its use key with m4 (= m4's side of the pair) and its "
                    "shares of the three survivors' seeds\n");
    pft_secmsg_destroy(&r);
    CHECK(declare(t, s_kp, PFT_SECMSG_MISSING, run, m3, 1, m1m2m4, 3, other, &reason) == PFT_SEND_REJECTED);
    CHECK_MSG(reason && strstr(reason, "another declaration"), "second declaration: '%s'",
              reason ? reason : "");
    fprintf(stderr, "  a second declaration: %s\n", reason ? reason : "");
    CHECK(declare(t, s_kp, PFT_SECMSG_DONE, run, NULL, 0, NULL, 0, NULL, &reason) == PFT_SEND_ACKED);
    CHECK(in->n_msg == 2);
}

/* s's transport: CURVE server with s's keys on the held port, admitting m1; m1 as a peer once it listens. */
static pft_transport_t *play_s(const char *dir, int fd, int port, const pft_keypair_t *s_kp,
                               const pft_keypair_t *m1_kp, inbox_t *in)
{
    uint8_t pub[32], sec[32], m1c[32];
    pft_keypair_curve(s_kp, pub, sec);
    pft_pubkey_curve(pft_keypair_public(m1_kp), m1c);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = pub;
    o.curve_secret_key = sec;
    o.listen_fd = fd;
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pft_transport_t *t = pft_transport_new(ep, &o, on_message, in);
    if (t && pft_transport_allow_key(t, m1c, "m1") != 0)
        pft_transport_destroy(&t);
    if (t && (m1_endpoint(dir, ep, sizeof ep) != 0 || pft_transport_add_peer(t, "m1", ep, m1c) != 0))
        pft_transport_destroy(&t);
    return t;
}

static void test_lying_opener(void)
{
    char dir[300], dot[320], cmd[1200];
    int fd = -1, port = pft_e2e_hold_port(&fd);
    CHECK(port > 0);
    snprintf(dir, sizeof dir, "%s/liar", s_tmp);
    snprintf(s_dir, sizeof s_dir, "%s", dir);
    snprintf(dot, sizeof dot, "%s/liar.dot", s_tmp);
    FILE *f = fopen(dot, "w");
    CHECK(f != NULL);
    if (!f || port <= 0)
        return;
    fprintf(f,
            "digraph liar {\n  dataset = \"%s\"; partition = iid; samples = 40; cov = tied; prep = l2;\n"
            "  deadline = 120; secure_agg = true;\n  s [data = false, endpoint = \"tcp://127.0.0.1:%d\"];\n"
            "  m1 -> s; m2 -> s; m3 -> s; m4 -> s;\n}\n",
            EXAMPLE_DATA, port);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, dot, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/topology.dot", dir);
    CHECK(pft_e2e_use_topology(cmd) == 0); /* the fingerprint m1 expects on s's messages */
    pft_keypair_t *s_kp = load_key(dir, "s"), *m[N] = {load_key(dir, "m1"), load_key(dir, "m2"),
                                                       load_key(dir, "m3"), load_key(dir, "m4")};
    pft_keypair_t *m1_kp = m[0], *m2_kp = m[1];
    CHECK(s_kp && m[0] && m[1] && m[2] && m[3]);
    inbox_t in = {0};
    /* the shares m2 and m3 (honest declaration), m2 and m4 (the second one) sealed for m1 */
    uint8_t ct[N][64], share[PFT_SHAMIR_SHARE_LEN];
    extra_t good = {.n_extra = 2, .ids = {"m2", "m3"}, .lens = {64, 64}},
            other = {.n_extra = 2, .ids = {"m2", "m4"}, .lens = {64, 64}};
    for (int i = 1; s_kp && m[0] && m[1] && m[2] && m[3] && i < N; i++)
        sealed_share(m[i], m[0], 0, "liar", ct[i], share);
    good.bins[0] = ct[1], good.bins[1] = ct[2], other.bins[0] = ct[1], other.bins[1] = ct[3];
    s_pid = s_kp && m[0] && m[1] && m[2] && m[3] ? start_m1(dir) : -1;
    pft_transport_t *t = s_pid > 0 ? play_s(dir, fd, port, s_kp, m1_kp, &in) : NULL;
    CHECK(t != NULL);
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         t && in.bundles == 0 && pft_transport_now_ms() < end;)
        pft_transport_poll(t, 100);
    CHECK_MSG(in.bundles == 1, "m1's masked part never came (log %s/m1.log)", dir);
    if (t && in.bundles == 1) {
        refuse_lies(t, s_kp, m2_kp, &good, "liar", &in);
        honest(t, s_kp, m, &good, &other, "liar", &in);
    }
    int status = 0;
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         s_pid > 0 && waitpid(s_pid, &status, WNOHANG) == 0 && pft_transport_now_ms() < end;)
        t ? (void)pft_transport_poll(t, 100) : (void)usleep(100000);
    if (s_pid > 0 && waitpid(s_pid, &status, WNOHANG) == 0) {
        kill(s_pid, SIGKILL);
        waitpid(s_pid, &status, 0);
        CHECK_MSG(0, "m1 did not stop after the done notice");
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "m1 exited %d (log %s/m1.log)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, dir);
    char path[400];
    snprintf(path, sizeof path, "%s/m1/result.json", dir);
    json_error_t err;
    json_t *res = json_load_file(path, 0, &err), *sa = json_object_get(res, "secure_agg");
    json_t *rv = json_object_get(sa, "revealed_with");
    CHECK(json_array_size(rv) == 1 && strcmp(json_string_value(json_array_get(rv, 0)), "m4") == 0);
    CHECK(json_is_true(json_object_get(sa, "done_notice")));
    json_decref(res);
    pft_transport_destroy(&t);
    for (int i = 0; i < in.n_msg; i++)
        pft_free(in.msg[i]);
    pft_keypair_destroy(&s_kp);
    for (int i = 0; i < N; i++)
        pft_keypair_destroy(&m[i]);
}

int main(void)
{
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_liar") != 0)
        return 1;
    RUN(test_lying_opener);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
