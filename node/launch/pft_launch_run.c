/* pft_launch_run: steps 2 and 3 of a launch: start one pftnode process per node (through the engine: local
 * processes or a Slurm step), then watch them (progress, failures, the timeout, SIGINT/SIGTERM) until every
 * one has exited. */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_fsio.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t s_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    s_interrupted = 1;
}

void pft_launch__node_argv(const pft_launch_t *self, const pft_launch_child_t *c, const char **argv,
                           char *fd_text, size_t fd_cap)
{
    int a = 0;
    argv[a++] = self->node_bin;
    argv[a++] = "--topology";
    argv[a++] = self->resolved;
    argv[a++] = "--id";
    argv[a++] = c->id;
    argv[a++] = "--out";
    argv[a++] = c->dir;
    argv[a++] = "--log-level";
    argv[a++] = self->o.log_level;
    argv[a++] = "--node-file"; /* its data files, secret key and evaluation set: only it reads them */
    argv[a++] = c->node_file;
    if (self->o.insecure)
        argv[a++] = "--insecure";
    if (self->slots_dir[0]) {
        argv[a++] = "--compute-slots";
        argv[a++] = self->slots_dir;
    }
    if (c->listen_fd >= 0 && fcntl(c->listen_fd, F_SETFD, 0) == 0) { /* this one survives exec */
        snprintf(fd_text, fd_cap, "%d", c->listen_fd);
        argv[a++] = "--listen-fd";
        argv[a++] = fd_text;
    }
    argv[a] = NULL;
}

int pft_launch_start(pft_launch_t *self)
{
    int rc = self->engine->reserve ? self->engine->reserve(self) : 0;
    if (rc)
        return rc;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &self->old_int);
    sigaction(SIGTERM, &sa, &self->old_term);
    self->signals_caught = 1;
    return self->engine->start(self);
}

void pft_launch__read_status(pft_launch_child_t *c)
{
    char *p = pft_fsio_join(c->dir, "status");
    uint8_t *buf = NULL;
    size_t len = 0;
    if (p && pft_fsio_read(p, 4096, &buf, &len) == 0) {
        char *nl = strchr((char *)buf, '\n');
        if (nl)
            *nl = '\0';
        char *sp = strchr((char *)buf, ' ');
        if (sp)
            *sp = '\0'; /* the state word; the detail is for humans reading the file */
        snprintf(c->state, sizeof c->state, "%s", (char *)buf);
    }
    pft_free(buf);
    pft_free(p);
}

/* The message of the last ERROR line of dir/node.log into buf ("" if none). */
static void last_error(const char *dir, char *buf, size_t cap)
{
    buf[0] = '\0';
    char *path = pft_fsio_join(dir, "node.log");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[4096]; /* pft_log writes lines of up to 2048 bytes */
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strchr(line, ' '); /* "<timestamp> <LEVEL> [id] message" */
        if (!m || strncmp(m, " ERROR ", 7) != 0)
            continue;
        m += 7;
        if (*m == '[' && strchr(m, ']')) /* the node's [id] tag */
            m = strchr(m, ']') + 1;
        m += strspn(m, " ");
        snprintf(buf, cap, "%.*s", (int)strcspn(m, "\n"), m);
    }
    if (f)
        fclose(f);
    pft_free(path);
}

/* What the watch loop tracks between polls. */
typedef struct {
    size_t left;          /* started nodes still running */
    char last[4096];      /* the last progress line shown */
    double shown_at;      /* when it was shown */
    int tty;              /* stderr is a terminal: one line updated in place */
    int killed;           /* SIGTERM sent to every running node */
    double kill_at;       /* then SIGKILL to those still running at this time */
    const char *stop_why; /* why the run is being stopped: "interrupted", "timeout" or why; NULL: it is not */
    char why[PATH_MAX + 64]; /* a failed node, as the cause */
    double first_exit;       /* seconds from the start to the first node's exit (0: none yet) */
} watch_t;

/* Records that c exited with wait status st. A failed node leaves its successors waiting until their
 * deadlines: unless keep_going, it becomes the cause to stop. */
static void on_exit_status(const pft_launch_t *self, watch_t *w, pft_launch_child_t *c, int st, long rss_kb)
{
    c->max_rss_kb = rss_kb;
    c->exited = 1;
    c->status = st;
    w->left--;
    if (w->first_exit <= 0)
        w->first_exit = pft_fsio_now() - self->t0;
    if (self->engine->outside_stop && !c->stopped && WIFEXITED(st) &&
        WEXITSTATUS(st) == self->o.exit_interrupted) {
        c->stopped = 2; /* SIGTERM from the engine itself (Slurm: the job is ending for all its steps) */
        if (!w->stop_why)
            w->stop_why = self->engine->outside_stop;
        return;
    }
    int done = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == self->o.exit_degraded);
    if (!done && !c->lost && !self->o.keep_going && !w->stop_why && w->left > 0) {
        snprintf(w->why, sizeof w->why, "node %s failed (see %s/node.log)", c->id, c->dir);
        w->stop_why = w->why;
    }
}

/* Collects the nodes that exited since the last poll (the engine's next_exit) and reads every running node's
 * status. */
static void reap(pft_launch_t *self, watch_t *w)
{
    size_t i;
    int st;
    long rss;
    while (self->engine->next_exit(self, &i, &st, &rss))
        on_exit_status(self, w, &self->ch[i], st, rss);
    for (i = 0; i < self->nn; i++) {
        pft_launch_child_t *c = &self->ch[i];
        if (!c->exited && !c->absent)
            pft_launch__read_status(c);
    }
}

#define PROGRESS_NODES 8    /* up to this many nodes: one line of every node's state */
#define PROGRESS_PERIOD 5.0 /* not a terminal: a summary line at most this often (seconds) */
#define PROGRESS_TTY_PERIOD 0.2

/* A big topology's progress in one line: a bar, counts per state, elapsed and an estimate, who is working. */
static void summary_line(const pft_launch_t *self, const watch_t *w, char *line, size_t cap, double el)
{
    static const char *const idle[] = {"started", "starting", "waiting", "done", "absent", NULL};
    struct {
        char state[128];
        size_t n;
    } tally[16];
    size_t nt = 0, done = 0, total = 0;
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        const char *s = c->exited && !c->absent ? "exited" : c->state;
        total += !c->absent;
        done += c->exited && !c->absent;
        size_t k = 0;
        while (k < nt && strcmp(tally[k].state, s) != 0)
            k++;
        if (k == nt && nt < 16) {
            snprintf(tally[nt].state, sizeof tally[nt].state, "%s", s);
            tally[nt++].n = 0;
        }
        if (k < nt)
            tally[k].n++;
    }
    char bar[21];
    size_t fill = total ? 20 * done / total : 20;
    for (size_t i = 0; i < 20; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    int n = snprintf(line, cap, "[%s] %zu/%zu exited  %.0fs", bar, done, total, el);
    /* the estimate: nodes exit late in a chain or ring (each waits for its knowledge), so the rate counts
     * from the first exit, once a few nodes are done */
    if (done >= 3 && done * 20 >= total && done < total && el > w->first_exit)
        n += snprintf(line + n, cap - (size_t)n, " (~%.0fs left)",
                      (el - w->first_exit) / (double)(done - 1) * (double)(total - done));
    for (size_t k = 0; k < nt && n < (int)cap - 40; k++)
        if (strcmp(tally[k].state, "exited") != 0)
            n += snprintf(line + n, cap - (size_t)n, "  %s %zu", tally[k].state, tally[k].n);
    int shown = 0, busy = 0;
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        int working = !c->exited;
        for (int k = 0; working && idle[k]; k++)
            working = strcmp(c->state, idle[k]) != 0;
        if (!working)
            continue;
        busy++;
        if (shown < 4 && n < (int)cap - 80)
            n += snprintf(line + n, cap - (size_t)n, "%s%s:%s", shown ? " " : "  working: ", c->id, c->state),
                shown++;
    }
    if (busy > shown && n < (int)cap - 20)
        snprintf(line + n, cap - (size_t)n, " +%d more", busy - shown);
}

/* Progress on stderr (unless quiet). Up to PROGRESS_NODES nodes: every node's state, a line when it changes.
 * More: one summary line, updated in place on a terminal, else printed at most every PROGRESS_PERIOD seconds.
 * final: the run is over (a last line, and the terminal's line is ended). */
static void show_progress(const pft_launch_t *self, watch_t *w, int final)
{
    if (self->o.quiet)
        return;
    double now = pft_fsio_now(), el = now - self->t0;
    char line[4096];
    if (self->nn <= PROGRESS_NODES) {
        int n = 0;
        for (size_t i = 0; i < self->nn && n < (int)sizeof line - 200; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s:%s", i ? "  " : "", self->ch[i].id,
                          self->ch[i].state);
        if (strcmp(line, w->last) != 0) {
            fprintf(stderr, "[%6.1fs] %s\n", el, line);
            snprintf(w->last, sizeof w->last, "%s", line);
        }
        return;
    }
    double period = w->tty ? PROGRESS_TTY_PERIOD : PROGRESS_PERIOD;
    if (!final && now - w->shown_at < period)
        return;
    summary_line(self, w, line, sizeof line, el);
    if (w->tty)
        fprintf(stderr, "\r\033[K%s%s", line, final ? "\n" : "");
    else if (final || strcmp(line, w->last) != 0)
        fprintf(stderr, "[%6.1fs] %s\n", el, line);
    snprintf(w->last, sizeof w->last, "%s", line);
    w->shown_at = now;
}

/* Sends sig to every started node still running (through the engine), marking it stopped by the launcher. */
static void signal_running(pft_launch_t *self, int sig)
{
    self->engine->signal(self, sig);
    for (size_t i = 0; i < self->nn; i++) {
        pft_launch_child_t *c = &self->ch[i];
        if (!c->exited && !c->absent)
            c->stopped = 1;
    }
}

/* At el seconds into the run: on a signal, the timeout or a failed node, SIGTERM to every running node, and
 * SIGKILL to those still running 10 s later. */
static void enforce_stop(pft_launch_t *self, watch_t *w, double el)
{
    if (!w->stop_why && s_interrupted)
        w->stop_why = "interrupted";
    if (!w->stop_why && self->o.timeout > 0 && el > self->o.timeout)
        w->stop_why = "timeout";
    if (!w->killed && w->stop_why) {
        fprintf(stderr, "%s: stopping every node%s\n", w->stop_why,
                w->stop_why == w->why ? " (--keep-going lets them run on to their deadlines)" : "");
        signal_running(self, SIGTERM);
        w->killed = 1;
        w->kill_at = el + 10;
    } else if (w->killed && el > w->kill_at) {
        signal_running(self, SIGKILL);
    }
}

/* Names how a started node that did not exit 0 ended; returns 1 if the launcher stopped it (signalled by the
 * launcher and ended by that signal, not by a failure of its own). */
static int report_failure(const pft_launch_t *self, const pft_launch_child_t *c)
{
    int st = c->status;
    int stopped =
        c->stopped && (c->lost || (WIFEXITED(st) ? WEXITSTATUS(st) == self->o.exit_interrupted
                                                 : WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGKILL));
    if (stopped) {
        fprintf(stderr, "node %s was stopped by %s (see %s/node.log)\n", c->id,
                c->stopped == 2 ? "Slurm" : "the launcher", c->dir);
        return 1;
    }
    char err[512];
    last_error(c->dir, err, sizeof err);
    if (c->lost)
        fprintf(stderr,
                "node %s: its Slurm task on %s ended without reporting how pftnode exited%s%s (see "
                "%s/node.log and %s/slurm/srun.log)\n",
                c->id, c->host, err[0] ? "; last error: " : "", err, c->dir, self->o.out_dir);
    else if (WIFEXITED(st))
        fprintf(stderr, "node %s failed with exit code %d%s%s (see %s/node.log)\n", c->id, WEXITSTATUS(st),
                err[0] ? ": " : "", err, c->dir);
    else
        fprintf(stderr, "node %s was killed by signal %d%s%s (see %s/node.log)\n", c->id, WTERMSIG(st),
                err[0] ? ": " : "", err, c->dir);
    return 0;
}

void pft_launch_watch(pft_launch_t *self)
{
    watch_t w = {.tty = isatty(2)};
    for (size_t i = 0; i < self->nn; i++)
        w.left += !self->ch[i].absent;
    while (w.left > 0) {
        reap(self, &w);
        show_progress(self, &w, w.left == 0);
        enforce_stop(self, &w, pft_fsio_now() - self->t0);
        if (w.left)
            usleep(100000);
    }
    self->wall = pft_fsio_now() - self->t0;
    if (self->engine->end)
        self->engine->end(self);
    sigaction(SIGINT, &self->old_int, NULL);
    sigaction(SIGTERM, &self->old_term, NULL);
    self->signals_caught = 0;
    self->stop_cause = w.stop_why && w.stop_why != w.why ? w.stop_why : NULL;
    self->failed = self->n_stopped = self->degraded = 0;
    for (size_t i = 0; i < self->nn; i++) {
        const pft_launch_child_t *c = &self->ch[i];
        if (c->absent || (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0))
            continue;
        if (!c->lost && WIFEXITED(c->status) && WEXITSTATUS(c->status) == self->o.exit_degraded) {
            self->degraded++; /* it did its part; pft_launch_collect names what it went on without */
            continue;
        }
        self->failed++;
        self->n_stopped += report_failure(self, c);
    }
}
