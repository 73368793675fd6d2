/* pft_dirlock: one process per folder, an flock on the folder itself (pft_dirlock.h). */
#include "pft_dirlock.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct pft_dirlock_t {
    int dir_fd;  /* the folder, flock'ed; -1 where the file system refuses locks on folders */
    int file_fd; /* dir/name: the holder's pid, and flock'ed too */
};

/* The pid recorded in path, 0 if none. */
static long read_pid(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char buf[32] = "";
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strtol(buf, NULL, 10);
}

/* flock(fd, LOCK_EX | LOCK_NB): 0 taken, 1 held by another process, -1 refused (errno set). */
static int try_lock(int fd)
{
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    return errno == EWOULDBLOCK ? 1 : -1;
}

/* Locks dir itself into *dir_fd (-1 where the file system refuses locks on folders). 0, 1 when held, or
 * PFT_EIO. */
static int lock_folder(const char *dir, int *dir_fd)
{
    *dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0)
        return pft_err(PFT_EIO, "%s: cannot open: %s", dir, strerror(errno));
    int r = try_lock(*dir_fd);
    if (r != 0) { /* held, or no locks on folders here (the pid file's lock stands alone) */
        close(*dir_fd);
        *dir_fd = -1;
    }
    return r == 1 ? 1 : 0;
}

int pft_dirlock_take(const char *dir, const char *name, pft_dirlock_t **out, long *holder)
{
    *out = NULL;
    *holder = 0;
    char *path = pft_fsio_join(dir, name);
    pft_dirlock_t *self = pft_calloc(1, sizeof *self);
    if (!path || !self) {
        pft_free(path);
        pft_free(self);
        return pft_err(PFT_ENOMEM, "out of memory");
    }
    self->file_fd = -1;
    int rc = lock_folder(dir, &self->dir_fd), r = 0;
    if (rc == 0 && (self->file_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
        rc = pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (rc == 0 && (r = try_lock(self->file_fd)) < 0)
        rc = pft_err(PFT_EIO, "%s: cannot lock: %s", path, strerror(errno));
    if (rc == 1 || r == 1) {
        *holder = read_pid(path);
        rc = pft_err(PFT_EUNSUPPORTED, "%s is held by process %ld", dir, *holder);
    }
    if (rc == 0) {
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(self->file_fd, 0) != 0 || pwrite(self->file_fd, pid, (size_t)n, 0) != n)
            rc = pft_err(PFT_EIO, "%s: cannot record the pid: %s", path, strerror(errno));
    }
    pft_free(path);
    if (rc)
        pft_dirlock_destroy(&self);
    *out = self;
    return rc;
}

void pft_dirlock_destroy(pft_dirlock_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pft_dirlock_t *self = *self_p;
    if (self->file_fd >= 0)
        close(self->file_fd);
    if (self->dir_fd >= 0)
        close(self->dir_fd);
    pft_free(self);
    *self_p = NULL;
}

int pft_dirlock_held(const char *dir, const char *name, long *holder)
{
    *holder = 0;
    char *path = pft_fsio_join(dir, name);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), held = 0;
    if (fd >= 0) {
        held = try_lock(fd) == 1;
        close(fd);
    }
    if (!held && path && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        held = try_lock(fd) == 1; /* a file system without locks on folders */
        close(fd);
    }
    if (held && path)
        *holder = read_pid(path);
    pft_free(path);
    return held;
}
