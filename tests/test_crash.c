/* Crash and restart: a node killed with SIGKILL at a named point and restarted with the same command ends
 * with the same result as an undisturbed run (same accuracy, identical outbound bundle bytes), and no bundle
 * is lost or applied twice. Needs the PFT_TEST_HOOKS build (tests/run), whose pftnode honours PFT_CRASH_AT.
 */
#include "pft_e2e_run.h"
#include "pft_test.h"

#include "pft_bundle.h"

#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define EXAMPLE_DATA PFT_SOURCE_DIR "/examples/data/pacs-small"
#define NODES 3

static char s_tmp[256];
static const char *s_ids[NODES] = {"a", "b", "c"};

/* The chain, with one key pair per node (made once, under s_tmp/keys) named by the topology: every run of
 * the test signs with the same keys, so the topology's fingerprint, which every bundle carries and which
 * covers the public keys, is the reference's too. */
static void write_topo(const char *path)
{
    char cmd[800], pub[400];
    for (int i = 0; i < NODES; i++) {
        snprintf(pub, sizeof pub, "%s/keys/%s.pub", s_tmp, s_ids[i]);
        snprintf(cmd, sizeof cmd, "%s/node/pftnet keygen %s --dir %s/keys > /dev/null 2>&1", PFT_BINARY_DIR,
                 s_ids[i], s_tmp);
        CHECK(access(pub, F_OK) == 0 || system(cmd) == 0); /* made once, for every run */
    }
    FILE *f = fopen(path, "w");
    fprintf(
        f,
        "digraph crash {\n  dataset = \"%s\"; partition = iid; samples = 60; k = 2; cov = diag; seed = 3;\n"
        "  max_iter = 30; head_draws = 2; em_draws = 2; deadline = 120; send_deadline = 120;\n"
        /* min_rows = 1: every class travels, so n_synthetic counts 60 rows per predecessor (the floor's own
         * behaviour at 60 rows per node is tested by e2e_floor.sh) */
        "  min_rows = 1;\n  a [key = \"%s/keys/a.pub\"]; b [key = \"%s/keys/b.pub\"]; c [key = "
        "\"%s/keys/c.pub\"];\n"
        "  a -> b -> c;\n}\n",
        EXAMPLE_DATA, s_tmp, s_tmp, s_tmp);
    fclose(f);
}

/* Bound of every wait for a condition (a log line, a file): only a guard against a hang, never a verdict. */
#define HANG_MS 600000

/* Creates the empty file path (a condition a node's test hook waits for). */
static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    if (f)
        fclose(f);
}

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static pid_t start_node(const char *dir, const char *id, const char *crash_at)
{
    pid_t pid = fork();
    if (pid == 0) {
        char node[512], topo[512], out[512], ex[512], ey[512], log[512];
        snprintf(node, sizeof node, "%s/node/pftnode", PFT_BINARY_DIR);
        snprintf(topo, sizeof topo, "%s/topology.dot", dir);
        snprintf(out, sizeof out, "%s/%s", dir, id);
        snprintf(ex, sizeof ex, "%s/eval_x.npy", dir);
        snprintf(ey, sizeof ey, "%s/eval_y.npy", dir);
        snprintf(log, sizeof log, "%s/%s/node.log", dir, id);
        if (crash_at)
            setenv("PFT_CRASH_AT", crash_at, 1);
        else
            unsetenv("PFT_CRASH_AT");
        if (!freopen(log, "a", stderr))
            _exit(126);
        execl(node, node, "--topology", topo, "--id", id, "--out", out, "--eval-features", ex,
              "--eval-labels", ey, "--linger-ms", "300", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid, int *sig)
{
    int st = 0;
    waitpid(pid, &st, 0);
    *sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        n = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Same bundle payload (id = BLAKE2b of the payload, which carries the topology's fingerprint: the runs share
 * their keys, see write_topo). */
static int same_bundle(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    uint8_t ia[PFT_BUNDLE_ID_LEN], ib[PFT_BUNDLE_ID_LEN];
    int same = x && y && pft_bundle_message_id((uint8_t *)x, la, NULL, ia) == 0 &&
               pft_bundle_message_id((uint8_t *)y, lb, NULL, ib) == 0 && memcmp(ia, ib, sizeof ia) == 0;
    free(x);
    free(y);
    return same;
}

static json_t *result(const char *dir, const char *id)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s/result.json", dir, id);
    json_error_t e;
    return json_load_file(p, 0, &e);
}

/* Runs the chain with `victim` crashing at `point`, restarts it, and compares with the reference run. */
static void crash_run(const char *point, int victim)
{
    char dir[400], cmd[1200], topo[500];
    snprintf(dir, sizeof dir, "%s/%s-%s", s_tmp, point, s_ids[victim]);
    snprintf(topo, sizeof topo, "%s/crash.dot", s_tmp);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, topo, dir);
    CHECK(sh(cmd) == 0);
    pid_t pid[NODES];
    for (int i = NODES - 1; i >= 0; i--) /* reverse order: receivers first or not, it must not matter */
        pid[i] = start_node(dir, s_ids[i], i == victim ? point : NULL);
    int sig = 0, code = wait_exit(pid[victim], &sig);
    CHECK_MSG(sig == SIGKILL, "%s: %s ended with code %d signal %d, not SIGKILL", point, s_ids[victim], code,
              sig);
    pid[victim] = start_node(dir, s_ids[victim], NULL); /* the same command, no fault */
    for (int i = 0; i < NODES; i++) {
        code = wait_exit(pid[i], &sig);
        CHECK_MSG(code == 0, "%s: node %s exit %d signal %d (logs in %s)", point, s_ids[i], code, sig, dir);
    }
    char ref[400];
    snprintf(ref, sizeof ref, "%s/reference", s_tmp);
    for (int i = 0; i < NODES; i++) {
        json_t *r = result(dir, s_ids[i]), *q = result(ref, s_ids[i]);
        CHECK(r && q);
        if (r && q) {
            double a = json_real_value(json_object_get(r, "accuracy_global"));
            double b = json_real_value(json_object_get(q, "accuracy_global"));
            CHECK_MSG(a == b, "%s: node %s accuracy %.6f vs reference %.6f", point, s_ids[i], a, b);
            CHECK(json_integer_value(json_object_get(r, "n_synthetic")) == 60 * i); /* applied once */
            CHECK(json_array_size(json_object_get(r, "provenance")) == (size_t)i + 1);
        }
        json_decref(r);
        json_decref(q);
        if (i < NODES - 1) {
            char p1[600], p2[600];
            snprintf(p1, sizeof p1, "%s/%s/bundle.pftb", dir, s_ids[i]);
            snprintf(p2, sizeof p2, "%s/%s/bundle.pftb", ref, s_ids[i]);
            CHECK_MSG(same_bundle(p1, p2), "%s: %s's outbound bundle differs from the reference", point,
                      s_ids[i]);
        }
    }
}

/* A receiver that cannot store an inbound bundle (PFT_TEST_STORE_FAIL: the write fails with ENOSPC) says so
 * at once, at error level with the path and errno text, and exits PFT_EXIT_IO (9) instead of waiting out its
 * 120 s deadline. */
static void test_store_fail(void)
{
    char dir[400], cmd[1200], topo[500];
    snprintf(dir, sizeof dir, "%s/store-fail", s_tmp);
    snprintf(topo, sizeof topo, "%s/crash.dot", s_tmp);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, topo, dir);
    CHECK(sh(cmd) == 0);
    setenv("PFT_TEST_STORE_FAIL", "b", 1);
    pid_t pid[NODES];
    for (int i = NODES - 1; i >= 0; i--)
        pid[i] = start_node(dir, s_ids[i], NULL);
    unsetenv("PFT_TEST_STORE_FAIL");
    int sig = 0, code = wait_exit(pid[1], &sig);
    CHECK_MSG(code == 9, "b exit %d signal %d, not 9 (PFT_EXIT_IO)", code, sig);
    for (int i = 0; i < NODES; i += 2) {
        kill(pid[i], SIGTERM);
        wait_exit(pid[i], &sig);
    }
    size_t len = 0;
    char log[600];
    snprintf(log, sizeof log, "%s/b/node.log", dir);
    char *text = slurp(log, &len);
    CHECK(text != NULL);
    if (text) {
        text[len] = '\0';
        const char *line = strstr(text, "ERROR");
        CHECK_MSG(line && strstr(line, "/inbox/h1-") && strstr(line, "No space left on device"),
                  "b's log does not report the failed store at error level with its path and errno text");
        /* at once, not at its deadline: b never went on without the bundle (event order, not a stopwatch) */
        CHECK_MSG(!strstr(text, "going on without"), "b waited out its deadline before failing");
        free(text);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* 1 if dir holds a file whose name starts with prefix. */
static int has_file(const char *dir, const char *prefix)
{
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null | grep -q '^%s'", dir, prefix);
    return system(cmd) == 0;
}

/* A's only send as result.json lists it: its state and reason (borrowed from r). */
static const char *sent_field(json_t *r, const char *field)
{
    json_t *s = json_array_get(json_object_get(r, "sent"), 0);
    return json_string_value(json_object_get(s, field));
}

/* The sender a is killed after its successor b stored the bundle but before a recorded b's ACK,
 * and restarted with the same command once b and c have finished (b then stays reachable until a confirms
 * reading its ACK, RELIABILITY.md §5). It must end within seconds, not after its 120 s send_deadline: exit 0,
 * the hand-off "acked" (the ACK was recorded in time, or b ACKed the restarted a's offer) or "delivered" (its
 * receipt found in b's inbox first), and c's result is the reference's.
 * kill_at_inbox: the test kills a when b's inbox file appears; else a kills itself as the ACK arrives
 * (PFT_CRASH_AT=on-ack, before acked/ is written and before b is told the ACK was read). */
static void restart_after_store(int kill_at_inbox)
{
    char dir[400], cmd[1200], topo[500], inbox[500];
    snprintf(dir, sizeof dir, "%s/stored-%s", s_tmp, kill_at_inbox ? "inbox" : "on-ack");
    snprintf(topo, sizeof topo, "%s/crash.dot", s_tmp);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, topo, dir);
    CHECK(sh(cmd) == 0);
    snprintf(inbox, sizeof inbox, "%s/b/inbox", dir);
    pid_t pid[NODES];
    for (int i = NODES - 1; i >= 0; i--)
        pid[i] = start_node(dir, s_ids[i], i == 0 && !kill_at_inbox ? "on-ack" : NULL);
    if (kill_at_inbox) {
        for (double end = now_s() + HANG_MS / 1000.0; now_s() < end && !has_file(inbox, "h1-");)
            usleep(1000);
        kill(pid[0], SIGKILL);
    }
    int sig = 0, code = wait_exit(pid[0], &sig);
    CHECK_MSG(sig == SIGKILL, "a ended with code %d signal %d, not SIGKILL", code, sig);
    CHECK(has_file(inbox, "h1-"));
    for (int i = 1; i < NODES; i++) { /* b and c finish */
        char out[500];
        snprintf(out, sizeof out, "%s/%s", dir, s_ids[i]);
        for (double end = now_s() + 300; now_s() < end && !has_file(out, "result.json");)
            usleep(50000);
        CHECK_MSG(has_file(out, "result.json"), "node %s never finished (logs in %s)", s_ids[i], dir);
    }
    pid[0] = start_node(dir, "a", NULL);
    code = wait_exit(pid[0], &sig);
    CHECK_MSG(code == 0, "restarted a exit %d signal %d (logs in %s)", code, sig, dir);
    for (int i = 1; i < NODES; i++) {
        code = wait_exit(pid[i], &sig);
        CHECK_MSG(code == 0, "node %s exit %d signal %d (logs in %s)", s_ids[i], code, sig, dir);
    }
    char alog[600]; /* it did not wait out its send_deadline for b, gone: no "before the deadline" failure */
    snprintf(alog, sizeof alog, "%s/a/node.log", dir);
    size_t alen = 0;
    char *atext = slurp(alog, &alen);
    CHECK(atext != NULL);
    if (atext) {
        atext[alen] = '\0';
        CHECK_MSG(!strstr(atext, "before the deadline"), "restarted a waited out its send_deadline (%s)",
                  alog);
        free(atext);
    }
    json_t *r = result(dir, "a");
    const char *state = r ? sent_field(r, "state") : NULL;
    CHECK_MSG(state && (strcmp(state, "delivered") == 0 || strcmp(state, "acked") == 0),
              "a's hand-off state %s", state ? state : "(none)");
    if (state && strcmp(state, "delivered") == 0)
        CHECK(strstr(sent_field(r, "reason") ?: "", "b stored it") != NULL);
    json_decref(r);
    char ref[400];
    snprintf(ref, sizeof ref, "%s/reference", s_tmp);
    json_t *q = result(ref, "c");
    r = result(dir, "c");
    CHECK(r && q &&
          json_real_value(json_object_get(r, "accuracy_global")) ==
              json_real_value(json_object_get(q, "accuracy_global")));
    json_decref(r);
    json_decref(q);
}

static void test_restart_after_store_inbox(void)
{
    restart_after_store(1);
}
static void test_restart_after_store_on_ack(void)
{
    restart_after_store(0);
}

/* b's 3 s deadline passes without a's bundle and b goes on alone (on_missing = proceed); a's
 * bundle arrives while b is still up (PFT_TEST_BUSY keeps b busy before its head, serving the transport,
 * until a has ended: a condition, not a time, so a slow start of a on a loaded machine changes nothing). b
 * must refuse it with a reason (not acknowledge and ignore it): a reports the hand-off "rejected" and exits
 * 7, b lists a in `missing`, not in `received`, counts the refusal, and running b's command again gives the
 * same result. */
static void test_late_bundle_refused(void)
{
    char dir[400], cmd[1200], topo[500], log[600], busy[700], release[500];
    snprintf(dir, sizeof dir, "%s/late", s_tmp);
    snprintf(release, sizeof release, "%s/late-release-b", s_tmp);
    snprintf(busy, sizeof busy, "b:%d:until=%s", HANG_MS, release);
    snprintf(topo, sizeof topo, "%s/late.dot", s_tmp);
    FILE *f = fopen(topo, "w");
    fprintf(
        f,
        "digraph late {\n  dataset = \"%s\"; partition = iid; samples = 60; k = 2; cov = diag; seed = 3;\n"
        "  max_iter = 30; head_draws = 2; em_draws = 2; deadline = 3; send_deadline = 60; min_rows = 1;\n"
        "  a -> b;\n}\n",
        EXAMPLE_DATA);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only --quiet > /dev/null",
             PFT_BINARY_DIR, topo, dir);
    CHECK(sh(cmd) == 0);
    setenv("PFT_TEST_BUSY", busy, 1);
    pid_t b = start_node(dir, "b", NULL);
    unsetenv("PFT_TEST_BUSY");
    snprintf(log, sizeof log, "%s/b/node.log", dir);
    snprintf(cmd, sizeof cmd, "grep -q 'going on without' '%s'", log);
    for (double end = now_s() + HANG_MS / 1000.0; now_s() < end && system(cmd) != 0;)
        usleep(20000);
    CHECK_MSG(system(cmd) == 0, "b never went on without a (%s): a's bundle would not be late", log);
    pid_t a = start_node(dir, "a", NULL);
    int sig = 0, code = wait_exit(a, &sig);
    CHECK_MSG(code == 7, "a exit %d signal %d, not 7 (its hand-off refused)", code, sig);
    json_t *r = result(dir, "a");
    const char *state = r ? sent_field(r, "state") : NULL;
    CHECK_MSG(state && strcmp(state, "rejected") == 0, "a's hand-off state %s", state ? state : "(none)");
    CHECK(r && strstr(sent_field(r, "reason") ?: "", "after the deadline") != NULL);
    json_decref(r);
    touch(release); /* a has ended: b's busy phase ends */
    code = wait_exit(b, &sig);
    CHECK_MSG(code == 16, "b exit %d signal %d, not 16 (it went on without a: degraded)", code, sig);
    double acc[2] = {-1, -2};
    for (int run = 0; run < 2; run++) {
        r = result(dir, "b");
        CHECK(r != NULL);
        if (!r)
            break;
        json_t *miss = json_object_get(r, "missing");
        CHECK_MSG(json_array_size(miss) == 1 &&
                      strcmp(json_string_value(json_array_get(miss, 0)) ?: "", "a") == 0,
                  "run %d: b's missing does not list a alone", run);
        CHECK_MSG(json_array_size(json_object_get(r, "received")) == 0, "run %d: b lists a received bundle",
                  run);
        CHECK(json_integer_value(json_object_get(r, "n_synthetic")) == 0);
        CHECK(json_integer_value(json_object_get(r, "rejected")) >= 1);
        /* b's first refusal, a connection from another process to b's port refused at its handshake apart
         * (pft_e2e_is_stray: b may have refused some before a's bundle came) */
        const char *why = pft_e2e_first_refusal(json_object_get(r, "refusals"));
        CHECK_MSG(why && strstr(why, "after the deadline"), "run %d: b's refusal: %s", run,
                  why ? why : "none");
        acc[run] = json_real_value(json_object_get(r, "accuracy_global"));
        json_decref(r);
        if (run == 0) { /* the same command again, a gone: the same result */
            b = start_node(dir, "b", NULL);
            code = wait_exit(b, &sig);
            CHECK_MSG(code == 16, "b (again) exit %d signal %d, not 16 (degraded)", code, sig);
        }
    }
    CHECK_MSG(acc[0] == acc[1], "b's accuracy %.6f, re-run %.6f", acc[0], acc[1]);
}

/* Time (seconds since the epoch, UTC) of the first line of log containing what ("2026-11-24T03:26:21.060
 * ..."); -1 if none. */
static double log_time(const char *log, const char *what)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    double t = -1;
    while (f && t < 0 && fgets(line, sizeof line, f)) {
        struct tm tm = {0};
        double sec;
        if (strstr(line, what) && sscanf(line, "%d-%d-%dT%d:%d:%lf", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                                         &tm.tm_hour, &tm.tm_min, &sec) == 6) {
            tm.tm_year -= 1900; /* the full date: an interval across midnight stays right */
            tm.tm_mon -= 1;
            t = (double)timegm(&tm) + sec;
        }
    }
    if (f)
        fclose(f);
    return t;
}

/* A finished node stays reachable until its predecessor has read its ACK (CONFIRM), however long the
 * predecessor cannot read it (busy computing, stopped: here b, not reading its socket after it sent to c,
 * PFT_TEST_BUSY ...:deaf), within its bound (the longest inbound send_deadline), and then leaves without
 * waiting any longer: b is released only once c says it is staying for that confirmation (a condition, not
 * a time a loaded machine may outlast), and c must leave after the release, with every ACK confirmed. (Until
 * the CONFIRM, a node stayed a fixed 5 s after its last ACK, resend_grace, for the same predecessor: in a
 * 256-node ring, one of 256 predecessors lost an ACK and failed at send_deadline once its successor left.) */
static void test_ack_while_deaf(void)
{
    char dir[512], topo[600], cmd[2048], log[600], busy[700], release[500];
    snprintf(dir, sizeof dir, "%s/deaf", s_tmp);
    snprintf(release, sizeof release, "%s/deaf-release-b", s_tmp);
    snprintf(busy, sizeof busy, "b:%d:deaf:until=%s", HANG_MS, release);
    snprintf(topo, sizeof topo, "%s/deaf.dot", s_tmp);
    write_topo(topo);
    snprintf(cmd, sizeof cmd, "%s/node/pftnet launch %s --out %s --prepare-only > /dev/null", PFT_BINARY_DIR,
             topo, dir);
    CHECK(sh(cmd) == 0);
    setenv("PFT_TEST_BUSY", busy, 1);
    pid_t pid[NODES];
    for (int i = NODES - 1; i >= 0; i--)
        pid[i] = start_node(dir, s_ids[i], NULL);
    unsetenv("PFT_TEST_BUSY");
    snprintf(log, sizeof log, "%s/c/node.log", dir);
    /* c has stored b's bundle, trained, and stays for b's confirmation (not for a time) */
    snprintf(cmd, sizeof cmd, "grep -q 'staying reachable until the predecessors confirm' '%s'", log);
    for (double end = now_s() + HANG_MS / 1000.0; now_s() < end && system(cmd) != 0;)
        usleep(20000);
    CHECK_MSG(system(cmd) == 0, "c never waited for b to confirm its ACK (%s)", log);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt); /* the clock of the log's stamps */
    double released = (double)rt.tv_sec + rt.tv_nsec / 1e9;
    touch(release); /* b reads its socket again: the ACK, then it confirms */
    int sig, code[NODES];
    for (int i = 0; i < NODES; i++)
        code[i] = wait_exit(pid[i], &sig);
    CHECK_MSG(code[0] == 0 && code[1] == 0 && code[2] == 0, "exits a=%d b=%d c=%d (logs in %s)", code[0],
              code[1], code[2], dir);
    double done = log_time(log, "done in");
    CHECK_MSG(done > 0 && done >= released - 0.01, "c left at %.1f, before b was released at %.1f", done,
              released);
    snprintf(cmd, sizeof cmd, "grep -q 'not confirmed read by their sender' '%s'", log);
    CHECK_MSG(system(cmd) != 0, "c left with an ACK unconfirmed (%s)", log);
    printf("  c stayed until b, deaf until then, confirmed its ACK (%.1f s after the release); b exited %d\n",
           done - released, code[1]);
}

static void test_before_receive(void)
{
    crash_run("before-receive", 1);
}
static void test_mid_em(void)
{
    crash_run("mid-em", 1);
}
static void test_retry_pending(void)
{
    crash_run("retry-pending", 0);
}
static void test_after_forward(void)
{
    crash_run("after-forward", 1);
}

int main(void)
{
#ifndef PFT_TEST_HOOKS
    printf("skipped: built without PFT_TEST_HOOKS (bash tests/run builds with them)\n");
    return PFT_TEST_SKIP;
#endif
    if (access(EXAMPLE_DATA "/train_x.npy", R_OK) != 0) {
        printf("skipped: %s not found\n", EXAMPLE_DATA);
        return PFT_TEST_SKIP;
    }
    snprintf(s_tmp, sizeof s_tmp, "/tmp/pft_crash_XXXXXX");
    if (!mkdtemp(s_tmp))
        return 1;
    char topo[400], cmd[1200];
    snprintf(topo, sizeof topo, "%s/crash.dot", s_tmp);
    write_topo(topo);
    snprintf(cmd, sizeof cmd,
             "%s/node/pftnet launch %s --out %s/reference --quiet --no-baselines > /dev/null", PFT_BINARY_DIR,
             topo, s_tmp);
    if (sh(cmd) != 0) {
        fprintf(stderr, "reference run failed\n");
        return 1;
    }
    RUN(test_store_fail);
    RUN(test_late_bundle_refused);
    RUN(test_ack_while_deaf);
    RUN(test_restart_after_store_inbox);
    RUN(test_restart_after_store_on_ack);
    RUN(test_before_receive);
    RUN(test_mid_em);
    RUN(test_retry_pending);
    RUN(test_after_forward);
    return pft_e2e_finish(s_tmp, pft_test_done());
}
