/* pft_npy_rows: a 2-D .npy feature file read by ranges of rows (pread into a small staging buffer). */
#include "pft_npy_rows.h"

#include "pft_alloc.h"
#include "pft_error.h"
#include "pft_npy_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

struct pft_npy_rows_t {
    int fd;
    pft_npy_t a;
    char *path;
    uint8_t *stage; /* raw bytes of one read, grown to the largest range asked for */
    size_t stage_cap;
};

int pft_npy_rows_open(const char *path, pft_npy_rows_t **out)
{
    *out = NULL;
    pft_npy_rows_t *r = pft_calloc(1, sizeof *r);
    if (!r)
        return pft_err(PFT_ENOMEM, "%s: out of memory", path);
    r->fd = -1;
    int rc = pft_npy__open(path, &r->a, &r->fd);
    if (rc == 0 && r->a.ndim != 2)
        rc = pft_err(PFT_EFORMAT, "%s: expected a 2-D array (rows × features), got %d-D", path, r->a.ndim);
    else if (rc == 0 && (r->a.shape[0] == 0 || r->a.shape[1] == 0))
        rc = pft_err(PFT_EFORMAT, "%s: empty feature matrix (%" PRId64 "×%" PRId64 ")", path, r->a.shape[0],
                     r->a.shape[1]);
    else if (rc == 0 && (r->a.shape[0] > INT_MAX || r->a.shape[1] > INT_MAX))
        rc = pft_err(PFT_EFORMAT, "%s: %" PRId64 "×%" PRId64 " is too large", path, r->a.shape[0],
                     r->a.shape[1]);
    if (rc == 0 && !(r->path = pft_strdup(path)))
        rc = pft_err(PFT_ENOMEM, "%s: out of memory", path);
    if (rc) {
        pft_npy_rows_destroy(&r);
        return rc;
    }
    *out = r;
    return 0;
}

void pft_npy_rows_destroy(pft_npy_rows_t **self_p)
{
    pft_npy_rows_t *r = *self_p;
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    pft_free(r->path);
    pft_free(r->stage);
    pft_free(r);
    *self_p = NULL;
}

int pft_npy_rows_n(const pft_npy_rows_t *self)
{
    return (int)self->a.shape[0];
}

int pft_npy_rows_cols(const pft_npy_rows_t *self)
{
    return (int)self->a.shape[1];
}

/* Reads exactly len bytes at off (PFT_EFORMAT if the file ends first: it shrank since it was opened). */
static int pread_full(const pft_npy_rows_t *r, uint8_t *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t k = pread(r->fd, buf, len, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return pft_err(PFT_EIO, "%s: read failed: %s", r->path, strerror(errno));
        if (k == 0)
            return pft_err(PFT_EFORMAT, "%s: truncated while reading (file changed?)", r->path);
        buf += k;
        len -= (size_t)k;
        off += k;
    }
    return 0;
}

int pft_npy_rows_read(pft_npy_rows_t *self, int row0, int n, float *out)
{
    if (row0 < 0 || n < 0 || (int64_t)row0 + n > self->a.shape[0])
        return pft_err(PFT_EINVAL, "%s: rows [%d, %d) outside its %" PRId64 " rows", self->path, row0,
                       row0 + n, self->a.shape[0]);
    size_t row_bytes = (size_t)self->a.shape[1] * pft_npy_itemsize(self->a.dtype);
    size_t len = row_bytes * (size_t)n;
    if (len > self->stage_cap) {
        uint8_t *p = pft_realloc(self->stage, len);
        if (!p)
            return pft_err(PFT_ENOMEM, "%s: out of memory for %d rows", self->path, n);
        self->stage = p;
        self->stage_cap = len;
    }
    off_t off = (off_t)(self->a.header_len + row_bytes * (size_t)row0);
    int rc = pread_full(self, self->stage, len, off);
    if (rc)
        return rc;
    return pft_npy__convert_f32(&self->a, self->stage, (size_t)n * (size_t)self->a.shape[1], out,
                                (int64_t)row0 * self->a.shape[1], self->path);
}
