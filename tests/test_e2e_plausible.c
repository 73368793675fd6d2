/* test_e2e_plausible: implausible statistics are refused at the inbox, before the ACK. A real
 * pftnode b (exact chain p -> b, cov = tied, prep l2, samples = 40, prepared by pftnet launch --prepare-only)
 * receives, signed with p's own key, statistics parts that claim what p cannot hold: rows of a node outside
 * the topology, rows of b itself, counts ×1000 (provenance agreeing), a shared scatter ×1e30 (still PSD), a
 * DP guarantee the topology does not give p, class means of norm 1 with a shared scatter of trace N (each
 * fine alone, impossible together); a part whose counts differ from its provenance is refused by the decoder
 * already (test_bundle_stats). Each must be NACKed with its reason (the sender sees "rejected"), counted in
 * b's refusals, and leave b unharmed: the honest bundle sent last is acknowledged, and b ends with exit 0,
 * its provenance {p, b}, and the accuracy of a run with the honest bundle only (b restarted in a fresh
 * folder). Counts ×1000 under a labels: partition (no `samples`) are refused by the `rows` the launcher
 * writes; where the topology gives p DP, a claim of another ε and noisy means ×1000 under the right claim are
 * refused, and p's honest DP release is taken. Claims just past each bound are refused too (class 0 counting
 * one row more, so that p claims one row over its rows; a mean of norm 1.01; a shared scatter of trace 1.01
 * times its rows: a bound off by a factor of 2 or of d lets these through). Under secure aggregation, masked
 * parts that could never open are refused before the ACK; two that pass every check before the ACK are
 * acknowledged and then not opened (exit 17, the group and the reason in result.json's
 * secure_agg.open_refused): one masked with a key the opener does not share (the sum does not cancel: the
 * group's decode bound refuses it) and one with class sums ×20 (the opened means fail the checks). */
#include "pft_e2e.h"
#include "pft_fixed.h"
#include "pft_mask.h"
#include "pft_e2e_run.h"
#include "pft_gstat.h"
#include "pft_gstat_dp.h"
#include "pft_rng.h"
#include "pft_npy.h"
#include "pft_prep.h"
#include "pft_test.h"
#include "pft_topo_attr.h"
#include "pft_topo.h"

#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tmp[256];

/* A forgery of p's part (or the honest one). */
/* The *_NEAR kinds sit just past a bound (1 % over; the bounds allow 0.1 % for rounding), so that a bound
 * loosened by a factor of 2 or of d lets them through: class 0 counting one row more, p's total one over its
 * rows, class 0's mean of norm 1.01, the shared scatter's trace 1.01 times its rows. */
typedef enum {
    HONEST,
    OUTSIDE,
    SELF,
    TIMES1000,
    HUGE_SCATTER,
    DP_CLAIM,
    UNIT_MEANS,
    COUNT_NEAR,
    MEAN_NEAR,
    SCATTER_NEAR,
    N_KINDS
} kind_t;
static const char *const s_kind[] = {"honest",
                                     "outside",
                                     "self",
                                     "counts x1000",
                                     "scatter x1e30",
                                     "DP claimed, none in the topology",
                                     "means of norm 1 with tr W = N",
                                     "class 0 counts one row more",
                                     "mean norm 1.01",
                                     "scatter trace 1.01 n"};

/* Class k's count as the forgery of kind claims it. */
static uint64_t count_of(kind_t kind, const pft_gstat_t *st, int k)
{
    if (kind == COUNT_NEAR && k == 0) /* one row more than p holds in all: a cap off by 2 lets it through */
        return pft_gstat_count(st, k) + 1;
    return pft_gstat_count(st, k) * (kind == TIMES1000 ? 1000 : 1);
}

/* The forgery a refusal of b names (HONEST: none), from its reason. */
static kind_t refusal_kind(const char *r)
{
    const char *p;
    unsigned long long n = 0;
    double t = 0;
    if (strstr(r, "'zz'"))
        return OUTSIDE;
    if (strstr(r, "node 'b' itself"))
        return SELF;
    if (strstr(r, "gives it no DP"))
        return DP_CLAIM;
    if (strstr(r, "total squared norm"))
        return UNIT_MEANS;
    if (strstr(r, "(rows)") && (p = strstr(r, " counts ")) && sscanf(p, " counts %llu", &n) == 1)
        return n >= 1000 ? TIMES1000 : COUNT_NEAR;
    if (strstr(r, "class 0's mean has norm"))
        return MEAN_NEAR;
    if ((p = strstr(r, "shared scatter has trace ")) && sscanf(p, "shared scatter has trace %lf", &t) == 1)
        return t > 1e6 ? HUGE_SCATTER : SCATTER_NEAR;
    return HONEST;
}

/* Adds out as who's part to b, stamps b with the topology's fingerprint, signs it with kp and encodes it into
 * *buf (as pftnode would). rc of the first step that failed; PFT_ENOMEM when b is NULL. */
static int finish_part(pft_bundle_t *b, const char *who, pft_gstat_t **out, const pft_keypair_t *kp,
                       uint8_t **buf, size_t *len)
{
    int rc = b ? pft_bundle_add_part(b, &who, 1, out) : PFT_ENOMEM;
    if (rc == 0)
        rc = pft_e2e_stamp(b);
    if (rc == 0)
        rc = pft_keys_sign_bundle(kp, b);
    return rc == 0 ? pft_bundle_encode(b, buf, len) : rc;
}

/* p's statistics as kind says, signed with p's key, encoded into *buf. */
static int make(kind_t kind, const char *run, const pft_dataset_t *ds, const pft_keypair_t *kp, uint8_t **buf,
                size_t *len)
{
    int d = pft_dataset_d(ds);
    pft_gstat_t *st = pft_gstat_new(PFT_GSTAT_TIED, d), *out = pft_gstat_new(PFT_GSTAT_TIED, d);
    int rc = st && out
                 ? pft_gstat_add_rows(st, pft_dataset_x(ds), pft_dataset_y(ds), (size_t)pft_dataset_n(ds))
                 : PFT_ENOMEM;
    uint64_t total = 0;
    double *w = pft_alloc_array((size_t)d * d, sizeof *w), *mu = pft_alloc_array((size_t)d, sizeof *mu);
    if (rc == 0 && (!w || !mu))
        rc = PFT_ENOMEM;
    for (int k = 0; rc == 0 && k < pft_gstat_n_classes(st); k++) {
        double m2 = 0; /* UNIT_MEANS: each mean stretched to norm 1 */
        for (int c = 0; c < d; c++)
            m2 += pft_gstat_mean(st, k)[c] * pft_gstat_mean(st, k)[c];
        for (int c = 0; c < d; c++)
            mu[c] = pft_gstat_mean(st, k)[c] / (kind == UNIT_MEANS            ? sqrt(m2)
                                                : kind == MEAN_NEAR && k == 0 ? sqrt(m2) / 1.01
                                                                              : 1.0);
        total += count_of(kind, st, k);
        rc = pft_gstat_add_class(out, pft_gstat_label(st, k), count_of(kind, st, k), mu, NULL);
    }
    double tr = 0, N = (double)pft_gstat_total(st); /* UNIT_MEANS: W scaled to trace N (all its rows' norm) */
    for (int c = 0; rc == 0 && c < d; c++)
        tr += pft_gstat_tied_scatter(st)[(size_t)c * d + c];
    double scale = kind == HUGE_SCATTER ? 1e30 : kind == UNIT_MEANS ? N / tr : 1.0;
    if (kind == SCATTER_NEAR)
        scale = 1.01 * (double)total / tr;
    for (size_t i = 0; rc == 0 && i < (size_t)d * d; i++)
        w[i] = pft_gstat_tied_scatter(st)[i] * scale;
    if (rc == 0)
        rc = pft_gstat_add_tied_scatter(out, w);
    const char *who = kind == OUTSIDE ? "zz" : kind == SELF ? "b" : "p";
    pft_bundle_t *b = rc == 0 ? pft_bundle_new(run, "p", PFT_DTYPE_F32, d) : NULL;
    for (int k = 0; b && rc == 0 && k < pft_gstat_n_classes(st); k++)
        rc = pft_bundle_prov_add(b, who, pft_gstat_label(st, k), count_of(kind, st, k));
    if (b && rc == 0 && kind == DP_CLAIM)
        rc = pft_bundle_prov_set_dp(b, who, 1.0, 1e-3);
    rc = rc == 0 ? finish_part(b, who, &out, kp, buf, len) : rc;
    pft_bundle_destroy(&b);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&out);
    pft_free(w);
    pft_free(mu);
    return rc;
}

/* Starts b's pftnode on the prepared run in dir, with its output in out (its log appended to out.log). */
static pid_t start_b(const char *dir, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        char node[512], topo[512], key[512], ex[512], ey[512], log[600], nf[600];
        snprintf(node, sizeof node, "%s/node/pftnode", PFT_BINARY_DIR);
        snprintf(topo, sizeof topo, "%s/topology.dot", dir);
        snprintf(nf, sizeof nf, "%s/b/node.conf", dir); /* b's data files: its own, not in the topology */
        snprintf(key, sizeof key, "%s/keys/b.key", dir);
        snprintf(ex, sizeof ex, "%s/eval_x.npy", dir);
        snprintf(ey, sizeof ey, "%s/eval_y.npy", dir);
        snprintf(log, sizeof log, "%s.log", out);
        if (!freopen(log, "a", stderr))
            _exit(126);
        execl(node, node, "--topology", topo, "--id", "b", "--out", out, "--node-file", nf, "--key", key,
              "--eval-features", ex, "--eval-labels", ey, "--linger-ms", "300", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* b's endpoint: the topology's, or, when it leaves the port open (the launcher's automatic endpoints), the
 * one b reports in out/endpoint (waited for up to 120 s). 0, or -1 if none came. */
static int b_endpoint(const pft_topo_node_t *b, const char *out, char *ep, size_t cap)
{
    if (!pft_topo_endpoint_open(b->endpoint)) {
        snprintf(ep, cap, "%s", b->endpoint);
        return 0;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/endpoint", out);
    return pft_e2e_wait_endpoint(path, ep, cap);
}

/* p's inbound callback: takes whatever b sends it (the opener's done notice under secure aggregation). */
static int take_any(void *ctx, const uint8_t *buf, size_t len, char *reason, size_t cap)
{
    (void)ctx, (void)buf, (void)len, (void)reason, (void)cap;
    return 0;
}

/* Publishes t's endpoint as p's, where b looks for it (p's folder beside out: b's default peers folder), so
 * that b reaches p: an opener that cannot deliver its done notice waits 30 s for it (pft_node_dropout.c). */
static int publish_p(const pft_transport_t *t, const char *out)
{
    char dir[600], tmp[640], path[640];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    snprintf(slash, sizeof dir - (size_t)(slash - dir), "/p");
    snprintf(tmp, sizeof tmp, "%s/endpoint.tmp", dir);
    snprintf(path, sizeof path, "%s/endpoint", dir);
    (void)mkdir(dir, 0700);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fprintf(f, "%s\n", pft_transport_endpoint(t)) > 0;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

/* A CURVE client with p's key connected to b (its folder out), its endpoint published as p's. */
static pft_transport_t *client(const pft_keypair_t *kp, const pft_topo_t *topo, const char *out)
{
    const pft_topo_node_t *b = pft_topo_find(topo, "b");
    char ep[256];
    if (!b || b_endpoint(b, out, ep, sizeof ep) != 0)
        return NULL;
    pft_pubkey_t bpub;
    uint8_t pub[32], sec[32], srv[32];
    if (!b || pft_pubkey_resolve(b->key, &bpub) != 0)
        return NULL;
    pft_keypair_curve(kp, pub, sec);
    pft_pubkey_curve(&bpub, srv);
    pft_transport_opts_t o;
    pft_transport_opts_default(&o);
    o.curve_public_key = pub;
    o.curve_secret_key = sec;
    pft_transport_t *t = pft_transport_new("tcp://127.0.0.1:*", &o, take_any, NULL);
    if (t && (pft_transport_add_peer(t, "b", ep, srv) != 0 || pft_transport_allow_key(t, srv, "b") != 0 ||
              publish_p(t, out) != 0))
        pft_transport_destroy(&t);
    return t;
}

/* Waits for b (serving t meanwhile); its exit code, or -1. */
static int finish(pid_t pid, pft_transport_t *t)
{
    int status = pft_e2e_wait_child(pid, t);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static json_t *result(const char *out)
{
    char path[600];
    json_error_t err;
    snprintf(path, sizeof path, "%s/result.json", out);
    return json_load_file(path, 0, &err);
}

/* Sends the honest bundle bufs[0] last (after the forgeries bufs[1..n) unless clean) to a fresh b in out,
 * each forgery expected refused with needles[k] in its reason; b's result. */
static json_t *attack_with(const char *dir, const char *out, const pft_topo_t *topo, const pft_keypair_t *kp,
                           uint8_t *const *bufs, const size_t *lens, int n, const char *const *needles,
                           const char *const *names, int clean)
{
    pid_t pid = start_b(dir, out);
    pft_transport_t *t = client(kp, topo, out);
    CHECK(t != NULL);
    if (!t) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return NULL;
    }
    for (int k = clean ? n : 1; k < n; k++) {
        int h = pft_transport_send(t, "b", bufs[k], lens[k], NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
        int st = pft_e2e_settle(t, h, PFT_E2E_HANG_MS);
        const char *reason = NULL;
        pft_transport_send_state(t, h, NULL, &reason);
        CHECK_MSG(st == PFT_SEND_REJECTED && reason && strstr(reason, needles[k]),
                  "%s: state %d, reason '%s'", names[k], st, reason ? reason : "");
        fprintf(stderr, "  %s: %s\n", names[k], reason ? reason : "");
    }
    int h = pft_transport_send(t, "b", bufs[0], lens[0], NULL, pft_transport_now_ms() + PFT_E2E_HANG_MS);
    CHECK(pft_e2e_settle(t, h, PFT_E2E_HANG_MS) == PFT_SEND_ACKED);
    int code = finish(pid, t);
    CHECK_MSG(code == 0, "b exited %d (log %s.log)", code, out);
    pft_transport_destroy(&t);
    return result(out);
}

/* Prepares run `name` (p -> b over the example data, `attrs` added to the graph (the partition among them),
 * `nodes` before the edge)
 * with pftnet launch --prepare-only into s_tmp/name; loads its resolved topology, p's key and p's rows (l2).
 * 0, or -1 after a failed CHECK (what loaded is the caller's to free). */
static int prepare_pb(const char *name, const char *attrs, const char *nodes, char *dir, size_t cap,
                      pft_topo_t **topo, pft_keypair_t **kp, pft_dataset_t **ds)
{
    char topo_path[300], cmd[1200], path[400], ypath[400];
    snprintf(topo_path, sizeof topo_path, "%s/%s.dot", s_tmp, name);
    snprintf(dir, cap, "%s/%s", s_tmp, name);
    FILE *f = fopen(topo_path, "w");
    CHECK(f != NULL);
    if (!f)
        return -1;
    fprintf(f,
            "digraph %s {\n  dataset = \"%s\"; cov = tied; prep = l2;\n"
            "  deadline = 120; %s\n  %s\n  p -> b;\n}\n",
            name, EXAMPLE_DATA, attrs, nodes);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, topo_path, dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/topology.dot", dir);
    CHECK(pft_topo_load(path, PFT_TOPO_REQUIRE_RESOLVED | PFT_TOPO_SKIP_DATA_CHECK, topo) == 0);
    CHECK(*topo && pft_e2e_use_topo(*topo) == 0); /* the forgeries carry b's fingerprint */
    snprintf(path, sizeof path, "%s/keys/p.key", dir);
    CHECK(pft_keypair_load(path, kp) == 0);
    snprintf(path, sizeof path, "%s/p/data/train_x.npy", dir);
    snprintf(ypath, sizeof ypath, "%s/p/data/train_y.npy", dir);
    CHECK(pft_npy_load_dataset(path, ypath, 0, ds) == 0);
    if (!*topo || !*kp || !*ds)
        return -1;
    CHECK(pft_dataset_apply_prep(*ds, PFT_PREP_L2) == 0);
    return 0;
}

static json_t *attack(const char *dir, const char *out, const pft_topo_t *topo, const pft_keypair_t *kp,
                      uint8_t *const *bufs, const size_t *lens, int clean)
{
    const char *needles[N_KINDS];
    for (int k = 0; k < N_KINDS; k++)
        needles[k] = k == DP_CLAIM ? "implausible DP claim" : "implausible statistics";
    return attack_with(dir, out, topo, kp, bufs, lens, N_KINDS, needles, s_kind, clean);
}

static void test_implausible_refused(void)
{
    char dir[300];
    pft_topo_t *topo = NULL;
    pft_keypair_t *kp = NULL;
    pft_dataset_t *ds = NULL;
    if (prepare_pb("pb", "partition = iid; samples = 40; min_rows = 1;", "", dir, sizeof dir, &topo, &kp,
                   &ds) != 0)
        goto done;
    uint8_t *bufs[N_KINDS] = {0};
    size_t lens[N_KINDS] = {0};
    for (int k = 0; k < N_KINDS; k++)
        CHECK_MSG(make((kind_t)k, pft_topo_run(topo)->run, ds, kp, &bufs[k], &lens[k]) == 0, "making %s: %s",
                  s_kind[k], pft_errmsg());
    char out[400], ref[400];
    snprintf(out, sizeof out, "%s/attacked", s_tmp);
    snprintf(ref, sizeof ref, "%s/clean", s_tmp);
    json_t *ra = attack(dir, out, topo, kp, bufs, lens, 0), *rc = attack(dir, ref, topo, kp, bufs, lens, 1);
    CHECK(ra && rc);
    if (ra && rc) {
        /* each forgery once or more (a retransmission before the NACK came back is refused again) */
        json_t *refusals = json_object_get(ra, "refusals");
        int seen[N_KINDS] = {0}, distinct = 0;
        size_t i, stray = 0;
        json_t *v;
        json_array_foreach(refusals, i, v)
        {
            const char *r = json_string_value(v) ?: "";
            if (pft_e2e_is_stray(r)) {
                stray++;
                continue;
            }
            CHECK_MSG(strstr(r, "implausible"), "refusal '%s'", r);
            kind_t k = refusal_kind(r);
            distinct += k != HONEST && !seen[k]++;
        }
        CHECK_MSG(distinct == N_KINDS - 1, "%d of %d forgeries in b's refusals", distinct, N_KINDS - 1);
        for (int k = 1; k < N_KINDS; k++)
            CHECK_MSG(seen[k], "no refusal of b names the forgery '%s'", s_kind[k]);
        CHECK(pft_e2e_jint(ra, "rejected") == (long)(json_array_size(refusals) - stray));
        CHECK(pft_e2e_prov_nodes(ra) == 2);
        double a = json_real_value(json_object_get(ra, "accuracy_global")),
               c = json_real_value(json_object_get(rc, "accuracy_global"));
        CHECK_MSG(a == c, "attacked b %.4f, clean b %.4f", a, c);
        fprintf(stderr, "  b after %d refused forgeries: accuracy %.4f (clean run %.4f)\n", N_KINDS - 1, a,
                c);
    }
    json_decref(ra);
    json_decref(rc);
    for (int k = 0; k < N_KINDS; k++)
        pft_free(bufs[k]);
done:
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp);
    pft_topo_destroy(&topo);
}

/* Sends the forgeries bufs[1..n) then the honest bufs[0] to a fresh b (folder s_tmp/<tag>-attacked), and the
 * honest one alone to another (s_tmp/<tag>-clean): each forgery NACKed with needles[k], both b end alike. */
static void attack_pair(const char *dir, const char *tag, const pft_topo_t *topo, const pft_keypair_t *kp,
                        uint8_t *const *bufs, const size_t *lens, int n, const char *const *needles,
                        const char *const *names)
{
    char out[400], ref[400];
    snprintf(out, sizeof out, "%s/%s-attacked", s_tmp, tag);
    snprintf(ref, sizeof ref, "%s/%s-clean", s_tmp, tag);
    json_t *ra = attack_with(dir, out, topo, kp, bufs, lens, n, needles, names, 0),
           *rc = attack_with(dir, ref, topo, kp, bufs, lens, n, needles, names, 1);
    CHECK(ra && rc);
    if (ra && rc) {
        double a = json_real_value(json_object_get(ra, "accuracy_global")),
               c = json_real_value(json_object_get(rc, "accuracy_global"));
        CHECK(pft_e2e_jint(ra, "rejected") == (long)(json_array_size(json_object_get(ra, "refusals")) -
                                                     pft_e2e_strays(json_object_get(ra, "refusals"))));
        CHECK(pft_e2e_prov_nodes(ra) == 2);
        CHECK_MSG(a == c, "attacked b %.4f, clean b %.4f", a, c);
        fprintf(stderr, "  %s: b after %d refused forgeries: accuracy %.4f (clean run %.4f)\n", tag, n - 1, a,
                c);
    }
    json_decref(ra);
    json_decref(rc);
}

/* Under a labels: partition (no `samples`), counts ×1000 are refused by the `rows` the launcher wrote. */
static void test_rows_cap_labels(void)
{
    char dir[300];
    pft_topo_t *topo = NULL;
    pft_keypair_t *kp = NULL;
    pft_dataset_t *ds = NULL;
    if (prepare_pb("lb", "partition = \"labels:0-3|4-6\"; min_rows = 1;", "", dir, sizeof dir, &topo, &kp,
                   &ds) != 0)
        goto done;
    const pft_topo_node_t *p = pft_topo_find(topo, "p");
    CHECK_MSG(p && p->rows == pft_dataset_n(ds), "p's rows %d, its share %d", p ? p->rows : -1,
              pft_dataset_n(ds));
    uint8_t *bufs[2] = {0};
    size_t lens[2] = {0};
    for (int k = 0; k < 2; k++)
        CHECK(make(k ? TIMES1000 : HONEST, pft_topo_run(topo)->run, ds, kp, &bufs[k], &lens[k]) == 0);
    const char *needles[] = {"", "(rows)"}, *names[] = {"honest", "counts x1000 under labels:"};
    attack_pair(dir, "lb", topo, kp, bufs, lens, 2, needles, names);
    for (int k = 0; k < 2; k++)
        pft_free(bufs[k]);
done:
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp);
    pft_topo_destroy(&topo);
}

/* ---- DP claims against the topology (p has dp_epsilon = 1, dp_delta = 0.001) ---- */

typedef enum { D_HONEST, D_OTHER_EPS, D_MEANS1000, D_N } dkind_t;
static const char *const s_dkind[] = {"honest DP", "claimed epsilon 0.001", "noisy means x1000"};
static const char *const s_dneedle[] = {"", "the topology gives (1, 0.001)", "and their DP noise"};

/* p's DP release of its class sums at (1, 0.001) (pft_gstat_dp_release_sums, seeded), forged as kind says,
 * with its claim in p's provenance; signed with p's key and encoded into *buf. */
static int make_dp(dkind_t kind, const char *run, const pft_dataset_t *ds, const pft_keypair_t *kp,
                   uint8_t **buf, size_t *len)
{
    int d = pft_dataset_d(ds);
    pft_rng_t *rng = pft_rng_new(7);
    pft_gstat_t *st = NULL, *out = pft_gstat_new(PFT_GSTAT_TIED, d);
    pft_gstat_dp_info_t info;
    double *mu = pft_alloc_array((size_t)d, sizeof *mu), *w = pft_calloc((size_t)d * d, sizeof *w);
    int rc = rng && out && mu && w
                 ? pft_gstat_dp_release_sums(pft_dataset_x(ds), pft_dataset_y(ds), (size_t)pft_dataset_n(ds),
                                             d, 1.0, 1e-3, rng, &st, &info)
                 : PFT_ENOMEM;
    for (int k = 0; rc == 0 && k < pft_gstat_n_classes(st); k++) {
        for (int c = 0; c < d; c++)
            mu[c] = pft_gstat_mean(st, k)[c] * (kind == D_MEANS1000 ? 1000.0 : 1.0);
        rc = pft_gstat_add_class(out, pft_gstat_label(st, k), pft_gstat_count(st, k), mu, NULL);
    }
    if (rc == 0)
        rc = pft_gstat_add_tied_scatter(out, w); /* a sums-only release: zero scatter */
    const char *who = "p";
    pft_bundle_t *b = rc == 0 ? pft_bundle_new(run, "p", PFT_DTYPE_F32, d) : NULL;
    for (int k = 0; b && rc == 0 && k < pft_gstat_n_classes(st); k++)
        rc = pft_bundle_prov_add(b, who, pft_gstat_label(st, k), pft_gstat_count(st, k));
    if (b && rc == 0)
        rc = pft_bundle_prov_set_dp(b, who, kind == D_OTHER_EPS ? 1e-3 : 1.0, 1e-3);
    rc = rc == 0 ? finish_part(b, who, &out, kp, buf, len) : rc;
    pft_bundle_destroy(&b);
    pft_gstat_destroy(&st);
    pft_gstat_destroy(&out);
    pft_rng_destroy(&rng);
    pft_free(mu);
    pft_free(w);
    return rc;
}

/* Where the topology gives p DP at (1, 0.001): a claim of ε = 0.001 (a noise bonus the release never paid)
 * and noisy means ×1000 under the right claim are refused; p's honest DP release is taken. */
static void test_dp_claims(void)
{
    char dir[300];
    pft_topo_t *topo = NULL;
    pft_keypair_t *kp = NULL;
    pft_dataset_t *ds = NULL;
    if (prepare_pb("dpc", "partition = iid; samples = 40; min_rows = 1;",
                   "p [dp_epsilon = 1, dp_delta = \"0.001\"];", dir, sizeof dir, &topo, &kp, &ds) != 0)
        goto done;
    uint8_t *bufs[D_N] = {0};
    size_t lens[D_N] = {0};
    for (int k = 0; k < D_N; k++)
        CHECK_MSG(make_dp((dkind_t)k, pft_topo_run(topo)->run, ds, kp, &bufs[k], &lens[k]) == 0,
                  "making %s: %s", s_dkind[k], pft_errmsg());
    attack_pair(dir, "dpc", topo, kp, bufs, lens, D_N, s_dneedle, s_dkind);
    for (int k = 0; k < D_N; k++)
        pft_free(bufs[k]);
done:
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp);
    pft_topo_destroy(&topo);
}

/* ---- secure aggregation: masked parts that could never open are refused before the ACK ---- */

/* M_NOCANCEL and M_SUMS20 pass every check before the ACK and fail at the opening: words masked with a pair
 * key b does not hold (the sum does not cancel), class sums ×20 (the opened means are longer than rows of
 * norm 1 allow). */
typedef enum { M_HONEST, M_OPENER, M_DIV, M_TIMES1000, M_LAYOUT, M_N, M_NOCANCEL = M_N, M_SUMS20 } mkind_t;
static const char *const s_mkind[] = {"honest masked", "another opener", "another noise divisor",
                                      "masked counts x1000", "fewer classes"};
static const char *const s_mneedle[] = {"", "for opener 'q'", "noise divisor 3", "(rows)", "6 classes"};

/* p's statistics masked for opener b (label "b:tied", no DP): the class sums of the run's 7 classes, then the
 * exact second moment S2 (lower triangle), in fixed point, with p's mask shared with b; forged as kind says;
 * signed with p's key and encoded into *buf. */
static int make_masked(mkind_t kind, const char *run, const pft_dataset_t *ds, const pft_keypair_t *kp,
                       const pft_pubkey_t *bpub, uint8_t **buf, size_t *len)
{
    int d = pft_dataset_d(ds), K = kind == M_LAYOUT ? 6 : 7, n = pft_dataset_n(ds);
    size_t nw = pft_bundle_masked_words(PFT_GSTAT_TIED, K, d), o = (size_t)K * d;
    double *v = pft_calloc(nw, sizeof *v);
    uint64_t *w = pft_alloc_array(nw, sizeof *w), counts[7] = {0}, mult = kind == M_TIMES1000 ? 1000 : 1;
    int labels[7] = {0, 1, 2, 3, 4, 5, 6}, rc = v && w ? 0 : PFT_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++) {
        const float *x = pft_dataset_x(ds) + (size_t)i * d;
        int c = pft_dataset_y(ds)[i];
        if (c >= K)
            continue;
        counts[c]++;
        for (int j = 0; j < d; j++)
            v[(size_t)c * d + j] += x[j];
        for (int a = 0, t = 0; a < d; a++)
            for (int b2 = 0; b2 <= a; b2++, t++)
                v[o + (size_t)t] += (double)x[a] * x[b2];
    }
    pft_bundle_mask_t m = {.frac_bits = 32, .bound = 2 * (uint64_t)n, .div = kind == M_DIV ? 3 : 0};
    snprintf(m.label, sizeof m.label, "%s", kind == M_OPENER ? "q:tied" : "b:tied");
    snprintf(m.opener, sizeof m.opener, "%s", kind == M_OPENER ? "q" : "b");
    if (rc == 0)
        rc = pft_fixed_encode(v, nw, 2.0 * n, w);
    for (size_t i = 0; rc == 0 && kind == M_SUMS20 && i < o; i++)
        w[i] *= 20; /* in fixed point, before the mask: the opened class sums are 20 times p's */
    pft_keypair_t *other = kind == M_NOCANCEL ? pft_keypair_generate() : NULL;
    if (rc == 0 && kind == M_NOCANCEL && !other)
        rc = PFT_ENOMEM;
    if (rc == 0) /* M_NOCANCEL: masked with another partner than b, whose side cannot remove it */
        rc = pft_mask_add(kp, run, other ? pft_keypair_public(other) : bpub, 1, (const uint8_t *)m.label,
                          strlen(m.label), w, nw);
    pft_keypair_destroy(&other);
    const char *who = "p";
    pft_bundle_t *b = rc == 0 ? pft_bundle_new(run, "p", PFT_DTYPE_F32, d) : NULL;
    for (int c = 0; b && rc == 0 && c < K; c++) {
        counts[c] *= mult;
        rc = counts[c] ? pft_bundle_prov_add(b, who, c, counts[c]) : 0;
    }
    if (b && rc == 0)
        rc = pft_bundle_add_masked_part(b, &who, 1, PFT_GSTAT_TIED, K, labels, counts, &w, &m);
    if (b && rc == 0)
        rc = pft_e2e_stamp(b);
    if (b && rc == 0)
        rc = pft_keys_sign_bundle(kp, b);
    if (b && rc == 0)
        rc = pft_bundle_encode(b, buf, len);
    else if (!b && rc == 0)
        rc = PFT_ENOMEM;
    pft_bundle_destroy(&b);
    pft_free(v);
    pft_free(w);
    return rc;
}

/* A data-less aggregator b opening p's masked statistics (secure_agg = true, min_contributors = 1): forged
 * masked parts (another opener, another DP divisor, counts ×1000, a class layout not the run's) are NACKed
 * with their reason, and b, given the honest one last, opens it and scores as a clean b does. */
static void test_masked_refused(void)
{
    char dir[300];
    pft_topo_t *topo = NULL;
    pft_keypair_t *kp = NULL;
    pft_dataset_t *ds = NULL;
    pft_pubkey_t bpub;
    const pft_topo_node_t *bn = NULL;
    if (prepare_pb("sa", "partition = iid; samples = 40; secure_agg = true; min_contributors = 1;",
                   "b [data = false];", dir, sizeof dir, &topo, &kp, &ds) != 0 ||
        !(bn = pft_topo_find(topo, "b")) || pft_pubkey_resolve(bn->key, &bpub) != 0) {
        CHECK(0);
        goto done;
    }
    uint8_t *bufs[M_N] = {0};
    size_t lens[M_N] = {0};
    for (int k = 0; k < M_N; k++)
        CHECK_MSG(make_masked((mkind_t)k, pft_topo_run(topo)->run, ds, kp, &bpub, &bufs[k], &lens[k]) == 0,
                  "making %s: %s", s_mkind[k], pft_errmsg());
    char out[400], ref[400];
    snprintf(out, sizeof out, "%s/sa-attacked", s_tmp);
    snprintf(ref, sizeof ref, "%s/sa-clean", s_tmp);
    json_t *ra = attack_with(dir, out, topo, kp, bufs, lens, M_N, s_mneedle, s_mkind, 0),
           *rc = attack_with(dir, ref, topo, kp, bufs, lens, M_N, s_mneedle, s_mkind, 1);
    CHECK(ra && rc);
    if (ra && rc) {
        double a = json_real_value(json_object_get(ra, "accuracy_global")),
               c = json_real_value(json_object_get(rc, "accuracy_global"));
        json_t *sa = json_object_get(ra, "secure_agg");
        CHECK(sa && json_integer_value(json_object_get(sa, "opened_rows")) == 40);
        CHECK_MSG(a == c && a > 0.3, "attacked b %.4f, clean b %.4f", a, c);
        fprintf(stderr,
                "  b after %d refused masked forgeries opened p's 40 rows: accuracy %.4f (clean %.4f)\n",
                M_N - 1, a, c);
    }
    json_decref(ra);
    json_decref(rc);
    for (int k = 0; k < M_N; k++)
        pft_free(bufs[k]);
done:
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp);
    pft_topo_destroy(&topo);
}

/* A masked part that passes every check before the ACK and fails at the opening (kind: M_NOCANCEL, M_SUMS20):
 * b acknowledges it, then refuses to open the group and says which and why (needle in result.json's
 * secure_agg.open_refused.reason), exit 17, nothing trained on it. */
static void open_refused(const char *dir, const pft_topo_t *topo, const pft_keypair_t *kp, mkind_t kind,
                         const uint8_t *buf, size_t len, const char *needle)
{
    char out[400];
    snprintf(out, sizeof out, "%s/sa-open-%d", s_tmp, (int)kind);
    pid_t pid = start_b(dir, out);
    pft_transport_t *t = client(kp, topo, out);
    CHECK(t != NULL);
    if (!t) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return;
    }
    int h = pft_transport_send(t, "b", buf, len, NULL, pft_transport_now_ms() + 120000);
    CHECK_MSG(pft_e2e_settle(t, h, 120000) == PFT_SEND_ACKED, "kind %d: not acknowledged", (int)kind);
    int code = finish(pid, t);
    pft_transport_destroy(&t);
    json_t *res = result(out), *ref = json_object_get(json_object_get(res, "secure_agg"), "open_refused");
    const char *why = json_string_value(json_object_get(ref, "reason"));
    json_t *mem = json_object_get(ref, "members");
    CHECK_MSG(code == 17, "kind %d: b exited %d, expected 17 (log %s.log)", (int)kind, code, out);
    CHECK_MSG(why && strstr(why, needle) && strstr(why, "opened by 'b'"), "kind %d: open_refused '%s'",
              (int)kind, why ? why : "(none)");
    CHECK(json_array_size(mem) == 1 && strcmp(json_string_value(json_array_get(mem, 0)) ?: "", "p") == 0);
    CHECK(json_object_get(res, "accuracy_global") == NULL ||
          json_is_null(json_object_get(res, "accuracy_global")));
    fprintf(stderr, "  acknowledged, then not opened (exit %d): %s\n", code, why ? why : "");
    json_decref(res);
}

/* Masked parts that pass the inbox and fail at the opening: a sum that does not cancel (refused by the
 * group's decode bound, before any value is read) and class sums ×20 (refused by the opened sum's checks). */
static void test_open_refused(void)
{
    char dir[300];
    pft_topo_t *topo = NULL;
    pft_keypair_t *kp = NULL;
    pft_dataset_t *ds = NULL;
    pft_pubkey_t bpub;
    const pft_topo_node_t *bn = NULL;
    if (prepare_pb("sa2", "partition = iid; samples = 40; secure_agg = true; min_contributors = 1;",
                   "b [data = false];", dir, sizeof dir, &topo, &kp, &ds) != 0 ||
        !(bn = pft_topo_find(topo, "b")) || pft_pubkey_resolve(bn->key, &bpub) != 0) {
        CHECK(0);
        goto done;
    }
    static const struct {
        mkind_t kind;
        const char *needle;
    } cases[] = {{M_NOCANCEL, "does not open"}, {M_SUMS20, "mean has norm"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(make_masked(cases[i].kind, pft_topo_run(topo)->run, ds, kp, &bpub, &buf, &len) == 0);
        if (buf)
            open_refused(dir, topo, kp, cases[i].kind, buf, len, cases[i].needle);
        pft_free(buf);
    }
done:
    pft_dataset_destroy(&ds);
    pft_keypair_destroy(&kp);
    pft_topo_destroy(&topo);
}

int main(void)
{
    if (pft_e2e_scratch(s_tmp, sizeof s_tmp, "pft_plausible") != 0)
        return 1;
    RUN(test_implausible_refused);
    RUN(test_rows_cap_labels);
    RUN(test_dp_claims);
    RUN(test_masked_refused);
    RUN(test_open_refused);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
