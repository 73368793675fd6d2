/* pft_fsio: durable file writes (write, fsync, rename, fsync dir), bounded reads, directories. */
#ifndef PFT_FSIO_H
#define PFT_FSIO_H

#include <stddef.h>
#include <stdint.h>

/* Writes len bytes to path atomically and durably: a temporary file in the same folder, fsync, rename over
 * path, fsync of the folder. On error path is unaltered; PFT_EIO with the path and errno text. */
int pft_fsio_write_atomic(const char *path, const void *buf, size_t len);
/* The same replacement (readers see the old or the new content, never a mix) without fsync: not durable
 * across a power cut, for files that only report (a node's status). Same errors. */
int pft_fsio_write_replace(const char *path, const void *buf, size_t len);
/* Reads a whole file of at most max bytes into a new buffer (NUL-terminated for convenience, not counted).
 * PFT_EIO if it cannot be read, PFT_ERANGE if larger than max. */
int pft_fsio_read(const char *path, size_t max, uint8_t **buf, size_t *len);
/* mkdir -p with mode 0755; PFT_EIO naming the component that failed. */
int pft_fsio_mkdirs(const char *path);
/* 1 if path exists (any type), else 0. */
int pft_fsio_exists(const char *path);
/* Joins a and b with '/', into a new string (caller frees with pft_free); NULL on failure. */
char *pft_fsio_join(const char *a, const char *b);
/* Monotonic seconds. */
double pft_fsio_now(void);

#endif
