/* test_e2e_secagg_liar: a lying opener of secure aggregation's dropout recovery (docs/SECAGG.md §5). A real
 * pftnode m1, member of a star m1, m2, m3 -> s (secure_agg, prepared by pftnet launch --prepare-only), sends
 * its masked part to s, played by this test with s's own keys. The test then sends m1 declarations it must
 * refuse, each with its reason, revealing nothing: one signed with another node's key, one declaring m1
 * itself missing, one leaving a single survivor (fewer than min_contributors = 2: m1's reveal would open its
 * own masked part to the opener), one naming a node outside the group, one of another run, a reveal (not a
 * member's to take). Then the honest declaration (m3 missing): m1 reveals, signed, exactly its use key with
 * m3 for the group's label (checked against the key m3's side derives: an oracle from the other end of the
 * pair), and nothing else; a second, different declaration is refused (one declaration per run); the done
 * notice ends m1's wait, exit 0, result.json saying it revealed with m3 only. */
#include "pft_e2e.h"
#include "pft_e2e_run.h"
#include "pft_mask.h"
#include "pft_secmsg.h"
#include "pft_test.h"
#include "pft_topo.h"

#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tmp[256];

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

/* Sends a declaration (or another kind) from "s" signed with kp to m1; the send's final state and its reason.
 */
static int declare(pft_transport_t *t, const pft_keypair_t *kp, pft_secmsg_kind_t kind, const char *run,
                   const char *const *ids, size_t n, const char *const *surv, size_t ns, const char **reason)
{
    static const uint8_t keys[4][32];
    pft_secmsg_t m = {.kind = kind, .n_ids = n, .ids = ids, .n_survivors = ns, .survivors = surv};
    if (kind == PFT_SECMSG_REVEAL)
        m.keys = keys, m.n_survivors = 0;
    snprintf(m.run, sizeof m.run, "%s", run);
    snprintf(m.label, sizeof m.label, "s:tied");
    snprintf(m.sender, sizeof m.sender, "s");
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(pft_secmsg_encode(&m, kp, &buf, &len) == 0);
    int h = pft_transport_send(t, "m1", buf, len, NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
    pft_free(buf);
    int st = pft_e2e_settle(t, h, PFT_E2E_HANG_MS);
    pft_transport_send_state(t, h, NULL, reason);
    return st;
}

/* The forgeries: each must be NACKed with its needle, and m1 must send nothing. */
static void refuse_lies(pft_transport_t *t, const pft_keypair_t *s_kp, const pft_keypair_t *m2_kp,
                        const char *run, inbox_t *in)
{
    static const char *m1[] = {"m1"}, *m2m3[] = {"m2", "m3"}, *m3[] = {"m3"}, *zz[] = {"zz"},
                      *m1m2[] = {"m1", "m2"}, *m2[] = {"m2"};
    struct {
        const char *name, *needle, *run;
        const pft_keypair_t *kp;
        pft_secmsg_kind_t kind;
        const char *const *ids, *const *surv;
        size_t n, ns;
    } lies[] = {
        {"signed by m2", "does not verify", run, m2_kp, PFT_SECMSG_MISSING, m3, m1m2, 1, 2},
        {"m1 declared missing", "with this node a survivor", run, s_kp, PFT_SECMSG_MISSING, m1, m2m3, 1, 2},
        {"one survivor", "plan refuses the dropout", run, s_kp, PFT_SECMSG_MISSING, m2m3, m1, 2, 1},
        {"outsider missing", "not a member", run, s_kp, PFT_SECMSG_MISSING, zz, m1m2, 1, 2},
        {"another run", "is not this run's", "other-run", s_kp, PFT_SECMSG_MISSING, m3, m1m2, 1, 2},
        {"a reveal", "declarations and done notices only", run, s_kp, PFT_SECMSG_REVEAL, m2, NULL, 1, 0},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        const char *reason = NULL;
        int st = declare(t, lies[i].kp, lies[i].kind, lies[i].run, lies[i].ids, lies[i].n, lies[i].surv,
                         lies[i].ns, &reason);
        CHECK_MSG(st == PFT_SEND_REJECTED && reason && strstr(reason, lies[i].needle),
                  "%s: state %d, reason '%s'", lies[i].name, st, reason ? reason : "");
        fprintf(stderr, "  %s: %s\n", lies[i].name, reason ? reason : "");
    }
    for (int i = 0; i < 20; i++) /* a reveal, had one gone out, would have arrived by now */
        pft_transport_poll(t, 50);
    CHECK_MSG(in->n_msg == 0, "m1 sent %d message(s) to a lying opener", in->n_msg);
}

/* The honest declaration: m1 reveals exactly its use key with m3 (the key m3 derives for the pair). */
static void honest(pft_transport_t *t, const pft_keypair_t *s_kp, const pft_keypair_t *m1_kp,
                   const pft_keypair_t *m3_kp, const char *run, inbox_t *in)
{
    static const char *m3[] = {"m3"}, *m1m2[] = {"m1", "m2"}, *m2[] = {"m2"}, *m1m3[] = {"m1", "m3"};
    const char *reason = NULL;
    CHECK(declare(t, s_kp, PFT_SECMSG_MISSING, run, m3, 1, m1m2, 2, &reason) == PFT_SEND_ACKED);
    for (int i = 0; i < 1200 && in->n_msg == 0; i++)
        pft_transport_poll(t, 100);
    CHECK(in->n_msg == 1);
    pft_secmsg_t *r = NULL;
    CHECK(in->n_msg >= 1 && pft_secmsg_decode(in->msg[0], in->len[0], &r) == 0);
    CHECK(in->n_msg >= 1 &&
          pft_keys_verify_message(pft_keypair_public(m1_kp), in->msg[0], in->len[0], NULL) == 0);
    uint8_t want[PFT_MASK_KEY_LEN];
    CHECK(pft_mask_use_key(m3_kp, run, pft_keypair_public(m1_kp), (const uint8_t *)"s:tied", 6, want) == 0);
    CHECK(r && r->kind == PFT_SECMSG_REVEAL && strcmp(r->sender, "m1") == 0 && r->n_ids == 1 &&
          strcmp(r->ids[0], "m3") == 0 && memcmp(r->keys[0], want, sizeof want) == 0);
    fprintf(stderr, "  honest declaration: m1 revealed its use key with m3 (= m3's side of the pair)\n");
    pft_secmsg_destroy(&r);
    CHECK(declare(t, s_kp, PFT_SECMSG_MISSING, run, m2, 1, m1m3, 2, &reason) == PFT_SEND_REJECTED);
    CHECK_MSG(reason && strstr(reason, "another declaration"), "second declaration: '%s'",
              reason ? reason : "");
    fprintf(stderr, "  a second declaration: %s\n", reason ? reason : "");
    CHECK(declare(t, s_kp, PFT_SECMSG_DONE, run, NULL, 0, NULL, 0, &reason) == PFT_SEND_ACKED);
    CHECK(in->n_msg == 1);
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
    snprintf(dot, sizeof dot, "%s/liar.dot", s_tmp);
    FILE *f = fopen(dot, "w");
    CHECK(f != NULL);
    if (!f || port <= 0)
        return;
    fprintf(f,
            "digraph liar {\n  dataset = \"%s\"; partition = iid; samples = 40; cov = tied; prep = l2;\n"
            "  deadline = 120; secure_agg = true;\n  s [data = false, endpoint = \"tcp://127.0.0.1:%d\"];\n"
            "  m1 -> s; m2 -> s; m3 -> s;\n}\n",
            EXAMPLE_DATA, port);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, dot, dir);
    CHECK(system(cmd) == 0);
    pft_keypair_t *s_kp = load_key(dir, "s"), *m1_kp = load_key(dir, "m1"), *m2_kp = load_key(dir, "m2"),
                  *m3_kp = load_key(dir, "m3");
    CHECK(s_kp && m1_kp && m2_kp && m3_kp);
    inbox_t in = {0};
    pid_t pid = s_kp && m1_kp && m2_kp && m3_kp ? start_m1(dir) : -1;
    pft_transport_t *t = pid > 0 ? play_s(dir, fd, port, s_kp, m1_kp, &in) : NULL;
    CHECK(t != NULL);
    for (int i = 0; t && i < 1200 && in.bundles == 0; i++)
        pft_transport_poll(t, 100);
    CHECK_MSG(in.bundles == 1, "m1's masked part never came (log %s/m1.log)", dir);
    if (t && in.bundles == 1) {
        refuse_lies(t, s_kp, m2_kp, "liar", &in);
        honest(t, s_kp, m1_kp, m3_kp, "liar", &in);
    }
    int status = 0;
    for (int i = 0; pid > 0 && i < 600 && waitpid(pid, &status, WNOHANG) == 0; i++)
        t ? (void)pft_transport_poll(t, 100) : (void)usleep(100000);
    if (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK_MSG(0, "m1 did not stop after the done notice");
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "m1 exited %d (log %s/m1.log)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, dir);
    char path[400];
    snprintf(path, sizeof path, "%s/m1/result.json", dir);
    json_error_t err;
    json_t *res = json_load_file(path, 0, &err), *sa = json_object_get(res, "secure_agg");
    json_t *rv = json_object_get(sa, "revealed_with");
    CHECK(json_array_size(rv) == 1 && strcmp(json_string_value(json_array_get(rv, 0)), "m3") == 0);
    CHECK(json_is_true(json_object_get(sa, "done_notice")));
    json_decref(res);
    pft_transport_destroy(&t);
    for (int i = 0; i < in.n_msg; i++)
        pft_free(in.msg[i]);
    pft_keypair_destroy(&s_kp);
    pft_keypair_destroy(&m1_kp);
    pft_keypair_destroy(&m2_kp);
    pft_keypair_destroy(&m3_kp);
}

int main(void)
{
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_liar") != 0)
        return 1;
    RUN(test_lying_opener);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
