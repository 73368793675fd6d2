/* pft_launch_slurm: the Slurm engine of `pftnet launch --engine slurm`: checks the allocation, places the
 * nodes on its tasks through a first short srun step (each task reports its host and an address, and writes a
 * marker file that proves DIR is shared; each pftnode binds a free port of that address itself and reports it
 * in DIR/<id>/endpoint, where its predecessors read it), then starts every peer with one srun step and reads,
 * on srun's stdout, how each one ended. What runs on the tasks is pft_launch_slurm_task.c. */
#define _GNU_SOURCE /* pipe2 */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_WAIT_S 120.0 /* every task of the probe step reports within this, or the launch is refused */
#define REAP_WAIT_S 30.0   /* a step whose tasks were told to end is killed after this */
#define LINE_CAP 4096      /* longest line read from a task */

/* One task of the peers' step, as the probe step found it. */
typedef struct {
    char host[256]; /* its host name (gethostname on the task) */
    char addr[64];  /* the IPv4 address its nodes listen on */
    int reported;   /* its probe line arrived */
    char err[512];  /* why it failed the probe ("": it did not) */
    long node;      /* the started node it runs (-1: none yet) */
} task_t;

typedef struct {
    char job[32];           /* SLURM_JOB_ID */
    long n_alloc;           /* tasks in the allocation */
    char hosts[1024];       /* the allocation's hosts (`scontrol show hostnames`), space-separated */
    char cpus[48];          /* "--cpus-per-task=N" from SLURM_CPUS_PER_TASK, or "" */
    char exe[PATH_MAX];     /* this program, which every task runs */
    char *dir;              /* DIR/slurm */
    size_t m;               /* tasks used: one per started node */
    task_t *task;           /* m of them */
    char step[64];          /* "<job>.<step>" of the peers' step once a task reported it; "": not yet */
    pid_t srun;             /* the running srun (-1: none) */
    int out_fd;             /* its stdout, read line by line (-1: closed) */
    char buf[LINE_CAP + 1]; /* what was read of the next line */
    size_t blen;            /* its length */
    int killed;             /* the step was ended (srun killed) */
    size_t lost_next;       /* after srun ended: where the search for nodes that never reported goes on */
} pft_launch_slurm_t;

/* 1 if name is an executable file in a folder of $PATH. */
static int on_path(const char *name)
{
    char buf[PATH_MAX];
    for (const char *p = getenv("PATH"); p && *p;) {
        size_t len = strcspn(p, ":");
        if (len && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, name) < sizeof buf &&
            access(buf, X_OK) == 0)
            return 1;
        p += len + (p[len] == ':');
    }
    return 0;
}

/* The tasks of this allocation: SLURM_NTASKS, else the sum of SLURM_TASKS_PER_NODE ("2(x3),1" is 7);
 * 0 if unknown. */
static long alloc_tasks(void)
{
    const char *v = getenv("SLURM_NTASKS");
    char *end;
    if (v && *v) {
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n > 0)
            return n;
    }
    long sum = 0;
    for (const char *p = getenv("SLURM_TASKS_PER_NODE"); p && *p; p = end) {
        long n = strtol(p, &end, 10), times = 1;
        if (end == p || n < 0 || n > 1000000)
            return 0;
        if (strncmp(end, "(x", 2) == 0) {
            times = strtol(end + 2, &end, 10);
            if (*end++ != ')' || times < 1 || times > 1000000)
                return 0;
        }
        sum += n * times;
        if (*end == ',')
            end++;
        else if (*end)
            return 0;
    }
    return sum;
}

/* Runs argv in its own process group with stdin from in_fd (/dev/null if < 0), stdout into a new non-blocking
 * pipe (*out_fd) and stderr appended to errlog. Returns the pid, or -1 with errno set. */
static pid_t spawn(char *const *argv, int in_fd, int *out_fd, const char *errlog)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* a Ctrl-C reaches the launcher only, which stops the step its own way */
        int in = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
        int err = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0)
            dup2(in, 0);
        dup2(p[1], 1);
        if (err >= 0)
            dup2(err, 2);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int err = errno;
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        errno = err;
        return -1;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *out_fd = p[0];
    return pid;
}

/* The next whole line of srun's stdout into line (without its newline): 1; 0 when none has arrived yet; -1
 * at the end of the stream (the fd is closed). A line longer than LINE_CAP is cut. */
static int read_line(pft_launch_slurm_t *s, char *line, size_t cap)
{
    for (;;) {
        char *nl = memchr(s->buf, '\n', s->blen);
        if (nl || s->blen == LINE_CAP || (s->out_fd < 0 && s->blen)) {
            size_t len = nl ? (size_t)(nl - s->buf) : s->blen;
            snprintf(line, cap, "%.*s", (int)len, s->buf);
            size_t used = nl ? len + 1 : len;
            memmove(s->buf, s->buf + used, s->blen - used);
            s->blen -= used;
            return 1;
        }
        if (s->out_fd < 0)
            return -1;
        ssize_t n = read(s->out_fd, s->buf + s->blen, LINE_CAP - s->blen);
        if (n > 0) {
            s->blen += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        close(s->out_fd);
        s->out_fd = -1;
    }
}

/* Waits up to secs for srun to exit, then kills it; its wait status, or -1. */
static int reap_srun(pft_launch_slurm_t *s, double secs)
{
    int st = -1;
    double end = pft_fsio_now() + secs;
    while (s->srun > 0 && waitpid(s->srun, &st, WNOHANG) == 0) {
        if (pft_fsio_now() > end && !s->killed)
            kill(s->srun, SIGKILL), s->killed = 1;
        usleep(50000);
    }
    s->srun = -1;
    return st;
}

/* Runs argv to its end, its stdout into out (cut to cap, NUL-terminated), its stderr appended to errlog.
 * Returns its exit code, or -1. */
static int capture(char *const *argv, const char *errlog, char *out, size_t cap)
{
    pft_launch_slurm_t tmp = {.out_fd = -1, .srun = -1};
    size_t len = 0;
    out[0] = '\0';
    tmp.srun = spawn(argv, -1, &tmp.out_fd, errlog);
    if (tmp.srun < 0)
        return -1;
    char line[LINE_CAP];
    int r;
    while ((r = read_line(&tmp, line, sizeof line)) >= 0) {
        if (r == 0) {
            poll(&(struct pollfd){.fd = tmp.out_fd, .events = POLLIN}, 1, 200);
            continue;
        }
        if (len + strlen(line) + 2 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", line);
    }
    int st = reap_srun(&tmp, REAP_WAIT_S);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The last lines of file (up to cap bytes, newlines as "; "), for an error message; "" if unreadable. */
static void file_tail(const char *path, char *buf, size_t cap)
{
    uint8_t *text = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (pft_fsio_read(path, 1 << 20, &text, &len) != 0)
        return;
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    size_t from = len > cap - 1 ? len - (cap - 1) : 0;
    size_t n = 0;
    for (size_t i = from; i < len && n + 3 < cap; i++)
        if (text[i] == '\n')
            n += (size_t)snprintf(buf + n, cap - n, "; ");
        else
            buf[n++] = (char)text[i];
    buf[n] = '\0';
    pft_free(text);
}

/* Refuses an allocation with fewer tasks than the m nodes to start. */
static int check_tasks(const pft_launch_t *self, size_t m)
{
    const pft_launch_slurm_t *s = self->engine_data;
    if (m == 0)
        return pft_err(PFT_EINVAL, "--engine slurm: every node is --absent; there is nothing to start");
    if ((long)m > s->n_alloc)
        return pft_err(
            PFT_EINVAL,
            "--engine slurm: job %s has %ld task%s and %s needs one per node it starts, %zu: ask for "
            "more (salloc -n %zu, sbatch -n %zu)",
            s->job, s->n_alloc, s->n_alloc == 1 ? "" : "s", self->o.topo_path, m, m, m);
    return 0;
}

/* Checks that the launch runs inside an allocation with srun at hand and makes self->engine_data; PFT_EINVAL
 * with what to do otherwise. */
static int slurm_new(pft_launch_t *self)
{
    int rc;
    if (self->o.compute_slots > 0) /* its lock files bound one machine: Slurm's own allocation does that */
        return pft_err(PFT_EINVAL, "--compute-slots is for the local engine (one machine); under --engine "
                                   "slurm each task has its own cores");
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job)
        return pft_err(
            PFT_EINVAL,
            "--engine slurm runs inside a Slurm allocation and there is none here (no SLURM_JOB_ID): "
            "start it as `salloc -n N pftnet launch ... --engine slurm`, or from a batch script "
            "(examples/slurm/ring.sbatch), with N at least the number of nodes");
    const char *missing = !on_path("srun") ? "srun" : !on_path("scancel") ? "scancel" : NULL;
    if (missing)
        return pft_err(PFT_EINVAL, "--engine slurm: Slurm's %s is not on PATH", missing);
    pft_launch_slurm_t *s = pft_calloc(1, sizeof *s);
    if (!s)
        return pft_err(PFT_ENOMEM, "out of memory");
    self->engine_data = s;
    s->srun = -1;
    s->out_fd = -1;
    snprintf(s->job, sizeof s->job, "%s", job);
    if ((s->n_alloc = alloc_tasks()) <= 0)
        return pft_err(PFT_EINVAL,
                       "--engine slurm: cannot tell how many tasks job %s has (SLURM_NTASKS and "
                       "SLURM_TASKS_PER_NODE unset or malformed); ask for tasks: salloc -n N / sbatch -n N",
                       s->job);
    size_t m = self->nn; /* nodes to start: --absent's names are checked later (make_children) */
    for (const char *p = self->o.absent; p && *p && m > 0; p += strcspn(p, ","), p += *p == ',')
        m -= strcspn(p, ",") > 0;
    if ((rc = check_tasks(self, m)))
        return rc;
    const char *cpt = getenv("SLURM_CPUS_PER_TASK");
    if (cpt && strspn(cpt, "0123456789") == strlen(cpt) && *cpt)
        snprintf(s->cpus, sizeof s->cpus, "--cpus-per-task=%s", cpt); /* srun 22.05 does not inherit it */
    ssize_t n = readlink("/proc/self/exe", s->exe, sizeof s->exe - 1);
    if (n <= 0)
        return pft_err(PFT_EIO, "--engine slurm: cannot find this program (/proc/self/exe): %s",
                       strerror(errno));
    s->exe[n] = '\0';
    return 0;
}

/* Frees the engine's state, killing its srun step if one still runs; nulls self->engine_data. */
static void slurm_destroy(pft_launch_t *self)
{
    pft_launch_slurm_t *s = self->engine_data;
    if (!s)
        return;
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (s->srun > 0) {
        kill(s->srun, SIGKILL);
        waitpid(s->srun, NULL, 0);
    }
    pft_free(s->task);
    pft_free(s->dir);
    pft_free(s);
    self->engine_data = NULL;
}

/* The allocation's hosts into s->hosts, as `scontrol show hostnames` expands SLURM_JOB_NODELIST (the list
 * itself if scontrol cannot), for messages. */
static void read_hosts(pft_launch_slurm_t *s, const char *errlog)
{
    const char *list = getenv("SLURM_JOB_NODELIST");
    if (!list)
        list = getenv("SLURM_NODELIST");
    char *argv[] = {"scontrol", "show", "hostnames", (char *)(list ? list : ""), NULL};
    if (!list || capture(argv, errlog, s->hosts, sizeof s->hosts) != 0 || !s->hosts[0])
        snprintf(s->hosts, sizeof s->hosts, "%s", list ? list : "?");
}

/* Empties folder dir (plain files only): markers left by an earlier probe of the same DIR (--resume). */
static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = pft_fsio_join(dir, e->d_name);
        if (p)
            unlink(p);
        pft_free(p);
    }
    if (d)
        closedir(d);
}

/* One probe line: the task's host and address, or why it failed. Returns 1 if it was new and well
 * formed; anything else from a task is ignored. */
static int parse_probe(pft_launch_slurm_t *s, const char *line)
{
    long t;
    int off = 0;
    char what[8], host[256];
    if (sscanf(line, PFT_SLURM_PROBE_LINE " %ld %7s %255s %n", &t, what, host, &off) != 3 || off == 0 ||
        t < 0 || (size_t)t >= s->m || s->task[t].reported)
        return 0;
    task_t *k = &s->task[t];
    snprintf(k->host, sizeof k->host, "%s", host);
    if (strcmp(what, "ok") != 0) {
        snprintf(k->err, sizeof k->err, "%s", line + off);
        return k->reported = 1;
    }
    if (sscanf(line + off, "%63s", k->addr) != 1)
        return 0;
    return k->reported = 1;
}

/* The probe step's lines, until every task has reported or at time end: how many did. */
static int read_probe(pft_launch_slurm_t *s, double end)
{
    char line[LINE_CAP];
    int got = 0, r = 0;
    while (r >= 0 && (size_t)got < s->m && pft_fsio_now() < end) {
        if ((r = read_line(s, line, sizeof line)) == 1)
            got += parse_probe(s, line);
        else if (r == 0)
            poll(&(struct pollfd){.fd = s->out_fd, .events = POLLIN}, 1, 200);
    }
    return got;
}

/* Ends the probe step: closes its input (in_fd), so that every task exits, drains
 * srun's output and waits for it (killed after REAP_WAIT_S). 1 if it had to be killed. */
static int end_probe(pft_launch_slurm_t *s, int in_fd)
{
    char line[LINE_CAP];
    double end = pft_fsio_now() + REAP_WAIT_S;
    close(in_fd);
    while (s->out_fd >= 0 && pft_fsio_now() < end)
        if (read_line(s, line, sizeof line) == 0)
            poll(&(struct pollfd){.fd = s->out_fd, .events = POLLIN}, 1, 200);
    if (s->out_fd >= 0)
        close(s->out_fd), s->out_fd = -1;
    s->blen = 0;
    reap_srun(s, REAP_WAIT_S);
    int killed = s->killed;
    s->killed = 0;
    return killed;
}

/* Runs the probe step: srun --input=all, so that closing its stdin lets every task go. Reads one line per
 * task. */
static int run_probe(pft_launch_t *self, const char *nonce)
{
    pft_launch_slurm_t *s = self->engine_data;
    char ntasks[32], *log = pft_fsio_join(s->dir, "probe.log");
    snprintf(ntasks, sizeof ntasks, "--ntasks=%zu", s->m);
    char *argv[] = {"srun",
                    ntasks,
                    "--mpi=none",
                    "--input=all",
                    "--kill-on-bad-exit=0",
                    "--job-name=pftnet-probe",
                    s->exe,
                    "launch",
                    "--slurm-probe",
                    s->dir,
                    (char *)nonce,
                    self->node_bin,
                    (char *)(self->o.iface ? self->o.iface : "-"),
                    NULL,
                    NULL};
    if (s->cpus[0]) /* after the options srun reads: move the program's words one place on */
        memmove(argv + 7, argv + 6, 7 * sizeof *argv), argv[6] = s->cpus;
    int in[2];
    if (!log || pipe2(in, O_CLOEXEC) != 0) {
        pft_free(log);
        return pft_err(PFT_EIO, "--engine slurm: cannot make a pipe: %s", strerror(errno));
    }
    s->srun = spawn(argv, in[0], &s->out_fd, log);
    int err = errno, spawned = s->srun > 0;
    close(in[0]);
    int got = spawned ? read_probe(s, pft_fsio_now() + PROBE_WAIT_S) : 0;
    int killed = spawned ? end_probe(s, in[1]) : (close(in[1]), 0);
    char tail[600];
    file_tail(log, tail, sizeof tail);
    pft_free(log);
    if (!spawned)
        return pft_err(PFT_EIO, "--engine slurm: cannot run srun: %s", strerror(err));
    if ((size_t)got < s->m)
        return pft_err(PFT_EINVAL,
                       "--engine slurm: the probe step (srun --ntasks=%zu in job %s) %s with %d of %zu tasks "
                       "reporting (srun: %s). Every task runs this program, %s: it must be at that path on "
                       "every host (a shared filesystem)",
                       s->m, s->job, killed ? "was killed after waiting" : "ended", got, s->m,
                       tail[0] ? tail : "no output", s->exe);
    return 0;
}

/* Appends to text (cap bytes) the failing tasks of host k (from task t on, same host and a reason), their
 * numbers as ranges, and the first one's reason. */
static void add_failure(char *text, size_t cap, const pft_launch_slurm_t *s, size_t t)
{
    const char *host = s->task[t].host;
    size_t count = 0;
    for (size_t u = t; u < s->m; u++)
        count += s->task[u].err[0] && strcmp(s->task[u].host, host) == 0;
    char piece[800];
    size_t n = strlen(text);
    int len =
        snprintf(piece, sizeof piece, "%shost %.63s (task%s", n ? "; " : "", host, count > 1 ? "s" : "");
    for (size_t u = t, sep = 0; u < s->m && len > 0 && len < 300; u++) {
        if (!s->task[u].err[0] || strcmp(s->task[u].host, host) != 0)
            continue;
        size_t last = u; /* a run of failing tasks on this host: u..last */
        while (last + 1 < s->m && s->task[last + 1].err[0] && strcmp(s->task[last + 1].host, host) == 0)
            last++;
        len += snprintf(piece + len, sizeof piece - (size_t)len, "%s %zu", sep++ ? "," : "", u);
        if (last > u)
            len += snprintf(piece + len, sizeof piece - (size_t)len, "-%zu", last);
        u = last;
    }
    if (len > 0 && len < (int)sizeof piece)
        len += snprintf(piece + len, sizeof piece - (size_t)len, "): %.400s", s->task[t].err);
    if (len > 0 && n + (size_t)len < cap)
        memcpy(text + n, piece, (size_t)len + 1);
}

/* After the probe: each marker a task wrote must be here, as this launcher sees DIR, with this probe's
 * nonce; every task that failed is listed, per host, with the first reason. */
static int check_probe(pft_launch_t *self, const char *nonce)
{
    pft_launch_slurm_t *s = self->engine_data;
    char text[1500] = "", host[256] = "?";
    size_t bad = 0;
    gethostname(host, sizeof host - 1);
    for (size_t t = 0; t < s->m; t++) {
        task_t *k = &s->task[t];
        char name[32], *path = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        snprintf(name, sizeof name, "probe/%zu", t);
        if (!k->err[0] &&
            (!(path = pft_fsio_join(s->dir, name)) || pft_fsio_read(path, 4096, &buf, &len) != 0 ||
             strncmp((char *)buf, nonce, strlen(nonce)) != 0))
            snprintf(k->err, sizeof k->err, "it wrote %.300s, which the launcher (on %.63s) does not see",
                     path ? path : name, host);
        bad += k->err[0] != 0;
        pft_free(buf);
        pft_free(path);
    }
    for (size_t t = 0; t < s->m; t++) {
        size_t u = 0;
        while (u < t && !(s->task[u].err[0] && strcmp(s->task[u].host, s->task[t].host) == 0))
            u++;
        if (s->task[t].err[0] && u == t) /* the first failing task of its host */
            add_failure(text, sizeof text, s, t);
    }
    if (bad)
        return pft_err(
            PFT_EINVAL,
            "--engine slurm: %zu of %zu tasks of job %s cannot take part: %s. --out must be a folder "
            "that the launcher and every host of the allocation see at the same path (a shared "
            "filesystem), and pftnode must be there too",
            bad, s->m, s->job, text);
    return 0;
}

/* The number of distinct hosts among the tasks. */
static size_t n_hosts(const pft_launch_slurm_t *s)
{
    size_t n = 0;
    for (size_t t = 0; t < s->m; t++) {
        size_t u = 0;
        while (u < t && strcmp(s->task[u].host, s->task[t].host) != 0)
            u++;
        n += u == t;
    }
    return n;
}

/* Peers on one host cannot reach a loopback address of another. */
static int check_reachable(const pft_launch_slurm_t *s)
{
    if (n_hosts(s) < 2)
        return 0;
    for (size_t t = 0; t < s->m; t++)
        if (strncmp(s->task[t].addr, "127.", 4) == 0)
            return pft_err(
                PFT_EINVAL,
                "--engine slurm: host %s's name resolves to the loopback address %s, which the "
                "peers on the job's other hosts cannot reach; name the network interface to listen "
                "on with --iface (e.g. eth0, ib0)",
                s->task[t].host, s->task[t].addr);
    return 0;
}

/* After the children exist: refuses an allocation with fewer tasks than started nodes, then runs a short srun
 * step in which every task reports its host and address and writes a marker file into DIR;
 * refuses (PFT_EINVAL) a DIR that some host cannot see, and hosts the peers cannot reach. */
static int slurm_place(pft_launch_t *self)
{
    pft_launch_slurm_t *s = self->engine_data;
    size_t m = 0;
    for (size_t i = 0; i < self->nn; i++)
        m += !self->ch[i].absent;
    int rc = check_tasks(self, m);
    if (rc)
        return rc;
    s->m = m;
    if (!(s->task = pft_calloc(m, sizeof *s->task)) || !(s->dir = pft_fsio_join(self->o.out_dir, "slurm")))
        return pft_err(PFT_ENOMEM, "out of memory");
    for (size_t t = 0; t < m; t++)
        s->task[t].node = -1;
    char *probe = pft_fsio_join(s->dir, "probe"), *log = pft_fsio_join(s->dir, "scontrol.log");
    rc = probe && log ? pft_fsio_mkdirs(probe) : pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0) {
        empty_dir(probe);
        read_hosts(s, log);
    }
    pft_free(probe);
    pft_free(log);
    char nonce[48];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(nonce, sizeof nonce, "%ld-%ld-%ld", (long)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    if (rc || (rc = run_probe(self, nonce)) || (rc = check_probe(self, nonce)) || (rc = check_reachable(s)))
        return rc;
    if (!self->o.quiet && !self->o.json)
        fprintf(stderr, "slurm: job %s, %zu of its %ld tasks on %zu host%s (allocation: %s); run folder %s\n",
                s->job, m, s->n_alloc, n_hosts(s), n_hosts(s) == 1 ? "" : "s", s->hosts, self->o.out_dir);
    return 0;
}

/* The host of a tcp:// endpoint into buf ("" for another transport). */
static void endpoint_host(const char *ep, char *buf, size_t cap)
{
    buf[0] = '\0';
    const char *colon = strncmp(ep, "tcp://", 6) == 0 ? strrchr(ep + 6, ':') : NULL;
    if (!colon)
        return;
    const char *h = ep + 6;
    size_t len = (size_t)(colon - h);
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']')
        h++, len -= 2;
    snprintf(buf, cap, "%.*s", (int)len, h);
}

/* 1 if an endpoint on host h can only be reached on its own machine (or names every interface). */
static int local_only(const char *h)
{
    return !*h || strncmp(h, "127.", 4) == 0 || strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0 ||
           strcmp(h, "*") == 0 || strcmp(h, "0.0.0.0") == 0;
}

/* 1 if task k runs on host h (its name, its short name, or its address). */
static int on_host(const task_t *k, const char *h)
{
    size_t short_len = strcspn(k->host, ".");
    return strcmp(k->host, h) == 0 || strcmp(k->addr, h) == 0 ||
           (strlen(h) == short_len && strncmp(k->host, h, short_len) == 0);
}

/* 1 if node i's endpoint is one the launcher may choose: none, or port_base's automatic loopback one. */
static int automatic(const pft_launch_t *self, size_t i)
{
    const pft_topo_node_t *n = pft_topo_node(self->topo, i);
    int base = pft_topo_run(self->topo)->port_base;
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", base + (int)i);
    return !n->endpoint || (base && strcmp(n->endpoint, ep) == 0);
}

/* A free task for started node i, whose endpoint is explicit: one on its host (any, on a one-host job, for a
 * local endpoint). */
static int task_for_endpoint(pft_launch_t *self, size_t i)
{
    pft_launch_slurm_t *s = self->engine_data;
    const pft_topo_node_t *n = pft_topo_node(self->topo, i);
    char h[256];
    endpoint_host(n->endpoint, h, sizeof h);
    int local = local_only(h);
    if (local && n_hosts(s) > 1)
        return pft_err(
            PFT_EINVAL,
            "node %s: its endpoint %s can only be reached on its own host, and job %s spans %zu hosts; "
            "remove it to let --engine slurm choose one",
            n->id, n->endpoint, s->job, n_hosts(s));
    unsigned char a[16];
    for (size_t t = 0; t < s->m; t++) {
        if (s->task[t].node >= 0 || !(local || on_host(&s->task[t], h)))
            continue;
        if (h[0] && strcmp(h, "*") != 0 && inet_pton(AF_INET, h, a) != 1 && inet_pton(AF_INET6, h, a) != 1)
            return pft_err(
                PFT_EINVAL,
                "node %s: its endpoint %s names its host by name, and pftnode binds an address: "
                "write tcp://%s:PORT (%s's address), or remove it to let --engine slurm choose one",
                n->id, n->endpoint, s->task[t].addr, s->task[t].host);
        s->task[t].node = (long)i;
        self->ch[i].task = (int)t;
        return 0;
    }
    return pft_err(PFT_EINVAL,
                   "node %s: its endpoint %s names a host with no free task in job %s (hosts: %s); remove it "
                   "to let --engine slurm choose one, or allocate that host",
                   n->id, n->endpoint, s->job, s->hosts);
}

/* Sets node i's endpoint to tcp://ADDR:PORT of task t: port_base + i, else 0 (the node binds a free port of
 * ADDR and reports it in its folder's endpoint file, where its predecessors read it). */
static int set_endpoint(pft_launch_t *self, size_t i, task_t *k)
{
    int base = pft_topo_run(self->topo)->port_base;
    char ep[128], id[128];
    snprintf(ep, sizeof ep, "tcp://%s:%d", k->addr, base ? base + (int)i : 0);
    snprintf(id, sizeof id, "%s", pft_topo_node(self->topo, i)->id);
    int rc = pft_topo_set_node_attr(self->topo, id, "endpoint", ep);
    pft_launch__refresh_ids(self);
    return rc;
}

/* Gives each node a task (explicit endpoints to a task on their host) and every node without an explicit
 * endpoint tcp://ADDR:PORT of its task (port_base + i when the run sets port_base, else 0: its own). */
static int slurm_endpoints(pft_launch_t *self)
{
    pft_launch_slurm_t *s = self->engine_data;
    int rc = 0;
    for (size_t i = 0; i < self->nn; i++)
        self->ch[i].task = -1;
    for (size_t i = 0; i < self->nn && rc == 0; i++) /* explicit endpoints first: they need their host */
        if (!self->ch[i].absent && !automatic(self, i))
            rc = task_for_endpoint(self, i);
    size_t t = 0, spare = 0;
    for (size_t i = 0; i < self->nn && rc == 0; i++) {
        pft_launch_child_t *c = &self->ch[i];
        if (c->absent) { /* an endpoint nobody listens on: an open port, never reported */
            if (automatic(self, i))
                rc = set_endpoint(self, i, &s->task[spare++ % s->m]);
            continue;
        }
        if (c->task < 0) {
            while (s->task[t].node >= 0)
                t++;
            s->task[t].node = (long)i;
            c->task = (int)t;
            if (automatic(self, i))
                rc = set_endpoint(self, i, &s->task[t]);
        }
        snprintf(c->host, sizeof c->host, "%s", s->task[c->task].host);
    }
    return rc;
}

/* DIR/slurm/tasks: line t is task t's expected host, its node's folder and the node's command, tab-separated
 * (a tab or newline inside a word is refused). */
static int write_tasks(pft_launch_t *self, const char *path)
{
    pft_launch_slurm_t *s = self->engine_data;
    size_t cap = 4096 * (s->m + 1), len = 0;
    char *text = pft_alloc(cap);
    int rc = text ? 0 : pft_err(PFT_ENOMEM, "out of memory");
    for (size_t t = 0; t < s->m && rc == 0; t++) {
        const pft_launch_child_t *c = &self->ch[s->task[t].node];
        const char *argv[20];
        char fd_text[16];
        pft_launch__node_argv(self, c, argv, fd_text, sizeof fd_text);
        len += (size_t)snprintf(text + len, cap - len, "%zu\t%s\t%s", t, s->task[t].host, c->dir);
        for (int a = 0; argv[a] && rc == 0; a++) {
            if (strpbrk(argv[a], "\t\n"))
                rc = pft_err(PFT_EINVAL, "--engine slurm: '%s' holds a tab or a newline", argv[a]);
            len += (size_t)snprintf(text + len, cap - len, "\t%s", argv[a]);
        }
        len += (size_t)snprintf(text + len, cap - len, "\n");
        if (len >= cap - 1)
            rc = pft_err(PFT_EINVAL, "--engine slurm: node %s's command is too long", c->id);
    }
    if (rc == 0)
        rc = pft_fsio_write_atomic(path, text, len);
    pft_free(text);
    return rc;
}

/* Starts every node not absent with one srun step (DIR/slurm/tasks lists each task's command). Returns 0, or
 * PFT_EIO when srun cannot be started. */
static int slurm_start(pft_launch_t *self)
{
    pft_launch_slurm_t *s = self->engine_data;
    char *tasks = pft_fsio_join(s->dir, "tasks"), *log = pft_fsio_join(s->dir, "srun.log");
    int rc = tasks && log ? write_tasks(self, tasks) : pft_err(PFT_ENOMEM, "out of memory");
    char ntasks[32];
    snprintf(ntasks, sizeof ntasks, "--ntasks=%zu", s->m);
    /* --kill-on-bad-exit=0: the launcher stops the others itself (gently, or not with --keep-going);
     * --wait=0: no limit on how long the others run after the first task ends */
    char *argv[] = {"srun",
                    ntasks,
                    "--mpi=none",
                    "--input=none",
                    "--kill-on-bad-exit=0",
                    "--wait=0",
                    "--job-name=pftnet",
                    s->exe,
                    "launch",
                    "--slurm-task",
                    tasks,
                    NULL,
                    NULL};
    if (s->cpus[0])
        memmove(argv + 8, argv + 7, 4 * sizeof *argv), argv[7] = s->cpus;
    if (rc == 0) {
        self->t0 = pft_fsio_now();
        s->srun = spawn(argv, -1, &s->out_fd, log);
        if (s->srun < 0)
            rc = pft_err(PFT_EIO, "--engine slurm: cannot run srun: %s", strerror(errno));
    }
    for (size_t i = 0; i < self->nn && rc == 0; i++)
        snprintf(self->ch[i].state, sizeof self->ch[i].state, "%s",
                 self->ch[i].absent ? "absent" : "started");
    for (size_t i = 0; i < self->nn && rc == 0; i++)
        self->ch[i].exited = self->ch[i].absent;
    if (rc == 0 && !self->o.quiet)
        fprintf(stderr,
                "starting %zu pftnode processes with one srun step in job %s (%s); logs in %s/<id>/node.log, "
                "srun's in %s\n",
                s->m, s->job, self->node_bin, self->o.out_dir, log);
    pft_free(tasks);
    pft_free(log);
    return rc;
}

/* A line from a task of the peers' step: a start (the step's id, for scancel) or an exit, returned. */
static int parse_task_line(pft_launch_t *self, const char *line, size_t *i, int *status, long *rss)
{
    pft_launch_slurm_t *s = self->engine_data;
    long t, kb;
    int st;
    char host[256], step[64];
    if (sscanf(line, PFT_SLURM_START_LINE " %ld %255s %63s", &t, host, step) == 3) {
        if (!s->step[0])
            snprintf(s->step, sizeof s->step, "%s", step);
        return 0;
    }
    if (sscanf(line, PFT_SLURM_EXIT_LINE " %ld %d %ld", &t, &st, &kb) != 3 || t < 0 || (size_t)t >= s->m)
        return 0;
    pft_launch_child_t *c = &self->ch[s->task[t].node];
    if (c->exited)
        return 0;
    *i = (size_t)s->task[t].node;
    *status = st;
    *rss = kb;
    return 1;
}

/* srun ended (wait status st) before any task started: its exit and the end of its log, on stderr. */
static void srun_failed(const pft_launch_slurm_t *s, int st)
{
    char *log = pft_fsio_join(s->dir, "srun.log"), tail[600];
    file_tail(log ? log : "", tail, sizeof tail);
    fprintf(stderr, "slurm: srun ended (%s %d) before any task started: %s\n",
            WIFEXITED(st) ? "exit code" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
            tail[0] ? tail : "no output");
    pft_free(log);
}

/* The next node whose task reported its exit since the last call: its index, wait status and peak
 * RSS; once srun has ended, each started node that never reported, with c->lost set. 1 if one was returned.
 */
static int slurm_next_exit(pft_launch_t *self, size_t *i, int *status, long *max_rss_kb)
{
    pft_launch_slurm_t *s = self->engine_data;
    char line[LINE_CAP];
    int r;
    while ((r = read_line(s, line, sizeof line)) == 1)
        if (parse_task_line(self, line, i, status, max_rss_kb))
            return 1;
    if (r == 0)
        return 0;
    int st;
    if (s->srun > 0) {
        if (waitpid(s->srun, &st, WNOHANG) == 0)
            return 0; /* its output ended, srun not yet */
        s->srun = -1;
        if (!s->step[0] && !s->killed) /* not one task started: say why once, from srun's own words */
            srun_failed(s, st);
    }
    for (; s->lost_next < self->nn; s->lost_next++) { /* srun ended: a node that never reported is lost */
        pft_launch_child_t *c = &self->ch[s->lost_next];
        if (c->absent || c->exited)
            continue;
        c->lost = 1;
        *i = s->lost_next++;
        *status = 255 << 8;
        *max_rss_kb = 0;
        return 1;
    }
    return 0;
}

/* SIGTERM: every running node, through `scancel --signal=TERM JOB.STEP` (pftnode stops cleanly);
 * SIGKILL: ends the step (srun killed; Slurm kills its tasks). */
static void slurm_signal(pft_launch_t *self, int sig)
{
    pft_launch_slurm_t *s = self->engine_data;
    if (s->srun <= 0 || s->killed)
        return;
    if (sig == SIGTERM && s->step[0]) {
        char *log = pft_fsio_join(s->dir, "srun.log"), out[256];
        char *argv[] = {"scancel", "--signal=TERM", s->step, NULL};
        int rc = log ? capture(argv, log, out, sizeof out) : -1;
        pft_free(log);
        if (rc == 0)
            return;
    }
    kill(s->srun, SIGKILL); /* srun ends the step: Slurm kills its tasks */
    s->killed = 1;
}

/* After the watch: waits for srun to end (it is killed after 30 s). */
static void slurm_end(pft_launch_t *self)
{
    pft_launch_slurm_t *s = self->engine_data;
    char line[LINE_CAP];
    double end = pft_fsio_now() + REAP_WAIT_S;
    while (s->out_fd >= 0 && pft_fsio_now() < end)
        if (read_line(s, line, sizeof line) == 0)
            poll(&(struct pollfd){.fd = s->out_fd, .events = POLLIN}, 1, 200);
    if (s->out_fd >= 0)
        close(s->out_fd), s->out_fd = -1;
    double left = end - pft_fsio_now();
    reap_srun(s, left > 0 ? left : 0);
}

const pft_launch_engine_t pft_launch__slurm = {
    .name = "slurm",
    .setup = slurm_new,
    .place = slurm_place,
    .endpoints = slurm_endpoints,
    .start = slurm_start,
    .next_exit = slurm_next_exit,
    .signal = slurm_signal,
    .end = slurm_end,
    .destroy = slurm_destroy,
    .outside_stop = "interrupted by Slurm: job cancelled, requeued, preempted or out of time",
};
