/* pft_launch_own: the launcher owns its run folder and its nodes. One launcher per run folder (an flock on
 * the folder itself, held for the launcher's life: no file a user might delete carries it); nodes that die
 * with the launcher (PR_SET_PDEATHSIG, set between fork and exec); and, before a --resume or --force touches
 * the folder, nodes an earlier launch left running are waited for, then stopped. */
#include "pft_launch_int.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEFTOVER_GRACE                                                                                       \
    5.0 /* seconds a node of a killed launcher gets to end by itself (it is being killed) */
#define LEFTOVER_TERM 15.0 /* then after SIGTERM (it writes its status and exits 10), before SIGKILL */
#define LEFTOVER_KILL 5.0  /* and after SIGKILL */

int pft_launch__lock_run(pft_launch_t *self, const char *dir)
{
    long holder = 0;
    int rc = pft_dirlock_take(dir, PFT_LAUNCH_LOCK, &self->run_lock, &holder);
    if (rc == PFT_EUNSUPPORTED)
        return holder > 0 ? pft_err(PFT_EINVAL,
                                    "%s is the run folder of another pftnet launch, still running (pid %ld); "
                                    "wait for it to end, stop it, or choose another --out",
                                    dir, holder)
                          : pft_err(PFT_EINVAL,
                                    "%s is the run folder of another pftnet launch, still running; "
                                    "wait for it to end, stop it, or choose another --out",
                                    dir);
    return rc;
}

void pft_launch__die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127); /* the launcher is already gone (or the guard is unavailable): start nothing */
}

/* 1 if pid runs a pftnode binary that holds folder (or its lock file) open: a node, not a reused pid. */
static int is_node_of(long pid, const char *folder)
{
    char link[64], target[PATH_MAX], lockf[PATH_MAX];
    snprintf(link, sizeof link, "/proc/%ld/exe", pid);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    if (strncmp(base ? base + 1 : target, "pftnode", 7) != 0)
        return 0;
    if (snprintf(lockf, sizeof lockf, "%s/lock", folder) >= (int)sizeof lockf)
        return 0; /* no path this long is a node's lock */
    snprintf(link, sizeof link, "/proc/%ld/fd", pid);
    DIR *d = opendir(link);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        char fdl[PATH_MAX];
        snprintf(fdl, sizeof fdl, "%s/%s", link, e->d_name);
        if ((n = readlink(fdl, target, sizeof target - 1)) > 0) {
            target[n] = '\0';
            found = strcmp(target, folder) == 0 || strcmp(target, lockf) == 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* Waits up to secs for folder's lock to be free; 1 once it is. */
static int wait_free(const char *folder, double secs)
{
    long holder;
    for (double until = pft_fsio_now() + secs;;) {
        if (!pft_dirlock_held(folder, "lock", &holder))
            return 1;
        if (pft_fsio_now() > until)
            return 0;
        usleep(20000);
    }
}

/* folder (a node's, holding its lock) is free once this returns 0: its node, left by an earlier launch, ended
 * by itself or was stopped. PFT_EINVAL when its holder is not a pftnode of this folder or will not end. */
static int free_folder(const pft_launch_t *self, const char *folder)
{
    long pid = 0;
    if (!pft_dirlock_held(folder, "lock", &pid) || wait_free(folder, LEFTOVER_GRACE))
        return 0;
    char real[PATH_MAX];
    if (!realpath(folder, real))
        snprintf(real, sizeof real, "%s", folder);
    pft_dirlock_held(folder, "lock", &pid);
    if (pid <= 0 || !is_node_of(pid, real))
        return pft_err(
            PFT_EINVAL,
            "%s is held by process %ld, not a pftnode of this run folder; stop it, or choose another "
            "--out",
            folder, pid);
    if (!self->o.quiet)
        fprintf(stderr, "%s: pftnode (pid %ld) left running by an earlier launch: stopping it\n", folder,
                pid);
    kill((pid_t)pid, SIGTERM);
    if (wait_free(folder, LEFTOVER_TERM))
        return 0;
    kill((pid_t)pid, SIGKILL);
    if (wait_free(folder, LEFTOVER_KILL))
        return 0;
    return pft_err(PFT_EINVAL, "%s: pftnode pid %ld left by an earlier launch does not end", folder, pid);
}

int pft_launch__stop_leftovers(const pft_launch_t *self, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : pft_err(PFT_EIO, "%s: cannot list: %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char *folder = pft_fsio_join(dir, e->d_name);
        struct stat st;
        if (!folder)
            rc = pft_err(PFT_ENOMEM, "out of memory");
        else if (stat(folder, &st) == 0 && S_ISDIR(st.st_mode))
            rc = free_folder(self, folder);
        pft_free(folder);
    }
    closedir(d);
    return rc;
}
