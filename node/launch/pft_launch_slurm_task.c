/* pft_launch_slurm_task: what runs on each task of a Slurm launch (`pftnet launch --slurm-probe` in the
 * first, short srun step; `pftnet launch --slurm-task` in the peers' step), reporting to the launcher on
 * stdout. */
#define _GNU_SOURCE /* NI_MAXHOST */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_HOLD_S 300 /* a probe task exits after this even if its input never ends */
#define KILL_AFTER_S 8   /* a pftnode still running this long after SIGTERM gets SIGKILL */

/* One line on stdout in one write, so that srun never mixes two tasks' lines. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    for (ssize_t off = 0, w; off < n; off += w)
        if ((w = write(1, line + off, (size_t)(n - off))) <= 0)
            return;
}

/* This task's number in its step (SLURM_PROCID); -1 if absent or malformed. */
static long task_id(void)
{
    const char *v = getenv("SLURM_PROCID");
    char *end;
    long t = v && *v ? strtol(v, &end, 10) : -1;
    return t >= 0 && v && *end == '\0' ? t : -1;
}

/* The IPv4 address the nodes of this host listen on: iface's, else the first non-loopback address the host
 * name resolves to, else its loopback one. 0, or an error code with the reason. */
static int pick_addr(const char *host, const char *iface, char *buf, size_t cap)
{
    if (iface) {
        struct ifaddrs *ifa = NULL, *p;
        if (getifaddrs(&ifa) != 0)
            return pft_err(PFT_ENET, "getifaddrs: %s", strerror(errno));
        for (p = ifa; p; p = p->ifa_next)
            if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET && strcmp(p->ifa_name, iface) == 0)
                break;
        if (p)
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)p->ifa_addr)->sin_addr, buf, (socklen_t)cap);
        freeifaddrs(ifa);
        return p ? 0 : pft_err(PFT_ENET, "--iface %s: no such interface with an IPv4 address", iface);
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int e = getaddrinfo(host, NULL, &hints, &res);
    if (e != 0)
        return pft_err(PFT_ENET, "its name %s does not resolve (%s); name an interface with --iface", host,
                       gai_strerror(e));
    buf[0] = '\0';
    for (struct addrinfo *p = res; p; p = p->ai_next) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)p->ai_addr)->sin_addr, a, sizeof a);
        if (!buf[0] || (strncmp(buf, "127.", 4) == 0 && strncmp(a, "127.", 4) != 0))
            snprintf(buf, cap, "%s", a);
    }
    freeaddrinfo(res);
    return buf[0] ? 0 : pft_err(PFT_ENET, "its name %s has no IPv4 address", host);
}

/* The probe task's checks: an address, pftnode, the marker in dir/probe. 0, or an error code with the
 * reason. */
static int probe_checks(const char *dir, const char *nonce, const char *node_bin, const char *iface, long t,
                        const char *host, char *addr)
{
    int rc = pick_addr(host, iface, addr, 64);
    if (rc == 0 && access(node_bin, X_OK) != 0)
        rc = pft_err(PFT_EINVAL, "cannot run pftnode %s here: %s", node_bin, strerror(errno));
    char name[48], text[512];
    snprintf(name, sizeof name, "probe/%ld", t);
    char *marker = pft_fsio_join(dir, name);
    snprintf(text, sizeof text, "%s %s %s\n", nonce, host, addr);
    if (rc == 0 && !marker)
        rc = pft_err(PFT_ENOMEM, "out of memory");
    if (rc == 0 && (rc = pft_fsio_write_replace(marker, text, strlen(text))))
        pft_err_wrap(rc, "cannot write its marker");
    pft_free(marker);
    return rc;
}

/* `--slurm-probe DIR NONCE PFTNODE IFACE|-`: reports this task's host and address after writing
 * DIR/probe/<task>, then waits for stdin to end (the launcher reads every task's line meanwhile). The port
 * is not probed: each pftnode binds a free one itself and reports it. */
static int probe(char **argv)
{
    long t = task_id();
    char host[256] = "?", addr[64] = "";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, " \t\n")] = '\0';
    if (t < 0) {
        fprintf(stderr, "pftnet launch --slurm-probe: run by the launcher's srun (SLURM_PROCID)\n");
        return 2;
    }
    const char *iface = strcmp(argv[3], "-") == 0 ? NULL : argv[3];
    if (probe_checks(argv[0], argv[1], argv[2], iface, t, host, addr) == 0)
        say(PFT_SLURM_PROBE_LINE " %ld ok %s %s", t, host, addr);
    else
        say(PFT_SLURM_PROBE_LINE " %ld error %s %s", t, host, pft_errmsg());
    char c;
    while (poll(&(struct pollfd){.fd = 0, .events = POLLIN}, 1, PROBE_HOLD_S * 1000) > 0 &&
           read(0, &c, 1) > 0)
        ;
    return 0;
}

/* Task t's line of the tasks file, split at tabs into words (pointing into text); the number of words, or 0.
 */
static int task_line(char *text, long t, char **w, int cap)
{
    char *line = text;
    for (long i = 0; i < t && line; i++)
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    if (!line || !*line)
        return 0;
    line[strcspn(line, "\n")] = '\0';
    int n = 0;
    for (char *p = line; p && n < cap - 1; n++) {
        w[n] = p;
        p = strchr(p, '\t');
        if (p)
            *p++ = '\0';
    }
    w[n] = NULL;
    return n;
}

static volatile sig_atomic_t s_stop, s_alarm;

static void on_stop(int sig)
{
    (void)sig;
    s_stop = 1;
}

static void on_alarm(int sig)
{
    (void)sig;
    s_alarm = 1;
}

/* Starts argv (pftnode) with its output appended to dir/node.log; its pid, or -1. */
static pid_t start_node(char **argv, const char *dir)
{
    char *log = pft_fsio_join(dir, "node.log");
    if (!log)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY), fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0)
            dup2(in, 0);
        if (fd >= 0)
            dup2(fd, 1), dup2(fd, 2);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    pft_free(log);
    return pid;
}

/* Waits for pftnode, forwarding SIGTERM/SIGINT/SIGHUP to it as SIGTERM (pftnode stops cleanly), and SIGKILL
 * KILL_AFTER_S later if it has not. Its wait status and peak RSS. */
static int wait_node(pid_t pid, long *rss)
{
    int st = 0, forwarded = 0;
    struct rusage ru = {0};
    for (;;) {
        if (s_stop && !forwarded) {
            kill(pid, SIGTERM);
            alarm(KILL_AFTER_S);
            forwarded = 1;
        }
        if (s_alarm)
            kill(pid, SIGKILL);
        if (wait4(pid, &st, 0, &ru) == pid)
            break;
        if (errno != EINTR)
            return 127 << 8;
    }
    *rss = ru.ru_maxrss;
    return st;
}

/* The words of a tasks-file line: task, expected host, node folder, then pftnode's command. */
#define WORD_HOST 1
#define WORD_DIR 2
#define WORD_ARGV 3

/* `--slurm-task TASKS`: runs the pftnode of this task's line of TASKS, reports its start (with the step's id)
 * and its wait status and peak RSS. Exits with pftnode's code (128 + signal when killed). */
static int task(const char *tasks_path)
{
    long t = task_id();
    uint8_t *text = NULL;
    size_t len = 0;
    char *w[64], host[256] = "?";
    gethostname(host, sizeof host - 1);
    int n = t >= 0 && pft_fsio_read(tasks_path, 64u << 20, &text, &len) == 0
                ? task_line((char *)text, t, w, 64)
                : 0;
    if (n <= WORD_ARGV) {
        fprintf(stderr, "pftnet launch --slurm-task: no line for task %ld in %s\n", t, tasks_path);
        say(PFT_SLURM_EXIT_LINE " %ld %d 0", t, 126 << 8);
        pft_free(text);
        return 126;
    }
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    say(PFT_SLURM_START_LINE " %ld %s %s.%s", t, host, job ? job : "?", step ? step : "?");
    if (strcmp(host, w[WORD_HOST]) != 0) {
        fprintf(stderr, "task %ld runs on %s, and the probe step had it on %s\n", t, host, w[WORD_HOST]);
        say(PFT_SLURM_EXIT_LINE " %ld %d 0", t, 126 << 8);
        pft_free(text);
        return 126;
    }
    if (!getenv("OPENBLAS_NUM_THREADS")) /* one BLAS thread per CPU of the task (one, unless -c) */
        setenv("OPENBLAS_NUM_THREADS", getenv("SLURM_CPUS_PER_TASK") ? getenv("SLURM_CPUS_PER_TASK") : "1",
               1);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    long rss = 0;
    pid_t pid = start_node(w + WORD_ARGV, w[WORD_DIR]);
    int st = pid > 0 ? wait_node(pid, &rss) : 127 << 8;
    say(PFT_SLURM_EXIT_LINE " %ld %d %ld", t, st, rss);
    pft_free(text);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int pft_launch_slurm_task_main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--slurm-probe") == 0)
        return probe(argv + 2);
    if (argc == 3 && strcmp(argv[1], "--slurm-task") == 0)
        return task(argv[2]);
    fprintf(stderr, "pftnet launch %s: internal to --engine slurm (run by its srun steps)\n", argv[1]);
    return 2;
}
