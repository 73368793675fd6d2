/* test_e2e_secagg_split: an opener that sends DIFFERENT declarations to different survivors, with one member
 * colluding (docs/SECAGG.md §5.1). Six real pftnode members m1..m6 of a star -> s (secure_agg, double masking
 * at the default threshold t = 4 of 6, prepared by pftnet launch --prepare-only) send their masked parts to
 * s, played by this test with s's own keys; the colluder m2 is played by the test with m2's key (it hands the
 * opener everything it can: its use key with the victim m3 and its share of m3's self-mask seed, opened from
 * the sealed slot m3's part carries for m2). The declarations:
 *   to m3 (the victim): survivors {m1, m2, m3, m4}, m5 and m6 missing: m3 reveals its use keys with m5, m6
 *     and its own share of its seed;
 *   to m1 and m4: m3 missing: they reveal their use keys with m3;
 *   to m2, m5 and m6: everyone survives: m5 and m6 reveal their shares of m3's seed.
 * With every pair key of m3 (m1, m4 theirs; m5, m6 m3's; m2 the colluder's; s its own) and four shares of
 * m3's seed (m3, m5, m6, m2: the threshold) the opener would strip m3's masks and hold m3's exact class sums
 * (relative error 9e-9 before the consistency round: SECAGG §5.1's c ≥ 2t − n − 1 = 1 colluder). With the
 * round every member first signs the survivor set it was declared; the opener forwards every signature (the
 * colluder's replaced by one of the receiver's set); each member holds at most 3 of its own set (t = 4) and
 * must refuse, naming the opener; nobody reveals, and what the opener can compute for m3 is no view at all.
 */
#include "pft_e2e.h"
#include "pft_e2e_own.h"
#include "pft_e2e_run.h"
#include "pft_mask.h"
#include "pft_secmsg.h"
#include "pft_shamir.h"
#include "pft_test.h"
#include "pft_topo.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NM 6      /* members m1..m6, group positions 0..5 */
#define T 4       /* the default threshold of a group of six */
#define VICTIM 2  /* m3 */
#define COLLUDE 1 /* m2 */
#define SEALED (PFT_SHAMIR_SHARE_LEN + crypto_secretbox_MACBYTES)
#define LABEL "s:tied"

static char s_tmp[256];
static const char *const s_ids[NM] = {"m1", "m2", "m3", "m4", "m5", "m6"};

/* What s (this test) holds: every member's bundle, and the secagg messages by sender. */
typedef struct {
    pft_bundle_t *b[NM];
    pft_secmsg_t *reveal[NM];
    pft_secmsg_t *sign[NM];
    int n_reveals, n_signs;
} inbox_t;

static int member_of(const char *id)
{
    for (int i = 0; i < NM; i++)
        if (strcmp(id, s_ids[i]) == 0)
            return i;
    return -1;
}

static int on_message(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t rlen)
{
    inbox_t *in = ctx;
    (void)reason, (void)rlen;
    if (!pft_secmsg_is(buf, len)) {
        pft_bundle_limits_t lim;
        pft_bundle_limits_default(&lim);
        pft_bundle_t *b = NULL;
        if (pft_bundle_decode(buf, len, &lim, &b) != 0)
            return PFT_EFORMAT;
        int m = member_of(pft_bundle_producer(b));
        if (m < 0 || in->b[m])
            pft_bundle_destroy(&b);
        else
            in->b[m] = b;
        return 0;
    }
    pft_secmsg_t *m = NULL;
    if (pft_secmsg_decode(buf, len, &m) != 0)
        return PFT_EFORMAT;
    int w = member_of(m->sender);
    pft_secmsg_t **slot = w < 0                          ? NULL
                          : m->kind == PFT_SECMSG_REVEAL ? &in->reveal[w]
                          : m->kind == PFT_SECMSG_SIGN   ? &in->sign[w]
                                                         : NULL;
    if (!slot || *slot) {
        pft_secmsg_destroy(&m);
        return 0;
    }
    *slot = m;
    m->kind == PFT_SECMSG_REVEAL ? in->n_reveals++ : in->n_signs++;
    return 0;
}

static pid_t start_member(const char *dir, const char *id)
{
    pid_t pid = fork();
    if (pid == 0) {
        char node[512], topo[512], key[512], ex[512], ey[512], out[512], log[600];
        snprintf(node, sizeof node, "%s/node/pftnode", PFT_BINARY_DIR);
        snprintf(topo, sizeof topo, "%s/topology.dot", dir);
        snprintf(key, sizeof key, "%s/keys/%s.key", dir, id);
        snprintf(ex, sizeof ex, "%s/eval_x.npy", dir);
        snprintf(ey, sizeof ey, "%s/eval_y.npy", dir);
        snprintf(out, sizeof out, "%s/%s", dir, id);
        snprintf(log, sizeof log, "%s/%s.log", dir, id);
        if (!freopen(log, "a", stderr))
            _exit(126);
        execl(node, node, "--topology", topo, "--id", id, "--out", out, "--key", key, "--eval-features", ex,
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

/* s's transport: CURVE server with s's keys on the held port, admitting every member, each a peer once it
 * listens (its endpoint file). NULL on failure. */
static pft_transport_t *play_s(const char *dir, int fd, int port, const pft_keypair_t *s_kp,
                               pft_keypair_t *const *m, inbox_t *in)
{
    uint8_t pub[32], sec[32], mc[32];
    pft_keypair_curve(s_kp, pub, sec);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = pub;
    o.curve_secret_key = sec;
    o.listen_fd = fd;
    char ep[300], path[400];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pft_transport_t *t = pft_transport_new(ep, &o, on_message, in);
    for (int i = 0; t && i < NM; i++) {
        pft_pubkey_curve(pft_keypair_public(m[i]), mc);
        snprintf(path, sizeof path, "%s/%s/endpoint", dir, s_ids[i]);
        if (pft_transport_allow_key(t, mc, s_ids[i]) != 0 ||
            pft_e2e_wait_endpoint(path, ep, sizeof ep) != 0 ||
            pft_transport_add_peer(t, s_ids[i], ep, mc) != 0)
            pft_transport_destroy(&t);
    }
    return t;
}

/* Signs m as s (stamped with the run's fingerprint), sends it to member `to` and waits for its end; the final
 * state, and the receiver's reason in *reason (NULL: none). */
static int send_as_s(pft_transport_t *t, const pft_keypair_t *s_kp, pft_secmsg_t *m, const char *to,
                     const char **reason)
{
    snprintf(m->run, sizeof m->run, "split");
    snprintf(m->label, sizeof m->label, LABEL);
    snprintf(m->sender, sizeof m->sender, "s");
    m->has_fp = 1;
    memcpy(m->fp, pft_topo_fp_hash(pft_e2e_fp), PFT_SECMSG_FP_LEN);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_secmsg_encode(m, s_kp, &buf, &len) == 0);
    int h = pft_transport_send(t, to, buf, len, NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
    pft_free(buf);
    int st = pft_e2e_settle(t, h, PFT_E2E_HANG_MS);
    *reason = NULL;
    pft_transport_send_state(t, h, NULL, reason);
    return st;
}

/* The masked part of member i's bundle (its index in the bundle), or -1. */
static int masked_part(const inbox_t *in, int i)
{
    for (int p = 0; in->b[i] && p < pft_bundle_n_parts(in->b[i]); p++)
        if (pft_bundle_part_is_masked(in->b[i], p))
            return p;
    return -1;
}

/* Declares to member r the survivors surv[0..ns) (member positions, ascending), the rest missing, with the
 * slots the other survivors sealed for r; the send's final state. */
static int declare(pft_transport_t *t, const pft_keypair_t *s_kp, const inbox_t *in, int r, const int *surv,
                   int ns)
{
    const char *sids[NM], *mids[NM], *xids[NM];
    const uint8_t *bins[NM];
    size_t lens[NM];
    int nm = 0, nx = 0;
    for (int i = 0, k = 0; i < NM; i++) {
        if (k < ns && surv[k] == i) {
            k++;
            if (i == r)
                continue;
            const pft_bundle_mask_t *mk = pft_bundle_part_mask(in->b[i], masked_part(in, i));
            CHECK(mk && mk->shares_len == NM * SEALED);
            xids[nx] = s_ids[i], bins[nx] = mk->shares + (size_t)r * SEALED, lens[nx++] = SEALED;
        } else {
            mids[nm++] = s_ids[i];
        }
    }
    for (int k = 0; k < ns; k++)
        sids[k] = s_ids[surv[k]];
    pft_secmsg_t d = {.kind = PFT_SECMSG_MISSING,
                      .n_ids = (size_t)nm,
                      .ids = mids,
                      .n_survivors = (size_t)ns,
                      .survivors = sids,
                      .has_extra = 1,
                      .n_extra = (size_t)nx,
                      .extra_ids = xids,
                      .extra = bins,
                      .extra_len = lens};
    const char *reason = NULL;
    int st = send_as_s(t, s_kp, &d, s_ids[r], &reason);
    CHECK_MSG(st == PFT_SEND_ACKED, "declaration to %s: state %d (%s)", s_ids[r], st, reason ? reason : "");
    return st;
}

/* The use key of member w's reveal with member x, or NULL. */
static const uint8_t *revealed_key(const inbox_t *in, int w, int x)
{
    for (size_t i = 0; in->reveal[w] && i < in->reveal[w]->n_ids; i++)
        if (strcmp(in->reveal[w]->ids[i], s_ids[x]) == 0)
            return in->reveal[w]->keys[i];
    return NULL;
}

/* Member w's revealed share of member x's seed, or NULL. */
static const uint8_t *revealed_share(const inbox_t *in, int w, int x)
{
    for (size_t i = 0; in->reveal[w] && in->reveal[w]->has_extra && i < in->reveal[w]->n_extra; i++)
        if (strcmp(in->reveal[w]->extra_ids[i], s_ids[x]) == 0 &&
            in->reveal[w]->extra_len[i] == PFT_SHAMIR_SHARE_LEN)
            return in->reveal[w]->extra[i];
    return NULL;
}

/* The colluder's help: its use key with the victim and its share of the victim's seed, from its secret key
 * and the slot the victim sealed for it. 0 or -1. */
static int colluder_gives(const inbox_t *in, pft_keypair_t *const *m, uint8_t key[PFT_MASK_KEY_LEN],
                          uint8_t share[PFT_SHAMIR_SHARE_LEN])
{
    const pft_keypair_t *c = m[COLLUDE], *v = m[VICTIM];
    uint8_t sk[PFT_MASK_KEY_LEN], nonce[crypto_secretbox_NONCEBYTES] = {0};
    const pft_bundle_mask_t *mk = pft_bundle_part_mask(in->b[VICTIM], masked_part(in, VICTIM));
    if (!mk || mk->shares_len != NM * SEALED ||
        pft_mask_use_key(c, "split", pft_keypair_public(v), (const uint8_t *)LABEL, 6, key) != 0 ||
        pft_mask_share_key(c, "split", pft_keypair_public(v), (const uint8_t *)LABEL, 6, sk) != 0)
        return -1;
    nonce[0] = pft_mask_sign(pft_keypair_public(v), pft_keypair_public(c)) > 0 ? 1 : 2; /* from v to c */
    return crypto_secretbox_open_easy(share, mk->shares + (size_t)COLLUDE * SEALED, SEALED, nonce, sk);
}

/* What the opener computes for the victim: its masked words less every pair mask a revealed or colluding key
 * removes and less its self-mask rebuilt from the shares it got, read as fixed point, compared with the
 * victim's true class sums: the relative error, or -1 when the opener lacks a key or t shares (no view). */
static double attack(const inbox_t *in, const pft_keypair_t *s_kp, pft_keypair_t *const *m, const char *dir)
{
    int p = masked_part(in, VICTIM), K = p >= 0 ? pft_bundle_part_n_classes(in->b[VICTIM], p) : 0;
    size_t n = 0;
    const uint64_t *mw = p >= 0 ? pft_bundle_part_words(in->b[VICTIM], p, &n) : NULL;
    uint64_t *w = mw ? pft_alloc_array(n, sizeof *w) : NULL;
    uint8_t key[PFT_MASK_KEY_LEN], got[NM][PFT_SHAMIR_SHARE_LEN], seed[PFT_SHAMIR_SEED_LEN];
    size_t k = 0;
    int ok = w && colluder_gives(in, m, key, got[k++]) == 0;
    if (ok)
        memcpy(w, mw, n * sizeof *w);
    const pft_pubkey_t *pv = pft_keypair_public(m[VICTIM]);
    ok = ok && pft_mask_remove(s_kp, "split", pv, 1, (const uint8_t *)LABEL, 6, w, n) == 0 &&
         pft_mask_cancel_revealed(key, pv, pft_keypair_public(m[COLLUDE]), w, n) == 0;
    for (int x = 0; ok && x < NM; x++) { /* the victim's pair with x: x's key, or the victim's own */
        if (x == VICTIM || x == COLLUDE)
            continue;
        const uint8_t *kx = revealed_key(in, x, VICTIM);
        kx = kx ? kx : revealed_key(in, VICTIM, x);
        ok = kx && pft_mask_cancel_revealed(kx, pv, pft_keypair_public(m[x]), w, n) == 0;
    }
    for (int x = 0; ok && x < NM; x++) {
        const uint8_t *sh = x == COLLUDE ? NULL : revealed_share(in, x, VICTIM);
        if (sh)
            memcpy(got[k++], sh, PFT_SHAMIR_SHARE_LEN);
    }
    pft_shamir_secret_t secret;
    ok = ok && pft_shamir_combine((const uint8_t(*)[PFT_SHAMIR_SHARE_LEN])got, k, T, &secret) == 0;
    if (ok) {
        pft_shamir_seed(&secret, seed);
        pft_mask_add_self(seed, -1, w, n);
    }
    pft_e2e_own_t own;
    double err = -1, num = 0, den = 0;
    if (ok && pft_e2e_own_load(dir, s_ids[VICTIM], &own) == 0) {
        for (int c = 0; c < K && c < own.n_classes; c++)
            for (int j = 0; j < own.d; j++) {
                double v = (double)(int64_t)w[(size_t)c * own.d + j] / 4294967296.0;
                double e = v - own.sum[(size_t)c * own.d + j];
                num += e * e, den += own.sum[(size_t)c * own.d + j] * own.sum[(size_t)c * own.d + j];
            }
        err = den > 0 ? sqrt(num / den) : -1;
        pft_e2e_own_free(&own);
    }
    fprintf(stderr, "  the opener's view of %s: %zu share(s) of its seed, relative error %.3e%s\n",
            s_ids[VICTIM], k, err, ok ? "" : " (no view: a key or shares missing)");
    pft_free(w);
    return err;
}

/* The survivor sets of the lie, per receiver (member positions, ascending). */
static const int s_victim_set[] = {0, 1, 2, 3}, s_no_victim[] = {0, 1, 3, 4, 5}, s_all[] = {0, 1, 2, 3, 4, 5};

/* Sends each member its declaration, then serves s until every member answered (a reveal, or with the
 * consistency round its signature of the declaration). */
static void lie(pft_transport_t *t, const pft_keypair_t *s_kp, inbox_t *in)
{
    for (int r = 0; r < NM; r++) {
        if (r == VICTIM)
            declare(t, s_kp, in, r, s_victim_set, 4);
        else if (r == 0 || r == 3)
            declare(t, s_kp, in, r, s_no_victim, 5);
        else
            declare(t, s_kp, in, r, s_all, 6);
    }
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS;
         in->n_reveals + in->n_signs < NM && pft_transport_now_ms() < end;)
        pft_transport_poll(t, 100);
}

/* The consistency round, played by the lying opener as well as it can: to every member that signed, every
 * signature collected, the colluder's replaced by one of that member's survivor set (the colluder signs
 * anything). Each member must refuse, naming the opener and the different sets; then none reveals. */
static void forward(pft_transport_t *t, const pft_keypair_t *s_kp, pft_keypair_t *const *m, inbox_t *in)
{
    for (int r = 0; r < NM; r++) {
        if (!in->sign[r])
            continue;
        const char *ids[NM];
        const uint8_t *bins[NM];
        size_t lens[NM], k = 0;
        uint8_t st[PFT_SECMSG_STATEMENT_LEN], forged[PFT_SECMSG_SIG_LEN];
        CHECK(pft_secmsg_statement("split", LABEL, pft_topo_fp_hash(pft_e2e_fp), in->sign[r]->survivors,
                                   in->sign[r]->n_survivors, st) == 0);
        CHECK(pft_keypair_sign(m[COLLUDE], st, sizeof st, forged) == 0);
        for (int w = 0; w < NM; w++) {
            if (!in->sign[w] && w != COLLUDE)
                continue;
            ids[k] = s_ids[w], lens[k] = PFT_SECMSG_SIG_LEN;
            bins[k++] = w == COLLUDE ? forged : in->sign[w]->extra[0];
        }
        pft_secmsg_t f = {.kind = PFT_SECMSG_SIGNATURES,
                          .has_extra = 1,
                          .n_extra = k,
                          .extra_ids = ids,
                          .extra = bins,
                          .extra_len = lens};
        const char *reason = NULL;
        int state = send_as_s(t, s_kp, &f, s_ids[r], &reason);
        CHECK_MSG(state == PFT_SEND_REJECTED && reason && strstr(reason, "the opener s forwarded") &&
                      strstr(reason, "different survivors"),
                  "%s took the signatures of different sets: state %d (%s)", s_ids[r], state,
                  reason ? reason : "");
        fprintf(stderr, "  %s: %s\n", s_ids[r], reason ? reason : "");
    }
}

/* Writes the star's topology (s on the held port) and prepares the run; 0 or -1. */
static int prepare(const char *dir, int port)
{
    char dot[320], cmd[1200];
    snprintf(dot, sizeof dot, "%s/split.dot", s_tmp);
    FILE *f = fopen(dot, "w");
    if (!f)
        return -1;
    fprintf(f,
            "digraph split {\n  dataset = \"%s\"; partition = iid; samples = 100; cov = tied; prep = l2;\n"
            "  deadline = 120; secure_agg = true;\n  s [data = false, endpoint = \"tcp://127.0.0.1:%d\"];\n"
            "  m1 -> s; m2 -> s; m3 -> s; m4 -> s; m5 -> s; m6 -> s;\n}\n",
            EXAMPLE_DATA, port);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, dot, dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "%s/topology.dot", dir);
    return pft_e2e_use_topology(cmd); /* the fingerprint the members expect on s's messages */
}

static void test_split_declarations(void)
{
    char dir[300];
    int fd = -1, port = pft_e2e_hold_port(&fd);
    snprintf(dir, sizeof dir, "%s/split", s_tmp);
    CHECK(port > 0 && prepare(dir, port) == 0);
    pft_keypair_t *s_kp = load_key(dir, "s"), *m[NM];
    int keys = s_kp != NULL;
    for (int i = 0; i < NM; i++)
        keys &= (m[i] = load_key(dir, s_ids[i])) != NULL;
    CHECK(keys);
    inbox_t in = {0};
    pid_t pid[NM];
    for (int i = 0; i < NM; i++)
        pid[i] = keys ? start_member(dir, s_ids[i]) : -1;
    pft_transport_t *t = keys ? play_s(dir, fd, port, s_kp, m, &in) : NULL;
    CHECK(t != NULL);
    int all = 0;
    for (int64_t end = pft_transport_now_ms() + PFT_E2E_HANG_MS; t && !all && pft_transport_now_ms() < end;) {
        pft_transport_poll(t, 100);
        all = 1;
        for (int i = 0; i < NM; i++)
            all &= masked_part(&in, i) >= 0;
    }
    CHECK_MSG(all, "not every member's masked part came (logs in %s)", dir);
    if (all) {
        lie(t, s_kp, &in);
        CHECK_MSG(in.n_signs == NM && in.n_reveals == 0,
                  "%d member(s) revealed before any consistency round (%d signed)", in.n_reveals, in.n_signs);
        forward(t, s_kp, m, &in); /* every member refused them: nothing more can come */
        CHECK_MSG(in.n_reveals == 0, "%d member(s) revealed after signatures of different sets",
                  in.n_reveals);
        double err = attack(&in, s_kp, m, dir);
        CHECK_MSG(err < 0 || err > 1e3, "the opener's view of m3: relative error %.3e (unmasked)", err);
    }
    pft_secmsg_t done = {.kind = PFT_SECMSG_DONE};
    for (int i = 0; t && i < NM; i++) {
        const char *reason = NULL;
        send_as_s(t, s_kp, &done, s_ids[i], &reason);
    }
    for (int i = 0; i < NM; i++) {
        int status = pid[i] > 0 ? pft_e2e_wait_child(pid[i], t) : -1;
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s exited %d (log %s/%s.log)", s_ids[i],
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, dir, s_ids[i]);
    }
    pft_transport_destroy(&t);
    for (int i = 0; i < NM; i++) {
        pft_bundle_destroy(&in.b[i]);
        pft_secmsg_destroy(&in.reveal[i]);
        pft_secmsg_destroy(&in.sign[i]);
        pft_keypair_destroy(&m[i]);
    }
    pft_keypair_destroy(&s_kp);
}

int main(void)
{
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_split") != 0)
        return 1;
    RUN(test_split_declarations);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
