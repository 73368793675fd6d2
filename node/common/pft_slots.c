/* pft_slots: compute slots of one machine, an flock per slot file (pft_slots.h). */
#include "pft_slots.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct pft_slots_t {
    int *fd; /* one per slot file */
    int n;
    int held; /* index of the slot this process holds, -1: none */
    int next; /* where the next try starts: nodes that wait spread over the slots */
};

/* dir/slot.K into path. */
static void slot_path(const char *dir, int k, char *path, size_t cap)
{
    snprintf(path, cap, "%s/slot.%d", dir, k);
}

int pft_slots_create(const char *dir, int n)
{
    if (n < 1 || n > PFT_SLOTS_MAX)
        return pft_err(PFT_EINVAL, "compute slots: %d is not between 1 and %d", n, PFT_SLOTS_MAX);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return pft_err(PFT_EIO, "%s: cannot make the folder: %s", dir, strerror(errno));
    for (int k = 0; k < n; k++) {
        char path[4096];
        slot_path(dir, k, path, sizeof path);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return pft_err(PFT_EIO, "%s: cannot make the slot file: %s", path, strerror(errno));
        close(fd);
    }
    return 0;
}

int pft_slots_open(const char *dir, pft_slots_t **out)
{
    *out = NULL;
    pft_slots_t *s = pft_calloc(1, sizeof *s);
    if (!s)
        return pft_err(PFT_ENOMEM, "out of memory");
    s->held = -1;
    for (int k = 0; k < PFT_SLOTS_MAX; k++) {
        char path[4096];
        slot_path(dir, k, path, sizeof path);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && k > 0)
            break;
        int *grown = fd >= 0 ? pft_realloc(s->fd, ((size_t)k + 1) * sizeof *grown) : NULL; /* k < 4096 */
        if (!grown) {
            int rc = fd < 0 ? pft_err(PFT_EIO, "compute slots: %s: %s", path, strerror(errno))
                            : pft_err(PFT_ENOMEM, "out of memory");
            if (fd >= 0)
                close(fd);
            pft_slots_destroy(&s);
            return rc;
        }
        s->fd = grown;
        s->fd[s->n++] = fd;
    }
    s->next = (int)(getpid() % s->n);
    *out = s;
    return 0;
}

int pft_slots_try(pft_slots_t *self)
{
    if (self->held >= 0)
        return 1;
    for (int i = 0; i < self->n; i++) {
        int k = (self->next + i) % self->n;
        if (flock(self->fd[k], LOCK_EX | LOCK_NB) == 0) {
            self->held = k;
            self->next = (k + 1) % self->n;
            return 1;
        }
        if (errno != EWOULDBLOCK)
            return pft_err(PFT_EIO, "compute slot %d: cannot lock: %s", k, strerror(errno));
    }
    return 0;
}

int pft_slots_held(const pft_slots_t *self)
{
    return self->held;
}

int pft_slots_count(const pft_slots_t *self)
{
    return self->n;
}

void pft_slots_give_back(pft_slots_t *self)
{
    if (self->held < 0)
        return;
    flock(self->fd[self->held], LOCK_UN);
    self->held = -1;
}

void pft_slots_destroy(pft_slots_t **self_p)
{
    pft_slots_t *s = *self_p;
    if (!s)
        return;
    pft_slots_give_back(s);
    for (int k = 0; k < s->n; k++)
        close(s->fd[k]);
    pft_free(s->fd);
    pft_free(s);
    *self_p = NULL;
}
