/* pft_fsio: the node's files are written so that a crash leaves either the old or the new version. */
#include "pft_fsio.h"

#include "pft_alloc.h"
#include "pft_error.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fsync_dir_of(const char *path)
{
    char *copy = pft_strdup(path);
    if (!copy)
        return PFT_ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    pft_free(copy);
    if (fd < 0)
        return 0; /* best effort */
    fsync(fd);
    close(fd);
    return 0;
}

static int write_replace(const char *path, const void *buf, size_t len, int durable)
{
    size_t n = strlen(path) + 32;
    char *tmp = pft_alloc(n);
    if (!tmp)
        return pft_err(PFT_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        pft_free(tmp);
        return pft_err(PFT_EIO, "%s: cannot create: %s", path, strerror(e));
    }
    const uint8_t *p = buf;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            pft_free(tmp);
            return pft_err(PFT_EIO, "%s: write failed: %s", path, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if ((durable && fsync(fd) != 0) || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        pft_free(tmp);
        return pft_err(PFT_EIO, "%s: %s failed: %s", path, durable ? "fsync" : "close", strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        pft_free(tmp);
        return pft_err(PFT_EIO, "%s: rename failed: %s", path, strerror(e));
    }
    pft_free(tmp);
    return durable ? fsync_dir_of(path) : 0;
}

int pft_fsio_write_atomic(const char *path, const void *buf, size_t len)
{
    return write_replace(path, buf, len, 1);
}

int pft_fsio_write_replace(const char *path, const void *buf, size_t len)
{
    return write_replace(path, buf, len, 0);
}

int pft_fsio_read(const char *path, size_t max, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return pft_err(PFT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return pft_err(PFT_EIO, "%s: not a regular file", path);
    }
    if ((size_t)st.st_size > max) {
        fclose(f);
        return pft_err(PFT_ERANGE, "%s: %lld bytes exceeds the limit of %zu", path, (long long)st.st_size,
                       max);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = pft_alloc(n + 1);
    if (!b) {
        fclose(f);
        return pft_err(PFT_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    if (fread(b, 1, n, f) != n) {
        fclose(f);
        pft_free(b);
        return pft_err(PFT_EIO, "%s: short read", path);
    }
    fclose(f);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int pft_fsio_mkdirs(const char *path)
{
    char *p = pft_strdup(path);
    if (!p)
        return PFT_ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                int rc = pft_err(PFT_EIO, "%s: cannot create folder: %s", p, strerror(e));
                pft_free(p);
                return rc;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    pft_free(p);
    return 0;
}

int pft_fsio_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *pft_fsio_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = pft_alloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

double pft_fsio_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
