/* End-to-end security: a real, keyed pftnode faces an unknown key (cannot connect), a bundle re-signed by a
 * non-predecessor, a bundle with one flipped bit, another run's bundle and a second, different bundle from its
 * predecessor (replay of a consumed hand-off); it refuses each with a reason, uses the honest bundle once, and ends
 * with exactly the accuracy of a run without the attackers. */
#include "pft_e2e.h"
#include "pft_test.h"

#include "pft_alloc.h"
#include "pft_bundle.h"
#include "pft_dataset.h"
#include "pft_gmm.h"
#include "pft_keys.h"
#include "pft_npy.h"
#include "pft_transport.h"

#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>


static char s_tmp[128];


static pft_keypair_t *make_key(const char *name)
{
    char sk[256], pk[256];
    snprintf(sk, sizeof sk, "%s/%s.key", s_tmp, name);
    snprintf(pk, sizeof pk, "%s/%s.pub", s_tmp, name);
    pft_keypair_t *kp = pft_keypair_generate();
    CHECK(kp && pft_keypair_save(kp, sk, pk, name, 1) == 0);
    return kp;
}


static pid_t start_b(const char *topo, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        char node[512];
        snprintf(node, sizeof node, "%s/node/pftnode", PFT_BINARY_DIR);
        execl(node, node, "--topology", topo, "--id", "b", "--out", out, "--linger-ms", "300", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pft_transport_t *client(const pft_keypair_t *kp, const pft_keypair_t *server, int pb)
{
    uint8_t pub[32], sec[32], srv[32];
    pft_keypair_curve(kp, pub, sec);
    pft_pubkey_curve(pft_keypair_public(server), srv);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = pub;
    o.curve_secret_key = sec;
    pft_transport_t *t = pft_transport_new("tcp://127.0.0.1:*", &o, NULL, NULL);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", pb);
    CHECK(t && pft_transport_add_peer(t, "b", ep, srv) == 0);
    return t;
}

static int finish(pid_t pid, pft_transport_t *t)
{
    int status = 0;
    for (int i = 0; i < 1200 && waitpid(pid, &status, WNOHANG) == 0; i++)
        pft_transport_poll(t, 100);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_attackers(void)
{
    int pb = pft_e2e_free_port();
    pft_keypair_t *kp_p = make_key("p"), *kp_b = make_key("b"), *kp_x = make_key("x");
    char topo[256];
    snprintf(topo, sizeof topo, "%s/t.dot", s_tmp);
    FILE *f = fopen(topo, "w");
    fprintf(f,
            "digraph sec {\n run = r1; k = 1; cov = diag; head_draws = 2; deadline = 120;\n"
            " p [endpoint = \"tcp://127.0.0.1:%d\", key = \"p.pub\", train = \"%s/train_x.npy\", labels = \"%s/train_y.npy\"];\n"
            " b [endpoint = \"tcp://127.0.0.1:%d\", key = \"b.pub\", train = \"%s/train_x.npy\", labels = \"%s/train_y.npy\",\n"
            "    test = \"%s/test_x.npy\", test_labels = \"%s/test_y.npy\"];\n p -> b;\n}\n",
            pft_e2e_free_port(), EXAMPLE_DATA, EXAMPLE_DATA, pb, EXAMPLE_DATA, EXAMPLE_DATA, EXAMPLE_DATA, EXAMPLE_DATA);
    fclose(f);
    pft_dataset_t *ds = NULL;
    CHECK(pft_npy_load_dataset(EXAMPLE_DATA "/train_x.npy", EXAMPLE_DATA "/train_y.npy", 0, &ds) == 0);
    uint8_t *good = NULL, *forged = NULL, *other_run = NULL, *second = NULL;
    size_t ng = 0, nf = 0, no = 0, ns = 0;
    CHECK(pft_e2e_make_bundle("r1", ds, 20, kp_p, &good, &ng) == 0);
    CHECK(pft_e2e_make_bundle("r1", ds, 20, kp_x, &forged, &nf) == 0); /* producer p, signed by x */
    CHECK(pft_e2e_make_bundle("r0", ds, 20, kp_p, &other_run, &no) == 0);
    CHECK(pft_e2e_make_bundle("r1", ds, 30, kp_p, &second, &ns) == 0);

    char out[256];
    snprintf(out, sizeof out, "%s/attacked", s_tmp);
    pid_t pid = start_b(topo, out);

    /* an unknown key cannot even connect */
    pft_transport_t *x = client(kp_x, kp_b, pb);
    int h = pft_transport_send(x, "b", good, ng, NULL, pft_transport_now_ms() + 4000);
    CHECK_MSG(pft_e2e_settle(x, h, 10000) == PFT_SEND_FAILED, "unknown key delivered");
    pft_transport_destroy(&x);

    pft_transport_t *p = client(kp_p, kp_b, pb);
    int64_t dl = pft_transport_now_ms() + 60000;
    h = pft_transport_send(p, "b", forged, nf, NULL, dl);
    CHECK_MSG(pft_e2e_settle(p, h, 60000) == PFT_SEND_REJECTED, "forged signature accepted");
    uint8_t *flip = pft_alloc(ng);
    memcpy(flip, good, ng);
    flip[ng / 2] ^= 0x10;
    h = pft_transport_send(p, "b", flip, ng, NULL, dl);
    CHECK_MSG(pft_e2e_settle(p, h, 60000) == PFT_SEND_REJECTED, "flipped bit accepted");
    pft_free(flip);
    h = pft_transport_send(p, "b", other_run, no, NULL, dl);
    CHECK_MSG(pft_e2e_settle(p, h, 60000) == PFT_SEND_REJECTED, "other run accepted");
    h = pft_transport_send(p, "b", good, ng, NULL, dl);
    CHECK_MSG(pft_e2e_settle(p, h, 60000) == PFT_SEND_ACKED, "honest bundle not acknowledged");
    h = pft_transport_send(p, "b", second, ns, NULL, dl);
    CHECK_MSG(pft_e2e_settle(p, h, 60000) == PFT_SEND_REJECTED, "second bundle for a consumed hand-off accepted");
    CHECK(finish(pid, p) == 0);
    pft_transport_destroy(&p);

    /* the same node, honest traffic only */
    char clean[256];
    snprintf(clean, sizeof clean, "%s/clean", s_tmp);
    pid = start_b(topo, clean);
    p = client(kp_p, kp_b, pb);
    h = pft_transport_send(p, "b", good, ng, NULL, pft_transport_now_ms() + 60000);
    CHECK(pft_e2e_settle(p, h, 60000) == PFT_SEND_ACKED);
    CHECK(finish(pid, p) == 0);
    pft_transport_destroy(&p);

    char path[300];
    json_error_t err;
    snprintf(path, sizeof path, "%s/result.json", out);
    json_t *ra = json_load_file(path, 0, &err);
    snprintf(path, sizeof path, "%s/result.json", clean);
    json_t *rc = json_load_file(path, 0, &err);
    CHECK(ra && rc);
    if (ra && rc) {
        /* each attack refused at least once (a copy retransmitted while the node was busy is refused again) */
        CHECK(json_integer_value(json_object_get(ra, "rejected")) >= 4);
        const char *want[] = {"signature of producer 'p' does not verify", "bundle decode", "run id 'r0'",
                              "already holds a different bundle"};
        for (int k = 0; k < 4; k++) {
            int found = 0;
            size_t i;
            json_t *v;
            json_array_foreach(json_object_get(ra, "refusals"), i, v) found |=
                strstr(json_string_value(v), want[k]) != NULL;
            CHECK_MSG(found, "no refusal mentions \"%s\"", want[k]);
        }
        CHECK(json_integer_value(json_object_get(ra, "handshakes_denied")) >= 1);
        CHECK(json_integer_value(json_object_get(ra, "n_synthetic")) == 7 * 20);
        CHECK(json_is_true(json_object_get(ra, "secure")));
        double a1 = json_real_value(json_object_get(ra, "accuracy_local"));
        double a2 = json_real_value(json_object_get(rc, "accuracy_local"));
        CHECK_MSG(a1 == a2, "accuracy with attackers %.6f, without %.6f", a1, a2);
    }
    json_decref(ra);
    json_decref(rc);
    pft_free(good);
    pft_free(forged);
    pft_free(other_run);
    pft_free(second);
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp_p);
    pft_keypair_destroy(&kp_b);
    pft_keypair_destroy(&kp_x);
}

static void test_refuses_without_keys(void)
{
    /* a topology without keys: pftnode refuses to run in plain text unless --insecure */
    char topo[256];
    snprintf(topo, sizeof topo, "%s/nokeys.dot", s_tmp);
    FILE *f = fopen(topo, "w");
    fprintf(f,
            "digraph nokeys {\n a [endpoint = \"tcp://127.0.0.1:%d\", train = \"%s/train_x.npy\", labels = "
            "\"%s/train_y.npy\"];\n b [endpoint = \"tcp://127.0.0.1:%d\", train = \"%s/train_x.npy\", labels = "
            "\"%s/train_y.npy\"];\n a -> b;\n}\n",
            pft_e2e_free_port(), EXAMPLE_DATA, EXAMPLE_DATA, pft_e2e_free_port(), EXAMPLE_DATA, EXAMPLE_DATA);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/node/pftnode --topology %s --id a --out %s/nk 2> %s/nk.err", PFT_BINARY_DIR, topo,
             s_tmp, s_tmp);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
}

int main(void)
{
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    snprintf(s_tmp, sizeof s_tmp, "/tmp/pft_sec_XXXXXX");
    if (!mkdtemp(s_tmp))
        return 1;
    RUN(test_refuses_without_keys);
    RUN(test_attackers);
    int rc = pft_test_done();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_tmp);
    if (rc == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_tmp);
    return rc;
}
